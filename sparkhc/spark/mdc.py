"""The Spark side of multi-dimensional classification (Jia & Zhang 2020).

* :class:`SparkPairSolver` runs M3MDC's pairwise sub-problems as Spark tasks. Within one sweep of
  the W step (see :mod:`sparkhc.models.jia_zhang.solver`) the ``m`` pairwise sub-problems are independent given
  ``C`` and the current multipliers: the training data (:class:`~sparkhc.models.jia_zhang.solver.PairData`: the
  sparse features and the pairs' rows, not the Gram matrix, which each worker computes once) are
  broadcast once per fit and each sweep is ``sparkContext.parallelize(tasks).map(solve_pair_task)``.
  The worker runs the same numpy code as :class:`~sparkhc.models.jia_zhang.solver.SerialPairSolver` on the same
  inputs, so the fitted model equals the serial one.
* :func:`fit_mdc_spark` trains a registered MDC model (``m3mdc``, ``mdc_br``) for ``sparkhc train``:
  the selected documents are collected on the driver (the solver needs all of them in every
  sub-problem), sorted by ``doc_id`` (the fit does not depend on the input partitioning), and fitted
  with the pair sub-problems on Spark.
* :func:`aggregate_mdc_labels` computes the MDC metric counts of a predictions DataFrame whose gold
  and predicted label sets use an MDC taxonomy, for ``sparkhc evaluate``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy as np
from pyspark import Broadcast
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from sparkhc.batch import DOC_ID, SparseBatch
from sparkhc.errors import InputDataError, SchemaError
from sparkhc.metrics import MDCCounts
from sparkhc.models.jia_zhang.solver import PairData, PairResult, PairTask, solve_pair_task
from sparkhc.models.jia_zhang.spaces import MDCLayout

GOLD_TARGETS = "gold_targets"
PRED_TARGETS = "pred_targets"


def _solve_broadcast(data: Broadcast, task: PairTask) -> PairResult:
    return solve_pair_task(data.value, task)


class SparkPairSolver:
    """Runs the pairwise sub-problems as Spark tasks.

    Parameters
    ----------
    spark : SparkSession
        An existing session (this class never creates or stops one).
    num_slices : int, optional
        Partitions per sweep; default ``min(#pairs, defaultParallelism)``.
    """

    def __init__(self, spark: SparkSession, num_slices: int | None = None) -> None:
        self._sc = spark.sparkContext
        self.num_slices = num_slices
        self._bc: Broadcast | None = None

    def open(self, data: PairData) -> None:
        self.close()
        self._bc = self._sc.broadcast(data)

    def solve(self, tasks: Sequence[PairTask]) -> list[PairResult]:
        if self._bc is None:
            raise RuntimeError("SparkPairSolver.solve called before open")
        if not tasks:
            return []
        slices = self.num_slices or min(len(tasks), self._sc.defaultParallelism)
        results: list[PairResult] = (
            self._sc.parallelize(list(tasks), slices).map(partial(_solve_broadcast, self._bc)).collect()
        )
        order = {t.pair: k for k, t in enumerate(tasks)}
        return sorted(results, key=lambda r: order[r.pair])

    def close(self) -> None:
        if self._bc is not None:
            self._bc.unpersist()
            self._bc = None


def get_session(master: str | None = None, **conf: Any) -> SparkSession:
    """The project's session (``sparkhc.spark.session.get_session``) for the experiment CLI."""
    from sparkhc.spark.session import get_session as _get

    return _get(
        app_name="sparkhc-m3mdc", master=master, extra_conf={k: str(v) for k, v in conf.items()} or None
    )


# ---------------------------------------------------------------------------------------------
# sparkhc train
# ---------------------------------------------------------------------------------------------


def collect_batch(df: DataFrame, n_features: int) -> SparseBatch:
    """All rows of a features DataFrame as one SparseBatch on the driver, sorted by ``doc_id``."""
    from sparkhc.spark.io import batches_rdd

    parts = [b for b in batches_rdd(df, n_features).collect() if len(b)]
    if not parts:
        raise InputDataError("no training documents selected")
    batch = SparseBatch.concat(parts)
    return batch.subset(np.argsort(batch.doc_ids, kind="stable"))


def fit_mdc_spark(
    spark: SparkSession,
    df: DataFrame,
    model: Any,
    num_slices: int | None = None,
    progress: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Fit an MDC model (``m3mdc``, ``mdc_br``) on the rows of ``df`` with the pairs on Spark.

    ``progress`` receives one record per M3MDC alternation (one for BR) with ``examples``,
    ``objective`` (after the C step), ``delta_w``, ``sweeps`` and ``duality_gap``.
    """
    t0 = time.perf_counter()
    batch = collect_batch(df.select(DOC_ID, "labels", "indices", "values"), model.n_features)
    model.solver = SparkPairSolver(spark, num_slices=num_slices)
    try:
        model.fit(batch)
    finally:
        model.solver = None
    seconds = time.perf_counter() - t0
    log = [
        {
            "epoch": h["iteration"],
            "examples": len(batch),
            "objective": h["objective_after_c"],
            "delta_w": h["delta_w"],
            "sweeps": h["inner_sweeps"],
            "duality_gap": h["duality_gap"],
            "seconds": h["seconds"],
        }
        for h in model.history_
    ] or [{"epoch": 1, "examples": len(batch), "seconds": seconds}]
    if progress is not None:
        for rec in log:
            progress(rec)
    return {"documents": len(batch), "alternations": len(model.history_), "seconds": seconds}


# ---------------------------------------------------------------------------------------------
# sparkhc evaluate
# ---------------------------------------------------------------------------------------------


def _member_of(names: Column) -> Callable[[Column], Column]:
    return lambda x: F.array_contains(names, x)


def _targets(col: str, layout: MDCLayout) -> Column:
    """``array<int>``: per class space the index of the document's one label of that space, else −1."""
    out = []
    for j in range(len(layout.names)):
        names = F.array(*[F.lit(n) for n in layout.class_names(j)])
        hit = F.filter(F.col(col), _member_of(names))
        out.append(
            F.when(F.size(hit) == 1, F.array_position(names, F.try_element_at(hit, F.lit(1))) - 1)
            .otherwise(F.lit(-1))
            .cast("int")
        )
    return F.array(*out)


def aggregate_mdc_labels(df: DataFrame, layout: MDCLayout, gold_col: str, pred_col: str) -> MDCCounts:
    """MDC counts (:class:`~sparkhc.metrics.MDCCounts`) of label-set columns over an MDC taxonomy.

    Every gold and predicted set must hold exactly one class of every space (else a SchemaError
    with the count of such rows).
    """
    from sparkhc.spark.evaluate import aggregate_mdc

    t = df.select(_targets(gold_col, layout).alias(GOLD_TARGETS), _targets(pred_col, layout).alias(PRED_TARGETS))
    bad = t.agg(
        F.sum(F.array_contains(GOLD_TARGETS, -1).cast("long")).alias("gold"),
        F.sum(F.array_contains(PRED_TARGETS, -1).cast("long")).alias("pred"),
    ).first()
    if bad is not None and (bad["gold"] or bad["pred"]):
        raise SchemaError(
            f"{int(bad['gold'] or 0)} gold and {int(bad['pred'] or 0)} predicted label sets do not hold exactly one "
            f"class of every class space {list(layout.names)}; cannot compute the MDC metrics"
        )
    return aggregate_mdc(t, GOLD_TARGETS, PRED_TARGETS)
