"""The jobs engine: one Spark job per epoch (McDonald et al. 2010; Murawaki 2013, Alg. 6).

One epoch = broadcast the state -> every partition (shard) runs one shard-local epoch of the
model's ``partial_fit`` from that state (``mapInArrow``: features arrive as Arrow batches and
become one :class:`SparseBatch` per partition, no Python object per row) -> each partition
returns its delta or state serialized with :func:`sparkhc.persistence.state_to_bytes` ->
``treeAggregate`` sums them (:class:`StateSum`, :class:`deltas.DeltaSum`) -> the driver mixes
(:func:`sparkhc.spark.mixing.mix.mix`) -> checkpoint -> next epoch. Counters travel in the
results, not in accumulators, so retried tasks cannot double-count. With one partition the
result equals serial training exactly. The base state goes out as a :class:`BaseChain`.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from sparkhc.batch import DOC_ID, SparseBatch
from sparkhc.errors import ModelError
from sparkhc.models.base import HierModel, ModelState, StateSum
from sparkhc.persistence import state_from_bytes, state_to_bytes
from sparkhc.spark import deltas
from sparkhc.spark.mixing.checkpoints import Checkpoint
from sparkhc.spark.mixing.engine import Engine, ModelSpec, epoch_info, log_epoch
from sparkhc.spark.mixing.mix import mix, shard_epoch
from sparkhc.spark.mixing.settings import Hooks, MixingSettings

_RESULT_SCHEMA = "shard int, n long, state binary"


def shard_features(df: DataFrame, shards: int) -> DataFrame:
    """Deterministic shards: hash-partition by doc id and sort each shard by doc id."""
    return df.repartition(int(shards), DOC_ID).sortWithinPartitions(DOC_ID)


class JobsEngine(Engine):
    """One Spark job per epoch over the cached, hash-partitioned ``features``
    (:func:`shard_features`): broadcast the base (:class:`BaseChain`), ``mapInArrow`` the shards,
    ``treeAggregate`` their deltas, mix on the driver (:func:`run_epoch`)."""

    name: ClassVar[str] = "jobs"

    def __init__(self, spark: SparkSession, features: DataFrame) -> None:
        self.spark, self.features = spark, features

    def run(self, settings: MixingSettings, model: HierModel, start_epoch: int, hooks: Hooks) -> None:
        epochs = settings.epochs
        if model.keeps_shard_memory:
            raise ModelError(f"model {model.name!r}: {model.keeps_shard_memory} keeps every shard's duals between "
                             "epochs, which one Spark job per epoch cannot: set train.mixing = 'barrier' (with "
                             "train.exchange_dir on a cluster)")
        ckpt = Checkpoint.of(settings)
        shards_df = shard_features(self.features, settings.shards).cache()
        chain = BaseChain(self.spark.sparkContext)
        try:
            chain.start(model.get_state())
            prev: ModelState | None = None  # the base of the epoch before (the chain ends there)
            for epoch in range(start_epoch, epochs):
                t0 = time.perf_counter()
                if prev is not None:
                    chain.advance(prev, model.get_state())
                    prev = None
                mixed, counters = run_epoch(self.spark, shards_df, model, settings.seed, epoch, settings.with_counts,
                                            hooks.fault_hook, chain, settings.local_scale())
                prev = model.get_state()
                model.set_state(mixed)
                stop = bool(hooks.on_epoch_state(epoch, mixed)) if hooks.on_epoch_state is not None else False
                info = epoch_info(epoch, epochs, counters, time.perf_counter() - t0)
                log_epoch(info)
                if hooks.progress is not None:
                    hooks.progress(info)
                if ckpt is not None:
                    ckpt.save(model, epoch)
                if stop:
                    break
        finally:
            chain.close()
            shards_df.unpersist()


def _partition_batch(batches: Iterator[pa.RecordBatch], n_features: int, with_counts: bool) -> SparseBatch | None:
    tables = [b for b in batches if b.num_rows]
    if not tables:
        return None
    table = pa.Table.from_batches(tables)
    return SparseBatch.from_arrow(table, n_features, with_counts=with_counts)


class BaseChain:
    """The base state of every epoch of the jobs engine, shipped to the tasks as broadcasts: the
    full state once, then each epoch's mixed change as a row-sparse patch (:func:`deltas.encode_values`
    of the mixed state against the previous one: the changed entries with their new values, so
    assigning them rebuilds the mixed state bit for bit). A task rebuilds its epoch's base with
    :func:`_task_base`; a Python worker keeps the last base it built, so an epoch costs it only the
    new patch, and Spark fetches each broadcast once per executor. The chain restarts from a full
    state when a patch would be no smaller than the state, or when the patches since the last full
    state would pass ``max_patches`` times its size (a worker that missed its cache then reads at
    most that much). States that do not mix by deltas (:func:`deltas.supports`) are broadcast
    whole every epoch, as before."""

    max_patches = 4.0

    def __init__(self, sc: Any) -> None:
        self.sc = sc
        self.links: list[Any] = []
        self.token = ""
        self.full_bytes = 0
        self.delta_bytes = 0
        self.last_bytes = 0  # bytes broadcast for the current epoch (0: nothing new)

    def start(self, state: ModelState) -> None:
        """Broadcast ``state`` whole (a new chain)."""
        self.close()
        data = state_to_bytes(state)
        self.links = [self.sc.broadcast(data)]
        self.token = f"{uuid.uuid4().hex}-{deltas.supports(state)}"
        self.full_bytes = self.last_bytes = len(data)
        self.delta_bytes = 0

    def advance(self, prev: ModelState, mixed: ModelState) -> None:
        """The next epoch starts from ``mixed``; ``prev`` is the base the chain ends at."""
        patch = deltas.encode_values(mixed, prev.arrays) if deltas.supports(prev) and self.links else None
        data = state_to_bytes(patch) if patch is not None else b""
        if patch is None or len(data) >= self.full_bytes or \
                self.delta_bytes + len(data) > self.max_patches * self.full_bytes:
            self.start(mixed)
            return
        self.links.append(self.sc.broadcast(data))
        self.delta_bytes += len(data)
        self.last_bytes = len(data)

    def close(self) -> None:
        for b in self.links:
            b.unpersist()
        self.links = []


#: the last base state a Python worker built: token of the chain -> (links applied, state)
_BASE_CACHE: dict[str, tuple[int, ModelState]] = {}


def _task_base(token: str, links: list[Any]) -> ModelState:
    """The epoch's base state in a task (:class:`BaseChain`): the worker's cached base of this
    chain plus the links it has not applied, or the chain's full state plus all its patches. The
    cache holds the one state of the running chain (Spark stops idle Python workers after a
    minute, which frees it after the training)."""
    hit = _BASE_CACHE.get(token)
    if hit is not None and hit[0] <= len(links):
        have, base = hit
    else:
        _BASE_CACHE.clear()  # free a previous chain's state first
        have, base = 1, state_from_bytes(links[0].value)
    for link in links[have:]:
        base = deltas.apply_values(base, state_from_bytes(link.value))
    if token.endswith("-True"):  # only states that mix by deltas are cached
        _BASE_CACHE.clear()
        _BASE_CACHE[token] = (len(links), base)
    return base


def make_epoch_fn(
    spec: ModelSpec,
    chain: tuple[str, list[Any]],
    seed: int,
    epoch: int,
    with_counts: bool,
    fault_hook: Callable[[int, int], None] | None = None,
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The function each partition runs for one epoch (module-level so it pickles cleanly);
    ``chain`` is ``(token, links)`` of a :class:`BaseChain`."""
    token, links = chain

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        shard = ctx.partitionId() if ctx is not None else 0
        batch = _partition_batch(batches, spec.n_features, with_counts)
        if batch is None:
            return
        model = spec.build()
        # row-sparse delta from the base state when possible (sparkhc.spark.deltas), else the state
        payload = state_to_bytes(shard_epoch(model, _task_base(token, links), batch, shard, seed, epoch,
                                             fault_hook))  # a delta is a state too
        yield pa.RecordBatch.from_pydict(
            {"shard": [shard], "n": [len(batch)], "state": [payload]},
            schema=pa.schema([("shard", pa.int32()), ("n", pa.int64()), ("state", pa.binary())]),
        )

    return run


def _seq(acc: StateSum | deltas.DeltaSum, row: Any) -> StateSum | deltas.DeltaSum:
    payload = bytes(row["state"])
    st = state_from_bytes(payload)
    st.counters["result_bytes"] = float(len(payload))  # reported per epoch, not kept in the model
    if st.combine == "delta":
        return (acc if isinstance(acc, deltas.DeltaSum) else deltas.DeltaSum()).add(st)
    return acc.add(st) if isinstance(acc, StateSum) else StateSum().add(st)


def _comb(a: StateSum | deltas.DeltaSum, b: StateSum | deltas.DeltaSum) -> StateSum | deltas.DeltaSum:
    if a.n == 0:
        return b
    if b.n == 0:
        return a
    return a.merge(b)  # type: ignore[arg-type]


def run_epoch(
    spark: SparkSession,
    shards_df: DataFrame,
    model: HierModel,
    seed: int,
    epoch: int,
    with_counts: bool = False,
    fault_hook: Callable[[int, int], None] | None = None,
    chain: BaseChain | None = None,
    step_scale: float = 1.0,
) -> tuple[ModelState, dict[str, float]]:
    """One mixing epoch from ``model``'s current state; returns the mixed state and counters
    (with ``broadcast_bytes`` and ``result_bytes``: what the epoch shipped). ``chain``: the
    training's :class:`BaseChain`, which must end at ``model``'s state (one epoch alone: None,
    the state is broadcast whole)."""
    own = chain is None
    if chain is None:
        chain = BaseChain(spark.sparkContext)
        chain.start(model.get_state())
    try:
        fn = make_epoch_fn(ModelSpec.of(model, step_scale), (chain.token, list(chain.links)), seed, epoch, with_counts,
                           fault_hook)
        results = shards_df.mapInArrow(fn, _RESULT_SCHEMA)
        depth = 2
        zero: StateSum | deltas.DeltaSum = StateSum()
        acc: StateSum | deltas.DeltaSum = results.rdd.treeAggregate(zero, _seq, _comb, depth=depth)
    finally:
        if own:
            chain.close()
    mixed, counters = mix(model.get_state(), acc)
    counters["broadcast_bytes"] = float(chain.last_bytes)
    return mixed, counters
