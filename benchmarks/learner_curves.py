#!/usr/bin/env python
"""Validation curves of the global model's learner variants (issue 51; validation data only).

    python benchmarks/learner_curves.py --features 20newsgroups=/tmp/acc/20newsgroups/features \\
        --variant "train.step_scale=one" --variant "" --epochs 20 --shards 1 16 64 --section learner-shards

For each corpus the training part (split train, or every fold but 0) less the product's seeded 10%
validation band (:func:`sparkhc.spark.hashing.validation_ids`, seed ``--seed``) is trained by
:func:`sparkhc.spark.mixing.driver.train_on_driver` (the product's shards and mixing) for
``--epochs`` epochs, and after every epoch the band is decoded and scored by the product's
selection criterion (hF + LB macro-F1 over the model taxonomy's nodes,
:func:`sparkhc.epochs.validation_score`). Prints the curve, the epoch the product's rule would pick
(:class:`sparkhc.epochs.EarlyStopping`, patience ``--patience``) and the seconds. The test part is never read.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import loadavg, write_table_section  # noqa: E402

AT = (1, 5, 10, 20)  # epochs whose validation score the table shows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--features", action="append", required=True, help="NAME=PATH")
    ap.add_argument("--variant", action="append", default=[], help="space-separated --set overrides")
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--shards", type=int, nargs="+", default=[1])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--band-seed", type=int, default=None,
                    help="the validation band's seed (default --seed): fixed, so that only the training's seed moves")
    ap.add_argument("--patience", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--gap-tol", type=float, default=0.0,
                    help="model.global.solver = dcd: stop at this relative duality gap (0: run --epochs)")
    ap.add_argument("--section", default="", help="write the table to docs/benchmarks.md under this key")
    a = ap.parse_args()
    rows: list[str] = []

    from sparkhc.batch import label_matrix, leaf_matrix
    from sparkhc.config import load_config
    from sparkhc.epochs import EarlyStopping, validation_score
    from sparkhc.features import Selection, features_taxonomy, read_features_local
    from sparkhc.metrics import MetricCounts
    from sparkhc.spark.hashing import validation_ids
    from sparkhc.spark.mixing.driver import train_on_driver
    from sparkhc.spark.mixing.settings import Hooks, MixingSettings
    from sparkhc.spark.pipelines import new_model
    from sparkhc.spark.plan import label_combinations_of, sorted_by_id

    for item in a.features:
        name, path = item.split("=", 1)
        batch, spec = read_features_local(path, with_counts=False)
        has_test = bool(np.any(batch.extra["split"] == "test"))
        part = Selection("train") if has_test else Selection(exclude_fold=0)
        tr = batch.subset(np.flatnonzero(part.mask(batch.extra.get("split"), batch.extra.get("fold"))))
        held = validation_ids(tr.doc_ids, 0.1, a.seed if a.band_seed is None else a.band_seed, 0)
        fit, val = tr.subset(np.flatnonzero(~held)), sorted_by_id(tr.subset(np.flatnonzero(held)))
        tax0 = features_taxonomy(path)
        combos = label_combinations_of(fit)
        for shards, v in ((k, v) for k in a.shards for v in a.variant or [""]):
            cfg = load_config(overrides=v.split())
            model = new_model("global", cfg, tax0, spec.n_features, None, combos=combos)
            if model.params.get("C") == "auto":
                model.params["C"] = 0.3
            probe = new_model("global", cfg, tax0, spec.n_features, None, combos=combos)
            probe.params.update(model.params)
            tax = model.taxonomy
            gold = label_matrix(val.labels or [], tax)
            stop = EarlyStopping(a.patience)
            curve: list[float] = []
            t_ep: list[float] = []
            gaps: list[float] = []
            t0 = time.perf_counter()

            def on_epoch(e, state, probe=probe, tax=tax, gold=gold, stop=stop, curve=curve, val=val, t_ep=t_ep):
                t_ep.append(time.perf_counter())
                probe.set_state(state)
                counts = MetricCounts(tax)
                counts.add(gold, leaf_matrix(probe.decode(val, return_scores=False)[0], tax))
                s = validation_score(counts.compute_selection())
                curve.append(s)
                return stop.add(s)

            model.set_state(model.init_state())
            train_on_driver(model, fit, MixingSettings(epochs=a.epochs, shards=shards, seed=a.seed,
                                                       step_scale=cfg.train.step_scale, gap_tol=a.gap_tol), 0,
                            Hooks(on_epoch_state=on_epoch,
                                  progress=lambda info, gaps=gaps: gaps.append(info.get("rel_gap", float("nan")))),
                            threads=a.threads)
            secs = time.perf_counter() - t0
            c = np.array(curve)
            sm = np.convolve(c, np.ones(3) / 3, mode="full")[: len(c)]
            sm[:2] = [c[:1].mean(), c[:2].mean()][: len(sm[:2])]
            print(f"{name} [{v or 'defaults'}] shards={shards} seed={a.seed}: best={stop.best} "
                  f"max={c.max():.4f}@{int(c.argmax()) + 1} smooth_max={sm.max():.4f}@{int(sm.argmax()) + 1} "
                  f"epochs_run={len(c)} secs={secs:.1f}", flush=True)
            print("   curve " + " ".join(f"{x:.3f}" for x in c), flush=True)
            if gaps and not np.isnan(gaps[0]):
                print("   rel_gap " + " ".join(f"{x:.1e}" for x in gaps), flush=True)
            at = " | ".join(f"{c[e - 1]:.3f}" if e <= len(c) else "-" for e in AT)
            rows.append(f"| {name} | {v or '(defaults)'} | {shards} | {at} | {stop.best} | {sm.max():.3f} | "
                        f"{secs:.1f} |")
    if a.section:
        write_table_section(
            a.section, f"Validation curves of the learner ({a.section})",
            f"The training part less the product's seeded 10% validation band (seed {a.seed}), trained in this "
            f"process by the product's driver engine ({a.threads} threads) for {a.epochs} "
            "epochs, the band scored after every epoch by the selection criterion (hF + LB macro-F1 over the "
            "model taxonomy's nodes; at most 2). The test part is not read. Rule epoch: what the product's "
            f"EarlyStopping (trailing mean of 3, patience {a.patience}) picks within the epochs run. Load at the "
            f"end {loadavg()}.",
            ["corpus", "settings (`--set`)", "shards", *(f"epoch {e}" for e in AT), "rule epoch",
             "best trailing mean", "seconds"], rows)


if __name__ == "__main__":
    main()
