"""Cesa-Bianchi et al. 2004: H-loss, G-truncation, H-BAYES, H-RLS dual form, warm start.

Expected values come from the hand computations written here and from helpers in this file
(H-loss, truncation, brute-force expected H-loss, primal H-RLS), never from the product code.
"""

from __future__ import annotations

import io
import itertools
import math
from collections.abc import Callable

import numpy as np
import pytest
import scipy.sparse as sp

from sparkhc.batch import SparseBatch
from sparkhc.decoding import hbayes_decode, truncate
from sparkhc.models.base import ModelState
from sparkhc.models.cesa_bianchi import (
    HRLS,
    HSVM,
    SVM,
    ApproxHBayes,
    CesaModel,
    HPerc,
    Perc,
    eligible_rows,
    normalized_costs,
)
from sparkhc.taxonomy import Taxonomy

# ------------------------------------------------------------------ independent helpers


def parents_of(tax: Taxonomy) -> dict[int, int]:
    return {i: int(tax.parent[i]) for i in range(1, tax.n_nodes)}


def ancestors_of(par: dict[int, int], i: int) -> list[int]:
    out = []
    j = par[i]
    while j != 0:
        out.append(j)
        j = par[j]
    return out


def hand_costs(par: dict[int, int], normalized: bool) -> dict[int, float]:
    """Unit cost split among roots, then among children (paper Sect. 5); or all ones."""
    if not normalized:
        return {i: 1.0 for i in par}
    kids: dict[int, list[int]] = {}
    for c, p in par.items():
        kids.setdefault(p, []).append(c)
    cost: dict[int, float] = {}

    def visit(p: int, share: float) -> None:
        for c in kids.get(p, []):
            cost[c] = share / len(kids[p])
            visit(c, cost[c])

    visit(0, 1.0)
    return cost


def h_loss(par: dict[int, int], pred: set[int], gold: set[int], cost: dict[int, float]) -> float:
    """H-loss: c_i for each node wrong while all its ancestors are right."""
    total = 0.0
    for i in par:
        if (i in pred) != (i in gold) and all((j in pred) == (j in gold) for j in ancestors_of(par, i)):
            total += cost[i]
    return total


def hand_truncate(par: dict[int, int], pred: set[int]) -> set[int]:
    return {i for i in pred if all(j in pred for j in ancestors_of(par, i))}


def random_forest(rng: np.random.Generator, n: int, max_children: int | None = None) -> Taxonomy:
    edges = []
    for i in range(1, n + 1):
        p = int(rng.integers(0, i))
        edges.append(("R" if p == 0 else f"n{p}", f"n{i}"))
    return Taxonomy.from_edges(edges, root="R")


def as_vec(tax: Taxonomy, ids: set[int]) -> np.ndarray:
    v = np.zeros(tax.n_nodes, dtype=bool)
    v[list(ids)] = True
    return v


def as_set(v: np.ndarray) -> set[int]:
    return {int(i) for i in np.flatnonzero(v) if i != 0}


# ------------------------------------------------------------------ Figure 1 style example

# one tree (12 nodes) under the root R (R is not a label):
#   1 -> 2, 3, 4;  2 -> 5, 6;  3 -> 7, 8;  4 -> 9;  5 -> 10, 11;  7 -> 12
FIG1_EDGES = [("R", "1"), ("1", "2"), ("1", "3"), ("1", "4"), ("2", "5"), ("2", "6"), ("3", "7"),
              ("3", "8"), ("4", "9"), ("5", "10"), ("5", "11"), ("7", "12")]


def test_figure1_h_loss_by_hand() -> None:
    tax = Taxonomy.from_edges(FIG1_EDGES, root="R")
    ids = {n: tax.id(n) for n in tax.names[1:]}
    par = parents_of(tax)
    gold = {ids[n] for n in ("1", "2", "5", "10", "3")}  # (c): respects G, partial paths
    a = {ids[n] for n in ("1", "2", "6", "3", "7", "12", "9", "11")}  # (a): 9 and 11 orphaned
    b_expected = {ids[n] for n in ("1", "2", "3", "6", "7", "12")}  # (b): by hand
    assert as_set(truncate(tax, as_vec(tax, a))) == b_expected
    assert hand_truncate(par, a) == b_expected
    uni, norm = hand_costs(par, False), hand_costs(par, True)
    # normalised costs by hand: 1 -> 1; 2, 3, 4 -> 1/3; 5, 6, 7, 8 -> 1/6; 9 -> 1/3; 10, 11 -> 1/12; 12 -> 1/6
    assert norm[ids["9"]] == pytest.approx(1 / 3) and norm[ids["11"]] == pytest.approx(1 / 12)
    assert normalized_costs(tax)[ids["12"]] == pytest.approx(1 / 6)
    # (d): charged nodes for (b) vs (c) are 5 (missed), 6 and 7 (wrong); 10 and 12 sit below a mistake
    assert h_loss(par, b_expected, gold, uni) == 3
    assert h_loss(par, b_expected, gold, norm) == pytest.approx(3 / 6)
    # the untruncated (a) is also charged at 9 (its parent 4 is right): Lemma 1 on this example
    assert h_loss(par, a, gold, uni) == 4
    assert h_loss(par, a, gold, norm) == pytest.approx(1 / 2 + 1 / 3)
    # symmetric difference {5, 6, 7, 10, 12} and 0/1 loss
    assert len(b_expected ^ gold) == 5


def test_figure1_metrics_module() -> None:
    from sparkhc import metrics
    tax = Taxonomy.from_edges(FIG1_EDGES, root="R")
    ids = {n: tax.id(n) for n in tax.names[1:]}
    gold = as_vec(tax, {ids[n] for n in ("1", "2", "5", "10", "3")})
    pred = as_vec(tax, {ids[n] for n in ("1", "2", "3", "6", "7", "12")})
    mc = metrics.MetricCounts(tax)
    mc.add(sp.csr_matrix(gold[None, :].astype(np.float32)), sp.csr_matrix(pred[None, :].astype(np.float32)))
    out = mc.compute()
    assert out["hloss_uniform"] == pytest.approx(3)
    assert out["hloss_normalized"] == pytest.approx(0.5)
    assert out["symdiff"] == pytest.approx(5)
    assert out["zero_one"] == pytest.approx(1)


# ------------------------------------------------------------------ Lemma 1


def test_lemma1_truncation_never_increases_h_loss() -> None:
    rng = np.random.default_rng(1)
    for _ in range(200):
        tax = random_forest(rng, int(rng.integers(2, 15)))
        par = parents_of(tax)
        gold = hand_truncate(par, {i for i in par if rng.random() < 0.5})  # respects G
        pred = {i for i in par if rng.random() < 0.5}  # arbitrary
        trunc = as_set(truncate(tax, as_vec(tax, pred)))
        assert trunc == hand_truncate(par, pred)
        for normalized in (False, True):
            c = hand_costs(par, normalized)
            assert h_loss(par, trunc, gold, c) <= h_loss(par, pred, gold, c) + 1e-12


# ------------------------------------------------------------------ H-BAYES vs brute force


def expected_h_loss(tax: Taxonomy, p: np.ndarray, cost: dict[int, float], pred: set[int]) -> float:
    """E[H-loss] under the paper's model: P(y_i = 1 | y_par = 1) = p_i, P(y_i = 1 | y_par = 0) = 0."""
    par = parents_of(tax)
    total = 0.0
    for bits in itertools.product((0, 1), repeat=len(par)):
        y = {i for i, b in zip(sorted(par), bits, strict=True) if b}
        prob = 1.0
        for i in par:
            parent_on = par[i] == 0 or par[i] in y
            if parent_on:
                prob *= p[i] if i in y else 1 - p[i]
            elif i in y:
                prob = 0.0
                break
        if prob:
            total += prob * h_loss(par, pred, y, cost)
    return total


@pytest.mark.parametrize("normalized", [True, False])
def test_hbayes_rule_equals_brute_force_minimum(normalized: bool) -> None:
    rng = np.random.default_rng(2)
    for _ in range(40):
        tax = random_forest(rng, int(rng.integers(2, 8)))
        par = parents_of(tax)
        p = rng.random(tax.n_nodes)
        cost = hand_costs(par, normalized)
        costs = np.zeros(tax.n_nodes)
        for i, c in cost.items():
            costs[i] = c
        candidates = [s for r in range(len(par) + 1) for s in map(set, itertools.combinations(sorted(par), r))
                      if hand_truncate(par, s) == s]  # every multilabel respecting G
        best = min(expected_h_loss(tax, p, cost, s) for s in candidates)
        rule = as_set(hbayes_decode(tax, p, costs))
        assert hand_truncate(par, rule) == rule
        assert expected_h_loss(tax, p, cost, rule) == pytest.approx(best, abs=1e-12)


def test_hbayes_hand_example() -> None:
    # R -> a -> b (a chain), c_a = 1, c_b = 1 (uniform).  p_a = 0.6, p_b = 0.1
    # leaf b: y_b = 0, H_b = 0.1.  a: 0.6 * (2 - 0.1) = 1.14 >= 1 -> y_a = 1
    # with p_b = 0.45: H_b = 0.45, 0.6 * (2 - 0.45) = 0.93 < 1 -> y_a = 0 although p_a > 1/2
    tax = Taxonomy.from_edges([("R", "a"), ("a", "b")], root="R")
    c = np.array([0.0, 1.0, 1.0])
    assert as_set(hbayes_decode(tax, np.array([0, 0.6, 0.1]), c)) == {tax.id("a")}
    assert as_set(hbayes_decode(tax, np.array([0, 0.6, 0.45]), c)) == set()


# ------------------------------------------------------------------ H-RLS dual = primal


def _batch(X: np.ndarray, labels: list[list[str]]) -> SparseBatch:
    return SparseBatch(
        X=sp.csr_matrix(X.astype(np.float32)),
        doc_ids=np.array([f"d{i}" for i in range(len(labels))]),
        labels=labels,
    )


def _toy(
    rng: np.random.Generator, n: int, d: int = 6, slope: float = 3.0
) -> tuple[Taxonomy, SparseBatch]:
    """Labels drawn top-down, P(on | parent on) = sigmoid(slope * u_i.x) (the paper's model, smoothed)."""
    tax = Taxonomy.from_edges([("R", "A"), ("R", "B"), ("A", "A1"), ("A", "A2"), ("A1", "A11")], root="R")
    U = rng.normal(size=(tax.n_nodes, d))
    X = rng.normal(size=(n, d))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    labels = []
    for x in X:
        on: list[str] = []

        def draw(node: str, x: np.ndarray = x, on: list[str] = on) -> None:
            z = slope * float(U[tax.id(node)] @ x)
            if rng.random() < 1 / (1 + math.exp(-max(min(z, 50.0), -50.0))):
                on.append(node)
                for ch in tax.children[tax.id(node)]:
                    draw(tax.names[int(ch)])

        draw("A")
        draw("B")
        labels.append(on)
    return tax, _batch(X, labels)


def primal_hrls(tax: Taxonomy, batch: SparseBatch, selective: bool) -> tuple[dict[int, list[int]], Callable[[int, np.ndarray], float]]:
    """H-RLS from the definitions (paper Sect. 4) with dense linear algebra."""
    X = batch.X.toarray().astype(np.float64)
    d = X.shape[1]
    par = parents_of(tax)
    gold = [{tax.id(n) for n in labs} for labs in batch.labels or []]
    stored: dict[int, list[int]] = {i: [] for i in par}
    targets: dict[int, list[float]] = {i: [] for i in par}

    def w_dot(i: int, x: np.ndarray) -> float:
        S = X[stored[i]].T if stored[i] else np.zeros((d, 0))
        y = np.array(targets[i])
        w = np.linalg.solve(np.eye(d) + S @ S.T + np.outer(x, x), S @ y)
        return float(w @ x)

    for t, (x, g) in enumerate(zip(X, gold, strict=True), start=1):
        for i in par:
            if par[i] != 0 and par[i] not in g:
                continue  # not eligible
            m = w_dot(i, x)
            n_i = len(stored[i])
            if not selective or n_i == 0 or abs(m) <= math.sqrt(5 * math.log(t) / n_i):
                stored[i].append(t - 1)
                targets[i].append(1.0 if i in g else -1.0)
    return stored, w_dot


@pytest.mark.parametrize("selective", [False, True])
def test_hrls_dual_equals_primal(selective: bool) -> None:
    rng = np.random.default_rng(3)
    tax, batch = _toy(rng, 40)
    model = HRLS(tax, batch.n_features, selective=selective)
    model.fit(batch)
    stored, w_dot = primal_hrls(tax, batch, selective)
    n_stored = model.get_state().arrays["n_stored"]
    for i, rows in stored.items():
        assert n_stored[i] == len(rows), tax.names[i]
    test = rng.normal(size=(7, batch.n_features))
    test /= np.linalg.norm(test, axis=1, keepdims=True)
    tb = _batch(test, [[] for _ in range(7)])
    s = model.scores(tb)
    x32 = tb.X.toarray().astype(np.float64)
    for i in range(1, tax.n_nodes):
        for r in range(7):
            assert s[r, i] == pytest.approx(w_dot(i, x32[r]), rel=1e-9, abs=1e-12)
    # stored instances per node are reported by name
    assert model.stored_per_node()["A"] == len(stored[tax.id("A")])


def test_hrls_stores_only_eligible_and_selective_reduces() -> None:
    rng = np.random.default_rng(4)
    tax, batch = _toy(rng, 200)
    full = HRLS(tax, batch.n_features, selective=False).fit(batch)
    sel = HRLS(tax, batch.n_features).fit(batch)
    gold = batch.label_matrix(tax)
    for i in range(1, tax.n_nodes):
        assert full.get_state().arrays["n_stored"][i] == len(eligible_rows(tax, gold, i))
    assert sel.get_state().arrays["n_stored"].sum() < full.get_state().arrays["n_stored"].sum()


# ------------------------------------------------------------------ warm start


def _savez_roundtrip(state: ModelState) -> ModelState:
    buf = io.BytesIO()
    np.savez(buf, **state.arrays)
    buf.seek(0)
    with np.load(buf, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    return ModelState(arrays, dict(state.counters), state.combine)


@pytest.mark.parametrize("cls", [HPerc, Perc, HRLS])
def test_warm_start_refresh_equals_one_pass(cls: type) -> None:
    rng = np.random.default_rng(5)
    tax, batch = _toy(rng, 120)
    half = 60
    a, b = batch.subset(np.arange(half)), batch.subset(np.arange(half, 120))
    test = _toy(np.random.default_rng(6), 30)[1]

    full = cls(tax, batch.n_features)
    full.fit(batch)
    first = cls(tax, batch.n_features)
    first.fit(a)
    # refresh a reloaded copy (fresh object, state through np.savez without pickle)
    refreshed = cls(tax, batch.n_features)
    refreshed.set_state(_savez_roundtrip(first.get_state()))
    refreshed.partial_fit(b)
    # and the same object continued in memory
    first.partial_fit(b)
    ref_pred, ref_s = full.predict_multilabel(test)
    for m in (refreshed, first):
        pred, s = m.predict_multilabel(test)
        assert np.array_equal(pred, ref_pred)
        np.testing.assert_array_equal(s, ref_s)
        assert m.predict(test) == full.predict(test)


# ------------------------------------------------------------------ models end to end


def test_models_learn_a_noiseless_toy_problem() -> None:
    rng = np.random.default_rng(7)
    tax, batch = _toy(rng, 400, slope=1e6)  # labels a deterministic function of x
    test = batch.subset(np.arange(300, 400))
    train = batch.subset(np.arange(300))
    par = parents_of(tax)
    cost = hand_costs(par, False)
    gold = [{tax.id(n) for n in labs} for labs in test.labels or []]
    empty = np.mean([h_loss(par, set(), g, cost) for g in gold])
    for cls in (Perc, HPerc, HRLS, ApproxHBayes, SVM, HSVM):
        model: CesaModel = cls(tax, batch.n_features)
        model.fit(train)
        pred, _ = model.predict_multilabel(test)
        assert not pred[:, 0].any()
        assert all(as_set(row) == hand_truncate(par, as_set(row)) for row in pred)
        loss = np.mean([h_loss(par, as_set(row), g, cost) for row, g in zip(pred, gold, strict=True)])
        assert loss < empty, cls.__name__
        leaf_sets, scores = model.decode(test)
        assert scores is not None and scores.shape == (100, tax.n_nodes)
        for row, m in zip(pred, leaf_sets, strict=True):
            assert set(tax.closure(m).tolist()) == as_set(row)


def test_eligible_rows_and_hperc_node_rule() -> None:
    tax = Taxonomy.from_edges([("R", "A"), ("A", "A1"), ("R", "B")], root="R")
    assert tax.names == ("R", "A", "B", "A1")
    # documents {A, A1}, {B}, {A}; columns by id R, A, B, A1
    gold = sp.csr_matrix(np.array([[0, 1, 0, 1], [0, 0, 1, 0], [0, 1, 0, 0]], dtype=np.float32))
    assert eligible_rows(tax, gold, tax.id("A")).tolist() == [0, 1, 2]
    assert eligible_rows(tax, gold, tax.id("A1")).tolist() == [0, 2]
    with pytest.raises(Exception, match="mistake"):
        HPerc(tax, 3, mistake="bogus").fit(_batch(np.eye(3), [["A"], ["B"], ["A1"]]))


# ------------------------------------------------------------------ H-PERC update by hand

# R -> A, B;  A -> A1, A2.  Three documents in this order (features x1, x2, x3):
#   x1 = (1, 0, 0), gold {A, A1};  x2 = (0, 1, 0), gold {B};  x3 = (1, 1, 1), gold {A, A2}.
# The paper's rule (Sect. 4): predict y_hat by (4) with g_i = [w_i.x >= 0]; then every ELIGIBLE
# node (a root, or parent gold-positive) with y_hat_i != y_i does w_i += (2 y_i - 1) x.
#   x1: all w = 0, so every g_i = 1 and y_hat = {A, B, A1, A2}; eligible A, B, A1, A2 (A is gold);
#       wrong: B (1 vs 0), A2 (1 vs 0)  ->  w_B = -x1 = (-1, 0, 0), w_A2 = -x1 = (-1, 0, 0).
#   x2: w_A.x2 = 0, w_B.x2 = 0, w_A1.x2 = 0, w_A2.x2 = 0: y_hat = {A, B, A1, A2}; eligible only the
#       roots A, B (A is not gold); wrong: A  ->  w_A = -x2 = (0, -1, 0). A1, A2 are wrong too
#       but not eligible: unchanged.
#   x3: w_A.x3 = -1 -> 0, w_B.x3 = -1 -> 0, w_A1.x3 = 0 -> 1, w_A2.x3 = -1 -> 0; by (4) A1 is
#       cut under A: y_hat = {}. Eligible A, B, A1, A2; wrong: A (0 vs 1), A2 (0 vs 1); A1 is
#       right (y_hat 0 = y 0) although g_A1 = 1  ->  w_A = (1, 0, 1), w_A2 = (0, 1, 1).
# With mistake="node" (g_i != y_i) A1 is also updated at x3: w_A1 = -x3 = (-1, -1, -1).
# The flat PERC (every node, every example, g_i != y_i):
#   x1: wrong B, A2 -> w_B = w_A2 = (-1, 0, 0);  x2: every g_i = 1, wrong A, A1, A2 ->
#   w_A = (0, -1, 0), w_A1 = (0, -1, 0), w_A2 = (-1, -1, 0);  x3: g = A 0, B 0, A1 0, A2 0
#   (w_A2.x3 = -2), wrong A and A2 -> w_A = (1, 0, 1), w_A2 = (0, 0, 1).
HPERC_EDGES = [("R", "A"), ("R", "B"), ("A", "A1"), ("A", "A2")]
HPERC_X = np.array([[1, 0, 0], [0, 1, 0], [1, 1, 1]], dtype=np.float64)
HPERC_GOLD = [["A", "A1"], ["B"], ["A", "A2"]]
# weights (w_A, w_B, w_A1, w_A2) after each of the three examples
HPERC_HAND = {
    ("h_perc", "decoded"): [
        [(0, 0, 0), (-1, 0, 0), (0, 0, 0), (-1, 0, 0)],
        [(0, -1, 0), (-1, 0, 0), (0, 0, 0), (-1, 0, 0)],
        [(1, 0, 1), (-1, 0, 0), (0, 0, 0), (0, 1, 1)],
    ],
    ("h_perc", "node"): [
        [(0, 0, 0), (-1, 0, 0), (0, 0, 0), (-1, 0, 0)],
        [(0, -1, 0), (-1, 0, 0), (0, 0, 0), (-1, 0, 0)],
        [(1, 0, 1), (-1, 0, 0), (-1, -1, -1), (0, 1, 1)],
    ],
    ("perc", None): [
        [(0, 0, 0), (-1, 0, 0), (0, 0, 0), (-1, 0, 0)],
        [(0, -1, 0), (-1, 0, 0), (0, -1, 0), (-1, -1, 0)],
        [(1, 0, 1), (-1, 0, 0), (0, -1, 0), (0, 0, 1)],
    ],
}


@pytest.mark.parametrize("which", sorted(HPERC_HAND, key=str))
def test_hperc_updates_by_hand(which: tuple[str, str | None]) -> None:
    tax = Taxonomy.from_edges(HPERC_EDGES, root="R")
    name, rule = which
    model: HPerc = HPerc(tax, 3, mistake=rule) if name == "h_perc" else Perc(tax, 3)
    order = [tax.id(n) for n in ("A", "B", "A1", "A2")]
    for t, expected in enumerate(HPERC_HAND[which]):
        model.partial_fit(_batch(HPERC_X[t : t + 1], [HPERC_GOLD[t]]))
        W = model.get_state().arrays["W"]
        np.testing.assert_array_equal(W[order], np.array(expected, dtype=np.float64), err_msg=f"after x{t + 1}")
    # the same three examples in one batch: the same weights
    one = HPerc(tax, 3, mistake=rule) if name == "h_perc" else Perc(tax, 3)
    one.fit(_batch(HPERC_X, HPERC_GOLD))
    np.testing.assert_array_equal(one.get_state().arrays["W"], model.get_state().arrays["W"])


# ------------------------------------------------------------------ flat evaluation (no decoding)


def test_flat_losses_of_unclosed_predictions_by_hand() -> None:
    """The paper evaluates PERC and SVM node by node, without rule (4): the predicted set need
    not be ancestor-closed, and the H-loss keeps its definition (all ancestors must agree)."""
    from sparkhc.batch import label_matrix
    from sparkhc.metrics import MetricCounts

    tax = Taxonomy.from_edges(HPERC_EDGES + [("A1", "A11")], root="R")
    gold = label_matrix([["A", "A1"], ["B"]], tax)
    # doc 0 predicts {A11} alone: A wrong (root, counts), A1 wrong under a wrong A (not counted),
    # A11 wrong under wrong ancestors (not counted) -> uniform H 1, symdiff 3, normalised 1/2.
    # doc 1 predicts {B, A1}: A1 wrong, its parent A agrees (both 0) -> counted: H 1, symdiff 1,
    # normalised c_A1 = 1/2 * 1/2 = 1/4.
    pred = np.zeros((2, tax.n_nodes), dtype=bool)
    pred[0, tax.id("A11")] = True
    pred[1, [tax.id("B"), tax.id("A1")]] = True
    mc = MetricCounts(tax)
    with pytest.raises(ValueError, match="ancestor-closed"):
        mc.add(gold, sp.csr_matrix(pred.astype(np.float32)))
    losses = mc.document_losses(gold, sp.csr_matrix(pred.astype(np.float32)), pred_closed=False)
    assert losses["hloss_uniform"].tolist() == [1.0, 1.0]
    assert losses["symdiff"].tolist() == [3.0, 1.0]
    assert losses["zero_one"].tolist() == [1.0, 1.0]
    assert losses["hloss_normalized"].tolist() == [0.5, 0.25]
    mc.add(gold, sp.csr_matrix(pred.astype(np.float32)), pred_closed=False)
    m = mc.compute()
    assert (m["hloss_uniform"], m["symdiff"], m["hloss_normalized"]) == (1.0, 2.0, 0.375)


def test_document_losses_equal_the_hand_h_loss_on_random_sets() -> None:
    from sparkhc.metrics import MetricCounts

    rng = np.random.default_rng(11)
    for trial in range(30):
        tax = random_forest(rng, int(rng.integers(3, 12)))
        par = parents_of(tax)
        n = 8
        gold = np.zeros((n, tax.n_nodes), dtype=bool)
        pred = rng.random((n, tax.n_nodes)) < 0.4
        pred[:, 0] = False
        for r in range(n):
            g = hand_truncate(par, {i for i in par if rng.random() < 0.5})
            gold[r, list(g)] = True
        closed = trial % 2 == 0
        if closed:  # half the trials with truncated (closed) predictions, which add() also takes
            pred = np.array([as_vec(tax, hand_truncate(par, as_set(p))) for p in pred])
        mc = MetricCounts(tax)
        out = mc.document_losses(sp.csr_matrix(gold), sp.csr_matrix(pred), pred_closed=closed)
        for normalized, key in ((False, "hloss_uniform"), (True, "hloss_normalized")):
            cost = hand_costs(par, normalized)
            want = [h_loss(par, as_set(p), as_set(g), cost) for p, g in zip(pred, gold, strict=True)]
            np.testing.assert_allclose(out[key], want, rtol=1e-12)
        sym = [len(as_set(p) ^ as_set(g)) for p, g in zip(pred, gold, strict=True)]
        assert out["symdiff"].tolist() == sym
        mc.add(sp.csr_matrix(gold), sp.csr_matrix(pred), pred_closed=closed)
        m = mc.compute()
        for key in ("hloss_uniform", "hloss_normalized", "symdiff", "zero_one"):
            assert m[key] == pytest.approx(float(out[key].mean()), rel=1e-12)


def test_predict_nodes_is_the_undecoded_g() -> None:
    tax = Taxonomy.from_edges(HPERC_EDGES, root="R")
    model = Perc(tax, 3).fit(_batch(HPERC_X, HPERC_GOLD))
    # flat weights by hand (above): w_A = (1, 0, 1), w_B = (-1, 0, 0), w_A1 = (0, -1, 0), w_A2 = (0, 0, 1)
    x = _batch(np.array([[0.0, 0.0, -1.0]]), [["B"]])  # g: A 0 (-1), B 1 (0), A1 1 (0), A2 0 (-1)
    g = model.predict_nodes(x)
    assert as_set(g[0]) == {tax.id("B"), tax.id("A1")}  # not ancestor-closed: A1 without A
    pred, _ = model.predict_multilabel(x)
    assert as_set(pred[0]) == {tax.id("B")}  # rule (4) cuts A1 under A
