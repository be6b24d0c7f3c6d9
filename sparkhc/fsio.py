"""Files at a URI through ``pyarrow.fs``: local paths, ``file://``, ``hdfs://``, ``s3://``, ``gs://``.

The one place that turns a location string into a ``(FileSystem, path)`` pair (:func:`resolve`) and
writes a file so that no reader ever sees part of it (:func:`write_atomic`):

* file systems with an atomic rename (local, HDFS): write a temporary sibling, then ``move`` it over
  the target;
* object stores (S3, GCS, ...): write the target key directly. An object becomes visible only when
  its upload completes, so a successful write is published whole; a write that fails is deleted
  before the error propagates (pyarrow completes the upload when a stream is closed, even on an
  error). Readers that must never meet even that short-lived object wait for a marker written
  after the data (the write-once naming of :class:`sparkhc.spark.mixing.exchange.Exchange`).

S3 settings come from the URI's query (pyarrow's ``S3FileSystem`` options:
``?endpoint_override=host:port&scheme=http&region=...``; credentials as ``s3://KEY:SECRET@bucket/...``)
or from the AWS SDK's standard sources (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
``AWS_SESSION_TOKEN``, ``AWS_DEFAULT_REGION``, ``AWS_ENDPOINT_URL``, ``~/.aws``, instance roles).
``AWS_ENDPOINT_URL_S3`` / ``AWS_ENDPOINT_URL`` (which pyarrow's S3 client does not read itself)
become ``endpoint_override`` and ``scheme`` unless the URI sets them. ``allow_delayed_open=true`` is
added unless the URI sets it: small objects then go up in one ``PutObject`` instead of a
three-request multipart upload. Core module: pyarrow only, no pyspark.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import shutil
import uuid
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

import pyarrow as pa
import pyarrow.fs as pafs

__all__ = ["has_scheme", "is_uri", "local_path", "resolve", "is_local", "write_atomic", "read_bytes", "open_input", "exists", "listdir",
           "delete_tree", "redact", "Folder", "replace_dir", "sha256_file"]


_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*):")
_DRIVE = re.compile(r"^[A-Za-z]:[\\/]")


def has_scheme(location: str | Path) -> bool:
    """Whether ``location`` is a URI (``hdfs://nn/x``, ``s3a://b/k``, ``file:/x``, ``file:///x``),
    not a plain local path (``data/x``, ``/x``, ``C:\\x``). The one test of the package: Spark's
    paths (:mod:`sparkhc.spark.hfs`) and pyarrow's (:func:`resolve`) use it."""
    s = str(location)
    return bool(_SCHEME.match(s)) and not _DRIVE.match(s)


def is_uri(location: str | Path) -> bool:
    """Whether ``location`` names a file system other than the local one: a URI whose scheme is not
    ``file`` (a plain path, ``file:/x`` and ``file:///x`` are local)."""
    s = str(location)
    m = _SCHEME.match(s)
    return has_scheme(s) and m is not None and m.group(1).lower() != "file"


def local_path(location: str | Path) -> Path | None:
    """The local path of a plain path or ``file:`` URI (percent-decoded), else None."""
    s = str(location)
    if not has_scheme(s):
        return Path(s)
    u = urlsplit(s)
    if u.scheme.lower() == "file":
        return Path(unquote(u.path))
    return None


def resolve(location: str | Path) -> tuple[pafs.FileSystem, str]:
    """``(filesystem, path)`` for a plain path, ``file://`` URI or any URI pyarrow knows.

    Local locations become absolute paths on :class:`pyarrow.fs.LocalFileSystem` (relative paths
    keep working as they did with :mod:`os`). For ``s3://`` the query gains
    ``allow_delayed_open=true`` and the endpoint of ``AWS_ENDPOINT_URL_S3``/``AWS_ENDPOINT_URL``
    unless it sets them."""
    s = str(location)
    local = local_path(s)
    if local is not None:
        return pafs.LocalFileSystem(), str(local.absolute())
    parts = urlsplit(s)
    if parts.scheme == "s3a":  # Hadoop's name of the S3 client (what Spark is given) is s3 to pyarrow
        parts = parts._replace(scheme="s3")
        s = urlunsplit(parts)
    if parts.scheme == "s3":
        query = dict(parse_qsl(parts.query, keep_blank_values=True))
        query.setdefault("allow_delayed_open", "true")
        endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        if endpoint and "endpoint_override" not in query:  # pyarrow's S3 client ignores these variables
            ep = urlsplit(endpoint if "://" in endpoint else f"https://{endpoint}")
            query["endpoint_override"] = ep.netloc
            query.setdefault("scheme", ep.scheme)
        s = urlunsplit(parts._replace(query=urlencode(query)))
    try:
        fs, path = pafs.FileSystem.from_uri(s)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError) as e:
        from sparkhc.errors import LocationError

        hint = CONNECTOR_HINTS.get(parts.scheme, "")
        raise LocationError(f"{redact(location)}: " + (hint or "not a file system location pyarrow can open")
                            + f" ({str(e).splitlines()[0] if str(e) else type(e).__name__})") from None
    return fs, path.rstrip("/")


#: what a URI scheme needs on this machine when pyarrow cannot open it (the first line of the error)
CONNECTOR_HINTS: dict[str, str] = {
    "hdfs": ("hdfs:// needs the Hadoop client and a configured cluster: a Java runtime, HADOOP_HOME, "
             "CLASSPATH=$(hadoop classpath --glob) and libhdfs (ARROW_LIBHDFS_DIR); see docs/deployment.md"),
    "viewfs": "viewfs:// needs the Hadoop client as hdfs:// does; see docs/deployment.md",
    "gs": "gs:// needs pyarrow's GCS file system and Google credentials; see docs/deployment.md",
    "s3": "s3:// (s3a://) needs pyarrow's S3 file system and AWS credentials or AWS_ENDPOINT_URL; see docs/deployment.md",
}


def child(location: str | Path, name: str) -> str:
    """The location of ``name`` inside the folder ``location``: a path for a local folder, else the
    URI with ``/name`` appended to its path (its query, e.g. an S3 endpoint, kept)."""
    local = local_path(location)
    if local is not None:
        return str(local / name)
    parts = urlsplit(str(location))
    return urlunsplit(parts._replace(path=parts.path.rstrip("/") + "/" + name))


def absolute(location: str | Path) -> str:
    """``location`` as recorded in metadata: a local path made absolute, a URI without credentials."""
    local = local_path(location)
    return str(local.resolve()) if local is not None else redact(location)


def is_local(fs: pafs.FileSystem) -> bool:
    return isinstance(fs, pafs.LocalFileSystem)


def write_atomic(fs: pafs.FileSystem, path: str, write: Callable[[BinaryIO], Any]) -> None:
    """``write(fh)`` to ``path`` so that readers see the whole file or none (module docstring);
    a failure leaves nothing behind. Local files are written through Python's ``open`` (a seekable
    file: the same bytes as before this module existed), then renamed with ``os.replace``."""
    parent, _, name = path.rpartition("/")
    tmp = f"{parent}/.{name}.tmp-{uuid.uuid4().hex[:12]}"
    if is_local(fs):
        try:
            with open(tmp, "wb") as fh:
                write(fh)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return
    if isinstance(fs, pafs.HadoopFileSystem):  # rename is atomic there
        try:
            with fs.open_output_stream(tmp) as fh:
                write(fh)
            fs.move(tmp, path)
        except BaseException:
            _delete_quietly(fs, tmp)
            raise
        return
    try:  # object store: the key appears when the upload completes
        with fs.open_output_stream(path) as fh:
            write(fh)
    except BaseException:
        _delete_quietly(fs, path)
        raise


def _delete_quietly(fs: pafs.FileSystem, path: str) -> None:
    try:
        fs.delete_file(path)
    except (FileNotFoundError, OSError):
        pass


def read_bytes(fs: pafs.FileSystem, path: str) -> bytes:
    with fs.open_input_stream(path) as fh:
        return bytes(fh.read())


@contextmanager
def open_input(fs: pafs.FileSystem, path: str) -> Iterator[BinaryIO]:
    """A seekable binary file object for ``path``: the file itself when local, else the object read
    into memory in one request (a zip reader's many small reads would each be a ranged GET)."""
    if is_local(fs):
        with open(path, "rb") as fh:
            yield fh
        return
    with fs.open_input_stream(path) as src:
        buf = src.read_buffer()
    yield io.BytesIO(memoryview(buf))  # type: ignore[arg-type]


def exists(fs: pafs.FileSystem, path: str) -> bool:
    return bool(fs.get_file_info(path).type != pafs.FileType.NotFound)


def listdir(fs: pafs.FileSystem, path: str) -> list[str]:
    """The base names directly under ``path`` (empty when it does not exist); one listing request."""
    infos = fs.get_file_info(pafs.FileSelector(path, allow_not_found=True))
    return sorted(i.base_name for i in infos)


def delete_tree(fs: pafs.FileSystem, path: str) -> None:
    """Remove ``path`` and everything under it; missing is fine."""
    try:
        fs.delete_dir(path)
    except FileNotFoundError:
        pass


def redact(location: str | Path) -> str:
    """``location`` without credentials (``s3://KEY:SECRET@bucket`` -> ``s3://***@bucket``), for
    messages and logs."""
    s = str(location)
    if not is_uri(s):
        return s
    parts = urlsplit(s)
    if "@" not in parts.netloc:
        return s
    return urlunsplit(parts._replace(netloc="***@" + parts.netloc.rsplit("@", 1)[1]))


class Folder:
    """Read access to the small files of a folder (a model, a features or predictions folder) at a
    local path, a ``file:`` URI or any URI :func:`resolve` opens. ``name`` is the location for
    messages (no credentials)."""

    def __init__(self, location: str | Path) -> None:
        self.remote = is_uri(location)
        local = None if self.remote else local_path(location)
        self.local = local
        self.name = redact(location) if local is None else str(local)
        if local is None:
            self.fs, self.root = resolve(location)
        else:
            self.fs, self.root = pafs.LocalFileSystem(), str(local)

    def where(self, name: str) -> str:
        return f"{self.name}/{name}" if self.local is None else str(self.local / name)

    def is_dir(self) -> bool:
        if self.local is not None:
            return self.local.is_dir()
        return bool(listdir(self.fs, self.root))  # object stores have no empty folders

    def is_file(self, name: str) -> bool:
        if self.local is not None:
            return (self.local / name).is_file()
        return bool(self.fs.get_file_info(f"{self.root}/{name}").type == pafs.FileType.File)

    def listdir(self, name: str = "") -> list[str]:
        return listdir(self.fs, f"{self.root}/{name}".rstrip("/"))

    def read_bytes(self, name: str) -> bytes:
        if self.local is not None:
            return (self.local / name).read_bytes()
        return read_bytes(self.fs, f"{self.root}/{name}")

    def read_text(self, name: str) -> str:
        return self.read_bytes(name).decode("utf-8")

    @contextmanager
    def open(self, name: str) -> Iterator[BinaryIO]:
        """A seekable binary file object (:func:`open_input`)."""
        with open_input(self.fs, f"{self.root}/{name}") as fh:
            yield fh


class OutputFs:
    """The driver's file operations on an output folder being written (the write side of
    :class:`Folder`; featurize, predict, the ``pyspark.ml`` writers): local paths (and ``file:`` URIs) with
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
            self.uri = t.rstrip("/")
            self._fs, self.root = resolve(t)

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
        return bool(self._fs.get_file_info(p).type != pafs.FileType.NotFound)

    def makedirs(self) -> None:
        if self.local:
            Path(self.root).mkdir(parents=True)
        else:
            self._fs.create_dir(self.root, recursive=True)

    def listdir(self, path: str) -> list[str]:
        if self.local:
            return sorted(os.listdir(path))
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
            return sha256_file(path)
        h = hashlib.sha256()
        with self._fs.open_input_stream(path) as f:
            while chunk := f.read(1 << 20):
                h.update(chunk)
        return h.hexdigest()

    def rmtree(self) -> None:
        """Remove this folder (cleanup after a failure or a publish): an error is a warning, not raised."""
        try:
            if self.local:
                shutil.rmtree(self.root)
            else:
                self._fs.delete_dir(self.root)
        except FileNotFoundError:
            return
        except Exception as e:  # best effort: the failure being cleaned up after is the error raised
            warnings.warn(f"sparkhc: could not remove the temporary folder {redact(self.root)} "
                          f"({type(e).__name__}: {e}); remove it by hand", RuntimeWarning, stacklevel=2)

    def publish(self, dst: OutputFs) -> None:
        """Move this folder to ``dst``, replacing an existing ``dst`` with two renames
        (:func:`replace_dir` for local paths)."""
        if self.local:
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


# ----------------------------------------------------------------------------- local files
def replace_dir(src: Path, dst: Path) -> None:
    """Move directory ``src`` to ``dst``, replacing an existing ``dst`` with two renames (the one
    directory swap; if the second rename fails the old ``dst`` is put back)."""
    if not dst.exists():
        os.replace(src, dst)
        return
    old = dst.parent / f".{dst.name}.old-{uuid.uuid4().hex[:12]}"
    os.replace(dst, old)
    try:
        os.replace(src, dst)
    except BaseException:
        os.replace(old, dst)
        raise
    shutil.rmtree(old, ignore_errors=True)


def sha256_file(path: str | Path) -> str:
    """Hex sha256 of a file, read in 1 MiB chunks (the one file-hashing helper)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()
