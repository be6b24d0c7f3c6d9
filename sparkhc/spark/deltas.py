"""Sparse per-partition deltas for iterative parameter mixing (:mod:`sparkhc.spark.mixing`).

A shard-local epoch of the structured PA writes only into the rows of ``W`` of the features of the
documents it updated, and in each of those rows only into the edges of the symmetric differences
it met. Shipping the full dense state back from every partition (``n_features x n_edges`` floats,
1.6 GB at the JSTPlus scale) and summing it densely (in float64, twice that) then costs more than
the epoch. Here a partition returns ``new - base`` as a sparse matrix of the entries that changed
(float64: the difference of two float32 values is exact), the driver sums the deltas and applies
their mean to the base state it broadcast::

    mixed = base + (sum over shards of (state_s - base)) / S        # = mean over shards of state_s

which equals the mean of the full states up to float rounding (exactly with one shard).

The base arrays are read on the workers without a copy from the broadcast bytes (the ``.npz`` of
:func:`sparkhc.persistence.state_to_bytes` is stored uncompressed), see :func:`npz_view`.

Only for states whose arrays are dense float ndarrays (or float CSR matrices: the sparse layout of
``GlobalPA``, whose delta holds the entries that changed or appeared) combined by ``"mean"``;
:func:`encode` returns ``None`` otherwise and the caller ships the full state as before. A delta is a
:class:`ModelState` (combine ``"delta"``, CSR arrays) and is serialized like any state
(:func:`sparkhc.persistence.state_to_bytes`, :func:`~sparkhc.persistence.write_state`).
"""

from __future__ import annotations

import io
import struct
import zipfile
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from sparkhc import kernels as _kernels
from sparkhc.models.base import ModelState

__all__ = ["npz_view", "supports", "encode", "DeltaSum", "encode_values", "apply_values"]

_LOCAL_HEADER = struct.Struct("<4s2B4HL2L2H")  # zip local file header (30 bytes)


def npz_view(data: bytes | memoryview, name: str) -> np.ndarray:
    """Read-only view (no copy) of array ``name`` in the bytes of an uncompressed ``.npz``."""
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        info = zf.getinfo(name + ".npy")
        if info.compress_type != zipfile.ZIP_STORED:
            raise ValueError(f"array {name!r} is compressed; no view possible")
    off = info.header_offset
    head = _LOCAL_HEADER.unpack(bytes(data[off : off + _LOCAL_HEADER.size]))
    if head[0] != b"PK\x03\x04":
        raise ValueError("not a zip local header")
    start = off + _LOCAL_HEADER.size + head[-2] + head[-1]
    fh = io.BytesIO(bytes(data[start : start + 4096]))
    version = np.lib.format.read_magic(fh)
    if version == (1, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_1_0(fh)
    else:
        shape, fortran, dtype = np.lib.format.read_array_header_2_0(fh)
    if fortran or dtype.hasobject:
        raise ValueError(f"array {name!r} is not a C-ordered plain array")
    count = int(np.prod(shape, dtype=np.int64))
    arr = np.frombuffer(data, dtype=dtype, count=count, offset=start + fh.tell())
    return arr.reshape(shape)


def supports(state: ModelState) -> bool:
    """Whether :func:`encode` applies: mean-combined, every array a dense float ndarray or a float
    CSR matrix (the sparse layout of ``GlobalPA``)."""
    return state.combine == "mean" and all(
        ((isinstance(v, np.ndarray) and not sp.issparse(v)) or isinstance(v, sp.csr_matrix)) and v.dtype.kind == "f"
        for v in state.arrays.values()
    )


def _csr_base(base_bytes: bytes | dict[str, Any], name: str) -> sp.csr_matrix:
    if isinstance(base_bytes, dict):
        return base_bytes[name]
    parts = {p: npz_view(base_bytes, f"{name}__{p}") for p in ("data", "indices", "indptr", "shape")}
    return sp.csr_matrix((parts["data"], parts["indices"], parts["indptr"]), shape=tuple(int(n) for n in parts["shape"]))


def _encode_csr(new: sp.csr_matrix, base: sp.csr_matrix, hint: np.ndarray | None) -> sp.csr_matrix:
    """``new - base`` of CSR matrices in float64 (exact for float32 values), the entries that
    changed only, compared in the rows of ``hint`` (all without)."""
    if base.shape != new.shape:
        raise ValueError(f"shape {new.shape} differs from the base {base.shape}")
    if hint is None:
        d = new.astype(np.float64) - base.astype(np.float64)
    else:
        rows = np.flatnonzero(hint)
        part = (new[rows].astype(np.float64) - base[rows].astype(np.float64)).tocsr()
        counts = np.zeros(new.shape[0], dtype=np.int64)
        counts[rows] = np.diff(part.indptr)
        d = sp.csr_matrix((part.data, part.indices, np.concatenate([[0], np.cumsum(counts)])), shape=new.shape)
    d = d.tocsr()
    d.eliminate_zeros()
    d.sort_indices()
    return d


def _changed_rows(new: np.ndarray, base: np.ndarray, hint: np.ndarray | None, block: int = 4096) -> np.ndarray:
    """Rows of a 2-D array that differ; ``hint`` (bool per row) restricts the search to them."""
    cand = np.flatnonzero(hint) if hint is not None else None
    out = []
    if cand is None:
        for a in range(0, new.shape[0], block):
            b = min(new.shape[0], a + block)
            out.append(a + np.flatnonzero((new[a:b] != base[a:b]).any(axis=1)))
    else:
        for a in range(0, cand.size, block):
            r = cand[a : a + block]
            out.append(r[(new[r] != base[r]).any(axis=1)])
    return np.concatenate(out) if out else np.zeros(0, np.int64)


def encode(
    state: ModelState, base_bytes: bytes | dict[str, np.ndarray], touched: dict[str, np.ndarray | None] | None = None
) -> ModelState | None:
    """The delta ``state - base`` as a ModelState of sparse float64 CSR arrays (same names and
    shapes; 1-D arrays become ``(1, n)``), plus the counters of ``state``.

    ``touched`` optionally maps an array name to a boolean mask of the rows that may have changed
    (e.g. ``GlobalPA.touched_rows_``), which spares comparing the untouched rows. ``None`` when
    the state is not supported (:func:`supports`). Built in two passes over blocks of the changed
    rows (count, then fill arrays of the exact size): the peak is the CSR itself, 12 bytes per
    changed entry, with no intermediate copies. With the compiled kernels
    (:func:`sparkhc.kernels.delta_encode`) both passes run row by row without row copies, giving
    the same entries in the same order (tests/unit/test_deltas.py).
    """
    if not supports(state):
        return None
    touched = touched or {}
    out: dict[str, Any] = {}
    for name, new in state.arrays.items():
        if sp.issparse(new):
            out[name] = _encode_csr(new, _csr_base(base_bytes, name), touched.get(name))
            continue
        base = base_bytes[name] if isinstance(base_bytes, dict) else npz_view(base_bytes, name)
        if base.shape != new.shape:
            raise ValueError(f"array {name!r}: shape {new.shape} differs from the base {base.shape}")
        new2 = new.reshape(1, -1) if new.ndim == 1 else new.reshape(new.shape[0], -1)
        base2 = base.reshape(new2.shape)
        hint = touched.get(name) if new.ndim >= 2 else None
        if _kernels.available() and new2.flags.c_contiguous and base2.flags.c_contiguous:
            cand = np.flatnonzero(hint) if hint is not None else np.arange(new2.shape[0])
            indptr, indices, data = _kernels.delta_encode(new2, base2, cand)
            out[name] = sp.csr_matrix((data, indices, indptr), shape=new2.shape)
            continue
        rows = _changed_rows(new2, base2, hint)
        step = _block_rows(new2.shape[1])
        counts = np.zeros(new2.shape[0], dtype=np.int64)
        for a in range(0, rows.size, step):
            blk = rows[a : a + step]
            counts[blk] = np.count_nonzero(new2[blk] != base2[blk], axis=1)
        indptr = np.zeros(new2.shape[0] + 1, dtype=np.int64)
        np.cumsum(counts, out=indptr[1:])
        del counts
        nnz = int(indptr[-1])
        idx_dtype = np.int32 if max(nnz, new2.shape[1]) < np.iinfo(np.int32).max else np.int64
        indices = np.empty(nnz, dtype=idx_dtype)
        data = np.empty(nnz, dtype=np.float64)
        for a in range(0, rows.size, step):
            blk = rows[a : a + step]
            d = new2[blk].astype(np.float64)
            d -= base2[blk]
            r, c = np.nonzero(d)  # row-major: the CSR order
            lo, hi = int(indptr[blk[0]]), int(indptr[blk[-1] + 1])
            indices[lo:hi] = c
            data[lo:hi] = d[r, c]
        out[name] = sp.csr_matrix((data, indices, indptr.astype(idx_dtype, copy=False)), shape=new2.shape)
    return ModelState(out, dict(state.counters), "delta")  # type: ignore[arg-type]


def encode_values(state: ModelState, base: dict[str, np.ndarray]) -> ModelState | None:
    """The entries of ``state`` that differ from ``base``, holding their new values in the arrays'
    own dtype (CSR, explicit zeros kept: every stored entry is an assignment), plus the counters
    of ``state``: what :func:`apply_values` needs to rebuild ``state`` from ``base`` exactly, by
    assignment. For float32 arrays 8 bytes per changed entry instead of :func:`encode`'s 12 (the
    jobs engine's broadcast of the mixed state, :class:`sparkhc.spark.mixing.jobs.BaseChain`). ``None``
    when the state is not supported (:func:`supports`) or holds CSR arrays (whose entries come and
    go: the state is sent whole)."""
    if any(sp.issparse(v) for v in state.arrays.values()):
        return None
    d = encode(state, base)
    if d is None:
        return None
    out: dict[str, Any] = {}
    for name, m in d.arrays.items():
        new2 = state.arrays[name].reshape(m.shape)
        vals = np.empty(m.nnz, dtype=new2.dtype)
        for rows, lo, hi in _row_blocks(m):
            vals[lo:hi] = new2[rows, m.indices[lo:hi]]
        out[name] = sp.csr_matrix((vals, m.indices, m.indptr), shape=m.shape)
    return ModelState(out, dict(state.counters), "values")  # type: ignore[arg-type]


def apply_values(base: ModelState, patch: ModelState) -> ModelState:
    """``base`` with the entries of :func:`encode_values`'s ``patch`` assigned, in place (the
    base arrays must be writeable and C-ordered); the counters are the patch's."""
    for name, m in patch.arrays.items():
        flat = base.arrays[name].reshape(m.shape)
        if not np.shares_memory(flat, base.arrays[name]):
            raise ValueError(f"array {name!r} is not C-ordered; cannot patch it in place")
        for rows, lo, hi in _row_blocks(m):
            flat[rows, m.indices[lo:hi]] = m.data[lo:hi]
    return ModelState(base.arrays, dict(patch.counters), base.combine)


def _row_blocks(m: sp.csr_matrix) -> Any:
    """``(row of each entry, first entry, end entry)`` over blocks of rows of ``m`` that hold
    entries (about 4M matrix cells a block)."""
    n = m.shape[0]
    step = _block_rows(m.shape[1])
    for a in range(0, n, step):
        b = min(n, a + step)
        lo, hi = int(m.indptr[a]), int(m.indptr[b])
        if lo == hi:
            continue
        rows = np.repeat(np.arange(a, b), np.diff(m.indptr[a : b + 1]))
        yield rows, lo, hi


def _block_rows(n_cols: int) -> int:
    """Rows per block so that a float64 block holds about 4M entries (32 MB)."""
    return max(1, (1 << 22) // max(1, n_cols))


@dataclass
class DeltaSum:
    """Sum of sparse deltas (associative, commutative: usable as a ``treeAggregate`` zero).

    The deltas are kept as they come (``parts``, in order) and summed only by :meth:`apply`, one
    block of rows at a time into a small dense float64 buffer: mixing never holds a sparse sum
    next to its summands (at the JSTPlus scale each delta is gigabytes). Past ``max_parts``
    parts, :meth:`merge` collapses them into their sparse sum, which bounds what a
    ``treeAggregate`` combiner holds.
    """

    parts: list[dict[str, sp.csr_matrix]] = field(default_factory=list)
    counters: dict[str, float] = field(default_factory=dict)
    n: int = 0
    max_parts: int = 8

    def add(self, delta: ModelState) -> DeltaSum:
        part = {k: v if isinstance(v, sp.csr_matrix) else sp.csr_matrix(v) for k, v in delta.arrays.items()}
        return self.merge(DeltaSum([part], dict(delta.counters), 1, self.max_parts))

    def merge(self, other: DeltaSum) -> DeltaSum:
        if other.n == 0:
            return self
        if self.n == 0:
            return DeltaSum(list(other.parts), dict(other.counters), other.n, max(self.max_parts, other.max_parts))
        names = set(self.parts[0])
        if any(set(p) != names for p in other.parts):
            raise ValueError(f"cannot combine deltas of {sorted(names)} and {sorted(other.parts[0])}")
        parts = self.parts + other.parts
        limit = max(self.max_parts, other.max_parts)
        if len(parts) > limit:
            total = parts[0]
            for p in parts[1:]:
                total = {k: (total[k] + p[k]).tocsr() for k in total}
            parts = [total]
        counters = dict(self.counters)
        for k, v in other.counters.items():
            counters[k] = counters.get(k, 0.0) + v
        return DeltaSum(parts, counters, self.n + other.n, limit)

    def apply(self, base: ModelState, inplace: bool = False) -> ModelState:
        """``base + sum / n`` as a new ModelState (the base arrays are not modified unless
        ``inplace``; arrays without changes are shared). Each changed entry becomes
        ``float(base) + (d_1 + d_2 + ...) / n`` in float64 (summed in part order), cast back to
        the base dtype (with the compiled kernels, :func:`sparkhc.kernels.delta_apply`: the same
        values, without slicing the parts by rows)."""
        if self.n == 0:
            raise ValueError("no deltas to combine")
        out: dict[str, Any] = {}
        scale = 1.0 / self.n
        for name, arr in base.arrays.items():
            ds = [p[name] for p in self.parts if name in p and p[name].nnz]
            if not ds:
                out[name] = arr
                continue
            if sp.issparse(arr):  # the union of the entries: (d_1 + d_2 + ...) * scale + base, in float64
                acc = ds[0].copy()
                for d in ds[1:]:
                    acc = acc + d
                mixed = (acc * scale + arr.astype(np.float64)).astype(arr.dtype).tocsr()
                mixed.sort_indices()
                out[name] = mixed
                continue
            new = arr if inplace and isinstance(arr, np.ndarray) and arr.flags.writeable else np.array(arr, copy=True)
            flat = new.reshape(ds[0].shape)
            rows = np.flatnonzero(np.any([np.diff(d.indptr) > 0 for d in ds], axis=0))
            step = _block_rows(flat.shape[1])
            if _kernels.available() and flat.flags.c_contiguous and flat.flags.writeable:
                _kernels.delta_apply(flat, rows, ds, scale, step)
                out[name] = new
                continue
            for a in range(0, rows.size, step):
                blk = rows[a : a + step]
                acc = ds[0][blk].toarray()
                for d in ds[1:]:
                    acc += d[blk].toarray()
                acc *= scale
                acc += flat[blk]
                flat[blk] = acc
            out[name] = new
        return ModelState(out, dict(self.counters), base.combine)
