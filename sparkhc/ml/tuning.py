"""Tuning the Spark way: ``CrossValidator`` over a grid of :class:`HierarchicalClassifier` Params,
scored by :class:`HierarchicalEvaluator`, on the *training* documents of a features folder only
(the selection is made before anything is read: the test split never reaches the folds).

The grid (a TOML file for ``sparkhc tune``)::

    epochs = [1, 2]            # any Param of HierarchicalClassifier: a list of values
    C = [0.5, 1.0]
    [modelParams]              # the model's own parameters: every combination is a candidate
    branching = [true, false]
"""

from __future__ import annotations

import itertools
import json
import logging
import time
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pyspark.ml import tuning as _spark_tuning
from pyspark.ml.param import Param
from pyspark.ml.tuning import CrossValidatorModel, ParamGridBuilder
from pyspark.sql import DataFrame, SparkSession

from sparkhc.errors import ConfigError
from sparkhc.ml.classifier import HierarchicalClassificationModel, HierarchicalClassifier
from sparkhc.ml.evaluator import HierarchicalEvaluator

log = logging.getLogger(__name__)

TUNING_JSON = "tuning.json"
TUNING_TSV = "tuning.tsv"
TUNING_PNG = "tuning.png"


class CrossValidator(_spark_tuning.CrossValidator):
    """Spark's ``CrossValidator`` whose fitted model holds its metrics (``avgMetrics``,
    ``stdMetrics``) as Python floats, as every metric of :class:`HierarchicalEvaluator` is (Spark's
    own averages the folds with numpy and keeps ``numpy.float64``). Everything else is Spark's."""

    def _fit(self, dataset: DataFrame) -> CrossValidatorModel:
        model = super()._fit(dataset)
        model.avgMetrics = [float(m) for m in model.avgMetrics]
        model.stdMetrics = [float(m) for m in (model.stdMetrics or [])]
        return model


def load_grid(path: str | Path) -> dict[str, Any]:
    """A grid TOML file (see the module notes) as a dict."""
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: grid file not found") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: invalid TOML: {e}") from None
    return data


def param_grid(estimator: HierarchicalClassifier, grid: Mapping[str, Any]) -> list[dict[Param[Any], Any]]:
    """The ParamGridBuilder maps of ``grid`` (Param name -> list of values; ``modelParams`` -> a
    table of the model's parameters, each a list of values)."""
    builder = ParamGridBuilder()
    for name, values in grid.items():
        if name == "modelParams":
            if not isinstance(values, Mapping):
                raise ConfigError("grid: modelParams must be a table of the model's parameters")
            keys = sorted(values)
            lists = [_values(f"modelParams.{k}", values[k]) for k in keys]
            builder.addGrid(estimator.modelParams, [dict(zip(keys, combo, strict=True))
                                                    for combo in itertools.product(*lists)])
            continue
        if name in ("taxonomy", "featuresCol", "labelsCol", "predictionCol", "scoresCol", "docIdCol"):
            raise ConfigError(f"grid: {name} is not a tuning parameter")
        if not estimator.hasParam(name):
            raise ConfigError(f"grid: {name!r} is not a Param of HierarchicalClassifier")
        builder.addGrid(estimator.getParam(name), _values(name, values))
    maps = builder.build()
    if not maps or maps == [{}]:
        raise ConfigError("grid: no candidate (give at least one Param with a list of values)")
    return maps


def _values(name: str, values: Any) -> list[Any]:
    if not isinstance(values, list) or not values:
        raise ConfigError(f"grid: {name} must be a non-empty list of values, got {values!r}")
    return list(values)


def candidates_table(cv: CrossValidatorModel, maps: Sequence[Mapping[Param[Any], Any]]) -> list[dict[str, Any]]:
    """One row per candidate: its Params, mean and standard deviation of the validation metric."""
    rows = []
    std = list(getattr(cv, "stdMetrics", []) or [None] * len(maps))
    for i, (m, avg, sd) in enumerate(zip(maps, cv.avgMetrics, std, strict=True)):
        rows.append({"candidate": i, "params": {p.name: v for p, v in m.items()}, "mean": float(avg),
                     "std": None if sd is None else float(sd)})
    return rows


def cross_validate(
    df: DataFrame,
    estimator: HierarchicalClassifier,
    grid: Mapping[str, Any],
    metric: str = "hF",
    num_folds: int = 2,
    seed: int = 0,
    parallelism: int = 1,
) -> tuple[CrossValidatorModel, list[dict[str, Any]], int]:
    """Spark's CrossValidator on ``df`` (every row is training data): the fitted CrossValidatorModel
    (its bestModel refitted on all of ``df``), the candidates table and the chosen candidate."""
    if num_folds < 2:
        raise ConfigError(f"tune: the number of folds must be >= 2, got {num_folds}")
    maps = param_grid(estimator, grid)
    evaluator = HierarchicalEvaluator(metricName=metric, labelsCol=estimator.getLabelsCol(),
                                      predictionCol=estimator.getPredictionCol())
    cv = CrossValidator(estimator=estimator, estimatorParamMaps=maps, evaluator=evaluator, numFolds=num_folds,
                        seed=seed, parallelism=parallelism)
    model = cv.fit(df)
    table = candidates_table(model, maps)
    scores = [r["mean"] for r in table]
    best = scores.index(max(scores) if evaluator.isLargerBetter() else min(scores))
    return model, table, best


def write_report(out: Path, table: list[dict[str, Any]], best: int, metric: str, info: dict[str, Any]) -> None:
    """``tuning.json``, ``tuning.tsv`` and ``tuning.png`` (validation score per candidate) in ``out``."""
    keys = sorted({k for r in table for k in r["params"]})
    lines = ["\t".join(["candidate", *keys, f"{metric}_mean", f"{metric}_std", "chosen"])]
    for r in table:
        lines.append("\t".join([str(r["candidate"]), *(json.dumps(r["params"].get(k), sort_keys=True) for k in keys),
                                f"{r['mean']:.6f}", "" if r["std"] is None else f"{r['std']:.6f}",
                                "*" if r["candidate"] == best else ""]))
    (out / TUNING_TSV).write_text("\n".join(lines) + "\n", encoding="utf-8")
    (out / TUNING_JSON).write_text(json.dumps({**info, "metric": metric, "chosen": best,
                                               "chosen_params": table[best]["params"], "candidates": table},
                                              indent=2, sort_keys=True) + "\n", encoding="utf-8")
    from matplotlib.figure import Figure  # no pyplot: no global backend state

    fig = Figure(figsize=(max(4.0, 0.9 * len(table) + 2), 3.5))
    ax = fig.add_subplot()
    xs = range(len(table))
    ax.bar(xs, [r["mean"] for r in table], yerr=[r["std"] or 0.0 for r in table],
           color=["tab:orange" if r["candidate"] == best else "tab:blue" for r in table], capsize=3)
    ax.set_xticks(list(xs))
    ax.set_xticklabels([", ".join(f"{k}={json.dumps(v)}" for k, v in sorted(r["params"].items())) for r in table],
                       rotation=30, ha="right", fontsize=7)
    ax.set_ylabel(f"{metric} (validation, mean of {info.get('folds')} folds)")
    ax.set_title("sparkhc tune: candidates (chosen in orange)")
    fig.tight_layout()
    fig.savefig(out / TUNING_PNG, dpi=100)


def tune(
    spark: SparkSession,
    features: str | Path,
    out: str | Path,
    grid: Mapping[str, Any],
    model: str = "global",
    metric: str = "hF",
    num_folds: int = 2,
    seed: int = 0,
    parallelism: int = 1,
    split: str | None = "train",
    fold: int | None = None,
    exclude_fold: int | None = None,
    params: Mapping[str, Any] | None = None,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Choose the Params of a model by cross-validation on the selected (training) documents of a
    features folder, refit the chosen candidate on all of them and save it to ``out`` (a sparkhc
    model folder) with the candidates' validation scores as a table and a plot."""
    from sparkhc.features import TAXONOMY_FILE, Selection, features_corpus_info
    from sparkhc.ml.io import local_path, read_features
    from sparkhc.spark.pipelines import select_rows

    t0 = time.perf_counter()
    out = local_path(str(out))
    if out.exists() and not overwrite:
        raise ConfigError(f"{out} already exists; pass --overwrite to replace it")
    selection = Selection(split, fold, exclude_fold)
    if selection == Selection():
        raise ConfigError("tune: select the training documents (--split, --fold or --exclude-fold); tuning on "
                          "every document would read the test documents")
    df = select_rows(read_features(spark, features), selection)
    try:
        est = HierarchicalClassifier(taxonomy=str(Path(features) / TAXONOMY_FILE), model=model, **dict(params or {}))
    except TypeError as e:  # an unknown Param among the fixed ones ([params] of the grid file)
        raise ConfigError(f"tune: fixed Params: {e}") from None
    scored = features_corpus_info(features).get("scored_labels")
    if scored is not None:
        est.set(est.scoredLabels, list(scored))
    cv, table, best = cross_validate(df, est, grid, metric, num_folds, seed, parallelism)
    best_model = cv.bestModel
    assert isinstance(best_model, HierarchicalClassificationModel)
    writer = best_model.write()
    (writer.overwrite() if overwrite else writer).save(str(out))
    info = {"features": str(Path(features).resolve()), "selection": selection.to_dict(), "folds": num_folds,
            "seed": seed, "model": model, "seconds": round(time.perf_counter() - t0, 2)}
    write_report(out, table, best, metric, info)
    log.info("tune: chose candidate %d %s (%s %.4f)", best, table[best]["params"], metric, table[best]["mean"])
    return {"model": str(out), "chosen": best, "chosen_params": table[best]["params"], "metric": metric,
            "validation": table[best]["mean"], "candidates": len(table), "seconds": info["seconds"]}
