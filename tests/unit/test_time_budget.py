"""``train.time_budget``: :class:`sparkhc.epochs.TimeBudget`'s plans, on a fake clock, against
numbers computed by hand."""

from __future__ import annotations

import pytest

from sparkhc.epochs import TimeBudget


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_barrier_stages_are_sized_by_the_measured_costs():
    """One epoch first (its cost unknown); then as many as fit at that stage's time per epoch; then
    start-up and epoch cost from a least-squares line through the stages; 0 once nothing fits."""
    clk = Clock()
    b = TimeBudget(1000, clock=clk)
    b.start_selection(1 / 0.9, reserve_final=False)
    assert b.stage_epochs(0, 10) == 1
    clk.t = 280.0  # stage 1: one epoch trained and scored in 280 s (start-up included)
    b.epoch_done()
    assert b.stage_epochs(1, 10) == 2  # o = 0, c = 280: 720 s left hold 2 epochs (560 s), not 3 (840 s)
    for _ in range(2):  # stage 2: 400 s for 2 epochs
        clk.t += 200.0
        b.epoch_done()
    assert b.stages == [(1, 280.0)]
    # stages (1, 280 s) and (2, 400 s): c = 120 s an epoch, o = 160 s a stage; 320 s left: 160 + 120 m <= 320
    assert b.stage_epochs(3, 10) == 1
    assert b.costs() == pytest.approx((160.0, 120.0))
    clk.t += 280.0
    b.epoch_done()
    assert not b.cut
    assert b.stage_epochs(4, 10) == 0 and b.cut  # 40 s left, a stage of one epoch costs 280 s
    assert b.stage_epochs(0, 10) == 1  # a (later) validation training still runs one epoch


def test_the_stage_limit_and_the_first_stage_warm_up():
    """The stage never runs more than its limit; a first stage slower than every later one (one-off
    warm-up) is left out of the fit when the fit through all stages has no positive slope, and with
    stages of one length left the last stage's time per epoch is the cost."""
    clk = Clock()
    b = TimeBudget(100, clock=clk)
    b.start_selection(1.0, reserve_final=False)
    assert b.stage_epochs(0, 10) == 1
    clk.t = 5.0
    b.epoch_done()
    assert b.stage_epochs(1, 3) == 3  # c = 5: 95 s hold 19 epochs, the limit is 3
    for _ in range(3):
        clk.t += 0.5
        b.epoch_done()
    assert b.stage_epochs(4, 2) == 2  # stages (1, 5 s), (3, 1.5 s): slope < 0, then one stage left: c = 0.5
    assert b.costs() == (0.0, 0.5)


def test_engines_without_stages_reserve_the_final_training():
    """Several validation bands (no band model kept): after each epoch one more runs only if it, the
    later bands' trainings as long as this one, and the final training of that many epochs (r = 10/9
    as long an epoch) fit. Budget 120 s, 10 s an epoch, 2 bands, hand-computed."""
    clk = Clock()
    b = TimeBudget(120, clock=clk)
    b.start_selection(1 / 0.9, reserve_final=True)
    runs = []
    for later in (1, 0):  # band 1 (one band after it), band 2
        done = 0
        while True:
            clk.t += 10.0
            b.epoch_done()
            done += 1
            if not b.another_epoch(done, later):
                break
        runs.append(done)
    # band 1 after epoch 3 (t = 30): 10 x (1 + 4) + 10/9 x 4 x 10 = 94.4 > 90 left
    # band 2 after epoch 4 (t = 70): 10 + 10/9 x 5 x 10 = 65.6 > 50 left (after 3: 54.4 <= 60)
    assert runs == [3, 4] and b.cut
    assert b.final_estimate(4) == pytest.approx(4 * 10 / 0.9)
    assert b.final_estimate(4) <= b.left() < b.final_estimate(5)  # 44.4 s and 55.6 s against 50 s left


def test_a_budget_must_be_positive():
    with pytest.raises(ValueError, match="> 0 seconds"):
        TimeBudget(0)
