"""SparkhcFeaturizer equals `sparkhc featurize` on the same documents (spec and every feature row),
and a Pipeline of SparkhcFeaturizer and HierarchicalClassifier trains the weights `sparkhc train`
trains on the featurize output."""

from __future__ import annotations

from dataclasses import replace

import pytest
from chispa import assert_df_equality
from pyspark.ml import Pipeline, PipelineModel
from pyspark.sql import functions as F

from sparkhc.cli import run
from sparkhc.ml import HierarchicalClassifier, SparkhcFeaturizer, SparkhcFeaturizerModel
from sparkhc.text.spec import FeatureSpec
from tests.spark._ml_data import newsgroups_df, newsgroups_features

N_TRAIN, N_TEST = 160, 40
COLS = ["doc_id", "indices", "values", "counts"]


@pytest.fixture(scope="module")
def features(spark, tmp_path_factory):
    return newsgroups_features(spark, tmp_path_factory.mktemp("ng") / "features", N_TRAIN, N_TEST)


@pytest.fixture(scope="module")
def docs(spark):
    return newsgroups_df(spark, N_TRAIN, N_TEST).cache()


@pytest.mark.slow
def test_featurizer_equals_sparkhc_featurize(spark, features, docs, tmp_path):
    model = SparkhcFeaturizer().fit(docs.where(F.col("split") == "train"))
    # featurize fits on split 'train' (fit_on); the featurizer on every row it is given (the same rows)
    spec = replace(FeatureSpec.load(features), fit_on=None)
    assert model.spec.fingerprint == spec.fingerprint and model.spec.vocabulary == spec.vocabulary
    assert model.spec.df == spec.df and model.spec.n_fit_docs == N_TRAIN
    cli = spark.read.parquet(str(features / "features")).select(*COLS)
    assert_df_equality(model.transform(docs).select(*COLS), cli, ignore_row_order=True, ignore_nullable=True,
                       ignore_metadata=True)
    model.write().save(str(tmp_path / "f"))
    again = SparkhcFeaturizerModel.load(str(tmp_path / "f"))
    assert again.spec.fingerprint == spec.fingerprint and again.getOrDefault("minDF") == model.getOrDefault("minDF")


@pytest.mark.slow
def test_featurizer_and_classifier_pipeline_trains_like_sparkhc_train(spark, features, docs, tmp_path):
    assert run(["train", "--features", str(features), "--out", str(tmp_path / "cli"), "--set", "train.epochs=1",
                "--set", "train.shards=2"]) == 0
    pipe = Pipeline(stages=[SparkhcFeaturizer(),
                            HierarchicalClassifier(taxonomy=str(features / "taxonomy.tsv"), epochs=1, shards=2)])
    fitted = pipe.fit(docs.where(F.col("split") == "train"))
    fitted.write().save(str(tmp_path / "pipe"))
    stage = next((tmp_path / "pipe" / "stages").glob("1_*"))
    assert (stage / "state.npz").read_bytes() == (tmp_path / "cli" / "state.npz").read_bytes()
    loaded = PipelineModel.load(str(tmp_path / "pipe"))
    test = docs.where(F.col("split") == "test")
    assert_df_equality(fitted.transform(test).select("doc_id", "prediction"),
                       loaded.transform(test).select("doc_id", "prediction"), ignore_row_order=True)
