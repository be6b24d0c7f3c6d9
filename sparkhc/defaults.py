"""The configured defaults: ``sparkhc/conf/defaults.toml``, read once.

Every default of ``[featurize]``, ``[train]``, ``[predict]`` and ``[model.<name>]`` is written in
that file only. The configuration's dataclasses (:mod:`sparkhc.config`), the ``pyspark.ml`` Params
(:mod:`sparkhc.ml`), the polyhierarchy limits (:mod:`sparkhc.polyhierarchy`) and a model's
configured parameters (:meth:`sparkhc.models.base.HierModel.configured`) take their values from
here. This module imports nothing of sparkhc but its errors, so any module may read it.
"""

from __future__ import annotations

import functools
import tomllib
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Any

from sparkhc.errors import ConfigError

# a Traversable, not a Path: spark-submit --py-files imports the package from a zip
DEFAULT_CONF: Traversable = resources.files("sparkhc") / "conf" / "defaults.toml"


@functools.cache
def _table() -> dict[str, Any]:
    try:
        return tomllib.loads(DEFAULT_CONF.read_text(encoding="utf-8"))
    except OSError as e:
        raise ConfigError(f"{DEFAULT_CONF}: cannot read the default configuration: {e}") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{DEFAULT_CONF}: invalid TOML: {e}") from None


def section(name: str) -> dict[str, Any]:
    """The keys and values of ``[name]`` (``featurize``, ``train``, ``predict``)."""
    return dict(_table()[name])


def model_section(name: str) -> dict[str, Any]:
    """The keys and values of ``[model.<name>]`` (empty for a model the file does not list)."""
    models = _table().get("model", {})
    return dict(models.get(name, {})) if isinstance(models, dict) else {}


def model_sections() -> dict[str, dict[str, Any]]:
    """Every ``[model.<name>]`` section."""
    models = _table().get("model", {})
    return {k: dict(v) for k, v in models.items() if isinstance(v, dict)} if isinstance(models, dict) else {}
