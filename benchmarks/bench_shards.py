#!/usr/bin/env python
"""Accuracy of the default training against the number of shards on corpora of 100k+ documents
(issue 33, point 3): hF, macro-F1, micro-F1 and example F1 on the corpus protocol's test part at
each ``train.shards`` value, with every other setting the shipped default (epochs chosen on
validation bands of the training part, ``C = "auto"``, ``train.calibrate = "auto"``).

    python benchmarks/bench_shards.py --features meka_imdb=/tmp/acc/meka_imdb/features \\
        --features gen100k=/tmp/gen100s/features --shards 1 8 32 64 128 --seeds 0 1 2 --section shards-100k

Each training is the product's :func:`sparkhc.spark.training.fit_model` in this process (the driver
engine: the same shards, order and mixing as the Spark engines, bit-identical weights; see
``docs/architecture.md``), so the figure is the accuracy a cluster of that many task slots gets;
the seconds are those of one process doing every shard's work in turn, not a cluster's. The test
part is scored once per trained model, after every choice was made on the training part.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from _common import loadavg, write_table_section  # noqa: E402

METRICS = (("hF", "hF"), ("LBMaF", "LB macro-F1"), ("LBMiF", "LB micro-F1"), ("EBF", "example F1"))


def main() -> None:
    from compare import load, score, splits
    from nested_defaults import run_variant

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--features", action="append", default=[], help="NAME=DIR (repeatable)")
    ap.add_argument("--shards", type=int, nargs="+", default=[1, 8, 32, 64, 128])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0], help="train.seed values (shards and selection)")
    ap.add_argument("--set", action="append", default=[], help="SECTION.KEY=VALUE for every training")
    ap.add_argument("--section", default="")
    args = ap.parse_args()
    rows_out: list[str] = []
    load0 = loadavg()
    for spec in args.features:
        name, path = spec.split("=", 1)
        d = load(name, path)
        sp = splits(d, 1, [0])[0]  # the protocol's first test part (meka_imdb: fold 0)
        base: np.ndarray | None = None
        for k in args.shards:
            got, infos, secs = [], [], 0.0
            for seed in args.seeds:
                t0 = time.perf_counter()
                model, what = run_variant(d, sp.tr, [*args.set, f"train.seed={seed}"], k)
                secs += time.perf_counter() - t0
                m = score(d, sp.te, model.predict(d.batch.subset(sp.te)))
                got.append([100 * m[key] for key, _ in METRICS])
                infos.append(f"{what['epochs']}/{what['run']}{'+o' if what['applied'] else ''}")
                print(f"{name} shards {k} seed {seed}: " + " ".join(f"{v:.2f}" for v in got[-1])
                      + f" epochs {infos[-1]} C={what['C']:g}", flush=True)
            A = np.array(got)  # seeds x metrics
            base = A if base is None else base
            cells = []
            for j in range(A.shape[1]):
                cell = f"{A[:, j].mean():.2f}" + (f" ± {A[:, j].std(ddof=1):.2f}" if len(A) > 1 else "")
                if A is not base:
                    dlt = A[:, j] - base[:, j]  # paired by seed
                    cell += f" ({dlt.mean():+.2f}" + (f" ± {dlt.std(ddof=1) / np.sqrt(len(dlt)):.2f})"
                                                      if len(dlt) > 1 else ")")
                cells.append(cell)
            rows_out.append(f"| {name} | {k} | " + " | ".join(cells) + f" | {', '.join(infos)} | "
                            f"{secs / len(args.seeds):.0f} | {loadavg()} |")
            print(rows_out[-1], flush=True)
    if args.section:
        write_table_section(
            args.section, "Accuracy against the number of shards on 100k+ documents",
            "Test part of each corpus's protocol (meka_imdb: fold 0 of `folds.tsv`, trained on folds 1-4; a "
            "generated corpus: its `split`); percent, mean ± sd over the seeds (`train.seed`: the shards, the "
            "shuffles and the validation bands); in brackets the difference to the first shard count, paired by "
            "seed, ± its standard error. "
            "Every training is the shipped default (epochs chosen on validation bands of the training part, "
            "`C = \"auto\"`, `train.calibrate = \"auto\"`) with `train.shards` set, run by the product's "
            "`fit_model` in this process (the driver engine, bit-identical to the Spark engines); train s is "
            "one process doing every shard's work, selection included (mean over the seeds); epochs: chosen / "
            "run on validation per seed (+o: offsets applied). Load average at the start "
            f"{load0}; the last column is the load at the end of each row.",
            ["corpus", "shards", *[t for _, t in METRICS], "epochs chosen / run", "train s", "load"], rows_out)


if __name__ == "__main__":
    main()
