"""Cross-fitted per-edge offsets (sparkhc.calibration, train.calibrate; issue 17 part 3): hand-computed
objective, shrinkage and coordinate ascent; the calibrated model's decoding is still the exact argmax
(brute force over every label set); the benchmark's selection never reads test labels."""

from __future__ import annotations

import dataclasses
import importlib.util
import itertools
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from sparkhc import calibration
from sparkhc.batch import SparseBatch, label_matrix
from sparkhc.decoding import bf_bucket, tree_index
from sparkhc.errors import ModelError
from sparkhc.metrics import MetricCounts
from sparkhc.models.murawaki import GlobalPA
from sparkhc.taxonomy import Taxonomy

ROOT = Path(__file__).resolve().parents[2]


def test_label_f1_hand_computed_and_equal_to_the_metrics_module():
    # 3 documents, nodes 0 (root) .. 3; node 3 is never gold nor predicted (left out of the macro mean)
    gold = np.array([[1, 1, 0, 0], [1, 1, 1, 0], [1, 0, 1, 0]], dtype=bool)
    pred = np.array([[1, 1, 1, 0], [1, 0, 1, 0], [1, 0, 1, 0]], dtype=bool)
    cols = np.array([1, 2, 3])
    macro, micro = calibration.label_f1(gold, pred, cols)
    # node 1: tp 1 fn 1 -> F1 2/3; node 2: tp 2 fp 1 -> F1 4/5; micro: tp 3 fp 1 fn 1 -> 6/8
    assert macro == pytest.approx((2 / 3 + 4 / 5) / 2)
    assert micro == pytest.approx(6 / 8)
    assert calibration.objective(gold, pred, cols) == pytest.approx((2 / 3 + 4 / 5) / 2 + 6 / 8)
    # the same definitions as the product's metrics (exact fractions there)
    rng = np.random.default_rng(0)
    tax = Taxonomy.from_edges([("R", "A"), ("R", "B"), ("A", "A1"), ("A", "A2"), ("B", "B1")])
    names = tax.names[1:]

    def sets() -> sp.csr_matrix:  # random ancestor-closed label sets
        return label_matrix([list(rng.choice(names, int(rng.integers(0, 3)))) for _ in range(40)], tax)

    Gm, Pm = sets(), sets()
    G, P = Gm.toarray().astype(bool), Pm.toarray().astype(bool)
    counts = MetricCounts(tax)
    counts.add(Gm, Pm)
    ref = counts.compute()
    macro, micro = calibration.label_f1(G, P, np.arange(1, tax.n_nodes))
    assert macro == pytest.approx(ref["LBMaF"], abs=1e-12) and micro == pytest.approx(ref["LBMiF"], abs=1e-12)


def test_shrink_offsets_hand_computed():
    fits = np.array([[0.2, 0.1, 0.4, 0.3], [0.2, 0.3, -0.4, -0.1], [0.2, 0.2, 0.0, 0.1]])
    got = calibration.shrink_offsets(fits)
    # edge 0: equal fits keep their value; edge 1: mean .2, var .01, var of mean .01/3 -> factor 1 - 1/12;
    # edge 2: mean 0 -> 0; edge 3: mean .1, var .04, var of mean .04/3 > mean^2 -> 0
    np.testing.assert_allclose(got, [0.2, 0.2 * (1 - 1 / 12), 0.0, 0.0], atol=1e-12)
    with pytest.raises(ValueError):
        calibration.shrink_offsets(fits[:1])


def _flat():
    tax = Taxonomy.from_edges([("R", "A"), ("R", "B")])
    return tax, tree_index(tax)


def test_fit_offsets_hand_computed():
    """Leaves A (frequent) and B (rare), no branching: the DP takes every positive leaf, else the
    best one. B's gold document d3 scores -0.1 for B: the smallest grid shift that recovers it
    without a false positive is +0.15 (d2 at -0.3 stays out); no shift of A gains."""
    tax, idx = _flat()
    a, b = tax.id("A") - 1, tax.id("B") - 1
    S = np.zeros((4, 2))
    S[:, a] = [1.0, 1.0, 1.0, -0.2]
    S[:, b] = [-0.5, -0.3, -0.1, -0.05]
    gold = label_matrix([["A"], ["A"], ["A", "B"], ["B"]], tax).toarray().astype(bool)
    cols = calibration.scored_columns(tax)
    fold = calibration.FoldScores(S, None, gold)
    off = calibration.fit_offsets(idx, fold, cols)
    expect = np.zeros(2)
    expect[b] = 0.15
    np.testing.assert_allclose(off, expect)
    # without offsets B's F1 is 2/3 (d3 missed); with them every label is perfect
    sel0 = calibration._decode(idx, S, None, 3)
    sel1 = calibration._decode(idx, S + off, None, 3)
    assert calibration.label_f1(gold, sel0, cols) == pytest.approx(((1 + 2 / 3) / 2, 8 / 9))
    assert calibration.label_f1(gold, sel1, cols) == pytest.approx((1.0, 1.0))


def test_cross_fit_applies_only_what_helps_out_of_fold():
    tax, idx = _flat()
    a, b = tax.id("A") - 1, tax.id("B") - 1
    cols = calibration.scored_columns(tax)
    gold = label_matrix([["A"], ["A"], ["A", "B"], ["B"]], tax).toarray().astype(bool)
    S = np.zeros((4, 2))
    S[:, a] = [1.0, 1.0, 1.0, -0.2]
    S[:, b] = [-0.5, -0.3, -0.1, -0.05]
    same = [calibration.FoldScores(S.copy(), None, gold) for _ in range(3)]
    c = calibration.cross_fit(idx, same, cols, mode="auto")
    # three equal folds: every fit is +0.15 on B, the shrunk mean keeps it, the gain is B's 1/3 F1 / 2 + micro
    assert c.applied and c.offsets[b] == pytest.approx(0.15) and c.offsets[a] == 0.0
    assert c.validation["gain"] == pytest.approx((1 - (1 + 2 / 3) / 2) + (1 - 8 / 9))
    assert c.validation["gain_mean"] == c.validation["gain_shrunk"] and c.combine == "shrunk"  # tie: the first
    # a fold whose B document sits at -0.5: shifts that help the other folds hurt there;
    # folds that disagree are shrunk towards 0, and what does not help out of fold is not applied
    S2 = S.copy()
    S2[:, b] = [0.1, 0.2, 0.5, 0.3]  # B over-predicted (d1, d2): this fold's fit moves B down (by 0.4)
    mixed = [calibration.FoldScores(S.copy(), None, gold), calibration.FoldScores(S2, None, gold),
             calibration.FoldScores(S.copy(), None, gold)]
    c2 = calibration.cross_fit(idx, mixed, cols, mode="auto")
    np.testing.assert_allclose(c2.fold_offsets[:, b], [0.15, -0.4, 0.15])
    # the fits disagree: the shrunk mean of all three and of every pair with -0.4 is 0; the pair left
    # for fold 1 (+0.15, +0.15) changes nothing there (its B false positives stay): shrunk gain 0.
    # The plain means: folds 0 and 2 get (-0.4 + 0.15) / 2 = -0.125 (d3's B still missed, d4's B at
    # -0.175 still beats A's -0.2), fold 1 gets +0.15: no decision changes, gain 0 as well
    assert calibration.shrink_offsets(c2.fold_offsets)[b] == 0.0
    assert c2.validation["gain_shrunk"] == 0.0 and c2.validation["gain_mean"] == 0.0
    assert not c2.applied and c2.validation["gain"] == 0.0 and c2.combine == "shrunk"
    np.testing.assert_array_equal(c2.offsets, np.zeros(2))
    on = calibration.cross_fit(idx, mixed, cols, mode="on")
    assert on.applied and np.allclose(on.offsets, calibration.shrink_offsets(on.fold_offsets))
    mean_only = calibration.cross_fit(idx, mixed, cols, mode="on", combines=("mean",))
    assert mean_only.combine == "mean" and np.allclose(mean_only.offsets, on.fold_offsets.mean(axis=0))
    with pytest.raises(ValueError):
        calibration.cross_fit(idx, same[:2], cols)
    with pytest.raises(ValueError):
        calibration.cross_fit(idx, same, cols, mode="off")


def _brute_best(tax: Taxonomy, s: np.ndarray, bf: np.ndarray, R: int = 3) -> tuple[float, frozenset]:
    """The best non-empty leaf set from the definition: sum of the edge scores over tree(m), plus
    one node-specific and one shared branching weight per internal node of tree(m)."""
    leaves = [c for c in range(tax.n_nodes) if len(tax.children[c]) == 0]
    best: tuple[float, frozenset] = (-np.inf, frozenset())
    for r in range(1, len(leaves) + 1):
        for m in itertools.combinations(leaves, r):
            tree: set[int] = set()
            for c in m:
                while c != 0:
                    tree.add(c)
                    c = int(tax.parent[c])
            score = sum(float(s[c - 1]) for c in tree)
            kids: dict[int, int] = {}
            for c in tree:
                kids[int(tax.parent[c])] = kids.get(int(tax.parent[c]), 0) + 1
            for p, k in kids.items():
                bk = int(bf_bucket(k, R))
                score += float(bf[p, bk]) + float(bf[tax.n_nodes, bk])
            if score > best[0]:
                best = (score, frozenset(m))
    return best


def _tiny_corpus(n: int = 60, seed: int = 0) -> tuple[Taxonomy, SparseBatch]:
    tax = Taxonomy.from_edges([("R", "A"), ("R", "B"), ("A", "A1"), ("A", "A2"), ("A", "A3"), ("B", "B1"),
                               ("B", "B2"), ("R", "C")])
    leaves = [tax.names[c] for c in tax.leaves]
    rng = np.random.default_rng(seed)
    V = 12
    X = rng.random((n, V)) * (rng.random((n, V)) < 0.4)
    labels = [sorted(set(rng.choice(leaves, int(rng.integers(1, 3))).tolist())) for _ in range(n)]
    for i, labs in enumerate(labels):
        for lab in labs:
            X[i, leaves.index(lab)] += 1.0
    return tax, SparseBatch(sp.csr_matrix(X.astype(np.float32)), np.array([f"d{i}" for i in range(n)]), labels)


def test_calibrated_model_decodes_the_exact_argmax_of_the_shifted_scores():
    tax, batch = _tiny_corpus()
    model = GlobalPA(tax, batch.n_features, branching=True, update="cost_augmented", bias=0.3, dtype="float64",
                     epochs=3).fit(batch)
    S0 = model.edge_scores_of(batch)
    bf = model.decode_bf()
    assert bf is not None
    off = np.random.default_rng(1).normal(0, 0.5, tax.n_edges)
    model.shift_edges(off)
    np.testing.assert_allclose(model.edge_scores_of(batch), S0 + off, atol=1e-6)  # float32 features
    pred = model.predict(batch)
    changed = 0
    for i in range(len(batch)):
        _, best = _brute_best(tax, S0[i] + off, bf)
        assert frozenset(tax.id(n) for n in pred[i]) == best, i
        changed += best != _brute_best(tax, S0[i], bf)[1]
    assert changed > 0  # the offsets did change some decisions
    with pytest.raises(ModelError, match="bias > 0"):
        GlobalPA(tax, batch.n_features, branching=True).fit(batch).shift_edges(off)
    with pytest.raises(ModelError):
        model.shift_edges(off[:-1])


@pytest.fixture(scope="module")
def rare_gt():
    spec = importlib.util.spec_from_file_location("rare_gt", ROOT / "benchmarks" / "rare_gt.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["rare_gt"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_poisoned_test_labels_change_nothing_but_the_test_score(rare_gt):
    explore = rare_gt.explore
    tax, b = _tiny_corpus(150, seed=3)
    runs = []
    for poison in (False, True):
        tr, te = b.subset(np.arange(100)), b.subset(np.arange(100, 150))
        if poison:  # every test document labelled with one leaf, wrong for most of them
            te = dataclasses.replace(te, labels=[["C"] for _ in range(len(te))])
        mask = ~tax.virtual.copy()
        mask[0] = False
        rnd = explore.Round(tr, te, tax, explore.model_taxonomy(tax, tr), mask, b.n_features)
        runs.append(rare_gt.run_round(rnd, explore.parse_variant(rare_gt.DEFAULT), folds=3, epochs=3, shards=2,
                                      seed=1))
    r0, r1 = runs
    assert r0["validation"] == r1["validation"] and r0["selected"] == r1["selected"]
    assert r0["offsets"] == r1["offsets"]
    assert r0["test_off"] != r1["test_off"]  # the poison reached the test scores, and only them
