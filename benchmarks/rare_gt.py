"""Rare labels (issue 17, part 3): cross-fitted per-edge offsets of the global model
(:mod:`sparkhc.calibration`, ``train.calibrate``), measured on one train/test round.

Per round: the training part is split into ``--folds`` seeded inner folds
(``explore_gt.validation_splits``); per inner fold a model (the default DP-GT-BF-CA, ``--shards``
in-process IPM, ``--epochs`` epochs, on the round's model taxonomy) is trained on the other folds
and scores the fold; the offsets are fitted on the pooled out-of-fold scores by exact line searches
(:func:`sparkhc.calibration.fit_offsets`); the validation table is the pooled out-of-fold objective
(each fold decoded with the offsets fitted on the other folds), and the choice is the product's
(``train.calibrate = "auto"``: the best combination when its validation gain is positive, else
none). Only then the model is trained on the whole training part and the test part is scored
without the offsets (the default) and with what was selected. Test labels are read after every choice is made.

    python benchmarks/rare_gt.py /tmp/rare/rcv1v2_subset --test-fold F > /tmp/rare/rcv1-F.json
    python benchmarks/rare_gt.py /tmp/rare/reuters21578 --test-split test > /tmp/rare/reuters.json
    python benchmarks/rare_gt.py --table /tmp/rare/*.json     # the docs/benchmarks.md section

``FEATURES`` is a folder made by ``sparkhc featurize --corpus NAME --data-dir ../shared/data --out FEATURES``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from sparkhc import calibration

_here = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("explore_gt", _here / "explore_gt.py")
assert _spec is not None and _spec.loader is not None
explore = importlib.util.module_from_spec(_spec)
sys.modules["explore_gt"] = explore
_spec.loader.exec_module(explore)

DEFAULT = "branching=True,update='cost_augmented',bias=0.3"
KEYS = ("LBMaF", "LBMiF", "EBF", "hF")


def run_round(rnd: Any, params: dict[str, Any], folds: int, epochs: int, shards: int, seed: int) -> dict[str, Any]:
    """Validation table, selection and test scores of one round (module docstring)."""
    t0 = time.perf_counter()
    cols = calibration.scored_columns(rnd.mtax)
    scores = []
    for fit_idx, val_idx in explore.validation_splits(len(rnd.train), 0.0, folds, seed):
        m = explore.train(rnd.train.subset(fit_idx), rnd.mtax, rnd.n_features, params, epochs, shards, seed)
        scores.append(calibration.fold_scores(m, rnd.train.subset(val_idx)))
    idx = m._index
    R = int(params.get("R", 3))
    product = calibration.cross_fit(idx, scores, cols, R, mode="auto")
    validation = {k: round(v, 5) for k, v in product.validation.items()}
    t_cal = time.perf_counter() - t0
    model = explore.train(rnd.train, rnd.mtax, rnd.n_features, params, epochs, shards, seed)
    test_off = explore.evaluate(model, rnd.test, rnd.tax, rnd.mask)
    model.shift_edges(product.offsets)
    test_sel = explore.evaluate(model, rnd.test, rnd.tax, rnd.mask)
    return {
        "validation": validation, "selected": "offsets" if product.applied else "off",
        "nonzero_offsets": int(np.count_nonzero(product.offsets)),
        "offsets": [round(float(v), 6) for v in product.offsets],
        "test_off": {k: round(test_off[k], 5) for k in KEYS},
        "test_selected": {k: round(test_sel[k], 5) for k in KEYS},
        "calibration_seconds": round(t_cal, 1), "seconds": round(time.perf_counter() - t0, 1),
    }


INTRO = """Commands (one round each; then `--table` over the JSON files writes this section):

    python -m sparkhc.cli featurize --corpus NAME --data-dir /work/shared/data --out /tmp/rare/NAME
    python benchmarks/rare_gt.py /tmp/rare/rcv1v2_subset --test-fold F > /tmp/acc2/rx/rcv1-F.json   # F = 0..4
    python benchmarks/rare_gt.py /tmp/rare/reuters21578 --test-split test > /tmp/acc2/rx/reuters.json
    python benchmarks/rare_gt.py /tmp/rare/20newsgroups --test-split test > /tmp/acc2/rx/20ng.json
    python benchmarks/rare_gt.py --table /tmp/acc2/rx/*.json --write

The default global model (DP-GT-BF-CA, 10 epochs, 2 shards of in-process IPM = `train.shards` 0 on
this 2-core machine); 4 inner folds of the training part (`train.calibration_folds`); the product's
`sparkhc.calibration.cross_fit` with `mode="auto"` (offsets fitted on the pooled out-of-fold scores
by an exact line search per edge, `MAX_SHIFT` 3, `SWEEPS` 3; the honest estimate decodes each fold
with the offsets fitted on the other folds). Macro-F1 in the validation table is over the model
taxonomy's real nodes (what the product can see), in the test table over the corpus's scored labels
(LB macro-F1 of `MetricCounts`).
"""


def table(paths: list[str]) -> str:
    rows = [json.loads(Path(p).read_text()) for p in paths]
    rows.sort(key=lambda r: (r["corpus"], r["round"]))
    out = ["Validation (pooled out-of-fold over the inner folds of the training part; objective = macro-F1 + "
           "micro-F1 over the model taxonomy's real nodes; each fold decoded with the offsets fitted on the other "
           "folds):", "",
           "| corpus | round | macro off | micro off | macro on | micro on | gain | selected (auto) |",
           "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        v = r["validation"]
        out.append(f"| {r['corpus']} | {r['round']} | {100 * v['macro_off']:.2f} | {100 * v['micro_off']:.2f} | "
                   f"{100 * v['macro_on']:.2f} | {100 * v['micro_on']:.2f} | {100 * v['gain']:+.2f} | "
                   f"{r['selected']} ({r['nonzero_offsets']} offsets) |")
    out += ["", "Test (scored after the selection; `off` = the default model, `auto` = what `train.calibrate = "
            "\"auto\"` selected):", "",
            "| corpus | round | LBMaF off / auto | LBMiF off / auto | EBF off / auto | hF off / auto |",
            "|---|---|---|---|---|---|"]
    by: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by.setdefault(r["corpus"], []).append(r)
        out.append(f"| {r['corpus']} | {r['round']} | " + " | ".join(
            f"{100 * r['test_off'][k]:.2f} / {100 * r['test_selected'][k]:.2f}" for k in KEYS) + " |")
    for c, rs in by.items():
        if len(rs) > 1:
            out.append(f"| {c} | mean of {len(rs)} | " + " | ".join(
                f"{100 * np.mean([r['test_off'][k] for r in rs]):.2f} / "
                f"{100 * np.mean([r['test_selected'][k] for r in rs]):.2f}" for k in KEYS) + " |")
    return "\n".join(out) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("features", nargs="?")
    ap.add_argument("--test-fold", type=int, default=None)
    ap.add_argument("--test-split", default=None)
    ap.add_argument("--folds", type=int, default=4, help="inner folds of the training part")
    ap.add_argument("--shards", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--variant", default=DEFAULT)
    ap.add_argument("--table", nargs="+", default=None, help="JSON outputs of rounds: print the markdown tables")
    ap.add_argument("--write", action="store_true", help="--table: also write the docs/benchmarks.md section")
    a = ap.parse_args()
    if a.table:
        body = table(a.table)
        print(body, end="")
        if a.write:
            sys.path.insert(0, str(_here))
            from _common import write_section

            write_section("rare-exact", "Rare labels: per-edge offsets by exact line search on pooled out-of-fold "
                          "scores (rare-exact, issue 17 part 3)",
                          INTRO + "\n" + body)
        return
    rnd = explore.load_round(a.features, a.test_fold, a.test_split)
    res = run_round(rnd, explore.parse_variant(a.variant), a.folds, a.epochs, a.shards, a.seed)
    res.update({"corpus": Path(a.features).name, "round": f"fold {a.test_fold}" if a.test_split is None else
                a.test_split, "folds": a.folds, "shards": a.shards, "epochs": a.epochs, "variant": a.variant})
    print(json.dumps(res), flush=True)


if __name__ == "__main__":
    main()
