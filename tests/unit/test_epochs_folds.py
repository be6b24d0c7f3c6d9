"""Inner folds of the epoch and C selection: how many bands, pooled curves, the choice."""

from __future__ import annotations

import numpy as np
import pytest

from sparkhc.epochs import PooledCurve, choose, inner_folds, jackknife_gain, paired_gain, prefer_default
from sparkhc.metrics import MetricCounts
from sparkhc.taxonomy import Taxonomy


@pytest.mark.parametrize("n,fraction,want", [
    (11314, 0.1, 1),   # 1131 held out by one band >= 1000
    (7770, 0.1, 2),    # 777 per band: ceil(1000 / 777)
    (1310, 0.1, 8),    # 131 per band: ceil(1000 / 131)
    (500, 0.1, 10),    # capped at the 10 bands there are
    (500, 0.25, 4),    # 4 bands of 25%
    (0, 0.1, 10),
])
def test_inner_folds_hold_out_the_target_within_the_bands(n, fraction, want):
    assert inner_folds(n, fraction) == want


def _counts(tax, gold, pred):
    mc = MetricCounts(tax)
    mc.add(np.array(gold, dtype=bool), np.array(pred, dtype=bool))
    return mc


def test_pooled_curve_sums_the_folds_and_carries_a_stopped_fold_forward():
    """Two flat labels A, B; fold 1 runs 3 epochs, fold 2 runs 2; epoch 3 of the pool is fold 1's
    epoch 3 plus fold 2's epoch 2. Micro-F1 by hand from the summed tp / fp / fn."""
    tax = Taxonomy.from_edges([("ROOT", "A"), ("ROOT", "B")])
    # node columns: ROOT, A, B (ROOT is not scored)
    g1 = [[True, True, False], [True, False, True]]
    g2 = [[True, True, False]]
    f1 = [[[True, False, True], [True, False, True]],   # tp 1 fp 1 fn 1
          [[True, True, False], [True, True, False]],   # tp 1 fp 1 fn 1
          [[True, True, False], [True, False, True]]]   # tp 2
    f2 = [[[True, False, True]],                        # fp 1 fn 1
          [[True, True, False]]]                        # tp 1
    pool = PooledCurve()
    for t, p in enumerate(f1):
        pool.add(t, _counts(tax, g1, p))
    pool.end_fold()
    for t, p in enumerate(f2):
        pool.add(t, _counts(tax, g2, p))
    pool.end_fold()
    m = pool.metrics()
    assert len(m) == 3 and pool.epochs_run == [3, 2] and pool.folds == 2
    # (tp, fp, fn): epoch 1: (1+0, 1+1, 1+1); epoch 2: (1+1, 1, 1); epoch 3: (2+1, 0, 0)
    for got, c, (tp, fp, fn) in zip(m, pool.pooled, [(1, 2, 2), (2, 1, 1), (3, 0, 0)], strict=True):
        assert c.compute()["LBMiF"] == pytest.approx(2 * tp / (2 * tp + fp + fn))
        assert got == {k: c.compute()[k] for k in ("hF", "LBMaF")}  # the criterion, as compute gives it


def test_pooled_curve_refuses_epochs_out_of_order():
    tax = Taxonomy.from_edges([("ROOT", "A"), ("ROOT", "B")])
    pool = PooledCurve()
    with pytest.raises(ValueError, match="epoch 1 after 0"):
        pool.add(1, _counts(tax, [[True, True, False]], [[True, True, False]]))


def test_choose_takes_the_best_trailing_mean_and_the_earlier_candidate_on_ties():
    # trailing means of 3: a -> 1, 1.5, 2, 2.333, 2 ; b -> 3, 2, 1
    a = [1.0, 2.0, 3.0, 2.0, 1.0]
    b = [3.0, 1.0, -1.0]
    assert choose([a, b]) == (1, 1, 3.0)
    assert choose([a, [1.0, 2.0, 3.0, 2.0, 1.0]])[0] == 0
    i, ep, val = choose([a])
    assert (i, ep) == (0, 4) and val == pytest.approx(7 / 3)


def test_paired_gain_over_folds_and_the_one_standard_error_rule():
    # fold curves (smoothed); candidate at epoch 3, baseline at epoch 2; fold 2 stopped after 2 epochs
    best = [[1.0, 1.2, 1.5], [1.0, 1.4], [0.9, 1.0, 1.3]]
    base = [[1.1, 1.3, 1.2], [1.1, 1.2, 1.0], [1.0, 1.25, 1.1]]
    # differences: 1.5 - 1.3 = 0.2; 1.4 - 1.2 = 0.2 (fold 2 at its last epoch); 1.3 - 1.25 = 0.05
    mean, se = paired_gain(best, 3, base, 2)
    d = np.array([0.2, 0.2, 0.05])
    assert mean == pytest.approx(d.mean()) and se == pytest.approx(d.std(ddof=1) / np.sqrt(3))
    assert not prefer_default((mean, se))  # 0.15 > 0.05: the candidate wins
    assert prefer_default((0.01, 0.02)) and prefer_default((-0.1, 0.01))
    assert paired_gain([[1.0]], 1, [[0.5]], 1) == (0.5, float("inf"))  # one fold: never beyond the noise
    assert prefer_default((0.5, float("inf")))


def _recall(c: np.ndarray) -> float:
    """A ratio of sums over documents (tp / (tp + fn)), as hF and macro-F1 are."""
    return float(c[0].sum() / (c[0].sum() + c[2].sum()))


def test_jackknife_gain_on_one_band_hand_computed():
    # G = 3 groups, one node; counts (tp, fp, fn) per group
    best = np.array([[[2], [0], [0]], [[1], [0], [1]], [[3], [0], [1]]])  # all 6/8; leave out g: 4/6, 5/6, 3/4
    base = np.array([[[1], [0], [1]], [[1], [0], [1]], [[2], [0], [2]]])  # 4/8 with or without any group
    d, se = jackknife_gain([best], [base], _recall)
    # d_g = 1/6, 1/3, 1/4 (mean 1/4); se = sqrt(2/3 * ((1/12)^2 + (1/12)^2)) = sqrt(4/3) / 12
    assert d == pytest.approx(0.25)
    assert se == pytest.approx(np.sqrt(4 / 3) / 12)
    assert not prefer_default((d, se))  # 0.25 > 0.096
    # a smoothing window of two epochs: the means of the epochs' scores (the same epoch twice: the same)
    assert jackknife_gain([best, best], [base, base], _recall) == pytest.approx((d, se))
    # the window's epochs count separately: base's second epoch (all 6/8) makes the full difference 0.125
    d2, _ = jackknife_gain([best, best], [base, best], _recall)
    assert d2 == pytest.approx(0.125)
    with pytest.raises(ValueError, match="groups"):
        jackknife_gain([best], [base[:2]], _recall)
    assert jackknife_gain([best[:1]], [base[:1]], _recall) == (0.5, float("inf"))  # one group: 2/2 - 1/2
    with pytest.raises(ValueError, match="no epoch"):
        jackknife_gain([], [base], _recall)


def test_jackknife_of_a_mean_is_the_usual_standard_error():
    """One document per group and a score that is a mean over documents: the delete-one jackknife's
    standard error of the paired difference is exactly sd / sqrt(n) of the per-document differences."""
    rng = np.random.default_rng(3)
    n = 40
    a, b = rng.integers(0, 2, n), rng.integers(0, 2, n)  # per-document 0/1 outcomes of two candidates

    def counts(x: np.ndarray) -> np.ndarray:  # tp = the outcome, fn = its complement: tp + fn = 1 a document
        return np.stack([x, np.zeros(n, dtype=np.int64), 1 - x], axis=1)[:, :, None]

    d, se = jackknife_gain([counts(a)], [counts(b)], _recall)
    diff = (a - b).astype(float)
    assert d == pytest.approx(diff.mean())
    assert se == pytest.approx(diff.std(ddof=1) / np.sqrt(n))
