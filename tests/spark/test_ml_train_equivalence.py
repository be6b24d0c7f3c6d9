"""The estimator trains with the code of `sparkhc train`: on sparkhc's own features it gives
bit-identical weights to `sparkhc train` with the same settings, and a vector column holding the
same features gives the same weights again (the Arrow conversion of vectors is lossless)."""

from __future__ import annotations

import json

import pytest
from pyspark.ml.linalg import SparseVector, VectorUDT
from pyspark.sql import functions as F

from sparkhc.cli import run
from sparkhc.ml import HierarchicalClassificationModel, HierarchicalClassifier, read_features
from tests.spark._ml_data import newsgroups_features

SETTINGS = {"epochs": 2, "shards": 2, "seed": 3}


@pytest.fixture(scope="module")
def features(spark, tmp_path_factory):
    return newsgroups_features(spark, tmp_path_factory.mktemp("ng") / "features", 240, 40)


def _cli_train(features, out, model):
    sets = [x for k, v in SETTINGS.items() for x in ("--set", f"train.{k}={v}")]
    assert run(["train", "--features", str(features), "--out", str(out), "--model", model, *sets]) == 0


@pytest.mark.parametrize("model", ["global", "h_svm"])  # parameter mixing, node-parallel
def test_estimator_on_sparkhc_features_is_bit_identical_to_sparkhc_train(spark, features, tmp_path, model):
    _cli_train(features, tmp_path / "cli", model)
    train = read_features(spark, features).where(F.col("split") == "train")
    fitted = HierarchicalClassifier(taxonomy=str(features / "taxonomy.tsv"), model=model, **SETTINGS).fit(train)
    fitted.write().save(str(tmp_path / "ml"))
    assert (tmp_path / "ml" / "state.npz").read_bytes() == (tmp_path / "cli" / "state.npz").read_bytes()
    assert (tmp_path / "ml" / "taxonomy.tsv").read_bytes() == (tmp_path / "cli" / "taxonomy.tsv").read_bytes()
    cli_meta = json.loads((tmp_path / "cli" / "metadata.json").read_text())
    ml_meta = json.loads((tmp_path / "ml" / "metadata.json").read_text())
    for key in ("params", "n_features", "counters", "feature_spec_fingerprint", "taxonomy_fingerprint"):
        assert ml_meta[key] == cli_meta[key], key
    for key in ("documents", "epochs", "shards", "seed", "node_parallel", "epoch_log"):
        assert ml_meta["training"][key] == cli_meta["training"][key], key
    # a model folder written by sparkhc train loads as a HierarchicalClassificationModel
    cli_model = HierarchicalClassificationModel.load(str(tmp_path / "cli"))
    assert cli_model.getOrDefault("model") == model and cli_model.getNumFeatures() == cli_meta["n_features"]


def test_vector_column_gives_the_same_weights_as_the_layout(spark, features, tmp_path):
    train = read_features(spark, features).where(F.col("split") == "train")
    n = json.loads((features / "_SUMMARY.json").read_text())["n_features"]
    to_vec = F.udf(lambda i, v: SparseVector(n, list(i), [float(x) for x in v]), VectorUDT())
    vectors = train.select("doc_id", "labels", to_vec("indices", "values").alias("features"))
    clf = HierarchicalClassifier(taxonomy=str(features / "taxonomy.tsv"), numFeatures=n, **SETTINGS)
    clf.fit(train).write().save(str(tmp_path / "layout"))
    clf.fit(vectors).write().save(str(tmp_path / "vector"))
    assert (tmp_path / "vector" / "state.npz").read_bytes() == (tmp_path / "layout" / "state.npz").read_bytes()
