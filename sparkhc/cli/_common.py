"""Flags and set-up shared by the verbs."""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import sys
from typing import Any

DEFAULT_DATA_DIR = os.environ.get("SPARKHC_DATA_DIR")
MODELS_ENV = "SPARKHC_MODELS"


def verbose_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("-v", "--verbose", action="count", default=0,
                   help="-v: every epoch and fold (debug logging) and Spark's start-up lines; -vv: Py4J's and "
                        "PySpark's messages too")


def master_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--master", default=None,
                   help="Spark master for local runs (default $SPARKHC_MASTER or local[*]; spark-submit's wins)")


def common_flags(p: argparse.ArgumentParser, spark: bool = True) -> None:
    p.add_argument("--config", action="append", default=[], metavar="FILE", help="TOML configuration (repeatable)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="overrides",
                   help="override a configuration key, e.g. --set train.epochs=5")
    if spark:
        master_flag(p)
    verbose_flag(p)


def data_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data-dir", default=DEFAULT_DATA_DIR,
                   help="folder holding staged corpora (e.g. ../shared/data); else the download cache")
    p.add_argument("--cache-dir", default=None, help="download cache (default $SPARKHC_CACHE or ~/.cache/sparkhc)")


def selection_flags(p: argparse.ArgumentParser, default_split: str | None, default_text: str | None = None) -> None:
    p.add_argument("--split", default=default_split,
                   help=f"use documents of this split ({default_text or f'default {default_split!r}'}; 'all' for "
                        "every document)")
    p.add_argument("--fold", type=int, default=None, help="use only this fold")
    p.add_argument("--exclude-fold", type=int, default=None, help="use every fold but this one")


def reader_flags(p: argparse.ArgumentParser) -> None:
    """What a reader of raw documents does with records it cannot use (``featurize``, ``predict --input``)."""
    from sparkhc.config import ON_EMPTY, ON_INVALID, UNKNOWN_LABELS

    p.add_argument("--unknown-labels", choices=list(UNKNOWN_LABELS), default=None,
                   help="labels not in the taxonomy: fail, drop the label or set the document aside, counted "
                        "(default: featurize.unknown_labels of the configuration, 'error')")
    p.add_argument("--on-empty", choices=list(ON_EMPTY), default=None,
                   help="documents with no text and no tokens: fail, keep them or set them aside, counted "
                        "(default: featurize.on_empty of the configuration, else the corpus's default)")
    p.add_argument("--on-invalid", choices=list(ON_INVALID), default=None,
                   help="malformed or ill-typed records, missing or duplicate ids: fail or set them aside, "
                        "counted (default: featurize.on_invalid of the configuration, 'error')")


def setup_logging(verbose: int) -> None:
    """sparkhc's log lines on stderr, also under spark-submit (INFO: the plan, one line per stage and
    the result; -v: DEBUG, every epoch and fold, and Spark's own start-up lines, ``$SPARKHC_SPARK_LOGS``,
    :func:`sparkhc.spark.session.quiet_java_options`; -vv: Py4J's and PySpark's messages too)."""
    import sys

    if verbose > 0:
        os.environ["SPARKHC_SPARK_LOGS"] = "1"
    level = logging.DEBUG if verbose > 0 else logging.INFO
    handler = SubmitStderrHandler() if "PYSPARK_GATEWAY_PORT" in os.environ else logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S"))
    logging.basicConfig(level=level, handlers=[handler])
    if verbose < 2:
        for noisy in ("py4j", "pyspark", "numba", "matplotlib", "urllib3", "werkzeug"):
            logging.getLogger(noisy).setLevel(logging.WARNING)


def print_error_line(line: str) -> None:
    """``line`` on the user's stderr (under spark-submit: spark-submit's own, see :func:`sparkhc.cli.print_error`)."""
    if "PYSPARK_GATEWAY_PORT" in os.environ:
        try:
            from pyspark import SparkContext
            from pyspark.java_gateway import launch_gateway

            gateway = SparkContext._gateway or launch_gateway()
            sys.stdout.flush()
            err = gateway.jvm.java.lang.System.err
            err.println(line)
            err.flush()
            return
        except Exception:  # no gateway after all: the merged stream is better than nothing
            logging.getLogger("sparkhc").debug("could not print on spark-submit's stderr", exc_info=True)
    print(line, file=sys.stderr)


class SubmitStderrHandler(logging.Handler):
    """Log lines on the user's stderr under spark-submit, whose PythonRunner merges the Python
    driver's stderr into the stdout it relays (with the JSON result): each line is printed by
    spark-submit's JVM (:func:`sparkhc.cli.print_error_line`). Lines logged while one is printed
    (Py4J's own, with -vv) go to Python's stderr."""

    def __init__(self) -> None:
        super().__init__()
        import threading

        self._busy = threading.local()

    def emit(self, record: logging.LogRecord) -> None:
        import sys

        line = self.format(record)
        if getattr(self._busy, "on", False):
            print(line, file=sys.stderr)
            return
        self._busy.on = True
        try:
            print_error_line(line)
        except Exception:  # never let logging fail the job
            print(line, file=sys.stderr)
        finally:
            self._busy.on = False


def config(args: argparse.Namespace) -> Any:
    from sparkhc.config import load_config

    return load_config([str(local_only(c, "--config", args.command)) for c in args.config], args.overrides)


def session(args: argparse.Namespace, spark: Any = None, deferred: bool = False) -> Any:
    """``spark`` if given, else the session of this verb (``sparkhc-<verb>``); ``deferred``: one
    started on first use where its master is known without starting it
    (:func:`sparkhc.spark.session.deferred_session`)."""
    if spark is not None:
        return spark
    check_master_of(args)
    if deferred:
        from sparkhc.spark.session import deferred_session

        return deferred_session(f"sparkhc-{args.command}", args.master)
    from sparkhc.spark.session import get_session, submitted

    where = "spark-submit's master" if submitted() else (args.master or os.environ.get("SPARKHC_MASTER") or "local[*]")
    logging.getLogger("sparkhc").info("%s: starting Spark (%s) ...", args.command, where)
    return get_session(app_name=f"sparkhc-{args.command}", master=args.master)


def check_master_of(args: argparse.Namespace) -> None:
    """:func:`check_master` of ``--master`` or ``$SPARKHC_MASTER``."""
    check_master(args.master if args.master is not None else (os.environ.get("SPARKHC_MASTER") or None),
                 "--master" if args.master is not None else "$SPARKHC_MASTER")


def before_spark(args: argparse.Namespace, spark: Any = None) -> None:
    """What a verb checks before its session starts: the master (unless ``spark`` is given), then
    its inputs (:mod:`sparkhc.cli.preflight`)."""
    from sparkhc.cli import preflight

    if spark is None:
        check_master_of(args)
    preflight.run(args)


def local_only(location: str | None, flag: str, verb: str) -> str | None:
    """``location`` (a plain path or a ``file:`` URI) as a local path, for the verbs that read and
    write the local file system only (reclassify, report, models); another URI scheme is refused in
    one line naming the flag (None passes)."""
    if location is None:
        return None
    from sparkhc import fsio
    from sparkhc.errors import LocationError

    local = fsio.local_path(location)
    if local is None:
        raise LocationError(f"{flag} {fsio.redact(location)}: sparkhc {verb} takes local paths "
                            "or file: URIs only (a shared mount on a cluster); see 'Where data can live' in "
                            "docs/deployment.md")
    return str(local)


def print_json(obj: Any) -> None:
    print(json.dumps(obj, indent=2, sort_keys=True, default=str))


def refuse_existing(out: str | os.PathLike[str], overwrite: bool) -> None:
    """Before any work (no input read, no Spark started): an existing output folder on the local
    file system (a path or a ``file:`` URI) is refused unless ``--overwrite``; other URI schemes
    are checked by the writer, which refuses them the same way."""
    from sparkhc.errors import SparkhcError

    text = os.fspath(out)
    if "://" in text and not text.startswith("file://"):
        return
    local = text[len("file://"):] if text.startswith("file://") else text
    if not overwrite and os.path.lexists(local):
        raise SparkhcError(f"{text} already exists; pass --overwrite to replace it")


#: the forms of a Spark master URL (Spark's SparkContext.createTaskScheduler)
_MASTER = re.compile(r"local(\[(\*|[1-9]\d*)(,[1-9]\d*)?\])?|local-cluster\[\d+,\d+,\d+\]|"
                     r"spark://[^/\s]+(,[^/\s]+)*|yarn|k8s://\S+|mesos://\S+")


def check_master(master: str | None, where: str = "--master") -> None:
    """A master URL Spark cannot use is refused before Spark starts (Spark's own error is a Java
    stack after the JVM came up); None (spark-submit's or the default) passes."""
    from sparkhc.errors import ConfigError

    if master is not None and not _MASTER.fullmatch(master.strip()):
        raise ConfigError(f"{where} {master!r} is not a Spark master URL: use local, local[N], local[*], "
                          "spark://HOST:PORT, yarn or k8s://https://HOST:PORT")

