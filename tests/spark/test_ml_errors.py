"""sparkhc.ml: bad input gets a clear error naming the column or Param and what was expected."""

from __future__ import annotations

import json

import pytest
from pyspark.ml.linalg import Vectors, VectorUDT
from pyspark.sql import types as T

from sparkhc.errors import ConfigError, InputDataError, ModelError, SchemaError
from sparkhc.ml import HierarchicalClassificationModel, HierarchicalClassifier, HierarchicalEvaluator

PAIRS = [("ROOT", "a"), ("ROOT", "b"), ("a", "a1"), ("a", "a2"), ("b", "b1"), ("b", "b2")]
LEAVES = ["a1", "a2", "b1", "b2"]


STR_ARRAY = T.ArrayType(T.StringType())


def _schema(labels: T.DataType = STR_ARRAY) -> T.StructType:
    return T.StructType([T.StructField("doc_id", T.StringType()), T.StructField("labels", labels),
                         T.StructField("features", VectorUDT())])


def _rows(n_features: int = 4) -> list[tuple[str, list[str], object]]:
    # each leaf fires its own feature: a separable toy problem
    return [(f"d{i}", [LEAVES[i % 4]], Vectors.sparse(n_features, [i % 4], [1.0])) for i in range(16)]


@pytest.fixture(scope="module")
def toy(spark):
    return spark.createDataFrame(_rows(), _schema())


@pytest.fixture(scope="module")
def toy_model(toy):
    return HierarchicalClassifier(taxonomy=PAIRS, epochs=2, shards=1, model="flat").fit(toy)


def test_toy_model_learns_and_names_leaves(toy, toy_model):
    got = {r["doc_id"]: list(r["prediction"]) for r in toy_model.transform(toy).collect()}
    assert got == {f"d{i}": [LEAVES[i % 4]] for i in range(16)}


def test_features_column_not_a_vector(spark):
    df = spark.createDataFrame([("d0", ["a1"], "x")], "doc_id string, labels array<string>, features string")
    with pytest.raises(SchemaError, match=r"features column 'features' has type string; expected a pyspark.ml.linalg"):
        HierarchicalClassifier(taxonomy=PAIRS).fit(df)


def test_features_column_missing(spark):
    df = spark.createDataFrame([("d0", ["a1"])], "doc_id string, labels array<string>")
    with pytest.raises(SchemaError, match=r"features column 'features' is missing"):
        HierarchicalClassifier(taxonomy=PAIRS).fit(df)


def test_features_of_the_wrong_size_for_the_model(spark, toy_model):
    # size known from the column metadata: refused when transform is called
    from pyspark.ml.feature import HashingTF

    df = spark.createDataFrame([("d0", ["a1"], ["w"])], "doc_id string, labels array<string>, words array<string>")
    hashed = HashingTF(inputCol="words", outputCol="features", numFeatures=8).transform(df)
    with pytest.raises(SchemaError, match=r"features column 'features' has 8 features; the model was trained on 4"):
        toy_model.transform(hashed)
    # size unknown up front: the decoding task names the column, the document and both sizes
    # (more in tests/spark/test_ml_params.py::test_wrong_vector_size_in_transform_names_the_document)
    bad = spark.createDataFrame([("d0", ["a1"], Vectors.sparse(6, [0], [1.0]))],
                                _schema())
    with pytest.raises(Exception, match=r"features column 'features', document 'd0': a vector of size 6, "
                                        r"expected 4"):
        toy_model.transform(bad).collect()


def test_labels_not_array_of_strings(spark):
    df = spark.createDataFrame([("d0", [1], Vectors.sparse(4, [0], [1.0]))],
                               _schema(T.ArrayType(T.IntegerType())))
    with pytest.raises(SchemaError, match=r"labels column 'labels' has type array<int>; expected array<string>"):
        HierarchicalClassifier(taxonomy=PAIRS).fit(df)
    df2 = spark.createDataFrame([("d0", "a1", Vectors.sparse(4, [0], [1.0]))],
                                _schema(T.StringType()))
    with pytest.raises(SchemaError, match=r"labels column 'labels' has type string; expected array<string>"):
        HierarchicalClassifier(taxonomy=PAIRS).fit(df2)


def test_label_outside_the_taxonomy_error_or_dropped_and_counted(spark):
    rows = _rows() + [("x1", ["a1", "zz"], Vectors.sparse(4, [0], [1.0])),
            ("x2", ["yy", "b1"], Vectors.sparse(4, [2], [1.0]))]
    df = spark.createDataFrame(rows, _schema())
    with pytest.raises(InputDataError, match=r"labels column 'labels': 2 document\(s\) have labels outside the "
                                             r"taxonomy .*handleInvalid='drop'"):
        HierarchicalClassifier(taxonomy=PAIRS, epochs=1, shards=1, model="flat").fit(df)
    m = HierarchicalClassifier(taxonomy=PAIRS, epochs=1, shards=1, model="flat", handleInvalid="drop").fit(df)
    assert m.metadata["training"]["labels"] == {"documents": 18, "dropped_labels": 2,
                                                "documents_with_dropped_labels": 2, "no_labels": 0}


def test_empty_dataframe(spark):
    df = spark.createDataFrame([], _schema())
    with pytest.raises(InputDataError, match=r"the DataFrame has no rows"):
        HierarchicalClassifier(taxonomy=PAIRS, numFeatures=4).fit(df)


@pytest.mark.parametrize("params,message", [
    ({"epochs": -1}, r"Param epochs must be an int >= 0 \(0 = chosen on a validation slice\), got -1"),
    ({"shards": -1}, r"Param shards must be an int >= 0 \(0 = the task slots Spark reports\), got -1"),
    ({"C": -1.0}, r"Param C must be a finite float > 0, got -1.0"),
    ({"C": float("nan")}, r"Param C must be a finite float > 0"),
    ({"handleInvalid": "keep"}, r"Param handleInvalid must be 'error' or 'drop'"),
    ({"model": "nope"}, r"unknown model 'nope'"),
    ({"modelParams": {"bogus": 1}}, r"modelParams \['bogus'\] are not parameters of the model 'global'"),
    ({"modelParams": {"epochs": 3}}, r"modelParams may not hold 'epochs': set the Param epochs"),
    ({"modelParams": {"margin": -2.0}}, r"The 'margin' parameter of GlobalPA must be"),
    ({"model": "fmm", "C": 1.0}, r"Param C is set, but the model 'fmm' has no parameter C"),
    ({"scoredLabels": ["a1", "zz"]}, r"Param scoredLabels: \['zz'\] are not labels of the taxonomy"),
])
def test_param_out_of_range(toy, params, message):
    with pytest.raises(ConfigError, match=message):
        HierarchicalClassifier(taxonomy=PAIRS, **params).fit(toy)


def test_taxonomy_param_required_and_checked(toy):
    with pytest.raises(ConfigError, match=r"Param taxonomy is not set"):
        HierarchicalClassifier().fit(toy)
    with pytest.raises(TypeError, match=r"taxonomy: entry 0 is"):
        HierarchicalClassifier(taxonomy=[("ROOT",)])


def test_model_saved_by_a_newer_version(toy_model, tmp_path):
    path = tmp_path / "m"
    toy_model.write().save(str(path))
    with pytest.raises(ModelError, match=r"already exists"):
        toy_model.write().save(str(path))
    params = path / "metadata" / "part-00000"
    md = json.loads(params.read_text())
    md["sparkhc_ml_format_version"] = 99
    params.write_text(json.dumps(md))
    with pytest.raises(ModelError, match=r"Param metadata version 99 is newer than this sparkhc understands"):
        HierarchicalClassificationModel.load(str(path))
    toy_model.write().overwrite().save(str(path))
    meta = json.loads((path / "metadata.json").read_text())
    meta["format_version"] = 99
    (path / "metadata.json").write_text(json.dumps(meta))
    with pytest.raises(ModelError, match=r"model format version 99 is newer than this sparkhc understands"):
        HierarchicalClassificationModel.load(str(path))


def test_evaluator_errors(spark, toy, toy_model):
    with pytest.raises(ConfigError, match=r"metricName 'accuracy' is not a metric"):
        HierarchicalEvaluator(metricName="accuracy").evaluate(toy_model.transform(toy))
    plain = spark.createDataFrame([(["a1"], ["a1"])], "labels array<string>, prediction array<string>")
    with pytest.raises(ConfigError, match=r"Param taxonomy is not set and the prediction column 'prediction'"):
        HierarchicalEvaluator().evaluate(plain)
    nulls = spark.createDataFrame([(None, ["a1"])], "labels array<string>, prediction array<string>")
    with pytest.raises(SchemaError, match=r"labels column 'labels': 1 rows have no gold labels"):
        HierarchicalEvaluator(taxonomy=PAIRS).evaluate(nulls)
    assert HierarchicalEvaluator(metricName="hLoss").isLargerBetter() is False
    assert HierarchicalEvaluator(metricName="hF").isLargerBetter() is True
    assert HierarchicalEvaluator(metricName="hammingScore").isLargerBetter() is True


def test_evaluator_hand_computed(spark):
    # gold {a1} (closure a, a1), predicted {a2} (closure a, a2): node tp 1 (a), fp 1 (a2), fn 1 (a1) -> hF 1/2
    # gold {b1}, predicted {b1}: tp 2 -> over both documents tp 3, fp 1, fn 1: hF = 6 / 8
    df = spark.createDataFrame([(["a1"], ["a2"]), (["b1"], ["b1"])], "labels array<string>, prediction array<string>")
    ev = HierarchicalEvaluator(taxonomy=PAIRS)
    assert ev.evaluate(df) == 0.75
    # hLoss (uniform): the first document errs at a1 and a2 below a correct a: 2 nodes; mean 1.0
    assert ev.setMetricName("hLoss").evaluate(df) == 1.0
    # exact match of the label sets: one of two documents wrong
    assert ev.setMetricName("zeroOne").evaluate(df) == 0.5


def test_estimator_and_evaluator_save_and_load(spark, tmp_path):
    clf = HierarchicalClassifier(taxonomy=PAIRS, model="tree", epochs=3, C=0.5, modelParams={"decoder": "ls"})
    clf.write().save(str(tmp_path / "clf"))
    back = HierarchicalClassifier.load(str(tmp_path / "clf"))
    assert back.uid == clf.uid
    assert {p.name: back.getOrDefault(p) for p in back.params if back.isDefined(p)} == \
        {p.name: clf.getOrDefault(p) for p in clf.params if clf.isDefined(p)}
    ev = HierarchicalEvaluator(metricName="macroF1", taxonomy=PAIRS, scoredLabels=LEAVES)
    ev.write().save(str(tmp_path / "ev"))
    ev2 = HierarchicalEvaluator.load(str(tmp_path / "ev"))
    assert ev2.getMetricName() == "macroF1" and ev2.getOrDefault("scoredLabels") == LEAVES


@pytest.mark.parametrize("model", ["h_svm", "pcem", "fmm"])  # node-parallel, EM, single-pass counting
def test_every_training_strategy_fits_and_predicts(spark, toy, model):
    fitted = HierarchicalClassifier(taxonomy=PAIRS, model=model, epochs=2, shards=2).fit(toy)
    got = {r["doc_id"]: list(r["prediction"]) for r in fitted.transform(toy).collect()}
    assert got == {f"d{i}": [LEAVES[i % 4]] for i in range(16)}


def test_multi_dimensional_model_and_hamming_score(spark):
    # two class spaces (a: a1|a2, b: b1|b2); feature 0/1 tells a's class, feature 2/3 b's
    rows = [(f"d{i}", [f"a{i % 2 + 1}", f"b{i // 2 % 2 + 1}"], Vectors.sparse(4, [i % 2, 2 + i // 2 % 2], [1.0, 1.0]))
            for i in range(16)]
    df = spark.createDataFrame(rows, _schema())
    fitted = HierarchicalClassifier(taxonomy=PAIRS, model="m3mdc").fit(df)
    out = fitted.transform(df)
    got = {r["doc_id"]: sorted(r["prediction"]) for r in out.collect()}
    assert got == {d: sorted(labs) for d, labs, _ in rows}
    assert HierarchicalEvaluator(metricName="hammingScore").evaluate(out) == 1.0
    assert HierarchicalEvaluator().evaluateAll(out)["exact_match"] == 1.0


def test_default_shards_are_the_task_slots_as_in_the_cli(spark, toy):
    """The estimator's default shards is the CLI's (train.shards = 0: the task slots), not a fixed count."""
    from sparkhc.config import load_config

    clf = HierarchicalClassifier(taxonomy=PAIRS, epochs=2, model="flat")
    assert clf.getOrDefault("shards") == 0 == load_config().train.shards
    fitted = clf.fit(toy)
    assert fitted.metadata["training"]["shards"] == spark.sparkContext.defaultParallelism
