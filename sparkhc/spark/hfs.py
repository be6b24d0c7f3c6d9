"""The input paths as Spark sees them: Hadoop URIs, and the read-only look at the files Spark will
read (exists, list, size, first bytes), through Hadoop's FileSystem API in the JVM
(``spark._jvm.org.apache.hadoop.fs``), so they work on every file system Spark reads: ``file:``,
``hdfs:``, ``s3a:`` (once the cluster has the connector), ... Every file the driver writes, and
every folder it reads itself, goes through :mod:`sparkhc.fsio` (the one file-system layer).

A path without a scheme is a local path (as sparkhc always took it), made absolute:
``data/docs.jsonl`` -> ``file:/abs/data/docs.jsonl``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from sparkhc.errors import InputDataError

# the package's one test of "is this a URI" and its local-path counterpart (re-exported)
from sparkhc.fsio import has_scheme as has_scheme
from sparkhc.fsio import local_path as local_path


def qualify(spark: SparkSession, path: str | Path) -> str:
    """The URI of ``path``: URIs as given, local paths as absolute ``file:`` URIs (Hadoop's spelling
    ``file:/abs``, the one Spark reports in ``input_file_name()``). ``..`` and ``.`` are collapsed
    as Hadoop's ``Path`` does (``../data/x`` from ``/w/proj`` is ``file:/w/data/x``), so the URI
    equals the one Spark reports for the file."""
    p = str(path)
    if has_scheme(p):
        return p
    return "file:" + Path(os.path.abspath(p)).as_posix()


def _fs(spark: SparkSession, uri: str) -> tuple[Any, Any]:
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    hpath = jvm.org.apache.hadoop.fs.Path(uri)
    conf = spark.sparkContext._jsc.hadoopConfiguration()  # type: ignore[union-attr]
    return hpath.getFileSystem(conf), hpath


def exists(spark: SparkSession, uri: str) -> bool:
    fs, p = _fs(spark, uri)
    return bool(fs.exists(p))


def is_dir(spark: SparkSession, uri: str) -> bool:
    fs, p = _fs(spark, uri)
    return bool(fs.exists(p) and fs.getFileStatus(p).isDirectory())


def list_files(spark: SparkSession, uri: str) -> list[str]:
    """The regular files directly in directory ``uri``, sorted by name (URIs)."""
    fs, p = _fs(spark, uri)
    return sorted(str(st.getPath().toString()) for st in fs.listStatus(p) if st.isFile())


def list_status(spark: SparkSession, uri: str) -> list[tuple[str, str, int]]:
    """The entries of directory ``uri``: (name, ``"dir"`` | ``"file"`` | ``"other"``, length in bytes)."""
    fs, p = _fs(spark, uri)
    out = []
    for st in fs.listStatus(p):
        kind = "dir" if st.isDirectory() else "file" if st.isFile() else "other"
        out.append((str(st.getPath().getName()), kind, int(st.getLen())))
    return out


def list_tree(spark: SparkSession, uri: str) -> list[tuple[str, int]]:
    """Every regular file below directory ``uri`` (recursively): (URI, length in bytes)."""
    fs, p = _fs(spark, uri)
    it = fs.listFiles(p, True)
    out = []
    while it.hasNext():
        st = it.next()
        out.append((str(st.getPath().toString()), int(st.getLen())))
    return out


def qualified(spark: SparkSession, uri: str) -> str:
    """``uri`` as its file system spells it (scheme and authority filled in, e.g. the name node's port):
    the form of the paths Spark's file listing reports."""
    fs, p = _fs(spark, uri)
    return str(fs.makeQualified(p).toString())


def size(spark: SparkSession, uri: str) -> int:
    """The length of file ``uri`` in bytes."""
    fs, p = _fs(spark, uri)
    return int(fs.getFileStatus(p).getLen())


def head(spark: SparkSession, uri: str, n: int) -> bytes:
    """The first ``n`` bytes of a file (fewer when it is shorter)."""
    fs, p = _fs(spark, uri)
    stream = fs.open(p)
    try:
        out = bytearray()
        while len(out) < n:
            b = stream.read()
            if b < 0:
                break
            out.append(b)
        return bytes(out)
    finally:
        stream.close()


def check_gzip_suffix(spark: SparkSession, uri: str, name: str) -> None:
    """Hadoop decompresses by suffix: a ``.gz`` file must hold gzip data and gzip data must be
    named ``.gz`` (errors name the file, as the driver-side reader does)."""
    fs, p = _fs(spark, uri)
    if not fs.exists(p):
        raise InputDataError(f"{name}: file not found")
    if fs.getFileStatus(p).isDirectory():
        raise InputDataError(f"{name}: is a directory, expected a file")
    magic = head(spark, uri, 2) == b"\x1f\x8b"
    if uri.endswith(".gz") and not magic:
        raise InputDataError(f"{name}: has a .gz suffix but is not gzip data")
    if magic and not uri.endswith(".gz"):
        raise InputDataError(f"{name}: holds gzip data but its name does not end in .gz (Spark's readers "
                             "decompress by suffix); rename it to end in .gz")
