"""Xiao, Liu, Song 2019: path cost-sensitive NB/EM and baselines (sparkhc.models.xiao).

Expected values are computed by hand (arithmetic in the comments) or by an independent
brute-force loop, never by the code under test.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp

from sparkhc.batch import NODE_SCORES, SparseBatch, label_matrix
from sparkhc.errors import ConfigError
from sparkhc.models import get_model_class, make_model, names
from sparkhc.models.xiao import (
    EMMC,
    NBMC,
    PCEM,
    PCNB,
    TDEM,
    WDEM,
    WDNB,
    FlatEM,
    FlatNB,
    PathSpace,
    _XiaoModel,
    add_statistics,
    estimate,
    posteriors,
    sufficient_statistics,
    weak_labels,
)
from sparkhc.taxonomy import Taxonomy

#: the registered Xiao et al. models (found through the one model registry)
XIAO_MODELS = [n for n in names() if issubclass(get_model_class(n), _XiaoModel)]


# ---------------------------------------------------------------------------------------------
# fixtures
def two_level() -> Taxonomy:
    # ROOT -> A, B; A -> a1, a2; B -> b1. Level order ids: ROOT 0, A 1, B 2, a1 3, a2 4, b1 5.
    # Paths (leaves in id order): p0 = A/a1, p1 = A/a2, p2 = B/b1.
    return Taxonomy.from_edges([("ROOT", "A"), ("ROOT", "B"), ("A", "a1"), ("A", "a2"), ("B", "b1")])


def synthetic(tax: Taxonomy, n: int = 240, v: int = 40, seed: int = 0) -> tuple[PathSpace, sp.csr_matrix, np.ndarray, np.ndarray]:
    """Documents drawn from one multinomial per path (so every model has something to learn)."""
    space = PathSpace.build(tax)
    rng = np.random.default_rng(seed)
    true = rng.integers(0, space.n_paths, n)
    protos = rng.dirichlet(np.full(v, 0.3), size=space.n_paths)
    x = np.array([rng.multinomial(int(rng.integers(10, 40)), protos[t]) for t in true], dtype=float)
    s = space.node_scores(space.path_labels(true))
    return space, sp.csr_matrix(x), s, true


# ---------------------------------------------------------------------------------------------
def test_pcnb_estimates_by_hand() -> None:
    tax = two_level()
    # 4 documents, vocabulary of 3 words
    x = sp.csr_matrix(np.array([[2, 0, 1], [0, 1, 1], [1, 0, 0], [0, 2, 0]], dtype=float))
    labels = [["A", "a1"], ["A", "a2"], ["B", "b1"], ["A"]]  # d4 stops at A (partial path)
    model = PCNB(tax, 3)
    s_nodes = model.node_scores_from_labels(labels)
    # path scores S_ij (p0 = A/a1, p1 = A/a2, p2 = B/b1):
    #   d1 {A,a1}: [2, 1, 0]; d2 {A,a2}: [1, 2, 0]; d3 {B,b1}: [0, 0, 2]; d4 {A}: [1, 1, 0]
    s_paths = model.space.path_scores(s_nodes)
    np.testing.assert_array_equal(s_paths, [[2, 1, 0], [1, 2, 0], [0, 0, 2], [1, 1, 0]])
    model.fit_arrays(x, s_nodes)
    p = model.params_
    assert p is not None
    # θ_p = (1 + Σ_i S_ij) / (M + Σ_k Σ_i S_ik): Σ_i S_ij = [4, 4, 2], total 10, M = 3
    #   -> [5/13, 5/13, 3/13]
    np.testing.assert_allclose(np.exp(p["log_prior"]), [5 / 13, 5 / 13, 3 / 13], rtol=1e-12)
    # θ_{w|p} = (1 + Σ_i S_ij x_iw) / (|V| + Σ_s Σ_i S_ij x_is), |V| = 3
    #   p0: 2*[2,0,1] + 1*[0,1,1] + 0*[1,0,0] + 1*[0,2,0] = [4,3,3] (sum 10) -> [5,4,4]/13
    #   p1: 1*[2,0,1] + 2*[0,1,1] + 0*[1,0,0] + 1*[0,2,0] = [2,4,3] (sum 9)  -> [3,5,4]/12
    #   p2: 0 + 0 + 2*[1,0,0] + 0                      = [2,0,0] (sum 2)  -> [3,1,1]/5
    np.testing.assert_allclose(
        np.exp(p["log_word"]),
        [[5 / 13, 4 / 13, 4 / 13], [3 / 12, 5 / 12, 4 / 12], [3 / 5, 1 / 5, 1 / 5]],
        rtol=1e-12,
    )
    # posterior of a test document x = [1, 0, 0]: θ_p θ_{w1|p}
    #   p0: 5/13 * 5/13 = 25/169; p1: 5/13 * 3/12 = 5/52; p2: 3/13 * 3/5 = 9/65
    joint = np.array([25 / 169, 5 / 52, 9 / 65])
    q, ll = model.posteriors(sp.csr_matrix([[1.0, 0.0, 0.0]]), p)
    np.testing.assert_allclose(q[0], joint / joint.sum(), rtol=1e-12)
    np.testing.assert_allclose(ll[0], math.log(joint.sum()), rtol=1e-12)
    # the best path is p0 = A/a1; its labels are {A, a1}
    assert model.predict_paths(sp.csr_matrix([[1.0, 0.0, 0.0]])).tolist() == [0]
    pred = model.predict_label_matrix(sp.csr_matrix([[1.0, 0.0, 0.0]]))
    assert sorted(model.space.base.names[c] for c in pred.indices) == ["A", "a1"]


def test_vocabulary_of_the_labeled_documents() -> None:
    tax = two_level()
    # the same 4 documents plus a 4th word that no labeled document contains
    x = sp.csr_matrix(np.array([[2, 0, 1, 0], [0, 1, 1, 0], [1, 0, 0, 0], [0, 2, 0, 0]], dtype=float))
    labels = [["A", "a1"], ["A", "a2"], ["B", "b1"], ["A"]]
    labeled_v = PCNB(tax, 4)  # vocabulary="labeled" (default): |V| = 3, word 4 ignored
    labeled_v.fit_arrays(x, labeled_v.node_scores_from_labels(labels))
    assert labeled_v.params_ is not None
    # p0 as in test_pcnb_estimates_by_hand: [5, 4, 4]/13, and log θ = 0 for the unseen word
    np.testing.assert_allclose(labeled_v.params_["log_word"][0], np.log([5 / 13, 4 / 13, 4 / 13, 1.0]), rtol=1e-12)
    all_v = PCNB(tax, 4, vocabulary="all")  # |V| = 4: p0 = (1 + [4,3,3,0]) / (4 + 10) = [5,4,4,1]/14
    all_v.fit_arrays(x, all_v.node_scores_from_labels(labels))
    assert all_v.params_ is not None
    np.testing.assert_allclose(np.exp(all_v.params_["log_word"][0]), [5 / 14, 4 / 14, 4 / 14, 1 / 14], rtol=1e-12)


def test_path_scores_figure1() -> None:
    # Xiao et al. Figure 1: x_i labeled {c^1_1, c^2_2}; S_i2 = 2, S_i1 = S_i3 = 1, others 0.
    tax = Taxonomy.from_edges(
        [("ROOT", "c1_1"), ("ROOT", "c1_2"), ("c1_1", "c2_1"), ("c1_1", "c2_2"), ("c1_1", "c2_3"),
         ("c1_2", "c2_4"), ("c1_2", "c2_5")]
    )  # fmt: skip
    space = PathSpace.build(tax)
    assert [tax.names[int(lf)] for lf in space.path_leaf] == ["c2_1", "c2_2", "c2_3", "c2_4", "c2_5"]
    s = space.path_scores(space.node_scores(label_matrix([["c1_1", "c2_2"]], tax)))
    np.testing.assert_array_equal(s, [[1, 2, 1, 0, 0]])
    # a weak (dataless) labeling that is inconsistent across depths: c1_2 at depth 1, c2_2 at 2
    s = space.path_scores(space.node_scores(label_matrix([["c1_2", "c2_2"]], tax, closed=False)))
    np.testing.assert_array_equal(s, [[0, 1, 0, 1, 1]])


def test_weak_labels_per_depth_argmax() -> None:
    tax = two_level()  # ids: ROOT 0, A 1, B 2, a1 3, a2 4, b1 5
    sim = np.array(
        [
            [0, 0.2, 0.5, 0.1, 0.3, 0.0],  # depth 1: B (0.5 > 0.2); depth 2: a2 (0.3)
            [0, 0.0, 0.0, 0.0, 0.0, 0.4],  # depth 1: nothing similar; depth 2: b1
            [0, 0.0, 0.0, 0.0, 0.0, 0.0],  # no weak label at all
        ]
    )
    w = weak_labels(sim, tax)
    assert [sorted(tax.names[c] for c in np.flatnonzero(r)) for r in w] == [["B", "a2"], ["b1"], []]


# ---------------------------------------------------------------------------------------------
def test_padding_predicts_real_labels_only() -> None:
    # leaves at depth 1 (B) and 2 (a1, a2): B is padded with the dummy B/_pad2
    tax = Taxonomy.from_edges([("ROOT", "A"), ("ROOT", "B"), ("A", "a1"), ("A", "a2")])
    space = PathSpace.build(tax)
    assert space.d == 2 and space.n_paths == 3
    assert "B/_pad2" in space.names
    # a document labeled {B} is labeled down its padded path: S(B) = S(B/_pad2) = 1 -> path score 2
    s = space.path_scores(space.node_scores(label_matrix([["B"]], tax)))
    leaf_names = [tax.names[int(lf)] for lf in space.path_leaf]  # ["B", "a1", "a2"]
    np.testing.assert_array_equal(s[0], [2 if n == "B" else 0 for n in leaf_names])
    # word 0 <-> B, word 1 <-> a1, word 2 <-> a2
    x = sp.csr_matrix(np.array([[5, 0, 0], [4, 1, 0], [0, 5, 0], [1, 4, 0], [0, 0, 5], [0, 1, 4]], dtype=float))
    labels = [["B"], ["B"], ["A", "a1"], ["a1"], ["a2"], ["A", "a2"]]
    batch = SparseBatch(X=x, doc_ids=np.array([str(i) for i in range(6)]), labels=labels, counts=x)
    for name in XIAO_MODELS:
        model = make_model(name, tax, 3)
        model.fit(batch)
        test = sp.csr_matrix(np.array([[6, 0, 0], [0, 6, 0], [0, 0, 6]], dtype=float))
        pred = model.predict_label_matrix(test)
        assert pred.shape == (3, tax.n_nodes)  # real (base) nodes only: no dummy column exists
        got = [sorted(tax.names[c] for c in pred[i].indices) for i in range(3)]
        assert got == [["B"], ["A", "a1"], ["A", "a2"]], name
        names = model.predict(SparseBatch(X=test, doc_ids=np.array(["t0", "t1", "t2"]), counts=test))
        assert names == [["B"], ["a1"], ["a2"]], name


def test_self_leaves_for_partial_paths() -> None:
    # RCV1-style: A may be a deepest label; A/_self is a virtual leaf, padded to depth 2 already
    tax = two_level().with_self_leaves(["A"])
    space = PathSpace.build(tax)
    leaf_names = [tax.names[int(lf)] for lf in space.path_leaf]
    assert "A/_self" in leaf_names
    # {A}: A (1) + A/_self (1, no descendant of A labeled) = 2 on A/_self, 1 on A/a1 and A/a2
    # {A, a1}: A/_self gets 0 because a descendant of A (a1) is labeled
    s = space.path_scores(space.node_scores(label_matrix([["A"], ["A", "a1"]], space.base)))
    exp0 = {"A/_self": 2, "a1": 1, "a2": 1, "b1": 0}
    exp1 = {"A/_self": 1, "a1": 2, "a2": 1, "b1": 0}
    np.testing.assert_array_equal(s[0], [exp0[n] for n in leaf_names])
    np.testing.assert_array_equal(s[1], [exp1[n] for n in leaf_names])
    j = leaf_names.index("A/_self")
    lab = space.path_labels([j])
    assert sorted(space.base.names[c] for c in lab.indices) == ["A"]  # the virtual node is removed
    assert lab.shape[1] == space.base.n_nodes


# ---------------------------------------------------------------------------------------------
EM_CASES = [
    (PCEM, {}),
    (FlatEM, {}),
    (EMMC, {"n_components": 2}),
    (NBMC, {"n_components": 3}),  # EM over latent components of the labeled documents
    (WDEM, {"e_step": "soft"}),
]


@pytest.mark.parametrize(("cls", "params"), EM_CASES, ids=[c.__name__ for c, _ in EM_CASES])
def test_em_never_decreases_log_likelihood(cls: type, params: dict) -> None:
    tax = Taxonomy.from_edges([("ROOT", "A"), ("ROOT", "B"), ("A", "a1"), ("A", "a2"), ("B", "b1"), ("B", "b2"), ("ROOT", "C")])
    space, x, s, _ = synthetic(tax, n=300)
    model = cls(tax, x.shape[1], max_iter=15, tol=0.0, **params)
    model.fit_arrays(x[:15], s[:15], x[15:])
    h = np.array(model.history_)
    assert len(h) >= 3
    for t in range(1, len(h)):  # every iteration
        assert h[t] >= h[t - 1] - 1e-9 * abs(h[t - 1]), (t, h[t - 1], h[t])


def test_tdem_never_decreases_log_likelihood_within_each_level() -> None:
    tax = Taxonomy.from_edges([("ROOT", "A"), ("ROOT", "B"), ("A", "a1"), ("A", "a2"), ("B", "b1"), ("B", "b2")])
    _, x, s, _ = synthetic(tax, n=300, seed=3)
    model = TDEM(tax, x.shape[1], max_iter=10, tol=0.0).fit_arrays(x[:12], s[:12], x[12:])
    assert len(model.history_levels_) == 2
    for lvl in model.history_levels_:
        for t in range(1, len(lvl)):
            assert lvl[t] >= lvl[t - 1] - 1e-9 * abs(lvl[t - 1])


def test_log_likelihood_matches_brute_force() -> None:
    # independent loop implementation of Xiao's objective for PCEM after one fit
    tax = two_level()
    space, x, s, _ = synthetic(tax, n=30, v=6, seed=5)
    model = PCEM(tax, 6, max_iter=2, tol=0.0).fit_arrays(x[:5], s[:5], x[5:])
    p = model.params_
    assert p is not None
    th_p, th_w = np.exp(p["log_prior"]), np.exp(p["log_word"])
    xd = x.toarray()
    sp_ = space.path_scores(s[:5])
    total = sum(math.log(th_p[j]) for j in range(3)) + sum(math.log(th_w[j, t]) for j in range(3) for t in range(6))
    for i in range(5):
        for j in range(3):
            total += sp_[i, j] * (math.log(th_p[j]) + sum(xd[i, t] * math.log(th_w[j, t]) for t in range(6)))
    for i in range(5, 30):
        total += math.log(sum(th_p[j] * math.prod(th_w[j, t] ** xd[i, t] for t in range(6)) for j in range(3)))
    assert model.history_[-1] == pytest.approx(total, rel=1e-10)


# ---------------------------------------------------------------------------------------------
def test_statistics_of_halves_add_up_to_the_whole() -> None:
    tax = two_level()
    space, x, s, _ = synthetic(tax, n=101, seed=7)
    model = PCEM(tax, x.shape[1])
    sp_ = model.event_weights(s)
    whole = sufficient_statistics(x, sp_, labeled=True)
    halves = add_statistics(
        sufficient_statistics(x[:50], sp_[:50], labeled=True), sufficient_statistics(x[50:], sp_[50:], labeled=True)
    )
    assert set(whole) == set(halves) == {"word", "prior", "docs", "vocab"}
    for k in whole:
        np.testing.assert_allclose(halves[k], whole[k], rtol=1e-12, atol=0)
    # the E-step statistics (posteriors as event counts) and the log likelihood add up too
    params = estimate(whole)
    e_whole = model.e_step(x, params)
    e_halves = add_statistics(model.e_step(x[:37], params), model.e_step(x[37:], params))
    for k in e_whole:
        np.testing.assert_allclose(e_halves[k], e_whole[k], rtol=1e-10)


def test_partitioned_em_equals_serial_fit() -> None:
    # what the Spark driver does: per-partition E-steps combined by addition, then estimate
    tax = two_level()
    _, x, s, _ = synthetic(tax, n=200, seed=11)
    serial = PCEM(tax, x.shape[1], max_iter=4, tol=0.0).fit_arrays(x[:10], s[:10], x[10:])
    model = PCEM(tax, x.shape[1])
    stats_l = model.sufficient_statistics(x[:10], model.event_weights(s[:10]))
    params = model.estimate(stats_l)
    parts = [x[10:70], x[70:71], x[71:]]
    for _ in range(4):
        params = model.estimate(add_statistics(stats_l, *[model.e_step(p, params) for p in parts]))
    assert serial.params_ is not None
    for k in params:
        np.testing.assert_allclose(params[k], serial.params_[k], rtol=1e-9)
    # the saved state is the sufficient statistics that give the final parameters
    again = PCEM(tax, x.shape[1]).set_state(serial.get_state())
    np.testing.assert_array_equal(again.predict_paths(x), serial.predict_paths(x))


# ---------------------------------------------------------------------------------------------
def test_grouped_posteriors_normalise_within_groups() -> None:
    stats = {"word": np.array([[3.0, 1.0], [1.0, 3.0], [2.0, 2.0], [0.0, 4.0]]), "prior": np.array([1.0, 3.0, 2.0, 2.0])}
    groups = np.array([0, 0, 1, 1])
    p = estimate(stats, groups)
    # group 0: (1+1)/(2+4), (1+3)/(2+4); group 1: (1+2)/(2+4) twice
    np.testing.assert_allclose(np.exp(p["log_prior"]), [2 / 6, 4 / 6, 3 / 6, 3 / 6])
    q, _ = posteriors(sp.csr_matrix([[1.0, 2.0]]), p, groups)
    np.testing.assert_allclose([q[0, :2].sum(), q[0, 2:].sum()], [1.0, 1.0])


def test_all_models_learn_the_synthetic_paths() -> None:
    tax = Taxonomy.from_edges([("ROOT", "A"), ("ROOT", "B"), ("A", "a1"), ("A", "a2"), ("B", "b1"), ("ROOT", "C")])
    _, x, s, true = synthetic(tax, n=300, seed=2)
    for name in XIAO_MODELS:
        model = make_model(name, tax, x.shape[1], max_iter=10)
        model.fit_arrays(x[:30], s[:30], x[30:])
        acc = float(np.mean(model.predict_paths(x[30:]) == true[30:]))
        assert acc > 0.9, (name, acc)


def test_bad_parameters_are_rejected() -> None:
    from sparkhc.errors import ConfigError

    with pytest.raises(ConfigError, match="max_iter"):
        PCEM(two_level(), 3, max_iter=-1).fit_arrays(sp.csr_matrix((1, 3)), np.zeros((1, 6)))
    with pytest.raises(ConfigError, match="unknown parameter"):
        FlatNB(two_level(), 3, n_components=2)
    with pytest.raises(ConfigError, match="e_step"):
        WDNB(two_level(), 3, e_step="hardest").fit_arrays(sp.csr_matrix((1, 3)), np.zeros((1, 6)))


def test_partial_fit_over_shards_equals_nb_fit() -> None:
    tax = two_level()
    space, x, s, true = synthetic(tax, n=60, seed=13)
    names = [[tax.names[c] for c in space.base.closure([int(space.real[space.path_leaf[t]])])] for t in true]
    batch = SparseBatch(X=x, doc_ids=np.array([str(i) for i in range(60)]), labels=names, counts=x)
    whole = PCNB(tax, x.shape[1]).fit(batch)
    shards = PCNB(tax, x.shape[1])
    for part in (np.arange(0, 25), np.arange(25, 60)):
        shards.partial_fit(batch.subset(part))
    assert whole.params_ is not None
    p = shards._params()
    for k in p:
        np.testing.assert_allclose(p[k], whole.params_[k], rtol=1e-12)


def test_max_length_scales_long_documents() -> None:
    tax = two_level()
    # d1 = [4, 0, 4] has 8 tokens; with max_length = 4 its counts are halved to [2, 0, 2]; d2 (2 tokens) stays
    x = sp.csr_matrix(np.array([[4, 0, 4], [0, 1, 1]], dtype=float))
    model = PCNB(tax, 3, max_length=4)
    np.testing.assert_allclose(model.prepare(x).toarray(), [[2, 0, 2], [0, 1, 1]])
    # ... so PCNB counts p0 = 2*[2,0,2] + 1*[0,1,1] = [4,1,5] (sum 10) -> (1 + .) / (3 + 10)
    model.fit_arrays(x, model.node_scores_from_labels([["A", "a1"], ["A", "a2"]]))
    assert model.params_ is not None
    np.testing.assert_allclose(np.exp(model.params_["log_word"][0]), [5 / 13, 2 / 13, 6 / 13], rtol=1e-12)


def test_smoothing_by_hand() -> None:
    """θ_{t|k} = (α + word_kt) / (α|V| + Σ_t word_kt); the class prior keeps +1."""
    stats = {"word": np.array([[2.0, 0.0, 1.0], [0.0, 0.0, 4.0]]), "prior": np.array([1.0, 3.0])}
    p = estimate(stats, vocabulary="all", smoothing=0.5)
    # row 0: (0.5 + [2, 0, 1]) / (1.5 + 3); row 1: (0.5 + [0, 0, 4]) / (1.5 + 4)
    np.testing.assert_allclose(np.exp(p["log_word"]), [[2.5 / 4.5, 0.5 / 4.5, 1.5 / 4.5], [0.5 / 5.5, 0.5 / 5.5, 4.5 / 5.5]],
                               rtol=1e-12)
    np.testing.assert_allclose(np.exp(p["log_prior"]), [2 / 6, 4 / 6], rtol=1e-12)
    # the paper's α = 1 is the default, the same arithmetic as before (log1p): bit-identical
    one = estimate(stats, vocabulary="all")
    assert np.array_equal(one["log_word"], np.log1p(stats["word"]) - np.log(3 + stats["word"].sum(axis=1, keepdims=True)))
    assert np.array_equal(estimate(stats, vocabulary="all", smoothing=1.0)["log_word"], one["log_word"])
    # the labeled vocabulary: terms outside it get log θ = 0, |V| counts the others only
    lab = estimate({**stats, "vocab": np.array([1.0, 0.0, 1.0])}, smoothing=0.5)
    np.testing.assert_allclose(np.exp(lab["log_word"][0]), [2.5 / 4.0, 1.0, 1.5 / 4.0], rtol=1e-12)
    with pytest.raises(ConfigError, match="smoothing"):
        PCNB(two_level(), 3, smoothing=0).validate_params()


def test_node_scores_column_replaces_the_labels() -> None:
    """fit(batch) with the node_scores column == fit_arrays on the rows with a positive score (the
    others unlabeled); the labels are not read."""
    tax = two_level()
    space, x, s, _ = synthetic(tax, n=60)
    weak = s.copy()
    weak[::3] = 0.0  # every third document carries no supervision
    batch = SparseBatch(x, np.arange(60).astype(str), [["b1"]] * 60, counts=x, extra={NODE_SCORES: weak})
    got = PCEM(tax, x.shape[1], max_iter=5).fit(batch)
    has = np.flatnonzero(weak.sum(axis=1) > 0)
    unl = np.flatnonzero(weak.sum(axis=1) == 0)
    want = PCEM(tax, x.shape[1], max_iter=5).fit_arrays(x[has], weak[has], x[unl])
    assert got.history_ == want.history_
    for k, v in want.get_state().arrays.items():
        assert np.array_equal(got.get_state().arrays[k], v), k
    bad = SparseBatch(x, batch.doc_ids, None, counts=x, extra={NODE_SCORES: weak[:, :2]})
    with pytest.raises(ConfigError, match="node_scores"):
        PCEM(tax, x.shape[1]).fit(bad)
