"""Decoders (sparkhc.decoding) against independent oracles.

* the worked examples in ``shared/fixtures/murawaki_worked_examples.json`` (computed outside the
  product by enumerating every non-empty leaf set);
* brute force written here: every non-empty set of leaves of small random taxonomies is scored
  from its definition (sum of edge scores over tree(m), plus one node-specific and one shared
  branching weight per internal node of tree(m), root included);
* a hand-worked 7-node example.
"""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from sparkhc.decoding import (
    bf_shape,
    dp_decode,
    dp_solve,
    dp_solve_one,
    edge_scores,
    flat_select,
    local_search,
    local_search_mask,
    mask_to_sets,
    nbest,
    row_scores,
    tree_index,
)
from sparkhc.taxonomy import Taxonomy

FIXTURES = Path(
    os.environ.get("SPARKHC_FIXTURES_DIR", Path(__file__).resolve().parents[2].parent / "shared" / "fixtures")
)
WORKED = FIXTURES / "murawaki_worked_examples.json"
BUCKET = {"1": 0, "2": 1, "3": 2, ">3": 3}


def load_cases() -> list[dict]:
    if not WORKED.is_file():
        return []
    return json.loads(WORKED.read_text())["cases"]


CASES = load_cases()
needs_fixture = pytest.mark.skipif(not CASES, reason=f"worked examples not found at {WORKED}")


def fixture_problem(case: dict) -> tuple[Taxonomy, np.ndarray, np.ndarray, np.ndarray]:
    """(taxonomy, x (1, V), W (V, n_edges), bf) of a worked example, in the product's layout."""
    tax = Taxonomy.from_edges([tuple(e) for e in case["taxonomy_edges"]], root=case["root"])
    V = 1 + max(int(f) for ws in case["edge_weights"].values() for f in ws)
    W = np.zeros((V, tax.n_edges))
    for key, ws in case["edge_weights"].items():
        _, child = key.split("->")
        for f, v in ws.items():
            W[int(f), tax.id(child) - 1] = v
    x = np.zeros((1, V))
    for f, v in case["x"].items():
        x[0, int(f)] = v
    bf = np.zeros(bf_shape(tax, 3))
    for key, v in case["bf_weights"].items():
        node, b = key.split("|")
        bf[-1 if node == "*" else tax.id(node), BUCKET[b]] = v
    return tax, x, W, bf


def names(tax: Taxonomy, ids) -> list[str]:
    return sorted(tax.names[int(i)] for i in ids)


# ------------------------------------------------------------------------------ worked examples
@needs_fixture
@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_worked_example_decoders(case):
    tax, x, W, bf = fixture_problem(case)
    S = edge_scores(sp.csr_matrix(x), W)
    for key, v in case["edge_scores"].items():
        assert S[0, tax.id(key.split("->")[1]) - 1] == pytest.approx(v, abs=1e-9)
    ex = case["expected"]
    assert names(tax, local_search(tax, S)[0]) == sorted(ex["local_search"])
    sets, scores = dp_decode(tax, S)
    assert names(tax, sets[0]) == sorted(ex["dp"]["labels"])
    assert scores[0] == pytest.approx(ex["dp"]["score"], abs=1e-9)
    sets, scores = dp_decode(tax, S, bf=bf, R=3)
    assert names(tax, sets[0]) == sorted(ex["dp_bf"]["labels"])
    assert scores[0] == pytest.approx(ex["dp_bf"]["score"], abs=1e-9)
    # the one-document training path agrees
    idx = tree_index(tax)
    for b, key in ((None, "dp"), (bf, "dp_bf")):
        sel, score, _ = dp_solve_one(idx, S[0], b)
        assert names(tax, np.flatnonzero(sel & idx.is_leaf)) == sorted(ex[key]["labels"])
        assert score == pytest.approx(ex[key]["score"], abs=1e-9)
    # the best of the N-best lists is the DP answer
    for b, key in ((None, "dp"), (bf, "dp_bf")):
        top = nbest(tax, S, 3, bf=b)[0]
        assert names(tax, top[0][0]) == sorted(ex[key]["labels"])
        assert top[0][1] == pytest.approx(ex[key]["score"], abs=1e-9)


@needs_fixture
def test_worked_examples_in_one_batch():
    """Several documents of one taxonomy decoded together give each document's answer."""
    same = [c for c in CASES if c["name"].startswith("wide-deep")]
    if len(same) < 2:
        pytest.skip("needs the two wide-deep cases")
    rows = []
    for c in same:
        tax, x, W, _ = fixture_problem(c)
        rows.append(edge_scores(sp.csr_matrix(x), W)[0])
    S = np.stack(rows + rows[::-1])
    order = same + same[::-1]
    sets, scores = dp_decode(tax, S)  # (the cases' branching weights differ: no BF here)
    for i, c in enumerate(order):
        assert names(tax, sets[i]) == sorted(c["expected"]["dp"]["labels"])
        assert scores[i] == pytest.approx(c["expected"]["dp"]["score"], abs=1e-9)
    ls = local_search(tax, S)
    for i, c in enumerate(order):
        assert names(tax, ls[i]) == sorted(c["expected"]["local_search"])


# ------------------------------------------------------------------------------- hand examples
def seven() -> Taxonomy:
    return Taxonomy.from_edges(
        [("ROOT", "A"), ("ROOT", "B"), ("A", "AA"), ("A", "AB"), ("B", "BA"), ("B", "BB")], root="ROOT"
    )


def scores_of(tax: Taxonomy, d: dict[str, float]) -> np.ndarray:
    s = np.zeros(tax.n_edges)
    for child, v in d.items():
        s[tax.id(child) - 1] = v
    return s


def test_local_search_vs_dp_by_hand():
    # ROOT->A = -0.1, ROOT->B = -0.2: no positive child at the root, LS takes the best, A;
    # under A nothing is positive either: LS takes AB (-0.3 > -0.5). The DP sees that
    # B's subtree is worth -0.2 + 1.0 + 0.5 = 1.3: it takes {BA, BB}.
    tax = seven()
    s = scores_of(tax, {"A": -0.1, "B": -0.2, "AA": -0.5, "AB": -0.3, "BA": 1.0, "BB": 0.5})
    assert names(tax, local_search(tax, s)[0]) == ["AB"]
    sets, score = dp_decode(tax, s)
    assert names(tax, sets[0]) == ["BA", "BB"]
    assert score[0] == pytest.approx(1.3)
    # with a shared penalty of 1 for two children at a node, {BA} alone is best: 0.8
    bf = np.zeros(bf_shape(tax))
    bf[-1, 1] = -1.0
    sets, score = dp_decode(tax, s, bf=bf)
    assert names(tax, sets[0]) == ["BA"]
    assert score[0] == pytest.approx(0.8)
    res = dp_solve(tax, s, bf=bf)
    assert res.k is not None
    assert res.k[0, 0] == 1 and res.k[0, tax.id("B")] == 1 and res.k[0, tax.id("A")] == 0


def test_ties_pick_the_first_best_child():
    tax = seven()
    s = scores_of(tax, {"A": -1.0, "B": -1.0, "AA": -2.0, "AB": -2.0, "BA": -2.0, "BB": -2.0})
    assert names(tax, local_search(tax, s)[0]) == ["AA"]
    assert names(tax, dp_decode(tax, s)[0][0]) == ["AA"]


def test_flat_select():
    S = np.array([[0.5, -1.0, 0.1], [-0.3, -0.2, -0.9], [0.0, 0.0, -1.0]])
    got = flat_select(S)
    assert got.tolist() == [[True, False, True], [False, True, False], [True, False, False]]


def test_edge_scores_and_row_scores():
    rng = np.random.default_rng(3)
    X = sp.random(20, 50, density=0.2, format="csr", random_state=4, dtype=np.float32)
    for dt in (np.float32, np.float64):
        W = rng.normal(size=(50, 7)).astype(dt)
        S = edge_scores(X, W)
        assert S.shape == (20, 7)
        np.testing.assert_allclose(S, X.toarray().astype(np.float64) @ W, rtol=1e-5, atol=1e-5)
        for i in range(20):
            a, b = X.indptr[i], X.indptr[i + 1]
            r = row_scores(W, X.indices[a:b], X.data[a:b])
            assert r.dtype == dt
            np.testing.assert_allclose(r, S[i], rtol=1e-5, atol=1e-6)
            r64 = row_scores(W, X.indices[a:b].astype(np.int64), X.data[a:b])
            np.testing.assert_allclose(r64, S[i], rtol=1e-5, atol=1e-6)


def test_mask_to_sets_keeps_empty_rows():
    m = np.array([[False, True, True], [False, False, False], [True, False, False]])
    got = mask_to_sets(m)
    assert [g.tolist() for g in got] == [[1, 2], [], [0]]


def test_bad_shapes_are_reported():
    tax = seven()
    with pytest.raises(ValueError, match="n_edges"):
        dp_decode(tax, np.zeros((2, 5)))
    with pytest.raises(ValueError, match="branching weights"):
        dp_decode(tax, np.zeros((2, 6)), bf=np.zeros((7, 4)))
    with pytest.raises(ValueError, match="n must be"):
        nbest(tax, np.zeros(6), 0)


def test_virtual_self_leaves_are_ordinary_leaves():
    tax = seven().with_self_leaves(["A"])
    s = np.full(tax.n_edges, -1.0)
    s[tax.id("A") - 1] = 2.0
    s[tax.id("A/_self") - 1] = 0.5
    sets, _ = dp_decode(tax, s)
    assert tax.to_labels(sets[0]) == ["A"]


# --------------------------------------------------------------------------------- brute force
def random_taxonomy(rng: np.random.Generator, depth: int, max_kids: int, p_grow: float) -> Taxonomy:
    """A random tree of the given depth; node names are random so that id order differs from
    creation order."""
    edges: list[tuple[str, str]] = []
    words = iter(rng.permutation(10_000).tolist())

    def grow(name: str, d: int) -> None:
        lo = 2 if d == 0 else 1
        k = int(rng.integers(lo, max(max_kids, lo) + 1))
        for _ in range(k):
            child = f"n{next(words)}"
            edges.append((name, child))
            if d + 1 < depth and rng.random() < p_grow:
                grow(child, d + 1)

    grow("ROOT", 0)
    return Taxonomy.from_edges(edges, root="ROOT")


SHAPES = [  # (depth, max children, probability of growing a subtree)
    (1, 9, 0.0),  # flat: one level of leaves
    (2, 3, 0.9),
    (3, 2, 0.9),
    (4, 2, 0.6),
    (4, 3, 0.4),
    (2, 6, 0.5),  # wide nodes: more than R = 3 children
    (4, 1, 1.0),  # unary chains
    (3, 4, 0.7),  # mixed numbers of children on one level
    (3, 3, 0.8),
]


def brute_all(tax: Taxonomy, s: np.ndarray, bf: np.ndarray | None, R: int = 3) -> list[tuple[float, tuple]]:
    """Every non-empty leaf set with its score from the definitions, best first."""
    parent = tax.parent
    leaves = [c for c in range(tax.n_nodes) if len(tax.children[c]) == 0]
    out = []
    for r in range(1, len(leaves) + 1):
        for m in itertools.combinations(leaves, r):
            tree: set[int] = set()
            for c in m:
                while c != 0:
                    tree.add(c)
                    c = int(parent[c])
            score = sum(float(s[c - 1]) for c in tree)
            if bf is not None:
                kids: dict[int, int] = {}
                for c in tree:
                    kids[int(parent[c])] = kids.get(int(parent[c]), 0) + 1
                for p, k in kids.items():
                    b = min(k, R + 1) - 1
                    score += float(bf[p, b]) + float(bf[-1, b])
            out.append((score, tuple(sorted(m))))
    out.sort(key=lambda t: -t[0])
    return out


def set_score(tax: Taxonomy, s: np.ndarray, bf: np.ndarray | None, m) -> float:
    key = tuple(sorted(int(c) for c in m))
    return dict((mm, sc) for sc, mm in brute_all(tax, s, bf))[key]


def problems(seed: int, n_tax: int, max_leaves: int = 10):
    rng = np.random.default_rng(seed)
    made = 0
    while made < n_tax:
        depth, kids, p = SHAPES[made % len(SHAPES)]
        tax = random_taxonomy(rng, depth, kids, p)
        if len(tax.leaves) > max_leaves:
            continue
        made += 1
        S = rng.normal(size=(3, tax.n_edges))
        bf = rng.normal(scale=0.8, size=bf_shape(tax))
        yield tax, S, bf


@pytest.mark.parametrize("with_bf", [False, True], ids=["dp", "dp_bf"])
def test_dp_is_the_exact_argmax(with_bf):
    for tax, S, bf in problems(11 if with_bf else 12, 36):
        b = bf if with_bf else None
        idx = tree_index(tax)
        res = dp_solve(tax, S, bf=b)
        sets = res.leaf_sets(idx)
        for i in range(S.shape[0]):
            ranked = brute_all(tax, S[i], b)
            assert res.score[i] == pytest.approx(ranked[0][0], abs=1e-9), tax.edges()
            assert tuple(sets[i].tolist()) == ranked[0][1]
            sel, score, k = dp_solve_one(idx, S[i], b)
            assert score == pytest.approx(ranked[0][0], abs=1e-9)
            assert np.array_equal(sel, res.selected[i])
            if with_bf:
                assert k is not None and res.k is not None
                assert np.array_equal(k, res.k[i])
                # k is the number of selected children of every selected node
                counts = np.bincount(idx.parent[np.flatnonzero(sel)[1:]], minlength=idx.n_nodes)
                assert np.array_equal(k, counts)


@pytest.mark.parametrize("shift", [-0.8, -1.5, -3.0])
def test_dp_bf_exact_when_few_offers_are_positive(shift):
    """The compiled DP skips the sum of the positive offers beyond the top R + 1 when no such
    offer exists (most edges of a large taxonomy score below 0); scores shifted down, so that wide
    nodes (more than R + 1 children) have 0, 1, ... positive offers: still the brute-force argmax,
    and ``with_k=False`` selects the same sets."""
    seen_wide = 0
    for tax, S, bf in problems(23, 30):
        idx = tree_index(tax)
        S = S + shift
        res = dp_solve(tax, S, bf=bf)
        lean = dp_solve(tax, S, bf=bf, with_k=False)
        assert np.array_equal(lean.selected, res.selected) and np.array_equal(lean.score, res.score)
        seen_wide += int((idx.n_children > 3).any())  # k > R = 3
        for i in range(S.shape[0]):
            ranked = brute_all(tax, S[i], bf)
            assert res.score[i] == pytest.approx(ranked[0][0], abs=1e-9), tax.edges()
            assert tuple(res.leaf_sets(idx)[i].tolist()) == ranked[0][1]
    assert seen_wide >= 3


@pytest.mark.parametrize("with_bf", [False, True], ids=["dp", "dp_bf"])
def test_dp_with_ties_is_still_optimal(with_bf):
    """Integer scores make ties everywhere: the set may be any argmax, the score is the max and
    the returned set really has that score."""
    rng = np.random.default_rng(5)
    for tax, _, _ in problems(13, 14):
        S = rng.integers(-2, 3, size=(4, tax.n_edges)).astype(np.float64)
        b = rng.integers(-1, 2, size=bf_shape(tax)).astype(np.float64) if with_bf else None
        idx = tree_index(tax)
        res = dp_solve(tax, S, bf=b)
        for i in range(S.shape[0]):
            best = brute_all(tax, S[i], b)[0][0]
            m = np.flatnonzero(res.selected[i] & idx.is_leaf)
            assert res.score[i] == pytest.approx(best)
            assert set_score(tax, S[i], b, m) == pytest.approx(best)
            sel, score, _ = dp_solve_one(idx, S[i], b)
            assert score == pytest.approx(best)
            assert set_score(tax, S[i], b, np.flatnonzero(sel & idx.is_leaf)) == pytest.approx(best)


def test_dp_score_is_never_below_local_search():
    for tax, S, _ in problems(17, 36):
        _, dp_scores = dp_decode(tax, S)
        for i, m in enumerate(local_search(tax, S)):
            assert len(m) >= 1
            assert dp_scores[i] >= set_score(tax, S[i], None, m) - 1e-12


def test_float32_scores_decode_like_float64():
    for tax, S, bf in problems(19, 14):
        S32 = S.astype(np.float32)
        a = dp_solve(tax, S32, bf=bf)
        b = dp_solve(tax, S32.astype(np.float64), bf=bf)
        assert np.array_equal(a.selected, b.selected)
        np.testing.assert_allclose(a.score, b.score, rtol=1e-5, atol=1e-5)
        assert np.array_equal(local_search_mask(tax, S32), local_search_mask(tax, S32.astype(np.float64)))


@pytest.mark.parametrize("with_bf", [False, True], ids=["plain", "bf"])
def test_nbest_equals_brute_force_top_n(with_bf):
    for tax, S, bf in problems(23 if with_bf else 29, 21):
        b = bf if with_bf else None
        for n in (1, 4, 9):
            got = nbest(tax, S, n, bf=b)
            for i in range(S.shape[0]):
                want = brute_all(tax, S[i], b)[:n]
                assert len(got[i]) == len(want)
                for (m, sc), (wsc, wm) in zip(got[i], want, strict=True):
                    assert sc == pytest.approx(wsc, abs=1e-9)
                    assert tuple(m.tolist()) == wm


def test_nbest_returns_every_set_when_n_is_large():
    tax = seven()
    s = np.random.default_rng(0).normal(size=tax.n_edges)
    got = nbest(tax, s, 100)[0]
    assert len(got) == 15  # 2^4 - 1 non-empty leaf sets
    assert len({tuple(m.tolist()) for m, _ in got}) == 15
    assert [sc for _, sc in got] == sorted((sc for _, sc in got), reverse=True)


def test_dp_on_a_level_with_interleaved_fanouts():
    """Parents with 2, 3 and 2 children on one level (and 5 under one of them): the batch path
    gathers non-consecutive children; checked against brute force for many score draws."""
    edges = [("R", "A"), ("R", "B"), ("R", "C")]
    edges += [("A", "A1"), ("A", "A2"), ("B", "B1"), ("B", "B2"), ("B", "B3"), ("C", "C1"), ("C", "C2")]
    edges += [("B2", f"B2{c}") for c in "abcde"]
    tax = Taxonomy.from_edges(edges, root="R")
    idx = tree_index(tax)
    assert any(g.block is None for lv in idx.levels for g in lv.groups)
    rng = np.random.default_rng(8)
    S = rng.normal(size=(6, tax.n_edges))
    bf = rng.normal(scale=0.5, size=bf_shape(tax))
    for b in (None, bf):
        sets, scores = dp_decode(tax, S, bf=b)
        for i in range(S.shape[0]):
            best_score, best_set = brute_all(tax, S[i], b)[0]
            assert scores[i] == pytest.approx(best_score, abs=1e-9)
            assert tuple(sets[i].tolist()) == best_set
