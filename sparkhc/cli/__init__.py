"""The ``sparkhc`` command line: one module per verb in this package.

Each verb module has ``HELP`` (and optionally ``DESCRIPTION``), ``add_arguments(parser)`` and
``run(args, spark=None) -> int``; :data:`VERBS` lists them in the order ``sparkhc --help`` shows.
A verb parses its flags, loads the configuration and calls one pipeline; the spark-submit jobs in
``jobs/`` call the same verbs. Exit status: 0 ok, 2 for a user error (bad input, configuration,
model), 1 for anything else. Importing this package does not import pyspark.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import re
import sys
from collections.abc import Sequence
from typing import Any

from sparkhc.cli._common import print_error_line, setup_logging
from sparkhc.errors import SparkhcError

VERBS = ("featurize", "train", "predict", "evaluate", "demo", "tune", "experiment", "fetch", "reclassify",
         "models", "report")


def _verb(name: str) -> Any:
    return importlib.import_module(f"sparkhc.cli.{name}")


def build_parser() -> argparse.ArgumentParser:
    import sparkhc

    parser = argparse.ArgumentParser(prog="sparkhc", description="Hierarchical multi-label text classification on Spark.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {sparkhc.__version__}",
                        help="print the version of sparkhc and exit")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in VERBS:
        mod = _verb(name)
        p = sub.add_parser(name, help=mod.HELP, description=getattr(mod, "DESCRIPTION", None))
        mod.add_arguments(p)
    return parser


def dispatch(args: argparse.Namespace, spark: Any = None) -> int:
    """Run the verb of parsed ``args`` (``spark``: an existing session, for tests)."""
    code: int = _verb(args.command).run(args, spark=spark)
    return code


def run(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    setup_logging(getattr(args, "verbose", 0))
    return dispatch(args)


# the last line of a worker traceback carried by a PythonException / Py4JJavaError on the driver
_TASK_USER_ERROR = re.compile(r"^sparkhc\.[\w.]*Error: (.+)$", re.MULTILINE)


def task_user_error(e: BaseException) -> str | None:
    """The message of a SparkhcError raised inside a Spark task, else None.

    PySpark re-raises it on the driver as a ``PythonException`` (or a ``Py4JJavaError`` around
    a ``SparkException``) whose text holds the worker's traceback, ending with e.g.
    ``sparkhc.errors.SchemaError: features: row 3: non-finite feature value nan``.
    """
    if not type(e).__module__.startswith(("pyspark", "py4j")):
        return None
    found = _TASK_USER_ERROR.findall(str(e))
    return found[-1].strip() if found else None


def print_error(message: str) -> None:
    """``sparkhc: error: MESSAGE`` on stderr.

    Under spark-submit the Python driver's stderr is not the user's: spark-submit's PythonRunner
    merges it into the stdout it relays. There the line is printed by spark-submit's own JVM on its
    stderr, through the Py4J gateway the driver was given (``PYSPARK_GATEWAY_PORT``: connecting
    starts nothing); if that fails, on Python's stderr as elsewhere."""
    print_error_line(f"sparkhc: error: {message}")


def main(argv: Sequence[str] | None = None) -> None:
    try:
        code = run(argv)
    except SparkhcError as e:
        print_error(str(e))
        code = 2
    except KeyboardInterrupt:
        print_error_line("sparkhc: interrupted")
        code = 130
    except Exception as e:  # the traceback is what a bug report needs
        msg = task_user_error(e)
        if msg is not None:  # bad input found inside a Spark task: a user error all the same
            print_error(msg)
            code = 2
        else:
            logging.getLogger("sparkhc").exception("failed: %s", e)
            code = 1
    sys.exit(code)
