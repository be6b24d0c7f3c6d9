"""Feature and label columns of a user's DataFrame, checked and turned into sparkhc's features layout.

Two feature inputs are accepted:

``vector``
    a ``pyspark.ml.linalg`` vector column (``VectorUDT``: the output of CountVectorizer, HashingTF,
    IDF, VectorAssembler, ...). Spark hands a vector column to Arrow-based Python code as its SQL
    struct ``(type tinyint, size int, indices array<int>, values array<double>)``, so the
    conversion reads the sparse vectors' index and value buffers directly: no Python object per
    row (dense vectors are accepted too and made sparse, row by row).
``layout``
    sparkhc's own features layout (``indices`` array<int>, ``values`` array<float>, optional
    ``counts``: :mod:`sparkhc.spark.schemas`), e.g. ``sparkhc.ml.read_features(spark, folder)``;
    no conversion at all (training reads the columns as ``sparkhc train`` does).

The number of features comes from ``numFeatures`` when set, else from the column's metadata
(``ml_attr.num_attrs``, set by CountVectorizer, HashingTF and IDF; ``sparkhc.n_features``, set
by :func:`sparkhc.ml.read_features`), else (vectors only) from the size of the first vector.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.ml.linalg import VectorUDT
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sparkhc.batch import COUNTS, DOC_ID, INDICES, LABELS, VALUES, SparseBatch, _flat_list
from sparkhc.errors import SchemaError

#: column metadata key under which sparkhc records facts about a column
META_KEY = "sparkhc"
#: schema of the rows handed to training (the columns the training drivers read)
TRAIN_DDL = f"{DOC_ID} string, {LABELS} array<string>, {INDICES} array<int>, {VALUES} array<float>, " \
            f"{COUNTS} array<float>"


@dataclass(frozen=True)
class FeatureInput:
    """Where a DataFrame's features are: a vector column, or the features layout."""

    kind: str  # "vector" | "layout"
    column: str  # the vector column, or INDICES for the layout
    n_features: int
    has_counts: bool = False
    #: fingerprint of the feature spec (layout read by sparkhc.ml.read_features), else None
    spec_fingerprint: str | None = None

    def struct(self) -> Column:
        """The column handed to the Arrow conversion (a vector, or a struct of the layout's arrays)."""
        if self.kind == "vector":
            return F.col(self.column)
        cols = [F.col(INDICES), F.col(VALUES)] + ([F.col(COUNTS)] if self.has_counts else [])
        return F.struct(*cols)


def _type_name(t: T.DataType) -> str:
    return "vector (pyspark.ml.linalg VectorUDT)" if isinstance(t, VectorUDT) else str(t.simpleString())


def _meta_size(field: T.StructField) -> int | None:
    md = field.metadata or {}
    for outer, inner in ((META_KEY, "n_features"), ("ml_attr", "num_attrs")):
        v = (md.get(outer) or {}).get(inner)
        if isinstance(v, int) and v > 0:
            return v
    return None


def detect_features(df: DataFrame, features_col: str, num_features: int = 0, who: str = "HierarchicalClassifier",
                    expected: int | None = None) -> FeatureInput:
    """The feature input of ``df`` (see the module notes), checked; ``expected`` is the number of
    features a fitted model needs (a different known size is an error naming the column)."""
    fields = {f.name: f for f in df.schema.fields}
    if features_col in fields:
        f = fields[features_col]
        if not isinstance(f.dataType, VectorUDT):
            raise SchemaError(
                f"{who}: features column {features_col!r} has type {_type_name(f.dataType)}; expected a "
                "pyspark.ml.linalg vector column (e.g. the output of CountVectorizer, HashingTF or IDF), or "
                f"sparkhc's features layout ({INDICES!r} array<int>, {VALUES!r} array<float>) without a "
                f"{features_col!r} column"
            )
        n = num_features or _meta_size(f) or expected
        if not n:
            first = df.select(features_col).where(F.col(features_col).isNotNull()).first()
            if first is None:
                raise SchemaError(f"{who}: features column {features_col!r} holds no vector (empty DataFrame?)")
            n = int(first[0].size)
        inp = FeatureInput("vector", features_col, int(n))
    elif INDICES in fields and VALUES in fields:
        for name, want in ((INDICES, T.IntegerType), (VALUES, T.FloatType), (COUNTS, T.FloatType)):
            if name not in fields:
                continue
            t = fields[name].dataType
            if not (isinstance(t, T.ArrayType) and isinstance(t.elementType, want)):
                raise SchemaError(
                    f"{who}: column {name!r} has type {_type_name(t)}, expected "
                    f"array<{want().simpleString()}> (sparkhc's features layout)"
                )
        md = (fields[INDICES].metadata or {}).get(META_KEY) or {}
        n = num_features or _meta_size(fields[INDICES]) or expected
        if not n:
            raise SchemaError(
                f"{who}: the features layout ({INDICES!r}, {VALUES!r}) does not say its number of features: "
                "set numFeatures, or read the folder with sparkhc.ml.read_features"
            )
        inp = FeatureInput("layout", INDICES, int(n), COUNTS in fields, md.get("feature_spec_fingerprint"))
    else:
        raise SchemaError(
            f"{who}: features column {features_col!r} is missing (columns: {df.columns}); expected a "
            f"pyspark.ml.linalg vector column, or sparkhc's features layout ({INDICES!r}, {VALUES!r})"
        )
    if expected is not None and inp.n_features != expected:
        raise SchemaError(
            f"{who}: features column {inp.column!r} has {inp.n_features} features; the model was trained "
            f"on {expected} (use the feature pipeline the model was trained with)"
        )
    return inp


def check_labels_column(df: DataFrame, labels_col: str, who: str) -> None:
    """``labels_col`` must be an array<string> column."""
    fields = {f.name: f.dataType for f in df.schema.fields}
    if labels_col not in fields:
        raise SchemaError(f"{who}: labels column {labels_col!r} is missing (columns: {df.columns})")
    t = fields[labels_col]
    if not (isinstance(t, T.ArrayType) and isinstance(t.elementType, T.StringType)):
        raise SchemaError(
            f"{who}: labels column {labels_col!r} has type {_type_name(t)}; expected array<string> "
            "(the label names of each document)"
        )


# ------------------------------------------------------------------------------ Arrow conversion
def _row_name(doc_ids: pa.Array | None, row: int) -> str:
    """A row of a batch for a message: its document id when known."""
    if doc_ids is not None and row < len(doc_ids) and doc_ids[row].is_valid:
        return f"document {doc_ids[row].as_py()!r}"
    return f"row {row} of the batch (no document id column)"


def vector_lists(arr: pa.Array, n_features: int, column: str, doc_ids: pa.Array | None = None,
                 who: str = "", hint: str = "") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(offsets int64, indices int32, values float64) of an Arrow vector struct (``VectorUDT``) or
    layout struct (``indices``, ``values``) array; every vector must have ``n_features`` entries
    (a SchemaError naming ``who``, the column, the document of ``doc_ids`` and both sizes)."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if isinstance(doc_ids, pa.ChunkedArray):
        doc_ids = doc_ids.combine_chunks()
    prefix = f"{who}: " if who else ""

    def wrong_size(row: int, size: int) -> SchemaError:
        return SchemaError(f"{prefix}features column {column!r}, {_row_name(doc_ids, row)}: a vector of size "
                           f"{size}, expected {n_features}{hint}")

    if arr.null_count:
        row = int(np.flatnonzero(arr.is_null().to_numpy(zero_copy_only=False))[0])
        raise SchemaError(f"{prefix}features column {column!r}, {_row_name(doc_ids, row)}: null vector")
    names = [arr.type.field(i).name for i in range(arr.type.num_fields)]
    parts = dict(zip(names, arr.flatten(), strict=True))
    if "type" not in parts:  # the features layout
        offsets, indices = _flat_list(parts[INDICES])
        voff, values = _flat_list(parts[VALUES])
        if not np.array_equal(offsets, voff):
            raise SchemaError(f"column {INDICES!r} and {VALUES!r} lists have different lengths in some row")
        return offsets, indices.astype(np.int32, copy=False), values.astype(np.float64, copy=False)
    kind = parts["type"].to_numpy(zero_copy_only=False)
    voff, values = _flat_list(parts["values"])
    if not np.any(kind == 1):  # sparse vectors only: the buffers as they are
        size = parts["size"].fill_null(-1).to_numpy(zero_copy_only=False)
        if size.size and np.any(size != n_features):
            row = int(np.flatnonzero(size != n_features)[0])
            raise wrong_size(row, int(size[row]))
        offsets, indices = _flat_list(parts["indices"])
        return offsets, indices.astype(np.int32, copy=False), values.astype(np.float64, copy=False)
    # dense vectors among them: made sparse row by row (dense input is rare for text)
    ioff, ind = _flat_list(parts["indices"])
    size = parts["size"].fill_null(-1).to_numpy(zero_copy_only=False)
    out_i: list[np.ndarray] = []
    out_v: list[np.ndarray] = []
    lengths = np.zeros(len(kind), dtype=np.int64)
    for r in range(len(kind)):
        v = values[voff[r]:voff[r + 1]]
        if kind[r] == 1:
            n_r = len(v)
            i_r = np.flatnonzero(v).astype(np.int32)
            v = v[i_r]
        else:
            n_r = int(size[r])
            i_r = ind[ioff[r]:ioff[r + 1]].astype(np.int32)
        if n_r != n_features:
            raise wrong_size(r, n_r)
        out_i.append(i_r)
        out_v.append(np.asarray(v, dtype=np.float64))
        lengths[r] = len(i_r)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    cat_i = np.concatenate(out_i) if out_i else np.zeros(0, np.int32)
    cat_v = np.concatenate(out_v) if out_v else np.zeros(0, np.float64)
    return offsets, cat_i, cat_v


def _list_array(offsets: np.ndarray, flat: np.ndarray, typ: pa.DataType) -> pa.ListArray:
    return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), pa.array(flat, type=typ))


def struct_to_batch(arr: pa.Array, n_features: int, column: str, with_counts: bool,
                    doc_ids: pa.Array | None = None, who: str = "", hint: str = "") -> SparseBatch:
    """A SparseBatch (features and, with ``with_counts``, counts) of a vector or layout struct array;
    for vectors the counts are the vector values (give count-based models raw counts). ``doc_ids``,
    ``who`` and ``hint`` name the document, the stage and the remedy in an error."""
    offsets, indices, values = vector_lists(arr, n_features, column, doc_ids, who, hint)
    cols: dict[str, Any] = {
        DOC_ID: pa.array(np.arange(len(offsets) - 1).astype(str)),
        INDICES: _list_array(offsets, indices, pa.int32()),
        VALUES: _list_array(offsets, values.astype(np.float32), pa.float32()),
    }
    if with_counts:
        names = [arr.type.field(i).name for i in range(arr.type.num_fields)]
        if COUNTS in names:
            coff, cvals = _flat_list(dict(zip(names, arr.flatten(), strict=True))[COUNTS])
            cols[COUNTS] = _list_array(coff, cvals.astype(np.float32), pa.float32())
        else:
            cols[COUNTS] = cols[VALUES]
    return SparseBatch.from_arrow(pa.RecordBatch.from_pydict(cols), n_features, with_counts=with_counts,
                                  source=f"features column {column!r}")


def _train_rows(batches: Iterator[pa.RecordBatch], n_features: int, column: str) -> Iterator[pa.RecordBatch]:
    for b in batches:
        if b.num_rows == 0:
            continue
        offsets, indices, values = vector_lists(
            b.column(column), n_features, column, b.column(DOC_ID), "HierarchicalClassifier.fit",
            " (numFeatures, the column metadata or the first vector)")
        vals = _list_array(offsets, values.astype(np.float32), pa.float32())
        yield pa.RecordBatch.from_pydict({
            DOC_ID: b.column(DOC_ID).cast(pa.string()),
            LABELS: b.column(LABELS).cast(pa.list_(pa.string())),
            INDICES: _list_array(offsets, indices, pa.int32()),
            VALUES: vals,
            COUNTS: vals,
        })


def training_rows(df: DataFrame, inp: FeatureInput, labels: Column, doc_id: Column) -> DataFrame:
    """The rows training reads (``doc_id``, ``labels``, ``indices``, ``values``, ``counts``):
    the layout's columns as they are, or the vectors converted on the executors through Arrow."""
    if inp.kind == "layout":
        cols = [doc_id.alias(DOC_ID), labels.alias(LABELS), F.col(INDICES), F.col(VALUES)]
        cols.append(F.col(COUNTS) if inp.has_counts else F.col(VALUES).alias(COUNTS))
        return df.select(*cols)
    import functools

    src = df.select(doc_id.alias(DOC_ID), labels.alias(LABELS), F.col(inp.column))
    return src.mapInArrow(functools.partial(_train_rows, n_features=inp.n_features, column=inp.column), TRAIN_DDL)
