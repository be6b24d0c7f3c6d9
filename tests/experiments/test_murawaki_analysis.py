"""The Murawaki runner's computations, on hand-made cases: the paired significance tests
(experiments/significance.py), the per-document counts against MetricCounts, the per-level weight
counts and the per-level edge impact of tiny hand-made models (experiments/murawaki.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp

from experiments.murawaki import edge_impact, weight_levels
from experiments.significance import (
    approximate_randomization,
    micro_f,
    paired_t_over_folds,
    per_document_counts,
    sign_test,
)
from sparkhc.batch import SparseBatch, label_matrix
from sparkhc.metrics import MetricCounts
from sparkhc.models.base import ModelState
from sparkhc.models.murawaki import FlatPA, GlobalPA, TreePA
from sparkhc.taxonomy import Taxonomy


@pytest.fixture
def tax() -> Taxonomy:
    # ROOT -> A, B; A -> AA, AB (the paper's Figure 1 without B's children)
    return Taxonomy.from_edges([("R", "A"), ("R", "B"), ("A", "AA"), ("A", "AB")])


# ------------------------------------------------------------------------------ significance
def test_sign_test_hand_computed():
    # 8 wins, 1 loss, 1 tie: p = 2 * P(X <= 1), X ~ Bin(9, 1/2) = 2 * (1 + 9) / 512
    a = np.array([1.0] * 8 + [0.0, 0.5])
    b = np.array([0.0] * 8 + [1.0, 0.5])
    res = sign_test(a, b)
    assert (res["wins"], res["losses"], res["ties"]) == (8, 1, 1)
    assert res["p"] == pytest.approx(20 / 512, abs=1e-12)
    # symmetric, and all ties give p = 1
    assert sign_test(b, a)["p"] == pytest.approx(20 / 512, abs=1e-12)
    assert sign_test(a, a)["p"] == 1.0


def test_approximate_randomization_exact_hand_computed():
    # per-document (TP, FP, FN); A gets documents 1 and 2 right, B none; document 3 is the same.
    a = np.array([[1, 0, 0], [1, 0, 0], [0, 1, 1]])
    b = np.array([[0, 1, 1], [0, 1, 1], [0, 1, 1]])
    # observed: micro F 2*2/(4+1+1) = 2/3 against 0. Of the 8 swap patterns, swapping neither or
    # both of documents 1, 2 gives |d| = 2/3 (document 3 is irrelevant: x2); swapping one of them
    # gives F 1/3 for both systems, d = 0. So p = 4 / 8.
    res = approximate_randomization(a, b, micro_f, shuffles=9999)
    assert res["difference"] == pytest.approx(2 / 3)
    assert "exact" in res["test"] and res["p"] == pytest.approx(0.5)


def test_approximate_randomization_sampled():
    rng = np.random.default_rng(3)
    a = rng.integers(0, 4, size=(200, 3))
    same = approximate_randomization(a, a, micro_f, shuffles=199, seed=1)
    assert same["difference"] == 0 and same["p"] == 1.0
    # a system with every false positive and negative removed is far better: p at its floor 1 / 200
    better = a.copy()
    better[:, 1:] = 0
    better[:, 0] += 1
    res = approximate_randomization(better, a, micro_f, shuffles=199, seed=1)
    assert res["difference"] > 0 and res["p"] == pytest.approx(1 / 200)


def test_paired_t_over_folds_hand_computed():
    # differences 1, 2, 3: mean 2, sd 1, t = 2 / (1 / sqrt 3) = 2 sqrt 3 with 2 degrees of freedom;
    # the t(2) CDF is 1/2 + t / (2 sqrt(2 + t^2)), so the two-sided p = 1 - t / sqrt(2 + t^2)
    res = paired_t_over_folds([1.0, 2.0, 3.0], [0.0, 0.0, 0.0])
    t = 2 * math.sqrt(3)
    assert res["t"] == pytest.approx(t)
    assert res["p"] == pytest.approx(1 - t / math.sqrt(2 + t * t))
    assert math.isnan(paired_t_over_folds([1.0], [0.0])["p"])
    assert math.isnan(paired_t_over_folds([1.0, 2.0], [0.0, 1.0])["p"])  # constant difference


def test_per_document_counts_hand_computed_and_as_metric_counts(tax):
    gold = [["AA"], ["AA", "B"], ["B"]]
    pred = [["AB"], ["AA"], ["B"]]
    G, P = label_matrix(gold, tax), label_matrix(pred, tax)
    scored = np.zeros(tax.n_nodes, dtype=bool)
    scored[tax.leaves] = True  # leaf labels (Murawaki's setting)
    real = np.ones(tax.n_nodes, dtype=bool)
    real[0] = False
    c = per_document_counts(G, P, scored, real)
    # doc 1: leaves {AA} vs {AB}: EBF 0; tree {A, AA} vs {A, AB}: TP 1 (A), FP 1, FN 1
    # doc 2: {AA, B} vs {AA}: EBF 2*1/(2+1) = 2/3; {A, AA, B} vs {A, AA}: TP 2, FP 0, FN 1
    # doc 3: exact: EBF 1; TP 1
    np.testing.assert_allclose(c, [[0, 1, 1, 1], [2 / 3, 2, 0, 1], [1, 1, 0, 0]])
    m = MetricCounts(tax, scored)
    m.add(G, P)
    out = m.compute()
    assert c[:, 0].mean() == pytest.approx(out["EBF"])
    assert float(micro_f(c[:, 1:].sum(axis=0))) == pytest.approx(out["hF"])  # 2*4 / (8 + 1 + 2) = 8/11
    assert out["hF"] == pytest.approx(8 / 11)


# ------------------------------------------------------------------------------ model statistics
def _col(tax: Taxonomy, name: str) -> int:
    return tax.id(name) - 1  # TREE / GT column of the edge into the node


def test_weight_levels_tree(tax):
    W = np.zeros((3, tax.n_edges), dtype=np.float32)
    W[0, _col(tax, "A")] = 1.0
    W[:2, _col(tax, "B")] = [0.5, 1e-8]  # |w| <= 1e-7 is trivial
    W[:, _col(tax, "AA")] = [1.0, -2.0, 3.0]
    model = TreePA(tax, 3).set_state(ModelState({"W": W}))
    wl = weight_levels(model)
    # depth 1: A (1) + B (1) over 2 edges; depth 2: AA (3) + AB (0) over 2 edges
    assert wl["levels"] == {1: [2, 2], 2: [2, 3]}
    assert (wl["bias"], wl["bf"], wl["other"]) == (0, 0, 0)
    assert sum(wl["per_column"]) == model.model_size() == 5


def test_weight_levels_global_with_bias_and_branching(tax):
    model = GlobalPA(tax, 2, branching=True, bias=0.5)
    state = model.init_state()
    W = state.arrays["W"]
    assert W.shape == (3, tax.n_edges)  # two features and the bias row
    W[0, _col(tax, "AB")] = 1.0
    W[2, _col(tax, "A")] = -1.0  # bias weights count at their edge's level and as bias
    W[2, _col(tax, "AA")] = 2.0
    state.arrays["bf"][0, 1] = -0.25
    state.arrays["bf"][tax.n_nodes, 3] = -0.5
    model.set_state(state)
    wl = weight_levels(model)
    assert wl["levels"] == {1: [2, 1], 2: [2, 2]}
    assert (wl["bias"], wl["bf"], wl["other"]) == (2, 2, 0)
    assert model.model_size() == 5


def test_weight_levels_flat_by_leaf_depth(tax):
    model = FlatPA(tax, 2)
    state = model.init_state()
    leaves = [int(x) for x in tax.leaves]
    W = state.arrays["W"]
    assert W.shape == (2, len(leaves))
    W[:, leaves.index(tax.id("B"))] = [1.0, 1.0]
    W[0, leaves.index(tax.id("AB"))] = 1.0
    model.set_state(state)
    # B is a leaf at depth 1 (one classifier, 2 weights); AA and AB at depth 2 (1 weight)
    assert weight_levels(model)["levels"] == {1: [1, 2], 2: [2, 1]}


def test_edge_impact_hand_computed(tax):
    W = np.zeros((2, tax.n_edges), dtype=np.float32)
    W[:, _col(tax, "A")] = [1.0, 0.0]
    W[:, _col(tax, "B")] = [0.0, -2.0]
    W[:, _col(tax, "AA")] = [0.5, 0.5]
    model = TreePA(tax, 2, decoder="dp").set_state(ModelState({"W": W}))
    X = sp.csr_matrix(np.array([[1.0, 0.0], [0.0, 1.0]], dtype=np.float32))
    batch = SparseBatch(X, np.array(["d1", "d2"]))
    imp = edge_impact(model, batch)
    # |scores|: A: 1, 0 -> mean 0.5; B: 0, 2 -> 1; level 1 = (0.5 + 1) / 2 = 0.75
    # AA: 0.5, 0.5 -> 0.5; AB: 0 -> level 2 = 0.25
    assert imp == {"1": pytest.approx(0.75), "2": pytest.approx(0.25)}
