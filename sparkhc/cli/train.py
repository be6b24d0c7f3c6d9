"""``sparkhc train``: train a model on featurized documents, the way the model declares."""

from __future__ import annotations

import argparse
from typing import Any

from sparkhc.cli._common import (
    before_spark,
    common_flags,
    config,
    local_only,
    print_json,
    refuse_existing,
    selection_flags,
    session,
)

HELP = "train a model on featurized documents"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--features", required=True, help="features folder (the --out of sparkhc featurize)")
    p.add_argument("--out", required=True, help="model directory (written atomically)")
    p.add_argument("--model", default=None, help="model name (default: train.model of the configuration)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing model directory")
    p.add_argument("--checkpoint-dir", default=None, help="per-epoch checkpoints (resume after a crash)")
    p.add_argument("--warm-start", default=None, metavar="MODEL",
                   help="continue training a saved model on the selected (new) documents")
    selection_flags(p, "train")
    common_flags(p)


def run(args: argparse.Namespace, spark: Any = None) -> int:
    from sparkhc.cli.preflight import selection_of
    from sparkhc.spark import pipelines

    refuse_existing(args.out, args.overwrite)  # before reading anything or starting Spark
    args.checkpoint_dir = local_only(args.checkpoint_dir, "--checkpoint-dir", "train")
    cfg = config(args)  # a bad configuration fails before Spark starts
    before_spark(args, spark)  # master, inputs, taxonomy, selection, URI schemes
    result = pipelines.train(  # a training in the driver (train.execution) never starts Spark
        session(args, spark, deferred=True), cfg, features=args.features, out=args.out, model_name=args.model,
        overwrite=args.overwrite, checkpoint_dir=args.checkpoint_dir, warm_start=args.warm_start,
        **selection_of(args),
    )
    print_json(result)
    return 0
