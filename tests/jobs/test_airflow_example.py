"""The Airflow example DAG (docs/examples/airflow_reclassify_dag.py) against a real run: its
reclassify command, rendered with Jinja as Airflow renders it, runs ``spark-submit
jobs/reclassify.py`` in local mode on a small collection; the last line of the task's stdout (what
the BashOperator pushes to XCom) is the summary, and ``check_summary`` accepts it. Under
spark-submit the driver's log lines reach stdout before it (issue 16: ``| jq -c .`` on stdout
failed with jq exit 4 even on a successful no-op run). Needs bash, jq and jinja2."""

from __future__ import annotations

import json
import runpy
import shutil
import subprocess
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sparkhc import model_store
from tests.jobs.conftest import CONF_DIR, JOBS_DIR, ROOT, job_env, spark_home
from tests.unit.test_model_store import tiny_docs, train_tiny_model

DAG_FILE = ROOT / "docs" / "examples" / "airflow_reclassify_dag.py"


class _Vars:
    """``var.value`` of Airflow's template context: the Airflow Variables of the DAG."""

    def __init__(self, values: dict[str, str]):
        self.values = values

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.values.get(key, default)


def render(template: str, variables: dict[str, str], all_: bool = False) -> str:
    jinja2 = pytest.importorskip("jinja2")
    return jinja2.Template(template).render(var={"value": _Vars(variables)}, params={"all": all_})


@pytest.mark.slow
def test_airflow_command_against_a_real_spark_submit_run(tmp_path):
    if shutil.which("jq") is None or shutil.which("bash") is None:
        pytest.skip("the example's command needs bash and jq")
    ns = runpy.run_path(str(DAG_FILE))
    coll, out, models = tmp_path / "collection", tmp_path / "reclassified", tmp_path / "models"
    model_store.register(models, train_tiny_model(tmp_path / "model", epochs=2), promote_to_current=True)
    docs = tiny_docs(6, 5, prefix="n")
    (coll / "ingest_date=2024-03-01").mkdir(parents=True)
    pq.write_table(pa.table({"doc_id": [d["doc_id"] for d in docs], "text": [d["text"] for d in docs]}),
                   coll / "ingest_date=2024-03-01" / "part-0.parquet")

    submit = (f"{spark_home() / 'bin' / 'spark-submit'} --master local[1] --properties-file "
              f"{CONF_DIR / 'spark-defaults.local.conf'} --conf spark.ui.enabled=false")
    template = ns["reclassify_command"](spark_submit=submit, job=str(JOBS_DIR / "reclassify.py"))
    cmd = render(template, {"sparkhc_collection": str(coll), "sparkhc_out": str(out), "sparkhc_models": str(models)})
    assert "{{" not in cmd and "--summary-json" in cmd
    env = {**job_env(), "PYTHONPATH": str(ROOT)}  # the job imports this checkout's sparkhc

    stderr: list[str] = []

    def task() -> tuple[int, list[str]]:
        proc = subprocess.run(["bash", "-c", cmd], env=env, capture_output=True, text=True, timeout=900,
                              cwd=tmp_path, stdin=subprocess.DEVNULL)
        (tmp_path / "task.log").write_text(proc.stdout + proc.stderr)
        stderr[:] = proc.stderr.splitlines()
        return proc.returncode, proc.stdout.splitlines()

    code, lines = task()
    assert code == 0, "\n".join(lines[-30:])
    head = ns["check_summary"](lines[-1])  # what XCom would hold
    assert head["documents"] == 6 and head["partitions"] == 1 and head["model"] == "v0001"
    with pytest.raises(json.JSONDecodeError):  # stdout as a whole is not JSON: logs came first
        json.loads("\n".join(lines))
    assert json.loads(lines[-1])["run_id"] in {p.stem for p in (out / "_runs").glob("*.json")}

    # the next scheduled run has nothing to do (no Spark job): still a clean summary, exit 0
    code, lines = task()
    assert code == 0, "\n".join(lines[-30:])
    head = ns["check_summary"](lines[-1])
    assert head["documents"] == 0 and head["partitions"] == 0

    # a user error (no such registry): the task fails with the job's status and pushes no summary
    cmd = render(template, {"sparkhc_collection": str(coll), "sparkhc_out": str(out),
                            "sparkhc_models": str(tmp_path / "nope")})
    code, lines = task()
    assert code == 2
    with pytest.raises(json.JSONDecodeError):
        json.loads(lines[-1] if lines else "")
    # the error line is on the task's stderr, not among the log lines spark-submit relays on stdout
    errors = [ln for ln in stderr if ln.startswith("sparkhc: error: ")]
    assert len(errors) == 1 and "nope" in errors[0], stderr[-20:]
    assert not any("sparkhc: error" in ln for ln in lines), lines[-20:]

    # a partition with a record that always fails: the task succeeds with the summary (XCom) and
    # check_summary fails loudly naming the partition, the file and the line (no retry of the task)
    (coll / "ingest_date=2024-03-02").mkdir()
    (coll / "ingest_date=2024-03-02" / "docs.jsonl").write_text('{"doc_id": "a", "text": "goal"}\n{"doc_id": \n')
    cmd = render(template, {"sparkhc_collection": str(coll), "sparkhc_out": str(out), "sparkhc_models": str(models)})
    code, lines = task()
    assert code == 0, "\n".join(lines[-30:] + stderr[-30:])
    with pytest.raises(RuntimeError, match=r"1 partition\(s\) failed: 2024-03-02: .*docs\.jsonl, line 2: malformed JSON"):
        ns["check_summary"](lines[-1])
    assert not (out / "ingest_date=2024-03-02").exists()


def test_rendered_command_defaults_and_all_flag():
    ns = runpy.run_path(str(DAG_FILE))
    cmd = render(ns["reclassify_command"](), {}, all_=True)
    assert cmd.count("/shared/") == 3 and " --all " in cmd and "--summary-json \"$summary\"" in cmd
    assert Path(ns["JOB"]).name == "reclassify.py" and "| jq" not in cmd


def test_failed_partition_reaches_check_summary_without_a_retry(tmp_path):
    """The rendered command around a job that exits 3 (a partition failed; its summary written, log
    lines on stdout before it): the task succeeds, so Airflow pushes the summary to XCom, and
    check_summary fails naming the partition. A crash (exit 1) or a user error (2) stays the task's
    failure; only the task that ran the job is retried."""
    if shutil.which("jq") is None or shutil.which("bash") is None:
        pytest.skip("the example's command needs bash and jq")
    ns = runpy.run_path(str(DAG_FILE))
    summary = {"run_id": "r1", "output": str(tmp_path / "out"), "documents": 6, "model": {"registry_version": "v1"},
               "partitions": {"classified": ["2024-03-01"], "failed": ["2024-03-02"]},
               "failures": [{"partition": "2024-03-02", "error": "docs.jsonl, line 2: malformed JSON"}]}
    fake = tmp_path / "spark-submit"
    fake.write_text("#!/bin/bash\n"  # what the job does: log lines on stdout, the summary to --summary-json
                    "echo 'INFO some log line'\n"
                    'while [ $# -gt 0 ]; do if [ "$1" = --summary-json ]; then out="$2"; fi; shift; done\n'
                    f"printf '%s' '{json.dumps(summary)}' > \"$out\"\n"
                    'exit "$STATUS"\n')
    fake.chmod(0o755)
    cmd = render(ns["reclassify_command"](spark_submit=str(fake), job="job.py"), {})
    for status, want in ((3, 0), (1, 1), (2, 2), (143, 143), (0, 0)):
        proc = subprocess.run(["bash", "-c", cmd], env={"PATH": "/usr/bin:/bin", "STATUS": str(status)},
                              capture_output=True, text=True, cwd=tmp_path)
        assert proc.returncode == want, (status, proc.stdout, proc.stderr)
        assert json.loads(proc.stdout.splitlines()[-1]) == summary
    with pytest.raises(RuntimeError, match=r"^1 partition\(s\) failed: 2024-03-02: docs\.jsonl, line 2: malformed JSON"):
        ns["check_summary"](proc.stdout.splitlines()[-1])
    from sparkhc.cli.reclassify import EXIT_PARTITIONS_FAILED

    assert ns["PARTITIONS_FAILED"] == EXIT_PARTITIONS_FAILED
