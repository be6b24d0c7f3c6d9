"""Xiao, Liu, Song 2019 (path cost-sensitive NB/EM): the experiment runner.

The models live in :mod:`sparkhc.models.xiao`; :mod:`sparkhc.xiao.experiment` reproduces the
paper's Table 2 layout and label-rate curves (``python -m sparkhc.xiao.experiment --help``).
"""

from __future__ import annotations

__all__ = ["run_experiment"]


def run_experiment(*args: object, **kwargs: object) -> object:
    """Lazy alias of :func:`sparkhc.xiao.experiment.run_experiment` (scikit-learn is needed)."""
    from sparkhc.xiao.experiment import run_experiment as _run

    return _run(*args, **kwargs)  # type: ignore[arg-type]
