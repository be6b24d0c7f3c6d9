"""Li & Yamanishi adapters (``fmm``, ``hcm``, ``wbm``, ``cos``): the same classifiers as
:mod:`sparkhc.models.li_yamanishi.classifiers` on the same counts, statistics that add up over shards, decoding with
per-node scores, parameter checks and the model-directory round trip."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from sparkhc import models as model_registry
from sparkhc.batch import SparseBatch
from sparkhc.errors import ConfigError, InputDataError, ModelError, NotFittedError
from sparkhc.models.base import combine_states
from sparkhc.models.li_yamanishi import COSHier, FMMHier, HCMHier, WBMHier
from sparkhc.models.li_yamanishi import classifiers as fmm
from sparkhc.persistence import load_model, save_model
from sparkhc.taxonomy import Taxonomy

# A2 has no training document (absent category); feature V-1 never occurs in training
EDGES = [("ROOT", "A"), ("ROOT", "B"), ("A", "A1"), ("A", "A2"), ("B", "B1"), ("B", "B2")]
TRAINED = ["A1", "B1", "B2"]
V = 24
CLASSES = {"fmm": FMMHier, "hcm": HCMHier, "wbm": WBMHier, "cos": COSHier}
CASES = [
    ("fmm", {}),
    ("fmm", {"gamma": 0.4}),
    ("fmm", {"gamma": 0.5, "scheme": "binary", "n_iter": 20}),
    ("hcm", {"gamma": 0.7}),
    ("hcm", {"clustering": "top", "top_l": 4, "top_m": 3, "scheme": "binary"}),
    ("wbm", {"alpha": 0.5}),
    ("cos", {}),
    ("cos", {"complement": False}),
]
INNER = {"fmm": fmm.FMM, "hcm": fmm.HCM, "wbm": fmm.WBM, "cos": fmm.COS}


def _taxonomy() -> Taxonomy:
    return Taxonomy.from_edges(EDGES)


def _counts(n: int, seed: int, with_unseen: bool = False) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    X = rng.poisson(0.4, size=(n, V)).astype(np.float32)
    X[:, V - 1] = 0.0
    if with_unseen:
        X[::3, V - 1] = 2.0
    return sp.csr_matrix(X)


def _batch(n: int = 60, seed: int = 0, with_unseen: bool = False) -> SparseBatch:
    rng = np.random.default_rng(seed + 100)
    C = _counts(n, seed, with_unseen).tolil()
    labels: list[list[str]] = []
    for i in range(n):
        labs = sorted(set(rng.choice(TRAINED, size=int(rng.integers(1, 3))).tolist()))
        if i % 11 == 5:
            labs = []  # unlabeled: only in the complements
        for lab in labs:  # label-dependent words
            C[i, 3 * TRAINED.index(lab)] += 3.0
        labels.append(labs)
    counts = C.tocsr().astype(np.float32)
    X = counts.copy()
    X.data = X.data / 10.0  # weighted features differ from the counts: the models read the counts
    return SparseBatch(X=X, doc_ids=np.array([f"d{i:03d}" for i in range(n)]), labels=labels, counts=counts)


def _model(name: str, **params):
    return CLASSES[name](_taxonomy(), V, **params)


def _label_matrix(labels, names) -> np.ndarray:
    return np.array([[c in labs for c in names] for labs in labels], dtype=float)


def _leaf_names(tax: Taxonomy) -> list[str]:
    return [tax.names[int(c)] for c in tax.leaves]


# ---------------------------------------------------------------------------------------------
# the adapter fits the same classifier as sparkhc.models.li_yamanishi.classifiers


@pytest.mark.parametrize("name,params", CASES)
def test_adapter_fit_equals_direct_fit(name, params):
    train, test = _batch(60, 0), _batch(25, 1, with_unseen=True)
    m = _model(name, **params).fit(train)
    # direct: the classifier of fmm.py on the same raw counts, categories = leaves with documents
    direct = INNER[name](**params).fit(train.counts, _label_matrix(train.labels, TRAINED))
    ref = direct.decision_function(test.counts)
    got = m.decision_function(test.counts)
    _, _, nodes = m.fitted()
    assert [m.taxonomy.names[int(c)] for c in nodes] == TRAINED
    assert got.shape == ref.shape
    np.testing.assert_array_equal(np.isfinite(got), np.isfinite(ref))
    fin = np.isfinite(ref)
    np.testing.assert_allclose(got[fin], ref[fin], rtol=1e-12, atol=1e-12)
    # the per-node scores of decode carry the same numbers in the leaf columns, -inf elsewhere
    sets, scores = m.decode(test)
    assert scores is not None and scores.shape == (len(test), m.taxonomy.n_nodes)
    np.testing.assert_array_equal(scores[:, nodes], got)
    others = np.setdiff1d(np.arange(m.taxonomy.n_nodes), nodes)
    assert np.all(scores[:, others] == -np.inf)


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_statistics_are_those_of_fmm_sufficient_statistics(name):
    b = _batch(40, 2)
    m = _model(name).fit(b)
    tax = m.taxonomy
    ref = fmm.sufficient_statistics(b.counts, b.labels, _leaf_names(tax))
    got = m.statistics()
    assert set(got) == set(ref)
    for k in ref:
        np.testing.assert_array_equal(got[k], ref[k], err_msg=k)
    assert got["category_docs"][_leaf_names(tax).index("A2")] == 0


@pytest.mark.parametrize("name", ["fmm", "wbm"])
def test_two_shards_sum_to_the_whole(name):
    b = _batch(70, 3)
    whole = _model(name).fit(b).get_state()
    halves = []
    for rows in (np.arange(0, 70, 2), np.arange(1, 70, 2)):
        m = _model(name)
        m.set_state(m.init_state())
        m.partial_fit(b.subset(rows), seed=0, epoch=0)
        halves.append(m.get_state())
    summed = combine_states(halves)
    assert summed.combine == "sum"
    for k, v in whole.arrays.items():
        a, w = summed.arrays[k], v
        a = a.toarray() if sp.issparse(a) else a
        w = w.toarray() if sp.issparse(w) else w
        np.testing.assert_array_equal(a, w, err_msg=k)
    # partial_fit adds to the current state: one model over both halves is the whole too
    m = _model(name)
    m.set_state(m.init_state())
    m.partial_fit(b.subset(np.arange(0, 70, 2)))
    m.partial_fit(b.subset(np.arange(1, 70, 2)))
    for k, v in m.statistics().items():
        np.testing.assert_array_equal(v, _model(name).set_state(whole).statistics()[k], err_msg=k)


def test_counting_is_one_pass():
    b = _batch(30, 4)
    once = _model("fmm").fit(b)
    thrice = _model("fmm").fit(b, epochs=3)
    for k, v in once.statistics().items():
        np.testing.assert_array_equal(thrice.statistics()[k], v, err_msg=k)
    c = thrice.partial_fit(b, epoch=1)
    assert c == {"examples": 30.0, "updates": 0.0, "loss": 0.0}


def test_cache_follows_the_state():
    b1, b2 = _batch(30, 5), _batch(30, 6)
    m = _model("wbm").fit(b1)
    s1 = m.decision_function(b2.counts)
    m.partial_fit(b2)  # more statistics: the fitted parameters are derived again
    s2 = m.decision_function(b2.counts)
    assert not np.allclose(s1, s2)
    m.set_state(_model("wbm").fit(b1).get_state())
    np.testing.assert_array_equal(m.decision_function(b2.counts), s1)


# ---------------------------------------------------------------------------------------------
# decoding


def test_decode_threshold_and_fallbacks():
    train = _batch(60, 0)
    test = _batch(20, 7)
    # a document whose only word was never seen in training: no covered word
    counts = test.counts.tolil()
    counts[0, :] = 0
    counts[0, V - 1] = 4.0
    test = SparseBatch(test.X, test.doc_ids, test.labels, counts=counts.tocsr())
    base = _model("wbm").fit(train)
    S = base.decision_function(test.counts)
    _, _, nodes = base.fitted()
    assert np.all(S[0] == -np.inf)
    for eps, fallback in [(0.0, "best"), (0.0, "none"), (0.05, "best"), (-np.inf, "none")]:
        m = _model("wbm", eps=eps, fallback=fallback).set_state(base.get_state())
        sets, _ = m.decode(test)
        for i, got in enumerate(sets):
            want = set(nodes[S[i] > eps].tolist())
            if not want and fallback == "best" and np.isfinite(S[i]).any():
                want = {int(nodes[int(np.argmax(S[i]))])}
            assert set(got.tolist()) == want, (eps, fallback, i)
        assert sets[0].size == 0  # nothing covered: empty set whatever the fallback
    # eps = -inf and no fallback: every finite score is a prediction (a threshold sweep needs no more)
    m = _model("wbm", eps=float("-inf"), fallback="none").set_state(base.get_state())
    sets, _ = m.decode(test)
    assert all(len(s) == len(TRAINED) for s in sets[1:])


def test_self_leaves_map_back_to_internal_labels():
    tax = _taxonomy().with_self_leaves(["B"])
    b = _batch(40, 8)
    labels = [["B"] if labs == ["B2"] else labs for labs in b.labels]  # some stop at B
    b = SparseBatch(b.X, b.doc_ids, labels, counts=b.counts)
    m = FMMHier(tax, V).fit(b)
    _, _, nodes = m.fitted()
    assert "B/_self" in [tax.names[int(c)] for c in nodes]
    preds = m.predict(b)
    assert any("B" in p for p in preds)
    assert all(not lab.endswith("/_self") for p in preds for lab in p)


# ---------------------------------------------------------------------------------------------
# parameters and errors


@pytest.mark.parametrize(
    "name,params,match",
    [
        ("fmm", {"gamma": 1.0}, r"The 'gamma' parameter of FMMHier must be a float in the range \[0, 1\)"),
        ("fmm", {"eta": 0}, "The 'eta' parameter of FMMHier"),
        ("fmm", {"n_iter": 2.5}, "The 'n_iter' parameter of FMMHier must be an int >= 0"),
        ("fmm", {"scheme": "pairs"}, "The 'scheme' parameter of FMMHier"),
        ("hcm", {"gamma": 0.3}, "The 'gamma' parameter of HCM must be a float in \\[0.5, 1\\)"),
        ("hcm", {"rest_cluster": 1}, "The 'rest_cluster' parameter of HCMHier must be a bool"),
        ("wbm", {"alpha": -1.0}, "The 'alpha' parameter of WBMHier"),
        ("cos", {"eps": float("nan")}, "The 'eps' parameter of COSHier"),
        ("cos", {"fallback": "all"}, "The 'fallback' parameter of COSHier"),
    ],
)
def test_bad_parameters_are_refused(name, params, match):
    with pytest.raises(ConfigError, match=match):
        _model(name, **params).fit(_batch(10, 0))


def test_unknown_parameter_and_missing_inputs():
    with pytest.raises(ConfigError, match="unknown parameter"):
        _model("fmm", alpha=1.0)
    b = _batch(10, 0)
    with pytest.raises(ConfigError, match="raw term counts"):
        _model("fmm").fit(SparseBatch(b.X, b.doc_ids, b.labels))
    with pytest.raises(InputDataError, match="gold labels"):
        _model("fmm").fit(SparseBatch(b.X, b.doc_ids, None, counts=b.counts))
    with pytest.raises(NotFittedError):
        _model("fmm").decode(b)
    nolabels = SparseBatch(b.X, b.doc_ids, [[] for _ in b.labels], counts=b.counts)
    with pytest.raises(ModelError, match="no training document has a label"):
        _model("fmm").fit(nolabels).decode(b)
    with pytest.raises(ModelError, match="expected"):
        FMMHier(_taxonomy(), V + 1).set_state(_model("fmm").fit(b).get_state())


# ---------------------------------------------------------------------------------------------
# model directories


@pytest.fixture
def registered():
    """The registry finds the module's declared names (no registry edit)."""
    for name, cls in CLASSES.items():
        assert model_registry.get_model_class(name) is cls


@pytest.mark.parametrize(
    "name,params",
    [
        ("fmm", {"gamma": 0.4, "eps": float("-inf"), "fallback": "none"}),
        ("hcm", {"gamma": 0.9}),
        ("wbm", {}),
        ("cos", {}),
    ],
)
def test_save_load_round_trip(tmp_path, registered, name, params):
    train, test = _batch(50, 0), _batch(20, 9)
    m = _model(name, **params).fit(train)
    save_model(tmp_path / "m", m)
    m2, meta = load_model(tmp_path / "m", taxonomy=_taxonomy())
    assert meta["model"] == name and meta["combine"] == "sum"
    assert type(m2) is type(m) and m2.params == m.params
    for k, v in m.get_state().arrays.items():
        w = m2.get_state().arrays[k]
        assert type(w) is type(v), k
        np.testing.assert_array_equal(
            w.toarray() if sp.issparse(w) else w, v.toarray() if sp.issparse(v) else v
        )
    s1, sc1 = m.decode(test)
    s2, sc2 = m2.decode(test)
    assert [s.tolist() for s in s1] == [s.tolist() for s in s2]
    np.testing.assert_array_equal(sc1, sc2)
    assert m2.predict(test) == m.predict(test)
