"""Downloading corpora into the cache: urllib, sha256 verification, atomic writes.

A download is streamed into a temporary file next to its destination while its sha256 is
computed; only a file whose checksum matches is renamed into place, so the cache never holds a
partial or corrupt file. :func:`fetch` downloads a registered corpus's original public archive,
converts it into the JSON Lines layout of ``../shared/data`` in a temporary directory and renames
that directory into ``<cache>/<name>``.

Nothing here needs Spark. Set ``SPARKHC_OFFLINE=1`` to forbid network access.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

from sparkhc.errors import DataUnavailableError

logger = logging.getLogger(__name__)

CHUNK = 1 << 20
Opener = Callable[..., IO[bytes]]


class ChecksumError(DataUnavailableError):
    """A downloaded or staged file does not have the expected sha256."""


def cache_root(cache_dir: str | Path | None = None) -> Path:
    """The cache directory: ``cache_dir``, else ``$SPARKHC_CACHE``, else ``$XDG_CACHE_HOME/sparkhc``
    or ``~/.cache/sparkhc``."""
    if cache_dir is not None:
        return Path(cache_dir).expanduser()
    env = os.environ.get("SPARKHC_CACHE")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "sparkhc"


def is_offline() -> bool:
    """True when ``$SPARKHC_OFFLINE`` is set to 1/true/yes."""
    return os.environ.get("SPARKHC_OFFLINE", "").strip().lower() in ("1", "true", "yes")


def _urlopen(url: str, timeout: float) -> IO[bytes]:
    # looked up at call time so tests can monkeypatch urllib.request.urlopen or this module
    return urllib.request.urlopen(url, timeout=timeout)  # type: ignore[no-any-return]  # noqa: S310


def download(
    urls: str | Sequence[str],
    dest: str | Path,
    sha256: str | None,
    *,
    size: int | None = None,
    timeout: float = 60.0,
    opener: Opener | None = None,
) -> Path:
    """Download the first of ``urls`` that works into ``dest``, verifying its sha256.

    The data goes to a temporary file in ``dest``'s directory, renamed to ``dest`` only after the
    checksum (and ``size`` when given) matched. A mismatch raises :class:`ChecksumError` and
    leaves nothing behind; when no URL can be read, :class:`DataUnavailableError` lists why.
    ``sha256=None`` skips verification (callers must decide whether that is acceptable).
    """
    url_list = [urls] if isinstance(urls, str) else list(urls)
    if not url_list:
        raise ValueError("no URL given")
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    open_url = opener or _urlopen
    failures: list[str] = []
    for url in url_list:
        fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".part", dir=dest.parent)
        tmp = Path(tmp_name)
        try:
            h = hashlib.sha256()
            n = 0
            t0 = time.monotonic()
            with os.fdopen(fd, "wb") as out:
                with open_url(url, timeout=timeout) as resp:
                    while chunk := resp.read(CHUNK):
                        out.write(chunk)
                        h.update(chunk)
                        n += len(chunk)
                out.flush()
                os.fsync(out.fileno())
            got = h.hexdigest()
            if sha256 is not None and got != sha256.lower():
                raise ChecksumError(
                    f"{url}: sha256 mismatch for {dest.name}: expected {sha256}, got {got} ({n} bytes); "
                    "the file was not kept"
                )
            if size is not None and n != size:
                raise ChecksumError(f"{url}: size mismatch for {dest.name}: expected {size} bytes, got {n}")
            os.replace(tmp, dest)
            logger.info("downloaded %s (%d bytes, %.1f s) -> %s", url, n, time.monotonic() - t0, dest)
            return dest
        except ChecksumError:
            tmp.unlink(missing_ok=True)
            raise
        except (urllib.error.URLError, OSError, ValueError) as e:
            tmp.unlink(missing_ok=True)
            reason = getattr(e, "reason", None) or e
            failures.append(f"{url}: {reason}")
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
    raise DataUnavailableError(f"could not download {dest.name}: " + "; ".join(failures))


