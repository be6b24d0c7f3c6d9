"""A real Spark standalone cluster on one machine: a master and two one-core workers on
127.0.0.1, started with pip-installed pyspark's ``bin/spark-class``; featurize -> train (IPM over
two shards, one per worker) -> predict through ``spark-submit --master spark://127.0.0.1:PORT``
with the package shipped as the README says (``--py-files dist/sparkhc-pyfiles.zip`` built by
``scripts/build_pyfiles.py``), compared with the same jobs under ``local[2]``.

The driver and the executors run a virtual environment that has numpy, scipy, pyarrow and
pandas but not sparkhc: the package can only come from the zip. Run it with::

    python -m pytest -m slow tests/jobs/test_standalone_cluster.py
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.jobs.conftest import (
    CONF_DIR,
    N_DOCS,
    N_TRAIN,
    ROOT,
    StandaloneCluster,
    apps_by_name,
    build_wheelhouse,
    job_env,
    last_json,
    make_venv,
    spark_home,
    spark_submit,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]

DEPS = ["numpy", "scipy", "pyarrow", "pandas"]


def run_jobs(master: str, python: Path, pyfiles: Path, docs: Path, taxonomy: Path, work: Path) -> dict:
    """featurize -> train -> predict as a cluster user runs them (docs/deployment.md): Spark
    from this environment's pyspark, the driver and the executors in ``python`` (no sparkhc)."""
    home = spark_home()
    submit_flags = ["--py-files", str(pyfiles), "--conf", f"spark.pyspark.python={python}"]
    conf = ["--config", str(CONF_DIR / "models" / "global-bf-ca.toml"), "--config", str(CONF_DIR / "cluster.toml"),
            "--set", "train.epochs=3", "--set", "train.shards=2", "--set", "featurize.partitions=2",
            "--set", "predict.partitions=2"]
    logs = work / "logs"

    def submit(job: str, args: list[str | Path]) -> subprocess.CompletedProcess[str]:
        return spark_submit(job, [*args, *conf], logs, master=master, python=python, submit_flags=submit_flags,
                            properties=CONF_DIR / "spark-defaults.cluster.conf", home=home)

    feats, model, pred = work / "features", work / "model", work / "pred"
    out = submit("featurize", ["--input", docs, "--taxonomy", taxonomy, "--out", feats])
    assert last_json(out.stdout)["read_report"]["read"] == N_DOCS
    out = submit("train", ["--features", feats, "--out", model])
    assert last_json(out.stdout)["documents"] == N_TRAIN
    out = submit("predict", ["--model", model, "--features", feats, "--out", pred])
    assert last_json(out.stdout)["documents"] == N_DOCS - N_TRAIN
    rows = pq.read_table(pred / "data").to_pylist()
    return {
        "features": {p.name: pq.read_table(p) for p in sorted((feats / "features").glob("*.parquet"))},
        "state": (model / "state.npz").read_bytes(),
        "predictions": {r["doc_id"]: sorted(r["pred_labels"]) for r in rows},
        "logs": logs,
    }


def test_standalone_cluster_equals_local(tiny_corpus, tmp_path):
    docs, taxonomy = tiny_corpus
    wheelhouse = build_wheelhouse()
    python = make_venv(tmp_path / "venv", DEPS, wheelhouse)
    check = subprocess.run([str(python), "-c", "import sparkhc"], capture_output=True, cwd=tmp_path,
                           env=job_env(python, spark_home()))  # without PYTHONPATH, as the jobs run
    assert check.returncode != 0, "the cluster's Python must not have sparkhc installed"
    pyfiles = tmp_path / "sparkhc-pyfiles.zip"
    subprocess.run([sys.executable, str(ROOT / "scripts" / "build_pyfiles.py"), "--out", str(pyfiles)], check=True)

    t0 = time.perf_counter()
    local = run_jobs("local[2]", python, pyfiles, docs, taxonomy, tmp_path / "local")
    t_local = time.perf_counter() - t0

    cluster = StandaloneCluster(spark_home(), python, tmp_path / "cluster")
    try:
        t0 = time.perf_counter()
        cluster.start()
        t_start = time.perf_counter() - t0
        t0 = time.perf_counter()
        remote = run_jobs(cluster.url, python, pyfiles, docs, taxonomy, tmp_path / "remote")
        t_cluster = time.perf_counter() - t0
        state = cluster.state() or {}
    finally:
        cluster.stop()
    print(f"local[2] jobs {t_local:.0f} s; cluster start {t_start:.0f} s, cluster jobs {t_cluster:.0f} s")
    assert all(p.poll() is not None for p in cluster.procs)

    # each job ran as an application of this cluster, and IPM trained on both workers
    apps = apps_by_name(state)
    assert {"sparkhc-featurize", "sparkhc-train", "sparkhc-predict"} <= set(apps), apps
    (train_app,) = apps["sparkhc-train"]
    for wdir in cluster.worker_dirs:
        stderr = "".join(p.read_text(errors="replace") for p in wdir.glob(f"{train_app}/*/stderr"))
        print(f"{wdir.name}: {stderr.count('Running task')} tasks of {train_app}")
        assert "Running task" in stderr, f"{wdir}: no training task ran on this worker"
    # the executors fetched the zip: the package was shipped, not found installed
    assert list(cluster.worker_dirs[0].glob(f"{train_app}/*/sparkhc-pyfiles.zip"))

    assert remote["predictions"] == local["predictions"]
    assert len(local["predictions"]) == N_DOCS - N_TRAIN
    assert remote["state"] == local["state"], "model state.npz differs between the cluster and local[2]"
    # Same part files with the same rows in the same order. Not the same bytes: parquet-mr lists
    # each column chunk's encodings in a JVM-dependent order (a Java HashSet of enums), so two JVMs
    # write footers that differ in that order only (two local runs differ the same way).
    assert list(remote["features"]) == list(local["features"])
    for name, table in local["features"].items():
        assert remote["features"][name].equals(table, check_metadata=True), f"features {name} differs"
