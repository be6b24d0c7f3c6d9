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
code the Spark mixing is checked against). ``--seed S`` changes the shard split and the shuffles
(to see the run-to-run spread). ``--flat-taxonomy`` trains on the taxonomy flattened (every leaf
directly under the root) and scores on the real one (what the hierarchy costs a one-leaf corpus).

Variant keys starting with ``dcd_`` select the in-process prototype of a structural SVM trained by
dual coordinate descent with per-example working sets (Chang & Yih 2013), instead of
``partial_fit``: ``dcd_slack='L2'`` (squared slack, squared hinge: the first step on a fresh
structure is exactly PA-II) or ``'L1'`` (``sum_y alpha_{i,y} <= C``), ``dcd_inner=n`` passes over
the working set of a document per visit, ``dcd_ws_passes=n`` extra passes per epoch over every
working set without inference, ``dcd_internal_margin=x`` the margin of edges into internal nodes
relative to edges into leaves (1: the Hamming margin of ``GlobalPA``; 0: leaf Hamming only). Per document the working set holds the label trees found by the
cost-augmented DP (``update='cost_augmented'`` is implied) with their dual weights; the coordinate
step of ``alpha_{i,y}`` re-optimises it (it may decrease to 0). With ``--shards K`` every shard keeps
the dual state of its documents; the mixing averages ``w``, so the epoch's change of each ``alpha``
is scaled by ``1/K`` (as CoCoA's averaging), which keeps ``w = sum alpha Delta Phi`` exact.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import time

import numpy as np

from sparkhc.batch import SparseBatch, label_matrix
from sparkhc.decoding import dp_solve_one, row_scores
from sparkhc.features import features_corpus_info, model_taxonomy, read_features_local, scored_mask
from sparkhc.metrics import MetricCounts
from sparkhc.models import get_model_class
from sparkhc.models.base import ModelState, combine_states, shuffled_order
from sparkhc.models.murawaki import GlobalPA, bf_difference
from sparkhc.taxonomy import Taxonomy


class DCDShard:
    """Dual state (working sets) of one shard's documents and the DCD epoch (see the docstring)."""

    def __init__(self, batch: SparseBatch, slack: str = "L2", inner: int = 1, ws_passes: int = 0,
                 internal_margin: float = 1.0) -> None:
        self.batch = batch
        self.slack, self.inner, self.ws_passes = slack, int(inner), int(ws_passes)
        self.internal_margin = float(internal_margin)
        # per document: key -> [plus cols, minus cols, bf indices, bf net, Delta, ||Delta Phi||^2, alpha, alpha0]
        self.ws: list[dict[bytes, list]] = [{} for _ in range(len(batch))]

    def epoch(self, model: GlobalPA, seed: int, epoch: int, n_shards: int) -> dict[str, float]:
        model._start_epoch()
        X = model._prepare(self.batch)
        R = model._R
        gold = model._gold(self.batch, X, R)
        idx = model._index
        W = model._weights("W", (model._n_rows, idx.n_edges))
        bf = model._bf()
        bf_flat = bf.reshape(-1) if bf is not None else None
        C = float(model.params["C"])
        aug = float(model.params["margin"])
        Rb = R if R is not None else 3
        n_nodes = idx.n_nodes
        internal = ~idx.is_leaf
        gm = np.zeros(n_nodes, dtype=bool)
        em = aug * np.where(idx.is_leaf[1:], 1.0, self.internal_margin)  # per-edge margin
        for d in self.ws:
            for st in d.values():
                st[7] = st[6]
        n_new = n_steps = 0
        for i in shuffled_order(len(self.batch), seed, epoch):
            a, b = X.indptr[i], X.indptr[i + 1]
            fi, fv = X.indices[a:b], X.data[a:b]
            s = row_scores(W, fi, fv).astype(np.float64)
            gm.fill(False)
            gm[0] = True
            gm[gold.nodes[gold.nodes_ptr[i] : gold.nodes_ptr[i + 1]]] = True
            sel, _, kk = dp_solve_one(idx, s + np.where(gm[1:], -em, em), bf, Rb)
            diff = sel != gm
            if diff.any():
                key = np.packbits(sel).tobytes()
                if key not in self.ws[i]:
                    plus = np.flatnonzero(diff & gm) - 1
                    minus = np.flatnonzero(diff & sel) - 1
                    u: np.ndarray = np.zeros(0, np.int64)
                    net: np.ndarray = np.zeros(0)
                    if bf_flat is not None:
                        assert kk is not None and gold.bf is not None and gold.bf_ptr is not None and R is not None
                        u, net = bf_difference(gold.bf[gold.bf_ptr[i] : gold.bf_ptr[i + 1]], sel, kk, internal, R)
                    n2 = (plus.size + minus.size) * float(gold.phi2[i]) + float(net @ net)
                    if n2 > 0:
                        self.ws[i][key] = [plus, minus, u, net, float(em[plus].sum() + em[minus].sum()), n2, 0.0, 0.0]
                        n_new += 1
            for _ in range(self.inner):
                n_steps += self._optimise(i, s, W, bf_flat, fi, fv, float(gold.phi2[i]), C)
        for _ in range(self.ws_passes):
            for i in shuffled_order(len(self.batch), seed + 1000, epoch):
                if self.ws[i]:
                    a, b = X.indptr[i], X.indptr[i + 1]
                    fi, fv = X.indices[a:b], X.data[a:b]
                    s = row_scores(W, fi, fv).astype(np.float64)
                    n_steps += self._optimise(i, s, W, bf_flat, fi, fv, float(gold.phi2[i]), C)
        n_sv = 0
        for d in self.ws:
            for st in d.values():
                st[6] = st[7] + (st[6] - st[7]) / n_shards
                n_sv += st[6] > 0
        return {"new": float(n_new), "steps": float(n_steps), "support": float(n_sv)}

    def _optimise(self, i: int, s: np.ndarray, W: np.ndarray, bf_flat: np.ndarray | None, fi: np.ndarray,
                  fv: np.ndarray, phi2: float, C: float) -> int:
        """One coordinate step per structure of document ``i``'s working set; ``s`` (the document's
        edge scores) is kept current."""
        steps = 0
        fv64 = fv.astype(np.float64)
        for st in self.ws[i].values():
            plus, minus, u, net, delta, n2, alpha = st[:7]
            lval = delta - (s[plus].sum() - s[minus].sum())
            if bf_flat is not None and u.size:
                lval -= float(bf_flat[u].astype(np.float64) @ net)
            tot = sum(t[6] for t in self.ws[i].values())
            if self.slack == "L2":
                d = max(-alpha, (lval - tot / (2 * C)) / (n2 + 0.5 / C))
            else:
                d = min(max(-alpha, lval / n2), C - tot)
            if abs(d) <= 1e-12:
                continue
            st[6] = alpha + d
            steps += 1
            if fi.size:
                cols = np.concatenate([plus, minus])
                sign = np.concatenate([np.full(plus.size, d), np.full(minus.size, -d)])
                W[fi[:, None], cols] += np.multiply.outer(fv64, sign)
            if bf_flat is not None and u.size:
                bf_flat[u] += d * net
            s[plus] += d * phi2
            s[minus] -= d * phi2
        return steps


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("features")
    ap.add_argument("--test-fold", type=int, default=None)
    ap.add_argument("--test-split", default=None)
    ap.add_argument("--variant", action="append", default=[], help="global-model params, e.g. branching=True,C=0.1")
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--epoch-average", action="store_true")
    ap.add_argument("--shards", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--flat-taxonomy", action="store_true",
                    help="train on the taxonomy flattened (every leaf under the root); scored on the real one")
    a = ap.parse_args()
    batch, spec = read_features_local(a.features, extra_columns=("split", "fold"))
    tax = Taxonomy.load(f"{a.features}/taxonomy.tsv")
    test = batch.extra["fold"] == a.test_fold if a.test_split is None else batch.extra["split"] == a.test_split
    train = ~test if a.test_split is None else batch.extra["split"] == "train"
    tr, te = batch.subset(np.flatnonzero(train)), batch.subset(np.flatnonzero(test))
    mtax = model_taxonomy(tax, tr.labels or [])
    if a.flat_taxonomy:
        if mtax is not tax:
            raise SystemExit("--flat-taxonomy: the training labels include internal nodes; flat only for leaf labels")
        mtax = Taxonomy.from_edges([(tax.names[0], tax.names[int(c)]) for c in tax.leaves])
        # gold label sets may list the leaves' ancestors (ancestor-closed corpora): keep the leaves
        tr = dataclasses.replace(tr, labels=[[x for x in labs if x in mtax] for labs in tr.labels or []])
    mask = scored_mask(tax, features_corpus_info(a.features).get("scored_labels"))

    def score(model: object) -> str:
        counts = MetricCounts(tax, mask)
        counts.add(label_matrix(te.labels or [], tax), label_matrix(model.predict(te), tax))  # type: ignore[attr-defined]
        r = counts.compute()
        return f"EBF {r['EBF']:.4f} LBMiF {r['LBMiF']:.4f} hF {r['hF']:.4f} size {model.model_size()}"  # type: ignore[attr-defined]

    for v in a.variant:
        params = {k: ast.literal_eval(x) for k, x in (kv.split("=", 1) for kv in v.split(","))}
        dcd = {k[4:]: params.pop(k) for k in list(params) if k.startswith("dcd_")}
        if dcd:
            params["update"] = "cost_augmented"
        model = get_model_class("global")(mtax, spec.n_features, **params)
        model.set_state(model.init_state())
        total: dict[str, np.ndarray] = {}
        t0 = time.perf_counter()
        part = np.random.default_rng(a.seed).integers(0, a.shards, len(tr))
        subs = [tr.subset(np.flatnonzero(part == k)) for k in range(a.shards)] if a.shards > 1 else [tr]
        duals = [DCDShard(sub, **dcd) for sub in subs] if dcd else []
        for e in range(a.epochs):
            if len(subs) == 1:
                if duals:
                    duals[0].epoch(model, seed=a.seed, epoch=e, n_shards=1)
                else:
                    model.partial_fit(tr, seed=a.seed, epoch=e)
            else:
                states = []
                for k, sub in enumerate(subs):
                    m = get_model_class("global")(mtax, spec.n_features, **params)
                    m.set_state(model.get_state().copy())
                    if duals:
                        duals[k].epoch(m, seed=a.seed * 100 + k, epoch=e, n_shards=len(subs))
                    else:
                        m.partial_fit(sub, seed=a.seed * 100 + k, epoch=e)
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
