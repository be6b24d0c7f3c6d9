"""The MDC models trained in the driver (``train.execution``, :func:`sparkhc.spark.mdc.fit_mdc_driver`):
the Spark path's model bit for bit (W, b, C, every history record) on the real Edm rows and on a
bench-like sparse slice (DCD with shared rows), whatever the number of threads; ``fit_model``
and ``sparkhc train`` choose it under ``auto`` without starting a session."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import scipy.sparse as sp

from sparkhc.batch import SparseBatch
from sparkhc.config import TrainConfig
from sparkhc.models import make_model
from sparkhc.models.jia_zhang.data import FeatureScaler, load_mdc
from sparkhc.models.jia_zhang.solver import SerialPairSolver, ThreadPairSolver
from sparkhc.spark import mdc
from sparkhc.spark.session import DeferredSession
from sparkhc.spark.training import fit_model
from sparkhc.taxonomy import Taxonomy
from tests.conftest import corpus_dir

ROOT = Path(__file__).resolve().parents[2]


def _bench():
    spec = importlib.util.spec_from_file_location("bench_mdc", ROOT / "benchmarks" / "bench_mdc.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def _taxonomy(n_classes):
    edges = []
    for j, k in enumerate(n_classes):
        edges.append(("ROOT", f"v{j}"))
        edges += [(f"v{j}", f"v{j}/{c}") for c in range(k)]
    return Taxonomy.from_edges(edges, root="ROOT")


def _rows(X, Y, ids):
    """The training rows as the driver reads them (float32 CSR) and as Spark reads them (Parquet)."""
    X = sp.csr_matrix(X, dtype=np.float32)
    labels = [[f"v{j}/{c}" for j, c in enumerate(row)] for row in Y.tolist()]
    return SparseBatch(X, np.asarray(ids), labels), labels


def _frame(spark, tmp_path, batch):
    X = batch.X
    offsets = pa.array(X.indptr.astype(np.int32))
    table = pa.table({
        "doc_id": pa.array(list(batch.doc_ids)),
        "labels": pa.array(batch.labels, type=pa.list_(pa.string())),
        "indices": pa.ListArray.from_arrays(offsets, pa.array(X.indices.astype(np.int32))),
        "values": pa.ListArray.from_arrays(offsets, pa.array(X.data.astype(np.float32))),
    })
    tmp_path.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, tmp_path / "part-0.parquet", row_group_size=max(1, len(batch) // 3))
    return spark.read.parquet(str(tmp_path)).repartition(3)


def _same(a, b):
    """Bit for bit: the state arrays and every history record (objectives, gaps, sweeps)."""
    sa, sb = a.get_state().arrays, b.get_state().arrays
    assert sorted(sa) == sorted(sb)
    for k in sa:
        np.testing.assert_array_equal(sa[k], sb[k], err_msg=k)
    ha = [{k: v for k, v in h.items() if k != "seconds"} for h in a.history_]
    hb = [{k: v for k, v in h.items() if k != "seconds"} for h in b.history_]
    assert ha == hb


def _edm():
    ds = load_mdc(corpus_dir("mdc"), "edm")
    X = FeatureScaler(ds.features).fit(ds).transform(ds)
    return np.asarray(X, dtype=np.float32).astype(np.float64), ds.Y, ds.n_classes


def _slice():
    bench = _bench()
    X, Y = bench.make_mdc(900, 600, 20, seed=5)
    return X, Y, list(bench.N_CLASSES)


@pytest.mark.parametrize("data,model,params", [
    ("edm", "m3mdc", {}),  # auto: SMO on 154 rows, a Gram matrix per block
    ("edm", "m3mdc", {"w_solver": "dcd"}),
    ("slice", "m3mdc", {"w_solver": "dcd", "max_iter": 4}),  # the blocks share the group's rows
    ("slice", "mdc_br", {"w_solver": "dcd"}),
])
def test_driver_equals_spark_bit_for_bit(spark, tmp_path, data, model, params):
    X, Y, n_classes = _edm() if data == "edm" else _slice()
    batch, _ = _rows(X, Y, [f"d{i:05d}" for i in range(X.shape[0])])
    tax = _taxonomy(n_classes)
    d = X.shape[1]
    on_spark = make_model(model, tax, d, **params)
    res = mdc.fit_mdc_spark(spark, _frame(spark, tmp_path / "pq", batch), on_spark)
    assert res["execution"] == "spark" and res["spark_jobs"] > 0
    # the rows in another order: the blocks are sorted by doc id wherever they are built
    perm = np.random.default_rng(0).permutation(len(batch))
    for threads in (1, 2):
        drv = make_model(model, tax, d, **params)
        info = mdc.fit_mdc_driver(batch.subset(perm), drv, threads=threads,
                                  num_slices=2 * spark.sparkContext.defaultParallelism)
        assert info["execution"] == "driver" and info["threads"] == threads and info["rounds"] > 0
        _same(drv, on_spark)
    # the default groups of a 2-thread driver (4) need not be Spark's: the same model all the same
    drv = make_model(model, tax, d, **params)
    mdc.fit_mdc_driver(batch, drv, threads=2)
    _same(drv, on_spark)


def test_thread_solver_equals_serial_on_in_memory_rows():
    from sparkhc.models.jia_zhang.solver import M3MDC

    X, Y, n_classes = _slice()
    X = sp.csr_matrix(X, dtype=np.float64)
    ref = M3MDC(max_iter=3, w_solver="dcd", solver=SerialPairSolver()).fit(X, Y, n_classes)
    for threads in (1, 2, 3):
        got = M3MDC(max_iter=3, w_solver="dcd", solver=ThreadPairSolver(threads)).fit(X, Y, n_classes)
        for k in ("W_", "b_", "C_"):
            np.testing.assert_array_equal(getattr(got, k), getattr(ref, k))
        assert got.history_[-1]["objective_after_c"] == ref.history_[-1]["objective_after_c"]
        for a, b in zip(got.alpha_, ref.alpha_, strict=True):
            np.testing.assert_array_equal(a, b)


def _never():
    raise AssertionError("the Spark session was started")


def test_fit_model_auto_trains_mdc_in_the_driver_without_a_session(spark, tmp_path):
    X, Y, n_classes = _slice()
    batch, _ = _rows(X, Y, [f"d{i:05d}" for i in range(X.shape[0])])
    tax = _taxonomy(n_classes)
    df = _frame(spark, tmp_path / "pq", batch)
    params = {"w_solver": "dcd", "max_iter": 3}
    d = DeferredSession(_never, "local[2]")
    drv = make_model("m3mdc", tax, X.shape[1], **params)
    res = fit_model(d, None, drv, TrainConfig(model="m3mdc"), rows=batch)
    assert not d.started and res.strategy == "batch" and len(res.epoch_log) == len(drv.history_)
    assert res.plan is not None and (res.plan.place, res.plan.engine) == ("driver", None)
    spk = make_model("m3mdc", tax, X.shape[1], **params)
    res_s = fit_model(spark, df, spk, TrainConfig(model="m3mdc"))
    _same(drv, spk)
    strip = [{k: v for k, v in r.items() if k != "seconds"} for r in res.epoch_log]
    assert strip == [{k: v for k, v in r.items() if k != "seconds"} for r in res_s.epoch_log]
