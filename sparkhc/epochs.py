"""The number of training epochs chosen on validation data (``train.epochs = 0``, the default).

A fresh model is trained on the training documents less a seeded validation slice, scored on the
slice after every epoch, and the training then runs on all training documents for the first epoch
count with the best score. The score is hF + LB macro-F1 over the model taxonomy's real nodes
(:data:`CRITERION`): hF alone is flat after a few epochs while the rare labels are still being
learnt (docs/benchmarks.md, "epoch-selection"). The curve is smoothed by a trailing mean over
:data:`WINDOW` epochs (a 10% slice is small: one noisy early peak would otherwise stop the
selection; docs/benchmarks.md, "epoch-selection-nested": on slices the choice was not made on,
the smoothed rule scored best of the rules tried). The validation training stops early once
``max(patience, PATIENCE_GROWTH x best)`` epochs in a row have not beaten the best smoothed score
(:class:`EarlyStopping`), or at ``max_epochs``. The wait grows with the epoch of the best score so
far (the "patience increase" of Bengio's early-stopping recipe): a curve that climbs slowly, as
iterative parameter mixing over many small shards does (each shard's update enters the mixture
divided by the shard count), is not cut on a plateau it would leave, while a fast curve still stops
``patience`` epochs after its best (what a flat wait costs many shards: docs/benchmarks.md,
"mixing-shards-default").

Pure numpy: the Spark and driver paths of :func:`sparkhc.spark.mixing.selection.select_epochs` share it.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from sparkhc.metrics import MetricCounts

#: the validation score: the sum of these metrics of :class:`sparkhc.metrics.MetricCounts`
CRITERION = ("hF", "LBMaF")
#: epochs of the trailing mean the selection compares (1 = the raw curve)
WINDOW = 3
#: the wait after the best epoch ``b`` so far is ``max(patience, ceil(PATIENCE_GROWTH * b))`` epochs
#: (0 = a flat ``patience``); chosen on validation curves only, as the smallest of the values tried
#: whose in-sample regret is negligible at 1, 2 and 10 shards on the three development corpora
#: (docs/benchmarks.md, "mixing-shards-default")
PATIENCE_GROWTH = 0.5
#: ``C = "auto"`` (the global model's default): the values of C compared on the inner folds
AUTO_C_GRID = (0.1, 0.3, 1.0)
#: inner folds: enough disjoint validation bands to hold out at least this many training documents
#: in all (at most ``1 / fraction`` bands, i.e. full cross-validation); a large training part gets
#: one band. A cost bound, not an accuracy setting: see :func:`inner_folds`.
VALIDATION_DOCUMENTS = 1000
#: ``train.epochs = 0`` for models that are not trained by mixing (no validation curve): this many
FALLBACK_EPOCHS = 10
#: ``C = "auto"`` on one validation band: the band's documents fall into this many groups (by their
#: position in doc-id order) for the delete-a-group jackknife of :func:`jackknife_gain`
JACKKNIFE_GROUPS = 10


def validation_score(metrics: dict[str, float]) -> float:
    """The selection score of one epoch's validation metrics: the sum of :data:`CRITERION`."""
    return float(sum(float(metrics[k]) for k in CRITERION))


@dataclass
class EarlyStopping:
    """The validation curve of one selection and when to stop it.

    :meth:`add` appends an epoch's score and says whether to stop: :meth:`wait` epochs after the
    best so far (``max(patience, ceil(growth * best))``, ``patience`` > 0) without a higher
    smoothed score (:attr:`smoothed`: the mean of the last ``window`` scores, fewer at the start).
    ``patience = 0`` never stops early. The chosen epoch
    count (:attr:`best`) is the first maximum of the smoothed curve, so a curve cut by the rule and
    the same curve run to the end give the same choice whenever the end adds no higher score.
    """

    patience: int
    window: int = WINDOW
    growth: float = PATIENCE_GROWTH
    curve: list[float] = field(default_factory=list)
    smoothed: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        if int(self.patience) < 0:
            raise ValueError(f"patience must be >= 0 (0 = no early stopping), not {self.patience}")
        if int(self.window) < 1:
            raise ValueError(f"window must be >= 1, not {self.window}")
        if not float(self.growth) >= 0:
            raise ValueError(f"growth must be >= 0, not {self.growth}")

    @property
    def best(self) -> int:
        """The chosen number of epochs: the first with the highest smoothed score (the fewest epochs)."""
        if not self.smoothed:
            raise ValueError("no epoch scored")
        return int(np.argmax(self.smoothed)) + 1

    def wait(self) -> int:
        """Epochs without a better smoothed score after which :meth:`add` stops (for the best so far)."""
        return max(int(self.patience), math.ceil(float(self.growth) * self.best - 1e-9))

    def should_stop(self) -> bool:
        return int(self.patience) > 0 and len(self.curve) - self.best >= self.wait()

    def add(self, score: float) -> bool:
        """Record the next epoch's score; True when the training should stop after it."""
        self.curve.append(float(score))
        tail = self.curve[-int(self.window):]
        self.smoothed.append(float(sum(tail) / len(tail)))
        return self.should_stop()

    def least_more(self, max_epochs: int) -> int:
        """The fewest epochs this curve still runs (at most ``max_epochs`` in all): up to the wait
        after the best so far, which only a new best lengthens. 0 once :meth:`should_stop`."""
        done = len(self.curve)
        if self.should_stop():
            return 0
        end = self.best + self.wait() if int(self.patience) > 0 else int(max_epochs)
        return max(0, min(end, int(max_epochs)) - done)

    def summary(self) -> dict[str, Any]:
        return {"epochs": self.best, "epochs_run": len(self.curve), "patience": int(self.patience),
                "patience_growth": float(self.growth), "window": int(self.window), "criterion": "+".join(CRITERION),
                "stopped_early": self.should_stop(),
                "smoothed_score": list(self.smoothed)}


def bands_holding(target: int, per_band: float, fraction: float) -> int:
    """The fewest disjoint validation bands of ``fraction`` (``per_band`` documents each) that hold
    ``target`` documents in all: at least 1, at most the ``floor(1 / fraction)`` bands there are."""
    bands = 10000 // int(round(float(fraction) * 10000))
    return int(min(bands, max(1, math.ceil(int(target) / max(float(per_band), 1.0)))))


def inner_folds(n_docs: int, fraction: float, target: int = VALIDATION_DOCUMENTS) -> int:
    """The number of disjoint validation bands (inner folds) of ``fraction`` of ``n_docs`` training
    documents: the fewest that hold out ``target`` documents in all (:func:`bands_holding`). A
    validation slice of 131 documents decides nothing finer than several points of macro-F1; k bands
    pool k times the documents for k times the cost of a validation training, and a large training
    part (``fraction * n >= target``) keeps one."""
    return bands_holding(target, float(fraction) * int(n_docs), fraction)


class PooledCurve:
    """The validation counts of inner folds pooled epoch by epoch (out-of-fold scores of every band).

    Folds are trained one after another; :meth:`add` takes the running fold's counts after each
    of its epochs, :meth:`end_fold` closes it. A fold stopped early (no better score in its wait)
    keeps contributing its last epoch's counts to later epochs, so that every epoch of the pooled
    curve scores every held-out document once. With one fold the curve is that fold's own.
    """

    def __init__(self) -> None:
        self.pooled: list[MetricCounts] = []
        self._done: MetricCounts | None = None
        self._last: MetricCounts | None = None
        self._ran = 0
        self.folds = 0
        self.epochs_run: list[int] = []

    def add(self, epoch: int, counts: MetricCounts) -> None:
        """The running fold's counts after its epoch ``epoch`` (0-based, in order)."""
        if epoch != self._ran:
            raise ValueError(f"PooledCurve: epoch {epoch} after {self._ran} epochs of the fold")
        if epoch < len(self.pooled):
            self.pooled[epoch].merge(counts)
        else:
            base = copy.deepcopy(self._done) if self._done is not None else None
            self.pooled.append(base.merge(counts) if base is not None else copy.deepcopy(counts))
        self._last = counts
        self._ran += 1

    def end_fold(self) -> None:
        if self._last is None:
            raise ValueError("PooledCurve: a fold ended before its first epoch")
        for t in range(self._ran, len(self.pooled)):
            self.pooled[t].merge(self._last)
        self._done = copy.deepcopy(self._last) if self._done is None else self._done.merge(self._last)
        self.epochs_run.append(self._ran)
        self._last, self._ran = None, 0
        self.folds += 1

    def metrics(self) -> list[dict[str, float]]:
        """The pooled selection metrics of every epoch (``hF``, ``LBMaF``:
        :meth:`sparkhc.metrics.MetricCounts.compute_selection`)."""
        return [c.compute_selection() for c in self.pooled]


def choose(curves: Sequence[Sequence[float]]) -> tuple[int, int, float]:
    """(candidate, epochs, smoothed score) of the best of several pooled validation curves (one per
    candidate setting, e.g. per C): each is smoothed as :class:`EarlyStopping` smooths (trailing mean
    of :data:`WINDOW` epochs) and scored at its first maximum. Ties go to the earlier candidate."""
    best: tuple[int, int, float] | None = None
    for i, curve in enumerate(curves):
        s = EarlyStopping(0)
        for v in curve:
            s.add(v)
        ep = s.best
        val = s.smoothed[ep - 1]
        if best is None or val > best[2]:
            best = (i, ep, val)
    if best is None:
        raise ValueError("choose: no candidate")
    return best


def choose_on_common_epochs(curves: Sequence[Sequence[float]]) -> tuple[int, int, int]:
    """(candidate, epochs, n) when a time budget ended some curves early: the candidate is chosen by
    :func:`choose` on the first ``n`` epochs, the most that every curve ran, so that no candidate wins
    on epochs another was not given; its epochs are then chosen on its whole curve."""
    n = min(len(c) for c in curves)
    i = choose([list(c[:n]) for c in curves])[0]
    return i, choose([curves[i]])[1], n


def paired_gain(best: Sequence[Sequence[float]], e_best: int, base: Sequence[Sequence[float]],
                e_base: int) -> tuple[float, float]:
    """(mean, standard error) over the inner folds of the smoothed validation score of a candidate
    at ``e_best`` epochs minus the baseline's at ``e_base`` (each fold's curve, :attr:`EarlyStopping.smoothed`;
    a fold stopped earlier counts its last epoch, as :class:`PooledCurve` does). One fold: (mean, inf)."""
    if len(best) != len(base) or not best:
        raise ValueError("paired_gain: one curve per fold for both settings")

    def at(curve: Sequence[float], e: int) -> float:
        return float(curve[min(int(e), len(curve)) - 1])

    d = np.array([at(b, e_best) - at(a, e_base) for b, a in zip(best, base, strict=True)], dtype=np.float64)
    if d.size < 2:
        return float(d.mean()), math.inf
    return float(d.mean()), float(d.std(ddof=1) / math.sqrt(d.size))


def jackknife_gain(best: Sequence[np.ndarray], base: Sequence[np.ndarray],
                   score: Callable[[np.ndarray], float]) -> tuple[float, float]:
    """(difference, standard error) of two candidates' smoothed validation scores on **one** band,
    by the delete-a-group jackknife (Efron & Tibshirani 1993, ch. 11; Shao & Tu 1995, §2.3).

    ``best`` and ``base``: for each epoch of a candidate's smoothing window at its chosen epoch
    (:attr:`EarlyStopping.smoothed` is the mean of these epochs' scores), an array ``(G, ...)`` of
    the counts of each of the band's G document groups (the same groups for both candidates);
    ``score`` maps counts summed over documents to a validation score. The difference is that of
    the smoothed scores on all documents; replicate ``g`` recomputes both with group ``g`` left
    out, and ``se = sqrt((G - 1) / G * sum_g (d_g - mean(d))^2)``. A corpus-level score (macro-F1
    over labels) has no per-document terms to pair, so this, not a per-document standard error, is
    what the one-standard-error rule (:func:`prefer_default`) compares on one band."""
    if not best or not base:
        raise ValueError("jackknife_gain: no epoch in a window")
    groups = {np.asarray(a).shape[0] for a in (*best, *base)}
    if len(groups) != 1:
        raise ValueError(f"jackknife_gain: every epoch needs the same number of groups, not {sorted(groups)}")
    g = groups.pop()

    def smoothed(window: Sequence[np.ndarray], leave: int | None) -> float:
        vals = []
        for a in window:
            a = np.asarray(a)
            tot = a.sum(axis=0)
            vals.append(score(tot if leave is None else tot - a[leave]))
        return float(np.mean(vals))

    full = smoothed(best, None) - smoothed(base, None)
    if g < 2:  # one group (a band of one document): no noise estimate, never beyond it
        return full, math.inf
    d = np.array([smoothed(best, k) - smoothed(base, k) for k in range(g)], dtype=np.float64)
    se = math.sqrt((g - 1) / g * float(np.sum((d - d.mean()) ** 2)))
    return full, se


def prefer_default(gain: tuple[float, float]) -> bool:
    """The one-standard-error rule (Breiman et al. 1984): keep the default setting unless another
    beats it on the inner folds by more than the standard error of their paired difference, so a
    choice is made only where the protocol's noise is smaller than the difference it decides."""
    mean, se = gain
    return not mean > se


def outlook(more: int, later: int, pace: float, left: float | None = None) -> str:
    """The log's outlook of a running selection: ``more`` epochs at least in this validation
    training (:meth:`EarlyStopping.least_more`), ``later`` validation trainings after it, ``pace``
    seconds an epoch so far (training and scoring; stage start-ups included); ``left``: seconds of
    ``train.time_budget`` left (None: no budget), said when the outlook does not fit in it."""
    if more <= 0 and later <= 0:
        return ""
    text = f"at least {more} more epoch{'s' if more != 1 else ''} (~{_duration(more * pace)} at {pace:.1f} s an epoch)"
    if later > 0:
        text += f", then {later} more validation training{'s' if later != 1 else ''}"
    if left is not None and more * pace > left:
        text += f"; train.time_budget has ~{_duration(max(left, 0.0))} left and will end it sooner"
    return text


def _duration(seconds: float) -> str:
    """``seconds`` for a log: ``42 s``, ``17 min``, ``3.2 h``."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _monotonic() -> float:
    """The clock of :class:`TimeBudget` (looked up at each budget's creation: tests replace it)."""
    import time

    return time.monotonic()


class TimeBudget:
    """A wall-clock budget of one training (``train.time_budget`` seconds), counted from its creation.

    The epoch selection asks it how many epochs the next barrier stage may run
    (:meth:`stage_epochs`) or, on the engines without stages, whether one more epoch fits
    (:meth:`another_epoch`); the training then asks whether the final training of the chosen epochs
    on every document fits in what is left (:meth:`final_estimate` against :meth:`left`). Costs are measured on this training,
    not assumed: a selection epoch costs its training and its validation scoring; a barrier stage of
    ``m`` epochs costs ``o + m c`` (``o``: its start-up, staging the shards and fresh Python workers),
    fitted by least squares on the stages so far (without the first stage, whose warm-up is one-off,
    when all of them give no positive slope; one stage, or stages of one length: ``o = 0`` and ``c``
    the last stage's time per epoch, start-up included: an over-estimate); without stages ``c`` is
    the mean time of an epoch so far. The final training of ``b`` epochs is estimated at ``o + b c r``
    (``r = final_ratio``: its documents over a validation training's, ``1 / (1 - fraction)``; ``c``
    includes the scoring it does not do, so the estimate is on the high side).

    ``reserve_final``: the selection leaves room for that final training (several validation bands:
    their models are not kept, so the final training must run). With one band the selection may use
    the whole budget: the band's model at the chosen epoch is kept, and it becomes the model when the
    final training does not fit (:func:`sparkhc.spark.training.fit_model`). ``clock``: seconds
    (monotonic; tests pass a fake one).
    """

    def __init__(self, seconds: float, clock: Callable[[], float] | None = None) -> None:
        if not float(seconds) > 0:
            raise ValueError(f"a time budget must be > 0 seconds, not {seconds}")
        self.seconds = float(seconds)
        self.clock: Callable[[], float] = clock if clock is not None else _monotonic
        self.t0 = self.clock()
        self.final_ratio = 1.0
        self.reserve_final = False
        self.stages: list[tuple[int, float]] = []  # (epochs, seconds) of each finished barrier stage
        self._stage: tuple[int, float] | None = None  # (epochs, start) of the running stage
        self._sel_t0: float | None = None
        self._last_done: float | None = None
        self.epochs_done = 0
        self.staged = False
        self.cut = False  # the budget ended a validation training before its stopping rule

    def left(self) -> float:
        """Seconds of the budget not used yet (negative once it is overrun)."""
        return self.seconds - (self.clock() - self.t0)

    def start_selection(self, final_ratio: float, reserve_final: bool) -> None:
        self.final_ratio, self.reserve_final = float(final_ratio), bool(reserve_final)
        self._sel_t0 = self.clock()

    def epoch_done(self) -> None:
        """A selection epoch is trained and scored."""
        self.epochs_done += 1
        self._last_done = self.clock()

    def costs(self) -> tuple[float, float]:
        """``(o, c)``: a barrier stage's start-up and the seconds of one selection epoch (see the class)."""
        if self.stages:
            # all stages, then without the first (its one-off warm-up: workers, compilation) when the
            # fit gives no positive slope; else the last stage's time per epoch (start-up included)
            for st in (self.stages, self.stages[1:]):
                ms = np.array([m for m, _ in st], dtype=np.float64)
                ts = np.array([t for _, t in st], dtype=np.float64)
                if np.unique(ms).size >= 2:
                    c, o = np.polyfit(ms, ts, 1)
                    if c > 0:
                        return max(float(o), 0.0), float(c)
            m, t = self.stages[-1]
            return 0.0, float(t) / m
        if self.epochs_done and self._sel_t0 is not None and self._last_done is not None:
            return 0.0, (self._last_done - self._sel_t0) / self.epochs_done
        return 0.0, 0.0

    def _fits(self, done: int, m: int, later: int, o: float, c: float, left: float) -> bool:
        """Whether ``m`` more epochs of a validation training that has run ``done`` fit in ``left``
        seconds: ``o`` (a stage's start-up; 0 without stages) and ``m`` epochs, ``later`` trainings
        as long (``done + m`` epochs each), and with :attr:`reserve_final` the final training of
        ``done + m`` epochs."""
        e = done + m
        reserve = self.final_ratio * e * c if self.reserve_final else 0.0
        return o * (1 + later) + c * (m + later * e) + reserve <= left

    def stage_epochs(self, done: int, limit: int, later: int = 0) -> int:
        """The epochs of the next barrier stage of a validation training that has run ``done``
        epochs (at most ``limit``; 0: stop). The first stage of the selection runs one epoch (its
        cost is not known yet); then the most epochs ``m`` with ``o + c m`` (and, with
        :attr:`reserve_final`, the final training of ``done + m`` epochs) within what is left.
        ``later``: validation trainings still to run after this one, each assumed as long as this
        one (``done + m`` epochs)."""
        self.staged = True
        self.close_stage()
        now = self.clock()
        if limit <= 0:
            return 0
        if not self.stages:
            m = 1
        else:
            o, c = self.costs()
            left = self.seconds - (now - self.t0)
            m = 0
            while m < limit and self._fits(done, m + 1, later, o, c, left):
                m += 1
            if m == 0:
                if done == 0:  # a validation training runs at least one epoch
                    m = 1
                else:
                    self.cut = True
                    return 0
        self._stage = (m, now)
        return m

    def close_stage(self) -> None:
        """The running barrier stage ended (at its last scored epoch): its time joins :attr:`stages`."""
        if self._stage is not None:
            m, start = self._stage
            end = self._last_done if self._last_done is not None and self._last_done >= start else self.clock()
            self.stages.append((m, end - start))
            self._stage = None

    def another_epoch(self, done: int, later: int = 0) -> bool:
        """Whether a validation training that has run ``done`` epochs may run one more (engines without
        stages): the epoch, ``later`` trainings as long, and the final training's reserve fit."""
        _, c = self.costs()
        ok = self._fits(done, 1, later, 0.0, c, self.left())
        if not ok:
            self.cut = True
        return ok

    def final_estimate(self, epochs: int) -> float:
        """Seconds the final training of ``epochs`` epochs on every document is estimated to take."""
        o, c = self.costs()
        return o + self.final_ratio * int(epochs) * c

    def summary(self) -> dict[str, Any]:
        o, c = self.costs()
        return {"seconds": self.seconds, "elapsed": round(self.seconds - self.left(), 2),  # since the start
                "selection_epoch_seconds": round(c, 2), "stage_startup_seconds": round(o, 2),
                "stages": [[m, round(t, 2)] for m, t in self.stages], "cut_selection": self.cut}
