"""Spark SQL's ``hash`` computed with numpy, and the document splits made from it.

The driver paths (a small training in the driver process, :mod:`sparkhc.spark.plan`; the epoch
selection's and the calibration's inner folds) must put each document where the Spark paths put it:
the shard of barrier mixing (``pmod(hash(doc_id), shards)``, :func:`shard_ids`), the validation
bands (``pmod(hash(doc_id, seed + 17), 10000)``, :func:`validation_ids`) and Spark's hash
partitioning of a bigint key (:func:`spark_hash_long`). Murmur3 x86_32 as Spark computes it; tested
against Spark's own ``hash`` in tests/spark/test_small.py.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

_C1, _C2 = np.uint32(0xCC9E2D51), np.uint32(0x1B873593)


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint32(r)) | (x >> np.uint32(32 - r))


def _mix(h: np.ndarray, k: np.ndarray) -> np.ndarray:
    k = _rotl(k * _C1, 15) * _C2
    h = _rotl(h ^ k, 13)
    return h * np.uint32(5) + np.uint32(0xE6546B64)


def spark_hash(values: Sequence[str] | np.ndarray, seed: int = 42) -> np.ndarray:
    """Spark SQL's ``hash(s)`` of each string (int32): Murmur3 x86_32 of the UTF-8 bytes as Spark's
    ``Murmur3_x86_32.hashUnsafeBytes`` computes it (4-byte little-endian words, then each trailing
    byte, sign-extended, mixed as a word of its own), seed 42. Vectorized over the strings."""
    enc = [str(v).encode("utf-8") for v in values]
    n = len(enc)
    if n == 0:
        return np.zeros(0, dtype=np.int32)
    lens = np.fromiter((len(b) for b in enc), dtype=np.int64, count=n)
    width = (int(lens.max()) // 4 + 1) * 4
    buf = np.zeros((n, width), dtype=np.uint8)
    flat = np.frombuffer(b"".join(enc), dtype=np.uint8)
    starts = np.cumsum(lens) - lens
    buf[np.repeat(np.arange(n), lens), np.arange(flat.size) - np.repeat(starts, lens)] = flat
    words = buf.view("<u4")
    h = np.full(n, seed, dtype=np.uint32)
    nw = lens // 4
    with np.errstate(over="ignore"):
        for j in range(int(nw.max())):
            m = j < nw
            h[m] = _mix(h[m], words[m, j])
        tail = lens % 4
        for t in range(3):
            m = t < tail
            byte = buf[m, nw[m] * 4 + t].view(np.int8).astype(np.int32).view(np.uint32)
            h[m] = _mix(h[m], byte)
        h = _fmix(h, lens.astype(np.uint32))
    return h.view(np.int32)


def _fmix(h: np.ndarray, length: np.ndarray | np.uint32) -> np.ndarray:
    """Murmur3's finalisation of ``h`` (uint32) for an input of ``length`` bytes (overflow ignored
    by the caller)."""
    h = h ^ length
    h ^= h >> np.uint32(16)
    h *= np.uint32(0x85EBCA6B)
    h ^= h >> np.uint32(13)
    h *= np.uint32(0xC2B2AE35)
    h ^= h >> np.uint32(16)
    return h


def spark_hash_long(values: Sequence[int] | np.ndarray, seed: int = 42) -> np.ndarray:
    """Spark SQL's ``hash(v)`` of each bigint (int32): ``Murmur3_x86_32.hashLong`` (the low then
    the high 32-bit word mixed, finalised as 8 bytes), seed 42. Hash partitioning puts a row with
    key ``v`` into partition ``pmod(hash(v), n)``. Vectorized over the values."""
    v = np.asarray(values, dtype=np.int64).view(np.uint64)
    low = (v & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    high = (v >> np.uint64(32)).astype(np.uint32)
    h = np.full(v.shape, np.int64(seed) & 0xFFFFFFFF, dtype=np.uint64).astype(np.uint32)
    with np.errstate(over="ignore"):
        return _fmix(_mix(_mix(h, low), high), np.uint32(8)).view(np.int32)


def spark_hash_int(value: int, seeds: np.ndarray) -> np.ndarray:
    """Spark's ``Murmur3_x86_32.hashInt(value, seed)`` for each seed (int32): what ``hash(col, 17)``
    computes for its second argument, an int literal, from the hash of the first as the seed."""
    h = np.asarray(seeds).astype(np.int32).view(np.uint32)
    k = np.full(h.shape, np.int64(value) & 0xFFFFFFFF, dtype=np.uint64).astype(np.uint32)
    with np.errstate(over="ignore"):
        return _fmix(_mix(h, k), np.uint32(4)).view(np.int32)


def validation_cut(fraction: float) -> int:
    """The hash cut of a validation slice of ``fraction`` of the documents (out of 10000), checked."""
    if not 0.0 < float(fraction) < 1.0:
        raise ValueError(f"the validation fraction must be in (0, 1), not {fraction}")
    return int(round(float(fraction) * 10000))


def validation_bands(fraction: float) -> int:
    """How many disjoint validation bands of ``fraction`` the hash range holds (``10000 // cut``)."""
    return 10000 // validation_cut(fraction)


def validation_ids(doc_ids: Sequence[str] | np.ndarray, fraction: float, seed: int, band: int = 0) -> np.ndarray:
    """Which documents :func:`sparkhc.spark.mixing.selection.validation_split` holds out (a bool per id):
    ``band * cut <= pmod(hash(doc_id, seed + 17), 10000) < (band + 1) * cut`` with
    ``cut = validation_cut(fraction)``, as Spark SQL computes it (band 0: the first ``fraction``)."""
    cut = validation_cut(fraction)
    if not 0 <= int(band) < validation_bands(fraction):
        raise ValueError(f"validation band {band} out of range for the fraction {fraction}")
    h = np.mod(spark_hash_int(int(seed) + 17, spark_hash(doc_ids)).astype(np.int64), 10000)
    return (h >= int(band) * cut) & (h < (int(band) + 1) * cut)


def shard_ids(doc_ids: Sequence[str] | np.ndarray, shards: int) -> np.ndarray:
    """``pmod(hash(doc_id), shards)``: the shard barrier mixing gives each document."""
    return np.mod(spark_hash(doc_ids).astype(np.int64), int(shards))
