"""Column names and schemas of the raw-documents and features layouts.

Column names are defined once in :mod:`sparkhc.batch` (the core reads them too) and re-exported
here; code in :mod:`sparkhc.spark` takes names only from this module.

Raw documents (what corpus readers yield, the input of ``featurize``)::

    doc_id string not null, text string, tokens array<string>, labels array<string>,
    split string, fold int

Features (``<out_dir>/features/part-NNNNN.parquet``, one row per document)::

    doc_id    string         unique document id; rows sorted by it within each file
    split     string         as in the raw documents (may be null)
    fold      int            as in the raw documents (may be null)
    labels    array<string>  gold labels as given (never null; [] when the input had none)
    label_ids array<int>     taxonomy node ids of ``labels``, sorted, unique (null: no taxonomy)
    indices   array<int>     feature indices, strictly ascending
    values    array<float>   weighted features (L2-normalised when the spec says so)
    counts    array<float>   raw term counts at the same positions

No VectorUDT: arrays keep the files readable by pyarrow/pandas and by :meth:`SparseBatch.from_arrow`.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import types as T

from sparkhc.batch import COUNTS, DOC_ID, FOLD, INDICES, LABEL_IDS, LABELS, SPLIT, TEXT, TOKENS, VALUES
from sparkhc.errors import SchemaError
from sparkhc.features import FEATURES_ARROW_SCHEMA, arrow_type_name, check_arrow_features_schema

#: Intermediate column: the filtered tokens of a document.
TERMS = "terms"

__all__ = [
    "COUNTS",
    "DOC_ID",
    "FEATURES_ARROW_SCHEMA",
    "FEATURES_SCHEMA",
    "FEATURE_COLUMNS",
    "FOLD",
    "INDICES",
    "LABELS",
    "LABEL_IDS",
    "RAW_ARROW_SCHEMA",
    "RAW_COLUMNS",
    "RAW_SCHEMA",
    "SPLIT",
    "TERMS",
    "TEXT",
    "TOKENS",
    "VALUES",
    "check_arrow_features_schema",
    "check_spark_features_schema",
    "simple_type_name",
]

_STR_ARRAY = T.ArrayType(T.StringType(), containsNull=True)

RAW_SCHEMA = T.StructType(
    [
        T.StructField(DOC_ID, T.StringType(), nullable=False),
        T.StructField(TEXT, T.StringType(), nullable=True),
        T.StructField(TOKENS, _STR_ARRAY, nullable=True),
        T.StructField(LABELS, _STR_ARRAY, nullable=True),
        T.StructField(SPLIT, T.StringType(), nullable=True),
        T.StructField(FOLD, T.IntegerType(), nullable=True),
    ]
)
RAW_COLUMNS = tuple(RAW_SCHEMA.names)

RAW_ARROW_SCHEMA = pa.schema(
    [
        pa.field(DOC_ID, pa.string(), nullable=False),
        pa.field(TEXT, pa.string()),
        pa.field(TOKENS, pa.list_(pa.string())),
        pa.field(LABELS, pa.list_(pa.string())),
        pa.field(SPLIT, pa.string()),
        pa.field(FOLD, pa.int32()),
    ]
)

FEATURES_SCHEMA = T.StructType(
    [
        T.StructField(DOC_ID, T.StringType(), nullable=False),
        T.StructField(SPLIT, T.StringType(), nullable=True),
        T.StructField(FOLD, T.IntegerType(), nullable=True),
        T.StructField(LABELS, T.ArrayType(T.StringType(), containsNull=False), nullable=False),
        T.StructField(LABEL_IDS, T.ArrayType(T.IntegerType(), containsNull=False), nullable=True),
        T.StructField(INDICES, T.ArrayType(T.IntegerType(), containsNull=False), nullable=False),
        T.StructField(VALUES, T.ArrayType(T.FloatType(), containsNull=False), nullable=False),
        T.StructField(COUNTS, T.ArrayType(T.FloatType(), containsNull=False), nullable=False),
    ]
)
FEATURE_COLUMNS = tuple(FEATURES_SCHEMA.names)

def simple_type_name(t: T.DataType | pa.DataType) -> str:
    """``array<float>``-style name of a Spark or Arrow type (for error messages)."""
    if isinstance(t, T.DataType):
        return str(t.simpleString())
    return arrow_type_name(t)


def _same_spark_type(got: T.DataType, want: T.DataType) -> bool:
    # nullability is not part of the contract (Spark reads every Parquet column as nullable)
    if isinstance(want, T.ArrayType):
        return isinstance(got, T.ArrayType) and _same_spark_type(got.elementType, want.elementType)
    return type(got) is type(want)


def check_spark_features_schema(schema: T.StructType, source: str) -> None:
    """Raise :class:`SchemaError` naming ``source`` and the column when ``schema`` is not the
    features layout (extra columns are allowed and ignored)."""
    have = {f.name: f.dataType for f in schema.fields}
    for f in FEATURES_SCHEMA.fields:
        if f.name not in have:
            raise SchemaError(
                f"{source}: column {f.name!r} is missing (columns: {sorted(have)}); expected the features "
                "layout written by sparkhc featurize"
            )
        if not _same_spark_type(have[f.name], f.dataType):
            raise SchemaError(
                f"{source}: column {f.name!r} has type {simple_type_name(have[f.name])}, expected "
                f"{simple_type_name(f.dataType)}"
            )
