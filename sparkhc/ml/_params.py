"""Typed Params shared by the sparkhc estimators, models and the evaluator (MLlib style)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from pyspark.ml.param import Param, Params, TypeConverters

from sparkhc.errors import ConfigError, TaxonomyError
from sparkhc.taxonomy import Taxonomy


def to_taxonomy_spec(value: Any) -> Any:
    """A taxonomy Param: a path (str) or a list of (parent, child) pairs."""
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, str):
        return value
    if isinstance(value, list | tuple):
        pairs = []
        for i, e in enumerate(value):
            if not (isinstance(e, list | tuple) and len(e) == 2 and all(isinstance(x, str) for x in e)):
                raise TypeError(f"taxonomy: entry {i} is {e!r}; expected a (parent, child) pair of strings")
            pairs.append([e[0], e[1]])
        if not pairs:
            raise TypeError("taxonomy: an empty list of (parent, child) pairs")
        return pairs
    raise TypeError(f"taxonomy must be a path or a list of (parent, child) pairs, got {type(value).__name__}")


def to_param_map(value: Any) -> dict[str, Any]:
    """A modelParams Param: a dict from parameter names to JSON values (str, bool, int, float)."""
    if not isinstance(value, dict):
        raise TypeError(f"modelParams must be a dict, got {type(value).__name__}")
    out = {}
    for k, v in value.items():
        if not isinstance(k, str):
            raise TypeError(f"modelParams: key {k!r} is not a string")
        if not isinstance(v, str | bool | int | float) and v is not None:
            raise TypeError(f"modelParams: value of {k!r} is a {type(v).__name__}; expected str, bool, int or float")
        out[k] = v
    return out


def to_string_list(value: Any) -> list[str]:
    return [str(x) for x in TypeConverters.toList(value)]


def load_taxonomy(spec: Any, who: str) -> Taxonomy:
    """The taxonomy of a Param value (path or pairs)."""
    if isinstance(spec, str):
        p = Path(spec.removeprefix("file://") if spec.startswith("file://") else spec)
        if not p.is_file():
            raise ConfigError(f"{who}: Param taxonomy: file {spec!r} not found")
        return Taxonomy.load(p)
    try:
        return Taxonomy.from_edges([(a, b) for a, b in spec], source=f"{who}.taxonomy")
    except TaxonomyError as e:
        raise TaxonomyError(f"{who}: Param taxonomy: {e}") from None


class HasSparkhcColumns(Params):
    """Input and output columns."""

    featuresCol: Param[str] = Param(
        Params._dummy(), "featuresCol",
        "features: a pyspark.ml.linalg vector column; when the DataFrame has no such column, sparkhc's features "
        "layout (indices, values[, counts]) is used", typeConverter=TypeConverters.toString)
    labelsCol: Param[str] = Param(
        Params._dummy(), "labelsCol", "gold label names, array<string>", typeConverter=TypeConverters.toString)
    predictionCol: Param[str] = Param(
        Params._dummy(), "predictionCol", "output: the predicted label set, array<string> (deepest labels)",
        typeConverter=TypeConverters.toString)
    scoresCol: Param[str] = Param(
        Params._dummy(), "scoresCol",
        "output: the score of each predicted label, array<float> aligned with predictionCol ('' = none)",
        typeConverter=TypeConverters.toString)
    docIdCol: Param[str] = Param(
        Params._dummy(), "docIdCol",
        "document ids (training shards documents by id); missing column = ids from monotonically_increasing_id",
        typeConverter=TypeConverters.toString)
    numFeatures: Param[int] = Param(
        Params._dummy(), "numFeatures",
        "number of features (0 = from the column metadata, e.g. CountVectorizer/HashingTF/IDF, or the first vector)",
        typeConverter=TypeConverters.toInt)

    def __init__(self) -> None:
        super().__init__()
        self._setDefault(featuresCol="features", labelsCol="labels", predictionCol="prediction", scoresCol="",
                         docIdCol="doc_id", numFeatures=0)

    def getFeaturesCol(self) -> str:
        return self.getOrDefault(self.featuresCol)

    def getLabelsCol(self) -> str:
        return self.getOrDefault(self.labelsCol)

    def getPredictionCol(self) -> str:
        return self.getOrDefault(self.predictionCol)

    def getScoresCol(self) -> str:
        return self.getOrDefault(self.scoresCol)

    def getDocIdCol(self) -> str:
        return self.getOrDefault(self.docIdCol)

    def getNumFeatures(self) -> int:
        return self.getOrDefault(self.numFeatures)

    def setFeaturesCol(self, value: str) -> Any:
        return self._set(featuresCol=value)

    def setLabelsCol(self, value: str) -> Any:
        return self._set(labelsCol=value)

    def setPredictionCol(self, value: str) -> Any:
        return self._set(predictionCol=value)

    def setScoresCol(self, value: str) -> Any:
        return self._set(scoresCol=value)

    def setDocIdCol(self, value: str) -> Any:
        return self._set(docIdCol=value)


class HasTrainingParams(Params):
    """The model and how it is trained (the CLI's ``[train]`` and ``[model.<name>]``)."""

    taxonomy: Param[Any] = Param(
        Params._dummy(), "taxonomy", "the taxonomy: a parent<TAB>child file path, or a list of (parent, child) pairs",
        typeConverter=to_taxonomy_spec)
    model: Param[str] = Param(
        Params._dummy(), "model", "registered model name (sparkhc models): global, flat, tree, h_svm, pcem, ...",
        typeConverter=TypeConverters.toString)
    epochs: Param[int] = Param(Params._dummy(), "epochs", "training epochs (train.epochs), >= 0: 0 = chosen on a validation "
                               "slice of the training rows (models trained by mixing; else 10)",
                               typeConverter=TypeConverters.toInt)
    shards: Param[int] = Param(Params._dummy(), "shards", "shards of parameter mixing / EM (train.shards), >= 0: "
                               "0 = the task slots Spark reports (the CLI's default)", typeConverter=TypeConverters.toInt)
    seed: Param[int] = Param(Params._dummy(), "seed", "random seed (train.seed)", typeConverter=TypeConverters.toInt)
    calibrate: Param[str] = Param(
        Params._dummy(), "calibrate", "global model: per-edge score offsets cross-fitted on inner folds of the "
        "training documents (train.calibrate): 'off', 'auto' (applied when they help out of fold) or 'on'",
        typeConverter=TypeConverters.toString)
    calibrationFolds: Param[int] = Param(
        Params._dummy(), "calibrationFolds", "inner folds of calibrate (train.calibration_folds), >= 3",
        typeConverter=TypeConverters.toInt)
    C: Param[float] = Param(Params._dummy(), "C", "aggressiveness / regularisation C of the models that have it, > 0 "
                            "(unset = the model's configured default)", typeConverter=TypeConverters.toFloat)
    modelParams: Param[Any] = Param(
        Params._dummy(), "modelParams", "the model's own parameters ([model.<name>] keys, checked by the model)",
        typeConverter=to_param_map)
    handleInvalid: Param[str] = Param(
        Params._dummy(), "handleInvalid",
        "a gold label outside the taxonomy: 'error' (fail, naming it) or 'drop' (drop the label, counted)",
        typeConverter=TypeConverters.toString)
    scoredLabels: Param[list[str]] = Param(
        Params._dummy(), "scoredLabels", "labels scored by the label- and example-based metrics (default: every "
        "taxonomy node); recorded in the model, used by HierarchicalEvaluator", typeConverter=to_string_list)

    def __init__(self) -> None:
        super().__init__()
        self._setDefault(model="global", epochs=0, shards=0, seed=0, modelParams={}, handleInvalid="error",
                         calibrate="off", calibrationFolds=4)

    def check_training_params(self, who: str) -> None:
        """Raise ConfigError naming the Param when a value is out of range (before any Spark job)."""
        for name, low in (("epochs", 0), ("shards", 0)):
            v = self.getOrDefault(name)
            if v < low:
                raise ConfigError(f"{who}: Param {name} must be an int >= {low}, got {v!r}")
        if self.getOrDefault(self.calibrate) not in ("off", "auto", "on"):
            raise ConfigError(f"{who}: Param calibrate must be 'off', 'auto' or 'on', got "
                              f"{self.getOrDefault(self.calibrate)!r}")
        if self.getOrDefault(self.calibrationFolds) < 3:
            raise ConfigError(f"{who}: Param calibrationFolds must be an int >= 3, got "
                              f"{self.getOrDefault(self.calibrationFolds)!r}")
        if self.isSet(self.C) or self.hasDefault(self.C):
            c = self.getOrDefault(self.C)
            if not (math.isfinite(c) and c > 0):
                raise ConfigError(f"{who}: Param C must be a finite float > 0, got {c!r}")
        if self.getOrDefault(self.handleInvalid) not in ("error", "drop"):
            raise ConfigError(f"{who}: Param handleInvalid must be 'error' or 'drop', got "
                              f"{self.getOrDefault(self.handleInvalid)!r}")
        if self.getNumFeatures() < 0:  # type: ignore[attr-defined]
            raise ConfigError(f"{who}: Param numFeatures must be >= 0, got {self.getNumFeatures()!r}")  # type: ignore[attr-defined]
        if not self.isDefined(self.taxonomy):
            raise ConfigError(f"{who}: Param taxonomy is not set (a parent<TAB>child file, or (parent, child) pairs)")
