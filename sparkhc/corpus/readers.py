"""Corpus readers: raw documents as Arrow record batches of :data:`RAW_SCHEMA`.

Every reader returns ``(batches, report)``: a lazy iterator of :class:`pyarrow.RecordBatch`
(at most ``batch_size`` rows each, so memory stays bounded) and a :class:`ReadReport` that fills
in while the iterator is consumed. No record is ever dropped silently: each input record ends up
*emitted*, *quarantined* (bad record, with a reason and a sample of ids) or *excluded* (a protocol
selection such as ModApte), and ``read == emitted + quarantined + excluded`` is checked when the
iterator is exhausted.

Readers:

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
import re
import tempfile
import zlib
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal

import pyarrow as pa

from sparkhc.batch import DOC_ID, FOLD, ID_ALIAS, LABELS, SPLIT
from sparkhc.errors import InputDataError, SchemaError
from sparkhc.taxonomy import Taxonomy

TEXT = "text"
TOKENS = "tokens"

#: The raw-documents layout every reader produces (and :func:`read_parquet` accepts). Equal to
#: ``sparkhc.spark.schemas.RAW_ARROW_SCHEMA``. ``labels`` is nullable in the schema (unlabelled
#: documents to predict), but the readers always emit a list (``[]`` when there are no labels).
RAW_SCHEMA = pa.schema(
    [
        pa.field(DOC_ID, pa.string(), nullable=False),
        pa.field(TEXT, pa.string(), nullable=True),
        pa.field(TOKENS, pa.list_(pa.string()), nullable=True),
        pa.field(LABELS, pa.list_(pa.string()), nullable=True),
        pa.field(SPLIT, pa.string(), nullable=True),
        pa.field(FOLD, pa.int32(), nullable=True),
    ]
)

DEFAULT_BATCH_SIZE = 10_000
_UNLABELLED_HINT = ("pass require_labels=False to read unlabelled documents (sparkhc featurize --input: "
                    "--allow-unlabelled, or the configuration key featurize.require_labels = false)")
SAMPLE_SIZE = 20
_INT32_MAX = 2**31 - 1

OnEmpty = Literal["error", "keep", "quarantine"]
OnInvalid = Literal["error", "quarantine"]
UnknownLabels = Literal["error", "drop", "quarantine"]
Batches = Iterator[pa.RecordBatch]


class DuplicateIdError(InputDataError):
    """Two records have the same document id (the message names both places)."""


class EmptyDocumentError(InputDataError):
    """A document has no text and no tokens."""


class UnknownLabelError(InputDataError):
    """A document's label is not a node of the taxonomy."""


# ---------------------------------------------------------------------------------------- report
@dataclass
class ReadReport:
    """What a reader did with its input; complete once the batch iterator is exhausted.

    Attributes
    ----------
    source : str
        What was read (a corpus name or a file).
    files : list of str
        The files opened, in order.
    read : int
        Input records seen (JSON lines, files, ``.I`` blocks, Parquet rows).
    emitted, quarantined, excluded : int
        Where they went; ``read == emitted + quarantined + excluded``. ``excluded`` counts protocol
        selections (e.g. ModApte keeps only ``apte_mod`` documents), not errors.
    quarantine_reasons, excluded_reasons : Counter
        Counts by reason.
    quarantine_samples : list of (str, str)
        Up to ``SAMPLE_SIZE`` ``(record, reason)`` pairs; ``record`` is the doc id when known,
        else ``"file, line N"``.
    empty_kept : int
        Empty documents emitted because ``on_empty="keep"``.
    no_labels : int
        Emitted documents with an empty label list.
    labels_dropped : int
        Label occurrences removed because they are not in the taxonomy (``unknown_labels="drop"``).
    dropped_label_counts : Counter
        Those removals by label; ``dropped_label_samples`` keeps ``(doc_id, label)`` pairs.
    labels_restricted : int
        Label occurrences removed by the protocol's label restriction (e.g. the 90 ApteMod
        topics); by label in ``restricted_label_counts``.
    skipped_files : int
        Files ignored by a directory reader (hidden files); a sample in ``skipped_samples``.
    notes : list of str
        Other remarks (e.g. fold-table ids that match no document).
    batches : int
        Record batches produced.
    finished : bool
        True once the iterator was exhausted and the counts checked.
    """

    source: str = ""
    files: list[str] = field(default_factory=list)
    read: int = 0
    emitted: int = 0
    quarantined: int = 0
    excluded: int = 0
    quarantine_reasons: Counter[str] = field(default_factory=Counter)
    quarantine_samples: list[tuple[str, str]] = field(default_factory=list)
    excluded_reasons: Counter[str] = field(default_factory=Counter)
    empty_kept: int = 0
    no_labels: int = 0
    labels_dropped: int = 0
    dropped_label_counts: Counter[str] = field(default_factory=Counter)
    dropped_label_samples: list[tuple[str, str]] = field(default_factory=list)
    labels_restricted: int = 0
    restricted_label_counts: Counter[str] = field(default_factory=Counter)
    skipped_files: int = 0
    skipped_samples: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    batches: int = 0
    finished: bool = False

    def quarantine(self, record: str, reason: str) -> None:
        self.quarantined += 1
        self.quarantine_reasons[reason] += 1
        if len(self.quarantine_samples) < SAMPLE_SIZE:
            self.quarantine_samples.append((record, reason))

    def exclude(self, reason: str) -> None:
        self.excluded += 1
        self.excluded_reasons[reason] += 1

    def withdraw(self, reason: str) -> None:
        """An emitted document excluded afterwards by a later protocol step (e.g. the kept classes
        of ``--class-spaces``, fitted on all the training documents read)."""
        self.emitted -= 1
        self.exclude(reason)

    def drop_label(self, doc_id: str, label: str) -> None:
        self.labels_dropped += 1
        self.dropped_label_counts[label] += 1
        if len(self.dropped_label_samples) < SAMPLE_SIZE:
            self.dropped_label_samples.append((doc_id, label))

    def skip_file(self, path: str) -> None:
        self.skipped_files += 1
        if len(self.skipped_samples) < SAMPLE_SIZE:
            self.skipped_samples.append(path)

    def finish(self) -> None:
        """Check the bookkeeping invariant (a failure is a bug in a reader, not bad input)."""
        if self.read != self.emitted + self.quarantined + self.excluded:
            raise RuntimeError(
                f"{self.source}: record accounting is off: read {self.read} != emitted {self.emitted} "
                f"+ quarantined {self.quarantined} + excluded {self.excluded}"
            )
        self.finished = True

    def summary(self) -> str:
        """One line for logs and the CLI."""
        parts = [f"{self.source}: read {self.read}", f"emitted {self.emitted}"]
        if self.excluded:
            parts.append(f"excluded {self.excluded} ({_fmt_counter(self.excluded_reasons)})")
        if self.quarantined:
            parts.append(f"quarantined {self.quarantined} ({_fmt_counter(self.quarantine_reasons)})")
        if self.empty_kept:
            parts.append(f"empty kept {self.empty_kept}")
        if self.labels_dropped:
            parts.append(f"unknown labels dropped {self.labels_dropped} ({_fmt_counter(self.dropped_label_counts)})")
        if self.labels_restricted:
            parts.append(f"labels outside the protocol's label set removed {self.labels_restricted}")
        if self.skipped_files:
            parts.append(f"files skipped {self.skipped_files}")
        if not self.finished:
            parts.append("(not finished)")
        return ", ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable view (counters become plain dicts)."""
        out: dict[str, Any] = {}
        for k, v in self.__dict__.items():
            if isinstance(v, Counter):
                out[k] = dict(v.most_common())
            elif isinstance(v, list):
                out[k] = [list(x) if isinstance(x, tuple) else x for x in v]
            else:
                out[k] = v
        return out


def _fmt_counter(c: Counter[str], k: int = 5) -> str:
    items = c.most_common(k)
    s = ", ".join(f"{name}: {n}" for name, n in items)
    return s + (", ..." if len(c) > k else "")


# ---------------------------------------------------------------------------------------- sink
def _check_choice(name: str, value: str, choices: Sequence[str]) -> None:
    if value not in choices:
        raise ValueError(f"The {name!r} parameter must be one of {list(choices)}. Got {value!r} instead.")


class _Sink:
    """Per-document checks shared by all readers, and the batch builder.

    Readers call :meth:`set_file` when they open a file, ``report.read += 1`` for every record,
    then exactly one of :meth:`invalid`, :meth:`exclude` or :meth:`add`.
    """

    def __init__(
        self,
        report: ReadReport,
        batch_size: int,
        taxonomy: Taxonomy | None,
        unknown_labels: str,
        on_empty: str,
        on_invalid: str,
        allowed_labels: Collection[str] | None,
        ancestors: bool,
        check_duplicates: bool,
    ) -> None:
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
            raise ValueError(f"The 'batch_size' parameter must be an int >= 1. Got {batch_size!r} instead.")
        _check_choice("unknown_labels", unknown_labels, ("error", "drop", "quarantine"))
        _check_choice("on_empty", on_empty, ("error", "keep", "quarantine"))
        _check_choice("on_invalid", on_invalid, ("error", "quarantine"))
        if ancestors and taxonomy is None:
            raise ValueError("ancestors=True needs a taxonomy")
        self.report = report
        self.batch_size = batch_size
        self.taxonomy = taxonomy
        self.unknown_labels = unknown_labels
        self.on_empty = on_empty
        self.on_invalid = on_invalid
        self.allowed = None if allowed_labels is None else frozenset(allowed_labels)
        self.ancestors = ancestors
        self.check_duplicates = check_duplicates
        # id -> packed (file index, position): an int per id keeps large corpora cheap
        self._seen: dict[str, int] = {}
        self._files: list[str] = []
        self._units: list[str | None] = []
        self._file_idx = -1
        self._rows: list[tuple[str, str | None, list[str] | None, list[str], str | None, int | None]] = []
        self._known_labels: frozenset[str] | None = None

    # -- locations
    def set_file(self, path: str, unit: str | None = "line", listed: bool = True) -> None:
        self._files.append(path)
        self._units.append(unit)
        self._file_idx = len(self._files) - 1
        if listed:
            self.report.files.append(path)

    def where(self, pos: int, file_idx: int | None = None) -> str:
        i = self._file_idx if file_idx is None else file_idx
        unit = self._units[i]
        return self._files[i] if unit is None else f"{self._files[i]}, {unit} {pos}"

    # -- outcomes
    def invalid(self, pos: int, reason: str, detail: str, doc_id: str | None = None,
                exc: type[InputDataError] = InputDataError) -> None:
        """A malformed record: raise, or quarantine under ``reason``."""
        where = self.where(pos)
        if self.on_invalid == "error":
            who = f" (document {doc_id!r})" if doc_id is not None else ""
            raise exc(f"{where}{who}: {detail} (pass on_invalid='quarantine' to set such records aside, counted; "
                      "sparkhc featurize: --on-invalid quarantine, or the configuration key featurize.on_invalid)")
        self.report.quarantine(doc_id if doc_id is not None else where, reason)

    def exclude(self, reason: str) -> None:
        self.report.exclude(reason)

    def claim_id(self, pos: int, doc_id: str) -> bool:
        """Record ``doc_id``; a repeated id is invalid (False when it was quarantined)."""
        if not self.check_duplicates:
            return True
        key = (self._file_idx << 40) | pos
        first = self._seen.setdefault(doc_id, key)
        if first == key:
            return True
        first_where = self.where(first & ((1 << 40) - 1), first >> 40)
        self.invalid(
            pos, "duplicate id",
            f"duplicate doc id {doc_id!r}: first seen at {first_where}, again at {self.where(pos)}",
            doc_id, DuplicateIdError,
        )
        return False

    def add(
        self,
        pos: int,
        doc_id: str,
        text: str | None,
        tokens: list[str] | None,
        labels: list[str],
        split: str | None,
        fold: int | None,
    ) -> pa.RecordBatch | None:
        """Check one well-formed document (its id already claimed); returns a full batch when
        one is ready."""
        rep = self.report
        if labels:
            labels = list(dict.fromkeys(labels))  # duplicates inside one list carry no information
        if self.allowed is not None:
            kept = [lab for lab in labels if lab in self.allowed]
            if len(kept) != len(labels):
                for lab in labels:
                    if lab not in self.allowed:
                        rep.labels_restricted += 1
                        rep.restricted_label_counts[lab] += 1
                labels = kept
        tax = self.taxonomy
        if tax is not None and labels:
            known = self.known_labels()
            unknown = [lab for lab in labels if lab not in known]
            if unknown:
                if self.unknown_labels == "error":
                    lab = unknown[0]
                    why = ("is the taxonomy root, not a label" if lab == tax.root_name
                           else f"is not a node of the taxonomy {tax.source}")
                    more = f" ({len(unknown) - 1} more unknown label(s) in this document)" if len(unknown) > 1 else ""
                    raise UnknownLabelError(
                        f"{self.where(pos)}: document {doc_id!r}: label {lab!r} {why}{more}; "
                        "pass unknown_labels='drop' to drop such labels (they are counted) or 'quarantine' to set "
                        "the document aside (sparkhc featurize: --unknown-labels drop|quarantine, or the "
                        "configuration key featurize.unknown_labels)"
                    )
                if self.unknown_labels == "quarantine":
                    rep.quarantine(doc_id, "unknown label")
                    return None
                for lab in unknown:
                    rep.drop_label(doc_id, lab)
                bad = set(unknown)
                labels = [lab for lab in labels if lab not in bad]
            if self.ancestors and labels:
                ids = tax.closure(tax.id(lab) for lab in labels)
                labels = [tax.names[int(c)] for c in ids]
        empty = (text is None or not text.strip()) and not tokens
        if empty:
            if self.on_empty == "error":
                raise EmptyDocumentError(
                    f"{self.where(pos)}: document {doc_id!r} is empty (no text and no tokens); pass "
                    "on_empty='keep' or 'quarantine' to accept or set aside empty documents (sparkhc featurize: "
                    "--on-empty keep|quarantine, or the configuration key featurize.on_empty)"
                )
            if self.on_empty == "quarantine":
                rep.quarantine(doc_id, "empty document")
                return None
            rep.empty_kept += 1
        if not labels:
            rep.no_labels += 1
        rep.emitted += 1
        self._rows.append((doc_id, text, tokens, labels, split, fold))
        if len(self._rows) >= self.batch_size:
            return self.flush()
        return None

    def add_clean(self, clean: CleanBatch) -> None:
        """Count the documents of a clean batch (:func:`jsonl_clean_batch`) as :meth:`add` counts each."""
        self.report.emitted += clean.batch.num_rows
        self.report.empty_kept += clean.empty_kept
        self.report.no_labels += clean.no_labels

    def known_labels(self) -> frozenset[str]:
        """The names a label may take: the taxonomy's nodes but the root and virtual ones."""
        known = self._known_labels
        if known is None:
            tax = self.taxonomy
            assert tax is not None
            known = self._known_labels = frozenset(
                name for i, name in enumerate(tax.names) if i != 0 and not tax.virtual[i])
        return known

    def flush(self) -> pa.RecordBatch | None:
        if not self._rows:
            return None
        rows = self._rows
        self._rows = []
        cols = list(zip(*rows, strict=True))
        arrays = [pa.array(col, type=f.type) for col, f in zip(cols, RAW_SCHEMA, strict=True)]
        self.report.batches += 1
        return pa.RecordBatch.from_arrays(arrays, schema=RAW_SCHEMA)


def _run(sink: _Sink, records: Iterable[pa.RecordBatch | None]) -> Batches:
    """Drive a reader's record loop, yield the full batches, flush and close the report."""
    for batch in records:
        if batch is not None:
            yield batch
    last = sink.flush()
    if last is not None:
        yield last
    sink.report.finish()


# ---------------------------------------------------------------------------------------- files
def open_maybe_gzip(path: str | Path) -> IO[bytes]:
    """Open ``path`` for binary reading, decompressing gzip when it starts with the gzip magic."""
    p = Path(path)
    try:
        f = open(p, "rb")  # noqa: SIM115 -- returned to the caller
    except FileNotFoundError:
        raise InputDataError(f"{p}: file not found") from None
    except IsADirectoryError:
        raise InputDataError(f"{p}: is a directory, expected a file") from None
    head = f.read(2)
    f.seek(0)
    if head == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=f, mode="rb")  # type: ignore[return-value]
    if p.suffix == ".gz":
        f.close()
        raise InputDataError(f"{p}: has a .gz suffix but is not gzip data")
    return f


def iter_lines(path: Path) -> Iterator[tuple[int, int, bytes]]:
    """(line number, byte offset of the line in the (decompressed) stream, line bytes)."""
    no = 0
    offset = 0
    with open_maybe_gzip(path) as f:
        try:
            for no, line in enumerate(f, start=1):  # noqa: B007 -- no is used after the loop
                yield no, offset, line
                offset += len(line)
        except (EOFError, OSError, zlib.error) as e:
            raise InputDataError(f"{path}: read error (corrupt or truncated gzip data?) after line {no}: {e}") from None


def _as_paths(paths: str | Path | Iterable[str | Path]) -> list[Path]:
    if isinstance(paths, str | Path):
        out = [Path(paths)]
    else:
        out = [Path(p) for p in paths]
    if not out:
        raise ValueError("no input files given")
    for p in out:
        if not p.is_file():
            raise InputDataError(f"{p}: file not found" if not p.exists() else f"{p}: not a regular file")
    return out


class FoldTable(dict[str, int]):
    """``doc id -> fold`` read from a ``folds.tsv`` (columns ``id``, ``fold``); ``source`` is the file."""

    source: str = "<folds>"


def read_folds(path: str | Path) -> FoldTable:
    """Read a ``folds.tsv`` file (header ``id<TAB>fold``); errors name the file and line."""
    p = Path(path)
    table = FoldTable()
    table.source = str(p)
    first: dict[str, int] = {}
    for no, _off, raw in iter_lines(p):
        try:
            line = raw.decode("utf-8").rstrip("\r\n")
        except UnicodeDecodeError as e:
            raise InputDataError(f"{p}, line {no}: not valid UTF-8 at byte {e.start}") from None
        if no == 1:
            if line.split("\t") != ["id", "fold"]:
                raise InputDataError(f"{p}, line 1: expected the header 'id<TAB>fold', got {line[:80]!r}")
            continue
        if not line.strip():
            continue
        parts = line.split("\t")
        if len(parts) != 2 or not parts[0]:
            raise InputDataError(f"{p}, line {no}: expected 'id<TAB>fold', got {line[:80]!r}")
        try:
            fold = int(parts[1])
        except ValueError:
            raise InputDataError(f"{p}, line {no}: fold {parts[1]!r} is not an integer") from None
        if not 0 <= fold <= _INT32_MAX:
            raise InputDataError(f"{p}, line {no}: fold {fold} is out of range")
        if parts[0] in table:
            raise InputDataError(f"{p}, line {no}: id {parts[0]!r} repeated (first at line {first[parts[0]]})")
        table[parts[0]] = fold
        first[parts[0]] = no
    return table


# ---------------------------------------------------------------------------------------- JSONL
def _type_name(v: object) -> str:
    return "null" if v is None else type(v).__name__


def _is_str_list(v: object) -> bool:
    if not isinstance(v, list):
        return False
    # map(type) runs in C: the common case (JSON strings are exactly str) without a Python loop
    return set(map(type, v)) <= {str} or all(isinstance(x, str) for x in v)


def read_jsonl(
    paths: str | Path | Iterable[str | Path],
    *,
    id_field: str | None = None,
    text_fields: Sequence[str] = ("text",),
    tokens_field: str | None = "tokens",
    labels_field: str = "labels",
    split_field: str | None = "split",
    split_values: Mapping[str, str] | None = None,
    fold_field: str | None = "fold",
    require_labels: bool = True,
    taxonomy: Taxonomy | None = None,
    unknown_labels: UnknownLabels = "error",
    ancestors: bool = False,
    allowed_labels: Collection[str] | None = None,
    folds: FoldTable | None = None,
    select: Callable[[Mapping[str, Any]], str | None] | None = None,
    labels_from: Callable[[Mapping[str, Any]], list[str] | str] | None = None,
    on_empty: OnEmpty = "error",
    on_invalid: OnInvalid = "error",
    check_duplicates: bool = True,
    batch_size: int = DEFAULT_BATCH_SIZE,
    source: str | None = None,
) -> tuple[Batches, ReadReport]:
    """Read JSON Lines documents (gzip detected by magic bytes) into raw-document batches.

    Parameters
    ----------
    paths : path or iterable of paths
        One or more ``.jsonl`` / ``.jsonl.gz`` files, read in order.
    id_field : str, optional
        Document id field: a non-empty string, or an integer (converted to its decimal string).
        ``None`` (default): ``doc_id`` or ``id`` (:data:`sparkhc.batch.ID_ALIAS`), as every verb
        accepts; a record with both is invalid unless they are equal.
    text_fields : sequence of str
        Text fields joined with ``"\\n"`` (e.g. ``["title", "text"]`` for Reuters). Missing, null or
        empty fields are left out of the join; a non-string value is an error.
    tokens_field : str or None
        A list-of-strings field of pre-tokenised text (``None``: not read).
    labels_field : str
        A list of label strings. Missing or null is an error when ``require_labels``, else ``[]``.
    split_field, fold_field : str or None
        Optional string / integer fields (``None``: not read, the column is null).
    split_values : mapping, optional
        Raw split values -> the split names written (e.g. ``{"TRAIN": "train"}``); a value not in
        the mapping is kept as it is.
    taxonomy : Taxonomy, optional
        When given, every label must be a (non-root) node; see ``unknown_labels``.
    unknown_labels : {"error", "drop", "quarantine"}
        ``"error"`` raises :class:`UnknownLabelError` naming label, document, file and line;
        ``"drop"`` removes the label and counts it (``report.dropped_label_counts``, with a sample of
        ``(doc_id, label)``); ``"quarantine"`` sets the whole document aside.
    ancestors : bool
        Replace each label set by its ancestor closure in ``taxonomy`` (root excluded, level order).
    allowed_labels : collection of str, optional
        A protocol's label set: other labels are removed and counted in ``report.labels_restricted``.
    folds : FoldTable, optional
        Take ``fold`` from this table (see :func:`read_folds`); a document missing from it is an
        invalid record. Table ids that match no document are noted in ``report.notes``.
    select : callable, optional
        Protocol selection on the parsed JSON object: returns ``None`` to keep the record or a
        reason string to exclude it (counted in ``report.excluded_reasons``).
    labels_from : callable, optional
        Derive the labels from the parsed JSON object instead of ``labels_field`` (applied after
        ``select``): returns the label list, or a reason string to exclude the record (counted like
        ``select``); a ``ValueError`` marks a malformed record (``on_invalid``). Used by
        ``--class-spaces`` (:meth:`sparkhc.models.jia_zhang.spaces.ClassSpaces.candidate_labels`).
    on_empty : {"error", "keep", "quarantine"}
        A document with no text (or only whitespace) and no tokens.
    on_invalid : {"error", "quarantine"}
        Malformed JSON, non-object lines, missing/ill-typed fields, non-UTF-8 bytes, duplicate ids.
    check_duplicates : bool
        Keep every id seen to detect duplicates (one int per document).
    batch_size : int
        Rows per record batch.

    Returns
    -------
    (iterator of pyarrow.RecordBatch, ReadReport)
        Batches follow :data:`RAW_SCHEMA`; the report is complete once the iterator is exhausted.
    """
    files = _as_paths(paths)
    report = ReadReport(source=source or ", ".join(str(p) for p in files))
    sink = _Sink(report, batch_size, taxonomy, unknown_labels, on_empty, on_invalid, allowed_labels,
                 ancestors, check_duplicates)
    text_fields = tuple(text_fields)

    def records() -> Iterator[pa.RecordBatch | None]:
        used_fold_ids: set[str] = set()
        for path in files:
            sink.set_file(str(path), "line")
            for no, offset, raw in iter_lines(path):
                if not raw.strip():
                    continue
                report.read += 1
                obj = jsonl_object(sink, no, raw, str(offset), no == 1)
                if obj is None:
                    continue
                yield _jsonl_record(sink, no, obj, id_field, text_fields, tokens_field, labels_field,
                                    split_field, fold_field, require_labels, folds, select, used_fold_ids,
                                    labels_from, split_values)
        if folds is not None:
            unused = len(folds) - len(used_fold_ids)
            if unused > 0:
                report.notes.append(f"{unused} id(s) of {folds.source} match no document read")

    return _run(sink, records()), report


#: a JSON escape of a UTF-16 surrogate (a pair is decoded to one character; a lone one cannot be UTF-8)
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def _utf8_encodable(obj: Any) -> bool:
    try:
        json.dumps(obj, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def jsonl_object(sink: _Sink, no: int, raw: bytes, offset: str, first: bool) -> dict[str, Any] | None:
    """Decode and parse one non-blank JSON Lines line (``raw``, its line break included or not);
    ``None`` after :meth:`_Sink.invalid` when it is not a JSON object. ``offset`` is the line's byte
    offset in the (decompressed) stream as text, ``first`` whether it is the file's first line
    (which may start with a byte order mark). Shared by :func:`read_jsonl` and the executors of
    :mod:`sparkhc.spark.sources`."""
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        at = f"{offset} + {e.start}" if not offset.isdigit() else str(int(offset) + e.start)
        sink.invalid(no, "not UTF-8",
                     f"not valid UTF-8: byte 0x{raw[e.start]:02x} at byte offset {at} "
                     f"(column {e.start + 1} of the line)")
        return None
    if first and line.startswith("\ufeff"):
        line = line[1:]
    try:
        obj = json.loads(line.rstrip("\r\n"))
    except json.JSONDecodeError as e:
        sink.invalid(no, "malformed JSON", f"malformed JSON: {e.msg} at column {e.colno}")
        return None
    except RecursionError:
        sink.invalid(no, "malformed JSON", "malformed JSON: nested too deeply to read (arrays or objects "
                     "beyond Python's recursion limit)")
        return None
    if "\\u" in line and _SURROGATE_ESCAPE.search(line) and not _utf8_encodable(obj):
        m = _SURROGATE_ESCAPE.search(line)
        assert m is not None
        sink.invalid(no, "malformed JSON", f"malformed JSON: a lone UTF-16 surrogate escape {m.group(0)!r} at "
                     f"column {m.start() + 1} (no UTF-8 text can hold it)")
        return None
    if not isinstance(obj, dict):
        sink.invalid(no, "not a JSON object", f"expected a JSON object, got {_type_name(obj)}")
        return None
    return obj


def _jsonl_record(
    sink: _Sink,
    no: int,
    obj: dict[str, Any],
    id_field: str | None,
    text_fields: tuple[str, ...],
    tokens_field: str | None,
    labels_field: str,
    split_field: str | None,
    fold_field: str | None,
    require_labels: bool,
    folds: FoldTable | None,
    select: Callable[[Mapping[str, Any]], str | None] | None,
    used_fold_ids: set[str],
    labels_from: Callable[[Mapping[str, Any]], list[str] | str] | None = None,
    split_values: Mapping[str, str] | None = None,
) -> pa.RecordBatch | None:
    names = (id_field,) if id_field is not None else (ID_ALIAS, DOC_ID)
    ids: dict[str, str] = {}
    for name in names:
        raw_id = obj.get(name)
        if raw_id is None:
            continue
        if isinstance(raw_id, str) and raw_id.strip():
            ids[name] = raw_id
        elif isinstance(raw_id, int) and not isinstance(raw_id, bool):
            ids[name] = str(raw_id)
        else:
            sink.invalid(no, "bad id",
                         f"field {name!r} must be a non-empty string or an integer, got {_type_name(raw_id)} {raw_id!r}")
            return None
    if not ids:
        sink.invalid(no, "missing id", f"missing document id field {' or '.join(map(repr, names))}")
        return None
    if len(set(ids.values())) > 1:
        sink.invalid(no, "conflicting ids", "fields " + " and ".join(f"{k!r} = {v!r}" for k, v in ids.items())
                     + " disagree; give one id field (or equal values)")
        return None
    doc_id = next(iter(ids.values()))
    if not sink.claim_id(no, doc_id):
        return None
    parts: list[str] = []
    for name in text_fields:
        v = obj.get(name)
        if v is None:
            continue
        if not isinstance(v, str):
            sink.invalid(no, "wrong type", f"field {name!r} must be a string, got {_type_name(v)}", doc_id)
            return None
        if v:
            parts.append(v)
    text = "\n".join(parts) if parts else None
    tokens = None
    if tokens_field is not None:
        tokens = obj.get(tokens_field)
        if tokens is not None and not _is_str_list(tokens):
            sink.invalid(no, "wrong type", f"field {tokens_field!r} must be a list of strings, got "
                         f"{_describe_list(tokens)}", doc_id)
            return None
    labels = [] if labels_from is not None else obj.get(labels_field)
    if labels is None:
        if require_labels:
            sink.invalid(no, "missing labels", f"missing labels field {labels_field!r}; {_UNLABELLED_HINT}", doc_id)
            return None
        labels = []
    elif not _is_str_list(labels) or any(not lab for lab in labels):
        sink.invalid(no, "wrong type", f"field {labels_field!r} must be a list of non-empty strings, got "
                     f"{_describe_list(labels)}", doc_id)
        return None
    split = None
    if split_field is not None:
        split = obj.get(split_field)
        if split is not None and not isinstance(split, str):
            sink.invalid(no, "wrong type", f"field {split_field!r} must be a string, got {_type_name(split)}", doc_id)
            return None
        if split is not None and split_values is not None:
            split = split_values.get(split, split)
    fold = None
    if fold_field is not None and folds is None:
        fold = obj.get(fold_field)
        if fold is not None and (not isinstance(fold, int) or isinstance(fold, bool)
                                 or not -_INT32_MAX <= fold <= _INT32_MAX):
            sink.invalid(no, "wrong type", f"field {fold_field!r} must be a 32-bit integer, got "
                         f"{_type_name(fold)} {fold!r}", doc_id)
            return None
    if select is not None:
        reason = select(obj)
        if reason is not None:
            sink.exclude(reason)
            return None
    if labels_from is not None:
        try:
            derived = labels_from(obj)
        except ValueError as e:
            sink.invalid(no, "wrong type", str(e), doc_id)
            return None
        if isinstance(derived, str):
            sink.exclude(derived)
            return None
        labels = derived
    if folds is not None:
        fold = folds.get(doc_id)
        if fold is None:
            sink.invalid(no, "no fold", f"document has no line in {folds.source}", doc_id)
            return None
        used_fold_ids.add(doc_id)
    return sink.add(no, doc_id, text, tokens, labels, split, fold)


def _describe_list(v: object) -> str:
    if isinstance(v, list):
        bad = next((x for x in v if not isinstance(x, str) or not x), None)
        return f"a list containing {_type_name(bad)} {bad!r}"
    return f"{_type_name(v)} {v!r}"[:80]


# ---------------------------------------------------------------------------------------- JSONL, columnar
#: Lines with this many brackets or more may nest deeper than Python's ``json`` parses (RecursionError):
#: they are left to :func:`jsonl_object`.
_CLEAN_MAX_BRACKETS = 500
#: Text that pyarrow's JSON parser and :func:`json.loads` do not read alike, or could: a byte order mark
#: (accepted by pyarrow at the start of its input), two values on one line (pyarrow reads both),
#: surrogate escapes (pairs agree, but a lone surrogate is an error in pyarrow only).
_CLEAN_SCREEN = r"\x{feff}|\}[ \t\r\n]*\{|\\u[dD][89a-fA-F]"
_BLANK = r"^[ \t\n\r\x0b\x0c]*$"  # what bytes.strip() removes: the lines read_jsonl skips
_PRINTABLE = "[!-~]"  # an ASCII character that str.strip() keeps


@dataclass
class CleanBatch:
    """JSON Lines records that :func:`jsonl_clean_batch` found clean: ``records`` marks the lines that
    are records (not blank), ``batch`` their documents (:data:`RAW_SCHEMA`), in line order; the counts
    are what :meth:`_Sink.add` would have added to the report."""

    records: Any  # numpy bool array, one per line
    batch: pa.RecordBatch
    empty_kept: int
    no_labels: int
    labels: list[str]


def _clean_schema(names: Sequence[tuple[str, pa.DataType]]) -> pa.Schema | None:
    fields = [pa.field(n, t) for n, t in names]
    return pa.schema(fields) if len({n for n, _ in names}) == len(names) else None


def jsonl_clean_batch(
    sink: _Sink,
    lines: pa.Array,
    id_field: str | None,
    text_fields: tuple[str, ...],
    tokens_field: str | None,
    labels_field: str,
    split_field: str | None,
    fold_field: str | None,
    require_labels: bool,
    folds: FoldTable | None,
    split_values: Mapping[str, str] | None,
    id_types: list[pa.DataType],
) -> CleanBatch | None:
    """A batch of JSON Lines ``lines`` (binary, line breaks removed) parsed as columns by pyarrow's JSON
    reader, when every record of it is *clean*: each would pass :func:`jsonl_object`, :func:`_jsonl_record`
    and :meth:`_Sink.add` of ``sink`` unchanged and be emitted, with the same document. ``None`` as soon as
    one line or record is not (not UTF-8, a parse error, a field of another type, a missing or conflicting
    id, a null or empty item, an unknown, restricted or repeated label, an empty document unless
    ``on_empty="keep"``, a fold missing from ``folds``, anything the screens above set aside): the caller
    then reads the batch line by line with those functions, whose messages and counts are the reference.
    Protocol callables (``select``, ``labels_from``) and ``ancestors`` are not handled here (the caller
    does not ask). ``id_types``: the id column types to try first (the last that parsed, updated)."""
    import numpy as np
    import pyarrow.compute as pc
    import pyarrow.json as pajson

    if sink.ancestors:
        return None
    try:
        text = lines.cast(pa.string())  # validates UTF-8
    except pa.ArrowInvalid:
        return None
    records = np.asarray(pc.invert(pc.match_substring_regex(text, _BLANK)).to_numpy(zero_copy_only=False), bool)
    n = int(records.sum())
    if n == 0:
        return None
    text = text.filter(pa.array(records))
    if pc.any(pc.match_substring_regex(text, _CLEAN_SCREEN)).as_py():
        return None
    if pc.max(pc.count_substring_regex(text, r"[\[{]")).as_py() >= _CLEAN_MAX_BRACKETS:
        return None
    data = pc.binary_join(pa.ListArray.from_arrays(pa.array([0, n], pa.int32()), text.cast(pa.binary())),
                          b"\n")[0].as_buffer()
    id_names = (id_field,) if id_field is not None else (ID_ALIAS, DOC_ID)
    str_list = pa.list_(pa.string())
    fixed: list[tuple[str, pa.DataType]] = [(f, pa.string()) for f in text_fields]
    if tokens_field is not None:
        fixed.append((tokens_field, str_list))
    fixed.append((labels_field, str_list))
    if split_field is not None:
        fixed.append((split_field, pa.string()))
    if fold_field is not None and folds is None:
        fixed.append((fold_field, pa.int64()))
    table = None
    if len(id_types) != len(id_names):
        id_types[:] = [pa.string()] * len(id_names)
    combos = [tuple(id_types)] + [c for c in _id_type_combos(len(id_names)) if c != tuple(id_types)]
    for combo in combos:
        schema = _clean_schema([*zip(id_names, combo, strict=True), *fixed])
        if schema is None:
            return None
        try:
            table = pajson.read_json(
                pa.BufferReader(data),
                read_options=pajson.ReadOptions(use_threads=False, block_size=max(1 << 20, len(data) + 1)),
                parse_options=pajson.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore"),
            )
        except pa.ArrowInvalid:
            continue
        id_types[:] = combo
        break
    if table is None or table.num_rows != n:
        return None
    table = table.combine_chunks()

    def col(name: str) -> pa.Array:
        return table.column(name).chunk(0) if table.column(name).num_chunks else pa.array([], table.schema.field(name).type)

    def any_true(mask: pa.Array) -> bool:
        return bool(pc.any(pc.fill_null(mask, False)).as_py())

    def not_blank(values: pa.Array) -> pa.Array:
        """str.strip() of each (non-null) value is not empty: an ASCII printable character, else exactly."""
        keep = pc.match_substring_regex(values, _PRINTABLE)
        unsure = pc.fill_null(pc.and_(pc.is_valid(values), pc.invert(keep)), False)
        if any_true(unsure):
            idx = np.flatnonzero(unsure.to_numpy(zero_copy_only=False))
            exact = keep.to_numpy(zero_copy_only=False).astype(bool)
            vals = values.take(pa.array(idx)).to_pylist()
            exact[idx] = [bool(v.strip()) for v in vals]
            keep = pa.array(exact)
        return keep

    # ids (_jsonl_record): each set field a non-blank string or an integer, the same value in all
    ids = None
    for name in id_names:
        c = col(name)
        if pa.types.is_string(c.type):
            if any_true(pc.and_(pc.is_valid(c), pc.invert(not_blank(c)))):
                return None
        else:
            c = c.cast(pa.string())
        if ids is None:
            ids = c
        else:
            if any_true(pc.not_equal(ids, c)):
                return None
            ids = pc.coalesce(ids, c)
    assert ids is not None
    if ids.null_count:
        return None
    # text: the set, non-empty text fields joined with "\n"
    parts = [pc.if_else(pc.equal(col(f), ""), pa.scalar(None, pa.string()), col(f)) for f in text_fields]
    if not parts:
        doc_text = pa.nulls(n, pa.string())
    elif len(parts) == 1:
        doc_text = parts[0]
    else:
        present = pc.is_valid(parts[0])
        for p in parts[1:]:
            present = pc.or_(present, pc.is_valid(p))
        joined = pc.binary_join_element_wise(*parts, "\n", null_handling="skip")
        doc_text = pc.if_else(present, joined, pa.scalar(None, pa.string()))
    tokens = col(tokens_field) if tokens_field is not None else pa.nulls(n, str_list)
    if pc.list_flatten(tokens).null_count:
        return None
    labels = col(labels_field)
    if labels.null_count:
        if require_labels:
            return None
        labels = labels.fill_null(pa.scalar([], str_list))
    flat = pc.list_flatten(labels)
    if flat.null_count or any_true(pc.equal(flat, "")):
        return None
    split = col(split_field) if split_field is not None else pa.nulls(n, pa.string())
    if split_values is not None and len(split):
        enc = split.dictionary_encode()
        mapped = pa.array([split_values.get(v, v) for v in enc.dictionary.to_pylist()], pa.string())
        split = mapped.take(enc.indices)
    if folds is not None:
        fold_values = [folds.get(i) for i in ids.to_pylist()]
        if None in fold_values:
            return None
        fold = pa.array(fold_values, pa.int32())
    elif fold_field is not None:
        f64 = col(fold_field)
        if any_true(pc.or_(pc.greater(f64, _INT32_MAX), pc.less(f64, -_INT32_MAX))):
            return None
        fold = f64.cast(pa.int32())
    else:
        fold = pa.nulls(n, pa.int32())
    # _Sink.add: labels repeated in a list, restricted or unknown are the reference path's to count
    lengths = pc.list_value_length(labels).to_numpy(zero_copy_only=False)
    if len(flat):
        enc = flat.dictionary_encode()
        uniq = enc.dictionary.to_pylist()
        codes = np.asarray(enc.indices.to_numpy(zero_copy_only=False), np.int64)
        rows = np.repeat(np.arange(n, dtype=np.int64), lengths)
        if len(np.unique(rows * len(uniq) + codes)) != len(codes):
            return None
        if sink.allowed is not None and not sink.allowed.issuperset(uniq):
            return None
        if sink.taxonomy is not None and not sink.known_labels().issuperset(uniq):
            return None
    else:
        uniq = []
    has_tokens = pc.fill_null(pc.greater(pc.list_value_length(tokens), 0), False)
    has_text = pc.fill_null(not_blank(doc_text), False)
    empty = int(pc.sum(pc.invert(pc.or_(has_tokens, has_text))).as_py() or 0)
    if empty and sink.on_empty != "keep":
        return None
    batch = pa.RecordBatch.from_arrays([ids, doc_text, tokens.cast(str_list), labels.cast(str_list), split, fold],
                                       schema=RAW_SCHEMA)
    return CleanBatch(records, batch, empty, int(np.count_nonzero(lengths == 0)), uniq)


def _id_type_combos(k: int) -> list[tuple[pa.DataType, ...]]:
    import itertools

    return list(itertools.product((pa.int64(), pa.string()), repeat=k))


# ---------------------------------------------------------------------------------------- label dirs
_SPLIT_NAME = re.compile(r"(?:^|[-_.])(train|test|dev|valid|validation)$", re.IGNORECASE)


def natural_key(name: str) -> tuple[int, int, str]:
    return (0, int(name), name) if name.isdigit() else (1, 0, name)


def _split_name(dirname: str, split_names: Mapping[str, str] | None) -> str:
    if split_names is not None:
        if dirname not in split_names:
            raise InputDataError(f"split directory {dirname!r} is not in split_names {sorted(split_names)}")
        return split_names[dirname]
    m = _SPLIT_NAME.search(dirname)
    return m.group(1).lower() if m else dirname


#: An entry of a directory listing: (name, "dir" | "file" | "other", length in bytes of a file).
DirEntry = tuple[str, str, int]


def local_listdir(path: str) -> list[DirEntry]:
    """The entries of a local directory (symbolic links followed), as :func:`list_label_dirs` takes them."""
    out = []
    with os.scandir(path) as it:
        for e in it:
            kind = "dir" if e.is_dir() else "file" if e.is_file() else "other"
            out.append((e.name, kind, e.stat().st_size if kind == "file" else 0))
    return out


@dataclass
class LabelDirFile:
    """A document of a directory-per-label corpus: where it is (``path``, as messages name it, and
    its place in the listing), its id, label and split."""

    path: str
    doc_id: str
    label: str
    split: str | None
    size: int = 0


def list_label_dirs(
    root: str,
    report: ReadReport,
    *,
    layout: Literal["auto", "split/label", "label"] = "auto",
    split_names: Mapping[str, str] | None = None,
    listdir: Callable[[str], list[DirEntry]] = local_listdir,
    join: Callable[[str, str], str] = os.path.join,
) -> list[LabelDirFile]:
    """The documents of a directory-per-label corpus at ``root`` in reading order (see
    :func:`read_label_dirs`), with the skipped entries counted in ``report``; only names are read.
    ``listdir`` / ``join`` list and join paths of the file system (local by default; Hadoop's on
    Spark, :mod:`sparkhc.spark.sources`)."""
    _check_choice("layout", layout, ("auto", "split/label", "label"))

    sizes: dict[str, int] = {}

    def entries(d: str) -> list[tuple[str, str, str]]:  # (name, kind, path), natural order
        out = []
        for n, k, size in sorted(listdir(d), key=lambda e: natural_key(e[0])):
            out.append((n, k, join(d, n)))
            sizes[out[-1][2]] = size
        return out

    tops = [e for e in entries(root) if not e[0].startswith(".")]
    top_dirs = [e for e in tops if e[1] == "dir"]
    stray = [e for e in tops if e[1] != "dir"]
    if not top_dirs:
        raise InputDataError(f"{root}: no label or split directories found")
    if layout == "auto":
        kinds = set()
        for _n, _k, d in top_dirs:
            for c, kind, _p in entries(d):
                if not c.startswith("."):
                    kinds.add("dir" if kind == "dir" else "file")
        if kinds == {"dir"}:
            layout = "split/label"
        elif kinds == {"file"}:
            layout = "label"
        else:
            raise InputDataError(
                f"{root}: cannot tell the layout: top-level directories hold "
                f"{'both files and directories' if kinds else 'nothing'}; pass layout='split/label' or 'label'"
            )
    out: list[LabelDirFile] = []
    for _n, _k, p in stray:
        report.skip_file(p)

    def files_of(split: str | None, rel: str, label: str, d: str) -> None:
        for name, kind, f in entries(d):
            if name.startswith(".") or kind != "file":
                report.skip_file(f)
                continue
            out.append(LabelDirFile(f, f"{rel}/{name}", label, split, sizes.get(f, 0)))

    for name, _k, d in top_dirs:
        if layout == "label":
            files_of(None, name, name, d)
            continue
        split = _split_name(name, split_names)
        for lname, kind, ld in entries(d):
            if lname.startswith(".") or kind != "dir":
                report.skip_file(ld)
                continue
            files_of(split, f"{name}/{lname}", lname, ld)
    return out


def label_dir_record(sink: _Sink, f: LabelDirFile, data: bytes, encoding: str) -> pa.RecordBatch | None:
    """One document of a directory-per-label corpus (its id claimed, decoded, checked): shared by
    :func:`read_label_dirs` and the executors of :mod:`sparkhc.spark.sources`."""
    if not sink.claim_id(0, f.doc_id):  # unique by construction, checked all the same
        return None
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as e:
        sink.invalid(0, "decoding error",
                     f"cannot decode as {encoding}: byte 0x{data[e.start]:02x} at byte offset {e.start}", f.doc_id)
        return None
    return sink.add(0, f.doc_id, text, None, [f.label], f.split, None)


def read_label_dirs(
    root: str | Path,
    *,
    layout: Literal["auto", "split/label", "label"] = "auto",
    encoding: str = "latin-1",
    split_names: Mapping[str, str] | None = None,
    taxonomy: Taxonomy | None = None,
    unknown_labels: UnknownLabels = "error",
    ancestors: bool = False,
    on_empty: OnEmpty = "error",
    on_invalid: OnInvalid = "error",
    batch_size: int = DEFAULT_BATCH_SIZE,
) -> tuple[Batches, ReadReport]:
    """Read a directory-per-label corpus: ``root/<split>/<label>/<file>`` or ``root/<label>/<file>``.

    Each file is one document, decoded with ``encoding`` (latin-1 by default, as the 20 Newsgroups
    postings are ISO-8859-1; a decoding error names the file and byte offset). ``doc_id`` is the
    path relative to ``root`` (``/``-separated); the label is the directory name, or with
    ``ancestors=True`` its path in ``taxonomy`` (e.g. ``["religion", "alt.atheism"]``).

    ``layout="auto"`` picks ``split/label`` when every top-level directory holds only directories,
    ``label`` when they hold only files. The split is the directory name, with a trailing
    ``train``/``test``/``dev``/``valid`` word taken as the split (``20news-bydate-train`` ->
    ``train``) unless ``split_names`` maps directory names explicitly. Files are read in natural
    order (numeric names numerically). Hidden files (``.*``) are skipped and counted.
    """
    base = Path(root)
    if not base.is_dir():
        raise InputDataError(f"{base}: corpus directory not found")
    _check_choice("layout", layout, ("auto", "split/label", "label"))
    "".encode(encoding)  # unknown codec -> LookupError now, not mid-iteration
    report = ReadReport(source=str(base), files=[str(base)])
    sink = _Sink(report, batch_size, taxonomy, unknown_labels, on_empty, on_invalid, None, ancestors, True)
    docs = list_label_dirs(str(base), report, layout=layout, split_names=split_names)

    def records() -> Iterator[pa.RecordBatch | None]:
        for f in docs:
            sink.set_file(f.path, None, listed=False)
            report.read += 1
            yield label_dir_record(sink, f, Path(f.path).read_bytes(), encoding)

    return _run(sink, records()), report


# ---------------------------------------------------------------------------------------- LYRL2004
_LYRL_SPLIT = re.compile(r"_(train|test)(?:_pt\d+)?\.dat", re.IGNORECASE)


def read_qrels(path: str | Path) -> dict[str, list[str]]:
    """Read a TREC-style qrels file (``<topic> <docid> 1`` per line) into ``doc id -> topics``."""
    p = Path(path)
    out: dict[str, list[str]] = {}
    names: dict[str, str] = {}
    for no, _off, raw in iter_lines(p):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise InputDataError(f"{p}, line {no}: not valid UTF-8 at byte {e.start}") from None
        parts = line.split()
        if not parts:
            continue
        if len(parts) != 3 or parts[2] != "1":
            raise InputDataError(f"{p}, line {no}: expected '<topic> <docid> 1', got {line.strip()[:80]!r}")
        topic = names.setdefault(parts[0], parts[0])  # share one string per topic
        labs = out.setdefault(parts[1], [])
        if topic not in labs:
            labs.append(topic)
    return out


def read_lyrl2004(
    token_files: str | Path | Iterable[str | Path],
    qrels: str | Path | Mapping[str, list[str]],
    *,
    splits: Mapping[str, str | None] | None = None,
    missing_labels: Literal["error", "empty", "quarantine"] = "error",
    taxonomy: Taxonomy | None = None,
    unknown_labels: UnknownLabels = "error",
    on_empty: OnEmpty = "error",
    on_invalid: OnInvalid = "error",
    batch_size: int = DEFAULT_BATCH_SIZE,
) -> tuple[Batches, ReadReport]:
    """Read RCV1-v2 LYRL2004 token files (Lewis et al., JMLR 2004, appendix 12) with topic qrels.

    Each document is a ``.I <docid>`` line, a ``.W`` line, then whitespace-separated tokens up to
    the next ``.I`` (files may be gzipped). Labels come from the qrels (``<topic> <docid> 1``); a
    document without any qrels line raises unless ``missing_labels`` is ``"empty"`` (emit with no
    labels, counted in ``report.no_labels``) or ``"quarantine"``. The split is taken from
    ``splits`` (file name -> split) or from the file name (``lyrl2004_tokens_train.dat`` ->
    ``train``, ``..._test_pt0.dat`` -> ``test``), else null.
    """
    files = _as_paths(token_files)
    _check_choice("missing_labels", missing_labels, ("error", "empty", "quarantine"))
    qrels_src = "<qrels>"
    if isinstance(qrels, str | Path):
        qrels_src = str(qrels)
        qrels_map: Mapping[str, list[str]] = read_qrels(qrels)
    else:
        qrels_map = qrels
    report = ReadReport(source=", ".join(str(p) for p in files))
    sink = _Sink(report, batch_size, taxonomy, unknown_labels, on_empty, on_invalid, None, False, True)

    def split_of(p: Path) -> str | None:
        if splits is not None:
            return splits.get(p.name, splits.get(str(p)))
        m = _LYRL_SPLIT.search(p.name)
        return m.group(1).lower() if m else None

    def finish_doc(pos: int, doc_id: str, tokens: list[str], saw_w: bool, split: str | None
                   ) -> pa.RecordBatch | None:
        if not saw_w:
            sink.invalid(pos, "malformed block", "'.I' block without a '.W' line", doc_id)
            return None
        labels = qrels_map.get(doc_id)
        if labels is None:
            if missing_labels == "error":
                raise InputDataError(
                    f"{sink.where(pos)}: document {doc_id!r} has no line in the qrels {qrels_src}; pass "
                    "missing_labels='empty' or 'quarantine' to accept or set aside such documents"
                )
            if missing_labels == "quarantine":
                report.quarantine(doc_id, "no qrels")
                return None
            labels = []
        return sink.add(pos, doc_id, None, tokens, list(labels), split, None)

    def records() -> Iterator[pa.RecordBatch | None]:
        for path in files:
            sink.set_file(str(path), "line")
            split = split_of(path)
            doc_id: str | None = None
            skipping = False  # inside the block of a quarantined record
            start = 0
            tokens: list[str] = []
            saw_w = False
            for no, offset, raw in iter_lines(path):
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as e:
                    raise InputDataError(
                        f"{path}, line {no}: not valid UTF-8 at byte offset {offset + e.start}"
                    ) from None
                if line.startswith(".I"):
                    if doc_id is not None:
                        yield finish_doc(start, doc_id, tokens, saw_w, split)
                    doc_id, skipping = None, False
                    parts = line.split()
                    report.read += 1
                    if len(parts) != 2 or parts[0] != ".I":
                        skipping = True
                        sink.invalid(no, "malformed block", f"expected '.I <docid>', got {line.strip()[:80]!r}")
                        continue
                    if not sink.claim_id(no, parts[1]):
                        skipping = True
                        continue
                    doc_id, start, tokens, saw_w = parts[1], no, [], False
                elif skipping:
                    continue
                elif line.startswith(".W") and line.strip() == ".W":
                    if doc_id is None:
                        raise InputDataError(f"{path}, line {no}: '.W' outside a '.I' block")
                    if saw_w:
                        raise InputDataError(f"{path}, line {no}: second '.W' in the block of document {doc_id!r}")
                    saw_w = True
                elif doc_id is None:
                    if line.strip():
                        raise InputDataError(f"{path}, line {no}: text outside a '.I' block: {line.strip()[:80]!r}")
                else:
                    if not saw_w and line.strip():
                        raise InputDataError(f"{path}, line {no}: tokens before '.W' in document {doc_id!r}")
                    tokens.extend(line.split())
            if doc_id is not None:
                yield finish_doc(start, doc_id, tokens, saw_w, split)

    return _run(sink, records()), report


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
    ids = {c: values[c] for c in (DOC_ID, ID_ALIAS) if c in values and values[c] is not None}
    ids = {c: v for c, v in ids.items() if v.strip()}
    if not ids:
        names_ = " or ".join(repr(c) for c in (DOC_ID, ID_ALIAS) if c in values)
        sink.invalid(row, "missing id", f"column {names_} is null or empty")
        return None
    if len(set(ids.values())) > 1:
        sink.invalid(row, "conflicting ids", "columns " + " and ".join(
            f"{k!r} = {v!r}" for k, v in ids.items()) + " disagree; give one id column (or equal "
            "values)")
        return None
    doc_id = next(iter(ids.values()))
    if not sink.claim_id(row, doc_id):
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
) -> tuple[Batches, ReadReport]:
    """Read Parquet files in the raw-documents schema (see :func:`validate_raw_schema`).

    The schemas of all files are checked before any row is read. Rows go through the same checks
    as the other readers (null ``doc_id`` or null label items are invalid records, and null
    ``labels`` unless ``require_labels=False``, which reads them as ``[]``; duplicates, empty
    documents and unknown labels as documented in :func:`read_jsonl`).
    """
    import pyarrow.parquet as pq

    files = _as_paths(paths)
    opened = []
    for p in files:
        try:
            pf = pq.ParquetFile(p)
        except (pa.ArrowInvalid, OSError) as e:
            raise InputDataError(f"{p}: not a readable Parquet file: {e}") from None
        missing = validate_raw_schema(pf.schema_arrow, str(p))
        opened.append((p, pf, missing, ID_ALIAS in pf.schema_arrow.names))
    report = ReadReport(source=", ".join(str(p) for p in files))
    sink = _Sink(report, batch_size, taxonomy, unknown_labels, on_empty, on_invalid, None, False, check_duplicates)
    wanted = [f.name for f in RAW_SCHEMA]

    def records() -> Iterator[pa.RecordBatch | None]:
        for p, pf, missing, has_alias in opened:
            sink.set_file(str(p), "row")
            cols = [c for c in wanted if c not in missing] + ([ID_ALIAS] if has_alias else [])
            row = 0
            for b in pf.iter_batches(batch_size=batch_size, columns=cols):
                data = {c: b.column(c).to_pylist() for c in cols}
                for i in range(b.num_rows):
                    row += 1
                    report.read += 1
                    yield parquet_record(sink, row, {c: data[c][i] for c in cols}, require_labels)

    return _run(sink, records()), report


# ---------------------------------------------------------------------------------------- dispatch
JSONL_SUFFIXES = (".jsonl", ".jsonl.gz", ".json", ".json.gz", ".ndjson", ".ndjson.gz")


def _is_parquet(p: Path) -> bool:
    if p.suffix == ".parquet":
        return True
    with open(p, "rb") as f:
        return f.read(4) == b"PAR1"


def read_any(path: str | Path, **options: Any) -> tuple[Batches, ReadReport]:
    """Read raw documents from ``path``, choosing the reader from what is there.

    - a Parquet file (``.parquet`` or ``PAR1`` magic), or a directory of ``*.parquet`` files (as
      Spark writes them, read recursively in sorted order): :func:`read_parquet`;
    - a JSON Lines file (``.jsonl``, ``.json``, ``.ndjson``, optionally ``.gz``), or a directory of
      them: :func:`read_jsonl`;
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
    if p.is_dir():
        parquet = sorted(q for q in p.rglob("*.parquet") if q.is_file() and not q.name.startswith((".", "_")))
        if parquet:
            return read_parquet(parquet, **options)
        jsonl = sorted(q for q in p.iterdir() if q.is_file() and q.name.endswith(JSONL_SUFFIXES))
        if jsonl:
            return read_jsonl(jsonl, **options)
        options.pop("require_labels", None)  # the directories are the labels
        return read_label_dirs(p, **options)
    if not p.is_file():
        raise InputDataError(f"{p}: input not found")
    if _is_parquet(p):
        return read_parquet(p, **options)
    if p.name.endswith(JSONL_SUFFIXES):
        return read_jsonl(p, **options)
    raise InputDataError(
        f"{p}: unknown input format; expected .parquet, .jsonl(.gz) or a directory (one sub-directory per "
        "label); LYRL2004 token files are read with read_lyrl2004 and a qrels file"
    )


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
