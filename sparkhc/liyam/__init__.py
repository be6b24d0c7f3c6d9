"""Li & Yamanishi (1997) replication on Reuters-21578: see :mod:`sparkhc.liyam.experiment`."""

from __future__ import annotations

__all__ = ["run_experiment"]


def run_experiment(*args, **kwargs):  # type: ignore[no-untyped-def]
    """Lazy alias of :func:`sparkhc.liyam.experiment.run_experiment` (keeps imports cheap)."""
    from sparkhc.liyam.experiment import run_experiment as _run

    return _run(*args, **kwargs)
