"""Spark evaluation equals the numpy computation exactly (==) for every metric."""

from __future__ import annotations

import numpy as np
import pytest
from pyspark.sql.types import ArrayType, DoubleType, IntegerType, StringType, StructField, StructType

from sparkhc.metrics import MDCCounts, MetricCounts, evaluate
from sparkhc.spark.evaluate import aggregate_mdc, aggregate_metrics
from sparkhc.taxonomy import Taxonomy

SCHEMA = StructType(
    [
        StructField("doc_id", StringType()),
        StructField("labels", ArrayType(StringType())),
        StructField("pred_labels", ArrayType(StringType())),
        StructField("scores", ArrayType(DoubleType())),
    ]
)


def _random_case(seed: int, n_docs: int) -> tuple[Taxonomy, list, list, np.ndarray]:
    rng = np.random.default_rng(seed)
    edges = [("R", "n1")]
    for i in range(2, 19):
        p = int(rng.integers(0, i))
        edges.append(("R" if p == 0 else f"n{p}", f"n{i}"))
    tax = Taxonomy.from_edges(edges).with_self_leaves()
    names = tax.names[1:]  # virtual "/_self" names included: they count as their parent
    gold, pred = [], []
    for _ in range(n_docs):
        gold.append([names[int(c)] for c in rng.integers(0, len(names), size=int(rng.integers(0, 4)))])
        pred.append([names[int(c)] for c in rng.integers(0, len(names), size=int(rng.integers(0, 3)))])
    scores = np.round(rng.normal(size=(n_docs, tax.n_nodes)), 1)  # coarse: many ties
    return tax, gold, pred, scores


def test_spark_metrics_equal_numpy_exactly(spark):
    tax, gold, pred, scores = _random_case(11, 300)
    rows = [
        (f"d{i}", None if (i % 37 == 0 and not g) else g, p, scores[i].tolist())
        for i, (g, p) in enumerate(zip(gold, pred, strict=True))
    ]
    df = spark.createDataFrame(spark.sparkContext.parallelize(rows, 4), SCHEMA).cache()
    assert df.rdd.getNumPartitions() == 4
    leaves = [int(c) for c in tax.leaves if not tax.virtual[c]]
    for scored, score_col in ((None, "scores"), (leaves, None)):
        got = aggregate_metrics(df, tax, scored=scored, score_col=score_col).compute()
        expected = evaluate(gold, pred, tax, scored=scored, scores=scores if score_col else None)
        assert got.keys() == expected.keys()
        for k in expected:
            assert got[k] == expected[k], k
        assert ("BEP" in got) == (score_col is not None)
        assert got["n_docs"] == 300
    df.unpersist()


def test_spark_empty_dataframe_and_unknown_label(spark):
    tax = Taxonomy.from_edges([("ROOT", "A"), ("ROOT", "B"), ("A", "AA")])
    empty = spark.createDataFrame(spark.sparkContext.emptyRDD(), SCHEMA)
    counts = aggregate_metrics(empty, tax)
    assert isinstance(counts, MetricCounts) and counts.compute() == MetricCounts(tax).compute()
    bad = spark.createDataFrame([("d0", ["A"], ["ZZ"], None)], SCHEMA)
    with pytest.raises(Exception, match="label 'ZZ' is not a node"):
        aggregate_metrics(bad, tax)


def test_spark_mdc_equals_numpy(spark):
    rng = np.random.default_rng(5)
    gold = rng.integers(0, 3, size=(200, 4))
    pred = np.where(rng.random((200, 4)) < 0.7, gold, rng.integers(0, 3, size=(200, 4)))
    schema = StructType(
        [StructField("gold", ArrayType(IntegerType())), StructField("pred", ArrayType(IntegerType()))]
    )
    rows = [(g.tolist(), p.tolist()) for g, p in zip(gold, pred, strict=True)]
    df = spark.createDataFrame(spark.sparkContext.parallelize(rows, 3), schema)
    got = aggregate_mdc(df, "gold", "pred")
    ref = MDCCounts()
    ref.add(gold, pred)
    assert got.compute() == ref.compute()
    assert got.n_docs == 200
