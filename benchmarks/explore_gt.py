"""Exploration (not a test): serial 10-epoch GT variants on one train/test round of a features
folder, to see what closes the gap to LIBLINEAR (issue 3).

    python benchmarks/explore_gt.py FEATURES --test-fold 0 --variant "branching=True" --variant "branching=True,C=0.1"
    python benchmarks/explore_gt.py FEATURES --test-split test --variant "branching=True" --epoch-average
    python benchmarks/explore_gt.py FEATURES --test-split test --shards 2 \
        --variant "branching=True" --variant "branching=True,update='cost_augmented',bias=0.3"

Prints EBF, LB micro-F1, hF and model size of each variant (with --epoch-average also of the
weights averaged over the epochs' end states). ``--shards K`` simulates iterative parameter mixing in
one process: K shards (a seeded random split of the training documents), each epoch every shard
runs ``partial_fit`` from the mixed state and the states are averaged (``combine_states``, the
code the Spark mixing is checked against).
"""

from __future__ import annotations

import argparse
import ast
import time

import numpy as np

from sparkhc.batch import label_matrix
from sparkhc.metrics import MetricCounts
from sparkhc.models import get_model_class
from sparkhc.models.base import ModelState, combine_states
from sparkhc.spark.io import read_features_local
from sparkhc.spark.pipelines import features_corpus_info, scored_mask
from sparkhc.taxonomy import Taxonomy


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("features")
    ap.add_argument("--test-fold", type=int, default=None)
    ap.add_argument("--test-split", default=None)
    ap.add_argument("--variant", action="append", default=[], help="global-model params, e.g. branching=True,C=0.1")
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--epoch-average", action="store_true")
    ap.add_argument("--shards", type=int, default=1)
    a = ap.parse_args()
    batch, spec = read_features_local(a.features, extra_columns=("split", "fold"))
    tax = Taxonomy.load(f"{a.features}/taxonomy.tsv")
    test = batch.extra["fold"] == a.test_fold if a.test_split is None else batch.extra["split"] == a.test_split
    train = ~test if a.test_split is None else batch.extra["split"] == "train"
    tr, te = batch.subset(np.flatnonzero(train)), batch.subset(np.flatnonzero(test))
    selfs = {int(c) for labs in tr.labels or [] for c in tax.deepest(tax.closure(tax.ids(labs))) if not tax.is_leaf[c]}
    mtax = tax.with_self_leaves(selfs) if selfs else tax
    mask = scored_mask(tax, features_corpus_info(a.features).get("scored_labels"))

    def score(model: object) -> str:
        counts = MetricCounts(tax, mask)
        counts.add(label_matrix(te.labels or [], tax), label_matrix(model.predict(te), tax))  # type: ignore[attr-defined]
        r = counts.compute()
        return f"EBF {r['EBF']:.4f} LBMiF {r['LBMiF']:.4f} hF {r['hF']:.4f} size {model.model_size()}"  # type: ignore[attr-defined]

    for v in a.variant:
        params = {k: ast.literal_eval(x) for k, x in (kv.split("=", 1) for kv in v.split(","))}
        model = get_model_class("global")(mtax, spec.n_features, **params)
        model.set_state(model.init_state())
        total: dict[str, np.ndarray] = {}
        t0 = time.perf_counter()
        part = np.random.default_rng(0).integers(0, a.shards, len(tr))
        subs = [tr.subset(np.flatnonzero(part == k)) for k in range(a.shards)] if a.shards > 1 else [tr]
        for e in range(a.epochs):
            if len(subs) == 1:
                model.partial_fit(tr, seed=0, epoch=e)
            else:
                states = []
                for k, sub in enumerate(subs):
                    m = get_model_class("global")(mtax, spec.n_features, **params)
                    m.set_state(model.get_state().copy())
                    m.partial_fit(sub, seed=k, epoch=e)
                    states.append(m.get_state())
                model.set_state(combine_states(states))
            for k, w in model.get_state().arrays.items():
                total[k] = total.get(k, 0) + w.astype(np.float64)
        print(f"{v}: final {score(model)} ({time.perf_counter() - t0:.0f} s)", flush=True)
        if a.epoch_average:
            avg = get_model_class("global")(mtax, spec.n_features, **params)
            avg.set_state(ModelState({k: (w / a.epochs).astype(np.float32) for k, w in total.items()}))
            print(f"{v}: epoch-averaged {score(avg)}", flush=True)


if __name__ == "__main__":
    main()
