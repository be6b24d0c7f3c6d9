#!/usr/bin/env python
"""Training throughput: seconds per IPM epoch and documents/s for FLAT, DP-GT and DP-GT-BF, per
Spark master, next to one X.W pass over the same data (scipy CSR x dense float32, one thread,
measured in the same run), with peak memory of the driver, the JVM and the Python workers.

    python benchmarks/bench_train.py --features 20ng=/tmp/bench/feat_20newsgroups \\
        --features jst01=/tmp/bench/jst01 --models flat,dp-gt,dp-gt-bf --masters 'local[1]','local[2]' \\
        --epochs 2 --shards 2

Each (data set, master) runs in a child process with its own SparkSession (one session per
process); epoch 1 includes the numba compilation in the workers (cached on disk afterwards) and
the caching of the shards, so the steady-state figure is the last epoch.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from _common import MemorySampler, command, loadavg, machine, now, write_section  # noqa: E402

MODELS = {
    "flat": ("flat", {}),
    "dp-gt": ("global", {"branching": False}),
    "dp-gt-bf": ("global", {"branching": True, "update": "prediction", "bias": 0.0}),
    # sparkhc's default global model (cost-augmented updates + bias feature)
    "dp-gt-bf-ca": ("global", {"branching": True, "update": "cost_augmented", "margin": 1.0, "bias": 0.3}),
}


def xw_pass(features: str, n_edges: int, dtype=np.float32) -> dict[str, float]:
    """Seconds of ``X @ W`` over the training rows (W random, (V, n_edges), float32), in
    2,048-row blocks as the decoders do."""
    from sparkhc.features import read_features_local

    batch, spec = read_features_local(features, with_counts=False)
    split = batch.extra.get("split")
    X = batch.X if split is None else batch.X[np.flatnonzero(split == "train")]
    X = X.astype(dtype)
    rng = np.random.default_rng(0)
    W = rng.standard_normal((X.shape[1], n_edges), dtype=np.float32)
    t0 = time.perf_counter()
    for a in range(0, X.shape[0], 2048):
        X[a : a + 2048] @ W
    secs = time.perf_counter() - t0
    return {"docs": int(X.shape[0]), "seconds": secs, "docs_per_s": X.shape[0] / secs, "nnz_per_doc": X.nnz / X.shape[0]}


def child(a: argparse.Namespace) -> None:
    from sparkhc.features import Selection, features_taxonomy, model_taxonomy
    from sparkhc.models import get_model_class
    from sparkhc.spark.io import read_features
    from sparkhc.spark.mixing.train import train_ipm
    from sparkhc.spark.pipelines import label_combinations, select_rows
    from sparkhc.spark.session import get_session

    spark = get_session(
        "bench-train",
        master=a.master,
        extra_conf={
            "spark.driver.memory": a.driver_memory,
            "spark.driver.maxResultSize": "0",
            "spark.executorEnv.OPENBLAS_NUM_THREADS": "1",
        },
    )
    out = []
    with MemorySampler() as mem:
        df, spec = read_features(spark, a.path)
        tax = features_taxonomy(a.path)
        df = select_rows(df, Selection("train")).cache()
        n = df.count()
        mtax = model_taxonomy(tax, label_combinations(df))
        for m in a.models.split(","):
            name, params = MODELS[m]
            model = get_model_class(name)(mtax, spec.n_features, **params)
            log: list[dict] = []
            t0 = time.perf_counter()
            train_ipm(spark, df, model, epochs=a.epochs, shards=a.shards, seed=0, progress=log.append)
            total = time.perf_counter() - t0
            secs = [e["seconds"] for e in log]
            out.append({"model": m, "docs": n, "epoch_seconds": secs, "total": total, "load": loadavg(),
                        "n_edges": mtax.n_nodes - 1, "n_features": spec.n_features})
            print(json.dumps(out[-1]), file=sys.stderr, flush=True)
    spark.stop()
    print("RESULT " + json.dumps({"runs": out, "memory": mem.summary(), "peak": mem.peak}), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--features", action="append", default=[], help="NAME=DIR (repeatable)")
    ap.add_argument("--models", default="flat,dp-gt,dp-gt-bf")
    ap.add_argument("--masters", default="local[1],local[2]")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--shards", type=int, default=2)
    ap.add_argument("--driver-memory", default="8g")
    ap.add_argument("--section", default="train")
    ap.add_argument("--xw-seconds", type=float, help="skip the X.W pass and use this figure (from an earlier run)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--master", help=argparse.SUPPRESS)
    ap.add_argument("--path", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(a)
        return
    from sparkhc.features import features_taxonomy

    rows = []
    notes = []
    for item in a.features:
        dname, path = item.split("=", 1)
        tax = features_taxonomy(path)
        load0 = loadavg()
        if a.xw_seconds:
            xw = {"docs": 0, "seconds": a.xw_seconds, "docs_per_s": float("nan")}
        else:
            xw = xw_pass(path, tax.n_nodes - 1)
        print(f"[{dname}] X.W pass: {xw['docs']} docs in {xw['seconds']:.2f} s = {xw['docs_per_s']:.0f} docs/s "
              f"(load {load0})", flush=True)
        for master in a.masters.split(","):
            cmd = [sys.executable, __file__, "--child", "--master", master, "--path", path, "--models", a.models,
                   "--epochs", str(a.epochs), "--shards", str(a.shards), "--driver-memory", a.driver_memory]
            p = subprocess.run(cmd, capture_output=True, text=True)
            res = None
            for line in p.stdout.splitlines():
                if line.startswith("RESULT "):
                    res = json.loads(line[7:])
            log_file = Path(f"/tmp/bench_train_{dname}_{master.replace('[', '').replace(']', '')}.log")
            log_file.write_text(p.stderr, encoding="utf-8")
            if res is None:
                err = [ln for ln in p.stderr.splitlines() if "Error" in ln or "Exception" in ln][:3]
                notes.append(f"{dname} {master}: failed (exit {p.returncode}); stderr in {log_file}: {' / '.join(err)[:600]}")
                print(notes[-1], flush=True)
                continue
            for r in res["runs"]:
                last = r["epoch_seconds"][-1]
                row = (f"| {dname} | {r['model']} | {master} | {r['docs']} | {r['n_edges']} | "
                       f"{', '.join(f'{s:.1f}' for s in r['epoch_seconds'])} | {last:.1f} | {r['docs'] / last:.0f} | "
                       f"{xw['seconds']:.1f} ({xw['docs_per_s']:.0f} docs/s) | {last / xw['seconds']:.1f}x | "
                       f"{r['load']} |")
                rows.append(row)
                print(row, flush=True)
            notes.append(f"{dname} {master}: {res['memory']}")
            print(notes[-1], flush=True)
    body = (
        f"Command: `{command()}`  \nMachine: {machine()}  \nDate: {now()}\n\n"
        "Seconds per IPM epoch (each epoch listed; epoch 1 includes JIT compilation in the workers and caching "
        "the shards), docs/s of the last epoch, and one X.W pass (scipy CSR x dense float32, 1 thread, "
        "2,048-row blocks, same training rows, same run).\n\n"
        "| data | model | master | train docs | edges | s/epoch | last s | docs/s | X.W pass | epoch / X.W | load avg |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|\n" + "\n".join(rows) + "\n\n" + "\n".join(f"- {n}" for n in notes)
    )
    write_section(a.section, f"Training throughput ({a.section})", body)


if __name__ == "__main__":
    main()
