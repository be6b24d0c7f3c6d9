"""Per-edge score offsets of the global model fitted on validation data (rare labels).

An offset ``b_e`` added to the score of edge ``e`` for every document is a change of the learned
bias weight of that edge (``W[bias row, e] += b_e / bias``): the calibrated model is an ordinary
:class:`~sparkhc.models.murawaki.GlobalPA` state, and its decoding is the same exact DP
(:func:`sparkhc.decoding.dp_solve`) of the shifted scores. A positive offset lets a rare label
that the margin-trained model scores just below its competitors be predicted; a negative one
removes false positives. It is the structured counterpart of SCut's per-label thresholds (Yang
2001; Lewis et al. 2004), fitted the way SCut fits them: on the pooled out-of-fold scores of every
training document.

The offsets are *cross-fitted* on the training documents only (``train.calibrate``):

1. the training documents are split into ``k`` seeded folds; for each fold ``f`` a model with the
   same parameters is trained on the other folds and scores fold ``f`` (out-of-fold scores,
   :class:`FoldScores`);
2. the offsets are fitted on the pooled out-of-fold scores by coordinate ascent with an *exact*
   line search per edge (:func:`fit_offsets`): with every other offset fixed, each document's
   exact DP decodes one of two trees whatever the shift ``d`` of edge ``e`` (the best tree with
   ``e``, whose score moves by ``d``, or the best one without it), and switches at one breakpoint;
   the validation objective macro-F1 + micro-F1 over the real nodes (:func:`objective`) is
   piecewise constant in ``d`` between the documents' breakpoints, so every interval is scored
   (two DP solves per edge and fold, counts updated by cumulative sums) and the edge's offset moves
   to the middle of the best interval (the one nearest 0 on ties; only on a strict gain, within
   :data:`MAX_SHIFT`);
3. the effect is estimated honestly before anything is applied: each fold is decoded with the
   offsets fitted on the *other* folds (nested); ``mode="auto"`` applies the offsets fitted on all
   folds only if this pooled out-of-fold objective beats the uncalibrated model and the mean gain
   over the folds exceeds its standard error (:func:`worth_applying`, the one-standard-error rule
   that also decides C), so calibration switches itself off where its gain is within the noise of
   the user's data; ``mode="on"`` always applies them.

The scored folds come from the training that is being done anyway where possible: with the default
epoch selection they are its validation bands, scored by the band's model at the chosen epoch
(:func:`sparkhc.spark.calibrate.cross_fit_offsets`), cut into parts (:func:`split_folds`) when
there are fewer than three, and extended by more bands (``train.calibration_documents``) when the
offsets pay on them.

Every function here reads only the documents it is given (the training documents); nothing here
knows about a test split.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sparkhc.batch import SparseBatch, label_matrix
from sparkhc.config import CALIBRATE_MODES
from sparkhc.decoding import TreeIndex, dp_solve
from sparkhc.taxonomy import Taxonomy

__all__ = [
    "MAX_SHIFT", "END_GAP", "SWEEPS", "MODES", "NESTED_GROUPS", "SHARED_SHIFTS", "KINDS", "fit_shared", "FoldScores", "Calibration", "objective", "label_f1",
    "fit_offsets", "cross_fit", "fold_scores", "scored_columns", "split_folds", "worth_applying",
    "MAX_SCORES", "MAX_EDGE_FIT_CELLS", "too_large", "edge_fit_cells",
]

#: the largest shift of one edge in one line search, in units of the edge scores (the cost-augmented
#: margin is 1); documents whose breakpoint lies further out keep their decision
MAX_SHIFT: float = 3.0

#: a shift beyond the outermost breakpoint of a line search lands this far past it
END_GAP: float = 0.1

#: passes of coordinate ascent over the edges (fewer when a pass moves nothing)
SWEEPS: int = 3

#: the most groups :func:`cross_fit` nests over (each costs one fit of the offsets on the others'
#: documents); more folds are dealt into this many groups
NESTED_GROUPS: int = 3

#: the grid of :func:`fit_shared` (one shift of every edge score, in units of the edge scores)
SHARED_SHIFTS: np.ndarray = np.round(np.arange(-30, 31) * 0.05, 2)

#: what :func:`cross_fit` may apply, simplest first: one shift shared by every edge, then per-edge
#: offsets (started from that shift)
KINDS: tuple[str, ...] = ("shared", "edges")

#: values of ``train.calibrate``
MODES: tuple[str, ...] = CALIBRATE_MODES  # train.calibrate's choices (sparkhc.config)

#: the most document x edge scores the calibration may hold: the scored documents' dense score
#: matrix (float64 in the line searches: 1 GiB, with copies of it per fold). A training whose
#: calibration documents times edges exceed it is not calibrated (``"auto"``: skipped and recorded;
#: ``"on"``: refused): a MeSH-sized taxonomy (35,215 edges) with a 27,151-document band would need
#: 7.1 GiB per copy. :func:`too_large`
MAX_SCORES: int = 2**27

#: the most DP cells (documents x edges of one exact decoding) the per-edge offsets' coordinate
#: ascent may decode: two decodings of every document per edge and sweep, for each nested group and
#: the final fit (:func:`edge_fit_cells`), a few minutes of decoding; beyond it only the shared shift
#: is fitted (recorded in :attr:`Calibration.note`). The development and confirmation corpora stay far
#: below (Reuters-21578 at 5,000 documents: 1.1e9), a taxonomy of 1,000 edges with a 9,000-document
#: band is above (2.2e11, hours).
MAX_EDGE_FIT_CELLS: float = 2e10


@dataclass
class FoldScores:
    """One validation fold: the edge scores ``S`` ``(n_docs, n_edges)`` of the model trained
    without it, that model's branching weights ``bf`` (or None) and the gold node matrix ``gold``
    ``(n_docs, n_nodes)`` (bool, ancestor-closed, column 0 the root)."""

    S: np.ndarray
    bf: np.ndarray | None
    gold: np.ndarray


@dataclass
class Calibration:
    """The result of :func:`cross_fit`: ``offsets`` (per edge, what is applied; zeros when not
    applied), the nested fits (``fold_offsets[i]``: fitted without fold ``i``), the validation
    objective without / with the cross-fitted offsets and its parts, and whether they were applied."""

    offsets: np.ndarray
    fold_offsets: np.ndarray
    applied: bool
    mode: str
    validation: dict[str, float] = field(default_factory=dict)
    #: what was applied: a kind of :data:`KINDS`, "" for nothing
    kind: str = ""
    #: where the scored folds came from ("" when not said): "calibration folds" or "validation bands"
    source: str = ""
    #: how many scored folds (validation bands or inner folds) the offsets were fitted on (0: not said)
    bands: int = 0
    #: what was left out and why ("" when nothing): the per-edge offsets above :data:`MAX_EDGE_FIT_CELLS`
    note: str = ""
    #: the suggestions' margin -> precision calibration fitted on the same folds
    #: (:meth:`sparkhc.suggestions.SuggestionCalibration.to_dict`; None when not fitted)
    suggestions: dict[str, Any] | None = None

    def summary(self) -> dict[str, Any]:
        """A JSON-able record (model metadata, logs)."""
        out = {
            "mode": self.mode,
            "applied": bool(self.applied),
            "kind": self.kind,
            "folds": int(self.fold_offsets.shape[0]),
            "nonzero_offsets": int(np.count_nonzero(self.offsets)),
            "validation": {k: round(float(v), 6) for k, v in self.validation.items()},
        }
        if self.bands:
            out["bands"] = int(self.bands)
        if self.note:
            out["note"] = self.note
        if self.suggestions is not None:
            out["suggestions"] = self.suggestions
        return {**out, "source": self.source} if self.source else out


def label_f1(gold: np.ndarray, pred: np.ndarray, cols: np.ndarray) -> tuple[float, float]:
    """``(macro-F1, micro-F1)`` over the node columns ``cols`` of bool matrices ``(n_docs,
    n_nodes)``: the float form of :class:`sparkhc.metrics.MetricCounts`' label-based MaF / MiF
    (macro over the labels with a gold or a predicted document; 0 when there is none)."""
    g, p = gold[:, cols], pred[:, cols]
    tp = np.count_nonzero(g & p, axis=0)
    fp = np.count_nonzero(~g & p, axis=0)
    fn = np.count_nonzero(g & ~p, axis=0)
    den = 2 * tp + fp + fn
    occ = den > 0
    macro = float(np.mean(2 * tp[occ] / den[occ])) if occ.any() else 0.0
    tot = int(den.sum())
    micro = 2 * int(tp.sum()) / tot if tot else 0.0
    return macro, micro


def objective(gold: np.ndarray, pred: np.ndarray, cols: np.ndarray) -> float:
    """The validation objective: macro-F1 + micro-F1 over ``cols`` (micro-F1 over every real node
    is hF), so that an offset must not buy rare labels with the frequent ones."""
    return float(sum(label_f1(gold, pred, cols)))


def _decode(idx: TreeIndex, S: np.ndarray, bf: np.ndarray | None, R: int) -> np.ndarray:
    return dp_solve(idx, S, bf=bf, R=R).selected


def _f1_sums(tp: np.ndarray, fp: np.ndarray, fn: np.ndarray) -> np.ndarray:
    """:func:`objective` (macro-F1 + micro-F1) of every row of per-label counts ``(n_rows,
    n_cols)``, with :func:`label_f1`'s definitions."""
    den = 2 * tp + fp + fn
    occ = den > 0
    f1 = np.divide(2.0 * tp, den, out=np.zeros(den.shape), where=occ)
    n_occ = occ.sum(axis=1)
    macro = np.divide(f1.sum(axis=1), n_occ, out=np.zeros(len(den)), where=n_occ > 0)
    tot = den.sum(axis=1)
    micro = np.divide(2.0 * tp.sum(axis=1), tot, out=np.zeros(len(den)), where=tot > 0)
    return np.asarray(macro + micro)


def _two_trees(
    idx: TreeIndex, folds: Sequence[FoldScores], b: np.ndarray, e: int, R: int,
    pool: ThreadPoolExecutor | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For edge ``e`` at offsets ``b``, over the pooled documents of ``folds``: the best tree with
    ``e`` and the best without it (node masks), and the breakpoint ``V_out - V_in`` of each
    document (it decodes the tree with ``e`` iff ``e``'s extra shift exceeds it; ``-inf`` where no
    tree avoids ``e``). ``pool``: the independent DP solves (two per fold) run on its threads (the
    compiled DP releases the GIL); the same results as one after another."""
    big = 1e6
    jobs: list[tuple[np.ndarray, np.ndarray | None]] = []
    for f in folds:
        S_in = np.asarray(f.S, dtype=np.float64) + b
        S_out = S_in.copy()
        S_in[:, e] += big
        S_out[:, e] -= big
        jobs += [(S_in, f.bf), (S_out, f.bf)]

    def solve(job: tuple[np.ndarray, np.ndarray | None]) -> Any:
        return dp_solve(idx, job[0], bf=job[1], R=R, with_k=False)

    res = list(pool.map(solve, jobs)) if pool is not None else [solve(j) for j in jobs]
    ins, outs, brk = [], [], []
    for r_in, r_out in zip(res[0::2], res[1::2], strict=True):
        d = r_out.score - (r_in.score - big)
        d[r_out.selected[:, e + 1]] = -np.inf
        ins.append(r_in.selected)
        outs.append(r_out.selected)
        brk.append(d)
    return np.concatenate(ins), np.concatenate(outs), np.concatenate(brk)


def _line_search(gold: np.ndarray, t_in: np.ndarray, t_out: np.ndarray, brk: np.ndarray, max_shift: float,
                 ) -> tuple[float, float]:
    """The exact line search of one edge (module docstring): ``(shift, gain)`` over the pooled
    documents, ``gold``/``t_in``/``t_out`` restricted to the scored columns; ``(0, 0)`` when no
    shift strictly gains."""
    near = np.flatnonzero(np.abs(brk) <= max_shift)
    fixed = np.where((brk < -max_shift)[:, None], t_in, t_out)
    tp0 = np.count_nonzero(gold & fixed, axis=0)
    fp0 = np.count_nonzero(~gold & fixed, axis=0)
    fn0 = np.count_nonzero(gold & ~fixed, axis=0)
    if near.size == 0:
        return 0.0, 0.0
    o = near[np.argsort(brk[near], kind="stable")]
    ds = brk[o]
    g, pin, pout = gold[o], t_in[o], t_out[o]
    first = np.zeros((1, gold.shape[1]), dtype=np.int64)
    dtp = np.vstack([first, np.cumsum((g & pin).astype(np.int64) - (g & pout), axis=0)])
    dfp = np.vstack([first, np.cumsum((~g & pin).astype(np.int64) - (~g & pout), axis=0)])
    val = _f1_sums(tp0 + dtp, fp0 + dfp, fn0 - dtp)  # row j: the first j documents take t_in
    lo = np.concatenate([[-np.inf], ds])
    hi = np.concatenate([ds, [np.inf]])
    with np.errstate(invalid="ignore"):
        mid = np.where(np.isinf(lo), hi - END_GAP, np.where(np.isinf(hi), lo + END_GAP, (lo + hi) / 2))
    ok = (hi - lo > 1e-9) & (np.abs(mid) <= max_shift)
    cur = val[int(np.searchsorted(ds, 0.0, side="left"))]  # shift 0: documents with brk < 0 take t_in
    val = np.where(ok, val, -np.inf)
    top = float(val.max())
    if not top > cur + 1e-12:
        return 0.0, 0.0
    cand = np.flatnonzero(val >= top - 1e-12)
    j = int(cand[np.argmin(np.abs(mid[cand]))])
    return float(mid[j]), top - float(cur)


def fit_offsets(
    idx: TreeIndex, folds: FoldScores | Sequence[FoldScores], cols: np.ndarray, R: int = 3, sweeps: int = SWEEPS,
    max_shift: float = MAX_SHIFT, start: np.ndarray | None = None, threads: int = 1,
) -> np.ndarray:
    """Per-edge offsets maximising :func:`objective` on the pooled documents of ``folds`` (each
    decoded with its own model's branching weights) by coordinate ascent with an exact line search
    per edge (module docstring, step 2): ``sweeps`` passes over the edges in id order, from
    ``start`` (zeros when None). ``threads``: the line searches' DP solves run on that many threads
    (the same offsets whatever the number)."""
    folds = [folds] if isinstance(folds, FoldScores) else list(folds)
    cols = np.asarray(cols, dtype=np.int64)
    gold = np.concatenate([f.gold for f in folds])[:, cols]
    b = np.zeros(idx.n_edges) if start is None else np.array(start, dtype=np.float64)
    pool = ThreadPoolExecutor(int(threads), thread_name_prefix="sparkhc-offsets") if int(threads) > 1 else None
    try:
        for _ in range(int(sweeps)):
            moved = False
            for e in range(idx.n_edges):
                t_in, t_out, brk = _two_trees(idx, folds, b, e, R, pool)
                shift, gain = _line_search(gold, t_in[:, cols], t_out[:, cols], brk, max_shift)
                if gain > 0.0:
                    b[e] += shift
                    moved = True
            if not moved:
                break
    finally:
        if pool is not None:
            pool.shutdown(wait=True)
    return b


def fit_shared(
    idx: TreeIndex, folds: FoldScores | Sequence[FoldScores], cols: np.ndarray, R: int = 3,
    shifts: np.ndarray | None = None,
) -> float:
    """One shift shared by every edge maximising :func:`objective` on the pooled documents of
    ``folds``, over the grid ``shifts`` (:data:`SHARED_SHIFTS`), the one nearest 0 on ties: a single
    parameter that moves how many labels every document gets (a model trained to predict about one
    label where documents have two), too few to overfit a small validation set."""
    folds = [folds] if isinstance(folds, FoldScores) else list(folds)
    cols = np.asarray(cols, dtype=np.int64)
    gold = np.concatenate([f.gold for f in folds])
    grid = SHARED_SHIFTS if shifts is None else np.asarray(shifts, dtype=np.float64)
    best, best_d = -np.inf, 0.0
    for d in grid[np.argsort(np.abs(grid), kind="stable")]:
        pred = np.concatenate([_decode(idx, np.asarray(f.S, np.float64) + d, f.bf, R) for f in folds])
        v = objective(gold, pred, cols)
        if v > best + 1e-12:
            best, best_d = v, float(d)
    return best_d


def too_large(n_docs: int, n_edges: int) -> str:
    """Why a calibration on ``n_docs`` scored documents of a model with ``n_edges`` edges is not run
    (their dense scores exceed :data:`MAX_SCORES`), or "" when it can be."""
    cells = int(n_docs) * int(n_edges)
    if cells <= MAX_SCORES:
        return ""
    return (f"the offsets would be fitted on the dense scores of {int(n_docs):,} documents x {int(n_edges):,} edges "
            f"({cells * 8 / 2**30:.1f} GiB as float64, more than sparkhc.calibration.MAX_SCORES = {MAX_SCORES:,} "
            "scores); a taxonomy this large is not calibrated")


def edge_fit_cells(n_docs: int, n_edges: int, sweeps: int = SWEEPS, groups: int = NESTED_GROUPS) -> float:
    """DP cells the per-edge offsets of :func:`cross_fit` decode at most: 2 decodings of ``n_docs``
    documents x ``n_edges`` edges per edge and sweep, for ``groups`` nested fits and the final one."""
    return 2.0 * n_edges * sweeps * (groups + 1) * float(n_docs) * n_edges


def worth_applying(gain: float, fold_mean: float, fold_se: float) -> bool:
    """``mode="auto"``'s rule: the offsets are applied when the pooled out-of-fold objective gains
    and the mean gain over the folds exceeds its standard error (the one-standard-error rule of
    :func:`sparkhc.epochs.prefer_default`, as for C): a gain smaller than the protocol's noise is
    not taken, since on unseen documents it is as likely a loss."""
    return gain > 1e-12 and fold_mean > fold_se


def split_folds(folds: Sequence[FoldScores], parts: Sequence[np.ndarray]) -> list[FoldScores]:
    """Calibration folds cut from scored folds: fold ``i`` is cut by ``parts[i]`` (a part number
    per document, e.g. a hash of its id), each part keeping its own model's branching weights, so
    every part stays scored out of sample. Empty parts are dropped."""
    out: list[FoldScores] = []
    for f, part in zip(folds, parts, strict=True):
        part = np.asarray(part)
        for j in np.unique(part):
            rows = np.flatnonzero(part == j)
            out.append(FoldScores(f.S[rows], f.bf, f.gold[rows]))
    return out


def _fit_kind(idx: TreeIndex, folds: Sequence[FoldScores], cols: np.ndarray, R: int, kind: str,
              kinds: Sequence[str], sweeps: int, max_shift: float, threads: int = 1) -> np.ndarray:
    """The offsets of ``kind`` fitted on ``folds``; per-edge offsets start from the shared shift
    when ``kinds`` has it."""
    shared = fit_shared(idx, folds, cols, R) if "shared" in kinds else 0.0
    start = np.full(idx.n_edges, shared)
    return start if kind == "shared" else fit_offsets(idx, folds, cols, R, sweeps, max_shift, start=start,
                                                       threads=threads)


def cross_fit(
    idx: TreeIndex, folds: Sequence[FoldScores], cols: np.ndarray, R: int = 3, mode: str = "auto",
    sweeps: int = SWEEPS, max_shift: float = MAX_SHIFT, groups: int = NESTED_GROUPS,
    kinds: Sequence[str] = KINDS, threads: int = 1,
) -> Calibration:
    """Offsets from ``k >= 3`` validation folds (module docstring). The folds are dealt into
    ``g = min(k, groups)`` groups (fold ``i`` into group ``i mod g``); for each group and each kind
    of ``kinds`` (:data:`KINDS`: one shared shift, then per-edge offsets started from it) the
    offsets are fitted on the folds of the other groups and score the group's (the pooled
    out-of-fold objective, and one gain per group over no offsets).

    ``mode="auto"`` goes from the simplest kind up: a kind replaces the one kept so far (at first
    none) only when its gain over it passes :func:`worth_applying` (pooled gain > 0, mean gain over
    the groups above its standard error), and the kept kind is fitted on all folds and applied;
    ``"on"`` applies the last kind of ``kinds`` whatever the gain. ``validation`` records
    ``macro_off``/``micro_off``, ``macro_on``/``micro_on`` and ``gain`` / ``fold_gain_mean`` /
    ``fold_gain_se`` of the kind applied (or of the last kind tried, when none is), and the gain of
    every kind (``gain_<kind>``). ``fold_offsets[j]``: the nested fit of that kind without group ``j``. ``threads``: the per-edge
    line searches' DP solves run on that many threads (:func:`fit_offsets`; the same result)."""
    if mode not in MODES or mode == "off":
        raise ValueError(f"cross_fit: mode must be 'auto' or 'on', not {mode!r}")
    unknown = [k for k in kinds if k not in KINDS]
    kinds = [k for k in KINDS if k in kinds]
    if unknown or not kinds:
        raise ValueError(f"cross_fit: kinds must be among {list(KINDS)}, not {list(unknown) or 'none'}")
    k = len(folds)
    if k < 3:
        raise ValueError(f"cross-fitted offsets need at least 3 folds (2 to fit on left out of each), got {k}")
    note = ""
    n_docs = sum(f.gold.shape[0] for f in folds)
    if "edges" in kinds and len(kinds) > 1 and edge_fit_cells(n_docs, idx.n_edges, sweeps, groups) > MAX_EDGE_FIT_CELLS:
        kinds = [kd for kd in kinds if kd != "edges"]
        note = (f"per-edge offsets not fitted: {edge_fit_cells(n_docs, idx.n_edges, sweeps, groups):.2g} DP cells "
                f"({n_docs:,} documents, {idx.n_edges:,} edges) exceed sparkhc.calibration.MAX_EDGE_FIT_CELLS = "
                f"{MAX_EDGE_FIT_CELLS:.2g}; only the shared shift")
    g = min(k, int(groups))
    if g < 3:
        raise ValueError(f"cross_fit: groups must be >= 3, not {groups}")
    cols = np.asarray(cols, dtype=np.int64)
    order = [i for j in range(g) for i in range(j, k, g)]  # the folds group by group
    gold = np.concatenate([folds[i].gold for i in order])
    sizes = [sum(folds[i].gold.shape[0] for i in range(j, k, g)) for j in range(g)]
    ends = np.cumsum([0, *sizes])

    def decoded(nested: np.ndarray | None) -> np.ndarray:
        return np.concatenate([_decode(idx, np.asarray(folds[i].S, np.float64)
                                       + (0.0 if nested is None else nested[i % g]), folds[i].bf, R) for i in order])

    def per_group(pred: np.ndarray) -> np.ndarray:
        return np.array([objective(gold[a:b], pred[a:b], cols) for a, b in zip(ends[:-1], ends[1:], strict=True)])

    off = decoded(None)
    obj_off, grp_off = objective(gold, off, cols), per_group(off)
    tried: dict[str, tuple[np.ndarray, np.ndarray, float, np.ndarray]] = {}
    for kind in kinds:
        nested = np.stack([_fit_kind(idx, [f for i, f in enumerate(folds) if i % g != j], cols, R, kind, kinds,
                                     sweeps, max_shift, threads) for j in range(g)])
        on = decoded(nested)
        tried[kind] = (nested, on, objective(gold, on, cols), per_group(on))
    kept = ""
    for kind in kinds:
        base_obj, base_grp = (obj_off, grp_off) if not kept else (tried[kept][2], tried[kept][3])
        d = tried[kind][3] - base_grp
        if worth_applying(tried[kind][2] - base_obj, float(d.mean()), float(d.std(ddof=1) / np.sqrt(g))):
            kept = kind
    if mode == "on":
        kept = kinds[-1]
    shown = kept or kinds[-1]
    nested, on, obj_on, grp_on = tried[shown]
    ma0, mi0 = label_f1(gold, off, cols)
    ma1, mi1 = label_f1(gold, on, cols)
    d = grp_on - grp_off
    validation = {"macro_off": ma0, "micro_off": mi0, "macro_on": ma1, "micro_on": mi1, "gain": obj_on - obj_off,
                  "fold_gain_mean": float(d.mean()), "fold_gain_se": float(d.std(ddof=1) / np.sqrt(g)),
                  "documents": float(gold.shape[0]),
                  **{f"gain_{kind}": tried[kind][2] - obj_off for kind in kinds}}
    offsets = _fit_kind(idx, folds, cols, R, kept, kinds, sweeps, max_shift, threads) if kept else np.zeros(idx.n_edges)
    return Calibration(offsets, nested, bool(kept), mode, validation, kind=kept, note=note)


def scored_columns(taxonomy: Taxonomy) -> np.ndarray:
    """The node ids the objective is measured on: every real node but the root (virtual
    ``/_self`` leaves are decoding devices, their parents are the labels)."""
    ids = np.arange(taxonomy.n_nodes)
    return ids[(ids > 0) & ~np.asarray(taxonomy.virtual, dtype=bool)]


def fold_scores(model: Any, batch: SparseBatch) -> FoldScores:
    """:class:`FoldScores` of a trained global model (``edge_scores_of`` / ``decode_bf``) on the
    labelled validation documents ``batch``."""
    gold = label_matrix(batch.labels or [], model.taxonomy, doc_ids=batch.doc_ids).toarray().astype(bool)
    return FoldScores(model.edge_scores_of(batch), model.decode_bf(), gold)
