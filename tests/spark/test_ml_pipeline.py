"""sparkhc.ml in a pyspark.ml Pipeline on a real slice of 20 Newsgroups: fit, transform, save, load;
the saved stage is a sparkhc model folder that `sparkhc predict` reads and predicts the same with;
HierarchicalEvaluator equals `sparkhc evaluate` on every metric."""

from __future__ import annotations

import json

import pytest
from chispa import assert_df_equality
from pyspark.ml import Pipeline, PipelineModel
from pyspark.ml.feature import IDF, CountVectorizer, RegexTokenizer, StopWordsRemover
from pyspark.sql import functions as F

from sparkhc.cli import run
from sparkhc.ml import (
    HierarchicalClassificationModel,
    HierarchicalClassifier,
    HierarchicalEvaluator,
    write_features,
)
from sparkhc.ml.evaluator import MDC_KEYS, METRIC_ALIASES, metric_key
from sparkhc.persistence import load_model
from sparkhc.taxonomy import Taxonomy
from tests.spark._ml_data import newsgroups_df, newsgroups_taxonomy

N_TRAIN, N_TEST = 240, 120


@pytest.fixture(scope="module")
def data(spark):
    df = newsgroups_df(spark, N_TRAIN, N_TEST).cache()
    return df.where("split = 'train'"), df.where("split = 'test'")


@pytest.fixture(scope="module")
def leaves():
    tax = Taxonomy.load(newsgroups_taxonomy())
    return sorted(tax.names[int(c)] for c in tax.leaves)


@pytest.fixture(scope="module")
def fitted(data, leaves):
    train, _ = data
    clf = HierarchicalClassifier(taxonomy=str(newsgroups_taxonomy()), featuresCol="tfidf", epochs=2, shards=2,
                                 scoresCol="scores", scoredLabels=leaves)
    pipe = Pipeline(stages=[
        RegexTokenizer(inputCol="text", outputCol="tokens", pattern="[^a-z]+", toLowercase=True, minTokenLength=2),
        StopWordsRemover(inputCol="tokens", outputCol="words"),
        CountVectorizer(inputCol="words", outputCol="tf", minDF=2.0),
        IDF(inputCol="tf", outputCol="tfidf"),
        clf,
    ])
    return pipe.fit(train)


def _preds(df):
    return df.select("doc_id", "prediction", "scores")


@pytest.mark.slow
def test_pipeline_fit_transform_save_load_and_cli_predict(spark, data, fitted, leaves, tmp_path):
    _, test = data
    out = fitted.transform(test).cache()
    rows = out.select("doc_id", "labels", "prediction", "scores").collect()
    assert len(rows) == N_TEST
    assert all(len(r["prediction"]) >= 1 and len(r["scores"]) == len(r["prediction"]) for r in rows)
    assert {lab for r in rows for lab in r["prediction"]} <= set(leaves)
    # far above chance (1 in 20 leaves) after 240 training postings
    assert sum(r["prediction"][0] in r["labels"] for r in rows) / N_TEST > 0.3

    path = tmp_path / "pipeline"
    fitted.write().overwrite().save(str(path))
    loaded = PipelineModel.load(str(path))
    assert isinstance(loaded.stages[-1], HierarchicalClassificationModel)
    again = loaded.transform(test)
    assert_df_equality(_preds(out), _preds(again), ignore_row_order=True)

    # the stage folder is a sparkhc model folder: sparkhc predict reads it and predicts the same
    stage = next((path / "stages").glob("4_*"))
    model, meta = load_model(stage)
    assert meta["model"] == "global" and meta["scored_labels"] == leaves
    feats = tmp_path / "features"
    write_features(PipelineModel(stages=loaded.stages[:-1]).transform(test), feats, newsgroups_taxonomy(),
                   features_col="tfidf", scored_labels=leaves, num_partitions=2)
    pred = tmp_path / "pred"
    assert run(["predict", "--model", str(stage), "--features", str(feats), "--out", str(pred), "--split", "test"]) == 0
    cli = spark.read.parquet(str(pred / "data")).select(
        "doc_id", F.col("pred_labels").alias("prediction"), F.col("pred_scores").alias("scores"))
    assert_df_equality(_preds(again), cli, ignore_row_order=True, ignore_nullable=True, ignore_metadata=True)

    # HierarchicalEvaluator equals sparkhc evaluate on every metric, exactly
    assert run(["evaluate", "--predictions", str(pred)]) == 0
    metrics = json.loads((pred / "metrics.json").read_text())["metrics"]
    on_transform = HierarchicalEvaluator()  # taxonomy and scored labels from the prediction column
    assert on_transform.evaluateAll(out) == metrics
    on_cli = HierarchicalEvaluator(labelsCol="labels", predictionCol="pred_labels",
                                   taxonomy=str(newsgroups_taxonomy()), scoredLabels=leaves)
    cli_df = spark.read.parquet(str(pred / "data"))
    assert on_cli.evaluateAll(cli_df) == metrics
    names = [n for n in METRIC_ALIASES if metric_key(n) not in MDC_KEYS]
    for name in names:
        assert on_transform.setMetricName(name).evaluate(out) == metrics[metric_key(name)], name
    assert {metric_key(n) for n in names} | {"n_docs", "hloss_uniform_std", "hloss_normalized_std", "zero_one_std",
                                             "symdiff_std"} == set(metrics)
