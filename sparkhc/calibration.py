"""Per-edge score offsets of the global model fitted on validation data (rare labels, issue 17).

An offset ``b_e`` added to the score of edge ``e`` for every document is a change of the learned
bias weight of that edge (``W[bias row, e] += b_e / bias``): the calibrated model is an ordinary
:class:`~sparkhc.models.murawaki.GlobalPA` state, and its decoding is the same exact DP
(:func:`sparkhc.decoding.dp_solve`) of the shifted scores. A positive offset lets a rare label
that the margin-trained model scores just below its competitors be predicted; a negative one
removes false positives.

The offsets are *cross-fitted* on the training documents only (``train.calibrate``):

1. the training documents are split into ``k`` seeded folds; for each fold ``f`` a model with the
   same parameters is trained on the other folds and scores fold ``f`` (out-of-fold scores,
   :class:`FoldScores`);
2. on every fold the offsets are fitted by coordinate ascent (:func:`fit_offsets`): sweeps over
   the edges, each edge's offset moved by the shift from :data:`GRID` that most increases the
   validation objective macro-F1 + micro-F1 over the real nodes (:func:`objective`);
3. the ``k`` fits are combined per edge, by their plain mean or by the positive-part James-Stein
   estimate of the mean (:func:`shrink_offsets`): the mean times ``max(0, 1 - v / mean^2)`` with
   ``v`` the estimated variance of the mean (sample variance / k), so that an edge whose fits
   disagree is shrunk towards 0 (no penalty constant is tuned);
4. the effect is estimated honestly before anything is applied: each fold is decoded with the
   combination of the *other* folds' fits; the combination with the best pooled out-of-fold
   objective is chosen, and ``mode="auto"`` applies it only if it beats the uncalibrated model
   (so calibration switches itself off where it does not help on the user's data); ``mode="on"``
   always applies it.

Every function here reads only the documents it is given (the training documents); nothing here
knows about a test split.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sparkhc.batch import SparseBatch, label_matrix
from sparkhc.decoding import TreeIndex, dp_solve
from sparkhc.taxonomy import Taxonomy

__all__ = [
    "GRID", "MODES", "COMBINES", "FoldScores", "Calibration", "objective", "label_f1", "fit_offsets",
    "shrink_offsets", "combine", "cross_fit", "fold_scores", "scored_columns",
]

#: shifts tried per edge and sweep, in units of the edge scores (the cost-augmented margin is 1)
GRID: tuple[float, ...] = (-0.6, -0.4, -0.25, -0.15, -0.08, -0.04, 0.04, 0.08, 0.15, 0.25, 0.4, 0.6)

#: values of ``train.calibrate``
MODES: tuple[str, ...] = ("off", "auto", "on")


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
    applied), the per-fold fits, the validation objective without / with the cross-fitted offsets
    and its parts, and whether they were applied."""

    offsets: np.ndarray
    fold_offsets: np.ndarray
    applied: bool
    mode: str
    combine: str
    validation: dict[str, float] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        """A JSON-able record (model metadata, logs)."""
        return {
            "mode": self.mode,
            "applied": bool(self.applied),
            "combine": self.combine,
            "folds": int(self.fold_offsets.shape[0]),
            "nonzero_offsets": int(np.count_nonzero(self.offsets)),
            "validation": {k: round(float(v), 6) for k, v in self.validation.items()},
        }


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


def fit_offsets(
    idx: TreeIndex, fold: FoldScores, cols: np.ndarray, R: int = 3, grid: Sequence[float] = GRID, sweeps: int = 2,
) -> np.ndarray:
    """Per-edge offsets maximising :func:`objective` on one fold by coordinate ascent: ``sweeps``
    passes over the edges in id order; per edge, the shift from ``grid`` with the largest strict
    gain is kept (none when no shift gains; the first of equal gains)."""
    S = np.asarray(fold.S, dtype=np.float64)
    b = np.zeros(idx.n_edges)
    best = objective(fold.gold, _decode(idx, S, fold.bf, R), cols)
    for _ in range(int(sweeps)):
        moved = False
        for e in range(idx.n_edges):
            cur = b[e]
            top, arg = best, None
            for d in grid:
                b[e] = cur + d
                v = objective(fold.gold, _decode(idx, S + b, fold.bf, R), cols)
                if v > top + 1e-12:
                    top, arg = v, d
            b[e] = cur if arg is None else cur + arg
            if arg is not None:
                best, moved = top, True
        if not moved:
            break
    return b


def shrink_offsets(fits: np.ndarray) -> np.ndarray:
    """The positive-part James-Stein combination of ``k >= 2`` fits ``(k, n_edges)`` per edge:
    ``mean * max(0, 1 - (var / k) / mean^2)`` (``var`` the sample variance, ddof 1); 0 where the
    mean is 0. Equal fits keep their value; fits whose spread is as large as their mean give 0."""
    fits = np.asarray(fits, dtype=np.float64)
    k = fits.shape[0]
    if k < 2:
        raise ValueError(f"shrink_offsets needs at least 2 fits, got {k}")
    m = fits.mean(axis=0)
    v = fits.var(axis=0, ddof=1) / k
    m2 = m * m
    with np.errstate(divide="ignore", invalid="ignore"):
        factor = np.where(m2 > 0, np.maximum(0.0, 1.0 - v / np.where(m2 > 0, m2, 1.0)), 0.0)
    return m * factor


#: how the per-fold fits are combined (:func:`combine`); ``cross_fit`` chooses among them by validation
COMBINES: tuple[str, ...] = ("shrunk", "mean")


def combine(fits: np.ndarray, how: str) -> np.ndarray:
    """The per-edge combination of per-fold fits ``(k, n_edges)``: ``"shrunk"``
    (:func:`shrink_offsets`) or ``"mean"`` (the plain mean)."""
    if how == "shrunk":
        return shrink_offsets(fits)
    if how == "mean":
        return np.asarray(fits, dtype=np.float64).mean(axis=0)
    raise ValueError(f"unknown combination {how!r}; known: {', '.join(COMBINES)}")


def cross_fit(
    idx: TreeIndex, folds: Sequence[FoldScores], cols: np.ndarray, R: int = 3, mode: str = "auto",
    combines: Sequence[str] = COMBINES, grid: Sequence[float] = GRID, sweeps: int = 2,
    fits: np.ndarray | None = None,
) -> Calibration:
    """Offsets from ``k >= 3`` validation folds (module docstring). The offsets are fitted per fold
    (:func:`fit_offsets`); every combination in ``combines`` is scored by the pooled out-of-fold
    objective (each fold decoded with the combination of the *other* folds' fits) and the best is
    chosen (the first on ties). ``mode="auto"`` applies it only when it beats the uncalibrated
    objective; ``"on"`` always. ``validation`` records ``macro_off``/``micro_off``, and per
    combination ``macro_<how>``, ``micro_<how>``, ``gain_<how>`` (objective minus the uncalibrated
    one), and ``gain`` of the chosen one; ``Calibration.combine`` names it. ``fits``: per-fold
    offsets already fitted (to compare settings without refitting)."""
    if mode not in MODES or mode == "off":
        raise ValueError(f"cross_fit: mode must be 'auto' or 'on', not {mode!r}")
    k = len(folds)
    if k < 3:
        raise ValueError(f"cross-fitted offsets need at least 3 folds (2 fits left out of each), got {k}")
    if not combines:
        raise ValueError("cross_fit: no combination to choose from")
    cols = np.asarray(cols, dtype=np.int64)
    if fits is None:
        fits = np.stack([fit_offsets(idx, f, cols, R, grid, sweeps) for f in folds])
    if fits.shape != (k, idx.n_edges):
        raise ValueError(f"cross_fit: fits of shape {fits.shape}, expected {(k, idx.n_edges)}")
    gold = np.concatenate([f.gold for f in folds])
    off = np.concatenate([_decode(idx, np.asarray(f.S, np.float64), f.bf, R) for f in folds])
    ma0, mi0 = label_f1(gold, off, cols)
    validation = {"macro_off": ma0, "micro_off": mi0, "documents": float(gold.shape[0])}
    best: tuple[float, str] | None = None
    for how in combines:
        on = np.concatenate([
            _decode(idx, np.asarray(f.S, np.float64) + combine(np.delete(fits, i, axis=0), how), f.bf, R)
            for i, f in enumerate(folds)
        ])
        ma1, mi1 = label_f1(gold, on, cols)
        gain = (ma1 + mi1) - (ma0 + mi0)
        validation.update({f"macro_{how}": ma1, f"micro_{how}": mi1, f"gain_{how}": gain})
        if best is None or gain > best[0] + 1e-12:
            best = (gain, how)
    assert best is not None
    validation["gain"] = best[0]
    applied = mode == "on" or best[0] > 1e-12
    offsets = combine(fits, best[1]) if applied else np.zeros(idx.n_edges)
    return Calibration(offsets, fits, applied, mode, best[1], validation)


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
