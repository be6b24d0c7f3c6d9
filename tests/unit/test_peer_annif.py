"""``benchmarks/peer_annif.py``: Annif's limit / threshold choice (``annif optimize``'s grid, criterion
and tie rule) on hand-computed cases, the filter applied to test suggestions, the validation slice
(training documents only), and one end-to-end run of the worker on a tiny synthetic corpus when the
Annif virtualenv exists (skipped otherwise). Nothing here imports Annif in this interpreter."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def pa():
    spec = importlib.util.spec_from_file_location("peer_annif_bench", ROOT / "benchmarks" / "peer_annif.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["peer_annif_bench"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_grid_is_annif_optimize(pa):
    assert pa.LIMITS == tuple(range(1, 16))
    assert len(pa.THRESHOLDS) == 20 and pa.THRESHOLDS[0] == 0.0 and pa.THRESHOLDS[-1] == pytest.approx(0.95)


def test_keep_mask_limit_threshold_and_zero_scores(pa):
    S = np.array([[0.9, 0.5, 0.3, 0.0],
                  [0.2, 0.1, 0.0, 0.0]])
    # limit 2, threshold 0.3: row 0 keeps 0.9, 0.5 (0.3 is past the limit); row 1 nothing passes
    assert pa.keep_mask(S, 2, 0.3).tolist() == [[True, True, False, False], [False, False, False, False]]
    # threshold 0: every suggestion up to the limit, but a 0 score is no suggestion
    assert pa.keep_mask(S, 4, 0.0).tolist() == [[True, True, True, False], [True, True, False, False]]
    # the threshold is inclusive
    assert pa.keep_mask(S, 3, 0.3)[0].tolist() == [True, True, True, False]


def test_doc_f1_is_sample_averaged(pa):
    kept = np.array([[True, False], [False, False], [True, True]])
    hits = np.array([[True, False], [False, False], [True, False]])
    n_gold = np.array([1, 0, 2])
    # doc 0: 2*1/(1+1) = 1; doc 1: nothing gold, nothing predicted -> 0 (scikit-learn's samples F1);
    # doc 2: 2*1/(2+2) = 0.5 -> mean 0.5
    assert pa.doc_f1(kept, hits, n_gold) == pytest.approx(0.5)
    # a gold label never suggested still counts in the denominator
    assert pa.doc_f1(np.array([[True]]), np.array([[True]]), np.array([3])) == pytest.approx(2 / 4)


def test_choose_limit_threshold_hand_computed(pa):
    # two documents, three suggestions each (best first)
    S = np.array([[0.8, 0.6, 0.1],
                  [0.7, 0.2, 0.1]])
    hits = np.array([[True, True, False],
                     [False, True, False]])
    n_gold = np.array([2, 1])
    limits, thresholds = (1, 2, 3), (0.0, 0.5)
    # (1, *):  doc0 2/3, doc1 0 (1 predicted, wrong)            -> 1/3
    # (2, 0.0): doc0 1, doc1 2*1/(2+1) = 2/3                    -> 5/6
    # (2, 0.5): doc0 1, doc1 keeps 0.7 only -> 0                -> 1/2
    # (3, 0.0): doc0 2*2/(3+2) = 0.8, doc1 2/(3+1) = 0.5        -> 0.65
    # (3, 0.5): as (2, 0.5)                                      -> 1/2
    lim, thr, f = pa.choose_limit_threshold(S, hits, n_gold, limits, thresholds)
    assert (lim, thr) == (2, 0.0)
    assert f == pytest.approx(5 / 6)


def test_choose_ties_go_to_the_later_pair_as_annif(pa):
    # one document, its one gold label ranked first with score 0.9, nothing else suggested:
    # every (limit, threshold <= 0.9) gives F1 1; annif optimize's `>=` keeps the last such pair
    S = np.array([[0.9, 0.0, 0.0]])
    hits = np.array([[True, False, False]])
    lim, thr, f = pa.choose_limit_threshold(S, hits, np.array([1]), (1, 2, 3), (0.0, 0.5, 0.95))
    assert (lim, thr, f) == (3, 0.5, 1.0)
    # nothing ever right: F1 0 everywhere, Annif's loop ends on the last pair
    lim, thr, f = pa.choose_limit_threshold(S, np.zeros_like(hits), np.array([1]), (1, 2), (0.0, 0.5))
    assert (lim, thr, f) == (2, 0.5, 0.0)


def test_choose_on_the_default_grid(pa):
    # doc 0 gold {a}; doc 1 gold {b, c}; the threshold must drop doc 0's weak second guess (0.3)
    # but keep doc 1's (0.4): best limit 2 with a threshold in (0.3, 0.4]; ties go later -> 0.40
    S = np.array([[0.9, 0.3], [0.8, 0.4]])
    hits = np.array([[True, False], [True, True]])
    lim, thr, f = pa.choose_limit_threshold(S, hits, np.array([1, 2]), limits=(1, 2))
    assert lim == 2 and thr == pytest.approx(0.40) and f == pytest.approx(1.0)


def test_suggestion_arrays_pad(pa):
    S, ids = pa.suggestion_arrays([[[3, 0.7], [1, 0.2]], []], 3)
    assert S.tolist() == [[0.7, 0.2, 0.0], [0.0, 0.0, 0.0]]
    assert ids.tolist() == [[3, 1, -1], [-1, -1, -1]]


def test_validation_slice_is_seeded_and_disjoint(pa):
    fit, val = pa.validation_slice(50, seed=3)
    assert val.size == 5 and fit.size == 45
    assert not set(fit.tolist()) & set(val.tolist())
    assert sorted([*fit.tolist(), *val.tolist()]) == list(range(50))
    f2, v2 = pa.validation_slice(50, seed=3)
    assert v2.tolist() == val.tolist()
    assert pa.validation_slice(50, seed=4)[1].tolist() != val.tolist()


def test_missing_interpreter_names_the_install_command(pa, monkeypatch, tmp_path):
    monkeypatch.setenv("ANNIF_PYTHON", str(tmp_path / "nope" / "python"))
    assert not pa.available()
    with pytest.raises(pa.AnnifUnavailable, match=r"pip install 'annif\[omikuji\]==1\.4\.\*'"):
        pa.check_available()
    with pytest.raises(pa.AnnifUnavailable):
        pa.run_annif(["a b"], [[0]], ["a"], ["x"], "parabel", 0)


def _synthetic(n: int, seed: int) -> tuple[list[str], list[list[int]]]:
    words = [["apple", "banana", "fruit", "orchard", "juice"],
             ["engine", "wheel", "road", "driver", "motor"],
             ["football", "goal", "match", "team", "league"]]
    rng = np.random.default_rng(seed)
    texts, labels = [], []
    for i in range(n):
        labs = [i % 3] + ([(i + 1) % 3] if i % 4 == 0 else [])
        texts.append(" ".join(str(rng.choice(words[j])) for j in labs for _ in range(10)) + ".")
        labels.append(labs)
    return texts, labels


def test_worker_end_to_end_on_a_tiny_corpus(pa):
    if not pa.available():
        pytest.skip(f"Annif virtualenv absent ({pa.annif_python()}); install: {pa.INSTALL}")
    if not Path(pa.nltk_data()).is_dir():
        pytest.skip(f"NLTK punkt_tab tables absent ({pa.nltk_data()})")
    tr_x, tr_y = _synthetic(90, 0)
    te_x, te_y = _synthetic(30, 1)
    names = ["fruit", "cars", "sport"]
    for variant in ("parabel", "bonsai"):
        pred, info = pa.run_annif(tr_x, tr_y, te_x, names, variant, seed=0)
        assert len(pred) == len(te_x)
        assert 1 <= info["limit"] <= 3 and 0.0 <= info["threshold"] <= 0.95
        assert info["n_val"] == 9 and info["n_fit"] == 81
        right = sum(set(p) == {names[j] for j in y} for p, y in zip(pred, te_y, strict=True))
        assert right >= 0.8 * len(te_x), (variant, pred[:5])
