"""How a model is trained on Spark: one driver per training strategy, all with one signature.

A model declares how it trains (``HierModel.training``, ``node_parallel()``, ``needs_counts``,
``single_pass``, ``warm_startable``: :mod:`sparkhc.models.base`); :data:`DRIVERS` maps each
strategy to the function that runs it. Every entry point that trains (``sparkhc train``, the
``pyspark.ml`` estimator, the experiments) goes through :func:`fit_model`, so a new model that
trains by mixing needs no edit here.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from sparkhc.config import TrainConfig
from sparkhc.errors import ModelError
from sparkhc.models.base import HierModel, TrainingStrategy

log = logging.getLogger(__name__)

Progress = Callable[[dict[str, Any]], None]


@dataclass
class TrainingJob:
    """Everything a driver needs: the selected feature rows, the model (fresh, or holding the state
    to continue from when ``warm_start``) and the ``[train]`` settings."""

    spark: SparkSession
    df: DataFrame
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

    @property
    def documents(self) -> int | None:
        return self.epoch_log[-1]["examples"] if self.epoch_log else None


def _mixing(job: TrainingJob) -> tuple[int, int | None]:
    from sparkhc.spark.ipm import train_ipm

    train_ipm(
        job.spark, job.df, job.model, epochs=job.epochs, shards=job.train.shards, seed=job.train.seed,
        checkpoint_dir=job.checkpoint_dir, progress=job.progress, fault_hook=job.fault_hook,
        warm_start=job.warm_start, with_counts=job.model.needs_counts, checkpoint_key=job.checkpoint_key,
        mixing=job.train.mixing, exchange_dir=job.train.exchange_dir or None,
    )
    return job.epochs, job.train.shards


def _node_parallel(job: TrainingJob) -> tuple[int, int | None]:
    from sparkhc.spark.node_parallel import train_node_parallel

    def _log(info: dict[str, Any]) -> None:
        assert job.progress is not None
        job.progress({"epoch": info["epochs"], "epochs": info["epochs"], "node_parallel": True,
                     "examples": info["documents"], "nodes": info["nodes"], "tasks": info["tasks"],
                     "routed_pairs": info["routed_pairs"], "seconds": info["seconds"]})

    train_node_parallel(job.spark, job.df, job.model, epochs=job.epochs, seed=job.train.seed,
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
    fit_em_spark(job.spark, job.df, job.model, shards=job.train.shards, progress=progress)
    return n[0], job.train.shards


def _batch(job: TrainingJob) -> tuple[int, int | None]:
    from sparkhc.spark.mdc import fit_mdc_spark

    n, progress = _counting(job)
    fit_mdc_spark(job.spark, job.df, job.model, progress=progress)
    return n[0], None


def _local(job: TrainingJob) -> tuple[int, int | None]:
    """Collect the selected rows on the driver (``doc_id`` order, Arrow, no Python object per
    row for the features) and fit there."""
    from sparkhc.batch import DOC_ID, SparseBatch

    t0 = time.perf_counter()
    table = job.df.orderBy(DOC_ID).toArrow()
    batch = SparseBatch.from_arrow(table, job.model.n_features, with_counts=job.model.needs_counts,
                                   source="the selected training documents")
    job.model.fit(batch, epochs=job.epochs, seed=job.train.seed)
    if job.progress is not None:
        job.progress({"epoch": job.epochs, "epochs": job.epochs, "examples": len(batch), "local": True,
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


def fit_model(
    spark: SparkSession,
    df: DataFrame,
    model: HierModel,
    train: TrainConfig,
    checkpoint_dir: str | Path | None = None,
    checkpoint_key: dict[str, Any] | None = None,
    warm_start: bool = False,
    progress: Progress | None = None,
    fault_hook: Callable[[int, int], None] | None = None,
) -> TrainingResult:
    """Train ``model`` on the feature rows ``df`` the way the model declares.

    ``train`` holds the one source of the epochs, the seed, the shards and the mixing settings.
    A ``single_pass`` model gets one epoch. ``checkpoint_dir`` applies to the strategies that
    checkpoint (mixing). ``warm_start`` continues from the model's current state.
    """
    from sparkhc.spark.ipm import resolve_shards, select_epochs

    strategy = model.training_strategy(node_parallel=train.node_parallel)
    if warm_start and not model.warm_startable:
        raise ModelError(f"--warm-start is not supported for the model {model.name!r} "
                         f"(trained by {strategy!r}: it refits from scratch)")
    epochs = 1 if model.single_pass else int(train.epochs)
    # train.shards = 0: as many shards as Spark has task slots
    train = dataclasses.replace(train, shards=resolve_shards(spark, train.shards))
    epoch_selection = None
    if train.select_epochs and strategy == "mixing" and epochs > 1:
        if warm_start:
            raise ModelError("train.select_epochs chooses the epochs of a training from scratch; not with --warm-start")
        epoch_selection = select_epochs(
            spark, df, model, epochs, train.shards, seed=train.seed, fraction=train.validation_fraction,
            with_counts=model.needs_counts, mixing=train.mixing, exchange_dir=train.exchange_dir or None)
        epochs = int(epoch_selection["epochs"])
    calib = None
    calib_skipped: dict[str, Any] | None = None
    why = ""
    if train.calibrate != "off":
        from sparkhc.spark.calibrate import cross_fit_offsets, not_applicable

        why = not_applicable(model, strategy, warm_start)
        if why and train.calibrate != "auto":
            raise ModelError(f"train.calibrate = {train.calibrate!r}: {why}")
        if why:  # "auto" (the default): nothing to calibrate for this model or training; recorded
            calib_skipped = {"mode": "auto", "applied": False, "skipped": why}
    if train.calibrate != "off" and not why:
        calib = cross_fit_offsets(
            spark, df, model, epochs, train.shards, mode=train.calibrate, folds=train.calibration_folds,
            seed=train.seed, with_counts=model.needs_counts, mixing=train.mixing,
            exchange_dir=train.exchange_dir or None)
    log_: list[dict[str, Any]] = []

    def _record(info: dict[str, Any]) -> None:
        log_.append(info)
        if progress is not None:
            progress(info)

    job = TrainingJob(spark, df, model, train, epochs, checkpoint_dir if strategy == "mixing" else None,
                      checkpoint_key, warm_start, _record, fault_hook)
    t0 = time.perf_counter()
    epochs_run, shards = DRIVERS[strategy](job)
    log.info("trained %s by %s in %.2f s", model.name, strategy, time.perf_counter() - t0)
    if calib is not None and calib.applied:
        model.shift_edges(calib.offsets)  # type: ignore[attr-defined]
    return TrainingResult(strategy, epochs_run, shards, log_, epoch_selection,
                          calib.summary() if calib is not None else calib_skipped)
