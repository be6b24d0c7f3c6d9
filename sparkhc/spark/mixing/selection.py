"""Epoch selection: the number of epochs (and the global model's C) chosen on validation bands
carved out of the training documents (:func:`select_epochs`), cut by a seeded hash of the doc id
(:func:`validation_split` on Spark, :func:`sparkhc.spark.hashing.validation_ids` in the driver:
the same documents)."""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from typing import Any

import numpy as np
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from sparkhc.batch import DOC_ID, SparseBatch
from sparkhc.epochs import TimeBudget
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
    from sparkhc.batch import label_matrix, leaf_matrix
    from sparkhc.epochs import (
        JACKKNIFE_GROUPS,
        WINDOW,
        EarlyStopping,
        PooledCurve,
        choose,
        choose_on_common_epochs,
        jackknife_gain,
        outlook,
        paired_gain,
        prefer_default,
        validation_score,
    )
    from sparkhc.metrics import MetricCounts
    from sparkhc.models import get_model_class
    from sparkhc.spark.mixing.train import train_ipm

    max_epochs, seed, with_counts = int(settings.epochs), int(settings.seed), settings.with_counts
    folds = int(folds)
    if not 1 <= folds <= validation_bands(fraction):
        raise ValueError(f"select_epochs: {folds} inner folds of {fraction} each do not fit in the training part")
    tax = model.taxonomy
    cls = get_model_class(model.name)
    cands: list[dict[str, Any]] = [{}] if c_grid is None else [{"C": float(c)} for c in c_grid]
    if not cands:
        raise ValueError("select_epochs: an empty C grid")
    splits: list[tuple[SparseBatch | None, DataFrame | None, SparseBatch]] = []
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
        splits.append((fit_rows, fit_df, val))
    n_val = sum(len(v) for _, _, v in splits)
    # one band: each candidate's state at its chosen epoch (kept while it may still be chosen)
    keeps: list[list[ModelState] | None] = [[] if band_states is not None and folds == 1 else None for _ in cands]
    # one band and a grid: per-group counts of the smoothing window at each candidate's best epoch
    # (the jackknife of the one-standard-error rule: jackknife_gain)
    jack = folds == 1 and len(cands) > 1
    groups = np.arange(len(splits[0][2])) % JACKKNIFE_GROUPS if jack else None
    snaps: list[list[np.ndarray]] = [[] for _ in cands]
    curves: list[PooledCurve] = []
    fold_stoppers: list[list[EarlyStopping]] = []  # per candidate, one per fold
    c_j = list(c_grid).index(c_default) if c_grid is not None and c_default is not None else None
    if budget is not None:  # one band with its model kept: no room to leave for the final training
        budget.start_selection(1.0 / (1.0 - float(fraction)),
                               reserve_final=not (folds == 1 and band_states is not None))
    from sparkhc import epochs as _epochs

    clock = _epochs._monotonic  # the budget's clock (tests replace it); the log's outlook: seconds an epoch so far
    # epochs trained and scored so far: a barrier stage trains all its epochs before the first is scored
    t_sel, epochs_scored, epochs_trained = clock(), [0], [0]

    def trained(_info: dict[str, Any]) -> None:
        epochs_trained[0] += 1
    for ci, cand in enumerate(cands):
        keep = keeps[ci]
        window: list[np.ndarray] = []
        params = {**model.params, **cand}
        pooled = PooledCurve()
        stoppers: list[EarlyStopping] = []
        for band, (fit_rows, fit_df, val) in enumerate(splits):
            gold = label_matrix(val.labels or [], tax)
            probe = cls(tax, model.n_features, **params)
            probe.decode_threads = usable_cpus()  # scored in the driver while no training runs
            stopper = EarlyStopping(int(patience))
            stoppers.append(stopper)

            later = (len(cands) - 1 - ci) * folds + (folds - 1 - band)  # validation trainings after this one
            tag = "".join(f"{k}={v:g} " for k, v in cand.items()) + (f"fold {band + 1}/{folds}, " if folds > 1 else "")

            def score(epoch: int, state: ModelState, probe: Any = probe, gold: Any = gold, val: SparseBatch = val,
                      stopper: EarlyStopping = stopper, pooled: PooledCurve = pooled, tag: str = tag,
                      keep: list[ModelState] | None = keep, window: list[np.ndarray] = window, ci: int = ci,
                      later: int = later) -> bool:
                probe.set_state(state)
                counts = MetricCounts(tax)
                pred = leaf_matrix(probe.decode(val, return_scores=False)[0], tax)
                counts.add(gold, pred)
                pooled.add(epoch, counts)
                m = counts.compute_selection()
                stop = stopper.add(validation_score(m))
                if groups is not None:
                    window.append(_group_counts(tax, gold, pred, groups))
                    del window[:-WINDOW]
                if stopper.best == epoch + 1:  # a new maximum: this epoch's state (and window)
                    if keep is not None:
                        keep[:] = [state.copy()]
                    if groups is not None:
                        snaps[ci] = list(window)
                cut = False
                if budget is not None:  # this epoch's cost ends here; does another fit?
                    budget.epoch_done()
                    if not stop and not budget.staged and not budget.another_epoch(epoch + 1, later):
                        stop = cut = True
                epochs_scored[0] += 1
                ahead = "" if stop else outlook(stopper.least_more(max_epochs), later,
                                                (clock() - t_sel) / max(epochs_scored[0], epochs_trained[0]),
                                                None if budget is None else budget.left())
                log.debug("select_epochs: %sepoch %d, validation hF %.4f, macro-F1 %.4f (%d documents)%s", tag, epoch + 1, float(m["hF"]), float(m["LBMaF"]), len(val),
                         "; stopping: the next epoch does not fit in train.time_budget" if cut
                         else f"; stopping: no better score in {stopper.wait()} epochs" if stop
                         else f"; best {stopper.best}, {ahead}" if ahead else "")
                return stop

            plan_stage = None
            if budget is not None:
                plan_stage = functools.partial(budget.stage_epochs, later=later)
            fresh = cls(tax, model.n_features, **params)
            train_ipm(spark, fit_df, fresh, settings, on_epoch_state=score, rows=fit_rows,
                      progress=trained,
                      stop_chunk=int(patience),  # barrier mixing: stages of `patience` epochs
                      stage_epochs=plan_stage)
            if budget is not None:
                budget.close_stage()
            pooled.end_fold()
        curves.append(pooled)
        fold_stoppers.append(stoppers)
        if len(cands) > 1:  # drop the kept states no longer choosable: all but the default's and the best so far
            lead = choose([[validation_score(m) for m in c.metrics()] for c in curves])[0]
            for k in range(len(curves)):
                if k not in (lead, c_j) and keeps[k]:
                    keeps[k] = []
    metrics = [c.metrics() for c in curves]
    scores = [[validation_score(m) for m in ms] for ms in metrics]
    common: int | None = None
    if budget is not None and budget.cut and len(scores) > 1:  # C never won on epochs others were not given
        i, epochs, common = choose_on_common_epochs(scores)
        log.info("select_epochs: train.time_budget ended a validation training early: the C candidates are "
                 "compared on the %d epoch(s) each of them ran", common)
    else:
        i, epochs, _ = choose(scores)
    gain: tuple[float, float] | None = None
    if c_grid is not None and c_j is not None and i != c_j:
        j = c_j
        e_j = choose([scores[j]])[1]
        if jack:  # one band: the delete-a-group jackknife over its documents
            scratch = MetricCounts(tax)
            gain = jackknife_gain(snaps[i], snaps[j], lambda c: _selection_score(scratch, c))
        else:
            gain = paired_gain([s.smoothed for s in fold_stoppers[i]], epochs,
                               [s.smoothed for s in fold_stoppers[j]], e_j)
        where = "the validation band (jackknife)" if jack else "the inner folds"
        if prefer_default(gain):
            log.info("select_epochs: C=%g beats C=%g by %.4f +- %.4f (se) on %s: within the noise, C=%g kept",
                     c_grid[i], c_default, gain[0], gain[1], where, c_default)
            i, epochs = j, e_j
        else:
            log.info("select_epochs: C=%g beats C=%g by %.4f +- %.4f (se) on %s", c_grid[i], c_default,
                     gain[0], gain[1], where)
    keep = keeps[i]
    if keep is not None and band_states is not None:
        if not keep or epochs != fold_stoppers[i][0].best:  # the one curve is the pooled one
            raise RuntimeError("select_epochs: the kept state is not the chosen epoch's")
        band_states[:] = keep
    stoppers = fold_stoppers[i]
    # the cap cut a curve that its stopping rule had not stopped: the score may still have been rising
    capped = int(patience) > 0 and any(len(s.curve) >= max_epochs and not s.should_stop() for s in stoppers)
    if budget is not None and budget.cut:
        log.warning("select_epochs: train.time_budget (%g s) ended the validation training before its stopping rule "
                    "(best at epoch %d of %d run): more epochs may score higher; a larger budget trains them",
                    budget.seconds, epochs, max(curves[i].epochs_run))
    if capped:
        log.warning("select_epochs: the validation training reached train.max_epochs = %d before its stopping rule "
                    "(%d epochs without a better score) ended it; best at epoch %d: more epochs may score higher, "
                    "raise train.max_epochs", max_epochs, max(s.wait() for s in stoppers), epochs)
    summary = {**(stoppers[0].summary() if folds == 1 else {}),
               "epochs": int(epochs), "epochs_run": max(curves[i].epochs_run),
               "patience": int(patience), "stopped_early": any(s.should_stop() for s in stoppers),
               "reached_max_epochs": capped}
    if budget is not None:
        summary["time_budget"] = budget.summary()
    if folds > 1:
        sm = EarlyStopping(0)
        for v in scores[i]:
            sm.add(v)
        summary.update({"patience_growth": stoppers[0].growth, "window": stoppers[0].window,
                        "criterion": stoppers[0].summary()["criterion"], "smoothed_score": sm.smoothed,
                        "fold_epochs_run": curves[i].epochs_run})
    out = {**summary, "validation_score": scores[i], "validation_hF": [float(m["hF"]) for m in metrics[i]],
           "validation_macro_F1": [float(m["LBMaF"]) for m in metrics[i]], "validation_documents": n_val,
           "fraction": float(fraction), "folds": folds, "max_epochs": int(max_epochs)}
    if c_grid is not None:
        out.update({"C": float(cands[i]["C"]), "C_grid": [float(c) for c in c_grid],
                    "C_scores": [float(choose([s])[2]) for s in scores],
                    "C_epochs": [int(choose([s])[1]) for s in scores],
                    "C_default": c_default, "C_gain": None if gain is None else [gain[0], gain[1]],
                    "C_gain_se": "jackknife over the band's documents" if jack else "over the inner folds",
                    "C_curves": [[float(v) for v in s] for s in scores], "C_compared_epochs": common})
    return out


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

