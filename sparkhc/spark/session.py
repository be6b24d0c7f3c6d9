"""SparkSession creation with the defaults sparkhc needs."""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession

DEFAULT_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "8",
    # weight matrices are collected on the driver: with 1g a Java OOM can hang instead of failing
    "spark.driver.memory": "2g",
    "spark.serializer": "org.apache.spark.serializer.KryoSerializer",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.session.timeZone": "UTC",
    "spark.python.worker.reuse": "true",
}


#: SparkSessions this process has created (not found active): a test hook, a verb that runs several steps
#: (demo, tune, experiment, reclassify) creates at most one
created = 0


def submitted() -> bool:
    """Whether this process runs under spark-submit (the submitted master and settings win)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ or bool(os.environ.get("SPARK_ENV_LOADED"))


def get_session(
    app_name: str = "sparkhc",
    master: str | None = None,
    extra_conf: dict[str, str] | None = None,
) -> SparkSession:
    """Get or create the SparkSession.

    ``master`` defaults to ``$SPARKHC_MASTER`` or ``local[*]`` when no master is configured (under
    spark-submit the submitted master wins). Settings already given to spark-submit are kept.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    if master is None and not submitted():
        master = os.environ.get("SPARKHC_MASTER", "local[*]")
    if master is not None:
        builder = builder.master(master)
    conf = dict(DEFAULT_CONF)
    conf.update(extra_conf or {})
    for k, v in conf.items():
        builder = builder.config(k, v)
    from pyspark import SparkContext

    fresh = SparkContext._active_spark_context is None
    session = builder.getOrCreate()
    if fresh:
        global created
        created += 1
    session.sparkContext.setLogLevel("WARN")
    return session
