"""Compiled loops of the M3MDC W step (numba when installed, the same code as plain Python otherwise).

Here rather than in :mod:`sparkhc.kernels`: they serve only :mod:`sparkhc.models.jia_zhang.solver`.
The DCD passes of the W step are :mod:`sparkhc.dcd`'s (one pass for CSR and dense rows).
Written element by element (no BLAS), so that every thread and process runs the same operations
in the same order and the driver, thread and Spark fits stay equal bit for bit.

* :func:`face_solve_thin`: the face step's system (``solver._face_step``) through the ``d × d``
  matrix ``X_Fᵀ X_F`` when the face has more free multipliers than features (``|F| > d``: dense
  numeric data, where ``X_F X_Fᵀ`` is singular and ``|F|³`` is the cost of the direct solve).
* :func:`dense_rmatvec`: ``Xᵀ v`` (and ``X w`` from ``Xᵀ``) in the order of scipy's CSR products.
* :func:`face_path`: the projected search along a face step's direction (``solver._face_path``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["cholesky_shifted", "face_solve_thin", "dense_rmatvec", "face_solve_thin_loop", "dense_products",
           "face_path", "face_path_loop"]


def _compile(fn: Any) -> Any:
    from sparkhc import kernels

    return kernels._njit(fn) if kernels.HAVE_NUMBA else fn


def _cholesky_shifted(A, shift, L):  # type: ignore[no-untyped-def]
    """The lower Cholesky factor of ``A + shift I`` (the lower triangle of ``A`` read) into ``L``;
    False when a pivot is not positive. Element by element (left-looking: every entry's sum over
    ``k`` in order), for the face systems of :func:`face_solve_thin` and ``solver._face_solve_scalar``."""
    m = A.shape[0]
    for j in range(m):
        acc = A[j, j] + shift
        for k in range(j):
            acc -= L[j, k] * L[j, k]
        if not acc > 0.0:
            return False
        L[j, j] = np.sqrt(acc)
        for i in range(j + 1, m):
            acc = A[i, j]
            for k in range(j):
                acc -= L[i, k] * L[j, k]
            L[i, j] = acc / L[j, j]
    return True


#: :func:`_cholesky_shifted`, compiled when numba is installed (called from the compiled solvers)
cholesky_shifted = _compile(_cholesky_shifted)


def face_solve_thin(XF, r, scale, delta):  # type: ignore[no-untyped-def]
    """The system of ``solver._face_solve_scalar`` — ``(K/s + ε I) δ + b 1 = r``, ``Σ δ = 0`` with
    ``K = X_F X_Fᵀ`` and ``ε = 1e-10 · tr(K/s)/|F|`` — by the Woodbury identity
    ``(Z Zᵀ/s + ε I)⁻¹ v = (v − Z (ε s I + Zᵀ Z)⁻¹ Zᵀ v) / ε`` (``Z = X_F``): a Cholesky factor of
    order ``d`` instead of ``|F|``, ``O(|F| d²)`` instead of ``O(|F|² d + |F|³)``. The same
    solution in exact arithmetic; the face step accepts it only when its exactly computed gain is
    positive, so rounding can cost a step, never feasibility. Writes ``delta``; returns
    ``δᵀ K δ / s`` (−1 when the factorisation fails)."""
    nf, d = XF.shape
    H = np.zeros((d, d))  # the lower triangle of X_Fᵀ X_F, row by row of X_F (contiguous reads)
    tr = 0.0
    for i in range(nf):
        for a in range(d):
            xa = XF[i, a]
            tr += xa * xa
            for b in range(a + 1):
                H[a, b] += xa * XF[i, b]
    eps = 1e-10 * max(tr / scale / nf, 1e-300)
    L = np.zeros((d, d))
    if not cholesky_shifted(H, eps * scale, L):
        return -1.0
    U = np.zeros((2, d))  # X_Fᵀ r and X_Fᵀ 1
    for i in range(nf):
        ri = r[i]
        for a in range(d):
            U[0, a] += XF[i, a] * ri
            U[1, a] += XF[i, a]
    for which in range(2):  # z = (X_Fᵀ X_F + ε s I)⁻¹ u: L z' = u, Lᵀ z = z'
        u = U[which]
        for a in range(d):
            acc = u[a]
            for k in range(a):
                acc -= L[a, k] * u[k]
            u[a] = acc / L[a, a]
        for a in range(d - 1, -1, -1):
            acc = u[a]
            for k in range(a + 1, d):
                acc -= L[k, a] * u[k]
            u[a] = acc / L[a, a]
    p = np.empty(nf)  # A⁻¹ r
    q = np.empty(nf)  # A⁻¹ 1
    sp_ = 0.0
    sq_ = 0.0
    for i in range(nf):
        ap = 0.0
        aq = 0.0
        for a in range(d):
            ap += XF[i, a] * U[0, a]
            aq += XF[i, a] * U[1, a]
        p[i] = (r[i] - ap) / eps
        q[i] = (1.0 - aq) / eps
        sp_ += p[i]
        sq_ += q[i]
    if sq_ == 0.0:
        return -1.0
    b = sp_ / sq_
    g = np.zeros(d)  # X_Fᵀ δ
    for i in range(nf):
        delta[i] = p[i] - b * q[i]
        for a in range(d):
            g[a] += XF[i, a] * delta[i]
    quad = 0.0
    for a in range(d):
        quad += g[a] * g[a]
    return quad / scale


def dense_rmatvec(X, v):  # type: ignore[no-untyped-def]
    """``Xᵀ v`` for a C-ordered ``n × d`` ``X``: each column's sum over the rows in order, the
    columns side by side (the sums of scipy's product of the transposed CSR matrix with every
    entry stored). ``X w`` is ``dense_rmatvec(Xᵀ, w)`` with a C-ordered ``Xᵀ``: each row's sum over
    the columns in order (the sums of scipy's CSR product)."""
    n, d = X.shape
    out = np.zeros(d)
    for t in range(n):
        vt = v[t]
        for c in range(d):
            out[c] += X[t, c] * vt
    return out


def face_path(XF, yF, fF, a, d_alpha, t, t_end, offset, scale, gain, max_steps, eq_tol, best):  # type: ignore[no-untyped-def]
    """The search of ``solver._face_path`` over ``t = 2 t, 4 t, ...`` (at most ``max_steps``, up to
    ``t_end``): each candidate ``clip(a + t Δα)`` with the equality's residue (``offset``: the sum
    ``Σ α y`` off the face) spread over its free multipliers as ``solver._restore_equality`` does,
    skipped when the residue stays above ``eq_tol``, scored by its exact dual gain; writes the best
    one beating ``gain`` into ``best``. Returns ``(its gain or gain, whether one did)``."""
    nf, d = XF.shape
    cand = np.empty(nf)
    free = np.zeros(nf, dtype=np.bool_)
    z = np.empty(d)
    found = False
    for _ in range(max_steps):
        if t >= t_end:
            break
        t = min(2.0 * t, t_end)
        r = offset
        n_free = 0
        for i in range(nf):
            c = a[i] + t * d_alpha[i]
            c = min(max(c, 0.0), 1.0)
            cand[i] = c
            r += c * yF[i]
            free[i] = 0.0 < c < 1.0
            if free[i]:
                n_free += 1
        if r != 0.0 and n_free > 0:
            share = r / n_free
            r = offset
            for i in range(nf):
                if free[i]:
                    cand[i] = min(max(cand[i] - yF[i] * share, 0.0), 1.0)
                r += cand[i] * yF[i]
        if abs(r) > eq_tol:
            continue
        lin = 0.0
        for c in range(d):
            z[c] = 0.0
        for i in range(nf):
            da = cand[i] - a[i]
            lin += da * (1.0 - yF[i] * fF[i])
            v = da * yF[i]
            for c in range(d):
                z[c] += XF[i, c] * v
        quad = 0.0
        for c in range(d):
            quad += z[c] * z[c]
        g = lin - 0.5 * quad / scale
        if g > gain:
            gain = g
            found = True
            for i in range(nf):
                best[i] = cand[i]
    return gain, found


_face_solve_thin_compiled = _compile(face_solve_thin)
_dense_rmatvec_compiled = _compile(dense_rmatvec)
_face_path_compiled = _compile(face_path)


def _available() -> bool:
    from sparkhc import kernels

    return kernels.available()


def face_solve_thin_loop() -> Any:
    """:func:`face_solve_thin`, compiled when :func:`sparkhc.kernels.available`."""
    return _face_solve_thin_compiled if _available() else face_solve_thin


def dense_products() -> Any:
    """:func:`dense_rmatvec`, compiled when :func:`sparkhc.kernels.available`."""
    return _dense_rmatvec_compiled if _available() else dense_rmatvec


def face_path_loop() -> Any:
    """:func:`face_path`, compiled when :func:`sparkhc.kernels.available`."""
    return _face_path_compiled if _available() else face_path
