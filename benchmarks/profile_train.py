#!/usr/bin/env python
"""Where the wall time of one ``sparkhc train`` goes (the product's default global model, as
``pipelines.train`` runs it from a features directory to a saved model), for the first training
of a new SparkSession and for the following ones in the same session; with ``--execution`` for each
``train.execution`` setting in turn (in this order, one session), and with ``--liblinear`` next to
LIBLINEAR one-vs-rest (scikit-learn LinearSVC C=1, the fit of ``bench_peers.run_liblinear``) on
the same training documents, in the same run.

    python benchmarks/profile_train.py --features /tmp/bench/feat_20newsgroups --repeat 3
    python benchmarks/profile_train.py --features F --execution auto,spark --liblinear --section smalljobs-20ng

Times the steps of ``pipelines.train`` by wrapping them (read and check the features, select the
rows, the label-combination job, IPM training = staging the shards + the barrier stage, or the
driver execution's read and epochs, saving). The Python imports and the session start-up are timed
separately.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import command, loadavg, machine, now, write_section  # noqa: E402

STEPS = [("sparkhc.spark.small", "read_rows"), ("sparkhc.spark.io", "read_features"),
         ("sparkhc.spark.pipelines", "select_rows"), ("sparkhc.spark.pipelines", "label_combinations"),
         ("sparkhc.spark.ipm", "train_ipm"), ("sparkhc.spark.ipm", "train_on_driver"),
         ("sparkhc.spark.pipelines", "save_model")]
#: steps that run inside another step (not subtracted again for "other")
NESTED = {"train_on_driver"}


def main() -> None:
    import importlib

    ap = argparse.ArgumentParser()
    ap.add_argument("--features", required=True)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--shards", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--section", default="profile-train")
    ap.add_argument("--execution", default="auto", help="train.execution settings, comma-separated, run in order")
    ap.add_argument("--liblinear", action="store_true", help="also time LIBLINEAR OvR on the same training rows")
    a = ap.parse_args()
    t_imp = time.perf_counter()

    times: dict[str, float] = {}

    def wrap(mod: Any, name: str) -> None:
        f = getattr(mod, name)

        def timed(*args: Any, **kw: Any) -> Any:
            t = time.perf_counter()
            try:
                return f(*args, **kw)
            finally:
                times[name] = times.get(name, 0.0) + time.perf_counter() - t

        setattr(mod, name, timed)

    for mod, name in STEPS:
        wrap(importlib.import_module(mod), name)
    from sparkhc.config import load_config
    from sparkhc.spark import pipelines
    from sparkhc.spark.session import get_session

    imports = time.perf_counter() - t_imp
    t = time.perf_counter()
    spark = get_session(master=a.master)
    startup = time.perf_counter() - t
    rows = []
    totals: dict[str, list[float]] = {}
    first = True
    with tempfile.TemporaryDirectory() as tmp:
        for execution in a.execution.split(","):
            cfg = load_config(overrides=[f"train.epochs={a.epochs}", f"train.shards={a.shards}",
                                         "train.checkpoint=false", f"train.execution={execution}"])
            for i in range(a.repeat):
                times.clear()
                t = time.perf_counter()
                info = pipelines.train(spark, cfg, a.features, Path(tmp) / "model", overwrite=True)
                total = time.perf_counter() - t
                rest = total - sum(v for k, v in times.items() if k not in NESTED)
                when = "first in session" if first else ("first with this setting" if i == 0 else f"again ({i + 1})")
                first = False
                totals.setdefault(execution, []).append(total)
                row = [when, execution, f"{total:.2f}", *(f"{times.get(n, 0.0):.2f}" for _, n in STEPS),
                       f"{rest:.2f}", str(info["weights_hash"]), loadavg()]
                print(" | ".join(row), flush=True)
                rows.append("| " + " | ".join(row) + " |")
    spark.stop()
    notes = [f"- Python imports of the script (sparkhc, pyspark, numpy, scipy, numba): {imports:.1f} s; Spark session "
             f"start-up: {startup:.1f} s; both excluded from the rows"]
    if a.liblinear:
        notes += liblinear_notes(a.features, totals, a.execution.split(",")[0])
    head = "| training | train.execution | total | " + " | ".join(n for _, n in STEPS) + " | other | weights hash | load avg |"
    body = "\n".join([
        f"Command: `{command()}`  ", f"Machine: {machine()}  ", f"Date: {now()}", "",
        f"Seconds of one `pipelines.train` (the `sparkhc train` verb) on `{Path(a.features).name}`, "
        f"{a.master}, {a.epochs} epochs, {a.shards} shards, the default global model. `train_ipm` = staging the "
        "shards + the barrier stage on Spark, or `train_on_driver` (nested in it) in the driver execution; "
        "`read_rows` = the driver execution's pyarrow read and selection.", "",
        head, "|" + "---|" * (len(STEPS) + 6),
        *rows, "", *notes,
    ])
    write_section(a.section, f"Where one training's time goes ({a.section})", body)


def liblinear_notes(features: str, totals: dict[str, list[float]], execution: str) -> list[str]:
    """LIBLINEAR's training time on the same training documents (twice: the first pays scikit-learn's
    imports) and the ratios of the ``execution`` trainings to it."""
    import numpy as np
    from bench_peers import load, run_liblinear

    batch, _, _, _, Y, tr, te = load(features)
    X = batch.X.astype(np.float32).tocsr()
    fits = [run_liblinear(X, Y, tr, te, 10**9, np.random.default_rng(0))[0] for _ in range(2)]
    lib = fits[-1]
    mine = totals[execution]
    warm = mine[1:] or mine
    out = [f"- LIBLINEAR OvR (LinearSVC C=1, 1 process, {Y.shape[1]} labels, {tr.size} training documents, fit only): "
           f"{fits[0]:.2f} s (first, with imports), {lib:.2f} s (again) (load {loadavg()})",
           f"- train.execution={execution}: first training of the session {mine[0]:.2f} s = {mine[0] / lib:.2f}x "
           f"LIBLINEAR (target <= 3x: {'met' if mine[0] <= 3 * lib else 'not met'}); warm trainings "
           f"{', '.join(f'{v:.2f}' for v in warm)} s, mean {sum(warm) / len(warm):.2f} s = "
           f"{sum(warm) / len(warm) / lib:.2f}x LIBLINEAR (target <= 1.5x: "
           f"{'met' if sum(warm) / len(warm) <= 1.5 * lib else 'not met'})"]
    for ex, v in totals.items():
        print(f"{ex}: {', '.join(f'{x:.2f}' for x in v)}", flush=True)
    print("\n".join(out), flush=True)
    return out


if __name__ == "__main__":
    main()
