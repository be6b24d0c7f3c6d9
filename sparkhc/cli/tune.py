"""``sparkhc tune``: CrossValidator over a grid of Params, on the training documents of a features
folder only (:func:`sparkhc.ml.tuning.tune`); imports pyspark only when the verb runs."""

from __future__ import annotations

import argparse
import json
from typing import Any

HELP = "choose a model's parameters by cross-validation on the training documents"
DESCRIPTION = ("CrossValidator with HierarchicalEvaluator over a grid of HierarchicalClassifier Params (a TOML "
               "file: Param = [values], optional [modelParams] table of lists and [params] table of fixed "
               "Params). Only the selected documents (default: split 'train') are read; the chosen candidate is "
               "refitted on all of them and saved to --out (a model folder) with tuning.tsv, tuning.json and "
               "tuning.png (validation score per candidate).")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--features", required=True, help="features folder (sparkhc featurize)")
    p.add_argument("--out", required=True, help="model folder to write")
    p.add_argument("--grid", required=True, metavar="FILE", help="grid TOML file")
    p.add_argument("--model", default="global", help="registered model name (default global)")
    p.add_argument("--metric", default="hF", help="HierarchicalEvaluator metricName (default hF)")
    p.add_argument("--folds", type=int, default=3, help="cross-validation folds (default 3)")
    p.add_argument("--seed", type=int, default=0, help="seed of the fold assignment")
    p.add_argument("--parallelism", type=int, default=1, help="candidates fitted at the same time (default 1)")
    p.add_argument("--split", default="train", help="documents to tune on (default 'train')")
    p.add_argument("--fold", type=int, default=None, help="tune on this fold only")
    p.add_argument("--exclude-fold", type=int, default=None, help="tune on every fold but this one (the test fold)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out model folder")
    p.add_argument("--master", default=None, help="Spark master for local runs")
    p.add_argument("-v", "--verbose", action="count", default=0,
                   help="-vv: debug logging, Spark's and Py4J's messages included")


def run(args: argparse.Namespace, spark: Any = None) -> int:
    from sparkhc.cli._common import session
    from sparkhc.errors import ConfigError
    from sparkhc.ml.tuning import load_grid, tune

    grid = load_grid(args.grid)
    fixed = grid.pop("params", {})
    if not isinstance(fixed, dict):
        raise ConfigError(f"{args.grid}: [params] must be a table of fixed Params")
    spark = session(args, spark)
    split = None if args.split in (None, "all") else args.split
    result = tune(spark, args.features, args.out, grid, model=args.model, metric=args.metric, num_folds=args.folds,
                  seed=args.seed, parallelism=args.parallelism, split=split, fold=args.fold,
                  exclude_fold=args.exclude_fold, params=fixed, overwrite=args.overwrite)
    print(json.dumps(result, indent=2, sort_keys=True, default=str))
    return 0
