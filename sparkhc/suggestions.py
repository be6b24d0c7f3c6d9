"""Suggestions: the labels of a document with calibrated scores, and the best ones the decoder did
not choose (``predict --top K``, issue 56).

The raw score of a label ``c`` for a document is its *max-marginal margin*: the score of the best
label tree that contains ``c`` minus the score of the best tree that does not. It is positive for a
label the decoder chose and negative for the others. Both trees are found exactly by the DP the
decoder runs (:func:`sparkhc.decoding.dp_solve`), with the label's edges raised or lowered by
:data:`FORCE` (:func:`concept_margins`). A concept with several positions (a polyhierarchy) is in a
tree when any of its positions is; virtual ``/_self`` leaves are not labels.

The labels a user sees are the predicted labels (the deepest chosen concepts) and the suggestions
(the concepts not chosen, best first). The calibrated score maps a margin to a precision over
exactly these labels (:class:`SuggestionCalibration`): the score of a margin ``s`` is the highest
precision, on validation documents, of the set of shown labels whose margin is at least some
``s' <= s``. Keeping the labels whose score is at least ``t`` then keeps the largest set whose
precision on validation is at least ``t``: a threshold means a precision. The validation documents
are the ones the training's calibration already scores out of fold (:mod:`sparkhc.calibration`),
with the offsets they were decoded with there.

Every function here reads only the documents it is given; nothing here knows about a test split.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from sparkhc.decoding import TreeIndex, dp_solve, tree_index
from sparkhc.taxonomy import Taxonomy

__all__ = [
    "FORCE", "MAX_MARGIN", "BLOCK_CELLS", "MIN_SUPPORT", "MAX_CELLS_PER_DOC", "ConceptColumns", "concept_columns",
    "forced_scores", "concept_margins", "top_candidates", "SuggestionCalibration", "fit_calibration",
    "fit_on_folds", "too_large",
]

#: added to (subtracted from) a label's edge scores to force it into (out of) the best tree: far
#: above any score, exact in float64
FORCE: float = 1e6

#: margins are clipped to +-this (a label every tree holds, e.g. the only child of the root, has no
#: tree without it)
MAX_MARGIN: float = 1e3

#: DP cells (rows x edges) of one batched solve of :func:`forced_scores`
BLOCK_CELLS: int = 2**22

#: the fewest labels a precision of :class:`SuggestionCalibration` is measured on: above the margin
#: of the ``MIN_SUPPORT``-th best label, the precision of those ``MIN_SUPPORT``
MIN_SUPPORT: int = 50

#: the most DP cells (2 x edges x edges) one document's margins may take: a taxonomy with more than
#: about 2,200 edges is refused (:func:`too_large`)
MAX_CELLS_PER_DOC: int = 10**7


def too_large(n_edges: int) -> str:
    """Why suggestions are not computed for a taxonomy of ``n_edges`` edges ("" when they are)."""
    cells = 2 * int(n_edges) ** 2
    if cells <= MAX_CELLS_PER_DOC:
        return ""
    return (f"calibrated label scores decode every document twice per edge: {int(n_edges):,} edges are {cells:.2g} "
            f"DP cells a document, more than sparkhc.suggestions.MAX_CELLS_PER_DOC = {MAX_CELLS_PER_DOC:.2g}")


def forced_scores(index: Taxonomy | TreeIndex, S: np.ndarray, shifts: np.ndarray, bf: np.ndarray | None = None,
                  R: int = 3) -> np.ndarray:
    """``(n_docs, G)``: the best tree's score of every document with the edge scores ``S + shifts[g]``
    (``shifts`` ``(G, n_edges)``), for every ``g``: one exact DP per document and row of ``shifts``,
    batched."""
    idx = tree_index(index)
    S = np.asarray(S, dtype=np.float64)
    sh = np.asarray(shifts, dtype=np.float64)
    n, E = S.shape
    G = sh.shape[0]
    out = np.zeros((n, G), dtype=np.float64)
    step = max(1, BLOCK_CELLS // max(1, G * E))
    for a in range(0, n, step):
        b = min(n, a + step)
        rows = (S[a:b, None, :] + sh[None, :, :]).reshape(-1, E)  # doc-major: document i, shift g
        out[a:b] = dp_solve(idx, rows, bf=bf, R=R, with_k=False).score.reshape(b - a, G)
    return out


@dataclass(frozen=True)
class ConceptColumns:
    """The labels users see, as groups of node columns: concept ``j`` is ``names[j]`` and its real
    positions are the columns ``cols[starts[j]:starts[j + 1]]`` (a tree: one node each);
    ``parent_of`` ``(n_concepts, n_concepts)`` has a 1 at ``[j, k]`` when concept ``k`` is a parent
    of concept ``j`` (over any position)."""

    names: tuple[str, ...]
    cols: np.ndarray
    starts: np.ndarray
    parent_of: sp.csr_matrix

    def reduce_max(self, node_values: np.ndarray) -> np.ndarray:
        """``(n_docs, n_concepts)``: the largest value of each concept's positions."""
        return np.maximum.reduceat(node_values[:, self.cols], self.starts[:-1], axis=1)

    def reduce_any(self, node_mask: np.ndarray) -> np.ndarray:
        """``(n_docs, n_concepts)``: whether any of each concept's positions is set."""
        return np.logical_or.reduceat(node_mask[:, self.cols], self.starts[:-1], axis=1)

    def deepest(self, chosen: np.ndarray) -> np.ndarray:
        """``(n_docs, n_concepts)``: the chosen concepts none of whose children is chosen."""
        has_child = np.asarray((sp.csr_matrix(chosen.astype(np.float64)) @ self.parent_of).toarray()) > 0
        return chosen & ~has_child


_COLS: dict[int, tuple[Taxonomy, ConceptColumns]] = {}


def concept_columns(tax: Taxonomy) -> ConceptColumns:
    """The :class:`ConceptColumns` of a model taxonomy (cached per taxonomy object): every real node
    but the root, grouped by :meth:`~sparkhc.taxonomy.Taxonomy.concept_name`, concepts in order of
    their first position."""
    hit = _COLS.get(id(tax))
    if hit is not None and hit[0] is tax:
        return hit[1]
    groups: dict[str, list[int]] = {}
    virtual = np.asarray(tax.virtual, dtype=bool)
    for c in range(1, tax.n_nodes):
        if not virtual[c]:
            groups.setdefault(tax.concept_name(c), []).append(c)
    names = tuple(groups)
    pos = {n: j for j, n in enumerate(names)}
    pairs = {(pos[tax.concept_name(c)], pos[tax.concept_name(int(tax.parent[c]))])
             for g in groups.values() for c in g if int(tax.parent[c]) > 0}
    rows, cols_ = (np.array(x, dtype=np.int64) for x in zip(*pairs, strict=True)) if pairs else (
        np.zeros(0, np.int64), np.zeros(0, np.int64))
    parent_of = sp.csr_matrix((np.ones(rows.size), (rows, cols_)), shape=(len(names), len(names)))
    cols = np.array([c for g in groups.values() for c in g], dtype=np.int64)
    starts = np.cumsum([0, *(len(g) for g in groups.values())]).astype(np.int64)
    out = ConceptColumns(names, cols, starts, parent_of)
    if len(_COLS) >= 32:
        _COLS.pop(next(iter(_COLS)))
    _COLS[id(tax)] = (tax, out)
    return out


def concept_margins(tax: Taxonomy, S: np.ndarray, bf: np.ndarray | None = None, R: int = 3,
                    chosen: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, ConceptColumns]:
    """``(margins, chosen, concepts)``, ``(n_docs, n_concepts)`` each: the max-marginal margin of
    every concept (module docstring, clipped to +-:data:`MAX_MARGIN`) and whether the decoder chose
    it. ``chosen`` (a node mask, optional): the decoder's own trees, which decide what is chosen (a
    near tie decoded otherwise in float32 is then neither suggested nor missed)."""
    idx = tree_index(tax)
    cc = concept_columns(tax)
    S = np.asarray(S, dtype=np.float64)
    if S.ndim == 1:
        S = S[None, :]
    E, nc = idx.n_edges, len(cc.names)
    best = dp_solve(idx, S, bf=bf, R=R, with_k=False)
    sel = best.selected if chosen is None else np.asarray(chosen, dtype=bool)
    put_in = np.zeros((cc.cols.size, E))
    put_in[np.arange(cc.cols.size), cc.cols - 1] = FORCE
    put_out = np.zeros((nc, E))
    put_out[np.repeat(np.arange(nc), np.diff(cc.starts)), cc.cols - 1] = -FORCE
    both = forced_scores(idx, S, np.vstack([put_in, put_out]), bf, R)
    v_in = np.full((S.shape[0], idx.n_nodes), -np.inf)
    v_in[:, cc.cols] = both[:, : cc.cols.size] - FORCE
    v_in = cc.reduce_max(v_in)
    v_out = both[:, cc.cols.size:]
    v_out = np.where(v_out < -FORCE / 2, -np.inf, v_out)
    is_chosen = cc.reduce_any(sel)
    with np.errstate(invalid="ignore"):
        m = np.where(is_chosen, best.score[:, None] - v_out, v_in - best.score[:, None])
    return np.clip(m, -MAX_MARGIN, MAX_MARGIN), is_chosen, cc


def top_candidates(margins: np.ndarray, chosen: np.ndarray, k: int) -> list[list[tuple[int, float]]]:
    """Per document, the ``k`` concepts not ``chosen`` with the highest margins as ``(concept index,
    margin)``, best first (ties: the lower index first)."""
    out: list[list[tuple[int, float]]] = []
    for row, ch in zip(margins, chosen, strict=True):
        ok = np.flatnonzero(~ch)
        order = ok[np.lexsort((ok, -row[ok]))][:k]
        out.append([(int(j), float(row[j])) for j in order])
    return out


@dataclass(frozen=True)
class SuggestionCalibration:
    """A margin -> precision step function (module docstring): from ``margins[j]`` on (ascending)
    the score is ``precision[j]`` (non-decreasing); below ``margins[0]`` it is ``precision[0]``.
    ``documents``/``labels``/``correct``: what it was fitted on (documents, shown labels, correct ones)."""

    margins: np.ndarray
    precision: np.ndarray
    documents: int
    labels: int
    correct: int

    def score(self, margins: np.ndarray | Sequence[float]) -> np.ndarray:
        m = np.asarray(margins, dtype=np.float64)
        j = np.searchsorted(self.margins, m, side="right") - 1
        return np.asarray(self.precision[np.maximum(j, 0)], dtype=np.float64)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able record (the model's metadata, ``training.calibration.suggestions``)."""
        return {"margins": [float(x) for x in self.margins], "precision": [float(x) for x in self.precision],
                "documents": int(self.documents), "labels": int(self.labels), "correct": int(self.correct)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SuggestionCalibration:
        return cls(np.asarray(d["margins"], dtype=np.float64), np.asarray(d["precision"], dtype=np.float64),
                   int(d["documents"]), int(d["labels"]), int(d["correct"]))


def fit_calibration(margins: np.ndarray, correct: np.ndarray, documents: int = 0,
                    min_support: int = MIN_SUPPORT) -> SuggestionCalibration:
    """The :class:`SuggestionCalibration` of validation labels given by their ``margins`` and whether
    each is ``correct`` (the concept is among the document's gold labels, ancestors included). The
    precision of "margin >= s" is measured at every distinct margin ``s``, on at least the
    ``min_support`` best labels; the score of ``s`` is the highest of these precisions at or
    below ``s`` (a running maximum from the lowest margin up), rounded to 3 decimals."""
    m = np.asarray(margins, dtype=np.float64).ravel()
    y = np.asarray(correct, dtype=bool).ravel()
    if m.size != y.size:
        raise ValueError(f"fit_calibration: {m.size} margins but {y.size} correctness flags")
    if m.size == 0:
        raise ValueError("fit_calibration: no validation label to calibrate on")
    order = np.argsort(-m, kind="stable")
    ms, ys = m[order], y[order]
    hits = np.cumsum(ys)
    count = np.arange(1, m.size + 1)
    last = np.flatnonzero(np.r_[ms[1:] != ms[:-1], True])  # the last index of every distinct margin
    support = min(int(min_support), m.size)
    at = np.maximum(last, support - 1)
    prec = hits[at] / count[at]  # descending margins
    asc_m, asc_p = ms[last][::-1], prec[::-1]
    q = np.round(np.maximum.accumulate(asc_p), 3)
    keep = np.r_[True, q[1:] != q[:-1]]
    return SuggestionCalibration(asc_m[keep], q[keep], int(documents), int(m.size), int(ys.sum()))


def fit_on_folds(tax: Taxonomy, folds: Sequence[Any], offsets: Sequence[np.ndarray], R: int = 3,
                 min_support: int = MIN_SUPPORT) -> SuggestionCalibration:
    """The calibration of the labels shown for out-of-fold scored documents (the deepest chosen
    concepts and every concept not chosen): ``folds`` are :class:`sparkhc.calibration.FoldScores`
    (edge scores, branching weights and the gold node matrix, ancestor-closed), each decoded with its
    ``offsets`` (the edge offsets fitted without that fold, zeros when none are applied), as the model
    that predicts decodes its own; a label is correct when it is among the gold concepts."""
    cc = concept_columns(tax)
    ms, ok = [], []
    for f, off in zip(folds, offsets, strict=True):
        m, chosen, _ = concept_margins(tax, np.asarray(f.S, dtype=np.float64) + off, f.bf, R)
        gold = cc.reduce_any(np.asarray(f.gold, dtype=bool))
        shown = cc.deepest(chosen) | ~chosen
        ms.append(m[shown])
        ok.append(gold[shown])
    return fit_calibration(np.concatenate(ms), np.concatenate(ok), sum(len(f.S) for f in folds), min_support)
