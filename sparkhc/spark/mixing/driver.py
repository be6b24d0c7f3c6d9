"""The driver engine: the epochs of iterative parameter mixing in this process, on rows read in
the driver (small inputs, :mod:`sparkhc.spark.plan`): the barrier engine's shards
(``pmod(hash(doc_id), shards)``, each in doc-id order), run in threads (the compiled kernels
release the GIL) and mixed in shard order by the same code, so the weights, checkpoints and epoch
records are the barrier engine's bit for bit. No Spark job runs."""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor
from typing import ClassVar

import numpy as np

from sparkhc.batch import SparseBatch
from sparkhc.models.base import HierModel, ModelState
from sparkhc.spark.hashing import shard_ids
from sparkhc.spark.mixing.checkpoints import Checkpoint
from sparkhc.spark.mixing.engine import Engine, ModelSpec, epoch_info, log_epoch
from sparkhc.spark.mixing.mix import mix_deltas, shard_epoch
from sparkhc.spark.mixing.settings import Hooks, MixingSettings
from sparkhc.spark.plan import sorted_by_id

log = logging.getLogger(__name__)


class DriverEngine(Engine):
    """The epochs in this process on ``rows`` (:func:`train_on_driver`), the shards run in
    ``threads`` threads (task ``t`` runs shards ``present[t::tasks]``, as the barrier stage's
    tasks)."""

    name: ClassVar[str] = "driver"

    def __init__(self, rows: SparseBatch, threads: int = 1) -> None:
        self.rows, self.threads = rows, int(threads)

    def run(self, settings: MixingSettings, model: HierModel, start_epoch: int, hooks: Hooks) -> None:
        train_on_driver(model, self.rows, settings, start_epoch, hooks, threads=self.threads)


def train_on_driver(model: HierModel, rows: SparseBatch, settings: MixingSettings, start_epoch: int = 0,
                    hooks: Hooks | None = None, threads: int = 1) -> None:
    """Epochs ``start_epoch..settings.epochs-1`` of iterative parameter mixing from ``model``'s
    state, in this process (:class:`DriverEngine`), with ``settings.shards`` resolved."""
    hooks = hooks if hooks is not None else Hooks()
    epochs, seed, shards = settings.epochs, settings.seed, settings.shards
    ckpt = Checkpoint.of(settings)
    t_start = time.perf_counter()
    of = shard_ids(rows.doc_ids, shards)
    present = [int(k) for k in np.unique(of)]
    if not present:
        raise ValueError("no training documents")
    batches = {k: sorted_by_id(rows.subset(np.flatnonzero(of == k))) for k in present}
    tasks = max(1, min(len(present), int(threads)))
    spec = ModelSpec.of(model, settings.local_scale(), len(present))
    memory: dict[int, object] = {}  # each shard's shard_memory (a dual solver's working sets)
    workers = [spec.build() for _ in range(tasks)]
    log.debug("driver execution: %d documents in %d shards, %d threads (%.2f s to shard)", len(rows), len(present),
             tasks, time.perf_counter() - t_start)
    base = model.get_state()
    model.state_ = None
    pool = ThreadPoolExecutor(max_workers=tasks, thread_name_prefix="sparkhc-ipm") if tasks > 1 else None

    def run_task(t: int, b: ModelState, epoch: int) -> list[tuple[int, ModelState]]:
        return [(k, shard_epoch(workers[t], b, batches[k], k, seed, epoch, hooks.fault_hook, memory))
                for k in present[t::tasks]]

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
                ckpt.save(model, epoch)
                model.state_ = None
            log_epoch(info)
            if hooks.progress is not None:
                hooks.progress(info)
            if hooks.on_epoch_state is not None and hooks.on_epoch_state(epoch, base.copy()):  # (next epoch mixes into base)
                last = epoch + 1  # early stop asked for by the callback
                break
            if settings.certified(info):
                last = epoch + 1
                break
    finally:
        if pool is not None:
            pool.shutdown(wait=True)
    model.set_state(base)
    log.debug("driver execution: epochs %d-%d in %.2f s", start_epoch + 1, last, time.perf_counter() - t_start)
