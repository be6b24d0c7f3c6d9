"""The production verbs of the ``sparkhc`` command line: ``reclassify``, ``models``, ``report``.

``sparkhc.cli`` wires them in with two calls::

    add_parsers(sub)            # in build_parser(), after the other verbs
    code = run(args)            # in run(), before the configuration is loaded
    if code is not None:
        return code

``run`` returns None for verbs that are not defined here. Importing this module does not import
pyspark (``sparkhc reclassify`` imports it when it runs). ``jobs/reclassify.py`` is the
spark-submit entry point of ``reclassify`` (:func:`reclassify_main`).

Verbs::

    sparkhc reclassify --input COLLECTION --out PREDICTIONS (--models ROOT [--model-version V] | --model DIR)
                       [--partition-column ingest_date] [--format auto|parquet|json] [--all]
                       [--partitions V ...] [--batch-partitions 8] [--dry-run] [--on-invalid error|quarantine]
                       [--summary-json PATH]
    sparkhc models list [--root ROOT] [--json]
    sparkhc models show [VERSION|current] [--root ROOT]
    sparkhc models register MODEL_DIR [--root ROOT] [--metrics FILE] [--promote] [--move] [--note TEXT]
    sparkhc models promote VERSION [--root ROOT]
    sparkhc models algorithms          (also plain ``sparkhc models``: the model names for --model)
    sparkhc report --predictions DIR [--out DIR] [--model DIR] [--features DIR] [--title T] [--no-plots]

The registry root defaults to ``$SPARKHC_MODELS``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sparkhc.errors import SparkhcError

COMMANDS = ("reclassify", "models", "report")
MODELS_ENV = "SPARKHC_MODELS"


def _verbose(p: argparse.ArgumentParser) -> None:
    p.add_argument("-v", "--verbose", action="count", default=0)


def add_reclassify_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of ``sparkhc reclassify`` (shared with ``jobs/reclassify.py``)."""
    p.add_argument("--input", required=True,
                   help="document collection: COLUMN=VALUE partition folders of Parquet or JSON Lines files")
    p.add_argument("--out", required=True, help="predictions root, partitioned like the input")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--models", default=None, metavar="ROOT",
                     help=f"model registry root (default ${MODELS_ENV}); the model is its --model-version")
    src.add_argument("--model", default=None, metavar="DIR", help="a model directory instead of the registry")
    p.add_argument("--model-version", default="current", help="registry version to apply (default: current)")
    p.add_argument("--partition-column", default="ingest_date", help="partition column (default ingest_date)")
    p.add_argument("--format", default="auto", choices=["auto", "parquet", "json"], dest="input_format",
                   help="input file format (default: detected per partition)")
    p.add_argument("--all", action="store_true", dest="all_partitions",
                   help="reclassify every partition, also those already done by this model version")
    p.add_argument("--partitions", nargs="+", default=None, metavar="VALUE",
                   help="only these partition values")
    p.add_argument("--batch-partitions", type=int, default=8, metavar="N",
                   help="partitions classified per Spark job (default 8)")
    p.add_argument("--dry-run", action="store_true", help="show what would be classified; write nothing")
    p.add_argument("--on-invalid", choices=["error", "quarantine"], default="error",
                   help="records that cannot be classified (malformed JSON line, no doc_id/id, duplicate id): "
                        "fail the partition naming file and line (default), or classify the others and set "
                        "these aside in PARTITION/_quarantined.jsonl, counted in the run summary")
    p.add_argument("--summary-json", default=None, metavar="PATH",
                   help="also write the run summary to PATH (atomically; for schedulers: under spark-submit, log "
                        "lines reach stdout too, so stdout is not machine-readable)")
    p.add_argument("--master", default=None,
                   help="Spark master for local runs (default $SPARKHC_MASTER or local[*]; spark-submit's wins)")
    _verbose(p)


def add_parsers(sub: Any) -> None:
    """Add ``reclassify``, ``models`` and ``report`` to the subparsers of ``sparkhc``."""
    p = sub.add_parser("reclassify", help="classify new partitions of a date-partitioned document collection",
                       description="Classify the partitions of a collection not yet classified by the model "
                                   "(the registry's current version by default); write predictions partitioned "
                                   "the same way and a run summary in OUT/_runs/.")
    add_reclassify_arguments(p)

    p = sub.add_parser("models", help="model registry: list, show, register, promote (and the model names)")
    _verbose(p)
    msub = p.add_subparsers(dest="models_command", metavar="{list,show,register,promote,algorithms}")

    def root_flag(q: argparse.ArgumentParser) -> None:
        q.add_argument("--root", default=os.environ.get(MODELS_ENV),
                       help=f"registry root (default ${MODELS_ENV})")
        _verbose(q)

    q = msub.add_parser("list", help="registered versions (* = current)")
    root_flag(q)
    q.add_argument("--json", action="store_true", help="JSON instead of a table")
    q = msub.add_parser("show", help="everything recorded about a version")
    q.add_argument("version", nargs="?", default="current")
    root_flag(q)
    q = msub.add_parser("register", help="add a model directory as the next version")
    q.add_argument("model_dir")
    q.add_argument("--metrics", default=None, metavar="FILE", help="metrics.json of its evaluation")
    q.add_argument("--promote", action="store_true", help="also make it current")
    q.add_argument("--move", action="store_true", help="move the directory instead of copying it")
    q.add_argument("--note", default=None)
    root_flag(q)
    q = msub.add_parser("promote", help="point current at a version")
    q.add_argument("version")
    root_flag(q)
    q = msub.add_parser("algorithms", help="the model names accepted by train --model")
    _verbose(q)

    p = sub.add_parser("report", help="HTML and Markdown report of an evaluation, with plots")
    p.add_argument("--predictions", required=True, help="output folder of sparkhc predict (+ evaluate)")
    p.add_argument("--out", default=None, help="report folder (default PREDICTIONS/report)")
    p.add_argument("--model", default=None, help="model directory (default: from PREDICTIONS/_MODEL.json)")
    p.add_argument("--features", default=None, help="features folder (default: from PREDICTIONS/_MODEL.json)")
    p.add_argument("--title", default=None)
    p.add_argument("--top", type=int, default=15, help="rows of the confused-pairs table")
    p.add_argument("--no-plots", action="store_true", help="tables only (no matplotlib needed)")
    _verbose(p)


def _print_json(obj: Any) -> None:
    print(json.dumps(obj, indent=2, sort_keys=True, default=str))


def _root(args: argparse.Namespace) -> str:
    if not args.root:
        raise SparkhcError(f"no model registry: pass --root ROOT or set ${MODELS_ENV}")
    return str(args.root)


def _models(args: argparse.Namespace) -> int:
    from sparkhc import model_store

    cmd = args.models_command
    if cmd in (None, "algorithms"):
        from sparkhc.models import names

        print("\n".join(names()))
        return 0
    if cmd == "list":
        rows = model_store.summary_rows(_root(args))
        if args.json:
            _print_json(rows)
        else:
            print(model_store.format_rows(rows))
        return 0
    if cmd == "show":
        _print_json(model_store.show(_root(args), args.version))
        return 0
    if cmd == "register":
        v = model_store.register(_root(args), args.model_dir, metrics=args.metrics, move=args.move,
                              promote_to_current=args.promote, note=args.note)
        print(v)
        return 0
    if cmd == "promote":
        pointer = model_store.promote(_root(args), args.version)
        print(f"current -> {pointer['version']} (was {pointer['previous'] or 'unset'})")
        return 0
    raise SparkhcError(f"unknown models command {cmd!r}")  # pragma: no cover - argparse rejects it


def _reclassify(args: argparse.Namespace, spark: Any = None) -> int:
    from sparkhc.spark.reclassify import reclassify

    models_root = args.models
    if models_root is None and args.model is None:
        models_root = os.environ.get(MODELS_ENV)
        if not models_root:
            raise SparkhcError(f"no model: pass --models ROOT (or set ${MODELS_ENV}) or --model DIR")
    # spark=None: the session starts only when there is something to classify
    summary = reclassify(
        spark, args.input, args.out, models_root=models_root, model_version=args.model_version,
        model_dir=args.model, partition_column=args.partition_column, input_format=args.input_format,
        all_partitions=args.all_partitions, partitions=args.partitions, dry_run=args.dry_run,
        batch_partitions=args.batch_partitions, master=args.master, on_invalid=args.on_invalid,
    )
    if args.summary_json:
        from sparkhc.persistence import write_json_atomic

        write_json_atomic(Path(args.summary_json), summary)
    _print_json(summary)
    return 1 if summary.get("failures") else 0


def _report(args: argparse.Namespace) -> int:
    from sparkhc.report import build_report

    res = build_report(args.predictions, out=args.out, model_dir=args.model, features=args.features,
                       title=args.title, top=args.top, plots=not args.no_plots)
    _print_json(res)
    return 0


def run(args: argparse.Namespace, spark: Any = None) -> int | None:
    """Run a verb of this module; None when ``args.command`` is not one of them.

    ``spark`` (tests): an existing SparkSession for ``reclassify``.
    """
    cmd = getattr(args, "command", None)
    if cmd not in COMMANDS:
        return None
    if cmd == "models":
        return _models(args)
    if cmd == "report":
        return _report(args)
    return _reclassify(args, spark)


# ---------------------------------------------------------------------- spark-submit entry
def _setup_logging(verbose: int) -> None:
    level = logging.DEBUG if verbose > 1 else logging.INFO
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    if verbose < 2:
        for noisy in ("py4j", "pyspark"):
            logging.getLogger(noisy).setLevel(logging.WARNING)


def reclassify_main(argv: Sequence[str] | None = None) -> int:
    """``spark-submit jobs/reclassify.py ...``: exit 0 ok, 1 when a partition failed or on a bug,
    2 for a user error (bad input, model, flags)."""
    parser = argparse.ArgumentParser(prog="sparkhc reclassify", description="Classify the partitions of a collection not yet classified by the model.")
    add_reclassify_arguments(parser)
    args = parser.parse_args(argv)
    _setup_logging(args.verbose)
    try:
        return _reclassify(args)
    except SparkhcError as e:
        print(f"sparkhc: error: {e}", file=sys.stderr)
        return 2
