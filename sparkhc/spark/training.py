"""How a model is trained on Spark: one driver per training strategy, all with one signature.

A model declares how it trains (``HierModel.training``, ``node_parallel()``, ``needs_counts``,
``single_pass``, ``warm_startable``: :mod:`sparkhc.models.base`); :data:`DRIVERS` maps each
strategy to the function that runs it. Every entry point that trains (``sparkhc train``, the
``pyspark.ml`` estimator, the experiments) goes through :func:`fit_model`, so a new model that
trains by mixing needs no edit here.

:func:`fit_subsets` trains many independent small models, each on a subset of one set of
documents, one Spark task per model calling the model's own ``fit`` (label-rate curves, repeated
labeled draws, grids: the Xiao et al. experiments); the ``local`` strategy of :func:`fit_model`
is one such task.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from pyspark.sql import DataFrame, SparkSession

from sparkhc.batch import NODE_SCORES, SparseBatch
from sparkhc.config import TrainConfig
from sparkhc.epochs import TimeBudget
from sparkhc.errors import ModelError
from sparkhc.models.base import HierModel, ModelState, TrainingStrategy
from sparkhc.spark.plan import TrainingPlan, plan_training
from sparkhc.spark.session import SessionLike, active

log = logging.getLogger(__name__)

Progress = Callable[[dict[str, Any]], None]


@dataclass
class TrainingJob:
    """Everything a driver needs: the selected feature rows, the model (fresh, or holding the state
    to continue from when ``warm_start``) and the ``[train]`` settings."""

    #: a :class:`~sparkhc.spark.session.DeferredSession` (not started) when nothing needs Spark
    spark: SessionLike
    #: the selected feature rows on Spark (None when ``rows`` holds them and nothing needs Spark)
    df: DataFrame | None
    model: HierModel
    train: TrainConfig
    epochs: int
    checkpoint_dir: str | Path | None = None
    checkpoint_key: dict[str, Any] | None = None
    warm_start: bool = False
    #: receives every epoch record (the drivers' ``progress``)
    progress: Progress | None = None
    #: test hook: called as ``fault_hook(epoch, shard)`` inside the mixing tasks (fault injection)
    fault_hook: Callable[[int, int], None] | None = None
    #: the selected rows read in the driver (``train.execution``, :mod:`sparkhc.spark.plan`): the
    #: strategies that can train in this process (mixing, local) use them instead of ``df``
    rows: SparseBatch | None = None
    #: the plan carried out (its engine is the mixing's)
    plan: TrainingPlan | None = None


@dataclass
class TrainingResult:
    """What a training did (recorded in the model's metadata)."""

    strategy: TrainingStrategy
    epochs: int
    #: shards of the mixing (None where the strategy has none)
    shards: int | None
    epoch_log: list[dict[str, Any]] = field(default_factory=list)
    #: ``train.select_epochs``: the validation curve and the chosen number of epochs
    epoch_selection: dict[str, Any] | None = None
    #: ``train.calibrate``: the cross-fitted per-edge offsets' record (:meth:`Calibration.summary`)
    calibration: dict[str, Any] | None = None
    #: where and how it trained (:func:`sparkhc.spark.plan.plan_training`)
    plan: TrainingPlan | None = None
    #: the documents the model was trained on when no epoch was logged (``train.refit = false``: the
    #: selection's model, trained on the training part less its validation band)
    trained_documents: int | None = None

    @property
    def documents(self) -> int | None:
        return self.epoch_log[-1]["examples"] if self.epoch_log else self.trained_documents


def _mixing(job: TrainingJob) -> tuple[int, int | None]:
    from sparkhc.spark.mixing.settings import MixingSettings
    from sparkhc.spark.mixing.train import train_ipm

    settings = MixingSettings.from_train(job.train, job.epochs, with_counts=job.model.needs_counts,
                                         checkpoint_dir=job.checkpoint_dir, checkpoint_key=job.checkpoint_key,
                                         warm_start=job.warm_start)
    if job.plan is not None and job.plan.engine in ("barrier", "jobs"):  # the plan's Spark engine
        settings = dataclasses.replace(settings, mixing=job.plan.engine)
    train_ipm(job.spark, job.df, job.model, settings, rows=job.rows, progress=job.progress, fault_hook=job.fault_hook)
    return job.epochs, job.train.shards


def _node_parallel(job: TrainingJob) -> tuple[int, int | None]:
    from sparkhc.spark.node_parallel import train_node_parallel

    def _log(info: dict[str, Any]) -> None:
        assert job.progress is not None
        job.progress({"epoch": info["epochs"], "epochs": info["epochs"], "node_parallel": True,
                     "examples": info["documents"], "nodes": info["nodes"], "tasks": info["tasks"],
                     "routed_pairs": info["routed_pairs"], "seconds": info["seconds"]})

    assert job.df is not None
    train_node_parallel(active(job.spark), job.df, job.model, epochs=job.epochs, seed=job.train.seed,
                        warm_start=job.warm_start, progress=_log)
    return job.epochs, None


def _counting(job: TrainingJob) -> tuple[list[int], Progress]:
    """A progress callback that counts the records (EM steps, MDC alternations)."""
    n = [0]

    def _log(info: dict[str, Any]) -> None:
        n[0] += 1
        if job.progress is not None:
            job.progress(info)

    return n, _log


def _em(job: TrainingJob) -> tuple[int, int | None]:
    from sparkhc.spark.em import fit_em_spark

    n, progress = _counting(job)
    assert job.df is not None
    fit_em_spark(active(job.spark), job.df, job.model, shards=job.train.shards, progress=progress)
    return n[0], job.train.shards


def _batch(job: TrainingJob) -> tuple[int, int | None]:
    """The MDC models (``m3mdc``, ``mdc_br``): the pair blocks on Spark, or, with the rows read in
    the driver (``job.rows``), in this process with the pairs of a round in as many threads as
    the master has task slots (the same model bit for bit: :func:`sparkhc.spark.mdc.fit_mdc_driver`)."""
    from sparkhc.spark.mdc import fit_mdc_driver, fit_mdc_spark
    from sparkhc.spark.session import task_slots

    n, progress = _counting(job)
    if job.rows is not None:
        fit_mdc_driver(job.rows, job.model, threads=task_slots(job.spark), progress=progress)
        return n[0], None
    assert job.df is not None
    fit_mdc_spark(active(job.spark), job.df, job.model, progress=progress)
    return n[0], None


def collect_batch(df: DataFrame, n_features: int, with_counts: bool, source: str) -> SparseBatch:
    """The rows of ``df`` on the driver as one batch, in ``doc_id`` order (Arrow, no Python object
    per row for the features)."""
    from sparkhc.batch import DOC_ID

    return SparseBatch.from_arrow(df.orderBy(DOC_ID).toArrow(), n_features, with_counts=with_counts, source=source)


def _local(job: TrainingJob) -> tuple[int, int | None]:
    """Collect the selected rows (``doc_id`` order) and fit the model in one Spark task
    (:func:`fit_subsets` with one fit of every row: the model's own ``fit``); the fitted model's
    attributes are adopted by ``job.model``."""
    t0 = time.perf_counter()
    if job.rows is not None:  # read in the driver already (sparkhc.spark.plan): the same rows, same order
        from sparkhc.spark.plan import sorted_by_id

        job.model.fit(sorted_by_id(job.rows), epochs=job.epochs, seed=job.train.seed)
        batch_len = len(job.rows)
    else:
        assert job.df is not None
        batch = collect_batch(job.df, job.model.n_features, job.model.needs_counts, "the selected training documents")
        (res,) = fit_subsets(active(job.spark), batch, [SubsetFit("all", job.model, epochs=job.epochs, seed=job.train.seed)],
                             keep_state=True)
        job.model.__dict__.update(res.model.__dict__)
        batch_len = len(batch)
    if job.progress is not None:
        job.progress({"epoch": job.epochs, "epochs": job.epochs, "examples": batch_len, "local": True,
                      "seconds": time.perf_counter() - t0})
    return job.epochs, None


#: training strategy -> driver; every driver takes the job and returns (epochs run, shards used)
DRIVERS: dict[TrainingStrategy, Callable[[TrainingJob], tuple[int, int | None]]] = {
    "mixing": _mixing,
    "node_parallel": _node_parallel,
    "em": _em,
    "batch": _batch,
    "local": _local,
}


def _count(df: DataFrame | None) -> int:
    assert df is not None
    return int(df.count())


@dataclass
class _Fit:
    """The decisions of one :func:`fit_model` call, each made by one of its steps."""

    spark: SessionLike
    df: DataFrame | None
    model: HierModel
    train: TrainConfig  # train.shards resolved by the plan
    plan: TrainingPlan
    rows: SparseBatch | None  # the rows read in the driver (None unless the plan trains there)
    warm_start: bool
    select: bool  # the epochs are chosen on validation data
    cap: int  # the most epochs a selection trains (or the fixed epochs)
    epochs: int  # the epochs of the final training
    c_auto: bool  # C = "auto" is still to be chosen
    budget: TimeBudget | None = None
    sel_rows: SparseBatch | None = None  # the rows of the selection's trainings in the driver
    epoch_selection: dict[str, Any] | None = None
    band_states: list[ModelState] = field(default_factory=list)  # one band's model at the chosen epoch
    calib: Any = None  # the cross-fitted offsets (sparkhc.calibration.Calibration)
    calib_skipped: dict[str, Any] | None = None

    @property
    def strategy(self) -> TrainingStrategy:
        return self.plan.strategy

    @property
    def calibration(self) -> dict[str, Any] | None:
        return self.calib.summary() if self.calib is not None else self.calib_skipped

    def n_rows(self) -> int:
        return len(self.sel_rows) if self.sel_rows is not None else _count(self.df)


def fit_model(
    spark: SessionLike,
    df: DataFrame | None,
    model: HierModel,
    train: TrainConfig,
    checkpoint_dir: str | Path | None = None,
    checkpoint_key: dict[str, Any] | None = None,
    warm_start: bool = False,
    progress: Progress | None = None,
    fault_hook: Callable[[int, int], None] | None = None,
    rows: SparseBatch | None = None,
    plan: TrainingPlan | None = None,
    budget: TimeBudget | None = None,
) -> TrainingResult:
    """Train ``model`` on the feature rows ``df`` the way the model declares.

    ``train`` holds the one source of the epochs, the seed, the shards and the mixing settings.
    A ``single_pass`` model gets one epoch. ``checkpoint_dir`` applies to the strategies that
    checkpoint (mixing). ``warm_start`` continues from the model's current state.

    ``rows``: the same documents read in the driver (:func:`sparkhc.spark.plan.read_rows`); the
    mixing and local strategies and the MDC models (batch, with ``fit_open``) then train in this
    process (bit-identical weights), with their epoch selection and ``train.calibrate`` folds, and
    ``df`` may be None unless the strategy needs Spark.
    ``spark`` may be a :class:`~sparkhc.spark.session.DeferredSession`: started only when needed.
    ``plan``: where and how (:func:`sparkhc.spark.plan.plan_training`; made here when not given,
    from ``train``, the model and whether ``rows`` were read), logged in one line and returned in
    the result.

    ``train.time_budget`` > 0 (or ``budget``, started by the caller, e.g. when the job began): the
    epoch selection stops where its next epoch would not fit (:class:`sparkhc.epochs.TimeBudget`), and
    with one validation band the final training on every document runs only when its estimate fits
    in what is left; otherwise the band's model at the chosen epoch is the model (as ``train.refit =
    false``), recorded in ``training.epoch_selection.time_budget``. Only an epoch selection is
    planned: a fixed ``train.epochs`` (or a model not trained by mixing, or a warm start) is trained
    in full and the budget does not apply (logged).

    The steps: the plan and what it allows (:func:`_start`); C when nothing searches it
    (:func:`_c_without_search`); the budget (:func:`_budget`); the epochs and C on validation
    (:func:`_select`); the calibration offsets (:func:`_calibrate`); whether the final training runs
    (:func:`_refit`); then the band's model (:func:`_band_model`) or the final training
    (:func:`_final_training`).
    """
    fit = _start(spark, df, model, train, rows, plan, warm_start)
    _c_without_search(fit)
    fit.budget = _budget(fit, budget)
    if fit.select and fit.cap > 1:
        _select(fit)
    elif fit.select:
        fit.epochs = 1
    _calibrate(fit)
    refit = _refit(fit)
    if fit.band_states and not refit:
        return _band_model(fit)
    fit.band_states.clear()  # the final training does not need it
    return _final_training(fit, checkpoint_dir, checkpoint_key, progress, fault_hook)


def _start(spark: SessionLike, df: DataFrame | None, model: HierModel, train: TrainConfig, rows: SparseBatch | None,
           plan: TrainingPlan | None, warm_start: bool) -> _Fit:
    """The plan (made when not given, logged), what it refuses, and the epochs it allows:
    ``train.epochs = 0`` (auto) chooses them on validation data (mixing, from scratch), else
    :data:`~sparkhc.epochs.FALLBACK_EPOCHS`."""
    from sparkhc.epochs import FALLBACK_EPOCHS

    if plan is None:
        plan = plan_training(spark, model, train, rows=rows, warm_start=warm_start)
    log.info("%s", plan.line())
    strategy = plan.strategy
    if plan.place != "driver":
        rows = None
    if df is None and plan.spark_needed:
        raise ValueError(f"fit_model: {model.name!r} (trained by {strategy!r}, "
                         f"calibrate={train.calibrate!r}) needs the rows on Spark (df)")
    if plan.spark_needed:
        spark = active(spark)
    if warm_start and not model.warm_startable:
        raise ModelError(f"--warm-start is not supported for the model {model.name!r} "
                         f"(trained by {strategy!r}: it refits from scratch)")
    auto = int(train.epochs) == 0
    select = strategy == "mixing" and not model.single_pass and (auto and not warm_start or train.select_epochs)
    cap = int(train.max_epochs) if auto else int(train.epochs)
    epochs = 1 if model.single_pass else (FALLBACK_EPOCHS if auto else int(train.epochs))
    train = dataclasses.replace(train, shards=plan.shards)  # train.shards resolved once, by the plan
    c_auto = model.params.get("C") == "auto"
    if c_auto and (strategy != "mixing" or warm_start):
        raise ModelError(f"C = 'auto' ({model.name!r}) is chosen on validation folds of a training from scratch by "
                         f"mixing; not for this training ({strategy}{', warm start' if warm_start else ''}): "
                         f"set model.{model.name}.C to a number")
    return _Fit(spark, df, model, train, plan, rows, warm_start, select, cap, epochs, c_auto, sel_rows=rows)


def _c_middle() -> float:
    """What C = 'auto' is when nothing searches it: the middle of the grid."""
    from sparkhc.epochs import AUTO_C_GRID

    return AUTO_C_GRID[len(AUTO_C_GRID) // 2]


def _c_without_search(fit: _Fit) -> None:
    """C = 'auto' with a fixed number of epochs (no selection): the middle of the grid."""
    if fit.c_auto and not (fit.select and fit.cap > 1):
        fit.model.params["C"], fit.c_auto = _c_middle(), False
        log.info("C = %g (C = 'auto' with a fixed number of epochs: the middle of the grid)", _c_middle())


def _budget(fit: _Fit, budget: TimeBudget | None) -> TimeBudget | None:
    """``train.time_budget`` (or the caller's ``budget``) when it bounds an epoch selection; a
    training with nothing to cut runs in full (logged)."""
    if budget is None and float(fit.train.time_budget) > 0:
        budget = TimeBudget(float(fit.train.time_budget))
    if budget is not None and not (fit.select and fit.cap > 1):  # nothing to cut: trained in full
        model, train, strategy = fit.model, fit.train, fit.strategy
        log.info("train.time_budget = %g s bounds an epoch selection (train.epochs = 0, or train.select_epochs "
                 "with train.epochs > 1); %r trains %s here, in full: the budget does not apply", budget.seconds,
                 model.name, "one pass" if model.single_pass else f"{strategy!r}" if strategy != "mixing" else
                 "a warm start" if fit.warm_start else f"a fixed {int(train.epochs)} epochs")
        return None
    return budget


def _select(fit: _Fit) -> None:
    """The epochs (and C = 'auto') chosen on validation bands: one band for a large training part,
    inner folds for a small one (their rows collected to the driver)."""
    from sparkhc.epochs import AUTO_C_GRID, inner_folds
    from sparkhc.spark.mixing.selection import select_epochs
    from sparkhc.spark.mixing.settings import MixingSettings

    model, train, df = fit.model, fit.train, fit.df
    if fit.warm_start:
        raise ModelError("train.select_epochs chooses the epochs of a training from scratch; not with --warm-start "
                         "(give train.epochs, or train.epochs = 0 for the fixed default of a warm start)")
    # counted only when the bands are automatic (a Spark job on the Spark path)
    n_docs = None if int(train.validation_folds) else len(fit.rows) if fit.rows is not None else _count(df)
    folds = int(train.validation_folds) or inner_folds(int(n_docs or 0), train.validation_fraction)
    c_middle = _c_middle()
    c_skipped = ""
    if fit.c_auto and folds == 1 and train.c_search != "always":  # one band: searched only on request (cost)
        model.params["C"], fit.c_auto = c_middle, False
        part = f" (a training part of {n_docs} documents)" if n_docs is not None else " (train.validation_folds = 1)"
        c_skipped = (f"one validation band{part}: C = {c_middle:g}, the middle of the grid; "
                     f"train.c_search = always searches the grid on it (3 validation trainings)")
        log.info("C = %g (C = 'auto': %s)", c_middle, c_skipped)
    if fit.sel_rows is None and folds > 1:
        # a small training part (several inner folds): its rows are collected and the selection's
        # trainings run in this process (the driver path of the same mixing, train_on_driver), not
        # as k x |grid| Spark trainings of a few thousand documents each
        assert df is not None
        fit.sel_rows = collect_batch(df, model.n_features, model.needs_counts, "the training rows")
        log.info("epoch selection on %d inner folds: %d training documents collected to the driver", folds,
                 len(fit.sel_rows))
    keep_band = train.calibrate != "off" or not train.refit or fit.budget is not None
    sel = select_epochs(
        fit.spark if fit.sel_rows is not None else active(fit.spark), df, model,
        MixingSettings.from_train(train, fit.cap, with_counts=model.needs_counts),
        fraction=train.validation_fraction, patience=train.patience, rows=fit.sel_rows, folds=folds,
        c_grid=AUTO_C_GRID if fit.c_auto else None, c_default=c_middle,
        band_states=fit.band_states if keep_band else None, budget=fit.budget)
    fit.epochs, fit.epoch_selection = int(sel["epochs"]), sel
    if c_skipped:
        sel["C_search_skipped"] = c_skipped
    if fit.c_auto:
        model.params["C"] = float(sel["C"])
        log.info("C = %g and %d epochs chosen on %d validation band(s) of %d documents in all (grid %s; "
                 "validation hF + macro-F1, at most 2: %s)",
                 model.params["C"], fit.epochs, folds, sel["validation_documents"],
                 "/".join(f"{c:g}" for c in AUTO_C_GRID), "/".join(f"{v:.4f}" for v in sel["C_scores"]))


def _calibration_skipped(fit: _Fit) -> str:
    """Why ``train.calibrate`` cannot run here ("" when it can)."""
    from sparkhc.calibration import too_large
    from sparkhc.spark.calibrate import not_applicable

    why = not_applicable(fit.model, fit.strategy, fit.warm_start)
    if not why and fit.epoch_selection is None and fit.train.calibrate == "auto":
        why = ("the number of epochs is fixed, so there are no validation bands to fit offsets on; "
               "train.calibrate = on cross-fits them on train.calibration_folds inner folds")
    if not why:  # the scores it would hold: too many for a huge taxonomy?
        why = too_large(int(fit.epoch_selection["validation_documents"]) if fit.epoch_selection is not None
                        else len(fit.rows) if fit.rows is not None else _count(fit.df), fit.model.taxonomy.n_edges)
    return why


def _calibrate(fit: _Fit) -> None:
    """``train.calibrate``: the per-edge offsets cross-fitted on the selection's validation bands
    (each band's model at the chosen epoch: one band's kept state, several trained again), else on
    ``train.calibration_folds`` inner folds; "auto" records why it cannot run, "on" refuses."""
    from sparkhc.spark.calibrate import cross_fit_offsets, more_bands
    from sparkhc.spark.mixing.settings import MixingSettings

    train, sel, budget = fit.train, fit.epoch_selection, fit.budget
    if train.calibrate == "off":
        return
    why = _calibration_skipped(fit)
    if why and train.calibrate != "auto":
        raise ModelError(f"train.calibrate = {train.calibrate!r}: {why}")
    if why:
        log.info("train.calibrate = auto: skipped: %s", why)
        fit.calib_skipped = {"mode": "auto", "applied": False, "skipped": why}
        return
    bands = None if sel is None else (int(sel["folds"]), float(sel["fraction"]))
    cal_rows = fit.rows if bands is None else fit.sel_rows
    documents = int(train.calibration_documents)
    if budget is not None and sel is not None and bands is not None:
        # the bands scored when the offsets pay: one training each of the chosen epochs (estimated
        # at the selection's cost an epoch); not when they would not fit in the budget left
        extra = more_bands(bands[0], int(sel["validation_documents"]), documents, bands[1])
        est = extra * fit.epochs * budget.costs()[1]
        if extra and est > budget.left():
            sel["time_budget"]["calibration_documents_skipped"] = (
                f"{extra} more validation band(s) for train.calibration_documents = {documents} "
                f"(estimated {est:.0f} s) do not fit in the {max(budget.left(), 0.0):.0f} s left")
            log.info("train.time_budget: %s; the offsets are judged on the selection's bands only",
                     sel["time_budget"]["calibration_documents_skipped"])
            documents = 0
    fit.calib = cross_fit_offsets(
        fit.spark if cal_rows is not None else active(fit.spark), fit.df, fit.model,
        MixingSettings.from_train(train, fit.epochs, with_counts=fit.model.needs_counts), mode=train.calibrate,
        folds=train.calibration_folds, rows=cal_rows, bands=bands, documents=documents,
        band_states=fit.band_states)


def _refit(fit: _Fit) -> bool:
    """Whether the final training on every document runs: ``train.refit``, and with a budget and one
    band only when its estimate fits in what is left (recorded)."""
    refit = bool(fit.train.refit)
    budget, sel = fit.budget, fit.epoch_selection
    if budget is None or sel is None:
        return refit
    info = sel["time_budget"]
    info.update({k: v for k, v in budget.summary().items() if k != "elapsed"})  # "elapsed": the selection's end
    info["elapsed_before_final_training"] = round(budget.seconds - budget.left(), 2)
    if refit and fit.band_states:  # one band: train again only when it fits in what is left
        est, left = budget.final_estimate(fit.epochs), budget.left()
        info["final_training_estimate"], info["left"] = round(est, 2), round(left, 2)
        if est > left:
            refit = False
            info["refit_skipped"] = (f"the final training of {fit.epochs} epochs on every document (estimated "
                                     f"{est:.0f} s) does not fit in the {max(left, 0.0):.0f} s left")
            log.warning("train.time_budget: %s; the selection's model at epoch %d (trained without the "
                        "validation band) is the model", info["refit_skipped"], fit.epochs)
    return refit


def _band_model(fit: _Fit) -> TrainingResult:
    """One band and no final training: the band's model at the chosen epoch is the model."""
    sel = fit.epoch_selection
    assert sel is not None
    fit.model.set_state(fit.band_states[0])
    if fit.calib is not None and fit.calib.applied:
        fit.model.shift_edges(fit.calib.offsets)
    n_fit = fit.n_rows() - int(sel["validation_documents"])
    sel["refit"] = False
    log.info("train.refit = false: the selection's model after %d epochs on %d documents (the validation band's "
             "%d held out) is the model; no second training", fit.epochs, n_fit, sel["validation_documents"])
    return TrainingResult(fit.strategy, fit.epochs, fit.train.shards, [], sel, fit.calibration, fit.plan,
                          trained_documents=n_fit)


def _final_training(fit: _Fit, checkpoint_dir: str | Path | None, checkpoint_key: dict[str, Any] | None,
                    progress: Progress | None, fault_hook: Callable[[int, int], None] | None) -> TrainingResult:
    """The chosen epochs on every document, by the strategy's driver; the offsets added after."""
    log_: list[dict[str, Any]] = []

    def _record(info: dict[str, Any]) -> None:
        log_.append(info)
        if progress is not None:
            progress(info)

    strategy, model = fit.strategy, fit.model
    job = TrainingJob(fit.spark, fit.df, model, fit.train, fit.epochs,
                      checkpoint_dir if strategy == "mixing" else None, checkpoint_key, fit.warm_start, _record,
                      fault_hook, fit.rows, fit.plan)
    t0 = time.perf_counter()
    epochs_run, shards = DRIVERS[strategy](job)
    log.info("trained %s by %s in %.2f s", model.name, strategy, time.perf_counter() - t0)
    if fit.calib is not None and fit.calib.applied:
        model.shift_edges(fit.calib.offsets)
    return TrainingResult(strategy, epochs_run, shards, log_, fit.epoch_selection, fit.calibration, fit.plan)


# =============================================================================================
# many independent small fits
@dataclass
class SubsetFit:
    """One independent fit of :func:`fit_subsets`.

    ``model`` (unfitted) is trained by its own ``fit`` on the documents ``rows`` of the shared
    batch (None: all), with supervision on the rows ``labeled`` only: the other documents keep
    their features but their labels are hidden (unlabeled documents, which semi-supervised
    models use). ``labeled=None`` keeps the batch's labels as they are. ``node_scores`` (one row
    per ``labeled`` row, optional) is passed as the :data:`NODE_SCORES` column instead of the
    labels (e.g. the weak labels of dataless classification). ``epochs`` / ``seed`` go to
    ``model.fit``.
    """

    key: Any
    model: HierModel
    labeled: np.ndarray | None = None
    rows: np.ndarray | None = None
    node_scores: np.ndarray | None = None
    epochs: int | None = None
    seed: int = 0


@dataclass
class SubsetResult:
    """The outcome of one :class:`SubsetFit`: the fitted model (its state dropped unless
    ``keep_state``), the seconds of the fit, and ``model.decode`` of the evaluation batch as CSR
    rows (``offsets``, ``nodes``: the nodes of document ``i`` are ``nodes[offsets[i]:offsets[i+1]]``)."""

    key: Any
    model: HierModel
    seconds: float
    decode_seconds: float = 0.0
    offsets: np.ndarray | None = None
    nodes: np.ndarray | None = None

    def decoded(self) -> list[np.ndarray]:
        """The decoded node arrays of the evaluation documents (``model.decode`` order)."""
        if self.offsets is None or self.nodes is None:
            raise ValueError(f"fit {self.key!r} had no evaluation batch")
        return [self.nodes[a:b] for a, b in zip(self.offsets[:-1], self.offsets[1:], strict=True)]


def subset_batch(batch: SparseBatch, fit: SubsetFit) -> SparseBatch:
    """The batch ``fit.model`` is fitted on: the rows ``fit.rows``, labels hidden outside
    ``fit.labeled``, ``fit.node_scores`` as the :data:`NODE_SCORES` column."""
    n = len(batch)
    rows = np.arange(n) if fit.rows is None else np.asarray(fit.rows, dtype=np.int64)
    extra = {k: v for k, v in batch.extra.items() if k != NODE_SCORES}
    labels = batch.labels
    if fit.labeled is not None:
        lab = np.asarray(fit.labeled, dtype=np.int64)
        keep = np.zeros(n, dtype=bool)
        keep[lab] = True
        if not keep[rows].sum() == lab.size:
            raise ValueError(f"fit {fit.key!r}: labeled rows outside the fit's rows (or repeated)")
        if labels is not None:
            labels = [lab_ if k else [] for lab_, k in zip(labels, keep, strict=True)]
        if fit.node_scores is not None:
            s = np.asarray(fit.node_scores, dtype=np.float64)
            if s.shape[0] != lab.size:
                raise ValueError(f"fit {fit.key!r}: {s.shape[0]} node-score rows for {lab.size} labeled rows")
            full = np.zeros((n, s.shape[1]))
            full[lab] = s
            extra[NODE_SCORES] = full
    elif fit.node_scores is not None:
        raise ValueError(f"fit {fit.key!r}: node_scores need the labeled rows they belong to")
    whole = SparseBatch(batch.X, batch.doc_ids, labels, batch.counts, extra)
    return whole if fit.rows is None else whole.subset(rows)


def _fit_subset_task(data_bc: Any, eval_bc: Any, keep_state: bool, fit: SubsetFit) -> SubsetResult:
    t0 = time.perf_counter()
    model = fit.model
    model.fit(subset_batch(data_bc.value, fit), epochs=fit.epochs, seed=fit.seed)
    seconds = time.perf_counter() - t0
    res = SubsetResult(fit.key, model, seconds)
    if eval_bc is not None:
        t1 = time.perf_counter()
        decoded, _ = model.decode(eval_bc.value)
        res.offsets = np.concatenate([[0], np.cumsum([len(d) for d in decoded])]).astype(np.int64)
        res.nodes = (np.concatenate(decoded) if decoded else np.zeros(0)).astype(np.int32)
        res.decode_seconds = time.perf_counter() - t1
    if not keep_state:
        model.set_state(model.init_state())
    return res


def fit_subsets(
    spark: SparkSession,
    data: SparseBatch | DataFrame,
    fits: list[SubsetFit],
    evaluate: SparseBatch | None = None,
    keep_state: bool = False,
) -> list[SubsetResult]:
    """Fit many independent models, each on a subset of one set of documents, as Spark tasks.

    One task per fit, each calling the model's own ``fit`` on :func:`subset_batch`, so every
    fitted model equals the one ``model.fit`` gives in one process on the same subset (the same
    code on the same arrays). The documents (``data``: a batch, or a features DataFrame collected
    in ``doc_id`` order) and the evaluation batch are broadcast once. For small models trained
    many times over (label-rate curves, repeated labeled draws, grids): per fit, one task instead
    of one Spark job per training pass. With ``evaluate`` every task also decodes it
    (:attr:`SubsetResult.nodes`); the fitted models come back without their state unless
    ``keep_state`` (states can be large: components x vocabulary). Results are in ``fits`` order.
    """
    if not fits:
        return []
    if isinstance(data, DataFrame):
        m0 = fits[0].model
        data = collect_batch(data, m0.n_features, any(f.model.needs_counts for f in fits), "the training documents")
    sc = spark.sparkContext
    data_bc = sc.broadcast(data)
    eval_bc = sc.broadcast(evaluate) if evaluate is not None else None
    t0 = time.perf_counter()
    try:
        task = functools.partial(_fit_subset_task, data_bc, eval_bc, keep_state)
        out: list[SubsetResult] = sc.parallelize(fits, len(fits)).map(task).collect()
    finally:
        data_bc.unpersist()
        if eval_bc is not None:
            eval_bc.unpersist()
    log.info("fit_subsets: %d fits in %.2f s", len(fits), time.perf_counter() - t0)
    return out
