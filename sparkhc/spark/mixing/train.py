"""The entry of a training by iterative parameter mixing (:func:`train_ipm`): the settings
resolved, the model's starting state (fresh, warm or a checkpoint's), and the one place an engine
is chosen (:func:`engine_for`, :func:`mixing_mode`)."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from sparkhc.batch import SparseBatch
from sparkhc.errors import ModelError
from sparkhc.models.base import HierModel, ModelState
from sparkhc.spark import deltas
from sparkhc.spark.mixing.barrier import BarrierEngine
from sparkhc.spark.mixing.checkpoints import Checkpoint
from sparkhc.spark.mixing.driver import DriverEngine
from sparkhc.spark.mixing.engine import Engine
from sparkhc.spark.mixing.jobs import JobsEngine
from sparkhc.spark.mixing.settings import Hooks, MixingSettings, mixing_engine, resolve_shards
from sparkhc.spark.session import SessionLike, active, task_slots

log = logging.getLogger(__name__)


def train_ipm(
    spark: SessionLike,
    features: DataFrame | None,
    model: HierModel,
    settings: MixingSettings | None = None,
    *,
    rows: SparseBatch | None = None,
    progress: Callable[[dict[str, Any]], None] | None = None,
    on_epoch_state: Callable[[int, ModelState], bool | None] | None = None,
    fault_hook: Callable[[int, int], None] | None = None,
    stage_epochs: Callable[[int, int], int] | None = None,
    **fields: Any,
) -> HierModel:
    """Train ``model`` by iterative parameter mixing over ``settings.shards`` shards.

    ``settings``: a :class:`MixingSettings`; ``fields`` build one here (``train_ipm(spark, df,
    model, epochs=3, shards=2)``) or override fields of ``settings``. ``rows``: the documents of
    ``features`` already read on the driver (small inputs, :mod:`sparkhc.spark.plan`): trained in
    this process by the driver engine (the barrier engine's shards and mixing, bit-identical
    weights), and ``features`` is not used (may be None). Otherwise ``settings.mixing`` picks the
    jobs or the barrier engine (:func:`mixing_mode`).

    With ``settings.checkpoint_dir`` the state after each epoch is saved there atomically, and a
    rerun resumes after the last completed epoch (same data, model and seed assumed; checked by
    the model name and parameters recorded with the checkpoint,
    :class:`~sparkhc.spark.mixing.checkpoints.Checkpoint`). With ``settings.warm_start`` training
    continues from the model's current state (refreshing a saved model with new documents).

    ``progress``, ``on_epoch_state``, ``fault_hook``, ``stage_epochs``: :class:`Hooks`. ``on_epoch_state(epoch,
    state)`` is called on the driver with the mixed state after every epoch, in order (barrier
    mixing: after the stage, which then keeps every epoch's state in the exchange directory); when
    it returns True the training stops after that epoch (an early stop; barrier mixing has run the
    stage's epochs by then, see :class:`~sparkhc.spark.mixing.barrier.BarrierEngine` and
    ``settings.stop_chunk``).
    """
    if settings is None:
        settings = MixingSettings(**fields)
    elif fields:
        settings = dataclasses.replace(settings, **fields)
    model.validate_params()
    settings = dataclasses.replace(settings, shards=resolve_shards(spark, settings.shards))
    start_epoch = 0
    if settings.warm_start and model.keeps_shard_memory:
        raise ModelError(f"model {model.name!r}: {model.keeps_shard_memory} cannot continue from saved weights (its "
                         "duals are not saved); train from scratch or use solver = 'pa' for a warm start")
    if not settings.warm_start or model.state_ is None:
        model.set_state(model.init_state())
    ckpt = Checkpoint.of(settings)
    if ckpt is not None and model.keeps_shard_memory:
        # the shards' duals are not in the checkpoint: weights without them would train another problem
        log.debug("%s: no resume from checkpoints (the shards' duals are not saved); training from the start",
                 model.keeps_shard_memory)
    elif ckpt is not None:
        resumed = ckpt.load(model, settings.epochs)
        if resumed is not None:
            start_epoch = resumed + 1
            log.info("resuming from checkpoint %s after epoch %d", ckpt, resumed + 1)
    if start_epoch >= settings.epochs:
        return model
    engine = engine_for(spark, features, rows, model, settings)
    engine.run(settings, model, start_epoch, Hooks(progress, on_epoch_state, fault_hook, stage_epochs))
    return model


def engine_for(spark: SessionLike, features: DataFrame | None, rows: SparseBatch | None, model: HierModel,
               settings: MixingSettings) -> Engine:
    """The engine of a training: the driver engine for rows read in the driver (``spark`` need not
    have started), else the barrier or the jobs engine on ``features`` (:func:`mixing_mode`)."""
    if rows is not None:
        return DriverEngine(rows, threads=task_slots(spark))
    if features is None:
        raise ValueError("train_ipm: neither features (a DataFrame) nor rows read in the driver")
    session = active(spark)
    if mixing_mode(session, settings.mixing, model, settings.exchange_dir) == "barrier":
        return BarrierEngine(session, features)
    return JobsEngine(session, features)


def mixing_mode(spark: SparkSession, requested: str, model: HierModel, exchange_dir: str | Path | None = None) -> str:
    """``"barrier"`` or ``"jobs"`` for ``requested`` (``train.mixing``) with this session and
    model's state (:func:`~sparkhc.spark.mixing.settings.mixing_engine`, the one rule). The third
    engine, the driver engine, is chosen before this by :func:`engine_for` (rows read in the driver)."""
    return mixing_engine(spark.sparkContext.master or "", requested, deltas.supports(model.get_state()), exchange_dir)
