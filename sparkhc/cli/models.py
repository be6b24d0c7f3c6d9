"""``sparkhc models``: the model store (list, show, register, promote) and the model names::

    sparkhc models list [--root ROOT] [--json]
    sparkhc models show [VERSION|current] [--root ROOT]
    sparkhc models register MODEL_DIR [--root ROOT] [--metrics FILE] [--promote] [--move] [--note TEXT]
    sparkhc models promote VERSION [--root ROOT]
    sparkhc models algorithms          (also plain ``sparkhc models``: the model names for --model)

The root defaults to ``$SPARKHC_MODELS``.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from sparkhc.cli._common import MODELS_ENV, local_only, print_json, verbose_flag
from sparkhc.errors import SparkhcError

HELP = "model registry: list, show, register, promote (and the model names)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    verbose_flag(p)
    msub = p.add_subparsers(dest="models_command", metavar="{list,show,register,promote,algorithms}")

    def root_flag(q: argparse.ArgumentParser) -> None:
        q.add_argument("--root", default=os.environ.get(MODELS_ENV), help=f"registry root (default ${MODELS_ENV})")
        verbose_flag(q)

    q = msub.add_parser("list", help="registered versions (* = current)")
    root_flag(q)
    q.add_argument("--json", action="store_true", help="JSON instead of a table")
    q = msub.add_parser("show", help="everything recorded about a version")
    q.add_argument("version", nargs="?", default="current", help="version to show (default: current)")
    root_flag(q)
    q = msub.add_parser("register", help="add a model directory as the next version")
    q.add_argument("model_dir", help="model directory (the --out of sparkhc train)")
    q.add_argument("--metrics", default=None, metavar="FILE", help="metrics.json of its evaluation")
    q.add_argument("--promote", action="store_true", help="also make it current")
    q.add_argument("--move", action="store_true", help="move the directory instead of copying it")
    q.add_argument("--note", default=None, help="free-text note recorded with the version")
    root_flag(q)
    q = msub.add_parser("promote", help="point current at a version")
    q.add_argument("version", help="version to make current (e.g. v0003)")
    root_flag(q)
    q = msub.add_parser("algorithms", help="the model names accepted by train --model")
    verbose_flag(q)


def _root(args: argparse.Namespace) -> str:
    if not args.root:
        raise SparkhcError(f"no model registry: pass --root ROOT or set ${MODELS_ENV}")
    return str(local_only(str(args.root), "--root", "models"))


def run(args: argparse.Namespace, spark: Any = None) -> int:
    from sparkhc import model_store

    cmd = args.models_command
    if cmd in (None, "algorithms"):
        from sparkhc.models import names

        print("\n".join(names()))
        return 0
    if cmd == "list":
        rows = model_store.summary_rows(_root(args))
        if args.json:
            print_json(rows)
        else:
            print(model_store.format_rows(rows))
        return 0
    if cmd == "show":
        print_json(model_store.show(_root(args), args.version))
        return 0
    if cmd == "register":
        v = model_store.register(_root(args), args.model_dir, metrics=args.metrics, move=args.move,
                                 promote_to_current=args.promote, note=args.note)
        print(v)
        return 0
    if cmd == "promote":
        pointer = model_store.promote(_root(args), args.version)
        print(f"current -> {pointer['version']} (was {pointer['previous'] or 'unset'})")
        return 0
    raise SparkhcError(f"unknown models command {cmd!r}")  # argparse rejects it
