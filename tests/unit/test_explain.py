"""The words behind a label (predict --explain, issue 56): the contributions of every feature plus the
bias sum to the edge score the decoder used, computed independently from the saved weights; the
largest ones named by the vocabulary, by hand."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from sparkhc.batch import SparseBatch
from sparkhc.decoding import dp_solve
from sparkhc.explain import explain, feature_name
from sparkhc.models.murawaki import FlatPA, GlobalPA, TreePA
from sparkhc.taxonomy import Taxonomy

EDGES = [("R", "A"), ("R", "B"), ("A", "A1"), ("A", "A2"), ("B", "B1"), ("B", "B2")]


def _batch(n: int = 40, v: int = 12, seed: int = 0) -> SparseBatch:
    rng = np.random.default_rng(seed)
    leaves = ["A1", "A2", "B1", "B2"]
    X = sp.random(n, v, density=0.4, random_state=seed, format="lil", dtype=np.float64)
    X[X.nonzero()] = rng.random(len(X.nonzero()[0])) * 3
    labels = [[leaves[i % 4]] + ([leaves[(i + 1) % 4]] if i % 5 == 0 else []) for i in range(n)]
    for i, ls in enumerate(labels):  # a word per label makes the data learnable
        X[i, [leaves.index(lab) for lab in ls]] = 4.0
    return SparseBatch(sp.csr_matrix(X), np.array([f"d{i}" for i in range(n)]), labels)


@pytest.mark.parametrize("params", [
    {"bias": 0.3, "normalize": "l2"},
    {"bias": 0.3, "normalize": "l2", "average": True, "R": 3},
    {"bias": 0.0, "normalize": "off"},
])
def test_contributions_sum_to_the_decoders_edge_scores(params):
    tax = Taxonomy.from_edges(EDGES)
    batch = _batch()
    model = GlobalPA(tax, batch.n_features, epochs=3, dtype="float64", **params).fit(batch)
    leaf_sets, _ = model.decode(batch)
    # independently: the document rows as the model sees them (unit L2 norm, then the bias feature)
    # times the weights the model predicts with (the averaged ones with average = True)
    X = batch.X.toarray()
    if params["normalize"] == "l2":
        X = X / np.linalg.norm(X, axis=1, keepdims=True)
    if params["bias"] > 0:
        X = np.hstack([X, np.full((len(X), 1), params["bias"])])
    W = model.averaged_arrays()["W"]
    S = X @ W
    redone = dp_solve(tax, S, bf=model.decode_bf(), R=3).leaf_sets(tax)
    assert [sorted(map(int, m)) for m in redone] == [sorted(map(int, m)) for m in leaf_sets]
    nodes = [np.arange(1, tax.n_nodes)] * len(batch)  # every node, chosen or not
    contrib = model.feature_contributions(batch, nodes)
    for i in range(len(batch)):
        for c, (fi, v) in zip(nodes[i], contrib[i], strict=True):
            assert v.sum() == pytest.approx(S[i, c - 1], abs=1e-12)
            e = explain(fi, v, 2, batch.n_features)
            assert e.score == pytest.approx(S[i, c - 1], abs=1e-12)
            want_bias = params["bias"] * W[batch.n_features, c - 1] if params["bias"] > 0 else 0.0
            assert e.bias == pytest.approx(want_bias, abs=1e-12)
    # the edge scores the decoder itself used (the model's own product)
    assert np.allclose(model.edge_scores_of(batch), S, atol=1e-12)


def test_tree_and_flat_columns():
    tax = Taxonomy.from_edges(EDGES)
    batch = _batch(seed=2)
    for cls in (TreePA, FlatPA):
        model = cls(tax, batch.n_features, epochs=2, dtype="float64", bias=0.5).fit(batch)
        sets, scores = model.decode(batch)
        contrib = model.feature_contributions(batch, [np.asarray(m) for m in sets])
        for i, m in enumerate(sets):
            for c, (_, v) in zip(m, contrib[i], strict=True):
                assert v.sum() == pytest.approx(float(scores[i, c]), rel=1e-6, abs=1e-6)


def test_the_largest_contributions_by_hand():
    # features 0..4 contribute 0.5, -1, 0.5, 2, 0.1; feature 5 is the bias feature (0.25)
    fi = np.array([0, 1, 2, 3, 4, 5])
    v = np.array([0.5, -1.0, 0.5, 2.0, 0.1, 0.25])
    e = explain(fi, v, 3, n_features=5, vocabulary=["ball", "vote", "goal", "match", "team"])
    assert e.features == ["match", "ball", "goal"]  # ties: the lower index first
    assert e.contributions == [2.0, 0.5, 0.5]
    assert e.bias == 0.25 and e.score == pytest.approx(2.35)
    assert explain(fi, v, 10, n_features=5).features == ["#3", "#0", "#2", "#4", "#1"]
    assert feature_name(7, None) == "#7" and feature_name(1, ["a", "b"]) == "b"
