#!/usr/bin/env python
"""Predicting with a MeSH-sized model end to end: seconds and peak memory of the whole process tree of
one ``sparkhc predict`` (the driver, the JVM and the Python workers), and what it wrote.

    python benchmarks/bench_mesh_predict.py --model /tmp/mesh/model_bench --features /tmp/mesh/features \\
        --section predict-mesh300k

The prediction runs as a child process (``python -m sparkhc.cli predict``, the CLI a user runs) sampled by
:class:`_common.MemorySampler`; the test split of the features is predicted (``--split``), the model's
state is broadcast to the tasks, each Arrow batch is decoded block by block and only the predicted
nodes' scores are kept (``HierModel.decode_picked``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import command, loadavg, machine, now, run_cli, write_section  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--features", required=True)
    ap.add_argument("--split", default="test")
    ap.add_argument("--out", default="/tmp/mesh/pred_bench")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--section", default="")
    a = ap.parse_args()
    argv = [sys.executable, "-m", "sparkhc.cli", "predict", "--model", a.model, "--features", a.features,
            "--split", a.split, "--out", a.out, "--overwrite", "--master", a.master]
    load0 = loadavg()
    wall, mem, stdout = run_cli(argv)
    load1 = loadavg()
    res = json.loads(stdout[stdout.index("{"):])
    import pyarrow.parquet as pq

    from sparkhc.predictions import data_location

    table = pq.read_table(data_location(a.out), columns=["pred_labels"])
    n = table.num_rows
    per_doc = sum(len(v) for v in table.column("pred_labels").to_pylist()) / max(n, 1)
    meta = json.loads((Path(a.model) / "metadata.json").read_text(encoding="utf-8"))
    edges = sum(1 for ln in (Path(a.model) / "taxonomy.tsv").read_text(encoding="utf-8").splitlines() if ln.strip())
    row = (f"| {n:,} | {per_doc:.2f} | {res.get('seconds', float('nan'))} | {wall:.1f} | {n / wall:,.0f} | "
           f"{mem.summary()} | {load0} -> {load1} |")
    print(row)
    if a.section:
        body = (f"Command: `{command()}`  \nMachine: {machine()}  \nDate: {now()}\n\n"
                f"Model `{a.model}`: `{meta['model']}`, {meta['n_features']:,} features, {edges:,} taxonomy edges, "
                f"{meta['model_size']:,} non-zero weights ({meta['training'].get('epochs')} epoch(s)). "
                f"The prediction as a user runs it: `{' '.join(argv[1:])}`. predict s: the CLI's own figure; wall: "
                "the child process, Spark start-up included; docs/s over the wall time. Memory: the whole process "
                "tree, sampled every 0.5 s.\n\n"
                "| documents | labels a document | predict s | wall s | docs/s | peak memory | load avg (start -> end) |\n"
                "|---|---|---|---|---|---|---|\n" + row + "\n")
        write_section(a.section, f"Predicting with a MeSH-sized model ({a.section})", body)


if __name__ == "__main__":
    main()
