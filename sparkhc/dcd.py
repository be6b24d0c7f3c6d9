"""One dual coordinate-descent (DCD) core for linear SVMs (Hsieh, Chang, Lin, Keerthi, Sundararajan,
ICML 2008; LIBLINEAR's ``solve_l2r_l1l2_svc``).

Every linear SVM of the product that is solved by dual coordinate descent runs through this module:
the hinge SVM of :mod:`sparkhc.linear` (H-SVM's nodes), binary relevance and M3MDC's W step
(:mod:`sparkhc.models.jia_zhang.solver`). One coordinate step (:func:`dcd_step`), one pass over
a list of examples (:func:`dcd_pass`, rows stored as CSR or as one dense C-ordered array) and one
driver of the passes (:class:`DualCD`: random order, shrinking, the projected-gradient gap) are
shared by all of them.

The problem
-----------
:func:`solve_dcd` solves LIBLINEAR's dual problem (``-s 3``: L1 loss, ``-s 1``: L2 loss)::

    min_α  ½ αᵀ (Q + D) α − Σ α,   0 ≤ α_j ≤ U_j,   Q_jk = y_j y_k ⟨x̃_j, x̃_k⟩,  x̃_j = [x_j, B]

with ``U_j = C_j``, ``D = 0`` for the L1 (hinge) loss and ``U_j = ∞``, ``D_jj = 1 / (2 C_j)`` for
the L2 (squared hinge) loss: the dual of ``min_{w, b} ½ (‖w‖² + (b / B)²) + Σ_j C_j ℓ(1 − y_j (⟨w, x_j⟩ + b))``
(``B``: the bias feature's value, LIBLINEAR's ``-B`` and scikit-learn's ``intercept_scaling``; 0
drops the bias; ``C_j``: one ``C`` for all or one per example, LIBLINEAR's instance weights times
``C``). ``w = Σ α_j y_j x_j`` and ``b = B² Σ α_j y_j``.

The passes
----------
Each pass visits the active examples in a seeded random order and sets
``α_j ← min(max(α_j − G_j / (Q_jj + D_jj), 0), U_j)`` with ``G_j = y_j (⟨w, x_j⟩ + b) − 1 + D_jj α_j``,
updating ``w`` (and ``b``) in place, so a pass costs ``O(nnz)``. Shrinking as LIBLINEAR: an
example at a bound whose gradient points out of the box by more than the previous pass's extreme
projected gradient leaves the active set; when the active set meets the stopping rule every
example returns for a pass before the solver may stop.

The stopping rule and the cap
-----------------------------
``PG_j`` is the projected gradient (``G_j``, or 0 at a bound the gradient pushes against). The
*gap* of a pass is ``max(max PG, 0) − min(min PG, 0)``: 0 at the optimum. A pass over every
example whose gap is at most the threshold stops the solver. The threshold is ``tol`` (``stop =
"absolute"``: LIBLINEAR's rule ``max PG − min PG ≤ ε, |max PG| ≤ ε, |min PG| ≤ ε``, which is the
same condition) or ``tol`` times the gap of the first pass (``stop = "relative"``; or times
``gap_ref`` when given, e.g. a warm start's first gap). ``max_passes`` caps the passes: a solve
that reaches it returns ``capped = True`` and, as ``gap``, the projected-gradient gap over every
example at the point it returns (:func:`projected_gap`), instead of stopping silently.

Warm starts: ``alpha0`` (any point of the box) starts the passes from ``w = Σ α0_j y_j x_j``.

Generalised pass (M3MDC)
------------------------
:func:`dcd_pass` also serves the centred sub-problems of M3MDC's W step
(``sparkhc.models.jia_zhang.solver._solve_pair_dcd``): there ``w = c + s⁻¹ Σ a_j y_j x_j`` with a
centre ``c`` and multipliers scaled to ``[0, 1]`` (``inv_s = s⁻¹``), and the bias is
``beta + rho σ`` (``σ = Σ a_j y_j``: the method of multipliers for an unregularised bias). The
LIBLINEAR problem is the case ``c = 0``, ``inv_s = 1``, ``beta = 0``, ``rho = B²``. Those sub-problems
drive :class:`DualCD` with their own stopping rule (the KKT violation of the equality-constrained
problem, or its certified duality gap) and their face steps between passes.

Every loop is written element by element for numba and runs compiled when
:func:`sparkhc.kernels.available` (``pip install sparkhc[fast]``), as plain Python otherwise (the
same code, the same numbers).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from sparkhc import kernels

__all__ = ["DCDResult", "DualCD", "Rows", "dcd_step", "dcd_pass", "signs", "pass_loop", "projected_gap", "shrink", "solve_dcd", "LOSSES",
           "STOPS"]

#: ``loss``: ``"l1"`` (hinge, LIBLINEAR ``-s 3``) or ``"l2"`` (squared hinge, ``-s 1``)
LOSSES = ("l1", "l2")
#: ``stop``: the gap against ``tol`` itself or against ``tol`` times the first pass's gap
STOPS = ("absolute", "relative")


def dcd_step(f, yt, a, ub, dd, qdt, beta, rho, sigma, pg_hi, pg_lo, vmax, vmin, pgmax, pgmin):  # type: ignore[no-untyped-def]
    """The coordinate step of one example with score ``f = ⟨x, w⟩``, label ``yt``, multiplier
    ``a`` in ``[0, ub]``, diagonal ``dd`` (``D_jj``) and curvature ``qdt = Q_jj + D_jj``:
    ``(g, new a, vmax, vmin, pgmax, pgmin)``: the gradient, the clipped new multiplier (``a``
    itself when the example is skipped or its projected gradient is 0) and the running extremes
    of ``v = yt − f`` over the sets ``I_up`` / ``I_low`` of an equality-constrained problem and of
    the projected gradient. An example at a bound whose gradient exceeds ``pg_hi`` (at 0) or is
    below ``pg_lo`` (at ``ub``) is skipped (shrinking)."""
    v = yt - f
    if yt > 0:
        if a < ub and v > vmax:
            vmax = v
        if a > 0.0 and v < vmin:
            vmin = v
    else:
        if a > 0.0 and v > vmax:
            vmax = v
        if a < ub and v < vmin:
            vmin = v
    g = yt * (f + beta + rho * sigma) - 1.0 + dd * a
    pg = g
    if a <= 0.0:
        if g > pg_hi:
            return g, a, vmax, vmin, pgmax, pgmin
        if g > 0.0:
            pg = 0.0
    elif a >= ub:
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
    elif na > ub:
        na = ub
    return g, na, vmax, vmin, pgmax, pgmin


_dcd_step = kernels._njit(dcd_step)


def dcd_pass(indptr, indices, data, width, y, qd, ub, dd, alpha, w, inv_s, beta, rho, sigma, order, grad, pg_hi, pg_lo):  # type: ignore[no-untyped-def]
    """One pass of dual coordinate descent over the examples ``order``, in place on ``alpha`` and
    ``w`` (``grad[k]``: the gradient of ``order[k]`` before its step).

    Rows: CSR arrays ``indptr, indices, data`` (``width = 0``), or, with ``width = d > 0``, a
    dense C-ordered ``n × d`` array flattened into ``data`` (row ``t`` is ``data[t d:(t + 1) d]``;
    ``indptr`` and ``indices`` unused): the same sums in the same order without CSR's index
    gather. Per example ``ub`` the upper bound, ``dd`` the diagonal ``D_jj``, ``qd`` the curvature;
    ``w += inv_s Δa y x`` and ``σ += Δa y`` (the bias ``beta + rho σ``). Returns
    ``(σ, max_{I_up} v, min_{I_low} v, max PG, min PG)`` (:func:`dcd_step`)."""
    vmax = -np.inf
    vmin = np.inf
    pgmax = -np.inf
    pgmin = np.inf
    for k in range(order.shape[0]):
        t = order[k]
        f = 0.0
        if width > 0:
            lo = t * width
            hi = lo + width
            for q in range(lo, hi):
                f += data[q] * w[q - lo]
        else:
            lo = indptr[t]
            hi = indptr[t + 1]
            for q in range(lo, hi):
                f += data[q] * w[indices[q]]
        yt = y[t]
        a = alpha[t]
        g, na, vmax, vmin, pgmax, pgmin = _dcd_step(f, yt, a, ub[t], dd[t], qd[t], beta, rho, sigma, pg_hi, pg_lo,
                                                    vmax, vmin, pgmax, pgmin)
        grad[k] = g
        dlt = na - a
        if dlt != 0.0:
            alpha[t] = na
            sigma += dlt * yt
            c = dlt * yt * inv_s
            if width > 0:
                for q in range(lo, hi):
                    w[q - lo] += c * data[q]
            else:
                for q in range(lo, hi):
                    w[indices[q]] += c * data[q]
    return sigma, vmax, vmin, pgmax, pgmin


_dcd_pass_compiled = kernels._njit(dcd_pass) if kernels.HAVE_NUMBA else dcd_pass


def pass_loop() -> Any:
    """The pass to run now: compiled when :func:`sparkhc.kernels.available`, else :func:`dcd_pass`."""
    return _dcd_pass_compiled if kernels.available() else dcd_pass


def shrink(order: np.ndarray, alpha: np.ndarray, ub: np.ndarray, grad: np.ndarray, pg_hi: float, pg_lo: float,
           pgmax: float, pgmin: float) -> tuple[np.ndarray, float, float]:
    """LIBLINEAR's shrinking after a :func:`dcd_pass` over ``order`` run with thresholds ``pg_hi`` /
    ``pg_lo`` that returned ``pgmax`` / ``pgmin``: the examples that stay active (those the pass did
    not skip) and the thresholds of the next pass (this pass's extreme projected gradients; ±inf
    when not of the right sign)."""
    a = alpha[order]
    g = grad[: order.size]
    keep = ~(((a <= 0.0) & (g > pg_hi)) | ((a >= ub[order]) & (g < pg_lo)))
    return order[keep], (pgmax if pgmax > 0 else np.inf), (pgmin if pgmin < 0 else -np.inf)


_EMPTY = np.zeros(1, dtype=np.int64)


@dataclass(frozen=True)
class Rows:
    """The rows a :class:`DualCD` passes over: CSR arrays, or a dense C-ordered array (``width > 0``)."""

    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray
    width: int
    shape: tuple[int, int]

    @classmethod
    def of(cls, X: Any) -> Rows:
        """``X`` as float64 rows: a dense array stays dense (C order, no copy when it already is),
        anything sparse becomes canonical CSR (sorted, no duplicates)."""
        if sp.issparse(X):
            c = sp.csr_matrix(X, dtype=np.float64)
            if not c.has_canonical_format:
                c = c.copy()
                c.sum_duplicates()
            return cls(c.indptr, c.indices, c.data, 0, (int(c.shape[0]), int(c.shape[1])))
        A = np.ascontiguousarray(X, dtype=np.float64)
        if A.ndim != 2:
            raise ValueError(f"X must be 2-D; got shape {A.shape}")
        n, d = A.shape
        if d == 0:  # no feature: CSR of empty rows (a width of 0 means CSR)
            return cls(np.zeros(n + 1, dtype=np.int64), _EMPTY[:0], np.zeros(0), 0, (n, 0))
        return cls(_EMPTY, _EMPTY, A.reshape(-1), d, (n, d))

    def sq_norms(self) -> np.ndarray:
        """``‖x_j‖²`` of every row."""
        n, d = self.shape
        if self.width:
            A = self.data.reshape(n, d)
            return np.einsum("ij,ij->i", A, A)
        X = sp.csr_matrix((self.data, self.indices, self.indptr), shape=self.shape)
        return np.asarray(X.multiply(X).sum(axis=1), dtype=np.float64).ravel()

    def rmatvec(self, v: np.ndarray) -> np.ndarray:
        """``Xᵀ v``."""
        n, d = self.shape
        if self.width:
            return self.data.reshape(n, d).T @ v  # type: ignore[no-any-return]
        X = sp.csr_matrix((self.data, self.indices, self.indptr), shape=self.shape)
        return np.asarray(X.T @ v, dtype=np.float64).ravel()

    def matvec(self, w: np.ndarray) -> np.ndarray:
        """``X w``."""
        n, d = self.shape
        if self.width:
            return self.data.reshape(n, d) @ w  # type: ignore[no-any-return]
        X = sp.csr_matrix((self.data, self.indices, self.indptr), shape=self.shape)
        return np.asarray(X @ w, dtype=np.float64).ravel()


@dataclass
class PassStats:
    """What one :meth:`DualCD.run_pass` saw: the extremes of ``v`` (equality-constrained KKT) and the
    projected-gradient gap ``max(max PG, 0) − min(min PG, 0)``, and whether it ran over every example."""

    vmax: float
    vmin: float
    pgmax: float
    pgmin: float
    full: bool

    @property
    def gap(self) -> float:
        if self.pgmax == -np.inf:  # every example skipped (or none): nothing violated
            return 0.0
        return max(self.pgmax, 0.0) - min(self.pgmin, 0.0)


class DualCD:
    """The state of one DCD solve: multipliers ``alpha``, the maintained ``w`` and ``sigma``, the
    active set and the shrinking thresholds. :meth:`run_pass` runs one pass over the active set in
    a random order (``seed``) and shrinks; :meth:`unshrink` brings every example back. The caller
    owns the outer loop (when to stop; :func:`solve_dcd` is LIBLINEAR's)."""

    def __init__(self, rows: Rows, y: np.ndarray, qd: np.ndarray, ub: np.ndarray, dd: np.ndarray,
                 alpha: np.ndarray, w: np.ndarray, *, inv_s: float = 1.0, beta: float = 0.0, rho: float = 0.0,
                 seed: int = 0, shrinking: bool = True, active: np.ndarray | None = None) -> None:
        self.rows, self.y, self.qd, self.ub, self.dd = rows, y, qd, ub, dd
        self.alpha, self.w = alpha, w
        self.inv_s, self.beta, self.rho = float(inv_s), float(beta), float(rho)
        self.sigma = float(alpha @ y)
        self.shrinking = shrinking
        self.everything = np.arange(y.size, dtype=np.int64) if active is None else active
        self.active = self.everything
        self.pg_hi, self.pg_lo = np.inf, -np.inf
        self.grad = np.empty(y.size)
        self.rng = np.random.default_rng(seed)
        self.loop = pass_loop()
        self.passes = 0

    @property
    def shrunk(self) -> bool:
        return self.active.size < self.everything.size

    def run_pass(self) -> PassStats:
        """One pass over the active examples in a fresh random order (examples at a bound whose
        gradient points out of the box beyond the thresholds are skipped)."""
        order = self.rng.permutation(self.active)
        full = not self.shrunk
        r = self.rows
        self.sigma, vmax, vmin, pgmax, pgmin = self.loop(
            r.indptr, r.indices, r.data, r.width, self.y, self.qd, self.ub, self.dd, self.alpha, self.w,
            self.inv_s, self.beta, self.rho, self.sigma, order, self.grad, self.pg_hi, self.pg_lo)
        self.passes += 1
        self._last = (order, pgmax, pgmin)
        return PassStats(vmax, vmin, pgmax, pgmin, full)

    def shrink(self) -> None:
        """With ``shrinking``: the examples the last pass skipped leave the active set, and its
        extreme projected gradients become the thresholds of the next pass (:func:`shrink`)."""
        if self.shrinking:
            order, pgmax, pgmin = self._last
            self.active, self.pg_hi, self.pg_lo = shrink(order, self.alpha, self.ub, self.grad, self.pg_hi,
                                                         self.pg_lo, pgmax, pgmin)

    def unshrink(self) -> None:
        """Every example active again, no shrinking threshold."""
        self.active = self.everything
        self.pg_hi, self.pg_lo = np.inf, -np.inf

    def move_to(self, alpha: np.ndarray, w: np.ndarray) -> None:
        """Continue from another point ``alpha`` (``w``: its maintained weights); the active set stays."""
        self.alpha, self.w = alpha, w
        self.sigma = float(alpha @ self.y)

    def reset(self, alpha: np.ndarray, w: np.ndarray, beta: float) -> None:
        """Continue from another point with the bias offset ``beta``, every example active."""
        self.move_to(alpha, w)
        self.beta = float(beta)
        self.unshrink()


@dataclass(frozen=True)
class DCDResult:
    """A DCD solve (:func:`solve_dcd`): weights ``w`` (d,), bias ``b``, multipliers ``alpha`` (n,)
    in ``[0, U_j]``, the number of passes, the projected-gradient gap of the last pass (``gap``;
    of the first pass: ``first_gap``), whether the stopping rule held (``converged``) and whether
    the solve stopped at ``max_passes`` instead (``capped``)."""

    w: np.ndarray
    b: float
    alpha: np.ndarray
    passes: int
    gap: float
    first_gap: float
    converged: bool
    capped: bool


def signs(y: Any, n: int) -> np.ndarray:
    """Labels ``y`` (bool, or in ``{-1, +1}``) of ``n`` examples as float64 ``±1``."""
    y = np.asarray(y)
    if y.shape != (n,):
        raise ValueError(f"y must have shape ({n},); got {y.shape}")
    if y.dtype == bool:
        return np.where(y, 1.0, -1.0)
    yf = y.astype(np.float64)
    if not np.all((yf == 1.0) | (yf == -1.0)):
        raise ValueError("y must be bool or in {-1, +1}")
    return yf


def _per_example(C: Any, n: int) -> np.ndarray:
    c = np.asarray(C, dtype=np.float64)
    if c.ndim == 0:
        c = np.full(n, float(c))
    if c.shape != (n,):
        raise ValueError(f"C must be a scalar or of shape ({n},); got {c.shape}")
    if not np.all(np.isfinite(c) & (c > 0)):
        bad = int(np.argmax(~(np.isfinite(c) & (c > 0))))
        raise ValueError(f"C must be positive and finite; example {bad} has C = {c[bad]}")
    return c


def projected_gap(rows: Rows, y: np.ndarray, alpha: np.ndarray, w: np.ndarray, b: float, ub: np.ndarray,
                  dd: np.ndarray) -> float:
    """The projected-gradient gap ``max(max PG, 0) − min(min PG, 0)`` over every example at
    ``(alpha, w, b)`` (no step taken): what a cap leaves."""
    if y.size == 0:
        return 0.0
    g = y * (rows.matvec(w) + b) - 1.0 + dd * alpha
    pg = np.where(alpha <= 0.0, np.minimum(g, 0.0), np.where(alpha >= ub, np.maximum(g, 0.0), g))
    return float(max(pg.max(), 0.0) - min(pg.min(), 0.0))


def solve_dcd(
    X: Any,
    y: Any,
    C: Any = 1.0,
    *,
    loss: str = "l1",
    bias: float = 1.0,
    tol: float = 1e-4,
    max_passes: int = 1000,
    stop: str = "absolute",
    gap_ref: float | None = None,
    alpha0: np.ndarray | None = None,
    seed: int = 0,
    shrinking: bool = True,
) -> DCDResult:
    """Solve the L1- or L2-loss linear SVM of the module docstring by dual coordinate descent.

    ``X`` (n, d): CSR (any scipy sparse, made float64 CSR, never densified) or dense (passed as a
    dense array). ``y``: labels in ``{-1, +1}`` (or bool). ``C``: a scalar or one per example
    (> 0). ``loss``: ``"l1"`` or ``"l2"``. ``bias``: the bias feature ``B`` (0: no bias).
    ``tol``, ``stop``, ``gap_ref``: the stopping rule (module docstring; ``tol = 1e-4`` and
    ``"absolute"`` are scikit-learn ``LinearSVC``'s). ``max_passes``: the cap (LinearSVC's
    ``max_iter``, 1000). ``alpha0``: a warm start in the box. ``seed``: the random order of the
    passes. Returns a :class:`DCDResult` (``w``, ``b``, ``alpha``, ``passes``, ``gap``,
    ``capped``).
    """
    if loss not in LOSSES:
        raise ValueError(f"loss must be one of {list(LOSSES)}; got {loss!r}")
    if stop not in STOPS:
        raise ValueError(f"stop must be one of {list(STOPS)}; got {stop!r}")
    if not (bias >= 0 and np.isfinite(bias)):
        raise ValueError(f"bias must be >= 0; got {bias}")
    if not tol > 0:
        raise ValueError(f"tol must be positive; got {tol}")
    if int(max_passes) < 1:
        raise ValueError(f"max_passes must be >= 1; got {max_passes}")
    rows = Rows.of(X)
    n, d = rows.shape
    ys = signs(y, n)
    c = _per_example(C, n)
    rho = float(bias) ** 2
    if loss == "l1":
        ub, dd = c, np.zeros(n)
    else:
        ub, dd = np.full(n, np.inf), 0.5 / c
    qd = rows.sq_norms() + rho + dd
    if alpha0 is None:
        alpha = np.zeros(n)
    else:
        alpha = np.array(alpha0, dtype=np.float64)
        if alpha.shape != (n,) or np.any(alpha < 0) or np.any(alpha > ub):
            raise ValueError(f"alpha0 must be of shape ({n},) within [0, U] (U = C for the L1 loss, inf for L2)")
    # an all-zero row without bias under the L1 loss: its gradient is -1 whatever the others, so
    # its multiplier sits at C from the start and moves nothing (and no step divides by 0)
    empty = qd <= 0.0
    alpha[empty] = ub[empty]
    w = rows.rmatvec(alpha * ys)
    cd = DualCD(rows, ys, qd, ub, dd, alpha, w, rho=rho, seed=seed, shrinking=shrinking,
                active=np.flatnonzero(~empty).astype(np.int64))
    first = np.nan
    gap = np.inf
    converged = False
    threshold = float(tol) if stop == "absolute" else np.nan
    if stop == "relative" and gap_ref is not None:
        threshold = float(tol) * float(gap_ref)
    while cd.passes < int(max_passes):
        st = cd.run_pass()
        if st.full:
            gap = st.gap
            if np.isnan(first):
                first = gap
                if np.isnan(threshold):
                    threshold = float(tol) * first
        if st.gap <= threshold:
            if st.full:
                converged = True
                break
            cd.unshrink()  # converged on the active set: check on every example
        else:
            cd.shrink()
    ay = alpha * ys
    w = rows.rmatvec(ay)  # without the drift of the incremental updates
    b = rho * float(ay.sum())
    if not converged:  # the gap the cap left, over every example
        gap = projected_gap(rows, ys, alpha, w, b, ub, dd)
    return DCDResult(w, b, alpha, cd.passes, float(gap), float(first), converged, not converged)
