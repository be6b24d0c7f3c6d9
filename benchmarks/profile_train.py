#!/usr/bin/env python
"""Where the wall time of one ``sparkhc train`` goes (the product's default global model, as
``pipelines.train`` runs it from a features directory to a saved model), for the first training
of a new SparkSession and for the following ones in the same session.

    python benchmarks/profile_train.py --features /tmp/bench/feat_20newsgroups --repeat 3

Times the steps of ``pipelines.train`` by wrapping them (read and check the features, select the
rows, the label-combination job, IPM training = staging the shards + the barrier stage, saving).
The session start-up is timed separately.
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

STEPS = [("sparkhc.spark.io", "read_features"), ("sparkhc.spark.pipelines", "select_rows"),
         ("sparkhc.spark.pipelines", "label_combinations"), ("sparkhc.spark.ipm", "train_ipm"),
         ("sparkhc.spark.pipelines", "save_model")]


def main() -> None:
    import importlib

    ap = argparse.ArgumentParser()
    ap.add_argument("--features", required=True)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--shards", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--section", default="profile-train")
    a = ap.parse_args()

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

    t = time.perf_counter()
    spark = get_session(master=a.master)
    startup = time.perf_counter() - t
    cfg = load_config(overrides=[f"train.epochs={a.epochs}", f"train.shards={a.shards}", "train.checkpoint=false"])
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(a.repeat):
            times.clear()
            t = time.perf_counter()
            pipelines.train(spark, cfg, a.features, Path(tmp) / "model", overwrite=True)
            total = time.perf_counter() - t
            rest = total - sum(times.values())
            row = [("first in session" if i == 0 else f"again ({i + 1})"), f"{total:.2f}",
                   *(f"{times.get(n, 0.0):.2f}" for _, n in STEPS), f"{rest:.2f}", loadavg()]
            print(" | ".join(row), flush=True)
            rows.append("| " + " | ".join(row) + " |")
    spark.stop()
    body = "\n".join([
        f"Command: `{command()}`  ", f"Machine: {machine()}  ", f"Date: {now()}", "",
        f"Seconds of one `pipelines.train` (the `sparkhc train` verb) on `{Path(a.features).name}`, "
        f"{a.master}, {a.epochs} epochs, {a.shards} shards, the default global model; the session start-up "
        f"({startup:.1f} s) is not included. `train_ipm` = staging the shards + the barrier stage.", "",
        "| training | total | read_features | select_rows | label_combinations | train_ipm | save_model | other | load avg |",
        "|---|---|---|---|---|---|---|---|---|",
        *rows,
    ])
    write_section(a.section, f"Where one training's time goes ({a.section})", body)


if __name__ == "__main__":
    main()
