"""``model.global.solver = "dcd"`` through the mixing engines: each shard's working sets are kept
between epochs, one shard is serial training, the barrier and driver engines agree bit for bit, the
duality gap stops both at the same epoch, and the jobs engine refuses in one line."""

from __future__ import annotations

import numpy as np
import pytest

from sparkhc.batch import SparseBatch
from sparkhc.errors import ModelError
from tests.spark.test_ipm import V, _data, _model

DCD = {"branching": True, "update": "cost_augmented", "bias": 0.3, "solver": "dcd", "passes": 2, "C": 0.5}


@pytest.mark.parametrize("engine", ["driver", "barrier"])
def test_one_shard_equals_serial_dcd(spark, engine, tmp_path):
    from sparkhc.spark.mixing.train import train_ipm

    tax, table = _data()
    batch = SparseBatch.from_arrow(table.sort_by("doc_id"), V)
    m = _model(tax, **DCD)
    if engine == "driver":
        got = train_ipm(spark, None, m, epochs=4, shards=1, seed=7, rows=batch)
    else:
        df = spark.createDataFrame(table.to_pandas())
        got = train_ipm(spark, df, m, epochs=4, shards=1, seed=7, mixing="barrier", exchange_dir=tmp_path / "x")
    serial = _model(tax, **DCD)
    for e in range(4):
        serial.partial_fit(batch, seed=7, epoch=e)
    for k, v in serial.get_state().arrays.items():
        np.testing.assert_array_equal(got.get_state().arrays[k], v, err_msg=k)


def test_barrier_equals_driver_and_both_stop_on_the_gap(spark, tmp_path):
    from sparkhc.spark.mixing.engine import RUN_FIGURES
    from sparkhc.spark.mixing.train import train_ipm

    tax, table = _data()
    batch = SparseBatch.from_arrow(table, V)
    df = spark.createDataFrame(table.to_pandas())
    logs: dict[str, list] = {"driver": [], "barrier": []}
    got = {
        "driver": train_ipm(spark, None, _model(tax, **DCD), epochs=40, shards=3, seed=2, rows=batch,
                            step_scale="shards", gap_tol=0.15, progress=logs["driver"].append),
        "barrier": train_ipm(spark, df, _model(tax, **DCD), epochs=40, shards=3, seed=2, mixing="barrier",
                             step_scale="shards", gap_tol=0.15, progress=logs["barrier"].append,
                             exchange_dir=tmp_path / "x"),
    }
    for k, v in got["driver"].get_state().arrays.items():
        np.testing.assert_array_equal(got["barrier"].get_state().arrays[k], v, err_msg=k)
    strip = [[{k: v for k, v in e.items() if k not in RUN_FIGURES} for e in logs[m]] for m in logs]
    assert strip[0] == strip[1]
    gaps = [e["rel_gap"] for e in logs["driver"]]
    assert 2 <= len(gaps) < 40  # stopped by the certificate, not by the epochs
    assert gaps[-1] <= 0.15 < min(gaps[:-1])
    assert gaps[0] == pytest.approx(1.0)  # zero weights and duals: the gap is the whole primal
    assert all(g >= -1e-9 for g in gaps)


def test_jobs_engine_refuses_dcd_in_one_line(spark):
    from sparkhc.spark.mixing.train import train_ipm

    tax, table = _data()
    df = spark.createDataFrame(table.to_pandas())
    with pytest.raises(ModelError, match=r"solver = 'dcd' keeps every shard's duals.*train.mixing = 'barrier'") as e:
        train_ipm(spark, df, _model(tax, **DCD), epochs=2, shards=2, mixing="jobs")
    assert "\n" not in str(e.value)


def test_dcd_never_resumes_a_checkpoint_and_refuses_a_warm_start(spark, tmp_path):
    """The shards' duals are not in the checkpoints: a rerun trains from the start (the same
    weights as a run without checkpoints), and a warm start is refused in one line."""
    from sparkhc.spark.mixing.train import train_ipm

    tax, table = _data()
    batch = SparseBatch.from_arrow(table, V)
    ck = tmp_path / "ck"
    first = train_ipm(spark, None, _model(tax, **DCD), epochs=3, shards=2, seed=1, rows=batch, checkpoint_dir=ck)
    assert any(ck.iterdir())
    again = train_ipm(spark, None, _model(tax, **DCD), epochs=5, shards=2, seed=1, rows=batch, checkpoint_dir=ck)
    fresh = train_ipm(spark, None, _model(tax, **DCD), epochs=5, shards=2, seed=1, rows=batch)
    for k, v in fresh.get_state().arrays.items():
        np.testing.assert_array_equal(again.get_state().arrays[k], v, err_msg=k)
    with pytest.raises(ModelError, match=r"solver = 'dcd' cannot continue from saved weights") as e:
        train_ipm(spark, None, first, epochs=2, shards=2, rows=batch, warm_start=True)
    assert "\n" not in str(e.value)
