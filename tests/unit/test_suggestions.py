"""Calibrated label scores and suggestions (sparkhc.suggestions, issue 56): margins by hand and by
brute-force enumeration of every label tree, the margin -> precision calibration by hand, and its
meaning (a threshold keeps a set of that precision)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from sparkhc.calibration import FoldScores
from sparkhc.decoding import bf_shape, tree_index
from sparkhc.suggestions import (
    SuggestionCalibration,
    concept_margins,
    fit_calibration,
    fit_on_folds,
    too_large,
    top_candidates,
)
from sparkhc.taxonomy import Taxonomy

SMALL = [("R", "A"), ("R", "B"), ("A", "A1"), ("A", "A2")]


def test_margins_by_hand():
    # edges A, B, A1, A2 (level order); the best tree is {A, A1} = 1.0 + 0.5
    tax = Taxonomy.from_edges(SMALL)
    assert list(tax.names[1:]) == ["A", "B", "A1", "A2"]
    S = np.array([[1.0, -0.5, 0.5, -0.2]])
    m, chosen, cc = concept_margins(tax, S)
    got = dict(zip(cc.names, m[0], strict=True))
    assert dict(zip(cc.names, chosen[0], strict=True)) == {"A": True, "B": False, "A1": True, "A2": False}
    # A: 1.5 - best without A ({B} = -0.5); A1: 1.5 - {A, A2} = 0.8; A2: {A, A1, A2} = 1.3 - 1.5; B: {A, A1, B} - 1.5
    assert got == pytest.approx({"A": 2.0, "A1": 0.7, "A2": -0.2, "B": -0.5}, abs=1e-9)
    assert top_candidates(m, chosen, 5) == [[(cc.names.index("A2"), pytest.approx(-0.2)),
                                             (cc.names.index("B"), pytest.approx(-0.5))]]
    assert top_candidates(m, chosen, 1)[0][0][0] == cc.names.index("A2")


def _trees(tax: Taxonomy) -> list[np.ndarray]:
    """Every label tree (node mask) of a taxonomy: the closures of the non-empty leaf sets."""
    idx = tree_index(tax)
    leaves = list(idx.leaves)
    return [idx.closure(np.array(s)) for r in range(1, len(leaves) + 1) for s in itertools.combinations(leaves, r)]


def _tree_score(tax: Taxonomy, mask: np.ndarray, s: np.ndarray, bf: np.ndarray | None, R: int) -> float:
    total = float(s[np.flatnonzero(mask)[1:] - 1].sum())
    if bf is not None:
        for p in np.flatnonzero(mask & ~tax.is_leaf):
            k = int(np.count_nonzero(mask[tax.children[p]]))
            b = min(k, R + 1) - 1
            total += float(bf[p, b] + bf[-1, b])
    return total


@pytest.mark.parametrize("with_bf", [False, True])
@pytest.mark.parametrize("edges", [
    [("R", "A"), ("R", "B"), ("A", "A1"), ("A", "A2"), ("B", "B1"), ("B", "B2"), ("B", "B3")],
    # a polyhierarchy: ibm and mac under comp and hw, disk under ibm (two positions each)
    [("R", "comp"), ("R", "hw"), ("comp", "ibm"), ("comp", "mac"), ("comp", "gfx"), ("hw", "ibm"), ("hw", "mac"),
     ("ibm", "disk")],
])
def test_margins_equal_brute_force(edges, with_bf):
    tax = Taxonomy.from_edges(edges)
    rng = np.random.default_rng(4)
    R = 2
    S = rng.normal(size=(6, tax.n_edges))
    bf = rng.normal(scale=0.5, size=bf_shape(tax, R)) if with_bf else None
    m, chosen, cc = concept_margins(tax, S, bf, R)
    trees = _trees(tax)
    concept_sets = [{tax.concept_name(c) for c in np.flatnonzero(t)[1:]} for t in trees]
    for i in range(len(S)):
        scores = np.array([_tree_score(tax, t, S[i], bf, R) for t in trees])
        best = int(np.argmax(scores))
        for j, name in enumerate(cc.names):
            has = np.array([name in cs for cs in concept_sets])
            assert chosen[i, j] == (name in concept_sets[best])
            want = scores[has].max() - scores[~has].max()
            assert m[i, j] == pytest.approx(want, abs=1e-8), (i, name)


def test_calibration_by_hand():
    # margins descending 0, -1, -2, -3, -4 with correct 1, 1, 0, 1, 0: precisions of "margin >= s" are
    # 1, 1, 2/3, 3/4, 3/5; their running maximum from the lowest margin up: .6, .75, .75, 1, 1
    cal = fit_calibration(np.array([0.0, -1, -2, -3, -4]), np.array([1, 1, 0, 1, 0]), documents=2, min_support=1)
    assert cal.margins.tolist() == [-4.0, -3.0, -1.0]
    assert cal.precision.tolist() == [0.6, 0.75, 1.0]
    assert (cal.documents, cal.labels, cal.correct) == (2, 5, 3)
    assert cal.score([-9.0, -4.0, -2.5, -2.0, -1.0, 3.0]).tolist() == [0.6, 0.6, 0.75, 0.75, 1.0, 1.0]
    assert SuggestionCalibration.from_dict(cal.to_dict()).to_dict() == cal.to_dict()


def test_min_support_holds_the_top_of_the_curve():
    # the single best label is wrong, the next three right: with a support of 4 the top precision is 3/4
    cal = fit_calibration(np.array([5.0, 4, 3, 2]), np.array([0, 1, 1, 1]), min_support=4)
    assert cal.score([5.0]).tolist() == [0.75]
    assert fit_calibration(np.array([5.0, 4, 3, 2]), np.array([0, 1, 1, 1]), min_support=1).score([5.0]).tolist() == [
        0.75]  # 0/1 at 5, then the running maximum from below: 3/4 at 2 already


def test_a_threshold_keeps_a_set_of_that_precision():
    rng = np.random.default_rng(1)
    m = rng.normal(size=4000)
    y = rng.random(4000) < 1 / (1 + np.exp(-3 * m))
    cal = fit_calibration(m, y, min_support=50)
    q = cal.score(m)
    for t in (0.5, 0.7, 0.9):
        keep = q >= t
        assert keep.sum() >= 50
        assert y[keep].mean() >= t - 1e-3  # (the scores are rounded to 3 decimals)
        # and it is the largest such set: lowering the cut by one more label falls below t
        cut = m[keep].min()
        below = m < cut
        if below.any():
            nxt = m[below].max()
            assert y[m >= nxt].mean() < t + 1e-3


def test_fit_on_folds_counts_the_shown_labels():
    # one document, the scores of test_margins_by_hand: predicted A1 (deepest), not chosen A2 and B
    tax = Taxonomy.from_edges(SMALL)
    gold = np.zeros((1, tax.n_nodes), dtype=bool)
    gold[0, [0, tax.id("A"), tax.id("A2")]] = True
    fold = FoldScores(np.array([[1.0, -0.5, 0.5, -0.2]]), None, gold)
    cal = fit_on_folds(tax, [fold], [np.zeros(tax.n_edges)], min_support=1)
    assert (cal.documents, cal.labels, cal.correct) == (1, 3, 1)
    # A1 (0.7) wrong; A2 (-0.2) right; B (-0.5) wrong: precisions 0, 1/2, 1/3 -> running maximum .333, .5, .5
    assert cal.margins.tolist() == pytest.approx([-0.5, -0.2])
    assert cal.precision.tolist() == [0.333, 0.5]
    # the offsets a fold was decoded with move its margins: +1 on B makes {A, A1, B} the best tree
    cal2 = fit_on_folds(tax, [fold], [np.array([0.0, 1.0, 0.0, 0.0])], min_support=1)
    assert cal2.labels == 3 and cal2.correct == 1


def test_too_large_names_the_limit():
    assert too_large(2000) == ""
    assert "MAX_CELLS_PER_DOC" in too_large(3000)
