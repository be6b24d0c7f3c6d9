"""``HierarchicalEvaluator``: the metrics of ``sparkhc evaluate`` as a ``pyspark.ml`` Evaluator.

The metrics come from the same mergeable count tables (:func:`sparkhc.spark.evaluate.aggregate_metrics`,
:func:`sparkhc.spark.mdc.aggregate_mdc_labels` for multi-dimensional models), so every value
equals the one ``sparkhc evaluate`` writes for the same predictions.
"""

from __future__ import annotations

from typing import Any

from pyspark.ml.evaluation import Evaluator
from pyspark.ml.param import Param, Params, TypeConverters
from pyspark.ml.util import DefaultParamsReadable, DefaultParamsWritable
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from sparkhc.errors import ConfigError, InputDataError, ParamError, SchemaError
from sparkhc.ml._input import META_KEY, check_labels_column
from sparkhc.ml._params import CheckedParams, load_taxonomy, to_string_list, to_taxonomy_spec
from sparkhc.taxonomy import Taxonomy

#: metricName -> key of the metrics of ``sparkhc evaluate`` (the keys themselves are accepted too)
METRIC_ALIASES: dict[str, str] = {
    "hF": "hF", "hP": "hP", "hR": "hR",
    "microF1": "LBMiF", "microPrecision": "LBMiP", "microRecall": "LBMiR",
    "macroF1": "LBMaF", "macroPrecision": "LBMaP", "macroRecall": "LBMaR",
    "exampleF1": "EBF", "examplePrecision": "EBP", "exampleRecall": "EBR",
    "hLoss": "hloss_uniform", "hLossNormalized": "hloss_normalized",
    "zeroOne": "zero_one", "symdiff": "symdiff",
    "nodeMicroF1": "node_micro_F1", "nodeMacroF1": "node_macro_F1",
    # multi-dimensional classification (models such as m3mdc)
    "hammingScore": "hamming_score", "exactMatch": "exact_match", "subExactMatch": "sub_exact_match",
}
MDC_KEYS = frozenset({"hamming_score", "exact_match", "sub_exact_match"})
#: losses: smaller is better
SMALLER_IS_BETTER = frozenset({"hloss_uniform", "hloss_normalized", "zero_one", "symdiff"})
METRIC_NAMES = tuple(METRIC_ALIASES) + tuple(sorted(set(METRIC_ALIASES.values()) - set(METRIC_ALIASES)))


def metric_key(name: str) -> str:
    """The ``sparkhc evaluate`` key of a metricName (ConfigError for an unknown name)."""
    key = METRIC_ALIASES.get(name, name if name in METRIC_ALIASES.values() else None)
    if key is None:
        raise ParamError(f"HierarchicalEvaluator: Param metricName {name!r} is not a metric; known: "
                          f"{', '.join(METRIC_NAMES)}")
    return key


class HierarchicalEvaluator(Evaluator, CheckedParams, DefaultParamsReadable, DefaultParamsWritable):
    """Evaluates a predicted label-set column against the gold label sets.

    The taxonomy and the scored labels default to those the prediction column carries
    (set by :class:`HierarchicalClassificationModel`); set ``taxonomy`` for predictions made
    elsewhere.
    """

    metricName: Param[str] = Param(Params._dummy(), "metricName", "metric: " + ", ".join(METRIC_NAMES),
                                   typeConverter=TypeConverters.toString)
    labelsCol: Param[str] = Param(Params._dummy(), "labelsCol", "gold label names, array<string>",
                                  typeConverter=TypeConverters.toString)
    predictionCol: Param[str] = Param(Params._dummy(), "predictionCol", "predicted label names, array<string>",
                                      typeConverter=TypeConverters.toString)
    taxonomy: Param[Any] = Param(Params._dummy(), "taxonomy", "the taxonomy (path or (parent, child) pairs); "
                                 "default: the one the prediction column carries", typeConverter=to_taxonomy_spec)
    scoredLabels: Param[list[str]] = Param(
        Params._dummy(), "scoredLabels", "labels scored by the label- and example-based metrics (default: the "
        "prediction column's, else every taxonomy node)", typeConverter=to_string_list)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__()
        self._setDefault(metricName="hF", labelsCol="labels", predictionCol="prediction")
        self._set(**kwargs)

    def setParams(self, **kwargs: Any) -> HierarchicalEvaluator:
        return self._set(**kwargs)

    def getMetricName(self) -> str:
        return self.getOrDefault(self.metricName)

    def setMetricName(self, value: str) -> HierarchicalEvaluator:
        return self._set(metricName=value)

    def getLabelsCol(self) -> str:
        return self.getOrDefault(self.labelsCol)

    def setLabelsCol(self, value: str) -> HierarchicalEvaluator:
        return self._set(labelsCol=value)

    def getPredictionCol(self) -> str:
        return self.getOrDefault(self.predictionCol)

    def setPredictionCol(self, value: str) -> HierarchicalEvaluator:
        return self._set(predictionCol=value)

    def getTaxonomy(self) -> Any:
        """The Param taxonomy (``None`` when unset: the prediction column's is used)."""
        return self.getOrDefault(self.taxonomy) if self.isDefined(self.taxonomy) else None

    def setTaxonomy(self, value: Any) -> HierarchicalEvaluator:
        return self._set(taxonomy=value)

    def getScoredLabels(self) -> list[str] | None:
        """The Param scoredLabels (``None`` when unset: the prediction column's, else every node)."""
        return list(self.getOrDefault("scoredLabels")) if self.isDefined(self.scoredLabels) else None

    def setScoredLabels(self, value: list[str]) -> HierarchicalEvaluator:
        return self._set(scoredLabels=value)

    def _check_value(self, name: str) -> None:
        super()._check_value(name)
        if name == "metricName":
            metric_key(self.getMetricName())

    def isLargerBetter(self) -> bool:
        return metric_key(self.getMetricName()) not in SMALLER_IS_BETTER

    # ------------------------------------------------------------------------------------------
    def _context(self, dataset: DataFrame) -> tuple[Taxonomy, list[str] | None, bool]:
        who = "HierarchicalEvaluator"
        pred = self.getOrDefault(self.predictionCol)
        check_labels_column(dataset, self.getOrDefault(self.labelsCol), who)
        check_labels_column(dataset, pred, who)
        md = (dataset.schema[pred].metadata or {}).get(META_KEY) or {}
        if self.isDefined(self.taxonomy):
            taxonomy = load_taxonomy(self.getOrDefault(self.taxonomy), who)
        elif md.get("taxonomy"):
            taxonomy = Taxonomy.from_tsv_text(md["taxonomy"], source=f"the taxonomy of column {pred!r}")
        else:
            raise ConfigError(f"{who}: Param taxonomy is not set and the prediction column {pred!r} carries none "
                              "(it was not made by HierarchicalClassificationModel)")
        scored = self.getOrDefault(self.scoredLabels) if self.isDefined(self.scoredLabels) else md.get("scored_labels")
        mdc = bool(md.get("multi_dimensional", False))
        return taxonomy, scored, mdc

    def evaluateAll(self, dataset: DataFrame) -> dict[str, float]:
        """Every metric, as ``sparkhc evaluate`` writes them (``metrics`` of its JSON)."""
        return self._metrics(dataset, mdc=None)

    def _metrics(self, dataset: DataFrame, mdc: bool | None) -> dict[str, float]:
        from sparkhc.features import scored_mask
        from sparkhc.spark.evaluate import aggregate_metrics

        taxonomy, scored, is_mdc = self._context(dataset)
        gold, pred = self.getOrDefault(self.labelsCol), self.getOrDefault(self.predictionCol)
        row = dataset.agg(F.count(F.lit(1)).alias("n"), F.sum(F.col(gold).isNull().cast("long")).alias("null")).first()
        assert row is not None  # an aggregate has one row
        if int(row["n"]) == 0:
            raise InputDataError("HierarchicalEvaluator: the DataFrame has no rows; nothing to evaluate")
        if row["null"]:
            raise SchemaError(f"HierarchicalEvaluator: labels column {gold!r}: {int(row['null'])} rows have no gold "
                              "labels (null); cannot evaluate")
        df = dataset.select(F.col(gold).alias("_gold"), F.col(pred).alias("_pred"))
        metrics = aggregate_metrics(df, taxonomy, scored=scored_mask(taxonomy, scored), gold_col="_gold",
                                    pred_col="_pred").compute()
        if mdc if mdc is not None else is_mdc:
            from sparkhc.class_spaces import MDCLayout
            from sparkhc.spark.mdc import aggregate_mdc_labels

            metrics.update(aggregate_mdc_labels(df, MDCLayout.from_taxonomy(taxonomy), "_gold", "_pred").compute())
        return metrics

    def _evaluate(self, dataset: DataFrame) -> float:
        key = metric_key(self.getMetricName())
        return float(self._metrics(dataset, mdc=key in MDC_KEYS)[key])
