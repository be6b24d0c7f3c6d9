"""M3MDC's pair blocks on Spark: the same model as the serial solver, from in-memory rows and from
a DataFrame whose rows are never collected on the driver."""

from __future__ import annotations

import pickle

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import scipy.sparse as sp
from pyspark import RDD

from sparkhc.batch import SparseBatch
from sparkhc.models import make_model
from sparkhc.models.jia_zhang.solver import M3MDC, BinaryRelevanceSVM, PairBlock
from sparkhc.spark.mdc import SparkPairSolver, balanced_groups, fit_mdc_spark
from sparkhc.taxonomy import Taxonomy


def _data():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(40, 6))
    s = X @ rng.normal(size=6)
    Y = np.column_stack([np.digitize(s + 0.5 * rng.normal(size=40), [-0.5, 0.5]), (X[:, 0] + 0.3 * s > 0)])
    return X, Y.astype(np.int64)


@pytest.mark.parametrize("w_solver", ["dcd", "smo"])
def test_spark_pair_solver_equals_serial(spark, w_solver):
    X, Y = _data()
    serial = M3MDC(max_iter=2, tol=0.0, w_solver=w_solver).fit(X, Y)
    solver = SparkPairSolver(spark)
    parallel = M3MDC(max_iter=2, tol=0.0, w_solver=w_solver, solver=solver).fit(X, Y)
    np.testing.assert_allclose(parallel.W_, serial.W_, rtol=0, atol=1e-12)
    np.testing.assert_allclose(parallel.b_, serial.b_, rtol=0, atol=1e-12)
    np.testing.assert_allclose(parallel.C_, serial.C_, rtol=0, atol=1e-12)
    assert [h["inner_sweeps"] for h in parallel.history_] == [h["inner_sweeps"] for h in serial.history_]
    for a, b in zip(parallel.history_, serial.history_, strict=True):
        assert abs(a["objective_after_c"] - b["objective_after_c"]) <= 1e-12 * abs(b["objective_after_c"])
    np.testing.assert_array_equal(parallel.predict(X), serial.predict(X))
    # the multipliers came back from the blocks (in-memory fit), pair by pair
    for a, b in zip(parallel.alpha_, serial.alpha_, strict=True):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-12)

    br_serial = BinaryRelevanceSVM(w_solver=w_solver).fit(X, Y)
    br_parallel = BinaryRelevanceSVM(w_solver=w_solver, solver=SparkPairSolver(spark, num_slices=2)).fit(X, Y)
    np.testing.assert_allclose(br_parallel.W_, br_serial.W_, rtol=0, atol=1e-12)
    np.testing.assert_allclose(br_parallel.b_, br_serial.b_, rtol=0, atol=1e-12)


def test_balanced_groups_by_hand():
    # LPT: 9 -> g0, 7 -> g1, 5 -> g1 (7 < 9), 4 -> g0 (9 < 12), 1 -> g0 (13 vs 12: g1) ...
    # sizes 9, 7, 5, 4, 1 -> g0 = {9, 4} (13), g1 = {7, 5, 1} (13): heaviest first, ties by index
    assert balanced_groups([4, 9, 1, 7, 5], 2) == [[0, 1], [2, 3, 4]]
    assert balanced_groups([3, 3, 3], 5) == [[0], [1], [2]]
    assert balanced_groups([], 4) == []


def _frame(spark, tmp_path, X, Y, ids):
    """The features layout's training columns (doc_id, labels, indices, values)."""
    X = sp.csr_matrix(X)
    labels = [[f"v{j}/{c}" for j, c in enumerate(row)] for row in Y.tolist()]
    offsets = pa.array(X.indptr.astype(np.int32))
    table = pa.table({
        "doc_id": pa.array(ids),
        "labels": pa.array(labels, type=pa.list_(pa.string())),
        "indices": pa.ListArray.from_arrays(offsets, pa.array(X.indices.astype(np.int32))),
        "values": pa.ListArray.from_arrays(offsets, pa.array(X.data.astype(np.float32))),
    })
    pq.write_table(table, tmp_path / "part-0.parquet", row_group_size=100)
    return spark.read.parquet(str(tmp_path)).repartition(3), labels


@pytest.mark.parametrize("w_solver", ["auto", "dcd"])  # auto: SMO on 600 rows; dcd: the blocks share rows
def test_fit_from_a_dataframe_never_collects_the_rows(spark, monkeypatch, tmp_path, w_solver):
    """fit_mdc_spark equals the in-memory fit of the same rows, and nothing the driver collects
    holds rows: every collected result is a small report (no SparseBatch, no PairBlock), far
    smaller than the training matrix."""
    rng = np.random.default_rng(7)
    n, d = 600, 40
    X = sp.random(n, d, density=0.2, random_state=1, format="csr", dtype=np.float64)
    X.data = np.round(X.data, 3).astype(np.float32).astype(np.float64)  # float32 round trip
    Z = np.asarray(X @ rng.normal(size=(d, 2)))
    Y = np.column_stack([np.digitize(Z[:, 0], np.quantile(Z[:, 0], [1 / 3, 2 / 3])), Z[:, 1] > 0]).astype(np.int64)
    ids = [f"d{i:04d}" for i in range(n)]
    df, labels = _frame(spark, tmp_path, X, Y, ids)
    edges = [("ROOT", "v0"), ("ROOT", "v1")] + [("v0", f"v0/{c}") for c in range(3)] + [("v1", f"v1/{c}") for c in range(2)]
    tax = Taxonomy.from_edges(edges, root="ROOT")

    collected: list[int] = []

    def check(result):
        for item in result if isinstance(result, list) else [result]:
            for x in item if isinstance(item, list) else [item]:
                assert not isinstance(x, SparseBatch | PairBlock), f"the driver collected {type(x).__name__}"
        collected.append(len(pickle.dumps(result)))
        return result

    real_collect, real_reduce = RDD.collect, RDD.reduce
    monkeypatch.setattr(RDD, "collect", lambda self: check(real_collect(self)))
    monkeypatch.setattr(RDD, "reduce", lambda self, f: check(real_reduce(self, f)))
    monkeypatch.setattr(RDD, "toLocalIterator", lambda *a, **k: pytest.fail("toLocalIterator on the driver"))
    from sparkhc.spark import mdc

    real_add = mdc._Reports.addInPlace  # the rounds' reports reach the driver through an accumulator
    monkeypatch.setattr(mdc._Reports, "addInPlace", lambda self, a, b: real_add(self, a, check(b)))
    model = make_model("m3mdc", tax, d, max_iter=3, w_solver=w_solver)
    res = fit_mdc_spark(spark, df, model)
    monkeypatch.undo()
    assert res["documents"] == n and res["spark_jobs"] > 0
    x_bytes = X.data.nbytes + X.indices.nbytes
    assert collected and max(collected) < x_bytes / 4, (max(collected), x_bytes)

    ref = make_model("m3mdc", tax, d, max_iter=3, w_solver=w_solver).fit(
        SparseBatch(sp.csr_matrix(X, dtype=np.float32), np.array(ids), labels))
    W, W_ref = model.get_state().arrays["W"], ref.get_state().arrays["W"]
    np.testing.assert_allclose(W, W_ref, rtol=0, atol=1e-10)
    np.testing.assert_allclose(model.get_state().arrays["b"], ref.get_state().arrays["b"], rtol=0, atol=1e-10)
    assert [h["inner_sweeps"] for h in model.history_] == [h["inner_sweeps"] for h in ref.history_]
