"""Iterative parameter mixing on Spark (Murawaki 2013, Alg. 6; McDonald et al. 2010).

One epoch = broadcast the state -> every partition (shard) runs one shard-local epoch of the
model's ``partial_fit`` from that state (``mapInArrow``: features arrive as Arrow batches and
become one :class:`SparseBatch` per partition, no Python object per row) -> each partition
returns its state and counters serialized with :func:`sparkhc.persistence.state_to_bytes` ->
``treeAggregate`` sums them (:class:`StateSum`) -> the driver divides (mean) -> checkpoint ->
next epoch. Counters travel in the results, not in accumulators, so retried tasks cannot
double-count. With one partition the result equals serial training exactly.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import scipy.sparse as sp
from pyspark.sql import DataFrame, SparkSession

from sparkhc.batch import DOC_ID, SparseBatch
from sparkhc.models.base import HierModel, ModelState, StateSum
from sparkhc.persistence import (
    atomic_dir,
    read_npz,
    state_from_bytes,
    state_to_bytes,
    write_json_atomic,
    write_npz,
)
from sparkhc.spark import deltas

log = logging.getLogger(__name__)

_RESULT_SCHEMA = "shard int, n long, state binary"


def shard_features(df: DataFrame, shards: int) -> DataFrame:
    """Deterministic shards: hash-partition by doc id and sort each shard by doc id."""
    return df.repartition(int(shards), DOC_ID).sortWithinPartitions(DOC_ID)


def _partition_batch(batches: Iterator[pa.RecordBatch], n_features: int, with_counts: bool) -> SparseBatch | None:
    tables = [b for b in batches if b.num_rows]
    if not tables:
        return None
    table = pa.Table.from_batches(tables)
    return SparseBatch.from_arrow(table, n_features, with_counts=with_counts)


def make_epoch_fn(
    model_name: str,
    params: dict[str, Any],
    taxonomy: Any,
    n_features: int,
    state_bc: Any,
    seed: int,
    epoch: int,
    with_counts: bool,
    fault_hook: Callable[[int, int], None] | None = None,
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The function each partition runs for one epoch (module-level so it pickles cleanly)."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        from sparkhc.models import get_model_class

        ctx = TaskContext.get()
        shard = ctx.partitionId() if ctx is not None else 0
        batch = _partition_batch(batches, n_features, with_counts)
        if batch is None:
            return
        model = get_model_class(model_name)(taxonomy, n_features, **params)
        state = state_from_bytes(state_bc.value)
        model.set_state(state)
        counters = model.partial_fit(batch, seed=seed + 1000003 * shard, epoch=epoch)
        if fault_hook is not None:
            fault_hook(shard, epoch)
        out = model.get_state()
        out.counters = {k: float(v) for k, v in counters.items()}
        # row-sparse delta from the broadcast state when possible (sparkhc.spark.deltas)
        delta = deltas.encode(out, state_bc.value, {"W": getattr(model, "touched_rows_", None)})
        payload = deltas.encode_bytes(delta) if delta is not None else state_to_bytes(out)
        yield pa.RecordBatch.from_pydict(
            {"shard": [shard], "n": [len(batch)], "state": [payload]},
            schema=pa.schema([("shard", pa.int32()), ("n", pa.int64()), ("state", pa.binary())]),
        )

    return run


def _seq(acc: StateSum | deltas.DeltaSum, row: Any) -> StateSum | deltas.DeltaSum:
    st = deltas.decode_bytes(bytes(row["state"]))
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
) -> tuple[ModelState, dict[str, float]]:
    """One mixing epoch from ``model``'s current state; returns the mixed state and counters."""
    sc = spark.sparkContext
    bc = sc.broadcast(state_to_bytes(model.get_state()))
    try:
        fn = make_epoch_fn(
            model.name, model.params, model.taxonomy, model.n_features, bc, seed, epoch, with_counts, fault_hook
        )
        results = shards_df.mapInArrow(fn, _RESULT_SCHEMA)
        depth = 2
        zero: StateSum | deltas.DeltaSum = StateSum()
        acc: StateSum | deltas.DeltaSum = results.rdd.treeAggregate(zero, _seq, _comb, depth=depth)
    finally:
        bc.unpersist()
    if acc.n == 0:
        raise ValueError("no training documents in any partition")
    mixed = acc.apply(model.get_state()) if isinstance(acc, deltas.DeltaSum) else acc.result()
    if mixed.combine == "sum" and acc.n > 1:
        # every partition returned (broadcast state + its shard's statistics): keep one copy of the
        # broadcast state, so a warm start or a later epoch does not multiply it by the shards
        mixed.arrays = remove_copies(mixed.arrays, model.get_state().arrays, acc.n - 1)
    counters = dict(acc.counters)
    counters["shards"] = acc.n
    prev = dict(model.get_state().counters)
    mixed.counters = {k: prev.get(k, 0.0) + v for k, v in counters.items() if k != "shards"}
    return mixed, counters


def remove_copies(arrays: dict[str, Any], start: dict[str, Any], copies: int) -> dict[str, Any]:
    """``arrays - copies * start`` key by key (keys only in ``arrays`` are kept as they are)."""
    out = dict(arrays)
    for k, v0 in start.items():
        if k not in out or (v0.nnz == 0 if sp.issparse(v0) else not np.any(v0)):
            continue
        v = out[k]
        if sp.issparse(v) or sp.issparse(v0):
            d = (sp.csr_matrix(v) - sp.csr_matrix(v0) * copies).tocsr()
            d.eliminate_zeros()
            d.sort_indices()
            out[k] = d.astype(v.dtype, copy=False)
        else:
            out[k] = (np.asarray(v) - np.asarray(v0) * copies).astype(v.dtype, copy=False)
    return out


def train_ipm(
    spark: SparkSession,
    features: DataFrame,
    model: HierModel,
    epochs: int,
    shards: int,
    seed: int = 0,
    checkpoint_dir: str | Path | None = None,
    with_counts: bool = False,
    fault_hook: Callable[[int, int], None] | None = None,
    progress: Callable[[dict[str, Any]], None] | None = None,
    warm_start: bool = False,
    checkpoint_key: dict[str, Any] | None = None,
) -> HierModel:
    """Train ``model`` by iterative parameter mixing over ``shards`` partitions.

    With ``checkpoint_dir`` the state after each epoch is saved there atomically, and a rerun
    resumes after the last completed epoch (same data, model and seed assumed; checked by the
    model name and parameters recorded with the checkpoint). With ``warm_start`` training
    continues from the model's current state (refreshing a saved model with new documents).
    """
    model.validate_params()
    shards_df = shard_features(features, shards).cache()
    try:
        start_epoch = 0
        if not warm_start or model.state_ is None:
            model.set_state(model.init_state())
        ckpt = Path(checkpoint_dir) if checkpoint_dir is not None else None
        if ckpt is not None:
            resumed = _load_checkpoint(ckpt, model, seed, shards, checkpoint_key)
            if resumed is not None:
                start_epoch = resumed + 1
                log.info("resuming from checkpoint %s after epoch %d", ckpt, resumed + 1)
        for epoch in range(start_epoch, epochs):
            t0 = time.perf_counter()
            mixed, counters = run_epoch(spark, shards_df, model, seed, epoch, with_counts, fault_hook)
            model.set_state(mixed)
            secs = time.perf_counter() - t0
            n = max(counters.get("examples", 0.0), 1.0)
            info = {
                "epoch": epoch + 1,
                "epochs": epochs,
                "shards": int(counters.get("shards", 0)),
                "examples": int(counters.get("examples", 0)),
                "updates": int(counters.get("updates", 0)),
                "mean_loss": counters.get("loss", 0.0) / n,
                "seconds": round(secs, 3),
            }
            log.info(
                "epoch %d/%d: %d examples in %d shards, %d updates, mean loss %.4f, %.2f s",
                info["epoch"], epochs, info["examples"], info["shards"], info["updates"],
                info["mean_loss"], secs,
            )
            if progress is not None:
                progress(info)
            if ckpt is not None:
                _save_checkpoint(ckpt, model, epoch, seed, shards, checkpoint_key)
    finally:
        shards_df.unpersist()
    return model


def _ckpt_key(model: HierModel, seed: int, shards: int, extra: dict[str, Any] | None) -> dict[str, Any]:
    return {"model": model.name, "params": model.params, "seed": seed, "shards": shards,
            "taxonomy": model.taxonomy.fingerprint(include_virtual=True), "n_features": model.n_features,
            "data": extra or {}}


def _save_checkpoint(ckpt: Path, model: HierModel, epoch: int, seed: int, shards: int,
                     extra: dict[str, Any] | None = None) -> None:
    ckpt.mkdir(parents=True, exist_ok=True)
    with atomic_dir(ckpt / "latest", overwrite=True) as tmp:
        with open(tmp / "state.npz", "wb") as fh:
            write_npz(fh, model.get_state().arrays)
        write_json_atomic(tmp / "checkpoint.json", {**_ckpt_key(model, seed, shards, extra), "epoch": epoch,
                                                    "counters": model.get_state().counters})


def _load_checkpoint(ckpt: Path, model: HierModel, seed: int, shards: int,
                     extra: dict[str, Any] | None = None) -> int | None:
    import json

    meta_file = ckpt / "latest" / "checkpoint.json"
    if not meta_file.is_file():
        return None
    meta = json.loads(meta_file.read_text(encoding="utf-8"))
    key = _ckpt_key(model, seed, shards, extra)
    if any(json.dumps(meta.get(k), sort_keys=True) != json.dumps(v, sort_keys=True) for k, v in key.items()):
        log.warning("checkpoint %s is for another configuration; starting from scratch", ckpt)
        return None
    with open(ckpt / "latest" / "state.npz", "rb") as fh:
        arrays = read_npz(fh)
    model.set_state(ModelState(arrays, meta.get("counters", {}), model.combine))
    return int(meta["epoch"])
