"""One source of defaults: ``sparkhc/conf/defaults.toml`` writes every default once, and what it
documents is what the code uses when nothing is set.

The ``FeaturizeConfig`` / ``TrainConfig`` / ``PredictConfig`` dataclasses and the ``pyspark.ml``
Params take their defaults from the file (:mod:`sparkhc.defaults`); a model class's own
``defaults`` are the model a directly built instance gets (for the paper's models, the paper's).
These tests tie them: the dataclasses list the TOML's keys with values of their types; every
``[model.<name>]`` key of the TOML is a parameter of that model and is what the model is built with
from the default configuration (``sparkhc train``'s path, :func:`sparkhc.spark.pipelines.new_model`);
each registered model built with no arguments differs from that model only where the file or
``[train]`` says so, and its docstring says where the configured values come from; docs/api.md's
Param defaults are what ``scripts/api_defaults.py`` writes from the stages, and agree with the TOML.
"""

from __future__ import annotations

import dataclasses
import re
import tomllib
from pathlib import Path
from typing import Any, get_type_hints

import pytest

from sparkhc.config import _SECTIONS, DEFAULT_CONF, Config, TrainConfig, load_config
from sparkhc.models import get_model_class, names
from sparkhc.taxonomy import Taxonomy

ROOT = Path(__file__).resolve().parents[2]
TOML: dict[str, Any] = tomllib.loads(DEFAULT_CONF.read_text(encoding="utf-8"))
MODEL_SECTIONS = sorted(TOML["model"])


def _same(a: Any, b: Any) -> bool:
    """Equal values of the same type (``1`` is not ``1.0`` or ``True`` here)."""
    return type(a) is type(b) and a == b


@pytest.mark.parametrize("section", sorted(_SECTIONS))
def test_dataclass_fields_are_the_toml_section_with_values_of_their_types(section: str) -> None:
    cls = _SECTIONS[section]
    documented = TOML[section]
    hints = get_type_hints(cls)
    fields = {f.name: f.default for f in dataclasses.fields(cls)}
    assert sorted(documented) == sorted(fields), f"[{section}] of defaults.toml and {cls.__name__} list other keys"
    wrong = {k: v for k, v in documented.items() if type(v) is not hints[k]}
    assert not wrong, f"[{section}] of defaults.toml: values not of the dataclass's types: {wrong}"
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


def _taxonomy(cls: Any) -> tuple[Taxonomy, list[list[str]]]:
    """A small taxonomy the model takes, and the label sets of its training documents."""
    if cls.multi_dimensional:  # root -> class spaces -> classes
        edges = [("R", "S1"), ("S1", "x"), ("S1", "y"), ("R", "S2"), ("S2", "u"), ("S2", "v")]
        return Taxonomy.from_edges(edges), [["x", "u"], ["y", "v"]]
    return Taxonomy.from_edges([("R", "A"), ("R", "B")]), [["A"], ["B"]]


def _default_trained(cls: Any) -> Any:
    """The model ``sparkhc train`` builds for ``cls`` with the default configuration (before training)."""
    from sparkhc.spark.pipelines import new_model

    tax, combos = _taxonomy(cls)
    return new_model(cls.name, load_config(), tax, 10, None, combos=combos)


def _configured_params(cls: Any) -> dict[str, Any]:
    """The parameters defaults.toml gives a model of ``cls``, computed from the file alone: its
    ``[model.<name>]`` over the class defaults; ``epochs`` (0 = chosen by the training: 10 for the
    model's own fits) and ``seed`` from ``[train]`` where the model has them."""
    want = {**cls.defaults, **TOML["model"].get(cls.name, {})}
    if "epochs" in want:
        want["epochs"] = TOML["train"]["epochs"] or 10
    if "seed" in want:
        want["seed"] = TOML["train"]["seed"]
    return want


@pytest.mark.parametrize("name", MODEL_SECTIONS)
def test_a_model_built_from_the_default_configuration_has_the_toml_values(name: str) -> None:
    cls = get_model_class(name)
    built = _default_trained(cls).params
    for key, value in TOML["model"][name].items():
        assert _same(built[key], value), f"model {name!r}: {key} is {built[key]!r} when built, {value!r} in defaults.toml"


@pytest.mark.parametrize("name", names())
def test_a_model_built_with_no_arguments_and_the_model_the_default_configuration_trains(name: str) -> None:
    """Built directly with no arguments, a model has its class defaults; the default configuration
    builds it with defaults.toml's values (``configured()`` too). They differ only in the keys of
    ``[model.<name>]`` and ``[train]``'s ``epochs`` / ``seed``, and the docstrings say so."""
    cls = get_model_class(name)
    tax, _ = _taxonomy(cls)
    trained = _default_trained(cls).params
    want = _configured_params(cls)
    assert trained == want and all(type(trained[k]) is type(want[k]) for k in want), name
    assert cls.configured(tax, 10).params == trained
    direct = cls(tax, 10).params
    assert direct == cls.defaults
    differ = sorted(k for k in direct if not _same(direct[k], trained[k]))
    assert set(differ) <= {*TOML["model"].get(name, {}), "epochs", "seed"}, (name, differ)
    if set(differ) - {"epochs", "seed"}:
        assert "defaults.toml" in (cls.__doc__ or ""), (name, differ)
    if differ:  # the constructor names both sources and the method that builds the configured model
        doc = cls.__init__.__doc__ or ""
        assert "defaults.toml" in doc and "[train]" in doc and "configured" in doc, name


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


def test_api_md_training_param_defaults_are_the_toml_train_section() -> None:
    from sparkhc.ml._params import TRAIN_PARAMS

    table = _api_defaults("`HierarchicalClassifier` / `HierarchicalClassificationModel`")
    assert set(TRAIN_PARAMS.values()) <= set(TOML["train"])
    assert {p for p, cell in table.items() if _literal(cell)[0]} >= set(TRAIN_PARAMS)
    for param, key in TRAIN_PARAMS.items():
        ok, value = _literal(table[param])
        assert ok and _same(value, TOML["train"][key]), f"docs/api.md {param} = {table[param]}, defaults.toml train.{key}"
    # C unset: the configured default of [model.<name>]; for global "auto"
    assert table["C"] == "unset" and '`"auto"`' in (ROOT / "docs" / "api.md").read_text(encoding="utf-8")


def test_api_md_featurizer_param_defaults_are_the_toml_featurize_section() -> None:
    from sparkhc.ml.featurizer import SparkhcFeaturizer

    table = _api_defaults("`SparkhcFeaturizer` / `SparkhcFeaturizerModel`")
    for param, key in SparkhcFeaturizer.SPEC_PARAMS.items():
        ok, value = _literal(table[param])
        assert ok and _same(value, TOML["featurize"][key]), f"docs/api.md {param} = {table[param]}, featurize.{key}"


def test_api_md_default_cells_are_what_the_writer_writes_from_the_stages() -> None:
    """docs/api.md's default column is written by scripts/api_defaults.py from the stages' defaults
    (those of configuration keys: defaults.toml); a stale cell is rewritten, the others left."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("api_defaults", ROOT / "scripts" / "api_defaults.py")
    assert spec is not None and spec.loader is not None
    writer = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(writer)
    text = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    assert writer.rewrite(text) == (text, []), "run: python scripts/api_defaults.py"
    stale = text.replace("| `maxEpochs` | `100` |", "| `maxEpochs` | `50` |").replace(
        "| `stopWords` | `true` |", "| `stopWords` | `false` |")
    assert stale != text
    assert writer.rewrite(stale) == (text, ["HierarchicalClassifier.maxEpochs: `50` -> `100`",
                                            "SparkhcFeaturizer.stopWords: `false` -> `true`"])
