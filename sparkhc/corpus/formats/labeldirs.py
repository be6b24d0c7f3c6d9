"""One directory per label, one file per document (20 Newsgroups style; the ``labeldirs`` input format)."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
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
    _check_choice,
    _run,
    _Sink,
)
from sparkhc.errors import InputDataError
from sparkhc.taxonomy import Taxonomy

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


FORMAT = InputFormat("labeldirs", described="a directory (one sub-directory per label)", order=90, folder=True,
                     takes_labels=False, read=read_label_dirs, scan="label files", unit=None)
