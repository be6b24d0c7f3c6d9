"""Evaluation metrics as mergeable integer count tables.

Every metric of ALGORITHMS.md (Murawaki 2013 §9, Cesa-Bianchi et al. 2004 §2 and §5, Xiao et al.
2019, Li & Yamanishi 1997, Jia & Zhang 2020) is derived from tables of *integer* counts that are
accumulated document batch by document batch and merged by addition. Floats are derived only at
the end, with exact rational arithmetic (:class:`fractions.Fraction`) followed by one rounding, so
the result does not depend on how the documents were split or in which order the parts were
merged: a Spark aggregation over partitions gives results equal (``==``) to one numpy pass.

The core classes are :class:`MetricCounts` (hierarchical multi-label classification) and
:class:`MDCCounts` (multi-dimensional classification). This module needs numpy and scipy only.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction
from typing import Any

import numpy as np
import scipy.sparse as sp

from sparkhc.errors import ModelError
from sparkhc.polyhierarchy import hloss_costs
from sparkhc.taxonomy import ConceptDag, Taxonomy

__all__ = [
    "METRIC_KEYS",
    "MDC_KEYS",
    "MDCCounts",
    "MetricCounts",
    "break_even_point",
    "evaluate",
    "format_table",
    "model_size",
    "pr_curve",
]

#: Keys of :meth:`MetricCounts.compute`, in display order (``BEP`` only when scores were given).
METRIC_KEYS: tuple[str, ...] = (
    "EBP", "EBR", "EBF",
    "LBMiP", "LBMiR", "LBMiF", "LBMaP", "LBMaR", "LBMaF",
    "hP", "hR", "hF",
    "hloss_uniform", "hloss_normalized", "zero_one", "symdiff",
    "hloss_uniform_std", "hloss_normalized_std", "zero_one_std", "symdiff_std",
    "node_micro_F1", "node_macro_F1",
    "BEP",
    "n_docs",
)  # fmt: skip

#: Keys of :meth:`MDCCounts.compute` (followed by ``accuracy_<j>`` per class space).
MDC_KEYS: tuple[str, ...] = ("hamming_score", "exact_match", "sub_exact_match", "n_docs")

_FORMAT_VERSION = 1
# Largest common denominator of the normalized H-loss costs for which per-document sums are done
# in int64 (a per-document normalized H-loss is at most 1, so its numerator is at most this).
_INT64_SAFE = 2**62


# ---------------------------------------------------------------------------------------------
# small exact helpers
def _ratio(num: int, den: int) -> Fraction:
    """num / den, or 0 when den == 0 (the zero-denominator convention for P, R and F)."""
    return Fraction(num, den) if den else Fraction(0)


def _hist_moments(hist: Mapping[Any, int], n: int) -> tuple[Fraction, Fraction]:
    """Exact mean and population variance of a histogram {value: count} over n items."""
    if n == 0:
        return Fraction(0), Fraction(0)
    s1 = sum((Fraction(v) * c for v, c in hist.items()), Fraction(0))
    s2 = sum((Fraction(v) * Fraction(v) * c for v, c in hist.items()), Fraction(0))
    mean = s1 / n
    return mean, s2 / n - mean * mean


def _std(var: Fraction) -> float:
    return math.sqrt(float(var)) if var > 0 else 0.0


def _member(sorted_keys: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """Boolean mask: which queries occur in the sorted array ``sorted_keys``."""
    if sorted_keys.size == 0:
        return np.zeros(queries.shape, dtype=bool)
    pos = np.minimum(np.searchsorted(sorted_keys, queries), sorted_keys.size - 1)
    return sorted_keys[pos] == queries


def _add_hist(hist: dict[Any, int], values: np.ndarray) -> None:
    if values.size == 0:
        return
    vals, counts = np.unique(values, return_counts=True)
    for v, c in zip(vals.tolist(), counts.tolist(), strict=True):
        hist[v] = hist.get(v, 0) + int(c)


def _merge_hist(a: dict[Any, int], b: Mapping[Any, int]) -> None:
    for k, c in b.items():
        a[k] = a.get(k, 0) + int(c)


def _hist_to_array(hist: Mapping[int, int]) -> np.ndarray:
    items = sorted(hist.items())
    return np.array(items, dtype=np.int64).reshape(len(items), 2)


def _hist_from_array(arr: np.ndarray) -> dict[int, int]:
    return {int(v): int(c) for v, c in np.asarray(arr, dtype=np.int64).reshape(-1, 2)}


# ---------------------------------------------------------------------------------------------
# precision-recall curve and break-even point (Li & Yamanishi 1997, §5)
def _score_table(
    values: np.ndarray, pos: np.ndarray, neg: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Canonical form of a (score, #gold, #non-gold) table: distinct scores ascending, counts summed.

    The result depends only on the multiset of (score, is_gold) pairs, never on their order.
    """
    values = np.asarray(values, dtype=np.float64).ravel() + 0.0  # -0.0 -> +0.0
    pos = np.asarray(pos, dtype=np.int64).ravel()
    neg = np.asarray(neg, dtype=np.int64).ravel()
    if values.size == 0:
        return values, pos, neg
    if np.isnan(values).any():
        raise ValueError("scores contain NaN; a precision-recall curve needs ordered scores")
    order = np.argsort(values, kind="stable")
    v = values[order]
    starts = np.concatenate(([0], np.flatnonzero(v[1:] != v[:-1]) + 1))
    return v[starts], np.add.reduceat(pos[order], starts), np.add.reduceat(neg[order], starts)


def _curve_counts(pos: np.ndarray, neg: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """(TP_k, PP_k, G) at each distinct-score cut-off, highest score first."""
    tp = np.cumsum(pos[::-1])
    pp = np.cumsum((pos + neg)[::-1])
    return tp, pp, int(pos.sum())


def _pr_from_table(
    values: np.ndarray, pos: np.ndarray, neg: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    tp, pp, g = _curve_counts(pos, neg)
    precision = tp / np.maximum(pp, 1)
    recall = tp / g if g else np.zeros(len(tp))
    return values[::-1].copy(), precision, recall


def _bep_from_table(pos: np.ndarray, neg: np.ndarray) -> float:
    """Exact break-even point from a canonical score table (see :func:`break_even_point`)."""
    tp_arr, pp_arr, g = _curve_counts(pos, neg)
    if g == 0 or len(tp_arr) == 0:
        return 0.0
    # first cut-off with recall > 0 and P <= R, i.e. TP > 0 and PP >= G (TP/PP <= TP/G); the
    # last cut-off (PP = N >= G, TP = G > 0) always qualifies
    k = int(np.flatnonzero((tp_arr > 0) & (pp_arr >= g))[0])

    def point(i: int) -> tuple[Fraction, Fraction]:
        return Fraction(int(tp_arr[i]), int(pp_arr[i])), Fraction(int(tp_arr[i]), g)

    pk, rk = point(k)
    dk = pk - rk
    if dk == 0:
        return float(pk)
    # previous point: cut-off k-1, or the virtual start (R = 0, P = P_1) above the top score
    pj, rj = point(k - 1) if k > 0 else (point(0)[0], Fraction(0))
    dj = pj - rj  # >= 0: either R = 0 there or k is the first cut-off with P <= R
    lam = dj / (dj - dk)
    return float(pj + lam * (pk - pj))


def pr_curve(scores: np.ndarray, gold: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Micro-averaged precision-recall curve over score thresholds.

    Every (document, label) pair is a binary decision "label assigned iff score >= t" (Li &
    Yamanishi 1997, §5: sweeping the threshold gives the precision-recall curve; micro-averaging
    pools the decisions of all categories). One point per distinct score, highest first.
    Pairs with equal scores are always cut together, so the curve does not depend on the order
    of the pairs.

    Parameters
    ----------
    scores : ndarray of float
        Scores of the pairs (any shape; flattened). NaN is rejected.
    gold : ndarray of bool
        Same shape: True where the label is in the document's gold set.

    Returns
    -------
    thresholds, precision, recall : ndarray of float64
        ``precision[k] = TP_k / PP_k`` and ``recall[k] = TP_k / G`` for the cut-off
        ``score >= thresholds[k]`` (recall 0 when there is no gold pair).
    """
    scores = np.asarray(scores, dtype=np.float64).ravel()
    g = np.asarray(gold, dtype=bool).ravel()
    if scores.shape != g.shape:
        raise ValueError(f"scores and gold have different sizes: {scores.size} != {g.size}")
    return _pr_from_table(*_score_table(scores, g, ~g))


def break_even_point(scores: np.ndarray, gold: np.ndarray) -> float:
    """Micro-averaged precision-recall break-even point (Li & Yamanishi 1997, §5).

    On the curve of :func:`pr_curve` (cut-offs ``k = 1..K``, highest score first),
    ``P_k - R_k = TP_k (G - PP_k) / (PP_k G)``: it changes sign where the number of assigned pairs
    ``PP_k`` crosses the number of gold pairs ``G`` (points with ``TP_k = 0`` have P = R = 0 and
    are not crossings). The break-even point is found at the first cut-off ``k`` with
    ``TP_k > 0`` and ``P_k <= R_k``:

    * if ``P_k = R_k`` it is that value;
    * otherwise P and R are interpolated linearly between cut-off ``k - 1`` and ``k`` to the point
      where ``P - R = 0``: ``λ = d_{k-1} / (d_{k-1} - d_k)`` with ``d = P - R``, and
      ``BEP = P_{k-1} + λ (P_k - P_{k-1})`` (= the interpolated recall). Above the first cut-off
      a virtual start point ``(R = 0, P = P_1)`` is used, so a single tie group holding all pairs
      gives the base rate ``G / N``.

    The arithmetic is exact (rationals) and rounded once. Returns 0.0 when there is no gold pair.

    Parameters
    ----------
    scores, gold : ndarray
        As for :func:`pr_curve`.
    """
    scores = np.asarray(scores, dtype=np.float64).ravel()
    g = np.asarray(gold, dtype=bool).ravel()
    if scores.shape != g.shape:
        raise ValueError(f"scores and gold have different sizes: {scores.size} != {g.size}")
    _, pos, neg = _score_table(scores, g, ~g)
    return _bep_from_table(pos, neg)


# ---------------------------------------------------------------------------------------------
def _scored_mask(taxonomy: Taxonomy, scored: Any) -> np.ndarray:
    n = taxonomy.n_nodes
    real = ~taxonomy.virtual.copy()
    real[0] = False
    if scored is None:
        return real
    arr = np.asarray(scored)
    if arr.dtype == bool:
        if arr.shape != (n,):
            raise ValueError(f"the scored mask must have shape ({n},) (one entry per node); got {arr.shape}")
        mask = arr.copy()
    else:
        mask = np.zeros(n, dtype=bool)
        for x in scored:
            c = taxonomy.id(x) if isinstance(x, str) else int(x)
            if not 0 <= c < n:
                raise ValueError(f"scored node id {c} is outside [0, {n})")
            mask[c] = True
    bad = np.flatnonzero(mask & ~real)
    if bad.size:
        raise ValueError(
            f"scored labels must be real non-root nodes; got {taxonomy.names[int(bad[0])]!r} "
            f"({bad.size} root or virtual node(s) in the scored set)"
        )
    return mask


class MetricCounts:
    """Mergeable count tables for hierarchical multi-label evaluation.

    Feed ancestor-closed gold and predicted label sets with :meth:`add`, combine partial tables with
    :meth:`merge`, and derive every metric with :meth:`compute`. All tables are integers; floats are
    computed at the end with exact rational arithmetic and rounded once, so results are identical
    however the documents were split and merged.

    Parameters
    ----------
    taxonomy : Taxonomy
        Node ids index the columns of the label matrices.
    scored : bool ndarray of shape (n_nodes,), or iterable of node ids / names, optional
        Labels scored by the example-based (EB*) and label-based (LB*) metrics and by the
        break-even point. Default: all real nodes (non-root, non-virtual). Give the leaves for
        Murawaki's leaf-label setting. Root and virtual nodes are rejected.

    Notes
    -----
    Node sets. Columns of the root and of virtual ``/_self`` leaves are ignored: since the sets
    are ancestor-closed, a virtual leaf's parent is already in the set, so ignoring it is the
    same as mapping the prediction back to the real node (ALGORITHMS.md, Notation). "All nodes"
    below means the real nodes (non-root, non-virtual) of the taxonomy.

    Metrics (all means over the T documents):

    * **EBP, EBR, EBF** (Murawaki 2013, §9): per document over the scored labels,
      ``|G∩P|/|P|``, ``|G∩P|/|G|``, ``2|G∩P|/(|G|+|P|)``. Conventions: empty P and empty G give
      1, 1, 1; empty P with non-empty G gives EBP = 0 (and EBR = EBF = 0); empty G with
      non-empty P gives EBR = 0 (and EBP = EBF = 0). Kept as a table of document counts by
      ``(|G∩P|, |P|, |G|)``.
    * **LBMiP/R/F, LBMaP/R/F** (Murawaki 2013, §9): per-label TP/FP/FN over the scored labels.
      Micro: P = ΣTP/Σ(TP+FP), R = ΣTP/Σ(TP+FN), F = 2ΣTP/(2ΣTP+ΣFP+ΣFN) (the harmonic mean of
      micro P and R), 0 when a denominator is 0. Macro: the mean of per-label P, R and F
      (per-label F = 2TP/(2TP+FP+FN), not the harmonic mean of macro P and R) over the scored
      labels that occur in the gold or the prediction of at least one evaluated document; other
      labels are excluded; a per-label ratio with zero denominator is 0.
    * **hP, hR, hF** (Murawaki 2013, §9): ``Σ|tree(m)∩tree(m̂)| / Σ|tree(m̂)|``,
      ``Σ|tree(m)∩tree(m̂)| / Σ|tree(m)|`` and their harmonic mean. With ancestor-closed sets
      ``tree(m)`` is the set of real nodes in the row, so the three sums are ΣTP, Σ(TP+FP) and
      Σ(TP+FN) over all nodes, and hF equals node_micro_F1.
    * **node_micro_F1, node_macro_F1** (Xiao et al. 2019, Metrics): micro and macro F1 over all
      nodes except the root (virtual nodes removed), with the macro convention above.
    * **hloss_uniform, hloss_normalized** (Cesa-Bianchi et al. 2004, §2 and §5): node i is an
      H-loss mistake when ŷ_i ≠ y_i and ŷ_j = y_j for all its ancestors j. Uniform costs c_i = 1;
      normalized costs c_i = 1/|children(ROOT)| at depth 1 and c_i = c_parent/|children(parent)|
      below (children counted in the real tree, so per document 0 ≤ loss ≤ 1). On the concepts of a
      polyhierarchy (:class:`~sparkhc.taxonomy.ConceptDag`) the ancestors are those over every
      parent, and c_i is the sum over i's parents q of c_q/|children(q)| (the sum of the costs of
      i's positions in the tree of paths, so per document still 0 ≤ loss ≤ 1). Kept as the
      per-node count of documents where node i is an H-loss mistake (the mean is
      ``Σ_i c_i count_i / T``, exact), plus per-document histograms for the standard deviations.
    * **zero_one** ``[ŷ ≠ y]`` and **symdiff** ``Σ_i [ŷ_i ≠ y_i]`` over all nodes (Cesa-Bianchi
      et al. 2004, §2).
    * ``*_std``: population standard deviation (ddof = 0) of the per-document values. They are
      exact: the uniform H-loss and symmetric difference are kept as histograms of per-document
      integers; the normalized H-loss as a histogram keyed by the per-document loss as an exact
      rational (stored as ``"num/den"`` strings in :meth:`to_arrays`); 0/1 from its mean.
    * **BEP** (Li & Yamanishi 1997, §5), only when scores were passed to :meth:`add`: the
      micro-averaged break-even point of all (document, scored label) pairs, see
      :func:`break_even_point`. The pairs are kept as a table of (distinct score, #gold,
      #non-gold), merged by adding counts.

    With T = 0 every metric is 0.

    Examples
    --------
    >>> from sparkhc.taxonomy import Taxonomy
    >>> from sparkhc.batch import label_matrix
    >>> tax = Taxonomy.from_edges([("R", "A"), ("R", "B"), ("A", "AA"), ("A", "AB")])
    >>> mc = MetricCounts(tax)
    >>> mc.add(label_matrix([["AA"]], tax), label_matrix([["AB"]], tax))
    >>> mc.compute()["hF"]
    0.5
    """

    def __init__(self, taxonomy: Taxonomy, scored: np.ndarray | Iterable[int | str] | None = None) -> None:
        self.taxonomy = taxonomy
        self.scored: np.ndarray = _scored_mask(taxonomy, scored)
        n = taxonomy.n_nodes
        real = ~taxonomy.virtual.copy()
        real[0] = False
        self._real = real
        self._scored_ids = np.flatnonzero(self.scored)
        self.n_docs = 0
        self.tp = np.zeros(n, dtype=np.int64)
        self.fp = np.zeros(n, dtype=np.int64)
        self.fn = np.zeros(n, dtype=np.int64)
        self.hloss_nodes = np.zeros(n, dtype=np.int64)
        self.eb_table: dict[tuple[int, int, int], int] = {}
        self.hloss_hist: dict[int, int] = {}
        self.symdiff_hist: dict[int, int] = {}
        self.hnorm_hist: dict[Fraction, int] = {}
        self.n_score_docs = 0
        # (score, #gold, #non-gold) tables, each canonical; concatenated and re-canonicalized
        # lazily (see _score_pairs) so that many small batches do not cost a sort each
        self._bep_parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self._init_costs()

    # ------------------------------------------------------------------ normalized H-loss costs
    def _init_costs(self) -> None:
        tax = self.taxonomy
        n = tax.n_nodes
        self._dag = tax if isinstance(tax, ConceptDag) else None
        if self._dag is not None:
            # a concept DAG: its parents CSR (closedness) and every proper ancestor (the H-loss)
            self._par_ptr = np.concatenate([[0], np.cumsum([len(p) for p in self._dag.parents])]).astype(np.int64)
            self._par_ids = (np.concatenate(self._dag.parents) if n > 1 else np.zeros(0)).astype(np.int64)
            anc = self._dag.ancestor_matrix()
            self._anc_ptr = np.asarray(anc.indptr, dtype=np.int64)
            self._anc_ids = np.asarray(anc.indices, dtype=np.int64)
            fracs = hloss_costs(self._dag.parents, self._dag.n_children(), self._dag.topological_order().tolist())
            self._cost = [Fraction(a, b) for a, b in fracs]
        else:
            n_real_children = [int(np.count_nonzero(self._real[k])) for k in tax.children]
            den = [1] * n
            for c in range(1, n):  # level order: the parent is done first
                p = int(tax.parent[c])
                den[c] = den[p] * max(n_real_children[p], 1)
            self._cost = [Fraction(1, d) for d in den]
        lcm = 1
        for c in np.flatnonzero(self._real).tolist():
            lcm = math.lcm(lcm, self._cost[c].denominator)
        self._cost_lcm = lcm
        self._cost_w: np.ndarray | None = None
        if lcm <= _INT64_SAFE and all(f * lcm <= _INT64_SAFE for f in self._cost):
            self._cost_w = np.array([int(f * lcm) if lcm % f.denominator == 0 else 0 for f in self._cost],
                                    dtype=np.int64)

    def cost(self, node: int) -> Fraction:
        """Normalized H-loss cost c_i of a node (Cesa-Bianchi et al. 2004, §5)."""
        return self._cost[int(node)]

    # ------------------------------------------------------------------ accumulation
    def _keys(self, m: Any, what: str, n_docs: int | None, closed: bool = True) -> tuple[np.ndarray, int]:
        """Sorted unique keys row * n_nodes + col of the real-node members of a label matrix
        (``closed``: check that every set is ancestor-closed)."""
        n_nodes = self.taxonomy.n_nodes
        m = sp.csr_matrix(m)
        if m.shape[1] != n_nodes:
            raise ValueError(f"{what} has {m.shape[1]} columns but the taxonomy has {n_nodes} nodes")
        if n_docs is not None and m.shape[0] != n_docs:
            raise ValueError(f"{what} has {m.shape[0]} rows, expected {n_docs}")
        rows = np.repeat(np.arange(m.shape[0], dtype=np.int64), np.diff(m.indptr))
        cols = m.indices.astype(np.int64)
        keep = self._real[cols] & (m.data != 0)  # no eliminate_zeros: never modify the caller's matrix
        keys = np.unique(rows[keep] * n_nodes + cols[keep])
        if not closed:
            return keys, int(m.shape[0])
        if self._dag is not None:
            self._check_dag_closed(keys, what)
            return keys, int(m.shape[0])
        # ancestor-closedness: the parent of every member is the root or a member
        cols = keys % n_nodes
        par = self.taxonomy.parent[cols].astype(np.int64)
        need = par > 0
        pk = (keys - cols + par)[need]
        ok = _member(keys, pk)
        if not ok.all():
            i = int(np.flatnonzero(~ok)[0])
            k = int(keys[need][i])
            r, c = divmod(k, n_nodes)
            names = self.taxonomy.names
            raise ValueError(
                f"{what}, row {r}: node {names[c]!r} is present but its parent "
                f"{names[int(self.taxonomy.parent[c])]!r} is not ({int((~ok).sum())} such entries); "
                "label sets must be ancestor-closed (use sparkhc.batch.label_matrix(..., closed=True))"
            )
        return keys, int(m.shape[0])

    def _check_dag_closed(self, keys: np.ndarray, what: str) -> None:
        """Every parent (over every link) of every member of a concept DAG's label set is the root
        or a member."""
        n_nodes = self.taxonomy.n_nodes
        cols = keys % n_nodes
        counts = self._par_ptr[cols + 1] - self._par_ptr[cols]
        owner = np.repeat(np.arange(keys.size), counts)
        starts = np.repeat(self._par_ptr[cols], counts)
        offs = np.arange(owner.size) - np.repeat(np.cumsum(counts) - counts, counts)
        par = self._par_ids[starts + offs] if owner.size else np.zeros(0, np.int64)
        need = par > 0
        ok = _member(keys, (keys[owner] - cols[owner] + par)[need])
        if not ok.all():
            i = int(np.flatnonzero(~ok)[0])
            k = int(keys[owner[need][i]])
            r, c = divmod(k, n_nodes)
            names = self.taxonomy.names
            raise ValueError(
                f"{what}, row {r}: node {names[c]!r} is present but its parent {names[int(par[need][i])]!r} is not "
                f"({int((~ok).sum())} such entries); label sets must be closed over every parent (use "
                "sparkhc.batch.label_matrix(..., closed=True))"
            )

    def add(self, gold: Any, pred: Any, scores: np.ndarray | None = None, *, pred_closed: bool = True) -> None:
        """Count a batch of documents.

        Parameters
        ----------
        gold, pred : sparse matrix or array of shape (n_docs, n_nodes)
            Binary label matrices (nonzero = member) of ANCESTOR-CLOSED node sets, e.g. from
            :func:`sparkhc.batch.label_matrix` with ``closed=True``. Root and virtual columns are
            ignored. A set that is not ancestor-closed raises ``ValueError``.
        scores : ndarray of shape (n_docs, n_nodes), optional
            Real-valued label scores (larger = more confident) for the break-even point; only
            the scored columns are used. Pass scores for every batch or for none.
        pred_closed : bool, default True
            False accepts predictions that are not ancestor-closed: classifiers evaluated node by
            node "disregarding all taxonomical information" (Cesa-Bianchi et al. 2004, Sect. 5, the
            flat PERC and SVM). Every count is then taken over the nodes as given; the H-loss keeps
            its general definition (see :meth:`document_losses`).
        """
        n_nodes = self.taxonomy.n_nodes
        gk, n = self._keys(gold, "gold", None)
        pk, _ = self._keys(pred, "pred", n, closed=pred_closed)
        if scores is not None:
            scores = np.asarray(scores, dtype=np.float64)
            if scores.shape != (n, n_nodes):
                raise ValueError(f"scores must have shape ({n}, {n_nodes}); got {scores.shape}")
        inter = np.intersect1d(gk, pk, assume_unique=True)
        fpk = np.setdiff1d(pk, gk, assume_unique=True)
        fnk = np.setdiff1d(gk, pk, assume_unique=True)
        self.n_docs += n
        self.tp += np.bincount(inter % n_nodes, minlength=n_nodes)
        self.fp += np.bincount(fpk % n_nodes, minlength=n_nodes)
        self.fn += np.bincount(fnk % n_nodes, minlength=n_nodes)

        # example-based table over the scored labels
        def per_doc_scored(keys: np.ndarray) -> np.ndarray:
            sel = keys[self.scored[keys % n_nodes]]
            return np.bincount(sel // n_nodes, minlength=n)

        if n:
            trip = np.stack([per_doc_scored(inter), per_doc_scored(pk), per_doc_scored(gk)], axis=1)
            uniq, counts = np.unique(trip, axis=0, return_counts=True)
            for (i, p, g), c in zip(uniq.tolist(), counts.tolist(), strict=True):
                key = (int(i), int(p), int(g))
                self.eb_table[key] = self.eb_table.get(key, 0) + int(c)

        # symmetric difference and H-loss (Cesa-Bianchi et al. 2004, §2)
        diff = np.concatenate([fpk, fnk])
        _add_hist(self.symdiff_hist, np.bincount(diff // n_nodes, minlength=n))
        hk = self._hloss_keys(diff)
        hrows = hk // n_nodes
        hcols = hk % n_nodes
        self.hloss_nodes += np.bincount(hcols, minlength=n_nodes)
        _add_hist(self.hloss_hist, np.bincount(hrows, minlength=n))
        if n:
            if self._cost_w is not None:
                num = np.zeros(n, dtype=np.int64)
                np.add.at(num, hrows, self._cost_w[hcols])
                vals, counts = np.unique(num, return_counts=True)
                for v, c in zip(vals.tolist(), counts.tolist(), strict=True):
                    f = Fraction(int(v), self._cost_lcm)
                    self.hnorm_hist[f] = self.hnorm_hist.get(f, 0) + int(c)
            else:  # huge common denominator: exact per-document sums in Python
                per_doc = [Fraction(0)] * n
                for r, c in zip(hrows.tolist(), hcols.tolist(), strict=True):
                    per_doc[r] += self._cost[c]
                for f in per_doc:
                    self.hnorm_hist[f] = self.hnorm_hist.get(f, 0) + 1

        # (score, is_gold) pairs of the scored labels for the break-even point
        if scores is not None:
            self.n_score_docs += n
            s = scores[:, self._scored_ids]
            colpos = np.full(n_nodes, -1, dtype=np.int64)
            colpos[self._scored_ids] = np.arange(self._scored_ids.size)
            g = np.zeros(s.shape, dtype=bool)
            gs = gk[self.scored[gk % n_nodes]]
            g.reshape(-1)[(gs // n_nodes) * self._scored_ids.size + colpos[gs % n_nodes]] = True
            self._merge_scores(*_score_table(s, g, ~g))

    def _hloss_keys(self, diff: np.ndarray) -> np.ndarray:
        """The H-loss mistakes among the keys ``diff`` of the symmetric difference: the members
        none of whose proper ancestors is in it (ŷ_i ≠ y_i and ŷ_j = y_j for all ancestors j).
        With ancestor-closed sets it is enough to look at the parent; the walk up covers any sets."""
        n_nodes = self.taxonomy.n_nodes
        diff = np.sort(diff)
        cols = diff % n_nodes
        base = diff - cols
        if self._dag is not None:  # every proper ancestor, over every parent
            counts = self._anc_ptr[cols + 1] - self._anc_ptr[cols]
            owner = np.repeat(np.arange(diff.size), counts)
            offs = np.arange(owner.size) - np.repeat(np.cumsum(counts) - counts, counts)
            anc_ids = self._anc_ids[np.repeat(self._anc_ptr[cols], counts) + offs] if owner.size else owner
            proper = anc_ids != cols[owner]
            hit = _member(diff, base[owner[proper]] + anc_ids[proper])
            bad = np.zeros(diff.size, dtype=bool)
            bad[owner[proper][hit]] = True
            return diff[~bad]
        anc = self.taxonomy.parent[cols].astype(np.int64)
        ok = np.ones(diff.size, dtype=bool)
        while True:
            up = anc > 0
            if not up.any():
                return diff[ok]
            ok[up] &= ~_member(diff, base[up] + anc[up])
            anc[up] = self.taxonomy.parent[anc[up]]

    def document_losses(self, gold: Any, pred: Any, *, pred_closed: bool = True) -> dict[str, np.ndarray]:
        """Per-document losses of Cesa-Bianchi et al. (2004, Sect. 2): ``zero_one`` ``[ŷ ≠ y]``,
        ``symdiff`` ``Σ_i [ŷ_i ≠ y_i]``, ``hloss_uniform`` and ``hloss_normalized``
        ``Σ_i c_i [ŷ_i ≠ y_i and ŷ_j = y_j for all ancestors j of i]`` (costs as in :meth:`cost`),
        each a float64 array (n_docs,) over the real nodes; their means are what :meth:`add` and
        :meth:`compute` give for the same documents. Nothing is accumulated. ``gold``, ``pred`` and
        ``pred_closed`` as in :meth:`add` (for paired significance tests over documents)."""
        n_nodes = self.taxonomy.n_nodes
        gk, n = self._keys(gold, "gold", None)
        pk, _ = self._keys(pred, "pred", n, closed=pred_closed)
        diff = np.setxor1d(gk, pk, assume_unique=True)
        sym = np.bincount(diff // n_nodes, minlength=n).astype(np.float64)
        hk = self._hloss_keys(diff)
        costs = np.array([float(f) for f in self._cost], dtype=np.float64)
        return {
            "zero_one": (sym > 0).astype(np.float64),
            "symdiff": sym,
            "hloss_uniform": np.bincount(hk // n_nodes, minlength=n).astype(np.float64),
            "hloss_normalized": np.bincount(hk // n_nodes, weights=costs[hk % n_nodes], minlength=n),
        }

    def _merge_scores(self, values: np.ndarray, pos: np.ndarray, neg: np.ndarray) -> None:
        if values.size:
            self._bep_parts.append((values, pos, neg))

    def _score_pairs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The canonical (distinct score ascending, #gold, #non-gold) table of the scored pairs."""
        if not self._bep_parts:
            return np.zeros(0, np.float64), np.zeros(0, np.int64), np.zeros(0, np.int64)
        if len(self._bep_parts) > 1:
            v, p, n = (np.concatenate(x) for x in zip(*self._bep_parts, strict=True))
            self._bep_parts = [_score_table(v, p, n)]
        return self._bep_parts[0]

    # ------------------------------------------------------------------ merging and persistence
    def merge(self, other: MetricCounts) -> MetricCounts:
        """Add ``other``'s counts into this object and return it (associative and commutative)."""
        if other.taxonomy is not self.taxonomy and other.taxonomy != self.taxonomy:
            raise ValueError("cannot merge metric counts of different taxonomies")
        if not np.array_equal(other.scored, self.scored):
            raise ValueError("cannot merge metric counts with different scored label sets")
        self.n_docs += other.n_docs
        self.tp += other.tp
        self.fp += other.fp
        self.fn += other.fn
        self.hloss_nodes += other.hloss_nodes
        _merge_hist(self.eb_table, other.eb_table)  # type: ignore[arg-type]
        _merge_hist(self.hloss_hist, other.hloss_hist)
        _merge_hist(self.symdiff_hist, other.symdiff_hist)
        _merge_hist(self.hnorm_hist, other.hnorm_hist)  # type: ignore[arg-type]
        self.n_score_docs += other.n_score_docs
        self._bep_parts.extend(other._bep_parts)
        return self

    def to_arrays(self) -> dict[str, np.ndarray]:
        """The count tables as plain numpy arrays (no object dtype: ``np.savez`` without pickle).

        Tables are in canonical (sorted) order, so equal counts give equal arrays.
        """
        eb = sorted(self.eb_table.items())
        hn = sorted(self.hnorm_hist.items())
        return {
            "format_version": np.array(_FORMAT_VERSION, dtype=np.int64),
            "taxonomy_fingerprint": np.array(self.taxonomy.fingerprint(include_virtual=True)),
            "scored": self.scored.copy(),
            "n_docs": np.array(self.n_docs, dtype=np.int64),
            "tp": self.tp.copy(),
            "fp": self.fp.copy(),
            "fn": self.fn.copy(),
            "hloss_nodes": self.hloss_nodes.copy(),
            "eb_table": np.array([[i, p, g, c] for (i, p, g), c in eb], dtype=np.int64).reshape(len(eb), 4),
            "hloss_hist": _hist_to_array(self.hloss_hist),
            "symdiff_hist": _hist_to_array(self.symdiff_hist),
            "hnorm_values": np.array([f"{f.numerator}/{f.denominator}" for f, _ in hn], dtype=np.str_),
            "hnorm_counts": np.array([c for _, c in hn], dtype=np.int64),
            "n_score_docs": np.array(self.n_score_docs, dtype=np.int64),
            **dict(
                zip(
                    ("bep_values", "bep_pos", "bep_neg"), (a.copy() for a in self._score_pairs()), strict=True
                )
            ),
        }

    @classmethod
    def from_arrays(cls, taxonomy: Taxonomy, arrays: Mapping[str, np.ndarray]) -> MetricCounts:
        """Rebuild counts saved with :meth:`to_arrays` (or loaded back with ``np.load``).

        Raises :class:`~sparkhc.errors.ModelError` when the arrays belong to another taxonomy.
        """
        version = int(np.asarray(arrays["format_version"]))
        if version > _FORMAT_VERSION:
            raise ModelError(f"metric counts of format version {version} are newer than this sparkhc")
        fp = str(np.asarray(arrays["taxonomy_fingerprint"]))
        if fp != taxonomy.fingerprint(include_virtual=True):
            raise ModelError(
                f"metric counts were computed on another taxonomy (fingerprint {fp}, "
                f"expected {taxonomy.fingerprint(include_virtual=True)})"
            )
        out = cls(taxonomy, np.asarray(arrays["scored"], dtype=bool))
        out.n_docs = int(np.asarray(arrays["n_docs"]))
        for name in ("tp", "fp", "fn", "hloss_nodes"):
            a = np.asarray(arrays[name], dtype=np.int64)
            if a.shape != (taxonomy.n_nodes,):
                raise ModelError(
                    f"metric counts: array {name!r} has shape {a.shape}, expected ({taxonomy.n_nodes},)"
                )
            setattr(out, name, a.copy())
        out.eb_table = {
            (int(i), int(p), int(g)): int(c)
            for i, p, g, c in np.asarray(arrays["eb_table"], dtype=np.int64).reshape(-1, 4)
        }
        out.hloss_hist = _hist_from_array(arrays["hloss_hist"])
        out.symdiff_hist = _hist_from_array(arrays["symdiff_hist"])
        out.hnorm_hist = {
            Fraction(str(v)): int(c)
            for v, c in zip(
                np.asarray(arrays["hnorm_values"]).tolist(),
                np.asarray(arrays["hnorm_counts"]).tolist(),
                strict=True,
            )
        }
        out.n_score_docs = int(np.asarray(arrays["n_score_docs"]))
        out._merge_scores(
            *_score_table(
                np.asarray(arrays["bep_values"], dtype=np.float64),
                np.asarray(arrays["bep_pos"], dtype=np.int64),
                np.asarray(arrays["bep_neg"], dtype=np.int64),
            )
        )
        return out

    # ------------------------------------------------------------------ results
    def pr_curve(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Micro-averaged (thresholds, precision, recall) of the scored pairs; see :func:`pr_curve`."""
        return _pr_from_table(*self._score_pairs())

    @staticmethod
    def _label_based(tp: np.ndarray, fp: np.ndarray, fn: np.ndarray) -> dict[str, Fraction]:
        TP, FP, FN = int(tp.sum()), int(fp.sum()), int(fn.sum())
        occ = np.flatnonzero(tp + fp + fn > 0)
        n_occ = len(occ)
        sp_ = sr = sf = Fraction(0)
        for t, f_p, f_n in zip(tp[occ].tolist(), fp[occ].tolist(), fn[occ].tolist(), strict=True):
            sp_ += _ratio(t, t + f_p)
            sr += _ratio(t, t + f_n)
            sf += _ratio(2 * t, 2 * t + f_p + f_n)
        return {
            "MiP": _ratio(TP, TP + FP),
            "MiR": _ratio(TP, TP + FN),
            "MiF": _ratio(2 * TP, 2 * TP + FP + FN),
            "MaP": sp_ / n_occ if n_occ else Fraction(0),
            "MaR": sr / n_occ if n_occ else Fraction(0),
            "MaF": sf / n_occ if n_occ else Fraction(0),
        }

    def compute_selection(self) -> dict[str, float]:
        """``hF`` and ``LBMaF`` only (the epoch-selection criterion, :data:`sparkhc.epochs.CRITERION`),
        computed exactly as :meth:`compute` computes them, without the other tables' work."""
        s = self.scored
        return {"hF": float(self._label_based(self.tp[self._real], self.fp[self._real], self.fn[self._real])["MiF"]),
                "LBMaF": float(self._label_based(self.tp[s], self.fp[s], self.fn[s])["MaF"])}

    def compute(self) -> dict[str, float]:
        """Every metric (see the class notes for definitions and conventions).

        Returns
        -------
        dict
            Keys in the order of :data:`METRIC_KEYS`; ``BEP`` only when scores were given;
            ``n_docs`` is an int.
        """
        T = self.n_docs
        if 0 < self.n_score_docs != T:
            raise ValueError(
                f"scores were given for {self.n_score_docs} of {T} documents; pass scores for every "
                "batch or for none"
            )

        def mean(x: Fraction) -> Fraction:
            return x / T if T else Fraction(0)

        ebp = ebr = ebf = Fraction(0)
        for (i, p, g), c in sorted(self.eb_table.items()):
            ebp += c * (Fraction(i, p) if p else Fraction(int(g == 0)))
            ebr += c * (Fraction(i, g) if g else Fraction(int(p == 0)))
            ebf += c * (Fraction(2 * i, p + g) if p + g else Fraction(1))
        s = self.scored
        lb = self._label_based(self.tp[s], self.fp[s], self.fn[s])
        r = self._real
        node = self._label_based(self.tp[r], self.fp[r], self.fn[r])
        h_uni = mean(Fraction(int(self.hloss_nodes.sum())))
        h_norm = mean(
            sum(
                (int(k) * self._cost[i] for i, k in enumerate(self.hloss_nodes.tolist()) if k),
                Fraction(0),
            )
        )
        _, var_uni = _hist_moments(self.hloss_hist, T)
        _, var_norm = _hist_moments(self.hnorm_hist, T)
        sym, var_sym = _hist_moments(self.symdiff_hist, T)
        zero_one = mean(Fraction(T - self.symdiff_hist.get(0, 0)))
        out: dict[str, float] = {
            "EBP": float(mean(ebp)),
            "EBR": float(mean(ebr)),
            "EBF": float(mean(ebf)),
            "LBMiP": float(lb["MiP"]),
            "LBMiR": float(lb["MiR"]),
            "LBMiF": float(lb["MiF"]),
            "LBMaP": float(lb["MaP"]),
            "LBMaR": float(lb["MaR"]),
            "LBMaF": float(lb["MaF"]),
            "hP": float(node["MiP"]),
            "hR": float(node["MiR"]),
            "hF": float(node["MiF"]),
            "hloss_uniform": float(h_uni),
            "hloss_normalized": float(h_norm),
            "zero_one": float(zero_one),
            "symdiff": float(sym),
            "hloss_uniform_std": _std(var_uni),
            "hloss_normalized_std": _std(var_norm),
            "zero_one_std": _std(zero_one * (1 - zero_one)),
            "symdiff_std": _std(var_sym),
            "node_micro_F1": float(node["MiF"]),
            "node_macro_F1": float(node["MaF"]),
        }
        if self.n_score_docs:
            _, pos, neg = self._score_pairs()
            out["BEP"] = _bep_from_table(pos, neg)
        out["n_docs"] = T
        return out

    def __repr__(self) -> str:
        return f"MetricCounts(n_docs={self.n_docs}, scored={int(self.scored.sum())} labels)"


# ---------------------------------------------------------------------------------------------
class MDCCounts:
    """Mergeable counts for multi-dimensional classification (Jia & Zhang 2020, §5 Metrics).

    Each example has q class variables (one label per class space). Kept: the number of documents,
    the number of correct predictions per class space, and a histogram of the number of wrong
    spaces per document.

    * **hamming_score**: mean over documents of the fraction of correct spaces
      (= mean per-space accuracy);
    * **exact_match**: fraction of documents with every space right;
    * **sub_exact_match**: fraction with at most one space wrong;
    * ``accuracy_<j>``: accuracy of class space j.

    Parameters
    ----------
    n_spaces : int, optional
        q; taken from the first batch when omitted.
    """

    def __init__(self, n_spaces: int | None = None) -> None:
        self.n_spaces = n_spaces
        self.n_docs = 0
        self.correct = np.zeros(n_spaces or 0, dtype=np.int64)
        self.wrong_hist = np.zeros((n_spaces or 0) + 1, dtype=np.int64)

    def _ensure(self, q: int) -> None:
        if self.n_spaces is None:
            self.n_spaces = q
            self.correct = np.zeros(q, dtype=np.int64)
            self.wrong_hist = np.zeros(q + 1, dtype=np.int64)
        elif q != self.n_spaces:
            raise ValueError(f"expected {self.n_spaces} class spaces, got {q}")

    def add(self, gold: np.ndarray, pred: np.ndarray) -> None:
        """Count a batch: ``gold`` and ``pred`` are integer arrays of shape (n, q)."""
        g = np.asarray(gold)
        p = np.asarray(pred)
        if g.ndim != 2 or g.shape != p.shape:
            raise ValueError(
                f"gold and pred must be 2-D arrays of the same shape; got {g.shape} and {p.shape}"
            )
        self._ensure(g.shape[1])
        right = g == p
        self.n_docs += g.shape[0]
        self.correct += right.sum(axis=0, dtype=np.int64)
        self.wrong_hist += np.bincount((~right).sum(axis=1), minlength=g.shape[1] + 1).astype(np.int64)

    def merge(self, other: MDCCounts) -> MDCCounts:
        """Add ``other``'s counts into this object and return it."""
        if other.n_spaces is None:
            return self
        self._ensure(other.n_spaces)
        self.n_docs += other.n_docs
        self.correct += other.correct
        self.wrong_hist += other.wrong_hist
        return self

    def to_arrays(self) -> dict[str, np.ndarray]:
        return {
            "n_spaces": np.array(-1 if self.n_spaces is None else self.n_spaces, dtype=np.int64),
            "n_docs": np.array(self.n_docs, dtype=np.int64),
            "correct": self.correct.copy(),
            "wrong_hist": self.wrong_hist.copy(),
        }

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray]) -> MDCCounts:
        q = int(np.asarray(arrays["n_spaces"]))
        out = cls(None if q < 0 else q)
        out.n_docs = int(np.asarray(arrays["n_docs"]))
        if q >= 0:
            out.correct = np.asarray(arrays["correct"], dtype=np.int64).copy()
            out.wrong_hist = np.asarray(arrays["wrong_hist"], dtype=np.int64).copy()
        return out

    def per_space_accuracy(self) -> np.ndarray:
        """Accuracy of each class space (0 when no document was counted)."""
        return np.array([float(_ratio(int(c), self.n_docs)) for c in self.correct], dtype=np.float64)

    def compute(self) -> dict[str, float]:
        T = self.n_docs
        q = self.n_spaces or 0
        out: dict[str, float] = {
            "hamming_score": float(_ratio(int(self.correct.sum()), q * T)),
            "exact_match": float(_ratio(int(self.wrong_hist[0]), T)),
            "sub_exact_match": float(_ratio(int(self.wrong_hist[:2].sum()), T)),
            "n_docs": T,
        }
        for j, a in enumerate(self.per_space_accuracy().tolist()):
            out[f"accuracy_{j}"] = a
        return out

    def __repr__(self) -> str:
        return f"MDCCounts(n_docs={self.n_docs}, n_spaces={self.n_spaces})"


# ---------------------------------------------------------------------------------------------
def model_size(arrays: Iterable[Any], tol: float = 1e-7) -> int:
    """Number of weights with ``|w| > tol`` (Murawaki 2013, §9: model size, tol = 1e-7).

    Accepts numpy arrays and scipy sparse matrices (only stored values are examined).
    """
    total = 0
    for a in arrays:
        data = a.data if sp.issparse(a) else np.asarray(a)
        total += int(np.count_nonzero(np.abs(data) > tol))
    return total


def _fmt(v: Any, digits: int) -> str:
    if isinstance(v, bool) or v is None:
        return str(v)
    if isinstance(v, int | np.integer):
        return str(int(v))
    if isinstance(v, float | np.floating):
        return f"{float(v):.{digits}f}"
    return str(v)


def format_table(
    metrics: Mapping[str, Any] | Mapping[str, Mapping[str, Any]],
    keys: Sequence[str] | None = None,
    digits: int = 4,
) -> str:
    """A readable, aligned text table.

    Parameters
    ----------
    metrics : dict
        Either one result ``{metric: value}`` (printed as two columns, metric and value) or several
        systems ``{system: {metric: value}}`` (one row per system, one column per metric).
    keys : sequence of str, optional
        Metrics to show, in order; default: the known keys first (:data:`METRIC_KEYS`,
        :data:`MDC_KEYS`), then the others in insertion order. Missing values print as ``-``.
    digits : int
        Decimals for floats.
    """
    nested = bool(metrics) and all(isinstance(v, Mapping) for v in metrics.values())
    present: list[str] = []
    for res in metrics.values() if nested else [metrics]:
        for k in res:  # type: ignore[union-attr]
            if k not in present:
                present.append(k)
    if keys is None:
        known = [k for k in (*METRIC_KEYS, *MDC_KEYS) if k in present]
        keys = list(dict.fromkeys(known + present))
    if not nested:
        flat: Mapping[str, Any] = metrics
        width = max((len(k) for k in keys), default=0)
        cells = [_fmt(flat[k], digits) if k in flat else "-" for k in keys]
        vwidth = max((len(c) for c in cells), default=0)
        return "\n".join(f"{k:<{width}}  {c:>{vwidth}}" for k, c in zip(keys, cells, strict=True))
    rows = [["system", *keys]]
    for name, res in metrics.items():
        rows.append([str(name), *(_fmt(res[k], digits) if k in res else "-" for k in keys)])  # type: ignore[operator, index]
    widths = [max(len(r[j]) for r in rows) for j in range(len(rows[0]))]
    lines = []
    for i, r in enumerate(rows):
        cells = [r[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(r[1:], widths[1:], strict=True)]
        lines.append("  ".join(cells).rstrip())
        if i == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def evaluate(
    gold_labels: Sequence[Sequence[str]],
    pred_labels: Sequence[Sequence[str]],
    taxonomy: Taxonomy,
    scored: np.ndarray | Iterable[int | str] | None = None,
    scores: np.ndarray | None = None,
) -> dict[str, float]:
    """All metrics of predicted label-name sets against gold ones (ancestors implied).

    Builds the ancestor-closed label matrices with :func:`sparkhc.batch.label_matrix` and returns
    :meth:`MetricCounts.compute`. Virtual ``/_self`` names are accepted and count as their real
    parent. ``scores`` (n_docs, n_nodes) adds the break-even point.
    """
    from sparkhc.batch import label_matrix  # local: keeps this module's imports numpy/scipy only

    if len(gold_labels) != len(pred_labels):
        raise ValueError(f"{len(gold_labels)} gold label sets but {len(pred_labels)} predicted ones")
    counts = MetricCounts(taxonomy, scored)
    counts.add(label_matrix(gold_labels, taxonomy), label_matrix(pred_labels, taxonomy), scores)
    return counts.compute()
