"""The MDC baselines of Jia & Zhang (AAAI 2020): ensembles of classifier chains (ECC), of class
powersets (ECP) and of super-class classifiers (ESC), after Read, Bielza & Larrañaga (2014).

The paper's setting ("Comparing approaches"): each ensemble has 10 base MDC models, each trained
on a random cut of 67 % of the training examples (drawn without replacement); the members'
predictions are combined by majority voting; the base classifier is LIBSVM with a linear kernel
(scikit-learn's :class:`sklearn.svm.SVC` is LIBSVM; default ``C = 1``, one-vs-one multi-class).

Choices where the paper is silent (stated on the results page):

* majority voting is per class space (each class variable gets the value most members predict;
  ties go to the lowest class index), as MEKA's multi-target ensembles do;
* a classifier chain is trained on the true values of the earlier class spaces (one-hot) and
  predicts with its own earlier predictions; each ECC member draws a random chain order;
* a super-class classifier partitions the class spaces into blocks and trains a class powerset per
  block. Read et al. search partitions by simulated annealing scored on an internal split; with
  at most a handful of class spaces (2 or 3 here) every partition is tried (Bell(q) of them) and
  the one with the best exact match on an internal validation third of the member's sample is kept
  (ties: fewer blocks, then enumeration order), then refitted on the whole member sample.
  The NSR-style pruning of rare combinations is not done.

Everything here is experiment code (scikit-learn is a test / bench extra); the product's own
models are in :mod:`sparkhc.models.jia_zhang`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp

from sparkhc.models.jia_zhang.solver import mdc_metrics

#: the paper's ensemble settings
N_MEMBERS = 10
SAMPLE_FRACTION = 0.67
LIBSVM_DEFAULT_C = 1.0
#: share of an ESC member's sample held out to score the candidate partitions
ESC_VALIDATION_FRACTION = 1.0 / 3.0
#: exhaustive partition search up to this many class spaces (Bell(6) = 203 partitions)
MAX_EXHAUSTIVE_SPACES = 6

Matrix = Any  # numpy array or scipy sparse matrix


class _Base:
    """A LIBSVM linear SVM (``SVC(kernel="linear")``) that also accepts a single training class
    (it then predicts that class; LIBSVM refuses one class)."""

    def __init__(self, C: float = LIBSVM_DEFAULT_C) -> None:
        self.C = C
        self._constant: int | None = None
        self._svc: Any = None

    def fit(self, X: Matrix, y: np.ndarray) -> _Base:
        y = np.asarray(y)
        classes = np.unique(y)
        if classes.size == 1:
            self._constant, self._svc = int(classes[0]), None
            return self
        from sklearn.svm import SVC

        self._constant = None
        self._svc = SVC(kernel="linear", C=self.C).fit(X, y)
        return self

    def predict(self, X: Matrix) -> np.ndarray:
        if self._constant is not None:
            return np.full(X.shape[0], self._constant, dtype=np.int64)
        if self._svc is None:
            raise RuntimeError("not fitted")
        return np.asarray(self._svc.predict(X), dtype=np.int64)


def _hstack(X: Matrix, extra: np.ndarray) -> Matrix:
    if sp.issparse(X):
        return sp.hstack([X, sp.csr_matrix(extra)], format="csr")
    return np.hstack([np.asarray(X, dtype=np.float64), extra])


def one_hot(Y: np.ndarray, n_classes: Sequence[int]) -> np.ndarray:
    """``(n, Σ K_j)`` one-hot encoding of the class indices ``Y`` (``(n, q)``), class space by class space."""
    Y = np.asarray(Y, dtype=np.int64).reshape(len(Y), -1)
    out = np.zeros((Y.shape[0], int(sum(n_classes))), dtype=np.float64)
    offset = 0
    for j, k in enumerate(n_classes):
        out[np.arange(Y.shape[0]), offset + Y[:, j]] = 1.0
        offset += int(k)
    return out


class ClassifierChain:
    """Classifier chain over class spaces in ``order``: the classifier of the t-th space in the
    order sees the features plus the one-hot values of the spaces before it (true values in
    training, its own predictions at test time)."""

    def __init__(self, order: Sequence[int], C: float = LIBSVM_DEFAULT_C) -> None:
        self.order = [int(j) for j in order]
        self.C = C
        self.n_classes: list[int] = []
        self.models: list[_Base] = []

    def chain_features(self, X: Matrix, Y_prev: np.ndarray, position: int) -> Matrix:
        """The input of the ``position``-th classifier: ``X`` and the one-hot values, in ``Y_prev``
        (``(n, q)`` class indices in the original column order), of the spaces before it."""
        before = self.order[:position]
        if not before:
            return X
        return _hstack(X, one_hot(np.asarray(Y_prev)[:, before], [self.n_classes[j] for j in before]))

    def fit(self, X: Matrix, Y: np.ndarray, n_classes: Sequence[int]) -> ClassifierChain:
        Y = np.asarray(Y, dtype=np.int64)
        if sorted(self.order) != list(range(Y.shape[1])):
            raise ValueError(f"chain order {self.order} is not a permutation of the {Y.shape[1]} class spaces")
        self.n_classes = [int(k) for k in n_classes]
        self.models = [_Base(self.C).fit(self.chain_features(X, Y, t), Y[:, j]) for t, j in enumerate(self.order)]
        return self

    def predict(self, X: Matrix) -> np.ndarray:
        pred = np.zeros((X.shape[0], len(self.order)), dtype=np.int64)
        for t, (j, model) in enumerate(zip(self.order, self.models, strict=True)):
            pred[:, j] = model.predict(self.chain_features(X, pred, t))
        return pred


class ClassPowerset:
    """One multi-class SVM over the label combinations of the training data (powerset transform)."""

    def __init__(self, C: float = LIBSVM_DEFAULT_C) -> None:
        self.C = C
        self.combinations: np.ndarray = np.zeros((0, 0), dtype=np.int64)
        self.model = _Base(C)

    def encode(self, Y: np.ndarray) -> np.ndarray:
        """Fit the combinations of ``Y`` (rows, sorted) and return each row's combination index."""
        self.combinations, codes = np.unique(np.asarray(Y, dtype=np.int64), axis=0, return_inverse=True)
        return np.asarray(codes, dtype=np.int64).ravel()

    def decode(self, codes: np.ndarray) -> np.ndarray:
        return self.combinations[np.asarray(codes, dtype=np.int64)]

    def fit(self, X: Matrix, Y: np.ndarray, n_classes: Sequence[int] | None = None) -> ClassPowerset:
        self.model = _Base(self.C).fit(X, self.encode(Y))
        return self

    def predict(self, X: Matrix) -> np.ndarray:
        return self.decode(self.model.predict(X))


class BinaryRelevance:
    """One LIBSVM linear SVM per class space, independently (the paper's BR)."""

    def __init__(self, C: float = LIBSVM_DEFAULT_C) -> None:
        self.C = C
        self.models: list[_Base] = []

    def fit(self, X: Matrix, Y: np.ndarray, n_classes: Sequence[int] | None = None) -> BinaryRelevance:
        Y = np.asarray(Y, dtype=np.int64)
        self.models = [_Base(self.C).fit(X, Y[:, j]) for j in range(Y.shape[1])]
        return self

    def predict(self, X: Matrix) -> np.ndarray:
        return np.stack([m.predict(X) for m in self.models], axis=1)


def set_partitions(items: Sequence[int]) -> Iterator[list[tuple[int, ...]]]:
    """Every partition of ``items`` into non-empty blocks (Bell(len(items)) of them), each block
    in item order; the all-singletons partition comes first."""
    items = list(items)
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    for part in set_partitions(rest):
        yield [(first,), *part]
        for i in range(len(part)):
            yield [*part[:i], (first, *part[i]), *part[i + 1:]]


class SuperClassClassifier:
    """A class powerset per block of a partition of the class spaces (``partition``; ``None``:
    chosen on an internal validation split when fitted, see :func:`select_partition`)."""

    def __init__(self, partition: Sequence[Sequence[int]] | None = None, C: float = LIBSVM_DEFAULT_C,
                 seed: int = 0) -> None:
        self.partition = None if partition is None else [tuple(int(j) for j in b) for b in partition]
        self.C = C
        self.seed = seed
        self.blocks: list[ClassPowerset] = []
        self.selection: list[dict[str, Any]] = []

    def fit(self, X: Matrix, Y: np.ndarray, n_classes: Sequence[int] | None = None) -> SuperClassClassifier:
        Y = np.asarray(Y, dtype=np.int64)
        if self.partition is None:
            self.partition, self.selection = select_partition(X, Y, self.C, np.random.default_rng(self.seed))
        self.blocks = [ClassPowerset(self.C).fit(X, Y[:, list(b)]) for b in self.partition]
        return self

    def predict(self, X: Matrix) -> np.ndarray:
        if self.partition is None:
            raise RuntimeError("not fitted")
        q = sum(len(b) for b in self.partition)
        pred = np.zeros((X.shape[0], q), dtype=np.int64)
        for block, model in zip(self.partition, self.blocks, strict=True):
            pred[:, list(block)] = model.predict(X)
        return pred


def select_partition(X: Matrix, Y: np.ndarray, C: float, rng: np.random.Generator,
                     val_fraction: float = ESC_VALIDATION_FRACTION) -> tuple[list[tuple[int, ...]], list[dict[str, Any]]]:
    """The partition of the class spaces whose super-class classifier, trained on a random
    ``1 − val_fraction`` of the rows, has the best exact match on the rest (ties: fewer blocks,
    then enumeration order); also every candidate's score."""
    q = Y.shape[1]
    if q > MAX_EXHAUSTIVE_SPACES:
        raise ValueError(f"{q} class spaces: exhaustive partition search is limited to {MAX_EXHAUSTIVE_SPACES}")
    n = Y.shape[0]
    perm = rng.permutation(n)
    n_val = max(1, int(round(val_fraction * n)))
    val, tr = np.sort(perm[:n_val]), np.sort(perm[n_val:])
    parts = list(set_partitions(range(q)))
    exact = []
    for part in parts:
        pred = SuperClassClassifier(part, C).fit(X[tr], Y[tr]).predict(X[val])
        exact.append(mdc_metrics(Y[val], pred)["exact_match"])
    best = max(range(len(parts)), key=lambda i: (exact[i], -len(parts[i]), -i))
    scores = [{"partition": [list(b) for b in p], "exact_match": e} for p, e in zip(parts, exact, strict=True)]
    return parts[best], scores


def majority_vote(predictions: Sequence[np.ndarray], n_classes: Sequence[int]) -> np.ndarray:
    """Per class space, the value most of the ``(n, q)`` member predictions give (ties: lowest index)."""
    stack = np.stack([np.asarray(p, dtype=np.int64) for p in predictions])  # (members, n, q)
    _, n, q = stack.shape
    out = np.zeros((n, q), dtype=np.int64)
    for j in range(q):
        counts = np.zeros((n, int(n_classes[j])), dtype=np.int64)
        for member in stack[:, :, j]:
            counts[np.arange(n), member] += 1
        out[:, j] = counts.argmax(axis=1)
    return out


KINDS = ("ECC", "ECP", "ESC")


class Ensemble:
    """``n_members`` base MDC models of ``kind`` (ECC, ECP or ESC), each fitted on a random
    ``sample_fraction`` of the training rows (without replacement), combined by per-space majority
    vote."""

    def __init__(self, kind: str, n_members: int = N_MEMBERS, sample_fraction: float = SAMPLE_FRACTION,
                 C: float = LIBSVM_DEFAULT_C, seed: int = 0) -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown ensemble kind {kind!r}; known: {', '.join(KINDS)}")
        self.kind, self.n_members, self.sample_fraction, self.C, self.seed = kind, n_members, sample_fraction, C, seed
        self.members: list[Any] = []
        self.n_classes: list[int] = []

    def _member(self, q: int, rng: np.random.Generator) -> Any:
        if self.kind == "ECC":
            return ClassifierChain([int(j) for j in rng.permutation(q)], self.C)
        if self.kind == "ECP":
            return ClassPowerset(self.C)
        return SuperClassClassifier(None, self.C, seed=int(rng.integers(2**31)))

    def fit(self, X: Matrix, Y: np.ndarray, n_classes: Sequence[int]) -> Ensemble:
        Y = np.asarray(Y, dtype=np.int64)
        self.n_classes = [int(k) for k in n_classes]
        rng = np.random.default_rng(self.seed)
        n = Y.shape[0]
        size = max(1, int(round(self.sample_fraction * n)))
        self.members = []
        for _ in range(self.n_members):
            rows = np.sort(rng.choice(n, size=size, replace=False))
            self.members.append(self._member(Y.shape[1], rng).fit(X[rows], Y[rows], self.n_classes))
        return self

    def predict(self, X: Matrix) -> np.ndarray:
        return majority_vote([m.predict(X) for m in self.members], self.n_classes)

    def describe(self) -> dict[str, Any]:
        """The members' chain orders (ECC) or chosen partitions (ESC), for the results JSON."""
        if self.kind == "ECC":
            return {"orders": [m.order for m in self.members]}
        if self.kind == "ESC":
            return {"partitions": [[list(b) for b in (m.partition or [])] for m in self.members]}
        return {"combinations": [int(m.combinations.shape[0]) for m in self.members]}
