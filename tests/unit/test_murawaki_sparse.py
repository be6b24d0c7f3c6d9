"""The global model's sparse layout (``GlobalPA(layout="sparse")``, issue 33).

The sparse layout stores ``W`` (and ``Wa``) as CSR matrices holding only the weights of the support:
(feature f, edge e) with f in a training document whose gold tree holds e (added from the batch at
the start of every epoch, as zeros when missing); the others are zero and stay zero. The
reference is the numpy epoch on a dense ``W`` with the support as a dense mask (the minus update
and ``||Delta||^2`` restricted to it), run with ``sparkhc.kernels.ENABLED = False``: the compiled
pool epoch agrees with it to float rounding, its stored pattern is exactly the support, its
scores are exactly those of the dense weights, and the state mixes, saves and loads like any.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from sparkhc import kernels
from sparkhc.errors import ConfigError, ModelError
from sparkhc.models import murawaki
from sparkhc.models.base import StateSum, combine_states
from sparkhc.models.murawaki import GlobalPA
from sparkhc.persistence import load_model, save_model, state_from_bytes, state_to_bytes
from tests.unit.test_kernels import make_batch, random_taxonomy

V = 400  # features; each document has about 10, so most (feature, edge) pairs are never written

CONFIGS = [
    {},
    {"bias": 0.5, "normalize": "l2"},
    {"branching": True, "update": "cost_augmented", "margin_rare": 0.5, "bias": 0.3},
    {"average": True, "bias": 1.0, "branching": True},
    {"pa": "II", "average": True, "update": "cost_augmented"},
    {"dtype": "float64", "average": True, "bias": 0.3},
]


def _problem(seed: int = 0, n_nodes: int = 40, n_docs: int = 150):
    rng = np.random.default_rng(seed)
    tax = random_taxonomy(n_nodes, rng, wide=bool(seed % 2))
    return tax, make_batch(tax, n_docs, V, rng)


def _train(tax, batch, layout: str, epochs: int = 4, **params):
    model = GlobalPA(tax, V, layout=layout, **params)
    counters = [model.partial_fit(batch, seed=7, epoch=e) for e in range(epochs)]
    return model, counters


def _dense(a):
    return a.toarray() if sp.issparse(a) else a


def _support(model, batch) -> np.ndarray:
    """(feature, edge) of every training document's features and gold tree, computed here."""
    X = model._prepare(batch)
    mask = np.zeros((X.shape[1], model.taxonomy.n_edges), dtype=bool)
    for i, labels in enumerate(batch.labels):
        nodes = set()
        for lab in labels:
            n = model.taxonomy.id(lab)
            while n != 0:
                nodes.add(n)
                n = model.taxonomy.parent[n]
        fi = X.indices[X.indptr[i] : X.indptr[i + 1]]
        mask[np.ix_(fi, np.array(sorted(nodes)) - 1)] = True
    return mask


def _assert_close(got, ref, batch, tol, pattern=True):
    gs, rs = got.get_state(), ref.get_state()
    assert sorted(gs.arrays) == sorted(rs.arrays)
    for name, arr in rs.arrays.items():
        assert sp.issparse(arr) == (name in ("W", "Wa")) == sp.issparse(gs.arrays[name])
        assert gs.arrays[name].dtype == arr.dtype
        np.testing.assert_allclose(_dense(gs.arrays[name]), _dense(arr), rtol=tol, atol=tol, err_msg=name)
    if pattern and sp.issparse(rs.arrays["W"]):  # the same stored entries
        np.testing.assert_array_equal(gs.arrays["W"].indptr, rs.arrays["W"].indptr)
        np.testing.assert_array_equal(gs.arrays["W"].indices, rs.arrays["W"].indices)
    assert got.predict(batch) == ref.predict(batch)


needs_numba = pytest.mark.skipif(not kernels.HAVE_NUMBA, reason="numba is not installed (optional extra 'fast')")


@needs_numba
@pytest.mark.parametrize("params", CONFIGS)
@pytest.mark.parametrize("seed", [0, 1])
def test_sparse_epochs_equal_the_masked_dense_reference(reference, params, seed):
    tax, batch = _problem(seed)
    got, gc = _train(tax, batch, "sparse", **params)
    ref, rc = reference(lambda: _train(tax, batch, "sparse", **params))
    tol = 1e-6 if params.get("dtype", "float32") == "float32" else 1e-12
    _assert_close(got, ref, batch, tol)
    for a, b in zip(gc, rc, strict=True):
        assert a.keys() == b.keys()
        for k in a:
            assert a[k] == pytest.approx(b[k], rel=1e-6, abs=1e-9), k
    assert gc[0]["updates"] > 0
    W = got.get_state().arrays["W"]
    # the stored entries are exactly the support: memory follows the documents, not features x edges
    np.testing.assert_array_equal(_pattern(W), _support(got, batch))
    assert W.nnz < 0.5 * W.shape[0] * W.shape[1]
    assert W.has_sorted_indices and all(np.all(np.diff(W.indices[W.indptr[f] : W.indptr[f + 1]]) > 0)
                                        for f in range(W.shape[0]))
    if "Wa" in got.get_state().arrays:
        Wa = got.get_state().arrays["Wa"]
        np.testing.assert_array_equal(Wa.indptr, W.indptr)
        np.testing.assert_array_equal(Wa.indices, W.indices)
    # scores: exactly those of the dense weights
    X = got._prepare(batch)
    np.testing.assert_array_equal(got.edge_scores_of(batch), np.asarray(X @ got.averaged_arrays()["W"].toarray(),
                                                                        dtype=np.float64))
    # touched rows: every row the epoch wrote a value in (the support's zeros need no delta)
    got2 = GlobalPA(tax, V, layout="sparse", **params)
    got2.partial_fit(batch, seed=7, epoch=0)
    assert got2.touched_rows_ is not None
    W2 = got2.get_state().arrays["W"].copy()
    W2.eliminate_zeros()
    assert np.all(got2.touched_rows_[np.diff(W2.indptr) > 0])


def _pattern(W: sp.csr_matrix) -> np.ndarray:
    mask = np.zeros(W.shape, dtype=bool)
    mask[np.repeat(np.arange(W.shape[0]), np.diff(W.indptr)), W.indices] = True
    return mask


def test_a_full_support_is_the_dense_model():
    """When every document holds every feature and the gold trees cover every edge, the support is
    everything: the sparse model is the dense one (to the rounding of ||Delta||^2's sum)."""
    tax, batch = _problem(3, n_nodes=12, n_docs=60)
    X = np.random.default_rng(0).random((60, 8)).astype(np.float32) + 0.1
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    full = batch.__class__(sp.csr_matrix(X), batch.doc_ids, [[tax.names[i] for i in np.flatnonzero(
        [len(k) == 0 for k in tax.children])]] + batch.labels[1:])
    a = GlobalPA(tax, 8, layout="sparse", branching=True).fit(full)
    b = GlobalPA(tax, 8, layout="dense", branching=True).fit(full)
    assert a.get_state().arrays["W"].nnz == 8 * tax.n_edges
    np.testing.assert_allclose(a.get_state().arrays["W"].toarray(), b.get_state().arrays["W"], rtol=1e-5, atol=1e-6)
    assert a.predict(full) == b.predict(full)


@needs_numba
def test_pool_growth_from_a_full_state(reference):
    """A loaded state (rows full) whose rows and pool grow many times: a warm start on new documents."""
    tax, batch = _problem(4, n_nodes=120, n_docs=300)
    first, rest = batch.subset(np.arange(100)), batch.subset(np.arange(100, 300))

    def run():
        m = GlobalPA(tax, V, layout="sparse", branching=True, average=True)
        m.partial_fit(first, seed=7, epoch=0)
        m.set_state(state_from_bytes(state_to_bytes(m.get_state())))
        return m, [m.partial_fit(rest, seed=7, epoch=e) for e in range(1, 4)]

    got, gc = run()
    ref, rc = reference(run)
    _assert_close(got, ref, batch, 1e-6)
    assert got.get_state().arrays["W"].nnz > _support(got, first).sum()


def _dense_twin(model):
    """A dense-layout model holding the same weights as the sparse ``model``."""
    twin = GlobalPA(model.taxonomy, model.n_features, **{**model.params, "layout": "dense"})
    st = model.get_state().copy()
    twin.set_state(type(st)({k: _dense(v) for k, v in st.arrays.items()}, st.counters, st.combine))
    return twin


def test_save_load_and_mixing(tmp_path):
    tax, batch = _problem(5)
    sm, _ = _train(tax, batch, "sparse", epochs=2, average=True, bias=0.3, branching=True)
    save_model(tmp_path / "m", sm)
    back, meta = load_model(tmp_path / "m")
    assert meta["params"]["layout"] == "sparse"
    assert sp.issparse(back.get_state().arrays["W"])
    _assert_close(back, sm, batch, 0.0)
    assert back.model_size() == sm.model_size() == _dense_twin(sm).model_size()
    assert back.decode(batch)[1].tobytes() == _dense_twin(sm).decode(batch)[1].tobytes()
    # parameter mixing: the mean of shard states of different patterns (the union) is the mean of
    # their dense weights; one shard's mix is its state exactly
    shards = []
    for h in (batch.subset(np.arange(0, 75)), batch.subset(np.arange(75, 150))):
        a = GlobalPA(tax, V, **back.params)
        a.set_state(back.get_state().copy())
        a.partial_fit(h, seed=1, epoch=2)
        shards.append(a.get_state())
    assert shards[0].arrays["W"].nnz == shards[1].arrays["W"].nnz  # the base's support: the whole batch's
    fresh = []
    for h in (batch.subset(np.arange(0, 75)), batch.subset(np.arange(75, 150))):
        a = GlobalPA(tax, V, **back.params)
        a.partial_fit(h, seed=1, epoch=0)
        fresh.append(a.get_state())
    assert fresh[0].arrays["W"].nnz != fresh[1].arrays["W"].nnz  # each shard's own support
    shards += fresh
    mixed = combine_states(shards)
    dense = combine_states([type(st)({k: _dense(v) for k, v in st.arrays.items()}, st.counters) for st in shards])
    for k in dense.arrays:
        assert sp.issparse(mixed.arrays[k]) == (k in ("W", "Wa"))
        np.testing.assert_array_equal(_dense(mixed.arrays[k]), dense.arrays[k], err_msg=k)
        assert mixed.arrays[k].dtype == dense.arrays[k].dtype
    one = StateSum().add(shards[0]).result()
    for k, v in shards[0].arrays.items():
        np.testing.assert_array_equal(_dense(one.arrays[k]), _dense(v))
    m = GlobalPA(tax, V, **back.params).set_state(mixed)
    m.partial_fit(batch, seed=1, epoch=3)  # trains on from a mixed state (Wa on W's pattern)


def test_shift_edges_and_training_after_it():
    tax, batch = _problem(6)
    sm, _ = _train(tax, batch, "sparse", epochs=2, bias=0.5, average=True, branching=True)
    dm = _dense_twin(sm)
    off = np.random.default_rng(0).normal(size=tax.n_edges)
    sm.shift_edges(off)
    dm.shift_edges(off)
    for k, v in dm.get_state().arrays.items():
        np.testing.assert_array_equal(_dense(sm.get_state().arrays[k]), v, err_msg=k)
    np.testing.assert_array_equal(sm.edge_scores_of(batch), dm.edge_scores_of(batch))
    assert sm.predict(batch) == dm.predict(batch)
    W = sm.get_state().arrays["W"]
    assert np.diff(W.indptr)[V] == tax.n_edges  # the bias row holds every edge
    assert not np.array_equal(W.indptr, sm.get_state().arrays["Wa"].indptr)
    sm.partial_fit(batch, seed=7, epoch=2)  # Wa joins W's new pattern first
    W, Wa = sm.get_state().arrays["W"], sm.get_state().arrays["Wa"]
    np.testing.assert_array_equal(W.indptr, Wa.indptr)
    np.testing.assert_array_equal(W.indices, Wa.indices)


def test_layout_auto_and_validation(monkeypatch):
    tax, batch = _problem(0, n_nodes=12, n_docs=20)
    assert not sp.issparse(GlobalPA(tax, V, layout="auto").init_state().arrays["W"])
    monkeypatch.setattr(murawaki, "AUTO_SPARSE_BYTES", 1000)
    st = GlobalPA(tax, V, layout="auto", average=True).init_state()
    assert sp.issparse(st.arrays["W"]) and sp.issparse(st.arrays["Wa"]) and st.arrays["W"].nnz == 0
    with pytest.raises(ConfigError, match="layout"):
        GlobalPA(tax, V, layout="hashed").init_state()


def test_dense_weights_that_cannot_fit_fail_in_one_line_before_allocating(monkeypatch):
    tax, _ = _problem(0, n_nodes=12, n_docs=20)
    monkeypatch.setattr(murawaki, "physical_memory", lambda: 1 << 10)
    with pytest.raises(ModelError) as e:
        GlobalPA(tax, V, bias=0.3).init_state()
    msg = str(e.value)
    assert "\n" not in msg and f"({V + 1}, {tax.n_edges})" in msg and 'model.global.layout = "sparse"' in msg
    assert sp.issparse(GlobalPA(tax, V, bias=0.3, layout="sparse").init_state().arrays["W"])


def test_parameter_mixing_on_the_driver_engine(tmp_path):
    """The product's mixing (the driver engine: row-sparse deltas of CSR arrays): one shard equals
    serial training; two shards resumed from a checkpoint equal the uninterrupted training."""
    from sparkhc.spark.mixing.driver import train_on_driver
    from sparkhc.spark.mixing.settings import MixingSettings

    tax, batch = _problem(7)
    params = {"layout": "sparse", "average": True, "bias": 0.3, "branching": True}

    def fresh():
        m = GlobalPA(tax, V, **params)
        return m.set_state(m.init_state())

    one = fresh()
    train_on_driver(one, batch, MixingSettings(epochs=3, shards=1, seed=0))
    order = np.argsort(np.asarray([str(d) for d in batch.doc_ids]), kind="stable")
    serial = GlobalPA(tax, V, **params).fit(batch.subset(order), epochs=3, seed=0)
    _assert_close(one, serial, batch, 0.0, pattern=False)  # mixing drops the zero entries

    full = fresh()
    train_on_driver(full, batch, MixingSettings(epochs=4, shards=2, seed=0), threads=2)
    ck = {"checkpoint_dir": str(tmp_path / "ck")}
    train_on_driver(fresh(), batch, MixingSettings(epochs=2, shards=2, seed=0, **ck), threads=2)
    resumed = fresh()
    from sparkhc.spark.mixing.checkpoints import Checkpoint

    last = Checkpoint.of(MixingSettings(epochs=4, shards=2, seed=0, **ck)).load(resumed, epochs=4)
    assert last == 1 and sp.issparse(resumed.get_state().arrays["W"])
    train_on_driver(resumed, batch, MixingSettings(epochs=4, shards=2, seed=0, **ck), start_epoch=2, threads=2)
    for k, v in full.get_state().arrays.items():
        np.testing.assert_array_equal(_dense(resumed.get_state().arrays[k]), _dense(v), err_msg=k)
