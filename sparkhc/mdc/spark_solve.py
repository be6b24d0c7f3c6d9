"""Spark parallel solve of M3MDC's pairwise sub-problems (the only pyspark user in ``sparkhc.mdc``).

Within one majorize–minimize sweep of the W step (see ``sparkhc.mdc.m3mdc``) the ``m`` pairwise
sub-problems are independent given ``C`` and the current ``W``: :class:`SparkPairSolver` broadcasts
the training data once per fit and runs each sweep as
``sparkContext.parallelize(tasks).map(solve_pair_task)``. The worker runs the same numpy code as
:class:`~sparkhc.mdc.m3mdc.SerialPairSolver` on the same inputs, so the fitted model equals the
serial one.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

from pyspark import Broadcast
from pyspark.sql import SparkSession

from sparkhc.mdc.m3mdc import PairData, PairResult, PairTask, solve_pair_task


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
