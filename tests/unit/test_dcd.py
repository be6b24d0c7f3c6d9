"""The dual coordinate-descent core (``sparkhc.dcd``) against LIBLINEAR and hand-solved problems.

Expected values: scikit-learn's ``LinearSVC(dual=True)`` (LIBLINEAR, a test-only dependency) with
the same loss, ``C``, bias and instance weights, on dense numeric data (a seeded problem, and
yeast's features when the corpus is present) and on sparse text (RCV1 documents when present):
the same weights within tolerance at a tight tolerance, the same objective within the stopping
tolerance at LinearSVC's default; one-point problems solved by hand; the projected-gradient gap
recomputed with numpy.
"""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest
import scipy.sparse as sp

from sparkhc import kernels
from sparkhc.dcd import Rows, projected_gap, solve_dcd
from tests.conftest import corpus_dir


def primal(X, y, w, b, C, loss, bias=1.0):  # type: ignore[no-untyped-def]
    """``½ (‖w‖² + (b / B)²) + Σ C_j ℓ(1 − y_j (⟨w, x_j⟩ + b))``, ``ℓ`` the hinge or its square."""
    f = np.asarray(X @ w).ravel() + b
    h = np.maximum(0.0, 1.0 - y * f)
    loss_sum = float(np.sum(np.asarray(C) * (h if loss == "l1" else h * h)))
    return 0.5 * (float(w @ w) + ((b / bias) ** 2 if bias else 0.0)) + loss_sum


def _dense_problem(seed: int, n: int = 400, d: int = 20) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.random((n, d))  # min-max like numeric features, all positive
    s = (X - 0.5) @ rng.normal(size=d)
    y = np.where(s + 0.1 * rng.normal(size=n) > np.quantile(s, 0.7), 1.0, -1.0)  # unbalanced, near-separable
    return X, y


def _liblinear(X, y, C, loss, tol, sample_weight=None):  # type: ignore[no-untyped-def]
    from sklearn.svm import LinearSVC

    ref = LinearSVC(C=C, loss="hinge" if loss == "l1" else "squared_hinge", dual=True, tol=tol, max_iter=1_000_000,
                    random_state=0)
    ref.fit(X, y, sample_weight=sample_weight)
    return ref.coef_[0], float(ref.intercept_[0])


def _yeast(n: int = 800) -> tuple[np.ndarray, np.ndarray]:
    path = corpus_dir("meka_multilabel_numeric") / "yeast.jsonl.gz"
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        recs = [json.loads(line) for line, _ in zip(fh, range(n), strict=False)]
    X = np.array([r["x"] for r in recs], dtype=np.float64)
    X = (X - X.min(axis=0)) / np.where(np.ptp(X, axis=0) > 0, np.ptp(X, axis=0), 1.0)
    y = np.array([1.0 if "Class1" in r["labels"] else -1.0 for r in recs])
    return X, y


def _rcv1(n: int = 600) -> tuple[sp.csr_matrix, np.ndarray]:
    from tests.unit.test_linear import _rcv1_slice

    X, labels = _rcv1_slice(n)
    return X, np.array([1.0 if "GCAT" in labs else -1.0 for labs in labels])


DATA = {"dense": lambda: _dense_problem(0), "yeast": _yeast, "rcv1": _rcv1}


@pytest.mark.parametrize("loss", ["l1", "l2"])
@pytest.mark.parametrize("data", sorted(DATA))
def test_equals_liblinear_weights_and_objective(data: str, loss: str) -> None:
    X, y = DATA[data]()
    C = 1.0
    # tight: the same optimum, so the same weights (the dual may have many optima, w and b are unique)
    sol = solve_dcd(X, y, C, loss=loss, tol=1e-9, max_passes=100_000)
    w_ref, b_ref = _liblinear(X, y, C, loss, 1e-9)
    assert sol.converged and not sol.capped and sol.gap <= 1e-9
    scale = np.linalg.norm(np.append(w_ref, b_ref))
    assert np.linalg.norm(np.append(sol.w, sol.b) - np.append(w_ref, b_ref)) <= 1e-4 * scale
    # LinearSVC's default tolerance: both stop at the same projected-gradient gap
    loose = solve_dcd(X, y, C, loss=loss)
    w_l, b_l = _liblinear(X, y, C, loss, 1e-4)
    p_opt = primal(X, y, sol.w, sol.b, C, loss)
    for p in (primal(X, y, loose.w, loose.b, C, loss), primal(X, y, w_l, b_l, C, loss)):
        assert p_opt <= p * (1 + 1e-12) and p <= p_opt * (1 + 1e-3)


def test_per_example_c_equals_liblinear_instance_weights() -> None:
    X, y = _dense_problem(1, n=300, d=8)
    weights = np.random.default_rng(2).uniform(0.2, 3.0, size=y.size)
    for loss in ("l1", "l2"):
        sol = solve_dcd(X, y, 2.0 * weights, loss=loss, tol=1e-9, max_passes=100_000)
        w_ref, b_ref = _liblinear(X, y, 2.0, loss, 1e-9, sample_weight=weights)
        assert np.allclose(sol.w, w_ref, rtol=1e-4, atol=1e-5) and sol.b == pytest.approx(b_ref, rel=1e-4, abs=1e-5)
        if loss == "l1":
            assert np.all(sol.alpha <= 2.0 * weights)  # the box of each example


def test_one_point_by_hand() -> None:
    # one point x = 1, y = +1, no bias. L1: min ½ w² + C max(0, 1 − w): w = min(C, 1) (α = w);
    # L2: min ½ w² + C (1 − w)²: w = 2C / (1 + 2C), α = 2C (1 − w)
    X = np.array([[1.0]])
    for C in (0.25, 4.0):
        s1 = solve_dcd(X, [1], C, bias=0.0, tol=1e-12)
        assert s1.w[0] == pytest.approx(min(C, 1.0)) and s1.b == 0.0
        s2 = solve_dcd(X, [1], C, loss="l2", bias=0.0, tol=1e-12)
        w = 2 * C / (1 + 2 * C)
        assert s2.w[0] == pytest.approx(w) and s2.alpha[0] == pytest.approx(2 * C * (1 - w))


def test_warm_start_from_the_solution_stops_in_one_pass_and_from_a_partial_one_sooner() -> None:
    X, y = _dense_problem(3)
    cold = solve_dcd(X, y, 1.0, tol=1e-6, max_passes=100_000)
    again = solve_dcd(X, y, 1.0, tol=1e-6, alpha0=cold.alpha)
    assert again.passes <= 2 and again.converged  # one pass (a second when the first ran on the full set)
    part = solve_dcd(X, y, 1.0, tol=1e-6, max_passes=max(cold.passes // 3, 1))
    warm = solve_dcd(X, y, 1.0, tol=1e-6, alpha0=part.alpha, max_passes=100_000)
    assert warm.converged and warm.passes < cold.passes
    assert primal(X, y, warm.w, warm.b, 1.0, "l1") == pytest.approx(primal(X, y, cold.w, cold.b, 1.0, "l1"), rel=1e-5)


def test_a_cap_is_reported_with_the_gap_it_left() -> None:
    X, y = _dense_problem(4)
    sol = solve_dcd(X, y, 100.0, tol=1e-10, max_passes=3)
    assert sol.capped and not sol.converged and sol.passes == 3
    # the gap recomputed independently: the projected gradient of every example at the returned point
    g = y * (X @ sol.w + sol.b) - 1.0
    pg = np.where(sol.alpha <= 0, np.minimum(g, 0), np.where(sol.alpha >= 100.0, np.maximum(g, 0), g))
    assert sol.gap == pytest.approx(pg.max() - pg.min(), rel=1e-9) and sol.gap > 1e-10
    assert projected_gap(Rows.of(X), y, sol.alpha, sol.w, sol.b, np.full(y.size, 100.0), np.zeros(y.size)) == sol.gap


def test_relative_stop_is_relative_to_the_first_pass() -> None:
    X, y = _dense_problem(5)
    sol = solve_dcd(X, y, 1.0, tol=1e-3, stop="relative", max_passes=100_000)
    assert sol.converged and sol.gap <= 1e-3 * sol.first_gap
    absolute = solve_dcd(X, y, 1.0, tol=1e-3 * sol.first_gap, max_passes=100_000)
    assert absolute.passes == sol.passes  # the same threshold, the same seeded run


def test_dense_csr_and_plain_python_give_the_same_solve(monkeypatch: pytest.MonkeyPatch) -> None:
    X, y = _dense_problem(6, n=150, d=6)
    X[X < 0.3] = 0.0  # some zeros, so that CSR stores fewer entries than the dense rows
    dense = solve_dcd(X, y, 1.0, loss="l2", tol=1e-8, max_passes=100_000)
    csr = solve_dcd(sp.csr_matrix(X), y, 1.0, loss="l2", tol=1e-8, max_passes=100_000)
    assert dense.passes == csr.passes
    np.testing.assert_allclose(dense.alpha, csr.alpha, rtol=1e-12, atol=1e-14)
    monkeypatch.setattr(kernels, "ENABLED", False)
    plain = solve_dcd(X, y, 1.0, loss="l2", tol=1e-8, max_passes=100_000)
    assert plain.passes == dense.passes
    np.testing.assert_allclose(plain.alpha, dense.alpha, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize(
    "kwargs, message",
    [({"loss": "l3"}, "loss must be"), ({"C": 0.0}, "example 0 has C = 0"), ({"C": np.ones(3)}, "shape"),
     ({"tol": 0.0}, "tol must be"), ({"stop": "never"}, "stop must be"), ({"alpha0": -np.ones(4)}, "alpha0")],
)
def test_bad_arguments_are_rejected(kwargs: dict, message: str) -> None:
    X = np.eye(4)
    with pytest.raises(ValueError, match=message):
        solve_dcd(X, [1, -1, 1, -1], **kwargs)
    with pytest.raises(ValueError, match="y must be"):
        solve_dcd(X, [1, 0, 1, 0])
