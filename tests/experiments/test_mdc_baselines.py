"""The paper's MDC baselines (experiments/mdc_baselines.py) on tiny hand-checkable cases."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

pytest.importorskip("sklearn")

from experiments import mdc_baselines as mb  # noqa: E402


def test_one_hot_by_hand():
    # two class spaces with 2 and 3 classes: row (1, 2) -> [0 1 | 0 0 1]
    got = mb.one_hot(np.array([[1, 2], [0, 0]]), [2, 3])
    assert got.tolist() == [[0, 1, 0, 0, 1], [1, 0, 1, 0, 0]]


def test_class_powerset_maps_back_to_the_exact_combinations():
    Y = np.array([[0, 1, 2], [1, 0, 0], [0, 1, 2]])
    cp = mb.ClassPowerset()
    codes = cp.encode(Y)
    # two distinct combinations, sorted: (0,1,2) -> 0, (1,0,0) -> 1
    assert cp.combinations.tolist() == [[0, 1, 2], [1, 0, 0]]
    assert codes.tolist() == [0, 1, 0]
    assert cp.decode(codes).tolist() == Y.tolist()
    # fitted on separable features, it predicts the combinations themselves
    X = np.array([[-1.0], [1.0], [-1.2]])
    assert cp.fit(X, Y).predict(np.array([[-3.0], [3.0]])).tolist() == [[0, 1, 2], [1, 0, 0]]


def test_chain_features_append_earlier_spaces_one_hot():
    chain = mb.ClassifierChain(order=[1, 0])
    chain.n_classes = [2, 3]
    X = np.array([[5.0, 6.0], [7.0, 8.0]])
    Y = np.array([[1, 2], [0, 0]])
    # the first classifier (space 1) sees X only; the second (space 0) also sees space 1's one-hot
    assert chain.chain_features(X, Y, 0).tolist() == X.tolist()
    assert chain.chain_features(X, Y, 1).tolist() == [[5, 6, 0, 0, 1], [7, 8, 1, 0, 0]]
    sparse = chain.chain_features(sp.csr_matrix(X), Y, 1)
    assert sp.issparse(sparse) and sparse.toarray().tolist() == [[5, 6, 0, 0, 1], [7, 8, 1, 0, 0]]


class _Recorder:
    def __init__(self, out: list[int]) -> None:
        self.out, self.seen = np.asarray(out), []

    def predict(self, X):
        self.seen.append(np.asarray(X))
        return self.out


def test_chain_predicts_with_its_own_earlier_predictions():
    chain = mb.ClassifierChain(order=[1, 0])
    chain.n_classes = [2, 3]
    first, second = _Recorder([2, 0]), _Recorder([1, 1])
    chain.models = [first, second]  # type: ignore[list-item]
    X = np.array([[5.0], [7.0]])
    pred = chain.predict(X)
    # space 1 predicted (2, 0) by the first model; the second model saw X + one-hot(2), one-hot(0)
    assert second.seen[0].tolist() == [[5, 0, 0, 1], [7, 1, 0, 0]]
    assert pred.tolist() == [[1, 2], [1, 0]]


def test_chain_learns_a_space_that_copies_an_earlier_one():
    # space 1 = space 0, and the features say nothing about either beyond x's sign for space 0
    X = np.array([[-2.0], [-1.0], [1.0], [2.0]])
    Y = np.array([[0, 0], [0, 0], [1, 1], [1, 1]])
    chain = mb.ClassifierChain(order=[0, 1]).fit(X, Y, [2, 2])
    assert chain.predict(np.array([[-5.0], [5.0]])).tolist() == [[0, 0], [1, 1]]
    with pytest.raises(ValueError, match="not a permutation"):
        mb.ClassifierChain(order=[0, 0]).fit(X, Y, [2, 2])


def test_set_partitions_are_the_bell_numbers_and_distinct():
    for q, bell in ((1, 1), (2, 2), (3, 5), (4, 15)):
        parts = list(mb.set_partitions(range(q)))
        assert len(parts) == bell
        canon = {tuple(sorted(tuple(b) for b in p)) for p in parts}
        assert len(canon) == bell
        assert all(sorted(j for b in p for j in b) == list(range(q)) for p in parts)
        assert parts[0] == [(j,) for j in range(q)]


def test_super_class_classifier_puts_blocks_back_in_place():
    X = np.array([[-1.0], [1.0], [-1.1], [1.1]])
    Y = np.array([[0, 1, 0], [1, 0, 2], [0, 1, 0], [1, 0, 2]])
    sc = mb.SuperClassClassifier(partition=[(0, 2), (1,)]).fit(X, Y)
    assert sc.predict(np.array([[-4.0], [4.0]])).tolist() == [[0, 1, 0], [1, 0, 2]]


def test_majority_vote_per_space_ties_to_lowest_index():
    members = [np.array([[0, 2]]), np.array([[1, 2]]), np.array([[1, 0]]), np.array([[0, 1]])]
    # space 0: votes 0,1,1,0 -> tie -> 0; space 1: 2,2,0,1 -> 2
    assert mb.majority_vote(members, [2, 3]).tolist() == [[0, 2]]


@pytest.mark.parametrize("kind", mb.KINDS)
def test_ensembles_fit_67_percent_samples_and_recover_separable_labels(kind):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 3))
    Y = np.stack([(X[:, 0] > 0).astype(int), (X[:, 1] > 0).astype(int) + (X[:, 1] > 1).astype(int)], axis=1)
    ens = mb.Ensemble(kind, seed=3).fit(X, Y, [2, 3])
    assert len(ens.members) == 10
    acc = (ens.predict(X) == Y).mean()
    assert acc > 0.9
    again = mb.Ensemble(kind, seed=3).fit(X, Y, [2, 3])
    assert (again.predict(X) == ens.predict(X)).all()
    info = ens.describe()
    if kind == "ECC":
        assert all(sorted(o) == [0, 1] for o in info["orders"])
    if kind == "ESC":
        assert all(sorted(j for b in p for j in b) == [0, 1] for p in info["partitions"])


def test_ensemble_member_sample_size():
    X = np.arange(30, dtype=float).reshape(-1, 1)
    Y = np.stack([(X[:, 0] > 14).astype(int), (X[:, 0] > 14).astype(int)], axis=1)
    ens = mb.Ensemble("ECP", n_members=2, seed=0).fit(X, Y, [2, 2])
    # round(0.67 * 30) = 20 rows per member: each powerset SVM was fitted on 20 rows
    assert [m.model._svc.shape_fit_[0] for m in ens.members] == [20, 20]


def test_select_partition_scores_every_partition_on_held_out_rows():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(45, 2))
    Y = np.stack([(X[:, 0] > 0).astype(int), (X[:, 1] > 0).astype(int), (X[:, 0] + X[:, 1] > 0).astype(int)], axis=1)
    part, scores = mb.select_partition(X, Y, 1.0, np.random.default_rng(0))
    assert len(scores) == 5
    best = max(s["exact_match"] for s in scores)
    chosen = next(s for s in scores if s["partition"] == [list(b) for b in part])
    assert chosen["exact_match"] == best
