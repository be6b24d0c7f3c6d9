"""Corpus readers: raw documents as Arrow record batches of :data:`RAW_SCHEMA`.

Every reader returns ``(batches, report)``: a lazy iterator of :class:`pyarrow.RecordBatch`
(at most ``batch_size`` rows each, so memory stays bounded) and a :class:`ReadReport` that fills
in while the iterator is consumed. No record is ever dropped silently: each input record ends up
*emitted*, *quarantined* (bad record, with a reason and a sample of ids) or *excluded* (a protocol
selection such as ModApte), and ``read == emitted + quarantined + excluded`` is checked when the
iterator is exhausted.

This module is the driver-side adapter of the readers: the record-check core is
:mod:`sparkhc.corpus.records`, each input format is one module of :mod:`sparkhc.corpus.formats`
(registered by name), and :func:`read_any` picks the format of an input through that registry. The
executors of :mod:`sparkhc.spark.sources` run the same record checks on Spark.

Readers (re-exported here from their format modules):

- :func:`read_jsonl` -- JSON Lines, optionally gzip (detected by magic bytes).
- :func:`read_label_dirs` -- one directory per label (20 Newsgroups style).
- :func:`read_lyrl2004` -- RCV1-v2 LYRL2004 token files (``.I``/``.W``) joined with a qrels file.
- :func:`read_parquet` -- Parquet files in the raw-documents schema (validated).

By default a bad record raises :class:`InputDataError` (or a subclass) naming the file and the
line/row; ``on_invalid="quarantine"`` counts and samples bad records instead.
"""

from __future__ import annotations

import gzip
import json
import os
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

from sparkhc.batch import DOC_ID, FOLD, ID_ALIAS, LABELS, SPLIT
from sparkhc.corpus import formats
from sparkhc.corpus.formats.jsonl import (
    _CLEAN_MAX_BRACKETS,
    _SURROGATE_ESCAPE,
    JSONL_SUFFIXES,
    _describe_list,
    _is_str_list,
    _jsonl_record,
    _type_name,
    jsonl_clean_batch,
    jsonl_object,
    read_jsonl,
)
from sparkhc.corpus.formats.labeldirs import (
    DirEntry,
    LabelDirFile,
    label_dir_record,
    list_label_dirs,
    local_listdir,
    natural_key,
    read_label_dirs,
)
from sparkhc.corpus.formats.lyrl2004 import _LYRL_SPLIT, lyrl_record, read_lyrl2004, read_qrels
from sparkhc.corpus.formats.parquet import parquet_record, read_parquet, validate_raw_schema
from sparkhc.corpus.records import (
    _INT32_MAX,
    _UNLABELLED_HINT,
    DEFAULT_BATCH_SIZE,
    RAW_SCHEMA,
    SAMPLE_SIZE,
    TEXT,
    TOKENS,
    Batches,
    CleanBatch,
    DuplicateIdError,
    EmptyDocumentError,
    FoldTable,
    OnEmpty,
    OnInvalid,
    ReadReport,
    RecordSink,
    UnknownLabelError,
    UnknownLabels,
    _as_paths,
    _check_choice,
    _run,
    _Sink,
    file_bytes,
    iter_lines,
    open_maybe_gzip,
    read_folds,
)
from sparkhc.errors import InputDataError

__all__ = [
    "Batches", "CleanBatch", "DEFAULT_BATCH_SIZE", "DOC_ID", "DirEntry", "DuplicateIdError",
    "EmptyDocumentError", "FOLD", "FoldTable", "ID_ALIAS", "JSONL_SUFFIXES", "LABELS", "LabelDirFile",
    "OnEmpty", "OnInvalid", "RAW_SCHEMA", "ReadReport", "RecordSink", "SAMPLE_SIZE", "SPLIT", "TEXT",
    "TOKENS", "UnknownLabelError", "UnknownLabels", "_CLEAN_MAX_BRACKETS", "_INT32_MAX", "_LYRL_SPLIT",
    "_SURROGATE_ESCAPE", "_Sink", "_UNLABELLED_HINT", "_as_paths", "_check_choice", "_describe_list",
    "_is_str_list", "_jsonl_record", "_run", "_type_name", "file_bytes", "iter_lines", "jsonl_clean_batch",
    "jsonl_object", "label_dir_record", "list_label_dirs", "local_listdir", "lyrl_record", "natural_key",
    "open_maybe_gzip", "parquet_record", "read_any", "read_folds", "read_jsonl", "read_label_dirs",
    "read_lyrl2004", "read_parquet", "read_qrels", "to_table", "validate_raw_schema", "write_jsonl_gz",
]


# ---------------------------------------------------------------------------------------- dispatch
def read_any(path: str | Path, **options: Any) -> tuple[Batches, ReadReport]:
    """Read raw documents from ``path``, choosing the format from what is there
    (:mod:`sparkhc.corpus.formats`, in detection order).

    - a Parquet file (``.parquet`` or ``PAR1`` magic), or a directory of ``*.parquet`` files (as
      Spark writes them, read recursively in sorted order): :func:`read_parquet`;
    - a JSON Lines file (``.jsonl``, ``.json``, ``.ndjson``, optionally ``.gz``), or a directory of
      them: :func:`read_jsonl`;
    - a file of another registered format (by its suffix or magic bytes), or a directory of them;
    - any other directory: :func:`read_label_dirs`.

    ``options`` are passed to the chosen reader (e.g. ``taxonomy``, ``unknown_labels``,
    ``on_empty``, ``on_invalid``, ``batch_size``; ``labels_from`` with JSON Lines only). LYRL2004
    token files need a qrels file: use :func:`read_lyrl2004`.
    """
    p = Path(path)
    if options.get("labels_from", 0) is None:
        del options["labels_from"]  # only read_jsonl knows it
    if options.get("labels_from") is not None:
        jsonl = [p] if p.is_file() else sorted(q for q in p.iterdir() if q.is_file()) if p.is_dir() else []
        if not jsonl or not all(q.name.endswith(JSONL_SUFFIXES) for q in jsonl):
            raise InputDataError(
                f"{p}: labels derived from record fields (--class-spaces) need JSON Lines input "
                f"({', '.join(JSONL_SUFFIXES)} files)"
            )
        return read_jsonl(jsonl, **options)
    fmt, what = formats.detect_local(p)
    if not fmt.takes_labels:
        options.pop("require_labels", None)  # (the directories are the labels)
    return fmt.reader()(p if fmt.folder else what, **options)


# ---------------------------------------------------------------------------------------- helpers
def to_table(batches: Iterable[pa.RecordBatch]) -> pa.Table:
    """Collect batches into one table (for small corpora and tests)."""
    return pa.Table.from_batches(list(batches), schema=RAW_SCHEMA)


def write_jsonl_gz(records: Iterable[Mapping[str, Any]], path: str | Path) -> int:
    """Write JSON Lines, gzip-compressed reproducibly (mtime 0, no file name, level 9).

    Written to a temporary file next to ``path`` and renamed, so readers never see a partial
    file. Returns the number of records.
    """
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    n = 0
    try:
        with os.fdopen(fd, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", filename="", mtime=0,
                                                      compresslevel=9) as gz:
            chunk: list[bytes] = []
            size = 0
            for rec in records:
                line = json.dumps(rec, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"
                chunk.append(line)
                size += len(line)
                n += 1
                if size >= 1 << 20:
                    gz.write(b"".join(chunk))
                    chunk, size = [], 0
            gz.write(b"".join(chunk))
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return n
