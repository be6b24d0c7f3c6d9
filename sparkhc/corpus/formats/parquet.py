"""Parquet files in the raw-documents schema (the ``parquet`` input format)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

from sparkhc.batch import DOC_ID, FOLD, ID_ALIAS, LABELS, SPLIT
from sparkhc.corpus.formats.base import InputFormat
from sparkhc.corpus.records import (
    _INT32_MAX,
    _UNLABELLED_HINT,
    DEFAULT_BATCH_SIZE,
    RAW_SCHEMA,
    TEXT,
    TOKENS,
    Batches,
    OnEmpty,
    OnInvalid,
    ReadReport,
    RecordRules,
    UnknownLabels,
    _as_paths,
    _run,
    _Sink,
    new_report,
)
from sparkhc.errors import InputDataError, SchemaError
from sparkhc.taxonomy import Taxonomy


# ---------------------------------------------------------------------------------------- Parquet
def _type_ok(t: pa.DataType, want: pa.DataType) -> bool:
    if pa.types.is_string(want):
        return pa.types.is_string(t) or pa.types.is_large_string(t)
    if pa.types.is_list(want):
        return (pa.types.is_list(t) or pa.types.is_large_list(t)) and (
            pa.types.is_string(t.value_type) or pa.types.is_large_string(t.value_type)
        )
    if pa.types.is_int32(want):
        return pa.types.is_integer(t)
    return bool(t == want)


def validate_raw_schema(schema: pa.Schema, source: str) -> list[str]:
    """Check a table schema against :data:`RAW_SCHEMA`; returns the optional columns it lacks.

    ``doc_id`` (or ``id``, :data:`sparkhc.batch.ID_ALIAS`; both may be there) and ``labels`` are
    required, and ``text`` or ``tokens``; ``split`` and ``fold`` may be missing (read as null). string/large_string, list/large_list and any integer type for
    ``fold`` are accepted. Raises :class:`SchemaError` naming the column and the file.
    """
    names = schema.names
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise SchemaError(f"{source}: column {dupes[0]!r} appears more than once")
    missing: list[str] = []
    if ID_ALIAS in names and not _type_ok(schema.field(ID_ALIAS).type, pa.string()):
        raise SchemaError(f"{source}: column {ID_ALIAS!r} has type {schema.field(ID_ALIAS).type}, expected string")
    for f in RAW_SCHEMA:
        if f.name == DOC_ID and f.name not in names and ID_ALIAS in names:
            missing.append(f.name)  # the id is read from the column "id"
            continue
        if f.name not in names:
            if f.name in (DOC_ID, LABELS):
                alias = f" (or {ID_ALIAS!r})" if f.name == DOC_ID else ""
                raise SchemaError(
                    f"{source}: required column {f.name!r}{alias} is missing (columns: {names}); expected the "
                    f"raw documents schema {_schema_str(RAW_SCHEMA)}"
                )
            missing.append(f.name)
            continue
        t = schema.field(f.name).type
        if not _type_ok(t, f.type):
            raise SchemaError(f"{source}: column {f.name!r} has type {t}, expected {f.type}")
    if TEXT in missing and TOKENS in missing:
        raise SchemaError(f"{source}: neither a {TEXT!r} nor a {TOKENS!r} column (columns: {names})")
    return missing


def _schema_str(schema: pa.Schema) -> str:
    return "(" + ", ".join(f"{f.name}: {f.type}{'' if f.nullable else ' not null'}" for f in schema) + ")"


def parquet_record(sink: _Sink, row: int, values: Mapping[str, Any], require_labels: bool) -> pa.RecordBatch | None:
    """Check one row of a raw-documents Parquet file (``values``: the row's value of each column the
    file has, :data:`RAW_SCHEMA` names and ``id``) and add it to ``sink``: shared by
    :func:`read_parquet` and the executors of :mod:`sparkhc.spark.sources`."""
    doc_id = sink.check_ids(row, values, [c for c in (DOC_ID, ID_ALIAS) if c in values], "column")
    if doc_id is None or not sink.claim_id(row, doc_id):
        return None
    if not sink.rules.documents:
        sink.accept()
        return None
    labels = values[LABELS]
    if labels is None:
        if require_labels:
            sink.invalid(row, "missing labels", f"column {LABELS!r} is null; {_UNLABELLED_HINT}", doc_id)
            return None
        labels = []
    if any(lab is None or not lab for lab in labels):
        sink.invalid(row, "wrong type", f"column {LABELS!r} has a null or empty item", doc_id)
        return None
    tokens = values.get(TOKENS)
    if tokens is not None and any(t is None for t in tokens):
        sink.invalid(row, "wrong type", f"column {TOKENS!r} has a null item", doc_id)
        return None
    fold = values.get(FOLD)
    if fold is not None and not -_INT32_MAX <= fold <= _INT32_MAX:
        sink.invalid(row, "wrong type", f"column {FOLD!r} value {fold} does not fit int32", doc_id)
        return None
    return sink.add(row, doc_id, values.get(TEXT), tokens, labels, values.get(SPLIT), fold)


def read_parquet(
    paths: str | Path | Iterable[str | Path],
    *,
    require_labels: bool = True,
    taxonomy: Taxonomy | None = None,
    unknown_labels: UnknownLabels = "error",
    on_empty: OnEmpty = "error",
    on_invalid: OnInvalid = "error",
    check_duplicates: bool = True,
    batch_size: int = DEFAULT_BATCH_SIZE,
    rules: RecordRules | None = None,
) -> tuple[Batches, ReadReport]:
    """Read Parquet files in the raw-documents schema (see :func:`validate_raw_schema`).

    The schemas of all files are checked before any row is read. Rows go through the same checks
    as the other readers (null ``doc_id`` or null label items are invalid records, and null
    ``labels`` unless ``require_labels=False``, which reads them as ``[]``; duplicates, empty
    documents and unknown labels as documented in :func:`read_jsonl`). ``rules``: the core's rules
    (:func:`read_jsonl`); when they check ids only (``documents`` False), only the id columns are
    read and the schema is not checked (a file without one: every row lacks an id).
    """
    import pyarrow.parquet as pq

    files = _as_paths(paths)
    opened = []
    for p in files:
        try:
            pf = pq.ParquetFile(p)
        except (pa.ArrowInvalid, OSError) as e:
            raise InputDataError(f"{p}: not a readable Parquet file: {e}") from None
        if rules is None or rules.documents:
            missing = validate_raw_schema(pf.schema_arrow, str(p))
        else:  # ids only
            missing = [f.name for f in RAW_SCHEMA if f.name != DOC_ID or DOC_ID not in pf.schema_arrow.names]
        opened.append((p, pf, missing, ID_ALIAS in pf.schema_arrow.names))
    report = new_report(rules, ", ".join(str(p) for p in files))
    sink = _Sink(report, batch_size, taxonomy, unknown_labels, on_empty, on_invalid, None, False, check_duplicates,
                 rules)
    wanted = [f.name for f in RAW_SCHEMA]

    def records() -> Iterator[pa.RecordBatch | None]:
        for p, pf, missing, has_alias in opened:
            sink.set_file(str(p), "row")
            cols = [c for c in wanted if c not in missing] + ([ID_ALIAS] if has_alias else [])
            if not cols:  # (ids only) no id column: every row lacks an id
                for row in range(1, pf.metadata.num_rows + 1):
                    report.read += 1
                    yield parquet_record(sink, row, {}, require_labels)
                continue
            row = 0
            for b in pf.iter_batches(batch_size=batch_size, columns=cols):
                data = {c: b.column(c).to_pylist() for c in cols}
                for i in range(b.num_rows):
                    row += 1
                    report.read += 1
                    yield parquet_record(sink, row, {c: data[c][i] for c in cols}, require_labels)

    return _run(sink, records()), report


FORMAT = InputFormat("parquet", suffixes=(".parquet",), magic=b"PAR1", described=".parquet", order=10, recursive=True,
                     read=read_parquet, scan="rows", unit="row")
