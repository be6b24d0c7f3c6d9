"""Distributed evaluation: per-partition count tables merged with ``treeAggregate``.

Each partition turns its Arrow record batches into a :class:`~sparkhc.metrics.MetricCounts` (or
:class:`~sparkhc.metrics.MDCCounts`) without creating a Python object per row, and returns the
tables as one serialized ``np.savez`` blob (no pickle). The driver merges the blobs with
``treeAggregate``. The counts travel in the task results, not in accumulators, so retried tasks
cannot double-count, and the merged counts (hence every metric) equal a single numpy pass.
"""

from __future__ import annotations

import functools
import io
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import scipy.sparse as sp
from pyspark import Broadcast
from pyspark.sql import DataFrame

from sparkhc.errors import SchemaError
from sparkhc.metrics import MDCCounts, MetricCounts
from sparkhc.taxonomy import Taxonomy

__all__ = ["aggregate_mdc", "aggregate_metrics"]

_BLOB_SCHEMA = "counts binary"


# ------------------------------------------------------------------ (de)serialization
def _dump(arrays: dict[str, np.ndarray]) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)  # type: ignore[arg-type]
    return buf.getvalue()


def _load(blob: bytes) -> dict[str, np.ndarray]:
    with np.load(io.BytesIO(blob), allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


# ------------------------------------------------------------------ arrow helpers
def _list_parts(col: pa.Array | pa.ChunkedArray, name: str) -> tuple[np.ndarray, pa.Array]:
    """(row offsets int64 of length n+1, flat values) of a list column; null lists are empty."""
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    if not (pa.types.is_list(col.type) or pa.types.is_large_list(col.type)):
        raise SchemaError(f"column {name!r} must be an array column; got {col.type}")
    if col.null_count:
        col = col.fill_null(pa.scalar([], type=col.type))
    offsets = np.asarray(col.offsets, dtype=np.int64)
    flat = col.values.slice(int(offsets[0]), int(offsets[-1] - offsets[0]))
    return offsets - offsets[0], flat


def _label_matrix(col: pa.Array, name: str, taxonomy: Taxonomy, names: pa.Array) -> sp.csr_matrix:
    """Ancestor-closed binary CSR (n_rows, n_nodes) of an array<string> column of label names."""
    offsets, flat = _list_parts(col, name)
    n = len(offsets) - 1
    if flat.null_count:
        row = int(
            np.searchsorted(
                offsets, int(np.flatnonzero(flat.is_null().to_numpy(zero_copy_only=False))[0]), side="right"
            )
            - 1
        )
        raise SchemaError(
            f"column {name!r}, row {row} of the partition batch: null label ({flat.null_count} null labels)"
        )
    ids = pc.index_in(flat, value_set=names)
    if ids.null_count:
        bad = np.flatnonzero(ids.is_null().to_numpy(zero_copy_only=False))
        row = int(np.searchsorted(offsets, int(bad[0]), side="right") - 1)
        raise SchemaError(
            f"column {name!r}, row {row} of the partition batch: label {flat[int(bad[0])].as_py()!r} is not "
            f"a node of the taxonomy {taxonomy.source} ({bad.size} unknown label(s) in this batch)"
        )
    cols = ids.to_numpy(zero_copy_only=False).astype(np.int64)
    rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(offsets))
    m = sp.csr_matrix((np.ones(len(cols), dtype=np.float32), (rows, cols)), shape=(n, taxonomy.n_nodes))
    m = (m @ taxonomy.ancestor_matrix()).tocsr()
    m.data[:] = 1.0
    return m


def _dense_rows(col: pa.Array, name: str, width: int | None) -> np.ndarray:
    """An array column with equal-length rows as a 2-D numpy array (n, width)."""
    offsets, flat = _list_parts(col, name)
    n = len(offsets) - 1
    lengths = np.diff(offsets)
    if width is None:
        width = int(lengths[0]) if n else 0
    if n and not np.all(lengths == width):
        row = int(np.flatnonzero(lengths != width)[0])
        raise SchemaError(
            f"column {name!r}, row {row} of the partition batch: expected {width} values, got {int(lengths[row])}"
        )
    if flat.null_count:
        raise SchemaError(f"column {name!r}: {flat.null_count} null value(s)")
    return np.asarray(flat.to_numpy(zero_copy_only=False)).reshape(n, width)


# ------------------------------------------------------------------ partition functions
def _metric_partition(
    tax_bc: Broadcast,
    scored: np.ndarray,
    gold_col: str,
    pred_col: str,
    score_col: str | None,
    batches: Iterable[pa.RecordBatch],
) -> Iterator[pa.RecordBatch]:
    counts = metric_counts(tax_bc.value, scored, gold_col, pred_col, score_col, batches)
    yield pa.RecordBatch.from_pydict({"counts": pa.array([_dump(counts.to_arrays())], type=pa.binary())})


def metric_counts(taxonomy: Taxonomy, scored: np.ndarray, gold_col: str, pred_col: str, score_col: str | None,
                  batches: Iterable[pa.RecordBatch]) -> MetricCounts:
    """The metric counts of record batches (one partition's, or all of them in the driver:
    :mod:`sparkhc.spark.smalljobs`)."""
    names = pa.array(taxonomy.names, type=pa.string())
    counts = MetricCounts(taxonomy, scored)
    for b in batches:
        if b.num_rows == 0:
            continue
        gold = _label_matrix(b.column(gold_col), gold_col, taxonomy, names)
        pred = _label_matrix(b.column(pred_col), pred_col, taxonomy, names)
        scores = None
        if score_col is not None:
            scores = _dense_rows(b.column(score_col), score_col, taxonomy.n_nodes).astype(np.float64)
        counts.add(gold, pred, scores)
    return counts


def _merge_metric_blobs(tax_bc: Broadcast, a: bytes, b: bytes) -> bytes:
    taxonomy: Taxonomy = tax_bc.value
    left = MetricCounts.from_arrays(taxonomy, _load(a))
    return _dump(left.merge(MetricCounts.from_arrays(taxonomy, _load(b))).to_arrays())


def _mdc_partition(
    gold_col: str, pred_col: str, batches: Iterable[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    counts = MDCCounts()
    for b in batches:
        if b.num_rows == 0:
            continue
        gold = _dense_rows(b.column(gold_col), gold_col, counts.n_spaces)
        pred = _dense_rows(b.column(pred_col), pred_col, gold.shape[1])
        counts.add(gold, pred)
    yield pa.RecordBatch.from_pydict({"counts": pa.array([_dump(counts.to_arrays())], type=pa.binary())})


def _merge_mdc_blobs(a: bytes, b: bytes) -> bytes:
    return _dump(MDCCounts.from_arrays(_load(a)).merge(MDCCounts.from_arrays(_load(b))).to_arrays())


def _blob(row: Any) -> bytes:
    return bytes(row[0])


def _check_columns(df: DataFrame, cols: Iterable[str | None]) -> list[str]:
    wanted = [c for c in cols if c is not None]
    missing = [c for c in wanted if c not in df.columns]
    if missing:
        raise SchemaError(f"column(s) {missing} missing from the DataFrame (columns: {df.columns})")
    return wanted


# ------------------------------------------------------------------ public API
def aggregate_metrics(
    df: DataFrame,
    taxonomy: Taxonomy,
    scored: np.ndarray | Iterable[int | str] | None = None,
    gold_col: str = "labels",
    pred_col: str = "pred_labels",
    score_col: str | None = None,
    depth: int = 2,
) -> MetricCounts:
    """Evaluate predictions in a DataFrame; equal to :class:`MetricCounts` over all its rows.

    Parameters
    ----------
    df : DataFrame
        One row per document.
    taxonomy : Taxonomy
        Broadcast to the executors.
    scored : optional
        The scored labels, as for :class:`MetricCounts`.
    gold_col, pred_col : str
        ``array<string>`` columns of label names (ancestors implied; null = empty set; virtual
        ``/_self`` names count as their parent).
    score_col : str, optional
        ``array<double>`` column of length ``taxonomy.n_nodes`` (scores indexed by node id) for
        the break-even point.
    depth : int
        Depth of the ``treeAggregate``.

    Returns
    -------
    MetricCounts
        Call :meth:`~MetricCounts.compute` for the metrics.
    """
    cols = _check_columns(df, [gold_col, pred_col, score_col])
    mask = MetricCounts(taxonomy, scored).scored
    sc = df.sparkSession.sparkContext
    tax_bc = sc.broadcast(taxonomy)
    try:
        fn = functools.partial(_metric_partition, tax_bc, mask, gold_col, pred_col, score_col)
        merge = functools.partial(_merge_metric_blobs, tax_bc)
        zero = _dump(MetricCounts(taxonomy, mask).to_arrays())
        blob = (
            df.select(*cols)
            .mapInArrow(fn, _BLOB_SCHEMA)
            .rdd.map(_blob)
            .treeAggregate(zero, merge, merge, depth)
        )
    finally:
        tax_bc.unpersist()
    return MetricCounts.from_arrays(taxonomy, _load(blob))


def aggregate_mdc(df: DataFrame, gold_col: str, pred_col: str, depth: int = 2) -> MDCCounts:
    """Multi-dimensional classification counts of a DataFrame (Jia & Zhang 2020 metrics).

    ``gold_col`` and ``pred_col`` are ``array<int>`` columns with one label index per class space
    (the same length q in every row).
    """
    cols = _check_columns(df, [gold_col, pred_col])
    fn = functools.partial(_mdc_partition, gold_col, pred_col)
    zero = _dump(MDCCounts().to_arrays())
    blob = (
        df.select(*cols)
        .mapInArrow(fn, _BLOB_SCHEMA)
        .rdd.map(_blob)
        .treeAggregate(zero, _merge_mdc_blobs, _merge_mdc_blobs, depth)
    )
    return MDCCounts.from_arrays(_load(blob))
