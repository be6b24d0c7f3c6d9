"""benchmarks/_common.MemorySampler says when it cannot measure instead of reporting zeros."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _common():
    spec = importlib.util.spec_from_file_location("bench_common", ROOT / "benchmarks" / "_common.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_without_psutil_the_sampler_refuses(monkeypatch) -> None:
    common = _common()
    monkeypatch.setitem(sys.modules, "psutil", None)  # import psutil -> ImportError
    with pytest.raises(SystemExit, match="psutil"):
        common.MemorySampler()


def test_a_failing_sample_makes_the_summary_raise(monkeypatch) -> None:
    common = _common()
    sampler = common.MemorySampler(interval=0.01)

    def broken() -> None:
        raise PermissionError("no /proc access")

    monkeypatch.setattr(sampler, "_sample", broken)
    with sampler:
        pass
    with pytest.raises(RuntimeError, match="no /proc access"):
        sampler.summary()
