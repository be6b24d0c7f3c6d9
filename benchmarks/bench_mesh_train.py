#!/usr/bin/env python
"""Training on a MeSH-sized generated corpus: seconds and peak memory of the whole process tree of one
``sparkhc train`` (the driver, the JVM and the Python workers), with the settings given.

    python benchmarks/gen_mesh.py --out /tmp/mesh300k ...           # the corpus (see its --help)
    sparkhc featurize --input /tmp/mesh300k/docs.jsonl ... --out /tmp/mesh/features
    python benchmarks/bench_mesh_train.py --features /tmp/mesh/features --corpus-dir /tmp/mesh300k \\
        --set model.global.layout=sparse --set train.epochs=1 --section train-mesh300k-sparse

The training runs as a child process (``python -m sparkhc.cli train``, the CLI a user runs) sampled by
:class:`_common.MemorySampler`; its JSON summary (documents, seconds, weights hash) and the saved
model's size go into the section with the command, the machine and the load.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import command, loadavg, machine, now, run_cli, write_section  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--features", required=True)
    ap.add_argument("--corpus-dir", help="the generator's folder (its summary.json is quoted)")
    ap.add_argument("--out", default="/tmp/mesh/model_bench")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--set", action="append", default=[], dest="sets", metavar="KEY=VALUE")
    ap.add_argument("--section", default="train-mesh300k")
    a = ap.parse_args()
    argv = [sys.executable, "-m", "sparkhc.cli", "train", "--features", a.features, "--out", a.out, "--overwrite",
            "--master", a.master]
    for s in a.sets:
        argv += ["--set", s]
    load0 = loadavg()
    log = Path(f"{a.out.rstrip('/')}.train.log")
    wall, mem, stdout = run_cli(argv, log=log)
    load1 = loadavg()
    res = json.loads(stdout[stdout.index("{"):])  # the CLI's JSON summary (indented)
    state = Path(a.out) / "state.npz"
    size = f"{state.stat().st_size / 2**20:.0f} MiB" if state.is_file() else "?"
    plan = json.loads((Path(a.out) / "metadata.json").read_text(encoding="utf-8"))["training"].get("plan")
    corpus = ""
    if a.corpus_dir and (Path(a.corpus_dir) / "summary.json").is_file():
        s = json.loads((Path(a.corpus_dir) / "summary.json").read_text(encoding="utf-8"))
        corpus = (f"Corpus: `{s['command']}` ({s['docs']:,} documents, {s['test_docs']:,} of them test; "
                  f"{s['nodes']:,} taxonomy nodes, depth {s['depth']}, {s['vocabulary']:,}-word vocabulary).\n\n")
    row = (f"| {' '.join(a.sets) or '(defaults)'} | {res['documents']:,} | {res['seconds']:.1f} | {wall:.1f} | "
           f"{res.get('model_size', '?'):,} | {size} | {mem.summary()} | {load0} -> {load1} |")
    print(row)
    body = (f"Command: `{command()}`  \nMachine: {machine()}  \nDate: {now()}\n\n{corpus}"
            f"The training as a user runs it: `{' '.join(argv[1:])}`; plan: {plan}. train s: the CLI's own figure "
            "(reading, label scan, training, saving); wall: the child process, Spark start-up included. Memory: "
            "the whole process tree, sampled every 0.5 s.\n\n"
            "| settings | training documents | train s | wall s | non-zero weights | state.npz | peak memory | "
            "load avg (start -> end) |\n|---|---|---|---|---|---|---|---|\n" + row + "\n"
            + timeline(log.read_text(encoding="utf-8"), log))
    write_section(a.section, f"Training on a MeSH-sized corpus ({a.section})", body)


#: the log lines of a training that say where its time went (epochs, validation scores, stages, calibration)
TIMELINE = re.compile(r"epoch \d+/\d+: |select_epochs: |barrier mixing: |calibrate|train.calibrate|trained ")


def timeline(stderr: str, path: Path) -> str:
    """The training's own log lines about epochs, the selection, the barrier stages and the
    calibration (time-stamped by the CLI's logging), as a block for the section."""
    lines = [ln for ln in stderr.splitlines() if TIMELINE.search(ln)]
    if not lines:
        return ""
    return (f"\nThe training's log (`{path}`), the lines about epochs, the selection, the barrier stages and the "
            "calibration:\n\n```\n" + "\n".join(lines) + "\n```\n")


if __name__ == "__main__":
    main()
