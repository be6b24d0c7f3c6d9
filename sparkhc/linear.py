"""Linear SVMs by dual coordinate descent (Hsieh, Chang, Lin, Keerthi, Sundararajan, ICML 2008).

:func:`solve_hinge_svm`: the L1-loss (hinge) linear SVM with a regularised bias, exactly the problem
of LIBLINEAR's ``-s 3`` solver (``solve_l2r_l1l2_svc``) and of scikit-learn's
``LinearSVC(loss="hinge", dual=True)``::

    min_{w, b}  ½ (‖w‖² + (b / B)²) + C Σ_j max(0, 1 − y_j (⟨w, x_j⟩ + b))

(``B`` the bias feature's value, LIBLINEAR's ``-B`` / scikit-learn's ``intercept_scaling``, 1 by
default: the bias is the weight of a constant feature ``B`` and is regularised like the others).
It is :func:`sparkhc.dcd.solve_dcd` with ``loss = "l1"``: the one DCD core of the product (seeded
random order, LIBLINEAR's shrinking, its stopping rule ``max PG − min PG <= tol`` with both
extremes within ``tol`` on a pass over every example; ``tol = 1e-4`` is scikit-learn's
``LinearSVC`` default, LIBLINEAR's own command line defaults to 0.1).
:class:`sparkhc.models.cesa_bianchi.HSVM` trains each node with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from sparkhc.dcd import signs, solve_dcd

__all__ = [
    "SVMSolution",
    "solve_hinge_svm",
    "train_linear_svm",
    "hinge_svm_primal",
    "hinge_svm_dual",
]


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
    r = solve_dcd(_csr64(X), y, float(C), loss="l1", bias=float(bias), tol=tol, max_passes=max_iter, seed=seed,
                  shrinking=shrinking)
    return SVMSolution(r.w, r.b, r.alpha, r.passes, r.converged)


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
    ys = signs(y, Xc.shape[0])
    f = np.asarray(Xc @ np.asarray(w, dtype=np.float64)).ravel() + b
    reg = float(np.dot(w, w)) + ((b / bias) ** 2 if bias else 0.0)
    return 0.5 * reg + float(C) * float(np.maximum(0.0, 1.0 - ys * f).sum())


def hinge_svm_dual(X: Any, y: Any, alpha: np.ndarray, bias: float = 1.0) -> float:
    """The dual value ``Σ α − ½ ‖Σ_j α_j y_j [x_j, B]‖²`` (a lower bound of the primal optimum
    for any ``0 ≤ α ≤ C``)."""
    Xc = _csr64(X)
    ay = np.asarray(alpha, dtype=np.float64) * signs(y, Xc.shape[0])
    w = np.asarray(Xc.T @ ay).ravel()
    wb = float(bias) * float(ay.sum())
    return float(np.sum(alpha)) - 0.5 * (float(w @ w) + wb * wb)
