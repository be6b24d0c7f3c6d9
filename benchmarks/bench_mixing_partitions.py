#!/usr/bin/env python
"""Seconds and bytes per epoch of the Spark mixing engines at many shards (issue 33, point 3: "for
the mixing mode a cluster user gets, at 64+ partitions").

    python benchmarks/bench_mixing_partitions.py --features /tmp/acc/meka_imdb/features \\
        --select "--split all --exclude-fold 0" --shards 64 128 --epochs 3 --section mixing-partitions

For each shard count and engine (``jobs``: what ``train.mixing = auto`` gives on a cluster without a
shared exchange directory, one Spark job per epoch; ``barrier``: what it gives with one, every
epoch in one barrier stage), one ``sparkhc train --set train.execution=spark`` child process with
``--epochs`` fixed epochs; the figures are the engine's own epoch log lines (seconds of each epoch
and, for the jobs engine, the bytes broadcast out and returned by the tasks).
"""

from __future__ import annotations

import argparse
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import ROOT, command, loadavg, machine, now, write_section  # noqa: E402

EPOCH = re.compile(r"epoch (\d+)/(\d+): (\d+) examples in (\d+) shards.*?, ([\d.]+) s(?:, shipped ([\d,]+) B out "
                   r"and ([\d,]+) B back)?")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--features", required=True)
    ap.add_argument("--select", default="", help="training selection flags of sparkhc train (one string)")
    ap.add_argument("--shards", type=int, nargs="+", default=[64, 128])
    ap.add_argument("--engines", nargs="+", default=["jobs", "barrier"])
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--out", default="/tmp/bench_mixing_partitions")
    ap.add_argument("--section", default="")
    a = ap.parse_args()
    load0 = loadavg()
    rows = []
    for k in a.shards:
        for engine in a.engines:
            argv = [sys.executable, "-m", "sparkhc.cli", "train", "--features", a.features, "--out",
                    f"{a.out}/{engine}{k}", "--overwrite", "--master", a.master, *shlex.split(a.select),
                    "--set", f"train.shards={k}", "--set", f"train.mixing={engine}", "--set",
                    f"train.epochs={a.epochs}", "--set", "train.execution=spark"]
            t0 = time.perf_counter()
            p = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT)
            wall = time.perf_counter() - t0
            if p.returncode != 0:
                print("\n".join(p.stderr.strip().splitlines()[-6:]), file=sys.stderr)
                raise SystemExit(f"sparkhc train ({engine}, {k} shards) exited {p.returncode}")
            eps = [m.groups() for m in EPOCH.finditer(p.stderr)]
            if len(eps) != a.epochs or any(int(g[3]) != k for g in eps):
                raise SystemExit(f"{engine}, {k} shards: expected {a.epochs} epoch lines of {k} shards, "
                                 f"found {len(eps)}")
            secs = " / ".join(f"{float(g[4]):.2f}" for g in eps)
            if eps[0][5] is not None:
                out_b = " / ".join(f"{int(g[5].replace(',', '')) / 1e6:.2f}" for g in eps)
                back_b = " / ".join(f"{int(g[6].replace(',', '')) / 1e6:.2f}" for g in eps)
            else:
                out_b = back_b = "(through the exchange directory; not counted)"
            rows.append(f"| {k} | {engine} | {int(eps[0][2]):,} | {secs} | {out_b} | {back_b} | {wall:.1f} |")
            print(rows[-1], flush=True)
    load1 = loadavg()
    if a.section:
        body = (f"Command: `{command()}`  \nMachine: {machine()}  \nDate: {now()}; load average {load0} at the start, "
                f"{load1} at the end\n\nOne `sparkhc train` per row (`--master {a.master}`, `train.execution = spark`, "
                f"{a.epochs} fixed epochs, the default global model); the epoch figures are the engine's log lines "
                "(an epoch's seconds on the driver; the jobs engine's bytes broadcast to the tasks and returned by "
                "them, in MB, per epoch); wall: the whole command, Spark start-up and saving included.\n\n"
                "| shards | engine | examples per epoch | seconds per epoch | MB out per epoch | MB back per epoch "
                "| wall s |\n|---|---|---|---|---|---|---|\n" + "\n".join(rows) + "\n")
        write_section(a.section, "Mixing engines at 64+ shards: seconds and bytes per epoch", body)


if __name__ == "__main__":
    main()
