"""Murawaki 2013 models (sparkhc.models.murawaki): PA-I updates checked against values worked out
by hand (in the comments) and against the independent worked examples in
``shared/fixtures/murawaki_worked_examples.json``."""

from __future__ import annotations

import json
import math
import os
import pickle
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from sparkhc.batch import SparseBatch
from sparkhc.errors import ConfigError, InputDataError, ModelError
from sparkhc.models import get_model_class
from sparkhc.models.base import ModelState, combine_states, shuffled_order
from sparkhc.models.murawaki import FlatPA, GlobalPA, TreePA
from sparkhc.taxonomy import Taxonomy

FIXTURES = Path(
    os.environ.get("SPARKHC_FIXTURES_DIR", Path(__file__).resolve().parents[2].parent / "shared" / "fixtures")
)
WORKED = FIXTURES / "murawaki_worked_examples.json"
CASES = json.loads(WORKED.read_text())["cases"] if WORKED.is_file() else []
BUCKET = {"1": 0, "2": 1, "3": 2, ">3": 3}


def seven() -> Taxonomy:
    """ROOT -> A, B; A -> AA, AB; B -> BA, BB. Ids (level order, by name): ROOT 0, A 1, B 2,
    AA 3, AB 4, BA 5, BB 6; the edge into node c is column c - 1."""
    return Taxonomy.from_edges(
        [("ROOT", "A"), ("ROOT", "B"), ("A", "AA"), ("A", "AB"), ("B", "BA"), ("B", "BB")], root="ROOT"
    )


def batch(rows, labels, dtype=np.float64) -> SparseBatch:
    X = sp.csr_matrix(np.array(rows, dtype=dtype))
    return SparseBatch(X, np.array([f"d{i}" for i in range(len(rows))]), labels)


def col(tax: Taxonomy, child: str) -> int:
    return tax.id(child) - 1


def example_f(gold, pred) -> float:
    return float(
        np.mean([2 * len(np.intersect1d(g, p)) / (len(g) + len(p)) for g, p in zip(gold, pred, strict=True)])
    )


# ------------------------------------------------------------------------ structured PA, by hand
def seven_global_weights(tax: Taxonomy) -> np.ndarray:
    W = np.zeros((2, tax.n_edges))
    for child, w in {
        "A": (0.5, 0.0),
        "B": (0.0, -0.5),
        "AA": (1.0, 0.0),
        "AB": (0.0, 0.25),
        "BA": (2.0, 0.5),
        "BB": (0.0, -1.0),
    }.items():
        W[:, col(tax, child)] = w
    return W


def test_structured_pa_update_by_hand():
    # x = (1, 2), ||x||^2 = 5. Edge scores w.x: ROOT->A 0.5, ROOT->B -1, A->AA 1, A->AB 0.5,
    # B->BA 3, B->BB -2.
    # DP: under A both leaves are positive (sub 1.5), under B only BA (sub 3); at the root
    # A offers 0.5 + 1.5 = 2, B offers -1 + 3 = 2: both positive. m^ = {AA, AB, BA}, score 4.
    # Gold m = {AB, BB}: score(m) = 0.5 + 0.5 - 1 - 2 = -2.
    # rho = 1 - 2*|{AB}| / (2 + 3) = 0.6;  loss = 4 - (-2) + sqrt(0.6) = 6 + sqrt(0.6).
    # tree(m) ^ tree(m^) = {A->AA (pred only), B->BA (pred only), B->BB (gold only)}:
    # ||Delta||^2 = 3 * 5 = 15;  tau = min(1, (6 + sqrt(0.6)) / 15) = (6 + sqrt(0.6)) / 15.
    # A->AA -= tau x, B->BA -= tau x, B->BB += tau x; ROOT->A, ROOT->B, A->AB unchanged.
    tax = seven()
    W0 = seven_global_weights(tax)
    m = GlobalPA(tax, 2, dtype="float64")
    m.set_state(ModelState({"W": W0.copy()}))
    counters = m.partial_fit(batch([[1.0, 2.0]], [["AB", "BB"]]))
    tau = (6 + math.sqrt(0.6)) / 15
    want = W0.copy()
    want[:, col(tax, "AA")] = (1 - tau, -2 * tau)
    want[:, col(tax, "BA")] = (2 - tau, 0.5 - 2 * tau)
    want[:, col(tax, "BB")] = (tau, -1 + 2 * tau)
    np.testing.assert_allclose(m.state_.arrays["W"], want, rtol=0, atol=1e-9)
    assert counters["updates"] == 1 and counters["examples"] == 1
    assert counters["loss"] == pytest.approx(6 + math.sqrt(0.6), abs=1e-9)
    assert counters["cost"] == pytest.approx(0.6, abs=1e-12)
    assert counters["tau"] == pytest.approx(tau, abs=1e-12)


@pytest.mark.parametrize("numpy_reference", [False, True])
@pytest.mark.parametrize(("pa", "C", "t"), [("I", 1.0, 7 / 24), ("II", 0.25, 7 / 26)])
def test_structured_pa_update_with_branching_by_hand(pa, C, t, numpy_reference, monkeypatch):
    # Same x and W; R = 3; all branching weights 0 except the shared bucket "2": -2.
    # DP-BF: under A, k=1 gives 1 (AA), k=2 gives 1.5 - 2 = -0.5: take {AA}, sub(A) = 1.
    # Under B, k=1 gives 3 (BA), k=2 gives 1 - 2 = -1: take {BA}, sub(B) = 3.
    # Root: offers B 2, A 1.5; k=1 gives 2, k=2 gives 3.5 - 2 = 1.5: take B. m^ = {BA}, score 2.
    # Gold {AB, BB}: edges -2, branching: root k=2 (shared "2": -2), A k=1, B k=1 (0): -4.
    # rho = 1 (nothing in common); loss = 2 - (-4) + 1 = 7.
    # Edges in the symmetric difference: ROOT->A, A->AB, B->BB (gold only), B->BA (pred only):
    # 4 * ||x||^2 = 20. Branching indicators, gold - pred: ROOT|2 +1, ROOT|1 -1, A|1 +1,
    # *|2 +1, *|1 2 - 2 = 0, B|1 1 - 1 = 0: ||Delta_BF||^2 = 4. PA-I, C = 1: tau = min(1, 7 / 24)
    # = 7/24. PA-II, C = 0.25: tau = 7 / (24 + 1 / (2 * 0.25)) = 7 / 26 (PA-I: 0.25).
    from sparkhc import kernels

    if numpy_reference:
        monkeypatch.setattr(kernels, "ENABLED", False)
    tax = seven()
    W0 = seven_global_weights(tax)
    bf0 = np.zeros((tax.n_nodes + 1, 4))
    bf0[-1, 1] = -2.0
    m = GlobalPA(tax, 2, branching=True, dtype="float64", C=C, pa=pa)
    m.set_state(ModelState({"W": W0.copy(), "bf": bf0.copy()}))
    counters = m.partial_fit(batch([[1.0, 2.0]], [["AB", "BB"]]))
    want = W0.copy()
    want[:, col(tax, "A")] = (0.5 + t, 2 * t)
    want[:, col(tax, "AB")] = (t, 0.25 + 2 * t)
    want[:, col(tax, "BB")] = (t, -1 + 2 * t)
    want[:, col(tax, "BA")] = (2 - t, 0.5 - 2 * t)
    np.testing.assert_allclose(m.state_.arrays["W"], want, rtol=0, atol=1e-9)
    want_bf = bf0.copy()
    want_bf[0, 1] = t  # ROOT|2
    want_bf[0, 0] = -t  # ROOT|1
    want_bf[tax.id("A"), 0] = t  # A|1
    want_bf[-1, 1] = -2 + t  # *|2
    np.testing.assert_allclose(m.state_.arrays["bf"], want_bf, rtol=0, atol=1e-9)
    assert counters["loss"] == pytest.approx(7.0, abs=1e-9)
    assert counters["tau"] == pytest.approx(t, abs=1e-12)


def test_no_update_when_the_prediction_is_right():
    tax = seven()
    W0 = seven_global_weights(tax)
    m = GlobalPA(tax, 2, dtype="float64")
    m.set_state(ModelState({"W": W0.copy()}))
    counters = m.partial_fit(batch([[1.0, 2.0]], [["AA", "AB", "BA"]]))
    assert counters["updates"] == 0 and counters["loss"] == 0 and counters["exact"] == 1
    np.testing.assert_array_equal(m.state_.arrays["W"], W0)


# -------------------------------------------------------------------------- worked examples (PA)
def fixture_model(case: dict, branching: bool):
    tax = Taxonomy.from_edges([tuple(e) for e in case["taxonomy_edges"]], root=case["root"])
    V = 1 + max(int(f) for ws in case["edge_weights"].values() for f in ws)
    W = np.zeros((V, tax.n_edges))
    for key, ws in case["edge_weights"].items():
        for f, v in ws.items():
            W[int(f), col(tax, key.split("->")[1])] = v
    bf = np.zeros((tax.n_nodes + 1, 4))
    for key, v in case["bf_weights"].items():
        node, b = key.split("|")
        bf[-1 if node == "*" else tax.id(node), BUCKET[b]] = v
    x = np.zeros(V)
    for f, v in case["x"].items():
        x[int(f)] = v
    model = GlobalPA(tax, V, branching=branching, dtype="float64")
    arrays = {"W": W.copy()}
    if branching:
        arrays["bf"] = bf.copy()
    model.set_state(ModelState(arrays))
    return tax, model, x, W, bf


@pytest.mark.skipif(not CASES, reason=f"worked examples not found at {WORKED}")
@pytest.mark.parametrize("branching", [False, True], ids=["no_bf", "bf"])
@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_worked_example_pa_update(case, branching):
    exp = case["expected"]["pa_update_bf" if branching else "pa_update_no_bf"]
    tax, model, x, W0, bf0 = fixture_model(case, branching)
    counters = model.partial_fit(batch([x], [exp["gold"]]))
    want = W0.copy()
    for key, ws in exp["updated_edges"].items():
        for f, v in ws.items():
            want[int(f), col(tax, key.split("->")[1])] = v
    np.testing.assert_allclose(model.state_.arrays["W"], want, rtol=0, atol=1e-9)
    if branching:
        want_bf = bf0.copy()
        for key, v in exp["updated_bf"].items():
            node, b = key.split("|")
            want_bf[-1 if node == "*" else tax.id(node), BUCKET[b]] = v
        np.testing.assert_allclose(model.state_.arrays["bf"], want_bf, rtol=0, atol=1e-9)
    assert counters["loss"] == pytest.approx(exp["loss"], abs=1e-9)
    assert counters["tau"] == pytest.approx(exp["tau"], abs=1e-9)
    assert counters["cost"] == pytest.approx(exp["rho"] if exp["loss"] > 0 else 0.0, abs=1e-12)
    assert counters["updates"] == (1 if exp["tau"] > 0 else 0)


# ------------------------------------------------------------ cost-augmented updates (extension)
@pytest.mark.parametrize("numpy_reference", [False, True])
@pytest.mark.parametrize(("pa", "C", "t"), [("I", 1.0, 0.475), ("II", 0.1, 0.38)])
def test_cost_augmented_update_by_hand(pa, C, t, numpy_reference, monkeypatch):
    # Same x = (1, 2) and W as above; gold m = {AB, BB}; margin 1. Edge scores: ROOT->A 0.5,
    # ROOT->B -1, A->AA 1, A->AB 0.5, B->BA 3, B->BB -2. Augmented (+1 off tree(m), -1 on it):
    # A -0.5, B -2, AA 2, AB -0.5, BA 4, BB -3. DP: under A only AA is positive (sub 2, offer
    # -0.5 + 2 = 1.5); under B only BA (sub 4, offer 2): m^ = {AA, BA}.
    # Plain scores: score(m^) = 0.5 + 1 - 1 + 3 = 3.5, score(m) = -2. Symmetric difference: AA, BA
    # (predicted only), AB, BB (gold only): 4 edges. loss = 3.5 + 2 + 1 * 4 = 9.5;
    # ||Delta||^2 = 4 * 5 = 20. PA-I, C = 1: tau = min(1, 9.5 / 20) = 0.475. PA-II, C = 0.1:
    # tau = 9.5 / (20 + 1 / (2 * 0.1)) = 9.5 / 25 = 0.38 (PA-I would clip at 0.1).
    # rho(m^) = 1 (nothing in common).
    from sparkhc import kernels

    if numpy_reference:
        monkeypatch.setattr(kernels, "ENABLED", False)
    tax = seven()
    W0 = seven_global_weights(tax)
    m = GlobalPA(tax, 2, dtype="float64", update="cost_augmented", margin=1.0, C=C, pa=pa)
    m.set_state(ModelState({"W": W0.copy()}))
    counters = m.partial_fit(batch([[1.0, 2.0]], [["AB", "BB"]]))
    want = W0.copy()
    want[:, col(tax, "AA")] = (1 - t, -2 * t)
    want[:, col(tax, "BA")] = (2 - t, 0.5 - 2 * t)
    want[:, col(tax, "AB")] = (t, 0.25 + 2 * t)
    want[:, col(tax, "BB")] = (t, -1 + 2 * t)
    np.testing.assert_allclose(m.state_.arrays["W"], want, rtol=0, atol=1e-9)
    assert counters["updates"] == 1
    assert counters["loss"] == pytest.approx(9.5, abs=1e-9)
    assert counters["tau"] == pytest.approx(t, abs=1e-12)
    assert counters["cost"] == pytest.approx(1.0, abs=1e-12)


def _tree_of(tax: Taxonomy, m) -> set[int]:
    out: set[int] = set()
    for c in m:
        while c != 0:
            out.add(int(c))
            c = int(tax.parent[c])
    return out


def _branching(tax: Taxonomy, tree: set[int], R: int = 3) -> dict[tuple[int, int], int]:
    kids: dict[int, int] = {}
    for c in tree:
        kids[int(tax.parent[c])] = kids.get(int(tax.parent[c]), 0) + 1
    out: dict[tuple[int, int], int] = {}
    for p, k in kids.items():
        b = min(k, R + 1) - 1
        for key in ((p, b), (tax.n_nodes, b)):
            out[key] = out.get(key, 0) + 1
    return out


@pytest.mark.parametrize("pa", ["I", "II"])
@pytest.mark.parametrize("branching", [False, True])
@pytest.mark.parametrize("numpy_reference", [False, True])
def test_cost_augmented_update_equals_brute_force(branching, numpy_reference, pa, monkeypatch):
    """One update on random taxonomies: the most violated Hamming-margin label set found by
    enumerating every non-empty leaf set, and the resulting PA-I step, computed here from the
    definitions."""
    import itertools

    from sparkhc import kernels
    from tests.unit.test_decoding import problems

    if numpy_reference:
        monkeypatch.setattr(kernels, "ENABLED", False)
    rng = np.random.default_rng(5)
    margin, C = 0.7, 0.8
    n_checked = n_updates = 0
    for tax, S, bf in problems(21, 18, max_leaves=8):
        leaves = [c for c in range(tax.n_nodes) if len(tax.children[c]) == 0]
        gold = sorted(rng.choice(leaves, size=int(rng.integers(1, min(3, len(leaves)) + 1)), replace=False))
        w0 = S[0] * 0.3
        b0 = bf * 0.3 if branching else None
        gtree = _tree_of(tax, gold)
        gbr = _branching(tax, gtree)

        def score(tree: set[int], br: dict[tuple[int, int], int], w0=w0, b0=b0) -> float:
            sc = sum(float(w0[c - 1]) for c in tree)
            if b0 is not None:
                sc += sum(float(b0[p, b]) * n for (p, b), n in br.items())
            return sc

        best = None
        for r in range(1, len(leaves) + 1):
            for mm in itertools.combinations(leaves, r):
                tr = _tree_of(tax, mm)
                v = score(tr, _branching(tax, tr)) + margin * len(tr ^ gtree)
                if best is None or v > best[0]:
                    best = (v, tr)
        assert best is not None
        ptree = best[1]
        model = GlobalPA(tax, 1, dtype="float64", update="cost_augmented", margin=margin, C=C,
                         branching=branching, pa=pa)
        arrays = {"W": w0[None, :].copy()}
        if b0 is not None:
            arrays["bf"] = b0.copy()
        model.set_state(ModelState(arrays))
        names = [tax.names[c] for c in gold]
        counters = model.partial_fit(batch([[1.0]], [names]))
        n_checked += 1
        want_w = w0.copy()
        want_bf = b0.copy() if b0 is not None else None
        if ptree != gtree:
            pbr = _branching(tax, ptree)
            loss = score(ptree, pbr) - score(gtree, gbr) + margin * len(ptree ^ gtree)
            net = {k: gbr.get(k, 0) - pbr.get(k, 0) for k in set(gbr) | set(pbr)} if branching else {}
            norm2 = len(ptree ^ gtree) + sum(v * v for v in net.values())
            tau = min(C, loss / norm2) if pa == "I" else loss / (norm2 + 1 / (2 * C))
            assert loss > 0
            for c in gtree - ptree:
                want_w[c - 1] += tau
            for c in ptree - gtree:
                want_w[c - 1] -= tau
            if want_bf is not None:
                for (p, b), v in net.items():
                    want_bf[p, b] += tau * v
            assert counters["updates"] == 1 and counters["loss"] == pytest.approx(loss, abs=1e-9)
            n_updates += 1
        else:
            assert counters["updates"] == 0
        np.testing.assert_allclose(model.state_.arrays["W"][0], want_w, rtol=0, atol=1e-9)
        if want_bf is not None:
            np.testing.assert_allclose(model.state_.arrays["bf"], want_bf, rtol=0, atol=1e-9)
    assert n_checked == 18 and n_updates >= 12


def test_a_right_prediction_inside_the_margin_still_updates():
    # W = 0 except ROOT->A 0.2 on feature 0: the prediction for x = (1, 0) is {AA} or {AB} with
    # score 0.2 -- right for gold {AA} only by a tie-break margin. Prediction-based updates do
    # nothing when m^ = m; cost-augmented ones push AA up and the rival down.
    tax = seven()
    W0 = np.zeros((2, tax.n_edges))
    W0[0, col(tax, "A")] = 0.2
    W0[0, col(tax, "AA")] = 0.1
    plain = GlobalPA(tax, 2, dtype="float64")
    plain.set_state(ModelState({"W": W0.copy()}))
    assert plain.partial_fit(batch([[1.0, 0.0]], [["AA"]]))["updates"] == 0
    aug = GlobalPA(tax, 2, dtype="float64", update="cost_augmented")
    aug.set_state(ModelState({"W": W0.copy()}))
    c = aug.partial_fit(batch([[1.0, 0.0]], [["AA"]]))
    assert c["updates"] == 1
    W = aug.state_.arrays["W"]
    assert W[0, col(tax, "AA")] > 0.1


def test_bias_feature_by_hand():
    # FLAT, leaves AA, AB, BA, BB; bias 0.5: x = (1, 2) becomes (1, 2, 0.5), ||x||^2 = 5.25.
    # Gold {AA}: all scores 0, loss 1 per leaf, tau = 1 / 5.25. w_AA += tau x, the others -= tau x;
    # the last row of W is the intercept (0.5 tau per update).
    tax = seven()
    m = FlatPA(tax, 2, dtype="float64", bias=0.5)
    m.set_state(m.init_state())
    assert m.state_.arrays["W"].shape == (3, 4)
    m.partial_fit(batch([[1.0, 2.0]], [["AA"]]))
    t = 1 / 5.25
    want = np.outer([1.0, 2.0, 0.5], [t, -t, -t, -t])
    np.testing.assert_allclose(m.state_.arrays["W"], want, rtol=0, atol=1e-12)
    # the intercept alone decides a document without features: AA scores +0.5 t, the rest -0.5 t
    assert m.predict(batch([[0.0, 0.0]], [["AA"]])) == [["AA"]]


# --------------------------------------------------------------------------- FLAT, by hand
def test_flat_pa_updates_by_hand():
    # Leaves AA, AB, BA, BB (columns in that order). Features do not overlap between
    # documents, so the order within the epoch does not matter.
    # d0 x = (1, 0, 0), gold {AA}: all scores 0, loss 1 each, ||x||^2 = 1, tau = 1:
    #    w_AA += (1, 0, 0), the others -= (1, 0, 0).
    # d1 x = (0, 2, 0), gold {BB}: ||x||^2 = 4, tau = 1/4: w_BB += (0, .5, 0), others -= (0, .5, 0).
    # d2 x = (0, 0, .5), gold {AB, BA}: ||x||^2 = .25, loss/||x||^2 = 4, clipped: tau = C = 1:
    #    w_AB, w_BA += (0, 0, .5); w_AA, w_BB -= (0, 0, .5).
    # 12 updates, each with loss 1.
    tax = seven()
    b = batch([[1, 0, 0], [0, 2, 0], [0, 0, 0.5]], [["AA"], ["BB"], ["AB", "BA"]])
    m = FlatPA(tax, 3, dtype="float64")
    m.set_state(m.init_state())
    c = m.partial_fit(b, seed=0, epoch=0)
    want = np.array([[1, -1, -1, -1], [-0.5, -0.5, -0.5, 0.5], [-0.5, 0.5, 0.5, -0.5]])
    np.testing.assert_allclose(m.state_.arrays["W"], want, atol=1e-12)
    assert c["updates"] == 12 and c["loss"] == pytest.approx(12.0) and c["examples"] == 3
    # Epoch 2: d0 and d1 now have margin exactly 1 everywhere (no loss). d2: scores .5 * w[2] =
    # (-.25, .25, .25, -.25), margin .25, loss .75 each, .75 / .25 = 3 -> tau = 1:
    # w[2] becomes (-1, 1, 1, -1). 4 updates, loss 3.
    c = m.partial_fit(b, seed=0, epoch=1)
    want[2] = [-1, 1, 1, -1]
    np.testing.assert_allclose(m.state_.arrays["W"], want, atol=1e-12)
    assert c["updates"] == 4 and c["loss"] == pytest.approx(3.0)


def test_flat_pa_order_and_aggressiveness():
    tax = seven()
    # C = 0.5 caps the first step: w_AA = 0.5 x, the others -0.5 x.
    m = FlatPA(tax, 2, C=0.5, dtype="float64")
    m.set_state(m.init_state())
    m.partial_fit(batch([[1, 0]], [["AA"]]))
    np.testing.assert_allclose(m.state_.arrays["W"], [[0.5, -0.5, -0.5, -0.5], [0, 0, 0, 0]])
    # C = 1, two single-document epochs in sequence:
    # d0 x = (1, 0) {AA}: w_AA = (1, 0), others (-1, 0).
    # d1 x = (1, 1) {AB}, ||x||^2 = 2: scores AA 1, AB -1, BA -1, BB -1.
    #    AA (y -1): loss 2, tau 1 -> (0, -1). AB (y +1): loss 2, tau 1 -> (0, 1).
    #    BA, BB (y -1): margin 1, no loss.
    m = FlatPA(tax, 2, dtype="float64")
    m.set_state(m.init_state())
    m.partial_fit(batch([[1, 0]], [["AA"]]))
    c = m.partial_fit(batch([[1, 1]], [["AB"]]))
    np.testing.assert_allclose(m.state_.arrays["W"], [[0, 0, -1, -1], [-1, 1, 0, 0]])
    assert c["updates"] == 2 and c["loss"] == pytest.approx(4.0)


# --------------------------------------------------------------------------- TREE, by hand
def test_tree_all_and_sib_updates_by_hand():
    # Edges (columns): ROOT->A, ROOT->B, A->AA, A->AB, B->BA, B->BB.
    # d0 x = (1, 0) gold {AA}, ||x||^2 = 1; d1 x = (0, 2) gold {BB}, ||x||^2 = 4.
    # ALL: every edge sees both documents. d0 (tau 1): ROOT->A, A->AA += (1, 0), the others
    #   -= (1, 0). d1 (tau 1/4): ROOT->B, B->BB += (0, .5), the others -= (0, .5).
    # SIB: d0 trains the root's edges and A's (A is in tree(m)): ROOT->A (1, 0), ROOT->B (-1, 0),
    #   A->AA (1, 0), A->AB (-1, 0); d1 trains the root's edges and B's: ROOT->A (0, -.5),
    #   ROOT->B (0, .5), B->BA (0, -.5), B->BB (0, .5). B's edges never see d0, A's never d1.
    tax = seven()
    b = batch([[1, 0], [0, 2]], [["AA"], ["BB"]])
    all_ = TreePA(tax, 2, data="all", dtype="float64")
    all_.set_state(all_.init_state())
    c = all_.partial_fit(b)
    want_all = np.array([[1, -1, 1, -1, -1, -1], [-0.5, 0.5, -0.5, -0.5, -0.5, 0.5]])
    np.testing.assert_allclose(all_.state_.arrays["W"], want_all)
    assert c["updates"] == 12 and c["binary_examples"] == 12
    sib = TreePA(tax, 2, data="sib", dtype="float64")
    sib.set_state(sib.init_state())
    c = sib.partial_fit(b)
    want_sib = np.array([[1, -1, 1, -1, 0, 0], [-0.5, 0.5, 0, 0, -0.5, 0.5]])
    np.testing.assert_allclose(sib.state_.arrays["W"], want_sib)
    assert c["updates"] == 8 and c["binary_examples"] == 8


def test_sib_trains_an_edge_only_on_documents_under_its_parent():
    tax = seven()
    rng = np.random.default_rng(0)
    X = rng.random((30, 5))
    labels = [["AA"] if i % 2 else ["AB", "AA"] for i in range(30)]  # nothing under B
    m = TreePA(tax, 5, data="sib", epochs=3).fit(batch(X, labels))
    W = m.state_.arrays["W"]
    assert not W[:, [col(tax, "BA"), col(tax, "BB")]].any()
    assert W[:, [col(tax, "A"), col(tax, "B"), col(tax, "AA"), col(tax, "AB")]].any()


# ----------------------------------------------------------------------------- learning sanity
def separable(n: int = 120, seed: int = 0) -> tuple[Taxonomy, SparseBatch]:
    """Nine leaves under three parents; every leaf has its own feature, plus a little noise."""
    edges = [("ROOT", a) for a in "ABC"] + [(a, a + b) for a in "ABC" for b in "xyz"]
    tax = Taxonomy.from_edges(edges, root="ROOT")
    leaves = [tax.names[i] for i in tax.leaves]
    rng = np.random.default_rng(seed)
    V = len(leaves) + 20
    rows, labels = [], []
    for _ in range(n):
        m = sorted(rng.choice(len(leaves), int(rng.integers(1, 3)), replace=False))
        x = np.zeros(V)
        x[m] = 1.0
        x[len(leaves) + rng.integers(0, 20, 3)] += 0.3
        rows.append(x / np.linalg.norm(x))
        labels.append([leaves[j] for j in m])
    return tax, batch(rows, labels, dtype=np.float32)


@pytest.mark.parametrize(
    "cls,params",
    [
        (GlobalPA, {}),
        (GlobalPA, {"branching": True}),
        (FlatPA, {}),
        (TreePA, {"data": "all", "decoder": "dp"}),
        (TreePA, {"data": "sib", "decoder": "ls"}),
    ],
    ids=["gt", "gt-bf", "flat", "dp-all", "ls-sib"],
)
def test_separable_problem_is_learned(cls, params):
    tax, b = separable()
    model = cls(tax, b.n_features, epochs=10, **params).fit(b, seed=3)
    sets, scores = model.decode(b)
    assert example_f(b.leaf_sets(tax), sets) == 1.0
    assert scores is not None and scores.shape == (len(b), tax.n_nodes)
    assert model.predict(b) == [sorted(lab, key=tax.id) for lab in b.labels]
    assert model.state_.arrays["W"].dtype == np.float32


def test_gt_loss_vanishes_once_the_training_set_is_fitted():
    tax, b = separable()
    m = GlobalPA(tax, b.n_features)
    m.set_state(m.init_state())
    history = [m.partial_fit(b, seed=1, epoch=e) for e in range(10)]
    assert history[0]["updates"] > 0
    assert history[-1]["updates"] == 0 and history[-1]["loss"] == 0
    assert history[-1]["exact"] == len(b)


# ------------------------------------------------------------------------ state and determinism
@pytest.mark.parametrize("cls", [FlatPA, TreePA, GlobalPA])
def test_partial_fit_continues_from_the_state_it_is_given(cls):
    tax, b = separable(60)
    serial = cls(tax, b.n_features, epochs=3).fit(b, seed=5)
    m = cls(tax, b.n_features)
    m.set_state(m.init_state())
    for e in range(3):
        state = m.get_state().copy()
        m = cls(tax, b.n_features)  # a fresh object (as on an executor) given the state
        m.set_state(state)
        m.partial_fit(b, seed=5, epoch=e)
    for k, v in serial.get_state().arrays.items():
        np.testing.assert_array_equal(m.get_state().arrays[k], v)
    # the mean of identical shard states is the state itself
    mixed = combine_states([m.get_state(), m.get_state().copy()])
    for k, v in m.get_state().arrays.items():
        np.testing.assert_array_equal(mixed.arrays[k], v)


def test_init_state_layout():
    tax = seven()
    st = GlobalPA(tax, 11, branching=True).init_state()
    assert st.combine == "mean"
    assert st.arrays["W"].shape == (11, 6) and st.arrays["W"].dtype == np.float32
    assert st.arrays["bf"].shape == (tax.n_nodes + 1, 4) and st.arrays["bf"].dtype == np.float32
    assert FlatPA(tax, 11).init_state().arrays["W"].shape == (11, 4)
    assert TreePA(tax, 11).init_state().arrays["W"].shape == (11, 6)
    assert GlobalPA(tax, 11, R=2, branching=True).init_state().arrays["bf"].shape == (tax.n_nodes + 1, 3)


def test_model_size_counts_nonzero_weights():
    tax = seven()
    m = GlobalPA(tax, 2, dtype="float64")
    m.set_state(ModelState({"W": seven_global_weights(tax)}))
    assert m.model_size() == 7  # A, B, AA, AB, BB: one non-zero each; BA: two


def test_model_pickles_after_training():
    tax, b = separable(30)
    m = GlobalPA(tax, b.n_features, epochs=2, branching=True).fit(b)
    clone = pickle.loads(pickle.dumps(m))
    assert clone.predict(b) == m.predict(b)


def test_partial_path_labels_through_virtual_leaves():
    base = Taxonomy.from_edges([("R", "A"), ("R", "B"), ("A", "A1"), ("A", "A2")], root="R")
    tax = base.with_self_leaves()
    X = np.eye(4)
    labels = [["A1"], ["A2"], ["A"], ["B"]]  # "A" alone: the internal node is the label
    for cls in (GlobalPA, FlatPA, TreePA):
        m = cls(tax, 4, epochs=5).fit(batch(X, labels))
        assert m.predict(batch(X, labels)) == labels


def test_registry_names():
    assert get_model_class("flat") is FlatPA
    assert get_model_class("tree") is TreePA
    assert get_model_class("global") is GlobalPA


# ----------------------------------------------------------------------------------------- errors
def test_empty_gold_set_names_the_document():
    tax = seven()
    b = SparseBatch(sp.csr_matrix(np.eye(3)), np.array(["ok1", "bad-doc", "ok2"]), [["AA"], [], ["BB"]])
    for cls in (GlobalPA, FlatPA, TreePA):
        with pytest.raises(InputDataError, match="bad-doc"):
            cls(tax, 3).fit(b)


def test_feature_count_mismatch():
    tax = seven()
    m = GlobalPA(tax, 4)
    m.set_state(m.init_state())
    with pytest.raises(ModelError, match="4"):
        m.partial_fit(batch([[1.0, 0.0]], [["AA"]]))


@pytest.mark.parametrize(
    "cls,key,value",
    [
        (GlobalPA, "C", 0),
        (GlobalPA, "C", -1.0),
        (GlobalPA, "C", "1"),
        (FlatPA, "epochs", 0),
        (FlatPA, "epochs", 2.5),
        (FlatPA, "dtype", "float16"),
        (TreePA, "data", "some"),
        (TreePA, "decoder", "beam"),
        (GlobalPA, "branching", "yes"),
        (GlobalPA, "R", 0),
        (GlobalPA, "pa", "III"),
        (GlobalPA, "pa", 2),
    ],
)
def test_bad_parameters_are_rejected(cls, key, value):
    m = cls(seven(), 3, **{key: value})
    with pytest.raises(ConfigError, match=rf"The '{key}' parameter of {cls.__name__} must be"):
        m.validate_params()


def test_unknown_parameter():
    with pytest.raises(ConfigError, match="unknown parameter"):
        GlobalPA(seven(), 3, data="all")


def test_decode_before_fit():
    from sparkhc.errors import NotFittedError

    with pytest.raises(NotFittedError):
        GlobalPA(seven(), 2).decode(batch([[1.0, 0.0]], [["AA"]]))


# ------------------------------------------------------------------------------ averaged weights
@pytest.mark.parametrize("numpy_reference", [False, True])
@pytest.mark.parametrize("branching", [False, True])
def test_averaged_weights_equal_the_mean_of_every_intermediate_state(branching, numpy_reference, monkeypatch):
    """Brute force: the plain model stepped one document at a time in the same order, its weights
    recorded after every example of every epoch; their mean is the averaged model (Collins 2002)."""
    from sparkhc import kernels

    if numpy_reference:
        monkeypatch.setattr(kernels, "ENABLED", False)
    tax, b = separable(n=30, seed=4)
    params = {"branching": branching, "update": "cost_augmented", "bias": 0.5, "dtype": "float64"}
    avg = GlobalPA(tax, b.n_features, average=True, **params).fit(b, epochs=3, seed=2)
    plain = GlobalPA(tax, b.n_features, **params)
    plain.set_state(plain.init_state())
    snaps: dict[str, list[np.ndarray]] = {"W": [], "bf": []}
    for e in range(3):
        for i in shuffled_order(len(b), 2, e):
            plain.partial_fit(b.subset(np.array([i])), seed=0, epoch=0)
            for k in snaps:
                if k in plain.get_state().arrays:
                    snaps[k].append(plain.get_state().arrays[k].copy())
    assert len(snaps["W"]) == 3 * len(b)
    eff = avg.averaged_arrays()
    for k, s in snaps.items():
        if s:
            # training itself is unchanged: the raw weights are the plain model's
            np.testing.assert_allclose(avg.get_state().arrays[k], plain.get_state().arrays[k], atol=1e-12)
            np.testing.assert_allclose(eff[k], np.mean(s, axis=0), atol=1e-12)
    assert not np.allclose(eff["W"], avg.get_state().arrays["W"])
    # prediction uses the averaged weights
    expect = GlobalPA(tax, b.n_features, **params)
    expect.set_state(ModelState(dict(eff)))
    assert avg.predict(b) == expect.predict(b)
    assert avg.model_size() == expect.model_size()


def test_averaged_weights_by_hand():
    """Two documents, one epoch: with updates u_0, u_1 in the order of the shuffle, W_1 = u_0 and
    W_2 = u_0 + u_1, whose average is u_0 + u_1 / 2; Wa = 0 * u_0 + (1/2) * u_1 (the time of the
    j-th example is j / 2) and t = 1, so W - Wa / t = u_0 + u_1 / 2."""
    tax = Taxonomy.from_edges([("R", "A"), ("R", "B")])
    b = batch([[1.0, 0.0], [0.0, 1.0]], [["A"], ["B"]])
    m = GlobalPA(tax, 2, average=True, dtype="float64")
    m.set_state(m.init_state())
    order = shuffled_order(2, 0, 0)
    m.partial_fit(b, seed=0, epoch=0)
    st = m.get_state().arrays
    # from W = 0 every prediction ties: the DP takes the first child, A; d0 (gold A) is right,
    # d1 (gold B) gets tau = min(1, (0 - 0 + sqrt(1)) / 2) = 0.5: +0.5 on edge B, -0.5 on edge A
    W = np.zeros((2, 2))
    Wa = np.zeros((2, 2))
    for pos, i in enumerate(order):
        if i == 1 and pos == 0:
            W[1] += [-0.5, 0.5]
        elif i == 1:
            W[1] += [-0.5, 0.5]
            Wa[1] += np.array([-0.5, 0.5]) * 0.5
    np.testing.assert_allclose(st["W"], W)
    np.testing.assert_allclose(st["Wa"], Wa)
    assert st["t"].tolist() == [1.0]
    np.testing.assert_allclose(m.averaged_arrays()["W"], W - Wa)


# ------------------------------------------------------------------ label-frequency-aware margins
def test_rare_margins_by_hand():
    from sparkhc.models.murawaki import rare_margins

    # n_max = 8: edge counts 8, 2, 0 (never gold), 1 -> margins 1.5 * (8/n)^0.5
    got = rare_margins(np.array([8.0, 2.0, 0.0, 1.0]), 1.5, 0.5)
    np.testing.assert_allclose(got, [1.5, 3.0, 1.5, 1.5 * np.sqrt(8.0)])
    # only the ratios matter (the mean of the shards' counts gives the margins of their sum)
    np.testing.assert_allclose(rare_margins(np.array([4.0, 1.0, 0.0, 0.5]), 1.5, 0.5), got)
    np.testing.assert_allclose(rare_margins(np.array([3.0, 1.0]), 1.0, 0.0), [1.0, 1.0])


@pytest.mark.parametrize("kernels_on", [True, False])
@pytest.mark.parametrize("rare,tau", [(0.0, 1.0), (0.5, 1.5)])
def test_rare_margin_step_by_hand(monkeypatch, kernels_on, rare, tau):
    """R -> A, R -> B; edge counts (4, 1) kept in the state; one document x = (1) with gold {B} and
    W = 0. margin 1, margin_rare 0.5: a missed B costs 1 * (4/1)^0.5 = 2, a wrong A costs 1. The
    cost-augmented scores are A: 0 + 1, B: 0 - 2, so m^ = {A}: l = (s_A - s_B) + 2 + 1 = 3,
    ||Delta||^2 = 2, tau = min(C, 3/2) = 1.5; with margin_rare 0 (one margin): l = 2, tau = 1."""
    from sparkhc import kernels

    monkeypatch.setattr(kernels, "ENABLED", kernels_on and kernels.HAVE_NUMBA)
    tax = Taxonomy.from_edges([("R", "A"), ("R", "B")])
    batch = SparseBatch(sp.csr_matrix(np.array([[1.0]])), np.array(["d"]), [["B"]])
    m = GlobalPA(tax, 1, update="cost_augmented", margin=1.0, margin_rare=rare, C=10.0, dtype="float64")
    state = m.init_state()
    if rare:
        state.arrays["edge_counts"][:] = [4.0, 1.0]  # node A = edge 0, node B = edge 1
    m.set_state(state)
    out = m.partial_fit(batch)
    a, b = tax.id("A") - 1, tax.id("B") - 1
    W = m.get_state().arrays["W"]
    assert W[0, b] == pytest.approx(tau) and W[0, a] == pytest.approx(-tau)
    assert out["loss"] == pytest.approx(2 * tau)
    if rare:  # the counts set before are kept (a fresh state would take this batch's: (0, 1))
        np.testing.assert_array_equal(m.get_state().arrays["edge_counts"], [4.0, 1.0])


def test_rare_margin_counts_from_a_fresh_state_and_shard_mean():
    """A fresh state takes the first batch's gold edge counts; the mean of two shards' states
    keeps the counts' ratios (so the margins of the whole training set)."""
    from sparkhc.models.base import combine_states

    tax = Taxonomy.from_edges([("R", "A"), ("R", "B"), ("A", "A1"), ("A", "A2")])
    X = sp.csr_matrix(np.eye(4))
    b1 = SparseBatch(X, np.array(["1", "2", "3", "4"]), [["A1"], ["A1"], ["A2"], ["B"]])
    b2 = SparseBatch(X, np.array(["5", "6", "7", "8"]), [["A1"], ["A1", "B"], ["B"], ["B"]])
    states = []
    for b in (b1, b2):
        m = GlobalPA(tax, 4, update="cost_augmented", margin_rare=0.25)
        m.partial_fit(b)
        states.append(m.get_state())
    ids = [tax.id(x) - 1 for x in ("A", "B", "A1", "A2")]
    np.testing.assert_array_equal(states[0].arrays["edge_counts"][ids], [3, 1, 2, 1])
    np.testing.assert_array_equal(states[1].arrays["edge_counts"][ids], [2, 3, 2, 0])
    mixed = combine_states(states)
    np.testing.assert_allclose(mixed.arrays["edge_counts"][ids], [2.5, 2.0, 2.0, 0.5])
    # an update="prediction" model has no margins to scale: no counts in its state
    assert "edge_counts" not in GlobalPA(tax, 4, margin_rare=0.25).init_state().arrays


def test_a_scratch_model_keeps_each_shards_gold_sets_across_epochs(monkeypatch):
    """One model running several shards in turn (the driver execution with more shards than
    threads) computes each shard's gold sets once, not every epoch, and gives the weights a model
    per shard gives; a batch that is gone is dropped from the cache."""
    import gc

    import sparkhc.models.murawaki as mw

    tax, b = separable(90)
    shards = [b.subset(np.arange(k, 90, 3)) for k in range(3)]
    calls = []
    real = mw._gold_sets
    monkeypatch.setattr(mw, "_gold_sets", lambda *a, **k: calls.append(1) or real(*a, **k))
    one = GlobalPA(tax, b.n_features)
    own = [GlobalPA(tax, b.n_features) for _ in shards]
    start = one.init_state()
    for e in range(4):
        for k, s in enumerate(shards):
            for m in (one, own[k]):
                m.set_state(start.copy())
                m.partial_fit(s, seed=k, epoch=e)
            for name, v in own[k].get_state().arrays.items():
                np.testing.assert_array_equal(one.get_state().arrays[name], v)
    assert len(calls) == 2 * len(shards)  # `one` and each of `own`, once per shard
    del shards, s
    gc.collect()
    one.partial_fit(b.subset(np.arange(10)), seed=0, epoch=0)
    assert len(one.__dict__["_gold_cache"]) == 1


def test_c_auto_must_be_resolved_before_a_direct_fit():
    """C = "auto" is a valid setting (chosen by fit_model on validation folds) but a direct serial
    fit has nothing to choose it on: a ModelError that names the fix."""
    from sparkhc.errors import ModelError
    from sparkhc.models import get_model_class
    from sparkhc.taxonomy import Taxonomy

    tax = Taxonomy.from_edges([("ROOT", "A"), ("ROOT", "B")])
    m = get_model_class("global")(tax, 3, C="auto")
    m.validate_params()
    batch = SparseBatch(sp.csr_matrix(np.eye(2, 3, dtype=np.float32)), np.array(["a", "b"]), [["A"], ["B"]])
    with pytest.raises(ModelError, match="give a number"):
        m.fit(batch, epochs=1)


def test_unit_rows_scales_non_unit_rows_and_keeps_unit_rows_bit_for_bit():
    from sparkhc.models.murawaki import unit_rows

    unit = np.float32(1 / np.sqrt(np.float32(3)))
    X = sp.csr_matrix(np.array([[3, 4, 0], [0, 0, 0], [unit, unit, unit], [0, 0, 0.5]], dtype=np.float32))
    Y = unit_rows(X)
    assert Y.toarray() == pytest.approx(np.array([[0.6, 0.8, 0], [0, 0, 0], [unit, unit, unit], [0, 0, 1]]))
    assert Y.dtype == np.float32 and Y[2].toarray().tobytes() == X[2].toarray().tobytes()
    assert unit_rows(sp.csr_matrix(Y.toarray()[[0, 2]])) .toarray().tobytes() == Y.toarray()[[0, 2]].tobytes()


def _scaled_batch(scale: float):
    rng = np.random.default_rng(4)
    tax = Taxonomy.from_edges([("ROOT", "A"), ("ROOT", "B"), ("A", "A1"), ("A", "A2"), ("B", "B1")])
    leaves = ["A1", "A2", "B1"]
    n, v = 60, 30
    X = np.zeros((n, v), dtype=np.float32)
    labels = []
    for i in range(n):
        lab = leaves[i % 3]
        X[i, rng.choice(v, 5, replace=False)] = rng.random(5) + 0.1
        X[i, leaves.index(lab)] += 1.0
        X[i] /= np.linalg.norm(X[i])
        labels.append([lab])
    return tax, SparseBatch(sp.csr_matrix(X * np.float32(scale)), np.array([f"d{i}" for i in range(n)]), labels)


def test_c_acts_on_unnormalised_features_and_the_scale_does_not_matter():
    """Raw-scale features (x 40, as tf-idf without a Normalizer): with normalize = "l2" (the configured default)
    C changes the weights and the model equals the one trained on the unit-norm features; with
    "off" the step min(C, loss / ||x||^2) never reaches C, so C = 0.1 and C = 10 train the same."""
    tax, unit = _scaled_batch(1.0)
    _, raw = _scaled_batch(40.0)

    def W(batch, **p):
        m = GlobalPA(tax, 30, branching=True, update="cost_augmented", bias=0.3, **{"normalize": "l2", **p})
        m.fit(batch, epochs=3, seed=0)
        return m.get_state().arrays["W"]

    assert not np.array_equal(W(raw, C=0.1), W(raw, C=10.0))
    np.testing.assert_allclose(W(raw, C=0.1), W(unit, C=0.1), atol=1e-5)
    assert np.array_equal(W(raw, C=0.1, normalize="off"), W(raw, C=10.0, normalize="off"))
    assert not np.allclose(W(raw, C=0.1, normalize="off"), W(unit, C=0.1))
