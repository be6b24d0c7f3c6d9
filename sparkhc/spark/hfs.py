"""Paths as Hadoop URIs, and the few file-system operations the driver does, through Hadoop's
FileSystem API in the JVM (``spark._jvm.org.apache.hadoop.fs``), so they work on every file system
Spark reads: ``file:``, ``hdfs:``, ``s3a:`` (once the cluster has the connector), ...

A path without a scheme is a local path (as sparkhc always took it), made absolute:
``data/docs.jsonl`` -> ``file:/abs/data/docs.jsonl``.
"""

from __future__ import annotations

import os
import shutil
import uuid
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


def delete(spark: SparkSession, uri: str) -> None:
    fs, p = _fs(spark, uri)
    fs.delete(p, True)


def mkdirs(spark: SparkSession, uri: str) -> None:
    fs, p = _fs(spark, uri)
    fs.mkdirs(p)


def rename(spark: SparkSession, src: str, dst: str) -> None:
    """Rename ``src`` to ``dst`` (which must not exist); raises OSError when the file system refuses."""
    fs, p = _fs(spark, src)
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    if not fs.rename(p, jvm.org.apache.hadoop.fs.Path(dst)):
        raise OSError(f"cannot rename {src} to {dst}")


def write_bytes(spark: SparkSession, uri: str, data: bytes) -> None:
    """Create (or overwrite) the file ``uri`` with ``data``."""
    fs, p = _fs(spark, uri)
    stream = fs.create(p, True)
    try:
        stream.write(bytearray(data))
    finally:
        stream.close()


# ---------------------------------------------------------------------------------------- outputs
class OutputFs:
    """The driver's file operations on an output folder: local paths (and ``file:`` URIs) with
    :mod:`os` (renames are atomic on a POSIX file system), any other URI with :mod:`pyarrow.fs`
    (``hdfs://`` through libhdfs, ``s3a://`` / ``s3://`` through pyarrow's S3 client; on an object
    store a rename is a copy, so the publish is not atomic there). ``uri`` is what Spark writes to."""

    def __init__(self, target: str | os.PathLike[str]) -> None:
        t = os.fspath(target)
        local = local_path(t)
        self.local = local is not None
        if local is not None:
            self.root = str(local.absolute())
            self.uri = Path(self.root).as_uri()
            self._fs: Any = None
        else:
            from sparkhc import fsio

            self.uri = t.rstrip("/")
            self._fs, self.root = fsio.resolve(t)

    def sibling(self, suffix: str) -> OutputFs:
        """The folder next to this one named ``<name><suffix>``."""
        out = object.__new__(OutputFs)
        out.local, out._fs = self.local, self._fs
        out.root, out.uri = self.root + suffix, self.uri + suffix
        return out

    def child(self, name: str) -> str:
        return f"{self.root}/{name}"

    def child_uri(self, name: str) -> str:
        return f"{self.uri}/{name}"

    def exists(self, path: str | None = None) -> bool:
        p = self.root if path is None else path
        if self.local:
            return Path(p).exists()
        import pyarrow.fs as pafs

        return bool(self._fs.get_file_info(p).type != pafs.FileType.NotFound)

    def makedirs(self) -> None:
        if self.local:
            Path(self.root).mkdir(parents=True)
        else:
            self._fs.create_dir(self.root, recursive=True)

    def listdir(self, path: str) -> list[str]:
        if self.local:
            return sorted(os.listdir(path))
        import pyarrow.fs as pafs

        return sorted(i.base_name for i in self._fs.get_file_info(pafs.FileSelector(path)))

    def remove(self, path: str) -> None:
        if self.local:
            os.remove(path)
        else:
            self._fs.delete_file(path)

    def replace_file(self, src: str, dst: str) -> None:
        if self.local:
            os.replace(src, dst)
        else:
            self._fs.move(src, dst)

    def filesystem(self) -> Any:
        """The pyarrow file system for :mod:`pyarrow.parquet` (None: local paths)."""
        return self._fs

    def write_bytes(self, path: str, data: bytes) -> None:
        if self.local:
            Path(path).write_bytes(data)
        else:
            with self._fs.open_output_stream(path) as f:
                f.write(data)

    def sha256(self, path: str) -> str:
        if self.local:
            from sparkhc.fsio import sha256_file

            return sha256_file(path)
        import hashlib

        h = hashlib.sha256()
        with self._fs.open_input_stream(path) as f:
            while chunk := f.read(1 << 20):
                h.update(chunk)
        return h.hexdigest()

    def rmtree(self) -> None:
        """Remove this folder, ignoring errors (cleanup after a failure)."""
        if self.local:
            shutil.rmtree(self.root, ignore_errors=True)
            return
        try:
            self._fs.delete_dir(self.root)
        except Exception:  # noqa: S110 -- best effort cleanup
            pass

    def publish(self, dst: OutputFs) -> None:
        """Move this folder to ``dst``, replacing an existing ``dst`` with two renames
        (:func:`sparkhc.persistence.replace_dir` for local paths)."""
        if self.local:
            from sparkhc.fsio import replace_dir

            replace_dir(Path(self.root), Path(dst.root))
            return
        if not dst.exists():
            self._fs.move(self.root, dst.root)
            return
        old = dst.sibling(f".old-{uuid.uuid4().hex[:12]}")
        self._fs.move(dst.root, old.root)
        try:
            self._fs.move(self.root, dst.root)
        except BaseException:
            self._fs.move(old.root, dst.root)
            raise
        old.rmtree()
