"""The spark-submit jobs (jobs/*.py) under ``spark-submit --master local[2]``.

Fast: each job's flags are the CLI verb's; a user error exits with status 2 through spark-submit.
Slow: featurize -> train -> predict -> evaluate on a tiny corpus, with this Python and with a
clean virtual environment (no system site-packages) that has only the project's wheel and its
dependencies, installed offline from the wheelhouse (scripts/build_wheelhouse.sh)::

    python -m pytest -m slow tests/jobs/test_spark_submit.py
"""

from __future__ import annotations

import json
import runpy
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.jobs.conftest import (
    CONF_DIR,
    JOBS_DIR,
    N_DOCS,
    N_TRAIN,
    build_wheelhouse,
    last_json,
    make_venv,
    spark_submit,
)

JOB_FLAGS = {
    "featurize": ["--input", "--taxonomy", "--corpus", "--unknown-labels", "--on-empty", "--on-invalid",
                  "--allow-unlabelled", "--fit-exclude-fold", "--out"],
    "train": ["--features", "--out", "--model", "--checkpoint-dir", "--exclude-fold"],
    "predict": ["--model", "--features", "--out", "--split", "--fold"],
    "evaluate": ["--predictions", "--features", "--out"],
}


@pytest.mark.parametrize("job", sorted(JOB_FLAGS))
def test_job_takes_the_cli_flags(job, capsys, monkeypatch):
    monkeypatch.setattr(sys, "argv", [str(JOBS_DIR / f"{job}.py"), "--help"])
    with pytest.raises(SystemExit) as e:
        runpy.run_path(str(JOBS_DIR / f"{job}.py"), run_name="__main__")
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: sparkhc {job}")
    for flag in [*JOB_FLAGS[job], "--config", "--set"]:
        assert flag in out, f"{job}: {flag} missing from --help"


def test_reclassify_job_flags(capsys, monkeypatch):
    monkeypatch.setattr(sys, "argv", [str(JOBS_DIR / "reclassify.py"), "--help"])
    with pytest.raises(SystemExit) as e:
        runpy.run_path(str(JOBS_DIR / "reclassify.py"), run_name="__main__")
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: sparkhc reclassify")
    for flag in ("--input", "--out", "--models", "--model", "--on-invalid", "--summary-json"):
        assert flag in out, f"reclassify: {flag} missing from --help"


def test_user_error_exits_2_under_spark_submit(tmp_path):
    proc = spark_submit("train", ["--features", tmp_path / "none", "--out", tmp_path / "model",
                                  "--set", "train.no_such_key=1"], tmp_path / "logs", expect=2)
    # spark-submit passes the Python driver's stderr on to its stdout
    assert "sparkhc: error:" in proc.stdout and "no_such_key" in proc.stdout, proc.stdout


def run_chain(python: str | Path, docs: Path, taxonomy: Path, work: Path) -> dict[str, object]:
    """featurize -> train -> predict -> evaluate through spark-submit; check every output."""
    logs = work / "logs"
    feats, model, pred = work / "features", work / "model", work / "pred"
    conf = ["--config", str(CONF_DIR / "models" / "global-bf-ca.toml"), "--config", str(CONF_DIR / "local.toml"),
            "--set", "train.epochs=2"]

    out = spark_submit("featurize", ["--input", docs, "--taxonomy", taxonomy, "--out", feats, *conf], logs,
                       python=python)
    summary = last_json(out.stdout)
    assert summary["read_report"]["read"] == N_DOCS
    assert pq.read_table(feats / "features").num_rows == N_DOCS
    assert (feats / "taxonomy.tsv").is_file() and (feats / "feature_spec.json").is_file()

    out = spark_submit("train", ["--features", feats, "--out", model, *conf], logs, python=python)
    info = last_json(out.stdout)
    assert info["name"] == "global" and info["documents"] == N_TRAIN
    assert {"metadata.json", "state.npz", "taxonomy.tsv"} <= {p.name for p in model.iterdir()}
    meta = json.loads((model / "metadata.json").read_text())
    assert meta["model"] == "global" and meta["params"]["branching"] is True
    assert meta["training"]["epochs"] == 2 and meta["training"]["shards"] == 2

    out = spark_submit("predict", ["--model", model, "--features", feats, "--out", pred, *conf], logs,
                       python=python)
    assert last_json(out.stdout)["documents"] == N_DOCS - N_TRAIN
    rows = pq.read_table(pred / "data")
    assert rows.num_rows == N_DOCS - N_TRAIN
    assert all(len(p) >= 1 for p in rows.column("pred_labels").to_pylist())

    out = spark_submit("evaluate", ["--predictions", pred], logs, python=python)
    result = json.loads((pred / "metrics.json").read_text())
    assert {"metrics", "model", "model_version", "predictions", "selection"} <= set(result)
    metrics = result["metrics"]
    assert {"hF", "hP", "hR", "EBF", "LBMiF", "LBMaF", "n_docs"} <= set(metrics), sorted(metrics)
    assert metrics["n_docs"] == N_DOCS - N_TRAIN
    # two cue words per label: even two epochs learn this corpus
    assert metrics["hF"] > 0.8, metrics
    assert "hF" in out.stdout
    return {"metrics": metrics, "state": (model / "state.npz").read_bytes()}


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_jobs_chain_local(tiny_corpus, tmp_path):
    run_chain(sys.executable, *tiny_corpus, tmp_path)


@pytest.mark.slow
@pytest.mark.timeout(3000)
def test_jobs_chain_from_a_clean_venv(tiny_corpus, tmp_path):
    wheelhouse = build_wheelhouse()
    python = make_venv(tmp_path / "venv", ["sparkhc"], wheelhouse)
    # the package comes from the installed wheel, not from this work tree
    where = subprocess.run([str(python), "-c", "import sparkhc; print(sparkhc.__file__)"],
                           check=True, capture_output=True, text=True, cwd=tmp_path).stdout
    assert where.startswith(str(tmp_path / "venv")), where
    here = run_chain(python, *tiny_corpus, tmp_path / "run")
    assert here["metrics"]["n_docs"] == N_DOCS - N_TRAIN
