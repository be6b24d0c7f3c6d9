"""Early stopping of the epoch selection (sparkhc.epochs), hand-computed curves."""

from __future__ import annotations

import pytest

from sparkhc.epochs import CRITERION, PATIENCE_GROWTH, EarlyStopping, outlook, validation_score


def test_stops_patience_epochs_after_the_first_best():
    es = EarlyStopping(2, window=1, growth=0)
    # epoch:        1      2      3      4 (2 epochs after the best, epoch 2: stop)
    assert [es.add(v) for v in (0.5, 0.7, 0.7, 0.6)] == [False, False, False, True]
    assert es.best == 2  # the tie at epoch 3 goes to the fewer epochs
    assert es.summary() == {"epochs": 2, "epochs_run": 4, "patience": 2, "patience_growth": 0.0, "window": 1, "criterion": "hF+LBMaF",
                            "stopped_early": True, "smoothed_score": [0.5, 0.7, 0.7, 0.6]}


def test_a_later_best_restarts_the_count():
    es = EarlyStopping(2, window=1, growth=0)
    assert [es.add(v) for v in (0.5, 0.4, 0.6, 0.55, 0.58)] == [False, False, False, False, True]
    assert es.best == 3


def test_patience_zero_never_stops():
    es = EarlyStopping(0, window=1)
    assert not any(es.add(v) for v in (0.9, 0.1, 0.1, 0.1, 0.1, 0.1))
    assert es.best == 1 and not es.summary()["stopped_early"]


def test_the_trailing_mean_outlasts_a_lone_early_peak():
    """Window 3 on 0.2, 0.8, 0.2, 0.6, 0.7, 0.9, 0.5, 0.4: smoothed 0.2, 0.5, 0.4, 0.533.., 0.5,
    0.733.., 0.7, 0.6. The raw peak of epoch 2 (0.8) stops a raw patience-3 selection at epoch 5
    with 2 epochs; the trailing mean beats its epoch-2 value at epoch 4 and peaks at epoch 6."""
    raw = EarlyStopping(3, window=1, growth=0)
    assert [raw.add(v) for v in (0.2, 0.8, 0.2, 0.6, 0.7)][-1] is True and raw.best == 2
    es = EarlyStopping(3, growth=0)  # the product's window
    stops = [es.add(v) for v in (0.2, 0.8, 0.2, 0.6, 0.7, 0.9, 0.5, 0.4)]
    assert es.smoothed == pytest.approx([0.2, 0.5, 0.4, 1.6 / 3, 0.5, 2.2 / 3, 0.7, 0.6])
    assert not any(stops) and es.best == 6


def test_the_wait_grows_with_the_best_epoch():
    """Growth 0.5, patience 2, raw curve: each epoch to 8 a new best (wait max(2, ceil(b / 2))); at
    epoch 8 -> wait max(2, 4) = 4, so epochs 9-11 do not stop it and epoch 12 (4 after) does. A flat
    patience would have stopped at epoch 10."""
    curve = (0.1, 0.2, 0.15, 0.25, 0.3, 0.4, 0.5, 0.6, 0.5, 0.5, 0.5, 0.5)
    es = EarlyStopping(2, window=1, growth=0.5)
    stops = [es.add(v) for v in curve]
    assert stops == [False] * 11 + [True] and es.best == 8 and es.wait() == 4
    flat = EarlyStopping(2, window=1, growth=0)
    assert [flat.add(v) for v in curve].index(True) == 9  # epoch 10
    # the product's default growth, and the wait rounded up (best 5 -> ceil(2.5) = 3)
    assert EarlyStopping(10).growth == PATIENCE_GROWTH == 0.5
    g = EarlyStopping(1, window=1)
    for v in (0.1, 0.2, 0.3, 0.4, 0.5):
        g.add(v)
    assert g.wait() == 3
    assert [g.add(v) for v in (0.4, 0.4, 0.4)] == [False, False, True]
    # patience 0 still never stops, whatever the growth
    z = EarlyStopping(0, window=1)
    assert not any(z.add(v) for v in curve[:8] + (0.0,) * 20)


def test_least_more_is_the_wait_left_after_the_best():
    """Growth 0.5, patience 2, raw curve 0.1, 0.3, 0.2: best 2, wait max(2, 1) = 2, so it runs to
    epoch 4 at least: 1 more. A new best at epoch 4 (0.4): wait 2 -> epoch 6, 2 more. Capped by
    max_epochs (5 -> 1 more). Stopped: 0. Patience 0: every epoch to the cap."""
    es = EarlyStopping(2, window=1, growth=0.5)
    for v in (0.1, 0.3, 0.2):
        es.add(v)
    assert es.least_more(100) == 1
    es.add(0.4)
    assert (es.best, es.wait(), es.least_more(100), es.least_more(5)) == (4, 2, 2, 1)
    assert [es.add(v) for v in (0.3, 0.3)] == [False, True] and es.least_more(100) == 0
    z = EarlyStopping(0, window=1)
    z.add(0.5)
    assert z.least_more(7) == 6
    # the product's patience: a best at epoch 18 waits max(10, 9) = 10 epochs
    p = EarlyStopping(10, window=1)
    for k in range(18):
        p.add(k / 100)
    assert p.least_more(100) == 10


def test_outlook_text():
    """What the selection's log line says of the epochs ahead (174 s an epoch: MeSH-sized)."""
    assert outlook(10, 0, 174.0) == "at least 10 more epochs (~29 min at 174.0 s an epoch)"
    assert outlook(1, 2, 3.0) == "at least 1 more epoch (~3 s at 3.0 s an epoch), then 2 more validation trainings"
    assert outlook(45, 1, 174.0) == "at least 45 more epochs (~2.2 h at 174.0 s an epoch), then 1 more validation training"
    # with a budget: said only when the outlook does not fit in what is left
    assert outlook(10, 0, 174.0, left=1800.0) == "at least 10 more epochs (~29 min at 174.0 s an epoch)"
    assert outlook(10, 0, 240.0, left=1500.0) == ("at least 10 more epochs (~40 min at 240.0 s an epoch); "
                                                  "train.time_budget has ~25 min left and will end it sooner")
    assert outlook(3, 0, 60.0, left=-5.0).endswith("train.time_budget has ~0 s left and will end it sooner")
    assert outlook(0, 0, 10.0) == ""


def test_bad_patience_and_empty_curve():
    with pytest.raises(ValueError, match="patience must be >= 0"):
        EarlyStopping(-1)
    with pytest.raises(ValueError, match="no epoch scored"):
        _ = EarlyStopping(3).best
    with pytest.raises(ValueError, match="window must be >= 1"):
        EarlyStopping(3, window=0)
    with pytest.raises(ValueError, match="growth must be >= 0"):
        EarlyStopping(3, growth=-0.5)


def test_score_is_hf_plus_macro_f1():
    assert CRITERION == ("hF", "LBMaF")
    assert validation_score({"hF": 0.75, "LBMaF": 0.5, "LBMiF": 9.0}) == 1.25


def test_a_budget_cut_compares_candidates_on_the_epochs_all_ran():
    """A curve cut at 3 epochs (0.5, 0.6, 0.7: trailing means 0.5, 0.55, 0.6) against one that ran 6
    (0.5, 0.55, 0.6, 0.9, 0.9, 0.9: trailing means 0.5, 0.525, 0.55, 0.683, 0.8, 0.9). On the whole
    curves the second wins (0.9 > 0.6); on the 3 epochs both ran the first does (0.6 > 0.55), and its
    epochs come from its own curve (3). Reversed order, the same candidate."""
    from sparkhc.epochs import choose, choose_on_common_epochs

    cut, full = [0.5, 0.6, 0.7], [0.5, 0.55, 0.6, 0.9, 0.9, 0.9]
    assert choose([cut, full])[:2] == (1, 6)
    assert choose_on_common_epochs([cut, full]) == (0, 3, 3)
    assert choose_on_common_epochs([full, cut]) == (1, 3, 3)
    # the longer curve chosen on the common epochs keeps its own best epoch
    assert choose_on_common_epochs([[0.4, 0.4, 0.4], full]) == (1, 6, 3)
