"""Model registry: name -> lazily imported class.

A model family lives in its own module; the registry maps the names used in configuration and on
the command line to ``module:Class`` so that importing sparkhc stays cheap and an optional
dependency is needed only by the model that uses it.
"""

from __future__ import annotations

import importlib
from typing import Any

from sparkhc.errors import ConfigError

_REGISTRY: dict[str, str] = {
    # Murawaki 2013
    "flat": "sparkhc.models.murawaki:FlatPA",
    "tree": "sparkhc.models.murawaki:TreePA",
    "global": "sparkhc.models.murawaki:GlobalPA",
    # Cesa-Bianchi, Gentile, Tironi, Zaniboni 2004
    "perc": "sparkhc.models.cesa_bianchi:Perc",
    "h_perc": "sparkhc.models.cesa_bianchi:HPerc",
    "h_rls": "sparkhc.models.cesa_bianchi:HRLS",
    "ah_bay": "sparkhc.models.cesa_bianchi:ApproxHBayes",
    "svm": "sparkhc.models.cesa_bianchi:SVM",
    "h_svm": "sparkhc.models.cesa_bianchi:HSVM",
    # Li & Yamanishi 1997 (finite mixture models of word clusters and baselines), over raw counts
    "fmm": "sparkhc.models.fmm_hier:FMMHier",
    "hcm": "sparkhc.models.fmm_hier:HCMHier",
    "wbm": "sparkhc.models.fmm_hier:WBMHier",
    "cos": "sparkhc.models.fmm_hier:COSHier",
    # Xiao, Liu, Song 2019 (path cost-sensitive generative models and baselines), over raw counts
    "flat_nb": "sparkhc.models.xiao:FlatNB",
    "flat_em": "sparkhc.models.xiao:FlatEM",
    "nbmc": "sparkhc.models.xiao:NBMC",
    "emmc": "sparkhc.models.xiao:EMMC",
    "tdnb": "sparkhc.models.xiao:TDNB",
    "tdem": "sparkhc.models.xiao:TDEM",
    "wdnb": "sparkhc.models.xiao:WDNB",
    "wdem": "sparkhc.models.xiao:WDEM",
    "pcnb": "sparkhc.models.xiao:PCNB",
    "pcem": "sparkhc.models.xiao:PCEM",
    # Jia & Zhang 2020 (multi-dimensional classification over an MDC taxonomy: featurize --class-spaces)
    "m3mdc": "sparkhc.models.mdc:M3MDCModel",
    "mdc_br": "sparkhc.models.mdc:BRModel",
}


def register(name: str, target: str) -> None:
    """Register ``module:Class`` under ``name``."""
    _REGISTRY[name] = target


def names() -> list[str]:
    return sorted(_REGISTRY)


def get_model_class(name: str) -> Any:
    """The class registered as ``name``; a clear error for unknown names or missing deps."""
    try:
        target = _REGISTRY[name]
    except KeyError:
        raise ConfigError(f"unknown model {name!r}; known models: {', '.join(names())}") from None
    module_name, _, cls_name = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise ConfigError(f"model {name!r} needs a missing dependency: {e}") from e
    return getattr(module, cls_name)


def make_model(name: str, taxonomy: Any, n_features: int, **params: Any) -> Any:
    """An instance of the model registered as ``name`` (parameters validated by the model)."""
    return get_model_class(name)(taxonomy, n_features, **params)
