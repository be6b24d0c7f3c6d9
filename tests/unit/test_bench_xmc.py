"""``benchmarks/peer_xmc.py`` (the napkinXC / PECOS rows of ``benchmarks/compare.py``) and
``benchmarks/small_corpora.py``: the threshold rule and the joint C / threshold choice on
hand-computed cases, the validation slice, the small corpora's label rule, and end-to-end runs of
napkinXC (skipped without ``napkinxc``) and of the PECOS worker (skipped without its virtualenv)
on a tiny synthetic corpus."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

ROOT = Path(__file__).resolve().parents[2]


def _load(name: str, file: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / file)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def px():
    return _load("peer_xmc_bench", "peer_xmc.py")


@pytest.fixture(scope="module")
def small():
    return _load("small_corpora_bench", "small_corpora.py")


def csr(rows: list[dict[int, float]], L: int) -> sp.csr_matrix:
    r = [i for i, row in enumerate(rows) for _ in row]
    c = [j for row in rows for j in row]
    v = [x for row in rows for x in row.values()]
    return sp.csr_matrix((v, (r, c)), shape=(len(rows), L))


def test_grid(px):
    assert px.THRESHOLDS[0] == 0.05 and px.THRESHOLDS[-1] == 0.95 and len(px.THRESHOLDS) == 19


def test_threshold_decode_keeps_scores_reaching_t_else_the_top_label(px):
    S = csr([{0: 0.9, 2: 0.3}, {1: 0.2, 3: 0.4}, {}, {1: 0.1, 2: 0.1}], 4)
    # t = 0.35: row 0 {0}; row 1 {3}; row 2 has no score: nothing; row 3: none passes, a tie of
    # tops -> the smaller column
    assert px.threshold_decode(S, 0.35).toarray().tolist() == [
        [True, False, False, False], [False, False, False, True], [False] * 4, [False, True, False, False]]
    # t = 0.25: row 0 keeps both; the threshold is inclusive
    assert px.threshold_decode(S, 0.25).toarray()[0].tolist() == [True, False, True, False]
    assert px.threshold_decode(S, 0.4).toarray()[1].tolist() == [False, False, False, True]


def test_micro_f1_hand_computed(px):
    Y = np.array([[1, 0, 1], [0, 1, 0]], dtype=bool)
    P = np.array([[1, 1, 0], [0, 1, 0]], dtype=bool)
    # TP 2, |Y| 3, |P| 3 -> 4/6
    assert px.micro_f1(Y, P) == pytest.approx(2 / 3)
    assert px.micro_f1(sp.csr_matrix(Y), sp.csr_matrix(P)) == pytest.approx(2 / 3)
    assert px.micro_f1(np.zeros((1, 2), bool), np.zeros((1, 2), bool)) == 0.0


def test_choose_rule_hand_computed(px):
    Y = csr([{0: 1}, {1: 1}], 2)  # doc 0 gold {a}, doc 1 gold {b}
    s1 = csr([{0: 0.9, 1: 0.3}, {0: 0.2, 1: 0.15}], 2)
    s2 = csr([{0: 0.6, 1: 0.55}, {1: 0.7}], 2)
    # C=1: t .10 -> {a,b},{a,b}: 4/6; .25 -> {a,b},{a} (fallback): 2/5; .50, .60 -> {a},{a}: 2/4
    # C=2: t .10, .25, .50 -> {a,b},{b}: 4/5; .60 -> {a},{b}: 1
    C, t, f, per_c = px.choose_rule({1.0: s1, 2.0: s2}, Y, (0.1, 0.25, 0.5, 0.6))
    assert (C, t) == (2.0, 0.6) and f == pytest.approx(1.0)
    assert per_c == {1.0: pytest.approx(2 / 3), 2.0: pytest.approx(1.0)}
    # ties: the smaller C, then the smaller threshold
    C, t, f, _ = px.choose_rule({4.0: s2, 2.0: s2, 1.0: s1}, Y, (0.1, 0.25, 0.5))
    assert (C, t) == (2.0, 0.1) and f == pytest.approx(0.8)


def test_master_threads(px):
    assert px.master_threads("local[2]") == 2
    assert px.master_threads("local[3, 2]") == 3
    assert px.master_threads("local") == 1
    import os

    assert px.master_threads("local[*]") == (os.cpu_count() or 1)


def test_validation_slice_is_sparkhcs_band_zero(px):
    from sparkhc.spark.hashing import validation_ids

    ids = np.array([f"d{i}" for i in range(400)], dtype=object)
    fit, val = px.validation_slice(ids, seed=3)
    held = validation_ids(ids, 0.1, 3, 0)
    assert val.tolist() == np.flatnonzero(held).tolist() and fit.tolist() == np.flatnonzero(~held).tolist()
    assert 20 <= val.size <= 60  # about 10 %
    assert px.validation_slice(ids, seed=4)[1].tolist() != val.tolist()


def test_missing_pecos_names_the_install_command(px, monkeypatch, tmp_path):
    monkeypatch.setenv("PECOS_PYTHON", str(tmp_path / "nope" / "python"))
    assert not px.pecos_available()
    with pytest.raises(px.PecosUnavailable, match="pip install --no-deps libpecos"):
        px.check_pecos()


def test_small_corpora_label_rule(small):
    edges = [("ROOT", "g1"), ("g1", "a"), ("g1", "b"), ("ROOT", "g2"), ("g2", "c")]
    train = [{"id": "1", "labels": ["a"]}, {"id": "2", "labels": ["c"]}]
    test = [{"id": "3", "labels": ["b"]}, {"id": "4", "labels": ["a", "b"]}, {"id": "5", "labels": ["c"]}]
    recs, kept, n = small.restrict(train, test, edges, "ROOT")
    # b has no training document: removed; test doc 3 is left without a label
    assert [(r["id"], r["labels"], r["split"]) for r in recs] == [
        ("1", ["a"], "train"), ("2", ["c"], "train"), ("4", ["a"], "test"), ("5", ["c"], "test")]
    assert kept == [("ROOT", "g1"), ("g1", "a"), ("ROOT", "g2"), ("g2", "c")]
    assert n == {"train": 2, "test": 2, "dropped_train": 0, "dropped_test": 1, "labels": 4}
    # with need_test (ApteMod's rule): c has no test document left either way
    recs, kept, n = small.restrict(train, test[:2], edges, "ROOT", need_test=True)
    assert [r["id"] for r in recs] == ["1", "4"] and kept == [("ROOT", "g1"), ("g1", "a")]
    assert n["dropped_train"] == 1 and n["dropped_test"] == 1 and n["labels"] == 2


def test_draw_is_seeded_and_keeps_order(small):
    a = small.draw(list(range(100, 200)), 10, np.random.default_rng(0), "x")
    assert a == sorted(a) and len(set(a)) == 10
    assert a == small.draw(list(range(100, 200)), 10, np.random.default_rng(0), "x")
    with pytest.raises(SystemExit, match="11 documents wanted, only 10"):
        small.draw(list(range(10)), 11, np.random.default_rng(0), "x")


def synthetic(n: int, seed: int) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """Three labels, each with its own 10 words (plus 10 shared noise words); every fourth document
    has two labels."""
    rng = np.random.default_rng(seed)
    X = np.zeros((n, 40))
    Y = np.zeros((n, 3), dtype=bool)
    for i in range(n):
        labs = [i % 3] + ([(i + 1) % 3] if i % 4 == 0 else [])
        for j in labs:
            Y[i, j] = True
            X[i, rng.choice(np.arange(10 * j, 10 * j + 10), size=4, replace=False)] = 1.0
        X[i, rng.choice(np.arange(30, 40), size=3, replace=False)] = 1.0
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    return sp.csr_matrix(X), sp.csr_matrix(Y)


def check_run(px, P: sp.csr_matrix, info: dict, Y: sp.csr_matrix, te: np.ndarray, grid: tuple) -> None:
    assert P.shape == (te.size, 3) and P.dtype == bool
    assert (np.diff(P.indptr) >= 1).all()  # the top-1 fallback: every document gets a label
    assert info["C"] in grid and info["threshold"] in px.THRESHOLDS
    assert info["n_val"] + info["n_fit"] == 240
    assert px.micro_f1(Y[te], P) >= 0.9


def test_napkinxc_end_to_end(px):
    pytest.importorskip("napkinxc", reason="napkinxc absent (the bench extra)")
    X, Y = synthetic(300, 0)
    ids = [f"doc{i}" for i in range(300)]
    tr, te = np.arange(240), np.arange(240, 300)
    poisoned = Y.tolil()
    poisoned[240:] = 0  # the test labels are never read
    P, secs, info = px.run_napkinxc(X, poisoned.tocsr(), tr, te, ids, seed=0, threads=2)
    check_run(px, P, info, Y, te, px.NAPKIN_C)
    assert secs > 0 and info["threads"] == 2


def test_pecos_worker_end_to_end(px):
    if not px.pecos_available():
        pytest.skip(f"PECOS virtualenv absent ({px.pecos_python()}); install: {px.PECOS_INSTALL}")
    X, Y = synthetic(300, 1)
    ids = [f"doc{i}" for i in range(300)]
    tr, te = np.arange(240), np.arange(240, 300)
    P, secs, info = px.run_pecos(X, Y, tr, te, ids, seed=0, threads=2)
    check_run(px, P, info, Y, te, px.PECOS_C)
    assert info["version"] == "1.2.8"
