"""Compiled (numba) kernels for the hot loops of the Murawaki models; optional.

The numpy implementations in :mod:`sparkhc.decoding` and :mod:`sparkhc.models.murawaki` stay the
reference. When numba is importable (``pip install sparkhc[fast]``) and not disabled, those modules
dispatch here instead:

* :func:`dp_batch` -- exact DP decoding (Alg. 3, Alg. 4 with branching features) of a block of
  edge scores, one document at a time, in the arithmetic dtype of the reference (float32 for
  float32 scores);
* :func:`dp_one` -- the same for one document in float64 (as :func:`~sparkhc.decoding.dp_solve_one`);
* :func:`gt_epoch` -- one epoch of global training (Alg. 5): per example the scores from the
  ``nnz(x)`` rows of the feature-major ``W``, the DP (float64), the cost, the loss and the PA-I
  (or PA-II) update of the symmetric-difference edges and of the branching weights, in place
  (cost-augmented updates with one Hamming margin, or per-edge margins of missed gold edges);
  with a CSR ``W`` (the sparse layout) the epoch of the model restricted to the stored entries
  (:func:`csr_scores`: the edge scores of a block with a CSR ``W``; :func:`csr_decode`: scores and
  DP fused per document, the selected leaves found by a walk over the picked children only);
* :func:`binary_epoch` -- one epoch of independent PA-I classifiers (FLAT, TREE-ALL, TREE-SIB);
* :func:`delta_encode`, :func:`delta_apply` -- the row-sparse IPM deltas of a shard's epoch and their
  mean added into the base state (:mod:`sparkhc.spark.deltas`), value for value as its numpy path.

Semantics equal the reference (ties: the first best child, the smallest ``k``; the same float32
score accumulation order and float64 update arithmetic); sums of many terms may be associated
differently, so results agree to rounding (the tests compare them on random taxonomies).

The branching choice does not sort: the candidates ``k <= R`` need only the top ``R`` offers and all
``k > R`` share the bucket ``>R``, whose best is the top ``R + 1`` plus every other positive offer,
so ``R + 1`` max scans per node suffice.

Set ``SPARKHC_KERNELS=0`` (or :data:`ENABLED` = False) to force the numpy reference. Compiled
functions are cached on disk (numba ``cache=True``; ``NUMBA_CACHE_DIR`` to relocate). When numba
cannot be imported and the kernels are not switched off, a :class:`RuntimeWarning` says so once per
process, with the error: the numpy reference is several times slower.
"""

from __future__ import annotations

import os
import warnings
from typing import Any

import numpy as np

#: the kernels were switched off (``SPARKHC_KERNELS=0``): the numpy reference runs, without a warning
_SWITCHED_OFF = os.environ.get("SPARKHC_KERNELS", "1").lower() in ("0", "false", "no", "off")

try:
    import numba as _nb

    HAVE_NUMBA = True
except Exception as e:  # not installed, or a broken install (e.g. a numpy it does not support)
    _nb = None  # type: ignore[assignment]
    HAVE_NUMBA = False
    if not _SWITCHED_OFF:
        how = ("numba is not installed (pip install 'sparkhc[fast]')" if isinstance(e, ModuleNotFoundError)
               and e.name == "numba" else f"numba failed to import ({type(e).__name__}: {e})")
        warnings.warn(f"sparkhc: the compiled kernels are off: {how}; the numpy reference runs instead, several "
                      "times slower (SPARKHC_KERNELS=0 chooses it without this warning)", RuntimeWarning,
                      stacklevel=1)

#: dispatch to the compiled kernels (when numba is importable)
ENABLED: bool = HAVE_NUMBA and not _SWITCHED_OFF

__all__ = ["HAVE_NUMBA", "ENABLED", "available", "dp_batch", "dp_one", "gt_epoch", "binary_epoch", "delta_encode",
           "delta_apply", "csr_scores", "csr_decode", "csr_union"]


def available() -> bool:
    """Whether the models and decoders use the compiled kernels now."""
    return bool(ENABLED and HAVE_NUMBA)


def _njit(fn: Any) -> Any:
    if _nb is None:
        return fn
    return _nb.njit(cache=True, nogil=True)(fn)


# ----------------------------------------------------------------------------------------- DP
def _dp_up(s, fc, nch, inner, bf, use_bf, R, sub, chosen, kk, off, taken, picks, zero, ninf):  # type: ignore[no-untyped-def]
    """Bottom-up DP of one document into ``sub``/``kk`` and ``chosen`` (``chosen[c]``: ``c`` is
    picked among its siblings when its parent is selected; every child of an internal node is set).
    Arithmetic in the dtype of ``sub`` / ``zero``. Only the internal nodes ``inner`` (ascending,
    ``TreeIndex.internal``) are visited: ``sub`` and ``kk`` of a leaf are never written and must be 0
    (the callers' zeroed arrays), and ``taken`` must be all False (it is again on return).

    With branching features the offers beyond a node's top R + 1 enter only the option "more than
    R children", through the sum of the positive ones. That sum is taken in child order (a second
    pass) only when the option can win: its float64 bound (every positive offer counted once in
    the first pass, less the picks') plus a rounding margin far above the float32 sum's error is
    compared with the best of the other options first. So the choices and sums are those of the
    plain two-pass DP, bit for bit."""
    nb = bf.shape[0] - 1
    pv = np.empty(R + 1, dtype=off.dtype)  # the picks' offers, in their order
    for t in range(inner.shape[0] - 1, -1, -1):
        p = inner[t]
        k = nch[p]
        lo = fc[p]
        hi = lo + k
        if not use_bf:
            total = zero
            mx = ninf
            arg = lo
            for c in range(lo, hi):
                o = s[c - 1] + sub[c]
                if o > zero:
                    total += o
                    chosen[c] = True
                else:
                    chosen[c] = False
                if o > mx:
                    mx = o
                    arg = c
            if mx <= zero:
                total += mx
                chosen[arg] = True
            sub[p] = total
            continue
        # one pass: the top R + 1 offers (value desc, then id asc) by insertion into picks, the
        # count of positive offers and their float64 sum
        npick = k if k < R + 1 else R + 1
        npos = 0
        pos = 0.0
        m = 0
        thr = ninf  # the last pick's offer once there are npick of them
        for c in range(lo, hi):
            o = s[c - 1] + sub[c]
            off[c] = o
            chosen[c] = False
            gt = o > zero
            npos += gt
            pos += o if gt else 0.0
            if m < npick:
                q = m
                m += 1
            elif o > thr:
                q = npick - 1
            else:
                continue
            while q > 0 and o > pv[q - 1]:
                picks[q] = picks[q - 1]
                pv[q] = pv[q - 1]
                q -= 1
            picks[q] = c
            pv[q] = o
            if m == npick:
                thr = pv[npick - 1]
        cum = zero
        best = ninf
        jbest = -1
        mine = 0.0
        for j in range(npick):
            v = pv[j]
            cum += v
            mine += v
            if j < R:
                cand = cum + (bf[p, j] + bf[nb, j])
                if jbest < 0 or cand > best:
                    best = cand
                    jbest = j
        nextra = 0
        marked = False
        if k > R:
            extra = zero
            bR = bf[p, R] + bf[nb, R]
            if npos > npick:  # else every positive offer is among the picks: extra stays 0
                rest = pos - mine  # the extras' sum; every pick is positive here
                bound = cum + rest + bR
                slack = (k + 8) * 2.0**-22 * (abs(cum) + abs(rest) + abs(bR)) + 1e-30
                if not bound + slack <= best:  # the option may win: its exact sum, in child order
                    for j in range(npick):
                        taken[picks[j]] = True
                    marked = True
                    for c in range(lo, hi):
                        if not taken[c] and off[c] > zero:
                            extra += off[c]
                            nextra += 1
                    cand = cum + extra + bR
                    if cand > best:
                        best = cand
                        jbest = R
            else:
                cand = cum + extra + bR
                if cand > best:
                    best = cand
                    jbest = R
        top = jbest + 1 if jbest < npick else npick
        for j in range(top):
            chosen[picks[j]] = True
        kb = jbest + 1
        if jbest == R and nextra > 0:
            for c in range(lo, hi):
                if not taken[c] and off[c] > zero:
                    chosen[c] = True
            kb = R + 1 + nextra
        if marked:
            for j in range(npick):
                taken[picks[j]] = False
        kk[p] = kb
        sub[p] = best


def _dp_doc(s, fc, nch, inner, parent, n_nodes, bf, use_bf, R, sub, chosen, kk, off, taken, picks, zero, ninf):  # type: ignore[no-untyped-def]
    """:func:`_dp_up`, then the top-down selection over every node (``chosen`` becomes the
    selected mask; ``kk`` zero off it)."""
    _dp_up_j(s, fc, nch, inner, bf, use_bf, R, sub, chosen, kk, off, taken, picks, zero, ninf)
    chosen[0] = True
    for c in range(1, n_nodes):
        chosen[c] = chosen[c] and chosen[parent[c]]
    if use_bf:
        for p in range(n_nodes):
            if not chosen[p]:
                kk[p] = 0


def _dp_batch_impl(S, fc, nch, inner, parent, bf, use_bf, R, zero, ninf, sub, off, sel, score, kk_out, keep_k):  # type: ignore[no-untyped-def]
    n = S.shape[0]
    n_nodes = fc.shape[0]
    chosen = np.zeros(n_nodes, dtype=np.bool_)
    kk = np.zeros(n_nodes, dtype=np.int64)
    taken = np.zeros(n_nodes, dtype=np.bool_)
    picks = np.zeros(R + 2, dtype=np.int64)
    for i in range(n):
        _dp_doc_j(S[i], fc, nch, inner, parent, n_nodes, bf, use_bf, R, sub, chosen, kk, off, taken, picks, zero, ninf)
        for c in range(n_nodes):
            sel[i, c] = chosen[c]
        score[i] = sub[0]
        if keep_k:
            for c in range(n_nodes):
                kk_out[i, c] = kk[c]


# ------------------------------------------------------------------------------------- GT epoch
def _row_slot(wptr, wind, f, e):  # type: ignore[no-untyped-def]
    """The position of the entry (f, e) of a CSR with sorted rows, -1 when it is not stored."""
    lo = wptr[f]
    hi = wptr[f + 1]
    while lo < hi:
        mid = (lo + hi) >> 1
        if wind[mid] < e:
            lo = mid + 1
        else:
            hi = mid
    if lo < wptr[f + 1] and wind[lo] == e:
        return lo
    return -1


def _entry_add(wval, wa, avg, q, plus, d, dtw):  # type: ignore[no-untyped-def]
    """Entry ``q`` of a sparse epoch's update: ``+d`` on a gold-only edge, ``-d`` on a
    predicted-only one (and ``+-d * tw`` into the averaged weights)."""
    wval[q] = np.float64(wval[q]) + (d if plus else -d)
    if avg:
        wa[q] = np.float64(wa[q]) + (dtw if plus else -dtw)


def _row_step(wptr, wind, wval, wa, avg, f, cols, colpos, nc, n_plus, d, dtw, norm_only):  # type: ignore[no-untyped-def]
    """For the stored entries (f, cols[j]) of a CSR with sorted rows: add ``d`` (``-d`` for
    ``j >= n_plus``) to ``wval`` and ``d * tw`` to ``wa``, or with ``norm_only`` just count them.
    Binary searches when the row is long next to ``nc``, else a scan of the row with ``colpos``
    (``colpos[e]``: the ``j`` of edge ``e``, -1 for the others). Returns the count."""
    lo = wptr[f]
    hi = wptr[f + 1]
    n = 0
    if nc * 16 < hi - lo:
        for j in range(nc):
            q = _row_slot_j(wptr, wind, f, cols[j])
            if q >= 0:
                n += 1
                if not norm_only:
                    _entry_add_j(wval, wa, avg, q, j < n_plus, d, dtw)
    else:
        for q in range(lo, hi):
            j = colpos[wind[q]]
            if j >= 0:
                n += 1
                if not norm_only:
                    _entry_add_j(wval, wa, avg, q, j < n_plus, d, dtw)
    return n


def _bf_net(g_bf, g0, g1, chosen, kk, is_leaf, Rb, seen, ulist, net):  # type: ignore[no-untyped-def]
    """The branching part of ``Delta = Phi(gold) - Phi(chosen)`` into ``net`` (gold indicators
    ``g_bf[g0:g1]`` +1, the chosen tree's -1 per selected internal node, node-specific and shared);
    the touched indices into ``ulist`` (marked in ``seen``); returns how many. The caller resets
    ``net`` and ``seen`` at those indices afterwards."""
    n_nodes = chosen.shape[0]
    nu = 0
    for t in range(g0, g1):
        u = g_bf[t]
        if not seen[u]:
            seen[u] = True
            ulist[nu] = u
            nu += 1
        net[u] += 1.0
    for p in range(n_nodes):
        if chosen[p] and not is_leaf[p]:
            bk = kk[p] if kk[p] < Rb else Rb
            bk -= 1
            for u in (p * Rb + bk, n_nodes * Rb + bk):
                if not seen[u]:
                    seen[u] = True
                    ulist[nu] = u
                    nu += 1
                net[u] -= 1.0
    return nu


def _gt_epoch_impl(  # type: ignore[no-untyped-def]
    indptr, indices, dataw, data64, order, W, bf, use_bf, R, fc, nch, inner, parent, is_leaf,
    g_leaves, g_lptr, g_nodes, g_nptr, g_bf, g_bptr, phi2, C, touched, out, aug, pa2, avg, Wa, bfa, t0,
    mpos, use_mpos, sparse, wptr, wind, wval, wa,
):
    n_nodes = fc.shape[0]
    n_order = order.shape[0]
    bfa_flat = bfa.reshape(bfa.size)
    n_edges = n_nodes - 1
    bf_flat = bf.reshape(bf.size)
    s = np.empty(n_edges, dtype=W.dtype)
    sa = np.empty(n_edges, dtype=W.dtype)
    sub = np.zeros(n_nodes, dtype=np.float64)
    chosen = np.zeros(n_nodes, dtype=np.bool_)
    kk = np.zeros(n_nodes, dtype=np.int64)
    off = np.empty(n_nodes, dtype=np.float64)
    taken = np.zeros(n_nodes, dtype=np.bool_)
    picks = np.zeros(R + 2, dtype=np.int64)
    gm = np.zeros(n_nodes, dtype=np.bool_)
    cols = np.empty(n_edges, dtype=np.int64)
    net = np.zeros(bf_flat.size, dtype=np.float64)
    seen = np.zeros(bf_flat.size, dtype=np.bool_)
    ulist = np.empty(bf_flat.size, dtype=np.int64)
    colpos = np.full(n_edges if sparse else 1, -1, dtype=np.int64)  # sparse: cols position of an edge
    Rb = R + 1
    n_upd = 0
    n_exact = 0
    loss_sum = 0.0
    cost_sum = 0.0
    tau_sum = 0.0
    for oi in range(order.shape[0]):
        i = order[oi]
        a = indptr[i]
        b = indptr[i + 1]
        for e in range(n_edges):
            s[e] = 0
        if sparse:  # the stored entries of each row: per edge the dense sum without its zero terms
            _row_scores_j(indices, dataw, a, b, wptr, wind, wval, s)
        else:
            for t in range(a, b):
                f = indices[t]
                v = dataw[t]
                for e in range(n_edges):
                    s[e] += v * W[f, e]
        for c in range(n_nodes):
            gm[c] = False
        gm[0] = True
        for t in range(g_nptr[i], g_nptr[i + 1]):
            gm[g_nodes[t]] = True
        if aug > 0.0:
            if use_mpos:  # per-edge margins of a missed gold edge (GlobalPA margin_rare)
                for c in range(1, n_nodes):
                    sa[c - 1] = s[c - 1] + (-mpos[c - 1] if gm[c] else aug)
            else:
                for c in range(1, n_nodes):
                    sa[c - 1] = s[c - 1] + (-aug if gm[c] else aug)
            _dp_doc_j(sa, fc, nch, inner, parent, n_nodes, bf, use_bf, R, sub, chosen, kk, off, taken, picks, 0.0, -np.inf)
        else:
            _dp_doc_j(s, fc, nch, inner, parent, n_nodes, bf, use_bf, R, sub, chosen, kk, off, taken, picks, 0.0, -np.inf)
        n_plus = 0
        n_minus = 0
        margin_minus = 0.0
        margin_plus = 0.0
        cost_plus = 0.0
        for c in range(1, n_nodes):
            if gm[c] and not chosen[c]:
                n_plus += 1
        # plus edges first, then minus edges (the reference's order)
        jp = 0
        jm = n_plus
        for c in range(1, n_nodes):
            if gm[c] != chosen[c]:
                if gm[c]:
                    cols[jp] = c - 1
                    jp += 1
                    margin_plus += np.float64(s[c - 1])
                    if use_mpos:
                        cost_plus += mpos[c - 1]
                else:
                    cols[jm] = c - 1
                    jm += 1
                    n_minus += 1
                    margin_minus += np.float64(s[c - 1])
        if n_plus + n_minus == 0:
            n_exact += 1
            continue
        n_pred = 0
        for c in range(n_nodes):
            if chosen[c] and is_leaf[c]:
                n_pred += 1
        inter = 0
        for t in range(g_lptr[i], g_lptr[i + 1]):
            if chosen[g_leaves[t]]:
                inter += 1
        n_gold = g_lptr[i + 1] - g_lptr[i]
        rho = 1.0 - 2.0 * inter / (n_gold + n_pred)
        margin = margin_minus - margin_plus
        bf_n2 = 0.0
        nu = 0
        if use_bf:
            nu = _bf_net_j(g_bf, g_bptr[i], g_bptr[i + 1], chosen, kk, is_leaf, Rb, seen, ulist, net)
            for j in range(nu):
                u = ulist[j]
                if net[u] != 0.0:
                    margin -= np.float64(bf_flat[u]) * net[u]
                    bf_n2 += net[u] * net[u]
        if use_mpos:
            loss = margin + (cost_plus + aug * n_minus)
        else:
            loss = margin + (aug * (n_plus + n_minus) if aug > 0.0 else np.sqrt(rho))
        cost_sum += rho
        nc = n_plus + n_minus
        if loss > 0.0:
            loss_sum += loss
            if sparse:  # ||Delta||^2 of the restricted model: the coordinates that exist
                for j in range(nc):
                    colpos[cols[j]] = j
                norm2 = bf_n2
                for t in range(a, b):
                    k = _row_step_j(wptr, wind, wval, wa, avg, indices[t], cols, colpos, nc, n_plus, 0.0, 0.0, True)
                    norm2 += k * (data64[t] * data64[t])
            else:
                norm2 = (n_plus + n_minus) * phi2[i] + bf_n2
            if norm2 > 0.0:
                tau = loss / (norm2 + 0.5 / C) if pa2 else min(C, loss / norm2)
                tau_sum += tau
                n_upd += 1
                tw = t0 + oi / n_order  # the step's time (averaging): epochs before it, fractional
                for t in range(a, b):
                    f = indices[t]
                    touched[f] = True
                    vt = data64[t] * tau
                    if sparse:
                        _row_step_j(wptr, wind, wval, wa, avg, f, cols, colpos, nc, n_plus, vt, vt * tw, False)
                        continue
                    for j in range(n_plus):
                        e = cols[j]
                        W[f, e] = np.float64(W[f, e]) + vt
                    for j in range(n_plus, nc):
                        e = cols[j]
                        W[f, e] = np.float64(W[f, e]) + (-vt)
                    if avg:
                        vtw = vt * tw
                        for j in range(n_plus):
                            e = cols[j]
                            Wa[f, e] = np.float64(Wa[f, e]) + vtw
                        for j in range(n_plus, nc):
                            e = cols[j]
                            Wa[f, e] = np.float64(Wa[f, e]) + (-vtw)
                if use_bf and bf_n2 > 0.0:
                    for j in range(nu):
                        u = ulist[j]
                        if net[u] != 0.0:
                            bf_flat[u] = np.float64(bf_flat[u]) + tau * net[u]
                            if avg:
                                bfa_flat[u] = np.float64(bfa_flat[u]) + tau * net[u] * tw
        if sparse and loss > 0.0:
            for j in range(nc):
                colpos[cols[j]] = -1
        for j in range(nu):
            u = ulist[j]
            net[u] = 0.0
            seen[u] = False
    out[0] = order.shape[0]
    out[1] = n_upd
    out[2] = loss_sum
    out[3] = cost_sum
    out[4] = n_exact
    out[5] = tau_sum


def _csr_union_impl(aptr, aind, bptr, bind, uptr, uind, amap, fill):  # type: ignore[no-untyped-def]
    """The union of two CSR patterns with sorted rows, row by row: its row sizes into ``uptr[1:]``
    (``fill`` False), or its indices and the position of every entry of the first (``fill``)."""
    for r in range(aptr.shape[0] - 1):
        p = aptr[r]
        pe = aptr[r + 1]
        q = bptr[r]
        qe = bptr[r + 1]
        u = uptr[r] if fill else 0
        while p < pe or q < qe:
            if q >= qe or (p < pe and aind[p] < bind[q]):
                c = aind[p]
                if fill:
                    amap[p] = u
                p += 1
            elif p >= pe or bind[q] < aind[p]:
                c = bind[q]
                q += 1
            else:
                c = aind[p]
                if fill:
                    amap[p] = u
                p += 1
                q += 1
            if fill:
                uind[u] = c
            u += 1
        if not fill:
            uptr[r + 1] = u


def _row_scores(xind, xval, a, b, wptr, wind, wval, s):  # type: ignore[no-untyped-def]
    """``s += sum_{t in [a, b)} xval[t] * W[xind[t]]`` of a CSR ``W`` into the row ``s``, in its dtype
    and the per-edge order of the dense product (features in document order)."""
    for t in range(a, b):
        f = xind[t]
        v = xval[t]
        for q in range(wptr[f], wptr[f + 1]):
            s[wind[q]] += v * wval[q]


def _csr_scores_impl(xptr, xind, xval, wptr, wind, wval, S):  # type: ignore[no-untyped-def]
    """``S[i] = sum_t xval[t] * W[xind[t]]`` of a CSR ``W`` (:func:`_row_scores` per document)."""
    for i in range(xptr.shape[0] - 1):
        _row_scores_j(xind, xval, xptr[i], xptr[i + 1], wptr, wind, wval, S[i])


def _csr_decode_impl(xptr, xind, xval, wptr, wind, wval, fc, nch, inner, bf, use_bf, R, zero, ninf,  # type: ignore[no-untyped-def]
                     s, sub, chosen, kk, off, taken, picks, stack, lptr, leaves, lscore):
    """Decoding with a CSR ``W``, one document at a time: its edge scores into the row ``s`` (the
    sums of :func:`_csr_scores_impl`, in its order), :func:`_dp_up`, then a walk down from the root
    over the picked children only, which writes the selected leaves (ascending) and their scores
    (``lptr`` per document; ``leaves``/``lscore`` grow when full and are returned). No
    ``(documents x edges)`` block is built and the selection never visits the unselected nodes."""
    n_e = s.shape[0]
    u = 0
    lptr[0] = 0
    for i in range(xptr.shape[0] - 1):
        for e in range(n_e):
            s[e] = zero
        _row_scores_j(xind, xval, xptr[i], xptr[i + 1], wptr, wind, wval, s)
        _dp_up_j(s, fc, nch, inner, bf, use_bf, R, sub, chosen, kk, off, taken, picks, zero, ninf)
        start = u
        top = 1
        stack[0] = 0
        while top > 0:
            top -= 1
            p = stack[top]
            k = nch[p]
            if k == 0 and p > 0:
                if u == leaves.shape[0]:
                    grown = np.empty(2 * leaves.shape[0] + 16, dtype=leaves.dtype)
                    grown[:u] = leaves[:u]
                    leaves = grown
                    gs = np.empty(grown.shape[0], dtype=lscore.dtype)
                    gs[:u] = lscore[:u]
                    lscore = gs
                # insertion into the document's ascending run
                q = u
                while q > start and leaves[q - 1] > p:
                    leaves[q] = leaves[q - 1]
                    lscore[q] = lscore[q - 1]
                    q -= 1
                leaves[q] = p
                lscore[q] = s[p - 1]
                u += 1
                continue
            for c in range(fc[p], fc[p] + k):
                if chosen[c]:
                    stack[top] = c
                    top += 1
        lptr[i + 1] = u
    return leaves, lscore


# --------------------------------------------------------------------------------- binary epoch
def _binary_epoch_impl(  # type: ignore[no-untyped-def]
    indptr, indices, dataw, data64, order, W, phi2, pos, pos_ptr, use_cols, ycols, C, touched, out
):
    ncol = W.shape[1]
    s = np.empty(ncol, dtype=W.dtype)
    y = np.empty(ncol, dtype=np.float64)
    n_upd = 0
    n_bin = 0
    n_active = 0
    loss = 0.0
    for oi in range(order.shape[0]):
        i = order[oi]
        a = indptr[i]
        b = indptr[i + 1]
        for e in range(ncol):
            s[e] = 0
        for t in range(a, b):
            f = indices[t]
            v = dataw[t]
            for e in range(ncol):
                s[e] += v * W[f, e]
        lo = pos_ptr[i]
        hi = pos_ptr[i + 1]
        u = 0
        if not use_cols:
            for e in range(ncol):
                y[e] = -1.0
            for t in range(lo, hi):
                y[pos[t]] = 1.0
            n_bin += ncol
            for e in range(ncol):
                lo_e = 1.0 - y[e] * np.float64(s[e])
                if lo_e > 0.0:
                    u += 1
                    loss += lo_e
                    if phi2[i] > 0.0:
                        step = min(C, lo_e / phi2[i]) * y[e]
                        for t in range(a, b):
                            f = indices[t]
                            touched[f] = True
                            W[f, e] = np.float64(W[f, e]) + data64[t] * step
        else:
            n_bin += hi - lo
            for t2 in range(lo, hi):
                e = pos[t2]
                yy = ycols[t2]
                lo_e = 1.0 - yy * np.float64(s[e])
                if lo_e > 0.0:
                    u += 1
                    loss += lo_e
                    if phi2[i] > 0.0:
                        step = min(C, lo_e / phi2[i]) * yy
                        for t in range(a, b):
                            f = indices[t]
                            touched[f] = True
                            W[f, e] = np.float64(W[f, e]) + data64[t] * step
        if phi2[i] <= 0.0:
            u = 0
        n_upd += u
        if u > 0:
            n_active += 1
    out[0] = order.shape[0]
    out[1] = n_upd
    out[2] = loss
    out[3] = n_bin
    out[4] = n_active


# ------------------------------------------------------------------ IPM deltas (sparkhc.spark.deltas)
def _delta_count_impl(new, base, rows, counts):  # type: ignore[no-untyped-def]
    for i in range(rows.shape[0]):
        r = rows[i]
        c = 0
        for j in range(new.shape[1]):
            if new[r, j] != base[r, j]:
                c += 1
        counts[r] = c


def _delta_fill_impl(new, base, rows, indptr, indices, data):  # type: ignore[no-untyped-def]
    for i in range(rows.shape[0]):
        r = rows[i]
        p = indptr[r]
        for j in range(new.shape[1]):
            a = new[r, j]
            b = base[r, j]
            if a != b:
                indices[p] = j
                data[p] = np.float64(a) - np.float64(b)
                p += 1


def _delta_add_impl(buf, rows, indptr, indices, data):  # type: ignore[no-untyped-def]
    for i in range(rows.shape[0]):
        r = rows[i]
        for p in range(indptr[r], indptr[r + 1]):
            buf[i, indices[p]] += data[p]


def _delta_finish_impl(flat, rows, buf, scale):  # type: ignore[no-untyped-def]
    for i in range(rows.shape[0]):
        r = rows[i]
        for j in range(flat.shape[1]):
            v = buf[i, j] * scale
            flat[r, j] = v + np.float64(flat[r, j])


_dp_up_j = _njit(_dp_up)
_dp_doc_j = _njit(_dp_doc)
_dp_batch_j = _njit(_dp_batch_impl)
_row_slot_j = _njit(_row_slot)
_entry_add_j = _njit(_entry_add)
_row_step_j = _njit(_row_step)
_bf_net_j = _njit(_bf_net)
_gt_epoch_j = _njit(_gt_epoch_impl)
_row_scores_j = _njit(_row_scores)
_csr_scores_j = _njit(_csr_scores_impl)
_csr_decode_j = _njit(_csr_decode_impl)
_csr_union_j = _njit(_csr_union_impl)
_binary_epoch_j = _njit(_binary_epoch_impl)
_delta_count_j = _njit(_delta_count_impl)
_delta_fill_j = _njit(_delta_fill_impl)
_delta_add_j = _njit(_delta_add_impl)
_delta_finish_j = _njit(_delta_finish_impl)


# ------------------------------------------------------------------------------ Python wrappers
def _i64(a: np.ndarray | None) -> np.ndarray:
    if a is None:
        return np.zeros(1, dtype=np.int64)
    return np.ascontiguousarray(a, dtype=np.int64)


def _bf_arg(bf: np.ndarray | None, dtype: Any) -> tuple[np.ndarray, bool]:
    if bf is None:
        return np.zeros((1, 1), dtype=dtype), False
    return np.ascontiguousarray(bf), True


def dp_batch(
    index: Any, S: np.ndarray, bf: np.ndarray | None, R: int, with_k: bool = True
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Exact DP of a block ``S`` ``(n_docs, n_edges)``: ``(selected, score, k)`` as
    :func:`sparkhc.decoding.dp_solve` (arithmetic in ``promote(S.dtype, float32)``); without
    ``with_k`` no ``k`` (None: decoding needs only the selection, and ``k`` is the largest output)."""
    dt = np.promote_types(S.dtype, np.float32)
    S = np.ascontiguousarray(S, dtype=dt)
    n = S.shape[0]
    bfa, use_bf = _bf_arg(None if bf is None else np.asarray(bf, dtype=dt), dt)
    sel = np.zeros((n, index.n_nodes), dtype=np.bool_)
    score = np.zeros(n, dtype=np.float64)
    keep_k = use_bf and with_k
    kk = np.zeros((n, index.n_nodes) if keep_k else (1, 1), dtype=np.int64)
    zero = dt.type(0)
    _dp_batch_j(
        S, _i64(index.first_child), _i64(index.n_children), _i64(index.internal), _i64(index.parent), bfa,
        use_bf, int(R),
        zero, dt.type(-np.inf), np.zeros(index.n_nodes, dt), np.zeros(index.n_nodes, dt), sel, score, kk, keep_k,
    )
    return sel, score, (kk if keep_k else None)


def dp_one(
    index: Any, s: np.ndarray, bf: np.ndarray | None, R: int
) -> tuple[np.ndarray, float, np.ndarray | None]:
    """Exact DP of one document in float64: ``(selected, score, k)`` as
    :func:`sparkhc.decoding.dp_solve_one`."""
    sel, score, kk = dp_batch_f64(index, np.asarray(s, dtype=np.float64)[None, :], bf, R)
    return sel[0], float(score[0]), (kk[0] if kk is not None else None)


def dp_batch_f64(
    index: Any, S: np.ndarray, bf: np.ndarray | None, R: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """:func:`dp_batch` in float64 arithmetic whatever the dtype of ``S`` (branching weights are
    summed in their own dtype first, as the one-document reference does)."""
    S = np.ascontiguousarray(S)
    if S.dtype not in (np.float32, np.float64):
        S = S.astype(np.float64)
    n = S.shape[0]
    bfa, use_bf = _bf_arg(bf, np.float64)
    if use_bf and bfa.dtype not in (np.float32, np.float64):
        bfa = bfa.astype(np.float64)
    sel = np.zeros((n, index.n_nodes), dtype=np.bool_)
    score = np.zeros(n, dtype=np.float64)
    kk = np.zeros((n, index.n_nodes) if use_bf else (1, 1), dtype=np.int64)
    _dp_batch_j(
        S, _i64(index.first_child), _i64(index.n_children), _i64(index.internal), _i64(index.parent), bfa,
        use_bf, int(R),
        np.float64(0.0), np.float64(-np.inf), np.zeros(index.n_nodes), np.zeros(index.n_nodes), sel, score, kk,
        use_bf,
    )
    return sel, score, (kk if use_bf else None)


def _csr_args(X: Any, dtype: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    return (
        _i64(X.indptr),
        _i64(X.indices),
        np.ascontiguousarray(X.data, dtype=dtype),
        np.ascontiguousarray(X.data, dtype=np.float64),
    )


def gt_epoch(
    X: Any,
    order: np.ndarray,
    W: Any,
    bf: np.ndarray | None,
    R: int,
    index: Any,
    gold: Any,
    C: float,
    touched: np.ndarray | None = None,
    aug: float = 0.0,
    pa2: bool = False,
    Wa: Any = None,
    bfa: np.ndarray | None = None,
    t0: float = 0.0,
    mpos: np.ndarray | None = None,
) -> dict[str, float]:
    """One epoch of Alg. 5 over the CSR ``X`` in ``order``, updating ``W`` (and ``bf``) in place.

    ``gold`` is a :class:`sparkhc.models.murawaki.GoldSets` (with ``bf``/``bf_ptr`` when ``bf`` is
    given); ``touched`` (bool, ``(n_features,)``), when given, is set for every feature row of ``W``
    the epoch wrote. ``aug > 0``: cost-augmented updates (``GlobalPA`` ``update="cost_augmented"``,
    ``margin=aug``). ``pa2``: PA-II steps ``tau = l / (||Delta||^2 + 1 / (2C))`` (``GlobalPA``
    ``pa="II"``) instead of PA-I ``min(C, l / ||Delta||^2)``. ``Wa`` (and ``bfa`` with branching
    features), when given: the time-weighted sums of the updates (``GlobalPA`` ``average=True``),
    the update of the ``j``-th example of ``order`` (0-based) weighted by ``t0 + j / len(order)``.
    ``mpos`` (float64, ``(n_edges,)``; with ``aug > 0`` only): the margin of each edge when it is a
    gold edge the prediction misses (``GlobalPA`` ``margin_rare``), ``aug`` staying the margin of a
    predicted edge off the gold tree. Returns the counters of ``GlobalPA.partial_fit``.

    ``W`` (and ``Wa``, of the same pattern) may be scipy CSR matrices with sorted rows (``GlobalPA``
    ``layout="sparse"``): the model restricted to the stored entries (a missing one is a zero
    weight that stays zero). Scores add the stored entries only; an update changes the stored
    entries of the symmetric difference and ``||Delta||^2`` counts only those coordinates: the
    exact PA step of the restricted model. Their data arrays are updated in place (the pattern
    does not change: :func:`csr_union` adds entries before).
    """
    indptr, indices, dataw, data64 = _csr_args(X, W.dtype)
    bfarg, use_bf = _bf_arg(bf, W.dtype)
    avg = Wa is not None
    sparse = hasattr(W, "indptr")  # a scipy CSR W (GlobalPA layout="sparse"): its arrays, in place
    if sparse:
        Wd = Wa_arg = np.zeros((1, 1), dtype=W.dtype)
        if Wa is not None and (Wa.nnz != W.nnz or not np.array_equal(Wa.indptr, W.indptr)
                               or not np.array_equal(Wa.indices, W.indices)):
            raise ValueError("the averaged weights Wa must have the pattern of W")
        if not W.has_sorted_indices:
            raise ValueError("W must have sorted indices")
        wptr: Any = _i64(W.indptr)
        wind: Any = W.indices
        wval: Any = W.data
        wa: Any = Wa.data if Wa is not None else np.zeros(1, dtype=W.dtype)
    else:
        Wd, Wa_arg = W, (Wa if Wa is not None else np.zeros((1, 1), dtype=W.dtype))
        wptr, wind = np.zeros(2, dtype=np.int64), np.zeros(1, dtype=np.int32)
        wval = wa = np.zeros(1, dtype=W.dtype)
    bfa_arg = bfa if (avg and bfa is not None and use_bf) else np.zeros((1, 1), dtype=W.dtype)
    if touched is None:
        touched = np.zeros(W.shape[0], dtype=np.bool_)
    out = np.zeros(6, dtype=np.float64)
    use_mpos = mpos is not None and aug > 0.0
    mpos_arg = np.ascontiguousarray(mpos, dtype=np.float64) if use_mpos else np.zeros(1, dtype=np.float64)
    _gt_epoch_j(
        indptr, indices, dataw, data64, _i64(order), Wd, bfarg, use_bf, int(R),
        _i64(index.first_child), _i64(index.n_children), _i64(index.internal), _i64(index.parent),
        np.ascontiguousarray(index.is_leaf),
        _i64(gold.leaves), _i64(gold.leaves_ptr), _i64(gold.nodes), _i64(gold.nodes_ptr),
        _i64(gold.bf), _i64(gold.bf_ptr), np.ascontiguousarray(gold.phi2, dtype=np.float64), float(C),
        touched, out, float(aug), bool(pa2), avg, Wa_arg, bfa_arg, float(t0), mpos_arg, use_mpos,
        sparse, wptr, wind, wval, wa,
    )
    keys = ("examples", "updates", "loss", "cost", "exact", "tau")
    return {k: float(v) for k, v in zip(keys, out, strict=True)}


def csr_union(A: Any, B: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The union of the patterns of the CSR matrices ``A`` and ``B`` (same shape, sorted rows) as
    ``(indptr, indices, amap)``, ``amap`` the position in it of every entry of ``A``; None when
    ``B``'s entries are all in ``A`` (two passes over both, no other memory than the result)."""
    aptr, bptr = _i64(A.indptr), _i64(B.indptr)
    counts = np.zeros(aptr.size, dtype=np.int64)
    dummy = np.zeros(1, dtype=np.int64)
    _csr_union_j(aptr, A.indices, bptr, B.indices, counts, dummy, dummy, False)
    np.cumsum(counts, out=counts)
    total = int(counts[-1])
    if total == A.nnz:
        return None
    it = np.int32 if max(total, A.shape[1]) < np.iinfo(np.int32).max else np.int64
    uind = np.empty(total, dtype=it)
    amap = np.empty(A.nnz, dtype=np.int64)
    _csr_union_j(aptr, A.indices, bptr, B.indices, counts, uind, amap, True)
    return counts.astype(it), uind, amap


def csr_scores(X: Any, W: Any) -> np.ndarray:
    """``X @ W`` as a dense ``(n_docs, n_edges)`` array for CSR ``X`` and CSR ``W`` (the dtype scipy's
    sparse x dense product gives, and its per-entry order of additions)."""
    dt = np.promote_types(X.dtype, W.dtype)
    xptr, xind, xval, _ = _csr_args(X, dt)
    S = np.zeros((X.shape[0], W.shape[1]), dtype=dt)
    _csr_scores_j(xptr, xind, xval, W.indptr, W.indices, np.ascontiguousarray(W.data, dtype=dt), S)
    return S


def csr_decode(X: Any, W: Any, index: Any, bf: np.ndarray | None, R: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """The exact decoding of each row of the CSR ``X`` under the CSR ``W``: per document its selected
    leaves (ascending node ids, int64) and their edge scores (float32), the same as :func:`csr_scores`
    followed by :func:`dp_batch` and the leaves of the selection (the same sums and DP arithmetic:
    ``promote(X, W)``, at least float32), without the ``(documents x edges)`` score block."""
    dt = np.promote_types(np.promote_types(X.dtype, W.dtype), np.float32)
    xptr, xind, xval, _ = _csr_args(X, dt)
    bfa, use_bf = _bf_arg(None if bf is None else np.asarray(bf, dtype=dt), dt)
    n, n_nodes = X.shape[0], index.n_nodes
    lptr = np.zeros(n + 1, dtype=np.int64)
    leaves, lscore = _csr_decode_j(
        xptr, xind, xval, W.indptr, W.indices, np.ascontiguousarray(W.data, dtype=dt),
        _i64(index.first_child), _i64(index.n_children), _i64(index.internal), bfa, use_bf, int(R), dt.type(0),
        dt.type(-np.inf),
        np.zeros(W.shape[1], dt), np.zeros(n_nodes, dt), np.zeros(n_nodes, np.bool_), np.zeros(n_nodes, np.int64),
        np.zeros(n_nodes, dt), np.zeros(n_nodes, np.bool_), np.zeros(int(R) + 2, np.int64),
        np.zeros(n_nodes, np.int64), lptr, np.zeros(4 * n + 16, np.int64), np.zeros(4 * n + 16, np.float32))
    bounds = lptr.tolist()
    return [(leaves[a:b], lscore[a:b]) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


def binary_epoch(
    X: Any,
    order: np.ndarray,
    W: np.ndarray,
    phi2: np.ndarray,
    pos: np.ndarray,
    pos_ptr: np.ndarray,
    C: float,
    cols: np.ndarray | None = None,
    ycols: np.ndarray | None = None,
    touched: np.ndarray | None = None,
) -> dict[str, float]:
    """One epoch of independent PA-I classifiers (``_PAModel._binary_epoch``), in place."""
    indptr, indices, dataw, data64 = _csr_args(X, W.dtype)
    if touched is None:
        touched = np.zeros(W.shape[0], dtype=np.bool_)
    out = np.zeros(5, dtype=np.float64)
    use_cols = cols is not None
    _binary_epoch_j(
        indptr, indices, dataw, data64, _i64(order), W, np.ascontiguousarray(phi2, dtype=np.float64),
        _i64(cols if use_cols else pos), _i64(pos_ptr), use_cols,
        np.ascontiguousarray(ycols if ycols is not None else np.zeros(1), dtype=np.float64), float(C),
        touched, out,
    )
    keys = ("examples", "updates", "loss", "binary_examples", "examples_updated")
    return {k: float(v) for k, v in zip(keys, out, strict=True)}


def delta_encode(new: np.ndarray, base: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The entries of the 2-D ``new`` that differ from ``base`` (same shape) in the given rows
    (ascending; the other rows are taken as unchanged), as CSR ``(indptr, indices, data)``:
    ``data = float64(new) - float64(base)`` of every entry with ``new != base``, row-major (what
    :func:`sparkhc.spark.deltas.encode` computes with numpy, in one pass per row and no copies)."""
    rows = _i64(rows)
    counts = np.zeros(new.shape[0], dtype=np.int64)
    _delta_count_j(new, base, rows, counts)
    indptr = np.zeros(new.shape[0] + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    nnz = int(indptr[-1])
    idx_dtype = np.int32 if max(nnz, new.shape[1]) < np.iinfo(np.int32).max else np.int64
    indices = np.empty(nnz, dtype=idx_dtype)
    data = np.empty(nnz, dtype=np.float64)
    _delta_fill_j(new, base, rows, indptr, indices, data)
    return indptr.astype(idx_dtype, copy=False), indices, data


def delta_apply(flat: np.ndarray, rows: np.ndarray, parts: list[Any], scale: float, step: int) -> None:
    """``flat[rows] = float64(flat[rows]) + (d_1 + d_2 + ...)[rows] * scale`` in place, ``step``
    rows at a time: the CSR parts ``d_i`` are summed in order into a float64 buffer of the block's
    rows (the arithmetic of :meth:`sparkhc.spark.deltas.DeltaSum.apply`'s numpy path, value for
    value, with no row slices of the parts)."""
    rows = _i64(rows)
    args = [(_i64(d.indptr), np.ascontiguousarray(d.indices), np.ascontiguousarray(d.data, dtype=np.float64))
            for d in parts]
    for a in range(0, rows.size, max(1, int(step))):
        blk = rows[a : a + step]
        buf = np.zeros((blk.size, flat.shape[1]), dtype=np.float64)
        for indptr, indices, data in args:
            _delta_add_j(buf, blk, indptr, indices, data)
        _delta_finish_j(flat, blk, buf, float(scale))
