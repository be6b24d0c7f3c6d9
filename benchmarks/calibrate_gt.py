"""Exploration (issue 17, part 3; not in the product): per-edge offsets of the global model's
scores, fitted on validation data, decoded by the same exact DP (rare labels).

An offset ``b_e`` added to the score of edge ``e`` for every document is a change of the learned
bias weight of that edge (``W[bias row, e] += b_e / bias``), so the calibrated model is a
``GlobalPA`` state like any other and its decoding stays the exact DP of the shifted scores.

Per round: the model (the default DP-GT-BF-CA, ``--shards`` in-process IPM, 10 epochs) is trained
on 80% of the training part; the offsets are fitted on the other 20% by coordinate ascent (two
sweeps over the edges; per edge, the shift from ``--grid`` maximising validation macro-F1 + hF over
the scored labels); the model is retrained on the whole training part and the offsets are added
to its bias row; the test part is scored with and without them (after the fit).

    python benchmarks/calibrate_gt.py /tmp/acc/rcv1v2_subset/features --test-fold 0 [--shards 2]
    python benchmarks/calibrate_gt.py /tmp/acc/reuters21578/features --test-split test
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from sparkhc.batch import label_matrix
from sparkhc.decoding import dp_solve

_spec = importlib.util.spec_from_file_location("explore_gt", Path(__file__).with_name("explore_gt.py"))
assert _spec is not None and _spec.loader is not None
explore = importlib.util.module_from_spec(_spec)
sys.modules["explore_gt"] = explore
_spec.loader.exec_module(explore)

GRID = (-0.6, -0.4, -0.25, -0.15, -0.08, -0.04, 0.0, 0.04, 0.08, 0.15, 0.25, 0.4, 0.6)


def objective(G: np.ndarray, P: np.ndarray, cols: np.ndarray) -> float:
    """Macro-F1 over the label columns ``cols`` (a label with no gold and no predicted document
    counts 1) plus micro-F1 over them (hF when ``cols`` are every real node)."""
    g, p = G[:, cols], P[:, cols]
    tp = (g & p).sum(0)
    fp = (~g & p).sum(0)
    fn = (g & ~p).sum(0)
    den = 2 * tp + fp + fn
    f1 = np.where(den > 0, 2 * tp / np.maximum(den, 1), 1.0)
    micro = 2 * tp.sum() / max(1, (2 * tp + fp + fn).sum())
    return float(f1.mean() + micro)


def fit_offsets(model: Any, val: Any, grid: tuple[float, ...] = GRID, sweeps: int = 2) -> np.ndarray:
    """Per-edge score offsets maximising :func:`objective` on ``val`` (coordinate ascent)."""
    tax = model.taxonomy
    idx = model._index
    X = model._prepare(val)
    S = model._scores_block(X).astype(np.float64)
    bf = model._bf()
    R = model._R if model._R is not None else 3
    G = label_matrix(val.labels or [], tax).toarray().astype(bool)
    cols = np.flatnonzero(~tax.virtual & (np.arange(tax.n_nodes) > 0))
    b = np.zeros(idx.n_edges)

    def value(off: np.ndarray) -> float:
        return objective(G, dp_solve(idx, S + off, bf=bf, R=R).selected, cols)

    best = value(b)
    for _ in range(sweeps):
        for e in range(idx.n_edges):
            cur = b[e]
            scores = []
            for d in grid:
                b[e] = cur + d
                scores.append(value(b))
            j = int(np.argmax(scores))
            if scores[j] > best + 1e-12:
                b[e], best = cur + grid[j], scores[j]
            else:
                b[e] = cur
    return b


def apply_offsets(model: Any, b: np.ndarray) -> None:
    """Add ``b`` to every document's edge scores through the bias row of ``W``."""
    bias = float(model.params["bias"])
    if bias <= 0:
        raise ValueError("offsets live in the bias row: the model needs bias > 0")
    W = model.get_state().arrays["W"]
    W[model.n_features] += (b / bias).astype(W.dtype)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("features")
    ap.add_argument("--test-fold", type=int, default=None)
    ap.add_argument("--test-split", default=None)
    ap.add_argument("--shards", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--variant", default="branching=True,update='cost_augmented',bias=0.3")
    a = ap.parse_args()
    rnd = explore.load_round(a.features, a.test_fold, a.test_split)
    params = explore.parse_variant(a.variant)
    (fit_idx, val_idx), = explore.validation_splits(len(rnd.train), 0.2, 0, a.seed)
    fit, val = rnd.train.subset(fit_idx), rnd.train.subset(val_idx)
    m_fit = explore.train(fit, explore.model_taxonomy(rnd.tax, fit), rnd.n_features, params, a.epochs, a.shards,
                          a.seed)
    if m_fit.taxonomy.n_nodes != rnd.mtax.n_nodes:
        raise SystemExit("the validation split changed the virtual leaves; not handled by this exploration")
    b = fit_offsets(m_fit, val)
    model = explore.train(rnd.train, rnd.mtax, rnd.n_features, params, a.epochs, a.shards, a.seed)
    before = explore.evaluate(model, rnd.test, rnd.tax, rnd.mask)
    apply_offsets(model, b)
    after = explore.evaluate(model, rnd.test, rnd.tax, rnd.mask)
    keys = ("hF", "LBMiF", "LBMaF", "EBF")
    print(json.dumps({"features": a.features, "fold": a.test_fold, "split": a.test_split, "shards": a.shards,
                      "offsets_nonzero": int(np.count_nonzero(b)),
                      "before": {k: round(before[k], 4) for k in keys}, "after": {k: round(after[k], 4) for k in keys}}),
          flush=True)


if __name__ == "__main__":
    main()
