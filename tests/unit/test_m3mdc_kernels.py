"""The compiled loops of the M3MDC W step (``sparkhc.models.jia_zhang.kernels``) against their
references, and the face step on a face with more free multipliers than features (issue 33,
point 5: yeast's rare labels).

Expected values: scipy's CSR products and ``sparkhc.dcd.dcd_pass`` on the same rows as CSR (the dense
layout must give the same bits), the direct face system solved by LAPACK, the hinge loss evaluated
at every breakpoint, and the sub-problem's dual evaluated directly.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from sparkhc.dcd import pass_loop
from sparkhc.models.jia_zhang import kernels as K
from sparkhc.models.jia_zhang import solver as S


def _centred(seed: int, n: int, d: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    X = np.clip(0.5 + 0.1 * rng.normal(size=(n, d)), 0.0, 1.0)
    return np.ascontiguousarray(X - X.mean(axis=0))


def _full_csr(D: np.ndarray) -> sp.csr_matrix:
    n, d = D.shape
    C = sp.csr_matrix((D.ravel(), np.tile(np.arange(d, dtype=np.int32), n),
                       np.arange(0, n * d + 1, d, dtype=np.int32)), shape=(n, d))
    C.sort_indices()
    return C


def test_dense_pass_and_products_give_the_bits_of_the_csr_ones():
    D = _centred(0, 200, 13)
    C = _full_csr(D)
    rng = np.random.default_rng(1)
    y = np.where(rng.random(200) < 0.3, 1.0, -1.0)
    qd = (D * D).sum(axis=1) * 4.0 + 1.0
    order = rng.permutation(200).astype(np.int64)
    outs = []
    for run in ("csr", "dense"):
        alpha = np.zeros(200)
        w = 0.1 * np.ones(13)
        grad = np.empty(200)
        sigma = 0.0
        rets = []
        for _ in range(3):
            ub, dd = np.ones(200), np.zeros(200)
            if run == "csr":
                ret = pass_loop()(C.indptr, C.indices, C.data, 0, y, qd, ub, dd, alpha, w, 4.0, 0.2, 1.5, sigma, order,
                                  grad, np.inf, -np.inf)
            else:
                ret = pass_loop()(C.indptr, C.indices, D.reshape(-1), 13, y, qd, ub, dd, alpha, w, 4.0, 0.2, 1.5, sigma,
                                  order, grad, np.inf, -np.inf)
            sigma = ret[0]
            rets.append(ret)
        outs.append((alpha, w, grad, rets))
    (a1, w1, g1, r1), (a2, w2, g2, r2) = outs
    assert np.array_equal(a1, a2) and np.array_equal(w1, w2) and np.array_equal(g1, g2) and r1 == r2
    assert np.any((a1 > 0) & (a1 < 1))  # the passes did move
    rmatvec = K.dense_products()
    v, u = rng.normal(size=13), rng.normal(size=200)
    assert np.array_equal(rmatvec(np.ascontiguousarray(D.T), v), np.asarray(C @ v).ravel())
    assert np.array_equal(rmatvec(D, u), np.asarray(C.T @ u).ravel())


@pytest.mark.parametrize("nf,d", [(40, 5), (200, 12), (30, 29)])
def test_thin_face_system_solves_the_direct_one(nf, d):
    """More free multipliers than features: the d x d (Woodbury) solve gives the direct system's
    solution (LAPACK on the |F| x |F| matrix) to rounding, and a curvature that is >= 0 (the direct
    δᵀ K δ computed from a near-singular K can come out negative, which rejected the step)."""
    rng = np.random.default_rng(nf)
    XF = rng.normal(size=(nf, d))
    r = rng.normal(size=nf)
    thin, direct = np.empty(nf), np.empty(nf)
    quad = K.face_solve_thin_loop()(XF, r, 0.7, thin)
    S._face_solve_numpy(XF, r, 0.7, direct)
    assert np.linalg.norm(thin - direct) <= 1e-4 * np.linalg.norm(direct)
    assert abs(thin.sum()) <= 1e-9 * np.abs(thin).sum()
    assert quad >= 0.0 and quad == pytest.approx(float(np.sum((XF.T @ thin) ** 2)) / 0.7, rel=1e-4)


def test_optimal_bias_is_the_midpoint_of_the_minimisers_over_the_breakpoints():
    rng = np.random.default_rng(3)
    for _ in range(300):
        n = int(rng.integers(2, 40))
        f = np.round(rng.normal(size=n), int(rng.integers(0, 3)))  # rounded: ties among breakpoints
        y = np.where(rng.random(n) < 0.4, 1.0, -1.0)
        y[0], y[1] = 1.0, -1.0
        t = np.unique(y - f)
        loss = np.array([np.maximum(0.0, 1.0 - y * (f + b)).sum() for b in t])
        best = t[np.isclose(loss, loss.min(), rtol=0, atol=1e-9)]
        assert S.optimal_bias(f, y) == pytest.approx(0.5 * (best.min() + best.max()), abs=1e-12)


def _dual(X: np.ndarray, y: np.ndarray, alpha: np.ndarray, center: np.ndarray, scale: float) -> float:
    g = X.T @ (alpha * y)
    return float(np.sum(alpha * (1.0 - y * (X @ center))) - 0.5 * float(g @ g) / scale)


def test_face_step_on_a_face_wider_than_the_features_raises_the_dual_past_the_first_bound(monkeypatch):
    """A rare class (20 of 300) at a mixed point (as the Jacobi steps of the W step leave it) where
    every multiplier of the other class is free (280 free, 6 features: the face system is
    singular): the projected path raises the dual far more than the step to the first bound
    (1.92 against 1.2e-4 here), fixes more multipliers, and keeps the box and ``Σ α y = 0``."""
    X = _centred(4, 300, 6)
    rng = np.random.default_rng(5)
    y = -np.ones(300)
    y[rng.choice(300, 20, replace=False)] = 1.0
    alpha = np.where(y > 0, 1.0, 20.0 / 280.0)
    center = 0.2 * rng.normal(size=6)
    neg = np.flatnonzero(y < 0)
    alpha[neg] = rng.uniform(0.0, 1.0, neg.size)
    alpha[neg] *= 20.0 / alpha[neg].sum()
    scale = 0.1
    w = center + X.T @ (alpha * y) / scale
    f = X @ w
    C = _full_csr(X)
    out = S._face_step(C, y, alpha, f, scale, X)
    monkeypatch.setattr(S, "FACE_PATH_STEPS", 0)
    first = S._face_step(C, y, alpha, f, scale, X)
    assert out is not None and first is not None
    for a in (out, first):
        assert a.min() >= 0.0 and a.max() <= 1.0 and abs(float(a @ y)) <= 1e-9
    d0 = _dual(X, y, alpha, center, scale)
    assert _dual(X, y, out, center, scale) - d0 > 1000.0 * (_dual(X, y, first, center, scale) - d0) > 0.0
    n_free = [int(((a > 0) & (a < 1)).sum()) for a in (alpha, first, out)]
    assert n_free[2] < n_free[1] < n_free[0]


def test_compiled_and_plain_python_fits_agree_within_their_certified_gaps(monkeypatch):
    """M3MDC at the paper's defaults with DCD on shifted dense rows with a rare class (the yeast
    shape): the fit with the compiled loops and the one with the plain-Python loops (numba off)
    reach the same objective within the sum of their certified duality gaps, and predict alike."""
    from sparkhc import kernels

    rng = np.random.default_rng(7)
    X = np.clip(0.5 + 0.1 * rng.normal(size=(160, 8)), 0.0, 1.0)
    s = (X - 0.5) @ rng.normal(size=8)
    Y = np.column_stack([(s > np.quantile(s, 0.9)).astype(np.int64), (X[:, 0] > 0.5).astype(np.int64),
                         (s + 0.05 * rng.normal(size=160) > 0).astype(np.int64)])
    fits = []
    for enabled in (True, False):
        monkeypatch.setattr(kernels, "ENABLED", enabled)
        fits.append(S.M3MDC(w_solver="dcd").fit(X, Y))
    (a, b) = fits
    ha, hb = a.history_[-1], b.history_[-1]
    for h in (ha, hb):
        assert h["duality_gap"] <= 1e-6 * max(abs(h["objective_after_w"]), 1.0)
    assert abs(ha["objective_after_c"] - hb["objective_after_c"]) <= ha["duality_gap"] + hb["duality_gap"]
    assert np.array_equal(a.predict(X), b.predict(X))
    assert a.capped_sub_problems_ == b.capped_sub_problems_ == 0
