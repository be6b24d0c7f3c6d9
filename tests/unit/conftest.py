"""Fixtures of the unit tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def no_spark(monkeypatch):
    """Every pipeline verb and the session replaced by a recorder (the checks before Spark stay real)."""
    import sparkhc.spark.pipelines as pipelines
    import sparkhc.spark.session

    calls: list[str] = []
    for name in ("featurize", "train", "predict"):
        monkeypatch.setattr(pipelines, name, lambda *a, _n=name, **k: calls.append(_n) or {})
    monkeypatch.setattr(pipelines, "evaluate", lambda *a, **k: calls.append("evaluate") or ({}, ""))
    monkeypatch.setattr(sparkhc.spark.session, "get_session", lambda *a, **k: calls.append("session"))
    monkeypatch.setattr(sparkhc.spark.session, "deferred_session", lambda *a, **k: calls.append("session"))
    return calls


@pytest.fixture
def reference(monkeypatch):
    """A context switch for the compiled kernels' tests: call ``reference(fn)`` to run ``fn`` on
    the numpy path (``sparkhc.kernels.ENABLED`` False); the test itself runs with the kernels."""
    from sparkhc import kernels

    def run(fn):
        monkeypatch.setattr(kernels, "ENABLED", False)
        try:
            return fn()
        finally:
            monkeypatch.setattr(kernels, "ENABLED", True)

    monkeypatch.setattr(kernels, "ENABLED", True)
    return run
