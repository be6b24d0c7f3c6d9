"""sparkhc.ml Params as MLlib users expect them (issue 31, rows ML-* of docs/reliability.md):
a getter and a setter for every Param, a TypeError for an unknown keyword, values checked when
they are set (not at ``fit``), Python floats in every metric, and a wrong vector size named by
document id. The expected values are written out by hand."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from pyspark.ml.linalg import Vectors, VectorUDT
from pyspark.sql import types as T

from sparkhc.errors import ConfigError, ParamError
from sparkhc.ml import (
    CrossValidator,
    HierarchicalClassificationModel,
    HierarchicalClassifier,
    HierarchicalEvaluator,
    SparkhcFeaturizer,
    SparkhcFeaturizerModel,
)
from tests.conftest import ROOT

PAIRS = [("ROOT", "a"), ("ROOT", "b"), ("a", "a1"), ("a", "a2"), ("b", "b1"), ("b", "b2")]
LEAVES = ["a1", "a2", "b1", "b2"]

# ------------------------------------------------------------------------- getters and setters
# (Param, a valid value that is not the default, what the getter then returns)
CLASSIFIER_VALUES = [
    ("featuresCol", "tfidf", "tfidf"),
    ("labelsCol", "gold", "gold"),
    ("predictionCol", "pred", "pred"),
    ("scoresCol", "scores", "scores"),
    ("docIdCol", "id", "id"),
    ("numFeatures", 8, 8),
    ("textCol", "body", "body"),
    ("taxonomy", PAIRS, [list(p) for p in PAIRS]),
    ("model", "tree", "tree"),
    ("epochs", 3, 3),
    ("shards", 2, 2),
    ("seed", 7, 7),
    ("calibrate", "off", "off"),
    ("calibrationFolds", 5, 5),
    ("calibrationDocuments", 0, 0),
    ("maxEpochs", 5, 5),
    ("patience", 0, 0),
    ("validationFolds", 2, 2),
    ("refit", False, False),
    ("cSearch", "always", "always"),
    ("timeBudget", 600.0, 600.0),
    ("C", 0.5, 0.5),
    ("modelParams", {"bias": 0.5}, {"bias": 0.5}),  # a parameter of global and tree
    ("handleInvalid", "drop", "drop"),
    ("scoredLabels", ["a1", "b1"], ["a1", "b1"]),
]
EVALUATOR_VALUES = [
    ("metricName", "macroF1", "macroF1"),
    ("labelsCol", "gold", "gold"),
    ("predictionCol", "pred", "pred"),
    ("taxonomy", "taxonomy.tsv", "taxonomy.tsv"),
    ("scoredLabels", ["a1"], ["a1"]),
]
FEATURIZER_VALUES = [
    ("inputCol", "body", "body"),
    ("tokensCol", "words", "words"),
    ("mode", "vocab", "vocab"),
    ("weighting", "tf", "tf"),
    ("minDF", 3, 3),
    ("maxDF", 0.8, 0.8),
    ("stopWords", False, False),
    ("l2Normalize", False, False),
    ("hashBits", 12, 12),
    ("tokenPattern", r"\w+", r"\w+"),
]


def _cap(name: str) -> str:
    return name[0].upper() + name[1:]


@pytest.mark.parametrize("cls,values", [
    (HierarchicalClassifier, CLASSIFIER_VALUES),
    (HierarchicalEvaluator, EVALUATOR_VALUES),
    (SparkhcFeaturizer, FEATURIZER_VALUES),
], ids=["HierarchicalClassifier", "HierarchicalEvaluator", "SparkhcFeaturizer"])
def test_every_param_has_a_getter_and_a_setter(cls, values):
    stage = cls()
    assert sorted(name for name, _, _ in values) == sorted(p.name for p in stage.params)  # the table is complete
    for name, value, expected in values:
        setter, getter = getattr(stage, f"set{_cap(name)}"), getattr(stage, f"get{_cap(name)}")
        assert setter(value) is stage, name  # chainable, as MLlib's
        assert getter() == expected, name
        assert stage.getOrDefault(name) == expected, name


def test_getters_return_the_defaults_and_none_when_unset():
    clf = HierarchicalClassifier()
    assert (clf.getModel(), clf.getEpochs(), clf.getShards(), clf.getSeed(), clf.getCalibrate(),
            clf.getCalibrationFolds(), clf.getModelParams(), clf.getHandleInvalid(), clf.getNumFeatures()) == \
        ("global", 0, 0, 0, "auto", 4, {}, "error", 0)
    assert clf.getC() is None and clf.getTaxonomy() is None and clf.getScoredLabels() is None
    ev = HierarchicalEvaluator()
    assert (ev.getMetricName(), ev.getLabelsCol(), ev.getPredictionCol(), ev.getTaxonomy(), ev.getScoredLabels()) == \
        ("hF", "labels", "prediction", None, None)
    fz = SparkhcFeaturizer()
    assert (fz.getInputCol(), fz.getMode(), fz.getWeighting(), fz.getMinDF(), fz.getMaxDF(), fz.getHashBits()) == \
        ("text", "vocab", "log_tf_idf", 2, 0.5, 18)  # sparkhc/conf/defaults.toml [featurize]


# A fitted model has a getter for every Param and, as MLlib's models, a setter only for the
# Params transform reads (a setEpochs on a fitted model would change nothing).
MODEL_SETTERS = {
    HierarchicalClassificationModel: {"featuresCol", "labelsCol", "predictionCol", "scoresCol", "docIdCol",
                                      "numFeatures", "textCol", "suggestionsCol", "numSuggestions"},
    SparkhcFeaturizerModel: {"inputCol", "tokensCol"},
}


@pytest.mark.parametrize("cls", list(MODEL_SETTERS), ids=lambda c: c.__name__)
def test_models_have_every_getter_and_the_setters_transform_reads(cls):
    m = cls()
    for p in m.params:
        assert callable(getattr(m, f"get{_cap(p.name)}", None)), p.name
    have = {p.name for p in m.params if callable(getattr(m, f"set{_cap(p.name)}", None))}
    assert have == MODEL_SETTERS[cls]


# ------------------------------------------------------------------------- unknown keywords
@pytest.mark.parametrize("make", [
    lambda: HierarchicalClassifier(nosuch=1),
    lambda: HierarchicalClassifier().setParams(nosuch=1),
    lambda: HierarchicalEvaluator(nosuch=1),
    lambda: SparkhcFeaturizer(nosuch=1),
], ids=["classifier", "classifier.setParams", "evaluator", "featurizer"])
def test_unknown_keyword_is_a_type_error(make):
    """As an MLlib stage's keyword-only __init__ (LogisticRegression(nosuch=1) is a TypeError)."""
    with pytest.raises(TypeError, match=r"got an unexpected keyword argument 'nosuch' \(not one of its Params\); "
                                        r"its Params: .*"):
        make()


def test_misspelled_keyword_suggests_the_param():
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'epoch' \(not one of its Params; did you "
                                        r"mean 'epochs'\?\)"):
        HierarchicalClassifier(epoch=3)


# ------------------------------------------------------------------------- checked when set
# (stage, Params, the message: names the Param and the valid values)
BAD_VALUES = [
    ("epochs-negative", HierarchicalClassifier, {"epochs": -1},
     r"HierarchicalClassifier: Param epochs must be an int >= 0 \(0 = chosen on a validation slice\), got -1"),
    ("shards-negative", HierarchicalClassifier, {"shards": -1},
     r"Param shards must be an int >= 0 \(0 = the task slots Spark reports\), got -1"),
    ("handleInvalid-skip", HierarchicalClassifier, {"handleInvalid": "skip"},
     r"Param handleInvalid must be 'error' or 'drop', got 'skip'"),
    ("calibrate-unknown", HierarchicalClassifier, {"calibrate": "yes"},
     r"Param calibrate must be 'off', 'auto' or 'on', got 'yes'"),
    ("calibrationFolds-2", HierarchicalClassifier, {"calibrationFolds": 2},
     r"Param calibrationFolds must be an int >= 3, got 2"),
    ("C-negative", HierarchicalClassifier, {"C": -1.0}, r"Param C must be a finite float > 0, got -1.0"),
    ("C-nan", HierarchicalClassifier, {"C": math.nan}, r"Param C must be a finite float > 0, got nan"),
    ("numFeatures-negative", HierarchicalClassifier, {"numFeatures": -4},
     r"Param numFeatures must be an int >= 0 \(0 = from the column metadata or the first vector\), got -4"),
    ("model-unknown", HierarchicalClassifier, {"model": "globl"},
     r"Param model: unknown model 'globl'; known models: .*global"),
    ("modelParams-unknown", HierarchicalClassifier, {"modelParams": {"nosuch": 1}},
     r"modelParams \['nosuch'\] are not parameters of the model 'global'; known: \['C', 'R', 'average', 'bias'"),
    ("modelParams-epochs", HierarchicalClassifier, {"modelParams": {"epochs": 3}},
     r"modelParams may not hold 'epochs': set the Param epochs instead"),
    ("modelParams-out-of-range", HierarchicalClassifier, {"modelParams": {"margin": -2.0}},
     r"Param modelParams: The 'margin' parameter of GlobalPA must be a float in the range \(0, inf\)\. Got -2\.0"),
    ("modelParams-of-another-model", HierarchicalClassifier, {"model": "fmm", "modelParams": {"decoder": "ls"}},
     r"modelParams \['decoder'\] are not parameters of the model 'fmm'"),
    ("C-for-a-model-without-C", HierarchicalClassifier, {"model": "fmm", "C": 1.0},
     r"Param C is set, but the model 'fmm' has no parameter C"),
    ("metricName-unknown", HierarchicalEvaluator, {"metricName": "accuracy"},
     r"HierarchicalEvaluator: Param metricName 'accuracy' is not a metric; known: hF, hP, hR"),
    ("minDF-zero", SparkhcFeaturizer, {"minDF": 0},
     r"SparkhcFeaturizer: Param minDF: The 'min_df' parameter of FeatureSpec must be an int >= 1"),
    ("maxDF-above-one", SparkhcFeaturizer, {"maxDF": 1.5}, r"Param maxDF: The 'max_df' parameter of FeatureSpec"),
    ("mode-unknown", SparkhcFeaturizer, {"mode": "bag"},
     r"Param mode: The 'mode' parameter of FeatureSpec must be one of \('vocab', 'hashing'\)\. Got 'bag'"),
    ("hashBits-too-many", SparkhcFeaturizer, {"mode": "hashing", "hashBits": 40},
     r"Param hashBits: The 'hash_bits' parameter of FeatureSpec must be an int in \[1, 30\]"),
]


@pytest.mark.parametrize("case,cls,params,message", BAD_VALUES, ids=[c[0] for c in BAD_VALUES])
def test_bad_value_refused_at_construction_and_by_the_setter(case, cls, params, message):
    with pytest.raises(ParamError, match=message) as err:
        cls(**params)
    assert isinstance(err.value, ValueError) and isinstance(err.value, ConfigError)  # MLlib's type; the CLI's
    stage = cls()
    before = {p.name: stage.getOrDefault(p) for p in stage.params if stage.isDefined(p)}
    *first, (name, value) = params.items()
    if first:
        stage.setParams(**dict(first))
        before = {p.name: stage.getOrDefault(p) for p in stage.params if stage.isDefined(p)}
    with pytest.raises(ParamError, match=message):
        getattr(stage, f"set{_cap(name)}")(value)
    # a refused value leaves the stage as it was
    assert {p.name: stage.getOrDefault(p) for p in stage.params if stage.isDefined(p)} == before


def test_generic_set_checks_the_value_too():
    clf = HierarchicalClassifier(epochs=5)
    with pytest.raises(ParamError, match=r"Param epochs must be an int >= 0"):
        clf.set(clf.epochs, -1)
    assert clf.getEpochs() == 5


def test_changing_the_model_checks_its_model_params():
    clf = HierarchicalClassifier(model="tree", modelParams={"decoder": "ls"})
    with pytest.raises(ParamError, match=r"modelParams \['decoder'\] are not parameters of the model 'global'.*"
                                         r"setParams\(model=\.\.\., modelParams=\.\.\.\)"):
        clf.setModel("global")
    assert clf.getModel() == "tree"
    clf.setParams(model="global", modelParams={"branching": False})  # together: checked together
    assert (clf.getModel(), clf.getModelParams()) == ("global", {"branching": False})
    # the order of the keywords does not matter
    assert HierarchicalClassifier(modelParams={"decoder": "ls"}, model="tree").getModel() == "tree"


# ------------------------------------------------------------------------- with Spark
STR_ARRAY = T.ArrayType(T.StringType())
SCHEMA = T.StructType([T.StructField("doc_id", T.StringType()), T.StructField("labels", STR_ARRAY),
                       T.StructField("features", VectorUDT())])


def _rows(n: int = 16) -> list[tuple[str, list[str], object]]:
    # each leaf fires its own feature: a separable toy problem
    return [(f"d{i}", [LEAVES[i % 4]], Vectors.sparse(4, [i % 4], [1.0])) for i in range(n)]


@pytest.fixture(scope="module")
def toy(spark):
    return spark.createDataFrame(_rows(), SCHEMA)


@pytest.fixture(scope="module")
def toy_model(toy):
    return HierarchicalClassifier(taxonomy=PAIRS, epochs=2, shards=1, model="flat").fit(toy)


def test_fit_checks_values_that_bypassed_the_setters(toy):
    """A grid or copy(extra) sets Params without the setters (as in MLlib): fit checks them."""
    clf = HierarchicalClassifier(taxonomy=PAIRS, model="flat")
    with pytest.raises(ParamError, match=r"Param epochs must be an int >= 0"):
        clf.fit(toy, {clf.epochs: -1})
    with pytest.raises(ParamError, match=r"modelParams \['nosuch'\] are not parameters of the model 'flat'"):
        clf.fit(toy, {clf.modelParams: {"nosuch": 1}})


def test_saved_estimator_loads_whatever_order_its_params_were_set_in(spark, tmp_path):
    clf = HierarchicalClassifier(modelParams={"decoder": "ls"}, model="tree", epochs=3)
    clf.write().save(str(tmp_path / "clf"))
    back = HierarchicalClassifier.load(str(tmp_path / "clf"))
    assert (back.getModel(), back.getModelParams(), back.getEpochs()) == ("tree", {"decoder": "ls"}, 3)


def test_cross_validator_metrics_are_python_floats(toy):
    """avgMetrics / stdMetrics: Python floats (Spark's CrossValidator keeps numpy.float64)."""
    from sparkhc.ml.tuning import cross_validate

    est = HierarchicalClassifier(taxonomy=PAIRS, model="flat", shards=1)
    cv, table, best = cross_validate(toy, est, {"epochs": [1, 2]}, metric="hF", num_folds=2, seed=0)
    assert len(cv.avgMetrics) == 2 and len(cv.stdMetrics) == 2
    assert [type(m) for m in cv.avgMetrics + cv.stdMetrics] == [float] * 4
    assert all(0.0 <= m <= 1.0 for m in cv.avgMetrics)
    assert [type(r["mean"]) for r in table] == [float, float]
    assert issubclass(CrossValidator, __import__("pyspark.ml.tuning", fromlist=["CrossValidator"]).CrossValidator)


def test_every_evaluator_metric_is_a_python_float(spark):
    # gold {a1} predicted {a2}; gold {b1} predicted {b1}: hF = 6/8 (tests/spark/test_ml_errors.py)
    df = spark.createDataFrame([(["a1"], ["a2"]), (["b1"], ["b1"])], "labels array<string>, prediction array<string>")
    ev = HierarchicalEvaluator(taxonomy=PAIRS)
    v = ev.evaluate(df)
    assert type(v) is float and v == 0.75
    metrics = ev.evaluateAll(df)
    assert {k: type(x) for k, x in metrics.items() if k != "n_docs"} == {k: float for k in metrics if k != "n_docs"}
    assert metrics["n_docs"] == 2


def test_wrong_vector_size_in_transform_names_the_document(spark, toy_model):
    """The vector's size is not known before the decoding task reads it: the error names the
    document id and both sizes (not 'row 0 of the batch')."""
    rows = [("x0", ["a1"], Vectors.sparse(4, [0], [1.0])), ("x1", ["a1"], Vectors.sparse(6, [0], [1.0]))]
    bad = spark.createDataFrame(rows, SCHEMA).coalesce(1)
    with pytest.raises(Exception, match=r"SchemaError: HierarchicalClassificationModel\.transform: features column "
                                        r"'features', document 'x1': a vector of size 6, expected 4 \(the model's "
                                        r"number of features"):
        toy_model.transform(bad).collect()
    dense = spark.createDataFrame([("y0", ["a1"], Vectors.dense([1.0, 0.0]))], SCHEMA)
    with pytest.raises(Exception, match=r"document 'y0': a vector of size 2, expected 4"):
        toy_model.transform(dense).collect()
    # no document id column: the row of the batch, saying why
    with pytest.raises(Exception, match=r"row 1 of the batch \(no document id column\): a vector of size 6"):
        toy_model.transform(bad.drop("doc_id")).collect()


def test_wrong_vector_size_in_fit_names_the_document(spark):
    rows = [*_rows(8), ("odd", ["b2"], Vectors.sparse(5, [4], [1.0]))]
    df = spark.createDataFrame(rows, SCHEMA).coalesce(1)
    with pytest.raises(Exception, match=r"HierarchicalClassifier\.fit: features column 'features', document 'odd': "
                                        r"a vector of size 5, expected 4"):
        HierarchicalClassifier(taxonomy=PAIRS, model="flat", epochs=1, shards=1, numFeatures=4).fit(df)


# ------------------------------------------------------------------------- the docs
def test_api_md_states_the_bounds_the_code_checks():
    """docs/api.md once said fit checks "shards >= 1" while its table said 0 means automatic."""
    text = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    for name, low, value in (("epochs", 0, -1), ("shards", 0, -1), ("calibrationFolds", 3, 2),
                             ("calibrationDocuments", 0, -1), ("maxEpochs", 1, 0), ("patience", 0, -1),
                             ("validationFolds", 0, -1)):
        row = next(line for line in text.splitlines() if line.startswith(f"| `{name}` |"))
        assert f">= {low}" in row, row
        HierarchicalClassifier(**{name: low})  # the bound itself is accepted
        with pytest.raises(ParamError, match=rf"Param {name} must be an int >= {low}"):
            HierarchicalClassifier(**{name: value})
    assert "`shards` >= 1" not in text and "`epochs` >= 1" not in text
    assert "`epochs` >= 0 and `shards` >= 0, 0 meaning automatic" in text


def test_catalogue_rows_name_tests_that_exist():
    """Every ML-* and SUB-* row of docs/reliability.md (issue 31) names test functions of this
    repository (a ``::test_name`` reference continues the file named before it)."""
    text = (ROOT / "docs" / "reliability.md").read_text(encoding="utf-8")
    rows = [line for line in text.splitlines() if re.match(r"\| (ML|SUB)-\d+ \|", line)]
    assert len(rows) >= 8
    for row in rows:
        refs = re.findall(r"`(tests/[\w/]+\.py)?::(test_\w+)", row.split("|")[4])
        assert refs and refs[0][0], row
        path = ""
        for p, func in refs:
            path = p or path
            assert re.search(rf"^def {func}\(", (ROOT / path).read_text(encoding="utf-8"), re.M), (path, func)


def test_estimator_defaults_are_the_cli_defaults():
    """One source of defaults: the estimator's Params default to what `sparkhc train` reads from
    sparkhc/conf/defaults.toml (load_config with no file)."""
    from sparkhc.config import load_config

    train = load_config().train
    est = HierarchicalClassifier()
    assert est.getOrDefault(est.calibrate) == train.calibrate == "auto"
    assert est.getOrDefault(est.calibrationFolds) == train.calibration_folds
    assert est.getOrDefault(est.calibrationDocuments) == train.calibration_documents
    assert est.getOrDefault(est.maxEpochs) == train.max_epochs
    assert est.getOrDefault(est.patience) == train.patience
    assert est.getOrDefault(est.validationFolds) == train.validation_folds
    assert est.getOrDefault(est.refit) is train.refit is True
    assert est.getOrDefault(est.cSearch) == train.c_search == "folds"
    assert est.getOrDefault(est.timeBudget) == train.time_budget == 0.0
    assert est.getOrDefault(est.epochs) == train.epochs
    assert est.getOrDefault(est.shards) == train.shards
    assert est.getOrDefault(est.seed) == train.seed
    assert est.getOrDefault(est.model) == train.model


def test_selection_params_reach_the_training(spark):
    """maxEpochs, patience, validationFolds, refit, cSearch and timeBudget are the CLI's
    train.max_epochs / patience / validation_folds / refit / c_search / time_budget: a selection of
    at most 2 epochs with a wait of 5 is cut by the cap (and says so), one band searches C = "auto"
    with the jackknife, refit false keeps the selection's model (trained without the band), a
    budget is recorded, and a fixed epochs is trained in full whatever the budget."""
    df = spark.createDataFrame(_rows(120), SCHEMA)
    clf = HierarchicalClassifier(taxonomy=PAIRS, model="global", epochs=0, shards=2, calibrate="off",
                                 maxEpochs=2, patience=5, validationFolds=1, refit=False, cSearch="always")
    sel = clf.fit(df).metadata["training"]["epoch_selection"]
    assert sel["max_epochs"] == 2 and sel["epochs_run"] == 2 and sel["reached_max_epochs"] is True
    assert sel["patience"] == 5 and sel["folds"] == 1 and sel["refit"] is False
    assert sel["C_grid"] == [0.1, 0.3, 1.0] and sel["C_gain_se"] == "jackknife over the band's documents"
    plain = HierarchicalClassifier(taxonomy=PAIRS, model="global", epochs=0, shards=2, calibrate="off",
                                   maxEpochs=2, patience=5, validationFolds=1, timeBudget=1e6).fit(df)
    sel = plain.metadata["training"]["epoch_selection"]
    assert "C_grid" not in sel and "train.c_search = always" in sel["C_search_skipped"] and "refit" not in sel
    assert sel["time_budget"]["seconds"] == 1e6 and sel["time_budget"]["cut_selection"] is False
    # a fixed epochs is trained in full: the budget does not apply (a millisecond, overrun by the first epoch)
    fixed = HierarchicalClassifier(taxonomy=PAIRS, model="global", epochs=3, timeBudget=0.001).fit(df)
    free = HierarchicalClassifier(taxonomy=PAIRS, model="global", epochs=3, timeBudget=0.0).fit(df)
    assert fixed.metadata["training"]["epochs"] == 3 and not fixed.metadata["training"].get("epoch_selection")
    a, b = fixed.hierModel.get_state().arrays, free.hierModel.get_state().arrays
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
