"""``benchmarks/compare.py`` (issue 17, point 4): the SCut / SCutFBR.1 threshold choice on hand-computed
cases, and the tuned LIBLINEAR path reading no test label (poisoned test labels change no selected
value and no prediction)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def compare():
    spec = importlib.util.spec_from_file_location("compare_bench", ROOT / "benchmarks" / "compare.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["compare_bench"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_scut_picks_the_best_f1_cut(compare):
    # cut at 0.9: TP 1, 1 predicted, 2 gold -> F1 2/3; 0.8: 2/4; 0.7: TP 2 of 3 predicted -> 4/5;
    # 0.4: 4/6; 0.2: 4/7. Best 0.7 -> midway to the next lower score 0.4
    s = np.array([0.4, 0.9, 0.2, 0.7, 0.8])
    y = np.array([0, 1, 0, 1, 0], dtype=bool)
    thr, f1 = compare.scut_threshold(s, y)
    assert thr == pytest.approx(0.55)
    assert f1 == pytest.approx(0.8)
    # no label is below the best F1: SCutFBR.1 keeps the SCut threshold
    assert compare.scut_threshold(s, y, fbr=0.1) == (thr, f1)


def test_scut_ties_go_to_the_higher_threshold(compare):
    # cut at 4: 2/3; at 3: 2/4; at 2: 2/5; at 1: TP 2 of 4 predicted -> 4/6 = 2/3 (tie with 4)
    s = np.array([4.0, 3.0, 2.0, 1.0])
    y = np.array([1, 0, 0, 1], dtype=bool)
    thr, f1 = compare.scut_threshold(s, y)
    assert thr == pytest.approx(3.5)
    assert f1 == pytest.approx(2 / 3)


def test_scut_counts_tied_scores_together_and_can_take_every_document(compare):
    # scores 1, 1, 0: cut at 1 predicts two documents (TP 1) -> 2/3; at 0 -> 2/4
    thr, f1 = compare.scut_threshold(np.array([1.0, 1.0, 0.0]), np.array([1, 0, 0], dtype=bool))
    assert (thr, f1) == (pytest.approx(0.5), pytest.approx(2 / 3))
    # every document positive: cut below the lowest score
    thr, f1 = compare.scut_threshold(np.array([0.3, 0.1]), np.array([1, 1], dtype=bool))
    assert thr == float("-inf") and f1 == pytest.approx(1.0)


def test_scutfbr_falls_back_to_the_top_score_below_fbr(compare):
    # 25 documents scored 25..1, the one positive at score 6 (rank 20): best cut 6 with F1
    # 2*1 / (20 + 1) = 0.0952 (< 0.1); SCut cuts midway to 5, SCutFBR.1 at the top score 25
    s = np.arange(25, 0, -1, dtype=float)
    y = s == 6
    thr, f1 = compare.scut_threshold(s, y)
    assert thr == pytest.approx(5.5) and f1 == pytest.approx(2 / 21)
    thr, f1 = compare.scut_threshold(s, y, fbr=0.1)
    assert thr == 25.0 and f1 == pytest.approx(2 / 21)
    # above the fbr the SCut threshold stays
    assert compare.scut_threshold(s, y, fbr=0.09)[0] == pytest.approx(5.5)


def test_label_without_held_out_positive_is_never_predicted(compare):
    s = np.array([-1.0, -1.0, -1.0])
    y = np.zeros(3, dtype=bool)
    assert compare.scut_threshold(s, y) == (float("inf"), 0.0)
    assert compare.scut_threshold(s, y, fbr=0.1) == (float("inf"), 0.0)


def test_thresholded_flat_decode(compare):
    S = np.array([[0.2, -0.5], [-1.0, -2.0], [0.6, 0.0]])
    thr = np.array([0.5, -1.0])
    # row 0: only column 1 reaches its threshold; row 1: none, the largest S - thr is column 1
    # (-1.5 vs -1.0); row 2: both
    assert compare.flat_decode(S, thr).tolist() == [[False, True], [False, True], [True, True]]
    # threshold 0: FLAT decoding (S > 0, else the best)
    assert compare.flat_decode(S).tolist() == [[True, False], [True, False], [True, False]]


def test_inner_folds_are_balanced_and_seeded(compare):
    f = compare.inner_folds(10, 3, seed=4)
    assert sorted(np.bincount(f).tolist()) == [3, 3, 4]
    assert (f == compare.inner_folds(10, 3, seed=4)).all()


def corpus(n: int, L: int, seed: int) -> tuple[sp.csr_matrix, np.ndarray]:
    """Labels from a noisy linear rule over sparse features (one rare label)."""
    rng = np.random.default_rng(seed)
    V = 40
    X = sp.random(n, V, density=0.2, random_state=seed, format="csr")
    W = rng.normal(size=(V, L))
    Z = np.asarray(X @ W) + rng.normal(scale=0.5, size=(n, L))
    Y = Z > np.quantile(Z, 0.7, axis=0)
    Y[:, -1] = Z[:, -1] > np.quantile(Z[:, -1], 0.97)
    return X.tocsr(), Y


def test_poisoned_test_labels_change_no_selection_and_no_prediction(compare):
    X, Y = corpus(150, 4, seed=3)
    tr, te = np.arange(100), np.arange(100, 150)
    poisoned = Y.copy()
    poisoned[te] = ~poisoned[te]  # every test label flipped
    kw = {"grid": (0.25, 1.0, 4.0), "k": 3, "fbr": 0.1}
    out_a, sel_a = compare.run_liblinear(X, Y, tr, te, seed=0, **kw)
    out_b, sel_b = compare.run_liblinear(X, poisoned, tr, te, seed=0, **kw)
    assert sel_a is not None and sel_b is not None
    assert sel_a.C == sel_b.C and sel_a.cv_micro_f1 == sel_b.cv_micro_f1
    assert np.array_equal(sel_a.scut, sel_b.scut) and np.array_equal(sel_a.scutfbr, sel_b.scutfbr)
    assert out_a.keys() == out_b.keys()
    for row in out_a:
        assert np.array_equal(out_a[row][0], out_b[row][0]), row
    # the selection is not constant: other training labels change it
    _, sel_c = compare.run_liblinear(X, ~Y, tr, te, seed=0, **kw)
    assert sel_c is not None and not np.array_equal(sel_c.scut, sel_a.scut)
