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
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import scipy.sparse as sp
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from sparkhc import fsio
from sparkhc.batch import DOC_ID, SparseBatch
from sparkhc.models.base import HierModel, ModelState, StateSum
from sparkhc.persistence import (
    atomic_dir,
    json_text,
    read_npz,
    read_state,
    state_from_bytes,
    state_to_bytes,
    write_json_atomic,
    write_npz,
    write_state,
)
from sparkhc.spark import deltas, small

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


class BaseChain:
    """The base state of every epoch of the jobs mode, shipped to the tasks as broadcasts: the full
    state once, then each epoch's mixed change as a row-sparse patch (:func:`deltas.encode_values`
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
    model_name: str,
    params: dict[str, Any],
    taxonomy: Any,
    n_features: int,
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

        from sparkhc.models import get_model_class

        ctx = TaskContext.get()
        shard = ctx.partitionId() if ctx is not None else 0
        batch = _partition_batch(batches, n_features, with_counts)
        if batch is None:
            return
        model = get_model_class(model_name)(taxonomy, n_features, **params)
        # row-sparse delta from the base state when possible (sparkhc.spark.deltas), else the state
        payload = state_to_bytes(shard_epoch(model, _task_base(token, links), batch, shard, seed, epoch,
                                             fault_hook))  # a delta is a state too
        yield pa.RecordBatch.from_pydict(
            {"shard": [shard], "n": [len(batch)], "state": [payload]},
            schema=pa.schema([("shard", pa.int32()), ("n", pa.int64()), ("state", pa.binary())]),
        )

    return run


def _touched(model: HierModel) -> dict[str, Any]:
    """The rows the epoch may have changed, per feature-major array (``W`` and, for averaged
    weights, ``Wa``, written together), for :func:`deltas.encode`."""
    rows = getattr(model, "touched_rows_", None)
    return {"W": rows, "Wa": rows}


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
        fn = make_epoch_fn(model.name, model.params, model.taxonomy, model.n_features,
                           (chain.token, list(chain.links)), seed, epoch, with_counts, fault_hook)
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


def mix(
    base: ModelState, acc: StateSum | deltas.DeltaSum, inplace: bool = False
) -> tuple[ModelState, dict[str, float]]:
    """The mixed state of one epoch from the shards' aggregate, and the epoch's counters (summed
    over shards, plus ``shards``); the state's counters accumulate over epochs. ``inplace``: a
    delta aggregate may be added into ``base``'s arrays (the caller's private copy)."""
    if acc.n == 0:
        raise ValueError("no training documents in any partition")
    mixed = acc.apply(base, inplace=inplace) if isinstance(acc, deltas.DeltaSum) else acc.result()
    if mixed.combine == "sum" and acc.n > 1:
        # every partition returned (broadcast state + its shard's statistics): keep one copy of the
        # broadcast state, so a warm start or a later epoch does not multiply it by the shards
        mixed.arrays = remove_copies(mixed.arrays, base.arrays, acc.n - 1)
    counters = dict(acc.counters)
    counters["shards"] = acc.n
    prev = dict(base.counters)
    mixed.counters = {k: prev.get(k, 0.0) + v for k, v in counters.items() if k not in _EPOCH_ONLY}
    return mixed, counters


#: counters of one epoch that do not accumulate into the model's
_EPOCH_ONLY = ("shards", "result_bytes", "broadcast_bytes")


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
    spark: small.SessionLike,
    features: DataFrame | None,
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
    mixing: str = "auto",
    exchange_dir: str | Path | None = None,
    on_epoch_state: Callable[[int, ModelState], bool | None] | None = None,
    rows: SparseBatch | None = None,
    stop_chunk: int = 0,
) -> HierModel:
    """Train ``model`` by iterative parameter mixing over ``shards`` partitions.

    ``rows``: the documents of ``features`` already read on the driver (small inputs,
    :mod:`sparkhc.spark.small`): the same shards are trained in this process, with the same mixing
    as barrier mixing (bit-identical weights), and ``features`` is not used (may be None).

    With ``checkpoint_dir`` the state after each epoch is saved there atomically, and a rerun
    resumes after the last completed epoch (same data, model and seed assumed; checked by the
    model name and parameters recorded with the checkpoint). With ``warm_start`` training
    continues from the model's current state (refreshing a saved model with new documents).

    ``mixing`` (``train.mixing``): ``"jobs"`` runs one Spark job per epoch (broadcast the state,
    ``mapInArrow`` the shards, ``treeAggregate`` the deltas); ``"barrier"`` runs every epoch in
    one barrier stage whose tasks exchange states and deltas through files in ``exchange_dir``
    (default: a temporary directory; on a cluster it must be shared by every executor), which
    removes the per-epoch job, broadcast and result transfer; ``"auto"`` (default) uses barrier
    mixing in local mode (:func:`mixing_mode`). Both give the same mixture of the same shards
    (up to the order of float64 summation).

    ``on_epoch_state(epoch, state)``, when given, is called on the driver with the mixed state
    after every epoch, in order (barrier mixing: after the stage, which then keeps every epoch's
    state in the exchange directory). When it returns True the training stops after that epoch
    (an early stop). Barrier mixing runs its epochs in one stage, so it has run them all by then
    (only the later calls are skipped, and the model holds the last epoch's state), unless
    ``stop_chunk`` > 0: then it runs stages of that many epochs, each resuming from the state the
    last one ended with (what a resume from a checkpoint does: the same states), and stops after
    the stage in which the callback asked for it. ``shards`` 0 means :func:`resolve_shards`.
    """
    model.validate_params()
    shards = resolve_shards(spark, shards)
    if mixing not in ("auto", "barrier", "jobs"):
        raise ValueError(f"mixing must be 'auto', 'barrier' or 'jobs', not {mixing!r}")
    start_epoch = 0
    if not warm_start or model.state_ is None:
        model.set_state(model.init_state())
    ckpt = Path(checkpoint_dir) if checkpoint_dir is not None else None
    if ckpt is not None:
        resumed = _load_checkpoint(ckpt, model, seed, shards, checkpoint_key)
        if resumed is not None:
            start_epoch = resumed + 1
            log.info("resuming from checkpoint %s after epoch %d", ckpt, resumed + 1)
    if start_epoch >= epochs:
        return model
    if rows is not None:
        train_on_driver(model, rows, epochs, start_epoch, shards, seed, ckpt, fault_hook, progress, checkpoint_key,
                        on_epoch_state, threads=small.task_slots(spark))
        return model
    assert features is not None
    spark = small.active(spark)
    if mixing_mode(spark, mixing, model, exchange_dir) == "barrier":
        # with a stopping callback and stop_chunk: stages of stop_chunk epochs, each resuming from the last
        # (the resume of a checkpoint: the same states), until the callback stops the training
        e0 = start_epoch
        while e0 < epochs:
            e1 = min(epochs, e0 + int(stop_chunk)) if stop_chunk > 0 and on_epoch_state is not None else epochs
            if _train_barrier(spark, features, model, e1, e0, shards, seed, ckpt, with_counts,
                              fault_hook, progress, checkpoint_key, exchange_dir, on_epoch_state):
                break
            e0 = e1
        return model
    shards_df = shard_features(features, shards).cache()
    chain = BaseChain(spark.sparkContext)
    try:
        chain.start(model.get_state())
        prev: ModelState | None = None  # the base of the epoch before (the chain ends there)
        for epoch in range(start_epoch, epochs):
            t0 = time.perf_counter()
            if prev is not None:
                chain.advance(prev, model.get_state())
                prev = None
            mixed, counters = run_epoch(spark, shards_df, model, seed, epoch, with_counts, fault_hook, chain)
            prev = model.get_state()
            model.set_state(mixed)
            stop = bool(on_epoch_state(epoch, mixed)) if on_epoch_state is not None else False
            info = epoch_info(epoch, epochs, counters, time.perf_counter() - t0)
            log_epoch(info)
            if progress is not None:
                progress(info)
            if ckpt is not None:
                _save_checkpoint(ckpt, model, epoch, seed, shards, checkpoint_key)
            if stop:
                break
    finally:
        chain.close()
        shards_df.unpersist()
    return model


def resolve_shards(spark: small.SessionLike, shards: int) -> int:
    """The number of shards of ``train.shards``: itself when positive; 0 (auto): the task slots
    Spark reports (``defaultParallelism``: the executors' cores, or N of ``local[N]``). Shards
    beyond the slots do not run at the same time, so they add no speed, and every extra shard costs
    accuracy per epoch: the mixed model moves by the mean of the shards' changes, so each
    document's correction reaches it divided by the number of shards (docs/benchmarks.md,
    "Accuracy against the number of shards")."""
    if int(shards) < 0:
        raise ValueError(f"shards must be >= 0 (0 = auto), not {shards}")
    return int(shards) if int(shards) > 0 else max(1, small.task_slots(spark))


def validation_split(features: DataFrame, fraction: float, seed: int, band: int = 0) -> tuple[DataFrame, DataFrame]:
    """(fit, validation): a seeded share ``fraction`` of the documents by a hash of their id
    (band ``b``: ``b * cut <= pmod(hash(doc_id, seed + 17), 10000) < (b + 1) * cut``, ``cut =
    fraction * 10000``; band 0 is the first ``fraction``), the same rows on every run; disjoint
    bands are the inner folds of :func:`select_epochs`."""
    cut = small.validation_cut(fraction)
    if not 0 <= int(band) < small.validation_bands(fraction):
        raise ValueError(f"validation band {band} out of range for the fraction {fraction}")
    h = f"pmod(hash({DOC_ID}, {int(seed) + 17}), 10000)"
    val = F.expr(f"{h} < {cut}" if int(band) == 0 else f"{h} >= {int(band) * cut} AND {h} < {(int(band) + 1) * cut}")
    return features.where(~val), features.where(val)


def select_epochs(
    spark: small.SessionLike,
    features: DataFrame | None,
    model: HierModel,
    max_epochs: int,
    shards: int,
    seed: int = 0,
    fraction: float = 0.1,
    with_counts: bool = False,
    mixing: str = "auto",
    exchange_dir: str | Path | None = None,
    patience: int = 0,
    rows: SparseBatch | None = None,
    folds: int = 1,
    c_grid: Sequence[float] | None = None,
    c_default: float | None = None,
) -> dict[str, Any]:
    """The number of epochs (and, with ``c_grid``, the PA aggressiveness C) chosen on validation
    data carved out of the training documents (``features`` on Spark, or ``rows`` read in the
    driver; nothing else is read).

    For each candidate C (``c_grid``; None: the model's own parameters) and each of ``folds``
    disjoint validation bands (inner folds: :func:`validation_split`,
    :func:`sparkhc.spark.small.validation_ids`, the same documents on both paths), a fresh copy of
    ``model`` is trained by :func:`train_ipm` on the other documents for at most ``max_epochs``
    epochs and scored on its band after every epoch by :func:`sparkhc.epochs.validation_score`
    (hF + LB macro-F1 over the model taxonomy's real nodes); each fold stops early after
    ``max(patience, ceil(0.5 x best))`` epochs without a better score of its own
    (:class:`sparkhc.epochs.EarlyStopping`; patience 0: never). The folds' count tables are pooled
    epoch by epoch (:class:`sparkhc.epochs.PooledCurve`: out-of-fold scores of every held-out
    document) and the candidate and epoch count with the best smoothed pooled score win
    (:func:`sparkhc.epochs.choose`); with ``c_default`` (one of the grid), another C is taken only
    when it beats that one by more than the standard error of their paired difference over the
    folds (:func:`sparkhc.epochs.paired_gain`, :func:`sparkhc.epochs.prefer_default`: the
    one-standard-error rule). One fold and no grid is the single validation slice of earlier
    versions, exactly.

    Returns ``{"epochs", "validation_score", "validation_hF", "validation_macro_F1",
    "validation_documents", "fraction", "folds", "max_epochs", "epochs_run", "patience",
    "patience_growth", "criterion", "stopped_early"}`` for the chosen candidate (its pooled
    curves), plus ``"C"``, ``"C_grid"`` and ``"C_scores"`` with a grid. With ``rows`` the training
    runs in this process (bit-identical to the Spark path's, :func:`train_on_driver`) and
    ``features`` is not used."""
    from sparkhc.batch import label_matrix, leaf_matrix
    from sparkhc.epochs import (
        EarlyStopping,
        PooledCurve,
        choose,
        paired_gain,
        prefer_default,
        validation_score,
    )
    from sparkhc.metrics import MetricCounts
    from sparkhc.models import get_model_class

    folds = int(folds)
    if not 1 <= folds <= small.validation_bands(fraction):
        raise ValueError(f"select_epochs: {folds} inner folds of {fraction} each do not fit in the training part")
    tax = model.taxonomy
    cls = get_model_class(model.name)
    cands: list[dict[str, Any]] = [{}] if c_grid is None else [{"C": float(c)} for c in c_grid]
    if not cands:
        raise ValueError("select_epochs: an empty C grid")
    splits: list[tuple[SparseBatch | None, DataFrame | None, SparseBatch]] = []
    for band in range(folds):
        if rows is not None:
            held = small.validation_ids(rows.doc_ids, fraction, seed, band)
            fit_rows: SparseBatch | None = rows.subset(np.flatnonzero(~held))
            val = small.sorted_by_id(rows.subset(np.flatnonzero(held)))
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
    curves: list[PooledCurve] = []
    fold_stoppers: list[list[EarlyStopping]] = []  # per candidate, one per fold
    for cand in cands:
        params = {**model.params, **cand}
        pooled = PooledCurve()
        stoppers: list[EarlyStopping] = []
        for band, (fit_rows, fit_df, val) in enumerate(splits):
            gold = label_matrix(val.labels or [], tax)
            probe = cls(tax, model.n_features, **params)
            stopper = EarlyStopping(int(patience))
            stoppers.append(stopper)

            tag = "".join(f"{k}={v:g} " for k, v in cand.items()) + (f"fold {band + 1}/{folds}, " if folds > 1 else "")

            def score(epoch: int, state: ModelState, probe: Any = probe, gold: Any = gold, val: SparseBatch = val,
                      stopper: EarlyStopping = stopper, pooled: PooledCurve = pooled, tag: str = tag) -> bool:
                probe.set_state(state)
                counts = MetricCounts(tax)
                counts.add(gold, leaf_matrix(probe.decode(val, return_scores=False)[0], tax))
                pooled.add(epoch, counts)
                m = counts.compute_selection()
                stop = stopper.add(validation_score(m))
                log.info("select_epochs: %sepoch %d, validation hF %.4f, macro-F1 %.4f (%d documents)%s", tag, epoch + 1, float(m["hF"]), float(m["LBMaF"]), len(val),
                         f"; stopping: no better score in {stopper.wait()} epochs" if stop else "")
                return stop

            fresh = cls(tax, model.n_features, **params)
            train_ipm(spark, fit_df, fresh, epochs=max_epochs, shards=shards, seed=seed, with_counts=with_counts,
                      mixing=mixing, exchange_dir=exchange_dir, on_epoch_state=score, rows=fit_rows,
                      stop_chunk=int(patience))  # barrier mixing: stages of `patience` epochs
            pooled.end_fold()
        curves.append(pooled)
        fold_stoppers.append(stoppers)
    metrics = [c.metrics() for c in curves]
    scores = [[validation_score(m) for m in ms] for ms in metrics]
    i, epochs, _ = choose(scores)
    gain: tuple[float, float] | None = None
    if c_grid is not None and c_default is not None and i != list(c_grid).index(c_default):
        j = list(c_grid).index(c_default)
        e_j = choose([scores[j]])[1]
        gain = paired_gain([s.smoothed for s in fold_stoppers[i]], epochs,
                           [s.smoothed for s in fold_stoppers[j]], e_j)
        if prefer_default(gain):
            log.info("select_epochs: C=%g beats C=%g by %.4f +- %.4f (se) on the inner folds: within the noise, "
                     "C=%g kept", c_grid[i], c_default, gain[0], gain[1], c_default)
            i, epochs = j, e_j
    stoppers = fold_stoppers[i]
    summary = {**(stoppers[0].summary() if folds == 1 else {}),
               "epochs": int(epochs), "epochs_run": max(curves[i].epochs_run),
               "patience": int(patience), "stopped_early": any(s.should_stop() for s in stoppers)}
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
                    "C_default": c_default, "C_gain": None if gain is None else [gain[0], gain[1]]})
    return out


#: keys of an epoch record that describe the run, not the model (left out of model metadata)
RUN_FIGURES = ("seconds", "broadcast_bytes", "result_bytes")


def epoch_info(epoch: int, epochs: int, counters: dict[str, float], secs: float) -> dict[str, Any]:
    """The per-epoch record (driver log line, ``progress`` callback, model metadata without
    :data:`RUN_FIGURES`). The jobs mode adds the bytes it shipped: ``broadcast_bytes`` (the base
    state or delta broadcast for the epoch, :class:`BaseChain`) and ``result_bytes`` (the
    partitions' results)."""
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
    for k in ("broadcast_bytes", "result_bytes"):
        if k in counters:
            info[k] = int(counters[k])
    return info


def log_epoch(info: dict[str, Any]) -> None:
    shipped = ""
    if "broadcast_bytes" in info:
        shipped = f", shipped {info['broadcast_bytes']:,} B out and {info.get('result_bytes', 0):,} B back"
    log.info(
        "epoch %d/%d: %d examples in %d shards, %d updates, mean loss %.4f, %.2f s%s",
        info["epoch"], info["epochs"], info["examples"], info["shards"], info["updates"],
        info["mean_loss"], info["seconds"], shipped,
    )


# ----------------------------------------------------------------------------- barrier mixing
def mixing_mode(spark: SparkSession, requested: str, model: HierModel, exchange_dir: str | Path | None = None) -> str:
    """``"barrier"`` or ``"jobs"`` for ``requested`` (``train.mixing``).

    ``auto`` picks barrier mixing, for models whose state mixes by row-sparse deltas
    (:func:`deltas.supports`), in local mode (the exchange directory is then on the one machine) or
    when ``exchange_dir`` is a URI of a shared store (``hdfs://``, ``s3://``, ``gs://``, ...: every
    executor reaches it); one Spark job per epoch otherwise (a cluster with no exchange directory,
    or a plain path that may be local to each machine: ``barrier`` must then be asked for).
    """
    if requested == "jobs" or not deltas.supports(model.get_state()):
        return "jobs"
    if requested == "barrier":
        return "barrier"
    if exchange_dir is not None and fsio.is_uri(exchange_dir):
        return "barrier"
    return "barrier" if (spark.sparkContext.master or "").startswith("local") else "jobs"


class Exchange:
    """The folder of one barrier-mixing run: ``run`` under ``location`` (a plain path or any URI
    :func:`sparkhc.fsio.resolve` takes), all IO through ``pyarrow.fs``. Every file is written with
    :func:`sparkhc.fsio.write_atomic`; readers read a file only after the marker or task success
    that follows its write (:func:`_sync`), so an object store's write-once keys need no rename.
    Pickles as its location (the tasks open their own file system)."""

    def __init__(self, location: str | Path, run: str = "") -> None:
        self.location, self.run = str(location), run
        self.fs, base = fsio.resolve(self.location)
        self.root = f"{base}/{run}" if run else base
        self.local = fsio.is_local(self.fs)
        self.poll = 0.002 if self.local else 0.05  # seconds between listings of a barrier's markers

    def __reduce__(self) -> tuple[Any, ...]:
        return (Exchange, (self.location, self.run))

    def __str__(self) -> str:
        return f"{fsio.redact(self.location)}{'/' + self.run if self.run else ''}"

    def path(self, name: str) -> str:
        return f"{self.root}/{name}"

    def create(self) -> None:
        self.fs.create_dir(self.root, recursive=True)

    def write(self, name: str, write: Callable[[Any], Any]) -> None:
        fsio.write_atomic(self.fs, self.path(name), write)

    def write_state(self, name: str, state: ModelState) -> None:
        self.write(name, lambda fh: write_state(fh, state))  # streamed

    def read_state(self, name: str) -> ModelState:
        with fsio.open_input(self.fs, self.path(name)) as fh:
            return read_state(fh)

    def write_json(self, name: str, obj: Any) -> None:
        text = json_text(obj).encode("utf-8")
        self.write(name, lambda fh: fh.write(text))

    def read_json(self, name: str) -> dict[str, Any]:
        import json

        return dict(json.loads(fsio.read_bytes(self.fs, self.path(name)).decode("utf-8")))

    def exists(self, name: str) -> bool:
        return fsio.exists(self.fs, self.path(name))

    def delete(self, name: str) -> None:
        try:
            self.fs.delete_file(self.path(name))
        except FileNotFoundError:
            pass

    def mark(self, folder: str, name: str) -> None:
        """An empty marker ``folder/name``."""
        if self.local:
            self.fs.create_dir(self.path(folder), recursive=True)
        self.write(f"{folder}/{name}", lambda fh: None)

    def listdir(self, folder: str) -> list[str]:
        return fsio.listdir(self.fs, self.path(folder))

    def remove(self) -> None:
        fsio.delete_tree(self.fs, self.root)


def _shard_file(shard: int, part: int) -> str:
    return f"shard-{shard:05d}-{part:05d}.npz"


def _save_shard(ex: Exchange, shard: int, part: int, batch: SparseBatch) -> None:
    """A shard's documents for the barrier stage (CSR arrays + gold label names; no pickle)."""
    X = sp.csr_matrix(batch.X)
    labels = batch.labels or [[] for _ in range(len(batch))]
    flat = [lab for labs in labels for lab in labs]
    arrays: dict[str, Any] = {
        "indptr": X.indptr.astype(np.int64), "indices": X.indices.astype(np.int32), "data": X.data,
        "shape": np.array(X.shape, dtype=np.int64), "doc_ids": np.asarray(batch.doc_ids, dtype=str),
        "label_ptr": np.concatenate([[0], np.cumsum([len(x) for x in labels])]).astype(np.int64),
        "label_names": np.asarray(flat if flat else [""], dtype=str),
    }
    if batch.counts is not None:
        C = sp.csr_matrix(batch.counts)
        arrays.update(c_indptr=C.indptr.astype(np.int64), c_indices=C.indices.astype(np.int32), c_data=C.data)
    ex.write(_shard_file(shard, part), lambda fh: write_npz(fh, arrays))


def _load_shard(ex: Exchange, shard: int, parts: list[int]) -> SparseBatch:
    """Shard ``shard`` as the jobs mode's partition holds it: its pieces from every input
    partition, sorted by doc id."""
    batch = SparseBatch.concat([_load_piece(ex, _shard_file(shard, p)) for p in parts])
    return batch.subset(np.argsort(batch.doc_ids, kind="stable"))


def _load_piece(ex: Exchange, name: str) -> SparseBatch:
    with fsio.open_input(ex.fs, ex.path(name)) as fh:
        a = read_npz(fh)
    shape = tuple(int(v) for v in a["shape"])
    X = sp.csr_matrix((a["data"], a["indices"], a["indptr"]), shape=shape)
    ptr = a["label_ptr"]
    names = a["label_names"].tolist()
    labels = [names[ptr[i] : ptr[i + 1]] for i in range(shape[0])]
    counts = None
    if "c_indptr" in a:
        counts = sp.csr_matrix((a["c_data"], a["c_indices"], a["c_indptr"]), shape=shape)
    return SparseBatch(X, a["doc_ids"], labels, counts)


_SHARD = "_shard"
_STAGE_SCHEMA = "shard int, part int, n long"


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
            _save_shard(work, int(k), part, batch)
            out.append((int(k), len(rows)))
        yield pa.RecordBatch.from_pydict(
            {"shard": [k for k, _ in out], "part": [part] * len(out), "n": [n for _, n in out]},
            schema=pa.schema([("shard", pa.int32()), ("part", pa.int32()), ("n", pa.int64())]),
        )

    return run


_ATTEMPT_PROP = "sparkhc.ipm.attempt"


def _make_barrier_fn(
    model_name: str, params: dict[str, Any], taxonomy: Any, n_features: int, work: Exchange, present: list[int],
    pieces: dict[int, list[int]], tasks: int, seed: int, start_epoch: int, epochs: int, shards: int,
    fault_hook: Callable[[int, int], None] | None, ckpt: str | None, checkpoint_key: dict[str, Any] | None,
    keep_states: bool = False,
) -> Callable[[Iterable[int]], Iterable[int]]:
    """Every epoch in one barrier stage: task ``t`` runs the shards ``present[t::tasks]`` (one after
    another, each from the epoch's base state, exactly as the one-job-per-epoch mode) and writes
    their row-sparse deltas to the exchange directory; all tasks meet at a file barrier; then every
    task sums all deltas (in shard order) into its own copy of the base with the same code
    (:func:`mix`), so all hold bit-identical mixed states without a full state crossing a file;
    task 0 writes the checkpoint and the epoch record; all meet again. Task 0 writes the final
    state for the driver. A retried stage resumes from the checkpoint when there is one (else from
    the start: the same result, the epochs are deterministic)."""

    def run(_it: Iterable[int]) -> Iterator[int]:
        from pyspark import BarrierTaskContext

        from sparkhc.models import get_model_class

        ctx = BarrierTaskContext.get()
        t = ctx.partitionId()
        # one token per stage attempt, so that a retry (the driver reruns the stage as a new job)
        # never meets the markers of a failed attempt; not allGather, which costs about a second
        attempt = f"{ctx.getLocalProperty(_ATTEMPT_PROP)}-s{ctx.stageId()}"
        wd = work
        mine = present[t::tasks]
        batches = {k: _load_shard(work, k, pieces[k]) for k in mine}
        model = get_model_class(model_name)(taxonomy, n_features, **params)
        first = start_epoch
        base: ModelState | None = None
        if ckpt is not None:
            resumed = _load_checkpoint(Path(ckpt), model, seed, shards, checkpoint_key)
            if resumed is not None and resumed + 1 > start_epoch:
                first, base = resumed + 1, model.get_state()
        if base is None:
            base = wd.read_state(f"state-{start_epoch:05d}.npz")
        for epoch in range(first, epochs):
            t0 = time.perf_counter()
            for k in mine:
                # streamed
                wd.write_state(f"delta-{epoch:05d}-{k:05d}.npz", shard_epoch(model, base, batches[k], k, seed, epoch,
                                                                            fault_hook))
            _sync(wd, f"{attempt}-{epoch:05d}-a", t, tasks)
            base, ep_counters = mix_deltas(base, (wd.read_state(f"delta-{epoch:05d}-{k:05d}.npz") for k in present),
                                           len(present))
            if t == 0:  # the record first: a checkpointed epoch always has one
                if keep_states and epoch + 1 < epochs:  # the last one is written below
                    wd.write_state(f"state-{epoch + 1:05d}.npz", base)
                wd.write_json(f"epoch-{epoch:05d}.json",
                              epoch_info(epoch, epochs, ep_counters, time.perf_counter() - t0))
                if ckpt is not None:
                    model.set_state(base)
                    _save_checkpoint(Path(ckpt), model, epoch, seed, shards, checkpoint_key)
                    model.state_ = None
            _sync(wd, f"{attempt}-{epoch:05d}-b", t, tasks)
            if t == 0:  # everybody has read them
                for k in present:
                    wd.delete(f"delta-{epoch:05d}-{k:05d}.npz")
        if t == 0:
            wd.write_state(f"state-{epochs:05d}.npz", base)
        yield t

    return run


def shard_epoch(model: HierModel, base: ModelState, batch: SparseBatch, shard: int, seed: int, epoch: int,
                fault_hook: Callable[[int, int], None] | None = None) -> ModelState:
    """One shard-local epoch (both mixing modes and the driver execution, :mod:`sparkhc.spark.small`):
    ``model`` (a scratch instance) runs ``partial_fit`` on shard ``shard``'s documents from a copy of
    ``base`` (seed ``seed + 1000003 * shard``); returns the row-sparse delta from ``base`` with the
    epoch's counters (:func:`deltas.encode`), or the full state for states that do not mix by
    deltas (jobs mode only). The model holds no state afterwards."""
    model.state_ = None  # free the previous shard's copy first
    model.set_state(base.copy())
    counters = model.partial_fit(batch, seed=seed + 1000003 * shard, epoch=epoch)
    if fault_hook is not None:
        fault_hook(shard, epoch)
    out = model.get_state()
    out.counters = {c: float(v) for c, v in counters.items()}
    delta = deltas.encode(out, base.arrays, _touched(model))
    model.state_ = None
    return delta if delta is not None else out


def mix_deltas(base: ModelState, shard_deltas: Iterable[ModelState], n: int) -> tuple[ModelState, dict[str, float]]:
    """The mixed state of an epoch from the ``n`` shards' deltas given in shard order (summed
    block-wise by :func:`mix` into ``base``'s arrays, which it may modify), and the counters."""
    acc = deltas.DeltaSum(max_parts=n)
    for d in shard_deltas:
        acc = acc.add(d)
    return mix(base, acc, inplace=True)


def _sync(wd: Exchange, tag: str, t: int, tasks: int) -> None:
    """All ``tasks`` tasks meet: each writes a marker ``sync-<tag>/<t>`` and waits until the
    folder lists all of them (one listing per poll; the barrier stage guarantees the tasks run at
    the same time; Spark kills the others when one fails). A task writes its marker after its
    files, so a marker certifies them. ``BarrierTaskContext.barrier()`` costs about a second per
    call here; local files cost milliseconds."""
    folder = f"sync-{tag}"
    wd.mark(folder, f"{t:05d}")
    names = {f"{i:05d}" for i in range(tasks)}
    while not names.issubset(wd.listdir(folder)):
        time.sleep(wd.poll)


def _train_barrier(
    spark: SparkSession, features: DataFrame, model: HierModel, epochs: int, start_epoch: int, shards: int,
    seed: int, ckpt: Path | None, with_counts: bool, fault_hook: Callable[[int, int], None] | None,
    progress: Callable[[dict[str, Any]], None] | None, checkpoint_key: dict[str, Any] | None,
    exchange_dir: str | Path | None, on_epoch_state: Callable[[int, ModelState], bool | None] | None = None,
) -> bool:
    """IPM with every epoch in one Spark barrier stage (see :func:`_make_barrier_fn`): no job,
    broadcast or result transfer per epoch; states and deltas go through files in a fresh folder
    under ``exchange_dir`` (a path or URI, :class:`Exchange`; default: a local temp directory),
    removed at the end whatever happens. Returns whether ``on_epoch_state`` asked to stop."""
    if exchange_dir is None:
        work = Exchange(tempfile.mkdtemp(prefix="sparkhc-ipm-"))
    else:
        work = Exchange(exchange_dir, f"sparkhc-ipm-{uuid.uuid4().hex}")
        work.create()
    stop = threading.Event()
    try:
        t0 = time.perf_counter()
        # the shard of a document is the partition repartition(shards, doc_id) would give it
        tagged = features.withColumn(_SHARD, F.expr(f"pmod(hash({DOC_ID}), {int(shards)})"))
        rows = tagged.mapInArrow(_make_stage_fn(model.n_features, with_counts, work), _STAGE_SCHEMA).collect()
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
        fn = _make_barrier_fn(model.name, model.params, model.taxonomy, model.n_features, work, present, pieces, tasks,
                              seed, start_epoch, epochs, shards, fault_hook,
                              str(ckpt) if ckpt is not None else None, checkpoint_key,
                              keep_states=on_epoch_state is not None)
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
                            attempt, attempts, str(e).splitlines()[0][:200])
        log.info("barrier mixing: epochs %d-%d in %.2f s", start_epoch + 1, epochs, time.perf_counter() - t1)
        stop.set()
        watcher.join()
        infos = [work.read_json(f"epoch-{e:05d}.json") for e in range(start_epoch, epochs)]
        stopped = False  # the stage ran every epoch; an early stop skips scoring the later states
        if on_epoch_state is not None:
            for ep in range(start_epoch, epochs - 1):
                if on_epoch_state(ep, work.read_state(f"state-{ep + 1:05d}.npz")):
                    stopped = True
                    break
        model.set_state(work.read_state(f"state-{epochs:05d}.npz"))  # one copy, no bytes
        if on_epoch_state is not None and not stopped:
            stopped = bool(on_epoch_state(epochs - 1, model.get_state()))
        if progress is not None:
            for info in infos:
                progress(info)
        return stopped
    finally:
        spark.sparkContext.setLocalProperty(_ATTEMPT_PROP, None)  # type: ignore[arg-type]
        stop.set()
        try:
            work.remove()
        except OSError as e:  # never hide the training's own error behind a cleanup failure
            log.warning("barrier mixing: could not remove %s: %s", work, e)


def _max_attempts(spark: SparkSession) -> int:
    """Attempts of the barrier stage: ``spark.task.maxFailures``, or the ``F`` of a
    ``local[N,F]`` master (plain ``local[N]``: 1, no retry), as Spark would allow a task."""
    import re

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
        except (OSError, ValueError):  # pragma: no cover - the stage was cleaned up
            return
        if stop.is_set():
            return
        stop.wait(0.2)


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


def train_on_driver(
    model: HierModel, rows: SparseBatch, epochs: int, start_epoch: int, shards: int, seed: int,
    ckpt: Path | None, fault_hook: Callable[[int, int], None] | None,
    progress: Callable[[dict[str, Any]], None] | None, checkpoint_key: dict[str, Any] | None,
    on_epoch_state: Callable[[int, ModelState], bool | None] | None = None, threads: int = 1,
) -> None:
    """Epochs ``start_epoch..epochs-1`` of iterative parameter mixing from ``model``'s state, in
    this process: the shards of barrier mixing, run in ``threads`` threads (task ``t`` runs shards
    ``present[t::tasks]``, as the barrier stage's tasks), mixed in shard order."""
    from sparkhc.models import get_model_class

    t_start = time.perf_counter()
    of = small.shard_ids(rows.doc_ids, shards)
    present = [int(k) for k in np.unique(of)]
    if not present:
        raise ValueError("no training documents")
    batches = {k: small.sorted_by_id(rows.subset(np.flatnonzero(of == k))) for k in present}
    tasks = max(1, min(len(present), int(threads)))
    workers = [get_model_class(model.name)(model.taxonomy, model.n_features, **model.params) for _ in range(tasks)]
    log.info("driver execution: %d documents in %d shards, %d threads (%.2f s to shard)", len(rows), len(present),
             tasks, time.perf_counter() - t_start)
    base = model.get_state()
    model.state_ = None
    pool = ThreadPoolExecutor(max_workers=tasks, thread_name_prefix="sparkhc-ipm") if tasks > 1 else None

    def run_task(t: int, b: ModelState, epoch: int) -> list[tuple[int, ModelState]]:
        return [(k, shard_epoch(workers[t], b, batches[k], k, seed, epoch, fault_hook)) for k in present[t::tasks]]

    last = epochs
    try:
        for epoch in range(start_epoch, epochs):
            t0 = time.perf_counter()
            if pool is None:
                done = run_task(0, base, epoch)
            else:
                futures = [pool.submit(run_task, t, base, epoch) for t in range(tasks)]
                done = [d for f in futures for d in f.result()]
            by_shard = dict(done)
            done = []
            base, counters = mix_deltas(base, (by_shard.pop(k) for k in present), len(present))
            info = epoch_info(epoch, epochs, counters, time.perf_counter() - t0)
            if ckpt is not None:
                model.set_state(base)
                _save_checkpoint(ckpt, model, epoch, seed, shards, checkpoint_key)
                model.state_ = None
            log_epoch(info)
            if progress is not None:
                progress(info)
            if on_epoch_state is not None and on_epoch_state(epoch, base.copy()):  # (next epoch mixes into base)
                last = epoch + 1  # early stop asked for by the callback
                break
    finally:
        if pool is not None:
            pool.shutdown(wait=True)
    model.set_state(base)
    log.info("driver execution: epochs %d-%d in %.2f s", start_epoch + 1, last, time.perf_counter() - t_start)
