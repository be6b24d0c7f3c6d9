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
from tests.spark._ml_data import newsgroups_df, newsgroups_features, newsgroups_taxonomy

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


@pytest.mark.slow
def test_pipeline_with_featurizer_saves_a_model_sparkhc_reclassify_reads(spark, docs, tmp_path):
    import json

    from sparkhc.spark.reclassify import read_output

    pipe = Pipeline(stages=[SparkhcFeaturizer(),
                            HierarchicalClassifier(taxonomy=str(newsgroups_taxonomy()), epochs=1, shards=2)])
    fitted = pipe.fit(docs.where(F.col("split") == "train"))
    fitted.write().save(str(tmp_path / "pipe"))
    stage = next((tmp_path / "pipe" / "stages").glob("1_*"))
    spec = fitted.stages[0].spec
    assert FeatureSpec.load(stage).fingerprint == spec.fingerprint  # the featurizer's spec travels with the model
    test = docs.where(F.col("split") == "test")
    day = tmp_path / "collection" / "ingest_date=2026-11-30"
    day.mkdir(parents=True)
    rows = test.select("doc_id", "text").collect()
    (day / "docs.jsonl").write_text("".join(json.dumps({"doc_id": r[0], "text": r[1]}) + "\n" for r in rows))
    assert run(["reclassify", "--input", str(tmp_path / "collection"), "--out", str(tmp_path / "out"),
                "--model", str(stage)]) == 0
    got = read_output(tmp_path / "out")
    cli = dict(zip(got.column("doc_id").to_pylist(), got.column("labels").to_pylist(), strict=True))
    mine = {r["doc_id"]: list(r["prediction"]) for r in fitted.transform(test).collect()}
    assert cli == mine and len(mine) == N_TEST
