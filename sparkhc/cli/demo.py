"""``sparkhc demo``: featurize -> train -> predict -> evaluate on a corpus, in one session."""

from __future__ import annotations

import argparse
from typing import Any

from sparkhc.cli._common import common_flags, config, data_flags, session

HELP = "featurize -> train -> predict -> evaluate on 20 Newsgroups, local mode"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--workdir", default="sparkhc-demo", help="where features, model and predictions go")
    p.add_argument("--corpus", default="20newsgroups", help="a named corpus (default 20newsgroups)")
    p.add_argument("--model", default=None, help="model name (default: train.model of the configuration)")
    p.add_argument("--overwrite", action="store_true", default=True,
                   help="accepted for compatibility: the demo always replaces its outputs in --workdir")
    data_flags(p)
    common_flags(p)


def run(args: argparse.Namespace, spark: Any = None) -> int:
    from sparkhc.spark import pipelines

    cfg = config(args)  # a bad configuration fails before Spark starts
    table = pipelines.demo(session(args, spark), cfg, workdir=args.workdir, corpus=args.corpus,
                           data_dir=args.data_dir, cache_dir=args.cache_dir, model_name=args.model)
    print(table)
    return 0
