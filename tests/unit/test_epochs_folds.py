"""Inner folds of the epoch and C selection: how many bands, pooled curves, the choice."""

from __future__ import annotations

import numpy as np
import pytest

from sparkhc.epochs import PooledCurve, choose, inner_folds, paired_gain, prefer_default
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
