"""Featurize raw documents into the Parquet features layout (ALGORITHMS.md, "Features").

Pipeline (:func:`featurize`)::

    raw documents --mapInArrow(tokenize)--> (doc_id, split, fold, labels, terms)   [persisted]
        fit documents --explode distinct terms--> groupBy count = df --filter min/max_df--> driver
        (hashing: distinct crc32 buckets per document, groupBy count)
    FeatureSpec fitted on the driver and broadcast
        --mapInArrow(transform)--> features --repartition(n, doc_id)--> sortWithinPartitions(doc_id)
        --> <out_dir>.tmp-<uuid>/features/part-NNNNN.parquet (+ feature_spec.json, _SUMMARY.json)
        --> rename to <out_dir>

Determinism: the output rows of a file are a pure function of the input documents and the spec.
Rows are hash-partitioned on ``doc_id`` (Spark's Murmur3 with a fixed seed, independent of the
input partitioning, unlike range partitioning whose bounds come from random sampling), into a
number of files fixed by the caller or by the document count, and sorted by ``doc_id`` inside each
file. Spark's random file names are replaced by ``part-00000.parquet``, ... in task order. The
Parquet writer options are pinned (snappy, one file per task); the footer holds no timestamp
(``created_by`` and the Spark version/schema key-values are constants for a given Spark). Hash
partitioning also mixes documents of every class into every file, which is what data-parallel
training over partitions wants (ids like ``train/alt.atheism/123`` would put whole classes into
one range partition).

Atomicity: everything is written into the sibling ``<out_dir>.tmp-<uuid>`` and renamed into
place only when complete; an existing ``out_dir`` is replaced only with ``overwrite=True``, by
renaming it aside, renaming the new directory in and then deleting the old one. On any error the
temporary directory is removed. ``out_dir`` is a local path (a file system that the driver and
executors share: local mode, or a shared mount; renames with :mod:`os`) or a Hadoop URI
(``hdfs://``, ``s3a://``: Spark writes the part files, the driver's renames and small files go
through :mod:`pyarrow.fs`, :class:`sparkhc.fsio.OutputFs`; on an object store a rename is a
copy, so the publish is not atomic there).

The raw documents of the CLI and the jobs are read by Spark on the executors
(:mod:`sparkhc.spark.sources`, JSON Lines) and reach :func:`featurize_tokens` already tokenized;
:func:`featurize` takes a raw-documents DataFrame (tests, the ML featurizer, label directories).
"""

from __future__ import annotations

import functools
import json
import logging
import math
import os
import re
import time
import uuid
from collections import Counter
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark import StorageLevel
from pyspark.broadcast import Broadcast
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sparkhc.batch import ID_ALIAS
from sparkhc.errors import InputDataError, NotFittedError, SchemaError, SparkhcError
from sparkhc.features import FEATURES_DIR, SUMMARY_FILE, TAXONOMY_FILE
from sparkhc.fsio import OutputFs
from sparkhc.spark.schemas import (
    COUNTS,
    DOC_ID,
    FEATURES_ARROW_SCHEMA,
    FEATURES_SCHEMA,
    FOLD,
    INDICES,
    LABEL_IDS,
    LABELS,
    SPLIT,
    TERMS,
    TEXT,
    TOKENS,
    VALUES,
    simple_type_name,
)
from sparkhc.taxonomy import Taxonomy
from sparkhc.text.spec import SPEC_FILE, FeatureSpec

log = logging.getLogger(__name__)

#: Default number of documents per output file (``num_partitions = ceil(n_docs / this)``).
ROWS_PER_FILE = 10_000
NULL_SPLIT = "<null>"

#: Intermediate column: the count of each entry of ``terms`` (distinct terms of the document).
TERM_COUNTS = "term_counts"
#: The tokenized documents: a bag of words per document (distinct terms in first-occurrence order
#: and their counts), half the volume of the token lists for the JVM <-> Python round trips.
TOKENIZED_SCHEMA = T.StructType(
    [
        T.StructField(DOC_ID, T.StringType(), nullable=False),
        T.StructField(SPLIT, T.StringType(), nullable=True),
        T.StructField(FOLD, T.IntegerType(), nullable=True),
        T.StructField(LABELS, T.ArrayType(T.StringType(), containsNull=False), nullable=False),
        T.StructField(TERMS, T.ArrayType(T.StringType(), containsNull=False), nullable=False),
        T.StructField(TERM_COUNTS, T.ArrayType(T.IntegerType(), containsNull=False), nullable=False),
    ]
)
TOKENIZED_ARROW = pa.schema(
    [
        pa.field(DOC_ID, pa.string(), nullable=False),
        pa.field(SPLIT, pa.string()),
        pa.field(FOLD, pa.int32()),
        pa.field(LABELS, pa.list_(pa.field("element", pa.string(), nullable=False)), nullable=False),
        pa.field(TERMS, pa.list_(pa.field("element", pa.string(), nullable=False)), nullable=False),
        pa.field(TERM_COUNTS, pa.list_(pa.field("element", pa.int32(), nullable=False)), nullable=False),
    ]
)


class OutputExistsError(SparkhcError, FileExistsError):
    """The output directory exists and ``overwrite`` was not set."""


# ---------------------------------------------------------------------------------------- input
def id_columns(df: DataFrame) -> tuple[Column, Column]:
    """The document id of raw documents with a ``doc_id`` or an ``id`` column
    (:data:`sparkhc.batch.ID_ALIAS`), or both: (the id, null when neither is set; a boolean
    column, true where both are set and disagree)."""
    present = [c for c in (DOC_ID, ID_ALIAS) if c in df.columns]
    if not present:
        return F.lit(None).cast(T.StringType()), F.lit(False)
    cols = [F.col(c).cast(T.StringType()) for c in present]
    if len(cols) == 1:
        return cols[0], F.lit(False)
    a, b = cols
    return F.coalesce(a, b), F.coalesce(a.isNotNull() & b.isNotNull() & (a != b), F.lit(False))


def normalize_raw(raw_df: DataFrame, source: str = "raw documents") -> DataFrame:
    """Select and type-check the raw-documents columns.

    ``doc_id`` (string; or ``id``, or both when equal: a row where they disagree fails the job)
    and ``labels`` (array<string>) are required, and at least one of ``text``
    (string) / ``tokens`` (array<string>); a missing ``split``/``tokens``/``text``/``fold`` is
    taken as null; ``fold`` may be any integer type (cast to int); null labels become ``[]``.
    Other columns are ignored. Raises :class:`SchemaError` naming the column.
    """
    have = {f.name: f.dataType for f in raw_df.schema.fields}
    if ID_ALIAS in have:
        if not isinstance(have[ID_ALIAS], T.StringType):
            raise SchemaError(f"{source}: column {ID_ALIAS!r} has type {simple_type_name(have[ID_ALIAS])}, expected string")
        if DOC_ID in have and not isinstance(have[DOC_ID], T.StringType):
            raise SchemaError(f"{source}: column {DOC_ID!r} has type {simple_type_name(have[DOC_ID])}, expected string")
        ident, conflict = id_columns(raw_df)
        msg = F.concat(F.lit(f"{source}: columns 'doc_id' and 'id' disagree: "), F.col(DOC_ID), F.lit(" vs "),
                       F.col(ID_ALIAS)) if DOC_ID in have else F.lit("")
        raw_df = raw_df.withColumn(DOC_ID, F.when(conflict, F.raise_error(msg)).otherwise(ident))
        have[DOC_ID] = T.StringType()
    want: dict[str, tuple[T.DataType, bool]] = {
        DOC_ID: (T.StringType(), True),
        TEXT: (T.StringType(), False),
        TOKENS: (T.ArrayType(T.StringType()), False),
        LABELS: (T.ArrayType(T.StringType()), True),
        SPLIT: (T.StringType(), False),
        FOLD: (T.IntegerType(), False),
    }
    cols = []
    for name, (dtype, required) in want.items():
        if name not in have:
            if required:
                alias = f" (or {ID_ALIAS!r})" if name == DOC_ID else ""
                raise SchemaError(f"{source}: column {name!r}{alias} is missing (columns: {sorted(have)})")
            cols.append(F.lit(None).cast(dtype).alias(name))
            continue
        got = have[name]
        if name == FOLD:
            ok = isinstance(got, T.ByteType | T.ShortType | T.IntegerType | T.LongType | T.NullType)
        elif isinstance(dtype, T.ArrayType):
            ok = isinstance(got, T.NullType) or (
                isinstance(got, T.ArrayType) and isinstance(got.elementType, T.StringType | T.NullType)
            )
        else:
            ok = isinstance(got, T.StringType | T.NullType) if name != DOC_ID else isinstance(got, T.StringType)
        if not ok:
            raise SchemaError(
                f"{source}: column {name!r} has type {simple_type_name(got)}, expected {simple_type_name(dtype)}"
            )
        col = F.col(name).cast(dtype)
        if name == LABELS:
            col = F.filter(F.coalesce(col, F.array().cast(dtype)), lambda x: x.isNotNull())
        cols.append(col.alias(name))
    if TEXT not in have and TOKENS not in have:
        raise SchemaError(f"{source}: neither 'text' nor 'tokens' is present (columns: {sorted(have)})")
    return raw_df.select(*cols)


# ---------------------------------------------------------------------------------------- executors
def _tokens_of(batch: pa.RecordBatch, spec: FeatureSpec) -> list[list[str]]:
    tok = spec.tokenizer
    texts = batch.column(TEXT).to_pylist()
    tokens = batch.column(TOKENS).to_pylist()
    return [tok.tokenize_document(t, k) for t, k in zip(texts, tokens, strict=True)]


def _labels_array(col: pa.Array) -> pa.Array:
    return col.fill_null(pa.scalar([], type=col.type)).cast(FEATURES_ARROW_SCHEMA.field(LABELS).type)


def _list_array(offsets: np.ndarray, values: pa.Array, field: str) -> pa.Array:
    return pa.ListArray.from_arrays(
        pa.array(offsets, type=pa.int32()), values, type=FEATURES_ARROW_SCHEMA.field(field).type
    )


def _token_bags(tokens: pa.Array, spec: FeatureSpec) -> tuple[np.ndarray, pa.Array, pa.Array]:
    """The bags of words of pre-tokenized documents (no null list), as ``Counter(tokenize_tokens(row))``
    gives them row by row: (offsets, terms, counts), distinct terms in first-occurrence order. Each
    distinct token is filtered once (:meth:`~sparkhc.text.tokenize.Tokenizer.token_forms`), the counting
    is numpy's."""
    n = len(tokens)
    lengths = np.asarray(pc.list_value_length(tokens).to_numpy(zero_copy_only=False), dtype=np.int64)
    enc = pc.list_flatten(tokens).dictionary_encode()
    term_of: dict[str, int] = {}
    form_id = np.array([term_of.setdefault(f, len(term_of)) if f else -1
                        for f in spec.tokenizer.token_forms(enc.dictionary.to_pylist())] + [-1], dtype=np.int64)
    codes = np.asarray(enc.indices.fill_null(len(enc.dictionary)).to_numpy(zero_copy_only=False), dtype=np.int64)
    tid = form_id[codes]
    kept = tid >= 0
    rows = np.repeat(np.arange(n, dtype=np.int64), lengths)[kept]
    tid = tid[kept]
    width = max(1, len(term_of))
    keys, first, counts = np.unique(rows * width + tid, return_index=True, return_counts=True)
    order = np.argsort(first)
    keys, counts = keys[order], counts[order]
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(keys // width, minlength=n), out=offsets[1:])
    terms = pa.array(list(term_of), type=pa.string()).take(pa.array(keys % width))
    return offsets, terms, pa.array(counts.astype(np.int32), type=pa.int32())


def bag_batch(b: pa.RecordBatch, spec: FeatureSpec) -> pa.RecordBatch:
    """Raw documents -> (doc_id, split, fold, labels, terms, term_counts): the bag of words of each
    document, distinct terms in first-occurrence order."""
    tokens = b.column(TOKENS)
    if len(tokens) and not tokens.null_count:  # every document pre-tokenized: counted as columns
        offsets, flat_terms, flat_counts = _token_bags(tokens, spec)
    else:
        bags = [Counter(toks) for toks in _tokens_of(b, spec)]
        offsets = np.zeros(len(bags) + 1, dtype=np.int64)
        np.cumsum([len(c) for c in bags], out=offsets[1:])
        flat_terms = pa.array([t for c in bags for t in c], type=pa.string())
        flat_counts = pa.array(
            np.fromiter((k for c in bags for k in c.values()), dtype=np.int32, count=int(offsets[-1])),
            type=pa.int32(),
        )
    off = pa.array(offsets, type=pa.int32())
    return pa.RecordBatch.from_arrays(
        [
            b.column(DOC_ID),
            b.column(SPLIT),
            b.column(FOLD).cast(pa.int32()),
            _labels_array(b.column(LABELS)),
            pa.ListArray.from_arrays(off, flat_terms, type=TOKENIZED_ARROW.field(TERMS).type),
            pa.ListArray.from_arrays(off, flat_counts, type=TOKENIZED_ARROW.field(TERM_COUNTS).type),
        ],
        schema=TOKENIZED_ARROW,
    )


def tokenize_partition(batches: Iterator[pa.RecordBatch], spec_bc: Broadcast[FeatureSpec]) -> Iterator[pa.RecordBatch]:
    """mapInArrow function: raw documents -> (doc_id, split, fold, labels, terms, term_counts)."""
    spec = spec_bc.value
    for b in batches:
        yield bag_batch(b, spec)


def _features_batch(
    b: pa.RecordBatch,
    csr: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    taxonomy: Taxonomy | None,
) -> pa.RecordBatch:
    offsets, idx, val, cnt = csr
    labels = _labels_array(b.column(LABELS))
    lid_type = FEATURES_ARROW_SCHEMA.field(LABEL_IDS).type
    if taxonomy is None:
        label_ids = pa.nulls(b.num_rows, type=lid_type)
    else:
        label_ids = pa.array(_label_ids(b.column(DOC_ID).to_pylist(), labels.to_pylist(), taxonomy), type=lid_type)
    return pa.RecordBatch.from_arrays(
        [
            b.column(DOC_ID),
            b.column(SPLIT),
            b.column(FOLD).cast(pa.int32()),
            labels,
            label_ids,
            _list_array(offsets, pa.array(idx, type=pa.int32()), INDICES),
            _list_array(offsets, pa.array(val, type=pa.float32()), VALUES),
            _list_array(offsets, pa.array(cnt, type=pa.float32()), COUNTS),
        ],
        schema=FEATURES_ARROW_SCHEMA,
    )


def _label_ids(doc_ids: list[str], labels: list[list[str]], taxonomy: Taxonomy) -> list[list[int]]:
    out = []
    for doc, labs in zip(doc_ids, labels, strict=True):
        try:
            out.append(sorted({taxonomy.id(name) for name in labs}))
        except SparkhcError as e:
            raise InputDataError(f"document {doc!r}: {e}") from None
    return out


def _flat(col: pa.Array) -> tuple[np.ndarray, pa.Array]:
    """(lengths, flat values) of a list column without nulls."""
    col = col.fill_null(pa.scalar([], type=col.type)) if col.null_count else col
    offsets = np.asarray(col.offsets, dtype=np.int64)
    return np.diff(offsets), col.values.slice(int(offsets[0]), int(offsets[-1] - offsets[0]))


def features_from_terms_partition(
    batches: Iterator[pa.RecordBatch],
    spec_bc: Broadcast[FeatureSpec],
    taxonomy_bc: Broadcast[Taxonomy] | None,
) -> Iterator[pa.RecordBatch]:
    """mapInArrow function: tokenized documents (bags of words) -> features rows."""
    spec = spec_bc.value
    taxonomy = None if taxonomy_bc is None else taxonomy_bc.value
    for b in batches:
        yield terms_features_batch(b, spec, taxonomy)


def terms_features_batch(b: pa.RecordBatch, spec: FeatureSpec, taxonomy: Taxonomy | None) -> pa.RecordBatch:
    """Tokenized documents (:data:`TOKENIZED_SCHEMA`, bags of words) -> features rows with a fitted
    ``spec`` (labels mapped to ids with ``taxonomy``): the executors' step, also run in the driver
    (:mod:`sparkhc.spark.smalljobs`)."""
    lengths, terms = _flat(b.column(TERMS))
    _, counts = _flat(b.column(TERM_COUNTS))
    enc = terms.dictionary_encode()  # each distinct term looked up once
    ids = spec.term_ids(enc.dictionary.to_pylist())[np.asarray(enc.indices.to_numpy(zero_copy_only=False),
                                                               dtype=np.int64)]
    csr = spec.transform_bags(lengths, None, counts.to_numpy(zero_copy_only=False), ids=ids)
    return _features_batch(b, csr, taxonomy)


def raw_features_batch(b: pa.RecordBatch, spec: FeatureSpec, taxonomy: Taxonomy | None) -> pa.RecordBatch:
    """Raw documents (``doc_id``, ``split``, ``fold``, ``labels``, ``text``, ``tokens``) -> features rows
    of a fitted ``spec``: :func:`bag_batch` then :func:`terms_features_batch`, the two steps of
    ``predict --input`` and ``featurize --like`` (in this process, :mod:`sparkhc.spark.smalljobs`; on
    Spark the read of :mod:`sparkhc.spark.sources` makes the bags) and of a ``sparkhc.ml`` model given
    a raw-text column."""
    return terms_features_batch(bag_batch(b, spec), spec, taxonomy)


def features_from_raw_partition(
    batches: Iterator[pa.RecordBatch],
    spec_bc: Broadcast[FeatureSpec],
    taxonomy_bc: Broadcast[Taxonomy] | None,
) -> Iterator[pa.RecordBatch]:
    """mapInArrow function: raw documents -> features rows (tokenize and transform in one pass)."""
    spec = spec_bc.value
    taxonomy = None if taxonomy_bc is None else taxonomy_bc.value
    for b in batches:
        yield _features_batch(b, spec.transform_many(_tokens_of(b, spec)), taxonomy)


# ---------------------------------------------------------------------------------------- driver
def _fit_filter(df: DataFrame, spec: FeatureSpec) -> DataFrame:
    return df.filter(_fit_condition(spec))


def fit_spec(tokens_df: DataFrame, spec: FeatureSpec, n_fit: int | None = None) -> FeatureSpec:
    """Fit the vocabulary / df on the fit documents of a tokenized DataFrame, distributedly.

    Only the pruned vocabulary with its document frequencies (or the per-bucket df in hashing
    mode) reaches the driver.
    """
    fit_df = _fit_filter(tokens_df, spec)
    n_fit = fit_df.count() if n_fit is None else n_fit
    if n_fit == 0:
        raise InputDataError(
            f"no document matches the fit filter (fit_on={spec.fit_on!r}, fit_exclude_folds="
            f"{spec.fit_exclude_folds!r}); set fit_on to the training split names, or None for all documents"
        )
    if spec.mode == "hashing":
        n = spec.n_features
        buckets = F.array_distinct(
            F.transform(TERMS, lambda t: (F.crc32(F.encode(t, "UTF-8")) % F.lit(n)).cast("int"))
        )
        rows = (
            fit_df.select(F.explode(buckets).alias("bucket")).groupBy("bucket").count().collect()
        )
        df = np.zeros(n, dtype=np.int64)
        if rows:
            df[np.array([r[0] for r in rows], dtype=np.int64)] = [r[1] for r in rows]
        return spec.fitted(n_fit, df=df)
    # terms are already distinct within a document (bags of words): (doc, term) pairs are distinct
    counts = fit_df.select(F.explode(TERMS).alias("term")).groupBy("term").count()
    counts = counts.filter(
        (F.col("count") >= spec.min_df) & (F.col("count") <= F.lit(spec.max_df * n_fit))
    )
    rows = counts.collect()
    return spec.fitted(n_fit, terms=[r[0] for r in rows], df=[int(r[1]) for r in rows])


def _fit_condition(spec: FeatureSpec) -> Column:
    cond = F.lit(True)
    if spec.fit_on is not None:
        cond = cond & F.col(SPLIT).isin(list(spec.fit_on))
    if spec.fit_exclude_folds is not None:
        cond = cond & (F.col(FOLD).isNull() | ~F.col(FOLD).isin(list(spec.fit_exclude_folds)))
    return F.coalesce(cond, F.lit(False))


def _scan(tokens_df: DataFrame, spec: FeatureSpec, taxonomy: Taxonomy | None, checked: bool = False) -> dict[str, int]:
    """One pass over the tokenized documents: counts, doc_id checks and (with a taxonomy) the
    label check. Raises InputDataError naming samples of the offending documents. ``checked``:
    a reader has already checked ids (present, unique) and labels (taxonomy nodes), so only the
    counts are taken (no shuffle)."""
    aggs = [
        F.count(F.lit(1)).alias("n"),
        (F.count(F.lit(1)) if checked else F.count_distinct(F.col(DOC_ID))).alias("distinct"),
        F.sum(F.col(DOC_ID).isNull().cast("long")).alias("nulls"),
        F.sum(_fit_condition(spec).cast("long")).alias("n_fit"),
        F.sum((F.size(TERMS) == 0).cast("long")).alias("no_tokens"),
    ]
    if taxonomy is not None and not checked:
        # distinct label sets are few (bounded by the taxonomy in practice), unlike documents
        aggs.append(F.array_distinct(F.flatten(F.collect_set(LABELS))).alias("labels"))
    row = tokens_df.agg(*aggs).first()
    if row is None:  # an aggregate without grouping always returns one row
        raise RuntimeError("empty aggregate result")
    n, distinct, nulls = int(row["n"]), int(row["distinct"]), int(row["nulls"] or 0)
    if nulls:
        raise InputDataError(f"{nulls} document(s) have a null doc_id")
    if distinct != n:
        dups = tokens_df.groupBy(DOC_ID).count().filter(F.col("count") > 1)
        sample = [r[DOC_ID] for r in dups.orderBy(DOC_ID).limit(5).collect()]
        raise InputDataError(
            f"doc_id must be unique: {n - distinct} duplicate row(s), e.g. {sample} "
            "(featurize writes exactly one row per document)"
        )
    if taxonomy is not None and not checked:
        bad = sorted(lab for lab in (row["labels"] or []) if lab not in taxonomy or lab == taxonomy.root_name)
        if bad:
            docs = tokens_df.filter(F.arrays_overlap(F.col(LABELS), F.array(*[F.lit(b) for b in bad])))
            n_docs = docs.count()
            sample = [r[DOC_ID] for r in docs.select(DOC_ID).orderBy(DOC_ID).limit(5).collect()]
            raise InputDataError(
                f"{len(bad)} label(s) are not nodes of the taxonomy {taxonomy.source} (the root is not a "
                f"label): {bad[:10]}; {n_docs} document(s) affected, e.g. {sample}"
            )
    return {"n": n, "n_fit": int(row["n_fit"] or 0), "no_tokens": int(row["no_tokens"] or 0)}


def _counted(spec: FeatureSpec, groups: Mapping[tuple[str | None, int | None], int], no_tokens: int
             ) -> dict[str, int]:
    """What :func:`_scan` counts, from a reader's documents per (split, fold)."""
    n_fit = sum(k for (split, fold), k in groups.items() if spec.is_fit_document(split, fold))
    return {"n": sum(groups.values()), "n_fit": n_fit, "no_tokens": no_tokens}


def _as_spec(spec_params: Mapping[str, Any] | FeatureSpec | None) -> FeatureSpec:
    if isinstance(spec_params, FeatureSpec):
        return spec_params
    return FeatureSpec.from_params(spec_params or {})


def transform(
    spark: SparkSession,
    raw_df: DataFrame,
    spec: FeatureSpec,
    taxonomy: Taxonomy | None = None,
) -> DataFrame:
    """Featurize new documents with an existing (fitted) spec, e.g. for prediction.

    Returns a DataFrame in the features layout (:data:`FEATURES_SCHEMA`), one row per input row,
    in the input's partitioning. Labels are mapped to ``label_ids`` when ``taxonomy`` is given;
    unknown labels then raise an error on the executor, so check them first when they may occur.
    """
    if spec.needs_fit and not spec.is_fitted:
        raise NotFittedError(
            f"transform needs a fitted FeatureSpec (mode={spec.mode!r}, weighting={spec.weighting!r}); "
            "use featurize or FeatureSpec.load"
        )
    raw = normalize_raw(raw_df)
    sc = spark.sparkContext
    spec_bc = sc.broadcast(spec)
    tax_bc = None if taxonomy is None else sc.broadcast(taxonomy)
    fn = functools.partial(features_from_raw_partition, spec_bc=spec_bc, taxonomy_bc=tax_bc)
    return raw.mapInArrow(fn, FEATURES_SCHEMA)


def featurize(
    spark: SparkSession,
    raw_df: DataFrame,
    out_dir: str | os.PathLike[str],
    spec_params: Mapping[str, Any] | FeatureSpec | None = None,
    taxonomy: Taxonomy | None = None,
    num_partitions: int | None = None,
    overwrite: bool = False,
    extra_files: Mapping[str, str | bytes] | None = None,
) -> dict[str, Any]:
    """Tokenize, fit the vocabulary/idf on the fit documents and write the features directory.

    Parameters
    ----------
    spark : SparkSession
    raw_df : DataFrame
        Raw documents (:data:`sparkhc.spark.schemas.RAW_SCHEMA`); ``doc_id`` must be unique.
    out_dir : path
        Output directory: ``features/part-NNNNN.parquet``, ``feature_spec.json``,
        ``_SUMMARY.json`` and, with a taxonomy, ``taxonomy.tsv``.
    spec_params : mapping or FeatureSpec, optional
        FeatureSpec parameters (see :class:`sparkhc.text.spec.FeatureSpec`). A *fitted*
        FeatureSpec is used as is (no refit): featurizing new data for an existing model.
    taxonomy : Taxonomy, optional
        Maps ``labels`` to ``label_ids``; every label must be a (non-root) node.
    num_partitions : int, optional
        Number of output files; default ``ceil(n_docs / ROWS_PER_FILE)``.
    overwrite : bool
        Replace an existing ``out_dir`` (atomically) instead of raising OutputExistsError.
    extra_files : mapping of file name to str or bytes, optional
        More files written into ``out_dir`` inside the same atomic rename (e.g. corpus metadata);
        plain names only, not ``features``, ``feature_spec.json`` or ``_SUMMARY.json``
        (``taxonomy.tsv`` may be given and then replaces the one written from ``taxonomy``).

    Returns
    -------
    dict
        The content of ``_SUMMARY.json``.
    """
    t0 = time.perf_counter()
    spec = _as_spec(spec_params)
    if OutputFs(out_dir).exists() and not overwrite:
        raise OutputExistsError(f"{OutputFs(out_dir).root}: output directory exists; pass overwrite=True to replace it")
    extra = _check_args(num_partitions, extra_files)
    raw = normalize_raw(raw_df)
    sc = spark.sparkContext
    tok_bc = sc.broadcast(spec.unfitted() if spec.is_fitted else spec)
    tokens_df = raw.mapInArrow(functools.partial(tokenize_partition, spec_bc=tok_bc), TOKENIZED_SCHEMA)
    tokens_df = tokens_df.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        return featurize_tokens(spark, tokens_df, out_dir, spec, taxonomy, num_partitions, overwrite, extra, t0=t0)
    finally:
        tokens_df.unpersist()
        tok_bc.unpersist()


def _check_args(num_partitions: int | None, extra_files: Mapping[str, str | bytes] | None) -> dict[str, str | bytes]:
    if num_partitions is not None and (isinstance(num_partitions, bool) or int(num_partitions) < 1):
        raise ValueError(f"num_partitions must be a positive int. Got {num_partitions!r} instead.")
    extra = dict(extra_files or {})
    for name in extra:
        if name in (FEATURES_DIR, SPEC_FILE, SUMMARY_FILE) or Path(name).name != name or name in ("", ".", ".."):
            raise ValueError(f"extra_files: {name!r} is not an allowed file name in the features directory")
    return extra


def featurize_tokens(
    spark: SparkSession,
    tokens_df: DataFrame,
    out_dir: str | os.PathLike[str],
    spec: FeatureSpec,
    taxonomy: Taxonomy | None = None,
    num_partitions: int | None = None,
    overwrite: bool = False,
    extra_files: Mapping[str, str | bytes] | None = None,
    t0: float | None = None,
    timings: Mapping[str, float] | None = None,
    checked: bool = False,
    counts: tuple[Mapping[tuple[str | None, int | None], int], int] | None = None,
) -> dict[str, Any]:
    """:func:`featurize` from tokenized documents (:data:`TOKENIZED_SCHEMA`, best persisted: it is
    scanned three times): check, fit, transform, write. The caller keeps ``tokens_df``.
    ``checked``: the documents come from a reader that checked ids and labels (see :func:`_scan`).
    ``counts`` (with ``checked``): the reader's document counts per (split, fold) and of documents
    without tokens, which spare the counting pass."""
    t0 = time.perf_counter() if t0 is None else t0
    out = OutputFs(out_dir)
    if out.exists() and not overwrite:
        raise OutputExistsError(f"{out.root}: output directory exists; pass overwrite=True to replace it")
    extra = _check_args(num_partitions, extra_files)
    sc = spark.sparkContext
    broadcasts: list[Broadcast[Any]] = []
    tmp = out.sibling(f".tmp-{uuid.uuid4().hex}")
    laps: dict[str, float] = dict(timings or {})
    mark = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal mark
        now = time.perf_counter()
        laps[name] = round(now - mark, 3)
        mark = now

    try:
        scan = _scan(tokens_df, spec, taxonomy, checked) if counts is None or not checked else _counted(spec, *counts)
        n_docs = scan["n"]
        lap("tokenize_and_check")
        if not spec.is_fitted:
            # also for hashing with tf / log_tf: the df is recorded (cheap) for inspection
            spec = fit_spec(tokens_df, spec, n_fit=scan["n_fit"])
        lap("fit")
        log.info("featurize: %d documents, %d features (spec %s)", n_docs, spec.n_features, spec.fingerprint)
        n_parts = int(num_partitions) if num_partitions else max(1, math.ceil(n_docs / ROWS_PER_FILE))
        spec_bc = sc.broadcast(spec)
        tax_bc = None if taxonomy is None else sc.broadcast(taxonomy)
        broadcasts += [b for b in (spec_bc, tax_bc) if b is not None]
        fn = functools.partial(features_from_terms_partition, spec_bc=spec_bc, taxonomy_bc=tax_bc)
        feats = (
            tokens_df.mapInArrow(fn, FEATURES_SCHEMA)
            .repartition(n_parts, F.col(DOC_ID))
            .sortWithinPartitions(DOC_ID)
        )
        tmp.makedirs()
        _write_parquet(feats, tmp.child_uri(FEATURES_DIR))
        lap("transform_and_write")
        per_split: dict[str, list[int]] = {}
        files = _rename_parts(tmp, tmp.child(FEATURES_DIR), per_split)
        stats = _split_stats(per_split)
        stats["documents_without_tokens"] = scan["no_tokens"]
        lap("summary")
        if stats["n_documents"] != n_docs:
            raise RuntimeError(f"featurize wrote {stats['n_documents']} rows for {n_docs} documents")
        tmp.write_bytes(tmp.child(SPEC_FILE), spec.to_json().encode("utf-8"))
        if taxonomy is not None:
            tmp.write_bytes(tmp.child(TAXONOMY_FILE), taxonomy.to_tsv().encode("utf-8"))
        for name, content in extra.items():
            data = content.encode("utf-8") if isinstance(content, str) else bytes(content)
            tmp.write_bytes(tmp.child(name), data)
        summary: dict[str, Any] = {
            **stats,
            "mode": spec.mode,
            "n_features": spec.n_features,
            "vocabulary_size": None if spec.vocabulary is None else len(spec.vocabulary),
            "n_fit_docs": spec.n_fit_docs,
            "spec_fingerprint": spec.fingerprint,
            "taxonomy": None
            if taxonomy is None
            else {"fingerprint": taxonomy.fingerprint(), "source": taxonomy.source, "nodes": taxonomy.n_nodes - 1,
                  **taxonomy.concept_info()},
            "num_partitions": n_parts,
            "files": files,
            "spark_version": spark.version,
        }
        summary["timings"] = laps
        summary["seconds"] = round(time.perf_counter() - t0, 3)
        tmp.write_bytes(tmp.child(SUMMARY_FILE), (json.dumps(summary, indent=2, sort_keys=True) + "\n").encode("utf-8"))
        _swap_into_place(tmp, out, overwrite)
    except BaseException:
        tmp.rmtree()
        raise
    finally:
        for b in broadcasts:
            b.unpersist()
    log.info(
        "featurize: wrote %s (%d documents, %d empty, %.1f s)",
        out.uri, summary["n_documents"], summary["empty_documents"], summary["seconds"],
    )
    return summary


def _write_parquet(df: DataFrame, uri: str) -> None:
    # Writer options pinned so that session settings cannot change the bytes of the files.
    (
        df.write.mode("errorifexists")
        .option("compression", "snappy")
        .option("maxRecordsPerFile", 0)
        .parquet(uri)
    )


_PART = re.compile(r"^part-(\d+)-.*\.parquet$")


def _rename_parts(fs: OutputFs, feat_dir: str, per_split: dict[str, list[int]] | None = None) -> list[dict[str, Any]]:
    """Rename Spark's part files to part-00000.parquet, ... in task order; drop .crc files.

    Returns name, rows and sha256 of every file. ``per_split`` (features files only): receives
    split -> [documents, empty documents, nonzeros] counted from the rows rewritten (see :func:`_split_stats`).
    """
    names = fs.listdir(feat_dir)
    parts = []
    for name in names:
        if name.endswith(".crc"):
            fs.remove(f"{feat_dir}/{name}")
            continue
        m = _PART.match(name)
        if m:
            parts.append((int(m.group(1)), name))
        elif not name.startswith(("_", ".")):
            raise RuntimeError(f"{feat_dir}: unexpected file {name!r} written by Spark")
    parts.sort()

    def rewrite(i: int, name: str) -> tuple[dict[str, Any], dict[str, list[int]]]:
        new = f"part-{i:05d}.parquet"
        counts: dict[str, list[int]] = {}
        rows = _rewrite_deterministic(fs, f"{feat_dir}/{name}", f"{feat_dir}/{new}",
                                      counts if per_split is not None else None)
        return {"name": new, "rows": rows, "sha256": fs.sha256(f"{feat_dir}/{new}")}, counts

    # each file on its own (pyarrow's reader and writer release the GIL): two at a time
    with ThreadPoolExecutor(max_workers=2) as pool:
        done = list(pool.map(rewrite, range(len(parts)), [name for _, name in parts]))
    for _, counts in done:
        for split, acc in counts.items():
            total = per_split.setdefault(split, [0, 0, 0]) if per_split is not None else [0, 0, 0]
            for k in range(3):
                total[k] += acc[k]
    return [f for f, _ in done]


def _rewrite_deterministic(fs: OutputFs, src: str, dst: str, per_split: dict[str, list[int]] | None = None) -> int:
    """Re-encode a part file with pyarrow and fixed settings; returns its row count.

    Spark's Parquet writer orders each column chunk's encodings list by a Java hash set, which
    differs between JVMs, so two separate runs gave the same rows with different footer bytes.
    pyarrow's writer is deterministic; Spark's schema metadata is kept so Spark reads the same
    types back.
    """
    afs = fs.filesystem()
    table = pq.read_table(src, filesystem=afs)
    # the footer's key order (as Spark wrote it), not the order of the table's schema metadata
    meta = pq.read_metadata(src, filesystem=afs).metadata or {}
    keep = {k: v for k, v in meta.items() if k.startswith(b"org.apache.spark.")}
    table = table.replace_schema_metadata(keep)
    if per_split is not None:
        _count_splits(table, per_split)
    tmp = dst + ".tmp"
    pq.write_table(table, tmp, compression="snappy", version="2.6", data_page_version="1.0",
                   use_dictionary=True, write_statistics=True, filesystem=afs)
    fs.replace_file(tmp, dst)
    if src != dst:
        fs.remove(src)
    return table.num_rows


def _count_splits(table: pa.Table, per_split: dict[str, list[int]]) -> None:
    """Add the documents, empty documents and nonzeros per split of a features table to ``per_split``."""
    nnz = pc.list_value_length(table.column(INDICES)).fill_null(0).to_numpy(zero_copy_only=False)
    splits = pc.fill_null(table.column(SPLIT), NULL_SPLIT).to_numpy(zero_copy_only=False)
    for s in np.unique(splits) if len(splits) else []:
        sel = nnz[splits == s]
        acc = per_split.setdefault(str(s), [0, 0, 0])
        acc[0] += len(sel)
        acc[1] += int((sel == 0).sum())
        acc[2] += int(sel.sum())


def _split_stats(per_split: Mapping[str, list[int]]) -> dict[str, Any]:
    """Documents, empty documents and nonzeros per split, counted from the written files
    (:func:`_count_splits` of every rewritten part file)."""
    return {
        "n_documents": sum(v[0] for v in per_split.values()),
        "documents_per_split": {k: v[0] for k, v in sorted(per_split.items())},
        "empty_documents": sum(v[1] for v in per_split.values()),
        "empty_documents_per_split": {k: v[1] for k, v in sorted(per_split.items())},
        "nnz": sum(v[2] for v in per_split.values()),
    }


def _swap_into_place(tmp: OutputFs, out: OutputFs, overwrite: bool) -> None:
    if out.exists() and not overwrite:
        raise OutputExistsError(f"{out.root}: output directory appeared while featurizing; not replaced")
    tmp.publish(out)
