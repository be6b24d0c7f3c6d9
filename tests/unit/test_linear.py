"""The hinge-loss linear SVM by dual coordinate descent (``sparkhc.linear``).

Expected values: a two-point problem solved by hand (KKT conditions of the dual, written out
below), and scikit-learn's ``LinearSVC(loss="hinge", dual=True)`` (LIBLINEAR, a test-only
dependency) on a slice of real RCV1 documents: same objective within a small tolerance, same
predictions.
"""

from __future__ import annotations

import gzip
import itertools
import json

import numpy as np
import pytest
import scipy.sparse as sp

from sparkhc import kernels
from sparkhc.linear import hinge_svm_dual, hinge_svm_primal, solve_hinge_svm, train_linear_svm
from sparkhc.text.spec import FeatureSpec
from tests.conftest import corpus_dir

# Two points in one dimension, bias feature B = 1: x1 = 2 (y = +1), x2 = 0 (y = -1). With
# x~1 = [2, 1], x~2 = [0, 1] the dual is  max a1 + a2 - 1/2 (4 a1^2 + (a1 - a2)^2),  0 <= a <= C.
# Unconstrained: d/da2 = 1 + (a1 - a2) = 0 and d/da1 = 1 - 4 a1 - (a1 - a2) = 0 give a1 = 1/2,
# a2 = 3/2.  C = 10: that is the optimum, w = 2 a1 = 1, b = a1 - a2 = -1, objective 1 (both
# margins exactly 1).  C = 1: a2 = 1 at its bound (its derivative 1 + a1 - 1 = a1 > 0 points
# out of the box), then 1 - 4 a1 - (a1 - 1) = 0 gives a1 = 0.4: w = 0.8, b = -0.6, primal
# 1/2 (0.64 + 0.36) + hinge(x1) 0 + hinge(x2) 1 - 0.6 = 0.9 = dual 1.4 - 0.5.
TWO_X = sp.csr_matrix(np.array([[2.0], [0.0]]))
TWO_Y = np.array([True, False])


@pytest.mark.parametrize(
    "C, w, b, alpha, objective",
    [(1.0, 0.8, -0.6, (0.4, 1.0), 0.9), (10.0, 1.0, -1.0, (0.5, 1.5), 1.0)],
)
def test_two_points_by_hand(C: float, w: float, b: float, alpha: tuple[float, float], objective: float) -> None:
    sol = solve_hinge_svm(TWO_X, TWO_Y, C, tol=1e-10)
    assert sol.converged
    np.testing.assert_allclose(sol.w, [w], atol=1e-8)
    assert sol.b == pytest.approx(b, abs=1e-8)
    np.testing.assert_allclose(sol.alpha, alpha, atol=1e-8)
    assert hinge_svm_primal(TWO_X, TWO_Y, sol.w, sol.b, C) == pytest.approx(objective, abs=1e-8)
    assert hinge_svm_dual(TWO_X, TWO_Y, sol.alpha) == pytest.approx(objective, abs=1e-8)


def test_without_bias_by_hand() -> None:
    # bias = 0: min 1/2 w^2 + C (max(0, 1 - 2w) + max(0, 1)): the second point's loss is 1 for
    # every w, the first is zero from w = 1/2 on, and 1/2 w^2 - C 2 w falls until w = 2C > 1/2,
    # so w = 1/2 (C = 1): objective 1/8 + 1.
    sol = solve_hinge_svm(TWO_X, TWO_Y, 1.0, bias=0.0, tol=1e-10)
    assert sol.b == 0.0
    np.testing.assert_allclose(sol.w, [0.5], atol=1e-8)
    assert hinge_svm_primal(TWO_X, TWO_Y, sol.w, 0.0, 1.0, bias=0.0) == pytest.approx(1.125, abs=1e-8)


def test_one_class_is_a_constant() -> None:
    X = sp.csr_matrix(np.eye(3))
    for y, b in (([True] * 3, 1.0), ([False] * 3, -1.0), ([], -1.0)):
        Xi = X[: len(y)]
        w, bias, ok = train_linear_svm(Xi, np.array(y, dtype=bool))
        assert ok and bias == b and not w.any() and w.shape == (3,)


def test_bad_labels_are_rejected() -> None:
    with pytest.raises(ValueError, match="-1, \\+1"):
        solve_hinge_svm(TWO_X, np.array([1, 0]))
    with pytest.raises(ValueError, match="shape"):
        solve_hinge_svm(TWO_X, np.array([True]))


def _random_problem(seed: int, n: int = 80, d: int = 30) -> tuple[sp.csr_matrix, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=0.2, random_state=seed, format="csr")
    y = (X @ rng.normal(size=d) + 0.3 * rng.normal(size=n)) > 0
    return sp.csr_matrix(X), y


def test_shrinking_seed_and_compiled_pass_reach_the_same_optimum(monkeypatch: pytest.MonkeyPatch) -> None:
    X, y = _random_problem(3)
    ref = solve_hinge_svm(X, y, 1.0, tol=1e-9)
    again = solve_hinge_svm(X, y, 1.0, tol=1e-9)
    np.testing.assert_array_equal(ref.w, again.w)  # seeded: the same run
    p_ref = hinge_svm_primal(X, y, ref.w, ref.b)
    assert hinge_svm_dual(X, y, ref.alpha) == pytest.approx(p_ref, rel=1e-8)  # zero duality gap
    for sol in (
        solve_hinge_svm(X, y, 1.0, tol=1e-9, shrinking=False),
        solve_hinge_svm(X, y, 1.0, tol=1e-9, seed=7),
    ):
        assert sol.converged
        assert hinge_svm_primal(X, y, sol.w, sol.b) == pytest.approx(p_ref, rel=1e-8)
    monkeypatch.setattr(kernels, "ENABLED", False)  # the plain Python pass: the same arithmetic
    plain = solve_hinge_svm(X, y, 1.0, tol=1e-9)
    assert plain.passes == ref.passes
    np.testing.assert_allclose(plain.w, ref.w, rtol=1e-10, atol=1e-12)


def test_max_iter_reports_non_convergence() -> None:
    X, y = _random_problem(4)
    sol = solve_hinge_svm(X, y, 100.0, tol=1e-12, max_iter=2)
    assert sol.passes == 2 and not sol.converged


def _rcv1_slice(n: int = 600) -> tuple[sp.csr_matrix, list[list[str]]]:
    docs = []
    with gzip.open(corpus_dir("rcv1v2_subset") / "docs.jsonl.gz", "rt", encoding="utf-8") as f:
        for line in itertools.islice(f, n):
            docs.append(json.loads(line))
    spec = FeatureSpec(min_df=2, max_df=0.5, stop_words=True, fit_on=None)
    toks = [spec.tokenize_document(None, d["tokens"]) for d in docs]
    spec = spec.fit_documents(toks[:400])  # vocabulary from the first 400 documents
    off, idx, val, _ = spec.transform_many(toks)
    X = sp.csr_matrix((val, idx, off), shape=(len(docs), spec.n_features))  # float32, as SparseBatch
    return X, [d["labels"] for d in docs]


@pytest.mark.parametrize("label", ["CCAT", "GCAT", "ECAT", "MCAT", "C15", "GDIP"])
def test_equals_liblinear_on_real_documents(label: str) -> None:
    from sklearn.svm import LinearSVC

    X, labels = _rcv1_slice()
    y = np.array([label in labs for labs in labels])
    train, test = slice(0, 400), slice(400, None)
    w, b, ok = train_linear_svm(X[train], y[train], 1.0)
    assert ok
    ref = LinearSVC(C=1.0, loss="hinge", dual=True, tol=1e-4, max_iter=10000, random_state=0)
    ref.fit(X[train], y[train].astype(np.int8))
    w_ref, b_ref = ref.coef_[0], float(ref.intercept_[0])
    p = hinge_svm_primal(X[train], y[train], w, b)
    p_ref = hinge_svm_primal(X[train], y[train], w_ref, b_ref)
    # both stop at the same projected-gradient tolerance: the same optimum up to it
    assert p == pytest.approx(p_ref, rel=1e-4)
    sol = solve_hinge_svm(X[train], y[train], 1.0)
    assert hinge_svm_dual(X[train], y[train], sol.alpha) <= min(p, p_ref) + 1e-9  # weak duality
    assert (p - hinge_svm_dual(X[train], y[train], sol.alpha)) / p < 1e-4
    assert np.linalg.norm(w - w_ref) <= 1e-3 * np.linalg.norm(w_ref)
    for rows in (train, test):
        ours = np.asarray(X[rows] @ w).ravel() + b > 0
        assert np.array_equal(ours, ref.predict(X[rows]) == 1)
