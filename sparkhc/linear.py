"""Linear SVMs by dual coordinate descent (Hsieh, Chang, Lin, Keerthi, Sundararajan, ICML 2008).

One home for the dual coordinate descent (DCD) pass used by the product: :func:`dcd_pass` runs one
pass over a list of examples of a sparse CSR matrix in ``O(nnz)``, updating the dual multipliers and
the primal weight vector in place, with LIBLINEAR's shrinking test. Two solvers drive it:

* :func:`solve_hinge_svm` (here): the L1-loss (hinge) linear SVM with a regularised bias, exactly the
  problem of LIBLINEAR's ``-s 3`` solver (``solve_l2r_l1l2_svc``) and of scikit-learn's
  ``LinearSVC(loss="hinge", dual=True)``::

      min_{w, b}  ½ (‖w‖² + (b / B)²) + C Σ_j max(0, 1 − y_j (⟨w, x_j⟩ + b))

  (``B`` the bias feature's value, LIBLINEAR's ``-B`` / scikit-learn's ``intercept_scaling``, 1 by
  default: the bias is the weight of a constant feature ``B`` and is regularised like the others).
  Its dual ``max_{0 ≤ α ≤ C} Σ α − ½ ‖Σ_j α_j y_j x̃_j‖²`` (``x̃_j = [x_j, B]``) is solved one
  coordinate at a time in a seeded random order. The solver stops when the projected gradients
  ``PG`` of a pass over *all* examples satisfy ``max(max PG, 0) − min(min PG, 0) <= tol`` (with
  shrinking, a pass that meets it on the active set is followed by a pass over all examples).
  That is LIBLINEAR's rule ``max PG − min PG <= eps`` whenever the pass has projected gradients of
  both signs (any real data set); LIBLINEAR's rule alone also stops when every projected gradient
  has the same nonzero value (two examples, both gradients ``-0.0096``: measured), which this one
  does not. ``tol = 1e-4`` is scikit-learn's ``LinearSVC`` default (it hands ``tol`` to LIBLINEAR
  as ``eps``; LIBLINEAR's own command line defaults to 0.1).
  :class:`sparkhc.models.cesa_bianchi.HSVM` trains each node with it.
* ``sparkhc.models.jia_zhang.solver._solve_pair_dcd``: M3MDC's centred pair sub-problems with an
  unregularised bias kept by the method of multipliers (the ``beta`` / ``rho`` arguments).

In the pass the multipliers are scaled to ``[0, 1]`` (``α = C a``) and ``w = c + inv_s Σ a_j y_j x_j``;
the bias is ``beta + rho σ`` with ``σ = Σ a_j y_j``. The hinge SVM is the case ``c = 0``,
``inv_s = C``, ``beta = 0``, ``rho = C B²`` (the bias feature's part of ``w̃``), and the diagonal
``qd_j = C (‖x_j‖² + B²)``: each coordinate step is then LIBLINEAR's
``α_j ← min(max(α_j − G_j / Q_jj, 0), C)`` with ``G_j = y_j (⟨w, x_j⟩ + b) − 1``.

The pass runs numba-compiled when :func:`sparkhc.kernels.available` (``pip install sparkhc[fast]``)
and as plain Python otherwise (the same code, element by element).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from sparkhc import kernels

__all__ = [
    "SVMSolution",
    "dcd_pass",
    "dcd_loop",
    "shrink",
    "solve_hinge_svm",
    "train_linear_svm",
    "hinge_svm_primal",
    "hinge_svm_dual",
]


def dcd_step(f, yt, a, qdt, beta, rho, sigma, pg_hi, pg_lo, vmax, vmin, pgmax, pgmin):  # type: ignore[no-untyped-def]
    """The coordinate step of :func:`dcd_pass` for one example with score ``f = x . w``, label
    ``yt``, multiplier ``a`` and ``qdt = Q_tt``: ``(g, new a, vmax, vmin, pgmax, pgmin)``, the
    gradient, the clipped new multiplier (``a`` itself when the example is skipped or its projected
    gradient is 0) and the running extremes with this example's ``v = yt - f`` and projected
    gradient. Shared by every pass over any row layout (``sparkhc.models.jia_zhang.kernels``)."""
    v = yt - f
    if yt > 0:
        if a < 1.0 and v > vmax:
            vmax = v
        if a > 0.0 and v < vmin:
            vmin = v
    else:
        if a > 0.0 and v > vmax:
            vmax = v
        if a < 1.0 and v < vmin:
            vmin = v
    g = yt * (f + beta + rho * sigma) - 1.0
    pg = g
    if a <= 0.0:
        if g > pg_hi:
            return g, a, vmax, vmin, pgmax, pgmin
        if g > 0.0:
            pg = 0.0
    elif a >= 1.0:
        if g < pg_lo:
            return g, a, vmax, vmin, pgmax, pgmin
        if g < 0.0:
            pg = 0.0
    if pg > pgmax:
        pgmax = pg
    if pg < pgmin:
        pgmin = pg
    if pg == 0.0:
        return g, a, vmax, vmin, pgmax, pgmin
    na = a - g / qdt
    if na < 0.0:
        na = 0.0
    elif na > 1.0:
        na = 1.0
    return g, na, vmax, vmin, pgmax, pgmin


#: :func:`dcd_step` as the passes call it (compiled when numba is installed)
_dcd_step = kernels._njit(dcd_step)


def dcd_pass(indptr, indices, data, y, qd, alpha, w, inv_s, beta, rho, sigma, order, grad, pg_hi, pg_lo):  # type: ignore[no-untyped-def]
    """One pass of dual coordinate descent over the examples ``order`` (rows of the CSR arrays;
    updates ``alpha`` and ``w`` in place, ``grad[k]``: the gradient of ``order[k]`` before its
    update). Multipliers at a bound with a gradient beyond ``pg_hi`` / ``pg_lo`` (pointing out of
    the box) are skipped, as in LIBLINEAR. Returns ``(σ, max_{I_up} v, min_{I_low} v, max PG, min PG)``
    with ``v`` read before each update (:func:`dcd_step`). Written element by element for numba
    (runs uncompiled too)."""
    vmax = -np.inf
    vmin = np.inf
    pgmax = -np.inf
    pgmin = np.inf
    for k in range(order.shape[0]):
        t = order[k]
        lo = indptr[t]
        hi = indptr[t + 1]
        f = 0.0
        for q in range(lo, hi):
            f += data[q] * w[indices[q]]
        yt = y[t]
        a = alpha[t]
        g, na, vmax, vmin, pgmax, pgmin = _dcd_step(f, yt, a, qd[t], beta, rho, sigma, pg_hi, pg_lo,
                                                    vmax, vmin, pgmax, pgmin)
        grad[k] = g
        d = na - a
        if d != 0.0:
            alpha[t] = na
            sigma += d * yt
            c = d * yt * inv_s
            for q in range(lo, hi):
                w[indices[q]] += c * data[q]
    return sigma, vmax, vmin, pgmax, pgmin


def shrink(
    order: np.ndarray, alpha: np.ndarray, grad: np.ndarray, pg_hi: float, pg_lo: float, pgmax: float, pgmin: float
) -> tuple[np.ndarray, float, float]:
    """LIBLINEAR's shrinking after a :func:`dcd_pass` over ``order`` run with thresholds ``pg_hi`` /
    ``pg_lo`` that returned ``pgmax`` / ``pgmin``: the examples that stay active (those the pass did
    not skip: not at a bound with a gradient pointing out of the box beyond the threshold) and the
    thresholds of the next pass (this pass's extreme projected gradients; +-inf when not of the
    right sign)."""
    a = alpha[order]
    g = grad[: order.size]
    keep = ~(((a <= 0.0) & (g > pg_hi)) | ((a >= 1.0) & (g < pg_lo)))
    return order[keep], (pgmax if pgmax > 0 else np.inf), (pgmin if pgmin < 0 else -np.inf)


def _compile() -> Any:
    return kernels._njit(dcd_pass) if kernels.HAVE_NUMBA else dcd_pass


_dcd_pass_compiled = _compile()


def dcd_loop() -> Any:
    """The pass to run now: compiled when :func:`sparkhc.kernels.available`, else :func:`dcd_pass`."""
    return _dcd_pass_compiled if kernels.available() else dcd_pass


@dataclass(frozen=True)
class SVMSolution:
    """A solved hinge SVM: weights ``w`` (d,), bias ``b``, dual multipliers ``alpha`` in ``[0, C]``,
    the number of passes and whether the stopping rule was met within ``max_iter`` passes."""

    w: np.ndarray
    b: float
    alpha: np.ndarray
    passes: int
    converged: bool


def _csr64(X: Any) -> sp.csr_matrix:
    Xc = sp.csr_matrix(X, dtype=np.float64)
    if not Xc.has_canonical_format:
        Xc = Xc.copy()
        Xc.sum_duplicates()
    return Xc


def _signs(y: Any, n: int) -> np.ndarray:
    y = np.asarray(y)
    if y.shape != (n,):
        raise ValueError(f"y must have shape ({n},); got {y.shape}")
    if y.dtype == bool:
        return np.where(y, 1.0, -1.0)
    yf = y.astype(np.float64)
    if not np.all((yf == 1.0) | (yf == -1.0)):
        raise ValueError("y must be bool or in {-1, +1}")
    return yf


def solve_hinge_svm(
    X: Any,
    y: Any,
    C: float = 1.0,
    *,
    bias: float = 1.0,
    tol: float = 1e-4,
    max_iter: int = 10000,
    seed: int = 0,
    shrinking: bool = True,
) -> SVMSolution:
    """Solve the L1-loss linear SVM with a regularised bias (module docstring) by DCD.

    ``X`` (n, d) sparse or dense (made float64 CSR, never densified), ``y`` bool or ±1 (n,).
    ``bias`` is the value ``B`` of the constant bias feature (0: no bias, ``b = 0``). ``tol`` the
    projected-gradient stopping tolerance, ``max_iter`` the cap on passes, ``seed`` the seed of the
    random order of every pass, ``shrinking`` LIBLINEAR's shrinking of bounded multipliers.
    """
    if not C > 0:
        raise ValueError(f"C must be positive; got {C}")
    if bias < 0:
        raise ValueError(f"bias must be >= 0; got {bias}")
    Xc = _csr64(X)
    n, d = Xc.shape
    ys = _signs(y, n)
    C = float(C)
    rho = C * float(bias) ** 2
    sq = np.asarray(Xc.multiply(Xc).sum(axis=1), dtype=np.float64).ravel()
    qd = C * sq + rho
    a = np.zeros(n)  # multipliers scaled to [0, 1]: alpha = C a
    w = np.zeros(d)
    sigma = 0.0
    grad = np.empty(n)
    loop = dcd_loop()
    rng = np.random.default_rng(seed)
    # an all-zero row without a bias feature: its gradient is -1 whatever the other multipliers,
    # so its multiplier sits at C from the start and moves nothing (and no step divides by 0)
    empty = qd <= 0.0
    a[empty] = 1.0
    everything = np.flatnonzero(~empty).astype(np.int64)
    active = everything
    pg_hi, pg_lo = np.inf, -np.inf
    converged = False
    passes = 0
    for passes in range(1, int(max_iter) + 1):  # noqa: B007 - the count is returned
        order = rng.permutation(active)
        sigma, _, _, pgmax, pgmin = loop(
            Xc.indptr, Xc.indices, Xc.data, ys, qd, a, w, C, 0.0, rho, sigma, order, grad, pg_hi, pg_lo
        )
        if max(pgmax, 0.0) - min(pgmin, 0.0) <= tol:
            if active.size == everything.size:
                converged = True
                break
            active = everything  # converged on the active set: check on every example
            pg_hi, pg_lo = np.inf, -np.inf
            continue
        if shrinking:
            active, pg_hi, pg_lo = shrink(order, a, grad, pg_hi, pg_lo, pgmax, pgmin)
    ay = a * ys
    w = C * np.asarray(Xc.T @ ay, dtype=np.float64).ravel()  # without the drift of the incremental updates
    b = rho * float(ay.sum())
    return SVMSolution(w, b, C * a, passes, converged)


def train_linear_svm(
    X: Any, y: Any, C: float = 1.0, seed: int = 0, max_iter: int = 10000, tol: float = 1e-4
) -> tuple[np.ndarray, float, bool]:
    """A hinge-loss linear SVM with a regularised bias (``B = 1``): ``(w, b, converged)``.

    :func:`solve_hinge_svm`; labels ``y`` are bool (True = positive). When the examples are all of
    one class (or there are none) the SVM is the constant ``w = 0``, ``b = +1`` / ``-1`` (``-1``
    for no examples): LIBLINEAR would need two classes.
    """
    yb = np.asarray(y, dtype=bool)
    d = int(X.shape[1])
    if yb.size == 0 or yb.all() or not yb.any():
        return np.zeros(d, dtype=np.float64), (1.0 if yb.size and yb.all() else -1.0), True
    sol = solve_hinge_svm(X, yb, C, tol=tol, max_iter=max_iter, seed=seed)
    return sol.w, sol.b, sol.converged


def hinge_svm_primal(X: Any, y: Any, w: np.ndarray, b: float, C: float = 1.0, bias: float = 1.0) -> float:
    """``½ (‖w‖² + (b / B)²) + C Σ max(0, 1 − y (⟨w, x⟩ + b))`` (``B = bias``; with 0, ``b`` must be 0)."""
    Xc = _csr64(X)
    ys = _signs(y, Xc.shape[0])
    f = np.asarray(Xc @ np.asarray(w, dtype=np.float64)).ravel() + b
    reg = float(np.dot(w, w)) + ((b / bias) ** 2 if bias else 0.0)
    return 0.5 * reg + float(C) * float(np.maximum(0.0, 1.0 - ys * f).sum())


def hinge_svm_dual(X: Any, y: Any, alpha: np.ndarray, bias: float = 1.0) -> float:
    """The dual value ``Σ α − ½ ‖Σ_j α_j y_j [x_j, B]‖²`` (a lower bound of the primal optimum
    for any ``0 ≤ α ≤ C``)."""
    Xc = _csr64(X)
    ay = np.asarray(alpha, dtype=np.float64) * _signs(y, Xc.shape[0])
    w = np.asarray(Xc.T @ ay).ravel()
    wb = float(bias) * float(ay.sum())
    return float(np.sum(alpha)) - 0.5 * (float(w @ w) + wb * wb)
