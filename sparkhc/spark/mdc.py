"""The Spark side of multi-dimensional classification (Jia & Zhang 2020).

* :class:`SparkPairSolver` keeps M3MDC's pair blocks (:class:`~sparkhc.models.jia_zhang.solver.PairBlock`:
  one active one-vs-one pair's rows and dual variables) in a cached RDD, a few pairs per partition
  (balanced by rows, largest first), and runs each round of a W-step sweep (the sub-problems, then
  the step and the evaluation; :mod:`sparkhc.models.jia_zhang.solver`) as one Spark job: the round's
  order (``d × m`` matrices) is broadcast, every partition updates its blocks and returns one
  ``d``-sized report per pair through an accumulator (the JVM counts the new cached partitions: the
  blocks go through Python once per round); the updated blocks form the next cached RDD (local
  checkpoint: the lineage stays one job deep). The rows and the multipliers never leave the executors; the driver
  does the line search and the duality gap from the reports. The worker runs the same numpy code
  as :class:`~sparkhc.models.jia_zhang.solver.SerialPairSolver` on the same blocks, so the fitted
  model equals the serial one.
* :func:`fit_mdc_spark` trains a registered MDC model (``m3mdc``, ``mdc_br``) for ``sparkhc train``
  without collecting the rows: one job counts the classes of every space (the pair layout), one
  shuffle sends every row to the partitions whose pairs contain it, where the blocks are built
  (sorted by ``doc_id``: the fit does not depend on the input partitioning).
* :func:`aggregate_mdc_labels` computes the MDC metric counts of a predictions DataFrame whose gold
  and predicted label sets use an MDC taxonomy, for ``sparkhc evaluate``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import partial
from typing import Any

import numpy as np
import scipy.sparse as sp
from pyspark import RDD, Accumulator, Broadcast, StorageLevel
from pyspark.accumulators import AccumulatorParam
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from sparkhc.batch import DOC_ID, SparseBatch
from sparkhc.class_spaces import MDCLayout
from sparkhc.errors import InputDataError, SchemaError
from sparkhc.metrics import MDCCounts
from sparkhc.models.jia_zhang.solver import (
    ApplyOrder,
    PairBlock,
    SolveOrder,
    ThreadPairSolver,
    balanced_groups,
    group_blocks,
    resolve_w_solver,
)

GOLD_TARGETS = "gold_targets"
PRED_TARGETS = "pred_targets"

Pair = tuple[int, int, int]


def _run_group(order: Broadcast, reports: Accumulator, items: Iterable[Any]) -> Iterator[Any]:
    """A partition is ``[None, blocks]``: run the order on the blocks, add the reports to
    ``reports`` and yield the new partition.

    Every function over the blocks reads its whole partition: a Python worker that leaves input
    unread is not reused by Spark, and a fresh worker pays the imports and numba's start-up again
    (seconds per round; this made the conformance test run for more than 10 minutes)."""
    _, blocks = list(items)
    value = order.value
    reports.add([b.run(value) for b in blocks])
    yield None
    yield blocks


class _Reports(AccumulatorParam):  # type: ignore[type-arg]
    """The reports of a round, gathered with the tasks' results (no second pass over the blocks)."""

    def zero(self, value: list[Any]) -> list[Any]:
        return []

    def addInPlace(self, a: list[Any], b: list[Any]) -> list[Any]:
        a.extend(b)
        return a


def _alphas(items: Iterable[Any]) -> Iterator[Any]:
    for blocks in list(items)[1:]:
        yield [(b.pair, b.alpha) for b in blocks]


class SparkPairSolver:
    """Keeps the pair blocks in a cached RDD and runs the W step's rounds as Spark jobs.

    Parameters
    ----------
    spark : SparkSession
        An existing session (this class never creates or stops one).
    num_slices : int, optional
        Partitions of the blocks; default ``min(#pairs, 2 × defaultParallelism)`` (balanced by rows).
    """

    def __init__(self, spark: SparkSession, num_slices: int | None = None) -> None:
        self._sc = spark.sparkContext
        self.num_slices = num_slices
        self._rdd: RDD[Any] | None = None
        self._bc: Broadcast | None = None
        #: Spark jobs run by :meth:`run` since :meth:`open` (two per W-step sweep)
        self.jobs = 0

    def n_groups(self, n_pairs: int) -> int:
        return max(1, min(n_pairs, self.num_slices or 2 * self._sc.defaultParallelism))

    def open(self, blocks: Sequence[PairBlock]) -> None:
        """Blocks built on the driver (in-memory data: the experiments on small numeric sets)."""
        groups = balanced_groups([b.n_rows for b in blocks], self.n_groups(len(blocks)))
        items: list[Any] = []
        for g in groups:
            items += [None, [blocks[i] for i in g]]
        self._start(self._sc.parallelize(items, len(groups)) if groups else self._sc.parallelize([], 1))

    def open_rdd(self, rdd: RDD[Any]) -> None:
        """Blocks built on the executors: ``rdd`` has two items per partition, ``None`` and the
        list of the partition's blocks (:func:`fit_mdc_spark`)."""
        self._start(rdd)

    def _start(self, rdd: RDD[Any]) -> None:
        self.close()
        self.jobs = 0
        self._rdd = rdd.persist(StorageLevel.MEMORY_AND_DISK)

    def run(self, order: SolveOrder | ApplyOrder) -> list[Any]:
        if self._rdd is None:
            raise RuntimeError("SparkPairSolver.run called before open")
        bc = self._sc.broadcast(order)
        acc = self._sc.accumulator([], _Reports())
        nxt = self._rdd.mapPartitions(partial(_run_group, bc, acc))
        nxt.persist(StorageLevel.MEMORY_AND_DISK)
        nxt.localCheckpoint()  # the lineage stays one job deep
        # one pass: the JVM counts the cached partitions (the blocks are not read back into Python
        # for the reports; that second pass cost about a third of a round); a re-executed task may
        # add its (identical) reports twice, hence one per pair
        nxt._jrdd.count()
        reports = {r.pair: r for r in acc.value}
        self._rdd.unpersist()
        if self._bc is not None:
            self._bc.unpersist()
        self._rdd, self._bc = nxt, bc
        self.jobs += 1
        return [reports[k] for k in sorted(reports)]

    def alphas(self) -> list[np.ndarray]:
        if self._rdd is None:
            raise RuntimeError("SparkPairSolver.alphas called before open")
        return [a for _, a in sorted((p for part in self._rdd.mapPartitions(_alphas).collect() for p in part),
                                     key=lambda t: t[0])]

    def close(self) -> None:
        if self._rdd is not None:
            self._rdd.unpersist()
            self._rdd = None
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


def _count_classes(layout: MDCLayout, batches: Iterable[SparseBatch]) -> Iterator[tuple[list[np.ndarray], str]]:
    """Per partition: the class counts of every space and the first bad document's message."""
    counts = [np.zeros(k, dtype=np.int64) for k in layout.n_classes]
    for batch in batches:
        if not len(batch):
            continue
        if batch.labels is None:
            yield counts, "the training documents have no labels"
            return
        try:
            Y = layout.targets(batch.labels or [], batch.doc_ids)
        except InputDataError as e:
            yield counts, str(e)
            return
        for j, k in enumerate(layout.n_classes):
            counts[j] += np.bincount(Y[:, j], minlength=k)
    yield counts, ""


def _merge_counts(a: tuple[list[np.ndarray], str], b: tuple[list[np.ndarray], str]) -> tuple[list[np.ndarray], str]:
    return [x + y for x, y in zip(a[0], b[0], strict=True)], a[1] or b[1]


def class_counts(layout: MDCLayout, batches: RDD[SparseBatch]) -> list[np.ndarray]:
    """The class counts of every space over all rows (one job; a clear error for a document
    without exactly one class per space)."""
    counts, err = batches.mapPartitions(partial(_count_classes, layout)).reduce(_merge_counts)
    if err:
        raise InputDataError(err)
    if not int(counts[0].sum()):
        raise InputDataError("no training documents selected")
    return counts


def _route(layout: MDCLayout, groups: list[list[Pair]], batch: SparseBatch) -> Iterator[tuple[int, Any]]:
    """The rows of ``batch`` that each group of pairs needs: ``(group, (doc_ids, X, Y))``."""
    if not len(batch):
        return
    Y = layout.targets(batch.labels or [], batch.doc_ids)
    # kept in the batch's float32: the blocks are pickled at every round (a third less than
    # float64), and every product with them is computed in float64 (PairData), so the same values
    X = sp.csr_matrix(batch.X)
    for g, pairs in enumerate(groups):
        need = np.zeros(len(batch), dtype=bool)
        for j, a, b in pairs:
            need |= (Y[:, j] == a) | (Y[:, j] == b)
        if need.any():
            yield g, (np.asarray(batch.doc_ids)[need], X[need], Y[need])


def _build_group(groups: list[list[int]], active: list[Pair], n_features: int, share: bool, index: int,
                 it: Iterator[tuple[int, Any]]) -> Iterator[Any]:
    """The blocks of group ``index`` from its rows (sorted by ``doc_id``;
    :func:`~sparkhc.models.jia_zhang.solver.group_blocks`, ``share``: the blocks of the partition
    share one float64 copy of its rows)."""
    pieces = [v for _, v in it]
    blocks: list[PairBlock] = []
    if pieces:
        blocks = group_blocks(np.concatenate([p[0] for p in pieces]), sp.vstack([p[1] for p in pieces], format="csr"),
                              np.concatenate([p[2] for p in pieces]), groups[index], active, share)
    yield None
    yield blocks


def _identity(k: int) -> int:
    return k


def open_frame(solver: SparkPairSolver, batches: RDD[SparseBatch], layout: MDCLayout, counts: list[np.ndarray],
               active: list[Pair], n_features: int, share: bool = False) -> None:
    """Open ``solver`` on the blocks of the ``active`` pairs built on the executors from ``batches``
    (one shuffle: every row goes to the partitions whose pairs contain it; ``share``: the blocks
    of a partition share its rows, :func:`_build_group`)."""
    sizes = [int(counts[j][a] + counts[j][b]) for j, a, b in active]
    groups = balanced_groups(sizes, solver.n_groups(len(active)))
    pair_groups = [[active[i] for i in g] for g in groups]
    if not groups:
        solver.open([])
        return
    rdd = (
        batches.flatMap(partial(_route, layout, pair_groups))
        .partitionBy(len(groups), _identity)
        .mapPartitionsWithIndex(partial(_build_group, groups, active, n_features, share))
    )
    solver.open_rdd(rdd)


def fit_mdc_spark(
    spark: SparkSession,
    df: DataFrame,
    model: Any,
    num_slices: int | None = None,
    progress: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Fit an MDC model (``m3mdc``, ``mdc_br``) on the rows of ``df`` with the pairs on Spark.

    The rows are never collected: the driver holds the class counts, the model and the
    ``d``-sized reports of the pair blocks. ``progress`` receives one record per M3MDC alternation
    (one for BR) with ``examples``, ``objective`` (after the C step), ``delta_w``, ``sweeps`` and
    ``duality_gap``.
    """
    from sparkhc.spark.io import batches_rdd

    t0 = time.perf_counter()
    batches = batches_rdd(df.select(DOC_ID, "labels", "indices", "values"), model.n_features)
    counts = class_counts(model.layout, batches)
    n_docs = int(counts[0].sum())
    solver = SparkPairSolver(spark, num_slices=num_slices)
    share = resolve_w_solver(str(model.params.get("w_solver", "auto")), n_docs) == "dcd"
    _fit_with(model, solver, counts, lambda s, active: open_frame(s, batches, model.layout, counts, active,
                                                                  model.n_features, share))
    seconds = time.perf_counter() - t0
    _report(model, n_docs, seconds, progress)
    return {"documents": n_docs, "alternations": len(model.history_), "seconds": seconds, "spark_jobs": solver.jobs,
            "execution": "spark", **_caps(model)}


def _fit_with(model: Any, solver: Any, counts: list[np.ndarray], open_blocks: Callable[[Any, list[Pair]], None]) -> None:
    """``model.fit_open`` with ``solver`` holding the blocks (closed afterwards, not kept by the model)."""
    model.solver = solver
    try:
        model.fit_open(counts, open_blocks)
    finally:
        model.solver = None
        solver.close()


def _report(model: Any, n_docs: int, seconds: float, progress: Callable[[dict[str, Any]], None] | None) -> None:
    """One progress record per alternation (one for BR)."""
    log = [
        {
            "epoch": h["iteration"],
            "examples": n_docs,
            "objective": h["objective_after_c"],
            "delta_w": h["delta_w"],
            "sweeps": h["inner_sweeps"],
            "duality_gap": h["duality_gap"],
            "seconds": h["seconds"],
        }
        for h in model.history_
    ] or [{"epoch": 1, "examples": n_docs, "seconds": seconds}]
    if progress is not None:
        for rec in log:
            progress(rec)


def fit_mdc_driver(
    rows: SparseBatch,
    model: Any,
    threads: int,
    num_slices: int | None = None,
    progress: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """:func:`fit_mdc_spark` in this process, no Spark session (``train.execution``, small inputs).

    ``rows``: the training documents read in the driver (:func:`sparkhc.spark.plan.read_rows`;
    unique doc ids). The class counts, the pair groups (``num_slices``, default ``2 × threads``:
    what :class:`SparkPairSolver` makes on a master with ``threads`` task slots) and every group's
    blocks (:func:`~sparkhc.models.jia_zhang.solver.group_blocks`, sorted by ``doc_id``) are those
    of the Spark path, and a :class:`~sparkhc.models.jia_zhang.solver.ThreadPairSolver` runs each
    round's pairs in ``threads`` threads with the reports in pair order: the fitted model is the
    Spark path's bit for bit (tests/spark/test_mdc_driver.py)."""
    t0 = time.perf_counter()
    layout = model.layout
    if rows.labels is None:
        raise InputDataError("the training documents have no labels")
    if not len(rows):
        raise InputDataError("no training documents selected")
    Y = layout.targets(rows.labels, rows.doc_ids)
    counts = [np.bincount(Y[:, j], minlength=k).astype(np.int64) for j, k in enumerate(layout.n_classes)]
    n_docs = len(rows)
    ids = np.asarray(rows.doc_ids)
    X = sp.csr_matrix(rows.X)
    solver = ThreadPairSolver(threads)
    share = resolve_w_solver(str(model.params.get("w_solver", "auto")), n_docs) == "dcd"

    def open_blocks(s: ThreadPairSolver, active: list[Pair]) -> None:
        sizes = [int(counts[j][a] + counts[j][b]) for j, a, b in active]
        groups = balanced_groups(sizes, max(1, min(len(active), num_slices or 2 * solver.threads)))
        blocks: list[PairBlock] = []
        for g in groups:
            need = np.zeros(n_docs, dtype=bool)
            for i in g:
                j, a, b = active[i]
                need |= (Y[:, j] == a) | (Y[:, j] == b)
            blocks += group_blocks(ids[need], X[need], Y[need], g, active, share)
        s.open(blocks)

    _fit_with(model, solver, counts, open_blocks)
    seconds = time.perf_counter() - t0
    _report(model, n_docs, seconds, progress)
    return {"documents": n_docs, "alternations": len(model.history_), "seconds": seconds, "spark_jobs": 0,
            "rounds": solver.rounds, "threads": solver.threads, "execution": "driver", **_caps(model)}


def _caps(model: Any) -> dict[str, int]:
    """How many pair sub-problems the fit solved and how many stopped at their pass cap (and W
    steps at ``max_inner_iter``): part of every fit's result, never only a log line."""
    c = model.state_.counters if getattr(model, "state_", None) is not None else {}
    return {k: int(c[k]) for k in ("sub_problems", "capped_sub_problems", "sweep_capped") if k in c}


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
