"""Airflow DAG: hourly batch reclassification of a date-partitioned collection with sparkhc.

Copy to the Airflow DAGs folder; adjust the settings below (or the Airflow Variables
``sparkhc_collection``, ``sparkhc_out``, ``sparkhc_models``). Tasks:

* ``reclassify``: ``spark-submit jobs/reclassify.py`` on the cluster. Only partitions not yet
  classified by the current model are done, so retries and overlapping schedules are safe
  (``max_active_runs=1`` keeps runs from queuing on the job's lock). Trigger with
  ``--conf '{"all": true}'`` to reclassify every partition after promoting a model.
* ``check_summary``: reads the run summary and fails loudly, naming each failed partition and its
  error, when a partition failed. The job writes the summary to a file (``--summary-json``; under
  spark-submit its stdout also carries log lines, so stdout itself is not JSON); the task prints
  that file as one line with ``jq -c``, the last line of its stdout, which the BashOperator pushes
  to XCom. The job also keeps every summary in ``OUT/_runs/<run_id>.json``.

Exit status of the job: 0 ok; 3 when a partition failed: the run itself went through and wrote its
summary, so the ``reclassify`` task succeeds (Airflow pushes XCom only from a task that succeeds)
and ``check_summary`` fails without retries: a bad record fails again until it is fixed or
quarantined (``--on-invalid quarantine``), and the next scheduled run retries the partition anyway;
2 for a user error (no registry, bad flags) and 1 for a crash: the ``reclassify`` task fails, and
Airflow retries a crash (``RETRIES``); 143 after SIGTERM (Airflow's timeout), once the job has
written the summary of what it did.

With ``apache-airflow-providers-apache-spark`` installed, ``SparkSubmitOperator`` can replace the
``BashOperator`` (``application="/opt/sparkhc/jobs/reclassify.py"``, ``py_files=...``,
``application_args=[...]``).

This file imports Airflow only inside :func:`make_dag`, so it can be imported (and linted) where
Airflow is not installed; ``dag`` is then None.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

SPARK_SUBMIT = (
    "spark-submit --master spark://HOST:7077 --properties-file /opt/sparkhc/conf/spark-defaults.cluster.conf"
    " --py-files /opt/sparkhc/dist/sparkhc-pyfiles.zip"
    " --conf spark.pyspark.python=/opt/sparkhc/venv/bin/python"
)
JOB = "/opt/sparkhc/jobs/reclassify.py"
COLLECTION = "/shared/collection"
OUT = "/shared/reclassified"
MODELS = "/shared/models"
#: the job's exit status when a partition failed (sparkhc.cli.reclassify.EXIT_PARTITIONS_FAILED)
PARTITIONS_FAILED = 3
#: retries of the reclassify task (crashes, exit 1); check_summary is never retried
RETRIES = 2


def reclassify_command(spark_submit: str = SPARK_SUBMIT, job: str = JOB) -> str:
    """The templated shell command of the reclassify task (Jinja is rendered by Airflow).

    The job writes its summary to a temporary file (``--summary-json``); ``jq -c`` prints it as
    one line after the run, so that the last line of stdout, which the BashOperator pushes to
    XCom, is the whole summary whatever spark-submit logged before it. A run with failed
    partitions (the job's status 3) is a success of this task, so that its summary reaches
    ``check_summary``; any other status is the task's (2 a user error, 1 a crash, 143 SIGTERM).
    """
    return (
        'summary="$(mktemp)"; '
        f"{spark_submit} {job}"
        " --input {{ var.value.get('sparkhc_collection', '" + COLLECTION + "') }}"
        " --out {{ var.value.get('sparkhc_out', '" + OUT + "') }}"
        " --models {{ var.value.get('sparkhc_models', '" + MODELS + "') }}"
        " {{ '--all' if params.all else '' }}"  # --conf '{"all": true}' overrides the param
        ' --summary-json "$summary"; status=$?; '
        'if [ -s "$summary" ]; then jq -c . "$summary" || status=$?; fi; '
        f'rm -f "$summary"; if [ $status -eq {PARTITIONS_FAILED} ]; then exit 0; fi; exit $status'
    )


def check_summary(summary_json: str | None = None, **_: Any) -> dict[str, Any]:
    """Fail the task when the run had failed partitions; return the summary's headline."""
    if not summary_json:
        raise RuntimeError("the reclassify task printed no summary")
    summary = json.loads(summary_json)
    failed = summary.get("partitions", {}).get("failed", [])
    if failed:
        errors = "; ".join(f"{f['partition']}: {f['error']}" for f in summary.get("failures", []))
        raise RuntimeError(f"{len(failed)} partition(s) failed: {errors} "
                           f"(summary: {Path(summary['output']) / '_runs' / (summary['run_id'] + '.json')})")
    return {"run_id": summary["run_id"], "partitions": len(summary["partitions"].get("classified", [])),
            "documents": summary.get("documents", 0), "model": summary["model"].get("registry_version")}


def make_dag() -> Any:
    from airflow import DAG
    from airflow.operators.bash import BashOperator
    from airflow.operators.python import PythonOperator

    with DAG(
        dag_id="sparkhc_reclassify",
        description="Classify new partitions of the document collection with the current sparkhc model",
        schedule="15 * * * *",
        start_date=dt.datetime(2024, 1, 1),
        catchup=False,  # each run picks up everything pending; no need to replay past intervals
        max_active_runs=1,
        default_args={"retries": 0},
        params={"all": False},
        tags=["sparkhc"],
    ) as dag:
        run = BashOperator(
            task_id="reclassify",
            bash_command=reclassify_command(),
            do_xcom_push=True,
            execution_timeout=dt.timedelta(hours=3),
            retries=RETRIES,  # a crash (exit 1); a failed partition is not retried here (exit 3 -> check_summary)
            retry_delay=dt.timedelta(minutes=10),
        )
        check = PythonOperator(
            task_id="check_summary",
            python_callable=check_summary,
            op_kwargs={"summary_json": "{{ ti.xcom_pull(task_ids='reclassify') }}"},
        )
        run >> check
    return dag


try:
    dag = make_dag()
except ImportError:  # Airflow is not installed here
    dag = None
