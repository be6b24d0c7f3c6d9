"""Model registry: name -> lazily imported class, found without a hand-kept list.

A model family lives in its own module of this package and declares the registry names of its
models in a module-level literal ``MODELS = {"name": "ClassName", ...}``. The registry reads those
literals from the source files (without importing the modules, so importing sparkhc stays cheap
and an optional dependency is needed only by the model that uses it). Models of other packages
register through the ``sparkhc.models`` entry-point group (``name = "module:Class"``) or
:func:`register`. Adding a model is one new module (and its test): see ``docs/architecture.md``.
"""

from __future__ import annotations

import ast
import functools
import importlib
from importlib import resources
from importlib.metadata import entry_points
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from sparkhc.errors import ConfigError

#: the name of the module-level literal a model module declares its models in
DECLARATION = "MODELS"

_EXTRA: dict[str, str] = {}


def declared_models(path: str | Path | Traversable, module: str) -> dict[str, str]:
    """``{name: "module:Class"}`` from the ``MODELS`` literal of a source file (empty without one)."""
    source = path.read_text(encoding="utf-8") if isinstance(path, Traversable) else Path(path).read_text(encoding="utf-8")
    tree = ast.parse(source, filename=str(path))
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if isinstance(target, ast.Name) and target.id == DECLARATION:
            try:
                decl = ast.literal_eval(value)
            except ValueError:
                raise ConfigError(f"{path}: {DECLARATION} must be a literal dict of name -> class name") from None
            if not isinstance(decl, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                     for k, v in decl.items()):
                raise ConfigError(f"{path}: {DECLARATION} must map registry names to class names")
            return {k: f"{module}:{v}" for k, v in decl.items()}
    return {}


def discover(package_dir: str | Path | Traversable, package: str) -> dict[str, str]:
    """The models declared by the modules of a package directory and by its subpackages'
    ``__init__`` (a model family as a package), by file name order; a name declared twice is an
    error naming both modules. ``package_dir`` may be a :mod:`importlib.resources` traversable, so
    discovery also works inside a zip (``spark-submit --py-files``)."""
    root: Any = package_dir if isinstance(package_dir, Traversable) else Path(package_dir)
    found: dict[str, str] = {}
    files: list[tuple[str, Any, str]] = []
    for entry in root.iterdir():
        if entry.is_file() and entry.name.endswith(".py") and not entry.name.startswith("_"):
            files.append((entry.name, entry, f"{package}.{entry.name[:-3]}"))
        elif entry.is_dir() and (entry / "__init__.py").is_file():
            files.append((entry.name, entry / "__init__.py", f"{package}.{entry.name}"))
    for _, f, module in sorted(files, key=lambda t: t[0]):
        for name, target in declared_models(f, module).items():
            if name in found:
                raise ConfigError(f"model name {name!r} is declared by {found[name]} and {target}")
            found[name] = target
    return found


@functools.cache
def _registry() -> dict[str, str]:
    reg = discover(resources.files(__name__), __name__)
    for ep in entry_points(group="sparkhc.models"):
        reg.setdefault(ep.name, ep.value)
    return reg


def register(name: str, target: str) -> None:
    """Register ``module:Class`` under ``name`` at run time."""
    _EXTRA[name] = target


def names() -> list[str]:
    return sorted({**_registry(), **_EXTRA})


def get_model_class(name: str) -> Any:
    """The class registered as ``name``; a clear error for unknown names or missing deps."""
    target = _EXTRA.get(name) or _registry().get(name)
    if target is None:
        raise ConfigError(f"unknown model {name!r}; known models: {', '.join(names())}")
    module_name, _, cls_name = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise ConfigError(f"model {name!r} needs a missing dependency: {e}") from e
    return getattr(module, cls_name)


def make_model(name: str, taxonomy: Any, n_features: int, **params: Any) -> Any:
    """An instance of the model registered as ``name`` (parameters validated by the model)."""
    return get_model_class(name)(taxonomy, n_features, **params)
