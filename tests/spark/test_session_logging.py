"""Spark's start-up lines kept out of the user's way unless -v (issue 31): a session sparkhc starts
itself gets a log4j2 configuration with Spark's warnings and errors but without the start-up lines;
``-v`` (``$SPARKHC_SPARK_LOGS``) keeps Spark's own profile."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.reliability import tiny_records, write_jsonl, write_taxonomy

ROOT = Path(__file__).resolve().parents[2]
#: lines Spark prints while it starts with its default profile (what the quiet configuration removes)
STARTUP = ("Using Spark's default log4j profile", "Setting default log level to", "To adjust logging level use",
           "WARN NativeCodeLoader", "WARN Utils: Your hostname")


def test_quiet_configuration_unless_asked_for_spark_logs(monkeypatch):
    from sparkhc.cli._common import setup_logging
    from sparkhc.spark import session

    monkeypatch.delenv(session.SPARK_LOGS_ENV, raising=False)
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    monkeypatch.delenv("SPARK_ENV_LOADED", raising=False)
    opt = session.quiet_java_options()
    assert opt is not None and opt.startswith("-Dlog4j2.configurationFile=file:")
    text = Path(opt.split("=", 1)[1][len("file:"):]).read_text(encoding="utf-8")
    assert text == session.QUIET_LOG4J2 and "rootLogger.level = warn" in text
    assert "org.apache.hadoop.util.NativeCodeLoader" in text and "org.apache.spark.util.Utils" in text
    monkeypatch.setenv("PYSPARK_GATEWAY_PORT", "1")  # under spark-submit the JVM is already up: nothing to do
    assert session.quiet_java_options() is None
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT")
    setup_logging(1)  # -v
    assert os.environ[session.SPARK_LOGS_ENV] == "1" and session.quiet_java_options() is None


def test_the_installations_driver_options_are_kept(tmp_path, monkeypatch):
    """spark-defaults.conf's spark.driver.extraJavaOptions stays (the --conf would replace it); a log4j
    configuration of its own wins over sparkhc's."""
    from sparkhc.spark import session

    for name in (session.SPARK_LOGS_ENV, "PYSPARK_GATEWAY_PORT", "SPARK_ENV_LOADED"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    assert session.driver_java_options() == session.quiet_java_options()  # no spark-defaults.conf
    (tmp_path / "spark-defaults.conf").write_text("# site settings\nspark.driver.extraJavaOptions  -Dsite=1 -Xss4m\n"
                                                  "spark.executor.memory 2g\n")
    assert session.driver_java_options() == f"-Dsite=1 -Xss4m {session.quiet_java_options()}"
    (tmp_path / "spark-defaults.conf").write_text("spark.driver.extraJavaOptions -Dlog4j2.configurationFile=site.xml\n")
    assert session.driver_java_options() is None


@pytest.mark.slow
def test_a_cli_run_shows_spark_start_up_lines_only_with_v(tmp_path):
    docs = write_jsonl(tmp_path / "docs.jsonl", tiny_records(12))
    tax = write_taxonomy(tmp_path / "tax.tsv")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_GATEWAY", "SPARKHC_SPARK_LOGS"))}
    env["PYTHONPATH"] = str(ROOT)

    def stderr(*flags: str) -> list[str]:
        out = tmp_path / f"f{len(flags)}"
        proc = subprocess.run([sys.executable, "-m", "sparkhc.cli", "featurize", "--input", str(docs), "--taxonomy",
                               str(tax), "--out", str(out), "--set", "featurize.partitions=1", *flags],
                              capture_output=True, text=True, env=env, timeout=600, stdin=subprocess.DEVNULL)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return proc.stderr.splitlines()

    quiet = stderr()
    assert not [ln for ln in quiet if ln.startswith(STARTUP) or any(s in ln for s in STARTUP)], quiet
    # nothing is left besides sparkhc's own lines: the JVM's notice of its incubator module is hidden too
    others = [ln for ln in quiet if not re.match(r"\d\d:\d\d:\d\d \w+ sparkhc[.:]", ln)]
    assert others == [], others
    loud = stderr("-v")
    assert any("Using Spark's default log4j profile" in ln for ln in loud), loud
