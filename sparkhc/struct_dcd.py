"""The global model as an L2-regularised structural SVM with squared slack, trained by dual
coordinate descent over per-document working sets, with a duality-gap certificate (issue 51).

The problem (the squared hinge of LIBLINEAR's default SVM, for label trees):

    min_w  P(w) = 1/2 ||w||^2 + C sum_i xi_i(w)^2,
    xi_i(w) = max(0, max_Y Delta_i(Y) - w . (Phi(x_i, Y_i) - Phi(x_i, Y)))

where ``Delta_i(Y)`` is the global model's Hamming margin (``margin`` per edge of the symmetric
difference of the label trees; a missed gold edge costs its own margin with ``margin_rare``) and
the inner max is the cost-augmented DP (the exact loss-augmented oracle). Its dual has one
variable ``alpha_{i,Y} >= 0`` per document and label tree:

    D(alpha) = sum alpha_{i,Y} Delta_i(Y) - 1/2 ||w(alpha)||^2 - sum_i (sum_Y alpha_{i,Y})^2 / (4C),
    w(alpha) = sum alpha_{i,Y} DeltaPhi_{i,Y}.

A *round* over a shard (dual CD with working sets, Chang & Yih 2013; the oracle of step 1 runs at
fixed weights, as in their DEMI-DCD):

1. the oracle for every document of the shard at the round's base weights (the exact DP on the
   cost-augmented scores): the violated label trees join their document's working set, and the
   squared slacks at the base weights are summed for the certificate;
2. an online pass, as a PA epoch: per document in a seeded order, the oracle at the current local
   weights, its tree found in (or added to) the working set, and one coordinate step on it (from
   zero duals this is a PA-II step);
3. ``passes`` seeded passes of coordinate steps over the working sets (no inference). The step of
   ``alpha_{i,Y}`` maximises the shard's local dual: ``d = max(-alpha, (Delta - w_l . DeltaPhi -
   A_i / (2C)) / (sigma ||DeltaPhi||^2 + 1 / (2C)))``, with ``A_i`` the document's sum of alphas
   and ``w_l = w + sigma dw`` the local weights (CoCoA+'s subproblem, Ma et al. 2015, with
   ``sigma`` the shards' step scale);
4. trees whose alpha is 0 leave the working set (an oracle finds them again when they are
   violated again).

With ``K`` shards mixed by the mean, a shard applies ``sigma d DeltaPhi`` to its local copy, so the
mixed weights move by ``sigma / K`` of the shards' summed dual steps, and the duals are kept scaled
by the same factor: ``sigma = K`` is CoCoA+'s adding (every step counts in full), ``sigma = 1``
CoCoA's averaging. One shard is serial DCD with working sets either way, and ``w = w(alpha)``
holds throughout (up to the rounding of the weights' dtype).

The certificate: at the base weights of a round, ``gap = P(w) - D(alpha) = ||w||^2 + C sum xi^2 -
sum alpha Delta + sum A_i^2 / (4C) >= 0``; each shard reports its part (:func:`round_counters`),
and :func:`duality_gap` adds ``||w||^2``. Training stops when ``gap <= gap_tol * P(w)``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import scipy.sparse as sp

from sparkhc import kernels as _kernels
from sparkhc.decoding import TreeIndex
from sparkhc.kernels import _bf_net_j, _dp_doc_j, _njit

#: the state arrays whose squared norm is ||w||^2 (the edge weights with the bias row, the branching weights)
WEIGHT_ARRAYS = ("W", "bf")

#: a label tree joins a working set when its slack is above this
VIOLATION_TOL = 1e-9


@dataclass
class WorkingSets:
    """The dual state of one shard's documents: the label trees of every document's working set,
    stored flat and sorted by document (``doc_ptr``), each as the edges of ``DeltaPhi`` with their
    signs (``cols``/``csgn``, CSR-like by ``cptr``: +1 for a gold-only edge, -1 for a
    predicted-only one), its branching part (``bu``/``bnet`` by ``bptr``), its margin ``delta``,
    ``n2 = ||DeltaPhi||^2``, its dual weight ``alpha`` (``alpha0``: at the round's start) and a 64-bit key of the tree (to find it again)."""

    n_docs: int
    doc: np.ndarray
    key: np.ndarray
    alpha: np.ndarray
    alpha0: np.ndarray
    delta: np.ndarray
    n2: np.ndarray
    cptr: np.ndarray
    cols: np.ndarray
    csgn: np.ndarray
    bptr: np.ndarray
    bu: np.ndarray
    bnet: np.ndarray

    @classmethod
    def empty(cls, n_docs: int) -> WorkingSets:
        z_i, z_f = np.zeros(0, np.int64), np.zeros(0, np.float64)
        return cls(int(n_docs), z_i, np.zeros(0, np.uint64), z_f, z_f, z_f, z_f, np.zeros(1, np.int64), z_i, z_f,
                   np.zeros(1, np.int64), z_i, z_f)

    def __len__(self) -> int:
        return int(self.doc.size)

    @property
    def doc_ptr(self) -> np.ndarray:
        return np.concatenate([[0], np.cumsum(np.bincount(self.doc, minlength=self.n_docs))]).astype(np.int64)

    def alpha_sums(self) -> np.ndarray:
        """``A_i``: every document's sum of dual weights."""
        return np.bincount(self.doc, weights=self.alpha, minlength=self.n_docs)

    def take(self, rows: np.ndarray) -> WorkingSets:
        """The trees ``rows`` (in that order)."""
        rows = np.asarray(rows, dtype=np.int64)
        cidx, cptr = _ragged_take(self.cptr, rows)
        bidx, bptr = _ragged_take(self.bptr, rows)
        return WorkingSets(self.n_docs, self.doc[rows], self.key[rows], self.alpha[rows], self.alpha0[rows],
                           self.delta[rows],
                           self.n2[rows], cptr, self.cols[cidx], self.csgn[cidx], bptr, self.bu[bidx],
                           self.bnet[bidx])

    @classmethod
    def concat(cls, parts: list[WorkingSets]) -> WorkingSets:
        n = parts[0].n_docs

        def ptr(ps: list[np.ndarray]) -> np.ndarray:
            sizes = np.concatenate([np.diff(p) for p in ps])
            return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)

        def cat(f: str) -> np.ndarray:
            return np.concatenate([getattr(p, f) for p in parts])

        return cls(n, cat("doc"), cat("key"), cat("alpha"), cat("alpha0"), cat("delta"), cat("n2"),
                   ptr([p.cptr for p in parts]), cat("cols"), cat("csgn"), ptr([p.bptr for p in parts]), cat("bu"),
                   cat("bnet"))

    def sorted_by_doc(self) -> WorkingSets:
        return self.take(np.argsort(self.doc, kind="stable"))


def _ragged_take(ptr: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The flat indices of segments ``rows`` of a CSR-like ``ptr``, and the new ``ptr``."""
    lens = (ptr[rows + 1] - ptr[rows]).astype(np.int64)
    new_ptr = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    if not lens.sum():
        return np.zeros(0, np.int64), new_ptr
    starts = np.repeat(ptr[rows] - new_ptr[:-1], lens)
    return (np.arange(int(new_ptr[-1]), dtype=np.int64) + starts).astype(np.int64), new_ptr


@dataclass
class Margins:
    """The margin of every edge when it is a missed gold edge (``gold``, per edge) and when it is a
    predicted edge off the gold tree (``off``, one value)."""

    gold: np.ndarray
    off: float


@dataclass
class Problem:
    """One shard's documents as the solver needs them: ``X`` (CSR with the bias column), the gold
    trees (:class:`sparkhc.models.murawaki.GoldSets`), the tree index and branching ``R`` (None
    without branching features)."""

    X: sp.csr_matrix
    gold: Any
    index: TreeIndex
    R: int | None


def _tree_key_impl(chosen):  # type: ignore[no-untyped-def]
    """FNV-1a (64 bits) over the ids of the selected nodes of a node mask."""
    h = np.uint64(14695981039346656037)
    prime = np.uint64(1099511628211)
    for c in range(chosen.shape[0]):
        if chosen[c]:
            v = np.uint64(c)
            for _ in range(8):
                h = (h ^ (v & np.uint64(255))) * prime
                v = v >> np.uint64(8)
    return h


_tree_key_j = _njit(_tree_key_impl)


def _online_impl(  # type: ignore[no-untyped-def]
    indptr, indices, data, W, bf, bf_flat, use_bf, R, fc, nch, inner, parent, is_leaf, g_nodes, g_nptr, g_bf, g_bptr,
    phi2, mg, off, doc_ptr, key, alpha, tot, C, sigma, order, learn, start, touched,
    n_doc, n_key, n_alpha, n_delta, n_n2, n_cptr, n_cols, n_sgn, n_bptr, n_bu, n_bnet, out, fout,
):
    """Step 2 of a round from position ``start`` of ``order``: per document the scores at the local
    weights, the cost-augmented DP, the tree found in the working set (by key) or appended to the
    ``n_*`` buffers (``out[1]`` trees, ``out[2]`` columns, ``out[3]`` branching entries so far), and
    one coordinate step on it. Stops early (``out[0]`` = the position to resume at, else -1) when a
    buffer is full; ``out[4]`` counts the steps, ``out[5]`` the documents whose tree is not the gold
    one. Without ``learn`` (the oracle at fixed weights) no step is taken and ``fout[0]`` sums the
    squared slacks."""
    n_nodes = fc.shape[0]
    n_edges = n_nodes - 1
    s = np.empty(n_edges, dtype=np.float64)
    sa = np.empty(n_edges, dtype=np.float64)
    sub = np.zeros(n_nodes, dtype=np.float64)
    chosen = np.zeros(n_nodes, dtype=np.bool_)
    kk = np.zeros(n_nodes, dtype=np.int64)
    offs = np.empty(n_nodes, dtype=np.float64)
    taken = np.zeros(n_nodes, dtype=np.bool_)
    picks = np.zeros(R + 2, dtype=np.int64)
    gm = np.zeros(n_nodes, dtype=np.bool_)
    cols = np.empty(n_edges, dtype=np.int64)
    net = np.zeros(bf_flat.size, dtype=np.float64)
    seen = np.zeros(bf_flat.size, dtype=np.bool_)
    ulist = np.empty(bf_flat.size, dtype=np.int64)
    Rb = R + 1
    inv2c = 0.5 / C
    nt = out[1]
    ncol = out[2]
    nbf = out[3]
    steps = out[4]
    out[0] = -1
    for oi in range(start, order.shape[0]):
        i = order[oi]
        a = indptr[i]
        b = indptr[i + 1]
        for e in range(n_edges):
            s[e] = 0.0
        for t in range(a, b):
            f = indices[t]
            v = data[t]
            for e in range(n_edges):
                s[e] += v * W[f, e]
        for c in range(n_nodes):
            gm[c] = False
        gm[0] = True
        for t in range(g_nptr[i], g_nptr[i + 1]):
            gm[g_nodes[t]] = True
        for c in range(1, n_nodes):
            sa[c - 1] = s[c - 1] + (-mg[c - 1] if gm[c] else off)
        _dp_doc_j(sa, fc, nch, inner, parent, n_nodes, bf, use_bf, R, sub, chosen, kk, offs, taken, picks, 0.0, -np.inf)
        n_plus = 0
        for c in range(1, n_nodes):
            if gm[c] and not chosen[c]:
                n_plus += 1
        jp = 0
        jm = n_plus
        wd = 0.0
        delta = 0.0
        for c in range(1, n_nodes):
            if gm[c] != chosen[c]:
                if gm[c]:
                    cols[jp] = c - 1
                    jp += 1
                    wd += s[c - 1]
                    delta += mg[c - 1]
                else:
                    cols[jm] = c - 1
                    jm += 1
                    wd -= s[c - 1]
                    delta += off
        nc = jm
        if nc == 0:
            continue
        nu = 0
        bf_n2 = 0.0
        if use_bf:
            nu = _bf_net_j(g_bf, g_bptr[i], g_bptr[i + 1], chosen, kk, is_leaf, Rb, seen, ulist, net)
            for j in range(nu):
                u = ulist[j]
                if net[u] != 0.0:
                    wd += np.float64(bf_flat[u]) * net[u]
                    bf_n2 += net[u] * net[u]
        xi = delta - wd
        n2 = nc * phi2[i] + bf_n2
        if xi > VIOLATION_TOL and not learn:
            fout[0] += xi * xi
        if xi > VIOLATION_TOL and n2 > 0.0:
            k = _tree_key_j(chosen)
            j = -1
            for q in range(doc_ptr[i], doc_ptr[i + 1]):
                if key[q] == k:
                    j = q
                    break
            nnz_u = 0
            for q in range(nu):
                if net[ulist[q]] != 0.0:
                    nnz_u += 1
            if j < 0 and (nt >= n_doc.shape[0] or ncol + nc > n_cols.shape[0] or nbf + nnz_u > n_bu.shape[0]):
                out[0] = oi  # a buffer is full: resume at this document
                for q in range(nu):
                    u = ulist[q]
                    net[u] = 0.0
                    seen[u] = False
                break
            a0 = alpha[j] if j >= 0 else 0.0
            d = (xi - tot[i] * inv2c) / (sigma * n2 + inv2c)
            if d < -a0:
                d = -a0
            if not learn:
                d = 0.0
            if j >= 0:
                alpha[j] += d
            else:
                n_doc[nt] = i
                n_key[nt] = k
                n_alpha[nt] = d
                n_delta[nt] = delta
                n_n2[nt] = n2
                for q in range(nc):
                    n_cols[ncol + q] = cols[q]
                    n_sgn[ncol + q] = 1.0 if q < n_plus else -1.0
                ncol += nc
                n_cptr[nt + 1] = ncol
                for q in range(nu):
                    u = ulist[q]
                    if net[u] != 0.0:
                        n_bu[nbf] = u
                        n_bnet[nbf] = net[u]
                        nbf += 1
                n_bptr[nt + 1] = nbf
                nt += 1
            if d != 0.0:
                tot[i] += d
                steps += 1
                sd = sigma * d
                for t in range(a, b):
                    f = indices[t]
                    touched[f] = True
                    vt = data[t] * sd
                    for q in range(n_plus):
                        e = cols[q]
                        W[f, e] = np.float64(W[f, e]) + vt
                    for q in range(n_plus, nc):
                        e = cols[q]
                        W[f, e] = np.float64(W[f, e]) - vt
                if use_bf:
                    for q in range(nu):
                        u = ulist[q]
                        if net[u] != 0.0:
                            bf_flat[u] = np.float64(bf_flat[u]) + sd * net[u]
        for q in range(nu):
            u = ulist[q]
            net[u] = 0.0
            seen[u] = False
        out[5] += 1
    out[1] = nt
    out[2] = ncol
    out[3] = nbf
    out[4] = steps


_online_j = _njit(_online_impl)


def visit(problem: Problem, W: np.ndarray, bf: np.ndarray | None, margins: Margins, ws: WorkingSets,
          tot: np.ndarray, C: float, sigma: float, order: np.ndarray, touched: np.ndarray,
          learn: bool = True) -> tuple[WorkingSets, dict[str, float]]:
    """Every document in ``order``: the cost-augmented DP at the current weights, the tree found in
    (or added to) its working set and, with ``learn`` (step 2 of a round, an online pass as a PA
    epoch), one coordinate step on it, in place on ``W``/``bf``/``ws.alpha``/``tot``; without
    (step 1, the oracle at the round's base weights) the trees join with alpha 0 and the squared
    slacks are summed. Returns the working sets with the added trees and ``steps``, ``wrong``
    (documents whose tree is not the gold one) and ``xi2``."""
    X, idx, gold = problem.X, problem.index, problem.gold
    n = X.shape[0]
    R = problem.R if problem.R is not None else 3
    use_bf = bf is not None
    bf2 = bf if bf is not None else np.zeros((1, 1), W.dtype)
    bf_flat = bf2.reshape(-1)
    i64 = _kernels._i64
    cap, cap_c, cap_b = max(1, n), max(16, 8 * n), (max(16, 8 * n) if use_bf else 1)
    bufs = _buffers(cap, cap_c, cap_b)
    out = np.zeros(6, np.int64)
    fout = np.zeros(1)
    args = (i64(X.indptr), i64(X.indices), np.ascontiguousarray(X.data, dtype=np.float64), W, bf2, bf_flat, use_bf,
            int(R), i64(idx.first_child), i64(idx.n_children), i64(idx.internal), i64(idx.parent),
            np.ascontiguousarray(idx.is_leaf), i64(gold.nodes), i64(gold.nodes_ptr), i64(gold.bf), i64(gold.bf_ptr),
            np.ascontiguousarray(gold.phi2, dtype=np.float64), np.ascontiguousarray(margins.gold, dtype=np.float64),
            float(margins.off), ws.doc_ptr, ws.key, ws.alpha, tot, float(C), float(sigma), i64(order))
    start = 0
    while True:
        _online_j(*args, bool(learn), start, touched, *bufs, out, fout)
        if out[0] < 0:
            break
        start = int(out[0])
        bufs = _grow(bufs, out)
    nt, nc, nb = int(out[1]), int(out[2]), int(out[3])
    n_doc, n_key, n_alpha, n_delta, n_n2, n_cptr, n_cols, n_sgn, n_bptr, n_bu, n_bnet = bufs
    new = WorkingSets(ws.n_docs, n_doc[:nt].copy(), n_key[:nt].copy(), n_alpha[:nt].copy(), np.zeros(nt),
                      n_delta[:nt].copy(), n_n2[:nt].copy(), n_cptr[: nt + 1].copy(), n_cols[:nc].copy(),
                      n_sgn[:nc].copy(), n_bptr[: nt + 1].copy(), n_bu[:nb].copy(), n_bnet[:nb].copy())
    if nt:
        ws = WorkingSets.concat([ws, new]).sorted_by_doc()
    return ws, {"steps": float(out[4]), "wrong": float(out[5]), "xi2": float(fout[0])}


def _buffers(cap: int, cap_c: int, cap_b: int) -> list[np.ndarray]:
    return [np.zeros(cap, np.int64), np.zeros(cap, np.uint64), np.zeros(cap), np.zeros(cap), np.zeros(cap),
            np.zeros(cap + 1, np.int64), np.zeros(cap_c, np.int64), np.zeros(cap_c), np.zeros(cap + 1, np.int64),
            np.zeros(cap_b, np.int64), np.zeros(cap_b)]


def _grow(bufs: list[np.ndarray], out: np.ndarray) -> list[np.ndarray]:
    """The buffers with twice the room (their content kept)."""
    fresh = _buffers(bufs[0].size, 2 * bufs[6].size, 2 * bufs[9].size)
    for old, new in zip(bufs, fresh, strict=True):
        new[: old.size] = old
    return fresh


def _ws_passes_impl(indptr, indices, data, W, bf_flat, use_bf, doc_ptr, alpha, delta, n2, cptr, cols, csgn,  # type: ignore[no-untyped-def]
                    bptr, bu, bnet, tot, phi2, orders, C, sigma, touched, out):
    """Step 3 of a round: coordinate steps over the working sets in ``orders`` (one row per pass),
    in place on ``W``/``bf_flat``/``alpha``/``tot``; ``out[0]`` = the steps taken. A document's
    scores are computed once per visit on the union of its trees' edges and kept current after
    each step (a step of ``d`` on a tree moves the score of each of its edges by ``sigma d sign
    ||x||^2``)."""
    inv2c = 0.5 / C
    steps = 0
    n_edges = W.shape[1]
    pos = np.full(n_edges, -1, dtype=np.int64)
    ucols = np.empty(n_edges, dtype=np.int64)
    su = np.zeros(n_edges, dtype=np.float64)
    for p in range(orders.shape[0]):
        for oi in range(orders.shape[1]):
            i = orders[p, oi]
            j0 = doc_ptr[i]
            j1 = doc_ptr[i + 1]
            if j0 == j1:
                continue
            a = indptr[i]
            b = indptr[i + 1]
            nu = 0
            for c in range(cptr[j0], cptr[j1]):
                e = cols[c]
                if pos[e] < 0:
                    pos[e] = nu
                    ucols[nu] = e
                    nu += 1
            for k in range(nu):
                e = ucols[k]
                acc = 0.0
                for q in range(a, b):
                    acc += data[q] * W[indices[q], e]
                su[k] = acc
            x2 = phi2[i]
            for j in range(j0, j1):
                wd = 0.0
                for c in range(cptr[j], cptr[j + 1]):
                    wd += csgn[c] * su[pos[cols[c]]]
                if use_bf:
                    for q in range(bptr[j], bptr[j + 1]):
                        wd += bnet[q] * bf_flat[bu[q]]
                g = delta[j] - wd - tot[i] * inv2c
                d = g / (sigma * n2[j] + inv2c)
                if d < -alpha[j]:
                    d = -alpha[j]
                if d == 0.0:
                    continue
                alpha[j] += d
                tot[i] += d
                steps += 1
                sd = sigma * d
                for c in range(cptr[j], cptr[j + 1]):
                    e = cols[c]
                    v = sd * csgn[c]
                    su[pos[e]] += v * x2
                    for q in range(a, b):
                        W[indices[q], e] += v * data[q]
                        touched[indices[q]] = True
                if use_bf:
                    for q in range(bptr[j], bptr[j + 1]):
                        bf_flat[bu[q]] += sd * bnet[q]
            for k in range(nu):
                pos[ucols[k]] = -1
    out[0] = steps


_ws_passes_j = _njit(_ws_passes_impl)


def dcd_round(problem: Problem, W: np.ndarray, bf: np.ndarray | None, ws: WorkingSets | None, margins: Margins,
              C: float, sigma: float, scale: float, passes: int, orders_seed: tuple[int, int, int],
              touched: np.ndarray) -> tuple[WorkingSets, dict[str, float]]:
    """One round over a shard (module docstring), in place on ``W`` and ``bf``; ``ws`` the
    shard's working sets from the last round (None: fresh); ``sigma`` the local step scale,
    ``scale`` the factor of the mixing on this shard's dual steps (``sigma / K``); ``passes`` the
    passes over the working sets after the online pass. Returns the new working sets and the
    round's counters (:func:`round_counters`)."""
    n = problem.X.shape[0]
    if ws is None or ws.n_docs != n:
        ws = WorkingSets.empty(n)
    # the margins of the kept trees under this round's margins (with margin_rare the edge counts of a
    # mixed first epoch are each shard's own; from the second epoch on they are the shards' mean)
    ws = replace(ws, delta=tree_margins(ws, margins))
    A0 = ws.alpha_sums()
    lin0 = float(ws.alpha @ ws.delta)
    # a new object: the caller's working sets stay as they were (a retried shard starts from them)
    ws = replace(ws, alpha=ws.alpha.copy(), alpha0=ws.alpha.copy())
    tot = A0.copy()
    ws, base = visit(problem, W, bf, margins, ws, tot, C, sigma, np.arange(n), touched, learn=False)
    xi2, wrong = base["xi2"], int(base["wrong"])
    rng = np.random.default_rng(list(orders_seed))
    ws, on = visit(problem, W, bf, margins, ws, tot, C, sigma, rng.permutation(n), touched)
    orders = (np.stack([rng.permutation(n) for _ in range(int(passes))]) if passes > 0 and n
              else np.zeros((0, max(n, 1)), np.int64))
    X = problem.X
    use_bf = bf is not None
    bf_flat = bf.reshape(-1) if bf is not None else np.zeros(1, W.dtype)
    out = np.zeros(1, np.int64)
    tot = ws.alpha_sums()
    _ws_passes_j(X.indptr.astype(np.int64), X.indices.astype(np.int64), X.data.astype(np.float64), W, bf_flat,
                 use_bf, ws.doc_ptr, ws.alpha, ws.delta, ws.n2, ws.cptr, ws.cols, ws.csgn, ws.bptr, ws.bu, ws.bnet,
                 tot, np.ascontiguousarray(problem.gold.phi2, dtype=np.float64), orders.astype(np.int64), float(C),
                 float(sigma), touched, out)
    if scale != 1.0:
        ws.alpha = ws.alpha0 + scale * (ws.alpha - ws.alpha0)
    kept = ws.take(np.flatnonzero(ws.alpha > 0))
    counters = round_counters(C, xi2, lin0, A0)
    counters.update({"updates": float(out[0] + on["steps"]), "exact": float(n - wrong),
                     "working_set": float(len(kept))})
    return kept, counters


def tree_margins(ws: WorkingSets, margins: Margins) -> np.ndarray:
    """Every tree's ``Delta``: the margins of its gold-only edges plus ``off`` per predicted-only edge."""
    if not len(ws):
        return np.zeros(0)
    per = np.where(ws.csgn > 0, margins.gold[ws.cols], margins.off)
    owner = np.repeat(np.arange(len(ws)), np.diff(ws.cptr))
    return np.bincount(owner, weights=per, minlength=len(ws))


def round_counters(C: float, xi2: float, lin: float, A: np.ndarray) -> dict[str, float]:
    """A shard's part of the certificate at a round's base weights: ``primal_loss = C sum xi^2``
    and ``dual_part = sum alpha Delta - sum A_i^2 / (4C)`` (summed over shards by the mixing)."""
    return {"primal_loss": float(C) * xi2, "dual_part": lin - float(A @ A) / (4.0 * float(C)), "loss": xi2}


def duality_gap(sq_norm: float, counters: dict[str, float]) -> tuple[float, float]:
    """``(gap, primal)`` at a round's base weights from ``||w||^2`` and the round's summed
    counters: ``primal = ||w||^2 / 2 + sum primal_loss``, ``gap = ||w||^2 + sum primal_loss -
    sum dual_part`` (>= 0 up to rounding)."""
    p = 0.5 * sq_norm + counters["primal_loss"]
    return sq_norm + counters["primal_loss"] - counters["dual_part"], p

