"""Li & Yamanishi (1997) models: the paper's worked example, EM, statistics, vectorized scoring.

Expected values of the worked example come from the paper (Tables 1-10) or from hand arithmetic
written out in the comments, never from the code under test.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import brentq

from sparkhc.errors import ConfigError, ModelError, NotFittedError
from sparkhc.models.li_yamanishi.classifiers import (
    COS,
    FMM,
    HCM,
    WBM,
    assign_clusters,
    cluster_word_distributions,
    distribute_frequencies,
    expected_likelihood_estimate,
    helmbold_em,
    merge_statistics,
    sufficient_statistics,
    top_rule_clusters,
)

ROOT = Path(__file__).resolve().parents[2]
DATA_DIR = Path(os.environ.get("SPARKHC_DATA_DIR", ROOT.parent / "shared" / "data"))

# Table 1: frequencies of words in c1 = 'tennis' and c2 = 'soccer'
WORDS = ["racket", "stroke", "shot", "goal", "kick", "ball"]
TABLE1 = np.array([[4, 1, 2, 1, 0, 2], [0, 0, 0, 3, 2, 2]], dtype=float)
# Fig. 1: d = kick, goal, goal, ball
DOC = sp.csr_matrix(np.array([[0, 0, 0, 2, 1, 1]], dtype=np.float32))


def example_fit(model):
    """Fit on one document per category whose counts are the rows of Table 1."""
    return model.fit(sp.csr_matrix(TABLE1.astype(np.float32)), [["c1"], ["c2"]])


def words_of(row) -> set[str]:
    return {w for w, m in zip(WORDS, row, strict=True) if m}


# ---------------------------------------------------------------------------------------------
# worked example: FMM (Tables 6-10)


def test_clusters_at_gamma_04_table6():
    member = assign_clusters(TABLE1, 0.4)
    assert words_of(member[0]) == {"racket", "stroke", "shot", "ball"}
    assert words_of(member[1]) == {"kick", "goal", "ball"}
    # "when γ >= 0.5 'ball' will not be assigned into any cluster"; 'goal' share in c2 is 0.75
    member5 = assign_clusters(TABLE1, 0.5)
    assert not member5[:, WORDS.index("ball")].any()
    assert member5[1, WORDS.index("goal")] and not member5[0, WORDS.index("goal")]


def test_distributed_frequencies_table7():
    D = distribute_frequencies(TABLE1, assign_clusters(TABLE1, 0.4))
    np.testing.assert_allclose(D, [[4, 1, 2, 0, 0, 2], [0, 0, 0, 4, 2, 2]])


def test_word_probabilities_table8():
    P = cluster_word_distributions(distribute_frequencies(TABLE1, assign_clusters(TABLE1, 0.4)))
    np.testing.assert_array_equal(
        np.round(P, 2), [[0.44, 0.11, 0.22, 0, 0, 0.22], [0, 0, 0, 0.50, 0.25, 0.25]]
    )


def test_fmm_fit_reproduces_tables_6_to_8():
    m = example_fit(FMM(gamma=0.4))
    assert list(m.categories_) == ["c1", "c2"]
    assert m.membership_.shape == (1, 2, 6)
    assert words_of(m.membership_[0, 0]) == {"racket", "stroke", "shot", "ball"}
    assert words_of(m.membership_[0, 1]) == {"kick", "goal", "ball"}
    np.testing.assert_array_equal(
        np.round(m.cluster_word_prob_[0], 2), [[0.44, 0.11, 0.22, 0, 0, 0.22], [0, 0, 0, 0.50, 0.25, 0.25]]
    )


def _with(model, **arrays):
    state = model.get_state()
    state.update(arrays)
    return type(model)().set_state(state)


def test_fmm_log_likelihood_table10_with_paper_parameters():
    m = example_fit(FMM(gamma=0.4))
    table8 = np.array([[[0.44, 0.11, 0.22, 0, 0, 0.22], [0, 0, 0, 0.50, 0.25, 0.25]]])
    table9 = np.array([[0.86, 0.14], [0.04, 0.96]])  # P(k|c), rows c1, c2
    m = _with(m, cluster_word_prob=table8, theta=table9)
    ll = m.log_likelihood(DOC, base=2)[0]
    assert round(ll[0], 2) == -14.67
    assert round(ll[1], 2) == -6.18


def test_fmm_log_likelihood_with_paper_theta_and_unrounded_probabilities():
    # With P(ball|k1) = 2/9 instead of the printed 0.22:
    # log2(.14*.25) + 2 log2(.14*.5) + log2(.86*2/9 + .14*.25) = -4.8365 - 7.6730 - 2.1449 = -14.654;
    # log2(.96*.25) + 2 log2(.96*.5) + log2(.04*2/9 + .96*.25) = -2.0589 - 2.1178 - 2.0064 = -6.183
    m = _with(example_fit(FMM(gamma=0.4)), theta=np.array([[0.86, 0.14], [0.04, 0.96]]))
    ll = m.log_likelihood(DOC, base=2)[0]
    assert ll[0] == pytest.approx(-14.654, abs=5e-4)
    assert ll[1] == pytest.approx(-6.183, abs=5e-4)
    # the document goes to c2 (paper: "we then classify the document into category c2")
    assert ll[1] > ll[0]


def test_fmm_em_on_example_converges_to_the_mle():
    # c1's words: racket 4, stroke 1, shot 2 (k1 only), goal 1 (k2 only), ball 2 (both).
    # (1/10) log-likelihood in t = θ1: 7 log t + log(1-t) + 2 log(t·2/9 + (1-t)·1/4) + const;
    # its derivative vanishes at the MLE (solved here independently of the code).
    def dl(t):
        return 7 / t - 1 / (1 - t) + 2 * (2 / 9 - 1 / 4) / (t * 2 / 9 + (1 - t) / 4)

    t_star = brentq(dl, 0.5, 0.99)
    assert t_star == pytest.approx(0.8715, abs=1e-4)
    m = example_fit(FMM(gamma=0.4, n_iter=500, theta_floor=0.0))
    assert m.theta_[0, 0] == pytest.approx(t_star, abs=1e-6)
    # c2's words lie in k2 except 'ball': the MLE is on the boundary θ1 = 0, approached by EM
    assert m.theta_[1, 0] < 1e-6
    # Table 9 prints 0.86 / 0.14 and 0.04 / 0.96: after two EM updates from uniform weights we get
    # 0.855 and 0.035 (hand computation: 0.5·(7·2 + 2·(2/9)/(0.5·2/9 + 0.5/4))/10 = 0.794, ...)
    m2 = example_fit(FMM(gamma=0.4, n_iter=2))
    assert m2.theta_[0, 0] == pytest.approx(0.8548, abs=1e-3)
    assert m2.theta_[1, 0] == pytest.approx(0.0347, abs=1e-3)


# ---------------------------------------------------------------------------------------------
# worked example: HCM (Tables 2-5)


def test_hcm_top_rule_clusters_table2():
    member = top_rule_clusters(TABLE1, 5, 5)
    assert words_of(member[0]) == {"racket", "stroke", "shot"}
    assert words_of(member[1]) == {"kick"}
    m = example_fit(HCM(clustering="top", top_l=5, top_m=5))
    M = m.membership_[0]
    assert M.shape == (3, 6)
    assert [words_of(r) for r in M] == [{"racket", "stroke", "shot"}, {"kick"}, {"goal", "ball"}]
    # Table 3: frequencies of clusters
    np.testing.assert_array_equal(TABLE1 @ M.T.astype(float), [[7, 0, 3], [0, 2, 5]])


def test_hcm_expected_likelihood_estimator_table4():
    expected = [[0.65, 0.04, 0.30], [0.06, 0.29, 0.65]]
    np.testing.assert_array_equal(
        np.round(expected_likelihood_estimate(np.array([[7, 0, 3], [0, 2, 5.0]])), 2), expected
    )
    m = example_fit(HCM(clustering="top", top_l=5, top_m=5))
    np.testing.assert_array_equal(np.round(m.cluster_prob_, 2), expected)


def test_hcm_log_likelihood_table5_with_paper_parameters():
    m = example_fit(HCM(clustering="top", top_l=5, top_m=5))
    m = _with(m, cluster_prob=np.array([[0.65, 0.04, 0.30], [0.06, 0.29, 0.65]]))
    ll = m.log_likelihood(DOC, base=2)[0]
    assert round(ll[0], 2) == -9.85
    assert round(ll[1], 2) == -3.65


def test_hcm_unrounded_likelihood_and_decision():
    # exact Eq. 4: log2(0.5/11.5) + 3 log2(3.5/11.5) = -4.5236 - 5.1486; log2(2.5/8.5) + 3 log2(5.5/8.5)
    m = example_fit(HCM(clustering="top", top_l=5, top_m=5))
    ll = m.log_likelihood(DOC, base=2)[0]
    assert ll[0] == pytest.approx(math.log2(0.5 / 11.5) + 3 * math.log2(3.5 / 11.5))
    assert ll[1] == pytest.approx(math.log2(2.5 / 8.5) + 3 * math.log2(5.5 / 8.5))
    # two categories: c̄1 = c2's documents, so the decision sends d to c2 only
    assert m.predict(DOC, 0.0).tolist() == [[False, True]]
    assert m.predict_labels(DOC) == [["c2"]]


def test_hcm_gamma_rule_on_example():
    m = example_fit(HCM(gamma=0.5))
    assert [words_of(r) for r in m.membership_[0]] == [
        {"racket", "stroke", "shot"},
        {"goal", "kick"},
        {"ball"},  # rest cluster: share exactly 0.5 in both
    ]
    no_rest = example_fit(HCM(gamma=0.5, rest_cluster=False))
    assert no_rest.membership_.shape == (1, 2, 6)


# ---------------------------------------------------------------------------------------------
# EM


def _random_mixture(seed=0, m=4, V=30, n_models=3):
    rng = np.random.default_rng(seed)
    P = rng.random((m, V)) * (rng.random((m, V)) < 0.6)
    P[:, 0] = 0.0  # a word in no cluster: ignored
    P /= P.sum(axis=1, keepdims=True)
    f = rng.integers(0, 6, size=(n_models, V)).astype(float)
    return P, f


def _plain_em_step(theta, P, f):
    """Textbook EM: responsibilities r_tj ∝ θ_j P_j(w_t), new θ_j = Σ_t r_tj / N (loops)."""
    m, V = P.shape
    new = np.zeros(m)
    N = 0.0
    for w in range(V):
        if f[w] == 0 or P[:, w].sum() == 0:
            continue
        N += f[w]
        z = sum(theta[j] * P[j, w] for j in range(m))
        for j in range(m):
            new[j] += f[w] * theta[j] * P[j, w] / z
    return new / N


def _loglik(theta, P, f):
    tot, N = 0.0, 0.0
    for w in range(P.shape[1]):
        if f[w] and P[:, w].sum() > 0:
            tot += f[w] * math.log(theta @ P[:, w])
            N += f[w]
    return tot / N


def test_helmbold_eta1_equals_plain_em():
    P, f = _random_mixture()
    for s in (1, 2, 5):
        theta, _ = helmbold_em(f, P, eta=1.0, n_iter=s, theta_floor=0.0)
        for i in range(f.shape[0]):
            ref = np.full(P.shape[0], 1.0 / P.shape[0])
            for _ in range(s):
                ref = _plain_em_step(ref, P, f[i])
            np.testing.assert_allclose(theta[i], ref, rtol=1e-12, atol=1e-15)


def test_helmbold_general_eta_step():
    P, f = _random_mixture(seed=1)
    theta0 = np.full((f.shape[0], P.shape[0]), 0.25)
    theta, _ = helmbold_em(f, sp.csr_matrix(P), eta=0.5, n_iter=1, theta_floor=0.0, theta0=theta0)
    for i in range(f.shape[0]):
        em = _plain_em_step(theta0[i], P, f[i])  # = θ ∘ ∇L
        grad = em / theta0[i]
        np.testing.assert_allclose(theta[i], theta0[i] * (0.5 * (grad - 1) + 1), rtol=1e-12)
        assert theta[i].sum() == pytest.approx(1.0)


def test_em_likelihood_does_not_decrease():
    P, f = _random_mixture(seed=2, m=5, V=60, n_models=4)
    theta, hist = helmbold_em(f, P, eta=1.0, n_iter=40, theta_floor=0.0)
    assert hist.shape == (41, 4)
    assert np.all(np.diff(hist, axis=0) >= -1e-12)
    for i in range(4):
        assert hist[-1, i] == pytest.approx(_loglik(theta[i], P, f[i]), rel=1e-10)
    # the FMM model records the same monotone history
    X = sp.csr_matrix(np.random.default_rng(3).integers(0, 4, size=(12, 20)).astype(np.float32))
    Y = np.random.default_rng(4).random((12, 3)) < 0.4
    Y[:3] = np.eye(3, dtype=bool)
    m = FMM(gamma=0.2, n_iter=30, theta_floor=0.0).fit(X, Y)
    assert np.all(np.diff(m.em_history_, axis=0) >= -1e-12)


def test_batched_em_equals_one_problem_at_a_time():
    problems = [_random_mixture(seed=s, m=3, V=25, n_models=2) for s in (10, 11, 12)]
    P = np.stack([p for p, _ in problems])
    f = np.stack([q for _, q in problems])
    theta, hist = helmbold_em(f, P, eta=0.8, n_iter=6)
    assert theta.shape == (3, 2, 3) and hist.shape == (7, 3, 2)
    for b, (p, q) in enumerate(problems):
        t1, h1 = helmbold_em(q, p, eta=0.8, n_iter=6)
        np.testing.assert_allclose(theta[b], t1, rtol=1e-12)
        np.testing.assert_allclose(hist[:, b], h1, rtol=1e-12)


def test_binary_scheme_is_one_two_category_problem_per_category():
    X, Y = _corpus(seed=8)
    m = FMM(gamma=0.3, n_iter=9, scheme="binary").fit(X, Y)
    F = Y.T.astype(float) @ X.toarray()
    T = np.asarray(X.sum(axis=0)).ravel()
    for c in range(Y.shape[1]):
        G = np.vstack([F[c], T - F[c]])  # f(w|c), f(w|c̄)
        member = assign_clusters(G, 0.3)
        np.testing.assert_array_equal(m.membership_[c], member)
        P = cluster_word_distributions(distribute_frequencies(G, member))
        theta, _ = helmbold_em(G, P, n_iter=9)
        np.testing.assert_allclose(m.theta_[c], theta[0], rtol=1e-10)
        np.testing.assert_allclose(m.theta_complement_[c], theta[1], rtol=1e-10)


def test_eta_above_one_keeps_weights_valid():
    P, f = _random_mixture(seed=5)
    theta, _ = helmbold_em(f, P, eta=3.0, n_iter=20)
    assert np.all(theta > 0)
    np.testing.assert_allclose(theta.sum(axis=1), 1.0)


# ---------------------------------------------------------------------------------------------
# statistics and vectorized scoring on random corpora


def _corpus(seed=0, n=40, V=50, k=4):
    rng = np.random.default_rng(seed)
    dense = rng.poisson(0.4, size=(n, V)).astype(np.float32)
    topic = rng.integers(0, k, size=n)
    for i, t in enumerate(topic):  # category-specific words
        dense[i, t * 5 : t * 5 + 5] += rng.poisson(1.5, size=5)
    Y = np.zeros((n, k), dtype=bool)
    Y[np.arange(n), topic] = True
    Y |= rng.random((n, k)) < 0.15  # overlapping categories
    Y[-2:] = False  # documents in no category (they only belong to complements)
    return sp.csr_matrix(dense), Y


MODELS = [
    lambda: FMM(gamma=0.0),
    lambda: FMM(gamma=0.4, n_iter=7),
    lambda: FMM(gamma=0.6, scheme="binary"),
    lambda: FMM(gamma=0.3, eta=0.7, scheme="binary"),
    lambda: HCM(gamma=0.5),
    lambda: HCM(gamma=0.7, rest_cluster=False),
    lambda: HCM(gamma=0.6, scheme="binary"),
    lambda: HCM(clustering="top", top_l=8, top_m=4),
    lambda: WBM(),
    lambda: WBM(alpha=0.5),
    lambda: COS(),
    lambda: COS(complement=False),
]


def test_statistics_are_mergeable():
    X, Y = _corpus()
    whole = sufficient_statistics(X, Y)
    merged = merge_statistics(sufficient_statistics(X[:17], Y[:17]), sufficient_statistics(X[17:], Y[17:]))
    assert set(whole) == set(merged)
    for k in whole:
        np.testing.assert_array_equal(whole[k], merged[k])
    np.testing.assert_array_equal(whole["category_word"], Y.T.astype(float) @ X.toarray())
    # label lists give the same statistics
    names = ["a", "b", "c", "d"]
    lists = [[names[j] for j in np.flatnonzero(r)] for r in Y]
    st = sufficient_statistics(X, lists, names)
    np.testing.assert_array_equal(st["category_word"], whole["category_word"])


@pytest.mark.parametrize("make", MODELS)
def test_fit_from_merged_statistics_equals_fit(make):
    X, Y = _corpus(seed=1)
    a = make().fit(X, Y)
    stats = merge_statistics(sufficient_statistics(X[:11], Y[:11]), sufficient_statistics(X[11:], Y[11:]))
    b = make().fit_from_statistics(stats)
    Xt, _ = _corpus(seed=2, n=15)
    np.testing.assert_allclose(a.decision_function(Xt), b.decision_function(Xt), rtol=1e-12)
    sa, sb = a.get_state(), b.get_state()
    for k, v in sa.items():
        if k != "categories":
            np.testing.assert_allclose(
                np.asarray(v, dtype=float) if np.asarray(v).dtype.kind in "fib" else 0,
                np.asarray(sb[k], dtype=float) if np.asarray(v).dtype.kind in "fib" else 0,
                rtol=1e-12,
            )


def _slow_scores(model, X):
    """Per-document, per-word loop from the model's state (independent of the vectorized code)."""
    st = model.get_state()
    n_cat = len(st["categories"])
    X = X.tocsr()
    out = np.zeros((X.shape[0], n_cat))
    for i in range(X.shape[0]):
        idx = X.indices[X.indptr[i] : X.indptr[i + 1]].tolist()
        cnt = X.data[X.indptr[i] : X.indptr[i + 1]].astype(float).tolist()
        for c in range(n_cat):
            if st["model"] == "cos":
                F = st["category_word"]
                comp = st["word_total"] - F[c]
                vocab = st["word_total"] > 0
                dn = math.sqrt(sum(x * x for w, x in zip(idx, cnt, strict=True) if vocab[w]))
                if dn == 0:
                    out[i, c] = -np.inf
                    continue
                s = sum(x * F[c, w] for w, x in zip(idx, cnt, strict=True)) / (dn * np.linalg.norm(F[c]))
                if st["complement"]:
                    s -= sum(x * comp[w] for w, x in zip(idx, cnt, strict=True)) / (dn * np.linalg.norm(comp))
                out[i, c] = s
                continue
            num, N = 0.0, 0.0
            for w, x in zip(idx, cnt, strict=True):
                if st["model"] == "wbm":
                    F, T, a = st["category_word"], st["word_total"], st["alpha"]
                    if T[w] == 0:
                        continue
                    nv = int((T > 0).sum())
                    comp = T - F[c]
                    pc = (F[c, w] + a) / (F[c][T > 0].sum() + a * nv)
                    pn = (comp[w] + a) / (comp[T > 0].sum() + a * nv)
                elif st["model"] == "fmm":
                    P = st["cluster_word_prob"][0 if st["scheme"] == "global" else c]
                    if P[:, w].sum() == 0:
                        continue
                    pc = sum(st["theta"][c, j] * P[j, w] for j in range(P.shape[0]))
                    pn = sum(st["theta_complement"][c, j] * P[j, w] for j in range(P.shape[0]))
                else:  # hcm: P(k(w)|c)
                    M = st["membership"][0 if st["scheme"] == "global" else c]
                    ks = np.flatnonzero(M[:, w])
                    if len(ks) == 0:
                        continue
                    assert len(ks) == 1
                    pc, pn = st["cluster_prob"][c, ks[0]], st["cluster_prob_complement"][c, ks[0]]
                num += x * (math.log(pc) - math.log(pn))
                N += x
            out[i, c] = num / N if N > 0 else -np.inf
    return out


@pytest.mark.parametrize("make", MODELS)
def test_decision_function_matches_slow_loop(make):
    X, Y = _corpus(seed=3)
    m = make().fit(X, Y)
    Xt, _ = _corpus(seed=4, n=12)
    Xt = sp.vstack([Xt, sp.csr_matrix((1, Xt.shape[1]), dtype=np.float32)]).tocsr()  # an empty doc
    fast = m.decision_function(Xt)
    np.testing.assert_allclose(fast, _slow_scores(m, Xt), rtol=1e-9, atol=1e-12)
    assert np.all(np.isneginf(fast[-1]))
    assert m.predict(Xt, 0.1).tolist() == (fast > 0.1).tolist()


def test_document_without_clustered_words_gets_empty_score():
    m = example_fit(FMM(gamma=0.5))  # 'ball' is in no cluster
    d = sp.csr_matrix(np.array([[0, 0, 0, 0, 0, 3], [0, 0, 0, 1, 0, 3]], dtype=np.float32))
    s = m.decision_function(d)
    assert np.all(np.isneginf(s[0]))
    assert m.covered_length(d).tolist() == [[0, 0], [1, 1]]  # N ignores 'ball'
    assert np.all(example_fit(FMM(gamma=0.5, empty_score=0.0)).decision_function(d)[0] == 0.0)


@pytest.mark.parametrize("make", MODELS)
def test_state_round_trip_through_npz_without_pickle(make, tmp_path):
    X, Y = _corpus(seed=5)
    m = make().fit(X, Y)
    np.savez(tmp_path / "s.npz", **m.get_state())
    with np.load(tmp_path / "s.npz", allow_pickle=False) as z:
        state = {k: z[k] for k in z.files}
    r = type(m)().set_state(state)
    Xt, _ = _corpus(seed=6, n=9)
    np.testing.assert_array_equal(r.decision_function(Xt), m.decision_function(Xt))
    assert list(r.categories_) == list(m.categories_)


def test_errors():
    with pytest.raises(ConfigError, match="'gamma' parameter of HCM"):
        HCM(gamma=0.4).fit(sp.csr_matrix(TABLE1), np.eye(2))
    with pytest.raises(ConfigError, match="'gamma' parameter of FMM"):
        FMM(gamma=1.0).fit(sp.csr_matrix(TABLE1), np.eye(2))
    with pytest.raises(ConfigError, match="'scheme'"):
        FMM(scheme="pairs").fit(sp.csr_matrix(TABLE1), np.eye(2))
    with pytest.raises(NotFittedError):
        WBM().decision_function(DOC)
    m = example_fit(WBM())
    with pytest.raises(ModelError):
        m.decision_function(sp.csr_matrix((1, 3)))
    with pytest.raises(ModelError):
        FMM().set_state(m.get_state())


def test_fmm_gamma0_clusters_are_category_distributions():
    # paper Section 5 (b): as γ -> 0 each cluster's word distribution is its category's (WBM's)
    X, Y = _corpus(seed=7)
    m = FMM(gamma=0.0).fit(X, Y)
    F = Y.T.astype(float) @ X.toarray()
    np.testing.assert_allclose(m.cluster_word_prob_[0], F / F.sum(axis=1, keepdims=True), rtol=1e-12)


# The runner (experiments/li_yamanishi.py) reads the corpus through the product since the move onto
# the product data path: its smoke test is tests/experiments/test_runners_quick.py, the Lewis and
# TOPICS selections with the paper's Table 14 counts are in tests/unit/test_corpus.py.


def test_literal_word_total_lets_nested_categories_share_words() -> None:
    """Issue 32, point 5: the paper's f(w) is the word's total frequency. Three documents, the first
    in both categories (wheat ⊂ grain): word 0 occurs 4 + 1 times, 5 in c1 and 4 in c2. With f(w) =
    Σ_c f(w|c) = 9 its shares are 5/9 and 4/9, so at γ = 0.5 it is in c1's cluster only; with the
    literal f(w) = 5 they are 1.0 and 0.8: in both (hand-computed for every word below)."""
    import numpy as np
    import scipy.sparse as sp

    from sparkhc.models.li_yamanishi.classifiers import FMM, assign_clusters, distribute_frequencies

    X = sp.csr_matrix(np.array([[4, 1, 2, 1, 0, 2], [0, 0, 0, 3, 2, 2], [1, 1, 0, 0, 0, 0]], dtype=np.float32))
    Y = np.array([[1, 1], [0, 1], [1, 0]])
    summed = FMM(gamma=0.5).fit(X, Y).membership_[0].astype(int)
    literal = FMM(gamma=0.5, word_total="corpus").fit(X, Y).membership_[0].astype(int)
    # f(w|c1) = [5, 2, 2, 1, 0, 2], f(w|c2) = [4, 1, 2, 4, 2, 4], f(w) = [5, 2, 2, 4, 2, 4]
    np.testing.assert_array_equal(summed, [[1, 1, 0, 0, 0, 0], [0, 0, 0, 1, 1, 1]])
    np.testing.assert_array_equal(literal, [[1, 1, 1, 0, 0, 0], [1, 0, 1, 1, 1, 1]])
    G = np.array([[5.0, 2, 2, 1, 0, 2], [4, 1, 2, 4, 2, 4]])
    fw = np.array([[5.0, 2, 2, 4, 2, 4]])
    np.testing.assert_array_equal(assign_clusters(G, 0.5, fw), literal.astype(bool))
    # word 0 in both clusters: its total 5 split 5:4 between them
    D = distribute_frequencies(G, literal.astype(bool), fw)
    np.testing.assert_allclose(D[:, 0], [5 * 5 / 9, 5 * 4 / 9])
    # the default reading is unchanged, and saved parameters name the literal one only when used
    assert "word_total" not in FMM(gamma=0.5).fit(X, Y)._params()
    assert FMM(gamma=0.5, word_total="corpus").fit(X, Y)._params()["word_total"] == "corpus"
    from sparkhc.errors import ConfigError

    with pytest.raises(ConfigError, match="word_total"):
        FMM(word_total="total").fit(X, Y)
