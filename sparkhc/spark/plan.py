"""Where and how a model trains: one decision (:func:`plan_training`), carried out by
:func:`sparkhc.spark.training.fit_model` for every entry point (``sparkhc train`` and the jobs
through :func:`sparkhc.spark.pipelines.train`, the ``pyspark.ml`` estimator, the experiments),
logged in one line and recorded in the saved model (``training.plan`` of its metadata).

A :class:`TrainingPlan` holds the strategy the model declares (:meth:`HierModel.training_strategy
<sparkhc.models.base.HierModel.training_strategy>`), the place (``driver``: this process, no Spark
job; ``spark``), the mixing engine (``driver``, ``barrier`` or ``jobs``), ``train.shards`` resolved
to a number (0 = the task slots) and the reason for the place.

Small trainings run in the driver process (``train.execution``). A training on a few megabytes of
features costs little compute, but on Spark it pays per-job and per-session costs (the first
Parquet scan, the label-combinations shuffle, the Python workers' start, staging the shards, the
barrier stage) that exceed the epochs themselves. In the driver:

* the features are read with pyarrow (:func:`sparkhc.features.read_features_local`, the same
  validation as the Spark reader) and the documents selected (:func:`read_rows`);
* the label combinations come from those rows (:func:`label_combinations_of`, what
  :func:`sparkhc.spark.pipelines.label_combinations` computes with a Spark job);
* the shards are the barrier engine's (``pmod(hash(doc_id), shards)`` with Spark's own hash,
  :func:`sparkhc.spark.hashing.shard_ids`), each sorted by doc id, and every epoch runs the barrier
  engine's code (:class:`sparkhc.spark.mixing.driver.DriverEngine`), so the weights are
  bit-identical to the Spark path's (tests/spark/test_small.py).

``train.execution``: ``auto`` reads the rows here when the master is local (the driver is on the
machine that would run the tasks), the features are a local path of at most
:data:`AUTO_MAX_INPUT_BYTES` of Parquet and ``train.mixing`` is not ``jobs`` (its float summation
order differs); the model then trains here when its strategy allows (:func:`driver_reason`: mixing
whose state mixes by row-sparse deltas, of at most :data:`AUTO_MAX_STATE_BYTES`; the ``local``
strategy; the MDC models' open fit). ``driver`` trains here whatever the size or master (for the
models that allow it); ``spark`` never. Node-parallel and EM models train on Spark. The validation
models of ``train.select_epochs`` and the folds of ``train.calibrate`` train where the rows are.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import scipy.sparse as sp

from sparkhc import fsio
from sparkhc.batch import SparseBatch
from sparkhc.config import TrainConfig
from sparkhc.errors import InputDataError
from sparkhc.features import Selection, features_layout, read_features_local
from sparkhc.models.base import HierModel, TrainingStrategy
from sparkhc.spark.session import SessionLike, is_local_master, master_of
from sparkhc.text.spec import FeatureSpec

log = logging.getLogger(__name__)

#: ``train.execution = "auto"``: largest Parquet input (all part files, before selection) read in the driver
AUTO_MAX_INPUT_BYTES = 64 << 20
#: ``train.execution = "auto"``: largest model state (all arrays) trained in the driver
AUTO_MAX_STATE_BYTES = 256 << 20

Place = Literal["driver", "spark"]


@dataclass(frozen=True)
class TrainingPlan:
    """Where and how one training runs (:func:`plan_training`)."""

    model: str
    strategy: TrainingStrategy
    #: ``driver``: in this process on the rows read here; ``spark``: Spark jobs on the DataFrame
    place: Place
    #: the mixing engine (``driver``, ``barrier``, ``jobs``); None for the other strategies
    engine: str | None
    #: ``train.shards`` resolved (0 = the task slots); the mixing's and EM's shards
    shards: int
    #: why the place (the setting or the limit that decided it)
    reason: str

    @property
    def spark_needed(self) -> bool:
        return self.place == "spark"

    def line(self) -> str:
        """The plan in one log line."""
        how = f", {self.engine} engine" if self.engine else ""
        shards = f", {self.shards} shard(s)" if self.strategy in ("mixing", "em") else ""
        where = "in the driver process" if self.place == "driver" else "on Spark"
        return f"plan: {self.model} trains by {self.strategy} {where}{how}{shards} ({self.reason})"

    def record(self) -> dict[str, Any]:
        """The plan as the model's metadata records it (``training.plan``)."""
        return dataclasses.asdict(self)


def _nbytes(a: Any) -> int:
    """The bytes of one state array (a CSR matrix of the sparse layout: its three arrays)."""
    if sp.issparse(a):
        return int(a.data.nbytes + a.indices.nbytes + a.indptr.nbytes)
    return int(getattr(a, "nbytes", 0))


def driver_reason(model: HierModel, strategy: TrainingStrategy, train: TrainConfig) -> str:
    """Why ``model`` cannot train in the driver on rows read there ("" when it can): the models
    fitted on the driver anyway (``local``), the MDC models' open fit, and the models trained by
    mixing whose states mix by row-sparse deltas (with ``train.execution = auto``: a state of at
    most :data:`AUTO_MAX_STATE_BYTES`)."""
    from sparkhc.spark import deltas

    if strategy == "local" or (strategy == "batch" and model.fits_open):
        return ""
    if strategy != "mixing":
        return f"the {strategy} strategy runs on Spark"
    state = model.init_state()
    if not deltas.supports(state):
        return "its state does not mix by row-sparse deltas"
    size = sum(_nbytes(a) for a in state.arrays.values())
    if train.execution != "driver" and size > AUTO_MAX_STATE_BYTES:
        return (f"a state of {size / 2**20:.0f} MiB > {AUTO_MAX_STATE_BYTES >> 20} MiB "
                "(train.execution = driver trains it here)")
    return ""


def plan_training(spark: SessionLike, model: HierModel, train: TrainConfig, *, rows: SparseBatch | None = None,
                  warm_start: bool = False) -> TrainingPlan:
    """The plan of training ``model`` with the ``[train]`` settings ``train``: in the driver when
    ``rows`` were read here (:func:`read_rows`) and the model's strategy allows it
    (:func:`driver_reason`), else on Spark. ``spark`` may be a
    :class:`~sparkhc.spark.session.DeferredSession`: planning never starts it."""
    from sparkhc.spark import deltas
    from sparkhc.spark.mixing.settings import mixing_engine, resolve_shards

    strategy = model.training_strategy(node_parallel=train.node_parallel)
    if rows is None:
        place: Place = "spark"
        reason = f"train.execution = {train.execution}: the rows are on Spark"
    else:
        why = driver_reason(model, strategy, train)
        place = "spark" if why else "driver"
        reason = f"train.execution = {train.execution}: " + (why or "the rows were read in this process")
    engine = None
    if strategy == "mixing":
        if place == "driver":
            engine = "driver"
        else:
            state = model.state_ if warm_start and model.state_ is not None else model.init_state()
            engine = mixing_engine(master_of(spark), train.mixing, deltas.supports(state), train.exchange_dir or None)
    return TrainingPlan(model.name, strategy, place, engine, resolve_shards(spark, train.shards), reason)


def read_rows(spark: SessionLike, train: TrainConfig, features: str | Path, selection: Selection,
              with_counts: bool) -> tuple[SparseBatch, FeatureSpec] | None:
    """The selected documents (and the feature spec) read in this process when the training may
    run here (``train.execution``, see the module doc), else None (train on Spark). ``spark`` may
    be a :class:`DeferredSession`: the choice never starts it."""
    setting = train.execution  # one of auto | spark | driver (checked by sparkhc.config)
    if setting == "spark":
        return None
    path = fsio.local_path(str(features))
    if path is None:
        if setting == "driver":
            log.info("train.execution = driver: %s is not a local path; training on Spark", features)
        return None
    if setting == "auto":
        if not is_local_master(spark) or train.mixing == "jobs":
            return None
        size = sum(p.stat().st_size for p in features_layout(path)[2])
        if size > AUTO_MAX_INPUT_BYTES:
            log.info("features %s: %.1f MiB of Parquet > %d MiB; training on Spark", path, size / 2**20,
                     AUTO_MAX_INPUT_BYTES >> 20)
            return None
    batch, spec = read_features_local(path, with_counts=with_counts)
    rows = selection.subset(batch)
    ids = np.sort(rows.doc_ids)
    dup = ids[1:][ids[1:] == ids[:-1]]
    if dup.size:  # the Spark path's order of equal ids depends on its partitions
        if setting == "driver":
            raise InputDataError(f"{features}: doc_id must be unique to train in the driver (train.execution = "
                                 f"driver): {dup.size} duplicate(s), e.g. {str(dup[0])!r}")
        log.info("features %s: duplicate doc ids; training on Spark", path)
        return None
    return rows, spec


def label_combinations_of(rows: SparseBatch) -> list[list[str]]:
    """The distinct sorted label lists of ``rows``, sorted (as
    :func:`sparkhc.spark.pipelines.label_combinations` computes them on Spark)."""
    return [list(t) for t in sorted({tuple(sorted(labs)) for labs in rows.labels or []})]


def sorted_by_id(batch: SparseBatch) -> SparseBatch:
    """The documents of ``batch`` in doc-id order (a shard as the Spark path holds it)."""
    return batch.subset(np.argsort(batch.doc_ids, kind="stable"))
