"""The input formats of raw documents: one module each, registered by name.

Every module of this package with a module-level ``FORMAT`` (an :class:`InputFormat`) is an input
format: the built-in ones (``parquet``, ``jsonl``, ``labeldirs``, ``lyrl2004``) and any module added
here, found when the package is imported. The driver-side reader (:func:`sparkhc.corpus.readers.read_any`)
and the executors (:mod:`sparkhc.spark.sources`) both choose and read formats through this registry,
and every format's record checks are built on the one core, :mod:`sparkhc.corpus.records`
(``docs/architecture.md``, "Adding an input format").
"""

from __future__ import annotations

import importlib
import pkgutil

from sparkhc.corpus.formats import jsonl, labeldirs, lyrl2004, parquet
from sparkhc.corpus.formats.base import (
    InputFormat,
    all_formats,
    detect_local,
    file_formats,
    folder_format,
    format_of_file,
    get,
    read_files,
    register,
    unknown_input,
    unregister,
)

__all__ = ["InputFormat", "all_formats", "detect_local", "file_formats", "folder_format", "format_of_file", "get", "read_files",
           "register", "unknown_input", "unregister"]

for _module in (parquet, jsonl, labeldirs, lyrl2004):
    register(_module.FORMAT)


def _discover() -> None:
    """Register the ``FORMAT`` of every other module of the package (a format added as one module)."""
    builtin = {"base", "jsonl", "labeldirs", "lyrl2004", "parquet"}
    for info in pkgutil.iter_modules(__path__):
        if info.name in builtin or info.name.startswith("_"):
            continue
        fmt = getattr(importlib.import_module(f"{__name__}.{info.name}"), "FORMAT", None)
        if isinstance(fmt, InputFormat):
            register(fmt)


_discover()
