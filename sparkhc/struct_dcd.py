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

A *round* over a shard (DEMI-DCD: inference apart from learning, Chang & Yih 2013):

1. the oracle for every document of the shard at the round's base weights (one sparse product
   per block and the exact DP): the violated label trees join their document's working set, and
   the squared hinge at the base weights is summed for the certificate;
2. ``passes`` seeded passes of coordinate steps over the working sets (no inference): the step of
   ``alpha_{i,Y}`` maximises the shard's local dual, ``d = max(-alpha, (Delta - w_l . DeltaPhi -
   A_i / (2C)) / (sigma ||DeltaPhi||^2 + 1 / (2C)))``, with ``A_i`` the document's sum of alphas
   and ``w_l = w + sigma dw`` the local weights (CoCoA+'s subproblem, Ma et al. 2015, with
   ``sigma`` the shards' step scale);
3. trees whose alpha is 0 leave the working set (the oracle finds them again when they are
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

import hashlib
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import scipy.sparse as sp

from sparkhc import kernels as _kernels
from sparkhc.decoding import TreeIndex, dp_solve
from sparkhc.kernels import _njit

#: documents scored per sparse product in the oracle of a round
ORACLE_CHUNK = 2048

#: a label tree joins a working set when its slack is above this
VIOLATION_TOL = 1e-9


@dataclass
class WorkingSets:
    """The dual state of one shard's documents: the label trees of every document's working set,
    stored flat and sorted by document (``doc_ptr``), each as the edges of ``DeltaPhi`` with their
    signs (``cols``/``csgn``, CSR-like by ``cptr``: +1 for a gold-only edge, -1 for a
    predicted-only one), its branching part (``bu``/``bnet`` by ``bptr``), its margin ``delta``,
    ``n2 = ||DeltaPhi||^2``, its dual weight ``alpha`` and a 64-bit key of the tree (to find it again)."""

    n_docs: int
    doc: np.ndarray
    key: np.ndarray
    alpha: np.ndarray
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
        return cls(int(n_docs), z_i, np.zeros(0, np.uint64), z_f, z_f, z_f, np.zeros(1, np.int64), z_i, z_f,
                   np.zeros(1, np.int64), z_i, z_f)

    def __len__(self) -> int:
        return int(self.doc.size)

    @property
    def doc_ptr(self) -> np.ndarray:
        return np.concatenate([[0], np.cumsum(np.bincount(self.doc, minlength=self.n_docs))]).astype(np.int64)

    def alpha_sums(self) -> np.ndarray:
        """``A_i``: every document's sum of dual weights."""
        return np.bincount(self.doc, weights=self.alpha, minlength=self.n_docs)

    def keys_of(self, i: int, doc_ptr: np.ndarray) -> np.ndarray:
        return self.key[doc_ptr[i] : doc_ptr[i + 1]]

    def take(self, rows: np.ndarray) -> WorkingSets:
        """The trees ``rows`` (in that order)."""
        rows = np.asarray(rows, dtype=np.int64)
        cidx, cptr = _ragged_take(self.cptr, rows)
        bidx, bptr = _ragged_take(self.bptr, rows)
        return WorkingSets(self.n_docs, self.doc[rows], self.key[rows], self.alpha[rows], self.delta[rows],
                           self.n2[rows], cptr, self.cols[cidx], self.csgn[cidx], bptr, self.bu[bidx],
                           self.bnet[bidx])

    @classmethod
    def concat(cls, parts: list[WorkingSets]) -> WorkingSets:
        n = parts[0].n_docs

        def ptr(ps: list[np.ndarray]) -> np.ndarray:
            sizes = np.concatenate([np.diff(p) for p in ps])
            return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)

        return cls(n, *(np.concatenate([getattr(p, f) for p in parts]) for f in ("doc", "key", "alpha", "delta", "n2")),
                   ptr([p.cptr for p in parts]), np.concatenate([p.cols for p in parts]),
                   np.concatenate([p.csgn for p in parts]), ptr([p.bptr for p in parts]),
                   np.concatenate([p.bu for p in parts]), np.concatenate([p.bnet for p in parts]))

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


def tree_key(sel: np.ndarray) -> int:
    """A 64-bit key of a label tree (its node mask), the same in every process."""
    return int.from_bytes(hashlib.blake2b(np.packbits(sel).tobytes(), digest_size=8).digest(), "little")


@dataclass
class Margins:
    """The margin of every edge when it is a missed gold edge (``gold``, per edge) and when it is a
    predicted edge off the gold tree (``off``, one value)."""

    gold: np.ndarray
    off: float


@dataclass
class Problem:
    """One shard's documents as the solver needs them: ``X`` (CSR with the bias column), the gold
    trees (:class:`sparkhc.models.murawaki.GoldSets`), the tree index, branching ``R`` (None
    without branching features) and the branching difference function."""

    X: sp.csr_matrix
    gold: Any
    index: TreeIndex
    R: int | None
    bf_difference: Any


def oracle(problem: Problem, W: np.ndarray, bf: np.ndarray | None, margins: Margins,
           ws: WorkingSets) -> tuple[WorkingSets, float, int]:
    """Step 1 of a round at the weights ``W``/``bf``: every document's most violated label tree by
    the cost-augmented DP; the new violated trees (not yet in their working set) are returned as
    a :class:`WorkingSets` of their own, with ``sum_i xi_i^2`` and the number of documents whose
    tree was not the gold one."""
    X, gold, idx, R = problem.X, problem.gold, problem.index, problem.R
    n = X.shape[0]
    internal = ~idx.is_leaf
    bf_flat = bf.reshape(-1).astype(np.float64) if bf is not None else None
    doc_ptr = ws.doc_ptr
    new_doc: list[int] = []
    new_key: list[int] = []
    new_delta: list[float] = []
    new_n2: list[float] = []
    cols: list[np.ndarray] = []
    sgns: list[np.ndarray] = []
    bus: list[np.ndarray] = []
    bnets: list[np.ndarray] = []
    xi2 = 0.0
    wrong = 0
    for a in range(0, n, ORACLE_CHUNK):
        b = min(n, a + ORACLE_CHUNK)
        S = np.asarray(X[a:b] @ W, dtype=np.float64)
        nb = b - a
        gm = np.zeros((nb, idx.n_nodes), dtype=bool)
        gm[:, 0] = True
        lo, hi = gold.nodes_ptr[a], gold.nodes_ptr[b]
        gm[np.repeat(np.arange(nb), np.diff(gold.nodes_ptr[a : b + 1])), gold.nodes[lo:hi]] = True
        S_aug = S + np.where(gm[:, 1:], -margins.gold[None, :], margins.off)
        res = dp_solve(idx, S_aug, bf, R if R is not None else 3)
        sel, kk = res.selected, res.k
        diff = sel != gm
        for r in np.flatnonzero(diff.any(axis=1)):
            i = a + int(r)
            plus = np.flatnonzero(diff[r] & gm[r])
            minus = np.flatnonzero(diff[r] & sel[r])
            delta = float(margins.gold[plus - 1].sum()) + margins.off * minus.size
            wd = float(S[r, plus - 1].sum() - S[r, minus - 1].sum())
            u = np.zeros(0, np.int64)
            net = np.zeros(0)
            if bf_flat is not None:
                assert kk is not None and R is not None
                u, net = problem.bf_difference(gold.bf[gold.bf_ptr[i] : gold.bf_ptr[i + 1]], sel[r], kk[r], internal, R)
                wd += float(bf_flat[u] @ net)
            xi = delta - wd
            wrong += 1
            if xi <= VIOLATION_TOL:
                continue
            xi2 += xi * xi
            n2 = (plus.size + minus.size) * float(gold.phi2[i]) + float(net @ net)
            key = tree_key(sel[r])
            if n2 <= 0 or key in ws.keys_of(i, doc_ptr):
                continue
            new_doc.append(i)
            new_key.append(key)
            new_delta.append(delta)
            new_n2.append(n2)
            cols.append(np.concatenate([plus, minus]) - 1)
            sgns.append(np.concatenate([np.ones(plus.size), -np.ones(minus.size)]))
            bus.append(u.astype(np.int64))
            bnets.append(np.asarray(net, dtype=np.float64))
    m = len(new_doc)

    def ptr(parts: list[np.ndarray]) -> np.ndarray:
        return np.concatenate([[0], np.cumsum([p.size for p in parts])]).astype(np.int64)

    def flat(parts: list[np.ndarray], dtype: Any) -> np.ndarray:
        return np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype)

    new = WorkingSets(ws.n_docs, np.asarray(new_doc, np.int64), np.asarray(new_key, np.uint64), np.zeros(m),
                      np.asarray(new_delta, np.float64), np.asarray(new_n2, np.float64), ptr(cols),
                      flat(cols, np.int64), flat(sgns, np.float64), ptr(bus), flat(bus, np.int64),
                      flat(bnets, np.float64))
    return new, xi2, wrong


def _ws_passes_impl(indptr, indices, data, W, bf_flat, use_bf, doc_ptr, alpha, delta, n2, cptr, cols, csgn,  # type: ignore[no-untyped-def]
                    bptr, bu, bnet, tot, orders, C, sigma, touched, out):
    """Step 2 of a round: coordinate steps over the working sets in ``orders`` (one row per pass),
    in place on ``W``/``bf_flat``/``alpha``/``tot``; ``out[0]`` = the steps taken."""
    inv2c = 0.5 / C
    steps = 0
    for p in range(orders.shape[0]):
        for oi in range(orders.shape[1]):
            i = orders[p, oi]
            j0 = doc_ptr[i]
            j1 = doc_ptr[i + 1]
            if j0 == j1:
                continue
            a = indptr[i]
            b = indptr[i + 1]
            for j in range(j0, j1):
                wd = 0.0
                for c in range(cptr[j], cptr[j + 1]):
                    e = cols[c]
                    acc = 0.0
                    for q in range(a, b):
                        acc += data[q] * W[indices[q], e]
                    wd += csgn[c] * acc
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
                    for q in range(a, b):
                        W[indices[q], e] += v * data[q]
                        touched[indices[q]] = True
                if use_bf:
                    for q in range(bptr[j], bptr[j + 1]):
                        bf_flat[bu[q]] += sd * bnet[q]
    out[0] = steps


_ws_passes_j = _njit(_ws_passes_impl)


def dcd_round(problem: Problem, W: np.ndarray, bf: np.ndarray | None, ws: WorkingSets | None, margins: Margins,
              C: float, sigma: float, scale: float, passes: int, orders_seed: tuple[int, int, int],
              touched: np.ndarray) -> tuple[WorkingSets, dict[str, float]]:
    """One round over a shard (module docstring), in place on ``W`` and ``bf``; ``ws`` the
    shard's working sets from the last round (None: fresh); ``sigma`` the local step scale,
    ``scale`` the factor of the mixing on this shard's dual steps (``sigma / K``). Returns the new
    working sets and the round's counters (:func:`round_counters`)."""
    n = problem.X.shape[0]
    if ws is None or ws.n_docs != n:
        ws = WorkingSets.empty(n)
    A0 = ws.alpha_sums()
    lin0 = float(ws.alpha @ ws.delta)
    new, xi2, wrong = oracle(problem, W, bf, margins, ws)
    # a new object: the caller's working sets stay as they were (a retried shard starts from them)
    ws = WorkingSets.concat([ws, new]).sorted_by_doc() if len(new) else replace(ws, alpha=ws.alpha.copy())
    alpha0 = ws.alpha.copy()
    tot = ws.alpha_sums()
    rng = np.random.default_rng(list(orders_seed))
    orders = np.stack([rng.permutation(n) for _ in range(max(0, int(passes)))]) if passes > 0 and n else (
        np.zeros((0, max(n, 1)), np.int64))
    X = problem.X
    use_bf = bf is not None
    bf_flat = bf.reshape(-1) if bf is not None else np.zeros(1, W.dtype)
    out = np.zeros(1, np.int64)
    _ws_passes_j(X.indptr.astype(np.int64), X.indices.astype(np.int64), X.data.astype(np.float64), W, bf_flat,
                 use_bf, ws.doc_ptr, ws.alpha, ws.delta, ws.n2, ws.cptr, ws.cols, ws.csgn, ws.bptr, ws.bu, ws.bnet,
                 tot, orders.astype(np.int64), float(C), float(sigma), touched, out)
    if scale != 1.0:
        ws.alpha = alpha0 + scale * (ws.alpha - alpha0)
    kept = ws.take(np.flatnonzero(ws.alpha > 0))
    counters = round_counters(C, xi2, lin0, A0)
    counters.update({"updates": float(out[0]), "exact": float(n - wrong), "working_set": float(len(kept)),
                     "new_trees": float(len(new))})
    return kept, counters


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


def uses_kernels() -> bool:
    return _kernels.available()
