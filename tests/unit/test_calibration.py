"""Cross-fitted per-edge offsets (sparkhc.calibration, train.calibrate; issue 17 part 3): hand-computed
objective and exact line search (and the line search against brute force over shifts); the calibrated model's decoding is still the exact argmax
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


def _flat():
    tax = Taxonomy.from_edges([("R", "A"), ("R", "B")])
    return tax, tree_index(tax)


def _ab_example():
    """Leaves A (frequent) and B (rare), no branching: the DP takes every positive leaf, else the
    best one. Gold: d0 A, d1 A, d2 A+B, d3 B."""
    tax, idx = _flat()
    a, b = tax.id("A") - 1, tax.id("B") - 1
    S = np.zeros((4, 2))
    S[:, a] = [1.0, 1.0, 1.0, -0.2]
    S[:, b] = [-0.5, -0.3, -0.1, -0.05]
    gold = label_matrix([["A"], ["A"], ["A", "B"], ["B"]], tax).toarray().astype(bool)
    return tax, idx, a, b, S, gold


def test_fit_offsets_exact_line_search_hand_computed():
    """Uncalibrated: A perfect, B F1 2/3 (d2's B missed), objective (1 + 2/3) / 2 + 8/9.
    Edge A first: per document the best tree with A and without A, and the breakpoint V_out - V_in:
    d0 {A} 1 vs {B} -0.5 -> -1.5; d1 -> -1.3; d2 {A} 1 vs {B} -0.1 -> -1.1; d3 {A} -0.2 vs {B} -0.05
    -> +0.15. Intervals (first j documents by breakpoint take the tree with A):
    j=0 (shift -1.6): A F1 0, B tp 2 fp 2 -> 2/3: macro 1/3;  j=1 (-1.4): A 1/2, B 4/5: macro 0.65;
    j=2 (-1.2, the middle of (-1.3, -1.1)): d2 -> {B}: A tp 2 fn 1 -> 4/5, B tp 2 -> 1: macro 0.9, micro
    tp 4 fn 1 -> 8/9 (the best); j=3 (the current decisions); j=4 (+0.25): d3 -> {A}: A 6/7, B 2/3.
    So A moves by -1.2. Edge B then (A at -0.2, -0.2, -0.2, -1.4): breakpoints d0 0.3, d1 0.1,
    d2 -0.1, d3 -1.35; moving up past d1 replaces d1's A by B (worse), down past d2 loses d2's B
    (worse): no move. The second sweep moves nothing (A's best interval now contains 0)."""
    tax, idx, a, b, S, gold = _ab_example()
    cols = calibration.scored_columns(tax)
    fold = calibration.FoldScores(S, None, gold)
    off = calibration.fit_offsets(idx, fold, cols)
    expect = np.zeros(2)
    expect[a] = -1.2
    np.testing.assert_allclose(off, expect, atol=1e-12)
    sel0 = calibration._decode(idx, S, None, 3)
    sel1 = calibration._decode(idx, S + off, None, 3)
    assert calibration.label_f1(gold, sel0, cols) == pytest.approx(((1 + 2 / 3) / 2, 8 / 9))
    assert calibration.label_f1(gold, sel1, cols) == pytest.approx((0.9, 8 / 9))
    # pooling two copies of the fold doubles every count: the same offsets
    np.testing.assert_allclose(calibration.fit_offsets(idx, [fold, fold], cols), expect, atol=1e-12)
    # a search range of |shift| <= 1 leaves d0..d2's A breakpoints out (always with A): A cannot gain;
    # B's breakpoints d3 -0.15, d2 0.1 ({A, B} 0.9 vs {A} 1), d1 0.3, d0 0.5: the middle of (0.1, 0.3)
    # adds d2's B and every label is perfect (coordinate ascent is greedy in edge order: the larger
    # range moved A first and stopped at the lower optimum above)
    off1 = calibration.fit_offsets(idx, fold, cols, max_shift=1.0)
    expect1 = np.zeros(2)
    expect1[b] = 0.2
    np.testing.assert_allclose(off1, expect1, atol=1e-9)
    assert calibration.label_f1(gold, calibration._decode(idx, S + off1, None, 3), cols) == pytest.approx((1.0, 1.0))


def test_line_search_against_brute_force_over_shifts():
    """Per edge, on random scores with branching weights: the shift the line search returns, decoded
    by the exact DP of the shifted scores, reaches the objective it claims, and no shift of a fine
    grid (every 0.005 over +-3, each decoded by the DP) does better (the grid can miss intervals
    narrower than its step, so it may do worse)."""
    tax, batch = _tiny_corpus(40, seed=2)
    idx = tree_index(tax)
    rng = np.random.default_rng(4)
    S = rng.normal(-0.3, 0.8, (40, tax.n_edges))
    bf = rng.normal(0, 0.3, (tax.n_nodes + 1, 4))
    gold = label_matrix(batch.labels or [], tax).toarray().astype(bool)
    cols = calibration.scored_columns(tax)
    fold = calibration.FoldScores(S, bf, gold)
    base = calibration.objective(gold, calibration._decode(idx, S, bf, 3), cols)
    for e in range(tax.n_edges):
        t_in, t_out, brk = calibration._two_trees(idx, [fold], np.zeros(tax.n_edges), e, 3)
        shift, gain = calibration._line_search(gold[:, cols], t_in[:, cols], t_out[:, cols], brk, 3.0)
        grid = np.linspace(-3, 3, 1201)
        vals = []
        for d in grid:
            b = np.zeros(tax.n_edges)
            b[e] = d
            vals.append(calibration.objective(gold, calibration._decode(idx, S + b, bf, 3), cols))
        assert max(vals) <= base + gain + 1e-9, e
        assert gain >= 0.0
        b = np.zeros(tax.n_edges)
        b[e] = shift
        assert calibration.objective(gold, calibration._decode(idx, S + b, bf, 3), cols) == pytest.approx(base + gain)


def test_cross_fit_applies_only_what_helps_out_of_fold():
    tax, idx, a, b, S, gold = _ab_example()
    cols = calibration.scored_columns(tax)
    same = [calibration.FoldScores(S.copy(), None, gold) for _ in range(3)]
    c = calibration.cross_fit(idx, same, cols, mode="auto", kinds=("edges",))
    # three equal folds: every nested fit (two pooled copies) is A -1.2 (the hand-computed test
    # above); out of fold each fold gets macro 0.9 instead of 5/6, micro unchanged
    assert c.applied and c.offsets[a] == pytest.approx(-1.2) and c.offsets[b] == 0.0
    np.testing.assert_allclose(c.fold_offsets[:, a], [-1.2] * 3)
    assert c.validation["gain"] == pytest.approx(0.9 - (1 + 2 / 3) / 2)
    assert c.validation["fold_gain_se"] == pytest.approx(0.0)  # equal folds: no spread, the gain is taken
    assert c.validation["micro_on"] == pytest.approx(8 / 9) and c.validation["macro_on"] == pytest.approx(0.9)
    # a fold where A is already right everywhere and B over-predicted: what the others fit hurts it
    S2 = S.copy()
    S2[:, a] = [1.0, 1.0, 1.0, -0.5]
    S2[:, b] = [0.1, 0.2, 0.5, 0.3]  # B predicted on d0 and d1 (false positives)
    mixed = [calibration.FoldScores(S2, None, gold)] + [calibration.FoldScores(S.copy(), None, gold)
                                                        for _ in range(2)]
    c2 = calibration.cross_fit(idx, mixed, cols, mode="auto", kinds=("edges",))
    on_all = calibration.cross_fit(idx, mixed, cols, mode="on", kinds=("edges",))
    # the nested fits and the out-of-fold objective, recomputed here from fit_offsets and label_f1
    nested = [calibration.fit_offsets(idx, [f for j, f in enumerate(mixed) if j != i], cols) for i in range(3)]
    np.testing.assert_allclose(c2.fold_offsets, np.stack(nested))
    g = np.concatenate([gold] * 3)
    off = np.concatenate([calibration._decode(idx, f.S, None, 3) for f in mixed])
    on = np.concatenate([calibration._decode(idx, f.S + nested[i], None, 3) for i, f in enumerate(mixed)])
    gain = calibration.objective(g, on, cols) - calibration.objective(g, off, cols)
    assert c2.validation["gain"] == pytest.approx(gain)
    # the one-SE rule: the per-fold gains (each fold has the 4 documents of gold) and their spread
    n = gold.shape[0]
    per = np.array([calibration.objective(g[i * n:(i + 1) * n], on[i * n:(i + 1) * n], cols)
                    - calibration.objective(g[i * n:(i + 1) * n], off[i * n:(i + 1) * n], cols) for i in range(3)])
    se = per.std(ddof=1) / np.sqrt(3)
    assert c2.validation["fold_gain_mean"] == pytest.approx(per.mean())
    assert c2.validation["fold_gain_se"] == pytest.approx(se)
    assert c2.applied == (gain > 1e-12 and per.mean() > se)
    if not c2.applied:
        np.testing.assert_array_equal(c2.offsets, np.zeros(2))
    assert on_all.applied
    np.testing.assert_allclose(on_all.offsets, calibration.fit_offsets(idx, mixed, cols))
    with pytest.raises(ValueError):
        calibration.cross_fit(idx, same[:2], cols)
    with pytest.raises(ValueError):
        calibration.cross_fit(idx, same, cols, mode="off")


def _shared_example():
    """Three documents with A and B; the model scores A +1 and B -0.2 (+-0.05 by document)."""
    tax, idx = _flat()
    a, b = tax.id("A") - 1, tax.id("B") - 1
    S = np.zeros((3, 2))
    S[:, a] = 1.0
    S[:, b] = [-0.15, -0.2, -0.25]
    gold = label_matrix([["A", "B"]] * 3, tax).toarray().astype(bool)
    return idx, calibration.scored_columns(tax), calibration.FoldScores(S, None, gold), gold


def test_shared_shift_hand_computed_and_chosen_before_per_edge_offsets():
    """Every document has A and B; the model scores A +1 and B -0.2 (+-0.05 by document), so the DP
    decodes A alone. Shifting every edge by d > 0.25 adds B everywhere (micro 2/3 -> 1, macro 1/2 -> 1);
    the grid's first such value nearest 0 is 0.30 (0.25 still leaves the document with -0.25 out).
    auto takes the shared shift (a gain in every group, no spread) and per-edge offsets add nothing
    beyond it, so the kind applied is "shared"."""
    idx, cols, fold, gold = _shared_example()
    assert calibration.fit_shared(idx, fold, cols) == pytest.approx(0.30)
    c = calibration.cross_fit(idx, [fold] * 3, cols, mode="auto")
    assert c.applied and c.kind == "shared"
    np.testing.assert_allclose(c.offsets, [0.30, 0.30])
    assert c.validation["gain_shared"] == pytest.approx(2.0 - (0.5 + 2 / 3))
    assert c.validation["gain_edges"] == pytest.approx(c.validation["gain_shared"])  # nothing more to gain
    on = calibration.cross_fit(idx, [fold] * 3, cols, mode="on")
    assert on.applied and on.kind == "edges"
    # a model already right: nothing is applied
    right = calibration.FoldScores(np.ones((3, 2)), None, gold)
    c0 = calibration.cross_fit(idx, [right] * 3, cols, mode="auto")
    assert not c0.applied and c0.kind == "" and not c0.offsets.any()
    with pytest.raises(ValueError, match="kinds"):
        calibration.cross_fit(idx, [fold] * 3, cols, kinds=("global",))


def test_cost_bounds_skip_what_would_not_fit(monkeypatch):
    """The bounds: :func:`too_large` names the scores a calibration would hold (the MeSH-sized
    band: 27,151 documents x 35,215 edges), :func:`edge_fit_cells` counts the per-edge fit's DP
    cells (hand-computed), and above MAX_EDGE_FIT_CELLS cross_fit fits the shared shift only
    (auto and on), saying so in its summary."""
    assert calibration.too_large(27151, 35215) and "27,151 documents x 35,215 edges" in calibration.too_large(27151, 35215)
    assert calibration.too_large(5000, 96) == ""  # Reuters-21578 at calibration_documents = 5000
    assert calibration.too_large(2**17, 2**10) == "" and calibration.too_large(2**17 + 1, 2**10)
    assert calibration.edge_fit_cells(10, 4, sweeps=3, groups=3) == 2 * 4 * 3 * 4 * 10 * 4
    assert calibration.edge_fit_cells(5000, 96) < calibration.MAX_EDGE_FIT_CELLS < calibration.edge_fit_cells(9000, 1000)
    idx, cols, fold, gold = _shared_example()
    full = calibration.cross_fit(idx, [fold] * 3, cols, mode="on")
    assert full.kind == "edges" and full.note == "" and "note" not in full.summary()
    monkeypatch.setattr(calibration, "MAX_EDGE_FIT_CELLS", calibration.edge_fit_cells(9, 2) - 1)
    for mode in ("auto", "on"):
        c = calibration.cross_fit(idx, [fold] * 3, cols, mode=mode)
        assert c.applied and c.kind == "shared" and "gain_edges" not in c.validation
        np.testing.assert_allclose(c.offsets, [0.30, 0.30])
        assert "per-edge offsets not fitted" in c.summary()["note"]


def test_one_se_rule_and_split_folds():
    """worth_applying: a pooled gain whose per-fold mean does not exceed its standard error is not
    taken; split_folds cuts a scored fold by part numbers, keeping its branching weights."""
    assert calibration.worth_applying(0.02, 0.02, 0.01)
    assert not calibration.worth_applying(0.02, 0.02, 0.03)  # within the noise
    assert not calibration.worth_applying(0.0, 0.02, 0.0)  # no pooled gain
    S = np.arange(12, dtype=np.float64).reshape(6, 2)
    gold = np.eye(6, 3, dtype=bool)
    bf = np.ones((2, 2))
    parts = calibration.split_folds([calibration.FoldScores(S, bf, gold)], [np.array([0, 1, 2, 0, 1, 2])])
    assert len(parts) == 3
    np.testing.assert_array_equal(parts[1].S, S[[1, 4]])
    np.testing.assert_array_equal(parts[2].gold, gold[[2, 5]])
    assert all(p.bf is bf for p in parts)


def test_cross_fit_deals_many_folds_into_three_groups():
    """Five folds, three groups: fold i in group i mod 3; each group's offsets are fitted on the
    other groups' folds (recomputed here from fit_offsets), the out-of-fold objective pooled."""
    tax, idx, a, b, S, gold = _ab_example()
    cols = calibration.scored_columns(tax)
    rng = np.random.default_rng(1)
    folds = [calibration.FoldScores(S + rng.normal(0, 0.3, S.shape), None, gold) for _ in range(5)]
    c = calibration.cross_fit(idx, folds, cols, mode="on", kinds=("edges",))
    groups = [[0, 3], [1, 4], [2]]
    nested = [calibration.fit_offsets(idx, [folds[i] for i in range(5) if i not in grp], cols) for grp in groups]
    np.testing.assert_allclose(c.fold_offsets, np.stack(nested))
    g = np.concatenate([gold] * 5)
    off = np.concatenate([calibration._decode(idx, folds[i].S, None, 3) for grp in groups for i in grp])
    on = np.concatenate([calibration._decode(idx, folds[i].S + nested[j], None, 3)
                         for j, grp in enumerate(groups) for i in grp])
    gain = calibration.objective(g, on, cols) - calibration.objective(g, off, cols)
    assert c.validation["gain"] == pytest.approx(gain)
    n = gold.shape[0]
    per, start = [], 0
    for grp in groups:
        stop = start + n * len(grp)
        per.append(calibration.objective(g[start:stop], on[start:stop], cols)
                   - calibration.objective(g[start:stop], off[start:stop], cols))
        start = stop
    assert c.validation["fold_gain_mean"] == pytest.approx(np.mean(per))
    assert c.validation["fold_gain_se"] == pytest.approx(np.std(per, ddof=1) / np.sqrt(3))


@pytest.mark.parametrize("threads", [2, 3])
def test_the_line_searches_on_threads_fit_the_same_offsets(threads):
    """``threads`` only spreads the independent DP solves of a line search (two per fold) over a
    pool: the offsets, nested fits and record are those of one thread, bit for bit. A depth-2
    taxonomy with branching weights, four folds of noisy scores."""
    tax = Taxonomy.from_edges([("R", "A"), ("R", "B"), ("A", "A1"), ("A", "A2"), ("A", "A3"), ("B", "B1"),
                               ("B", "B2"), ("R", "C")])
    idx = tree_index(tax)
    cols = calibration.scored_columns(tax)
    rng = np.random.default_rng(7)
    leaves = [tax.names[c] for c in tax.leaves]
    folds = []
    for _ in range(4):
        labels = [sorted(set(rng.choice(leaves, int(rng.integers(1, 3))).tolist())) for _ in range(40)]
        gold = label_matrix(labels, tax).toarray().astype(bool)
        S = rng.normal(-0.3, 0.8, (40, idx.n_edges)) + 0.9 * gold[:, 1:]
        bf = rng.normal(0, 0.2, (tax.n_nodes + 1, 4))
        folds.append(calibration.FoldScores(S, bf, gold))
    one = calibration.cross_fit(idx, folds, cols, mode="on")
    many = calibration.cross_fit(idx, folds, cols, mode="on", threads=threads)
    assert np.any(one.offsets != 0)  # the fit moves something, so equality says something
    np.testing.assert_array_equal(many.offsets, one.offsets)
    np.testing.assert_array_equal(many.fold_offsets, one.fold_offsets)
    assert many.validation == one.validation
    np.testing.assert_array_equal(calibration.fit_offsets(idx, folds, cols, threads=threads),
                                  calibration.fit_offsets(idx, folds, cols))


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
