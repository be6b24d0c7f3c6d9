"""The mixing rule, written once for every engine: one shard-local epoch from the epoch's base
state (:func:`shard_epoch`), and the mixed state of the shards' results (:func:`mix`,
:func:`mix_deltas`): the mean of the shards' states for *mean* states (parameter mixing, Murawaki
2013 Alg. 6), the sum for *sum* states, applied as row-sparse deltas (:mod:`sparkhc.spark.deltas`)
where the state allows."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import scipy.sparse as sp

from sparkhc.batch import SparseBatch
from sparkhc.models.base import HierModel, ModelState, StateSum
from sparkhc.spark import deltas
from sparkhc.struct_dcd import WEIGHT_ARRAYS, duality_gap


def shard_epoch(model: HierModel, base: ModelState, batch: SparseBatch, shard: int, seed: int, epoch: int,
                fault_hook: Callable[[int, int], None] | None = None,
                memory: dict[int, Any] | None = None) -> ModelState:
    """One shard-local epoch (every engine): ``model`` (a scratch instance) runs ``partial_fit`` on
    shard ``shard``'s documents from a copy of ``base`` (seed ``seed + 1000003 * shard``); returns
    the row-sparse delta from ``base`` with the epoch's counters (:func:`deltas.encode`), or the
    full state for states that do not mix by deltas (jobs engine only). The model holds no state
    afterwards. ``memory``: the engine's :attr:`HierModel.shard_memory` of each shard (a dual
    solver's working sets), handed to the model before the epoch and kept after it."""
    model.state_ = None  # free the previous shard's copy first
    model.set_state(base.copy())
    model.shard_memory = memory.get(shard) if memory is not None else None
    counters = model.partial_fit(batch, seed=seed + 1000003 * shard, epoch=epoch)
    if memory is not None:
        memory[shard] = model.shard_memory
    model.shard_memory = None
    if fault_hook is not None:
        fault_hook(shard, epoch)
    out = model.get_state()
    out.counters = {c: float(v) for c, v in counters.items()}
    delta = deltas.encode(out, base.arrays, model.changed_rows())
    model.state_ = None
    return delta if delta is not None else out


def mix(
    base: ModelState, acc: StateSum | deltas.DeltaSum, inplace: bool = False
) -> tuple[ModelState, dict[str, float]]:
    """The mixed state of one epoch from the shards' aggregate, and the epoch's counters (summed
    over shards, plus ``shards``); the state's counters accumulate over epochs. ``inplace``: a
    delta aggregate may be added into ``base``'s arrays (the caller's private copy)."""
    if acc.n == 0:
        raise ValueError("no training documents in any partition")
    # a certified solver's duality gap is at the epoch's base state: ||w||^2 before the mixing
    sq = (sum(float(np.dot(r, r)) for k, a in base.arrays.items() if k in WEIGHT_ARRAYS
              for r in [np.asarray(a, dtype=np.float64).ravel()])
          if "primal_loss" in acc.counters else None)
    mixed = acc.apply(base, inplace=inplace) if isinstance(acc, deltas.DeltaSum) else acc.result()
    if mixed.combine == "sum" and acc.n > 1:
        # every partition returned (broadcast state + its shard's statistics): keep one copy of the
        # broadcast state, so a warm start or a later epoch does not multiply it by the shards
        mixed.arrays = remove_copies(mixed.arrays, base.arrays, acc.n - 1)
    counters = dict(acc.counters)
    counters["shards"] = acc.n
    if sq is not None:
        gap, primal = duality_gap(sq, counters)
        counters.update({"gap": gap, "primal": primal, "rel_gap": gap / primal if primal > 0 else 0.0})
    prev = dict(base.counters)
    mixed.counters = {k: prev.get(k, 0.0) + v for k, v in counters.items() if k not in _EPOCH_ONLY}
    return mixed, counters


#: counters of one epoch that do not accumulate into the model's
_EPOCH_ONLY = ("shards", "result_bytes", "broadcast_bytes", "gap", "primal", "rel_gap", "primal_loss",
               "dual_part", "working_set")


def mix_deltas(base: ModelState, shard_deltas: Iterable[ModelState], n: int) -> tuple[ModelState, dict[str, float]]:
    """The mixed state of an epoch from the ``n`` shards' deltas given in shard order (summed
    block-wise by :func:`mix` into ``base``'s arrays, which it may modify), and the counters."""
    acc = deltas.DeltaSum(max_parts=n)
    for d in shard_deltas:
        acc = acc.add(d)
    return mix(base, acc, inplace=True)


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
