"""Accuracy against the number of shards (issue 17): for each corpus and shard count, the global
model trained by iterative parameter mixing simulated in process (``benchmarks/explore_gt.py``,
checked against the Spark mixing code), scored on the corpus protocol's test part:

* ``fixed``: the old default, 10 epochs;
* ``selected``: the number of epochs (1..``--max-epochs``) chosen on a seeded validation slice of
  20% of the training part, then the model retrained on the whole training part for that many
  epochs; the test part is scored after the selection only.

    python benchmarks/mixing_table.py --features-root /tmp/acc --out /tmp/acc/mixing.md \\
        [--corpus rcv1v2_subset --corpus reuters21578 --corpus 20newsgroups] [--shards 1 --shards 2 --shards 10]

``FEATURES_ROOT/CORPUS/features`` are made by ``sparkhc featurize --corpus CORPUS --data-dir ../shared/data``.
Prints one line per (corpus, round, shards) and writes the markdown table (means over the rounds:
the 5 folds of rcv1v2_subset, the one split of the others).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from pathlib import Path

import numpy as np

_spec = importlib.util.spec_from_file_location("explore_gt", Path(__file__).with_name("explore_gt.py"))
assert _spec is not None and _spec.loader is not None
explore = importlib.util.module_from_spec(_spec)
sys.modules["explore_gt"] = explore
_spec.loader.exec_module(explore)

ROUNDS = {"rcv1v2_subset": [("fold", f) for f in range(5)], "reuters21578": [("split", "test")],
          "20newsgroups": [("split", "test")]}
KEYS = ("hF", "LBMiF", "LBMaF", "EBF")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--features-root", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--corpus", action="append", default=[])
    ap.add_argument("--shards", action="append", type=int, default=[])
    ap.add_argument("--variant", default="branching=True,update='cost_augmented',bias=0.3")
    ap.add_argument("--max-epochs", type=int, default=30)
    ap.add_argument("--fixed-epochs", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    corpora = a.corpus or list(ROUNDS)
    shard_counts = a.shards or [1, 2, 10]
    rows: dict[tuple[str, int], list[dict[str, float]]] = {}
    for corpus in corpora:
        feats = str(Path(a.features_root) / corpus / "features")
        for kind, val in ROUNDS[corpus]:
            rnd = explore.load_round(feats, val if kind == "fold" else None, val if kind == "split" else None)
            for k in shard_counts:
                t0 = time.perf_counter()
                sel, _, test = explore.select_and_test(rnd, [a.variant], a.max_epochs, k, a.seed,
                                                       also_epochs=a.fixed_epochs)
                r = {**{k2: test[k2] for k2 in KEYS}, **{"fixed_" + k2: test["fixed_" + k2] for k2 in KEYS},
                     "epochs": float(sel.epochs), "val_hF": sel.table[sel.variant][sel.epochs - 1]["hF"]}
                rows.setdefault((corpus, k), []).append(r)
                print(json.dumps({"corpus": corpus, kind: val, "shards": k, **r,
                                  "seconds": round(time.perf_counter() - t0, 1)}), flush=True)
    lines = [f"| corpus | shards | hF, {a.fixed_epochs} epochs | hF, selected epochs | epochs selected | "
             "LBMiF | LBMaF | EBF (fixed / selected) |", "|---|---|---|---|---|---|---|---|"]
    for (corpus, k), rs in rows.items():
        def m(key: str, _rs: list[dict[str, float]] = rs) -> str:
            v = np.array([r[key] for r in _rs]) * 100
            return f"{v.mean():.2f}" + (f" ± {v.std():.2f}" if len(v) > 1 else "")
        ep = ", ".join(str(int(r["epochs"])) for r in rs)
        lines.append(f"| {corpus} | {k} | {m('fixed_hF')} | {m('hF')} | {ep} | {m('fixed_LBMiF')} / {m('LBMiF')} | "
                     f"{m('fixed_LBMaF')} / {m('LBMaF')} | {m('fixed_EBF')} / {m('EBF')} |")
    Path(a.out).write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
