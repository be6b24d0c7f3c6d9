"""The spark-submit jobs (jobs/*.py) under ``spark-submit --master local[2]``.

Fast: each job's flags are the CLI verb's; a user error exits with status 2 through spark-submit.
Slow: featurize -> train -> predict -> evaluate on a tiny corpus, with this Python and with a
clean virtual environment (no system site-packages) that has only the project's wheel and its
dependencies, installed offline from the wheelhouse (scripts/build_wheelhouse.sh)::

    python -m pytest -m slow tests/jobs/test_spark_submit.py
"""

from __future__ import annotations

import json
import re
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
    ROOT,
    build_wheelhouse,
    job_env,
    last_json,
    make_venv,
    spark_submit,
)

JOB_FLAGS = {
    "featurize": ["--input", "--taxonomy", "--corpus", "--unknown-labels", "--on-empty", "--on-invalid",
                  "--allow-unlabelled", "--fit-exclude-fold", "--like", "--out"],
    "train": ["--features", "--out", "--model", "--checkpoint-dir", "--exclude-fold"],
    "predict": ["--model", "--features", "--input", "--out", "--split", "--fold", "--on-invalid", "--top", "--explain"],
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
    for flag in ("--input", "--out", "--models", "--model", "--on-invalid", "--summary-json", "--top", "--explain"):
        assert flag in out, f"reclassify: {flag} missing from --help"


def test_user_error_exits_2_under_spark_submit(tmp_path):
    proc = spark_submit("train", ["--features", tmp_path / "none", "--out", tmp_path / "model",
                                  "--set", "train.no_such_key=1"], tmp_path / "logs", expect=2)
    # spark-submit passes the Python driver's stderr on to its stdout; the error line goes to its
    # stderr all the same (printed by its JVM), where a scheduler looks for it
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("sparkhc: error:")]
    assert len(errors) == 1 and "no_such_key" in errors[0], proc.stderr
    assert "sparkhc: error:" not in proc.stdout, proc.stdout


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

    out = spark_submit("predict", ["--model", model, "--features", feats, "--out", pred, "--explain", "2", *conf], logs,
                       python=python)
    assert last_json(out.stdout)["documents"] == N_DOCS - N_TRAIN
    rows = pq.read_table(pred / "data")
    assert rows.num_rows == N_DOCS - N_TRAIN
    assert all(len(p) >= 1 for p in rows.column("pred_labels").to_pylist())
    for labels, scores, expl in zip(*(rows.column(c).to_pylist() for c in ("pred_labels", "pred_scores",
                                                                          "explanations")), strict=True):
        assert [e["label"] for e in expl] == labels and all(len(e["features"]) <= 2 for e in expl)
        assert [e["score"] for e in expl] == pytest.approx(scores, abs=1e-5)

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


# ------------------------------------------------------------------ the documented train route
def documented_commands(job: str) -> list[tuple[str, list[str]]]:
    """The ``spark-submit ... jobs/JOB.py ...`` commands of the README and docs/deployment.md
    (shell blocks, continuation lines joined), as (page, argv)."""
    import shlex

    found = []
    for page in ("README.md", "docs/deployment.md"):
        text = (ROOT / page).read_text(encoding="utf-8")
        for block in re.findall(r"```bash\n(.*?)```", text, re.S):
            for cmd in block.replace("\\\n", " ").splitlines():
                argv = shlex.split(cmd, comments=True)
                if argv[:1] == ["spark-submit"] and f"jobs/{job}.py" in argv:
                    found.append((page, argv))
    return found


def _values(argv: list[str], flag: str) -> list[str]:
    return [argv[i + 1] for i, a in enumerate(argv) if a == flag]


def test_documented_train_route_is_the_cli_defaults():
    """The README's and the deployment guide's spark-submit train commands train the model
    `sparkhc train` trains: no model file (its settings are the defaults'); in local mode no
    other setting either, and a properties file whose task slots are the CLI's (local[*], no
    spark.default.parallelism: train.shards = 0 means the task slots)."""
    from sparkhc.config import load_config

    defaults = load_config().to_dict()
    commands = documented_commands("train")
    assert len(commands) >= 4, commands  # README: local and cluster; deployment: local, zip, archives
    local = 0
    for page, argv in commands:
        configs = _values(argv, "--config")
        assert not any(c.startswith("conf/models/") for c in configs), (page, argv)
        cfg = load_config([ROOT / c for c in configs], _values(argv, "--set")).to_dict()
        assert cfg["model"] == defaults["model"] and cfg["train"]["model"] == defaults["train"]["model"], (page, argv)
        props_file = _values(argv, "--properties-file")
        if props_file == ["conf/spark-defaults.local.conf"]:
            local += 1
            assert cfg == defaults, (page, argv)  # every setting: C = "auto", epochs = 0, shards = 0, ...
            lines = (ROOT / props_file[0]).read_text().splitlines()
            props = dict(line.split(None, 1) for line in lines if line.strip() and not line.startswith("#"))
            assert props["spark.master"] == "local[*]"  # the CLI's master (sparkhc.spark.session)
            assert "spark.default.parallelism" not in props
            assert "--master" not in argv
    assert local == 2  # README and docs/deployment.md
    assert (defaults["train"]["epochs"], defaults["train"]["shards"], defaults["model"]["global"]["C"]) == \
        (0, 0, "auto")  # what the route therefore trains (sparkhc/conf/defaults.toml)


def _settings(model: Path) -> dict[str, object]:
    meta = json.loads((model / "metadata.json").read_text())
    t = meta["training"]
    return {"model": meta["model"], "params": meta["params"], "epochs": t["epochs"], "shards": t["shards"],
            "epoch_selection": t["epoch_selection"], "calibration": t["calibration"], "seed": t["seed"]}


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_documented_train_route_trains_the_model_sparkhc_train_trains(tiny_corpus, tmp_path):
    """The README's spark-submit train command and `sparkhc train` (no --config, its own local[*]
    session) on the same features: the same settings and the same weights."""
    docs, taxonomy = tiny_corpus
    feats = tmp_path / "features"
    logs = tmp_path / "logs"
    spark_submit("featurize", ["--input", docs, "--taxonomy", taxonomy, "--out", feats], logs)
    (page, argv), = [c for c in documented_commands("train") if c[0] == "README.md" and
                     "conf/spark-defaults.local.conf" in c[1]]
    args = argv[argv.index("jobs/train.py") + 1:]
    args[args.index("--features") + 1] = str(feats)
    args[args.index("--out") + 1] = str(tmp_path / "submitted")
    spark_submit("train", args, logs, master="local[*]")
    env = {k: v for k, v in job_env().items() if k != "SPARKHC_MASTER"}
    env["PYTHONPATH"] = str(ROOT)  # the package the jobs import (tests.jobs.conftest.spark_submit)
    cli = subprocess.run([sys.executable, "-m", "sparkhc.cli", "train", "--features", str(feats), "--out",
                          str(tmp_path / "cli")], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert cli.returncode == 0, cli.stderr[-3000:]
    submitted, cli = _settings(tmp_path / "submitted"), _settings(tmp_path / "cli")
    assert submitted == cli
    assert cli["params"]["C"] in (0.1, 0.3, 1.0) and cli["epoch_selection"] is not None  # chosen on validation
    assert (tmp_path / "submitted" / "state.npz").read_bytes() == (tmp_path / "cli" / "state.npz").read_bytes()
