"""Accuracy that does not depend on the feature pipeline's scale (the PA models' ``normalize = "l2"``):
a ``CountVectorizer`` -> ``IDF`` pipeline without a ``Normalizer``, a ``HashingTF`` pipeline and a
``Normalizer``-ed one reach the same hF on a 20 Newsgroups slice, and C changes the model on
unnormalised input (it was inert there: the step min(C, loss / ||x||^2) never reached C)."""

from __future__ import annotations

import hashlib

import pytest
from pyspark.ml import Pipeline
from pyspark.ml.feature import IDF, CountVectorizer, HashingTF, Normalizer, RegexTokenizer, StopWordsRemover

from sparkhc.ml import HierarchicalClassifier, HierarchicalEvaluator
from sparkhc.taxonomy import Taxonomy
from tests.spark._ml_data import newsgroups_df, newsgroups_taxonomy

N_TRAIN, N_TEST = 800, 600


@pytest.fixture(scope="module")
def data(spark):
    df = newsgroups_df(spark, N_TRAIN, N_TEST, seed=3).cache()
    return df.where("split = 'train'"), df.where("split = 'test'")


def _pipe(kind: str, **params):
    tok = [RegexTokenizer(inputCol="text", outputCol="tokens", pattern="[^a-z]+", toLowercase=True, minTokenLength=2),
           StopWordsRemover(inputCol="tokens", outputCol="words")]
    if kind == "hashing":
        vec = [HashingTF(inputCol="words", outputCol="tf", numFeatures=1 << 16), IDF(inputCol="tf", outputCol="x")]
    else:
        vec = [CountVectorizer(inputCol="words", outputCol="tf", minDF=2.0), IDF(inputCol="tf", outputCol="x")]
    if kind == "normalizer":
        vec.append(Normalizer(inputCol="x", outputCol="xn"))
    clf = HierarchicalClassifier(taxonomy=str(newsgroups_taxonomy()), featuresCol="xn" if kind == "normalizer" else "x",
                                 epochs=10, shards=2, **params)
    return Pipeline(stages=[*tok, *vec, clf])


def _hf(model, test) -> float:
    tax = Taxonomy.load(newsgroups_taxonomy())
    leaves = sorted(tax.names[int(c)] for c in tax.leaves)
    ev = HierarchicalEvaluator(metricName="hF", taxonomy=str(newsgroups_taxonomy()), scoredLabels=leaves)
    return float(ev.evaluate(model.transform(test)))


def _weights_hash(pipeline_model) -> str:
    state = pipeline_model.stages[-1].hierModel.get_state()  # the fitted sparkhc model
    return hashlib.sha256(state.arrays["W"].tobytes()).hexdigest()


@pytest.mark.slow
def test_pipelines_of_any_scale_reach_the_normalized_accuracy(data):
    train, test = data
    hf = {kind: _hf(_pipe(kind, C=0.3).fit(train), test) for kind in ("normalizer", "plain", "hashing")}
    print(hf)
    assert hf["normalizer"] > 0.7  # far above chance (20 leaves) on 800 postings
    assert hf["plain"] >= hf["normalizer"] - 0.01  # the done-when line: at most 1 hF point lost
    assert hf["hashing"] >= hf["normalizer"] - 0.02  # another vocabulary (hashed, no min_df): within noise


@pytest.mark.slow
def test_c_changes_the_model_on_unnormalised_input(data):
    train, _ = data
    hashes = {c: _weights_hash(_pipe("plain", C=c).fit(train)) for c in (0.1, 10.0)}
    assert hashes[0.1] != hashes[10.0]
    off = {c: _weights_hash(_pipe("plain", C=c, modelParams={"normalize": "off"}).fit(train)) for c in (0.1, 10.0)}
    assert off[0.1] == off[10.0]  # what "off" keeps: raw tf-idf norms are large, min(C, loss/||x||^2) < 0.1
