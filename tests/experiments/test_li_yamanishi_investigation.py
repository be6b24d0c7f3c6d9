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


def _methods(offset: float) -> dict:
    """Every main method of a setting at the paper's BEP + ``offset`` (the literal rows: + 2 offset)."""
    from experiments.li_yamanishi import LITERAL, PAPER_BEP, SETTINGS, main_methods, paper_name

    out = {}
    for st in SETTINGS:
        methods = {}
        for m in main_methods():
            base = PAPER_BEP[st].get(paper_name(m), 0.5)
            b = base + (2 * offset if m.endswith(LITERAL) else offset)
            methods[m] = {"bep": b, "bep_per_category": {"a": b, "b": b - 0.1, "c": b + 0.1}}
        out[st] = {"methods": methods, "stats": {"n_train": 100, "train_docs_without_category": 40,
                                                 "train_docs_with_several_categories": 7}}
    return out


def test_reading_row_names_the_closer_reading_and_claim_rows_their_reading() -> None:
    """Issue 55: the f(w) row said "(the literal reading is the closer)" whichever reading won, and
    the claim rows (Σ_c f(w|c)) were labelled "paper-faithful"."""
    from experiments.li_yamanishi import _reading_counts, findings_rows

    for offset, closer, verdict in ((0.01, "Σ_c f(w|c)", "does not hold (untested)"),
                                    (-0.01, "Σ_c f(w|c)", "does not hold (untested)")):
        rows = findings_rows({"configs": {"lewis": _methods(offset)}})
        (row,) = [r for r in rows if r.startswith("| which reading")]
        esc = closer.replace("|", "\\|")  # a "|" inside a table cell is escaped
        assert f"closer: {esc}" in row and f"{verdict} (the {esc} reading is the closer)" in row
        assert row.count(" | ") == 4  # five cells
    # literal rows nearer the paper: literal BEP = paper, the default reading 0.02 off
    lit = _methods(0.0)
    for st in lit.values():
        for m, v in st["methods"].items():
            if not m.endswith(" literal f(w)"):
                v["bep"] += 0.02
    (row,) = [r for r in findings_rows({"configs": {"lewis": lit}}) if r.startswith("| which reading")]
    assert "holds (untested) (the literal reading is the closer)" in row
    rows = findings_rows({"configs": {"lewis": _methods(0.0)}})
    assert not any("paper-faithful" in r for r in rows)
    assert sum("(f(w) = Σ_c f(w\\|c), this page's default reading)" in r for r in rows) == 6
    assert _reading_counts({"configs": {"lewis": _methods(0.0)}}) == (
        " On the Lewis split, nine_commodities: 40 of 100 training documents without a category, 7 with several; "
        "ten_largest: 40 of 100 training documents without a category, 7 with several.")
