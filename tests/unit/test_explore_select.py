"""Validation-only selection in ``benchmarks/explore_gt.py`` (issue 17): the choice of variant and
epoch count reads the training documents only; the test labels are read once, after."""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from sparkhc.batch import SparseBatch
from sparkhc.taxonomy import Taxonomy

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def explore():
    spec = importlib.util.spec_from_file_location("explore_gt", ROOT / "benchmarks" / "explore_gt.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["explore_gt"] = mod
    spec.loader.exec_module(mod)
    return mod


def noisy_corpus(n: int, seed: int) -> tuple[Taxonomy, SparseBatch]:
    """Nine leaves under three parents; a leaf's own feature is present only 70% of the time,
    plus noise features, so that variants and epoch counts score differently."""
    edges = [("ROOT", a) for a in "ABC"] + [(a, a + b) for a in "ABC" for b in "xyz"]
    tax = Taxonomy.from_edges(edges, root="ROOT")
    leaves = [tax.names[i] for i in tax.leaves]
    rng = np.random.default_rng(seed)
    V = len(leaves) + 30
    rows, labels = [], []
    for _ in range(n):
        m = sorted(rng.choice(len(leaves), int(rng.integers(1, 3)), replace=False))
        x = np.zeros(V)
        for j in m:
            x[j] = 1.0 if rng.random() < 0.7 else 0.0
            x[len(leaves) + 3 * j + rng.integers(0, 3)] += 0.5
        x[len(leaves) + rng.integers(0, 30, 4)] += 0.4
        rows.append(x / np.linalg.norm(x))
        labels.append([leaves[j] for j in m])
    X = sp.csr_matrix(np.array(rows, dtype=np.float32))
    return tax, SparseBatch(X, np.array([f"d{i}" for i in range(n)]), labels)


def make_round(explore, poison: bool):
    tax, b = noisy_corpus(260, seed=5)
    tr, te = b.subset(np.arange(180)), b.subset(np.arange(180, 260))
    if poison:  # every test document labelled with one leaf, wrong for most of them
        te = dataclasses.replace(te, labels=[["Cz"] for _ in range(len(te))])
    mask = ~tax.virtual.copy()
    mask[0] = False
    return explore.Round(tr, te, tax, explore.model_taxonomy(tax, tr), mask, b.n_features)


@pytest.mark.parametrize("shards,inner_folds,metric", [(1, 0, "hF"), (2, 3, "LBMaF+hF")])
def test_poisoned_test_labels_change_nothing_but_the_test_score(explore, shards, inner_folds, metric):
    variants = ["C=0.05", "branching=True,update='cost_augmented',bias=0.3", "C=1.0,pa='II'",
                "branching=True,update='cost_augmented',bias=0.3,margin_rare=0.25"]
    runs = []
    for poison in (False, True):
        rnd = make_round(explore, poison)
        runs.append(explore.select_and_test(rnd, variants, epochs=4, shards=shards, seed=1,
                                            inner_folds=inner_folds, metric=metric))
    (sel0, model0, test0), (sel1, model1, test1) = runs
    assert (sel0.variant, sel0.epochs) == (sel1.variant, sel1.epochs)
    assert sel0.table == sel1.table  # every validation figure of every variant and epoch
    a0, a1 = model0.get_state().arrays, model1.get_state().arrays
    assert sorted(a0) == sorted(a1)
    for k in a0:
        np.testing.assert_array_equal(a0[k], a1[k])
    # the selection is not trivial (the validation scores differ) and the poison reached the test score
    scores = {round(r["hF"], 6) for rows in sel0.table.values() for r in rows}
    assert len(scores) > 1
    assert test1["hF"] < test0["hF"] - 0.2


def test_validation_splits_are_seeded_disjoint_and_cover_the_training_part(explore):
    (fit, val), = explore.validation_splits(50, 0.2, 0, seed=3)
    assert len(val) == 10 and len(fit) == 40
    assert np.array_equal(np.sort(np.concatenate([fit, val])), np.arange(50))
    (fit2, val2), = explore.validation_splits(50, 0.2, 0, seed=3)
    assert np.array_equal(val, val2)
    (_, val3), = explore.validation_splits(50, 0.2, 0, seed=4)
    assert not np.array_equal(val, val3)
    folds = explore.validation_splits(23, 0.2, 4, seed=0)
    assert len(folds) == 4
    vals = np.concatenate([v for _, v in folds])
    assert np.array_equal(np.sort(vals), np.arange(23))  # every document validates exactly once
    assert sorted(len(v) for _, v in folds) == [5, 6, 6, 6]
    for f, v in folds:
        assert not set(f) & set(v) and len(f) + len(v) == 23


@pytest.mark.parametrize("metric", ["EBF", "LBMaF+hF"])
def test_selection_picks_the_best_validation_row(explore, metric):
    rnd = make_round(explore, poison=False)
    sel = explore.select(rnd.train, rnd.tax, rnd.mask, rnd.n_features, ["C=0.05", "C=1.0"], epochs=3,
                         shards=1, seed=0, metric=metric)
    flat = [(sum(r[k] for k in metric.split("+")), -vi, -e)
            for vi, v in enumerate(["C=0.05", "C=1.0"]) for e, r in enumerate(sel.table[v])]
    best = max(flat)
    assert (sel.variant, sel.epochs) == (["C=0.05", "C=1.0"][-best[1]], -best[2] + 1)
