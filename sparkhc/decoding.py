"""Decoders for hierarchical multi-label classification (Murawaki 2013, Sect. 3-4).

One module for every way a label set is read off edge scores:

* :func:`edge_scores` -- ``S = X @ W``: the score ``w_{p->c} . phi(x)`` of every edge, for a batch.
* :func:`local_search` -- top-down local search (LS, Alg. 2).
* :func:`dp_decode` -- exact dynamic programming (MAXTREE, Alg. 3) and DP with branching features
  (Alg. 4); :func:`dp_solve` returns what training needs (selected nodes, chosen ``k``).
* :func:`nbest` -- the N best label sets (the paper's suggested extension), exact.
* :func:`flat_select` -- the flat decoder: every positive label, else the single best.

Conventions
-----------
Node ids come from :class:`~sparkhc.taxonomy.Taxonomy`: level order, root 0, the edge of node ``c``
is ``c - 1``. ``S`` has one column per edge, shape ``(n_docs, n_edges)``.

Weights are feature-major, ``W`` of shape ``(n_features, n_edges)`` (C order, float32 by default):
row ``f`` holds feature ``f``'s weight on every edge. One document's scores read the ``nnz(x)``
contiguous rows ``W[x.indices]`` (:func:`row_scores`) and its update writes into the same rows;
scipy's CSR x dense product (:func:`edge_scores`) walks ``W`` row by row too. Per-document scores
and the batch product are both faster than with edge-major ``(n_edges, V)`` weights, where
``W[:, x.indices]`` is a strided gather (the figures: ``docs/benchmarks.md``, section
design-notes). Edge-major only wins the scatter of a structured update (a few edges x ``nnz(x)`` entries), which
is small next to the scores.

Branching-feature weights ``bf`` have shape ``(n_nodes + 1, R + 1)``: row ``p`` holds the
node-specific weights of internal node ``p`` (rows of leaves stay zero and unused), the last row
the shared ones; column ``j`` is bucket ``j + 1`` for ``j < R`` and ``">R"`` for ``j = R``. Choosing
``k`` children at ``p`` adds ``bf[p, b(k)] + bf[-1, b(k)]`` with ``b(k) = min(k, R + 1) - 1``, at
every internal node of ``tree(m)`` including the root (indicator features of value 1).

Vectorisation
-------------
Node ids are in level order and the children of a node are consecutive ids, so the children of
all nodes at depth ``d`` form one contiguous block of ids, grouped by parent. The decoders walk
the levels bottom-up (subtree scores and each parent's choice of children), then top-down (a
node is selected iff its parent is and chose it), with a fixed number of numpy calls per level
(per group of equal fan-out, in batches):

* batches (:func:`dp_solve`, :func:`local_search_mask`) work node-major, ``(n_nodes, n_docs)``,
  with the parents of a level grouped by their number of children ``k`` so that the offers are a
  ``(g, k, n_docs)`` array (a view when the children are consecutive): segment maxima and sums
  are fast reductions over the ``k`` axis with documents innermost. numpy's ``reduceat``,
  ``argmax``, ``cumsum`` and ``argsort`` along a non-last axis and its masked selects are slow, so
  ties and choices are resolved with elementwise operations over the ``k`` slabs;
* one document (:func:`dp_solve_one`, online training) uses 1-D ``ufunc.reduceat`` over the level
  block and, for branching features, a segmented sort with ``np.lexsort``.

With numba installed both dispatch to the compiled per-document kernels of
:mod:`sparkhc.kernels` (same results; ``SPARKHC_KERNELS=0`` forces the numpy code here, which stays
the reference). Both are exact: the argmax over every non-empty set of leaves (ties: the first best child, the
smallest ``k``); the tests check them against brute-force enumeration.
"""

from __future__ import annotations

import heapq
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from sparkhc import kernels as _kernels
from sparkhc.taxonomy import Taxonomy

__all__ = [
    "TreeIndex",
    "DPResult",
    "tree_index",
    "edge_scores",
    "row_scores",
    "local_search",
    "local_search_mask",
    "dp_solve",
    "dp_solve_one",
    "dp_decode",
    "nbest",
    "flat_select",
    "mask_to_sets",
    "bf_bucket",
    "bf_shape",
]

_BIG = np.iinfo(np.int64).max
#: subtracted from an offer once it is taken (far below any score, finite in float32)
_TAKEN = 1e30


@dataclass(frozen=True)
class _Level:
    """Internal nodes at one depth and the contiguous block of their children."""

    parents: np.ndarray  # (P,) ids of the internal nodes at this depth, ascending
    lo: int  # children occupy node ids lo .. hi-1, grouped by parent
    hi: int
    starts: np.ndarray  # (P,) offset of each parent's first child in the block
    owner: np.ndarray  # (hi-lo,) index into ``parents`` of each child's parent
    rank0: np.ndarray  # (hi-lo,) start offset of each child's segment (starts[owner])
    cols: np.ndarray  # arange(hi - lo)
    rank: np.ndarray  # cols - rank0: position of each child among its siblings
    up: np.ndarray  # (hi-lo,) parent node id of each child
    counts: np.ndarray  # (P,) number of children
    all_leaves: bool  # every child in the block is a leaf (its subtree score is 0)
    groups: tuple[_Group, ...]  # the parents grouped by number of children (batch path)


@dataclass(frozen=True)
class _Group:
    """Parents of one level with the same number ``k`` of children."""

    k: int
    parents: np.ndarray  # (g,)
    rows: np.ndarray  # (g, k): child j of parent i is node lo + rows[i, j]
    nodes: np.ndarray  # (g, k): the same as node ids
    block: tuple[int, int] | None  # (start, stop) in the level block when rows == arange, else None


@dataclass(frozen=True)
class TreeIndex:
    """Array views of a taxonomy that the decoders need, computed once.

    Build with :func:`tree_index`. Pass it instead of the taxonomy to avoid the (cached) lookup.
    """

    n_nodes: int
    parent: np.ndarray  # int64, parent[0] = -1
    is_leaf: np.ndarray  # bool
    leaves: np.ndarray  # int64 ids of leaves
    n_children: np.ndarray  # int64
    first_child: np.ndarray  # int64, -1 for leaves
    levels: tuple[_Level, ...]  # top-down order (depth 0 first)
    edge_parent: np.ndarray  # int64 (n_edges,): parent of node c at c - 1
    seg_rank: np.ndarray  # int64 (n_edges,): position of node c among its siblings, at c - 1
    _buckets: dict[int, np.ndarray] = field(default_factory=dict, compare=False, repr=False)

    def seg_bucket(self, R: int) -> np.ndarray:
        """``bf_bucket(seg_rank + 1, R)``: the bucket of taking the first ``r + 1`` children."""
        b = self._buckets.get(R)
        if b is None:
            b = bf_bucket(self.seg_rank + 1, R)
            self._buckets[R] = b
        return b

    @property
    def n_edges(self) -> int:
        return self.n_nodes - 1

    @property
    def internal(self) -> np.ndarray:
        return np.flatnonzero(~self.is_leaf)

    def closure(self, nodes: np.ndarray) -> np.ndarray:
        """tree(m) as a boolean node mask (root included) of the given leaf/node ids."""
        mask = np.zeros(self.n_nodes, dtype=bool)
        cur = np.unique(np.asarray(nodes, dtype=np.int64))
        while cur.size:
            cur = cur[~mask[cur]]
            mask[cur] = True
            cur = np.unique(self.parent[cur[cur > 0]])
        mask[0] = True
        return mask


def _build_index(tax: Taxonomy) -> TreeIndex:
    n = tax.n_nodes
    parent = np.asarray(tax.parent, dtype=np.int64)
    n_children = np.array([len(k) for k in tax.children], dtype=np.int64)
    is_leaf = n_children == 0
    first_child = np.full(n, -1, dtype=np.int64)
    for p, kids in enumerate(tax.children):
        if len(kids):
            first_child[p] = int(kids[0])
            if not np.array_equal(kids, np.arange(kids[0], kids[0] + len(kids))):
                raise ValueError("taxonomy ids are not in level order (children must be consecutive)")
    depth = np.asarray(tax.depth, dtype=np.int64)
    if n > 1 and np.any(np.diff(depth) < 0):
        raise ValueError("taxonomy ids are not in level order (depth must not decrease)")
    levels = []
    for d in range(int(depth.max()) if n > 1 else 0):
        parents = np.flatnonzero((depth == d) & ~is_leaf)
        if parents.size == 0:
            continue
        lo = int(first_child[parents[0]])
        hi = int(first_child[parents[-1]] + n_children[parents[-1]])
        counts = n_children[parents]
        starts = first_child[parents] - lo
        if hi - lo != int(counts.sum()) or np.any(np.diff(starts) != counts[:-1]):
            raise ValueError("taxonomy ids are not in level order (child blocks are not contiguous)")
        owner = np.repeat(np.arange(parents.size), counts)
        groups = []
        for k in np.unique(counts):
            g = parents[counts == k]
            rows = (first_child[g][:, None] - lo) + np.arange(int(k))[None, :]
            r0 = int(rows[0, 0])
            block = (
                (r0, r0 + rows.size) if np.array_equal(rows.ravel(), np.arange(r0, r0 + rows.size)) else None
            )
            groups.append(_Group(k=int(k), parents=g, rows=rows, nodes=rows + lo, block=block))
        levels.append(
            _Level(
                parents=parents,
                lo=lo,
                hi=hi,
                starts=starts,
                owner=owner,
                rank0=starts[owner],
                cols=np.arange(hi - lo),
                rank=np.arange(hi - lo) - starts[owner],
                up=parent[lo:hi].copy(),
                counts=counts,
                all_leaves=bool(is_leaf[lo:hi].all()),
                groups=tuple(groups),
            )
        )
    return TreeIndex(
        n_nodes=n,
        parent=parent,
        is_leaf=is_leaf,
        leaves=np.flatnonzero(is_leaf),
        n_children=n_children,
        first_child=first_child,
        levels=tuple(levels),
        edge_parent=parent[1:].copy(),
        seg_rank=np.arange(1, n) - first_child[parent[1:]],
    )


_CACHE: dict[int, tuple[Taxonomy, TreeIndex]] = {}


def tree_index(taxonomy: Taxonomy | TreeIndex) -> TreeIndex:
    """The :class:`TreeIndex` of ``taxonomy`` (cached per taxonomy object)."""
    if isinstance(taxonomy, TreeIndex):
        return taxonomy
    hit = _CACHE.get(id(taxonomy))
    if hit is not None and hit[0] is taxonomy:
        return hit[1]
    idx = _build_index(taxonomy)
    if len(_CACHE) >= 32:
        _CACHE.pop(next(iter(_CACHE)))
    _CACHE[id(taxonomy)] = (taxonomy, idx)
    return idx


# ---------------------------------------------------------------------------------------- scores
def edge_scores(X: sp.spmatrix | np.ndarray, W: np.ndarray) -> np.ndarray:
    """``S = X @ W``: edge scores of a batch, shape ``(n_docs, n_edges)``.

    One sparse x dense product. ``X`` is CSR ``(n_docs, V)``; ``W`` feature-major ``(V, n_edges)``
    (the dtype of the result follows scipy's upcasting: float32 for float32 inputs).
    """
    if sp.issparse(X):
        out = X.tocsr() @ W  # type: ignore[union-attr]
    else:
        out = np.asarray(X) @ W
    return np.asarray(out)


def _probe_matvecs() -> Any:
    """scipy's CSR x dense kernel (private ``_sparsetools.csr_matvecs``), if it behaves as
    expected here; ``None`` otherwise (then :func:`row_scores` uses a public path, slower, and a
    :class:`RuntimeWarning` says so once)."""
    try:
        from scipy.sparse import _sparsetools

        fn = _sparsetools.csr_matvecs
        W = np.arange(12, dtype=np.float32).reshape(4, 3)
        out = np.zeros(3, dtype=np.float32)
        fn(
            1,
            4,
            3,
            np.array([0, 2], np.int32),
            np.array([1, 3], np.int32),
            np.array([2, 1], np.float32),
            W.reshape(-1),
            out,
        )
        if np.array_equal(out, 2 * W[1] + W[3]):
            return fn
        why = "it gave another result"
    except Exception as e:  # a private kernel: a scipy build may lack it or change its signature
        why = f"{type(e).__name__}: {e}"
    warnings.warn(f"sparkhc: scipy's csr_matvecs kernel is not usable here ({why}); one document's scores take "
                  "a slower public path", RuntimeWarning, stacklevel=1)
    return None


_MATVECS = _probe_matvecs()


def row_scores(W: np.ndarray, indices: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Edge scores of one document, ``x @ W`` for ``x`` given by its ``indices``/``values``.

    Reads the ``nnz(x)`` rows of the feature-major ``W`` in place (scipy's CSR kernel, no copy
    of the rows and no BLAS threads); result in ``W``'s dtype. ``W`` must be C-contiguous.
    """
    n_col = W.shape[1]
    if _MATVECS is not None and W.flags.c_contiguous and W.dtype in (np.float32, np.float64):
        vals = values if values.dtype == W.dtype else values.astype(W.dtype)
        idx = indices if indices.dtype in (np.int32, np.int64) else indices.astype(np.int64)
        out = np.zeros(n_col, dtype=W.dtype)
        ptr = np.array([0, idx.size], dtype=idx.dtype)
        _MATVECS(1, W.shape[0], n_col, ptr, idx, vals, W.reshape(-1), out)
        return out
    return np.asarray(values, dtype=W.dtype) @ W[indices]


def bf_bucket(k: np.ndarray | int, R: int) -> np.ndarray:
    """Column of ``bf`` for ``k`` selected children: ``min(k, R + 1) - 1``."""
    return np.minimum(np.asarray(k, dtype=np.int64), R + 1) - 1


def bf_shape(taxonomy: Taxonomy | TreeIndex, R: int = 3) -> tuple[int, int]:
    """Shape of the branching-feature weight array: ``(n_nodes + 1, R + 1)``."""
    return (tree_index(taxonomy).n_nodes + 1, R + 1)


def _as2d(S: np.ndarray, n_edges: int) -> np.ndarray:
    S = np.asarray(S)
    if S.ndim == 1:
        S = S[None, :]
    if S.ndim != 2 or S.shape[1] != n_edges:
        raise ValueError(
            f"edge scores must have shape (n_docs, n_edges) = (n_docs, {n_edges}); got {S.shape}"
        )
    return S


def mask_to_sets(mask: np.ndarray) -> list[np.ndarray]:
    """Rows of a boolean ``(n_docs, n_cols)`` mask as arrays of column ids (int64)."""
    rows, cols = np.nonzero(mask)
    cols = cols.astype(np.int64)
    bounds = np.searchsorted(rows, np.arange(mask.shape[0] + 1)).tolist()
    return [cols[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


def _topdown(idx: TreeIndex, chosen: np.ndarray) -> np.ndarray:
    """Node-major ``(n_nodes, n_docs)``: a child is selected iff its parent is selected and chose
    it. Modifies and returns ``chosen``."""
    sel = chosen
    sel[0] = True
    for lv in idx.levels:
        sel[lv.lo : lv.hi] &= sel[idx.parent[lv.lo : lv.hi]]
    return sel


def _slabs(off: np.ndarray, gr: _Group) -> np.ndarray:
    """Offers of a group's children as ``(g, k, n_docs)`` (a view when they are consecutive)."""
    if gr.block is not None:
        a, b = gr.block
        return off[a:b].reshape(gr.parents.size, gr.k, off.shape[1])
    return off[gr.rows]


def _first_max(offers: np.ndarray, mx: np.ndarray) -> np.ndarray:
    """``offers`` (g, k, n): one-hot (g, k, n) of the first ``j`` with ``offers[:, j] == mx``."""
    hit = offers == mx[:, None]
    found = hit[:, 0].copy()
    for j in range(1, offers.shape[1]):
        h = hit[:, j]
        h &= ~found
        found |= h
    return hit


def _choose_plain(offers: np.ndarray, mx: np.ndarray) -> np.ndarray:
    """Children taken without branching features: the positive offers, else the first best."""
    ch = offers > 0
    neg = mx <= 0
    if neg.any():
        ch |= _first_max(offers, mx) & neg[:, None]
    return ch


def _put(chosen: np.ndarray, lo: int, gr: _Group, ch: np.ndarray) -> None:
    if gr.block is not None:
        a, b = gr.block
        chosen[lo + a : lo + b] = ch.reshape(b - a, -1)
    else:
        chosen[gr.nodes] = ch


# ---------------------------------------------------------------------------------- local search
def local_search_mask(taxonomy: Taxonomy | TreeIndex, S: np.ndarray) -> np.ndarray:
    """Top-down local search (Murawaki 2013, Alg. 2) as a node mask ``(n_docs, n_nodes)``.

    At each selected node take every child whose edge score is ``> 0``, or the single best child
    (the first on ties) if none is; the root column is True.
    """
    idx = tree_index(taxonomy)
    ST = np.ascontiguousarray(_as2d(S, idx.n_edges).T)
    chosen = np.zeros((idx.n_nodes, ST.shape[1]), dtype=bool)
    for lv in idx.levels:
        off = ST[lv.lo - 1 : lv.hi - 1]
        for gr in lv.groups:
            offers = _slabs(off, gr)
            _put(chosen, lv.lo, gr, _choose_plain(offers, offers.max(axis=1)))
    return _topdown(idx, chosen).T


def local_search(taxonomy: Taxonomy | TreeIndex, S: np.ndarray) -> list[np.ndarray]:
    """Top-down local search (LS, Alg. 2): the predicted leaf set of every document."""
    idx = tree_index(taxonomy)
    sel = local_search_mask(idx, S)
    return mask_to_sets(sel & idx.is_leaf)


def flat_select(S: np.ndarray) -> np.ndarray:
    """Flat decoding (Murawaki 2013, Sect. 3): every column with score ``> 0``, else the single
    best (first on ties). Returns a boolean mask of the shape of ``S``."""
    S = np.atleast_2d(np.asarray(S))
    out = S > 0
    none = ~out.any(axis=1)
    if none.any():
        out[np.flatnonzero(none), np.argmax(S[none], axis=1)] = True
    return out


# ------------------------------------------------------------------------------------------- DP
@dataclass
class DPResult:
    """What :func:`dp_solve` found for each document.

    Attributes
    ----------
    selected : ndarray of bool, (n_docs, n_nodes)
        ``tree(m)`` as a node mask, root column True; ``selected & is_leaf`` is ``m``.
    score : ndarray of float64, (n_docs,)
        ``score(x, m)`` of the argmax (edge scores, plus branching terms with ``bf``).
    k : ndarray of int64, (n_docs, n_nodes), or None
        With branching features: the number of children chosen at each selected internal node
        (0 elsewhere). ``None`` without.
    """

    selected: np.ndarray
    score: np.ndarray
    k: np.ndarray | None = None

    def leaf_sets(self, index: TreeIndex) -> list[np.ndarray]:
        return mask_to_sets(self.selected & index.is_leaf)


def _check_bf(idx: TreeIndex, bf: np.ndarray, R: int) -> np.ndarray:
    bf = np.asarray(bf)
    if bf.shape != (idx.n_nodes + 1, R + 1):
        raise ValueError(
            f"branching weights must have shape (n_nodes + 1, R + 1) = {(idx.n_nodes + 1, R + 1)}; "
            f"got {bf.shape}"
        )
    return bf


def dp_solve(
    taxonomy: Taxonomy | TreeIndex, S: np.ndarray, bf: np.ndarray | None = None, R: int = 3,
    with_k: bool = True,
) -> DPResult:
    """Exact decoding of the global model (MAXTREE, Alg. 3; with ``bf``, Alg. 4), for a batch.

    Parameters
    ----------
    taxonomy : Taxonomy or TreeIndex
    S : ndarray, (n_docs, n_edges) or (n_edges,)
        Edge scores ``w_{p->c} . phi(x)``.
    bf : ndarray, (n_nodes + 1, R + 1), optional
        Branching-feature weights (module docstring for the layout).
    R : int
        Number of explicit branching buckets (the paper's R = 3).
    with_k : bool
        False: ``k`` may be None also with ``bf`` (decoding needs only the selection; ``k`` is an
        int64 ``(n_docs, n_nodes)`` array, the largest output).

    Returns
    -------
    DPResult
        Bottom-up, every child ``c`` of an internal node ``p`` offers ``sub(c) + s(p->c)`` (a
        leaf's ``sub`` is 0). Without ``bf``, ``p`` takes every positive offer or else the single
        best (the first on ties); with ``bf``, the best ``k >= 1`` of ``top-k sum + bf[p, b(k)] +
        bf[shared, b(k)]`` (the smallest ``k`` on ties, offers ranked by value then id).

    Notes
    -----
    Works node-major (``(n_nodes, n_docs)``, one contiguous row per node) so that the segment
    reductions run over whole rows. With branching features the best ``k`` is found without a
    full sort: for ``k <= R`` the candidates need only the top ``R`` offers, and every ``k > R``
    shares the bucket ``>R``, whose best choice is the top ``R + 1`` plus every other positive
    offer. So ``R + 1`` rounds of "take the segment maximum" suffice. :func:`dp_solve_one` is the
    one-document path used by online training (same results).
    """
    idx = tree_index(taxonomy)
    S2 = _as2d(S, idx.n_edges)
    if bf is not None:
        _check_bf(idx, bf, R)
    if _kernels.available():
        sel_k, score_k, kk_k = _kernels.dp_batch(idx, S2, bf, R, with_k=with_k)
        return DPResult(selected=sel_k, score=score_k, k=kk_k)
    return _dp_solve_numpy(idx, S2, bf, R)


def _dp_solve_numpy(idx: TreeIndex, S2: np.ndarray, bf: np.ndarray | None, R: int) -> DPResult:
    """The numpy reference of :func:`dp_solve` (also used when numba is absent)."""
    n = S2.shape[0]
    dt = np.promote_types(S2.dtype, np.float32)
    ST = np.ascontiguousarray(S2.T, dtype=dt)
    sub = np.zeros((idx.n_nodes, n), dtype=dt)
    chosen = np.zeros((idx.n_nodes, n), dtype=bool)
    kk: np.ndarray | None = None
    bfw = None if bf is None else _check_bf(idx, bf, R).astype(dt, copy=False)
    if bfw is not None:
        kk = np.zeros((idx.n_nodes, n), dtype=np.int64)
    for lv in reversed(idx.levels):
        off = ST[lv.lo - 1 : lv.hi - 1]
        if not lv.all_leaves:
            off = off + sub[lv.lo : lv.hi]
        for gr in lv.groups:
            offers = _slabs(off, gr)  # (g, k, n)
            if bfw is None or kk is None:
                mx = offers.max(axis=1)
                # every positive offer, else the best one (then no offer is positive)
                sub[gr.parents] = np.maximum(offers, 0).sum(axis=1) + np.minimum(mx, 0)
                _put(chosen, lv.lo, gr, _choose_plain(offers, mx))
            else:
                best, kbest, ch = _choose_bf(offers, bfw, gr.parents, R)
                sub[gr.parents] = best
                kk[gr.parents] = kbest
                _put(chosen, lv.lo, gr, ch)
    sel = _topdown(idx, chosen)
    if kk is not None:
        kk *= sel
        kk = kk.T
    return DPResult(selected=sel.T, score=sub[0].astype(np.float64), k=kk)


def _choose_bf(
    offers: np.ndarray, bfw: np.ndarray, parents: np.ndarray, R: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Branching choice (Alg. 4) for a group of parents with ``k`` children each.

    ``offers`` (g, k, n) are the offers. Candidate ``j`` (0-based, ``j < R``) takes the top ``j + 1``
    offers; candidate ``R`` (bucket ">R", only when ``k > R``) takes the top ``R + 1`` and every
    other positive offer, the best of all ``k > R``. Returns (best score (g, n), number of
    children taken (g, n), children mask (g, k, n)).
    """
    k = offers.shape[1]
    bt = bfw[parents] + bfw[-1]  # (g, R + 1)
    # numpy's masked selects (np.where, copyto) are slow here: taken offers are pushed down by
    # _TAKEN (finite, so the arithmetic stays exact for the others) and choices use arithmetic
    taken = offers.dtype.type(_TAKEN)
    work = offers.copy()
    buf = np.empty_like(work)
    picks = []
    cands = []
    cum = None
    for j in range(min(k, R + 1)):
        mx = work.max(axis=1)
        h = _first_max(work, mx)
        picks.append(h)
        np.multiply(h, taken, out=buf)
        work -= buf
        cum = mx if cum is None else cum + mx
        if j < R:
            cands.append(cum + bt[:, j : j + 1])
    rest = None
    if k > R:
        assert cum is not None
        rest = work > 0
        cands.append(cum + np.maximum(work, 0).sum(axis=1) + bt[:, R : R + 1])
    best = cands[0]
    for c in cands[1:]:
        best = np.maximum(best, c)
    # jbest = index of the first candidate equal to the best (the smallest k on ties)
    jbest = np.zeros(best.shape, dtype=np.int64)
    pending = cands[0] != best
    for c in cands[1:]:
        jbest += pending
        pending &= c != best
    ch = picks[0].copy()
    for j in range(1, len(picks)):
        ch |= picks[j] & (jbest >= j)[:, None]
    kbest = jbest + 1
    if rest is not None:
        over = jbest == R
        if over.any():
            extra = rest & over[:, None]
            ch |= extra
            kbest += extra.sum(axis=1)
    return best, kbest, ch


def dp_solve_one(
    index: TreeIndex, s: np.ndarray, bf: np.ndarray | None = None, R: int = 3
) -> tuple[np.ndarray, float, np.ndarray | None]:
    """Exact DP for one document (the online-training path): ``(selected, score, k)``.

    ``s`` is the edge-score vector ``(n_edges,)``; ``selected`` a node mask ``(n_nodes,)`` (root
    True); ``k`` (with ``bf``) the number of children chosen at every selected internal node.
    Same result as :func:`dp_solve` on one row, with 1-D arrays and a constant number of numpy
    calls per level (a segmented sort by ``np.lexsort`` for branching features).
    """
    if _kernels.available():
        if bf is not None:
            _check_bf(index, bf, R)
        return _kernels.dp_one(index, s, bf, R)
    return _dp_solve_one_numpy(index, s, bf, R)


def _dp_solve_one_numpy(
    index: TreeIndex, s: np.ndarray, bf: np.ndarray | None = None, R: int = 3
) -> tuple[np.ndarray, float, np.ndarray | None]:
    """The numpy reference of :func:`dp_solve_one` (also used when numba is absent)."""
    idx = index
    s = np.asarray(s, dtype=np.float64)
    sub = np.zeros(idx.n_nodes, dtype=np.float64)
    chosen = np.zeros(idx.n_nodes, dtype=bool)
    kk: np.ndarray | None = None
    if bf is None:
        for lv in reversed(idx.levels):
            off = s[lv.lo - 1 : lv.hi - 1]
            if not lv.all_leaves:
                off = off + sub[lv.lo : lv.hi]
            mx = np.maximum.reduceat(off, lv.starts)
            ch = chosen[lv.lo : lv.hi]
            np.greater(off, 0.0, out=ch)
            # every positive offer, else the best one (then nothing is positive)
            sub[lv.parents] = np.add.reduceat(off * ch, lv.starts) + np.minimum(mx, 0.0)
            # the first best child is taken in either case (when the max is positive it is)
            ch[np.minimum.reduceat(np.where(off == mx[lv.owner], lv.cols, _BIG), lv.starts)] = True
    else:
        bfw = _check_bf(idx, bf, R)
        b = idx.seg_bucket(R)
        bterm = (bfw[idx.edge_parent, b] + bfw[-1, b]).astype(np.float64)
        kk = np.zeros(idx.n_nodes, dtype=np.int64)
        for lv in reversed(idx.levels):
            off = s[lv.lo - 1 : lv.hi - 1]
            if not lv.all_leaves:
                off = off + sub[lv.lo : lv.hi]
            order = np.lexsort((-off, lv.owner))
            srt = off[order]
            cs = np.cumsum(srt)
            cand = cs - (cs - srt)[lv.rank0] + bterm[lv.lo - 1 : lv.hi - 1]
            mx = np.maximum.reduceat(cand, lv.starts)
            kbest = np.minimum.reduceat(np.where(cand == mx[lv.owner], lv.rank, _BIG), lv.starts) + 1
            sub[lv.parents] = mx
            kk[lv.parents] = kbest
            chosen[lv.lo + order] = lv.rank < kbest[lv.owner]
    sel = chosen
    sel[0] = True
    for lv in idx.levels:
        sel[lv.lo : lv.hi] &= sel[lv.up]
    if kk is not None:
        kk *= sel
    return sel, float(sub[0]), kk


def dp_decode(
    taxonomy: Taxonomy | TreeIndex, S: np.ndarray, bf: np.ndarray | None = None, R: int = 3
) -> tuple[list[np.ndarray], np.ndarray]:
    """Exact DP decoding (Alg. 3, or Alg. 4 with ``bf``): ``(leaf_sets, best_scores)``.

    See :func:`dp_solve` for the arguments and for the per-document details training needs.
    """
    idx = tree_index(taxonomy)
    res = dp_solve(idx, S, bf=bf, R=R)
    return res.leaf_sets(idx), res.score


# ---------------------------------------------------------------------------------------- N-best
def nbest(
    taxonomy: Taxonomy | TreeIndex,
    S: np.ndarray,
    n: int,
    bf: np.ndarray | None = None,
    R: int = 3,
) -> list[list[tuple[np.ndarray, float]]]:
    """The ``n`` best label sets of every document, best first (exact).

    k-best dynamic programming over the same recursion as MAXTREE: every node keeps the ``n`` best
    (score, leaf set) pairs of its subtree. At an internal node each child offers "not taken" or
    one of its ``n`` best (plus the edge score); the best combinations of a sequence of
    independent choices are merged child by child keeping the top ``n`` (plus one for the
    all-off combination, which is dropped: a selected node needs at least one child). With
    branching features the merge keeps a separate top-``n`` list per bucket of the number of
    children taken (0, 1, ..., R, >R), and the branching term is added per bucket at the end.
    Distinct combinations are distinct leaf sets, so the result has no duplicates. Cost per
    document: O(n_edges * n^2 (R + 2)) in Python; meant for small ``n``.

    Returns
    -------
    list (per document) of list of ``(leaf_ids, score)``, at most ``n`` items, scores descending.
    """
    if n < 1:
        raise ValueError(f"n must be >= 1; got {n}")
    idx = tree_index(taxonomy)
    S = _as2d(S, idx.n_edges).astype(np.float64, copy=False)
    bfw = None if bf is None else _check_bf(idx, bf, R).astype(np.float64, copy=False)
    out = []
    for row in S:
        best = _nbest_doc(idx, row, n, bfw, R)
        out.append([(np.array(sorted(leaves), dtype=np.int64), float(sc)) for sc, leaves in best])
    return out


_Cand = tuple[float, tuple[int, ...]]


def _topn(items: list[_Cand], n: int) -> list[_Cand]:
    return heapq.nlargest(n, items, key=lambda t: t[0])


def _nbest_doc(idx: TreeIndex, s: np.ndarray, n: int, bfw: np.ndarray | None, R: int) -> list[_Cand]:
    cands: dict[int, list[_Cand]] = {}
    for p in range(idx.n_nodes - 1, -1, -1):
        if idx.is_leaf[p]:
            cands[p] = [(0.0, (p,))]
            continue
        lo = int(idx.first_child[p])
        kids = range(lo, lo + int(idx.n_children[p]))
        if bfw is None:
            combos: list[_Cand] = [(0.0, ())]
            for c in kids:
                e = float(s[c - 1])
                on = [(e + sc, lv) for sc, lv in cands.pop(c)]
                merged = combos + [(a + b, la + lb) for a, la in combos for b, lb in on]
                combos = _topn(merged, n + 1)
            cands[p] = _topn([t for t in combos if t[1]], n)
        else:
            nb = R + 2  # bucket by number taken: 0, 1, ..., R, R+1 (= ">R")
            empty: _Cand = (0.0, ())
            by_k: list[list[_Cand]] = [[empty]] + [[] for _ in range(nb - 1)]
            for c in kids:
                e = float(s[c - 1])
                on = [(e + sc, lv) for sc, lv in cands.pop(c)]
                new: list[list[_Cand]] = [list(lst) for lst in by_k]
                for j, lst in enumerate(by_k):
                    if lst:
                        jj = min(j + 1, nb - 1)
                        new[jj].extend((a + b, la + lb) for a, la in lst for b, lb in on)
                by_k = [_topn(lst, n) for lst in new]
            final: list[_Cand] = []
            for j in range(1, nb):
                w = bfw[p, j - 1] + bfw[-1, j - 1]
                final.extend((sc + w, lv) for sc, lv in by_k[j])
            cands[p] = _topn(final, n)
    return cands[0]


# ---------------------------------------------------------------------- Cesa-Bianchi et al.
# Decoders of the incremental hierarchical learners (sparkhc.models.cesa_bianchi): rule (4) / the
# G-truncation, the H-BAYES rule, and the deepest nodes of an ancestor-closed prediction.
def depth_groups(taxonomy: Taxonomy) -> list[np.ndarray]:
    """Node ids grouped by depth >= 2 (level order), for vectorised top-down passes."""
    return [np.flatnonzero(taxonomy.depth == d) for d in range(2, taxonomy.max_depth + 1)]


def truncate(taxonomy: Taxonomy, pred: np.ndarray) -> np.ndarray:
    """G-truncation: ``pred_i`` stays 1 only if every ancestor is 1 (paper Sect. 2).

    ``pred`` is (n_docs, n_nodes) or (n_nodes,) binary; returns a new bool array with column 0
    False. Nodes are processed top-down one depth at a time, vectorised over documents.
    """
    out = np.array(pred, dtype=bool, copy=True)
    one = out.ndim == 1
    if one:
        out = out[None, :]
    out[:, 0] = False
    par = taxonomy.parent
    for nodes in depth_groups(taxonomy):
        out[:, nodes] &= out[:, par[nodes]]
    return out[0] if one else out


def hierarchical_decode(taxonomy: Taxonomy, g: np.ndarray) -> np.ndarray:
    """Rule (4): ``y_i = g_i`` if ``i`` is a root or its parent is predicted 1, else 0.

    Identical to the G-truncation of ``g``; kept as a separate name for readability."""
    return truncate(taxonomy, g)


def hbayes_decode(taxonomy: Taxonomy, p: np.ndarray, costs: np.ndarray) -> np.ndarray:
    """The H-BAYES rule (paper Sect. 3.1, Theorem 2): the multilabel minimising the expected H-loss
    when ``P(y_i = 1 | y_parent(i) = 1, x) = p_i`` and ``P(y_i = 1 | y_parent(i) = 0) = 0``.

    Bottom-up (reverse level order), with ``S_i = sum_{k in children(i)} H_k``::

        y_i = 1  iff  p_i (2 - S_i / c_i) >= 1          (leaves: p_i >= 1/2)
        H_i = c_i (p_i (1 - y_i) + (1 - p_i) y_i) + p_i y_i S_i

    then top-down, a node set to 0 zeroes its subtree (G-truncation). ``H_i`` is the expected
    H-loss charged in ``sub(i)`` given that the parent of ``i`` is gold-positive and the ancestors
    are predicted correctly. **Note** the factor ``p_i y_i`` in front of ``S_i``: the proof's
    decomposition (2)-(3) needs it (the children are charged only when ``y_i = y_hat_i = 1``); the
    extracted paper text and ALGORITHMS.md show ``H_i = c_i(...) + sum H_k`` without it, which
    differs from the brute-force optimum from depth 3 on (see the unit test).

    Parameters
    ----------
    taxonomy : Taxonomy
    p : ndarray (n_docs, n_nodes) or (n_nodes,)
        Conditional probabilities; column 0 is ignored.
    costs : ndarray (n_nodes,)
        Positive costs ``c_i`` for label nodes (``costs[0]`` ignored), e.g. :func:`normalized_costs`.

    Returns
    -------
    ndarray of bool, same leading shape as ``p``; column 0 False.
    """
    pp = np.asarray(p, dtype=np.float64)
    one = pp.ndim == 1
    if one:
        pp = pp[None, :]
    c = np.asarray(costs, dtype=np.float64)
    n_docs, n_nodes = pp.shape
    if n_nodes != taxonomy.n_nodes or c.shape != (n_nodes,):
        raise ValueError(f"p and costs must have {taxonomy.n_nodes} columns")
    if np.any(c[1:] <= 0):
        raise ValueError("costs must be positive for every label node")
    y = np.zeros((n_docs, n_nodes), dtype=bool)
    h = np.zeros((n_docs, n_nodes), dtype=np.float64)
    s = np.zeros((n_docs, n_nodes), dtype=np.float64)  # S_i accumulated from the children
    par = taxonomy.parent
    for i in range(n_nodes - 1, 0, -1):  # reverse level order: children before parents
        pi = pp[:, i]
        yi = pi * (2.0 - s[:, i] / c[i]) >= 1.0
        y[:, i] = yi
        h[:, i] = c[i] * np.where(yi, 1.0 - pi, pi) + np.where(yi, pi * s[:, i], 0.0)
        s[:, int(par[i])] += h[:, i]
    out = truncate(taxonomy, y)
    return out[0] if one else out


def deepest_sets(taxonomy: Taxonomy, pred: np.ndarray) -> list[np.ndarray]:
    """Per document, the predicted nodes (of an ancestor-closed prediction) with no predicted child."""
    pred = np.asarray(pred, dtype=bool)
    has_child = np.zeros_like(pred)
    par = taxonomy.parent
    nodes = np.arange(1, taxonomy.n_nodes)
    # has_child[:, p] |= pred[:, c] for every edge p -> c
    np.logical_or.at(has_child.T, par[nodes], pred[:, nodes].T)
    deep = pred & ~has_child
    deep[:, 0] = False
    return [np.flatnonzero(row).astype(np.int32) for row in deep]
