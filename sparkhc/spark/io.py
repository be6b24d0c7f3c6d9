"""Read the features layout: validated DataFrames on Spark, SparseBatches on executors and driver.

On executors, build one :class:`~sparkhc.batch.SparseBatch` per partition straight from Arrow
record batches (no Python object per row for the features)::

    from sparkhc.spark.io import read_features, map_batches

    df, spec = read_features(spark, "work/20ng")

    def score(batch):                      # batch: SparseBatch of one whole partition
        yield pa.RecordBatch.from_pydict({"doc_id": batch.doc_ids.tolist(),
                                          "nnz": np.diff(batch.X.indptr).tolist()})

    out = map_batches(df, score, "doc_id string, nnz bigint", spec.n_features)

:func:`map_batches` is ``df.mapInArrow`` with :func:`partition_to_batch` in front. To keep the
batches across Spark actions (one per epoch of data-parallel training), use :func:`batches_rdd`,
an ``RDD[SparseBatch]`` with one element per partition that can be persisted; it ships each
partition to Python once as one Arrow IPC blob through ``mapInArrow``. It is no faster for one pass
than ``df.rdd.mapPartitions`` over Rows building the CSR by hand (``docs/benchmarks.md``, section
design-notes), but it creates no Python object per row and yields the full SparseBatch (labels,
counts, extras).

Without Spark, :func:`sparkhc.features.read_features_local` reads the files with pyarrow (tests, baselines).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import pandas as pd
import pyarrow as pa
from pyspark import RDD
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from sparkhc import fsio
from sparkhc.batch import SparseBatch
from sparkhc.features import DEFAULT_EXTRA, FEATURES_DIR, check_footers, features_layout, layout_parts
from sparkhc.spark.schemas import (
    COUNTS,
    DOC_ID,
    FEATURES_ARROW_SCHEMA,
    FEATURES_SCHEMA,
    INDICES,
    LABELS,
    VALUES,
    check_spark_features_schema,
)
from sparkhc.text.spec import SPEC_FILE, FeatureSpec

_BLOB = "arrow_ipc"


def read_features(spark: SparkSession, path: str | os.PathLike[str]) -> tuple[DataFrame, FeatureSpec]:
    """Load a featurize output directory as a DataFrame plus its FeatureSpec.

    The footer of every part file and the resulting DataFrame schema are checked against the
    features layout; a mismatch raises :class:`SchemaError` naming the file and the column.
    """
    if not fsio.is_uri(os.fspath(path)):
        local = fsio.local_path(os.fspath(path))
        assert local is not None
        root, feat, parts = features_layout(local)
        check_footers(parts)
        spec = FeatureSpec.load(root)
        uri = feat.absolute().as_uri()
    else:  # a Hadoop URI: Spark reads the part files; footers and spec through pyarrow.fs
        folder = fsio.Folder(os.fspath(path))
        names = layout_parts(folder)
        check_footers([f"{folder.root}/{FEATURES_DIR}/{n}" for n in names], filesystem=folder.fs)
        spec = FeatureSpec.from_json(folder.read_text(SPEC_FILE), source=folder.where(SPEC_FILE))
        uri = os.fspath(path).rstrip("/") + "/" + FEATURES_DIR
    # every footer has been checked: giving Spark the schema spares its schema-inference job
    df = spark.read.schema(FEATURES_SCHEMA).parquet(uri)
    check_spark_features_schema(df.schema, fsio.redact(uri))
    return df, spec


# ---------------------------------------------------------------------------------------- executors
def _to_table(chunks: Iterable[pa.RecordBatch | pd.DataFrame]) -> pa.Table:
    batches: list[pa.RecordBatch] = []
    for c in chunks:
        if isinstance(c, pd.DataFrame):
            cols = [n for n in FEATURES_ARROW_SCHEMA.names if n in c.columns]
            schema = pa.schema([FEATURES_ARROW_SCHEMA.field(n).with_nullable(True) for n in cols])
            batches.extend(pa.Table.from_pandas(c[cols], schema=schema, preserve_index=False).to_batches())
        else:
            batches.append(c)
    batches = [b for b in batches if b.num_rows]
    if not batches:
        return FEATURES_ARROW_SCHEMA.empty_table()
    if len({b.schema for b in batches}) > 1:
        return pa.concat_tables([pa.Table.from_batches([b]) for b in batches], promote_options="permissive")
    return pa.Table.from_batches(batches)


def partition_to_batch(
    chunks: Iterable[pa.RecordBatch | pd.DataFrame],
    n_features: int,
    with_counts: bool = False,
    extra_columns: Sequence[str] = DEFAULT_EXTRA,
    source: str = "features partition",
) -> SparseBatch:
    """One SparseBatch from all Arrow record batches (``mapInArrow``) or pandas frames
    (``mapInPandas``) of a partition; an empty partition gives an empty batch."""
    table = _to_table(chunks)
    return SparseBatch.from_arrow(
        table, n_features, with_counts=with_counts, extra_columns=extra_columns, source=source
    )


def _map_batches_fn(
    chunks: Iterator[pa.RecordBatch],
    fn: Callable[[SparseBatch], Iterable[pa.RecordBatch]],
    n_features: int,
    with_counts: bool,
    extra_columns: Sequence[str],
) -> Iterator[pa.RecordBatch]:
    batch = partition_to_batch(chunks, n_features, with_counts, extra_columns)
    yield from fn(batch)


def map_batches(
    df: DataFrame,
    fn: Callable[[SparseBatch], Iterable[pa.RecordBatch]],
    schema: T.StructType | str,
    n_features: int,
    with_counts: bool = False,
    extra_columns: Sequence[str] = DEFAULT_EXTRA,
) -> DataFrame:
    """``df.mapInArrow`` where ``fn`` receives the whole partition as one SparseBatch and yields
    Arrow record batches of ``schema``. ``fn`` should be a module-level function (it is pickled);
    pass large state through a broadcast variable."""
    wrapped = functools.partial(
        _map_batches_fn, fn=fn, n_features=n_features, with_counts=with_counts, extra_columns=tuple(extra_columns)
    )
    return df.mapInArrow(wrapped, schema)


def _ipc_partition(chunks: Iterator[pa.RecordBatch], columns: Sequence[str]) -> Iterator[pa.RecordBatch]:
    table = _to_table(chunks)
    table = table.select([c for c in columns if c in table.column_names])
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    yield pa.RecordBatch.from_pydict({_BLOB: [sink.getvalue().to_pybytes()]})


def _batches_from_ipc(
    rows: Iterable[Any], n_features: int, with_counts: bool, extra_columns: Sequence[str]
) -> Iterator[SparseBatch]:
    tables = [pa.ipc.open_stream(row[0]).read_all() for row in rows]
    # one blob per partition; none if Spark skipped the Python function for an empty partition
    chunks = [b for t in tables for b in t.to_batches()]
    yield partition_to_batch(chunks, n_features, with_counts, extra_columns)


def batches_rdd(
    df: DataFrame,
    n_features: int,
    with_counts: bool = False,
    extra_columns: Sequence[str] = DEFAULT_EXTRA,
) -> RDD[SparseBatch]:
    """An RDD with exactly one SparseBatch per partition of ``df`` (empty partitions give empty
    batches); persist it to reuse the batches across epochs."""
    columns = [DOC_ID, LABELS, INDICES, VALUES, *([COUNTS] if with_counts else []), *extra_columns]
    blobs = df.mapInArrow(functools.partial(_ipc_partition, columns=columns), f"{_BLOB} binary")
    conv = functools.partial(
        _batches_from_ipc, n_features=n_features, with_counts=with_counts, extra_columns=tuple(extra_columns)
    )
    return blobs.rdd.mapPartitions(conv, preservesPartitioning=True)
