"""Regenerate every table, JSON and plot under ``docs/results/`` with one command.

::

    sparkhc experiment all --data-dir ../shared/data                 # every results page (slow)
    python -m experiments.regenerate --data-dir ../shared/data       # the same
    python -m experiments.regenerate --data-dir ../shared/data --only xiao
    sparkhc experiment all --quick --data-dir ../shared/data --out /tmp/quick   # smoke run, seconds

Each job is one ``sparkhc experiment NAME [--corpus C]`` run (:data:`JOBS`, in this order) on one
local SparkSession; every file it writes is stamped by :mod:`experiments.harness` with the command,
the git commit and the date. ``--quick`` runs every job on the tiny staged slices
(:mod:`experiments.quick`) into ``--out`` (never into ``docs/results``). The wall time of each job
is printed and returned.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sparkhc.config import Config

log = logging.getLogger(__name__)

#: (experiment, --corpus) in run order; together they write every file under docs/results/
JOBS: tuple[tuple[str, str | None], ...] = (
    ("murawaki", "rcv1v2_subset"),
    ("murawaki", "reuters21578"),
    ("murawaki", "20newsgroups"),
    ("cesa-bianchi", "rcv1v2_subset"),
    ("cesa-bianchi", "reuters21578"),
    ("cesa-bianchi", "ohsumed23"),
    ("li-yamanishi", None),
    ("m3mdc", None),
    ("m3mdc", "reuters21578"),
    ("xiao", "20newsgroups"),
    ("xiao", "rcv1v2_subset"),
)


def regenerate(data_dir: str | None, out_root: str | None, cfg: Config, *, quick: bool = False,
               master: str | None = None, spark: Any = None, only: Sequence[str] | None = None) -> dict[str, float]:
    """Run :data:`JOBS` (``only``: those experiments); outputs go to ``<out_root>/<results folder>``
    (default ``docs/results``; with ``quick`` a scratch folder). Returns seconds per job."""
    import experiments

    if quick and out_root is None:
        out_root = str(Path(tempfile.gettempdir()) / "sparkhc-experiment-quick")
    seconds: dict[str, float] = {}
    for name, corpus in JOBS:
        if only and name not in only:
            continue
        folder = Path(experiments.DEFAULT_OUT[name]).name
        out = str(Path(out_root) / folder) if out_root is not None else None
        label = name + (f" --corpus {corpus}" if corpus else "")
        t0 = time.perf_counter()
        log.info("regenerate: %s", label)
        experiments.run(name, corpus, data_dir, out, cfg, quick=quick, master=master, spark=spark)
        seconds[label] = round(time.perf_counter() - t0, 1)
        print(f"{label}: {seconds[label]:.1f} s", flush=True)
    return seconds


def main(argv: Sequence[str] | None = None) -> int:
    from sparkhc.config import load_config

    ap = argparse.ArgumentParser(prog="python -m experiments.regenerate", description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", default="../shared/data")
    ap.add_argument("--out", default=None, help="root of the results folders (default docs/results)")
    ap.add_argument("--quick", action="store_true", help="tiny staged slices, into --out (default a scratch folder)")
    ap.add_argument("--only", action="append", default=None, help="only this experiment (repeatable)")
    ap.add_argument("--master", default=None, help="Spark master (default $SPARKHC_MASTER or local[*])")
    ap.add_argument("--set", action="append", default=[], dest="overrides", metavar="KEY=VALUE")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        datefmt="%H:%M:%S")
    regenerate(args.data_dir, args.out, load_config([], args.overrides), quick=args.quick, master=args.master,
               only=args.only)
    return 0


if __name__ == "__main__":
    sys.exit(main())
