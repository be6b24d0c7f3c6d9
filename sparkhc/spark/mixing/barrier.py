"""The barrier engine: every epoch in one Spark barrier stage whose tasks exchange their deltas
through files (:class:`~sparkhc.spark.mixing.exchange.Exchange`): no job, broadcast or result
transfer per epoch. One ``mapInArrow`` pass first stages each input partition's documents of every
shard (``pmod(hash(doc_id), shards)``: the partition ``repartition(shards, doc_id)`` would give, so
the jobs engine's shards, without a shuffle)."""

from __future__ import annotations

import logging
import re
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from sparkhc.batch import DOC_ID, SparseBatch
from sparkhc.models.base import HierModel, ModelState
from sparkhc.spark.mixing.checkpoints import Checkpoint
from sparkhc.spark.mixing.engine import Engine, ModelSpec, epoch_info, log_epoch
from sparkhc.spark.mixing.exchange import Exchange
from sparkhc.spark.mixing.mix import mix_deltas, shard_epoch
from sparkhc.spark.mixing.settings import Hooks, MixingSettings, certified

log = logging.getLogger(__name__)

_SHARD = "_shard"
_STAGE_SCHEMA = "shard int, part int, n long"
_ATTEMPT_PROP = "sparkhc.ipm.attempt"
#: the record of a stage whose tasks stopped on the duality gap: ``{"epochs": n}``, the epochs done
_CERTIFIED = "certified.json"


class BarrierEngine(Engine):
    """Every epoch in one barrier stage (:func:`_make_barrier_fn`) over ``features``; with an
    ``on_epoch_state`` hook and ``settings.stop_chunk`` > 0, stages of that many epochs, each
    resuming from the state the last one ended with (what a resume from a checkpoint does: the
    same states), until the hook stops the training (without ``stop_chunk`` the one stage runs
    every epoch, and only the hook's later calls are skipped)."""

    name: ClassVar[str] = "barrier"

    def __init__(self, spark: SparkSession, features: DataFrame) -> None:
        self.spark, self.features = spark, features

    def run(self, settings: MixingSettings, model: HierModel, start_epoch: int, hooks: Hooks) -> None:
        epochs = settings.epochs
        e0 = start_epoch
        while e0 < epochs:
            chunked = settings.stop_chunk > 0 and hooks.on_epoch_state is not None
            e1 = min(epochs, e0 + int(settings.stop_chunk)) if chunked else epochs
            if hooks.stage_epochs is not None:  # a time budget: the stage's length, 0 = stop
                m = int(hooks.stage_epochs(e0, e1 - e0))
                if m <= 0:
                    break
                e1 = min(e1, e0 + m)
            if self._stage(settings, model, e0, e1, hooks):
                break
            e0 = e1

    def _stage(self, settings: MixingSettings, model: HierModel, start_epoch: int, epochs: int,
               hooks: Hooks) -> bool:
        """Epochs ``start_epoch..epochs-1`` in one barrier stage; states and deltas go through files
        in a fresh folder under ``settings.exchange_dir`` (a path or URI, :class:`Exchange`;
        default: a local temp directory), removed at the end whatever happens. Returns whether
        ``hooks.on_epoch_state`` asked to stop."""
        spark, features, shards = self.spark, self.features, settings.shards
        if settings.exchange_dir is None:
            work = Exchange(tempfile.mkdtemp(prefix="sparkhc-ipm-"))
        else:
            work = Exchange(settings.exchange_dir, f"sparkhc-ipm-{uuid.uuid4().hex}")
            work.create()
        stop = threading.Event()
        try:
            t0 = time.perf_counter()
            # the shard of a document is the partition repartition(shards, doc_id) would give it
            tagged = features.withColumn(_SHARD, F.expr(f"pmod(hash({DOC_ID}), {int(shards)})"))
            rows = tagged.mapInArrow(_make_stage_fn(model.n_features, settings.with_counts, work),
                                     _STAGE_SCHEMA).collect()
            pieces: dict[int, list[int]] = {}
            for r in rows:
                if int(r["n"]) > 0:
                    pieces.setdefault(int(r["shard"]), []).append(int(r["part"]))
            pieces = {k: sorted(v) for k, v in pieces.items()}
            present = sorted(pieces)
            if not present:
                raise ValueError("no training documents in any partition")
            tasks = max(1, min(len(present), spark.sparkContext.defaultParallelism))
            log.info("barrier mixing: %d shards staged in %s in %.2f s; %d tasks", len(present), work,
                     time.perf_counter() - t0, tasks)
            work.write_state(f"state-{start_epoch:05d}.npz", model.get_state())
            model.state_ = None  # the driver holds no copy while the stage runs (1.5 GiB at JSTPlus size)
            watcher = threading.Thread(target=_watch_epochs, args=(work, start_epoch, epochs, stop), daemon=True)
            watcher.start()
            stage = _Stage(work, present, pieces, tasks, start_epoch, epochs,
                           keep_states=hooks.on_epoch_state is not None, gap_tol=settings.gap_tol)
            fn = _make_barrier_fn(ModelSpec.of(model, settings.local_scale(), len(present)), stage, settings.seed,
                                  Checkpoint.of(settings), hooks.fault_hook)
            t1 = time.perf_counter()
            attempts = _max_attempts(spark)
            for attempt in range(1, attempts + 1):
                try:
                    spark.sparkContext.setLocalProperty(_ATTEMPT_PROP, f"{attempt}-{uuid.uuid4().hex[:8]}")
                    spark.sparkContext.parallelize(range(tasks), tasks).barrier().mapPartitions(fn).collect()
                    break
                except Exception as e:  # Spark never retries a failed barrier result stage itself
                    if attempt == attempts:
                        raise
                    log.warning("barrier mixing: attempt %d/%d failed (%s); resuming after the last mixed epoch",
                                attempt, attempts, failure_reason(e))
            log.debug("barrier mixing: epochs %d-%d in %.2f s", start_epoch + 1, epochs, time.perf_counter() - t1)
            stop.set()
            watcher.join()
            certified = work.exists(_CERTIFIED)  # the tasks stopped on the duality gap (settings.gap_tol)
            if certified:
                epochs = int(work.read_json(_CERTIFIED)["epochs"])
            infos = [work.read_json(f"epoch-{e:05d}.json") for e in range(start_epoch, epochs)]
            stopped = certified  # else the stage ran every epoch; an early stop skips scoring the later states
            if hooks.progress is not None:  # every epoch of the stage is trained before any is scored
                for info in infos:
                    hooks.progress(info)
            scored = False
            if hooks.on_epoch_state is not None:
                for ep in range(start_epoch, epochs - 1):
                    if hooks.on_epoch_state(ep, work.read_state(f"state-{ep + 1:05d}.npz")):
                        stopped = scored = True
                        break
            model.set_state(work.read_state(f"state-{epochs:05d}.npz"))  # one copy, no bytes
            if hooks.on_epoch_state is not None and not scored:
                stopped = bool(hooks.on_epoch_state(epochs - 1, model.get_state())) or stopped
            return stopped
        finally:
            spark.sparkContext.setLocalProperty(_ATTEMPT_PROP, None)  # type: ignore[arg-type]
            stop.set()
            try:
                work.remove()
            except OSError as e:  # never hide the training's own error behind a cleanup failure
                log.warning("barrier mixing: could not remove %s: %s", work, e)


@dataclass(frozen=True, eq=False)
class _Stage:
    """One barrier stage's plan (pickled to its tasks): the exchange, the shards that hold
    documents (``present``) and their input partitions' pieces, the number of tasks, the epochs
    ``start_epoch..epochs-1``, and whether every epoch's state is kept for the driver's hook."""

    work: Exchange
    present: list[int]
    pieces: dict[int, list[int]]
    tasks: int
    start_epoch: int
    epochs: int
    keep_states: bool = False
    gap_tol: float = 0.0


def _make_stage_fn(n_features: int, with_counts: bool, work: Exchange) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """Each input partition writes its documents of every shard to a piece file (no shuffle)."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        part = ctx.partitionId() if ctx is not None else 0
        tables = [b for b in batches if b.num_rows]
        if not tables:
            return
        table = pa.Table.from_batches(tables)
        shard_of = table.column(_SHARD).to_numpy()
        table = table.drop_columns([_SHARD])
        out = []
        for k in np.unique(shard_of):
            rows = np.flatnonzero(shard_of == k)
            batch = SparseBatch.from_arrow(table.take(pa.array(rows)), n_features, with_counts=with_counts)
            work.save_shard(int(k), part, batch)
            out.append((int(k), len(rows)))
        yield pa.RecordBatch.from_pydict(
            {"shard": [k for k, _ in out], "part": [part] * len(out), "n": [n for _, n in out]},
            schema=pa.schema([("shard", pa.int32()), ("part", pa.int32()), ("n", pa.int64())]),
        )

    return run


def _make_barrier_fn(
    spec: ModelSpec, stage: _Stage, seed: int, ckpt: Checkpoint | None,
    fault_hook: Callable[[int, int], None] | None,
) -> Callable[[Iterable[int]], Iterable[int]]:
    """Every epoch in one barrier stage: task ``t`` runs the shards ``present[t::tasks]`` (one after
    another, each from the epoch's base state, exactly as the jobs engine) and writes their
    row-sparse deltas to the exchange directory; all tasks meet at a file barrier; then every task
    sums all deltas (in shard order) into its own copy of the base with the same code
    (:func:`sparkhc.spark.mixing.mix.mix`), so all hold bit-identical mixed states without a full
    state crossing a file; task 0 writes the checkpoint and the epoch record; all meet again. Task
    0 writes the final state for the driver. A retried stage resumes from the checkpoint when there
    is one (else from the start: the same result, the epochs are deterministic)."""
    wd, present, tasks, start_epoch, epochs = stage.work, stage.present, stage.tasks, stage.start_epoch, stage.epochs

    def run(_it: Iterable[int]) -> Iterator[int]:
        from pyspark import BarrierTaskContext

        ctx = BarrierTaskContext.get()
        t = ctx.partitionId()
        # one token per stage attempt, so that a retry (the driver reruns the stage as a new job)
        # never meets the markers of a failed attempt; not allGather, which costs about a second
        attempt = f"{ctx.getLocalProperty(_ATTEMPT_PROP)}-s{ctx.stageId()}"
        mine = present[t::tasks]
        batches = {k: wd.load_shard(k, stage.pieces[k]) for k in mine}
        model = spec.build()
        memory: dict[int, object] = {}  # this task's shards' shard_memory (a dual solver's working sets)
        first = start_epoch
        base: ModelState | None = None
        if ckpt is not None and not model.keeps_shard_memory:  # (a dual solver's duals are not checkpointed)
            resumed = ckpt.load(model, epochs)  # this stage's last epoch: a checkpoint past it is another run's
            if resumed is not None and resumed + 1 > start_epoch:
                first, base = resumed + 1, model.get_state()
        if base is None:
            base = wd.read_state(f"state-{start_epoch:05d}.npz")
        last = epochs
        for epoch in range(first, epochs):
            t0 = time.perf_counter()
            for k in mine:
                # streamed
                wd.write_state(f"delta-{epoch:05d}-{k:05d}.npz", shard_epoch(model, base, batches[k], k, seed, epoch,
                                                                            fault_hook, memory))
            wd.sync(f"{attempt}-{epoch:05d}-a", t, tasks)
            base, ep_counters = mix_deltas(base, (wd.read_state(f"delta-{epoch:05d}-{k:05d}.npz") for k in present),
                                           len(present))
            info = epoch_info(epoch, epochs, ep_counters, time.perf_counter() - t0)
            # every task mixed the same counters: all stop after the same epoch
            done = certified(stage.gap_tol, info)
            if t == 0:  # the record first: a checkpointed epoch always has one
                if stage.keep_states and epoch + 1 < epochs and not done:  # the last one is written below
                    wd.write_state(f"state-{epoch + 1:05d}.npz", base)
                wd.write_json(f"epoch-{epoch:05d}.json", info)
                if ckpt is not None:
                    model.set_state(base)
                    ckpt.save(model, epoch)
                    model.state_ = None
            wd.sync(f"{attempt}-{epoch:05d}-b", t, tasks)
            if t == 0:  # everybody has read them
                for k in present:
                    wd.delete(f"delta-{epoch:05d}-{k:05d}.npz")
            if done:
                last = epoch + 1
                break
        if t == 0:
            wd.write_state(f"state-{last:05d}.npz", base)
            if last < epochs:
                wd.write_json(_CERTIFIED, {"epochs": last})
        yield t

    return run


#: lines of a failed job's message that say why (a Py4J error's first line only names the call)
_REASON_MARKERS = ("SparkException", "ExecutorLostFailure", "BarrierJobSlotsNumberCheckFailed", "Reason:",
                   "Caused by:")


def failure_reason(e: BaseException, limit: int = 400) -> str:
    """The lines of ``e``'s message that say why a barrier stage failed (Spark's exception, a lost
    executor and its reason, a slot check that gave up), at most ``limit`` characters; else its
    first line."""
    lines = [ln.strip().lstrip(": ").strip() for ln in str(e).splitlines() if ln.strip()]
    keep = [ln for ln in lines if any(k in ln for k in _REASON_MARKERS)]
    text = " | ".join(keep[:2]) if keep else (lines[0] if lines else type(e).__name__)
    return text[:limit]


def _max_attempts(spark: SparkSession) -> int:
    """Attempts of the barrier stage: ``spark.task.maxFailures``, or the ``F`` of a
    ``local[N,F]`` master (plain ``local[N]``: 1, no retry), as Spark would allow a task."""
    sc = spark.sparkContext
    conf = sc.getConf().get("spark.task.maxFailures")
    if conf:
        return max(1, int(conf))
    m = re.fullmatch(r"local\[[^,\]]+,\s*(\d+)\]", sc.master or "")
    if m:
        return max(1, int(m.group(1)))
    return 1 if (sc.master or "").startswith("local") else 4


def _watch_epochs(work: Exchange, start: int, epochs: int, stop: threading.Event) -> None:
    """Driver log line per epoch while the barrier stage runs (and the rest after it ends)."""
    e = start
    while e < epochs:
        name = f"epoch-{e:05d}.json"
        try:
            found = work.exists(name)
            if found:
                log_epoch(work.read_json(name))
                e += 1
                continue
        except (OSError, ValueError):  # the stage was cleaned up: nothing more to follow
            log.debug("barrier: the epoch records of %s are gone; no more progress lines", work, exc_info=True)
            return
        if stop.is_set():
            return
        stop.wait(0.2)
