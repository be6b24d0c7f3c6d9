"""``sparkhc evaluate``: metrics of predictions against their gold labels."""

from __future__ import annotations

import argparse
from typing import Any

from sparkhc.cli._common import before_spark, common_flags, config, session

HELP = "metrics of predictions against their gold labels"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--predictions", required=True, help="predictions folder (the --out of sparkhc predict)")
    p.add_argument("--features", default=None,
                   help="features folder (for the taxonomy and scored labels; default: from the model metadata)")
    p.add_argument("--out", default=None, help="metrics JSON (default: PREDICTIONS/metrics.json)")
    common_flags(p)


def run(args: argparse.Namespace, spark: Any = None) -> int:
    from sparkhc.spark import pipelines

    cfg = config(args)  # a bad configuration fails before Spark starts
    before_spark(args, spark)  # master, inputs, taxonomy, selection, URI schemes
    _, table = pipelines.evaluate(  # small local predictions are counted here (predict.execution): no Spark
        session(args, spark, deferred=True), predictions=args.predictions, features=args.features, out=args.out,
        execution=cfg.predict.execution)
    print(table)
    return 0
