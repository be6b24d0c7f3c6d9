"""JSON Lines: one JSON object a line, optionally gzip (the ``jsonl`` input format)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from sparkhc.batch import DOC_ID, ID_ALIAS
from sparkhc.corpus.formats.base import InputFormat
from sparkhc.corpus.records import (
    _INT32_MAX,
    _UNLABELLED_HINT,
    DEFAULT_BATCH_SIZE,
    RAW_SCHEMA,
    Batches,
    CleanBatch,
    FoldTable,
    OnEmpty,
    OnInvalid,
    ReadReport,
    RecordRules,
    UnknownLabels,
    _as_paths,
    _run,
    _Sink,
    iter_lines,
    new_report,
)
from sparkhc.taxonomy import Taxonomy


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
    rules: RecordRules | None = None,
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
        ``--class-spaces`` (:meth:`sparkhc.class_spaces.ClassSpaces.candidate_labels`).
    on_empty : {"error", "keep", "quarantine"}
        A document with no text (or only whitespace) and no tokens.
    on_invalid : {"error", "quarantine"}
        Malformed JSON, non-object lines, missing/ill-typed fields, non-UTF-8 bytes, duplicate ids.
    check_duplicates : bool
        Keep every id seen to detect duplicates (one int per document).
    batch_size : int
        Rows per record batch.
    rules : RecordRules, optional
        The core's rules (default :data:`~sparkhc.corpus.records.FEATURIZE_RULES`); reclassify's scan
        of a partition passes :data:`~sparkhc.corpus.records.RECLASSIFY_RULES`.

    Returns
    -------
    (iterator of pyarrow.RecordBatch, ReadReport)
        Batches follow :data:`RAW_SCHEMA`; the report is complete once the iterator is exhausted.
    """
    files = _as_paths(paths)
    report = new_report(rules, source or ", ".join(str(p) for p in files))
    sink = _Sink(report, batch_size, taxonomy, unknown_labels, on_empty, on_invalid, allowed_labels,
                 ancestors, check_duplicates, rules)
    keep_raw = sink.rules.keep_all
    text_fields = tuple(text_fields)

    def records() -> Iterator[pa.RecordBatch | None]:
        used_fold_ids: set[str] = set()
        for path in files:
            sink.set_file(str(path), "line")
            for no, offset, raw in iter_lines(path):
                if not raw.strip():
                    continue
                report.read += 1
                if keep_raw:
                    sink.raw = raw
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


@dataclass(frozen=True)
class LineFailure:
    """Why a JSON Lines line is not a JSON object (:func:`parse_json_line`): the reason it is counted
    under, the readers' message, and for bytes that are not UTF-8 the index of the first bad byte."""

    reason: str  # "not UTF-8" | "malformed JSON" | "not a JSON object"
    detail: str
    start: int = -1


def parse_json_line(raw: bytes, offset: str, strip_bom: bool, surrogates: bool = True) -> dict[str, Any] | LineFailure:
    """Decode and parse one non-blank JSON Lines line (``raw``, its line break included or not): the
    JSON object, or why it is not one. ``offset`` is the line's byte offset in the (decompressed)
    stream as text; ``strip_bom``: a byte order mark at the start is dropped (a file's first line);
    ``surrogates``: a lone UTF-16 surrogate escape (no UTF-8 text can hold it) is malformed. The one
    parse of JSON lines: :func:`jsonl_object` (featurize, on the driver and the executors) and the
    bad-record scan of :mod:`sparkhc.spark.reclassify`."""
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        at = f"{offset} + {e.start}" if not offset.isdigit() else str(int(offset) + e.start)
        return LineFailure("not UTF-8", f"not valid UTF-8: byte 0x{raw[e.start]:02x} at byte offset {at} "
                           f"(column {e.start + 1} of the line)", e.start)
    if strip_bom and line.startswith("\ufeff"):
        line = line[1:]
    try:
        obj = json.loads(line.rstrip("\r\n"))
    except json.JSONDecodeError as e:
        return LineFailure("malformed JSON", f"malformed JSON: {e.msg} at column {e.colno}")
    except RecursionError:
        return LineFailure("malformed JSON", "malformed JSON: nested too deeply to read (arrays or objects "
                           "beyond Python's recursion limit)")
    if surrogates and "\\u" in line and _SURROGATE_ESCAPE.search(line) and not _utf8_encodable(obj):
        m = _SURROGATE_ESCAPE.search(line)
        assert m is not None
        return LineFailure("malformed JSON", f"malformed JSON: a lone UTF-16 surrogate escape {m.group(0)!r} at "
                           f"column {m.start() + 1} (no UTF-8 text can hold it)")
    if not isinstance(obj, dict):
        return LineFailure("not a JSON object", f"expected a JSON object, got {_type_name(obj)}")
    return obj


def jsonl_object(sink: _Sink, no: int, raw: bytes, offset: str, first: bool) -> dict[str, Any] | None:
    """Decode and parse one non-blank JSON Lines line (``raw``, its line break included or not);
    ``None`` after :meth:`_Sink.invalid` when it is not a JSON object. ``offset`` is the line's byte
    offset in the (decompressed) stream as text, ``first`` whether it is the file's first line
    (which may start with a byte order mark). Shared by :func:`read_jsonl` and the executors of
    :mod:`sparkhc.spark.sources`."""
    rules = sink.rules
    got = parse_json_line(raw, offset, first or rules.bom_on_any_line, not rules.lone_surrogates)
    if isinstance(got, LineFailure):
        if rules.one_malformed_reason:
            sink.invalid(no, "malformed JSON", _malformed_line(raw, got))
        else:
            sink.invalid(no, got.reason, got.detail)
        return None
    return got


def _malformed_line(raw: bytes, got: LineFailure) -> str:
    """A line that is not a JSON object in the wording of :attr:`RecordRules.one_malformed_reason`."""
    if got.reason == "not UTF-8":
        return f"malformed line: not valid UTF-8 (byte 0x{raw[got.start]:02x} at column {got.start + 1})"
    if got.reason == "not a JSON object":
        return "malformed line: not a JSON object"
    return got.detail


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
    doc_id = sink.check_ids(no, obj, (id_field,) if id_field is not None else (ID_ALIAS, DOC_ID))
    if doc_id is None or not sink.claim_id(no, doc_id):
        return None
    if not sink.rules.documents:
        sink.accept()
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

    if sink.ancestors:
        return None
    screened = _clean_lines(lines)
    if screened is None:
        return None
    records, text = screened
    n = len(text)
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
    table = _clean_table(text, id_names, fixed, id_types)
    if table is None:
        return None

    def col(name: str) -> pa.Array:
        return table.column(name).chunk(0) if table.column(name).num_chunks else pa.array([], table.schema.field(name).type)

    ids = _clean_ids([col(name) for name in id_names])
    if ids is None:
        return None
    doc_text = _joined_text([col(f) for f in text_fields], n)
    tokens = col(tokens_field) if tokens_field is not None else pa.nulls(n, str_list)
    if pc.list_flatten(tokens).null_count:
        return None
    labels = col(labels_field)
    if labels.null_count:
        if require_labels:
            return None
        labels = labels.fill_null(pa.scalar([], str_list))
    flat = pc.list_flatten(labels)
    if flat.null_count or _any_true(pc.equal(flat, "")):
        return None
    split = col(split_field) if split_field is not None else pa.nulls(n, pa.string())
    if split_values is not None and len(split):
        enc = split.dictionary_encode()
        mapped = pa.array([split_values.get(v, v) for v in enc.dictionary.to_pylist()], pa.string())
        split = mapped.take(enc.indices)
    fold = _clean_fold(ids, folds, col(fold_field) if fold_field is not None and folds is None else None, n)
    if fold is None:
        return None
    lengths = pc.list_value_length(labels).to_numpy(zero_copy_only=False)
    uniq = _clean_labels(sink, flat, lengths, n)
    if uniq is None:
        return None
    has_tokens = pc.fill_null(pc.greater(pc.list_value_length(tokens), 0), False)
    has_text = pc.fill_null(_not_blank(doc_text), False)
    empty = int(pc.sum(pc.invert(pc.or_(has_tokens, has_text))).as_py() or 0)
    if empty and sink.on_empty != "keep":
        return None
    batch = pa.RecordBatch.from_arrays([ids, doc_text, tokens.cast(str_list), labels.cast(str_list), split, fold],
                                       schema=RAW_SCHEMA)
    return CleanBatch(records, batch, empty, int(np.count_nonzero(lengths == 0)), uniq)


def _clean_lines(lines: pa.Array) -> tuple[Any, pa.Array] | None:
    """``(records, text)``: which lines hold a record (not blank) and their text, when all are
    UTF-8 and none trips a screen of the clean path (None otherwise)."""
    import numpy as np
    import pyarrow.compute as pc

    try:
        text = lines.cast(pa.string())  # validates UTF-8
    except pa.ArrowInvalid:
        return None
    records = np.asarray(pc.invert(pc.match_substring_regex(text, _BLANK)).to_numpy(zero_copy_only=False), bool)
    if int(records.sum()) == 0:
        return None
    text = text.filter(pa.array(records))
    if pc.any(pc.match_substring_regex(text, _CLEAN_SCREEN)).as_py():
        return None
    if pc.max(pc.count_substring_regex(text, r"[\[{]")).as_py() >= _CLEAN_MAX_BRACKETS:
        return None
    return records, text


def _clean_table(text: pa.Array, id_names: tuple[str, ...], fixed: list[tuple[str, pa.DataType]],
                 id_types: list[pa.DataType]) -> pa.Table | None:
    """The records parsed by pyarrow's JSON reader with the fields' types, the id columns' types
    tried from the last that parsed (``id_types``, updated); None when no combination parses every
    record."""
    import pyarrow.compute as pc
    import pyarrow.json as pajson

    n = len(text)
    data = pc.binary_join(pa.ListArray.from_arrays(pa.array([0, n], pa.int32()), text.cast(pa.binary())),
                          b"\n")[0].as_buffer()
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
    return table.combine_chunks()


def _any_true(mask: pa.Array) -> bool:
    import pyarrow.compute as pc

    return bool(pc.any(pc.fill_null(mask, False)).as_py())


def _not_blank(values: pa.Array) -> pa.Array:
    """str.strip() of each (non-null) value is not empty: an ASCII printable character, else exactly."""
    import numpy as np
    import pyarrow.compute as pc

    keep = pc.match_substring_regex(values, _PRINTABLE)
    unsure = pc.fill_null(pc.and_(pc.is_valid(values), pc.invert(keep)), False)
    if _any_true(unsure):
        idx = np.flatnonzero(unsure.to_numpy(zero_copy_only=False))
        exact = keep.to_numpy(zero_copy_only=False).astype(bool)
        vals = values.take(pa.array(idx)).to_pylist()
        exact[idx] = [bool(v.strip()) for v in vals]
        keep = pa.array(exact)
    return keep


def _clean_ids(columns: list[pa.Array]) -> pa.Array | None:
    """The ids (:func:`_jsonl_record`): each set field a non-blank string or an integer, the same
    value in all, none missing (None otherwise)."""
    import pyarrow.compute as pc

    ids = None
    for c in columns:
        if pa.types.is_string(c.type):
            if _any_true(pc.and_(pc.is_valid(c), pc.invert(_not_blank(c)))):
                return None
        else:
            c = c.cast(pa.string())
        if ids is None:
            ids = c
        else:
            if _any_true(pc.not_equal(ids, c)):
                return None
            ids = pc.coalesce(ids, c)
    assert ids is not None
    return None if ids.null_count else ids


def _joined_text(columns: list[pa.Array], n: int) -> pa.Array:
    """A document's text: its set, non-empty text fields joined with "\\n" (null when none is)."""
    import pyarrow.compute as pc

    parts = [pc.if_else(pc.equal(c, ""), pa.scalar(None, pa.string()), c) for c in columns]
    if not parts:
        return pa.nulls(n, pa.string())
    if len(parts) == 1:
        return parts[0]
    present = pc.is_valid(parts[0])
    for p in parts[1:]:
        present = pc.or_(present, pc.is_valid(p))
    joined = pc.binary_join_element_wise(*parts, "\n", null_handling="skip")
    return pc.if_else(present, joined, pa.scalar(None, pa.string()))


def _clean_fold(ids: pa.Array, folds: FoldTable | None, f64: pa.Array | None, n: int) -> pa.Array | None:
    """Each record's fold: from ``folds`` by id (None when one is missing), from the fold field
    ``f64`` (None when one is out of the int32 range), else null."""
    import pyarrow.compute as pc

    if folds is not None:
        fold_values = [folds.get(i) for i in ids.to_pylist()]
        if None in fold_values:
            return None
        return pa.array(fold_values, pa.int32())
    if f64 is not None:
        if _any_true(pc.or_(pc.greater(f64, _INT32_MAX), pc.less(f64, -_INT32_MAX))):
            return None
        return f64.cast(pa.int32())
    return pa.nulls(n, pa.int32())


def _clean_labels(sink: _Sink, flat: pa.Array, lengths: Any, n: int) -> list[str] | None:
    """The distinct labels of the batch; None when one is repeated in a record, restricted or unknown
    (:meth:`_Sink.add`: the reference path's to count)."""
    import numpy as np

    if not len(flat):
        return []
    enc = flat.dictionary_encode()
    uniq: list[str] = enc.dictionary.to_pylist()
    codes = np.asarray(enc.indices.to_numpy(zero_copy_only=False), np.int64)
    rows = np.repeat(np.arange(n, dtype=np.int64), lengths)
    if len(np.unique(rows * len(uniq) + codes)) != len(codes):
        return None
    if sink.allowed is not None and not sink.allowed.issuperset(uniq):
        return None
    if sink.taxonomy is not None and not sink.known_labels().issuperset(uniq):
        return None
    return uniq


def _id_type_combos(k: int) -> list[tuple[pa.DataType, ...]]:
    import itertools

    return list(itertools.product((pa.int64(), pa.string()), repeat=k))


JSONL_SUFFIXES = (".jsonl", ".jsonl.gz", ".json", ".json.gz", ".ndjson", ".ndjson.gz")

FORMAT = InputFormat("jsonl", suffixes=JSONL_SUFFIXES, described=".jsonl(.gz)", order=20, read=read_jsonl,
                     scan="lines", unit="line")
