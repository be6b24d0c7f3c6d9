#!/usr/bin/env python
"""Variants of the global model against LIBLINEAR on a validation slice of the training part only
(issue 17: where the default trails LIBLINEAR, is the gap visible on validation data, and does a
setting close it?). The test split / test fold is never read.

    python benchmarks/validation_scan.py --features 20newsgroups=/tmp/acc/20newsgroups/features \\
        --variant "" --variant "model.global.C=0.1" --variant "model.global.average=true" --section validation-scan

Per corpus: the training part (split ``train``; cross-validation corpora: every fold but 0), less
the product's seeded validation slice (:func:`sparkhc.spark.small.validation_ids`, 10%, seed
``--seed``), trains each variant (``--set``-style overrides, space-separated) in the driver with
``--shards`` shards (the product's IPM, :func:`sparkhc.spark.ipm.train_on_driver`) for
``--epochs`` epochs, scores the slice after every epoch and reports the epoch the product's rule
picks (:class:`sparkhc.epochs.EarlyStopping`: first maximum of the 3-epoch trailing mean of hF +
macro-F1 over every real node) with its smoothed metrics (LB metrics over the corpus's scored labels, as
``compare.py`` reports them). LIBLINEAR one-vs-rest (LinearSVC, C=1 and C=0.5; every positive
label, else the best: ``bench_peers.run_liblinear``) is fitted on the same documents and scored on
the same slice. Metrics in percent (``sparkhc.metrics``: LB micro-F1, LB macro-F1, hF).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import loadavg, write_table_section  # noqa: E402


def score(tax, gold, leaf_sets, scored_labels=None) -> tuple[float, float, float]:
    """(LB micro-F1, LB macro-F1, hF) in percent, the LB metrics over ``scored_labels`` (None:
    every real node, the product's epoch-selection criterion)."""
    from sparkhc.batch import leaf_matrix
    from sparkhc.metrics import MetricCounts

    c = MetricCounts(tax, scored_labels)
    c.add(gold, leaf_matrix(leaf_sets, tax))
    m = c.compute()
    return 100 * float(m["LBMiF"]), 100 * float(m["LBMaF"]), 100 * float(m["hF"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--features", action="append", required=True, help="NAME=PATH")
    ap.add_argument("--variant", action="append", default=None, help="space-separated --set overrides ('' = defaults)")
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--shards", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--section", default="validation-scan")
    a = ap.parse_args()
    from bench_peers import run_liblinear

    from sparkhc.batch import SparseBatch, label_matrix
    from sparkhc.config import load_config
    from sparkhc.epochs import EarlyStopping, validation_score
    from sparkhc.features import Selection, features_corpus_info, features_taxonomy, read_features_local
    from sparkhc.spark import ipm, small
    from sparkhc.spark.pipelines import new_model

    variants = a.variant if a.variant else [""]
    lines = []
    for item in a.features:
        name, path = item.split("=", 1)
        batch, spec = read_features_local(path, with_counts=False)
        has_test = bool(np.any(batch.extra["split"] == "test"))
        part = Selection("train") if has_test else Selection(exclude_fold=0)
        tr_idx = np.flatnonzero(part.mask(batch.extra.get("split"), batch.extra.get("fold")))
        tr = batch.subset(tr_idx)
        held = small.validation_ids(tr.doc_ids, 0.1, a.seed)
        fit, val = tr.subset(np.flatnonzero(~held)), small.sorted_by_id(tr.subset(np.flatnonzero(held)))
        tax0 = features_taxonomy(path)
        combos = small.label_combinations_of(fit)
        scored = features_corpus_info(path).get("scored_labels")
        print(f"{name}: {len(fit)} fit / {len(val)} validation documents ({part.describe()})", flush=True)
        for v in variants:
            cfg = load_config(overrides=v.split())
            model = new_model("global", cfg, tax0, spec.n_features, None, combos=combos)
            probe = new_model("global", cfg, tax0, spec.n_features, None, combos=combos)
            tax = model.taxonomy
            gold = label_matrix(val.labels or [], tax)
            stop = EarlyStopping(0)
            raw: list[tuple[float, float, float]] = []

            def on_epoch(e, state, probe=probe, tax=tax, gold=gold, stop=stop, raw=raw, val=val, scored=scored):
                probe.set_state(state)
                sets = probe.decode(val, return_scores=False)[0]
                _, ma_all, hf = score(tax, gold, sets)
                raw.append(score(tax, gold, sets, scored))
                stop.add(validation_score({"hF": hf, "LBMaF": ma_all}))  # the product's criterion

            model.set_state(model.init_state())
            t0 = time.perf_counter()
            ipm.train_on_driver(model, fit, a.epochs, 0, a.shards, a.seed, None, None, None, None,
                                on_epoch_state=on_epoch, threads=2)
            secs = time.perf_counter() - t0
            r = np.array(raw)
            best = stop.best
            smooth = r[max(0, best - 3):best].mean(axis=0)
            row = [name, f"sparkhc global {v or '(defaults)'}, {a.shards} shards", f"{best} of {a.epochs}",
                   *(f"{x:.2f}" for x in smooth), f"{secs:.1f}", loadavg()]
            print(" | ".join(row), flush=True)
            lines.append("| " + " | ".join(row) + " |")
        # LIBLINEAR on the same documents: the leaf columns of the model taxonomy of the fit rows
        model = new_model("global", load_config(), tax0, spec.n_features, None, combos=combos)
        tax = model.taxonomy
        leaf_cols = np.flatnonzero(tax.is_leaf)
        col_of = np.full(tax.n_nodes, -1)
        col_of[leaf_cols] = np.arange(leaf_cols.size)
        both = SparseBatch.concat([fit, val])
        sets = both.leaf_sets(tax)
        Y = np.zeros((len(both), leaf_cols.size), dtype=bool)
        for i, m in enumerate(sets):
            Y[i, col_of[np.asarray(m, dtype=np.int64)]] = True
        X = both.X.astype(np.float32).tocsr()
        ftr, fte = np.arange(len(fit)), np.arange(len(fit), len(both))
        gold = label_matrix(val.labels or [], tax)
        for C in (1.0, 0.5):
            t0 = time.perf_counter()
            _, _, P, _ = run_liblinear(X, Y, ftr, fte, 10**9, np.random.default_rng(0), C=C)
            secs = time.perf_counter() - t0
            pred = [leaf_cols[np.flatnonzero(p)] for p in P]
            mi, ma, hf = score(tax, gold, pred, scored)
            row = [name, f"LIBLINEAR OvR C={C}", "-", f"{mi:.2f}", f"{ma:.2f}", f"{hf:.2f}", f"{secs:.1f}", loadavg()]
            print(" | ".join(row), flush=True)
            lines.append("| " + " | ".join(row) + " |")
    write_table_section(
        a.section, f"Variants against LIBLINEAR on validation data ({a.section})",
        "Validation data only (issue 17): each corpus's training part less the product's seeded 10% validation "
        f"slice (seed {a.seed}; cross-validation corpora: the training part of fold 0), the slice scored; the test "
        "split / fold is not read. sparkhc rows: the epoch the product's rule picks within the run (first maximum of "
        "the 3-epoch trailing mean of hF + macro-F1 over every real node) and the smoothed metrics there; LIBLINEAR OvR on the same "
        "documents (every positive label, else the best). Percent; LB micro- and macro-F1 over the corpus's scored "
        "labels (as in compare-defaults; 20newsgroups: its 20 leaves), hF over the taxonomy.",
        ["corpus", "system", "epochs", "LB micro-F1", "LB macro-F1", "hF", "train s", "load avg"], lines)


if __name__ == "__main__":
    main()
