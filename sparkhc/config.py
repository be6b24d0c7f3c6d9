"""Configuration: frozen dataclasses loaded from TOML, with ``--set key=value`` overrides.

Unknown sections or keys and wrong types are rejected with an error that names the file (or the
``--set`` item) and the key, and lists the valid keys. Model hyper-parameters live under
``[model.<name>]``: a name that is not a registered model is refused, and so is a key that is not
a parameter of that model (:func:`_check_model_keys`); the values are checked by the model class
when it is built.

Where a default lives: ``sparkhc/conf/defaults.toml`` writes the configured default of every key,
what ``sparkhc train``, the ``pyspark.ml`` estimator and ``sparkhc tune`` use when nothing is set
(read by :mod:`sparkhc.defaults`). The dataclasses below take their ``[featurize]``, ``[train]`` and
``[predict]`` defaults from it (a :class:`Config` built without the file, e.g. ``TrainConfig()``, has
its values), and the value rules of the keys are written once, in :data:`RULES` (the ``pyspark.ml``
Params of the same keys check by them). A model class's own ``defaults`` are the model a directly
built instance gets (for the paper's models, the paper's); ``[model.<name>]`` sets the product's
values on top of them (:func:`model_params`, :meth:`sparkhc.models.base.HierModel.configured`).
``tests/unit/test_defaults.py`` checks that the layers agree.
Spark resources (memory, cores) stay in spark-submit flags and ``spark-defaults``.
"""

from __future__ import annotations

import dataclasses
import math
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any, get_type_hints

from sparkhc import defaults
from sparkhc.defaults import DEFAULT_CONF
from sparkhc.errors import ConfigError

# the values (and what each key means) are written in defaults.toml only
_FEATURIZE = defaults.section("featurize")
_TRAIN = defaults.section("train")
_PREDICT = defaults.section("predict")


@dataclass(frozen=True)
class FeaturizeConfig:
    """``[featurize]`` of ``defaults.toml``: how documents become features and which records are read."""

    mode: str = _FEATURIZE["mode"]
    weighting: str = _FEATURIZE["weighting"]
    min_df: int = _FEATURIZE["min_df"]
    max_df: float = _FEATURIZE["max_df"]
    stop_words: bool = _FEATURIZE["stop_words"]
    l2_normalize: bool = _FEATURIZE["l2_normalize"]
    hash_bits: int = _FEATURIZE["hash_bits"]
    token_pattern: str = _FEATURIZE["token_pattern"]
    partitions: int = _FEATURIZE["partitions"]
    on_empty: str = _FEATURIZE["on_empty"]
    on_invalid: str = _FEATURIZE["on_invalid"]
    unknown_labels: str = _FEATURIZE["unknown_labels"]
    require_labels: bool = _FEATURIZE["require_labels"]
    label_language: str = _FEATURIZE["label_language"]
    max_positions: int = _FEATURIZE["max_positions"]


@dataclass(frozen=True)
class TrainConfig:
    """``[train]`` of ``defaults.toml``: which model, and how it is trained."""

    model: str = _TRAIN["model"]
    epochs: int = _TRAIN["epochs"]
    max_epochs: int = _TRAIN["max_epochs"]
    patience: int = _TRAIN["patience"]
    shards: int = _TRAIN["shards"]
    seed: int = _TRAIN["seed"]
    select_epochs: bool = _TRAIN["select_epochs"]
    validation_fraction: float = _TRAIN["validation_fraction"]
    validation_folds: int = _TRAIN["validation_folds"]
    self_leaves: bool = _TRAIN["self_leaves"]
    checkpoint: bool = _TRAIN["checkpoint"]
    node_parallel: bool = _TRAIN["node_parallel"]
    mixing: str = _TRAIN["mixing"]
    exchange_dir: str = _TRAIN["exchange_dir"]
    calibrate: str = _TRAIN["calibrate"]
    calibration_folds: int = _TRAIN["calibration_folds"]
    calibration_documents: int = _TRAIN["calibration_documents"]
    refit: bool = _TRAIN["refit"]
    c_search: str = _TRAIN["c_search"]
    execution: str = _TRAIN["execution"]
    time_budget: float = _TRAIN["time_budget"]
    step_scale: str = _TRAIN["step_scale"]
    gap_tol: float = _TRAIN["gap_tol"]


@dataclass(frozen=True)
class PredictConfig:
    """``[predict]`` of ``defaults.toml``: how predict and evaluate run."""

    partitions: int = _PREDICT["partitions"]
    execution: str = _PREDICT["execution"]


@dataclass(frozen=True)
class Config:
    featurize: FeaturizeConfig = field(default_factory=FeaturizeConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    predict: PredictConfig = field(default_factory=PredictConfig)
    model: dict[str, dict[str, Any]] = field(default_factory=dict)
    source: str = "<defaults>"

    def model_params(self, name: str | None = None) -> dict[str, Any]:
        return dict(self.model.get(name or self.train.model, {}))

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d.pop("source")
        return d


_SECTIONS = {"featurize": FeaturizeConfig, "train": TrainConfig, "predict": PredictConfig}
#: a value check: (predicate on a value of the key's type, what a valid value is)
Rule = tuple[Callable[[Any], bool], str]


def is_int(v: Any) -> bool:
    """An int that is not a bool."""
    return isinstance(v, int) and not isinstance(v, bool)


def int_at_least(low: int, note: str = "") -> Rule:
    return (lambda v: is_int(v) and v >= low), f"an int >= {low}{note}"


def number_at_least(low: float, note: str = "") -> Rule:
    return (lambda v: isinstance(v, float) and math.isfinite(v) and v >= low), f"a finite number >= {low:g}{note}"


def one_of(*values: str) -> Rule:
    words = [repr(v) for v in values]
    text = words[0] if len(words) == 1 else ", ".join(words[:-1]) + f" or {words[-1]}"
    return (lambda v: v in values), text


#: The choices of the reader options (``featurize`` and ``predict --input``, the CLI's flags and
#: the readers check by these), of ``train.mixing`` and of ``train.calibrate``.
ON_EMPTY: tuple[str, ...] = ("error", "keep", "quarantine")
ON_INVALID: tuple[str, ...] = ("error", "quarantine")
UNKNOWN_LABELS: tuple[str, ...] = ("error", "drop", "quarantine")
MIXING_MODES: tuple[str, ...] = ("auto", "barrier", "jobs")
CALIBRATE_MODES: tuple[str, ...] = ("off", "auto", "on")

#: What a valid value of a key is, beyond its type: the one statement of each rule. The
#: configuration files and ``--set`` (:func:`load_config`) and the ``pyspark.ml`` Params of the same
#: keys (:mod:`sparkhc.ml._params`, by :func:`value_rule`) check by it.
RULES: dict[tuple[str, str], Rule] = {
    ("featurize", "partitions"): int_at_least(1),
    ("featurize", "max_positions"): int_at_least(1),
    ("featurize", "on_empty"): one_of("", *ON_EMPTY),
    ("featurize", "on_invalid"): one_of(*ON_INVALID),
    ("featurize", "unknown_labels"): one_of(*UNKNOWN_LABELS),
    ("train", "epochs"): int_at_least(0, " (0 = chosen on a validation slice)"),
    ("train", "max_epochs"): int_at_least(1),
    ("train", "patience"): int_at_least(0, " (0 = every epoch up to the cap)"),
    ("train", "shards"): int_at_least(0, " (0 = the task slots Spark reports)"),
    ("train", "validation_fraction"): ((lambda v: isinstance(v, float) and 0.0 < v < 1.0), "a float in (0, 1)"),
    ("train", "validation_folds"): int_at_least(0, " (0 = automatic)"),
    ("train", "mixing"): one_of(*MIXING_MODES),
    ("train", "calibrate"): one_of(*CALIBRATE_MODES),
    ("train", "calibration_folds"): int_at_least(3),
    ("train", "calibration_documents"): int_at_least(0, " (0 = only the selection's bands)"),
    ("train", "c_search"): one_of("folds", "always"),
    ("train", "execution"): one_of("auto", "spark", "driver"),
    ("train", "time_budget"): number_at_least(0, " (0 = no budget)"),
    ("train", "step_scale"): one_of("shards", "one"),
    ("predict", "partitions"): int_at_least(0, " (0 = keep the input's partitioning)"),
    ("predict", "execution"): one_of("auto", "spark", "driver"),
}

_TYPE_RULES: dict[type, Rule] = {
    int: ((lambda v: is_int(v)), "an int"),
    float: ((lambda v: isinstance(v, float)), "a float"),
    bool: ((lambda v: isinstance(v, bool)), "a bool"),
    str: ((lambda v: isinstance(v, str)), "a string"),
}


def value_rule(section: str, key: str) -> Rule:
    """The check of a value of ``[section] key``, its type included (for the ``pyspark.ml`` Params,
    whose converters give a value of the key's type)."""
    return RULES.get((section, key)) or _TYPE_RULES[get_type_hints(_SECTIONS[section])[key]]


def _check_section(cls: type, values: dict[str, Any], where: str, section: str = "") -> Any:
    hints = get_type_hints(cls)
    known = {f.name for f in fields(cls)}
    out = {}
    for k, v in values.items():
        if k not in known:
            raise ConfigError(f"{where}: unknown key {k!r}; known keys: {', '.join(sorted(known))}")
        want = hints[k]
        ok = isinstance(v, want) and not (want is int and isinstance(v, bool))
        if want is float and isinstance(v, int) and not isinstance(v, bool):
            v, ok = float(v), True
        if not ok:
            raise ConfigError(
                f"{where}: key {k!r} must be of type {want.__name__}, got {type(v).__name__} {v!r}"
            )
        rule = RULES.get((section, k))
        if rule is not None and not rule[0](v):
            raise ConfigError(f"{where}: key {k!r} must be {rule[1]}, got {v!r}")
        out[k] = v
    return cls(**out)


def _check_model_names(sections: dict[str, Any], where: str) -> None:
    """Refuse a ``[model.<name>]`` section whose name is not a registered model (a misspelled
    name would otherwise be ignored silently); its keys: :func:`_check_model_keys`."""
    valid = _model_names()
    unknown = sorted(set(sections) - set(valid))
    if not unknown:
        return
    import difflib

    close = difflib.get_close_matches(unknown[0], valid, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise ConfigError(
        f"{where}: unknown model section [model.{unknown[0]}]{hint}; valid model names: {', '.join(valid)}"
    )


#: keys of ``[model.<name>]`` that belong to ``[train]`` (one source for every model)
_TRAIN_KEYS = ("epochs", "seed")


def _train_key_error(where: str, name: str, key: str) -> ConfigError:
    return ConfigError(f"{where}model.{name}.{key} is not a model setting: set train.{key} instead "
                       "(one source for every model)")


def _check_model_keys(sections: dict[str, dict[str, Any]], where: str) -> None:
    """Refuse a key of a ``[model.<name>]`` section that is not a parameter of the model (a
    misspelled key would otherwise fail only when the model is built, after the features were
    read), naming the valid keys; ``epochs`` and ``seed`` are ``[train]`` keys. The model class is
    imported only for keys that ``defaults.toml`` does not list for it (those are its parameters:
    ``tests/unit/test_defaults.py`` checks it)."""
    documented = defaults.model_sections()
    for name, values in sections.items():
        for key in _TRAIN_KEYS:
            if key in values:
                raise _train_key_error(f"{where}: ", name, key)
        if set(values) <= set(documented.get(name, {})):
            continue
        from sparkhc.models import get_model_class

        valid = sorted(k for k in get_model_class(name).defaults if k not in _TRAIN_KEYS)
        unknown = sorted(set(values) - set(valid))
        if unknown:
            import difflib

            close = [k for k in valid if k.lower() == unknown[0].lower()] or difflib.get_close_matches(unknown[0], valid, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(f"{where}: unknown key {unknown[0]!r} in [model.{name}]{hint}; "
                              f"valid keys: {', '.join(valid)}")


def _model_names() -> list[str]:
    # imported here: sparkhc.models reads the model modules' declarations on first use
    from sparkhc.models import names

    return names()


def from_dict(data: dict[str, Any], source: str = "<dict>") -> Config:
    sections: dict[str, Any] = {}
    model: dict[str, dict[str, Any]] = {}
    for key, value in data.items():
        if key == "model":
            if not isinstance(value, dict) or not all(isinstance(v, dict) for v in value.values()):
                raise ConfigError(f"{source}: [model.<name>] sections must be tables")
            _check_model_names(value, source)
            _check_model_keys(value, source)
            model = {k: dict(v) for k, v in value.items()}
        elif key in _SECTIONS:
            if not isinstance(value, dict):
                raise ConfigError(f"{source}: [{key}] must be a table")
            sections[key] = _check_section(_SECTIONS[key], value, f"{source} [{key}]", key)
        else:
            raise ConfigError(
                f"{source}: unknown section [{key}]; known: {', '.join(sorted([*_SECTIONS, 'model']))}"
            )
    return Config(**sections, model=model, source=source)


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _merge(out[k], v)
        else:
            out[k] = v
    return out


def parse_override(item: str) -> tuple[list[str], Any]:
    """``a.b.c=value`` -> (["a","b","c"], value); the value is read as a TOML literal, or a string."""
    if "=" not in item:
        raise ConfigError(f"--set {item!r}: expected key=value")
    key, raw = item.split("=", 1)
    path = [p for p in key.strip().split(".") if p]
    if not path:
        raise ConfigError(f"--set {item!r}: empty key")
    try:
        value = tomllib.loads(f"v = {raw.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw.strip()
    return path, value


def load_config(paths: list[str | Path] | None = None, overrides: list[str] | None = None) -> Config:
    """Defaults, then each TOML file in order, then ``--set`` overrides."""
    data: dict[str, Any] = {}
    sources = []
    files: list[Traversable] = [DEFAULT_CONF, *(Path(p) for p in paths or [])]
    for p in files:
        try:
            text = p.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ConfigError(f"{p}: configuration file not found") from None
        try:
            loaded = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"{p}: invalid TOML: {e}") from None
        from_dict(loaded, source=str(p))  # validate each file on its own for precise errors
        data = _merge(data, loaded)
        sources.append(str(p))
    for item in overrides or []:
        path, value = parse_override(item)
        d = {path[-1]: value}
        for k in reversed(path[:-1]):
            d = {k: d}
        from_dict(d if path[0] != "model" or len(path) >= 2 else {}, source=f"--set {item}")
        data = _merge(data, d)
        sources.append(f"--set {item}")
    return from_dict(data, source=" + ".join(sources))


def model_params(cls: Any, cfg: Config, params: dict[str, Any] | None = None) -> dict[str, Any]:
    """The parameters of a model of class ``cls``: ``params`` (default: the configuration's
    ``[model.<name>]``), plus ``epochs`` and ``seed`` from ``[train]`` where the model has them
    (``train.epochs`` / ``train.seed`` are their one source: setting them per model is an error)."""
    p = dict(cfg.model_params(cls.name) if params is None else params)
    for key in _TRAIN_KEYS:
        if key in p:
            raise _train_key_error("", cls.name, key)
        if key in cls.defaults:
            p[key] = int(getattr(cfg.train, key))
    if p.get("epochs") == 0:  # train.epochs = 0 (auto): the model's own fits (serial) use the fixed default
        from sparkhc.epochs import FALLBACK_EPOCHS

        p["epochs"] = FALLBACK_EPOCHS
    return p
