"""SparkSession creation with the defaults sparkhc needs, and a session started on first use
(:class:`DeferredSession`: a training in the driver process never starts Spark)."""

from __future__ import annotations

import logging
import os
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path

from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

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

    conf_dir = os.environ.get("SPARK_CONF_DIR")
    if not conf_dir:
        home = os.environ.get("SPARK_HOME")
        if not home:
            try:
                from pyspark.find_spark_home import _find_spark_home

                home = _find_spark_home()
            except Exception as e:  # no Spark home: no installation settings to keep
                log.debug("no Spark home found (%s: %s): no spark-defaults.conf read", type(e).__name__, e)
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
    if SparkContext._gateway is None and java_options is not None and not submitted():
        _launch_quiet_gateway({**conf, "spark.app.name": app_name,
                               **({"spark.master": master} if master is not None else {})})
    session = builder.getOrCreate()
    if fresh:
        global created
        created += 1
    session.sparkContext.setLogLevel("WARN")
    return session


#: what the JVM prints on its stderr when Spark's launcher adds ``--add-modules=jdk.incubator.vector``
#: (every start): hidden from a session sparkhc starts quietly
INCUBATOR_NOTICE = b"WARNING: Using incubator modules"


def _launch_quiet_gateway(conf: dict[str, str]) -> None:
    """Start the JVM of a quiet session (the settings ``conf``, as the builder would pass them) with
    its stderr through a pipe: a daemon thread forwards every line to this process's stderr but the
    JVM's incubator notice (:data:`INCUBATOR_NOTICE`); the session then uses this gateway."""
    import subprocess
    import threading

    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    spark_conf = SparkConf(loadDefaults=False)
    for k, v in conf.items():
        spark_conf.set(k, v)
    gateway = launch_gateway(spark_conf, popen_kwargs={"stderr": subprocess.PIPE})
    err = gateway.proc.stderr

    def forward() -> None:
        for line in iter(err.readline, b""):
            if not line.startswith(INCUBATOR_NOTICE):
                try:
                    os.write(2, line)
                except OSError:  # stderr closed: nothing to forward to
                    return

    threading.Thread(target=forward, name="sparkhc-jvm-stderr", daemon=True).start()
    SparkContext._gateway = gateway
    SparkContext._jvm = gateway.jvm


# ----------------------------------------------------------------------------- a session started on first use
_LOCAL = re.compile(r"^local(?:\[(\*|\d+)(?:,\s*\d+)?\])?$")


class DeferredSession:
    """The SparkSession a verb would start, started on first use (:meth:`get`) only: until then
    its master and task slots come from the configuration alone (no JVM), so a training that runs
    in the driver (``train.execution``) never starts Spark. Made by :func:`deferred_session`."""

    def __init__(self, factory: Callable[[], SparkSession], master: str) -> None:
        self._factory = factory
        self._session: SparkSession | None = None
        self.master = master
        #: seconds :meth:`get` took to start the session (0.0 while not started)
        self.startup_seconds = 0.0

    @property
    def started(self) -> bool:
        return self._session is not None

    def get(self) -> SparkSession:
        if self._session is None:
            log.info("starting the Spark session (master %s)", self.master)
            t0 = time.perf_counter()
            self._session = self._factory()
            self.startup_seconds = time.perf_counter() - t0
        return self._session

    def task_slots(self) -> int:
        """Spark's ``defaultParallelism`` for this master: N of ``local[N]``, 1 for ``local``, the
        CPUs this process may run on for ``local[*]`` (what the JVM's availableProcessors reports
        without a container CPU quota); the started session's own figure otherwise."""
        m = _LOCAL.match(self.master)
        if self._session is not None or m is None:
            return int(self.get().sparkContext.defaultParallelism)
        if m.group(1) is None:
            return 1
        if m.group(1) == "*":
            return usable_cpus()
        return int(m.group(1))


#: a session argument: a started session, or one started on first use
SessionLike = SparkSession | DeferredSession


def usable_cpus() -> int:
    """The CPUs this process may use (affinity, capped by a cgroup v2 quota, as the JVM counts)."""
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        n = os.cpu_count() or 1
    quota = Path("/sys/fs/cgroup/cpu.max")  # cgroup v2 quota, which the JVM honours
    try:
        q, period = quota.read_text().split()[:2]
        if q != "max":
            n = min(n, max(1, -(-int(q) // int(period))))
    except (OSError, ValueError):
        pass
    return max(1, n)


def _conf_sets_parallelism() -> bool:
    """Whether a spark-defaults.conf the session would read sets ``spark.default.parallelism``."""
    for d in (os.environ.get("SPARK_CONF_DIR"), os.path.join(os.environ.get("SPARK_HOME", ""), "conf")):
        f = Path(d) / "spark-defaults.conf" if d else None
        try:
            if f is not None and f.is_file() and re.search(r"^\s*spark\.default\.parallelism\b", f.read_text(),
                                                           re.MULTILINE):
                return True
        except OSError:
            pass
    return False


def deferred_session(app_name: str, master: str | None) -> SessionLike:
    """The session :func:`sparkhc.spark.session.get_session` would give (``app_name``,
    ``master``), deferred when its master is known without starting it: not under spark-submit
    (the submitted master lives in the JVM), no session already active, and no spark-defaults.conf
    that sets ``spark.default.parallelism``. Otherwise the session, started now."""
    if submitted() or SparkSession.getActiveSession() is not None or _conf_sets_parallelism():
        return get_session(app_name=app_name, master=master)
    resolved = master or os.environ.get("SPARKHC_MASTER", "local[*]")
    return DeferredSession(lambda: get_session(app_name=app_name, master=resolved), resolved)


def active(spark: SessionLike) -> SparkSession:
    """The session itself (a deferred one is started now)."""
    return spark.get() if isinstance(spark, DeferredSession) else spark


def master_of(spark: SessionLike) -> str:
    return spark.master if isinstance(spark, DeferredSession) else (spark.sparkContext.master or "")


def startup_seconds(spark: SessionLike) -> float:
    """Seconds a deferred session took to start (0.0 for a session given started)."""
    return spark.startup_seconds if isinstance(spark, DeferredSession) else 0.0


def task_slots(spark: SessionLike) -> int:
    """Spark's ``defaultParallelism`` (a deferred session's without starting it)."""
    return spark.task_slots() if isinstance(spark, DeferredSession) else int(spark.sparkContext.defaultParallelism)


def is_local_master(spark: SessionLike) -> bool:
    """Whether the master is ``local`` or ``local[N]`` (the driver is on the machine that runs the tasks)."""
    return _LOCAL.match(master_of(spark)) is not None
