"""Exploration (not a test): serial 10-epoch GT variants on one train/test round of a features
folder, to see what closes the gap to LIBLINEAR (issue 3).

    python benchmarks/explore_gt.py FEATURES --test-fold 0 --variant "branching=True" --variant "branching=True,C=0.1"
    python benchmarks/explore_gt.py FEATURES --test-split test --variant "branching=True" --epoch-average
    python benchmarks/explore_gt.py FEATURES --test-split test --shards 2 \
        --variant "branching=True" --variant "branching=True,update='cost_augmented',bias=0.3"

    python benchmarks/explore_gt.py FEATURES --test-fold 0 --shards 10 --epochs 50 --select \
        --variant "branching=True,update='cost_augmented',bias=0.3" --variant "...,average=True"

``--select`` (issue 17): every choice on validation data carved out of the TRAINING part (a seeded
``--val-fraction`` slice, or ``--inner-folds`` k folds): each variant is trained on the rest and
scored on it after every epoch; the variant and the epoch count (``--fixed-epochs``: the variant
only) with the best validation ``--metric`` are retrained on the whole training part and only that
model is scored on the test part (``select_and_test``; a test checks that poisoned test labels
change nothing but the test score). Variant keys ``sim_mix=RULE`` / ``sim_cscale=True`` try mixing
rules other than the mean in the simulation (``sim_mix``).

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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sparkhc import features
from sparkhc.batch import SparseBatch, label_matrix
from sparkhc.decoding import dp_solve_one, row_scores
from sparkhc.features import features_corpus_info, read_features_local, scored_mask
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


# ------------------------------------------------------------------------------ data and scoring
@dataclass
class Round:
    """One train/test round of a features folder: the training and test documents, the taxonomy
    scored (``tax``), the one the model is trained on (``mtax``: virtual ``/_self`` leaves for the
    training labels that stop at internal nodes) and the mask of scored labels."""

    train: SparseBatch
    test: SparseBatch
    tax: Taxonomy
    mtax: Taxonomy
    mask: np.ndarray
    n_features: int


def model_taxonomy(tax: Taxonomy, train: SparseBatch) -> Taxonomy:
    """The product's model taxonomy (:func:`sparkhc.features.model_taxonomy`) from the training
    labels only."""
    return features.model_taxonomy(tax, train.labels or [])


def load_round(features: str, test_fold: int | None, test_split: str | None, flat_taxonomy: bool = False) -> Round:
    batch, spec = read_features_local(features, extra_columns=("split", "fold"))
    tax = Taxonomy.load(f"{features}/taxonomy.tsv")
    if (test_fold is None) == (test_split is None):
        raise SystemExit("give exactly one of --test-fold and --test-split")
    test = batch.extra["fold"] == test_fold if test_split is None else batch.extra["split"] == test_split
    train = ~test if test_split is None else batch.extra["split"] == "train"
    tr, te = batch.subset(np.flatnonzero(train)), batch.subset(np.flatnonzero(test))
    mtax = model_taxonomy(tax, tr)
    if flat_taxonomy:
        if mtax is not tax:
            raise SystemExit("--flat-taxonomy: the training labels include internal nodes; flat only for leaf labels")
        mtax = Taxonomy.from_edges([(tax.names[0], tax.names[int(c)]) for c in tax.leaves])
        # gold label sets may list the leaves' ancestors (ancestor-closed corpora): keep the leaves
        tr = dataclasses.replace(tr, labels=[[x for x in labs if x in mtax] for labs in tr.labels or []])
    mask = scored_mask(tax, features_corpus_info(features).get("scored_labels"))
    return Round(tr, te, tax, mtax, mask, spec.n_features)


def evaluate(model: Any, docs: SparseBatch, tax: Taxonomy, mask: np.ndarray) -> dict[str, float]:
    """Every metric of ``model``'s predictions on ``docs`` (their labels are read here only)."""
    counts = MetricCounts(tax, mask)
    counts.add(label_matrix(docs.labels or [], tax), label_matrix(model.predict(docs), tax))
    out = dict(counts.compute())
    out["size"] = float(model.model_size())
    return out


def fmt(r: dict[str, float]) -> str:
    return (f"EBF {r['EBF']:.4f} LBMiF {r['LBMiF']:.4f} LBMaF {r['LBMaF']:.4f} hF {r['hF']:.4f} "
            f"size {int(r['size'])}")


def parse_variant(v: str) -> dict[str, Any]:
    """``"branching=True,C=0.1"`` -> ``{"branching": True, "C": 0.1}`` (an empty string: defaults)."""
    if not v.strip():
        return {}
    return {k.strip(): ast.literal_eval(x) for k, x in (kv.split("=", 1) for kv in v.split(","))}


def sim_mix(base: ModelState, states: Sequence[ModelState], updates: Sequence[float], rule: str) -> ModelState:
    """Mixing rules tried against the mean (``sim_mix=...``; prototypes, not in the product), on the
    shards' changes ``d_k = state_k - base``: ``"updates"`` weights each shard by its number of
    updates (McDonald et al. 2010); ``"sum"`` adds the changes; ``"touched"`` divides each entry's
    sum by the number of shards that changed it; ``"ratio_arr"``/``"ratio_col"``/``"ratio_ent"``
    scale the sum by ``gamma = clip(sum_k ||d_k||^2 / ||sum_k d_k||^2, 1/K, 1)`` per array, per
    column of ``W`` (the other arrays per array), or per entry (CoCoA+'s ``1 / sigma'`` measured on
    the epoch's changes: 1/K for identical changes, 1 for orthogonal ones)."""
    K = len(states)
    arrays = {}
    for n, a in base.arrays.items():
        ds = [s.arrays[n].astype(np.float64) - a for s in states]
        tot = np.sum(ds, axis=0)
        if rule == "updates":
            w = np.asarray(updates, dtype=np.float64)
            g: Any = 1.0 / K if w.sum() <= 0 else None
            tot = tot * g if g is not None else np.sum([wi / w.sum() * d for wi, d in zip(w, ds, strict=True)], axis=0)
        elif rule == "colnnz" and n == "W":  # per column, shards weighted by their changed entries in it
            w = np.array([np.count_nonzero(d, axis=0) for d in ds], dtype=np.float64)  # (K, cols)
            tw = w.sum(axis=0)
            tot = np.where(tw > 0, np.sum([wi * d for wi, d in zip(w, ds, strict=True)], axis=0)
                           / np.maximum(tw, 1), tot / K)
        elif rule == "colnnz":
            tot = tot / K
        elif rule == "touched":
            tot = tot / np.maximum(1, np.sum([d != 0 for d in ds], axis=0))
        elif rule.startswith("ratio"):
            sq = np.sum([d * d for d in ds], axis=0)
            if rule == "ratio_ent":
                num, den = sq, tot * tot
            elif rule == "ratio_col" and n == "W":
                num, den = sq.sum(axis=0), (tot * tot).sum(axis=0)
            else:
                num, den = sq.sum(), (tot * tot).sum()
            tot = tot * np.clip(num / np.maximum(den, 1e-300), 1.0 / K, 1.0)
        elif rule != "sum":
            raise ValueError(f"unknown sim_mix rule {rule!r}")
        arrays[n] = (a + tot).astype(a.dtype)
    return ModelState(arrays, {}, base.combine)


# ------------------------------------------------------------------------------------- training
def train(
    tr: SparseBatch, mtax: Taxonomy, n_features: int, params: dict[str, Any], epochs: int, shards: int = 1,
    seed: int = 0, on_epoch: Callable[[int, Any], None] | None = None,
) -> Any:
    """The global model trained on ``tr`` for ``epochs`` epochs, serially (``shards=1``) or by
    iterative parameter mixing simulated in process: ``shards`` shards (a seeded random split of
    ``tr``), each epoch every shard runs ``partial_fit`` from the mixed state, then the states are
    mixed by ``combine_states`` (the code the Spark mixing is checked against). ``on_epoch(e,
    model)`` is called after every epoch with the mixed model. ``dcd_*`` keys: the DCD prototype."""
    params = dict(params)
    dcd = {k[4:]: params.pop(k) for k in list(params) if k.startswith("dcd_")}
    if dcd:
        params["update"] = "cost_augmented"
    sim = {k[4:]: params.pop(k) for k in list(params) if k.startswith("sim_")}
    cls = get_model_class("global")
    model = cls(mtax, n_features, **params)
    model.set_state(model.init_state())
    part = np.random.default_rng(seed).integers(0, shards, len(tr))
    subs = [tr.subset(np.flatnonzero(part == k)) for k in range(shards)] if shards > 1 else [tr]
    shard_params = dict(params)
    if sim.get("cscale") and len(subs) > 1:
        shard_params["C"] = float(params.get("C", cls.defaults["C"])) * len(subs)
    duals = [DCDShard(sub, **dcd) for sub in subs] if dcd else []
    for e in range(epochs):
        if len(subs) == 1:
            if duals:
                duals[0].epoch(model, seed=seed, epoch=e, n_shards=1)
            else:
                model.partial_fit(tr, seed=seed, epoch=e)
        else:
            states, weights = [], []
            for k, sub in enumerate(subs):
                m = cls(mtax, n_features, **shard_params)
                m.set_state(model.get_state().copy())
                if duals:
                    out = duals[k].epoch(m, seed=seed * 100 + k, epoch=e, n_shards=len(subs))
                else:
                    out = m.partial_fit(sub, seed=seed * 100 + k, epoch=e)
                states.append(m.get_state())
                weights.append(float(out.get("updates", 1.0)))
            if sim.get("mix"):
                model.set_state(sim_mix(model.get_state(), states, weights, str(sim["mix"])))
            else:
                model.set_state(combine_states(states))
        if on_epoch is not None:
            on_epoch(e, model)
    return model


# ------------------------------------------------------------------- selection on validation data
@dataclass
class Selection:
    """The variant and epoch count chosen on validation data, and the validation table: per
    variant, the mean validation metrics after each epoch (``table[variant][epoch - 1]``)."""

    variant: str
    epochs: int
    metric: str
    table: dict[str, list[dict[str, float]]]


def metric_value(r: dict[str, float], metric: str) -> float:
    """The value of ``metric`` in a table row: a key (``"hF"``) or a sum of keys (``"LBMaF+hF"``)."""
    return float(sum(r[k] for k in metric.split("+")))


def validation_splits(n: int, fraction: float, inner_folds: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """(fit, validation) index pairs over the ``n`` training documents, seeded: ``inner_folds > 1``
    gives that many inner folds (a seeded shuffle, fold = rank mod k), else one held-out slice of
    ``fraction`` of the documents."""
    perm = np.random.default_rng([int(seed), 17]).permutation(n)
    if inner_folds > 1:
        fold = np.empty(n, dtype=np.int64)
        fold[perm] = np.arange(n) % inner_folds
        return [(np.flatnonzero(fold != f), np.flatnonzero(fold == f)) for f in range(inner_folds)]
    n_val = max(1, int(round(fraction * n)))
    if n_val >= n:
        raise ValueError(f"a validation fraction of {fraction} leaves no training documents out of {n}")
    return [(np.sort(perm[n_val:]), np.sort(perm[:n_val]))]


def select(
    tr: SparseBatch, tax: Taxonomy, mask: np.ndarray, n_features: int, variants: Sequence[str], epochs: int,
    shards: int = 1, seed: int = 0, val_fraction: float = 0.2, inner_folds: int = 0, metric: str = "hF",
    select_epochs: bool = True, flat: Callable[[SparseBatch], tuple[SparseBatch, Taxonomy]] | None = None,
    log: Callable[[str], None] | None = None,
) -> Selection:
    """Choose a variant (and, with ``select_epochs``, the number of epochs <= ``epochs``) by the
    mean validation ``metric`` over the validation splits of the TRAINING documents ``tr``
    (:func:`validation_splits`); nothing else is read. Ties go to the earlier variant and the
    fewer epochs."""
    splits = validation_splits(len(tr), val_fraction, inner_folds, seed)
    table: dict[str, list[dict[str, float]]] = {}
    for v in variants:
        per_epoch: list[list[dict[str, float]]] = [[] for _ in range(epochs)]
        for fit_idx, val_idx in splits:
            fit, val = tr.subset(fit_idx), tr.subset(val_idx)
            mtax = model_taxonomy(tax, fit)
            if flat is not None:
                fit, mtax = flat(fit)

            def record(e: int, model: Any, _val: SparseBatch = val, _pe: list = per_epoch) -> None:
                if select_epochs or e == epochs - 1:
                    _pe[e].append(evaluate(model, _val, tax, mask))

            train(fit, mtax, n_features, parse_variant(v), epochs, shards, seed, on_epoch=record)
        table[v] = [{k: float(np.mean([r[k] for r in rs])) for k in rs[0]} if rs else {} for rs in per_epoch]
        if log is not None:
            for e, r in enumerate(table[v]):
                if r:
                    log(f"validation {v!r} epoch {e + 1}: {fmt(r)}")
    best: tuple[float, int, int] | None = None
    for vi, v in enumerate(variants):
        for e, r in enumerate(table[v]):
            if r and (best is None or metric_value(r, metric) > best[0]):
                best = (metric_value(r, metric), vi, e + 1)
    assert best is not None
    return Selection(variants[best[1]], best[2], metric, table)


def select_and_test(
    rnd: Round, variants: Sequence[str], epochs: int, shards: int = 1, seed: int = 0, val_fraction: float = 0.2,
    inner_folds: int = 0, metric: str = "hF", select_epochs: bool = True, flat: bool = False,
    log: Callable[[str], None] | None = None, also_epochs: int | None = None,
) -> tuple[Selection, Any, dict[str, float]]:
    """Select on validation data carved out of ``rnd.train`` (:func:`select`), retrain the
    selected variant for the selected epochs on all of ``rnd.train``, and score it on
    ``rnd.test`` once: the test labels are read after the selection only. ``also_epochs``: the
    retraining continues to that many epochs when it is more, and the test scores after it are
    returned too, as ``"fixed_" + key`` (a fixed epoch count for comparison, not a choice)."""
    flat_fn = None
    if flat:
        def flat_fn(b: SparseBatch) -> tuple[SparseBatch, Taxonomy]:
            return (dataclasses.replace(b, labels=[[x for x in labs if x in rnd.mtax] for labs in b.labels or []]),
                    rnd.mtax)
    sel = select(rnd.train, rnd.tax, rnd.mask, rnd.n_features, variants, epochs, shards, seed, val_fraction,
                 inner_folds, metric, select_epochs, flat_fn, log)
    if also_epochs is None or also_epochs == sel.epochs:
        model = train(rnd.train, rnd.mtax, rnd.n_features, parse_variant(sel.variant), sel.epochs, shards, seed)
        test = evaluate(model, rnd.test, rnd.tax, rnd.mask)
        if also_epochs is not None:
            test.update({"fixed_" + k: v for k, v in list(test.items())})
        return sel, model, test
    kept: dict[str, Any] = {}

    def keep(e: int, m: Any) -> None:
        if e + 1 == sel.epochs:
            kept["sel"] = evaluate(m, rnd.test, rnd.tax, rnd.mask), m.get_state().copy()
        if e + 1 == also_epochs:
            kept["fixed"] = evaluate(m, rnd.test, rnd.tax, rnd.mask)

    model = train(rnd.train, rnd.mtax, rnd.n_features, parse_variant(sel.variant), max(sel.epochs, also_epochs),
                  shards, seed, on_epoch=keep)
    test, state = kept["sel"]
    model.set_state(state)
    test.update({"fixed_" + k: v for k, v in kept["fixed"].items()})
    return sel, model, test


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
    ap.add_argument("--select", action="store_true",
                    help="choose the variant (and the epoch count) on validation data carved out of the training "
                         "part; print the validation table and the test score of the selected choice only")
    ap.add_argument("--val-fraction", type=float, default=0.2, help="--select: held-out share of the training part")
    ap.add_argument("--inner-folds", type=int, default=0, help="--select: inner folds instead of one held-out slice")
    ap.add_argument("--metric", default="hF",
                    help="--select: the validation metric maximised (a key, or a sum of keys: LBMaF+hF)")
    ap.add_argument("--fixed-epochs", action="store_true", help="--select: keep --epochs, select the variant only")
    a = ap.parse_args()
    rnd = load_round(a.features, a.test_fold, a.test_split, a.flat_taxonomy)
    variants = a.variant or [""]
    if a.select:
        t0 = time.perf_counter()
        sel, _, test = select_and_test(rnd, variants, a.epochs, a.shards, a.seed, a.val_fraction, a.inner_folds,
                                       a.metric, not a.fixed_epochs, a.flat_taxonomy,
                                       log=lambda s: print(s, flush=True))
        best = sel.table[sel.variant][sel.epochs - 1]
        print(f"selected {sel.variant!r}, {sel.epochs} epochs (validation {a.metric} {metric_value(best, a.metric):.4f}); "
              f"test {fmt(test)} ({time.perf_counter() - t0:.0f} s)", flush=True)
        return
    for v in variants:
        total: dict[str, np.ndarray] = {}

        def add(e: int, model: Any, _total: dict[str, np.ndarray] = total) -> None:
            for k, w in model.get_state().arrays.items():
                _total[k] = _total.get(k, 0) + w.astype(np.float64)

        t0 = time.perf_counter()
        params = parse_variant(v)
        model = train(rnd.train, rnd.mtax, rnd.n_features, params, a.epochs, a.shards, a.seed, on_epoch=add)
        print(f"{v}: final {fmt(evaluate(model, rnd.test, rnd.tax, rnd.mask))} ({time.perf_counter() - t0:.0f} s)",
              flush=True)
        if a.epoch_average:
            base = {k: x for k, x in params.items() if not k.startswith(("dcd_", "sim_"))}
            avg = get_model_class("global")(rnd.mtax, rnd.n_features, **base)
            avg.set_state(ModelState({k: (w / a.epochs).astype(np.float32) for k, w in total.items()}))
            print(f"{v}: epoch-averaged {fmt(evaluate(avg, rnd.test, rnd.tax, rnd.mask))}", flush=True)


if __name__ == "__main__":
    main()
