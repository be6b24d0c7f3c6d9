"""The Spark parallel solve of M3MDC's pairwise sub-problems equals the serial one."""

from __future__ import annotations

import numpy as np

from sparkhc.models.jia_zhang.solver import M3MDC, BinaryRelevanceSVM
from sparkhc.spark.mdc import SparkPairSolver


def _data():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(40, 6))
    s = X @ rng.normal(size=6)
    Y = np.column_stack([np.digitize(s + 0.5 * rng.normal(size=40), [-0.5, 0.5]), (X[:, 0] + 0.3 * s > 0)])
    return X, Y.astype(np.int64)


def test_spark_pair_solver_equals_serial(spark):
    X, Y = _data()
    serial = M3MDC(max_iter=2, tol=0.0).fit(X, Y)
    parallel = M3MDC(max_iter=2, tol=0.0, solver=SparkPairSolver(spark)).fit(X, Y)
    np.testing.assert_allclose(parallel.W_, serial.W_, rtol=0, atol=1e-12)
    np.testing.assert_allclose(parallel.b_, serial.b_, rtol=0, atol=1e-12)
    np.testing.assert_allclose(parallel.C_, serial.C_, rtol=0, atol=1e-12)
    assert [h["inner_sweeps"] for h in parallel.history_] == [h["inner_sweeps"] for h in serial.history_]
    for a, b in zip(parallel.history_, serial.history_, strict=True):
        assert abs(a["objective_after_c"] - b["objective_after_c"]) <= 1e-12 * abs(b["objective_after_c"])
    np.testing.assert_array_equal(parallel.predict(X), serial.predict(X))

    br_serial = BinaryRelevanceSVM().fit(X, Y)
    br_parallel = BinaryRelevanceSVM(solver=SparkPairSolver(spark, num_slices=2)).fit(X, Y)
    np.testing.assert_allclose(br_parallel.W_, br_serial.W_, rtol=0, atol=1e-12)
    np.testing.assert_allclose(br_parallel.b_, br_serial.b_, rtol=0, atol=1e-12)
