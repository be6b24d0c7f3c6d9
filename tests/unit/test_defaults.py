"""One source of defaults: what ``sparkhc/conf/defaults.toml`` documents is what the code uses when
nothing is set.

Three places hold defaults: the TOML file (the configured default of every key), the
``FeaturizeConfig`` / ``TrainConfig`` / ``PredictConfig`` dataclasses (a ``Config`` built without
the file), and each model class's ``defaults`` (the paper's model, used by the experiments and by a
model built directly). These tests tie them: the dataclasses equal the TOML sections key for key;
every ``[model.<name>]`` key of the TOML is a parameter of that model and is what the model is built
with from the default configuration (``sparkhc train``'s path, :func:`sparkhc.spark.pipelines.model_params`);
where a class default differs from the TOML, the class docstring says the configured default comes
from ``defaults.toml``; and docs/api.md's Param defaults agree with the estimators' Params.
"""

from __future__ import annotations

import dataclasses
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

from sparkhc.config import _SECTIONS, DEFAULT_CONF, Config, TrainConfig, load_config
from sparkhc.models import get_model_class

ROOT = Path(__file__).resolve().parents[2]
TOML: dict[str, Any] = tomllib.loads(DEFAULT_CONF.read_text(encoding="utf-8"))
MODEL_SECTIONS = sorted(TOML["model"])


def _same(a: Any, b: Any) -> bool:
    """Equal values of the same type (``1`` is not ``1.0`` or ``True`` here)."""
    return type(a) is type(b) and a == b


@pytest.mark.parametrize("section", sorted(_SECTIONS))
def test_dataclass_defaults_equal_the_toml_section(section: str) -> None:
    cls = _SECTIONS[section]
    documented = TOML[section]
    fields = {f.name: f.default for f in dataclasses.fields(cls)}
    assert sorted(documented) == sorted(fields), f"[{section}] of defaults.toml and {cls.__name__} list other keys"
    differ = {k: (documented[k], fields[k]) for k in fields if not _same(documented[k], fields[k])}
    assert not differ, f"[{section}]: defaults.toml value vs {cls.__name__} default: {differ}"


def test_loading_no_file_gives_the_dataclass_defaults_and_the_toml_models() -> None:
    cfg = load_config()
    assert dataclasses.replace(cfg, source="x") == Config(model=TOML["model"], source="x")
    assert TrainConfig() == cfg.train


def test_the_toml_has_no_section_the_code_does_not_read() -> None:
    assert set(TOML) == {*_SECTIONS, "model"}


@pytest.mark.parametrize("name", MODEL_SECTIONS)
def test_model_section_keys_are_parameters_of_the_model(name: str) -> None:
    cls = get_model_class(name)
    unknown = sorted(set(TOML["model"][name]) - set(cls.defaults))
    assert not unknown, f"[model.{name}] of defaults.toml documents keys {cls.__name__} does not have: {unknown}"
    assert not {"epochs", "seed"} & set(TOML["model"][name])  # [train] keys, one source


@pytest.mark.parametrize("name", MODEL_SECTIONS)
def test_a_model_built_from_the_default_configuration_has_the_toml_values(name: str) -> None:
    from sparkhc.spark.pipelines import model_params
    from sparkhc.taxonomy import Taxonomy

    cls = get_model_class(name)
    cfg = load_config()
    if cls.multi_dimensional:  # root -> class spaces -> classes
        tax = Taxonomy.from_edges([("R", "S1"), ("S1", "x"), ("S1", "y"), ("R", "S2"), ("S2", "u"), ("S2", "v")])
    else:
        tax = Taxonomy.from_edges([("R", "A"), ("R", "B")])
    built = cls(tax, 10, **model_params(cls, cfg)).params
    for key, value in TOML["model"][name].items():
        assert _same(built[key], value), f"model {name!r}: {key} is {built[key]!r} when built, {value!r} in defaults.toml"
    # the keys the TOML does not list are the class's own defaults (epochs / seed come from [train])
    for key, value in cls.defaults.items():
        if key not in TOML["model"][name] and key not in ("epochs", "seed"):
            assert _same(built[key], value), (name, key)
    if "seed" in cls.defaults:
        assert built["seed"] == cfg.train.seed


@pytest.mark.parametrize("name", MODEL_SECTIONS)
def test_where_the_class_default_differs_its_docstring_says_where_the_configured_one_is(name: str) -> None:
    cls = get_model_class(name)
    differ = sorted(k for k, v in TOML["model"][name].items() if not _same(cls.defaults.get(k), v))
    if differ:
        doc = cls.__doc__ or ""
        assert "defaults.toml" in doc, (f"{cls.__name__}: {differ} differ from [model.{name}] of defaults.toml; "
                                        "its docstring must say the configured default comes from there")


def test_the_global_model_configured_defaults() -> None:
    """The product's global model (what `sparkhc train` trains with nothing set), against the
    paper's (the class defaults, pinned by experiments/murawaki.py)."""
    cls = get_model_class("global")
    assert TOML["model"]["global"]["C"] == "auto" and cls.defaults["C"] == 1.0
    assert load_config().model_params("global")["C"] == "auto"


# ------------------------------------------------------------------------------- docs/api.md


def _api_defaults(heading: str) -> dict[str, str]:
    """``{Param: default cell}`` of the first table after the ``## heading`` of docs/api.md."""
    text = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    part = text.split(f"\n## {heading}", 1)[1].split("\n## ", 1)[0]
    return dict(re.findall(r"^\| `(\w+)` \| ([^|]+?) \|", part, re.M))


def _literal(cell: str) -> tuple[bool, Any]:
    """(True, value) for a back-quoted literal (``"x"``, ``0``, ``0.5``, ``true``, ``{}``), else (False, None)."""
    m = re.fullmatch(r"`(.*)`", cell.strip())
    if not m:
        return False, None
    return True, tomllib.loads(f"v = {m.group(1)}")["v"]


API_TABLES = {
    "`HierarchicalClassifier` / `HierarchicalClassificationModel`": "HierarchicalClassifier",
    "`HierarchicalEvaluator`": "HierarchicalEvaluator",
    "`SparkhcFeaturizer` / `SparkhcFeaturizerModel`": "SparkhcFeaturizer",
}


@pytest.mark.parametrize("heading", sorted(API_TABLES))
def test_api_md_param_defaults_are_the_params_defaults(heading: str) -> None:
    import sparkhc.ml

    stage = getattr(sparkhc.ml, API_TABLES[heading])()
    table = _api_defaults(heading)
    assert table, heading
    for name, cell in table.items():
        ok, value = _literal(cell)
        param = stage.getParam(name)
        if not ok:  # "unset" / "(required)": no default
            assert not stage.hasDefault(param), f"{heading}: {name} documented {cell!r} but has a default"
            continue
        actual = stage.getOrDefault(param)
        assert actual == value and type(actual) is type(value), f"{heading}: {name} is {actual!r}, docs/api.md says {cell}"


#: the estimator's Params that are ``[train]`` keys
PARAM_TRAIN_KEYS = {"model": "model", "epochs": "epochs", "shards": "shards", "seed": "seed", "calibrate": "calibrate",
                    "calibrationFolds": "calibration_folds", "calibrationDocuments": "calibration_documents",
                    "maxEpochs": "max_epochs", "patience": "patience", "validationFolds": "validation_folds",
                    "refit": "refit", "cSearch": "c_search", "timeBudget": "time_budget"}


def test_api_md_training_param_defaults_are_the_toml_train_section() -> None:
    table = _api_defaults("`HierarchicalClassifier` / `HierarchicalClassificationModel`")
    for param, key in PARAM_TRAIN_KEYS.items():
        ok, value = _literal(table[param])
        assert ok and _same(value, TOML["train"][key]), f"docs/api.md {param} = {table[param]}, defaults.toml train.{key}"
    from sparkhc.ml._params import TRAIN_PARAMS

    assert TRAIN_PARAMS == PARAM_TRAIN_KEYS  # the table the estimator sets defaults and the training from
    # C unset: the configured default of [model.<name>]; for global "auto"
    assert table["C"] == "unset" and '`"auto"`' in (ROOT / "docs" / "api.md").read_text(encoding="utf-8")


def test_api_md_featurizer_param_defaults_are_the_toml_featurize_section() -> None:
    table = _api_defaults("`SparkhcFeaturizer` / `SparkhcFeaturizerModel`")
    keys = {"mode": "mode", "weighting": "weighting", "minDF": "min_df", "maxDF": "max_df", "stopWords": "stop_words",
            "l2Normalize": "l2_normalize", "hashBits": "hash_bits", "tokenPattern": "token_pattern"}
    for param, key in keys.items():
        ok, value = _literal(table[param])
        assert ok and _same(value, TOML["featurize"][key]), f"docs/api.md {param} = {table[param]}, featurize.{key}"
