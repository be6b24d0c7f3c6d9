"""``sparkhc reclassify``: classify the partitions of a date-partitioned collection not yet classified
by the model (the model store's current version by default); ``jobs/reclassify.py`` is its
spark-submit entry point (:func:`reclassify_main`)::

    sparkhc reclassify --input COLLECTION --out PREDICTIONS (--models ROOT [--model-version V] | --model DIR)
                       [--partition-column ingest_date] [--format auto|parquet|json] [--all]
                       [--partitions V ...] [--batch-partitions 8] [--dry-run] [--on-invalid error|quarantine]
                       [--summary-json PATH]
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sparkhc.cli._common import (
    MODELS_ENV,
    check_master,
    local_only,
    master_flag,
    print_json,
    setup_logging,
    verbose_flag,
)
from sparkhc.errors import SparkhcError, Terminated

#: exit status of a run in which a partition failed (its summary names it); 0 ok, 2 a user error, 1 a bug,
#: 128 + 15 = 143 after SIGTERM
EXIT_PARTITIONS_FAILED = 3

HELP = "classify new partitions of a date-partitioned document collection"
DESCRIPTION = ("Classify the partitions of a collection not yet classified by the model (the registry's current "
               "version by default); write predictions partitioned the same way and a run summary in OUT/_runs/.")


def add_arguments(p: argparse.ArgumentParser) -> None:
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
    p.add_argument("--top", type=int, default=None, metavar="K",
                   help="as predict --top: the K best labels not predicted with calibrated scores (columns suggestions "
                        "and pred_calibrated); default: the output's recorded value, else 0")
    p.add_argument("--explain", type=int, default=None, metavar="N",
                   help="as predict --explain: the N largest feature contributions of each predicted label (column "
                        "explanations); default: the output's recorded value, else 0")
    p.add_argument("--on-invalid", choices=["error", "quarantine"], default=None,
                   help="records that cannot be classified (malformed JSON line, no doc_id/id, duplicate id): "
                        "fail the partition naming file and line, or classify the others and set "
                        "these aside in PARTITION/_quarantined.jsonl, counted in the run summary (default: the "
                        "value an earlier run into --out was given, recorded in OUT/_OPTIONS.json, else error; "
                        "another value than the recorded one is refused)")
    p.add_argument("--summary-json", default=None, metavar="PATH",
                   help="also write the run summary to PATH (atomically; for schedulers: under spark-submit, log "
                        "lines reach stdout too, so stdout is not machine-readable)")
    master_flag(p)
    verbose_flag(p)


def run(args: argparse.Namespace, spark: Any = None) -> int:
    from sparkhc.spark.reclassify import reclassify

    models_root = args.models
    if models_root is None and args.model is None:
        models_root = os.environ.get(MODELS_ENV)
        if not models_root:
            raise SparkhcError(f"no model: pass --models ROOT (or set ${MODELS_ENV}) or --model DIR")
    for flag in ("input", "out", "model"):
        setattr(args, flag, local_only(getattr(args, flag), f"--{flag}", "reclassify"))
    models_root = local_only(models_root, "--models", "reclassify")
    if spark is None:
        check_master(args.master)  # before any work, as every verb
    previous = _stop_on_sigterm()
    try:
        # spark=None: the session starts only when there is something to classify
        summary = reclassify(
            spark, args.input, args.out, models_root=models_root, model_version=args.model_version,
            model_dir=args.model, partition_column=args.partition_column, input_format=args.input_format,
            all_partitions=args.all_partitions, partitions=args.partitions, dry_run=args.dry_run,
            batch_partitions=args.batch_partitions, master=args.master, on_invalid=args.on_invalid,
            top=args.top, explain=args.explain,
        )
    except Terminated as e:  # the run summary of what was done (OUT/_runs/ has it when a partition was planned)
        if e.summary is None:
            logging.getLogger("sparkhc").warning("reclassify: %s received before any partition was classified; "
                                                 "nothing written", e.name)
        _emit(args, e.summary or {"interrupted": e.name, "documents": 0, "failures": [],
                                   "partitions": {"classified": [], "failed": []}})
        return 128 + e.signum
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    _emit(args, summary)
    return EXIT_PARTITIONS_FAILED if summary.get("failures") else 0


def _emit(args: argparse.Namespace, summary: dict[str, Any]) -> None:
    """The run summary to ``--summary-json`` (atomically) and stdout."""
    if args.summary_json:
        from sparkhc.persistence import write_json_atomic

        write_json_atomic(Path(args.summary_json), summary)
    print_json(summary)
    sys.stdout.flush()


def _stop_on_sigterm() -> Any:
    """SIGTERM (a scheduler's timeout, ``kill``) raises :class:`~sparkhc.errors.Terminated` in the
    main thread: the run stops after writing its summary. Returns the previous handler (None when
    not in the main thread, where handlers cannot be set)."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        return None

    def stop(signum: int, frame: Any) -> None:
        raise Terminated(signum, signal.Signals(signum).name)

    return signal.signal(signal.SIGTERM, stop)


def reclassify_main(argv: Sequence[str] | None = None) -> int:
    """``spark-submit jobs/reclassify.py ...``: exit 0 ok, 2 for a user error (bad input, model,
    flags), 3 when a partition failed (the summary names it), 143 on SIGTERM (after the summary),
    1 on a bug."""
    from sparkhc.cli import print_error

    parser = argparse.ArgumentParser(prog="sparkhc reclassify", description=DESCRIPTION)
    add_arguments(parser)
    args = parser.parse_args(argv)
    setup_logging(args.verbose)
    try:
        return run(args)
    except SparkhcError as e:
        print_error(str(e))
        return 2
