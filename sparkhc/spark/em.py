"""EM of the Xiao et al. generative models on Spark (``sparkhc.models.xiao``).

The driver runs the serial loop of :meth:`sparkhc.models.xiao._XiaoModel.fit_arrays` step for
step; only the data passes are distributed:

1. one pass over the partitions sums the labeled documents' sufficient statistics (``word``,
   ``prior``, ``docs``, ``vocab``) and counts the labeled / unlabeled documents;
2. the driver estimates the initial (naive Bayes) parameters;
3. per EM iteration: the current parameters are broadcast, every partition runs the model's
   E-step on its unlabeled documents (``mapInArrow``: raw counts arrive as Arrow batches and
   become one :class:`SparseBatch`) and returns its statistics and log likelihood serialized with
   :func:`sparkhc.persistence.state_to_bytes`; ``treeAggregate`` sums them
   (:class:`StateSum`); the driver adds the (fixed) labeled statistics, records the log
   likelihood, stops on relative change ``<= tol`` or ``max_iter`` M-steps, else runs the M-step.

With ``vocabulary="labeled"`` the model vocabulary (the labeled documents' terms) is known after
pass 1; it is broadcast once and the partitions drop the other columns before every E-step, as
the serial fit does, so the statistics (and the saved state) are those of the serial fit. The
results equal ``model.fit(batch)`` up to the floating-point order of the partition sums (the
labeled statistics of integer counts and gold path scores are exact).

Supported: PCNB, PCEM, FlatNB, FlatEM, WDNB, WDEM (one E-step per iteration) and TDNB, TDEM (the
level-by-level loop, one E-step per level and iteration). NBMC / EMMC are refused: their latent
per-document components start from a random draw in document order and their labeled E-step
depends on every labeled document, which a partitioned pass cannot reproduce.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from sparkhc.batch import DOC_ID, SparseBatch
from sparkhc.errors import ConfigError
from sparkhc.models.base import HierModel, ModelState, StateSum
from sparkhc.persistence import state_from_bytes, state_to_bytes

log = logging.getLogger(__name__)

_RESULT_SCHEMA = "n long, state binary"
_ARROW_SCHEMA = pa.schema([("n", pa.int64()), ("state", pa.binary())])

Stats = dict[str, np.ndarray]


def _check_model(model: HierModel) -> None:
    if model.training != "em":
        raise ConfigError(
            f"model {model.name!r} cannot be trained by the Spark EM driver: it declares training "
            f"{model.training!r} (HierModel.training), not 'em'"
        )


def _partition_batch(batches: Iterator[pa.RecordBatch], n_features: int) -> SparseBatch | None:
    tables = [b for b in batches if b.num_rows]
    if not tables:
        return None
    return SparseBatch.from_arrow(pa.Table.from_batches(tables), n_features, with_counts=True)


def _emit(n: int, arrays: Stats, counters: dict[str, float]) -> pa.RecordBatch:
    data = state_to_bytes(ModelState(arrays, counters, "sum"))
    return pa.RecordBatch.from_pydict({"n": [n], "state": [data]}, schema=_ARROW_SCHEMA)


def _labeled_mask(batch: SparseBatch) -> np.ndarray:
    if batch.labels is None:
        return np.zeros(len(batch), dtype=bool)
    return np.array([len(lab) > 0 for lab in batch.labels], dtype=bool)


def make_labeled_fn(
    model_name: str, params: dict[str, Any], taxonomy: Any, n_features: int
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """Pass 1: each partition's labeled statistics (with ``vocab``) and document counts."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from sparkhc.models import get_model_class

        batch = _partition_batch(batches, n_features)
        if batch is None:
            return
        model = get_model_class(model_name)(taxonomy, n_features, **params)
        has = _labeled_mask(batch)
        lab = np.flatnonzero(has)
        assert batch.counts is not None
        x_l = model.prepare(batch.counts[lab])
        labels = batch.labels or []
        if lab.size:
            ns = model.node_scores_from_labels([labels[i] for i in lab])
        else:
            ns = np.zeros((0, model.space.n_nodes))
        st = model.sufficient_statistics(x_l, model.event_weights(ns))
        yield _emit(len(batch), st, {"labeled": float(lab.size), "unlabeled": float(len(batch) - lab.size)})

    return run


def make_estep_fn(
    model_name: str,
    params: dict[str, Any],
    taxonomy: Any,
    n_features: int,
    params_bc: Any,
    level: int | None,
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """One E-step over each partition's unlabeled documents (``level``: TDEM's level E-step)."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from sparkhc.models import get_model_class

        batch = _partition_batch(batches, n_features)
        if batch is None:
            return
        unl = np.flatnonzero(~_labeled_mask(batch))
        if unl.size == 0:
            return
        model = get_model_class(model_name)(taxonomy, n_features, **params)
        state = state_from_bytes(params_bc.value)
        cur = {k: v for k, v in state.arrays.items() if k != "cols"}
        assert batch.counts is not None
        x_u = model.prepare(batch.counts[unl])
        if "cols" in state.arrays:
            x_u = x_u[:, state.arrays["cols"]]
        st = model.e_step(x_u, cur) if level is None else model.e_step_level(x_u, cur, level)
        yield _emit(int(unl.size), st, {})

    return run


def _seq(acc: StateSum, row: Any) -> StateSum:
    return acc.add(state_from_bytes(bytes(row["state"])))


def _comb(a: StateSum, b: StateSum) -> StateSum:
    return a.merge(b)


def _aggregate(df: DataFrame, fn: Any, depth: int) -> StateSum:
    acc: StateSum = df.mapInArrow(fn, _RESULT_SCHEMA).rdd.treeAggregate(StateSum(), _seq, _comb, depth=depth)
    return acc


class _Driver:
    """The distributed E-step and the per-iteration log lines of one fit."""

    def __init__(
        self,
        spark: SparkSession,
        df: DataFrame,
        model: Any,
        cols: np.ndarray | None,
        depth: int,
        progress: Callable[[dict[str, Any]], None] | None,
    ) -> None:
        self.spark, self.df, self.model, self.cols, self.depth, self.progress = spark, df, model, cols, depth, progress
        self.iteration = 0
        self.examples = 0
        self.log: list[dict[str, Any]] = []
        self._t = time.perf_counter()

    def e_step(self, params: dict[str, np.ndarray], level: int | None = None) -> Stats:
        arrays = dict(params)
        if self.cols is not None:
            arrays["cols"] = self.cols
        bc = self.spark.sparkContext.broadcast(state_to_bytes(ModelState(arrays, {}, "sum")))
        try:
            m = self.model
            fn = make_estep_fn(m.name, m.params, m.taxonomy, m.n_features, bc, level)
            acc = _aggregate(self.df, fn, self.depth)
        finally:
            bc.unpersist()
        if acc.n == 0:
            raise ValueError("no unlabeled documents in any partition")
        return dict(acc.result().arrays)

    def record(self, ll: float, prev: float | None, level: int | None = None) -> None:
        now = time.perf_counter()
        rel = abs(ll - prev) / abs(prev) if prev is not None and prev != 0 else None
        info: dict[str, Any] = {"iteration": self.iteration, "epoch": self.iteration + 1, "loglik": ll,
                                "relative_change": rel, "examples": self.examples,
                                "seconds": round(now - self._t, 3)}
        if level is not None:
            info["level"] = level
        log.info(
            "%s EM iteration %d%s: log likelihood %.10g, relative change %s, %.2f s",
            self.model.name, self.iteration, "" if level is None else f" (level {level})", ll,
            "-" if rel is None else f"{rel:.3g}", now - self._t,
        )
        self.log.append(info)
        if self.progress is not None:
            self.progress(info)
        self.iteration += 1
        self._t = now


def _run_flat(drv: _Driver, stats_l: Stats, has_unlabeled: bool) -> tuple[Any, Stats, list[float]]:
    """``_XiaoModel._run_em`` with the unlabeled E-step on Spark."""
    from sparkhc.models.xiao import nb_log_likelihood

    model = drv.model
    params = model.estimate(stats_l)
    stats_used = stats_l
    hist: list[float] = []

    def labeled_part(p: Any) -> Stats:
        st = dict(stats_l)
        st["loglik"] = np.array([nb_log_likelihood(p, st)])
        return st

    if not has_unlabeled:
        ll = model.objective(params, float(labeled_part(params)["loglik"][0]))
        hist.append(ll)
        drv.record(ll, None)
        return params, stats_used, hist
    return model.em_loop(params, stats_used, labeled_part, drv.e_step, on_iter=drv.record)  # type: ignore[no-any-return]


def _run_levels(drv: _Driver, stats_l: Stats, n_unlabeled: int) -> tuple[Any, Stats, list[float]]:
    """``TDNB._run_em`` (level by level) with the unlabeled E-steps on Spark."""

    model = drv.model
    if n_unlabeled == 0:
        return _run_flat(drv, stats_l, False)
    params = model.estimate(stats_l)
    return model.level_loop(params, stats_l, drv.e_step, n_unlabeled,  # type: ignore[no-any-return]
                            on_iter=lambda ll, prev, level: drv.record(ll, prev, level))


def fit_em_spark(
    spark: SparkSession,
    features_df: DataFrame,
    model: HierModel,
    max_iter: int | None = None,
    tol: float | None = None,
    depth: int = 2,
    shards: int | None = None,
    progress: Callable[[dict[str, Any]], None] | None = None,
) -> HierModel:
    """Fit a Xiao et al. model (PCNB/PCEM, FlatNB/FlatEM, WDNB/WDEM, TDNB/TDEM) by EM on Spark.

    Parameters
    ----------
    features_df : DataFrame
        The features layout with raw ``counts`` and ``labels``; rows with an empty (or null)
        label list are the unlabeled documents (used by the EM variants only).
    model : HierModel
        The (unfitted) model; it is fitted in place and returned, with the same state,
        parameters, ``history_`` and ``n_iter_`` as ``model.fit(batch)``.
    max_iter, tol : optional
        Override the model's ``max_iter`` / ``tol`` parameters (recorded in ``model.params``).
    depth : int
        ``treeAggregate`` depth.
    shards : int, optional
        Repartition the features into this many partitions (hash of the doc id) first.
    progress : callable, optional
        Called with one dict per iteration (iteration, epoch = iteration + 1, loglik,
        relative_change, examples = labeled + used unlabeled documents, seconds).

    ``model.em_log_`` holds the per-iteration dicts.
    """
    from sparkhc.models.xiao import TDNB, _expand_columns

    _check_model(model)
    m: Any = model
    if max_iter is not None:
        m.params = {**m.params, "max_iter": int(max_iter)}
    if tol is not None:
        m.params = {**m.params, "tol": float(tol)}
    m.validate_params()
    t0 = time.perf_counter()
    df = features_df.repartition(int(shards), DOC_ID) if shards is not None else features_df
    df = df.cache()
    try:
        acc = _aggregate(df, make_labeled_fn(m.name, m.params, m.taxonomy, m.n_features), depth)
        if acc.n == 0:
            raise ConfigError(f"model {m.name!r}: no training documents")
        n_l = int(acc.counters.get("labeled", 0))
        n_u = int(acc.counters.get("unlabeled", 0)) if m.semi_supervised else 0
        if n_l == 0:
            raise ConfigError(f"model {m.name!r}: no labeled document in the training data")
        stats_l: Stats = dict(acc.result().arrays)
        if stats_l["word"].shape[1] != m.n_features:
            raise ValueError(f"counts have {stats_l['word'].shape[1]} columns, the model expects {m.n_features}")
        log.info("%s: %d labeled and %d unlabeled documents, %.2f s", m.name, n_l, n_u, time.perf_counter() - t0)
        cols = None
        if m.params["vocabulary"] == "labeled":
            seen = np.flatnonzero(stats_l["vocab"] > 0)
            if seen.size < m.n_features:
                cols = seen
                stats_l = {k: (v[..., cols] if k in ("word", "vocab") else v) for k, v in stats_l.items()}
        drv = _Driver(spark, df, m, cols, depth, progress)
        drv.examples = n_l + n_u
        if isinstance(m, TDNB):
            params, stats, hist = _run_levels(drv, stats_l, n_u)
        else:
            params, stats, hist = _run_flat(drv, stats_l, n_u > 0)
    finally:
        df.unpersist()
    if cols is not None:
        params, stats = _expand_columns(params, stats, cols, m.n_features)
    m.params_ = params
    m.history_ = hist
    m.n_iter_ = max(len(hist) - 1, 0)
    m.em_log_ = drv.log
    m.state_ = ModelState(
        {k: v for k, v in stats.items() if k != "loglik"},
        {"loglik": hist[-1] if hist else 0.0, "iterations": float(m.n_iter_)},
        "sum",
    )
    log.info("%s: %d EM iterations in %.2f s", m.name, m.n_iter_, time.perf_counter() - t0)
    return model
