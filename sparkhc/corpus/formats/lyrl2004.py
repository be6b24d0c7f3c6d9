"""RCV1-v2 LYRL2004 token files joined with a topic qrels file (the ``lyrl2004`` input format)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Literal

import pyarrow as pa

from sparkhc.corpus.formats.base import InputFormat
from sparkhc.corpus.records import (
    DEFAULT_BATCH_SIZE,
    Batches,
    OnEmpty,
    OnInvalid,
    ReadReport,
    UnknownLabels,
    _as_paths,
    _check_choice,
    _run,
    _Sink,
    iter_lines,
)
from sparkhc.errors import InputDataError
from sparkhc.taxonomy import Taxonomy

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


def lyrl_record(sink: _Sink, pos: int, doc_id: str, tokens: list[str], saw_w: bool, split: str | None,
                labels: Sequence[str] | None, missing_labels: str, qrels_src: str) -> pa.RecordBatch | None:
    """The checks at the end of one ``.I`` block (its id claimed): a ``.W`` line, the qrels labels
    (``None``: the document has no qrels line, see ``missing_labels`` of :func:`read_lyrl2004`), then the
    core's. Shared by :func:`read_lyrl2004` and the executors of :mod:`sparkhc.spark.sources`."""
    if not saw_w:
        sink.invalid(pos, "malformed block", "'.I' block without a '.W' line", doc_id)
        return None
    if labels is None:
        if missing_labels == "error":
            raise InputDataError(
                f"{sink.where(pos)}: document {doc_id!r} has no line in the qrels {qrels_src}; pass "
                "missing_labels='empty' or 'quarantine' to accept or set aside such documents"
            )
        if missing_labels == "quarantine":
            sink.report.quarantine(doc_id, "no qrels")
            return None
        labels = []
    return sink.add(pos, doc_id, None, tokens, list(labels), split, None)


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
        return lyrl_record(sink, pos, doc_id, tokens, saw_w, split, qrels_map.get(doc_id), missing_labels, qrels_src)

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


FORMAT = InputFormat("lyrl2004", described="LYRL2004 token files are read with read_lyrl2004 and a qrels file",
                     order=95, detected=False, read=read_lyrl2004, scan="lyrl blocks", unit="line")
