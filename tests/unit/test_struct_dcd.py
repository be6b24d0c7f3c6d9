"""``model.global.solver = "dcd"`` (:mod:`sparkhc.struct_dcd`): the structural SVM's optimum against
a brute-force solution of its dual over every label tree (L-BFGS-B, scipy), the duality gap, and
the shard scaling."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import minimize

from sparkhc.batch import SparseBatch
from sparkhc.errors import ModelError
from sparkhc.models.murawaki import GlobalPA
from sparkhc.struct_dcd import WorkingSets, duality_gap
from sparkhc.taxonomy import Taxonomy


def seven() -> Taxonomy:
    """ROOT 0 -> A 1, B 2; A -> AA 3, AB 4; B -> BA 5, BB 6 (edge into node c: column c - 1)."""
    return Taxonomy.from_edges(
        [("ROOT", "A"), ("ROOT", "B"), ("A", "AA"), ("A", "AB"), ("B", "BA"), ("B", "BB")], root="ROOT"
    )


def label_trees(tax: Taxonomy) -> list[np.ndarray]:
    """Every tree the DP can return, as node masks: ancestor-closed, the root and every selected
    internal node with at least one selected child."""
    n = tax.n_nodes
    par = {1: 0, 2: 0, 3: 1, 4: 1, 5: 2, 6: 2}
    kids = {0: [1, 2], 1: [3, 4], 2: [5, 6]}
    out = []
    for bits in itertools.product([False, True], repeat=n - 1):
        m = np.array([True, *bits])
        if any(m[c] and not m[par[c]] for c in par):
            continue
        if any(m[p] and not any(m[k] for k in ks) for p, ks in kids.items()):
            continue
        out.append(m)
    return out


def data(n: int = 24, seed: int = 5) -> SparseBatch:
    rng = np.random.default_rng(seed)
    names = ["AA", "AB", "BA", "BB"]
    rows, labels = [], []
    for i in range(n):
        x = rng.random(6) * (rng.random(6) < 0.6)
        x[i % 4] += 0.5
        rows.append(x)
        labs = [names[i % 4]]
        if i % 5 == 0:  # some multi-label documents, some "noisy" ones
            labs.append(names[(i + 1) % 4])
        if i % 7 == 3:
            labs = [names[(i + 2) % 4]]
        labels.append(labs)
    return SparseBatch(sp.csr_matrix(np.array(rows, dtype=np.float64)), np.array([f"d{i}" for i in range(n)]), labels)


def brute_force(model: GlobalPA, batch: SparseBatch, C: float) -> tuple[np.ndarray, float]:
    """The optimum ``w`` of the dual over all (document, tree) pairs, and the optimal value."""
    X = model._prepare(batch).toarray()
    trees = label_trees(model.taxonomy)
    anc = model.taxonomy.ancestor_matrix().toarray() > 0
    n, F = X.shape
    E = model.taxonomy.n_edges
    dphi, delta, owner = [], [], []
    for i, labs in enumerate(batch.labels):
        g = np.zeros(model.taxonomy.n_nodes, bool)
        for lab in labs:
            g |= anc[model.taxonomy.names.index(lab)]
        g[0] = True
        for t in trees:
            if (t == g).all():
                continue
            diff = (g[1:].astype(float) - t[1:].astype(float))
            dphi.append(np.outer(X[i], diff).reshape(-1))
            delta.append(float(np.abs(diff).sum()))
            owner.append(i)
    Dp, dl, ow = np.array(dphi), np.array(delta), np.array(owner)
    Q = Dp @ Dp.T

    def neg(a: np.ndarray) -> tuple[float, np.ndarray]:
        A = np.bincount(ow, weights=a, minlength=n)
        f = a @ dl - 0.5 * a @ Q @ a - (A @ A) / (4 * C)
        gr = dl - Q @ a - A[ow] / (2 * C)
        return -f, -gr

    res = minimize(neg, np.zeros(len(dl)), jac=True, method="L-BFGS-B", bounds=[(0, None)] * len(dl),
                   options={"ftol": 1e-15, "gtol": 1e-12, "maxiter": 20000})
    return (res.x @ Dp).reshape(F, E), -float(res.fun)


def primal(model: GlobalPA, batch: SparseBatch, W: np.ndarray, C: float) -> float:
    X = model._prepare(batch).toarray()
    trees = label_trees(model.taxonomy)
    anc = model.taxonomy.ancestor_matrix().toarray() > 0
    tot = 0.0
    for i, labs in enumerate(batch.labels):
        g = np.zeros(model.taxonomy.n_nodes, bool)
        for lab in labs:
            g |= anc[model.taxonomy.names.index(lab)]
        g[0] = True
        s = X[i] @ W
        xi = max(0.0, max(float(np.abs(g[1:] ^ t[1:]).sum() - s @ (g[1:].astype(float) - t[1:])) for t in trees))
        tot += C * xi * xi
    return 0.5 * float((W * W).sum()) + tot


@pytest.mark.parametrize(("C", "rounds"), [(0.1, 200), (1.0, 1000)])
def test_converged_weights_equal_the_brute_force_optimum(C, rounds):
    b = data()
    model = GlobalPA(seven(), b.n_features, C=C, bias=0.5, update="cost_augmented", solver="dcd", passes=3,
                     dtype="float64")
    model.fit(b, epochs=rounds)
    W = model.get_state().arrays["W"]
    want, dual_opt = brute_force(model, b, C)
    np.testing.assert_allclose(W, want, atol=1e-5)
    assert primal(model, b, W, C) == pytest.approx(dual_opt, rel=1e-6)


def test_gap_is_the_primal_minus_the_dual_and_shrinks_to_zero():
    b = data()
    C = 0.5
    model = GlobalPA(seven(), b.n_features, C=C, bias=0.5, update="cost_augmented", solver="dcd", passes=10,
                     dtype="float64")
    model.set_state(model.init_state())
    gaps = []
    for e in range(60):
        W0 = model.get_state().arrays["W"].copy()
        ws0 = model.shard_memory
        counters = model.partial_fit(b, seed=0, epoch=e)
        gap, p = duality_gap(float((W0 * W0).sum()), counters)
        # the certificate by hand: the primal by enumeration, the dual of the duals that gave W0
        assert p == pytest.approx(primal(model, b, W0, C), rel=1e-9, abs=1e-12)
        if ws0 is not None:
            A = ws0.alpha_sums()
            dual = float(ws0.alpha @ ws0.delta) - 0.5 * float((W0 * W0).sum()) - float(A @ A) / (4 * C)
            assert gap == pytest.approx(p - dual, rel=1e-9, abs=1e-12)
        assert gap >= -1e-9
        gaps.append(gap / p if p > 0 else 0.0)
    assert gaps[0] == pytest.approx(1.0)  # w = 0, alpha = 0: the gap is the whole primal
    assert gaps[-1] < 2e-5


@pytest.mark.parametrize("sigma", [2.0, 1.0])
def test_two_shards_keep_w_equal_w_of_alpha(sigma):
    """Two shards mixed by :func:`sparkhc.spark.mixing.mix.mix`: with sigma = K (CoCoA+'s adding) and
    sigma = 1 (CoCoA's averaging, the duals' steps scaled by 1 / K) the mixed weights stay equal to
    sum alpha DeltaPhi of the shards' duals, and the dual objective never decreases."""
    from sparkhc.models.base import StateSum
    from sparkhc.spark.mixing.mix import mix

    b = data(40)
    C = 0.3
    parts = [b.subset(np.arange(k, len(b), 2)) for k in range(2)]
    models = []
    for _ in parts:
        m = GlobalPA(seven(), b.n_features, C=C, bias=0.5, update="cost_augmented", solver="dcd", passes=2,
                     dtype="float64")
        m.step_scale, m.n_shards = sigma, 2
        models.append(m)
    base = models[0].init_state()
    duals = []
    for e in range(6):
        acc = StateSum()
        for m, part in zip(models, parts, strict=True):
            m.set_state(base.copy())
            c = m.partial_fit(part, seed=0, epoch=e)
            st = m.get_state()
            st.counters = c
            acc = acc.add(st)
        base, counters = mix(base, acc)
        duals.append(counters["primal"] - counters["gap"])
    assert all(b2 >= b1 - 1e-9 for b1, b2 in zip(duals, duals[1:], strict=False))
    w = np.zeros_like(base.arrays["W"])
    for m, part in zip(models, parts, strict=True):
        X = m._prepare(part).toarray()
        ws: WorkingSets = m.shard_memory
        for j in range(len(ws)):
            cols = ws.cols[ws.cptr[j]:ws.cptr[j + 1]]
            sg = ws.csgn[ws.cptr[j]:ws.cptr[j + 1]]
            w[:, cols] += ws.alpha[j] * np.outer(X[ws.doc[j]], sg)
    np.testing.assert_allclose(base.arrays["W"], w, atol=1e-10)


def test_dcd_refuses_settings_it_cannot_train_in_one_line():
    b = data()
    with pytest.raises(ModelError, match="solver = 'dcd' trains with update = 'cost_augmented'.*average = True"):
        GlobalPA(seven(), b.n_features, update="cost_augmented", solver="dcd", average=True).validate_params()
