#!/usr/bin/env python
"""Featurize throughput (documents/s) of ``sparkhc featurize`` on real corpora.

    python benchmarks/bench_featurize.py --corpus 20newsgroups --corpus meka_imdb \\
        --data-dir ../shared/data --out-root /tmp/bench --master 'local[2]'

Runs the CLI in a child process per corpus (Spark start-up included in "wall", excluded in
"featurize s", which is the ``seconds`` of ``_SUMMARY.json``), with peak memory of the whole
process tree.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import command, loadavg, machine, now, write_section  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", action="append", default=[])
    ap.add_argument("--data-dir", default="../shared/data")
    ap.add_argument("--out-root", default="/tmp/bench")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--section", default="featurize")
    a = ap.parse_args()
    rows = []
    for corpus in a.corpus or ["20newsgroups", "meka_imdb"]:
        out = Path(a.out_root) / f"feat_{corpus}"
        cmd = ["/usr/bin/time", "-v", "sparkhc", "featurize", "--corpus", corpus, "--data-dir", a.data_dir,
               "--out", str(out), "--overwrite", "--master", a.master]
        l0 = loadavg()
        t0 = time.perf_counter()
        p = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if p.returncode != 0:
            rows.append(f"| {corpus} | failed (exit {p.returncode}) | | | | {l0} |")
            print(p.stderr[-2000:])
            continue
        summ = json.loads((out / "_SUMMARY.json").read_text())
        n = summ["n_documents"]
        rss = next((ln.split(":")[1].strip() for ln in p.stderr.splitlines() if "Maximum resident" in ln), "?")
        rows.append(f"| {corpus} | {n} | {summ['seconds']:.1f} | {n / summ['seconds']:.0f} | {wall:.1f} | "
                    f"{int(rss) / 2**20:.2f} GiB (largest process) | {l0} -> {loadavg()} |")
        print(rows[-1], summ.get("timings"), flush=True)
    body = (
        f"Command: `{command()}`  \nMachine: {machine()}  \nDate: {now()}\n\n"
        "| corpus | documents | featurize s | docs/s | wall s (incl. Spark start) | peak RSS | load avg (start -> end) |\n"
        "|---|---|---|---|---|---|---|\n" + "\n".join(rows)
    )
    write_section(a.section, f"Featurize throughput ({a.section})", body)


if __name__ == "__main__":
    main()
