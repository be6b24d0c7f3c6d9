"""``sparkhc featurize``: tokenize a corpus into sparse Parquet features."""

from __future__ import annotations

import argparse
from typing import Any

from sparkhc.cli._common import (
    before_spark,
    common_flags,
    config,
    data_flags,
    local_only,
    print_json,
    reader_flags,
    refuse_existing,
    session,
)

HELP = "tokenize a corpus into sparse Parquet features"


def add_arguments(p: argparse.ArgumentParser) -> None:
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--corpus", help="a named corpus (see `sparkhc fetch --list`)")
    src.add_argument("--input", help="JSON Lines (.jsonl[.gz]), a directory per label, or Parquet of raw documents")
    p.add_argument("--taxonomy", help="taxonomy file (parent<TAB>child, RCV1 format, or a SKOS vocabulary: "
                   ".ttl, .rdf, .nt; a concept may have several parents); required with --input")
    p.add_argument("--class-spaces", default=None, metavar="FILE",
                   help="multi-dimensional labels: a TOML file of [[class_space]] tables, each turning a record "
                        "field into one class per document (see sparkhc/class_spaces.py); replaces the taxonomy")
    reader_flags(p)
    p.add_argument("--allow-unlabelled", action="store_const", const=False, default=None, dest="require_labels",
                   help="--input: read records without labels as unlabelled documents (to predict) instead of "
                        "invalid ones (default: featurize.require_labels of the configuration, true)")
    p.add_argument("--fit-exclude-fold", type=int, default=None, metavar="K",
                   help="cross-validation: fit the vocabulary and idf on every fold but K (the test fold of "
                        "your round), so no statistic of the test fold leaks into the features")
    p.add_argument("--like", default=None, metavar="MODEL",
                   help="weight the documents with a trained model's feature spec (its feature_spec.json: nothing "
                        "is fitted) and label them with its taxonomy unless --taxonomy is given: features that "
                        "`sparkhc predict --features` decodes with that model")
    p.add_argument("--out", required=True, help="output folder (written atomically)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out folder")
    data_flags(p)
    common_flags(p)


def run(args: argparse.Namespace, spark: Any = None) -> int:
    from sparkhc.spark import pipelines

    refuse_existing(args.out, args.overwrite)  # before reading anything or starting Spark
    args.class_spaces = local_only(args.class_spaces, "--class-spaces", "featurize")
    cfg = config(args)  # a bad configuration fails before Spark starts
    before_spark(args, spark)  # master, inputs, taxonomy, selection, URI schemes
    summary = pipelines.featurize(
        session(args, spark), cfg, out=args.out, corpus=args.corpus, input_path=args.input,
        taxonomy_path=args.taxonomy, data_dir=args.data_dir, cache_dir=args.cache_dir,
        unknown_labels=args.unknown_labels, on_empty=args.on_empty, on_invalid=args.on_invalid,
        require_labels=args.require_labels, overwrite=args.overwrite, class_spaces=args.class_spaces,
        fit_exclude_fold=args.fit_exclude_fold, like=args.like,
    )
    print_json(summary)
    return 0
