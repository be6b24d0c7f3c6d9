"""The FMM-vs-WBM investigation's data handling (experiments/li_yamanishi.py) on hand-made settings."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from experiments.li_yamanishi import SettingData, paired_categories, validation_split


def _setting() -> SettingData:
    # 10 training documents over 4 words; word 3 occurs only in document 9; category "c" only in document 9
    X = np.zeros((10, 4))
    X[:, 0] = 1
    X[::2, 1] = 2
    X[1::2, 2] = 1
    X[9, 3] = 5
    Y = np.zeros((10, 3), dtype=bool)
    Y[::2, 0] = True
    Y[1::2, 1] = True
    Y[9, 2] = True
    return SettingData("toy", sp.csr_matrix(X), sp.csr_matrix(np.ones((2, 4))), ["a", "b", "c"], Y, ["a", "b"],
                       np.zeros((2, 2), dtype=bool), ["w0", "w1", "w2", "w3"])


def test_validation_split_partitions_the_training_documents():
    data = _setting()
    seed = next(s for s in range(50) if 9 in np.random.default_rng(s).permutation(10)[:2])
    v = validation_split(data, fraction=0.2, seed=seed)
    assert v.X_train.shape[0] == 8 and v.X_test.shape[0] == 2
    # document 9 (the only one with word w3 and category c) is held out: the fitting part has neither
    assert v.vocab == ["w0", "w1", "w2"] and v.categories == ["a", "b"]
    assert v.Y_train.shape == (8, 2) and v.eval_categories == ["a", "b"]
    # the held-out rows are training rows: document 9 is [1, 0, 1] over w0..w2 with gold (a, b) = (no, yes)
    held = v.X_test.toarray().tolist()
    assert [1.0, 0.0, 1.0] in held
    assert v.Y_test[held.index([1.0, 0.0, 1.0])].tolist() in ([False, True],)
    # every fitting + validation row accounts for the 10 training documents' word-0 counts
    assert v.X_train[:, 0].sum() + v.X_test[:, 0].sum() == 10


def test_validation_split_refuses_an_evaluated_category_missing_from_the_fitting_part():
    data = _setting()
    data.eval_categories = ["a", "c"]
    data.Y_test = np.zeros((2, 2), dtype=bool)
    seeds = [s for s in range(50) if 9 in np.sort(np.random.default_rng(s).permutation(10)[:2])]
    with pytest.raises(ValueError, match="without a document in the fitting part"):
        validation_split(data, fraction=0.2, seed=seeds[0])


def test_paired_categories_counts_wins_and_is_one_sided():
    a = {"bep_per_category": {"x": 0.9, "y": 0.8, "z": 0.7, "u": 0.6, "v": 0.5, "w": 0.9}}
    b = {"bep_per_category": {"x": 0.5, "y": 0.5, "z": 0.5, "u": 0.5, "v": 0.4, "w": 0.1}}
    t = paired_categories(a, b)
    assert (t["n"], t["wins"], t["losses"]) == (6, 6, 0)
    # all six differences positive: the exact one-sided Wilcoxon p is 1 / 2^6
    assert t["p_greater"] == pytest.approx(1 / 64)
    assert t["mean_a"] == pytest.approx(np.mean([0.9, 0.8, 0.7, 0.6, 0.5, 0.9]))
