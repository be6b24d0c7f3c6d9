"""Raw documents read by Spark on the executors, checked and tokenized there.

:func:`read_jsonl_tokens` is the distributed counterpart of :func:`sparkhc.corpus.readers.read_jsonl`
followed by the tokenizer: Spark's text source reads the lines (``.gz`` decompressed by Hadoop's
codec, uncompressed files split into blocks, any Hadoop file system), and one ``mapInArrow`` pass
runs the very same record checks as the driver-side reader (:func:`~sparkhc.corpus.readers.jsonl_object`,
``_jsonl_record`` and ``_Sink.add``: ids, field types, folds, protocol selection, allowed and unknown
labels, empty documents) and turns every emitted document into its bag of words
(:func:`sparkhc.spark.featurize.bag_batch`). The driver never sees a document: it gets one small
partial :class:`~sparkhc.corpus.readers.ReadReport` per task and merges them.

Positions. A record's place is ``(file index, block start, line index in the block)``; the line
number inside a file is exact in the task that reads the file's first block (every gzip file,
every file smaller than a block). Messages about records of later blocks carry a placeholder that
the driver resolves with one counting job over the blocks before it, only when such a message
is shown (an error, or a quarantine sample).

Errors. With ``on_invalid="error"`` (and ``unknown_labels`` / ``on_empty`` = ``"error"``) the
executors record the failure instead of raising; after the pass the driver raises the error of
the first bad record in file order, with the message the driver-side reader gives.

Duplicate ids are a global property: the pass counts claimed ids; when two records share an id
the pass is run again with the first place of every repeated id broadcast, and each later
occurrence is then an invalid record exactly as in the sequential reader.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import logging
import os
import re
from collections import Counter
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import unquote

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark import StorageLevel
from pyspark.broadcast import Broadcast
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sparkhc.corpus import formats, readers
from sparkhc.corpus.formats import InputFormat
from sparkhc.corpus.readers import (
    RAW_SCHEMA,
    SAMPLE_SIZE,
    DuplicateIdError,
    FoldTable,
    ReadReport,
    _jsonl_record,
    _Sink,
    jsonl_object,
)
from sparkhc.errors import InputDataError
from sparkhc.spark import hfs
from sparkhc.spark.featurize import TOKENIZED_ARROW, TOKENIZED_SCHEMA, bag_batch
from sparkhc.spark.schemas import TERMS
from sparkhc.taxonomy import Taxonomy
from sparkhc.text.spec import FeatureSpec

log = logging.getLogger(__name__)

EMIT = "_emit"
CLAIM = "_claim"
POS_FILE, POS_BLOCK, POS_LINE = "_pos_file", "_pos_block", "_pos_line"
REPORT = "_report"

#: Every record that claimed an id (emitted or not), one row per task with its partial report.
PARSED_SCHEMA = T.StructType(
    [T.StructField(f.name, f.dataType, True) for f in TOKENIZED_SCHEMA.fields]
    + [
        T.StructField(EMIT, T.BooleanType(), False),
        T.StructField(CLAIM, T.StringType(), True),
        T.StructField(POS_FILE, T.IntegerType(), True),
        T.StructField(POS_BLOCK, T.LongType(), True),
        T.StructField(POS_LINE, T.LongType(), True),
        T.StructField(REPORT, T.StringType(), True),
    ]
)
_PARSED_ARROW = pa.schema(
    [f.with_nullable(True) for f in TOKENIZED_ARROW]
    + [
        pa.field(EMIT, pa.bool_(), nullable=False),
        pa.field(CLAIM, pa.string()),
        pa.field(POS_FILE, pa.int32()),
        pa.field(POS_BLOCK, pa.int64()),
        pa.field(POS_LINE, pa.int64()),
        pa.field(REPORT, pa.string()),
    ]
)

# placeholders for places in blocks whose first line number / byte offset is not known in the task
_LINE_PH = re.compile(r"\x00L(\d+):(\d+):(\d+)\x00")
_BYTE_PH = re.compile(r"\x00B(\d+):(\d+):(\d+)\x00(?: \+ (\d+))?")
# the same for lines spread over tasks, keyed by scan id (:func:`spread_lines`)
_SCAN_LINE_PH = re.compile(r"\x00M(\d+):(\d+):(\d+)\x00")
_SCAN_BYTE_PH = re.compile(r"\x00N(\d+):(\d+):(\d+)\x00(?: \+ (\d+))?")
_COUNTERS = ("quarantine_reasons", "excluded_reasons", "dropped_label_counts", "restricted_label_counts")
_SUMMED = ("read", "emitted", "quarantined", "excluded", "empty_kept", "no_labels", "labels_dropped",
           "labels_restricted")

Key = tuple[int, int, int]

#: Inputs up to this many bytes (compressed size) keep their bags of words in memory (else on disk).
MEMORY_CACHE_BYTES = 256 << 20


@dataclass
class JsonlOptions:
    """The record options of :func:`sparkhc.corpus.readers.read_jsonl` that the executors apply."""

    id_field: str | None = None
    text_fields: tuple[str, ...] = ("text",)
    tokens_field: str | None = "tokens"
    labels_field: str = "labels"
    split_field: str | None = "split"
    split_values: Mapping[str, str] | None = None
    fold_field: str | None = "fold"
    require_labels: bool = True
    taxonomy: Taxonomy | None = None
    unknown_labels: str = "error"
    ancestors: bool = False
    allowed_labels: Collection[str] | None = None
    folds: FoldTable | None = None
    select: Callable[[Mapping[str, Any]], str | None] | None = None
    on_empty: str = "error"
    on_invalid: str = "error"
    batch_size: int = readers.DEFAULT_BATCH_SIZE
    #: collect the labels of every record that is a JSON object (a list field ``labels_field``), as
    #: :meth:`sparkhc.corpus.registry.CorpusInfo.load_taxonomy` scans them for a flat taxonomy
    collect_labels: bool = False
    #: label directories (:func:`read_label_dirs_tokens`): how the files are decoded
    encoding: str = "latin-1"
    #: labels derived from the record (``--class-spaces``; see :func:`sparkhc.corpus.readers.read_jsonl`)
    labels_from: Callable[[Mapping[str, Any]], list[str] | str] | None = None
    #: a ``"files"`` format's own options (:func:`sparkhc.corpus.formats.read_files`)
    format_options: Mapping[str, Any] | None = None


# ---------------------------------------------------------------------------------------- executors
class _TaskReport(ReadReport):
    """A task's part of the report: samples and first occurrences keyed by record place."""

    def __init__(self) -> None:
        super().__init__()
        self.key: Key = (0, 0, 0)
        self.keyed_samples: list[tuple[Key, str, str]] = []
        self.keyed_drops: list[tuple[Key, str, str]] = []
        self.first_seen: dict[str, dict[str, Key]] = {name: {} for name in _COUNTERS}
        self._per_block: Counter[tuple[int, int]] = Counter()
        self._per_block_drops: Counter[tuple[int, int]] = Counter()

    def quarantine(self, record: str, reason: str) -> None:
        self.quarantined += 1
        self.quarantine_reasons[reason] += 1
        block = self.key[:2]
        if self._per_block[block] < SAMPLE_SIZE:  # the first ones of every block reach the merge
            self._per_block[block] += 1
            self.keyed_samples.append((self.key, record, reason))

    def drop_label(self, doc_id: str, label: str) -> None:
        self.labels_dropped += 1
        self.dropped_label_counts[label] += 1
        block = self.key[:2]
        if self._per_block_drops[block] < SAMPLE_SIZE:
            self._per_block_drops[block] += 1
            self.keyed_drops.append((self.key, doc_id, label))

    def note_new_keys(self, sizes: dict[str, int]) -> None:
        for name in _COUNTERS:
            c: Counter[str] = getattr(self, name)
            if len(c) != sizes[name]:
                seen = self.first_seen[name]
                for k in list(c)[sizes[name]:]:
                    seen.setdefault(k, self.key)


class _TaskSink(_Sink):
    """The reader's checks in a task: failures are recorded (the first in file order), ids claimed
    against the broadcast first places of repeated ids, emitted rows collected for tokenizing."""

    def __init__(self, opts: JsonlOptions, display: Sequence[str], dups: Mapping[str, Key] | None) -> None:
        self.task_report = _TaskReport()
        super().__init__(self.task_report, 1 << 62, opts.taxonomy, opts.unknown_labels, opts.on_empty,
                         opts.on_invalid, opts.allowed_labels, opts.ancestors, check_duplicates=False)
        self.display = display
        self.dups = dups or {}
        self.error: tuple[Key, str, str] | None = None
        self.claim: str | None = None
        self.fold_used = 0
        self.spread = False  # keys carry the line's scan id (:func:`spread_lines`), not its index
        #: what a record is: a "line" of JSON Lines, a "row" of Parquet (key: file, 0, row index), a
        #: file of a label directory (None; key: file, 0, 0)
        self.unit: str | None = "line"

    def place(self, key: Key) -> str:
        fi, block, idx = key
        if self.unit is None:
            return self.display[fi]
        if self.spread:
            return f"\x00M{fi}:{block}:{idx}\x00"
        if block == 0:  # (every record of a format whose records all have their place: rows, files)
            return f"{self.display[fi]}, {self.unit} {idx + 1}"
        return f"\x00L{fi}:{block}:{idx}\x00"

    def offset(self, key: Key, nbytes: int) -> str:
        """The byte offset of the line at ``key`` as text: a number, or a placeholder."""
        fi, block, idx = key
        if self.spread:
            return f"\x00N{fi}:{block}:{idx}\x00"
        return str(nbytes) if block == 0 else f"\x00B{fi}:{block}:{nbytes}\x00"

    def where(self, pos: int, file_idx: int | None = None) -> str:
        return self.place(self.task_report.key)

    def fail(self, message: str, exc: type[InputDataError]) -> None:
        key = self.task_report.key
        if self.error is None or key < self.error[0]:
            self.error = (key, message, exc.__name__)

    def invalid(self, pos: int, reason: str, detail: str, doc_id: str | None = None,
                exc: type[InputDataError] = InputDataError) -> None:
        try:
            super().invalid(pos, reason, detail, doc_id, exc)
        except InputDataError as e:
            self.fail(str(e), type(e))

    def claim_id(self, pos: int, doc_id: str) -> bool:
        self.claim = doc_id
        first = self.dups.get(doc_id)
        key = self.task_report.key
        if first is None or tuple(first) == key:
            return True
        self.invalid(pos, "duplicate id", f"duplicate doc id {doc_id!r}: first seen at {self.place(first)}, "
                     f"again at {self.where(pos)}", doc_id, DuplicateIdError)
        return False

    def add(self, pos: int, doc_id: str, text: str | None, tokens: list[str] | None, labels: list[str],
            split: str | None, fold: int | None) -> pa.RecordBatch | None:
        try:
            return super().add(pos, doc_id, text, tokens, labels, split, fold)
        except InputDataError as e:  # unknown label / empty document in "error" mode
            self.fail(str(e), type(e))
            return None


def id_hash(ids: list[str]) -> np.ndarray:
    """64-bit hashes (BLAKE2b) of document ids: a task's ids reach the driver as 8 bytes each, which
    finds repeated ids without an exchange of the ids themselves (a repeat of a hash is checked exactly)."""
    return np.fromiter((int.from_bytes(hashlib.blake2b(i.encode("utf-8"), digest_size=8).digest(), "little")
                        for i in ids), dtype=np.uint64, count=len(ids))


def _repeated_hashes(parts: list[dict[str, Any]]) -> bool:
    hashes = np.concatenate([np.frombuffer(base64.b64decode(p["id_hashes"]), dtype=np.uint64) for p in parts])
    return len(np.unique(hashes)) != len(hashes)


def _counter_sizes(rep: _TaskReport) -> dict[str, int]:
    return {name: len(getattr(rep, name)) for name in _COUNTERS}


class _JsonlRecords:
    """A task's JSON Lines records: lines (value, file, block[, scan id]) checked as :func:`read_jsonl` does."""

    unit: str | None = "line"

    def __init__(self, sink: _TaskSink, opts: JsonlOptions, index: Mapping[str, int], extra: Any) -> None:
        self.sink, self.opts, self.index = sink, opts, index
        self.used_fold_ids: set[str] = set()
        self.labels_seen: set[str] = set()
        self.pos_in_block: dict[tuple[int, int], tuple[int, int]] = {}  # (file, block) -> (next line, bytes)
        #: the documents of the last batch when it was read as columns (:meth:`columnar`), and their places
        self.clean: tuple[pa.RecordBatch, tuple[np.ndarray, np.ndarray, np.ndarray]] | None = None
        self.id_types: list[pa.DataType] = []
        # protocol callables see the parsed object: only the line-by-line path runs them
        self.columnar_ok = opts.select is None and opts.labels_from is None and not opts.ancestors

    def columnar(self, b: pa.RecordBatch) -> bool:
        """Read the batch as columns (:func:`sparkhc.corpus.readers.jsonl_clean_batch`) when every record
        of it is clean; then count it as the line-by-line loop would and keep its documents in
        :attr:`clean`. False: nothing counted, the loop reads the batch."""
        sink, opts, rep = self.sink, self.opts, self.sink.task_report
        values, blocks = b.column(0), b.column(2)
        spread = b.num_columns > 3
        paths = b.column(1).dictionary_encode()
        file_of = np.array([_file_index(self.index, p) for p in paths.dictionary.to_pylist()], dtype=np.int32)
        if not spread:  # lines counted here: one (file, block) per batch (else the loop counts them)
            lo, hi = pc.min_max(blocks).values()
            if len(file_of) != 1 or lo != hi:
                return False
        clean = readers.jsonl_clean_batch(sink, values, opts.id_field, opts.text_fields, opts.tokens_field,
                                          opts.labels_field, opts.split_field, opts.fold_field, opts.require_labels,
                                          opts.folds, opts.split_values, self.id_types)
        if clean is None:
            return False
        if sink.dups and not sink.dups.keys().isdisjoint(clean.batch.column(readers.DOC_ID).to_pylist()):
            return False  # a repeated id: the loop claims it (the first place keeps it)
        rec = clean.records
        n = clean.batch.num_rows
        if spread:
            fis = file_of[np.asarray(paths.indices.to_numpy(zero_copy_only=False))][rec]
            keys = (fis, np.asarray(blocks.to_numpy(zero_copy_only=False))[rec],
                    np.asarray(b.column(3).to_numpy(zero_copy_only=False))[rec])
        else:
            fi, block = int(file_of[0]), int(lo.as_py())
            idx, nbytes = self.pos_in_block.get((fi, block), (0, 0))
            size = int(pc.sum(pc.binary_length(values)).as_py() or 0) + len(values)
            self.pos_in_block[(fi, block)] = (idx + len(values), nbytes + size)
            keys = (np.full(n, fi, dtype=np.int32), np.full(n, block, dtype=np.int64),
                    (idx + np.arange(len(values), dtype=np.int64))[rec])
        sink.spread = spread
        rep.read += n
        sink.add_clean(clean)
        if opts.folds is not None:
            sink.fold_used += n
        if opts.collect_labels:
            self.labels_seen.update(clean.labels)
        self.clean = (clean.batch, keys)
        return True

    def __call__(self, b: pa.RecordBatch) -> tuple[list[tuple[str, Key]], list[Key]]:
        if self.columnar_ok and self.columnar(b):
            return [], []
        sink, opts, rep = self.sink, self.opts, self.sink.task_report
        used_fold_ids, pos_in_block = self.used_fold_ids, self.pos_in_block
        values = b.column(0).to_pylist()
        paths = b.column(1).to_pylist()
        blocks = b.column(2).to_pylist()
        # lines spread over tasks (:func:`spread_lines`) carry their scan id; else the place is counted here
        scan_ids = b.column(3).to_pylist() if b.num_columns > 3 else None
        sink.spread = scan_ids is not None
        claims: list[tuple[str, Key]] = []
        emitted_keys: list[Key] = []
        for j, (raw, path, block) in enumerate(zip(values, paths, blocks, strict=True)):
            fi = _file_index(self.index, path)
            if scan_ids is not None:
                idx, nbytes = scan_ids[j], 0
            else:
                idx, nbytes = pos_in_block.get((fi, block), (0, 0))
                pos_in_block[(fi, block)] = (idx + 1, nbytes + len(raw) + 1)
            if not raw.strip():
                continue
            key = (fi, block, idx)
            rep.key = key
            rep.read += 1
            sizes = _counter_sizes(rep)
            sink.claim = None
            n_rows, n_used = len(sink._rows), len(used_fold_ids)
            # a spread line's place in its file is unknown here: Hadoop's line reader has already dropped
            # a byte order mark at the start of a file, so only a second one would differ (then malformed)
            obj = jsonl_object(sink, idx + 1, raw, sink.offset(key, nbytes), not sink.spread and block == 0 and idx == 0)
            if obj is not None and opts.collect_labels:
                labs = obj.get(opts.labels_field)
                if isinstance(labs, list):
                    self.labels_seen.update(lab for lab in labs if isinstance(lab, str))
            if obj is not None:
                _jsonl_record(sink, idx + 1, obj, opts.id_field, opts.text_fields, opts.tokens_field,
                              opts.labels_field, opts.split_field, opts.fold_field, opts.require_labels, opts.folds,
                              opts.select, used_fold_ids, opts.labels_from, opts.split_values)
            sink.fold_used += len(used_fold_ids) - n_used
            used_fold_ids.clear()
            _outcome(sink, key, sizes, n_rows, claims, emitted_keys)
        return claims, emitted_keys


def _outcome(sink: _TaskSink, key: Key, sizes: dict[str, int], n_rows: int, claims: list[tuple[str, Key]],
             emitted_keys: list[Key]) -> None:
    """After a record: note the first places of new counter keys; the record's place goes to the emitted
    keys when it added a row, else (an id claimed, then set aside) to the claims."""
    sink.task_report.note_new_keys(sizes)
    if len(sink._rows) > n_rows:
        emitted_keys.append(key)
    elif sink.claim is not None:
        claims.append((sink.claim, key))


class _KeyedRecords:
    """A task's records of a format whose every record has its place in the scan: a file of a label
    directory (:func:`read_label_dirs_tokens`) or a Parquet row (:func:`read_parquet_tokens`)."""

    unit: str | None = None

    def __init__(self, sink: _TaskSink, opts: JsonlOptions, index: Mapping[str, int], extra: Any) -> None:
        self.sink, self.opts, self.index, self.extra = sink, opts, index, extra
        self.labels_seen: set[str] = set()

    def record(self, fi: int, b: pa.RecordBatch, j: int) -> None:
        raise NotImplementedError

    def key(self, b: pa.RecordBatch, j: int) -> Key:
        raise NotImplementedError

    def __call__(self, b: pa.RecordBatch) -> tuple[list[tuple[str, Key]], list[Key]]:
        sink, rep = self.sink, self.sink.task_report
        claims: list[tuple[str, Key]] = []
        emitted_keys: list[Key] = []
        paths = b.column("p").to_pylist()
        for j, path in enumerate(paths):
            i = self.index.get(path)
            fi = self.index.get(_norm(path)) if i is None else i
            if fi is None:  # a file the driver's listing skips (counted there)
                continue
            key = self.key(b, j)
            key = (fi, key[1], key[2])
            rep.key = key
            rep.read += 1
            sizes = _counter_sizes(rep)
            sink.claim = None
            n_rows = len(sink._rows)
            self.record(fi, b, j)
            _outcome(sink, key, sizes, n_rows, claims, emitted_keys)
        return claims, emitted_keys


class _LabelDirRecords(_KeyedRecords):
    """Files (p, content) of a directory-per-label corpus; ``extra``: the listing's documents."""

    unit = None

    def key(self, b: pa.RecordBatch, j: int) -> Key:
        return (0, 0, 0)

    def record(self, fi: int, b: pa.RecordBatch, j: int) -> None:
        f: readers.LabelDirFile = self.extra[fi]
        readers.label_dir_record(self.sink, f, b.column("content")[j].as_py(), self.opts.encoding)


class _ParquetRecords(_KeyedRecords):
    """Rows of raw-documents Parquet files (their columns, p, r = row index); ``extra``: per file, the
    columns it has."""

    unit = "row"

    def key(self, b: pa.RecordBatch, j: int) -> Key:
        return (0, 0, int(b.column("r")[j].as_py()))

    def __call__(self, b: pa.RecordBatch) -> tuple[list[tuple[str, Key]], list[Key]]:
        self.cols = {c: b.column(c).to_pylist() for c in PARQUET_COLUMNS}
        return super().__call__(b)

    def record(self, fi: int, b: pa.RecordBatch, j: int) -> None:
        row = self.sink.task_report.key[2] + 1
        values = {c: self.cols[c][j] for c in self.extra[fi]}
        readers.parquet_record(self.sink, row, values, self.opts.require_labels)


class _FileRecords:
    """Files (p, content) of a ``"files"`` format (:class:`~sparkhc.corpus.formats.InputFormat`), each read
    whole: split into records by the format's ``split``, each record checked by its ``check`` -- the
    functions of the driver-side reader (:func:`sparkhc.corpus.formats.read_files`). ``extra``: the format."""

    def __init__(self, sink: _TaskSink, opts: JsonlOptions, index: Mapping[str, int], extra: Any) -> None:
        self.sink, self.opts, self.index, self.fmt = sink, opts, index, extra
        self.unit = extra.unit
        self.labels_seen: set[str] = set()
        self.options = {"require_labels": opts.require_labels, **(opts.format_options or {})}

    def __call__(self, b: pa.RecordBatch) -> tuple[list[tuple[str, Key]], list[Key]]:
        sink, rep, fmt = self.sink, self.sink.task_report, self.fmt
        assert fmt.split is not None and fmt.check is not None
        claims: list[tuple[str, Key]] = []
        emitted_keys: list[Key] = []
        for path, content in zip(b.column("p").to_pylist(), b.column("content").to_pylist(), strict=True):
            i = self.index.get(path)
            fi = self.index.get(_norm(path)) if i is None else i
            if fi is None:
                continue
            rep.key = (fi, 0, 0)
            try:
                data = readers.file_bytes(content, sink.display[fi])
            except InputDataError as e:
                sink.fail(str(e), type(e))
                continue
            for pos, record in fmt.split(data):
                key = (fi, 0, pos - 1)
                rep.key = key
                rep.read += 1
                sizes = _counter_sizes(rep)
                sink.claim = None
                n_rows = len(sink._rows)
                fmt.check(sink, pos, record, self.options)
                _outcome(sink, key, sizes, n_rows, claims, emitted_keys)
        return claims, emitted_keys


#: how the executors get the records of each scan kind (:attr:`~sparkhc.corpus.formats.InputFormat.scan`)
_SCANS: dict[str, type[_JsonlRecords] | type[_KeyedRecords] | type[_FileRecords]] = {
    "lines": _JsonlRecords, "label files": _LabelDirRecords, "rows": _ParquetRecords, "files": _FileRecords}


def parse_partition(
    batches: Iterator[pa.RecordBatch],
    opts_bc: Broadcast[JsonlOptions],
    spec_bc: Broadcast[FeatureSpec],
    files_bc: Broadcast[tuple[Any, ...]],
    dups_bc: Broadcast[dict[str, Key]] | None,
    fmt: str | InputFormat = "jsonl",
) -> Iterator[pa.RecordBatch]:
    """mapInArrow function: records (JSON lines: value, file, block; label-directory files and the
    files of a ``"files"`` format: path, content; Parquet rows: columns, path, row index) -> bags of
    words of the emitted documents, claim rows of the other records that claimed an id, and one last
    row with the task's report. ``fmt``: a registered format's name, or the format itself."""
    opts, spec = opts_bc.value, spec_bc.value
    index, display = files_bc.value[0], files_bc.value[1]
    extra = files_bc.value[2] if len(files_bc.value) > 2 else None
    sink = _TaskSink(opts, display, None if dups_bc is None else dups_bc.value)
    scan = fmt.scan if isinstance(fmt, InputFormat) else formats.get(fmt).scan
    if scan == "files":  # the format itself (its functions travel with this function, not in a broadcast)
        extra = fmt if isinstance(fmt, InputFormat) else formats.get(fmt)
    records = _SCANS[scan](sink, opts, index, extra)
    sink.unit = records.unit
    rep = sink.task_report
    groups: Counter[tuple[str | None, int | None]] = Counter()  # emitted documents per (split, fold)
    no_tokens = 0
    id_hashes: list[np.ndarray] = []
    for b in batches:
        claims, emitted_keys = records(b)
        clean = getattr(records, "clean", None)
        if clean is not None:  # read as columns: no claims, the documents and places as arrays
            records.clean = None  # type: ignore[union-attr]
            raw_batch, places = clean
            ids: list[str] = raw_batch.column(readers.DOC_ID).to_pylist()
            groups.update(zip(raw_batch.column(readers.SPLIT).to_pylist(), raw_batch.column(readers.FOLD).to_pylist(),
                              strict=True))
        else:
            rows, sink._rows = sink._rows, []
            raw_batch = pa.RecordBatch.from_arrays(
                [pa.array(col, type=f.type) for col, f in zip(zip(*rows, strict=True), RAW_SCHEMA, strict=True)]
                if rows else [pa.array([], type=f.type) for f in RAW_SCHEMA], schema=RAW_SCHEMA)
            groups.update((r[4], r[5]) for r in rows)
            ids = [r[0] for r in rows]
            keys = emitted_keys + [k for _, k in claims]
            places = tuple(np.array([k[i] for k in keys], dtype=np.int64) for i in range(3))  # type: ignore[assignment]
        n = raw_batch.num_rows
        bags = bag_batch(raw_batch, spec)
        claimed = ids + [c for c, _ in claims]
        id_hashes.append(id_hash(claimed))
        no_tokens += int(np.count_nonzero(np.diff(np.asarray(bags.column(TERMS).offsets)) == 0))
        m = n + len(claims)
        cols = [pa.concat_arrays([bags.column(i), pa.nulls(len(claims), type=bags.schema.field(i).type)])
                for i in range(bags.num_columns)]
        emit = np.zeros(m, dtype=bool)
        emit[:n] = True
        yield pa.RecordBatch.from_arrays(
            [
                *cols,
                pa.array(emit, type=pa.bool_()),
                pa.array(claimed, type=pa.string()),
                pa.array(places[0], type=pa.int32()),
                pa.array(places[1], type=pa.int64()),
                pa.array(places[2], type=pa.int64()),
                pa.nulls(m, type=pa.string()),
            ],
            schema=_PARSED_ARROW,
        )
    summary = {name: getattr(rep, name) for name in _SUMMED}
    summary.update({name: dict(getattr(rep, name)) for name in _COUNTERS})
    summary.update(
        first_seen={name: {k: list(v) for k, v in seen.items()} for name, seen in rep.first_seen.items()},
        samples=[[list(k), r, why] for k, r, why in rep.keyed_samples],
        drops=[[list(k), d, lab] for k, d, lab in rep.keyed_drops],
        error=None if sink.error is None else [list(sink.error[0]), sink.error[1], sink.error[2]],
        fold_used=sink.fold_used,
        groups=[[sp, fo, k] for (sp, fo), k in groups.items()],
        no_tokens=no_tokens,
        labels=sorted(records.labels_seen),
        id_hashes=base64.b64encode(np.sort(np.concatenate(id_hashes or [np.zeros(0, np.uint64)])).tobytes()).decode(),
    )
    cols = [pa.nulls(1, type=f.type) for f in TOKENIZED_ARROW]
    yield pa.RecordBatch.from_arrays(
        [*cols, pa.array([False]), pa.nulls(1, pa.string()), pa.nulls(1, pa.int32()), pa.nulls(1, pa.int64()),
         pa.nulls(1, pa.int64()), pa.array([json.dumps(summary)], type=pa.string())],
        schema=_PARSED_ARROW,
    )


WHY = "_why"
#: Tokenized documents relabelled by fitted class spaces (:func:`relabel_partition`): the reason of a
#: withdrawn document in ``_why`` (null when kept), its place in the read.
RELABELED_SCHEMA = T.StructType(
    [T.StructField(f.name, f.dataType, True) for f in TOKENIZED_SCHEMA.fields]
    + [T.StructField(POS_FILE, T.IntegerType(), True), T.StructField(POS_BLOCK, T.LongType(), True),
       T.StructField(POS_LINE, T.LongType(), True), T.StructField(WHY, T.StringType(), True)]
)


def relabel_partition(batches: Iterator[pa.RecordBatch], fitted_bc: Broadcast[Any]) -> Iterator[pa.RecordBatch]:
    """mapInArrow function: tokenized documents with candidate class-space labels (and their places)
    -> the same with the final labels (:meth:`~sparkhc.class_spaces.FittedClassSpaces.map_labels`),
    or an empty list and the reason when the document has no kept class in some space."""
    fitted = fitted_bc.value
    label_type = TOKENIZED_ARROW.field(readers.LABELS).type
    for b in batches:
        new: list[list[str]] = []
        why: list[str | None] = []
        for labs in b.column(readers.LABELS).to_pylist():
            mapped = fitted.map_labels(labs or [])
            if isinstance(mapped, str):
                new.append([])
                why.append(mapped)
            else:
                new.append(mapped)
                why.append(None)
        arrays = [b.column(i) for i in range(b.num_columns)]
        arrays[b.schema.get_field_index(readers.LABELS)] = pa.array(new, type=label_type)
        yield pa.RecordBatch.from_arrays([*arrays, pa.array(why, type=pa.string())],
                                         names=[*b.schema.names, WHY])


# ---------------------------------------------------------------------------------------- driver
@dataclass
class TokenizedCorpus:
    """What :func:`read_jsonl_tokens` gives: the bags of words of the emitted documents (persisted;
    :meth:`release` frees them), the completed read report and the splits present."""

    tokens: DataFrame
    report: ReadReport
    splits: list[str | None] = field(default_factory=list)
    _parsed: DataFrame | None = None
    #: emitted documents per (split, fold), and those without any token: the counts featurize needs
    groups: Counter[tuple[str | None, int | None]] = field(default_factory=Counter)
    no_tokens: int = 0
    #: with :attr:`JsonlOptions.collect_labels`: the labels of every JSON object record, sorted
    labels: list[str] = field(default_factory=list)

    def release(self) -> None:
        if self._parsed is not None:
            self._parsed.unpersist()


def read_jsonl_tokens(
    spark: SparkSession,
    paths: Sequence[str],
    spec: FeatureSpec,
    opts: JsonlOptions,
    source: str | None = None,
    display: Sequence[str] | None = None,
) -> TokenizedCorpus:
    """Read JSON Lines files (Hadoop URIs or local paths; ``.gz`` decompressed) on the executors,
    check every record as :func:`sparkhc.corpus.readers.read_jsonl` does with ``opts``, and tokenize
    the emitted documents with ``spec``'s tokenizer.

    Raises the reader's error (naming file and line) for the first bad record in file order unless
    ``opts`` set such records aside. ``display`` are the names used in messages (default ``paths``).
    """
    uris = [hfs.qualify(spark, p) for p in paths]
    names = list(display) if display is not None else [str(p) for p in paths]
    for uri, name in zip(uris, names, strict=True):
        hfs.check_gzip_suffix(spark, uri, name)
    # the bags are kept for the later passes (check, fit, transform); above MEMORY_CACHE_BYTES of input
    # they go straight to disk: a corpus as large as the driver's heap, cached in memory, ran it out of heap
    level = StorageLevel.MEMORY_AND_DISK if sum(hfs.size(spark, u) for u in uris) <= MEMORY_CACHE_BYTES \
        else StorageLevel.DISK_ONLY
    report = ReadReport(source=source or ", ".join(names))
    report.files = list(names)
    scanned = lines = (
        spark.read.option("lineSep", "\n").text(uris)
        .select(F.col("value").cast("binary").alias("v"), F.col("_metadata.file_path").alias("p"),
                F.col("_metadata.file_block_start").alias("b"))
    )
    width = max(1, int(spark.sparkContext.defaultParallelism))
    if _scan_tasks(spark, uris) < width:
        lines = spread_lines(lines, width)
    index = {_norm(u): i for i, u in enumerate(uris)}
    return _read_records(spark, lines, "jsonl", (index, names), spec, opts, report, level,
                         resolve_with=(scanned, names, index), uris=uris)


def _read_records(spark: SparkSession, records: DataFrame, fmt: str | InputFormat, files: tuple[Any, ...], spec: FeatureSpec,
                  opts: JsonlOptions, report: ReadReport, level: StorageLevel,
                  resolve_with: tuple[DataFrame, Sequence[str], Mapping[str, int]] | None = None,
                  uris: Sequence[str] = ()) -> TokenizedCorpus:
    """The pass of :func:`parse_partition` over ``records`` (format ``fmt``; ``files``: the broadcast
    (index, display names[, per-file data])), the duplicate-id check and the merge of the tasks'
    reports into ``report``. ``resolve_with``: the JSON Lines scan that turns line placeholders into
    numbers."""
    sc = spark.sparkContext
    bcs: list[Broadcast[Any]] = [sc.broadcast(opts), sc.broadcast(spec.unfitted() if spec.is_fitted else spec),
                                 sc.broadcast(files)]

    def run(dups: dict[str, Key] | None) -> tuple[DataFrame, list[dict[str, Any]]]:
        dups_bc = None if dups is None else sc.broadcast(dups)
        if dups_bc is not None:
            bcs.append(dups_bc)
        fn = functools.partial(parse_partition, opts_bc=bcs[0], spec_bc=bcs[1], files_bc=bcs[2], dups_bc=dups_bc,
                               fmt=fmt)
        parsed = records.mapInArrow(fn, PARSED_SCHEMA).persist(level)
        try:
            # a filter and a collect: the cache is built whole, no exchange (ids are checked by hash below)
            reports = [json.loads(r[0]) for r in parsed.where(F.col(REPORT).isNotNull()).select(REPORT).collect()]
        except Exception as e:
            parsed.unpersist()
            if fmt == "jsonl":
                _explain_read_failure(spark, uris, files[1], e)
            raise
        return parsed, reports

    try:
        parsed, parts = run(None)
        if _repeated_hashes(parts):  # some id repeated (or two ids share a 64-bit hash): find them exactly
            firsts = (parsed.where(F.col(CLAIM).isNotNull())
                      .groupBy(CLAIM).agg(F.count(F.lit(1)).alias("n"),
                                          F.min(F.struct(POS_FILE, POS_BLOCK, POS_LINE)).alias("first"))
                      .where(F.col("n") > 1).collect())
            dups = {r[CLAIM]: (int(r["first"][0]), int(r["first"][1]), int(r["first"][2])) for r in firsts}
            if dups:
                log.info("%d repeated document id(s): checking the records again with their first places", len(dups))
                parsed.unpersist()
                parsed, parts = run(dups)
        _merge(report, parts, opts, spark, parsed, resolve_with)
    finally:
        for b in bcs:
            b.unpersist()
    groups: Counter[tuple[str | None, int | None]] = Counter()
    for p in parts:
        for sp, fo, k in p["groups"]:
            groups[(sp, fo)] += int(k)
    splits = sorted({sp for sp, _ in groups}, key=lambda s: (s is not None, s or ""))
    tokens = parsed.where(F.col(EMIT)).select(*[F.col(f.name) for f in TOKENIZED_SCHEMA.fields])
    return TokenizedCorpus(tokens, report, splits, parsed, groups, sum(int(p["no_tokens"]) for p in parts),
                           sorted({lab for p in parts for lab in p["labels"]}))


def apte_mod_categories(spark: SparkSession, docs: str | Path) -> frozenset[str]:
    """The ApteMod categories of a Reuters-21578 ``docs.jsonl.gz`` computed by Spark's executors (the
    topics in both the ModApte train and test split among ``apte_mod`` documents), as
    :func:`sparkhc.corpus.registry.apte_mod_categories` computes them in one process: the driver gets the
    distinct (split, topic) pairs. A line that is not a JSON object counts for nothing here (the read of
    the records names it)."""
    rec = F.from_json(F.col("value"), "apte_mod boolean, split string, labels array<string>")
    rows = (spark.read.option("lineSep", "\n").text(hfs.qualify(spark, str(docs)))
            .where(F.trim(F.col("value")) != "").select(rec.alias("r"))
            .where(F.coalesce(F.col("r.apte_mod"), F.lit(False)) & F.col("r.split").isin("train", "test"))
            .select(F.col("r.split").alias("s"), F.explode(F.col("r.labels")).alias("t"))
            .where(F.col("t").isNotNull()).distinct().collect())
    train = {r["t"] for r in rows if r["s"] == "train"}
    return frozenset(train & {r["t"] for r in rows if r["s"] == "test"})


#: Label-directory files: the content bytes of a scan task (a coalesced binaryFile scan).
LABEL_DIR_TASK_BYTES = 16 << 20


def read_label_dirs_tokens(
    spark: SparkSession,
    root: str,
    spec: FeatureSpec,
    opts: JsonlOptions,
    layout: str = "auto",
    split_names: Mapping[str, str] | None = None,
) -> TokenizedCorpus:
    """Read a directory-per-label corpus (:func:`sparkhc.corpus.readers.read_label_dirs`: a local
    path, a ``file:`` or any Hadoop URI) with Spark's ``binaryFile`` source on the executors, check
    and tokenize the documents there. The driver lists the directories (names and sizes, with
    Hadoop's file system for a URI); the documents never reach it. Messages, ids, splits and the
    read report are those of the driver-side reader; ``opts``: ``taxonomy``, ``unknown_labels``,
    ``ancestors``, ``on_empty``, ``on_invalid``, ``encoding``, ``batch_size``."""
    "".encode(opts.encoding)  # unknown codec -> LookupError now
    if hfs.has_scheme(str(root)):
        base = str(root).rstrip("/")
        if not hfs.is_dir(spark, base):
            raise InputDataError(f"{base}: corpus directory not found")
        docs_root = hfs.qualified(spark, base)
        listdir: Callable[[str], list[readers.DirEntry]] = lambda d: hfs.list_status(spark, d)  # noqa: E731
        join: Callable[[str, str], str] = lambda d, n: f"{d}/{n}"  # noqa: E731
    else:
        local = Path(root)
        base = str(local)
        if not local.is_dir():
            raise InputDataError(f"{base}: corpus directory not found")
        docs_root = hfs.qualified(spark, hfs.qualify(spark, base))
        listdir, join = readers.local_listdir, os.path.join
    report = ReadReport(source=base, files=[base])
    docs = readers.list_label_dirs(base, report, layout=layout, split_names=split_names,  # type: ignore[arg-type]
                                   listdir=listdir, join=join)
    uris = [f"{docs_root}/{d.doc_id}" for d in docs]
    index = {_norm(u): i for i, u in enumerate(uris)}
    total = sum(d.size for d in docs)
    scan = (spark.read.format("binaryFile").option("recursiveFileLookup", "true").load(docs_root)
            .select(F.col("path").alias("p"), F.col("content")))
    # Spark's listing hides names that start with "_" (and "."; those the reader skips too): such
    # files are read on the executors through pyarrow.fs instead, so that no listed file is lost
    hidden = [u for u, d in zip(uris, docs, strict=True) if any(map(_hidden_from_spark, d.doc_id.split("/")))]
    if hidden:
        log.info("%d file(s) that Spark's listing hides (a name starting with '_'): read through pyarrow.fs",
                 len(hidden))
        extra = spark.createDataFrame([(u,) for u in hidden], "p string").mapInArrow(_read_files, FILES_SCHEMA)
        scan = scan.unionByName(extra)
    # a task per 32 small files in Spark's planning (an open cost of 4 MB a file): fewer, larger ones
    width = max(1, int(spark.sparkContext.defaultParallelism))
    scan = scan.coalesce(max(2 * width, -(-total // LABEL_DIR_TASK_BYTES)))
    level = StorageLevel.MEMORY_AND_DISK if total <= MEMORY_CACHE_BYTES else StorageLevel.DISK_ONLY
    tc = _read_records(spark, scan, "labeldirs", (index, [d.path for d in docs], docs), spec, opts, report, level)
    if tc.report.read != len(docs) and tc._parsed is not None:  # every listed file is read (no silent loss)
        got = {int(r[0]) for r in tc._parsed.where(F.col(POS_FILE).isNotNull()).select(POS_FILE).distinct().collect()}
        tc.release()
        lost = [docs[i].path for i in range(len(docs)) if i not in got]
        raise InputDataError(f"{lost[0] if lost else base}: {len(docs) - tc.report.read} listed file(s) were not "
                             "read by Spark's binaryFile source")
    return tc


def _hidden_from_spark(name: str) -> bool:
    """Whether Spark's file listing leaves out a file or folder of this name (``InMemoryFileIndex``:
    a name starting with ``_`` without ``=``, or with ``.``, or ending in ``._COPYING_``)."""
    exclude = (name.startswith("_") and "=" not in name) or name.startswith(".") or name.endswith("._COPYING_")
    return exclude and not name.startswith(("_common_metadata", "_metadata"))


FILES_SCHEMA = T.StructType([T.StructField("p", T.StringType()), T.StructField("content", T.BinaryType())])


def _read_files(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow function: file URIs (p) -> (p, content), read with pyarrow.fs on the executor."""
    from sparkhc import fsio

    for b in batches:
        paths = b.column(0).to_pylist()
        contents = []
        for u in paths:
            fs, path = fsio.resolve(u)
            contents.append(fsio.read_bytes(fs, path))
        yield pa.RecordBatch.from_arrays([pa.array(paths, pa.string()), pa.array(contents, pa.binary())],
                                         names=["p", "content"])


#: The columns of raw-documents Parquet files the executors read (:func:`read_parquet_tokens`).
PARQUET_COLUMNS = (readers.DOC_ID, readers.ID_ALIAS, readers.TEXT, readers.TOKENS, readers.LABELS, readers.SPLIT,
                   readers.FOLD)
_PARQUET_TYPES = {readers.DOC_ID: "string", readers.ID_ALIAS: "string", readers.TEXT: "string",
                  readers.TOKENS: "array<string>", readers.LABELS: "array<string>", readers.SPLIT: "string",
                  readers.FOLD: "long"}


def read_parquet_tokens(
    spark: SparkSession,
    paths: Sequence[str],
    spec: FeatureSpec,
    opts: JsonlOptions,
    root: str | None = None,
) -> TokenizedCorpus:
    """Read raw-documents Parquet files (:func:`sparkhc.corpus.readers.read_parquet`: local paths,
    ``file:`` or Hadoop URIs) with Spark's Parquet source on the executors, check every row as the
    driver-side reader does and tokenize the documents there. The driver reads the files' footers
    (their schemas are checked before any row is read, errors name the file and column); rows are
    named by file and row number (``_metadata.row_index``). ``root``: the directory the files were
    found in (read as one scan). ``opts``: ``taxonomy``, ``unknown_labels``, ``on_empty``,
    ``on_invalid``, ``require_labels``, ``batch_size``."""
    import pyarrow.fs as pafs
    import pyarrow.parquet as pq

    from sparkhc import fsio

    names = [str(p) for p in paths]
    if not names:
        raise ValueError("no input files given")
    uris = [hfs.qualify(spark, n) for n in names]
    present: list[tuple[str, ...]] = []
    groups: dict[tuple[Any, ...], list[int]] = {}
    total = 0
    for i, name in enumerate(names):
        fs, path = fsio.resolve(name)
        info = fs.get_file_info(path)
        if info.type != pafs.FileType.File:
            raise InputDataError(f"{name}: file not found" if info.type == pafs.FileType.NotFound
                                 else f"{name}: not a regular file")
        total += int(info.size or 0)
        try:
            with fs.open_input_file(path) as fh:
                schema = pq.ParquetFile(fh).schema_arrow
        except (pa.ArrowInvalid, OSError) as e:
            raise InputDataError(f"{name}: not a readable Parquet file: {e}") from None
        missing = readers.validate_raw_schema(schema, name)
        cols = tuple(c for c in PARQUET_COLUMNS if c in schema.names and (c == readers.ID_ALIAS or c not in missing))
        present.append(cols)
        groups.setdefault((cols, tuple(str(schema.field(c).type) for c in cols)), []).append(i)
    report = ReadReport(source=", ".join(names), files=list(names))

    def scan_of(df: DataFrame, cols: Sequence[str]) -> DataFrame:
        return df.select(
            *[(F.col(c).cast(_PARQUET_TYPES[c]) if c in cols else F.lit(None).cast(_PARQUET_TYPES[c])).alias(c)
              for c in PARQUET_COLUMNS],
            F.col("_metadata.file_path").alias("p"), F.col("_metadata.row_index").alias("r"))

    index = {_norm(hfs.qualified(spark, u)): i for i, u in enumerate(uris)}
    scans: list[DataFrame] = []
    if len(groups) == 1 and root is not None:  # one schema: the directory as one scan (no listing job)
        (cols, _types), = groups
        df = spark.read.option("recursiveFileLookup", "true").option("pathGlobFilter", "*.parquet") \
            .parquet(hfs.qualify(spark, root))
        seen = {_norm(u) for u in df.inputFiles()}
        scans.append(scan_of(df, cols))
        rest = [uris[i] for i in range(len(uris)) if _norm(hfs.qualified(spark, uris[i])) not in seen]
        if rest:  # files in folders Spark's listing hides ("_*", ".*"): read by name
            scans.append(scan_of(spark.read.parquet(*rest), cols))
    else:
        for (cols, _types), members in groups.items():
            scans.append(scan_of(spark.read.parquet(*[uris[i] for i in members]), cols))
    scan = scans[0]
    for other in scans[1:]:
        scan = scan.unionByName(other)
    _check_all_read(spark, scan, uris, names, "Parquet")
    width = max(1, int(spark.sparkContext.defaultParallelism))
    if scan.rdd.getNumPartitions() < width:  # a small file is one scan task: spread its rows over the cores
        scan = scan.repartition(width, F.col("r"))
    level = StorageLevel.MEMORY_AND_DISK if total <= MEMORY_CACHE_BYTES else StorageLevel.DISK_ONLY
    return _read_records(spark, scan, "parquet", (index, names, present), spec, opts, report, level)


def _check_all_read(spark: SparkSession, scan: DataFrame, uris: Sequence[str], names: Sequence[str],
                    source: str) -> None:
    """Every file is among the scan's input files (Spark's listing hides names starting with '_' or '.')."""
    seen = {_norm(u) for u in scan.inputFiles()}
    lost = [names[i] for i, u in enumerate(uris) if _norm(hfs.qualified(spark, u)) not in seen]
    if lost:
        raise InputDataError(f"{lost[0]}: Spark's {source} source does not read this file (names starting with "
                             "'_' or '.' are hidden from it); rename it or its folder")


def read_files_tokens(
    spark: SparkSession,
    fmt: InputFormat,
    paths: Sequence[str],
    spec: FeatureSpec,
    opts: JsonlOptions,
    source: str | None = None,
) -> TokenizedCorpus:
    """Read the files of a ``"files"`` format (:class:`~sparkhc.corpus.formats.InputFormat`; local paths,
    ``file:`` or Hadoop URIs) with Spark's ``binaryFile`` source on the executors: each file whole, split
    into records and each record checked there by the format's own ``split`` and ``check`` (those of the
    driver-side reader, :func:`sparkhc.corpus.formats.read_files`), the documents tokenized. Messages,
    counts and the read report are those of the driver-side reader. ``opts``: ``taxonomy``,
    ``unknown_labels``, ``on_empty``, ``on_invalid``, ``require_labels``, ``format_options``."""
    names = [str(p) for p in paths]
    if not names:
        raise ValueError("no input files given")
    uris = [hfs.qualify(spark, n) for n in names]
    for uri, name in zip(uris, names, strict=True):
        if not hfs.exists(spark, uri) or hfs.is_dir(spark, uri):
            raise InputDataError(f"{name}: file not found" if not hfs.exists(spark, uri) else f"{name}: not a regular file")
    index = {_norm(hfs.qualified(spark, u)): i for i, u in enumerate(uris)}
    scan = spark.read.format("binaryFile").load(uris).select(F.col("path").alias("p"), F.col("content"))
    _check_all_read(spark, scan, uris, names, "binaryFile")
    width = max(1, int(spark.sparkContext.defaultParallelism))
    total = sum(hfs.size(spark, u) for u in uris)
    scan = scan.coalesce(max(1, min(len(uris), max(2 * width, -(-total // LABEL_DIR_TASK_BYTES)))))
    report = ReadReport(source=source or ", ".join(names), files=list(names))
    level = StorageLevel.MEMORY_AND_DISK if total <= MEMORY_CACHE_BYTES else StorageLevel.DISK_ONLY
    return _read_records(spark, scan, fmt, (index, names), spec, opts, report, level)


# ---------------------------------------------------------------------------------------- --input
#: what :func:`input_source` finds: the scan kind and its arguments for :func:`read_input_tokens`
InputSource = tuple[str, Any]
_KIND = {"parquet": "parquet", "jsonl": "input", "labeldirs": "labeldirs"}


def input_source(spark: SparkSession, input_path: str) -> InputSource:
    """The format of ``featurize --input`` (a local path, a ``file:`` or Hadoop URI), chosen through the
    format registry as :func:`sparkhc.corpus.readers.read_any` chooses it: ("parquet", (files, input,
    folder or None)) for a Parquet file or a folder with Parquet files (recursively), ("input", (files,
    input)) for JSON Lines files or a folder of them, ("files", (format, files, input)) for the files of
    another registered format, ("labeldirs", folder) for any other folder (one sub-folder per label)."""

    def found(fmt: InputFormat, files: list[str], folder: str | None) -> InputSource:
        kind = _KIND.get(fmt.name, "files")
        if kind == "parquet":
            return kind, (files, input_path, folder)
        return (kind, (files, input_path)) if kind == "input" else (kind, (fmt, files, input_path))

    if not hfs.has_scheme(str(input_path)):
        fmt, what = formats.detect_local(Path(input_path))
        if fmt.folder:
            return "labeldirs", input_path
        return found(fmt, [str(q) for q in what], input_path if Path(input_path).is_dir() else None)
    uri = hfs.qualify(spark, input_path)
    if not hfs.exists(spark, uri):
        raise InputDataError(f"{input_path}: input not found")
    if hfs.is_dir(spark, uri):
        root = str(input_path).rstrip("/")
        for fmt in formats.file_formats():
            if fmt.recursive:
                uris = sorted((u for u, _n in hfs.list_tree(spark, uri) if fmt.matches(u.rsplit("/", 1)[-1])
                               and not u.rsplit("/", 1)[-1].startswith((".", "_"))),
                              key=lambda u: PurePosixPath(u).parts)
            else:
                uris = [f for f in hfs.list_files(spark, uri) if fmt.matches(f.rsplit("/", 1)[-1])]
            if uris:
                return found(fmt, uris, root)
        return "labeldirs", root
    of_uri = formats.format_of_file(uri.rsplit("/", 1)[-1], lambda n: hfs.head(spark, uri, n))
    if of_uri is None:
        raise formats.unknown_input(input_path, notes=False)
    return found(of_uri, [str(input_path) if of_uri.name == "parquet" else uri], None)


def read_input_tokens(spark: SparkSession, source: InputSource, spec: FeatureSpec, opts: JsonlOptions
                      ) -> tuple[TokenizedCorpus, str]:
    """Read what :func:`input_source` found on the executors; returns the documents and the input's name."""
    kind, what = source
    if kind == "labeldirs":
        return read_label_dirs_tokens(spark, what, spec, opts), what
    if kind == "parquet":
        files, input_path, root = what
        return read_parquet_tokens(spark, files, spec, opts, root=root), input_path
    if kind == "files":
        fmt, files, input_path = what
        return read_files_tokens(spark, fmt, files, spec, opts), input_path
    files, input_path = what
    return read_jsonl_tokens(spark, files, spec, opts), input_path


# ---------------------------------------------------------------------------------------- LYRL2004
#: The ``.I`` blocks of LYRL2004 token files (:func:`lyrl_blocks_partition`): the block's ``.I`` line
#: (1-based), its id (null for a malformed ``.I`` line, whose detail is ``_malformed``), tokens, whether a
#: ``.W`` line was seen, the split, the first structural error inside the block (``_error``: raised when
#: the block's id is claimed) and an error that ends the read whatever the block (``_fatal``: bytes that
#: are not UTF-8, text before the first block; a row without id and detail is such an error alone).
LYRL_BLOCKS_SCHEMA = T.StructType([
    T.StructField(POS_FILE, T.IntegerType()), T.StructField(POS_LINE, T.LongType()),
    T.StructField(readers.DOC_ID, T.StringType()), T.StructField(readers.TOKENS, T.ArrayType(T.StringType())),
    T.StructField("_saw_w", T.BooleanType()), T.StructField(readers.SPLIT, T.StringType()),
    T.StructField("_malformed", T.StringType()), T.StructField("_error", T.StringType()),
    T.StructField("_fatal", T.StringType()),
])
QRELS_SCHEMA = T.StructType([T.StructField(readers.DOC_ID, T.StringType()), T.StructField("topic", T.StringType()),
                             T.StructField("pos", T.LongType()), T.StructField("_error", T.StringType())])


def _ordered_lines(spark: SparkSession, uris: Sequence[str], tasks: int) -> DataFrame:
    """The lines (v, p) of text files, every file whole in one task and in file order: Spark's text scan
    numbered by the JVM (:func:`with_scan_ids`), hash-partitioned by file, sorted by block and scan id."""
    lines = with_scan_ids(spark.read.option("lineSep", "\n").text(list(uris)).select(
        F.col("value").cast("binary").alias("v"), F.col("_metadata.file_path").alias("p"),
        F.col("_metadata.file_block_start").alias("b")))
    return lines.repartition(max(1, tasks), F.col("p")).sortWithinPartitions("p", "b", SCAN_ID).select("v", "p")


def lyrl_blocks_partition(batches: Iterator[pa.RecordBatch], files_bc: Broadcast[Any]) -> Iterator[pa.RecordBatch]:
    """mapInArrow function: the ordered lines of LYRL2004 token files (:func:`_ordered_lines`) -> their
    ``.I`` blocks (:data:`LYRL_BLOCKS_SCHEMA`), parsed as :func:`sparkhc.corpus.readers.read_lyrl2004` does."""
    index, display, splits = files_bc.value
    rows: list[dict[str, Any]] = []
    state: dict[str, Any] = {"fi": None}

    def close() -> None:
        if state.get("block") is not None:
            rows.append(state["block"])
        state["block"] = None

    for b in batches:
        for raw, path in zip(b.column(0).to_pylist(), b.column(1).to_pylist(), strict=True):
            fi = _file_index(index, path)
            if fi != state["fi"]:
                close()
                state.update(fi=fi, no=0, offset=0, doc=None, skipping=False, stopped=False)
            state["no"] += 1
            no, offset = state["no"], state["offset"]
            state["offset"] += len(raw) + 1
            if state["stopped"]:
                continue
            name = display[fi]
            block = state["block"]
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                msg = f"{name}, line {no}: not valid UTF-8 at byte offset {offset + e.start}"
                if block is None:
                    rows.append({POS_FILE: fi, POS_LINE: no, "_fatal": msg})
                else:
                    block["_fatal"] = msg
                state["stopped"] = True
                continue

            fail = functools.partial(_lyrl_fail, rows, state, block, fi, no)
            if line.startswith(".I"):
                close()
                parts = line.split()
                block = state["block"] = {POS_FILE: fi, POS_LINE: no, readers.SPLIT: splits[fi], "_saw_w": False,
                                          readers.TOKENS: []}
                if len(parts) != 2 or parts[0] != ".I":
                    block["_malformed"] = f"expected '.I <docid>', got {line.strip()[:80]!r}"
                    state["skipping"] = True
                    continue
                block[readers.DOC_ID] = parts[1]
                state["skipping"] = False
            elif state["skipping"]:
                continue
            elif line.startswith(".W") and line.strip() == ".W":
                if block is None:
                    fail(f"{name}, line {no}: '.W' outside a '.I' block")
                elif block["_saw_w"]:
                    fail(f"{name}, line {no}: second '.W' in the block of document {block[readers.DOC_ID]!r}")
                else:
                    block["_saw_w"] = True
            elif block is None:
                if line.strip():
                    fail(f"{name}, line {no}: text outside a '.I' block: {line.strip()[:80]!r}")
            else:
                if not block["_saw_w"] and line.strip():
                    fail(f"{name}, line {no}: tokens before '.W' in document {block[readers.DOC_ID]!r}")
                    continue
                block[readers.TOKENS].extend(line.split())
    close()
    names = [f.name for f in LYRL_BLOCKS_SCHEMA.fields]
    yield pa.RecordBatch.from_pylist([{k: r.get(k) for k in names} for r in rows],
                                     schema=pa.schema([pa.field(f.name, _arrow_type(f.dataType)) for f in
                                                       LYRL_BLOCKS_SCHEMA.fields]))


def _lyrl_fail(rows: list[dict[str, Any]], state: dict[str, Any], block: dict[str, Any] | None, fi: int, no: int,
               msg: str) -> None:
    """A structural error of a token file: outside a block it ends the read of the file; inside one it is
    the block's error (raised when the block's id is claimed; the rest of the block is skipped)."""
    if block is None:
        rows.append({POS_FILE: fi, POS_LINE: no, "_fatal": msg})
        state["stopped"] = True
    elif block.get("_error") is None:
        block["_error"] = msg
        state["skipping"] = True


def _arrow_type(t: T.DataType) -> pa.DataType:
    if isinstance(t, T.ArrayType):
        return pa.list_(pa.string())
    if isinstance(t, T.IntegerType):
        return pa.int32()
    if isinstance(t, T.LongType):
        return pa.int64()
    return pa.bool_() if isinstance(t, T.BooleanType) else pa.string()


def qrels_partition(batches: Iterator[pa.RecordBatch], name: str) -> Iterator[pa.RecordBatch]:
    """mapInArrow function: the ordered lines of a qrels file -> (doc id, topic, line) of every
    ``<topic> <docid> 1`` line, or the error of the first bad line (as :func:`readers.read_qrels` says it)."""
    no = 0
    stopped = False
    for b in batches:
        ids: list[str | None] = []
        topics: list[str | None] = []
        pos: list[int] = []
        errors: list[str | None] = []
        for raw in b.column(0).to_pylist():
            no += 1
            if stopped:
                continue
            err = None
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                err = f"{name}, line {no}: not valid UTF-8 at byte {e.start}"
            else:
                parts = line.split()
                if not parts:
                    continue
                if len(parts) != 3 or parts[2] != "1":
                    err = f"{name}, line {no}: expected '<topic> <docid> 1', got {line.strip()[:80]!r}"
            if err is not None:
                ids.append(None)
                topics.append(None)
                errors.append(err)
                stopped = True
            else:
                ids.append(parts[1])
                topics.append(parts[0])
                errors.append(None)
            pos.append(no)
        yield pa.RecordBatch.from_arrays([pa.array(ids, pa.string()), pa.array(topics, pa.string()),
                                          pa.array(pos, pa.int64()), pa.array(errors, pa.string())],
                                         names=[f.name for f in QRELS_SCHEMA.fields])


class _LyrlRecords(_KeyedRecords):
    """The ``.I`` blocks of LYRL2004 token files joined with their qrels labels (``labels``; null: no
    qrels line): the checks of :func:`sparkhc.corpus.readers.read_lyrl2004` at the end of a block.
    ``extra``: (missing_labels, the qrels file's name)."""

    unit = "line"

    def key(self, b: pa.RecordBatch, j: int) -> Key:
        return (0, 0, int(b.column(POS_LINE)[j].as_py()) - 1)

    def __call__(self, b: pa.RecordBatch) -> tuple[list[tuple[str, Key]], list[Key]]:
        self.cols = {c: b.column(c).to_pylist() for c in b.schema.names}
        return super().__call__(b)

    def record(self, fi: int, b: pa.RecordBatch, j: int) -> None:
        sink, c = self.sink, {k: v[j] for k, v in self.cols.items()}
        missing_labels, qrels_src = self.extra
        no, doc_id, fatal = int(c[POS_LINE]), c[readers.DOC_ID], c["_fatal"]
        if doc_id is None and c["_malformed"] is None:  # an error outside any block
            sink.fail(fatal, InputDataError)
            return
        if c["_malformed"] is not None:
            sink.invalid(no, "malformed block", c["_malformed"])
            if fatal is not None:
                sink.fail(fatal, InputDataError)
            return
        claimed = sink.claim_id(no, doc_id)
        if claimed and c["_error"] is not None:
            sink.fail(c["_error"], InputDataError)
            return
        if fatal is not None:
            sink.fail(fatal, InputDataError)
            return
        if not claimed:
            return
        try:
            readers.lyrl_record(sink, no, doc_id, c[readers.TOKENS], c["_saw_w"], c[readers.SPLIT], c[readers.LABELS],
                                missing_labels, qrels_src)
        except InputDataError as e:  # no qrels line, missing_labels="error"
            sink.fail(str(e), type(e))


_SCANS["lyrl blocks"] = _LyrlRecords


def read_lyrl2004_tokens(
    spark: SparkSession,
    token_files: Sequence[str],
    qrels: str,
    spec: FeatureSpec,
    opts: JsonlOptions,
    missing_labels: str = "error",
    source: str | None = None,
) -> TokenizedCorpus:
    """Read RCV1-v2 LYRL2004 token files and their topic qrels (:func:`sparkhc.corpus.readers.read_lyrl2004`;
    local paths, ``file:`` or Hadoop URIs, ``.gz`` or not) on the executors: every file's lines in one task in
    order (one shuffle of the lines; a gzip file is one scan task anyway), the ``.I`` blocks parsed there,
    joined with the qrels labels (read and grouped by Spark, in the qrels' order), checked and tokenized.
    The driver gets counts and the first error in file order (the qrels' errors first, as the driver-side
    reader reads the qrels first). ``opts``: ``taxonomy``, ``unknown_labels``, ``on_empty``, ``on_invalid``."""
    readers._check_choice("missing_labels", missing_labels, ("error", "empty", "quarantine"))
    names = [str(p) for p in token_files]
    if not names:
        raise ValueError("no input files given")
    uris = [hfs.qualify(spark, n) for n in names]
    quri = hfs.qualify(spark, qrels)
    for uri, name in [*zip(uris, names, strict=True), (quri, str(qrels))]:
        hfs.check_gzip_suffix(spark, uri, name)
    sc = spark.sparkContext
    qrows = _ordered_lines(spark, [quri], 1).mapInArrow(
        functools.partial(qrels_partition, name=str(qrels)), QRELS_SCHEMA).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        bad = qrows.where(F.col("_error").isNotNull()).select("_error").collect()
        if bad:
            raise InputDataError(bad[0][0])
        pairs = F.array_sort(F.collect_list(F.struct(F.col("pos"), F.col("topic"))))
        labels = (qrows.groupBy(readers.DOC_ID)
                  .agg(F.array_distinct(F.transform(pairs, lambda x: x["topic"])).alias(readers.LABELS)))
        splits = []
        for n in names:
            m = readers._LYRL_SPLIT.search(n.rsplit("/", 1)[-1])
            splits.append(m.group(1).lower() if m else None)
        qualified = [hfs.qualified(spark, u) for u in uris]
        index = {_norm(u): i for i, u in enumerate(qualified)}
        files = (index, names, splits)
        files_bc = sc.broadcast(files)
        width = max(1, int(sc.defaultParallelism))
        blocks = (_ordered_lines(spark, uris, min(len(uris), width))
                  .mapInArrow(functools.partial(lyrl_blocks_partition, files_bc=files_bc), LYRL_BLOCKS_SCHEMA)
                  .persist(StorageLevel.MEMORY_AND_DISK))
        try:
            path_of = F.element_at(F.array(*[F.lit(u) for u in qualified]), F.col(POS_FILE) + 1)
            records = blocks.join(labels, readers.DOC_ID, "left").withColumn("p", path_of)
            report = ReadReport(source=source or ", ".join(names), files=list(names))
            level = StorageLevel.MEMORY_AND_DISK if sum(hfs.size(spark, u) for u in uris) <= MEMORY_CACHE_BYTES \
                else StorageLevel.DISK_ONLY
            # (the parsed records are cached whole by the read: the blocks and qrels are released below)
            tc = _read_records(spark, records, "lyrl2004", (index, names, (missing_labels, str(qrels))), spec, opts,
                               report, level)
        finally:
            blocks.unpersist()
            files_bc.unpersist()
    finally:
        qrows.unpersist()
    return tc


def _scan_tasks(spark: SparkSession, uris: Sequence[str]) -> int:
    """An upper bound of the tasks of Spark's scan of ``uris``: a gzip file is one task, any other
    file one per ``spark.sql.files.maxPartitionBytes`` (small files may share a task)."""
    block = int(spark._jsparkSession.sessionState().conf().filesMaxPartitionBytes())  # type: ignore[attr-defined]
    return sum(1 if u.endswith(".gz") else max(1, -(-hfs.size(spark, u) // block)) for u in uris)


SCAN_ID = "_m"


def with_scan_ids(lines: DataFrame) -> DataFrame:
    """Lines (v, p, b) with their scan id ``_m`` (``monotonically_increasing_id``): increasing with the
    line's place inside each block (a scan task reads a block whole and in order), computed on the JVM
    in the scan itself. The same for every evaluation of the same scan, so :func:`_resolver` recomputes
    it to turn an id into a line number and byte offset, only when a message needs one."""
    return lines.withColumn(SCAN_ID, F.monotonically_increasing_id())


def spread_lines(lines: DataFrame, width: int) -> DataFrame:
    """Lines (v, p, b, _m) hash-partitioned on their scan id over ``width`` tasks: fewer scan tasks
    than cores (a gzip file is one task) would run the parse and every later pass over the documents
    on one core. :func:`parse_partition` keys the records of such lines by scan id (placeholders in
    messages) instead of counting their places; no sort, one exchange."""
    return with_scan_ids(lines).repartition(width, F.col(SCAN_ID))


def _norm(uri: str) -> str:
    """One spelling of a file's URI: ``file:///x``, ``file:/x`` and percent-encoded forms agree."""
    uri = unquote(uri)
    return "file:/" + uri[len("file:///"):] if uri.startswith("file:///") else uri


def _file_index(index: Mapping[str, int], path: str) -> int:
    i = index.get(path)
    return index[_norm(path)] if i is None else i


def _explain_read_failure(spark: SparkSession, uris: Sequence[str], names: Sequence[str], e: Exception) -> None:
    """A failed read job: a corrupt gzip file is named as the driver-side reader names it."""
    text = str(e)
    if not any(s in text for s in ("EOFException", "ZLIB", "GZIP", "gzip", "Unexpected end of input")):
        return
    for uri, name in zip(uris, names, strict=True):
        if uri in text or name in text or uri.replace("file:///", "file:/") in text:
            local = hfs.local_path(uri)
            if local is not None:
                for _ in readers.iter_lines(local):  # raises the reader's error naming the line
                    pass
            raise InputDataError(f"{name}: read error (corrupt or truncated gzip data?): {_first_line(text)}") from None


def _first_line(text: str) -> str:
    return next((ln.strip() for ln in text.splitlines() if ln.strip()), "")[:300]


def _merge(report: ReadReport, parts: list[dict[str, Any]], opts: JsonlOptions, spark: SparkSession,
           parsed: DataFrame, resolve_with: tuple[DataFrame, Sequence[str], Mapping[str, int]] | None) -> None:
    """Merge the tasks' reports into ``report`` (the counts; samples and counter order by place),
    raise the first error in file order, resolve the placeholders of later blocks."""
    for name in _SUMMED:
        setattr(report, name, sum(int(p[name]) for p in parts))
    for name in _COUNTERS:
        first: dict[str, Key] = {}
        total: Counter[str] = Counter()
        for p in parts:
            for k, v in p[name].items():
                total[k] += int(v)
            for k, key in p["first_seen"][name].items():
                kt = (int(key[0]), int(key[1]), int(key[2]))
                if k not in first or kt < first[k]:
                    first[k] = kt
        merged: Counter[str] = Counter()
        for k in sorted(total, key=lambda k: first.get(k, (1 << 30, 0, 0))):
            merged[k] = total[k]
        setattr(report, name, merged)
    errors = [(tuple(p["error"][0]), p["error"][1], p["error"][2]) for p in parts if p["error"] is not None]
    samples = sorted((tuple(k), r, why) for p in parts for k, r, why in p["samples"])[:SAMPLE_SIZE]
    drops = sorted((tuple(k), d, lab) for p in parts for k, d, lab in p["drops"])[:SAMPLE_SIZE]
    texts = [e[1] for e in errors] + [r for _, r, _ in samples]
    resolve = _resolver(spark, *resolve_with, texts) if resolve_with is not None else (lambda t: t)
    if errors:
        parsed.unpersist()
        _key, message, exc_name = min(errors)
        exc = getattr(readers, exc_name, None) or InputDataError
        raise exc(resolve(message))
    report.quarantine_samples = [(resolve(r), why) for _, r, why in samples]
    report.dropped_label_samples = [(d, lab) for _, d, lab in drops]
    if opts.folds is not None:
        unused = len(opts.folds) - sum(int(p["fold_used"]) for p in parts)
        if unused > 0:
            report.notes.append(f"{unused} id(s) of {opts.folds.source} match no document read")
    report.batches = -(-report.emitted // opts.batch_size)
    report.finish()


def _resolver(spark: SparkSession, lines: DataFrame, names: Sequence[str], index: Mapping[str, int],
              texts: list[str]) -> Callable[[str], str]:
    """Replace the line / byte placeholders of ``texts`` by numbers (one counting job when any)."""
    blocks = {(int(m.group(1)), int(m.group(2))) for t in texts for ph in (_LINE_PH, _BYTE_PH, _SCAN_LINE_PH,
                                                                         _SCAN_BYTE_PH) for m in ph.finditer(t)}
    ids = sorted({int(m.group(3)) for t in texts for ph in (_SCAN_LINE_PH, _SCAN_BYTE_PH) for m in ph.finditer(t)})
    before: dict[tuple[int, int], tuple[int, int]] = {}
    at_id: dict[tuple[int, int, int], tuple[int, int]] = {}  # (file, block, scan id) -> (lines, bytes) before it
    if blocks:
        size = F.octet_length("v") + 1
        per_id = [F.sum(F.when(F.col(SCAN_ID) < i, F.lit(1)).otherwise(0)).alias(f"n{k}") for k, i in enumerate(ids)]
        per_id += [F.sum(F.when(F.col(SCAN_ID) < i, size).otherwise(0)).alias(f"s{k}") for k, i in enumerate(ids)]
        src = with_scan_ids(lines) if ids else lines
        counts = src.groupBy("p", "b").agg(F.count(F.lit(1)).alias("n"), F.sum(size).alias("bytes"), *per_id).collect()
        per_file: dict[int, list[tuple[int, int, int]]] = {}
        for r in counts:
            fi = _file_index(index, r["p"])
            per_file.setdefault(fi, []).append((int(r["b"]), int(r["n"]), int(r["bytes"])))
            for k, i in enumerate(ids):
                at_id[(fi, int(r["b"]), i)] = (int(r[f"n{k}"] or 0), int(r[f"s{k}"] or 0))
        for fi, block in blocks:
            rows = per_file.get(fi, [])
            before[(fi, block)] = (sum(n for b, n, _ in rows if b < block), sum(nb for b, _, nb in rows if b < block))

    def scan_place(m: re.Match[str]) -> tuple[int, int]:
        fi, block, i = int(m.group(1)), int(m.group(2)), int(m.group(3))
        n0, b0 = before.get((fi, block), (0, 0))
        n1, b1 = at_id.get((fi, block, i), (0, 0))
        return n0 + n1, b0 + b1

    def scan_line(m: re.Match[str]) -> str:
        return f"{names[int(m.group(1))]}, line {scan_place(m)[0] + 1}"

    def scan_byte(m: re.Match[str]) -> str:
        return str(scan_place(m)[1] + int(m.group(4) or 0))

    def line(m: re.Match[str]) -> str:
        fi, block, idx = int(m.group(1)), int(m.group(2)), int(m.group(3))
        return f"{names[fi]}, line {before.get((fi, block), (0, 0))[0] + idx + 1}"

    def byte(m: re.Match[str]) -> str:
        fi, block, within = int(m.group(1)), int(m.group(2)), int(m.group(3))
        return str(before.get((fi, block), (0, 0))[1] + within + int(m.group(4) or 0))

    return lambda t: _SCAN_BYTE_PH.sub(scan_byte, _SCAN_LINE_PH.sub(scan_line, _BYTE_PH.sub(byte, _LINE_PH.sub(line, t))))
