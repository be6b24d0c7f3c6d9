#!/usr/bin/env python
"""Cost curves (issue 33, point 4): seconds and peak memory of featurize, one training epoch and
predict at 10^4, 10^5 and 10^6 documents (1,000 taxonomy nodes) and at 10^2, 10^3, 10^4 and 3x10^4
nodes (10^5 documents), with the growth exponent fitted on each axis.

    python benchmarks/bench_cost_curves.py --work /tmp/curves --section cost-curves

Each point is a corpus of ``benchmarks/gen_mesh.py`` (depth 4, Zipf label frequencies, 1-3 labels a
document, a ``--vocab``-word vocabulary, 10 % test documents; generated once under ``--work``,
not timed), then, each as a child process (the CLI a user runs) sampled by
:class:`_common.MemorySampler` (the whole process tree: driver, JVM, Python workers):

- ``sparkhc featurize --input docs.jsonl --taxonomy taxonomy.tsv`` (vocabulary fitted on the
  training documents);
- ``sparkhc train --set train.epochs=1``: one epoch of the default global model (an epoch is the
  unit the defaults repeat; the number of epochs the default selection runs depends on the data),
  the default layout (``auto``: sparse where the dense weights would exceed 4 GiB);
- ``sparkhc predict`` of the test documents.

The exponent ``b`` of ``seconds ~ a * size^b`` is the least-squares slope of log seconds on log
size over the points of one axis (the same for memory). ``--scale 0.01`` runs the same grid with
100x fewer documents (a check of the script, not a measurement).
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import ROOT, command, loadavg, machine, now, run_cli, write_section  # noqa: E402

DOCS_AXIS = (10_000, 100_000, 1_000_000)
NODES_AXIS = (100, 1_000, 10_000, 30_000)
BASE_NODES = 1_000
BASE_DOCS = 100_000


def run(argv: list[str]) -> tuple[float, float, str]:
    """(wall seconds, peak GiB of the process tree by RSS, stdout) of one CLI call."""
    wall, mem, stdout = run_cli(argv, interval=0.25)
    return wall, mem.peak["all"] / 2**30, stdout


def point(work: Path, docs: int, nodes: int, vocab: int, master: str, reuse: bool) -> dict[str, float]:
    d = work / f"d{docs}_n{nodes}"
    if reuse and (d / "result.json").is_file():  # a point measured by an earlier run of this script
        return dict(json.loads((d / "result.json").read_text(encoding="utf-8")))
    if not (d / "summary.json").is_file():
        subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gen_mesh.py"), "--docs", str(docs), "--nodes",
                        str(nodes), "--depth", "4", "--vocab", str(vocab), "--out", str(d)], check=True,
                       capture_output=True)
    cli = [sys.executable, "-m", "sparkhc.cli"]
    out: dict[str, float] = {"docs": docs, "nodes": nodes}
    out["featurize_s"], out["featurize_gib"], _ = run(
        [*cli, "featurize", "--input", str(d / "docs.jsonl"), "--taxonomy", str(d / "taxonomy.tsv"),
         "--out", str(d / "features"), "--overwrite", "--master", master])
    out["train_s"], out["train_gib"], txt = run(
        [*cli, "train", "--features", str(d / "features"), "--out", str(d / "model"), "--overwrite",
         "--master", master, "--set", "train.epochs=1"])
    res = json.loads(txt[txt.index("{"):])
    out["train_cli_s"] = float(res.get("seconds", math.nan))
    out["layout"] = 1.0 if sparse_state(d / "model") else 0.0
    out["predict_s"], out["predict_gib"], _ = run(
        [*cli, "predict", "--model", str(d / "model"), "--features", str(d / "features"), "--split", "test",
         "--out", str(d / "pred"), "--overwrite", "--master", master])
    out["features"] = float(json.loads((d / "model" / "metadata.json").read_text(encoding="utf-8"))["n_features"])
    print(json.dumps(out), flush=True)
    (d / "result.json").write_text(json.dumps(out), encoding="utf-8")
    return out


def sparse_state(model: Path) -> bool:
    """Whether the saved model's weights are in the sparse layout (``layout = "auto"`` resolves per
    model, so the parameters do not say): ``W`` stored as CSR arrays in ``state.npz``."""
    import zipfile

    with zipfile.ZipFile(model / "state.npz") as z:
        return any(n.startswith("W__indptr") for n in z.namelist())


def slope(xs: list[float], ys: list[float]) -> float:
    lx = [math.log(x) for x in xs]
    ly = [math.log(y) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly, strict=True)) / sum((a - mx) ** 2 for a in lx)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", default="/tmp/curves")
    ap.add_argument("--vocab", type=int, default=50_000)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply every document count (0.01: a check)")
    ap.add_argument("--reuse", action="store_true", help="keep the points an earlier run measured (result.json)")
    ap.add_argument("--section", default="")
    a = ap.parse_args()
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    load0 = loadavg()
    docs_axis = [max(1000, int(n * a.scale)) for n in DOCS_AXIS]
    base_docs = max(1000, int(BASE_DOCS * a.scale))
    rows: dict[tuple[int, int], dict[str, float]] = {}
    for n in docs_axis:
        rows[(n, BASE_NODES)] = point(work, n, BASE_NODES, a.vocab, a.master, a.reuse)
    for k in NODES_AXIS:
        if (base_docs, k) not in rows:
            rows[(base_docs, k)] = point(work, base_docs, k, a.vocab, a.master, a.reuse)
    load1 = loadavg()

    def line(r: dict[str, float], axis: str) -> str:
        return (f"| {axis} | {int(r['docs']):,} | {int(r['nodes']):,} | {int(r.get('features', 0)):,} | "
                f"{'sparse' if r['layout'] else 'dense'} | "
                f"{r['featurize_s']:.1f} / {r['featurize_gib']:.2f} | {r['train_s']:.1f} / {r['train_gib']:.2f} | "
                f"{r['predict_s']:.1f} / {r['predict_gib']:.2f} |")

    by_docs = [rows[(n, BASE_NODES)] for n in docs_axis]
    by_nodes = [rows[(base_docs, k)] for k in NODES_AXIS]
    table = ["| axis | documents | nodes | features | layout | featurize s / GiB | train (1 epoch) s / GiB | "
             "predict s / GiB |", "|---|---|---|---|---|---|---|---|"]
    table += [line(r, "documents") for r in by_docs] + [line(r, "nodes") for r in by_nodes]
    fits = ["| axis | points | featurize s | train s | predict s | featurize GiB | train GiB | predict GiB |",
            "|---|---|---|---|---|---|---|---|"]
    for name, pts, key in (("documents", by_docs, "docs"), ("nodes", by_nodes, "nodes")):
        for which, sub in (("all", pts), ("the two largest", pts[-2:])):
            xs = [r[key] for r in sub]
            cells = [f"{slope(xs, [r[m] for r in sub]):.2f}" for m in
                     ("featurize_s", "train_s", "predict_s", "featurize_gib", "train_gib", "predict_gib")]
            fits.append(f"| {name} | {which} | " + " | ".join(cells) + " |")
    text = "\n".join(table) + "\n\nFitted growth exponents b (seconds or GiB ~ a * size^b, least squares on logs; over " \
        "all points of an axis, and between its two largest, where fixed costs such as Spark's start-up weigh " \
        "least):\n\n" + "\n".join(fits) + "\n"
    print(text)
    if a.section:
        body = (f"Command: `{command()}`  \nMachine: {machine()}  \nDate: {now()}; load average {load0} at the start, "
                f"{load1} at the end\n\nCorpora of `benchmarks/gen_mesh.py` (depth 4, a {a.vocab:,}-word vocabulary, "
                f"10 % test documents); documents axis at {BASE_NODES:,} nodes, nodes axis at {base_docs:,} documents. "
                "Each figure: one child process of the CLI (`sparkhc featurize`, `sparkhc train --set train.epochs=1` "
                "with the default model and layout, `sparkhc predict --split test`), wall seconds (Spark start-up "
                "included, about 8 s) / peak GiB of the whole process tree (sum of RSS, sampled every 0.25 s)."
                + (" With --reuse the points come from the result.json an earlier run of the same command wrote "
                   "in the work folder (their times and load: the note below the tables)." if a.reuse else "")
                + "\n\n"
                + text)
        write_section(a.section, "Cost curves: featurize, an epoch and predict against documents and nodes", body)


if __name__ == "__main__":
    main()
