"""The one record-check core of the raw-document readers: what every input format builds on.

A reader of any format (:mod:`sparkhc.corpus.formats`) turns its input into *records* and hands each
to a :class:`RecordSink`: ``sink.set_file`` when it opens a file, ``report.read += 1`` for every
record, then exactly one outcome: :meth:`RecordSink.invalid` (a malformed record: raised, or
quarantined with a reason), :meth:`RecordSink.exclude` (a protocol selection) or
:meth:`RecordSink.add` (after :meth:`RecordSink.claim_id`: the per-document checks shared by all
formats -- labels allowed, unknown to the taxonomy or repeated, ancestors, empty documents -- and
the batch builder). The :class:`ReadReport` counts where every record went.

What the checks decide is declared by the sink's :class:`RecordRules`: the readers' rules
(:data:`FEATURIZE_RULES`) by default, or reclassify's (:data:`RECLASSIFY_RULES`: the id only, every record
of a repeated id set aside, every bad record kept whole), which it applies to the partitions it scans.

Two adapters drive the same sinks and record checks: the driver-side readers
(:mod:`sparkhc.corpus.readers`, one process) and the executors of :mod:`sparkhc.spark.sources`
(``_TaskSink``, a sink that records failures and claims ids against the whole read).
"""

from __future__ import annotations

import gzip
import json
import zlib
from collections import Counter
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal

import pyarrow as pa

from sparkhc.batch import DOC_ID, FOLD, ID_ALIAS, LABELS, SPLIT
from sparkhc.config import ON_EMPTY, ON_INVALID, UNKNOWN_LABELS
from sparkhc.errors import InputDataError
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


@dataclass
class ScanReport(ReadReport):
    """A report that keeps every record set aside (:attr:`RecordRules.keep_all`), in ``set_aside``."""

    set_aside: list[SetAside] = field(default_factory=list)


def new_report(rules: RecordRules | None, source: str) -> ReadReport:
    """The report a reader fills for ``rules``: a :class:`ScanReport` when they keep every record set aside."""
    return ScanReport(source=source) if rules is not None and rules.keep_all else ReadReport(source=source)


def _fmt_counter(c: Counter[str], k: int = 5) -> str:
    items = c.most_common(k)
    s = ", ".join(f"{name}: {n}" for name, n in items)
    return s + (", ..." if len(c) > k else "")


# ---------------------------------------------------------------------------------------- rules
@dataclass(frozen=True)
class RecordRules:
    """How the core judges a record: the declared options of the one record check.

    The defaults (:data:`FEATURIZE_RULES`) are the readers' rules, which ``featurize`` applies on the
    driver and on the executors. :data:`RECLASSIFY_RULES` declares where ``reclassify`` differs on
    purpose: it classifies new documents, so it checks what it needs to name a prediction (a record
    that parses and has one id of its own) and sets every bad record aside whole.

    Attributes
    ----------
    id_fields : tuple of str, optional
        The id fields in the order messages name them (a conflict: ``fields 'doc_id' = ... and 'id'
        = ... disagree``); None: the format's own order (JSON Lines ``id`` first, Parquet ``doc_id``).
    any_id_value : bool
        Any JSON value is an id (a non-string as its JSON text, ``""`` included: what Spark's JSON
        reader gives for a string column); False: a non-blank string or an integer.
    repeated_ids : {"later", "all"}
        A repeated id sets aside the later records (``"later"``: the first is kept, the message names
        the first place) or every record of it (``"all"``: no record of the id is trusted, the message
        counts them: ``duplicate doc_id 'x' (2 records: line 1, line 4)``), known once all are read
        (:meth:`RecordSink.settle`).
    one_malformed_reason : bool
        Every line that is not a JSON object (not UTF-8, not JSON, not an object) counts as
        ``"malformed JSON"`` with the ``"malformed line: ..."`` wording; False: by its own reason.
    bom_on_any_line : bool
        A byte order mark is read on any line (as Spark's JSON reader does); False: the first only.
    lone_surrogates : bool
        A lone UTF-16 surrogate escape is read (as Spark does); False: the line is malformed.
    documents : bool
        Check the document after its id (field types, labels, unknown labels, empty documents) and
        build batches; False: the id is all (the records are read by Spark's own readers to classify).
    keep_all : bool
        Keep every record set aside, with its place, reason, message, id and raw line
        (:attr:`RecordSink.set_aside`); False: the report's counts and sample only.
    conflict_id : bool
        A record whose ids disagree is set aside under its ``doc_id`` value (reclassify's quarantine file
        names it); False: under its place, as a record without an id.
    missing_id, conflict_suffix, repeated_suffix : str, optional
        Wording: the missing-id message (None: the format's own), what follows a conflict's
        ``disagree`` and a repeated-id count (``"all"``).
    """

    id_fields: tuple[str, ...] | None = None
    any_id_value: bool = False
    repeated_ids: Literal["later", "all"] = "later"
    one_malformed_reason: bool = False
    bom_on_any_line: bool = False
    lone_surrogates: bool = False
    documents: bool = True
    keep_all: bool = False
    conflict_id: bool = False
    missing_id: str | None = None
    conflict_suffix: str | None = None
    repeated_suffix: str = ""


#: the readers' rules (featurize, on the driver and on the executors)
FEATURIZE_RULES = RecordRules()
#: reclassify's declared differences (sparkhc.spark.reclassify): ids only, any JSON value, every record
#: of a repeated id aside, malformed lines under one reason, every bad record kept with its raw line
RECLASSIFY_RULES = RecordRules(
    id_fields=(DOC_ID, ID_ALIAS), any_id_value=True, repeated_ids="all", one_malformed_reason=True,
    bom_on_any_line=True, lone_surrogates=True, documents=False, keep_all=True, conflict_id=True,
    missing_id=f"record with a null or missing {DOC_ID} (or {ID_ALIAS})", conflict_suffix="",
    repeated_suffix="; every document of a partition must have its own id",
)
#: at most this many characters of a raw record are kept (:attr:`RecordRules.keep_all`)
RECORD_CHARS = 2000


@dataclass(frozen=True)
class SetAside:
    """A record set aside under :attr:`RecordRules.keep_all`: where (``FILE, line N``), why, the
    message, its id when known, the raw record (lines: at most :data:`RECORD_CHARS` characters) and
    its order (file index, position)."""

    where: str
    reason: str
    detail: str
    doc_id: str | None = None
    record: str | None = None
    order: tuple[int, int] = (0, 0)

    def to_dict(self) -> dict[str, Any]:
        return {"where": self.where, "reason": self.reason, "detail": self.detail, "doc_id": self.doc_id,
                "record": self.record}


def raw_text(raw: bytes | None) -> str | None:
    """A raw line as :class:`SetAside` keeps it: UTF-8 without its line break, or (not UTF-8) decoded
    with replacement characters as it is."""
    if raw is None:
        return None
    try:
        return raw.decode("utf-8").rstrip("\r\n")[:RECORD_CHARS]
    except UnicodeDecodeError:
        return raw.decode("utf-8", "replace")[:RECORD_CHARS]


def _id_text(v: Any) -> str:
    """An id under :attr:`RecordRules.any_id_value`: a string as it is, another JSON value as its JSON
    text (as Spark's JSON reader gives it for a string column)."""
    return v if isinstance(v, str) else json.dumps(v)


# ---------------------------------------------------------------------------------------- sink
def _check_choice(name: str, value: str, choices: Sequence[str]) -> None:
    if value not in choices:
        raise ValueError(f"The {name!r} parameter must be one of {list(choices)}. Got {value!r} instead.")


class RecordSink:
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
        rules: RecordRules | None = None,
    ) -> None:
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
            raise ValueError(f"The 'batch_size' parameter must be an int >= 1. Got {batch_size!r} instead.")
        _check_choice("unknown_labels", unknown_labels, UNKNOWN_LABELS)
        _check_choice("on_empty", on_empty, ON_EMPTY)
        _check_choice("on_invalid", on_invalid, ON_INVALID)
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
        self.rules = rules = FEATURIZE_RULES if rules is None else rules
        #: every record set aside (:attr:`RecordRules.keep_all`; a :class:`ScanReport` shares the list)
        self.set_aside: list[SetAside] = report.set_aside if isinstance(report, ScanReport) else []
        if rules.keep_all and not isinstance(report, ScanReport):
            raise ValueError("RecordRules.keep_all needs a ScanReport (records.new_report)")
        #: the raw bytes of the record being checked (set by the readers when ``rules.keep_all``)
        self.raw: bytes | None = None
        # repeated_ids="all": id -> every (file index, position, raw record) that claimed it
        self._claims: dict[str, list[tuple[int, int, str | None]]] = {}
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
        if self.rules.keep_all:
            self.set_aside.append(SetAside(where, reason, detail, doc_id, raw_text(self.raw), (self._file_idx, pos)))

    def check_ids(self, pos: int, values: Mapping[str, Any], names: Sequence[str], kind: str = "field") -> str | None:
        """The record's id from its id ``names`` (``kind``: JSON ``"field"`` s or Parquet ``"column"`` s),
        or None after :meth:`invalid` (a bad id, none, or ids that disagree), by :attr:`rules`."""
        rules = self.rules
        if rules.id_fields is not None and len(names) > 1:
            names = [n for n in rules.id_fields if n in names] + [n for n in names if n not in rules.id_fields]
        ids: dict[str, str] = {}
        for name in names:
            v = values.get(name)
            if v is None:
                continue
            if rules.any_id_value:
                ids[name] = str(v) if kind == "column" else _id_text(v)
            elif kind == "column":
                if v.strip():
                    ids[name] = v
            elif isinstance(v, str) and v.strip():
                ids[name] = v
            elif isinstance(v, int) and not isinstance(v, bool):
                ids[name] = str(v)
            else:
                self.invalid(pos, "bad id", f"field {name!r} must be a non-empty string or an integer, got "
                             f"{type(v).__name__} {v!r}")
                return None
        if not ids:
            listed = " or ".join(map(repr, names))
            self.invalid(pos, "missing id", rules.missing_id if rules.missing_id is not None else
                         f"column {listed} is null or empty" if kind == "column" else
                         f"missing document id field {listed}")
            return None
        if len(set(ids.values())) > 1:
            if rules.conflict_suffix is None:
                word, suffix = f"{kind}s", f"; give one id {kind} (or equal values)"
            else:
                word, suffix = "fields", rules.conflict_suffix
            self.invalid(pos, "conflicting ids", f"{word} " + " and ".join(f"{k!r} = {v!r}" for k, v in ids.items())
                         + " disagree" + suffix, ids.get(DOC_ID) if rules.conflict_id else None)
            return None
        return next(iter(ids.values()))

    def accept(self) -> None:
        """A record whose id is all that is checked (``rules.documents`` False): counted as emitted."""
        self.report.emitted += 1

    def settle(self) -> None:
        """Once every record was read: with ``rules.repeated_ids="all"``, every record of a repeated id is
        invalid (withdrawn from the emitted ones), the message counting them."""
        if self.rules.repeated_ids != "all":
            return
        claims, self._claims = self._claims, {}
        for doc_id, recs in claims.items():
            if len(recs) < 2:
                continue
            places = ", ".join(self.where(pos, fi).rsplit(", ", 1)[-1] for fi, pos, _ in recs[:5])
            detail = (f"duplicate {DOC_ID} {doc_id!r} ({len(recs)} records: {places}{', ...' if len(recs) > 5 else ''})"
                      + self.rules.repeated_suffix)
            for fi, pos, text in recs:
                self.report.emitted -= 1
                if self.on_invalid == "error":
                    raise DuplicateIdError(f"{self.where(pos, fi)} (document {doc_id!r}): {detail}")
                self.report.quarantine(doc_id, "duplicate id")
                if self.rules.keep_all:
                    self.set_aside.append(SetAside(self.where(pos, fi), "duplicate id", detail, doc_id, text, (fi, pos)))

    def exclude(self, reason: str) -> None:
        self.report.exclude(reason)

    def claim_id(self, pos: int, doc_id: str) -> bool:
        """Record ``doc_id``; a repeated id is invalid (False when it was quarantined; with
        ``rules.repeated_ids="all"`` known only at :meth:`settle`)."""
        if not self.check_duplicates:
            return True
        if self.rules.repeated_ids == "all":
            self._claims.setdefault(doc_id, []).append((self._file_idx, pos, raw_text(self.raw)))
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
            aliases = tax.label_aliases()  # a polyhierarchy's concepts, a vocabulary's notations
            unknown = [lab for lab in labels if lab not in known and lab not in aliases]
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
                    self._set_aside(pos, doc_id, "unknown label", f"label {unknown[0]!r} is not a label of the taxonomy")
                    return None
                for lab in unknown:
                    rep.drop_label(doc_id, lab)
                bad = set(unknown)
                labels = [lab for lab in labels if lab not in bad]
            if aliases and labels:  # each label -> the nodes it stands for (every position of a concept)
                labels = list(dict.fromkeys(n for lab in labels for n in aliases.get(lab, (lab,))))
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
                self._set_aside(pos, doc_id, "empty document", f"document {doc_id!r} is empty (no text and no tokens)")
                return None
            rep.empty_kept += 1
        if not labels:
            rep.no_labels += 1
        rep.emitted += 1
        self._rows.append((doc_id, text, tokens, labels, split, fold))
        if len(self._rows) >= self.batch_size:
            return self.flush()
        return None

    def _set_aside(self, pos: int, doc_id: str, reason: str, detail: str) -> None:
        """A well-formed document quarantined by a document check (``on_empty``, ``unknown_labels``)."""
        self.report.quarantine(doc_id, reason)
        if self.rules.keep_all:
            self.set_aside.append(SetAside(self.where(pos), reason, detail, doc_id, raw_text(self.raw),
                                           (self._file_idx, pos)))

    def add_clean(self, clean: CleanBatch) -> None:
        """Count the documents of a clean batch (:func:`jsonl_clean_batch`) as :meth:`add` counts each."""
        self.report.emitted += clean.batch.num_rows
        self.report.empty_kept += clean.empty_kept
        self.report.no_labels += clean.no_labels

    def known_labels(self) -> frozenset[str]:
        """The names a label may take as they are: the taxonomy's nodes but the root and virtual ones
        (and the positions of a polyhierarchy's concepts; the other names a label may take, mapped to
        nodes, are :meth:`~sparkhc.taxonomy.Taxonomy.label_aliases`)."""
        known = self._known_labels
        if known is None:
            tax = self.taxonomy
            assert tax is not None
            known = self._known_labels = tax.label_names()
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


def _run(sink: RecordSink, records: Iterable[pa.RecordBatch | None]) -> Batches:
    """Drive a reader's record loop, yield the full batches, flush and close the report."""
    for batch in records:
        if batch is not None:
            yield batch
    sink.settle()
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


def file_bytes(data: bytes, name: str) -> bytes:
    """A whole file's bytes as :func:`open_maybe_gzip` reads them: gzip data (by its magic bytes)
    decompressed, a ``.gz`` name that is not gzip data an error naming the file."""
    if data[:2] == b"\x1f\x8b":
        try:
            return gzip.decompress(data)
        except (EOFError, OSError, zlib.error) as e:
            raise InputDataError(f"{name}: read error (corrupt or truncated gzip data?): {e}") from None
    if name.endswith(".gz"):
        raise InputDataError(f"{name}: has a .gz suffix but is not gzip data")
    return data


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


#: the name the format modules and the executors have used for the sink
_Sink = RecordSink
