"""Reliability catalogue (issue 9): bad inputs, faults, determinism and atomicity.

Shared helpers for the test modules of this package. The tiny corpus is four leaves of a
two-level taxonomy (see :data:`TAXONOMY_TSV`); documents are a few words of their leaf's
vocabulary plus common words, so that a model learns them in one or two epochs. Every file a test
needs is generated into ``tmp_path`` (nothing is checked in under ``fixtures/``).
"""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

TAXONOMY_TSV = (
    "ROOT\tsports\nROOT\tscience\nsports\tfootball\nsports\ttennis\nscience\tphysics\nscience\tbiology\n"
)
VOCAB = {
    "football": ["goal", "striker", "pitch", "referee", "penalty"],
    "tennis": ["racket", "serve", "wimbledon", "volley", "deuce"],
    "physics": ["quantum", "particle", "photon", "relativity", "boson"],
    "biology": ["cell", "gene", "protein", "enzyme", "mitosis"],
}
COMMON = ["report", "today", "people", "news", "story"]


def tiny_records(n: int, seed: int = 0, prefix: str = "d", test_every: int = 4) -> list[dict[str, Any]]:
    """JSON Lines records (``id``, ``text``, ``labels``, ``split``): one leaf per document, every
    ``test_every``-th document in the test split."""
    rng = np.random.default_rng(seed)
    leaves = sorted(VOCAB)
    out = []
    for i in range(n):
        leaf = leaves[int(rng.integers(len(leaves)))]
        words = [str(w) for w in rng.choice(VOCAB[leaf], size=4)] + [str(w) for w in rng.choice(COMMON, size=2)]
        out.append({"id": f"{prefix}{i:04d}", "text": " ".join(words), "labels": [leaf],
                    "split": "test" if i % test_every == test_every - 1 else "train"})
    return out


def write_jsonl(path: Path, records: Iterable[Mapping[str, Any] | str | bytes]) -> Path:
    """One line per record: a mapping is JSON-encoded, a str/bytes line is written as is."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        for r in records:
            if isinstance(r, bytes):
                line = r
            elif isinstance(r, str):
                line = r.encode("utf-8")
            else:
                line = json.dumps(r).encode("utf-8")
            f.write(line.rstrip(b"\n") + b"\n")
    return path


def write_taxonomy(path: Path, text: str | bytes = TAXONOMY_TSV) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    return path


def run_main(argv: Sequence[str], capsys: Any) -> tuple[int, str, str]:
    """``sparkhc.cli.main(argv)`` in process: (exit status, stdout, stderr)."""
    import pytest

    from sparkhc.cli import main

    capsys.readouterr()  # drop what earlier steps printed
    with pytest.raises(SystemExit) as exc:
        main([str(a) for a in argv])
    out, err = capsys.readouterr()
    code = exc.value.code
    code = code if isinstance(code, int) else 1
    log = os.environ.get("SPARKHC_RELIABILITY_LOG")
    if log:  # the observed messages quoted in docs/reliability.md
        last = error_line(err) or next((ln for ln in reversed(err.splitlines()) if ln.strip()), "")
        with open(log, "a", encoding="utf-8") as f:
            f.write(json.dumps({"test": os.environ.get("PYTEST_CURRENT_TEST", ""), "exit": code,
                                "message": last}) + "\n")
    return code, out, err


def error_line(err: str) -> str:
    """The ``sparkhc: error: ...`` line of a CLI run's stderr (what docs/reliability.md quotes)."""
    for line in err.splitlines():
        if line.startswith("sparkhc: error: "):
            return line[len("sparkhc: error: "):]
    return ""


def tree_snapshot(root: Path) -> dict[str, bytes]:
    """Relative path -> bytes of every file under ``root`` (for "left intact" checks)."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def leftovers(folder: Path) -> list[str]:
    """Hidden temporary entries (``.name.tmp-*``, ``name.tmp-*``, ``.name.old-*``) in ``folder``."""
    return sorted(p.name for p in folder.iterdir() if ".tmp-" in p.name or ".old-" in p.name)


def disk_full_during(monkeypatch, marker: str) -> None:
    """Files opened for writing whose names contain ``marker`` accept half of the first write and
    then fail (ENOSPC): a crash in the middle of the write, whichever way the code writes."""
    import builtins

    real_open = builtins.open

    class HalfThenFail:
        def __init__(self, fh):
            self._fh = fh

        def write(self, data):
            self._fh.write(data[: len(data) // 2])
            self._fh.flush()
            raise OSError(errno.ENOSPC, "No space left on device (simulated)")

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self._fh.close()
            return False

        def __getattr__(self, name):
            return getattr(self._fh, name)

    def fake_open(file, mode="r", *a, **k):
        fh = real_open(file, mode, *a, **k)
        if marker in str(file) and any(c in mode for c in "wax"):
            return HalfThenFail(fh)
        return fh

    monkeypatch.setattr(builtins, "open", fake_open)
