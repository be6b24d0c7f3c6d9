"""Shared fixtures: the data directory and one session-scoped SparkSession."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA_DIR = Path(os.environ.get("SPARKHC_DATA_DIR", ROOT.parent / "shared" / "data"))
FIXTURES_DIR = Path(os.environ.get("SPARKHC_FIXTURES_DIR", ROOT.parent / "shared" / "fixtures"))


def corpus_dir(name: str) -> Path:
    """The staged copy of a real corpus, or skip the test saying where it was looked for."""
    d = DATA_DIR / name
    if not d.is_dir():
        pytest.skip(f"real corpus {name!r} not found at {d} (set SPARKHC_DATA_DIR to ../shared/data)")
    return d


@pytest.fixture(scope="session")
def data_dir() -> Path:
    if not DATA_DIR.is_dir():
        pytest.skip(f"real data directory not found at {DATA_DIR} (set SPARKHC_DATA_DIR)")
    return DATA_DIR


@pytest.fixture(scope="session")
def spark():
    """One SparkSession for the whole test run: local[2], UI off, few shuffle partitions."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from sparkhc.spark.session import get_session

    session = get_session(
        app_name="sparkhc-tests",
        master="local[2]",
        extra_conf={"spark.sql.shuffle.partitions": "4", "spark.ui.enabled": "false"},
    )
    yield session
    session.stop()


@pytest.fixture(scope="session")
def s3_server():
    """A local S3-compatible server (moto's server mode) on 127.0.0.1 at a free port, for the
    whole run: ``{"endpoint": "127.0.0.1:PORT", "uri": callable(bucket, prefix) -> s3:// URI}``.
    Credentials travel in the URI (Spark's Python workers do not see environment variables set
    after they started)."""
    pytest.importorskip("moto.server", reason="moto[server] not installed (the test extra)")
    import socket

    from moto.server import ThreadedMotoServer

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"127.0.0.1:{port}"

    def uri(bucket: str, prefix: str = "") -> str:
        return (f"s3://testing:testing@{bucket}/{prefix}?endpoint_override={endpoint}&scheme=http"
                f"&region=us-east-1")

    def make_bucket(bucket: str) -> None:
        import pyarrow.fs as pafs

        fs = pafs.S3FileSystem(access_key="testing", secret_key="testing", endpoint_override=endpoint,
                               scheme="http", region="us-east-1", allow_bucket_creation=True)
        fs.create_dir(bucket)

    yield {"endpoint": endpoint, "uri": uri, "make_bucket": make_bucket}
    server.stop()


@pytest.fixture()
def small_splits(spark):
    """File splits of 2 KB for one test: a file of a few hundred records (JSON Lines blocks, Parquet
    row groups, LYRL2004 lines) is read by several tasks."""
    key = "spark.sql.files.maxPartitionBytes"
    old = spark.conf.get(key)
    spark.conf.set(key, "2048")
    yield
    spark.conf.set(key, old)


#: Tests that run only with ``-m slow`` (CI stays under 20 minutes): each took 10 s or more in the
#: suite, and a cheaper sibling in CI covers the same code path. Node ids (or their prefix up to a
#: parameter id), relative to ``tests/``; :func:`pytest_collection_modifyitems` checks that each one
#: still names a test.
SLOW_IN_CI = {
    # the same driver-vs-Spark equality on larger data; edm-m3mdc-params0 stays in CI
    "spark/test_mdc_driver.py::test_driver_equals_spark_bit_for_bit[edm-m3mdc-params1]",
    "spark/test_mdc_driver.py::test_driver_equals_spark_bit_for_bit[slice-m3mdc-params2]",
    "spark/test_mdc_driver.py::test_driver_equals_spark_bit_for_bit[slice-mdc_br-params3]",
    "spark/test_mdc_driver.py::test_thread_solver_equals_serial_on_in_memory_rows",
    # the jobs engine (one Spark job an epoch): its equality with barrier mixing stays in CI
    "spark/test_small.py::test_time_budget_ends_the_selection_and_keeps_the_band_model[spark-jobs]",
    "spark/test_ipm.py::test_step_scale_shards_caps_each_shard_by_c_times_shards[global-params0-jobs]",
    "spark/test_ipm.py::test_step_scale_shards_caps_each_shard_by_c_times_shards[tree-params1-jobs]",
    "spark/test_ipm.py::test_select_epochs_stops_after_patience_epochs_without_a_better_score[jobs]",
    "spark/test_ipm.py::test_select_epochs_keeps_the_chosen_epochs_model[True-jobs]",
    "spark/test_ipm.py::test_select_epochs_keeps_the_chosen_epochs_model[False-jobs]",
    "spark/test_ipm.py::test_select_epochs_pools_inner_folds_and_chooses_c[jobs]",
    # M3MDC on Spark: the serial equalities of its other solver and model stay in CI
    "conformance/test_models_spark.py::test_one_partition_on_spark_equals_serial_training[m3mdc]",
    "unit/test_m3mdc_dcd.py::test_adaptive_schedule_on_a_bench_like_slice_matches_a_tight_solve",
    "spark/test_m3mdc_spark.py::test_spark_pair_solver_equals_serial[smo]",
    "spark/test_m3mdc_spark.py::test_fit_from_a_dataframe_never_collects_the_rows[dcd]",
    "spark/test_mdc_text_spark.py::test_auto_trains_mdc_in_the_driver_with_the_spark_paths_weights[m3mdc]",
    # the experiment runners' quick mode: murawaki-curve's stays in CI
    "experiments/test_runners_quick.py::test_li_yamanishi_quick",
    "experiments/test_runners_quick.py::test_cesa_bianchi_quick",
    # LYRL2004 bad blocks: malformed stays in CI
    "spark/test_sources_formats.py::test_lyrl2004_bad_blocks_same_errors_and_counts[empty]",
    "spark/test_sources_formats.py::test_lyrl2004_bad_blocks_same_errors_and_counts[dup]",
    "spark/test_sources_formats.py::test_lyrl2004_bad_blocks_same_errors_and_counts[dup-second-w]",
    "spark/test_sources_formats.py::test_lyrl2004_bad_blocks_same_errors_and_counts[second-w]",
    "spark/test_sources_formats.py::test_lyrl2004_bad_blocks_same_errors_and_counts[no-qrels]",
    "spark/test_sources_formats.py::test_lyrl2004_bad_blocks_same_errors_and_counts[no-w]",
    # the Spark path of these: test_default_epoch_selection_in_the_driver_equals_spark stays in CI
    "spark/test_small.py::test_time_budget_ends_the_selection_and_keeps_the_band_model[spark-barrier]",
    # the other models' one-partition equalities stay in CI
    "conformance/test_models_spark.py::test_one_partition_on_spark_equals_serial_training[ah_bay]",
    # MDC through the pyspark.ml API: test_m3mdc_spark and test_mdc_driver cover the MDC path in CI
    "spark/test_ml_errors.py::test_multi_dimensional_model_and_hamming_score",
    "spark/test_small.py::test_refit_false_ships_the_selections_model[spark]",
    "spark/test_small.py::test_cli_driver_training_never_starts_spark[on]",
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark :data:`SLOW_IN_CI` slow; a listed id that names no collected test fails the run (when
    the whole suite is collected), so the list cannot rot."""
    slow = pytest.mark.slow
    seen: set[str] = set()
    tests_dir = Path(__file__).resolve().parent
    for item in items:
        rel = Path(str(item.path)).resolve().relative_to(tests_dir).as_posix() + "::" + item.name
        if rel in SLOW_IN_CI:
            item.add_marker(slow)
            seen.add(rel)
    whole = not config.args or [Path(a).resolve() for a in config.args] in ([tests_dir], [tests_dir.parent])
    if whole and not config.getoption("keyword") and seen != SLOW_IN_CI:
        raise pytest.UsageError(f"tests/conftest.py SLOW_IN_CI names no test: {sorted(SLOW_IN_CI - seen)}")
