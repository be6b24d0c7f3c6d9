"""Path cost-sensitive generative models and their baselines (Xiao, Liu, Song, WWW 2019).

Multinomial naive Bayes mixtures over raw term counts, trained on a few labeled (or weakly labeled,
"dataless") documents and, for the EM variants, many unlabeled ones:

=========  ==========  =====================================================================
NB         EM          mixture components and event counts
=========  ==========  =====================================================================
FlatNB     FlatEM      one component per leaf (Nigam et al. 2006); counts = gold leaves
NBMC       EMMC        ``n_components`` latent components per leaf (Nigam et al. 2006, §5.3)
TDNB       TDEM        one NB per internal node over its children, decoded top-down
WDNB       WDEM        one NB per depth, decoded by the win-driven path score (Wu et al. 2017)
PCNB       PCEM        one component per root-to-leaf path; counts = path scores S_ij (Xiao §4)
=========  ==========  =====================================================================

Every model is written as three pure, module-picklable steps, so that the Spark driver can run
each EM iteration as one pass with ``treeAggregate`` (ALGORITHMS.md, Xiao; DESIGN.md):

* ``sufficient_statistics(counts, S)`` -> dict of arrays: ``word[k, t] = Σ_i S_ik x_it`` and
  ``prior[k] = Σ_i S_ik`` (plus ``loglik`` when produced by an E-step). Pure sums: the statistics of
  two halves of the data added with :func:`add_statistics` equal those of the whole.
* ``estimate(stats)`` -> params (M-step): ``θ_k = (1 + prior_k) / (|G_k| + Σ_{k'∈G_k} prior_k')``
  within the component's prior group ``G_k`` and ``θ_{t|k} = (1 + word_kt) / (|V| + Σ_s word_ks)``
  (Laplace smoothing, Xiao Eqs. 3-4 / 6-7), stored as logarithms.
* ``posteriors(counts, params)`` -> ``(q, loglik)`` (E-step, log space): ``q[i, k]`` the posterior
  of component ``k`` and ``loglik[i]`` the log marginal likelihood of document ``i`` (constant
  multinomial coefficients and length terms dropped).

Two switches change what the models see (both mergeable, both per-document or per-term):
``vocabulary="labeled"`` (default, as in the authors' released code) restricts the model
vocabulary to the terms of the (weakly) labeled documents, from the summed ``vocab`` statistic;
``max_length`` (default off; not in the paper) scales documents longer than that many tokens
down to it (:meth:`_XiaoModel.prepare`).

``fit_arrays`` is the serial loop: NB estimate on the labeled documents, then E-step / M-step
until the relative change of the log likelihood ``log P(θ) + Σ_labeled (complete-data log
likelihood) + Σ_unlabeled log P(x_i | θ)`` is below ``tol`` or ``max_iter`` M-steps were done.
``P(θ)`` is the Dirichlet(2) prior that makes the +1 smoothing a MAP estimate, so for the soft EMs
(PCEM, FlatEM, EMMC, TDEM, WDEM with ``e_step="soft"``) the recorded log likelihood never
decreases (Dempster et al. 1977); ``history_`` holds one value per iteration.

Paths (:class:`PathSpace`): root-to-leaf paths of the model taxonomy; a leaf shallower than the
depth ``d`` of the tree is padded with dummy nodes ``<leaf>/_pad<k>`` down to depth ``d`` (Xiao
§3); virtual ``/_self`` leaves of the taxonomy (partial-path labels, ALGORITHMS.md Notation) are
paths like any other. Dummy and virtual nodes never reach the output: a path's labels are its
real nodes. Node scores on the padded tree come from a 0/1 matrix ``W`` over the real nodes (gold
labels, ancestor-closed; or dataless weak labels): a real node scores ``W[i, c]``; a dummy or
virtual node standing for real node ``r`` scores ``W[i, r]`` if no strict descendant of ``r`` is
in ``W[i]`` and 0 otherwise (so a document labeled down to a shallow leaf or internal node is
labeled down to depth ``d`` along its padded path). Path score ``S_ij = Σ_{k=1..d} S_i(c_jk)``.

Choices where the paper is silent are marked **(choice)** in the docstrings and collected in
``docs/results/xiao/README.md``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp

from sparkhc.batch import NODE_SCORES, SparseBatch, label_matrix
from sparkhc.errors import ConfigError, NotFittedError
from sparkhc.models.base import HierModel, ModelState, TrainingStrategy
from sparkhc.taxonomy import Taxonomy

log = logging.getLogger(__name__)

PAD_SUFFIX = "/_pad"

Stats = dict[str, np.ndarray]
Params = dict[str, np.ndarray]

__all__ = [
    "EMMC",
    "NBMC",
    "PCEM",
    "PCNB",
    "TDEM",
    "TDNB",
    "WDEM",
    "WDNB",
    "FlatEM",
    "FlatNB",
    "PathSpace",
    "add_statistics",
    "estimate",
    "nb_log_likelihood",
    "posteriors",
    "sufficient_statistics",
    "weak_labels",
]

#: registry names of this module's models (Xiao, Liu, Song 2019, over raw counts); read by
#: :mod:`sparkhc.models` without importing
MODELS = {"flat_nb": "FlatNB", "flat_em": "FlatEM", "nbmc": "NBMC", "emmc": "EMMC", "tdnb": "TDNB",
          "tdem": "TDEM", "wdnb": "WDNB", "wdem": "WDEM", "pcnb": "PCNB", "pcem": "PCEM"}


# =============================================================================================
# padded path space
@dataclass(frozen=True, eq=False)
class PathSpace:
    """Root-to-leaf paths of a taxonomy, shallow leaves padded with dummy nodes to depth ``d``.

    Padded node ids: the taxonomy's node ids ``0 .. n_tax - 1`` (root 0, ``/_self`` virtual
    leaves included), then the dummy nodes. ``base`` is the taxonomy without virtual leaves: the
    real label space that predictions and metrics use.

    Attributes
    ----------
    taxonomy, base : Taxonomy
    names : tuple of str
        Padded node names (dummies are ``<leaf name>/_pad<depth>``).
    parent, depth : ndarray of int
        Of every padded node.
    real : ndarray of int
        Base-taxonomy id of the real node each padded node stands for (a virtual ``c/_self``
        leaf and the dummies below it stand for ``c``; a dummy below leaf ``l`` stands for ``l``).
    is_real : ndarray of bool
        True for real, non-root nodes.
    paths : ndarray of int, shape (M, d)
        Padded node ids of each path, depth 1 to ``d``.
    path_leaf : ndarray of int, shape (M,)
        The taxonomy leaf that ends each path (before padding).
    """

    taxonomy: Taxonomy
    base: Taxonomy
    names: tuple[str, ...]
    parent: np.ndarray
    depth: np.ndarray
    real: np.ndarray
    is_real: np.ndarray
    paths: np.ndarray
    path_leaf: np.ndarray

    @classmethod
    def build(cls, taxonomy: Taxonomy) -> PathSpace:
        base = taxonomy.base()
        d = taxonomy.max_depth
        if d < 1:
            raise ConfigError("the taxonomy has no labels (only a root)")
        names = list(taxonomy.names)
        parent = [int(p) for p in taxonomy.parent]
        depth = [int(x) for x in taxonomy.depth]
        real = [0] + [base.id(taxonomy.names[taxonomy.real_id(c)]) for c in range(1, taxonomy.n_nodes)]
        is_real = [False] + [not bool(taxonomy.virtual[c]) for c in range(1, taxonomy.n_nodes)]
        paths = []
        for leaf in taxonomy.leaves.tolist():
            chain = taxonomy.path(leaf)
            cur = leaf
            for k in range(int(taxonomy.depth[leaf]) + 1, d + 1):
                names.append(f"{taxonomy.names[leaf]}{PAD_SUFFIX}{k}")
                parent.append(cur)
                depth.append(k)
                real.append(real[leaf])
                is_real.append(False)
                cur = len(names) - 1
                chain.append(cur)
            paths.append(chain)
        return cls(
            taxonomy=taxonomy,
            base=base,
            names=tuple(names),
            parent=np.asarray(parent, dtype=np.int64),
            depth=np.asarray(depth, dtype=np.int64),
            real=np.asarray(real, dtype=np.int64),
            is_real=np.asarray(is_real, dtype=bool),
            paths=np.asarray(paths, dtype=np.int64).reshape(len(paths), d),
            path_leaf=taxonomy.leaves.astype(np.int64),
        )

    # ------------------------------------------------------------------ sizes
    @property
    def d(self) -> int:
        return int(self.paths.shape[1])

    @property
    def n_paths(self) -> int:
        return int(self.paths.shape[0])

    @property
    def n_nodes(self) -> int:
        """Padded nodes, the root included."""
        return len(self.names)

    @property
    def leaf_nodes(self) -> np.ndarray:
        """The padded leaf (depth ``d``) of each path."""
        return self.paths[:, -1]

    @cached_property
    def path_matrix(self) -> np.ndarray:
        """Dense 0/1 ``P`` of shape (n_nodes, M): ``P[c, j] = 1`` iff node ``c`` is on path ``j``."""
        p = np.zeros((self.n_nodes, self.n_paths))
        p[self.paths, np.arange(self.n_paths)[:, None]] = 1.0
        return p

    @cached_property
    def children_table(self) -> np.ndarray:
        """(n_nodes, max children) padded node ids of each node's children, ``-1`` filled."""
        kids: list[list[int]] = [[] for _ in range(self.n_nodes)]
        for c in range(1, self.n_nodes):
            kids[int(self.parent[c])].append(c)
        width = max(len(k) for k in kids)
        out = np.full((self.n_nodes, width), -1, dtype=np.int64)
        for p, k in enumerate(kids):
            out[p, : len(k)] = k
        return out

    # ------------------------------------------------------------------ scores
    def node_scores(self, w: Any) -> np.ndarray:
        """Node scores ``S_i(c)`` on the padded tree, shape (n_docs, n_nodes), root column 0.

        Parameters
        ----------
        w : array or sparse matrix of shape (n_docs, base.n_nodes)
            0/1 node labels over the real (base) nodes: gold labels ancestor-closed, or weak
            (dataless) labels, one per depth.
        """
        w = np.asarray(w.toarray() if sp.issparse(w) else w, dtype=np.float64)
        nb = self.base.n_nodes
        if w.ndim != 2 or w.shape[1] != nb:
            raise ValueError(f"node labels must have {nb} columns (base taxonomy nodes); got shape {w.shape}")
        anc = self._base_ancestors
        # strict descendants of each node present in the row
        desc = w @ anc - w
        s = np.zeros((w.shape[0], self.n_nodes))
        real_cols = np.flatnonzero(self.is_real)
        s[:, real_cols] = w[:, self.real[real_cols]]
        virt = np.flatnonzero(~self.is_real)
        virt = virt[virt > 0]
        if virt.size:
            r = self.real[virt]
            s[:, virt] = w[:, r] * (desc[:, r] <= 0)
        return s

    @cached_property
    def _base_ancestors(self) -> np.ndarray:
        return self.base.ancestor_matrix().toarray().astype(np.float64)

    def path_scores(self, node_scores: np.ndarray) -> np.ndarray:
        """``S_ij = Σ_k S_i(c_jk)`` (root excluded), shape (n_docs, M) (Xiao Eq. 2)."""
        return np.asarray(node_scores) @ self.path_matrix

    def path_labels(self, path_idx: Sequence[int] | np.ndarray) -> sp.csr_matrix:
        """Ancestor-closed real labels (base ids) of the given paths, CSR (n, base.n_nodes)."""
        path_idx = np.asarray(path_idx, dtype=np.int64)
        return self._path_label_table[path_idx]

    @cached_property
    def _path_label_table(self) -> sp.csr_matrix:
        rows: list[int] = []
        cols: list[int] = []
        for j, leaf in enumerate(self.path_leaf.tolist()):
            for c in self.base.closure([int(self.real[leaf])]).tolist():
                rows.append(j)
                cols.append(c)
        return sp.csr_matrix(
            (np.ones(len(rows), dtype=np.float32), (rows, cols)), shape=(self.n_paths, self.base.n_nodes)
        )


def weak_labels(sim: np.ndarray, base: Taxonomy, min_sim: float = 0.0) -> np.ndarray:
    """Dataless weak labels (Xiao §4.2; Song & Roth 2014): at every depth ``k`` the real node of
    depth ``k`` most similar to the document.

    Parameters
    ----------
    sim : ndarray of shape (n_docs, base.n_nodes)
        Document-to-label similarity (e.g. tf-idf cosine with the label descriptions).
    base : Taxonomy
        The real label tree (no virtual nodes).
    min_sim : float
        **(choice)** A depth whose best similarity is ``<= min_sim`` gets no weak label (a document
        that shares no word with any description of that depth is not labeled there).

    Returns
    -------
    ndarray of float64, shape (n_docs, base.n_nodes), 0/1, at most one 1 per depth.
    """
    sim = np.asarray(sim, dtype=np.float64)
    n = sim.shape[0]
    out = np.zeros((n, base.n_nodes))
    real = ~base.virtual
    for k in range(1, base.max_depth + 1):
        cols = np.flatnonzero((base.depth == k) & real)
        if cols.size == 0:
            continue
        sub = sim[:, cols]
        best = np.argmax(sub, axis=1)
        ok = sub[np.arange(n), best] > min_sim
        out[np.flatnonzero(ok), cols[best[ok]]] = 1.0
    return out


# =============================================================================================
# pure statistics / estimation / posteriors (module level: they pickle for Spark)
def _as_csr(counts: Any) -> sp.csr_matrix:
    x = counts if sp.issparse(counts) else sp.csr_matrix(np.asarray(counts))
    return sp.csr_matrix(x, dtype=np.float64)


def sufficient_statistics(counts: Any, weights: np.ndarray, labeled: bool = False) -> Stats:
    """``word = Wᵀ X`` (K, V) and ``prior = Σ_i W_i`` (K,): pure sums, mergeable by addition.

    Parameters
    ----------
    counts : sparse matrix (n_docs, V)
        Raw term counts ``x_it``.
    weights : ndarray (n_docs, K)
        Event counts of each document for each component (path scores, posteriors, ...).
    labeled : bool
        Also return ``vocab[t] = Σ_i x_it`` (term totals of the labeled documents), which
        defines the model vocabulary when ``vocabulary="labeled"`` (see :func:`estimate`).
    """
    x = _as_csr(counts)
    w = np.asarray(weights, dtype=np.float64)
    if w.shape[0] != x.shape[0]:
        raise ValueError(f"counts have {x.shape[0]} rows but the scores have {w.shape[0]}")
    word = np.asarray((x.T @ w).T)
    st = {"word": np.ascontiguousarray(word), "prior": w.sum(axis=0), "docs": np.array([float(x.shape[0])])}
    if labeled:
        st["vocab"] = np.asarray(x.sum(axis=0)).ravel()
    return st


def add_statistics(*parts: Mapping[str, np.ndarray]) -> Stats:
    """Sum of sufficient statistics (the ``treeAggregate`` combine)."""
    out: Stats = {}
    for p in parts:
        for k, v in p.items():
            out[k] = out[k] + v if k in out else np.array(v, dtype=np.float64, copy=True)
    return out


def estimate(
    stats: Mapping[str, np.ndarray],
    groups: np.ndarray | None = None,
    vocabulary: str = "labeled",
    smoothing: float = 1.0,
) -> Params:
    """M-step with Laplace smoothing (Xiao Eqs. 3-4 and 6-7), in log space.

    ``groups[k]`` names the prior group of component ``k`` (the prior is normalized within each
    group: one group for PC / flat / MC; one per depth for WD; one per parent for TD).

    ``vocabulary="labeled"`` **(choice, as in the authors' released code)**: the model vocabulary
    ``V`` is the set of terms that occur in the (weakly) labeled documents (``stats["vocab"] > 0``);
    other terms get ``log θ_{t|k} = 0`` and so are ignored by the E-step and the prediction.
    ``"all"``: every column of the count matrix.

    ``smoothing`` is the pseudo-count ``α`` of the word distributions,
    ``θ_{t|k} = (α + word_kt) / (α|V| + Σ_t word_kt)`` (the paper: ``α = 1``, Laplace); the
    class priors keep ``+1``.
    """
    word = np.asarray(stats["word"], dtype=np.float64)
    prior = np.asarray(stats["prior"], dtype=np.float64)
    k = word.shape[0]
    if vocabulary == "labeled" and "vocab" in stats:
        mask = np.asarray(stats["vocab"]) > 0
        v = int(mask.sum())
        tot = word @ mask.astype(np.float64)
        log_word = np.where(mask[None, :], _log_plus(word, smoothing) - np.log(smoothing * v + tot)[:, None], 0.0)
    else:
        log_word = _log_plus(word, smoothing) - np.log(smoothing * word.shape[1] + word.sum(axis=1, keepdims=True))
    if groups is None:
        log_prior = np.log1p(prior) - np.log(k + prior.sum())
    else:
        g = np.asarray(groups, dtype=np.int64)
        size = np.bincount(g)
        gtot = np.bincount(g, weights=prior)
        log_prior = np.log1p(prior) - np.log(size[g] + gtot[g])
    return {"log_prior": log_prior, "log_word": log_word}


def _log_plus(a: np.ndarray, alpha: float) -> np.ndarray:
    """``log(α + a)``; ``log1p`` at the paper's ``α = 1``."""
    return np.log1p(a) if alpha == 1.0 else np.log(alpha + a)


def log_joint(counts: Any, params: Mapping[str, np.ndarray]) -> np.ndarray:
    """``log θ_k + Σ_t x_it log θ_{t|k}``, shape (n_docs, K): one sparse-dense product."""
    x = _as_csr(counts)
    lw = np.asarray(params["log_word"])
    return np.asarray(x @ np.ascontiguousarray(lw.T)) + params["log_prior"][None, :]


def _expand_columns(params: Params, stats: Stats, cols: np.ndarray, v: int) -> tuple[Params, Stats]:
    """Put parameters / statistics fitted on the columns ``cols`` back into ``v`` columns (terms
    outside the model vocabulary: log θ = 0 and zero statistics)."""
    lw = np.zeros((params["log_word"].shape[0], v))
    lw[:, cols] = params["log_word"]
    out_p = {**params, "log_word": lw}
    out_s = dict(stats)
    for key in ("word", "vocab"):
        if key in stats:
            a = np.asarray(stats[key])
            full = np.zeros(a.shape[:-1] + (v,))
            full[..., cols] = a
            out_s[key] = full
    return out_p, out_s


def _logsumexp(a: np.ndarray, axis: int = -1) -> np.ndarray:
    m = np.max(a, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    out = np.log(np.sum(np.exp(a - m), axis=axis, keepdims=True)) + m
    return np.squeeze(out, axis=axis)


def _softmax(a: np.ndarray, axis: int = -1) -> np.ndarray:
    m = np.max(a, axis=axis, keepdims=True)
    e = np.exp(a - m)
    return e / e.sum(axis=axis, keepdims=True)


def posteriors(
    counts: Any, params: Mapping[str, np.ndarray], groups: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """E-step: ``P(k | x_i)`` normalized within each prior group, and the per-document log
    likelihood ``Σ_groups log Σ_{k∈G} θ_k P(x_i | k)`` (Xiao Eq. 5, in log space)."""
    j = log_joint(counts, params)
    if groups is None:
        return _softmax(j, axis=1), _logsumexp(j, axis=1)
    g = np.asarray(groups, dtype=np.int64)
    q = np.zeros_like(j)
    ll = np.zeros(j.shape[0])
    for gid in np.unique(g):
        cols = np.flatnonzero(g == gid)
        q[:, cols] = _softmax(j[:, cols], axis=1)
        ll += _logsumexp(j[:, cols], axis=1)
    return q, ll


def nb_log_likelihood(params: Mapping[str, np.ndarray], stats: Mapping[str, np.ndarray]) -> float:
    """Complete-data log likelihood of documents with known event counts, from their statistics:
    ``Σ_k prior_k log θ_k + Σ_{k,t} word_kt log θ_{t|k}``."""
    return float(params["log_prior"] @ stats["prior"] + np.sum(params["log_word"] * stats["word"]))


def log_prior_density(params: Mapping[str, np.ndarray], smoothing: float = 1.0) -> float:
    """``log P(θ)`` of the Dirichlet priors (up to a constant): ``Σ log θ_k + α Σ log θ_{t|k}``
    (Dirichlet(2) for the classes, Dirichlet(1 + α) for the words: the MAP estimates of
    :func:`estimate`)."""
    return float(params["log_prior"].sum() + smoothing * params["log_word"].sum())


# =============================================================================================
# models
class _XiaoModel(HierModel):
    """Shared machinery: parameters, path space, serial EM loop, decoding, state."""

    combine = "sum"
    semi_supervised: ClassVar[bool] = False
    #: read raw term counts (``SparseBatch.counts``) in Spark passes
    needs_counts: ClassVar[bool] = True
    #: trained on Spark by EM, one aggregation pass per E-step (:mod:`sparkhc.spark.em`)
    training: ClassVar[TrainingStrategy] = "em"
    warm_startable: ClassVar[bool] = False
    defaults: ClassVar[dict[str, Any]] = {
        "max_iter": 30,
        "tol": 1e-4,
        "seed": 0,
        "vocabulary": "labeled",
        "max_length": None,
        "smoothing": 1.0,
    }

    def __init__(self, taxonomy: Taxonomy, n_features: int, **params: Any) -> None:
        super().__init__(taxonomy, n_features, **params)
        self._space: PathSpace | None = None
        self.params_: Params | None = None
        self.history_: list[float] = []
        self.n_iter_ = 0

    # ------------------------------------------------------------------ setup
    @property
    def space(self) -> PathSpace:
        """The padded path space of the model taxonomy (built on first use)."""
        if self._space is None:
            self._space = PathSpace.build(self.taxonomy)
        return self._space

    def validate_params(self) -> None:
        p = self.params
        self._check_param("max_iter", isinstance(p["max_iter"], int) and p["max_iter"] >= 0, "an int >= 0")
        self._check_param(
            "tol", isinstance(p["tol"], (int, float)) and float(p["tol"]) >= 0, "a float >= 0"
        )
        self._check_param("seed", isinstance(p["seed"], int), "an int")
        self._check_param("vocabulary", p["vocabulary"] in ("labeled", "all"), "'labeled' or 'all'")
        sm = p["smoothing"]
        self._check_param("smoothing", isinstance(sm, (int, float)) and sm > 0, "a number > 0")
        ml = p["max_length"]
        self._check_param(
            "max_length", ml is None or (isinstance(ml, (int, float)) and ml > 0), "None or a number > 0"
        )

    def prepare(self, counts: Any) -> sp.csr_matrix:
        """Counts as the model sees them: float64 CSR; with ``max_length`` **(choice, not in the
        paper)** a document longer than ``max_length`` tokens is scaled down to that length
        (fractional counts), so that one very long labeled document cannot dominate the token
        totals of its paths. ``fit_arrays`` / ``predict_paths`` call it; a Spark driver calls it
        per partition before :meth:`e_step` / :meth:`sufficient_statistics`."""
        x = _as_csr(counts)
        ml = self.params.get("max_length")
        if ml is None:
            return x
        length = np.asarray(x.sum(axis=1)).ravel()
        scale = np.minimum(1.0, float(ml) / np.maximum(length, 1e-300))
        return sp.csr_matrix(sp.diags(scale) @ x)

    # ------------------------------------------------------------------ model-specific hooks
    def groups(self) -> np.ndarray | None:
        """Prior group of every component (None: one group)."""
        return None

    def event_weights(self, node_scores: np.ndarray) -> np.ndarray:
        """Event counts ``S`` (n_docs, K) of labeled documents from their padded node scores."""
        raise NotImplementedError

    def component_paths(self, counts: Any, params: Params) -> np.ndarray:
        """Decoded path index of each document."""
        raise NotImplementedError

    # ------------------------------------------------------------------ the three steps
    def sufficient_statistics(self, counts: Any, S: np.ndarray) -> Stats:
        """Statistics of labeled documents with event counts ``S`` (n_docs, K), with the term
        totals ``vocab`` that define the model vocabulary."""
        return sufficient_statistics(counts, S, labeled=True)

    def estimate(self, stats: Mapping[str, np.ndarray]) -> Params:
        return estimate(stats, self.groups(), str(self.params["vocabulary"]), float(self.params["smoothing"]))

    def posteriors(self, counts: Any, params: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        return posteriors(counts, params, self.groups())

    def e_step(self, counts: Any, params: Params) -> Stats:
        """One E-step over unlabeled documents: their posteriors become their event counts.

        Returns the sufficient statistics plus ``loglik`` (shape (1,), summable) — what one
        Spark partition returns to ``treeAggregate``.
        """
        q, ll = self.posteriors(counts, params)
        st = sufficient_statistics(counts, q)
        st["loglik"] = np.array([float(ll.sum())])
        return st

    def e_step_labeled(self, counts: Any, S: np.ndarray, params: Params | None, cached: Stats | None) -> Stats:
        """Statistics of the labeled part and their log-likelihood term at ``params``."""
        st = dict(cached) if cached is not None else self.sufficient_statistics(counts, S)
        st["loglik"] = np.array([nb_log_likelihood(params, st) if params is not None else 0.0])
        return st

    def objective(self, params: Params, loglik: float) -> float:
        """``log P(θ) + Σ labeled + Σ unlabeled`` (the summed ``loglik`` of the E-steps)."""
        return log_prior_density(params, float(self.params["smoothing"])) + loglik

    # ------------------------------------------------------------------ serial training
    def fit_arrays(
        self,
        counts_l: Any,
        node_scores_l: np.ndarray,
        counts_u: Any | None = None,
    ) -> _XiaoModel:
        """Train from arrays.

        Parameters
        ----------
        counts_l : sparse (n_l, V)
            Raw counts of the labeled (or weakly labeled) documents.
        node_scores_l : ndarray (n_l, space.n_nodes)
            Their padded node scores (:meth:`PathSpace.node_scores`).
        counts_u : sparse (n_u, V), optional
            Unlabeled documents (used by the EM variants only).
        """
        self.validate_params()
        x_l = self.prepare(counts_l)
        if x_l.shape[1] != self.n_features:
            raise ValueError(f"counts have {x_l.shape[1]} columns, the model expects {self.n_features}")
        s_l = self.event_weights(np.asarray(node_scores_l, dtype=np.float64))
        x_u = self.prepare(counts_u) if (self.semi_supervised and counts_u is not None) else None
        if x_u is not None and x_u.shape[0] == 0:
            x_u = None
        cols = None
        if self.params["vocabulary"] == "labeled":
            # the model only sees the labeled documents' terms (see estimate): drop the other
            # columns once, so that every E-step multiplies the smaller matrix
            seen = np.flatnonzero(np.asarray(x_l.sum(axis=0)).ravel() > 0)
            if seen.size < x_l.shape[1]:
                cols = seen
                x_l = x_l[:, cols]
                x_u = x_u[:, cols] if x_u is not None else None
        params, stats, hist = self._run_em(x_l, s_l, x_u)
        if cols is not None:
            params, stats = _expand_columns(params, stats, cols, self.n_features)
        self.params_ = params
        self.history_ = hist
        self.n_iter_ = max(len(hist) - 1, 0)
        self.state_ = ModelState(
            {k: v for k, v in stats.items() if k != "loglik"},
            {"loglik": hist[-1] if hist else 0.0, "iterations": float(self.n_iter_)},
            "sum",
        )
        return self

    def _init_params(self, x_l: sp.csr_matrix, s_l: np.ndarray) -> tuple[Params, Stats, bool]:
        """(initial parameters, the statistics they were estimated from, whether those are the
        fixed labeled statistics that can be cached)."""
        st = self.sufficient_statistics(x_l, s_l)
        return self.estimate(st), st, True

    def _run_em(
        self, x_l: sp.csr_matrix, s_l: np.ndarray, x_u: sp.csr_matrix | None
    ) -> tuple[Params, Stats, list[float]]:
        params, stats_used, fixed = self._init_params(x_l, s_l)
        cached = stats_used if fixed else None
        hist: list[float] = []
        if x_u is None and fixed:
            st = self.e_step_labeled(x_l, s_l, params, cached)
            hist.append(self.objective(params, float(st["loglik"][0])))
            return params, stats_used, hist
        return self.em_loop(
            params,
            stats_used,
            lambda p: self.e_step_labeled(x_l, s_l, p, cached),
            None if x_u is None else (lambda p: self.e_step(x_u, p)),
        )

    def em_loop(
        self,
        params: Params,
        stats_used: Stats,
        labeled: Callable[[Params], Stats],
        unlabeled: Callable[[Params], Stats] | None,
        on_iter: Callable[[float, float | None], None] | None = None,
    ) -> tuple[Params, Stats, list[float]]:
        """The EM iterations (serial and Spark share them: the Spark driver passes an
        ``unlabeled`` E-step that aggregates over partitions). Stops when the relative change of
        the objective is at most ``tol`` or after ``max_iter`` M-steps."""
        max_iter = int(self.params["max_iter"])
        tol = float(self.params["tol"])
        hist: list[float] = []
        prev: float | None = None
        for it in range(max_iter + 1):
            parts = [labeled(params)]
            if unlabeled is not None:
                parts.append(unlabeled(params))
            tot = add_statistics(*parts)
            ll = self.objective(params, float(tot["loglik"][0]))
            hist.append(ll)
            log.debug("%s iteration %d: log likelihood %.6g", self.name, it, ll)
            if on_iter is not None:
                on_iter(ll, prev)
            if prev is not None and abs(ll - prev) <= tol * abs(prev):
                break
            if it == max_iter:
                break
            prev = ll
            params = self.estimate(tot)
            stats_used = tot
        return params, stats_used, hist

    # ------------------------------------------------------------------ prediction
    def _params(self) -> Params:
        if self.params_ is None:
            if self.state_ is None or "word" not in self.state_.arrays:
                raise NotFittedError(f"model {self.name!r} is not fitted yet")
            self.params_ = self.estimate(self.state_.arrays)
        return self.params_

    def set_state(self, state: ModelState) -> _XiaoModel:
        """Load sufficient statistics; the parameters are re-estimated from them."""
        self.state_ = state
        self.params_ = None
        return self

    def predict_paths(self, counts: Any) -> np.ndarray:
        """Index of the decoded (padded) path of each document."""
        return self.component_paths(self.prepare(counts), self._params())

    def predict_label_matrix(self, counts: Any) -> sp.csr_matrix:
        """Ancestor-closed predicted labels over the real (base) taxonomy nodes, CSR
        (n_docs, base.n_nodes); dummy and virtual nodes removed."""
        return self.space.path_labels(self.predict_paths(counts))

    # ------------------------------------------------------------------ HierModel interface
    def _batch_arrays(self, batch: SparseBatch) -> sp.csr_matrix:
        if batch.counts is None:
            raise ConfigError(f"model {self.name!r} needs raw term counts (SparseBatch.counts)")
        return batch.counts

    def node_scores_from_labels(self, labels: Sequence[Sequence[str]]) -> np.ndarray:
        """Padded node scores of gold label-name sets (ancestors implied)."""
        return self.space.node_scores(label_matrix(labels, self.space.base, closed=True))

    def fit(self, batch: SparseBatch, epochs: int | None = None, seed: int = 0) -> _XiaoModel:
        """Fit on a batch: documents with an empty label list are the unlabeled ones. With the
        :data:`~sparkhc.batch.NODE_SCORES` column (padded node scores, one row per document, e.g.
        dataless weak labels) the documents with a positive row are the labeled ones and their
        rows are their node scores; the labels are not read."""
        x = self._batch_arrays(batch)
        if NODE_SCORES in batch.extra:
            s_all = np.asarray(batch.extra[NODE_SCORES], dtype=np.float64)
            if s_all.shape != (len(batch), self.space.n_nodes):
                raise ConfigError(f"model {self.name!r}: the {NODE_SCORES!r} column has shape {s_all.shape}, "
                                  f"expected ({len(batch)}, {self.space.n_nodes}) (documents, padded nodes)")
            has = s_all.sum(axis=1) > 0
            if not has.any():
                raise ConfigError(f"model {self.name!r}: no document with a positive node score in the batch")
            lab_idx, unl = np.flatnonzero(has), np.flatnonzero(~has)
            return self.fit_arrays(x[lab_idx], s_all[lab_idx], x[unl] if unl.size else None)
        if batch.labels is None:
            raise ConfigError(f"model {self.name!r} needs labels for at least some documents")
        has = np.array([len(lab) > 0 for lab in batch.labels], dtype=bool)
        if not has.any():
            raise ConfigError(f"model {self.name!r}: no labeled document in the batch")
        lab_idx = np.flatnonzero(has)
        s = self.node_scores_from_labels([batch.labels[i] for i in lab_idx])
        unl = np.flatnonzero(~has)
        return self.fit_arrays(x[lab_idx], s, x[unl] if unl.size else None)

    def partial_fit(self, batch: SparseBatch, seed: int = 0, epoch: int = 0) -> dict[str, float]:
        """Add the labeled documents' sufficient statistics to the state (naive Bayes counting)."""
        x = self.prepare(self._batch_arrays(batch))
        if batch.labels is None:
            raise ConfigError(f"model {self.name!r} needs labels")
        has = np.flatnonzero([len(lab) > 0 for lab in batch.labels])
        s = self.event_weights(self.node_scores_from_labels([batch.labels[i] for i in has]))
        st = self.sufficient_statistics(x[has], s)
        if self.state_ is None:
            self.state_ = ModelState(st, {}, "sum")
        else:
            self.state_ = ModelState(add_statistics(self.state_.arrays, st), dict(self.state_.counters), "sum")
        self.params_ = None
        return {"examples": float(len(batch)), "updates": float(has.size), "loss": 0.0}

    def init_state(self) -> ModelState:
        return ModelState({}, {}, "sum")

    def decode(self, batch: SparseBatch) -> tuple[list[np.ndarray], np.ndarray | None]:
        paths = self.predict_paths(self._batch_arrays(batch))
        leaves = self.space.path_leaf[paths]
        return [np.array([int(lf)], dtype=np.int32) for lf in leaves], None


# ---------------------------------------------------------------------------------------------
class PCNB(_XiaoModel):
    """Path cost-sensitive naive Bayes (Xiao §4.3): one multinomial component per root-to-leaf
    path, trained with the path scores ``S_ij`` as event counts; predicts the best path."""

    name = "pcnb"

    def event_weights(self, node_scores: np.ndarray) -> np.ndarray:
        return self.space.path_scores(node_scores)

    def component_paths(self, counts: Any, params: Params) -> np.ndarray:
        return np.argmax(log_joint(counts, params), axis=1)


class PCEM(PCNB):
    """Path cost-sensitive EM (Xiao §4.4, Alg. 1): PCNB initialisation, then posteriors of the
    unlabeled documents over paths become their path scores, until the log likelihood converges."""

    name = "pcem"
    semi_supervised = True


class FlatNB(PCNB):
    """Flat naive Bayes over leaves (Nigam et al. 2006): a document counts once for each of its
    (padded) leaves; the decoded leaf's path gives the labels."""

    name = "flat_nb"

    def event_weights(self, node_scores: np.ndarray) -> np.ndarray:
        return np.asarray(node_scores)[:, self.space.leaf_nodes]


class FlatEM(FlatNB):
    """Flat EM (Nigam et al. 2006) over leaves."""

    name = "flat_em"
    semi_supervised = True


# ---------------------------------------------------------------------------------------------
class NBMC(FlatNB):
    """Naive Bayes with several mixture components per class (Nigam et al. 2006, §5.3).

    Classes are the (padded) leaves; each has ``n_components`` multinomial components. The
    component of a labeled document within its class is latent, so even NBMC runs EM over the
    labeled documents (responsibilities restricted to the document's classes, weighted by its
    event counts); EMMC adds the unlabeled documents with posteriors over all components.
    **(choice)** Random (seeded, Dirichlet(1)) initial responsibilities; a class is decoded by
    the sum of its components' posteriors. (The authors' released code instead uses the leaves
    as the components of each depth-1 class; the paper only cites Nigam et al.)
    """

    name = "nbmc"
    defaults: ClassVar[dict[str, Any]] = {**_XiaoModel.defaults, "n_components": 2}
    # random per-document start and a labeled E-step over all labeled documents: no Spark EM and
    # no mixing (partial_fit only counts, with every component equally responsible: not the
    # model; through mixing, sparkhc train also counted every document once per epoch, found by
    # the conformance suite): the documents are collected on the driver and fitted there
    training: ClassVar[TrainingStrategy] = "local"
    warm_startable: ClassVar[bool] = False

    def validate_params(self) -> None:
        super().validate_params()
        n = self.params["n_components"]
        self._check_param("n_components", isinstance(n, int) and n >= 1, "an int >= 1")

    @property
    def _nc(self) -> int:
        return int(self.params["n_components"])

    def _class_lse(self, j: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(responsibilities within each class, log Σ over each class's components)."""
        n = j.shape[0]
        j3 = j.reshape(n, self.space.n_paths, self._nc)
        return _softmax(j3, axis=2), _logsumexp(j3, axis=2)

    def _init_params(self, x_l: sp.csr_matrix, s_l: np.ndarray) -> tuple[Params, Stats, bool]:
        rng = np.random.default_rng(int(self.params["seed"]))
        r = rng.dirichlet(np.ones(self._nc), size=(s_l.shape[0], s_l.shape[1]))
        w = (s_l[:, :, None] * r).reshape(s_l.shape[0], -1)
        st = sufficient_statistics(x_l, w, labeled=True)
        return self.estimate(st), st, False

    def e_step_labeled(self, counts: Any, S: np.ndarray, params: Params | None, cached: Stats | None) -> Stats:
        if params is None:
            raise ValueError("NBMC needs parameters for the labeled E-step")
        resp, lse = self._class_lse(log_joint(counts, params))
        w = (S[:, :, None] * resp).reshape(S.shape[0], -1)
        st = sufficient_statistics(counts, w, labeled=True)
        st["loglik"] = np.array([float(np.sum(S * lse))])
        return st

    def sufficient_statistics(self, counts: Any, S: np.ndarray) -> Stats:
        """``S`` over classes (n, M) is spread evenly over each class's components (used by
        :meth:`partial_fit`; EM training uses the latent responsibilities instead)."""
        if S.shape[1] == self.space.n_paths * self._nc:
            return sufficient_statistics(counts, S, labeled=True)
        return sufficient_statistics(counts, np.repeat(S, self._nc, axis=1) / self._nc, labeled=True)

    def component_paths(self, counts: Any, params: Params) -> np.ndarray:
        _, lse = self._class_lse(log_joint(counts, params))
        return np.argmax(lse, axis=1)


class EMMC(NBMC):
    """EM with several mixture components per class (Nigam et al. 2006, §5.3)."""

    name = "emmc"
    semi_supervised = True


# ---------------------------------------------------------------------------------------------
class _NodeModel(_XiaoModel):
    """Components are the padded non-root nodes (component ``k`` = node ``k + 1``)."""

    def event_weights(self, node_scores: np.ndarray) -> np.ndarray:
        return np.asarray(node_scores)[:, 1:]


class WDNB(_NodeModel):
    """Win-driven naive Bayes (Wu, Tygert, LeCun 2017 as used by Xiao et al.): one NB per depth
    over the (padded) nodes of that depth; a document is decoded to the path that maximises the
    expected win ``Σ_k w_k P_k(c_jk | x)`` with ``w_k = path_weight^(k-1)`` (authors' code:
    ``path_weight = 1``)."""

    name = "wdnb"
    defaults: ClassVar[dict[str, Any]] = {**_XiaoModel.defaults, "path_weight": 1.0, "e_step": "hard"}

    def validate_params(self) -> None:
        super().validate_params()
        pw = self.params["path_weight"]
        self._check_param("path_weight", isinstance(pw, (int, float)) and pw > 0, "a float > 0")
        self._check_param("e_step", self.params["e_step"] in ("hard", "soft"), "'hard' or 'soft'")

    def groups(self) -> np.ndarray:
        return self.space.depth[1:]

    def _win(self, q: np.ndarray) -> np.ndarray:
        w = float(self.params["path_weight"]) ** np.arange(self.space.d)
        qn = np.concatenate([np.zeros((q.shape[0], 1)), q], axis=1)  # node-indexed
        return np.einsum("njk,k->nj", qn[:, self.space.paths], w)

    def component_paths(self, counts: Any, params: Params) -> np.ndarray:
        q, _ = posteriors(counts, params, self.groups())
        return np.argmax(self._win(q), axis=1)

    def e_step(self, counts: Any, params: Params) -> Stats:
        """WDEM E-step. ``e_step="hard"`` (default, as in the authors' code): each unlabeled
        document gets the nodes of its win-driven path as hard labels; the recorded log
        likelihood is then the classification likelihood (not monotone). ``"soft"``: per-depth
        posteriors (an exact EM of the per-depth mixtures; monotone)."""
        if self.params["e_step"] == "soft":
            return super().e_step(counts, params)
        j = log_joint(counts, params)
        q = np.zeros_like(j)
        g = self.groups()
        for gid in np.unique(g):
            cols = np.flatnonzero(g == gid)
            q[:, cols] = _softmax(j[:, cols], axis=1)
        best = np.argmax(self._win(q), axis=1)
        hard = np.zeros_like(j)
        nodes = self.space.paths[best] - 1
        rows = np.repeat(np.arange(j.shape[0]), self.space.d)
        hard[rows, nodes.ravel()] = 1.0
        st = sufficient_statistics(counts, hard)
        st["loglik"] = np.array([float(np.sum(j[rows, nodes.ravel()]))])
        return st


class WDEM(WDNB):
    """Win-driven EM (see :class:`WDNB` and :meth:`WDNB.e_step`)."""

    name = "wdem"
    semi_supervised = True


# ---------------------------------------------------------------------------------------------
class TDNB(_NodeModel):
    """Top-down naive Bayes: at every internal (padded) node an NB over its children, trained on
    the labeled documents of that node; decoding descends greedily from the root."""

    name = "tdnb"

    def __init__(self, taxonomy: Taxonomy, n_features: int, **params: Any) -> None:
        super().__init__(taxonomy, n_features, **params)
        self.history_levels_: list[list[float]] = []

    def groups(self) -> np.ndarray:
        return self.space.parent[1:]

    def _descend(self, j: np.ndarray, levels: int) -> np.ndarray:
        """Greedy top-down path: the node reached at depth ``levels`` (0 = root) per document."""
        kids = self.space.children_table
        n = j.shape[0]
        jn = np.concatenate([np.full((n, 1), -np.inf), j], axis=1)  # node-indexed
        cur = np.zeros(n, dtype=np.int64)
        rows = np.arange(n)
        for _ in range(levels):
            cand = kids[cur]  # (n, width)
            sc = np.where(cand >= 0, jn[rows[:, None], np.maximum(cand, 0)], -np.inf)
            cur = cand[rows, np.argmax(sc, axis=1)]
        return cur

    def component_paths(self, counts: Any, params: Params) -> np.ndarray:
        leaf = self._descend(log_joint(counts, params), self.space.d)
        lookup = np.full(self.space.n_nodes, -1, dtype=np.int64)
        lookup[self.space.leaf_nodes] = np.arange(self.space.n_paths)
        return lookup[leaf]

    def e_step_level(self, counts: Any, params: Params, level: int) -> Stats:
        """TDEM E-step of level ``level``: unlabeled documents are routed top-down (with the
        current parameters) to a node of depth ``level``; their posterior over that node's
        children becomes their event counts for those children."""
        j = log_joint(counts, params)
        cur = self._descend(j, level)
        kids = self.space.children_table
        n = j.shape[0]
        rows = np.arange(n)
        cand = kids[cur]
        valid = cand >= 0
        jn = np.concatenate([np.full((n, 1), -np.inf), j], axis=1)
        sc = np.where(valid, jn[rows[:, None], np.maximum(cand, 0)], -np.inf)
        q = np.zeros_like(j)
        qc = _softmax(sc, axis=1)
        r, c = np.nonzero(valid)
        q[r, cand[r, c] - 1] = qc[r, c]
        st = sufficient_statistics(counts, q)
        st["loglik"] = np.array([float(_logsumexp(sc, axis=1).sum())])
        return st

    def _level_mask(self, level: int) -> np.ndarray:
        return self.space.depth[1:] == level + 1

    def objective_level(self, params: Params, stats_l: Stats, loglik_u: float, level: int) -> float:
        """Log likelihood of the local models of one level: Dirichlet priors + labeled complete
        data + unlabeled marginal likelihood, restricted to the children at depth ``level+1``."""
        m = self._level_mask(level)
        lp, lw = params["log_prior"][m], params["log_word"][m]
        return float(
            lp.sum() + float(self.params["smoothing"]) * lw.sum() + lp @ stats_l["prior"][m] + np.sum(lw * stats_l["word"][m]) + loglik_u
        )

    def _run_em(
        self, x_l: sp.csr_matrix, s_l: np.ndarray, x_u: sp.csr_matrix | None
    ) -> tuple[Params, Stats, list[float]]:
        stats_l = self.sufficient_statistics(x_l, s_l)
        params = self.estimate(stats_l)
        if x_u is None:
            st = self.e_step_labeled(x_l, s_l, params, stats_l)
            return params, stats_l, [self.objective(params, float(st["loglik"][0]))]
        return self.level_loop(params, stats_l, lambda p, level: self.e_step_level(x_u, p, level), x_u.shape[0])

    def level_loop(
        self,
        params: Params,
        stats_l: Stats,
        e_step_level: Callable[[Params, int], Stats],
        n_unlabeled: int,
        on_iter: Callable[[float, float | None, int], None] | None = None,
    ) -> tuple[Params, Stats, list[float]]:
        """Level-by-level EM iterations (serial and Spark share them)."""
        max_iter = int(self.params["max_iter"])
        tol = float(self.params["tol"])
        hist: list[float] = []
        self.history_levels_ = []
        stats_u: Stats = {
            "word": np.zeros_like(stats_l["word"]),
            "prior": np.zeros_like(stats_l["prior"]),
            "docs": np.zeros(1),
        }
        for level in range(self.space.d):
            m = self._level_mask(level)
            lvl_hist: list[float] = []
            prev: float | None = None
            for it in range(max_iter + 1):
                st = e_step_level(params, level)
                ll = self.objective_level(params, stats_l, float(st["loglik"][0]), level)
                lvl_hist.append(ll)
                if on_iter is not None:
                    on_iter(ll, prev, level)
                if (prev is not None and abs(ll - prev) <= tol * abs(prev)) or it == max_iter:
                    break
                prev = ll
                stats_u["word"][m] = st["word"][m]
                stats_u["prior"][m] = st["prior"][m]
                params = self.estimate(add_statistics(stats_l, stats_u))
            self.history_levels_.append(lvl_hist)
            hist.extend(lvl_hist)
        tot = add_statistics(stats_l, stats_u)
        tot["docs"] = stats_l["docs"] + float(n_unlabeled)
        return params, tot, hist


class TDEM(TDNB):
    """Top-down EM: level by level from the root, an EM over each node's children with the
    unlabeled documents routed to that node by the levels above (as in the authors' code)."""

    name = "tdem"
    semi_supervised = True

