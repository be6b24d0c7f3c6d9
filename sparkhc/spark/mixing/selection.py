"""Epoch selection: the number of epochs (and the global model's C) chosen on validation bands
carved out of the training documents (:func:`select_epochs`), cut by a seeded hash of the doc id
(:func:`validation_split` on Spark, :func:`sparkhc.spark.hashing.validation_ids` in the driver:
the same documents)."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from sparkhc.batch import DOC_ID, SparseBatch, label_matrix, leaf_matrix
from sparkhc.epochs import (
    JACKKNIFE_GROUPS,
    WINDOW,
    EarlyStopping,
    PooledCurve,
    TimeBudget,
    choose,
    choose_on_common_epochs,
    jackknife_gain,
    outlook,
    paired_gain,
    prefer_default,
    validation_score,
)
from sparkhc.metrics import MetricCounts
from sparkhc.models.base import HierModel, ModelState
from sparkhc.spark.hashing import validation_bands, validation_cut, validation_ids
from sparkhc.spark.mixing.settings import MixingSettings
from sparkhc.spark.plan import sorted_by_id
from sparkhc.spark.session import SessionLike, usable_cpus

log = logging.getLogger(__name__)


def validation_split(features: DataFrame, fraction: float, seed: int, band: int = 0) -> tuple[DataFrame, DataFrame]:
    """(fit, validation): a seeded share ``fraction`` of the documents by a hash of their id
    (band ``b``: ``b * cut <= pmod(hash(doc_id, seed + 17), 10000) < (b + 1) * cut``, ``cut =
    fraction * 10000``; band 0 is the first ``fraction``), the same rows on every run; disjoint
    bands are the inner folds of :func:`select_epochs`."""
    cut = validation_cut(fraction)
    if not 0 <= int(band) < validation_bands(fraction):
        raise ValueError(f"validation band {band} out of range for the fraction {fraction}")
    h = f"pmod(hash({DOC_ID}, {int(seed) + 17}), 10000)"
    val = F.expr(f"{h} < {cut}" if int(band) == 0 else f"{h} >= {int(band) * cut} AND {h} < {(int(band) + 1) * cut}")
    return features.where(~val), features.where(val)


def select_epochs(
    spark: SessionLike,
    features: DataFrame | None,
    model: HierModel,
    settings: MixingSettings,
    *,
    fraction: float = 0.1,
    patience: int = 0,
    rows: SparseBatch | None = None,
    folds: int = 1,
    c_grid: Sequence[float] | None = None,
    c_default: float | None = None,
    band_states: list[ModelState] | None = None,
    budget: TimeBudget | None = None,
) -> dict[str, Any]:
    """The number of epochs (and, with ``c_grid``, the PA aggressiveness C) chosen on validation
    data carved out of the training documents (``features`` on Spark, or ``rows`` read in the
    driver; nothing else is read). ``settings``: the mixing of every validation training
    (``settings.epochs``: the most epochs tried; shards, seed, engine, exchange as the real training's).

    For each candidate C (``c_grid``; None: the model's own parameters) and each of ``folds``
    disjoint validation bands (inner folds: :func:`validation_split`,
    :func:`sparkhc.spark.hashing.validation_ids`, the same documents on both paths), a fresh copy of
    ``model`` is trained by :func:`sparkhc.spark.mixing.train.train_ipm` on the other documents for at most ``settings.epochs``
    epochs and scored on its band after every epoch by :func:`sparkhc.epochs.validation_score`
    (hF + LB macro-F1 over the model taxonomy's real nodes); each fold stops early after
    ``max(patience, ceil(0.5 x best))`` epochs without a better score of its own
    (:class:`sparkhc.epochs.EarlyStopping`; patience 0: never). The folds' count tables are pooled
    epoch by epoch (:class:`sparkhc.epochs.PooledCurve`: out-of-fold scores of every held-out
    document) and the candidate and epoch count with the best smoothed pooled score win
    (:func:`sparkhc.epochs.choose`); with ``c_default`` (one of the grid), another C is taken only
    when it beats that one by more than the standard error of their paired difference over the
    folds (:func:`sparkhc.epochs.paired_gain`, :func:`sparkhc.epochs.prefer_default`: the
    one-standard-error rule); on one band, more than the delete-a-group jackknife's standard error
    over the band's documents (:data:`sparkhc.epochs.JACKKNIFE_GROUPS` groups in doc-id order,
    :func:`sparkhc.epochs.jackknife_gain`). A selection that reaches ``settings.epochs`` before its
    stopping rule ends it logs a warning and records ``reached_max_epochs``. One fold and no grid
    is the single validation slice of earlier versions, exactly.

    Returns ``{"epochs", "validation_score", "validation_hF", "validation_macro_F1",
    "validation_documents", "fraction", "folds", "max_epochs", "epochs_run", "patience",
    "patience_growth", "criterion", "stopped_early", "reached_max_epochs"}`` for the chosen candidate (its pooled
    curves), plus ``"C"``, ``"C_grid"`` and ``"C_scores"`` with a grid. With ``rows`` the training
    runs in this process (bit-identical to the Spark path's, :func:`sparkhc.spark.mixing.driver.train_on_driver`) and
    ``features`` is not used.

    ``band_states``: a list that receives the state of the band's model at the chosen epoch when
    that is known without more training, i.e. with one band (the chosen candidate's: a copy of the
    state taken when its smoothed score reaches a new maximum, :attr:`EarlyStopping.best` being that
    epoch; with a grid, the copies of candidates that can no longer be chosen are dropped as the
    search goes, so at most the default's, the best so far and the running one's are held).
    It is the model a training of the chosen epochs on the same documents gives, bit for bit (the
    mixing's order depends on the seed and the epoch only, not on the number of epochs), so
    :func:`sparkhc.spark.calibrate.cross_fit_offsets` scores the band with it instead of training it
    again. With several bands the list is left empty.

    ``budget`` (``train.time_budget``, :class:`sparkhc.epochs.TimeBudget`): the validation trainings
    stop where the next epoch (or barrier stage) would not fit in it, leaving room for the final
    training when no band's model is kept (several bands); the output then has ``"time_budget"``
    (:meth:`TimeBudget.summary`) and, when the budget ended a curve before its stopping rule did, a
    warning says so. A budget that ends nothing changes nothing: the same epochs, the same states."""
    from sparkhc.spark.mixing.train import train_ipm

    folds = int(folds)
    if not 1 <= folds <= validation_bands(fraction):
        raise ValueError(f"select_epochs: {folds} inner folds of {fraction} each do not fit in the training part")
    cands: list[dict[str, Any]] = [{}] if c_grid is None else [{"C": float(c)} for c in c_grid]
    if not cands:
        raise ValueError("select_epochs: an empty C grid")
    splits = _validation_splits(features, rows, model, fraction, int(settings.seed), folds, settings.with_counts)
    if budget is not None:  # one band with its model kept: no room to leave for the final training
        budget.start_selection(1.0 / (1.0 - float(fraction)),
                               reserve_final=not (folds == 1 and band_states is not None))
    from sparkhc import epochs as _epochs
    from sparkhc.models import get_model_class

    clock = _epochs._monotonic  # the budget's clock (tests replace it); the log's outlook: seconds an epoch so far
    search = _Search(model=model, cls=get_model_class(model.name), splits=splits, cands=cands, patience=int(patience),
                     max_epochs=int(settings.epochs), budget=budget,
                     c_j=list(c_grid).index(c_default) if c_grid is not None and c_default is not None else None,
                     keeps=[[] if band_states is not None and folds == 1 else None for _ in cands],
                     groups=np.arange(len(splits[0].val)) % JACKKNIFE_GROUPS if folds == 1 and len(cands) > 1 else None,
                     snaps=[[] for _ in cands], clock=clock, t_sel=clock())
    for ci in range(len(cands)):
        search.run_candidate(ci, lambda fit_df, fresh, score, fit_rows, plan_stage: train_ipm(
            spark, fit_df, fresh, settings, on_epoch_state=score, rows=fit_rows, progress=search.trained,
            stop_chunk=int(patience),  # barrier mixing: stages of `patience` epochs
            stage_epochs=plan_stage))
    i, epochs, gain = search.choice(c_grid, c_default)
    keep = search.keeps[i]
    if keep is not None and band_states is not None:
        if not keep or epochs != search.fold_stoppers[i][0].best:  # the one curve is the pooled one
            raise RuntimeError("select_epochs: the kept state is not the chosen epoch's")
        band_states[:] = keep
    return search.summary(i, epochs, gain, fraction, c_grid, c_default)


class _Split(NamedTuple):
    """One validation band: the fitting part (rows in this process, or a DataFrame) and the band."""

    fit_rows: SparseBatch | None
    fit_df: DataFrame | None
    val: SparseBatch


def _validation_splits(features: DataFrame | None, rows: SparseBatch | None, model: HierModel, fraction: float,
                       seed: int, folds: int, with_counts: bool) -> list[_Split]:
    """The ``folds`` disjoint validation bands of the training documents, each with its fitting part
    (read in this process from ``rows``, or cut from ``features`` on Spark: the same documents)."""
    splits: list[_Split] = []
    for band in range(folds):
        if rows is not None:
            held = validation_ids(rows.doc_ids, fraction, seed, band)
            fit_rows: SparseBatch | None = rows.subset(np.flatnonzero(~held))
            val = sorted_by_id(rows.subset(np.flatnonzero(held)))
            fit_df: DataFrame | None = None
        else:
            assert features is not None
            fit_df, val_df = validation_split(features, fraction, seed, band)
            fit_rows = None
            val = SparseBatch.from_arrow(val_df.sort(DOC_ID).toArrow(), model.n_features, with_counts=with_counts)
        if len(val) == 0:
            raise ValueError(f"select_epochs: the validation fraction {fraction} holds out no document"
                             + (f" in band {band}" if folds > 1 else ""))
        splits.append(_Split(fit_rows, fit_df, val))
    return splits


@dataclass
class _Search:
    """The state of one epoch (and C) selection across its candidates and folds: the pooled curves,
    the stopping rules, the kept band states and jackknife windows, and the clock of the log's
    outlook. :func:`select_epochs` builds it, then runs :meth:`run_candidate` per candidate,
    :meth:`choice` and :meth:`summary`."""

    model: HierModel
    cls: Any
    splits: list[_Split]
    cands: list[dict[str, Any]]
    patience: int
    max_epochs: int
    c_j: int | None
    budget: TimeBudget | None
    #: one band: each candidate's state at its chosen epoch (kept while it may still be chosen)
    keeps: list[list[ModelState] | None]
    #: one band and a grid: the jackknife group of each validation document (else None), and per
    #: candidate the per-group counts of the smoothing window at its best epoch (:func:`jackknife_gain`)
    groups: np.ndarray | None
    snaps: list[list[np.ndarray]]
    #: the clock of the log's outlook (the budget's) and the selection's start on it
    clock: Callable[[], float]
    t_sel: float
    curves: list[PooledCurve] = field(default_factory=list)
    fold_stoppers: list[list[EarlyStopping]] = field(default_factory=list)  # per candidate, one per fold
    #: epochs trained and scored so far: a barrier stage trains all its epochs before the first is scored
    epochs_scored: int = 0
    epochs_trained: int = 0
    #: the epochs the candidates were compared on when the budget cut a C search (else None)
    compared_epochs: int | None = None

    @property
    def jackknife(self) -> bool:
        return self.groups is not None

    def trained(self, _info: dict[str, Any]) -> None:
        self.epochs_trained += 1

    def run_candidate(self, ci: int, train: Callable[..., Any]) -> None:
        """Train candidate ``ci`` on every fold (``train(fit_df, fresh, score, fit_rows, plan_stage)``:
        the mixing of the real training), scoring each band after every epoch; then drop the kept
        states of the candidates that can no longer be chosen."""
        cand, folds = self.cands[ci], len(self.splits)
        window: list[np.ndarray] = []
        params = {**self.model.params, **cand}
        pooled = PooledCurve()
        stoppers: list[EarlyStopping] = []
        tax, n_features = self.model.taxonomy, self.model.n_features
        for band, split in enumerate(self.splits):
            probe = self.cls(tax, n_features, **params)
            probe.decode_threads = usable_cpus()  # scored in the driver while no training runs
            stopper = EarlyStopping(int(self.patience))
            stoppers.append(stopper)
            later = (len(self.cands) - 1 - ci) * folds + (folds - 1 - band)  # validation trainings after this one
            tag = "".join(f"{k}={v:g} " for k, v in cand.items()) + (f"fold {band + 1}/{folds}, " if folds > 1 else "")
            score = _EpochScorer(self, ci, probe, label_matrix(split.val.labels or [], tax), split.val, stopper,
                                 pooled, tag, window, later)
            plan_stage = None
            if self.budget is not None:
                plan_stage = functools.partial(self.budget.stage_epochs, later=later)
            train(split.fit_df, self.cls(tax, n_features, **params), score, split.fit_rows, plan_stage)
            if self.budget is not None:
                self.budget.close_stage()
            pooled.end_fold()
        self.curves.append(pooled)
        self.fold_stoppers.append(stoppers)
        if len(self.cands) > 1:  # drop the kept states no longer choosable: all but the default's and the best so far
            lead = choose([[validation_score(m) for m in c.metrics()] for c in self.curves])[0]
            for k in range(len(self.curves)):
                if k not in (lead, self.c_j) and self.keeps[k]:
                    self.keeps[k] = []

    def scores(self) -> list[list[float]]:
        return [[validation_score(m) for m in c.metrics()] for c in self.curves]

    def choice(self, c_grid: Sequence[float] | None,
               c_default: float | None) -> tuple[int, int, tuple[float, float] | None]:
        """(candidate, epochs, the gain over the default C or None): the best smoothed pooled score
        (compared on the epochs every candidate ran when the budget ended a validation training:
        :attr:`compared_epochs`), the default C kept unless another beats it beyond the standard
        error (the one-standard-error rule: over the folds, or the jackknife over the one band's
        documents)."""
        scores = self.scores()
        if self.budget is not None and self.budget.cut and len(scores) > 1:  # C never won on epochs others were not given
            i, epochs, self.compared_epochs = choose_on_common_epochs(scores)
            log.info("select_epochs: train.time_budget ended a validation training early: the C candidates are "
                     "compared on the %d epoch(s) each of them ran", self.compared_epochs)
        else:
            i, epochs, _ = choose(scores)
        gain: tuple[float, float] | None = None
        if c_grid is None or self.c_j is None or i == self.c_j:
            return i, epochs, gain
        j = self.c_j
        e_j = choose([scores[j]])[1]
        if self.jackknife:  # one band: the delete-a-group jackknife over its documents
            scratch = MetricCounts(self.model.taxonomy)
            gain = jackknife_gain(self.snaps[i], self.snaps[j], lambda c: _selection_score(scratch, c))
        else:
            gain = paired_gain([s.smoothed for s in self.fold_stoppers[i]], epochs,
                               [s.smoothed for s in self.fold_stoppers[j]], e_j)
        where = "the validation band (jackknife)" if self.jackknife else "the inner folds"
        if prefer_default(gain):
            log.info("select_epochs: C=%g beats C=%g by %.4f +- %.4f (se) on %s: within the noise, C=%g kept",
                     c_grid[i], c_default, gain[0], gain[1], where, c_default)
            return j, e_j, gain
        log.info("select_epochs: C=%g beats C=%g by %.4f +- %.4f (se) on %s", c_grid[i], c_default,
                 gain[0], gain[1], where)
        return i, epochs, gain

    def summary(self, i: int, epochs: int, gain: tuple[float, float] | None, fraction: float,
                c_grid: Sequence[float] | None, c_default: float | None) -> dict[str, Any]:
        """The selection's record (:func:`select_epochs` lists its keys), with the warnings of a
        curve the budget or the cap cut before its stopping rule."""
        stoppers, budget, max_epochs, folds = self.fold_stoppers[i], self.budget, self.max_epochs, len(self.splits)
        # the cap cut a curve that its stopping rule had not stopped: the score may still have been rising
        capped = self.patience > 0 and any(len(s.curve) >= max_epochs and not s.should_stop() for s in stoppers)
        if budget is not None and budget.cut:
            log.warning("select_epochs: train.time_budget (%g s) ended the validation training before its stopping "
                        "rule (best at epoch %d of %d run): more epochs may score higher; a larger budget trains them",
                        budget.seconds, epochs, max(self.curves[i].epochs_run))
        if capped:
            log.warning("select_epochs: the validation training reached train.max_epochs = %d before its stopping rule "
                        "(%d epochs without a better score) ended it; best at epoch %d: more epochs may score higher, "
                        "raise train.max_epochs", max_epochs, max(s.wait() for s in stoppers), epochs)
        scores = self.scores()
        metrics = self.curves[i].metrics()
        summary = {**(stoppers[0].summary() if folds == 1 else {}),
                   "epochs": int(epochs), "epochs_run": max(self.curves[i].epochs_run),
                   "patience": int(self.patience), "stopped_early": any(s.should_stop() for s in stoppers),
                   "reached_max_epochs": capped}
        if budget is not None:
            summary["time_budget"] = budget.summary()
        if folds > 1:
            sm = EarlyStopping(0)
            for v in scores[i]:
                sm.add(v)
            summary.update({"patience_growth": stoppers[0].growth, "window": stoppers[0].window,
                            "criterion": stoppers[0].summary()["criterion"], "smoothed_score": sm.smoothed,
                            "fold_epochs_run": self.curves[i].epochs_run})
        out = {**summary, "validation_score": scores[i], "validation_hF": [float(m["hF"]) for m in metrics],
               "validation_macro_F1": [float(m["LBMaF"]) for m in metrics],
               "validation_documents": sum(len(s.val) for s in self.splits),
               "fraction": float(fraction), "folds": folds, "max_epochs": int(max_epochs)}
        if c_grid is not None:
            out.update({"C": float(self.cands[i]["C"]), "C_grid": [float(c) for c in c_grid],
                        "C_scores": [float(choose([s])[2]) for s in scores],
                        "C_epochs": [int(choose([s])[1]) for s in scores],
                        "C_default": c_default, "C_gain": None if gain is None else [gain[0], gain[1]],
                        "C_gain_se": "jackknife over the band's documents" if self.jackknife
                        else "over the inner folds",
                        "C_curves": [[float(v) for v in s] for s in scores], "C_compared_epochs": self.compared_epochs})
        return out


@dataclass
class _EpochScorer:
    """The ``on_epoch_state`` callback of one validation training (one candidate, one fold): scores
    the band after every epoch, feeds the pooled curve and the stopping rule, keeps the state (and
    the jackknife window) of a new best, asks the budget whether another epoch fits, logs the epoch;
    returns whether the training stops."""

    search: _Search
    ci: int
    probe: Any  # a model of the candidate's parameters, its state set to each epoch's
    gold: Any
    val: SparseBatch
    stopper: EarlyStopping
    pooled: PooledCurve
    tag: str
    window: list[np.ndarray]
    later: int

    def __call__(self, epoch: int, state: ModelState) -> bool:
        search, stopper, tax = self.search, self.stopper, self.search.model.taxonomy
        self.probe.set_state(state)
        counts = MetricCounts(tax)
        pred = leaf_matrix(self.probe.decode(self.val, return_scores=False)[0], tax)
        counts.add(self.gold, pred)
        self.pooled.add(epoch, counts)
        m = counts.compute_selection()
        stop = stopper.add(validation_score(m))
        if search.groups is not None:
            self.window.append(_group_counts(tax, self.gold, pred, search.groups))
            del self.window[:-WINDOW]
        if stopper.best == epoch + 1:  # a new maximum: this epoch's state (and window)
            keep = search.keeps[self.ci]
            if keep is not None:
                keep[:] = [state.copy()]
            if search.groups is not None:
                search.snaps[self.ci] = list(self.window)
        cut = False
        budget = search.budget
        if budget is not None:  # this epoch's cost ends here; does another fit?
            budget.epoch_done()
            if not stop and not budget.staged and not budget.another_epoch(epoch + 1, self.later):
                stop = cut = True
        search.epochs_scored += 1
        ahead = "" if stop else outlook(stopper.least_more(search.max_epochs), self.later,
                                        (search.clock() - search.t_sel)
                                        / max(search.epochs_scored, search.epochs_trained),
                                        None if budget is None else budget.left())
        log.debug("select_epochs: %sepoch %d, validation hF %.4f, macro-F1 %.4f (%d documents)%s", self.tag,
                  epoch + 1, float(m["hF"]), float(m["LBMaF"]), len(self.val),
                  "; stopping: the next epoch does not fit in train.time_budget" if cut
                  else f"; stopping: no better score in {stopper.wait()} epochs" if stop
                  else f"; best {stopper.best}, {ahead}" if ahead else "")
        return stop


def _group_counts(tax: Any, gold: Any, pred: Any, groups: np.ndarray) -> np.ndarray:
    """``(G, 3, n_nodes)``: the tp / fp / fn counts of each document group (``groups``: a group
    number per validation document) of one epoch's predictions (:class:`sparkhc.metrics.MetricCounts`)."""
    from sparkhc.metrics import MetricCounts

    out = np.zeros((int(groups.max()) + 1, 3, tax.n_nodes), dtype=np.int64)
    for g in range(out.shape[0]):
        idx = np.flatnonzero(groups == g)
        c = MetricCounts(tax)
        c.add(gold[idx], pred[idx])
        out[g] = (c.tp, c.fp, c.fn)
    return out


def _selection_score(scratch: Any, counts: np.ndarray) -> float:
    """The validation score (:func:`sparkhc.epochs.validation_score`) of tp / fp / fn counts ``(3, n_nodes)``."""
    from sparkhc.epochs import validation_score

    scratch.tp, scratch.fp, scratch.fn = counts[0], counts[1], counts[2]
    return validation_score(scratch.compute_selection())

