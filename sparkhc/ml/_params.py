"""Typed Params shared by the sparkhc estimators, models and the evaluator (MLlib style).

Every Param has a getter (``getEpochs``) on the stages that carry it and a setter (``setEpochs``)
where setting it changes what the stage does (estimators, the evaluator; the models: the Params
``transform`` reads), as MLlib's stages have. Values are checked when they are set: an unknown
keyword is a :class:`TypeError` (as for an MLlib stage's keyword-only ``__init__``), a value out
of range a :class:`~sparkhc.errors.ParamError` (a ``ValueError``) naming the Param and the valid
values, and a failed set leaves the stage as it was. ``fit`` checks every value again:
``copy(extra)``, which ``fit(df, params)``, ``ParamGridBuilder`` grids and Pipelines use, sets
Params without these checks, as in MLlib.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any, ClassVar

from pyspark.ml.param import Param, Params, TypeConverters

from sparkhc.config import Rule, TrainConfig, int_at_least, one_of, value_rule
from sparkhc.errors import ConfigError, ParamError, TaxonomyError
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
    """The taxonomy of a Param value (path or pairs): a TSV, RCV1 or SKOS file (labels given as
    concept URIs); a polyhierarchy is refused in one line (its concepts map to several positions,
    which the CLI's featurize does)."""
    if isinstance(spec, str):
        p = Path(spec.removeprefix("file://") if spec.startswith("file://") else spec)
        if not p.is_file():
            raise ConfigError(f"{who}: Param taxonomy: file {spec!r} not found")
        tax = Taxonomy.load(p)
    else:
        try:
            tax = Taxonomy.from_edges([(a, b) for a, b in spec], source=f"{who}.taxonomy")
        except TaxonomyError as e:
            raise TaxonomyError(f"{who}: Param taxonomy: {e}") from None
    if tax.is_polyhierarchy:
        raise TaxonomyError(f"{who}: Param taxonomy: {tax.source} is a polyhierarchy (a concept with several "
                            "parents); the pyspark.ml API takes trees: featurize and train it with sparkhc featurize "
                            "and sparkhc train")
    return tax


#: the estimator's Params that are ``[train]`` keys (:class:`sparkhc.config.TrainConfig` fields):
#: their defaults and the training's configuration both come from this one table
TRAIN_PARAMS: dict[str, str] = {
    "model": "model", "epochs": "epochs", "shards": "shards", "seed": "seed", "calibrate": "calibrate",
    "calibrationFolds": "calibration_folds", "calibrationDocuments": "calibration_documents",
    "maxEpochs": "max_epochs", "patience": "patience", "validationFolds": "validation_folds", "refit": "refit",
    "cSearch": "c_search", "timeBudget": "time_budget",
}


class CheckedParams(Params):
    """Params checked when they are set (see the module notes). A stage lists its value checks in
    ``_rules`` (merged along the class hierarchy) and its checks across Params in
    :meth:`_check_together`."""

    _rules: ClassVar[dict[str, Rule]] = {}

    @classmethod
    def _all_rules(cls) -> dict[str, Rule]:
        out: dict[str, Rule] = {}
        for c in reversed(cls.__mro__):
            out.update(vars(c).get("_rules", {}))
        return out

    def _who(self) -> str:
        return type(self).__name__

    #: True while ``_copyValues`` fills this instance (``copy``, ``fit(df, params)``, tuning,
    #: Pipelines): those values pass unchecked, one at a time, as in MLlib; ``fit`` checks them
    _unchecked: bool = False

    def _copyValues(self, to: Any, extra: Any = None) -> Any:
        if not isinstance(to, CheckedParams):
            return super()._copyValues(to, extra)
        to._unchecked = True
        try:
            return super()._copyValues(to, extra)
        finally:
            to._unchecked = False

    def _set(self, **kwargs: Any) -> Any:
        """Set Params by name (``__init__``, ``setParams`` and every setter): unknown names are a
        TypeError, every value and the Params together are checked; on an error nothing changes."""
        if self._unchecked:
            return super()._set(**kwargs)
        unknown = [k for k in kwargs if not self.hasParam(k)]
        if unknown:
            names = sorted(p.name for p in self.params)
            hint = difflib.get_close_matches(unknown[0], names, n=1)
            raise TypeError(
                f"{self._who()} got an unexpected keyword argument {unknown[0]!r} (not one of its Params"
                + (f"; did you mean {hint[0]!r}?" if hint else "") + f"); its Params: {', '.join(names)}"
            )
        before = dict(self._paramMap)
        try:
            super()._set(**kwargs)
            for name in kwargs:
                self._check_value(name)
            self._check_together(frozenset(kwargs))
        except BaseException:
            self._paramMap = before
            raise
        return self

    def set(self, param: Param[Any], value: Any) -> None:
        """``Params.set`` with the value check (readers and tuning call it one Param at a time, so
        the checks across Params are left to :meth:`_set` and ``fit``)."""
        if self._unchecked:
            return super().set(param, value)
        before = dict(self._paramMap)
        super().set(param, value)
        try:
            self._check_value(self._resolveParam(param).name)
        except BaseException:
            self._paramMap = before
            raise

    def _check_value(self, name: str) -> None:
        rule = self._all_rules().get(name)
        if rule is None or not self.isDefined(name):
            return
        value = self.getOrDefault(name)
        ok, expected = rule
        try:
            good = bool(ok(value))
        except (TypeError, ValueError):
            good = False
        if not good:
            raise ParamError(f"{self._who()}: Param {name} must be {expected}, got {value!r}")

    def _check_together(self, names: frozenset[str]) -> None:
        """Checks across Params after ``names`` were set (subclasses)."""

    def check_values(self, names: Iterable[str] | None = None) -> None:
        """Check every Param value (``fit`` calls it: grids and ``copy`` bypass the setters)."""
        for name in self._all_rules() if names is None else names:
            self._check_value(name)


class HasSparkhcColumns(CheckedParams):
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
    textCol: Param[str] = Param(
        Params._dummy(), "textCol",
        "transform: raw document text, string, read when the DataFrame has no features and the model was trained on "
        "sparkhc's features (weighted with the model's feature spec, as sparkhc predict --input)",
        typeConverter=TypeConverters.toString)

    _rules: ClassVar[dict[str, Rule]] = {
        "numFeatures": int_at_least(0, " (0 = from the column metadata or the first vector)"),
    }

    def __init__(self) -> None:
        super().__init__()
        self._setDefault(featuresCol="features", labelsCol="labels", predictionCol="prediction", scoresCol="",
                         docIdCol="doc_id", numFeatures=0, textCol="text")

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

    def setNumFeatures(self, value: int) -> Any:
        return self._set(numFeatures=value)

    def getTextCol(self) -> str:
        return self.getOrDefault(self.textCol)

    def setTextCol(self, value: str) -> Any:
        return self._set(textCol=value)


class HasTrainingParams(CheckedParams):
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
        Params._dummy(), "calibrate", "global model: score offsets fitted on out-of-fold scores of the training "
        "documents (train.calibrate): 'auto' (the default: on the epoch selection's validation bands, applied when "
        "they help beyond the noise), 'on' or 'off'",
        typeConverter=TypeConverters.toString)
    calibrationFolds: Param[int] = Param(
        Params._dummy(), "calibrationFolds", "inner folds of calibrate (train.calibration_folds), >= 3",
        typeConverter=TypeConverters.toInt)
    calibrationDocuments: Param[int] = Param(
        Params._dummy(), "calibrationDocuments", "calibrate with an epoch selection: when the offsets pay on its "
        "validation bands, more bands are scored until they hold this many documents "
        "(train.calibration_documents), >= 0: 0 = only the selection's bands", typeConverter=TypeConverters.toInt)
    maxEpochs: Param[int] = Param(
        Params._dummy(), "maxEpochs", "epochs = 0: the most epochs the selection tries (train.max_epochs), >= 1; "
        "a selection cut by it before its stopping rule says so", typeConverter=TypeConverters.toInt)
    patience: Param[int] = Param(
        Params._dummy(), "patience", "epoch selection: stop after this many epochs without a better validation score, "
        "or half the best epoch's count when more (train.patience), >= 0: 0 = every epoch up to maxEpochs",
        typeConverter=TypeConverters.toInt)
    validationFolds: Param[int] = Param(
        Params._dummy(), "validationFolds", "epoch and C = 'auto' selection: disjoint validation bands (inner folds) "
        "(train.validation_folds), >= 0: 0 = the fewest that hold out 1,000 documents, one for large data",
        typeConverter=TypeConverters.toInt)
    refit: Param[bool] = Param(
        Params._dummy(), "refit", "after a one-band selection: train again on every row for the chosen epochs "
        "(train.refit, true) or keep the selection's model (false)", typeConverter=TypeConverters.toBoolean)
    cSearch: Param[str] = Param(
        Params._dummy(), "cSearch", "C = 'auto' with one validation band (train.c_search): 'folds' (C = 0.3 there) "
        "or 'always' (the grid searched on the band, the jackknife's standard error deciding)",
        typeConverter=TypeConverters.toString)
    timeBudget: Param[float] = Param(
        Params._dummy(), "timeBudget", "opt-in seconds a fit with an epoch selection may take (train.time_budget, by "
        f"default {TrainConfig.time_budget:g}), >= 0: 0 = none; the epoch selection stops where its next epoch would not fit, "
        "the final training runs only if it fits; a fixed epochs is trained in full",
        typeConverter=TypeConverters.toFloat)
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
        train = TrainConfig()  # the CLI's defaults (sparkhc/conf/defaults.toml)
        self._setDefault(**{param: getattr(train, key) for param, key in TRAIN_PARAMS.items()}, modelParams={},
                         handleInvalid="error")

    #: the Params of ``[train]`` keys check by the keys' rules (:data:`sparkhc.config.RULES`)
    _rules: ClassVar[dict[str, Rule]] = {
        **{param: value_rule("train", key) for param, key in TRAIN_PARAMS.items()},
        "C": ((lambda v: isinstance(v, float) and math.isfinite(v) and v > 0), "a finite float > 0"),
        "handleInvalid": one_of("error", "drop"),
    }

    def getTaxonomy(self) -> Any:
        """The Param taxonomy (a path or (parent, child) pairs; ``None`` when unset)."""
        return self.getOrDefault(self.taxonomy) if self.isDefined(self.taxonomy) else None

    def getModel(self) -> str:
        return self.getOrDefault(self.model)

    def getEpochs(self) -> int:
        return self.getOrDefault(self.epochs)

    def getShards(self) -> int:
        return self.getOrDefault(self.shards)

    def getSeed(self) -> int:
        return self.getOrDefault(self.seed)

    def getCalibrate(self) -> str:
        return self.getOrDefault(self.calibrate)

    def getCalibrationFolds(self) -> int:
        return self.getOrDefault(self.calibrationFolds)

    def getCalibrationDocuments(self) -> int:
        return self.getOrDefault(self.calibrationDocuments)

    def getMaxEpochs(self) -> int:
        return self.getOrDefault(self.maxEpochs)

    def getPatience(self) -> int:
        return self.getOrDefault(self.patience)

    def getValidationFolds(self) -> int:
        return self.getOrDefault(self.validationFolds)

    def getRefit(self) -> bool:
        return self.getOrDefault(self.refit)

    def getCSearch(self) -> str:
        return self.getOrDefault(self.cSearch)

    def getTimeBudget(self) -> float:
        return self.getOrDefault(self.timeBudget)

    def getC(self) -> float | None:
        """The Param C (``None`` when unset: the model's configured default applies)."""
        return self.getOrDefault(self.C) if self.isDefined(self.C) else None

    def getModelParams(self) -> dict[str, Any]:
        return dict(self.getOrDefault(self.modelParams))

    def getHandleInvalid(self) -> str:
        return self.getOrDefault(self.handleInvalid)

    def getScoredLabels(self) -> list[str] | None:
        """The Param scoredLabels (``None`` when unset: every taxonomy node is scored)."""
        return list(self.getOrDefault("scoredLabels")) if self.isDefined(self.scoredLabels) else None

    def check_training_params(self, who: str) -> None:
        """Raise ParamError naming the Param when a value is out of range (before any Spark job)."""
        self.check_values()
        if not self.isDefined(self.taxonomy):
            raise ConfigError(f"{who}: Param taxonomy is not set (a parent<TAB>child file, or (parent, child) pairs)")
