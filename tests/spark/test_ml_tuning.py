"""Tuning the Spark way: CrossValidator (2 folds, a 2 x 2 ParamGridBuilder grid) with
HierarchicalEvaluator on a real 20 Newsgroups slice, through `sparkhc tune`; the selection reads
the training split only (poisoned test labels change nothing)."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sparkhc.cli import run
from sparkhc.ml import HierarchicalClassificationModel
from tests.spark._ml_data import newsgroups_features

GRID = 'epochs = [1, 2]\nC = [0.05, 1.0]\n\n[params]\nshards = 2\n'
N_TRAIN = 200


@pytest.fixture(scope="module")
def features(spark, tmp_path_factory):
    return newsgroups_features(spark, tmp_path_factory.mktemp("ng") / "features", N_TRAIN, 60)


def _tune(features, out, tmp_path):
    grid = tmp_path / "grid.toml"
    grid.write_text(GRID)
    assert run(["tune", "--features", str(features), "--out", str(out), "--grid", str(grid), "--folds", "2",
                "--seed", "7"]) == 0
    return json.loads((out / "tuning.json").read_text())


@pytest.fixture(scope="module")
def clean(spark, features, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tune")
    return tmp / "model", _tune(features, tmp / "model", tmp)


@pytest.mark.slow
def test_cross_validator_2x2_picks_a_candidate(clean):
    out, report = clean
    cands = report["candidates"]
    assert [c["params"] for c in cands] == [{"epochs": e, "C": c} for e in (1, 2) for c in (0.05, 1.0)]
    means = [c["mean"] for c in cands]
    assert all(0.0 < m <= 1.0 for m in means) and len(set(means)) > 1
    assert report["chosen"] == int(np.argmax(means)) and report["metric"] == "hF" and report["folds"] == 2
    assert report["selection"] == {"split": "train", "fold": None, "exclude_fold": None}
    # the chosen candidate refitted on every training document and saved as a model folder
    model = HierarchicalClassificationModel.load(str(out))
    chosen = cands[report["chosen"]]["params"]
    assert model.getOrDefault("epochs") == chosen["epochs"] and model.getOrDefault("C") == chosen["C"]
    assert model.hierModel.params["C"] == chosen["C"]
    meta = json.loads((out / "metadata.json").read_text())
    assert meta["training"]["documents"] == N_TRAIN and meta["training"]["epochs"] == chosen["epochs"]
    assert (out / "tuning.png").stat().st_size > 0
    assert len((out / "tuning.tsv").read_text().splitlines()) == 5


@pytest.mark.slow
def test_poisoned_test_labels_change_nothing(spark, features, clean, tmp_path):
    poisoned = tmp_path / "poisoned"
    shutil.copytree(features, poisoned)
    changed = 0
    for part in sorted((poisoned / "features").glob("*.parquet")):
        t = pq.read_table(part)
        test = np.asarray([s == "test" for s in t.column("split").to_pylist()])
        changed += int(test.sum())
        labels = [["politics", "talk.politics.guns"] if is_test else lab
                  for is_test, lab in zip(test, t.column("labels").to_pylist(), strict=True)]
        t = t.set_column(t.schema.get_field_index("labels"), t.schema.field("labels"),
                         pa.array(labels, type=t.schema.field("labels").type))
        t = t.set_column(t.schema.get_field_index("label_ids"), t.schema.field("label_ids"),
                         pa.array([None] * t.num_rows, type=t.schema.field("label_ids").type))
        pq.write_table(t, part)
    assert changed == 60
    clean_out, clean_report = clean
    report = _tune(poisoned, tmp_path / "model", tmp_path)
    assert report["candidates"] == clean_report["candidates"] and report["chosen"] == clean_report["chosen"]
    assert (tmp_path / "model" / "state.npz").read_bytes() == (clean_out / "state.npz").read_bytes()


def test_tune_refuses_to_read_every_split(features, tmp_path):
    from sparkhc.errors import ConfigError

    grid = tmp_path / "grid.toml"
    grid.write_text(GRID)
    with pytest.raises(ConfigError, match=r"tuning on every document would read the test documents"):
        run(["tune", "--features", str(features), "--out", str(tmp_path / "m"), "--grid", str(grid),
             "--split", "all"])
    grid.write_text("taxonomy = ['x']\n")
    with pytest.raises(ConfigError, match=r"grid: taxonomy is not a tuning parameter"):
        run(["tune", "--features", str(features), "--out", str(tmp_path / "m"), "--grid", str(grid)])
