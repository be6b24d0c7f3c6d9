"""Configuration: defaults, TOML files, --set overrides, and the errors naming file and key."""

from __future__ import annotations

import pytest

from sparkhc.config import load_config, parse_override
from sparkhc.errors import ConfigError


def test_defaults_load():
    cfg = load_config()
    assert cfg.train.model == "global" and cfg.train.epochs == 0 and cfg.train.shards == 0  # 0 = auto
    assert cfg.train.max_epochs == 100 and cfg.train.patience == 10  # epochs = 0: chosen on validation
    assert cfg.train.select_epochs is False and cfg.train.validation_fraction == 0.1
    assert cfg.train.validation_folds == 0  # 0 = auto (sparkhc.epochs.inner_folds)
    assert cfg.train.calibrate == "auto" and cfg.train.calibration_folds == 4
    assert cfg.train.execution == "auto"
    assert cfg.featurize.weighting == "log_tf_idf"
    assert cfg.model_params("global") == {"C": "auto", "branching": True, "update": "cost_augmented", "margin": 1.0,
                                          "margin_rare": 0.25, "bias": 0.3, "normalize": "l2",
                                          "layout": "auto", "solver": "pa", "passes": 5}


def test_file_then_overrides(tmp_path):
    f = tmp_path / "my.toml"
    f.write_text('[train]\nepochs = 3\n[model.global]\nbranching = false\n')
    cfg = load_config([f], ["train.shards=2", "model.global.C=0.5", "featurize.max_df=1"])
    assert (cfg.train.epochs, cfg.train.shards) == (3, 2)
    assert cfg.model_params("global") == {"C": 0.5, "branching": False, "update": "cost_augmented", "margin": 1.0,
                                          "margin_rare": 0.25, "bias": 0.3, "normalize": "l2", "layout": "auto",
                                          "solver": "pa", "passes": 5}
    assert cfg.featurize.max_df == 1.0 and isinstance(cfg.featurize.max_df, float)


@pytest.mark.parametrize("item,msg", [("train.validation_fraction=1.0", "must be a float in"),
                                      ("train.validation_fraction=0", "must be a float in"),
                                      ("train.shards=-1", "must be an int >= 0"),
                                      ("train.epochs=-1", "must be an int >= 0"),
                                      ("train.max_epochs=0", "must be an int >= 1"),
                                      ("train.patience=-2", "must be an int >= 0"),
                                      ("train.calibrate=yes", "must be 'off', 'auto' or 'on', got 'yes'"),
                                      ("train.calibration_folds=2", "must be an int >= 3"),
                                      ("train.execution=fast", "must be 'auto', 'spark' or 'driver', got 'fast'"),
                                      # one rule for the key and the Param timeBudget: a finite number
                                      ("train.time_budget=inf", "must be a finite number >= 0"),
                                      ("train.time_budget=-1", "must be a finite number >= 0")])
def test_training_ranges(item, msg):
    with pytest.raises(ConfigError, match=msg):
        load_config(None, [item])
    assert load_config(None, ["train.validation_fraction=0.3", "train.select_epochs=true"]).train.select_epochs
    assert load_config(None, ["train.calibrate=on", "train.calibration_folds=3"]).train.calibrate == "on"


def test_override_values_are_toml_literals():
    assert parse_override("a.b=3") == (["a", "b"], 3)
    assert parse_override("a=true") == (["a"], True)
    assert parse_override("a=hello") == (["a"], "hello")
    assert parse_override('a=["x", "y"]') == (["a"], ["x", "y"])


def test_unknown_key_names_file_and_key(tmp_path):
    f = tmp_path / "bad.toml"
    f.write_text("[train]\nepoch = 3\n")
    with pytest.raises(ConfigError, match=r"bad.toml \[train\]: unknown key 'epoch'"):
        load_config([f])


def test_wrong_type_names_key(tmp_path):
    f = tmp_path / "bad.toml"
    f.write_text('[train]\nepochs = "ten"\n')
    with pytest.raises(ConfigError, match=r"key 'epochs' must be of type int, got str"):
        load_config([f])
    with pytest.raises(ConfigError, match=r"key 'epochs' must be of type int, got bool"):
        load_config(overrides=["train.epochs=true"])


def test_unknown_section_and_bad_toml(tmp_path):
    f = tmp_path / "bad.toml"
    f.write_text("[trian]\nepochs = 3\n")
    with pytest.raises(ConfigError, match=r"unknown section \[trian\]"):
        load_config([f])
    g = tmp_path / "broken.toml"
    g.write_text("[train\n")
    with pytest.raises(ConfigError, match="broken.toml: invalid TOML"):
        load_config([g])
    with pytest.raises(ConfigError, match="not found"):
        load_config([tmp_path / "missing.toml"])
    with pytest.raises(ConfigError, match="expected key=value"):
        load_config(overrides=["train.epochs"])


def test_unknown_model_parameter_is_rejected_by_the_model():
    from sparkhc.models import get_model_class
    from sparkhc.taxonomy import Taxonomy

    tax = Taxonomy.from_edges([("R", "A"), ("R", "B")])
    with pytest.raises(ConfigError, match=r"unknown parameter\(s\) \['Cx'\]"):
        get_model_class("global")(tax, 10, Cx=1.0)
    with pytest.raises(ConfigError, match="unknown model 'nope'"):
        get_model_class("nope")


def test_reader_choices_are_written_once():
    """The reader options' choices: the readers' Literal types, the CLI's flags and the
    configuration keys all take those of :mod:`sparkhc.config`."""
    import argparse
    from typing import get_args

    from sparkhc import config
    from sparkhc.cli._common import reader_flags
    from sparkhc.corpus import records

    assert get_args(records.OnEmpty) == config.ON_EMPTY
    assert get_args(records.OnInvalid) == config.ON_INVALID
    assert get_args(records.UnknownLabels) == config.UNKNOWN_LABELS
    p = argparse.ArgumentParser()
    reader_flags(p)
    flags = {a.dest: tuple(a.choices) for a in p._actions if a.choices}
    assert flags == {"unknown_labels": config.UNKNOWN_LABELS, "on_empty": config.ON_EMPTY,
                     "on_invalid": config.ON_INVALID}
