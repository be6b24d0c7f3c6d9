"""``sparkhc experiment NAME``: reproduce a paper's comparison (the runners in the top-level
``experiments/`` folder of a source checkout; they are not part of the installed product)."""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path
from typing import Any

from sparkhc.cli._common import common_flags, config, data_flags
from sparkhc.errors import SparkhcError

HELP = "reproduce a paper's comparison"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", choices=["murawaki", "murawaki-curve", "cesa-bianchi", "xiao", "li-yamanishi", "m3mdc", "all"],
                   help="a paper's experiment, or all: regenerate every page of docs/results (with --quick: "
                   "every experiment on tiny staged slices, into --out)")
    p.add_argument("--corpus", default=None, help="run on this corpus (default: the experiment's own)")
    p.add_argument("--out", default=None, help="output folder (default docs/results/<name>)")
    p.add_argument("--quick", action="store_true",
                   help="smoke run in seconds: a tiny slice of the corpora (from --data-dir), fewer rounds")
    data_flags(p)
    common_flags(p)


def experiments_package() -> Any:
    root = Path(__file__).resolve().parents[2]
    if not (root / "experiments" / "__init__.py").is_file():
        raise SparkhcError("sparkhc experiment runs the paper reproductions in the experiments/ folder of a "
                           f"source checkout; this installation ({root}) has none")
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    return importlib.import_module("experiments")


def run(args: argparse.Namespace, spark: Any = None) -> int:
    if args.name == "all":
        experiments_package()
        regenerate = importlib.import_module("experiments.regenerate")
        regenerate.regenerate(args.data_dir, args.out, config(args), quick=args.quick, master=args.master,
                              spark=spark)
        return 0
    out = experiments_package().run(args.name, corpus=args.corpus, data_dir=args.data_dir, out=args.out,
                                    cfg=config(args), quick=args.quick, master=args.master, spark=spark)
    print(out)
    return 0
