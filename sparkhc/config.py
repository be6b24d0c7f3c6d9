"""Configuration: frozen dataclasses loaded from TOML, with ``--set key=value`` overrides.

Unknown sections or keys and wrong types are rejected with an error that names the file (or the
``--set`` item) and the key, and lists the valid keys. Model hyper-parameters live under
``[model.<name>]``: a name that is not a registered model is refused, and so is a key that is not
a parameter of that model (:func:`_check_model_keys`); the values are checked by the model class
when it is built.

Where a default lives: ``sparkhc/conf/defaults.toml`` is the configured default of every key, what
``sparkhc train``, the ``pyspark.ml`` estimator and ``sparkhc tune`` use when nothing is set. The
dataclasses below repeat the ``[featurize]``, ``[train]`` and ``[predict]`` values (a
:class:`Config` built without the file, e.g. ``TrainConfig()``, has the same defaults), and a model
class's own ``defaults`` are the paper's model, used by the experiments and by a model built
directly; ``[model.<name>]`` sets the product's values on top of them.
``tests/unit/test_defaults.py`` checks that the three agree where they must.
Spark resources (memory, cores) stay in spark-submit flags and ``spark-defaults``.
"""

from __future__ import annotations

import dataclasses
import functools
import tomllib
from dataclasses import dataclass, field, fields
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any, get_type_hints

from sparkhc.errors import ConfigError
from sparkhc.polyhierarchy import DEFAULT_LABEL_LANGUAGE, DEFAULT_MAX_POSITIONS

# a Traversable, not a Path: spark-submit --py-files imports the package from a zip
DEFAULT_CONF: Traversable = resources.files("sparkhc") / "conf" / "defaults.toml"


@dataclass(frozen=True)
class FeaturizeConfig:
    mode: str = "vocab"  # vocab | hashing
    weighting: str = "log_tf_idf"  # tf | log_tf | log_tf_idf
    min_df: int = 2
    max_df: float = 0.5
    stop_words: bool = True
    l2_normalize: bool = True
    hash_bits: int = 18
    token_pattern: str = ""  # empty = the tokenizer's default
    partitions: int = 4
    # reading the raw documents (sparkhc.corpus.readers): what happens to records that cannot be used
    on_empty: str = ""  # "" = the corpus's own default (error; keep for meka_imdb) | error | keep | quarantine
    on_invalid: str = "error"  # error | quarantine (malformed, ill-typed or duplicate records)
    unknown_labels: str = "error"  # error | drop | quarantine (labels not in the taxonomy)
    require_labels: bool = True  # --input: false reads a record without labels as unlabelled
    # taxonomy files (SKOS vocabularies, polyhierarchies: sparkhc.vocab, sparkhc.polyhierarchy)
    label_language: str = DEFAULT_LABEL_LANGUAGE  # skos:prefLabel shown in reports and predictions (else a fallback)
    max_positions: int = DEFAULT_MAX_POSITIONS  # a polyhierarchy expanding to more positions (paths) is refused


@dataclass(frozen=True)
class TrainConfig:
    model: str = "global"
    # 0 = auto: chosen on a seeded validation slice of the training documents (models trained by mixing,
    # early stopping after `patience` epochs without a better score, at most max_epochs; sparkhc.epochs),
    # 10 for the other models and warm starts; N > 0: N epochs (with select_epochs: the most tried)
    epochs: int = 0
    max_epochs: int = 100  # epochs = 0: the most epochs tried on the validation slice
    patience: int = 10  # epoch selection: stop after this many epochs without a better score (0 = never)
    shards: int = 0  # 0 = auto: the task slots Spark reports (spark.default.parallelism)
    seed: int = 0
    # epochs = N > 0: choose the number of epochs (1..N) on the validation slice instead of training N
    select_epochs: bool = False
    validation_fraction: float = 0.1
    # epoch (and C = "auto") selection: disjoint validation bands pooled; 0 = auto (sparkhc.epochs.inner_folds)
    validation_folds: int = 0
    self_leaves: bool = True  # virtual /_self leaves for labels that stop at an internal node
    checkpoint: bool = True
    # node-independent models (h_svm, svm, h_rls, ah_bay, perc, h_perc with mistake="node"):
    # train each node in its own task (exact) instead of parameter mixing
    node_parallel: bool = True
    # iterative parameter mixing: "auto" (barrier stage in local mode), "barrier", "jobs"
    mixing: str = "auto"
    exchange_dir: str = ""  # barrier mixing: path or URI (hdfs/s3/gs) all executors reach ("" = a temp dir)
    # per-edge score offsets of the global model fitted on out-of-fold scores (sparkhc.calibration):
    # off | auto (the default: on the epoch selection's validation bands, applied only when their nested
    # gain exceeds its standard error; skipped, and recorded, with fixed epochs or a model that cannot
    # carry offsets) | on (always applied; with fixed epochs cross-fitted on calibration_folds)
    calibrate: str = "auto"
    calibration_folds: int = 4
    # calibrate with an epoch selection: when the offsets pay on its validation bands, more bands are
    # scored (one training each) until they hold this many documents (at most every band); 0 = never
    calibration_documents: int = 5000
    # an epoch selection on one validation band: true = train again on every training document for the
    # chosen epochs | false = the band's model at the chosen epoch is the model (trained on the others)
    refit: bool = True
    # C = "auto" where the training part gets one validation band (large data): folds = C is the
    # middle of the grid there (searched only on several inner folds) | always = searched on the one
    # band too (3 validation trainings instead of 1; another C only beyond the jackknife's standard error)
    c_search: str = "folds"
    # where a small training runs: auto (the default: in the driver process for small inputs on a local
    # master, sparkhc.spark.plan) | spark (always Spark jobs) | driver (in the driver wherever the model allows)
    execution: str = "auto"
    # opt-in seconds of wall-clock time for an epoch selection's training (0 = none, the default: no
    # clock in a default training): the selection stops where its next epoch would not fit, and the
    # final training runs only when it fits (else the band's model; sparkhc.epochs.TimeBudget); a
    # fixed train.epochs is not cut by it
    time_budget: float = 0.0
    # parameter mixing over K shards: "shards" (CoCoA+'s adding: a shard's steps capped by C x K, so the
    # mean of the shards adds up their steps) | "one" (Murawaki 2013 Alg. 6: each shard's steps capped by C)
    step_scale: str = "shards"
    # a model that certifies a duality gap (model.global.solver = "dcd"): stop once the relative gap
    # (gap / primal) is at most this; 0 = run the epochs
    gap_tol: float = 0.01


@dataclass(frozen=True)
class PredictConfig:
    partitions: int = 0  # 0 = keep the input's partitioning
    execution: str = "auto"  # auto | spark | driver: where predict and evaluate run (sparkhc.spark.smalljobs)


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
#: Smallest value of the integer keys that have one (other keys are checked where they are used).
_MINIMUM = {
    ("featurize", "partitions"): 1,
    ("featurize", "max_positions"): 1,
    ("train", "epochs"): 0,  # 0 = auto (chosen on validation data)
    ("train", "max_epochs"): 1,
    ("train", "patience"): 0,  # 0 = no early stopping
    ("train", "shards"): 0,  # 0 = auto
    ("train", "calibration_folds"): 3,
    ("train", "calibration_documents"): 0,  # 0 = only the selection's bands
    ("train", "validation_folds"): 0,  # 0 = auto
    ("train", "time_budget"): 0,  # 0 = none
    ("predict", "partitions"): 0,  # 0 = keep the input's partitioning
}


_CHOICES: dict[tuple[str, str], tuple[str, ...]] = {
    ("train", "mixing"): ("auto", "barrier", "jobs"),
    ("train", "calibrate"): ("off", "auto", "on"),
    ("train", "execution"): ("auto", "spark", "driver"),
    ("predict", "execution"): ("auto", "spark", "driver"),
    ("train", "c_search"): ("folds", "always"),
    ("train", "step_scale"): ("shards", "one"),
    ("featurize", "on_empty"): ("", "error", "keep", "quarantine"),
    ("featurize", "on_invalid"): ("error", "quarantine"),
    ("featurize", "unknown_labels"): ("error", "drop", "quarantine"),
}


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
        choices = _CHOICES.get((section, k))
        if choices is not None and v not in choices:
            raise ConfigError(f"{where}: key {k!r} must be one of {', '.join(map(repr, choices))}, got {v!r}")
        if (section, k) == ("train", "validation_fraction") and not 0.0 < v < 1.0:
            raise ConfigError(f"{where}: key {k!r} must be a float in (0, 1), got {v!r}")
        low = _MINIMUM.get((section, k))
        if low is not None and v < low:
            raise ConfigError(f"{where}: key {k!r} must be {'a number' if want is float else 'an int'} >= {low}, got {v!r}")
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


@functools.cache
def _documented_model_keys() -> dict[str, frozenset[str]]:
    """The keys of each ``[model.<name>]`` section of ``defaults.toml`` (valid keys of that model:
    ``tests/unit/test_defaults.py`` checks it), so that a configuration using only those needs no
    model module imported."""
    try:
        data = tomllib.loads(DEFAULT_CONF.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):  # reported by load_config with the file's name
        return {}
    model = data.get("model", {})
    return {k: frozenset(v) for k, v in model.items() if isinstance(v, dict)} if isinstance(model, dict) else {}


def _check_model_keys(sections: dict[str, dict[str, Any]], where: str) -> None:
    """Refuse a key of a ``[model.<name>]`` section that is not a parameter of the model (a
    misspelled key would otherwise fail only when the model is built, after the features were
    read), naming the valid keys; ``epochs`` and ``seed`` are ``[train]`` keys. The model class is
    imported only for keys that ``defaults.toml`` does not list for it."""
    documented = _documented_model_keys()
    for name, values in sections.items():
        for key in _TRAIN_KEYS:
            if key in values:
                raise ConfigError(f"{where}: model.{name}.{key} is not a model setting: set train.{key} instead "
                                  "(one source for every model)")
        if set(values) <= documented.get(name, frozenset()):
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
