"""``sparkhc predict``: decode documents with a saved model (Parquet output)."""

from __future__ import annotations

import argparse
from typing import Any

from sparkhc.cli._common import (
    before_spark,
    common_flags,
    config,
    print_json,
    reader_flags,
    refuse_existing,
    selection_flags,
    session,
)

HELP = "decode documents with a saved model (Parquet output)"
DESCRIPTION = ("Classify documents with a model trained earlier: raw documents (--input, any format featurize "
               "reads; the model's own feature spec is applied) or a features folder made with the model's "
               "feature spec (--features). Small local inputs are decoded in this process without starting Spark "
               "(predict.execution).")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="model directory")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--input", default=None,
                     help="raw documents: JSON Lines (.jsonl[.gz]), Parquet or a directory per label; labels are "
                          "optional (with them, `sparkhc evaluate` scores the predictions)")
    src.add_argument("--features", default=None,
                     help="features folder of the documents (sparkhc featurize --like MODEL, or the features the "
                          "model was trained from)")
    p.add_argument("--out", required=True, help="predictions folder to write (Parquet, written atomically)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing predictions folder")
    p.add_argument("--top", type=int, default=0, metavar="K",
                   help="add per document the K best labels not predicted, each with a score calibrated on the "
                        "training's validation documents: keeping the suggestions scored >= t keeps a set whose "
                        "precision on validation was t (column suggestions; docs/suggestions.md)")
    p.add_argument("--explain", type=int, default=0, metavar="N",
                   help="add for each predicted label the N features that contributed most to its score, with "
                        "their contributions (column explanations)")
    selection_flags(p, None, "default 'test' with --features, every document with --input")
    reader_flags(p)
    common_flags(p)


def run(args: argparse.Namespace, spark: Any = None) -> int:
    from sparkhc.cli.preflight import selection_of
    from sparkhc.spark import pipelines

    refuse_existing(args.out, args.overwrite)  # before reading anything or starting Spark
    if args.split is None and args.features is not None:
        args.split = "test"
    cfg = config(args)  # a bad configuration fails before Spark starts
    before_spark(args, spark)  # master, inputs, taxonomy, selection, URI schemes
    result = pipelines.predict(  # small local inputs are decoded here (predict.execution): no Spark started
        session(args, spark, deferred=True), cfg, model_dir=args.model, features=args.features, out=args.out,
        overwrite=args.overwrite, input_path=args.input,
        read_options={"unknown_labels": args.unknown_labels or cfg.featurize.unknown_labels,
                      "on_empty": args.on_empty or cfg.featurize.on_empty or None,
                      "on_invalid": args.on_invalid or cfg.featurize.on_invalid},
        top=args.top, explain=args.explain, **selection_of(args),
    )
    print_json(result)
    return 0
