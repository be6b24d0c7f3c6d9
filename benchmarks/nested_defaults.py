#!/usr/bin/env python
"""Default trainings compared by nested validation on the training part only (the test split or
test fold is never read): how a change of the defaults is chosen on the development corpora.

    python benchmarks/nested_defaults.py --features rcv1v2_subset=/tmp/acc/rcv1v2_subset/features \\
        --variant "model.global.C=0.3 train.validation_folds=1" --variant "" --section nested-defaults

Per corpus: the training part (split ``train``; cross-validation corpora: every fold but 0) is cut
into ``--outer`` bands by a hash of the doc id with a salt of its own (``--outer-seed``, so the
outer bands are not the inner validation bands the product carves); for each band the product's
training (:func:`sparkhc.spark.training.fit_model` in this process: the epoch and C selection of
``train.epochs = 0`` / ``C = "auto"`` on inner folds of the rest, then the final training) runs
with each variant (``--set``-style overrides, space-separated; ``""`` = the shipped defaults) on the
other bands and predicts the band. Scores: LB micro-F1 / LB macro-F1 over the corpus's scored
labels, example-based F1 and hF (``benchmarks/compare.py``'s scorer), mean ± sd over the outer
bands, and the paired difference of each variant to the first with its standard error.
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

METRICS = (("LBMiF", "LB micro-F1"), ("LBMaF", "LB macro-F1"), ("EBF", "example F1"), ("hF", "hF"))


def outer_bands(doc_ids: np.ndarray, k: int, seed: int) -> np.ndarray:
    """The outer band of each document: ``pmod(hash(doc_id, seed), 10000)`` cut into ``k`` equal
    bands (Spark's Murmur3, :mod:`sparkhc.spark.hashing`; a salt other than the product's ``seed + 17``)."""
    from sparkhc.spark.hashing import spark_hash, spark_hash_int

    h = np.mod(spark_hash_int(int(seed), spark_hash(doc_ids)).astype(np.int64), 10000)
    return np.minimum(h * k // 10000, k - 1)


def run_variant(d, fit: np.ndarray, overrides: list[str], shards: int) -> tuple[object, dict]:
    from sparkhc.config import load_config
    from sparkhc.spark.pipelines import new_model
    from sparkhc.spark.plan import label_combinations_of
    from sparkhc.spark.session import deferred_session
    from sparkhc.spark.training import fit_model

    cfg = load_config(overrides=[*overrides, f"train.shards={shards}"])
    rows = d.batch.subset(fit)
    rows = rows.subset(np.flatnonzero([bool(labs) for labs in rows.labels]))
    model = new_model(cfg.train.model, cfg, d.taxonomy, d.batch.n_features, None,
                      combos=label_combinations_of(rows))
    session = deferred_session("nested_defaults", f"local[{shards}]")
    result = fit_model(session, None, model, cfg.train, rows=rows)
    sel = result.epoch_selection or {}
    cal = result.calibration or {}
    return model, {"epochs": result.epochs, "run": sel.get("epochs_run"), "C": model.params.get("C"),
                   "folds": sel.get("folds"), "applied": bool(cal.get("applied")),
                   "offsets": ("" if not cal or "skipped" in cal else
                               "/offsets " + ("applied" if cal.get("applied") else "not applied")
                               + (f" on {cal['bands']} bands" if cal.get("bands") else "")
                               + " ({:+.2f} ± {:.2f})".format(100 * cal["validation"].get("fold_gain_mean", 0.0),
                                                            100 * cal["validation"].get("fold_gain_se", 0.0)))}


def main() -> None:
    from compare import load, score

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--features", action="append", default=[], help="NAME=DIR (repeatable)")
    ap.add_argument("--variant", action="append", default=[], help="space-separated SECTION.KEY=VALUE (repeatable)")
    ap.add_argument("--outer", type=int, default=5)
    ap.add_argument("--outer-seed", type=int, default=101)
    ap.add_argument("--shards", type=int, default=2)
    ap.add_argument("--section", default="")
    args = ap.parse_args()
    variants = args.variant or [""]
    rows_out: list[str] = []
    load0 = loadavg()
    for spec in args.features:
        name, path = spec.split("=", 1)
        d = load(name, path)
        if d.cv:
            tr = np.flatnonzero(np.asarray(d.batch.extra["fold"], dtype=np.int64) != 0)
        else:
            tr = np.flatnonzero(d.batch.extra["split"] == "train")
        band = outer_bands(d.batch.doc_ids[tr], args.outer, args.outer_seed)
        res: dict[str, list[dict[str, float]]] = {v: [] for v in variants}
        info: dict[str, list[str]] = {v: [] for v in variants}
        secs: dict[str, float] = dict.fromkeys(variants, 0.0)
        for b in range(args.outer):
            fit, held = tr[band != b], tr[band == b]
            for v in variants:
                t0 = time.perf_counter()
                model, what = run_variant(d, fit, v.split(), args.shards)
                secs[v] += time.perf_counter() - t0
                m = score(d, held, model.predict(d.batch.subset(held)))
                res[v].append(m)
                info[v].append(f"C={what['C']:g}/{what['epochs']}ep/k={what['folds']}{what['offsets']}")
                print(f"{name} band {b} [{v or 'defaults'}] " + " ".join(f"{k}={100 * m[k]:.2f}" for k, _ in METRICS)
                      + f" ({info[v][-1]}, {time.perf_counter() - t0:.1f} s)", flush=True)
        base = variants[0]
        for v in variants:
            cells = []
            for k, _ in METRICS:
                a = 100 * np.array([r[k] for r in res[v]])
                cell = f"{a.mean():.2f} ± {a.std(ddof=1):.2f}"
                if v != base:
                    dlt = a - 100 * np.array([r[k] for r in res[base]])
                    cell += f" ({dlt.mean():+.2f} ± {dlt.std(ddof=1) / np.sqrt(len(dlt)):.2f})"
                cells.append(cell)
            rows_out.append(f"| {name} | {v or 'defaults'} | " + " | ".join(cells)
                            + f" | {secs[v] / args.outer:.1f} | {'; '.join(info[v])} |")
            print(rows_out[-1], flush=True)
    if args.section:
        write_table_section(
            args.section, "Default trainings by nested validation on the training part",
            f"Outer bands: {args.outer} (hash salt {args.outer_seed}) of each training part; every variant trained "
            f"by the product's fit_model in the driver with {args.shards} shards on the other bands and scored on the "
            "band. Percent, mean ± sd over the bands; in brackets the paired difference to the first row of the "
            f"corpus ± its standard error. Test splits and test folds are never read. Load average {load0}.",
            ["corpus", "variant", *[t for _, t in METRICS], "s / fit", "C / epochs / inner folds per band"],
            rows_out,
            # a later run of the same corpora and variants supersedes this one
            kind=f"nested_defaults.py on {','.join(sorted(f.split('=', 1)[0] for f in args.features))}; variants "
                 + " / ".join(v or "defaults" for v in variants))


if __name__ == "__main__":
    main()
