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
