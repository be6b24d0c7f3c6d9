"""Metrics: hand-computed values for every metric, conventions, merging, sklearn cross-check.

Expected values are worked out by hand in the comments (exact fractions). ``compute`` derives
every float from exact rationals rounded once, so ``float(Fraction(a, b))`` (= ``a / b`` for
ints) must match exactly; square roots are compared with a relative tolerance of 1e-15.
"""

from __future__ import annotations

import io
import math
import subprocess
import sys
from fractions import Fraction

import numpy as np
import pytest
import scipy.sparse as sp

from sparkhc.batch import label_matrix
from sparkhc.metrics import (
    MDCCounts,
    MetricCounts,
    break_even_point,
    evaluate,
    format_table,
    model_size,
    pr_curve,
)
from sparkhc.taxonomy import Taxonomy

# ROOT -> A, B; A -> AA, AB; B -> BA, BB.   ids: ROOT 0, A 1, B 2, AA 3, AB 4, BA 5, BB 6
EDGES7 = [("ROOT", "A"), ("ROOT", "B"), ("A", "AA"), ("A", "AB"), ("B", "BA"), ("B", "BB")]

# d1 perfect; d2 wrong subtree part; d3 partial-path gold (deepest gold label B is internal),
# over-deep prediction; d4 empty prediction.
GOLD7 = [["AA"], ["AB", "BA"], ["B"], ["BB"]]
PRED7 = [["AA"], ["AA"], ["BB"], []]
# closed:  gold d1 {A,AA} d2 {A,AB,B,BA} d3 {B}    d4 {B,BB}
#          pred d1 {A,AA} d2 {A,AA}      d3 {B,BB} d4 {}


@pytest.fixture(scope="module")
def tax7() -> Taxonomy:
    return Taxonomy.from_edges(EDGES7)


def F(a: int, b: int = 1) -> float:
    return float(Fraction(a, b))


def test_taxonomy_ids(tax7):
    assert tax7.names == ("ROOT", "A", "B", "AA", "AB", "BA", "BB")


def test_seven_node_tree_all_metrics(tax7):
    r = evaluate(GOLD7, PRED7, tax7)
    # per node (tp, fp, fn): A (2,0,0) B (1,0,2) AA (1,1,0) AB (0,0,1) BA (0,0,1) BB (0,1,1)
    # totals TP 4, FP 2, FN 5
    assert r["LBMiP"] == F(4, 6)
    assert r["LBMiR"] == F(4, 9)
    assert r["LBMiF"] == F(8, 15)  # 2TP / (2TP + FP + FN)
    # macro over the 6 labels (all occur): P 1,1,1/2,0,0,0  R 1,1/3,1,0,0,0  F 1,1/2,2/3,0,0,0
    assert r["LBMaP"] == F(5, 12)
    assert r["LBMaR"] == F(7, 18)
    assert r["LBMaF"] == F(13, 36)
    # example-based: d1 (1,1,1); d2 |G∩P|=1,|P|=2,|G|=4 -> (1/2,1/4,1/3);
    # d3 1,2,1 -> (1/2,1,2/3); d4 empty prediction -> (0,0,0)
    assert r["EBP"] == F(1, 2)
    assert r["EBR"] == F(9, 16)
    assert r["EBF"] == F(1, 2)
    # hierarchical: Σ|tree∩| = 2+1+1+0 = 4, Σ|tree(m̂)| = 6, Σ|tree(m)| = 9
    assert r["hP"] == F(2, 3)
    assert r["hR"] == F(4, 9)
    assert r["hF"] == F(8, 15)  # 2 (2/3)(4/9) / (2/3 + 4/9)
    # Xiao: micro/macro F1 over all non-root nodes (= the default scored set here)
    assert r["node_micro_F1"] == F(8, 15)
    assert r["node_macro_F1"] == F(13, 36)
    # H-loss, costs c(A)=c(B)=1/2, c(AA..BB)=1/4:
    # d1 none; d2 AA (A agrees), AB (A agrees), B (top); BA not (B disagrees) -> 3, 1/4+1/4+1/2=1
    # d3 BB (B agrees) -> 1, 1/4;  d4 B (top), BB not -> 1, 1/2
    assert r["hloss_uniform"] == F(5, 4)
    assert r["hloss_normalized"] == F(7, 16)
    # symmetric difference d1 0, d2 4, d3 1, d4 2; 0/1: 3 of 4 wrong
    assert r["symdiff"] == F(7, 4)
    assert r["zero_one"] == F(3, 4)
    # population std: uniform (0,3,1,1): E[x²] 11/4 - (5/4)² = 19/16
    assert r["hloss_uniform_std"] == pytest.approx(math.sqrt(19) / 4, rel=1e-15)
    # normalized (0,1,1/4,1/2): E[x²] = 21/64, minus 49/256 = 35/256
    assert r["hloss_normalized_std"] == pytest.approx(math.sqrt(35) / 16, rel=1e-15)
    # symdiff (0,4,1,2): 21/4 - 49/16 = 35/16
    assert r["symdiff_std"] == pytest.approx(math.sqrt(35) / 4, rel=1e-15)
    assert r["zero_one_std"] == pytest.approx(math.sqrt(3) / 4, rel=1e-15)
    assert r["n_docs"] == 4
    assert "BEP" not in r


def test_seven_node_tree_leaf_scored(tax7):
    leaves = ["AA", "AB", "BA", "BB"]
    r = evaluate(GOLD7, PRED7, tax7, scored=leaves)
    # leaves (tp, fp, fn): AA (1,1,0) AB (0,0,1) BA (0,0,1) BB (0,1,1): TP 1, FP 2, FN 3
    assert r["LBMiP"] == F(1, 3)
    assert r["LBMiR"] == F(1, 4)
    assert r["LBMiF"] == F(2, 7)
    assert r["LBMaP"] == F(1, 8)  # (1/2 + 0 + 0 + 0) / 4
    assert r["LBMaR"] == F(1, 4)  # (1 + 0 + 0 + 0) / 4
    assert r["LBMaF"] == F(1, 6)  # (2/3) / 4
    # EB over leaves: d1 (1,1,1); d2 i0 p1 g2 -> 0; d3 partial path: gold has no leaf, pred {BB}
    # -> empty gold with non-empty prediction: EBP = EBR = EBF = 0; d4 p0 g1 -> 0
    assert r["EBP"] == F(1, 4)
    assert r["EBR"] == F(1, 4)
    assert r["EBF"] == F(1, 4)
    # hierarchical, H-loss and node metrics are over all nodes: unchanged
    full = evaluate(GOLD7, PRED7, tax7)
    for k in ("hP", "hR", "hF", "node_micro_F1", "node_macro_F1", "hloss_uniform", "symdiff"):
        assert r[k] == full[k]


def test_conventions_empty_sets(tax7):
    # empty gold and empty prediction on the scored labels: EBP = EBR = EBF = 1
    r = evaluate([["A"]], [["A"]], tax7, scored=["AA", "AB"])
    assert (r["EBP"], r["EBR"], r["EBF"]) == (1.0, 1.0, 1.0)
    # no scored label occurs at all: micro ratios with zero denominators are 0, macro 0
    assert (r["LBMiP"], r["LBMiR"], r["LBMiF"], r["LBMaF"]) == (0.0, 0.0, 0.0, 0.0)
    # empty prediction, non-empty gold: EBP = 0 (and EBR = EBF = 0)
    r = evaluate([["AA"]], [[]], tax7)
    assert (r["EBP"], r["EBR"], r["EBF"]) == (0.0, 0.0, 0.0)
    assert r["LBMiP"] == 0.0 and r["hP"] == 0.0
    # empty gold, non-empty prediction: EBR = 0
    r = evaluate([[]], [["AA"]], tax7)
    assert (r["EBP"], r["EBR"], r["EBF"]) == (0.0, 0.0, 0.0)
    # both empty over all nodes: perfect on every measure
    r = evaluate([[]], [[]], tax7)
    assert (r["EBP"], r["EBR"], r["EBF"]) == (1.0, 1.0, 1.0)
    assert (r["hloss_uniform"], r["zero_one"], r["symdiff"]) == (0.0, 0.0, 0.0)
    # no documents: every metric 0
    r = MetricCounts(tax7).compute()
    assert r["n_docs"] == 0 and all(v == 0 for v in r.values())


def test_macro_excludes_labels_absent_from_gold_and_prediction(tax7):
    # only the A subtree is involved: B, BA, BB never occur and are excluded from macro averages.
    # gold {A,AA},{A,AB}; pred {A,AA},{A,AA}: A (2,0,0) AA (1,1,0) AB (0,0,1)
    r = evaluate([["AA"], ["AB"]], [["AA"], ["AA"]], tax7)
    assert r["LBMaP"] == F(1, 2)  # (1 + 1/2 + 0) / 3
    assert r["LBMaR"] == F(2, 3)  # (1 + 1 + 0) / 3
    assert r["LBMaF"] == F(5, 9)  # (1 + 2/3 + 0) / 3
    assert r["node_macro_F1"] == F(5, 9)


def test_virtual_leaves_are_never_counted(tax7):
    vtax = tax7.with_self_leaves()
    assert vtax.names == ("ROOT", "A", "B", "A/_self", "AA", "AB", "B/_self", "BA", "BB")
    mc = MetricCounts(vtax)
    assert mc.scored.tolist() == [False, True, True, False, True, True, False, True, True]
    with pytest.raises(ValueError, match="B/_self"):
        MetricCounts(vtax, scored=["AA", "B/_self"])
    with pytest.raises(ValueError, match="ROOT"):
        MetricCounts(vtax, scored=[0, 1])
    # the same documents as test_seven_node_tree_all_metrics, the partial path written with
    # virtual leaves (as a leaf-only model would predict them before mapping back)
    gold = [["AA"], ["AB", "BA"], ["B/_self"], ["BB"]]
    pred = [["AA"], ["AA"], ["BB"], []]
    r = evaluate(gold, pred, vtax)
    assert r == evaluate(GOLD7, PRED7, tax7)
    # normalized costs count real children only: c(AA) = 1/2 * 1/2, not 1/2 * 1/3
    assert mc.cost(vtax.id("AA")) == Fraction(1, 4)
    assert r["hloss_normalized"] == F(7, 16)
    # a predicted virtual leaf counts as its real parent: gold {B}, pred {B, B/_self} is perfect
    r = evaluate([["B"]], [["B/_self"]], vtax)
    assert r["EBF"] == 1.0 and r["hloss_uniform"] == 0.0 and r["symdiff"] == 0.0
    counts = MetricCounts(vtax)
    counts.add(label_matrix([["B/_self"]], vtax), label_matrix([["A/_self"]], vtax))
    assert counts.tp[vtax.virtual].sum() == 0
    assert counts.fp[vtax.virtual].sum() == 0 and counts.fn[vtax.virtual].sum() == 0


# Cesa-Bianchi et al. 2004, Figure 1 style: a forest of two trees (so the roots R1, R2 are labels)
# R1 -> A, B, C;  A -> A1, A2;  A1 -> A1a, A1b;  B -> B1, B2, B3;  R2 -> D, E
# normalized costs: c(R1)=c(R2)=1/2; c(A)=c(B)=c(C)=1/6; c(A1)=c(A2)=1/12; c(B*)=1/18;
# c(A1a)=c(A1b)=1/24; c(D)=c(E)=1/4
FOREST = [
    ("R1", "A"), ("R1", "B"), ("R1", "C"), ("A", "A1"), ("A", "A2"), ("A1", "A1a"), ("A1", "A1b"),
    ("B", "B1"), ("B", "B2"), ("B", "B3"), ("R2", "D"), ("R2", "E"),
]  # fmt: skip


def test_hloss_cesa_bianchi_forest():
    tax = Taxonomy.from_edges(FOREST)
    assert tax.root_name == "_ROOT_" and tax.n_nodes == 15
    mc = MetricCounts(tax)
    expected_costs = {"R1": (1, 2), "A": (1, 6), "A1": (1, 12), "A1a": (1, 24), "B2": (1, 18), "D": (1, 4)}
    for name, (a, b) in expected_costs.items():
        assert mc.cost(tax.id(name)) == Fraction(a, b)
    gold = [["A1a", "B1"], ["E"], ["C"], ["A"]]
    pred = [["A2", "B2", "B3", "D"], ["E"], [], ["A1"]]
    # d1 gold {R1,A,A1,A1a,B,B1}, pred {R1,A,A2,B,B2,B3,R2,D}; y≠ŷ at A1 A1a A2 B1 B2 B3 R2 D (8).
    #    H-loss mistakes (all ancestors agree): A1, A2, B1, B2, B3, R2 (A1a: A1 differs; D: R2
    #    differs) -> uniform 6, normalized 1/12 + 1/12 + 3/18 + 1/2 = 5/6
    # d2 perfect -> 0, 0, symdiff 0
    # d3 gold {R1,C}, pred {} -> R1 only (C's parent differs): 1, 1/2, symdiff 2
    # d4 gold {R1,A} (partial path), pred {R1,A,A1}: A1 -> 1, 1/12, symdiff 1
    r = evaluate(gold, pred, tax)
    assert r["hloss_uniform"] == F(8, 4)
    assert r["hloss_normalized"] == F(17, 48)  # (10/12 + 0 + 6/12 + 1/12) / 4
    assert r["symdiff"] == F(11, 4)
    assert r["zero_one"] == F(3, 4)
    assert r["hloss_uniform_std"] == pytest.approx(math.sqrt(Fraction(22, 4)), rel=1e-15)
    # E[x²] = (100 + 36 + 1) / 144 / 4 = 137/576; minus (17/48)² -> 259/2304
    assert r["hloss_normalized_std"] == pytest.approx(math.sqrt(259) / 48, rel=1e-15)
    assert r["symdiff_std"] == pytest.approx(math.sqrt(155) / 4, rel=1e-15)
    counts = MetricCounts(tax)
    counts.add(label_matrix(gold, tax), label_matrix(pred, tax))
    per_node = {tax.names[i]: int(c) for i, c in enumerate(counts.hloss_nodes) if c}
    assert per_node == {"A1": 2, "A2": 1, "B1": 1, "B2": 1, "B3": 1, "R2": 1, "R1": 1}


def test_not_ancestor_closed_is_rejected(tax7):
    mc = MetricCounts(tax7)
    closed = label_matrix([["AA"]], tax7)
    open_ = label_matrix([["AA"]], tax7, closed=False)
    with pytest.raises(ValueError, match="'AA' is present but its parent 'A'"):
        mc.add(closed, open_)
    with pytest.raises(ValueError, match="columns"):
        mc.add(closed, sp.csr_matrix((1, 3)))


# ------------------------------------------------------------------ break-even point
def test_pr_curve_and_bep_exact_crossing():
    # desc: .9+ .8- .7+ .6+ .5- .4+ .2- .1-   G = 4
    # cut .9: P 1, R 1/4; .8: 1/2, 1/4; .7: 2/3, 2/4; .6: 3/4, 3/4 -> P = R (PP = G): BEP 3/4
    scores = np.array([0.1, 0.2, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9])
    gold = np.array([0, 0, 1, 0, 1, 1, 0, 1], dtype=bool)
    thr, p, r = pr_curve(scores, gold)
    assert thr.tolist() == [0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.2, 0.1]
    assert p.tolist() == [1, 1 / 2, 2 / 3, 3 / 4, 3 / 5, 4 / 6, 4 / 7, 4 / 8]
    assert r.tolist() == [1 / 4, 1 / 4, 2 / 4, 3 / 4, 3 / 4, 1, 1, 1]
    assert break_even_point(scores, gold) == 0.75


def test_bep_interpolated_between_cutoffs_with_ties():
    # .9+ | .8+ .8- .8- (one tie group) | .5+ | .1-    G = 3
    # cut .9: P 1, R 1/3, d = 2/3;  cut .8: TP 2, PP 4: P 1/2, R 2/3, d = -1/6
    # λ = (2/3) / (2/3 + 1/6) = 4/5;  BEP = 1 + 4/5 (1/2 - 1) = 3/5 (= 1/3 + 4/5 · 1/3)
    scores = np.array([0.8, 0.9, 0.1, 0.8, 0.5, 0.8])
    gold = np.array([0, 1, 0, 1, 1, 0], dtype=bool)
    assert break_even_point(scores, gold) == F(3, 5)
    # the order of the pairs does not matter
    perm = np.array([5, 3, 1, 0, 4, 2])
    assert break_even_point(scores[perm], gold[perm]) == F(3, 5)


def test_bep_edge_cases():
    # top pair is a miss: cut .9 has TP 0 (P = R = 0, not a crossing); cut .5: TP 1, PP 2 = G
    assert break_even_point(np.array([0.9, 0.5, 0.4, 0.3]), np.array([0, 1, 1, 0], bool)) == 0.5
    # all pairs tied: one cut-off P 1/4, R 1; virtual start (R 0, P 1/4): λ = 1/4 -> base rate 1/4
    assert break_even_point(np.full(4, 0.5), np.array([0, 0, 1, 0], bool)) == 0.25
    # no gold pair
    assert break_even_point(np.array([0.3, 0.2]), np.zeros(2, bool)) == 0.0
    # perfect ranking
    assert break_even_point(np.array([0.9, 0.8, 0.1]), np.array([1, 1, 0], bool)) == 1.0
    with pytest.raises(ValueError, match="NaN"):
        break_even_point(np.array([np.nan]), np.array([True]))


def test_bep_from_metric_counts_and_merge(tax7):
    leaves = ["AA", "AB", "BA", "BB"]  # ids 3..6
    gold = label_matrix([["AA"], ["BA", "BB"]], tax7)
    pred = label_matrix([["AA"], ["BB"]], tax7)
    # scored pairs: d1 AA .9+, AB .8-, BA .1-, BB .2-;  d2 AA .8-, AB .3-, BA .8+, BB .5+
    # = the list of test_bep_interpolated_between_cutoffs_with_ties plus .3- .2-: BEP 3/5
    # (root and internal columns hold 5.0 and must be ignored)
    scores = np.array([[5, 5, 5, 0.9, 0.8, 0.1, 0.2], [5, 5, 5, 0.8, 0.3, 0.8, 0.5]])
    whole = MetricCounts(tax7, leaves)
    whole.add(gold, pred, scores)
    assert whole.compute()["BEP"] == F(3, 5)
    a, b = MetricCounts(tax7, leaves), MetricCounts(tax7, leaves)
    a.add(gold[1:], pred[1:], scores[1:])
    b.add(gold[:1], pred[:1], scores[:1])
    assert a.merge(b).compute() == whole.compute()
    thr, p, r = whole.pr_curve()
    assert thr.tolist() == [0.9, 0.8, 0.5, 0.3, 0.2, 0.1]
    assert p[:2].tolist() == [1.0, 0.5] and r[:2].tolist() == [1 / 3, 2 / 3]
    # scores for some batches only is an error
    c = MetricCounts(tax7, leaves)
    c.add(gold, pred, scores)
    c.add(gold, pred)
    with pytest.raises(ValueError, match="scores were given for 2 of 4"):
        c.compute()


# ------------------------------------------------------------------ MDC
def test_mdc_by_hand():
    gold = np.array([[0, 1, 2], [1, 1, 0], [2, 0, 1], [0, 0, 0]])
    pred = np.array([[0, 1, 2], [1, 0, 0], [2, 1, 0], [1, 0, 2]])
    # wrong spaces per doc: 0, 1 (space 1), 2 (spaces 1, 2), 2 (spaces 0, 2)
    # per-space accuracy: 3/4, 2/4, 2/4 -> hamming 7/12; exact 1/4; at most one wrong 2/4
    mc = MDCCounts()
    mc.add(gold, pred)
    r = mc.compute()
    assert r["hamming_score"] == F(7, 12)
    assert r["exact_match"] == F(1, 4)
    assert r["sub_exact_match"] == F(2, 4)
    assert r["n_docs"] == 4
    assert mc.per_space_accuracy().tolist() == [0.75, 0.5, 0.5]
    assert (r["accuracy_0"], r["accuracy_1"], r["accuracy_2"]) == (0.75, 0.5, 0.5)
    a, b = MDCCounts(), MDCCounts()
    a.add(gold[:1], pred[:1])
    b.add(gold[1:], pred[1:])
    merged = MDCCounts.from_arrays(MDCCounts().merge(b).merge(a).to_arrays())
    assert merged.compute() == r
    with pytest.raises(ValueError, match="3 class spaces"):
        mc.add(gold[:, :2], pred[:, :2])


# ------------------------------------------------------------------ random data helpers
def random_taxonomy(rng: np.random.Generator, n: int = 14) -> Taxonomy:
    edges = [("R", "n1")]
    for i in range(2, n + 1):
        p = int(rng.integers(0, i))
        edges.append(("R" if p == 0 else f"n{p}", f"n{i}"))
    return Taxonomy.from_edges(edges)


def random_label_sets(rng: np.random.Generator, tax: Taxonomy, n_docs: int) -> list[list[str]]:
    out = []
    for _ in range(n_docs):
        k = int(rng.integers(0, 4))
        out.append([tax.names[int(c)] for c in rng.integers(1, tax.n_nodes, size=k)])
    return out


def _arrays_equal(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def test_merge_of_parts_equals_whole_exactly():
    rng = np.random.default_rng(7)
    tax = random_taxonomy(rng)
    n = 120
    G = label_matrix(random_label_sets(rng, tax, n), tax)
    P = label_matrix(random_label_sets(rng, tax, n), tax)
    S = np.round(rng.random((n, tax.n_nodes)), 2)  # rounded: many ties across parts
    S[rng.random(S.shape) < 0.05] = -0.0
    whole = MetricCounts(tax)
    whole.add(G, P, S)
    cuts = [0, 17, 60, 61, 61, n]
    parts = []
    for lo, hi in zip(cuts[:-1], cuts[1:], strict=True):
        part = MetricCounts(tax)
        part.add(G[lo:hi], P[lo:hi], S[lo:hi])
        parts.append(part)
    left = MetricCounts(tax)
    for part in parts:
        left.merge(part)
    right = MetricCounts(tax)
    for part in reversed(parts):
        right.merge(MetricCounts.from_arrays(tax, part.to_arrays()))
    assert _arrays_equal(left.to_arrays(), whole.to_arrays())
    assert _arrays_equal(right.to_arrays(), whole.to_arrays())
    assert left.compute() == whole.compute() == right.compute()
    # np.savez round trip without pickle
    buf = io.BytesIO()
    np.savez(buf, **whole.to_arrays())
    buf.seek(0)
    with np.load(buf, allow_pickle=False) as z:
        loaded = MetricCounts.from_arrays(tax, {k: z[k] for k in z.files})
    assert loaded.compute() == whole.compute()
    # counts of another taxonomy are refused
    from sparkhc.errors import ModelError

    with pytest.raises(ModelError, match="another taxonomy"):
        MetricCounts.from_arrays(Taxonomy.from_edges(EDGES7), whole.to_arrays())


def test_label_based_matches_sklearn():
    from sklearn.metrics import f1_score, precision_score, recall_score

    rng = np.random.default_rng(3)
    tax = random_taxonomy(rng, 20)
    n = 80
    G = label_matrix(random_label_sets(rng, tax, n), tax)
    P = label_matrix(random_label_sets(rng, tax, n), tax)
    leaves = tax.leaves
    for scored in (None, leaves):
        r = MetricCounts(tax, None if scored is None else leaves)
        r.add(G, P)
        res = r.compute()
        cols = np.arange(1, tax.n_nodes) if scored is None else leaves
        g = G[:, cols].toarray().astype(int)
        p = P[:, cols].toarray().astype(int)
        assert res["LBMiF"] == pytest.approx(f1_score(g, p, average="micro", zero_division=0), rel=1e-12)
        assert res["LBMiP"] == pytest.approx(
            precision_score(g, p, average="micro", zero_division=0), rel=1e-12
        )
        assert res["LBMiR"] == pytest.approx(recall_score(g, p, average="micro", zero_division=0), rel=1e-12)
        occ = (g.sum(axis=0) + p.sum(axis=0)) > 0  # macro over labels in gold or prediction
        assert res["LBMaF"] == pytest.approx(
            f1_score(g[:, occ], p[:, occ], average="macro", zero_division=0), rel=1e-12
        )
        assert res["LBMaP"] == pytest.approx(
            precision_score(g[:, occ], p[:, occ], average="macro", zero_division=0), rel=1e-12
        )
        if scored is None:
            assert res["node_micro_F1"] == res["LBMiF"]
            assert res["node_macro_F1"] == res["LBMaF"]


# ------------------------------------------------------------------ helpers
def test_model_size():
    w = np.array([[0.0, 1e-8, -2e-7], [0.5, -1e-7, 3.0]])
    s = sp.csr_matrix(np.array([[0.0, 1e-6, 1e-9]]))
    assert model_size([w]) == 3  # -2e-7, 0.5, 3.0
    assert model_size([w, s]) == 4
    assert model_size([w], tol=0.4) == 2


def test_format_table():
    text = format_table({"LBMiF": 0.5, "n_docs": 12, "EBF": 0.25})
    assert text.splitlines() == ["EBF     0.2500", "LBMiF   0.5000", "n_docs      12"]
    text = format_table({"FLAT": {"EBF": 0.5, "hF": 0.75}, "DP-GT-BF": {"EBF": 0.625}}, keys=["EBF", "hF"])
    assert text.splitlines() == [
        "system       EBF      hF",
        "--------  ------  ------",
        "FLAT      0.5000  0.7500",
        "DP-GT-BF  0.6250       -",
    ]


def test_core_does_not_import_pyspark():
    code = "import sys, sparkhc.metrics; sys.exit(1 if 'pyspark' in sys.modules else 0)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


def test_normalized_hloss_without_int64_common_denominator(monkeypatch):
    # force the exact Python fallback used when the cost denominators' lcm exceeds int64
    import sparkhc.metrics as m

    tax = Taxonomy.from_edges(FOREST)
    gold = label_matrix([["A1a", "B1"], ["E"], ["C"], ["A"]], tax)
    pred = label_matrix([["A2", "B2", "B3", "D"], ["E"], [], ["A1"]], tax)
    fast = MetricCounts(tax)
    fast.add(gold, pred)
    monkeypatch.setattr(m, "_INT64_SAFE", 1)
    slow = MetricCounts(tax)
    assert slow._cost_w is None
    slow.add(gold, pred)
    assert (
        slow.hnorm_hist
        == fast.hnorm_hist
        == {Fraction(5, 6): 1, Fraction(0): 1, Fraction(1, 2): 1, Fraction(1, 12): 1}
    )
    assert slow.compute() == fast.compute()
