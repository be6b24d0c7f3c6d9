"""The ``sparkhc`` command line.

Verbs: featurize, train, predict, evaluate, demo, experiment, fetch, and (sparkhc.cli_production)
reclassify, models, report. Each verb parses its
flags, loads the configuration and calls one pipeline; the spark-submit jobs in ``jobs/`` call
the same pipelines. Exit status: 0 ok, 2 for a user error (bad input, configuration, model),
1 for anything else.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import sys
from collections.abc import Sequence
from typing import Any

from sparkhc.errors import SparkhcError

log = logging.getLogger("sparkhc")

DEFAULT_DATA_DIR = os.environ.get("SPARKHC_DATA_DIR")


def _common(p: argparse.ArgumentParser, spark: bool = True) -> None:
    p.add_argument("--config", action="append", default=[], metavar="FILE", help="TOML configuration (repeatable)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="overrides",
                   help="override a configuration key, e.g. --set train.epochs=5")
    if spark:
        p.add_argument("--master", default=None,
                       help="Spark master for local runs (default $SPARKHC_MASTER or local[*]; spark-submit's wins)")
    p.add_argument("-v", "--verbose", action="count", default=0)


def _data_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data-dir", default=DEFAULT_DATA_DIR,
                   help="folder holding staged corpora (e.g. ../shared/data); else the download cache")
    p.add_argument("--cache-dir", default=None, help="download cache (default $SPARKHC_CACHE or ~/.cache/sparkhc)")


def _selection(p: argparse.ArgumentParser, default_split: str | None) -> None:
    p.add_argument("--split", default=default_split,
                   help=f"use documents of this split (default {default_split!r}; 'all' for every document)")
    p.add_argument("--fold", type=int, default=None, help="use only this fold")
    p.add_argument("--exclude-fold", type=int, default=None, help="use every fold but this one")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sparkhc", description="Hierarchical multi-label text classification on Spark.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("featurize", help="tokenize a corpus into sparse Parquet features")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--corpus", help="a named corpus (see `sparkhc fetch --list`)")
    src.add_argument("--input", help="JSON Lines (.jsonl[.gz]), a directory per label, or Parquet of raw documents")
    p.add_argument("--taxonomy", help="taxonomy file (parent<TAB>child or RCV1 format); required with --input")
    p.add_argument("--class-spaces", default=None, metavar="FILE",
                   help="multi-dimensional labels: a TOML file of [[class_space]] tables, each turning a record "
                        "field into one class per document (see sparkhc/mdc/spaces.py); replaces the taxonomy")
    p.add_argument("--unknown-labels", choices=["error", "drop"], default="error",
                   help="labels not in the taxonomy: fail (default) or drop them with a count")
    p.add_argument("--out", required=True, help="output folder (written atomically)")
    p.add_argument("--overwrite", action="store_true")
    _data_flags(p)
    _common(p)

    p = sub.add_parser("train", help="train a model on featurized documents")
    p.add_argument("--features", required=True)
    p.add_argument("--out", required=True, help="model directory (written atomically)")
    p.add_argument("--model", default=None, help="model name (default: train.model of the configuration)")
    p.add_argument("--overwrite", action="store_true")
    p.add_argument("--checkpoint-dir", default=None, help="per-epoch checkpoints (resume after a crash)")
    p.add_argument("--warm-start", default=None, metavar="MODEL",
                   help="continue training a saved model on the selected (new) documents")
    _selection(p, "train")
    _common(p)

    p = sub.add_parser("predict", help="decode documents with a saved model (Parquet output)")
    p.add_argument("--model", required=True, help="model directory")
    p.add_argument("--features", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--overwrite", action="store_true")
    _selection(p, "test")
    _common(p)

    p = sub.add_parser("evaluate", help="metrics of predictions against their gold labels")
    p.add_argument("--predictions", required=True)
    p.add_argument("--features", default=None,
                   help="features folder (for the taxonomy and scored labels; default: from the model metadata)")
    p.add_argument("--out", default=None, help="metrics JSON (default: PREDICTIONS/metrics.json)")
    _common(p)

    p = sub.add_parser("demo", help="featurize -> train -> predict -> evaluate on 20 Newsgroups, local mode")
    p.add_argument("--workdir", default="sparkhc-demo", help="where features, model and predictions go")
    p.add_argument("--corpus", default="20newsgroups")
    p.add_argument("--model", default=None)
    p.add_argument("--overwrite", action="store_true", default=True)
    _data_flags(p)
    _common(p)

    p = sub.add_parser("experiment", help="reproduce a paper's comparison")
    p.add_argument("name", choices=["murawaki", "cesa-bianchi", "xiao", "li-yamanishi", "m3mdc"])
    p.add_argument("--corpus", default=None)
    p.add_argument("--out", default=None, help="output folder (default docs/results/<name>)")
    p.add_argument("--quick", action="store_true", help="fewer epochs/folds for a smoke run")
    _data_flags(p)
    _common(p)

    p = sub.add_parser("fetch", help="download a public corpus into the cache (checksummed)")
    p.add_argument("name", nargs="?")
    p.add_argument("--list", action="store_true")
    _data_flags(p)
    p.add_argument("-v", "--verbose", action="count", default=0)

    from sparkhc import cli_production

    cli_production.add_parsers(sub)  # reclassify; models list|show|register|promote|algorithms; report
    from sparkhc import cli_tune

    cli_tune.add_parser(sub)  # tune (sparkhc.ml.tuning)
    return parser


def _setup_logging(verbose: int) -> None:
    level = logging.DEBUG if verbose > 1 else logging.INFO
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    if verbose < 2:
        for noisy in ("py4j", "pyspark"):
            logging.getLogger(noisy).setLevel(logging.WARNING)


def _config(args: argparse.Namespace) -> Any:
    from sparkhc.config import load_config

    return load_config(args.config, args.overrides)


def _spark(args: argparse.Namespace, app: str) -> Any:
    from sparkhc.spark.session import get_session

    return get_session(app_name=f"sparkhc-{app}", master=args.master)


def _selection_of(args: argparse.Namespace) -> dict[str, Any]:
    split = None if args.split in (None, "all") else args.split
    return {"split": split, "fold": args.fold, "exclude_fold": args.exclude_fold}


def run(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    _setup_logging(getattr(args, "verbose", 0))
    cmd = args.command
    from sparkhc import cli_production

    code = cli_production.run(args)  # None: not one of its verbs
    if code is None:
        from sparkhc import cli_tune

        code = cli_tune.run(args)
    if code is not None:
        return code
    if cmd == "fetch":
        from sparkhc.corpus import registry

        if args.list or not args.name:
            for info in registry.all_corpora():
                print(f"{info.name:16s} {info.description}")
            return 0
        path = registry.find_corpus(args.name, data_dir=args.data_dir, cache_dir=args.cache_dir)
        print(path)
        return 0
    cfg = _config(args)
    from sparkhc.spark import pipelines

    if cmd == "experiment":
        from sparkhc.spark import experiments

        out = experiments.run(args.name, corpus=args.corpus, data_dir=args.data_dir, out=args.out,
                              cfg=cfg, quick=args.quick, master=args.master)
        print(out)
        return 0
    spark = _spark(args, cmd)
    if cmd == "featurize":
        summary = pipelines.featurize(
            spark, cfg, out=args.out, corpus=args.corpus, input_path=args.input, taxonomy_path=args.taxonomy,
            data_dir=args.data_dir, cache_dir=args.cache_dir, unknown_labels=args.unknown_labels,
            overwrite=args.overwrite, class_spaces=args.class_spaces,
        )
        print(json.dumps(summary, indent=2, sort_keys=True, default=str))
    elif cmd == "train":
        result = pipelines.train(
            spark, cfg, features=args.features, out=args.out, model_name=args.model, overwrite=args.overwrite,
            checkpoint_dir=args.checkpoint_dir, warm_start=args.warm_start, **_selection_of(args),
        )
        print(json.dumps(result, indent=2, sort_keys=True, default=str))
    elif cmd == "predict":
        result = pipelines.predict(spark, cfg, model_dir=args.model, features=args.features, out=args.out,
                                 overwrite=args.overwrite, **_selection_of(args))
        print(json.dumps(result, indent=2, sort_keys=True, default=str))
    elif cmd == "evaluate":
        metrics, table = pipelines.evaluate(spark, predictions=args.predictions, features=args.features, out=args.out)
        print(table)
    elif cmd == "demo":
        table = pipelines.demo(spark, cfg, workdir=args.workdir, corpus=args.corpus, data_dir=args.data_dir,
                               cache_dir=args.cache_dir, model_name=args.model)
        print(table)
    return 0


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


def main(argv: Sequence[str] | None = None) -> None:
    try:
        code = run(argv)
    except SparkhcError as e:
        print(f"sparkhc: error: {e}", file=sys.stderr)
        code = 2
    except KeyboardInterrupt:
        code = 130
    except Exception as e:  # pragma: no cover - the traceback is what a bug report needs
        msg = task_user_error(e)
        if msg is not None:  # bad input found inside a Spark task: a user error all the same
            print(f"sparkhc: error: {msg}", file=sys.stderr)
            code = 2
        else:
            logging.getLogger("sparkhc").exception("failed: %s", e)
            code = 1
    sys.exit(code)


if __name__ == "__main__":
    main()
