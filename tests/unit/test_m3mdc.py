"""M3MDC (Jia & Zhang 2020), the BR baseline, the MDC metrics and the MDC data loader.

Expected values come from hand computation, closed forms computed here with plain numpy
(singular values, explicit inverses), scikit-learn's LIBSVM and scipy's SLSQP — not from the code
under test.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys

import numpy as np
import pytest
from scipy.optimize import minimize
from sklearn.svm import SVC

from sparkhc.errors import ConfigError, InputDataError, NotFittedError
from sparkhc.models.jia_zhang.data import FeatureScaler, encode_targets, load_mdc
from sparkhc.models.jia_zhang.solver import (
    M3MDC,
    BinaryRelevanceSVM,
    mdc_metrics,
    optimal_bias,
    ovo_pairs,
    update_c,
)
from tests.conftest import corpus_dir

LAM1, LAM2 = 0.1, 0.001


def _random_mdc(seed: int, n: int = 60, d: int = 5, n_classes: tuple[int, ...] = (3, 2)):
    """Features from a random linear model so that the class spaces are related but noisy."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    Y = np.empty((n, len(n_classes)), dtype=np.int64)
    shared = X @ rng.normal(size=d)
    for j, k in enumerate(n_classes):
        s = shared + 0.7 * (X @ rng.normal(size=d)) + 0.5 * rng.normal(size=n)
        Y[:, j] = np.digitize(s, np.quantile(s, np.linspace(0, 1, k + 1)[1:-1]))
    return X, Y


def _random_trace_one_psd(rng: np.random.Generator, m: int) -> np.ndarray:
    R = rng.normal(size=(m, m))
    A = R @ R.T + 1e-3 * np.eye(m)
    return A / np.trace(A)


# ----------------------------------------------------------------------------------------------
# metrics
# ----------------------------------------------------------------------------------------------


def test_mdc_metrics_hand_computed():
    gold = np.array([[0, 1, 2], [1, 1, 1], [0, 0, 0], [2, 2, 2]])
    pred = np.array([[0, 1, 2], [1, 0, 1], [1, 1, 0], [0, 0, 0]])
    # spaces right per example: 3, 2, 1, 0 of q = 3
    got = mdc_metrics(gold, pred)
    assert got["hamming_score"] == pytest.approx(6 / 12)
    assert got["exact_match"] == pytest.approx(1 / 4)
    assert got["sub_exact_match"] == pytest.approx(2 / 4)
    with pytest.raises(InputDataError):
        mdc_metrics(gold, pred[:, :2])


# ----------------------------------------------------------------------------------------------
# the C step
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(6, 4), (3, 5)])  # full column rank, and rank-deficient (m > d)
def test_c_update_trace_psd_and_minimises_the_coupling_term(shape):
    rng = np.random.default_rng(1)
    W = rng.normal(size=shape)
    m = shape[1]
    eps = 1e-6
    C, C_inv = update_c(W, eps)
    assert np.trace(C) == pytest.approx(1.0, abs=1e-12)
    assert np.allclose(C, C.T)
    assert np.linalg.eigvalsh(C).min() >= -1e-10
    assert np.allclose(C @ C_inv, np.eye(m), atol=1e-6)

    def term(Cm: np.ndarray) -> float:  # tr((WᵀW + eps I) C⁻¹), explicit inverse
        return float(np.trace((W.T @ W + eps * np.eye(m)) @ np.linalg.inv(Cm)))

    # closed-form minimum (tr A^{1/2})^2 from the singular values of [W; sqrt(eps) I]
    sv = np.linalg.svd(np.vstack([W, np.sqrt(eps) * np.eye(m)]), compute_uv=False)
    assert term(C) == pytest.approx(float(sv.sum()) ** 2, rel=1e-9)
    assert term(C) <= term(np.eye(m) / m) + 1e-12  # the initial C of the paper
    for _ in range(50):
        assert term(C) <= term(_random_trace_one_psd(rng, m)) + 1e-12
    # also for the unperturbed term tr(W C⁻¹ Wᵀ) versus random feasible C's
    for _ in range(50):
        Cr = _random_trace_one_psd(rng, m)
        assert np.trace(W @ np.linalg.inv(C) @ W.T) <= np.trace(W @ np.linalg.inv(Cr) @ W.T) + 1e-9


def test_c_update_lowers_the_objective_for_fixed_w_inside_fit():
    X, Y = _random_mdc(3)
    model = M3MDC(max_iter=6, tol=0.0).fit(X, Y)
    for h in model.history_:
        assert h["objective_after_c"] <= h["objective_after_w"] * (1 + 1e-12)


# ----------------------------------------------------------------------------------------------
# W step: BR equivalence, LIBSVM, KKT / generic QP
# ----------------------------------------------------------------------------------------------


def test_lambda2_zero_equals_br():
    X, Y = _random_mdc(4)
    br = BinaryRelevanceSVM(lambda1=LAM1).fit(X, Y)
    m0 = M3MDC(lambda1=LAM1, lambda2=0.0, tol=0.0, max_iter=4).fit(X, Y)
    np.testing.assert_allclose(m0.W_, br.W_, atol=1e-8, rtol=0)
    np.testing.assert_allclose(m0.b_, br.b_, atol=1e-8, rtol=0)
    np.testing.assert_array_equal(m0.predict(X), br.predict(X))


@pytest.mark.parametrize(("w_solver", "slack"), [("smo", 1e-10), ("dcd", 1e-8)])
def test_br_pairs_equal_libsvm_linear_svc(w_solver, slack):
    """Each BR pair solves Σξ + (λ1/2)‖w‖² = LIBSVM C-SVC with C = 1/λ1 (scaled by λ1).

    DCD stops on its duality gap (here 1e-12 relative, reached down to the KKT tolerance 1e-10),
    SMO on the KKT tolerance: our primal is not worse than LIBSVM's by more than ``slack``."""
    X, Y = _random_mdc(5, n=50, d=3)
    br = BinaryRelevanceSVM(lambda1=LAM1, w_solver=w_solver, gap_tol=1e-12).fit(X, Y)
    for i, (j, a, b) in enumerate(ovo_pairs([3, 2])):
        rows = (Y[:, j] == a) | (Y[:, j] == b)
        y = np.where(Y[rows, j] == a, 1, -1)
        svc = SVC(kernel="linear", C=1.0 / LAM1, tol=1e-12, shrinking=False).fit(X[rows], y)
        # sklearn: positive decision values mean classes_[1] = +1. LIBSVM stops at its own
        # tolerance, so: the same solution to 1e-4, and our primal objective is not worse.
        np.testing.assert_allclose(br.W_[:, i], svc.coef_.ravel(), atol=1e-4)
        assert br.b_[i] == pytest.approx(float(svc.intercept_[0]), abs=1e-4)

        def primal(w, b0, rows=rows, y=y):
            return np.maximum(0, 1 - y * (X[rows] @ w + b0)).sum() + 0.5 * LAM1 * w @ w

        ref = primal(svc.coef_.ravel(), svc.intercept_[0])
        assert primal(br.W_[:, i], br.b_[i]) <= ref + slack * max(1.0, abs(ref))


def _toy():
    """Tiny separable 2-D problem: space 0 = three clusters, space 1 = upper vs lower half."""
    centers = np.array([[0.0, 0.0], [3.0, 0.5], [1.0, 3.0]])
    offsets = np.array([[-0.3, -0.4], [0.3, 0.4], [-0.2, 0.5], [0.35, -0.45]])
    X = np.vstack([c + offsets for c in centers])
    Y = np.column_stack([np.repeat([0, 1, 2], 4), (X[:, 1] > 0.4).astype(np.int64)])
    return X, Y


def _primal_qp_by_slsqp(X, Y, n_classes, C, lam1, lam2):
    """The W-step QP with slacks, solved by a generic constrained optimiser (independent oracle)."""
    pairs = ovo_pairs(n_classes)
    d, m = X.shape[1], len(pairs)
    rows, ys = [], []
    for j, a, b in pairs:
        r = np.flatnonzero((Y[:, j] == a) | (Y[:, j] == b))
        rows.append(r)
        ys.append(np.where(Y[r, j] == a, 1.0, -1.0))
    n_xi = sum(len(r) for r in rows)
    Q = lam1 * np.eye(m) + lam2 * np.linalg.inv(C)
    H = np.kron(Q, np.eye(d))  # vec(W) column-major: w_1, w_2, ...
    nw = d * m

    def split(z):
        return z[:nw], z[nw : nw + m], z[nw + m :]

    def fun(z):
        w, _, xi = split(z)
        return xi.sum() + 0.5 * w @ H @ w

    def jac(z):
        w, _, _ = split(z)
        return np.concatenate([H @ w, np.zeros(m), np.ones(n_xi)])

    A = np.zeros((n_xi, nw + m + n_xi))
    k = 0
    for i, (r, y) in enumerate(zip(rows, ys, strict=True)):
        for x, s in zip(X[r], y, strict=True):
            A[k, i * d : (i + 1) * d] = s * x
            A[k, nw + i] = s
            A[k, nw + m + k] = 1.0
            k += 1
    cons = [
        {"type": "ineq", "fun": lambda z: A @ z - 1.0, "jac": lambda z: A},
        {"type": "ineq", "fun": lambda z: z[nw + m :], "jac": lambda z: np.eye(nw + m + n_xi)[nw + m :]},
    ]
    z0 = np.zeros(nw + m + n_xi)
    z0[nw + m :] = 2.0
    res = minimize(
        fun, z0, jac=jac, constraints=cons, method="SLSQP", options={"ftol": 1e-10, "maxiter": 2000}
    )
    assert res.success, res.message
    w, b, _ = split(res.x)
    return w.reshape(m, d).T, b, res.fun


@pytest.mark.parametrize("w_solver", ["smo", "dcd"])
def test_w_step_satisfies_kkt_and_matches_a_generic_qp_solver(w_solver):
    X, Y = _toy()
    rng = np.random.default_rng(7)
    m = 4
    C = _random_trace_one_psd(rng, m)
    lam2 = 0.05  # strong enough that the off-diagonal coupling changes the solution
    model = M3MDC(lambda1=LAM1, lambda2=lam2, w_solver=w_solver, gap_tol=1e-10).fit_fixed_c(X, Y, C)
    W, b = model.W_, model.b_
    Q = LAM1 * np.eye(m) + lam2 * np.linalg.inv(C)
    G = np.zeros_like(W)
    for i, (j, a, c) in enumerate(model.pairs_):
        r = np.flatnonzero((Y[:, j] == a) | (Y[:, j] == c))
        y = np.where(Y[r, j] == a, 1.0, -1.0)
        al = model.alpha_[i]
        # dual feasibility: box and the equality from the unregularised bias
        assert al.min() >= 0 and al.max() <= 1
        assert abs(al @ y) < 1e-9
        G[:, i] = X[r].T @ (al * y)
        margin = y * (X[r] @ W[:, i] + b[i])
        # complementary slackness
        assert np.all(margin[al < 1 - 1e-9] >= 1 - 1e-6)
        assert np.all(margin[al > 1e-9] <= 1 + 1e-6)
    # stationarity in W (the paper's Eq. 5): W Q = Σ α y x e_iᵀ
    np.testing.assert_allclose(W @ Q, G, atol=1e-6)
    # generic QP oracle
    W_ref, _, f_ref = _primal_qp_by_slsqp(X, Y, [3, 2], C, LAM1, lam2)
    hinge = 0.0
    for i, (j, a, c) in enumerate(model.pairs_):
        r = (Y[:, j] == a) | (Y[:, j] == c)
        y = np.where(Y[r, j] == a, 1.0, -1.0)
        hinge += np.maximum(0, 1 - y * (X[r] @ W[:, i] + b[i])).sum()
    f = hinge + 0.5 * np.trace(W @ Q @ W.T)
    assert f == pytest.approx(f_ref, rel=1e-7)
    np.testing.assert_allclose(W, W_ref, atol=1e-5)
    # and the coupling matters: solving the pairs independently with only diag(Q) differs
    indep = M3MDC(lambda1=LAM1, lambda2=lam2).fit_fixed_c(X, Y, np.diag(np.diag(C)))
    assert np.abs(indep.W_ - W).max() > 1e-3


def test_optimal_bias_is_the_midpoint_of_the_minimiser_interval():
    # f = 0 everywhere, y = (+1, −1): loss(b) = max(0, 1 − b) + max(0, 1 + b) = 2 on [−1, 1]
    assert optimal_bias(np.zeros(2), np.array([1.0, -1.0])) == pytest.approx(0.0)
    # positives at f = 2, negative at f = 0: loss zero for b in [−1, −1] ∪ ... = [1 − 2, −1 − 0] -> b = −1
    assert optimal_bias(np.array([2.0, 0.0]), np.array([1.0, -1.0])) == pytest.approx(-1.0)
    # three positives at f = 0, one negative at f = 0: slope −3 until b = 1 -> minimiser b = 1
    assert optimal_bias(np.zeros(4), np.array([1.0, 1.0, 1.0, -1.0])) == pytest.approx(1.0)


# ----------------------------------------------------------------------------------------------
# the alternation
# ----------------------------------------------------------------------------------------------


def test_objective_decreases_monotonically_across_alternations():
    X, Y = _random_mdc(8, n=45, d=10, n_classes=(3, 3, 2))  # m = 7 pairs <= d: C well conditioned
    lam2 = 0.01
    model = M3MDC(lambda2=lam2, tol=0.0, max_iter=5).fit(X, Y)
    seq = [v for h in model.history_ for v in (h["objective_after_w"], h["objective_after_c"])]
    for prev, nxt in zip(seq, seq[1:], strict=False):
        assert nxt <= prev + 1e-9 * abs(prev)
    assert seq[-1] < seq[0]
    # the recorded final objective, recomputed here from W, b, C with explicit inverses
    C_inv = np.linalg.inv(model.C_)
    hinge = 0.0
    for i, (j, a, c) in enumerate(model.pairs_):
        r = (Y[:, j] == a) | (Y[:, j] == c)
        y = np.where(Y[r, j] == a, 1.0, -1.0)
        hinge += np.maximum(0, 1 - y * (X[r] @ model.W_[:, i] + model.b_[i])).sum()
    W = model.W_
    f = (
        hinge
        + LAM1 / 2 * np.trace(W @ W.T)
        + lam2 / 2 * (np.trace(W @ C_inv @ W.T) + model.eps_ * np.trace(C_inv))
    )
    assert f == pytest.approx(seq[-1], rel=1e-9)
    assert np.trace(model.C_) == pytest.approx(1.0)
    assert [h["iteration"] for h in model.history_] == list(range(1, 6))


def test_stops_on_relative_change_of_w():
    X, Y = _random_mdc(9, n=40)
    model = M3MDC(tol=1e-3).fit(X, Y)
    assert model.converged_
    assert model.history_[-1]["rel_delta_w"] < 1e-3
    assert all(h["rel_delta_w"] >= 1e-3 for h in model.history_[:-1])
    assert model.n_iter_ <= 20


# ----------------------------------------------------------------------------------------------
# prediction, degenerate pairs, state, parameters
# ----------------------------------------------------------------------------------------------


def test_one_vs_one_voting_and_ties_by_hand():
    model = M3MDC()
    pairs = ovo_pairs([3])  # (0,1), (0,2), (1,2)
    model.set_state(
        {
            "W": np.zeros((1, 3)),
            "b": np.array([0.0, 0.0, 0.0]),
            "C": np.eye(3) / 3,
            "pairs": pairs,
            "n_classes": np.array([3]),
            "active": np.ones(3, dtype=bool),
        }
    )
    # scores (x·w + b) set through b: 0>1, 2>0, 1>2 -> one vote each: tie -> class 0
    model.b_ = np.array([1.0, -1.0, 1.0])
    assert model.predict(np.zeros((1, 1))).tolist() == [[0]]
    # 1>0, 0>2, 1>2 -> class 1 (two votes)
    model.b_ = np.array([-1.0, 1.0, 1.0])
    assert model.predict(np.zeros((1, 1))).tolist() == [[1]]
    # all scores exactly 0: every pair abstains -> tie of zeros -> class 0
    model.b_ = np.zeros(3)
    assert model.predict(np.zeros((1, 1))).tolist() == [[0]]
    # 2>0, 2>1, and 0 vs 1 abstains -> class 2
    model.b_ = np.array([0.0, -1.0, -1.0])
    assert model.predict(np.zeros((1, 1))).tolist() == [[2]]


def test_pairs_without_both_classes_are_constant_voters():
    X, Y = _random_mdc(10, n_classes=(3, 2))
    Y = Y.copy()
    Y[Y[:, 0] == 2, 0] = 1  # class 2 of space 0 never seen in training
    model = M3MDC().fit(X, Y, n_classes=[3, 2])
    pairs = model.pairs_.tolist()
    i02, i12 = pairs.index([0, 0, 2]), pairs.index([0, 1, 2])
    assert not model.active_[i02] and not model.active_[i12]
    assert np.all(model.W_[:, [i02, i12]] == 0)
    assert model.b_[i02] == 1.0 and model.b_[i12] == 1.0  # vote for the class that was seen
    assert np.all(model.C_[[i02, i12]] == 0) and np.trace(model.C_) == pytest.approx(1.0)
    assert not np.any(model.predict(X)[:, 0] == 2)


def test_state_round_trip_through_npz_without_pickle():
    X, Y = _random_mdc(11)
    model = M3MDC(max_iter=3).fit(X, Y)
    buf = io.BytesIO()
    np.savez(buf, **model.get_state())
    buf.seek(0)
    with np.load(buf, allow_pickle=False) as z:
        state = {k: z[k] for k in z.files}
    assert set(state) >= {"W", "b", "C", "pairs"}
    other = M3MDC()
    other.set_state(state)
    np.testing.assert_array_equal(other.predict(X), model.predict(X))
    np.testing.assert_array_equal(other.C_, model.C_)
    br = BinaryRelevanceSVM().fit(X, Y)
    br2 = BinaryRelevanceSVM()
    br2.set_state(br.get_state())
    np.testing.assert_array_equal(br2.decision_function(X), br.decision_function(X))


def test_errors():
    X, Y = _random_mdc(12)
    with pytest.raises(NotFittedError):
        M3MDC().predict(X)
    with pytest.raises(ConfigError, match="'lambda1' parameter of M3MDC"):
        M3MDC(lambda1=0).fit(X, Y)
    with pytest.raises(ConfigError, match="'lambda2'"):
        M3MDC(lambda2=-1.0).fit(X, Y)
    with pytest.raises(InputDataError):
        M3MDC().fit(X, Y[:10])
    with pytest.raises(InputDataError):
        M3MDC().fit(X, Y, n_classes=[2, 2])  # space 0 has class index 2
    model = M3MDC(max_iter=2).fit(X, Y)
    with pytest.raises(InputDataError):
        model.predict(X[:, :3])


def test_encode_targets():
    Y, values = encode_targets([["sports", "politics", "sports"], ["good", "bad", "neutral"]])
    assert values == [("politics", "sports"), ("bad", "good", "neutral")]
    assert Y.tolist() == [[1, 1], [0, 0], [1, 2]]


def test_core_modules_do_not_import_pyspark():
    code = (
        "import sys, sparkhc.models.jia_zhang, sparkhc.models.jia_zhang.solver, sparkhc.models.jia_zhang.data, experiments.m3mdc; "
        "print(any(m == 'pyspark' or m.startswith('pyspark.') for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# ----------------------------------------------------------------------------------------------
# real data
# ----------------------------------------------------------------------------------------------

# counted from the staged files (edm test_fold field; solar_flare1.folds.tsv)
EDM_FOLD_SIZES = [16, 16, 16, 16, 15, 15, 15, 15, 15, 15]
FLARE_FOLD_SIZES = [33, 33, 33, 32, 32, 32, 32, 32, 32, 32]


def test_real_edm_loading_and_training_fold_scaling():
    ds = load_mdc(corpus_dir("mdc"), "edm")
    assert len(ds) == 154
    assert ds.Y.shape == (154, 2)
    assert ds.n_classes == [3, 3]
    assert [len(v) for v in ds.class_values] == [3, 3]
    assert ds.numeric.shape == (154, 16) and ds.nominal.shape == (154, 0)
    assert [int(np.sum(ds.folds == k)) for k in range(10)] == EDM_FOLD_SIZES
    tr, te = ds.fold_indices(0)
    assert tr.size == 138 and te.size == 16
    scaler = FeatureScaler(ds.features).fit(ds, tr)
    X_tr = scaler.transform(ds, tr)
    raw = ds.numeric[tr]
    varying = raw.max(axis=0) > raw.min(axis=0)
    np.testing.assert_allclose(X_tr[:, varying].min(axis=0), 0.0, atol=1e-12)
    np.testing.assert_allclose(X_tr[:, varying].max(axis=0), 1.0, atol=1e-12)
    # test rows use the training statistics, not their own
    X_te = scaler.transform(ds, te)
    lo, hi = raw.min(axis=0), raw.max(axis=0)
    expect = np.where(varying, (ds.numeric[te] - lo) / np.where(varying, hi - lo, 1), 0.0)
    np.testing.assert_allclose(X_te, expect, atol=1e-12)


def test_real_flare1_loading():
    ds = load_mdc(corpus_dir("mdc"), "solar_flare1")
    assert len(ds) == 323
    assert ds.Y.shape == (323, 3)
    assert ds.class_values == (("0", "1", "2"), ("0", "1", "2", "4"), ("0", "1"))  # K = 3, 4, 2 (paper)
    assert [int(np.sum(ds.folds == k)) for k in range(10)] == FLARE_FOLD_SIZES
    X = FeatureScaler(ds.features).fit(ds).transform(ds)
    assert X.shape == (323, 7 + 6 + 4 + 2 + 3 + 3 + 2 + 2 + 2 + 2)
    np.testing.assert_array_equal(X.sum(axis=1), 10.0)  # one 1 per nominal attribute
    # record 0: features C,S,O,1,2,1,1,2,1,2 and targets 0,0,0 (first line of the file)
    assert ds.Y[0].tolist() == [0, 0, 0]
    assert X[0, 2] == 1.0 and X[0, 7 + 2] == 1.0  # mod_zurich_class = C, largest_spot_size = S


@pytest.mark.slow  # about 60 s: the M3MDC experiment runner end to end (CI time)
def test_experiment_runner_on_a_tiny_staged_data_set(tmp_path):
    rng = np.random.default_rng(0)
    schema = {
        "targets": [{"name": "t1", "values": ["a", "b", "c"]}, {"name": "t2", "values": [0, 1]}],
        "features": [{"name": f"x{k}", "type": "numeric"} for k in range(4)]
        + [{"name": "col", "type": "nominal", "values": ["r", "g"]}],
    }
    (tmp_path / "mdc").mkdir()
    (tmp_path / "mdc" / "tiny.schema.json").write_text(json.dumps(schema))
    import gzip

    with gzip.open(tmp_path / "mdc" / "tiny.jsonl.gz", "wt") as fh:
        for i in range(30):
            x = rng.normal(size=4)
            t1 = "abc"[int(x[0] > 0) + int(x[0] > 1)]
            feats = [float(v) for v in x] + ["rg"[i % 2]]
            feats[1] = None if i == 3 else feats[1]  # a missing numeric value
            rec = {"id": i, "targets": [t1, int(x[1] > 0)], "features": feats, "test_fold": i % 3}
            fh.write(json.dumps(rec) + "\n")
    from experiments.m3mdc import run_experiment

    res = run_experiment(tmp_path, tmp_path / "out", datasets=("tiny",))
    r = res["datasets"]["tiny"]
    assert r["fold_sizes"] == [10, 10, 10]
    assert set(r["summary"]) == {"M3MDC", "BR", "BR_C1", "BR_LIBSVM", "ECC", "ECP", "ESC"}
    for name in ("results.json", "table3.md", "correlation_tiny.png", "convergence_tiny.png"):
        assert (tmp_path / "out" / name).is_file()
    saved = json.loads((tmp_path / "out" / "results.json").read_text())
    assert saved["datasets"]["tiny"]["summary"]["M3MDC"]["hamming_score"]["mean"] == pytest.approx(
        np.mean([f["M3MDC"]["metrics"]["hamming_score"] for f in r["folds"]])
    )
