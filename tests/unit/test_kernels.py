"""The compiled kernels (sparkhc.kernels) against the numpy reference on random taxonomies.

Each test runs the same computation twice, once with the kernels dispatched and once with
``sparkhc.kernels.ENABLED = False`` (the numpy code of sparkhc.decoding / sparkhc.models.murawaki),
and compares: selections and chosen branchings exactly, scores and weights to float rounding.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from sparkhc import kernels
from sparkhc.batch import SparseBatch
from sparkhc.decoding import dp_solve, dp_solve_one, tree_index
from sparkhc.models.murawaki import FlatPA, GlobalPA, TreePA
from sparkhc.taxonomy import Taxonomy

pytestmark = pytest.mark.skipif(not kernels.HAVE_NUMBA, reason="numba is not installed (optional extra 'fast')")


def random_taxonomy(n_nodes: int, rng: np.random.Generator, wide: bool = False) -> Taxonomy:
    """Random rooted tree; ``wide`` favours a few high fan-out nodes (k > R + 1 branchings)."""
    names = ["ROOT"]
    edges = []
    for i in range(1, n_nodes):
        hi = min(len(names), 4) if wide else len(names)
        p = names[int(rng.integers(0, hi))]
        c = f"n{i}"
        edges.append((p, c))
        names.append(c)
    return Taxonomy.from_edges(edges)


CASES = [(seed, n, wide) for seed in range(6) for n, wide in ((4, False), (25, False), (40, True), (120, False))]


@pytest.mark.parametrize("seed,n_nodes,wide", CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("branching", [False, True])
def test_dp_batch_equals_reference(reference, seed, n_nodes, wide, dtype, branching):
    rng = np.random.default_rng(seed)
    idx = tree_index(random_taxonomy(n_nodes, rng, wide))
    S = rng.normal(size=(30, idx.n_edges)).astype(dtype)
    S[:5] -= 3.0  # documents with no positive offer anywhere
    bf = rng.normal(scale=0.5, size=(idx.n_nodes + 1, 4)).astype(dtype) if branching else None
    got = dp_solve(idx, S, bf=bf, R=3)
    ref = reference(lambda: dp_solve(idx, S, bf=bf, R=3))
    np.testing.assert_array_equal(got.selected, ref.selected)
    np.testing.assert_allclose(got.score, ref.score, rtol=1e-6, atol=1e-6)
    if branching:
        np.testing.assert_array_equal(got.k, ref.k)
    else:
        assert got.k is None and ref.k is None
    for i in range(0, 30, 7):
        a = dp_solve_one(idx, S[i], bf, 3)
        b = reference(lambda i=i: dp_solve_one(idx, S[i], bf, 3))
        np.testing.assert_array_equal(a[0], b[0])
        assert a[1] == pytest.approx(b[1], rel=1e-12, abs=1e-12)
        if branching:
            np.testing.assert_array_equal(a[2], b[2])
        # one document agrees with the batch path
        np.testing.assert_array_equal(a[0], got.selected[i])


def test_dp_ties_take_the_first_best_child_and_the_smallest_k(reference):
    tax = Taxonomy.from_edges([("R", "A"), ("R", "B"), ("R", "C"), ("A", "A1"), ("A", "A2")])
    idx = tree_index(tax)
    S = np.zeros((3, idx.n_edges), dtype=np.float32)
    S[1] = -1.0
    S[2] = 1.0
    bf = np.zeros((idx.n_nodes + 1, 4), dtype=np.float32)
    for b in (None, bf):
        got = dp_solve(idx, S, bf=b)
        ref = reference(lambda b=b: dp_solve(idx, S, bf=b))
        np.testing.assert_array_equal(got.selected, ref.selected)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dp_ties_at_the_last_pick_with_extra_offers(reference, seed, dtype):
    """Branching DP on wide nodes whose offers take a few values only: many positive offers tie
    with the last of the R + 1 picks, so which children are picks, which are the extra positive
    offers summed beyond them (k > R + 1) and which are selected rest on the tie rule (value, then
    id). Branching weights favouring k > R + 1 on some nodes and small k on others."""
    rng = np.random.default_rng(100 + seed)
    idx = tree_index(random_taxonomy(60, rng, wide=True))
    S = rng.choice(np.array([-1.0, -0.5, 0.5, 1.0]), p=[0.4, 0.3, 0.2, 0.1], size=(40, idx.n_edges)).astype(dtype)
    bf = rng.normal(scale=0.5, size=(idx.n_nodes + 1, 4)).astype(dtype)
    bf[::2, 3] += 3.0  # every other node: the k > R + 1 branch pays; on the others it costs
    bf[1::2, 3] -= 3.0
    got = dp_solve(idx, S, bf=bf, R=3)
    ref = reference(lambda: dp_solve(idx, S, bf=bf, R=3))
    np.testing.assert_array_equal(got.selected, ref.selected)
    np.testing.assert_array_equal(got.k, ref.k)
    np.testing.assert_allclose(got.score, ref.score, rtol=1e-6, atol=1e-6)
    assert (got.k > 4).any() and ((got.k > 0) & (got.k <= 4)).any()  # both branches were taken


def _two_pass_node(o: np.ndarray, B: np.ndarray, R: int = 3) -> tuple[int, np.float32]:
    """The branching DP of one node over the float32 offers ``o`` of its children in the plain
    two-pass form, scalar by scalar in float32 (``B[j]``: the branching weight of taking j + 1
    children, ``B[R]`` of more than R): the picks' running sum, then the positive offers beyond
    them summed in child order. Returns (the chosen j, the node's value)."""
    f32 = np.float32
    picks = sorted(range(len(o)), key=lambda c: (-float(o[c]), c))[: R + 1]
    cum, best, jbest = f32(0), f32(0), -1
    for j, c in enumerate(picks):
        cum = f32(cum + o[c])
        if j < R and (jbest < 0 or f32(cum + B[j]) > best):
            best, jbest = f32(cum + B[j]), j
    extra = f32(0)
    for c in range(len(o)):
        if c not in picks and o[c] > 0:
            extra = f32(extra + o[c])
    cand = f32(f32(cum + extra) + B[R])
    return (R, cand) if cand > best else (jbest, best)


def test_dp_more_than_r_children_wins_by_float32_rounding():
    """The "more than R children" option is summed in child order only when a float64 bound says
    it may win (kernels._dp_up). Here it wins by the float32 rounding of its sum alone: its exact
    value is at most the best other option's, its float32 value above it. The kernel must take it,
    as the plain two-pass DP does (a bound without its rounding margin would skip it)."""
    f32 = np.float32
    k, R = 12, 3
    idx = tree_index(Taxonomy.from_edges([("ROOT", f"c{i}") for i in range(k)]))
    rng = np.random.default_rng(1)
    rows, bfs = [], []
    while len(rows) < 8:
        o = (rng.random(k) * 2 + 0.01).astype(f32)
        picks = sorted(range(k), key=lambda c: (-float(o[c]), c))[: R + 1]
        cum = f32(0)
        for c in picks:
            cum = f32(cum + o[c])
        extra, exact = f32(0), 0.0
        for c in range(k):
            if c not in picks:
                extra, exact = f32(extra + o[c]), exact + float(o[c])
        y, top = f32(cum + extra), o[picks[0]]
        b = f32(float(top) - float(y))  # the smallest float32 b with y + b above the top offer
        while f32(y + b) <= top:
            b = np.nextafter(b, f32(np.inf))
        while f32(y + np.nextafter(b, f32(-np.inf))) > top:
            b = np.nextafter(b, f32(-np.inf))
        if float(cum) + exact + float(b) <= float(top):  # exact: no better than one child
            B = np.array([0.0, -100.0, -100.0, b], dtype=f32)
            assert _two_pass_node(o, B) == (R, f32(y + b))  # float32 rounding makes it win
            rows.append(o)
            bfs.append(B)
    for o, B in zip(rows, bfs, strict=True):
        bf = np.zeros((idx.n_nodes + 1, R + 1), dtype=f32)
        bf[0] = B  # the root's own weights; the shared row stays zero
        got = dp_solve(idx, o[None, :].copy(), bf=bf, R=R)
        assert got.selected[0].all()  # every child: the option "more than R"
        assert got.k[0, 0] == k
        assert f32(got.score[0]) == _two_pass_node(o, B)[1]


def make_batch(tax: Taxonomy, n_docs: int, n_features: int, rng: np.random.Generator, dtype=np.float32):
    leaves = [tax.names[i] for i in np.flatnonzero([len(k) == 0 for k in tax.children])]
    # leaf-specific words make the problem learnable, so that the weights grow over epochs
    sig = {leaf: rng.choice(n_features, size=4, replace=False) for leaf in leaves}
    rows, cols, vals, labels = [], [], [], []
    for i in range(n_docs):
        m = list(rng.choice(leaves, size=int(rng.integers(1, 3)), replace=False))
        words = set(rng.choice(n_features, size=6, replace=False).tolist())
        for leaf in m:
            words |= set(sig[leaf][:3].tolist())
        w = np.array(sorted(words))
        v = rng.random(w.size) + 0.1
        v /= np.linalg.norm(v)
        rows += [i] * w.size
        cols += w.tolist()
        vals += v.tolist()
        labels.append([str(x) for x in m])
    X = sp.csr_matrix((np.array(vals, dtype=dtype), (rows, cols)), shape=(n_docs, n_features))
    return SparseBatch(X, np.array([f"d{i}" for i in range(n_docs)]), labels)


def _run(cls, params, tax, batch, n_features, epochs):
    model = cls(tax, n_features, **params)
    counters = [model.partial_fit(batch, seed=3, epoch=e) for e in range(epochs)]
    return model, counters


@pytest.mark.parametrize("seed,n_nodes,wide", [(0, 12, False), (1, 40, True), (2, 80, False)])
@pytest.mark.parametrize("branching", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("update,pa", [("prediction", "I"), ("cost_augmented", "I"), ("prediction", "II"),
                                       ("cost_augmented", "II")])
def test_gt_epochs_equal_reference(reference, seed, n_nodes, wide, branching, dtype, update, pa):
    rng = np.random.default_rng(100 + seed)
    tax = random_taxonomy(n_nodes, rng, wide)
    batch = make_batch(tax, 80, 60, rng)
    params: dict = {"branching": branching, "dtype": dtype, "update": update, "pa": pa}
    if pa == "II":
        params["C"] = 0.2  # 1 / (2C) = 2.5 dominates ||Delta||^2 (unit-norm documents): PA-II != PA-I
    if update == "cost_augmented":
        params.update(margin=0.5, bias=0.3)
    got, gc = _run(GlobalPA, params, tax, batch, 60, 3)
    ref, rc = reference(lambda: _run(GlobalPA, params, tax, batch, 60, 3))
    tol = 1e-6 if dtype == "float32" else 1e-12
    for name, arr in ref.get_state().arrays.items():
        np.testing.assert_allclose(got.get_state().arrays[name], arr, rtol=tol, atol=tol, err_msg=name)
    for a, b in zip(gc, rc, strict=True):
        assert a.keys() == b.keys()
        for k in a:
            assert a[k] == pytest.approx(b[k], rel=1e-6, abs=1e-9), k
    # it learns (the comparison is not vacuous)
    assert gc[-1]["updates" if update == "prediction" else "loss"] < gc[0]["updates" if update == "prediction" else "loss"]
    assert rc[0]["updates"] > 0
    # touched rows cover every row the last epoch changed
    W0 = got.get_state().arrays["W"].copy()
    got.partial_fit(batch, seed=3, epoch=3)
    W = got.get_state().arrays["W"]
    assert got.touched_rows_ is not None
    np.testing.assert_array_equal(W[~got.touched_rows_], W0[~got.touched_rows_])
    # decoding agrees too
    assert got.predict(batch) == reference(lambda: got.predict(batch))


@pytest.mark.parametrize(
    "cls,params", [(FlatPA, {}), (TreePA, {"data": "all"}), (TreePA, {"data": "sib"})]
)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_binary_epochs_equal_reference(reference, cls, params, dtype):
    rng = np.random.default_rng(7)
    tax = random_taxonomy(30, rng)
    batch = make_batch(tax, 60, 50, rng)
    p = {**params, "dtype": dtype}
    got, gc = _run(cls, p, tax, batch, 50, 2)
    ref, rc = reference(lambda: _run(cls, p, tax, batch, 50, 2))
    tol = 1e-6 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(got.get_state().arrays["W"], ref.get_state().arrays["W"], rtol=tol, atol=tol)
    for a, b in zip(gc, rc, strict=True):
        for k in b:
            assert a[k] == pytest.approx(b[k], rel=1e-6, abs=1e-9), k
    assert got.predict(batch) == reference(lambda: got.predict(batch))


def test_switch_off_by_flag(monkeypatch):
    monkeypatch.setattr(kernels, "ENABLED", False)
    assert not kernels.available()
    monkeypatch.setattr(kernels, "ENABLED", True)
    assert kernels.available()


@pytest.mark.parametrize("branching,dtype,update", [(False, "float64", "prediction"), (True, "float64", "cost_augmented"),
                                                   (True, "float32", "cost_augmented")])
def test_gt_averaged_epochs_equal_reference(reference, branching, dtype, update):
    rng = np.random.default_rng(11)
    tax = random_taxonomy(30, rng, wide=True)
    batch = make_batch(tax, 70, 50, rng)
    params: dict = {"branching": branching, "dtype": dtype, "update": update, "average": True, "bias": 0.3}
    got, gc = _run(GlobalPA, params, tax, batch, 50, 3)
    ref, rc = reference(lambda: _run(GlobalPA, params, tax, batch, 50, 3))
    tol = 1e-6 if dtype == "float32" else 1e-12
    arrays = ref.get_state().arrays
    assert sorted(arrays) == sorted(["W", "Wa", "t"] + (["bf", "bfa"] if branching else []))
    for name, arr in arrays.items():
        np.testing.assert_allclose(got.get_state().arrays[name], arr, rtol=tol, atol=tol, err_msg=name)
    assert float(arrays["t"][0]) == 3.0
    assert np.abs(arrays["Wa"]).sum() > 0
    for a, b in zip(gc, rc, strict=True):
        for k in b:
            assert a[k] == pytest.approx(b[k], rel=1e-6, abs=1e-9), k
    # the rows marked touched cover the rows of Wa the epoch changed as well
    Wa0 = got.get_state().arrays["Wa"].copy()
    got.partial_fit(batch, seed=3, epoch=3)
    np.testing.assert_array_equal(got.get_state().arrays["Wa"][~got.touched_rows_], Wa0[~got.touched_rows_])
    assert got.predict(batch) == reference(lambda: got.predict(batch))


@pytest.mark.parametrize("branching,dtype", [(False, "float64"), (True, "float64"), (True, "float32")])
def test_gt_rare_margins_equal_reference(reference, branching, dtype):
    """Label-frequency-aware margins (``margin_rare``): kernel = numpy reference, and they change
    the training (the per-edge margins are used, not ignored)."""
    rng = np.random.default_rng(21)
    tax = random_taxonomy(30, rng, wide=True)
    batch = make_batch(tax, 70, 50, rng)
    params: dict = {"branching": branching, "dtype": dtype, "update": "cost_augmented", "bias": 0.3,
                    "margin_rare": 0.5}
    got, gc = _run(GlobalPA, params, tax, batch, 50, 3)
    ref, rc = reference(lambda: _run(GlobalPA, params, tax, batch, 50, 3))
    tol = 1e-6 if dtype == "float32" else 1e-12
    arrays = ref.get_state().arrays
    assert sorted(arrays) == sorted(["W", "edge_counts"] + (["bf"] if branching else []))
    for name, arr in arrays.items():
        np.testing.assert_allclose(got.get_state().arrays[name], arr, rtol=tol, atol=tol, err_msg=name)
    for a, b in zip(gc, rc, strict=True):
        for k in b:
            assert a[k] == pytest.approx(b[k], rel=1e-6, abs=1e-9), k
    plain, _ = _run(GlobalPA, {**params, "margin_rare": 0.0}, tax, batch, 50, 3)
    assert "edge_counts" not in plain.get_state().arrays
    assert not np.allclose(plain.get_state().arrays["W"], got.get_state().arrays["W"])
    assert got.predict(batch) == reference(lambda: got.predict(batch))


@pytest.mark.parametrize("seed,n_nodes,wide", CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("branching", [False, True])
def test_csr_decode_equals_scores_then_dp(seed, n_nodes, wide, dtype, branching):
    """The fused decoding of the sparse layout (scores and DP per document, leaves found by a walk
    over the picked children) gives exactly the leaves and the leaf scores of the two-step path:
    the score block, the DP of every node, the selection's leaves."""
    rng = np.random.default_rng(100 + seed)
    idx = tree_index(random_taxonomy(n_nodes, rng, wide))
    W = sp.random(50, idx.n_edges, density=0.3, format="csr", random_state=seed, dtype=dtype)
    W.data = (W.data - 0.6).astype(dtype)  # negative and positive weights: few positive offers at wide nodes
    W.sort_indices()
    Xd = sp.random(40, 50, density=0.2, random_state=seed + 7, dtype=np.float32).toarray()
    Xd[:3] = 0.0  # documents without features: every score 0, the DP's tie rules decide
    X = sp.csr_matrix(Xd)
    bf = rng.normal(scale=0.5, size=(idx.n_nodes + 1, 4)).astype(dtype) if branching else None
    got = kernels.csr_decode(X, W, idx, bf, 3)
    S = kernels.csr_scores(X, W)
    ref = dp_solve(idx, S, bf=bf, R=3, with_k=False)
    sets = ref.leaf_sets(idx)
    assert len(got) == len(sets) == X.shape[0]
    for i, (leaves, scores) in enumerate(got):
        np.testing.assert_array_equal(leaves, sets[i])
        assert leaves.dtype == np.int64 and scores.dtype == np.float32
        np.testing.assert_array_equal(scores, S[i, sets[i] - 1].astype(np.float32))


def test_csr_decode_grows_its_leaf_buffer():
    """More selected leaves than the first buffer holds (4 a document): the buffer grows."""
    idx = tree_index(Taxonomy.from_edges([("ROOT", f"n{i}") for i in range(1, 31)]))
    W = sp.csr_matrix(np.full((2, idx.n_edges), 0.5, dtype=np.float32))
    X = sp.csr_matrix(np.ones((3, 2), dtype=np.float32))
    got = kernels.csr_decode(X, W, idx, None, 3)
    for leaves, scores in got:  # every offer positive: every leaf taken
        np.testing.assert_array_equal(leaves, np.arange(1, 31))
        np.testing.assert_array_equal(scores, np.full(30, 1.0, dtype=np.float32))
