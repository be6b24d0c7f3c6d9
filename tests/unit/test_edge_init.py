"""``model.global.init = "edges"`` (:mod:`sparkhc.edge_init`): the edges' binary problems by hand,
the solver against LIBLINEAR (scikit-learn's LinearSVC, squared hinge, no intercept), and the
global model's first epoch."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from sparkhc.batch import SparseBatch
from sparkhc.decoding import tree_index
from sparkhc.edge_init import edge_problems, solve_edges
from sparkhc.models.murawaki import GlobalPA
from sparkhc.taxonomy import Taxonomy


def seven() -> Taxonomy:
    """ROOT 0 -> A 1, B 2; A -> AA 3, AB 4; B -> BA 5, BB 6 (edge into node c: column c - 1)."""
    return Taxonomy.from_edges(
        [("ROOT", "A"), ("ROOT", "B"), ("A", "AA"), ("A", "AB"), ("B", "BA"), ("B", "BB")], root="ROOT"
    )


def test_edge_problems_by_hand():
    idx = tree_index(seven())
    # gold trees: d0 {A, AA}, d1 {B, BB}, d2 {A, AA, AB}, d3 {A, AB, B, BA}
    trees = [[1, 3], [2, 6], [1, 3, 4], [1, 2, 4, 5]]
    nodes = np.array([n for t in trees for n in t])
    ptr = np.concatenate([[0], np.cumsum([len(t) for t in trees])])
    p = edge_problems(nodes, ptr, idx.parent, idx.n_children, idx.first_child)
    want = {  # edge (child node) -> (documents holding the parent, their labels)
        1: ([0, 1, 2, 3], [1, -1, 1, 1]),  # ROOT -> A: every document
        2: ([0, 1, 2, 3], [-1, 1, -1, 1]),  # ROOT -> B
        3: ([0, 2, 3], [1, 1, -1]),  # A -> AA: the documents under A
        4: ([0, 2, 3], [-1, 1, 1]),
        5: ([1, 3], [-1, 1]),  # B -> BA: the documents under B
        6: ([1, 3], [1, -1]),
    }
    for c, (docs, y) in want.items():
        a, b = p.ptr[c - 1], p.ptr[c]
        assert p.docs[a:b].tolist() == docs, c
        assert p.y[a:b].tolist() == y, c


@pytest.mark.parametrize("C", [0.1, 1.0])
def test_solver_equals_liblinear(C):
    from sklearn.svm import LinearSVC

    rng = np.random.default_rng(0)
    X = sp.random(400, 60, density=0.15, random_state=1, format="csr")
    X = sp.csr_matrix(X.multiply(1.0 / np.sqrt(X.multiply(X).sum(axis=1) + 1e-12)))
    idx = tree_index(seven())
    trees = []
    for i in range(X.shape[0]):  # a rule on two features plus noise: near-separable, unbalanced
        top = 1 if X[i, 0] + 0.1 * rng.random() > X[i, 1] else 2
        leaf = (3 if X[i, 2] > 0.05 else 4) if top == 1 else (5 if rng.random() < 0.2 else 6)
        trees.append([top, leaf])
    nodes = np.array([n for t in trees for n in t])
    ptr = np.arange(0, 2 * len(trees) + 1, 2)
    p = edge_problems(nodes, ptr, idx.parent, idx.n_children, idx.first_child)
    W = np.zeros((X.shape[1], idx.n_edges))
    sol = solve_edges(X, p, W, C, tol=1e-7, max_passes=100000)
    assert sol.capped == 0 and float(sol.gap.max()) <= 1e-7
    for e in range(idx.n_edges):
        a, b = p.ptr[e], p.ptr[e + 1]
        ref = LinearSVC(C=C, loss="squared_hinge", dual=True, fit_intercept=False, tol=1e-9,
                        max_iter=200_000).fit(X[p.docs[a:b]], p.y[a:b])
        np.testing.assert_allclose(W[:, e], ref.coef_.ravel(), atol=1e-4, err_msg=f"edge {e}")


def test_a_cap_is_reported():
    X = sp.csr_matrix(np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0]]))
    idx = tree_index(Taxonomy.from_edges([("ROOT", "A"), ("ROOT", "B")], root="ROOT"))
    p = edge_problems(np.array([1, 1, 2]), np.arange(4), idx.parent, idx.n_children, idx.first_child)
    sol = solve_edges(X, p, np.zeros((2, 2)), 100.0, tol=1e-12, max_passes=2)
    assert sol.capped == 2 and sol.counters()["init_capped"] == 2.0 and (sol.passes == 2).all()


def _separable(n: int = 90) -> tuple[Taxonomy, SparseBatch]:
    tax = seven()
    leaves = ["AA", "AB", "BA", "BB"]
    rng = np.random.default_rng(3)
    rows, labels = [], []
    for i in range(n):
        k = i % 4
        x = np.zeros(8)
        x[k] = 1.0
        x[4 + rng.integers(0, 4)] += 0.4
        rows.append(x / np.linalg.norm(x))
        labels.append([leaves[k]])
    return tax, SparseBatch(sp.csr_matrix(np.array(rows, dtype=np.float32)), np.array([f"d{i}" for i in range(n)]),
                            labels)


def test_global_model_starts_from_the_edge_svms():
    tax, b = _separable()
    model = GlobalPA(tax, b.n_features, C=0.3, bias=0.3, normalize="l2", branching=True, init="edges", init_C=1.0)
    model.set_state(model.init_state())
    counters = model.partial_fit(b, seed=0, epoch=0)
    W = model.get_state().arrays["W"]
    # the same problems solved directly on the model's prepared rows
    X = model._prepare(b)
    gold = model._gold(b, X, model._R)
    idx = tree_index(tax)
    want = np.zeros(W.shape)
    solve_edges(X, edge_problems(gold.nodes, gold.nodes_ptr, idx.parent, idx.n_children, idx.first_child), want, 1.0)
    np.testing.assert_allclose(W, want.astype(np.float32), rtol=1e-6)
    assert counters["updates"] == 0 and counters["init_edges"] == idx.n_edges and counters["init_capped"] == 0
    assert not model.get_state().arrays["bf"].any()  # branching weights learned by the PA epochs
    # the edge SVMs alone already decode this separable set exactly
    assert model.predict(b) == b.labels
    # later epochs (and a state that is not fresh) are PA epochs
    after = model.partial_fit(b, seed=0, epoch=1)
    assert "init_edges" not in after
    again = GlobalPA(tax, b.n_features, C=0.3, bias=0.3, normalize="l2", init="edges")
    again.set_state(model.get_state().copy())
    assert "init_edges" not in again.partial_fit(b, seed=0, epoch=0)


def test_init_is_refused_when_unknown():
    tax, b = _separable(8)
    from sparkhc.errors import ConfigError

    with pytest.raises(ConfigError, match="'init' parameter"):
        GlobalPA(tax, b.n_features, init="svm").validate_params()
