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


#: log4j2 configuration of a session sparkhc starts itself (not under spark-submit) unless
#: ``$SPARKHC_SPARK_LOGS`` is set (``-v`` sets it): Spark's warnings and errors on stderr as with its
#: own default profile, without the start-up lines that say nothing to a user ("Using Spark's default
#: log4j profile", the loopback hostname, "Setting default log level", NativeCodeLoader)
QUIET_LOG4J2 = """\
# written by sparkhc (sparkhc/spark/session.py); -v or SPARKHC_SPARK_LOGS=1: Spark's default profile
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex
logger.utils.name = org.apache.spark.util.Utils
logger.utils.level = error
logger.native.name = org.apache.hadoop.util.NativeCodeLoader
logger.native.level = error
"""

#: the environment variable that keeps Spark's own start-up logging (set by the CLI's ``-v``)
SPARK_LOGS_ENV = "SPARKHC_SPARK_LOGS"


def quiet_java_options() -> str | None:
    """``-Dlog4j2.configurationFile=...`` of :data:`QUIET_LOG4J2` (written once to the temp folder),
    or None when Spark's own logging is wanted (``$SPARKHC_SPARK_LOGS``) or spark-submit started
    the JVM already."""
    if os.environ.get(SPARK_LOGS_ENV) or submitted():
        return None
    import hashlib
    import tempfile
    from pathlib import Path

    digest = hashlib.sha256(QUIET_LOG4J2.encode("utf-8")).hexdigest()[:12]
    path = Path(tempfile.gettempdir()) / f"sparkhc-log4j2-{digest}.properties"
    if not path.is_file():
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_text(QUIET_LOG4J2, encoding="utf-8")
        os.replace(tmp, path)
    return f"-Dlog4j2.configurationFile={path.as_uri()}"


def _spark_defaults() -> dict[str, str]:
    """The settings of the installation's ``spark-defaults.conf`` (``$SPARK_CONF_DIR`` or
    ``$SPARK_HOME/conf``; pyspark's own when neither is set), which a ``--conf`` of the same key
    would replace."""
    from pathlib import Path

    conf_dir = os.environ.get("SPARK_CONF_DIR")
    if not conf_dir:
        home = os.environ.get("SPARK_HOME")
        if not home:
            try:
                from pyspark.find_spark_home import _find_spark_home

                home = _find_spark_home()
            except Exception:  # no Spark home: nothing to keep
                return {}
        conf_dir = os.path.join(home, "conf")
    path = Path(conf_dir) / "spark-defaults.conf"
    out: dict[str, str] = {}
    if path.is_file():
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            parts = line.strip().split(None, 1)
            if parts and not parts[0].startswith("#"):
                out[parts[0]] = parts[1].strip() if len(parts) > 1 else ""
    return out


def driver_java_options() -> str | None:
    """``spark.driver.extraJavaOptions`` of a session sparkhc starts: :func:`quiet_java_options`
    after the installation's own driver options (``spark-defaults.conf``, which the setting would
    otherwise replace); None when Spark's logging is wanted or the installation configures log4j."""
    quiet = quiet_java_options()
    if quiet is None:
        return None
    own = _spark_defaults().get("spark.driver.extraJavaOptions", "")
    return None if "log4j" in own else f"{own} {quiet}".strip()


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
    java_options = driver_java_options()
    if java_options is not None:
        conf["spark.driver.extraJavaOptions"] = java_options
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
