#!/usr/bin/env python
"""Where the wall time of one ``sparkhc train`` goes (the product's default global model, as
``pipelines.train`` runs it from a features directory to a saved model), for the first training
of a new SparkSession and for the following ones in the same session; with ``--execution`` for each
``train.execution`` setting in turn (in this order, one session), and with ``--liblinear`` next to
LIBLINEAR one-vs-rest (scikit-learn LinearSVC C=1, the fit of ``bench_peers.run_liblinear``) on
the same training documents, in the same run.

    python benchmarks/profile_train.py --features /tmp/bench/feat_20newsgroups --repeat 3
    python benchmarks/profile_train.py --features F --execution auto,spark --liblinear --section smalljobs-20ng
    python benchmarks/profile_train.py --features F --execution auto,spark --liblinear --cli 3 --section smalljobs-20ng

Times the steps of ``pipelines.train`` by wrapping them (read and check the features, select the
rows, the label-combination job, IPM training = staging the shards + the barrier stage, or the
driver execution's read and epochs, saving). The Python imports and the session start-up are timed
separately.

``--cli K``: after the session is stopped, K fresh ``python -m sparkhc.cli train`` processes per
setting (the configuration's defaults but ``train.execution``, ``--master`` and epochs/shards as
above; checkpoints on, as a user's run): the whole process's wall time and its training part (the
``seconds`` it prints: ``pipelines.train`` from the features to the saved model), next to K fresh
LIBLINEAR processes (Python start, scikit-learn's import, the same training rows read with
pyarrow, the fit): a first training of a session against LIBLINEAR's first.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import command, loadavg, machine, now, write_section  # noqa: E402

STEPS = [("sparkhc.spark.plan", "read_rows"), ("sparkhc.spark.io", "read_features"),
         ("sparkhc.spark.pipelines", "select_rows"), ("sparkhc.spark.pipelines", "label_combinations"),
         ("sparkhc.spark.mixing.selection", "select_epochs"), ("sparkhc.spark.mixing.train", "train_ipm"),
         ("sparkhc.spark.mixing.driver", "train_on_driver"),
         ("sparkhc.spark.pipelines", "save_model")]
#: steps that run inside another step (not subtracted again for "other")
NESTED = {"train_on_driver", "select_epochs"}  # select_epochs: its validation training is in train_ipm


def main() -> None:
    import importlib

    ap = argparse.ArgumentParser()
    ap.add_argument("--features", required=True)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--epochs", type=int, default=0, help="train.epochs (0 = the default: chosen on validation)")
    ap.add_argument("--shards", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--section", default="profile-train")
    ap.add_argument("--execution", default="auto", help="train.execution settings, comma-separated, run in order")
    ap.add_argument("--liblinear", action="store_true", help="also time LIBLINEAR OvR on the same training rows")
    ap.add_argument("--liblinear-threads", type=int, default=2,
                    help="labels LIBLINEAR fits at a time (default 2: the cores of local[2], the same thread count)")
    ap.add_argument("--cli", type=int, default=0, metavar="K",
                    help="also K fresh `sparkhc train` processes per setting (and K LIBLINEAR processes with --liblinear)")
    ap.add_argument("--liblinear-process", action="store_true", help=argparse.SUPPRESS)  # the child of --cli
    a = ap.parse_args()
    if a.liblinear_process:
        return liblinear_process(a.features, a.liblinear_threads)
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
    lib_fit = None
    if a.liblinear:
        lib_notes, lib_fit = liblinear_notes(a.features, totals, a.execution.split(",")[0], a.liblinear_threads)
        notes += lib_notes
    cli_rows: list[str] = []
    if a.cli:
        cli_rows, cli_notes = cli_runs(a, lib_fit)
        notes += cli_notes
    head = "| training | train.execution | total | " + " | ".join(n for _, n in STEPS) + " | other | weights hash | load avg |"
    body = "\n".join([
        f"Command: `{command()}`  ", f"Machine: {machine()}  ", f"Date: {now()}", "",
        f"Seconds of one `pipelines.train` (the `sparkhc train` verb) on `{Path(a.features).name}`, "
        f"{a.master}, " + (f"{a.epochs} epochs" if a.epochs else "the epochs chosen on validation (`train.epochs = 0`, "
                           "the default: `select_epochs` = the validation training, scored after every epoch, and "
                           "its early stop; its training is also counted in `train_ipm`, which then holds both)")
        + f", {a.shards} shards, the default global model. `train_ipm` = staging the "
        "shards + the barrier stage on Spark, or `train_on_driver` (nested in it) in the driver execution; "
        "`read_rows` = the driver execution's pyarrow read and selection.", "",
        head, "|" + "---|" * (len(STEPS) + 6),
        *rows, "", *notes,
        *(["", f"Fresh processes (`--cli {a.cli}`), seconds: the whole process (Python start to exit) and its training "
            "part (`pipelines.train`: features to saved model, as the verb prints it, less the Spark session start-up that "
            "the Spark path pays inside it, which has its own column); LIBLINEAR: Python start, "
            "scikit-learn import, pyarrow read of the same features, the OvR fit.", "",
            "| process | train.execution | process wall | training part | Spark session start-up | Spark session started "
            "| weights hash | load avg |", "|---|---|---|---|---|---|---|---|", *cli_rows] if cli_rows else []),
    ])
    write_section(a.section, f"Where one training's time goes ({a.section})", body)


def liblinear_notes(features: str, totals: dict[str, list[float]], execution: str,
                    threads: int) -> tuple[list[str], float]:
    """LIBLINEAR's training time on the same training documents (twice: the first pays scikit-learn's
    imports) and the ratios of the ``execution`` trainings to it."""
    import numpy as np
    from bench_peers import load, run_liblinear

    batch, _, _, _, Y, tr, te = load(features)
    X = batch.X.astype(np.float32).tocsr()
    fits = [run_liblinear(X, Y, tr, te, 10**9, np.random.default_rng(0), threads=threads)[0] for _ in range(2)]
    lib = fits[-1]
    mine = totals[execution]
    warm = mine[1:] or mine
    out = [f"- LIBLINEAR OvR (LinearSVC C=1, 1 process, {threads} thread(s), {Y.shape[1]} labels, {tr.size} training documents, fit only): "
           f"{fits[0]:.2f} s (first, with imports), {lib:.2f} s (again) (load {loadavg()})",
           f"- train.execution={execution}: first training of the session {mine[0]:.2f} s = {mine[0] / lib:.2f}x "
           f"LIBLINEAR (target <= 3x: {'met' if mine[0] <= 3 * lib else 'not met'}); warm trainings "
           f"{', '.join(f'{v:.2f}' for v in warm)} s, mean {sum(warm) / len(warm):.2f} s = "
           f"{sum(warm) / len(warm) / lib:.2f}x LIBLINEAR (target <= 1.5x: "
           f"{'met' if sum(warm) / len(warm) <= 1.5 * lib else 'not met'})"]
    for ex, v in totals.items():
        print(f"{ex}: {', '.join(f'{x:.2f}' for x in v)}", flush=True)
    print("\n".join(out), flush=True)
    return out, lib


def liblinear_process(features: str, threads: int) -> None:
    """The child of ``--cli``: scikit-learn's import, the features read, the LIBLINEAR fit; prints
    the import and fit seconds as JSON."""
    t0 = time.perf_counter()
    import numpy as np
    from sklearn.svm import LinearSVC  # noqa: F401  (the import a first LIBLINEAR run pays)

    t_imp = time.perf_counter() - t0
    from bench_peers import load, run_liblinear

    t = time.perf_counter()
    batch, _, _, _, Y, tr, te = load(features)
    X = batch.X.astype(np.float32).tocsr()
    t_read = time.perf_counter() - t
    fit = run_liblinear(X, Y, tr, te, 10**9, np.random.default_rng(0), threads=threads)[0]
    print(json.dumps({"import": t_imp, "read": t_read, "fit": fit}), flush=True)


def cli_runs(a: argparse.Namespace, lib_fit: float | None) -> tuple[list[str], list[str]]:
    """K fresh ``sparkhc train`` processes per setting and K fresh LIBLINEAR processes (rows, notes)."""
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    rows: list[str] = []
    walls: dict[str, list[float]] = {}
    parts: dict[str, list[float]] = {}
    starts: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for execution in a.execution.split(","):
            for _ in range(a.cli):
                code = ("import sys, runpy\n"
                        "sys.argv = ['sparkhc'] + sys.argv[1:]\n"
                        "try:\n    runpy.run_module('sparkhc.cli', run_name='__main__')\n"
                        "finally:\n    from sparkhc.spark import session\n"
                        "    print('SESSIONS', session.created, file=sys.stderr)\n")
                argv = [sys.executable, "-c", code, "train", "--features", a.features, "--out", str(Path(tmp) / "m"),
                        "--overwrite", "--master", a.master, "--set", f"train.execution={execution}",
                        "--set", f"train.epochs={a.epochs}", "--set", f"train.shards={a.shards}"]
                t = time.perf_counter()
                res = subprocess.run(argv, env=env, capture_output=True, text=True, cwd=root)
                wall = time.perf_counter() - t
                if res.returncode != 0:
                    raise SystemExit(f"sparkhc train failed ({res.returncode}): {res.stderr[-2000:]}")
                info = json.loads(res.stdout)
                started = [ln.split()[1] for ln in res.stderr.splitlines() if ln.startswith("SESSIONS")]
                walls.setdefault(execution, []).append(wall)
                part = float(info["seconds"]) - float(info.get("session_start_seconds", 0.0))
                parts.setdefault(execution, []).append(part)
                starts.setdefault(execution, []).append(float(info.get("session_start_seconds", 0.0)))
                row = ["sparkhc train", execution, f"{wall:.2f}", f"{part:.2f}", f"{starts[execution][-1]:.2f}",
                       "yes" if started and started[-1] != "0" else "no", str(info["weights_hash"]), loadavg()]
                print(" | ".join(row), flush=True)
                rows.append("| " + " | ".join(row) + " |")
        lib: list[tuple[float, dict[str, float]]] = []
        if a.liblinear:
            here = str(Path(__file__).resolve())
            for _ in range(a.cli):
                t = time.perf_counter()
                res = subprocess.run([sys.executable, here, "--features", a.features, "--liblinear-process",
                                      "--liblinear-threads", str(a.liblinear_threads)],
                                     env=env, capture_output=True, text=True, cwd=root)
                wall = time.perf_counter() - t
                if res.returncode != 0:
                    raise SystemExit(f"LIBLINEAR process failed: {res.stderr[-2000:]}")
                got = json.loads(res.stdout.strip().splitlines()[-1])
                lib.append((wall, got))
                row = ["LIBLINEAR OvR", "-", f"{wall:.2f}", f"{got['fit']:.2f} fit (+ {got['import']:.2f} sklearn import, "
                       f"{got['read']:.2f} read)", "-", "-", "-", loadavg()]
                print(" | ".join(row), flush=True)
                rows.append("| " + " | ".join(row) + " |")
    notes: list[str] = []

    def mean(v: list[float]) -> float:
        return sum(v) / len(v)

    if lib:
        lib_wall = mean([w for w, _ in lib])
        lib_first = mean([g["import"] + g["fit"] for _, g in lib])
        for ex in walls:
            w, p = mean(walls[ex]), mean(parts[ex])
            notes.append(
                f"- Fresh `sparkhc train`, train.execution={ex} (Spark session start-up {mean(starts[ex]):.2f} s, inside "
                f"the process wall, not in the training part): process {w:.2f} s = {w / lib_wall:.2f}x LIBLINEAR's "
                f"process ({lib_wall:.2f} s) (target <= 3x: {'met' if w <= 3 * lib_wall else 'not met'}); training part "
                f"{p:.2f} s = {p / lib_first:.2f}x LIBLINEAR's first fit with its import ({lib_first:.2f} s) "
                f"(target <= 3x: {'met' if p <= 3 * lib_first else 'not met'})"
                + (f", {p / lib_fit:.2f}x its warm fit ({lib_fit:.2f} s)" if lib_fit else ""))
    print("\n".join(notes), flush=True)
    return rows, notes


if __name__ == "__main__":
    main()
