"""``sparkhc predict``: decode documents with a saved model (Parquet output)."""

from __future__ import annotations

import argparse
from typing import Any

from sparkhc.cli._common import (
    before_spark,
    common_flags,
    config,
    print_json,
    refuse_existing,
    selection_flags,
    session,
)

HELP = "decode documents with a saved model (Parquet output)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="model directory")
    p.add_argument("--features", required=True,
                   help="features folder of the documents (sparkhc featurize, with the model's feature spec)")
    p.add_argument("--out", required=True, help="predictions folder to write (Parquet, written atomically)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing predictions folder")
    selection_flags(p, "test")
    common_flags(p)


def run(args: argparse.Namespace, spark: Any = None) -> int:
    from sparkhc.cli.preflight import selection_of
    from sparkhc.spark import pipelines

    refuse_existing(args.out, args.overwrite)  # before reading anything or starting Spark
    cfg = config(args)  # a bad configuration fails before Spark starts
    before_spark(args, spark)  # master, inputs, taxonomy, selection, URI schemes
    result = pipelines.predict(session(args, spark), cfg, model_dir=args.model, features=args.features,
                               out=args.out, overwrite=args.overwrite, **selection_of(args))
    print_json(result)
    return 0
