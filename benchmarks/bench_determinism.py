#!/usr/bin/env python
"""A default training is a function of its data and settings (issue 51, point 2): the same
``sparkhc train`` (every setting the default) run on a quiet machine and again while busy processes
hog every CPU, and the two models' weights hashes compared.

    python benchmarks/bench_determinism.py --features 20newsgroups=/tmp/acc/20newsgroups/features \\
        --features reuters21578=/tmp/acc/reuters21578/features --hogs 4 --section determinism

Each training is a fresh ``python -m sparkhc.cli train --master local[2]`` process; the hogs are
``--hogs`` Python processes spinning ``while True: pass`` from before the training starts to after it
ends. Prints and writes (with ``--section``) a table of the seconds and hashes of both runs.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import loadavg, run_cli, write_table_section  # noqa: E402


def train(features: str, out: Path) -> tuple[float, str]:
    from sparkhc.model_store import weights_hash

    wall, _, _ = run_cli([sys.executable, "-m", "sparkhc.cli", "train", "--features", features, "--out", str(out),
                          "--master", "local[2]", "--overwrite"])
    return wall, weights_hash(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--features", action="append", required=True, help="NAME=DIR (repeatable)")
    ap.add_argument("--hogs", type=int, default=4, help="busy processes during the second training")
    ap.add_argument("--section", default="")
    a = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for item in a.features:
            name, path = item.split("=", 1)
            quiet_load = loadavg()
            q_secs, q_hash = train(path, Path(tmp) / f"{name}-quiet")
            hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(a.hogs)]
            try:
                b_secs, b_hash = train(path, Path(tmp) / f"{name}-busy")
                busy_load = loadavg()
            finally:
                for h in hogs:
                    h.kill()
                    h.wait()
            same = "yes" if q_hash == b_hash else "NO"
            print(f"{name}: quiet {q_secs:.1f} s {q_hash} (load {quiet_load}); {a.hogs} hogs {b_secs:.1f} s {b_hash} "
                  f"(load {busy_load}); identical: {same}", flush=True)
            rows.append(f"| {name} | {q_secs:.1f} | {quiet_load} | {b_secs:.1f} | {busy_load} | {q_hash} | {b_hash} | "
                        f"{same} |")
    if a.section:
        write_table_section(
            a.section, f"A default training under a CPU hog ({a.section})",
            f"`sparkhc train --master local[2]` with every setting the default, run once, then again while {a.hogs} "
            "busy processes spin on the 2 CPUs; seconds are the CLI process's wall time.",
            ["corpus", "quiet s", "load before", f"{a.hogs} hogs s", "load at the end", "quiet weights hash",
             "busy weights hash", "identical"], rows)


if __name__ == "__main__":
    main()
