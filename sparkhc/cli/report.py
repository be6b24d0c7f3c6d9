"""``sparkhc report``: an HTML and Markdown report of an evaluation, with plots."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from sparkhc.cli._common import local_only, print_json, refuse_existing, verbose_flag

HELP = "HTML and Markdown report of an evaluation, with plots"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--predictions", required=True, help="output folder of sparkhc predict (+ evaluate)")
    p.add_argument("--out", default=None, help="report folder (default PREDICTIONS/report)")
    p.add_argument("--model", default=None, help="model directory (default: from PREDICTIONS/_MODEL.json)")
    p.add_argument("--features", default=None, help="features folder (default: from PREDICTIONS/_MODEL.json)")
    p.add_argument("--title", default=None, help="report title (default: the model name and version)")
    p.add_argument("--top", type=int, default=15, help="rows of the confused-pairs table")
    p.add_argument("--no-plots", action="store_true", help="tables only (no matplotlib needed)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing report folder")
    verbose_flag(p)


def run(args: argparse.Namespace, spark: Any = None) -> int:
    for flag in ("predictions", "out", "model", "features"):
        setattr(args, flag, local_only(getattr(args, flag), f"--{flag}", "report"))
    out = Path(args.out) if args.out is not None else Path(args.predictions) / "report"
    refuse_existing(out, args.overwrite)  # before any work: the report is not replaced silently
    from sparkhc.report import build_report

    res = build_report(args.predictions, out=args.out, model_dir=args.model, features=args.features,
                       title=args.title, top=args.top, plots=not args.no_plots)
    print_json(res)
    return 0
