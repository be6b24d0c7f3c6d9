"""What an input format of raw documents declares (:class:`InputFormat`), the registry of formats and
the generic reader of a format whose files are read whole (``scan="files"``).

A format is one module of :mod:`sparkhc.corpus.formats` with a module-level ``FORMAT``; the package
registers every such module when it is imported. Both adapters look formats up here: the driver-side
reader (:func:`sparkhc.corpus.readers.read_any`) and the executors (:mod:`sparkhc.spark.sources`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from sparkhc.corpus.records import (
    DEFAULT_BATCH_SIZE,
    Batches,
    OnEmpty,
    OnInvalid,
    ReadReport,
    RecordSink,
    UnknownLabels,
    _as_paths,
    _run,
    file_bytes,
)
from sparkhc.errors import InputDataError
from sparkhc.taxonomy import Taxonomy

#: ``split(data)``: a file's bytes (gzip already decompressed) -> ``(position, record)`` pairs, the
#: position 1-based (messages say ``FILE, <unit> <position>``)
Split = Callable[[bytes], Iterable[tuple[int, Any]]]
#: ``check(sink, position, record, options)``: one record's checks on the core (``sink.invalid``,
#: ``sink.claim_id``, ``sink.add``); ``options``: ``require_labels`` and the format's own options
Check = Callable[[RecordSink, int, Any, Mapping[str, Any]], "pa.RecordBatch | None"]


@dataclass(frozen=True)
class InputFormat:
    """An input format of raw documents: its name, how it is recognised, its driver-side reader and
    how the executors read it.

    Attributes
    ----------
    name : str
        The registry name (``"jsonl"``, ``"parquet"``, ...).
    suffixes : tuple of str
        File names it reads: a file with such a name, or the files with such names in a folder.
    magic : bytes
        The first bytes of a file of this format whatever its name (Parquet's ``PAR1``); empty: none.
    described : str
        How the error for an input of no known format names it (``".jsonl(.gz)"``).
    order : int
        Detection order (lower first): Parquet 10, JSON Lines 20, new formats 50 by default, the
        label-directory folder (a fallback) 90.
    recursive : bool
        In a folder, its files are found in sub-folders too (hidden names left out).
    folder : bool
        A folder whose layout is the format (label directories): picked for a folder that holds no
        file of the file formats; ``read`` takes the folder.
    detected : bool
        Whether :func:`sparkhc.corpus.readers.read_any` may pick it (LYRL2004 token files need a qrels
        file: read with their own reader); when not, ``described`` is a note added to the error.
    takes_labels : bool
        Its records carry labels that may be missing (``require_labels`` applies); label directories
        do not (the directories are the labels).
    read : callable
        The driver-side reader: ``read(files or folder, **options) -> (batches, report)``. Formats
        with ``split`` and ``check`` get :func:`read_files` bound to them when it is None.
    scan : str
        How Spark's executors get the records (:mod:`sparkhc.spark.sources`): ``"lines"`` (JSON
        Lines), ``"rows"`` (Parquet), ``"label files"``, ``"lyrl blocks"``, or ``"files"``: every
        file read whole (Spark's ``binaryFile`` source) and split by ``split``, each record checked
        by ``check`` -- the same two functions as the driver-side reader.
    split, check : callable, optional
        The record functions of a ``"files"`` format (:data:`Split`, :data:`Check`).
    unit : str or None
        What a record is in messages (``"line"``, ``"row"``, ``"record"``; None: the file).
    """

    name: str
    suffixes: tuple[str, ...] = ()
    magic: bytes = b""
    described: str = ""
    order: int = 50
    recursive: bool = False
    folder: bool = False
    detected: bool = True
    takes_labels: bool = True
    read: Callable[..., tuple[Batches, ReadReport]] | None = None
    scan: str = "files"
    split: Split | None = None
    check: Check | None = None
    unit: str | None = "record"

    def reader(self) -> Callable[..., tuple[Batches, ReadReport]]:
        """The driver-side reader (:func:`read_files` for a ``"files"`` format without its own)."""
        if self.read is not None:
            return self.read
        if self.split is None or self.check is None:
            raise ValueError(f"input format {self.name!r} has neither a reader nor split and check functions")
        return lambda paths, **options: read_files(self, paths, **options)

    def matches(self, name: str) -> bool:
        """Whether a file name is one of this format's."""
        return bool(self.suffixes) and name.endswith(self.suffixes)

    def files_in(self, folder: Path) -> list[Path]:
        """This format's files in a local folder, in reading order (none: the folder is not of it)."""
        if not self.suffixes:
            return []
        if self.recursive:
            return sorted(q for q in folder.rglob("*") if q.is_file() and self.matches(q.name)
                          and not q.name.startswith((".", "_")))
        return sorted(q for q in folder.iterdir() if q.is_file() and self.matches(q.name))


_REGISTRY: dict[str, InputFormat] = {}


def register(fmt: InputFormat) -> InputFormat:
    """Add ``fmt`` to the registry (a format of the same name is replaced); returns it."""
    if not isinstance(fmt, InputFormat):
        raise TypeError(f"expected an InputFormat, got {type(fmt).__name__}")
    _REGISTRY[fmt.name] = fmt
    return fmt


def unregister(name: str) -> None:
    """Remove a format from the registry (tests)."""
    _REGISTRY.pop(name, None)


def get(name: str) -> InputFormat:
    """The registered format ``name``."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown input format {name!r}; known: {sorted(_REGISTRY)}") from None


def all_formats() -> list[InputFormat]:
    """Every registered format in detection order."""
    return sorted(_REGISTRY.values(), key=lambda f: (f.order, f.name))


def file_formats() -> list[InputFormat]:
    """The detected formats that are files (not folder layouts), in detection order."""
    return [f for f in all_formats() if f.detected and not f.folder]


def folder_format() -> InputFormat | None:
    """The folder layout picked for a folder with no file of a file format (label directories)."""
    return next((f for f in all_formats() if f.detected and f.folder), None)


def unknown_input(path: object, notes: bool = True) -> InputDataError:
    """The error for an input of no known format (``notes``: with those of the formats not detected)."""
    expected = [f.described for f in all_formats() if f.detected and f.described]
    text = ", ".join(expected[:-1]) + " or " + expected[-1] if len(expected) > 1 else "".join(expected)
    extra = "".join(f"; {f.described}" for f in all_formats() if not f.detected and f.described) if notes else ""
    return InputDataError(f"{path}: unknown input format; expected {text}{extra}")


def format_of_file(name: str, head: Callable[[int], bytes]) -> InputFormat | None:
    """The format of a file: the first file format (in detection order) whose suffix it has or whose
    magic bytes it starts with (``head(n)``: the file's first ``n`` bytes, read only when needed)."""
    for f in file_formats():
        if f.matches(name) or (f.magic and head(len(f.magic)) == f.magic):
            return f
    return None


def detect_local(path: Path) -> tuple[InputFormat, list[Path]]:
    """The format of a local input and what it reads: for a folder, the files of the first file format
    found in it, else the folder layout with ``[path]``; for a file, its format and ``[path]``. Raises
    :class:`InputDataError` for a missing input or a file of no known format."""
    if path.is_dir():
        for fmt in file_formats():
            found = fmt.files_in(path)
            if found:
                return fmt, found
        folder = folder_format()
        if folder is None:
            raise unknown_input(path)
        return folder, [path]
    if not path.is_file():
        raise InputDataError(f"{path}: input not found")

    def head(n: int) -> bytes:
        with open(path, "rb") as f:
            return f.read(n)

    of_file = format_of_file(path.name, head)
    if of_file is None:
        raise unknown_input(path)
    return of_file, [path]


# ---------------------------------------------------------------------------------------- generic reader
def read_files(
    fmt: InputFormat,
    paths: str | Path | Iterable[str | Path],
    *,
    require_labels: bool = True,
    taxonomy: Taxonomy | None = None,
    unknown_labels: UnknownLabels = "error",
    on_empty: OnEmpty = "error",
    on_invalid: OnInvalid = "error",
    check_duplicates: bool = True,
    batch_size: int = DEFAULT_BATCH_SIZE,
    source: str | None = None,
    **format_options: Any,
) -> tuple[Batches, ReadReport]:
    """Read files of a ``"files"`` format on the driver: each file whole (gzip decompressed), split
    into records by ``fmt.split``, each record checked by ``fmt.check`` on a :class:`RecordSink`
    (ids, labels, unknown labels, empty documents and the report as for every reader)."""
    assert fmt.split is not None and fmt.check is not None
    files = _as_paths(paths)
    report = ReadReport(source=source or ", ".join(str(p) for p in files))
    sink = RecordSink(report, batch_size, taxonomy, unknown_labels, on_empty, on_invalid, None, False,
                      check_duplicates)
    options = {"require_labels": require_labels, **format_options}
    split, check = fmt.split, fmt.check

    def records() -> Iterator[pa.RecordBatch | None]:
        for path in files:
            sink.set_file(str(path), fmt.unit)
            for pos, record in split(file_bytes(path.read_bytes(), str(path))):
                report.read += 1
                yield check(sink, pos, record, options)

    return _run(sink, records()), report
