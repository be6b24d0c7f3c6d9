#!/usr/bin/env python
"""Variants of the global model against LIBLINEAR on a validation slice of the training part only
(issue 17: where the default trails LIBLINEAR, is the gap visible on validation data, and does a
setting close it?). The test split / test fold is never read.

    python benchmarks/validation_scan.py --features 20newsgroups=/tmp/acc/20newsgroups/features \\
        --variant "" --variant "model.global.C=0.1" --variant "model.global.average=true" --section validation-scan

Per corpus: the training part (split ``train``; cross-validation corpora: every fold but 0), less
the product's seeded validation slice (:func:`sparkhc.spark.hashing.validation_ids`, 10%, seed
``--seed``; with ``--folds K`` each of K disjoint bands of the same hash in turn), trains each variant (``--set``-style overrides, space-separated) in the driver with
``--shards`` shards (the product's IPM, :func:`sparkhc.spark.mixing.driver.train_on_driver`) for
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


def slice_band(doc_ids, seed: int, folds: int) -> np.ndarray:
    """The fold of each document: ``pmod(hash(doc_id, seed + 17), 10000)`` (the product's validation
    hash, :func:`sparkhc.spark.hashing.validation_ids`) cut into ``folds`` equal bands; band 0 of 10
    is the product's 10% validation slice."""
    from sparkhc.spark.hashing import spark_hash, spark_hash_int

    h = np.mod(spark_hash_int(int(seed) + 17, spark_hash(doc_ids)).astype(np.int64), 10000)
    return np.minimum(h * folds // 10000, folds - 1)


def newest_band(doc_ids, folds: int) -> np.ndarray:
    """The band of each document by age instead of by hash: the documents ranked within their doc-id
    prefix (the part before the last ``/``; 20newsgroups: the newsgroup) by the trailing integer of
    the id (a news server's article number, Reuters-21578's NEWID: the order of arrival), cut into
    ``folds`` equal bands; the last band holds the newest. A probe of the temporal shift of the
    corpora whose test split is later than their training part, not the product's validation."""
    import re

    ids = [str(d) for d in doc_ids]
    prefix = np.array([d.rsplit("/", 1)[0] if "/" in d else "" for d in ids])
    nums = []
    for d in ids:
        m = re.search(r"(\d+)$", d)
        if m is None:
            raise SystemExit(f"--order newest: doc id {d!r} does not end in a number")
        nums.append(int(m.group(1)))
    num = np.array(nums, dtype=np.int64)
    band = np.zeros(len(ids), dtype=np.int64)
    for pre in np.unique(prefix):
        rows = np.flatnonzero(prefix == pre)
        rank = np.empty(rows.size, dtype=np.int64)
        rank[np.argsort(num[rows], kind="stable")] = np.arange(rows.size)
        band[rows] = np.minimum(rank * folds // rows.size, folds - 1)
    return band


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--features", action="append", required=True, help="NAME=PATH")
    ap.add_argument("--variant", action="append", default=None, help="space-separated --set overrides ('' = defaults)")
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--shards", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--folds", type=int, default=1,
                    help="1: the product's 10%% validation slice only; K: K disjoint bands of the same hash in turn "
                         "(10: ten 10%% slices, the first the product's), metrics as mean ± sd over them")
    ap.add_argument("--order", choices=("hash", "newest"), default="hash",
                    help="hash: the product's validation hash; newest: bands by age within the doc-id prefix "
                         "(the last band the newest documents; see newest_band)")
    ap.add_argument("--band", type=int, action="append", default=[],
                    help="evaluate only these bands (default: all); e.g. --order newest --folds 10 --band 9")
    ap.add_argument("--section", default="validation-scan")
    a = ap.parse_args()
    from bench_peers import run_liblinear

    from sparkhc.batch import SparseBatch, label_matrix
    from sparkhc.config import load_config
    from sparkhc.epochs import EarlyStopping, validation_score
    from sparkhc.features import Selection, features_corpus_info, features_taxonomy, read_features_local
    from sparkhc.spark.mixing.driver import train_on_driver
    from sparkhc.spark.mixing.settings import Hooks, MixingSettings
    from sparkhc.spark.pipelines import new_model
    from sparkhc.spark.plan import label_combinations_of, sorted_by_id

    variants = a.variant if a.variant else [""]
    lines = []
    for item in a.features:
        name, path = item.split("=", 1)
        batch, spec = read_features_local(path, with_counts=False)
        has_test = bool(np.any(batch.extra["split"] == "test"))
        part = Selection("train") if has_test else Selection(exclude_fold=0)
        tr_idx = np.flatnonzero(part.mask(batch.extra.get("split"), batch.extra.get("fold")))
        tr = batch.subset(tr_idx)
        band = slice_band(tr.doc_ids, a.seed, a.folds) if a.order == "hash" else newest_band(tr.doc_ids, a.folds)
        tax0 = features_taxonomy(path)
        scored = features_corpus_info(path).get("scored_labels")
        results: dict[str, list[tuple[float, ...]]] = {}
        for k in a.band or range(a.folds):
            held = band == k  # fold 0 is the product's validation slice
            fit, val = tr.subset(np.flatnonzero(~held)), sorted_by_id(tr.subset(np.flatnonzero(held)))
            combos = label_combinations_of(fit)
            print(f"{name} fold {k}: {len(fit)} fit / {len(val)} validation documents ({part.describe()})", flush=True)
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
                train_on_driver(model, fit, MixingSettings(epochs=a.epochs, shards=a.shards, seed=a.seed), 0,
                                Hooks(on_epoch_state=on_epoch), threads=2)
                secs = time.perf_counter() - t0
                r = np.array(raw)
                best = stop.best
                smooth = r[max(0, best - 3):best].mean(axis=0)
                key = f"sparkhc global {v or '(defaults)'}, {a.shards} shards"
                results.setdefault(key, []).append((*smooth, float(best), secs))
                print(name, k, key, best, *(f"{x:.2f}" for x in smooth), flush=True)
            # LIBLINEAR on the same documents: the leaf columns of the model taxonomy of the fit rows
            # (virtual /_self leaves for the label sets of both parts: a leaf only the slice holds is a column
            # without training positives)
            both = SparseBatch.concat([fit, val])
            tax = new_model("global", load_config(), tax0, spec.n_features, None,
                            combos=label_combinations_of(both)).taxonomy
            leaf_cols = np.flatnonzero(tax.is_leaf)
            col_of = np.full(tax.n_nodes, -1)
            col_of[leaf_cols] = np.arange(leaf_cols.size)
            Y = np.zeros((len(both), leaf_cols.size), dtype=bool)
            for i, m in enumerate(both.leaf_sets(tax)):
                Y[i, col_of[np.asarray(m, dtype=np.int64)]] = True
            X = both.X.astype(np.float32).tocsr()
            ftr, fte = np.arange(len(fit)), np.arange(len(fit), len(both))
            gold = label_matrix(val.labels or [], tax)
            for C in (1.0, 0.5):
                t0 = time.perf_counter()
                _, _, P, _ = run_liblinear(X, Y, ftr, fte, 10**9, np.random.default_rng(0), C=C)
                secs = time.perf_counter() - t0
                got = score(tax, gold, [leaf_cols[np.flatnonzero(p)] for p in P], scored)
                results.setdefault(f"LIBLINEAR OvR C={C}", []).append((*got, float("nan"), secs))
                print(name, k, f"LIBLINEAR C={C}", *(f"{x:.2f}" for x in got), flush=True)
        ref = np.array(results["LIBLINEAR OvR C=1.0"])[:, :3]
        for key, vals in results.items():
            arr = np.array(vals)
            m, sd = arr.mean(axis=0), arr.std(axis=0, ddof=1) if len(arr) > 1 else np.zeros(arr.shape[1])
            epochs = "-" if np.isnan(arr[:, 3]).all() else ", ".join(str(int(e)) for e in arr[:, 3])
            cells = [f"{m[j]:.2f} ± {sd[j]:.2f}" if len(arr) > 1 else f"{m[j]:.2f}" for j in range(3)]
            if key != "LIBLINEAR OvR C=1.0" and len(arr) > 1:
                d = arr[:, :3] - ref
                se = d.std(axis=0, ddof=1) / np.sqrt(len(d))
                diff = "; ".join(f"{d[:, j].mean():+.2f} ± {se[j]:.2f}" for j in range(3))
            else:
                diff = "-"
            row = [name, key, epochs, *cells, diff, f"{arr[:, 4].sum():.1f}", loadavg()]
            print(" | ".join(row), flush=True)
            lines.append("| " + " | ".join(row) + " |")
    write_table_section(
        a.section, f"Variants against LIBLINEAR on validation data ({a.section})",
        "Validation data only (issue 17): each corpus's training part (cross-validation corpora: that of fold 0) "
        + (f"cut by the product's validation hash (seed {a.seed}) into {a.folds} disjoint band(s) (1: the product's 10% "
           "slice only; 10: ten 10% slices, the first the product's)" if a.order == "hash" else
           f"cut by age into {a.folds} bands (documents ranked within their doc-id prefix, e.g. the newsgroup, by the "
           "trailing number of the id: article number, NEWID; the last band the newest)")
        + (f", bands {', '.join(map(str, a.band))} only" if a.band else "")
        + ", each scored by models fitted on the rest; mean "
        "± sd over the bands and the mean paired difference to LIBLINEAR C=1 with its standard error. The test "
        "split / fold is not read. sparkhc rows: the epoch the product's rule picks within the run (first maximum of "
        "the 3-epoch trailing mean of hF + macro-F1 over every real node) and the smoothed metrics there; LIBLINEAR OvR on the same "
        "documents (every positive label, else the best). Percent; LB micro- and macro-F1 over the corpus's scored "
        "labels (as in compare-defaults; 20newsgroups: its 20 leaves), hF over the taxonomy.",
        ["corpus", "system", "epochs", "LB micro-F1", "LB macro-F1", "hF",
         "minus LIBLINEAR C=1 (micro; macro; hF), mean ± se", "train s", "load avg"], lines)


if __name__ == "__main__":
    main()
