"""Finite mixture models of word clusters (Li & Yamanishi, ACL 1997) and their baselines.

Four document classifiers that score each category ``c`` against its complement ``c̄`` (the
training documents not in ``c``) with a per-word log-likelihood ratio, so that the paper's
threshold ``ε`` can be swept for precision-recall curves:

- :class:`FMM` -- soft word clusters (one per category, threshold ``γ``), ``P(w|k)`` by splitting
  each word's frequency among its clusters, ``P(k|c)`` by the Helmbold et al. EM update (paper
  Sections 3-4);
- :class:`HCM` -- hard clusters (Guthrie et al. 1994; paper Section 2), by the paper's ``γ`` rule
  or by Guthrie's top-L / top-M frequent-word rule, with the expected likelihood estimator;
- :class:`WBM` -- word-based multinomials with additive smoothing;
- :class:`COS` -- cosine between the document and the category frequency vectors.

Every model is trained from *sufficient statistics* that are plain sums over documents, so they can
be computed shard by shard (e.g. on Spark: ``Yᵀ·Counts`` aggregated over partitions) and merged by
addition: :func:`sufficient_statistics`, :func:`merge_statistics`, then ``fit_from_statistics``.
``fit(counts, Y)`` does both. The FMM's EM only needs each category's word-frequency vector,
because the likelihood of a category's training words is ``Σ_w f(w|c) log Σ_j θ_j P(w|k_j)``.

Scores: ``decision_function(counts)`` returns, per document and category,
``(log L(d|c) − log L(d|c̄)) / N`` (natural log) where ``N`` counts only the document's words that
the model covers (words in no cluster are ignored, also in ``N``: paper footnote 11). A document with
``N = 0`` gets ``empty_score`` (default ``-inf``: no evidence, never assigned). ``predict(counts,
eps)`` assigns ``c`` when the score is ``> eps`` (paper Section 6).

This module is numpy/scipy only.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp

from sparkhc.errors import ConfigError, ModelError, NotFittedError

log = logging.getLogger(__name__)

__all__ = [
    "COS",
    "FMM",
    "HCM",
    "WBM",
    "assign_clusters",
    "cluster_word_distributions",
    "distribute_frequencies",
    "expected_likelihood_estimate",
    "helmbold_em",
    "merge_statistics",
    "sufficient_statistics",
    "top_rule_clusters",
]

STAT_KEYS = ("category_word", "word_total", "category_docs", "n_docs")
SCHEMES = ("global", "binary")
_CHUNK = 16  # categories per batch of two-cluster problems (bounds memory: 16 × 2 × V floats)


# ---------------------------------------------------------------------------------------------
# inputs and sufficient statistics


def _as_counts(counts: Any) -> sp.csr_matrix:
    X = counts if sp.issparse(counts) else sp.csr_matrix(np.asarray(counts))
    X = sp.csr_matrix(X)
    if X.ndim != 2:
        raise ValueError(f"counts must be a 2-d matrix; got shape {X.shape}")
    if X.nnz and X.data.min() < 0:
        raise ValueError("counts must be non-negative term counts")
    return X


def _label_matrix(Y: Any, n_docs: int, categories: Sequence[str] | None) -> tuple[sp.csr_matrix, list[str]]:
    """Y as a binary CSR (n_docs, n_categories) and the category names.

    ``Y`` is either a binary matrix (dense or sparse) or a list of label lists; for a list, the
    categories are ``categories`` if given (labels outside it are ignored) else the sorted labels.
    """
    if isinstance(Y, list | tuple) and (len(Y) == 0 or isinstance(Y[0], list | tuple | set | frozenset)):
        if len(Y) != n_docs:
            raise ValueError(f"Y has {len(Y)} label lists for {n_docs} documents")
        names = list(categories) if categories is not None else sorted({c for ls in Y for c in ls})
        index = {c: i for i, c in enumerate(names)}
        rows, cols = [], []
        for r, ls in enumerate(Y):
            for c in set(ls):
                j = index.get(c)
                if j is not None:
                    rows.append(r)
                    cols.append(j)
        M = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(n_docs, len(names)))
        return M, names
    M = sp.csr_matrix(Y if sp.issparse(Y) else np.asarray(Y), dtype=np.float64)
    if M.shape[0] != n_docs:
        raise ValueError(f"Y has {M.shape[0]} rows for {n_docs} documents")
    M.data = (M.data != 0).astype(np.float64)
    M.eliminate_zeros()
    if categories is not None:
        names = list(categories)
        if len(names) != M.shape[1]:
            raise ValueError(f"{len(names)} category names for {M.shape[1]} label columns")
    else:
        names = [str(j) for j in range(M.shape[1])]
    return M, names


def sufficient_statistics(
    counts: Any, Y: Any, categories: Sequence[str] | None = None
) -> dict[str, np.ndarray]:
    """Sums over training documents from which every model in this module is fitted.

    Parameters
    ----------
    counts : sparse matrix (n_docs, V)
        Raw term counts.
    Y : binary matrix (n_docs, n_categories) or list of label lists
    categories : sequence of str, optional
        Category names (columns of ``Y``); required to fix the order when ``Y`` is label lists.

    Returns
    -------
    dict of ndarray, all float64 and mergeable by addition (:func:`merge_statistics`):
    ``category_word`` (n_categories, V) = ``Yᵀ X`` (the paper's ``f(w|c)``), ``word_total`` (V,) =
    column sums of ``X`` over *all* training documents (so ``f(w|c̄) = word_total − f(w|c)``),
    ``category_docs`` (n_categories,) documents per category, ``n_docs`` (1,) documents.
    """
    X = _as_counts(counts)
    M, _ = _label_matrix(Y, X.shape[0], categories)
    F = np.asarray((M.T @ X).todense(), dtype=np.float64)
    return {
        "category_word": F,
        "word_total": np.asarray(X.sum(axis=0), dtype=np.float64).ravel(),
        "category_docs": np.asarray(M.sum(axis=0), dtype=np.float64).ravel(),
        "n_docs": np.array([float(X.shape[0])]),
    }


def merge_statistics(a: Mapping[str, np.ndarray], b: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Key-wise sum of two sets of :func:`sufficient_statistics` (e.g. of two data shards)."""
    for k in STAT_KEYS:
        if np.shape(a[k]) != np.shape(b[k]):
            raise ValueError(f"statistics {k!r} have shapes {np.shape(a[k])} and {np.shape(b[k])}")
    return {k: np.asarray(a[k], dtype=np.float64) + np.asarray(b[k], dtype=np.float64) for k in STAT_KEYS}


def _check_statistics(stats: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    missing = [k for k in ("category_word", "word_total") if k not in stats]
    if missing:
        raise ValueError(f"sufficient statistics lack {missing}")
    F = np.asarray(stats["category_word"], dtype=np.float64)
    T = np.asarray(stats["word_total"], dtype=np.float64)
    if F.ndim != 2 or T.shape != (F.shape[1],):
        raise ValueError(f"category_word {F.shape} and word_total {T.shape} do not match")
    if np.any(F > T[None, :] + 1e-6 * np.maximum(T, 1.0)[None, :]):
        raise ValueError("category_word exceeds word_total: a category's count exceeds the corpus total")
    return F, T


# ---------------------------------------------------------------------------------------------
# clusters (paper Section 4) and estimators


#: readings of the paper's ``f(w)`` in the cluster rule (FMM ``word_total``): "categories" =
#: ``Σ_i f(w|c_i)`` (a word of a document in two categories counts twice), "corpus" = the word's
#: total frequency in the training documents (the paper's definition, literally)
WORD_TOTALS = ("categories", "corpus")


def _shares(G: np.ndarray, fw: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``f(w|c_i) / f(w)`` and ``f(w)``: by default ``f(w) = Σ_i f(w|c_i)`` (sum over axis -2 of G);
    ``fw`` (broadcastable to G's rows, e.g. ``(1, V)``): the given totals."""
    fw = G.sum(axis=-2, keepdims=True) if fw is None else np.broadcast_to(np.asarray(fw, np.float64), G.shape[:-2] + (1, G.shape[-1]))
    S = np.divide(G, fw, out=np.zeros_like(G), where=fw > 0)
    return S, fw


def assign_clusters(G: np.ndarray, gamma: float, fw: np.ndarray | None = None) -> np.ndarray:
    """Soft clusters, one per row of ``G``: ``w ∈ k_i`` iff ``f(w|c_i) / f(w) > γ`` (paper Eq. 12).

    ``G`` is the (n_categories, V) table of ``f(w|c)``; ``f(w)`` is its column sum (the word's total
    frequency over the categories, as in the paper's Table 1). Returns a bool (n_categories, V)
    membership matrix; words with ``f(w) = 0`` are in no cluster. With ``γ ≥ 0.5`` every word is in
    at most one cluster (the shares sum to 1). A stack of tables (…, n, V) is handled table by table.
    ``fw``: the word totals to divide by instead (the literal reading, :data:`WORD_TOTALS`: the
    corpus frequency, with which nested categories such as wheat ⊂ grain can both pass γ ≥ 0.5).
    """
    S, _ = _shares(np.asarray(G, dtype=np.float64), fw)
    return S > gamma


def distribute_frequencies(G: np.ndarray, member: np.ndarray, fw: np.ndarray | None = None) -> np.ndarray:
    """Split each word's total frequency among its clusters (paper Section 4, Table 7).

    A word in one cluster gives it its whole total frequency ``f(w)``; a word in several clusters is
    split in proportion to its frequencies in the clusters' related categories. ``fw``: the word
    totals distributed (default ``Σ_i f(w|c_i)``; :func:`assign_clusters`).
    """
    G = np.asarray(G, dtype=np.float64)
    Gm = np.where(member, G, 0.0)
    fw = _shares(G, fw)[1]
    denom = Gm.sum(axis=-2, keepdims=True)
    scale = np.divide(fw, denom, out=np.zeros_like(fw), where=denom > 0)
    return Gm * scale


def cluster_word_distributions(D: np.ndarray) -> np.ndarray:
    """Maximum-likelihood ``P(w|k_j)`` from distributed frequencies (rows normalized; Table 8)."""
    D = np.asarray(D, dtype=np.float64)
    tot = D.sum(axis=-1, keepdims=True)
    return np.divide(D, tot, out=np.zeros_like(D), where=tot > 0)


def top_rule_clusters(G: np.ndarray, top_l: int, top_m: int) -> np.ndarray:
    """Guthrie et al.'s hard clusters (paper Section 2, Table 2).

    ``k_i`` holds the words among the ``L`` most frequent in ``c_i`` and not among the ``M`` most
    frequent in any other category. Only words with positive frequency rank; ties are broken by
    column index. A word that would land in several clusters (possible only when ``L > M``) is put
    in none (it then goes to the rest cluster). Returns bool (n_categories, V).
    """
    G = np.asarray(G, dtype=np.float64)
    n, V = G.shape

    def top(k: int) -> np.ndarray:
        out = np.zeros((n, V), dtype=bool)
        for i in range(n):  # one sort per category, not per word
            order = np.lexsort((np.arange(V), -G[i]))
            order = order[G[i, order] > 0][:k]
            out[i, order] = True
        return out

    in_l, in_m = top(top_l), top(top_m)
    m_count = in_m.sum(axis=0)
    # in the top-M of some *other* category: count of top-M memberships minus one's own
    other_m = (m_count[None, :] - in_m.astype(np.int64)) > 0
    member = in_l & ~other_m
    multi = member.sum(axis=0) > 1
    member[:, multi] = False
    return member


def expected_likelihood_estimate(freq: np.ndarray) -> np.ndarray:
    """``P(k_j|c) = (f(k_j|c) + 0.5) / (f(c) + 0.5 m)`` row-wise (paper Eq. 4, Gale & Church)."""
    freq = np.asarray(freq, dtype=np.float64)
    m = freq.shape[-1]
    return (freq + 0.5) / (freq.sum(axis=-1, keepdims=True) + 0.5 * m)


def helmbold_em(
    freqs: np.ndarray,
    P: np.ndarray | sp.spmatrix,
    *,
    eta: float = 1.0,
    n_iter: int = 50,
    tol: float = 0.0,
    theta0: np.ndarray | None = None,
    theta_floor: float = 1e-10,
    track_history: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """Mixture weights ``θ = P(k|c)`` by the Helmbold et al. (1995) EM update (paper Section 4).

    For each row ``f`` of ``freqs`` (a model's word frequencies) maximizes
    ``(1/N) Σ_w f(w) log Σ_j θ_j P_j(w)`` with ``θ_j ← θ_j (η (∇_j − 1) + 1)``,
    ``∇_j = (1/N) Σ_w f(w) P_j(w) / Σ_k θ_k P_k(w)``; ``η = 1`` is plain EM. Words with
    ``Σ_j P_j(w) = 0`` (in no cluster) are ignored, also in ``N``. A model with ``N = 0`` keeps
    its initial weights.

    Parameters
    ----------
    freqs : ndarray (n_models, V), or (B, n_models, V) with a batched ``P``
    P : ndarray or sparse (m, V), or dense ndarray (B, m, V)
        Cluster word distributions ``P(w|k_j)``; the batched form holds ``B`` independent problems
        (e.g. one two-cluster problem per category), solved together.
    eta : float > 0
    n_iter : int
        Number of updates ``s`` (the paper's predetermined number).
    tol : float
        Stop early when no weight changes by more than ``tol`` (0: always ``n_iter`` updates).
    theta0 : ndarray (n_models, m) or (B, n_models, m), optional
        Initial weights; uniform by default.
    theta_floor : float
        After each update weights below this are raised to it and the rows renormalized, so that a
        word of a cluster never gets probability 0 (and ``η > 1`` cannot make weights negative).
    track_history : bool
        Compute the log-likelihood at every update (else only at the end; saves a third of the time).

    Returns
    -------
    theta : ndarray (n_models, m) or (B, n_models, m)
    history : ndarray (n_updates + 1, n_models) or (n_updates + 1, B, n_models)
        Average log-likelihood (nats per covered word) before each update and at the end (only the
        end without ``track_history``).
    """
    batched = isinstance(P, np.ndarray) and P.ndim == 3
    if batched:
        Pb = np.asarray(P, dtype=np.float64)
        f = np.asarray(freqs, dtype=np.float64)
        if f.ndim != 3 or f.shape[0] != Pb.shape[0] or f.shape[2] != Pb.shape[2]:
            raise ValueError(f"batched freqs {f.shape} do not match P {Pb.shape}")
        covered3 = Pb.sum(axis=1, keepdims=True) > 0  # (B, 1, V)
        f = np.where(covered3, f, 0.0)
        m = Pb.shape[1]
        shape = f.shape[:2]

        def mixture(th: np.ndarray) -> np.ndarray:
            return np.matmul(th, Pb)  # (B, M, V)

        def gradient(ratio: np.ndarray) -> np.ndarray:
            # (B, M, m); einsum's optimized path is several times faster than a batched matmul here
            return np.einsum("bav,bjv->baj", ratio, Pb, optimize=True)

    else:
        Ps = sp.csr_matrix(P, dtype=np.float64)
        m, V = Ps.shape
        f2 = np.atleast_2d(np.asarray(freqs, dtype=np.float64))
        if f2.shape[1] != V:
            raise ValueError(f"freqs have {f2.shape[1]} words, P has {V}")
        covered = np.asarray(Ps.sum(axis=0)).ravel() > 0
        f = f2[:, covered]
        Pc = Ps[:, np.flatnonzero(covered)].tocsr()
        PcT = Pc.T.tocsr()
        shape = f.shape[:1]

        def mixture(th: np.ndarray) -> np.ndarray:
            return np.asarray(PcT @ th.T).T  # (M, V_covered)

        def gradient(ratio: np.ndarray) -> np.ndarray:
            return np.asarray(Pc @ ratio.T).T  # (M, m)

    N = f.sum(axis=-1)
    has = N > 0
    Nsafe = np.where(has, N, 1.0)
    pos = f > 0
    if theta0 is None:
        theta = np.full((*shape, m), 1.0 / m)
    else:
        theta = np.array(theta0, dtype=np.float64, copy=True)
        if theta.shape != (*shape, m):
            raise ValueError(f"theta0 has shape {theta.shape}, expected {(*shape, m)}")

    def loglik(mix: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore"):
            logmix = np.log(mix, out=np.zeros_like(mix), where=pos)
        return np.where(has, (f * logmix).sum(axis=-1) / Nsafe, 0.0)

    history = []
    mix = mixture(theta)
    for _ in range(n_iter):
        if track_history:
            history.append(loglik(mix))
        ratio = np.divide(f, mix, out=np.zeros_like(f), where=pos & (mix > 0))
        grad = gradient(ratio) / Nsafe[..., None]
        new = theta * (eta * (grad - 1.0) + 1.0)
        new = np.where(has[..., None], new, theta)
        if theta_floor > 0 or eta > 1:
            new = np.maximum(new, theta_floor)
            new /= new.sum(axis=-1, keepdims=True)
        delta = float(np.max(np.abs(new - theta))) if new.size else 0.0
        theta = new
        mix = mixture(theta)
        if delta <= tol:
            break
    history.append(loglik(mix))
    return theta, np.array(history)


# ---------------------------------------------------------------------------------------------
# models


def _check_param(owner: str, name: str, value: Any, ok: bool, expected: str) -> None:
    if not ok:
        raise ConfigError(f"The {name!r} parameter of {owner} must be {expected}. Got {value!r} instead.")


class _Base:
    """Shared scoring: ``score = X·(log p_c − log p_c̄) / X·mask`` for each category."""

    _name = "base"

    def __init__(
        self, *, categories: Sequence[str] | None = None, empty_score: float = float("-inf")
    ) -> None:
        self.categories = categories
        self.empty_score = empty_score

    # subclasses set these in _fit_stats / _restore: (V, n) arrays
    _log_cat: np.ndarray  # log P(w|c) per word, 0 where not covered
    _log_comp: np.ndarray  # log P(w|c̄)
    _mask: np.ndarray  # (V, n) 1.0 where the word counts in N for category c

    # -- fitting ---------------------------------------------------------------------------
    def sufficient_statistics(self, counts: Any, Y: Any) -> dict[str, np.ndarray]:
        """See :func:`sufficient_statistics` (uses ``self.categories`` for label lists)."""
        return sufficient_statistics(counts, Y, self.categories)

    def fit(self, counts: Any, Y: Any) -> _Base:
        """``fit_from_statistics(sufficient_statistics(counts, Y))``; category names from ``Y``."""
        X = _as_counts(counts)
        _, names = _label_matrix(Y, X.shape[0], self.categories)
        self.fit_from_statistics(sufficient_statistics(X, Y, names))
        self.categories_ = np.array(names, dtype=str)
        return self

    def fit_from_statistics(self, stats: Mapping[str, np.ndarray]) -> _Base:
        """Fit from (merged) :func:`sufficient_statistics`."""
        self._validate_params()
        F, T = _check_statistics(stats)
        if self.categories is not None and len(self.categories) == F.shape[0]:
            self.categories_ = np.array(list(self.categories), dtype=str)
        else:
            self.categories_ = np.array([str(i) for i in range(F.shape[0])], dtype=str)
        empty = np.flatnonzero(F.sum(axis=1) == 0)
        if empty.size:
            log.warning(
                "%s: %d categories have no training words (e.g. column %d)", self._name, empty.size, empty[0]
            )
        self.n_features_ = F.shape[1]
        self._fit_stats(F, T)
        self._build_scoring()
        return self

    def _validate_params(self) -> None:  # overridden
        pass

    def _fit_stats(self, F: np.ndarray, T: np.ndarray) -> None:  # overridden
        raise NotImplementedError

    def _build_scoring(self) -> None:  # overridden
        raise NotImplementedError

    # -- scoring ---------------------------------------------------------------------------
    def _check_fitted(self, X: sp.csr_matrix) -> None:
        if not hasattr(self, "_mask"):
            raise NotFittedError(f"this {self._name} model is not fitted yet: call fit or set_state first")
        if X.shape[1] != self.n_features_:
            raise ModelError(f"{self._name} was fitted on {self.n_features_} features; got {X.shape[1]}")

    def log_likelihood(
        self, counts: Any, *, complement: bool = False, base: float | None = None
    ) -> np.ndarray:
        """``log L(d|c)`` (or ``log L(d|c̄)``) per document and category, over covered words.

        ``base=2`` gives the paper's ``log_2``; natural log by default.
        """
        X = _as_counts(counts)
        self._check_fitted(X)
        L = np.asarray(X @ (self._log_comp if complement else self._log_cat))
        return L / np.log(base) if base is not None else L

    def covered_length(self, counts: Any) -> np.ndarray:
        """``N`` per document and category: number of the document's words the model covers."""
        X = _as_counts(counts)
        self._check_fitted(X)
        return np.asarray(X @ self._mask)

    def decision_function(self, counts: Any) -> np.ndarray:
        """``(log L(d|c) − log L(d|c̄)) / N`` per document (rows) and category (columns).

        ``N = 0`` (no covered word) gives ``empty_score``.
        """
        X = _as_counts(counts)
        self._check_fitted(X)
        num = np.asarray(X @ (self._log_cat - self._log_comp))
        N = np.asarray(X @ self._mask)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(N > 0, num / np.where(N > 0, N, 1.0), self.empty_score)

    def predict(self, counts: Any, eps: float = 0.0) -> np.ndarray:
        """Bool (n_docs, n_categories): assign ``c`` when the score is ``> eps``."""
        return self.decision_function(counts) > eps

    def predict_labels(self, counts: Any, eps: float = 0.0) -> list[list[str]]:
        """Category names assigned to each document (see :meth:`predict`)."""
        P = self.predict(counts, eps)
        names = self.categories_
        return [[str(names[j]) for j in np.flatnonzero(row)] for row in P]

    # -- state -----------------------------------------------------------------------------
    def _params(self) -> dict[str, Any]:
        return {"empty_score": float(self.empty_score)}

    def _arrays(self) -> dict[str, np.ndarray]:  # overridden
        raise NotImplementedError

    def get_state(self) -> dict[str, Any]:
        """Parameters (scalars) and learned arrays; restore with :meth:`set_state` (no pickle)."""
        if not hasattr(self, "_mask"):
            raise NotFittedError(f"this {self._name} model is not fitted yet")
        state: dict[str, Any] = {"model": self._name, "n_features": int(self.n_features_)}
        state.update(self._params())
        state["categories"] = np.asarray(self.categories_, dtype=str)
        state.update(self._arrays())
        return state

    def set_state(self, state: Mapping[str, Any]) -> _Base:
        """Restore a model saved with :meth:`get_state` (parameters included)."""
        name = str(np.asarray(state.get("model", "")))
        if name != self._name:
            raise ModelError(f"state is of a {name!r} model, not {self._name!r}")
        for k in self._params():
            if k in state:
                v = np.asarray(state[k]).item()
                setattr(self, k, v)
        self.n_features_ = int(np.asarray(state["n_features"]))
        self.categories_ = np.asarray(state["categories"], dtype=str)
        self._restore(state)
        self._build_scoring()
        return self

    def _restore(self, state: Mapping[str, Any]) -> None:  # overridden
        raise NotImplementedError


def _mixture_logs(theta: np.ndarray, P: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-word ``log Σ_j θ_j P(w|k_j)`` for each model row, for problems stacked on axis 0.

    ``theta`` (n, m), ``P`` (B, m, V) with B = 1 (shared clusters) or B = n (one problem per
    category). Returns ``(log_p (V, n) with 0 where uncovered, covered (V, n) bool)``.
    """
    if P.shape[0] == 1:
        mix = theta @ P[0]  # (n, V)
        covered = np.broadcast_to(P[0].sum(axis=0) > 0, mix.shape)
    else:
        mix = np.einsum("nm,nmv->nv", theta, P)
        covered = P.sum(axis=1) > 0
    with np.errstate(divide="ignore"):
        logp = np.where(covered, np.log(np.where(covered, mix, 1.0)), 0.0)
    return logp.T.copy(), np.ascontiguousarray(covered.T)


class FMM(_Base):
    """Finite mixture model of soft word clusters (Li & Yamanishi 1997, Sections 3-4).

    Parameters
    ----------
    gamma : float in [0, 1)
        Cluster threshold: ``w ∈ k_i`` iff ``f(w|c_i)/f(w) > γ``. ``γ = 0`` puts every word in the
        cluster of every category it occurs in (``P(w|k_i) = P_ML(w|c_i)``, the WBM-like limit).
    eta : float > 0
        Helmbold et al. step; ``η = 1`` is plain EM.
    n_iter : int
        EM updates ``s`` (the paper does not give its value). EM starts from uniform weights.
    tol : float
        Early stop when no weight moves more than ``tol`` in an update.
    theta_floor : float
        Lower bound for ``P(k|c)`` after each update (see :func:`helmbold_em`).
    word_total : {"categories", "corpus"}
        The ``f(w)`` of the cluster rule and of the frequencies distributed to clusters
        (:data:`WORD_TOTALS`): ``"categories"`` (default) ``Σ_c f(w|c)``; ``"corpus"`` the word's total
        frequency in the training documents, the paper's definition read literally. The two differ
        only where a document has several categories, and only for ``scheme="global"`` (``{c, c̄}``
        partitions the documents).
    scheme : {"global", "binary"}
        ``"global"`` (default): one cluster per category of ``Y`` (``m = n``, paper Section 4);
        the model of ``c`` and of its complement ``c̄`` (all training documents not in ``c``) are
        both mixtures over these ``n`` clusters, fitted by EM on their own training words.
        ``"binary"``: each category's test is a two-category problem ``{c, c̄}`` with its own two
        clusters ``k_c`` and ``k_c̄``.
    categories : sequence of str, optional
        Category names (order of ``Y``'s columns, or the vocabulary of label lists).
    empty_score : float
        Score of a document with no word in any cluster.

    Attributes
    ----------
    membership_ : bool ndarray (B, m, V)
        Cluster membership; ``B = 1`` for "global", ``B = n`` for "binary" (row 0 is ``k_c``).
    cluster_word_prob_ : ndarray (B, m, V)
        ``P(w|k_j)``.
    theta_, theta_complement_ : ndarray (n, m)
        ``P(k_j|c)`` and ``P(k_j|c̄)``.
    em_history_ : ndarray (iterations + 1, 2n)
        Average log-likelihood per EM update (categories, then complements; "global" only).

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> X = sp.csr_matrix(np.array([[4, 1, 2, 1, 0, 2], [0, 0, 0, 3, 2, 2]], dtype=np.float32))
    >>> m = FMM(gamma=0.4).fit(X, np.eye(2))
    >>> m.membership_[0].astype(int)
    array([[1, 1, 1, 0, 0, 1],
           [0, 0, 0, 1, 1, 1]])
    """

    _name = "fmm"

    def __init__(
        self,
        gamma: float = 0.0,
        *,
        eta: float = 1.0,
        n_iter: int = 50,
        tol: float = 1e-10,
        theta_floor: float = 1e-10,
        scheme: str = "global",
        word_total: str = "categories",
        categories: Sequence[str] | None = None,
        empty_score: float = float("-inf"),
    ) -> None:
        super().__init__(categories=categories, empty_score=empty_score)
        self.gamma = gamma
        self.eta = eta
        self.n_iter = n_iter
        self.tol = tol
        self.theta_floor = theta_floor
        self.scheme = scheme
        self.word_total = word_total

    def _validate_params(self) -> None:
        g = self.gamma
        _check_param("FMM", "gamma", g, isinstance(g, int | float) and 0 <= g < 1, "a float in [0, 1)")
        _check_param(
            "FMM", "eta", self.eta, isinstance(self.eta, int | float) and self.eta > 0, "a float > 0"
        )
        _check_param(
            "FMM", "n_iter", self.n_iter, isinstance(self.n_iter, int) and self.n_iter >= 0, "an int >= 0"
        )
        _check_param("FMM", "theta_floor", self.theta_floor, 0 <= self.theta_floor < 1e-2, "in [0, 0.01)")
        _check_param("FMM", "scheme", self.scheme, self.scheme in SCHEMES, f"one of {SCHEMES}")
        _check_param("FMM", "word_total", self.word_total, self.word_total in WORD_TOTALS, f"one of {WORD_TOTALS}")

    def _problem(
        self, G: np.ndarray, model_freqs: np.ndarray, fw: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        member = assign_clusters(G, self.gamma, fw)
        P = cluster_word_distributions(distribute_frequencies(G, member, fw))
        theta, hist = helmbold_em(
            model_freqs,
            P,
            eta=self.eta,
            n_iter=self.n_iter,
            tol=self.tol,
            theta_floor=self.theta_floor,
            track_history=self.scheme == "global",
        )
        return member, P, theta, hist

    def _fit_stats(self, F: np.ndarray, T: np.ndarray) -> None:
        n, V = F.shape
        C = np.maximum(T[None, :] - F, 0.0)  # f(w|c̄): training documents not in c
        if self.scheme == "global":
            fw = T[None, :] if self.word_total == "corpus" else None
            member, P, theta, hist = self._problem(F, np.vstack([F, C]), fw)
            self.membership_ = member[None]
            self.cluster_word_prob_ = P[None]
            self.theta_, self.theta_complement_ = theta[:n], theta[n:]
            self.em_history_ = hist
        else:
            self.membership_ = np.zeros((n, 2, V), dtype=bool)
            self.cluster_word_prob_ = np.zeros((n, 2, V))
            self.theta_ = np.zeros((n, 2))
            self.theta_complement_ = np.zeros((n, 2))
            for lo in range(0, n, _CHUNK):  # two-cluster problems {c, c̄}, a chunk of categories at once
                sl = slice(lo, min(lo + _CHUNK, n))
                G = np.stack([F[sl], C[sl]], axis=1)  # (B, 2, V)
                member, P, theta, _ = self._problem(G, G)
                self.membership_[sl], self.cluster_word_prob_[sl] = member, P
                self.theta_[sl], self.theta_complement_[sl] = theta[:, 0], theta[:, 1]
            self.em_history_ = np.zeros((0, 2 * n))

    def _build_scoring(self) -> None:
        self._log_cat, cov = _mixture_logs(self.theta_, self.cluster_word_prob_)
        self._log_comp, _ = _mixture_logs(self.theta_complement_, self.cluster_word_prob_)
        self._mask = cov.astype(np.float64)

    def _params(self) -> dict[str, Any]:
        p = super()._params()
        p.update(
            gamma=float(self.gamma),
            eta=float(self.eta),
            n_iter=int(self.n_iter),
            tol=float(self.tol),
            theta_floor=float(self.theta_floor),
            scheme=str(self.scheme),
            **({"word_total": "corpus"} if self.word_total == "corpus" else {}),
        )
        return p

    def _arrays(self) -> dict[str, np.ndarray]:
        return {
            "membership": self.membership_,
            "cluster_word_prob": self.cluster_word_prob_,
            "theta": self.theta_,
            "theta_complement": self.theta_complement_,
        }

    def _restore(self, state: Mapping[str, Any]) -> None:
        self.membership_ = np.asarray(state["membership"], dtype=bool)
        self.cluster_word_prob_ = np.asarray(state["cluster_word_prob"], dtype=np.float64)
        self.theta_ = np.asarray(state["theta"], dtype=np.float64)
        self.theta_complement_ = np.asarray(state["theta_complement"], dtype=np.float64)
        n = len(self.categories_)
        B = self.cluster_word_prob_.shape[0]
        if (
            self.theta_.shape[0] != n
            or B not in (1, n)
            or self.cluster_word_prob_.shape[2] != self.n_features_
        ):
            raise ModelError("FMM state arrays do not match its categories / features")


class HCM(_Base):
    """Hard clustering method (Guthrie, Walker & Guthrie 1994; Li & Yamanishi Section 2).

    Each word is in one cluster; ``L(d|c) = Π_t P(k_t|c)`` (Eq. 3) with the expected likelihood
    estimator ``P(k|c) = (f(k|c) + 0.5) / (f(c) + 0.5 m)`` (Eq. 4).

    Parameters
    ----------
    gamma : float in [0.5, 1)
        With ``clustering="gamma"`` (the paper's experiments, Section 6: "we classified words in the
        same way as in FMM"), ``w ∈ k_i`` iff ``f(w|c_i)/f(w) > γ``; ``γ < 0.5`` could put a word in
        two clusters, so it is refused.
    clustering : {"gamma", "top"}
        ``"top"``: Guthrie's rule, ``k_i`` = the ``top_l`` most frequent words of ``c_i`` that are not
        among the ``top_m`` most frequent of another category (Table 2, ``L = M = 5``).
    top_l, top_m : int
    rest_cluster : bool
        Put every other training word in one extra cluster (Guthrie's ``k_3``: HCM's clusters cover
        the vocabulary). If False, words in no cluster are ignored as in FMM.
    scheme : {"global", "binary"}
        As in :class:`FMM`.
    """

    _name = "hcm"

    def __init__(
        self,
        gamma: float = 0.5,
        *,
        clustering: str = "gamma",
        top_l: int = 5,
        top_m: int = 5,
        rest_cluster: bool = True,
        scheme: str = "global",
        categories: Sequence[str] | None = None,
        empty_score: float = float("-inf"),
    ) -> None:
        super().__init__(categories=categories, empty_score=empty_score)
        self.gamma = gamma
        self.clustering = clustering
        self.top_l = top_l
        self.top_m = top_m
        self.rest_cluster = rest_cluster
        self.scheme = scheme

    def _validate_params(self) -> None:
        _check_param(
            "HCM", "clustering", self.clustering, self.clustering in ("gamma", "top"), "'gamma' or 'top'"
        )
        if self.clustering == "gamma":
            g = self.gamma
            _check_param(
                "HCM", "gamma", g, isinstance(g, int | float) and 0.5 <= g < 1, "a float in [0.5, 1)"
            )
        else:
            for k in ("top_l", "top_m"):
                v = getattr(self, k)
                _check_param("HCM", k, v, isinstance(v, int) and v >= 1, "an int >= 1")
        _check_param("HCM", "scheme", self.scheme, self.scheme in SCHEMES, f"one of {SCHEMES}")

    def _problem(
        self, G: np.ndarray, T: np.ndarray, model_freqs: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        if self.clustering == "gamma":
            member = assign_clusters(G, self.gamma)
        else:
            member = top_rule_clusters(G, self.top_l, self.top_m)
        if self.rest_cluster:
            rest = (T > 0) & ~member.any(axis=0)
            member = np.vstack([member, rest[None, :]])
        counts = model_freqs @ member.T.astype(np.float64)  # f(k_j|c)
        return member, expected_likelihood_estimate(counts)

    def _fit_stats(self, F: np.ndarray, T: np.ndarray) -> None:
        n, V = F.shape
        C = np.maximum(T[None, :] - F, 0.0)
        if self.scheme == "global":
            member, probs = self._problem(F, T, np.vstack([F, C]))
            self.membership_ = member[None]
            self.cluster_prob_, self.cluster_prob_complement_ = probs[:n], probs[n:]
        else:
            m = 3 if self.rest_cluster else 2
            self.membership_ = np.zeros((n, m, V), dtype=bool)
            self.cluster_prob_ = np.zeros((n, m))
            self.cluster_prob_complement_ = np.zeros((n, m))
            for c in range(n):
                G = np.vstack([F[c], C[c]])
                member, probs = self._problem(G, T, G)
                self.membership_[c] = member
                self.cluster_prob_[c], self.cluster_prob_complement_[c] = probs[0], probs[1]

    def _build_scoring(self) -> None:
        M = self.membership_.astype(np.float64)
        # P(w|c) ∝ P(k(w)|c): the uniform factor 1/|k| of the FMM form cancels in the ratio (Eq. 10)
        self._log_cat, cov = _mixture_logs(self.cluster_prob_, M)
        self._log_comp, _ = _mixture_logs(self.cluster_prob_complement_, M)
        self._mask = cov.astype(np.float64)

    def _params(self) -> dict[str, Any]:
        p = super()._params()
        p.update(
            gamma=float(self.gamma),
            clustering=str(self.clustering),
            top_l=int(self.top_l),
            top_m=int(self.top_m),
            rest_cluster=bool(self.rest_cluster),
            scheme=str(self.scheme),
        )
        return p

    def _arrays(self) -> dict[str, np.ndarray]:
        return {
            "membership": self.membership_,
            "cluster_prob": self.cluster_prob_,
            "cluster_prob_complement": self.cluster_prob_complement_,
        }

    def _restore(self, state: Mapping[str, Any]) -> None:
        self.membership_ = np.asarray(state["membership"], dtype=bool)
        self.cluster_prob_ = np.asarray(state["cluster_prob"], dtype=np.float64)
        self.cluster_prob_complement_ = np.asarray(state["cluster_prob_complement"], dtype=np.float64)
        if self.membership_.shape[2] != self.n_features_ or self.cluster_prob_.shape[0] != len(
            self.categories_
        ):
            raise ModelError("HCM state arrays do not match its categories / features")


class WBM(_Base):
    """Word-based method: one multinomial per category and per complement (paper Section 2).

    ``P(w|c) = (f(w|c) + α) / (f(c) + α |W|)`` over the training vocabulary ``W`` (words seen in
    any training document). The paper does not say how WBM is smoothed; ``α = 1`` (Laplace) by
    default. Words not in ``W`` are ignored, also in ``N``.
    """

    _name = "wbm"

    def __init__(
        self,
        alpha: float = 1.0,
        *,
        categories: Sequence[str] | None = None,
        empty_score: float = float("-inf"),
    ) -> None:
        super().__init__(categories=categories, empty_score=empty_score)
        self.alpha = alpha

    def _validate_params(self) -> None:
        a = self.alpha
        _check_param("WBM", "alpha", a, isinstance(a, int | float) and a > 0, "a float > 0")

    def _fit_stats(self, F: np.ndarray, T: np.ndarray) -> None:
        self.category_word_ = F
        self.word_total_ = T

    def _build_scoring(self) -> None:
        F, T, a = self.category_word_, self.word_total_, float(self.alpha)
        vocab = T > 0
        nv = max(int(vocab.sum()), 1)
        C = np.maximum(T[None, :] - F, 0.0)

        def logs(G: np.ndarray) -> np.ndarray:
            G = G[:, vocab]
            lp = np.log(G + a) - np.log(G.sum(axis=1, keepdims=True) + a * nv)
            out = np.zeros((F.shape[0], F.shape[1]))
            out[:, vocab] = lp
            return out.T.copy()

        self._log_cat, self._log_comp = logs(F), logs(C)
        self._mask = np.repeat(vocab[:, None], F.shape[0], axis=1).astype(np.float64)

    def _params(self) -> dict[str, Any]:
        p = super()._params()
        p["alpha"] = float(self.alpha)
        return p

    def _arrays(self) -> dict[str, np.ndarray]:
        return {"category_word": self.category_word_, "word_total": self.word_total_}

    def _restore(self, state: Mapping[str, Any]) -> None:
        self.category_word_, self.word_total_ = _check_statistics(state)


class COS(_Base):
    """Cosine similarity between raw word-frequency vectors (Salton & McGill; paper Section 6).

    Score ``cos(d, f(·|c)) − cos(d, f(·|c̄))`` ("for COS, we conducted classification in a similar
    way", i.e. against the complement); ``complement=False`` gives the plain ``cos(d, f(·|c))``.
    Only words seen in training count in the document's norm; a document without such words
    gets ``empty_score``.
    """

    _name = "cos"

    def __init__(
        self,
        *,
        complement: bool = True,
        categories: Sequence[str] | None = None,
        empty_score: float = float("-inf"),
    ) -> None:
        super().__init__(categories=categories, empty_score=empty_score)
        self.complement = complement

    def _validate_params(self) -> None:
        pass

    def _fit_stats(self, F: np.ndarray, T: np.ndarray) -> None:
        self.category_word_ = F
        self.word_total_ = T

    def _build_scoring(self) -> None:
        F, T = self.category_word_, self.word_total_
        C = np.maximum(T[None, :] - F, 0.0)

        def unit(G: np.ndarray) -> np.ndarray:
            nrm = np.linalg.norm(G, axis=1, keepdims=True)
            return np.divide(G, nrm, out=np.zeros_like(G), where=nrm > 0).T.copy()

        self._log_cat, self._log_comp = unit(F), unit(C)
        self._vocab = (T > 0).astype(np.float64)
        self._mask = np.repeat(self._vocab[:, None], F.shape[0], axis=1)

    def decision_function(self, counts: Any) -> np.ndarray:
        """``cos(d, c) − cos(d, c̄)`` (or ``cos(d, c)``) per document and category."""
        X = _as_counts(counts)
        self._check_fitted(X)
        Xv = X @ sp.diags(self._vocab)
        nrm = np.sqrt(np.asarray(Xv.multiply(Xv).sum(axis=1))).ravel()
        W = self._log_cat - self._log_comp if self.complement else self._log_cat
        num = np.asarray(Xv @ W)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(nrm[:, None] > 0, num / np.where(nrm > 0, nrm, 1.0)[:, None], self.empty_score)

    def log_likelihood(
        self, counts: Any, *, complement: bool = False, base: float | None = None
    ) -> np.ndarray:
        raise NotImplementedError("COS is not a probability model")

    def _params(self) -> dict[str, Any]:
        p = super()._params()
        p["complement"] = bool(self.complement)
        return p

    def _arrays(self) -> dict[str, np.ndarray]:
        return {"category_word": self.category_word_, "word_total": self.word_total_}

    def _restore(self, state: Mapping[str, Any]) -> None:
        self.category_word_, self.word_total_ = _check_statistics(state)
