"""Incremental hierarchical learners and the H-loss (Cesa-Bianchi, Gentile, Tironi, Zaniboni 2004).

Multilabels are unions of *partial* paths in a forest: any node may be a label, its ancestors are
implied (ALGORITHMS.md, Notation; no virtual ``/_self`` leaves are needed). The forest's roots are
the children of the taxonomy's root (node 0, never a label). Every model here learns one decision
function ``g_i`` per node and predicts with the hierarchical rule (4) of the paper::

    y_hat_i = g_i(x)  if i is a root or y_hat_parent(i) = 1,  else 0

which equals the G-truncation of ``g`` (:func:`sparkhc.decoding.truncate`). Models:

=============  =========================================================================
``HPerc``      H-PERC: per-node perceptron, updated at *eligible* nodes (root or parent
               gold-positive) on a mistake.
``HRLS``       H-RLS: per-node regularised least squares in dual form with the current
               instance in the inverse, selective sampling ``|w_i.x| <= sqrt(5 ln t / N_i)``.
``ApproxHBayes``  APPROX-H-BAYES: H-RLS estimates ``p_i = (1 + w_i.x) / 2`` decoded with the
               H-BAYES rule (:func:`sparkhc.decoding.hbayes_decode`), normalised costs.
``HSVM``       H-SVM: linear SVM (C = 1) per node on the examples whose parent is gold-positive
               (hinge loss, regularised bias, dual coordinate descent: :mod:`sparkhc.linear`).
``Perc``/``SVM``  flat baselines: every node trained on every example, independently.
=============  =========================================================================

``decode`` returns the *deepest* predicted nodes of each (G-truncated) prediction as the "leaf
sets" (``taxonomy.to_labels`` gives node names; ancestor closure recovers the multilabel) and the
per-node scores ``w_i.x`` (column 0, the root, is 0). :meth:`CesaModel.predict_multilabel`
returns the full binary (n_docs, n_nodes) prediction.

Node trainings depend only on the gold labels (:func:`eligible_rows`), except H-PERC with the
paper's ``mistake="decoded"`` rule, whose update at a node depends on the predicted ancestors.
The node-independent models (:meth:`CesaModel.node_parallel`) expose per-node hooks
(:meth:`~CesaModel.node_eligibility`, :meth:`~CesaModel.node_init`, :meth:`~CesaModel.fit_node`,
:meth:`~CesaModel.assemble_state`) that :func:`sparkhc.spark.node_parallel.train_node_parallel`
uses to train every node in its own Spark task; the result equals serial training exactly (the
node arithmetic is the same code, and per-node margins never depend on the other nodes).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp

from sparkhc.batch import SparseBatch
from sparkhc.decoding import deepest_sets, depth_groups, hbayes_decode, hierarchical_decode
from sparkhc.errors import ConfigError, NotFittedError
from sparkhc.linear import train_linear_svm
from sparkhc.models.base import Combine, HierModel, ModelState, shuffled_order
from sparkhc.taxonomy import Taxonomy

__all__ = [
    "HPerc",
    "Perc",
    "HRLS",
    "ApproxHBayes",
    "HSVM",
    "SVM",
    "forest_roots",
    "normalized_costs",
    "uniform_costs",
    "eligible_matrix",
    "eligible_rows",
]

#: registry names of this module's models (Cesa-Bianchi, Gentile, Tironi, Zaniboni 2004); read by
#: :mod:`sparkhc.models` without importing
MODELS = {"perc": "Perc", "h_perc": "HPerc", "h_rls": "HRLS", "ah_bay": "ApproxHBayes", "svm": "SVM",
          "h_svm": "HSVM"}


# ====================================================================================== helpers
def forest_roots(taxonomy: Taxonomy) -> np.ndarray:
    """Ids of the forest's roots: the children of node 0 (node 0 itself is never a label)."""
    return np.asarray(taxonomy.children[0], dtype=np.int64)


def uniform_costs(taxonomy: Taxonomy) -> np.ndarray:
    """``c_i = 1`` for every label node; ``c_0 = 0`` (node 0 is not a label)."""
    c = np.ones(taxonomy.n_nodes, dtype=np.float64)
    c[0] = 0.0
    return c


def normalized_costs(taxonomy: Taxonomy) -> np.ndarray:
    """Normalised H-loss costs (paper Sect. 5): a unit cost split equally among the roots, then
    each node's cost split equally among its children. ``c_0 = 0``."""
    c = np.zeros(taxonomy.n_nodes, dtype=np.float64)
    c[0] = 1.0  # split among the forest's roots below, then reset
    for i in range(1, taxonomy.n_nodes):  # level order: the parent's cost is final
        p = int(taxonomy.parent[i])
        c[i] = c[p] / len(taxonomy.children[p])
    c[0] = 0.0
    return c


def _dense_gold(taxonomy: Taxonomy, gold: Any) -> np.ndarray:
    """Binary ancestor-closed gold as a dense bool (n_docs, n_nodes) array with column 0 False."""
    g = gold.toarray() if sp.issparse(gold) else np.asarray(gold)
    g = g.astype(bool, copy=False)
    if g.ndim != 2 or g.shape[1] != taxonomy.n_nodes:
        raise ValueError(f"gold must have shape (n_docs, {taxonomy.n_nodes}); got {g.shape}")
    return g


def eligible_matrix(taxonomy: Taxonomy, gold: Any) -> np.ndarray:
    """``E[t, i]`` = node ``i`` is eligible for example ``t``: ``i`` is a root of the forest or its
    parent is gold-positive (paper Sect. 4). ``gold`` is binary (n_docs, n_nodes), dense or CSR,
    ancestor-closed. Column 0 is False."""
    g = _dense_gold(taxonomy, gold).copy()
    g[:, 0] = True  # node 0 acts as an always-positive parent of the forest's roots
    e = g[:, taxonomy.parent.clip(min=0)]
    e[:, 0] = False
    return e


def eligible_rows(taxonomy: Taxonomy, gold_csr: Any, node: int) -> np.ndarray:
    """Rows (documents) at which ``node`` is eligible: all rows for a root of the forest, else the
    rows whose gold labels contain ``parent(node)``. Use it to route examples to node learners
    (H-RLS, H-SVM, H-PERC with ``mistake="node"``), which then train independently."""
    node = int(node)
    if not 0 < node < taxonomy.n_nodes:
        raise ValueError(f"node must be in [1, {taxonomy.n_nodes}); got {node}")
    p = int(taxonomy.parent[node])
    n = int(gold_csr.shape[0])
    if p == 0:
        return np.arange(n, dtype=np.int64)
    col = gold_csr[:, [p]].toarray().ravel() if sp.issparse(gold_csr) else np.asarray(gold_csr)[:, p]
    return np.flatnonzero(col).astype(np.int64)


# ====================================================================================== base
class CesaModel(HierModel):
    """Shared parts: gold matrices, decoding with rule (4), parameter checks."""

    name: ClassVar[str] = "cesa_base"
    combine: ClassVar[Combine] = "mean"
    defaults: ClassVar[dict[str, Any]] = {"epochs": 1, "shuffle": False}
    #: node ``i`` learns from the examples where it is eligible (root or parent gold-positive);
    #: False: from every example (flat baselines)
    hierarchical: ClassVar[bool] = True
    #: multilabels are unions of partial paths natively: no virtual /_self leaves needed
    native_partial_paths: ClassVar[bool] = True
    #: a call of ``partial_fit`` continues from the state (False: retrains from scratch)
    incremental: ClassVar[bool] = True

    def validate_params(self) -> None:
        e = self.params.get("epochs")
        self._check_param("epochs", isinstance(e, int) and not isinstance(e, bool) and e >= 1, "an int >= 1")
        self._check_param("shuffle", isinstance(self.params.get("shuffle"), bool), "a bool")
        if self.taxonomy.virtual.any():
            raise ConfigError(
                f"model {self.name!r} learns partial paths natively; give it the taxonomy without "
                "virtual '/_self' leaves (taxonomy.base())"
            )

    def _gold(self, batch: SparseBatch) -> np.ndarray:
        if batch.labels is None:
            raise ConfigError(f"model {self.name!r}: training needs a batch with gold labels")
        return _dense_gold(self.taxonomy, batch.label_matrix(self.taxonomy))

    def _order(self, n: int, seed: int, epoch: int) -> np.ndarray:
        if self.params["shuffle"]:
            return shuffled_order(n, seed, epoch)
        return np.arange(n, dtype=np.int64)

    def _check_batch(self, batch: SparseBatch) -> sp.csr_matrix:
        if batch.n_features != self.n_features:
            raise ConfigError(
                f"model {self.name!r} has {self.n_features} features; the batch has {batch.n_features}"
            )
        X = sp.csr_matrix(batch.X)
        if not X.has_canonical_format:
            X = X.copy()
            X.sum_duplicates()
        return X

    def _state(self) -> ModelState:
        if self.state_ is None:
            raise NotFittedError(f"model {self.name!r} is not fitted yet")
        return self.state_

    def scores(self, batch: SparseBatch) -> np.ndarray:
        """Per-node scores (n_docs, n_nodes); column 0 is 0."""
        raise NotImplementedError

    def _g(self, scores: np.ndarray) -> np.ndarray:
        return scores >= 0.0

    def predict_multilabel(self, batch: SparseBatch) -> tuple[np.ndarray, np.ndarray]:
        """Binary ancestor-closed prediction (n_docs, n_nodes) by rule (4), and the scores."""
        s = self.scores(batch)
        return hierarchical_decode(self.taxonomy, self._g(s)), s

    def predict_nodes(self, batch: SparseBatch) -> np.ndarray:
        """Every node's own decision ``g_i(x)`` (bool (n_docs, n_nodes), column 0 False), not
        decoded: how the paper evaluates the flat PERC and SVM ("each node is trained and
        evaluated independently of the others, disregarding all taxonomical information"; the
        result need not be ancestor-closed, see ``MetricCounts.add(..., pred_closed=False)``)."""
        g = self._g(self.scores(batch))
        g[:, 0] = False
        return g

    def decode(self, batch: SparseBatch) -> tuple[list[np.ndarray], np.ndarray | None]:
        pred, s = self.predict_multilabel(batch)
        return deepest_sets(self.taxonomy, pred), s

    # -- node-parallel training hooks (sparkhc.spark.node_parallel) ------------------------------
    def node_eligibility(self, gold: Any) -> np.ndarray:
        """``E[t, i]``: example ``t`` trains node ``i`` (bool (n_docs, n_nodes), column 0 False):
        :func:`eligible_matrix` for hierarchical models, every node for the flat ones."""
        if self.hierarchical:
            return eligible_matrix(self.taxonomy, gold)
        g = _dense_gold(self.taxonomy, gold)
        e = np.ones(g.shape, dtype=bool)
        e[:, 0] = False
        return e

    def node_init(self, node: int) -> dict[str, np.ndarray] | None:
        """Node ``node``'s part of the current state (warm start), in :meth:`fit_node`'s payload
        format, or None for a fresh node."""
        return None

    def fit_node(
        self,
        node: int,
        X: sp.csr_matrix,
        y: np.ndarray,
        t: np.ndarray,
        seed: int = 0,
        epoch: int = 0,
        init: Mapping[str, np.ndarray] | None = None,
    ) -> tuple[dict[str, np.ndarray], dict[str, float]]:
        """One epoch of node ``node``'s learner, the same arithmetic as :meth:`partial_fit`.

        ``X`` holds the examples eligible at the node in processing order (float32 CSR, like
        :class:`SparseBatch`), ``y`` their gold bits at the node, ``t`` the model's example clock
        at each of them (1-based, counted since the model was created; H-RLS's sampling threshold
        uses it). ``init`` is the node's payload so far (:meth:`node_init` or a previous epoch).
        Returns the node's payload (numpy arrays) and counters.
        """
        raise NotImplementedError(f"model {self.name!r} has no node-parallel training")

    def assemble_state(
        self,
        payloads: Mapping[int, Mapping[str, np.ndarray]],
        examples: int,
        counters: Mapping[str, float] | None = None,
    ) -> ModelState:
        """Build and set the model state from every node's payload (node ids 1..n_nodes - 1)
        after training on ``examples`` examples (documents x epochs); ``counters`` are the
        node counters summed."""
        raise NotImplementedError(f"model {self.name!r} has no node-parallel training")

    def _node_payloads_complete(self, payloads: Mapping[int, Any]) -> None:
        missing = [i for i in range(1, self.taxonomy.n_nodes) if i not in payloads]
        if missing:
            raise ValueError(f"model {self.name!r}: no payload for node(s) {missing[:10]}")


# ====================================================================================== perceptrons
class HPerc(CesaModel):
    """H-PERC (paper Sect. 4): a perceptron ``g_i = [w_i.x >= 0]`` per node.

    For each example in order: predict ``y_hat`` with rule (4), then every *eligible* node (a root
    of the forest, or parent gold-positive) that made a mistake does ``w_i += (2 y_i - 1) x``.

    Parameters
    ----------
    epochs : int, default 1
    shuffle : bool, default False
        False processes the batch in its given order (the paper's one-epoch protocol); True uses
        :func:`shuffled_order` (seed, epoch).
    mistake : {"decoded", "node"}, default "decoded"
        "decoded" (the paper's wording): a mistake is ``y_hat_i != y_i`` with ``y_hat`` the
        hierarchical prediction (4), so an eligible node under a wrongly rejected parent with
        ``y_i = 1`` is updated even if ``g_i = 1``. "node": a mistake is ``g_i(x) != y_i``; node
        trainings are then independent (route with :func:`eligible_rows`).

    State: ``W`` (n_nodes, n_features) float64 (row 0 unused). Combine rule *mean* (parameter
    mixing of perceptron weights). ``partial_fit(A); partial_fit(B)`` equals one pass over A then B.
    """

    name: ClassVar[str] = "h_perc"
    combine: ClassVar[Combine] = "mean"
    defaults: ClassVar[dict[str, Any]] = {"epochs": 1, "shuffle": False, "mistake": "decoded"}
    hierarchical: ClassVar[bool] = True

    def validate_params(self) -> None:
        super().validate_params()
        self._check_param("mistake", self.params.get("mistake") in ("decoded", "node"), "'decoded' or 'node'")

    def init_state(self) -> ModelState:
        return ModelState(
            {"W": np.zeros((self.taxonomy.n_nodes, self.n_features), dtype=np.float64)},
            {"examples_seen": 0.0},
            self.combine,
        )

    def partial_fit(self, batch: SparseBatch, seed: int = 0, epoch: int = 0) -> dict[str, float]:
        if self.state_ is None:
            self.validate_params()
            self.state_ = self.init_state()
        X = self._check_batch(batch)
        gold = self._gold(batch)
        W = self.state_.arrays["W"]
        tax = self.taxonomy
        elig_all = eligible_matrix(tax, gold) if self.hierarchical else None
        decoded = self.params.get("mistake", "node") == "decoded"
        groups = depth_groups(tax)
        par = tax.parent
        indptr, indices, data = X.indptr, X.indices, X.data
        updates = 0
        for r in self._order(X.shape[0], seed, epoch):
            s, e = indptr[r], indptr[r + 1]
            idx = indices[s:e]
            val = data[s:e].astype(np.float64)
            # per-row sums (not a BLAS gemv, whose summation order depends on the number of rows):
            # node i's margin is bitwise what fit_node computes from w_i alone
            g = (W[:, idx] * val).sum(axis=1) >= 0.0
            g[0] = True
            y = gold[r]
            if elig_all is None:
                wrong = g != y
            elif decoded:
                yhat = g.copy()
                for nodes in groups:
                    yhat[nodes] &= yhat[par[nodes]]
                wrong = elig_all[r] & (yhat != y)
            else:
                wrong = elig_all[r] & (g != y)
            wrong[0] = False
            upd = np.flatnonzero(wrong)
            if upd.size:
                sign = np.where(y[upd], 1.0, -1.0)
                W[np.ix_(upd, idx)] += sign[:, None] * val[None, :]
                updates += int(upd.size)
        n = float(X.shape[0])
        self.state_.counters["examples_seen"] = self.state_.counters.get("examples_seen", 0.0) + n
        return {"examples": n, "updates": float(updates), "loss": float(updates)}

    def scores(self, batch: SparseBatch) -> np.ndarray:
        W = self._state().arrays["W"]
        X = self._check_batch(batch)
        out = np.asarray((X @ W.T), dtype=np.float64)
        out[:, 0] = 0.0
        return out

    # -- node-parallel hooks: payload {"idx", "val"} = the nonzero weights of w_node ---------------
    def node_parallel(self) -> bool:
        return not self.hierarchical or self.params.get("mistake", "decoded") == "node"

    def node_init(self, node: int) -> dict[str, np.ndarray] | None:
        w = self._state().arrays["W"][int(node)]
        nz = np.flatnonzero(w)
        return {"idx": nz.astype(np.int64), "val": w[nz].astype(np.float64)}

    def fit_node(
        self,
        node: int,
        X: sp.csr_matrix,
        y: np.ndarray,
        t: np.ndarray,
        seed: int = 0,
        epoch: int = 0,
        init: Mapping[str, np.ndarray] | None = None,
    ) -> tuple[dict[str, np.ndarray], dict[str, float]]:
        if not self.node_parallel():
            raise ConfigError(f"model {self.name!r} with mistake='decoded' has no node-parallel training")
        w = np.zeros(self.n_features, dtype=np.float64)
        if init is not None:
            w[np.asarray(init["idx"], dtype=np.int64)] = init["val"]
        X = sp.csr_matrix(X)
        indptr, indices, data = X.indptr, X.indices, X.data
        y = np.asarray(y, dtype=bool)
        updates = 0
        for r in range(X.shape[0]):
            s, e = indptr[r], indptr[r + 1]
            idx = indices[s:e]
            val = data[s:e].astype(np.float64)
            g = bool((w[idx] * val).sum() >= 0.0)
            if g != bool(y[r]):
                w[idx] += (1.0 if y[r] else -1.0) * val
                updates += 1
        nz = np.flatnonzero(w)
        return {"idx": nz.astype(np.int64), "val": w[nz]}, {"updates": float(updates)}

    def assemble_state(
        self,
        payloads: Mapping[int, Mapping[str, np.ndarray]],
        examples: int,
        counters: Mapping[str, float] | None = None,
    ) -> ModelState:
        self._node_payloads_complete(payloads)
        prev = self.state_.counters if self.state_ is not None else {}
        W = np.zeros((self.taxonomy.n_nodes, self.n_features), dtype=np.float64)
        for i, p in payloads.items():
            W[int(i), np.asarray(p["idx"], dtype=np.int64)] = p["val"]
        seen = float(prev.get("examples_seen", 0.0)) + float(examples)
        self.state_ = ModelState({"W": W}, {"examples_seen": seen}, self.combine)
        return self.state_


class Perc(HPerc):
    """Flat PERC: one perceptron per node trained on every example (mistake ``g_i != y_i``),
    ignoring the taxonomy; predictions are G-truncated (rule (4))."""

    name: ClassVar[str] = "perc"
    defaults: ClassVar[dict[str, Any]] = {"epochs": 1, "shuffle": False}
    hierarchical: ClassVar[bool] = False

    def validate_params(self) -> None:
        CesaModel.validate_params(self)


# ====================================================================================== H-RLS
def _capacity(n: int) -> int:
    """Buffer capacity for ``n`` stored instances: a deterministic function of ``n`` so a
    reloaded model has the same memory layout (and bitwise the same arithmetic) as a live one."""
    cap = 16
    while cap < n:
        cap *= 2
    return cap


class _RlsNode:
    """Stored instances of one node with the inverse of ``I + S^T S`` (S: columns = instances).

    Dual form of ``w = (I + S S^T + x x^T)^{-1} S y``: with ``M = I + S^T S``, ``k = S^T x`` and
    ``kappa = x^T x``, the push-through identity gives ``w = S' (I + S'^T S')^{-1} [y; 0]`` for
    ``S' = [S, x]``, and the block inverse of ``I + S'^T S'`` yields::

        w.x = (k^T M^{-1} y) / (1 + kappa - k^T M^{-1} k)

    (the denominator is ``1 + x^T (I + S S^T)^{-1} x >= 1``). Storing ``x`` extends ``M^{-1}`` by
    the same block formula, O(N^2).
    """

    __slots__ = ("n", "inv", "y", "indptr", "indices", "data", "rowid", "nnz")

    def __init__(self) -> None:
        self.n = 0
        cap = _capacity(0)
        # exactly (n, n) and C-contiguous: BLAS on a strided view is several times slower
        self.inv = np.zeros((0, 0), dtype=np.float64)
        self.y = np.zeros(cap, dtype=np.float64)
        self.indptr = np.zeros(cap + 1, dtype=np.int64)
        self.indices = np.zeros(256, dtype=np.int32)
        self.data = np.zeros(256, dtype=np.float64)
        self.rowid = np.zeros(256, dtype=np.int64)
        self.nnz = 0

    # -- one example ---------------------------------------------------------------------
    def margin(self, xdense: np.ndarray, kappa: float) -> tuple[float, np.ndarray, np.ndarray, float]:
        """(w.x, k, M^{-1} k, denominator) for the instance scattered in ``xdense``."""
        n = self.n
        if n == 0:
            e = np.zeros(0, dtype=np.float64)
            return 0.0, e, e, 1.0 + kappa
        nnz = self.nnz
        prod = xdense[self.indices[:nnz]] * self.data[:nnz]
        k = np.bincount(self.rowid[:nnz], weights=prod, minlength=n)
        a = self.inv @ k
        den = 1.0 + kappa - float(k @ a)
        return float(a @ self.y[:n]) / den, k, a, den

    def store(self, idx: np.ndarray, val: np.ndarray, target: float, a: np.ndarray, den: float) -> None:
        n = self.n
        if n + 1 > self.y.shape[0]:
            self._grow_rows(_capacity(n + 1))
        m = idx.size
        if self.nnz + m > self.indices.size:
            self._grow_nnz(max(2 * self.indices.size, self.nnz + m))
        # block inverse: [[M, k], [k^T, 1 + kappa]]^{-1} with Schur complement den; written into
        # a new contiguous (n+1, n+1) array (the copy costs O(n^2) like the update itself)
        inv = np.empty((n + 1, n + 1), dtype=np.float64)
        if n:
            ad = a / den
            r = a / math.sqrt(den)  # outer(r, r) is exactly symmetric, like the inverse
            np.multiply.outer(r, r, out=inv[:n, :n])
            inv[:n, :n] += self.inv
            inv[:n, n] = -ad
            inv[n, :n] = -ad
        inv[n, n] = 1.0 / den
        self.inv = inv
        self.y[n] = target
        self.indices[self.nnz : self.nnz + m] = idx
        self.data[self.nnz : self.nnz + m] = val
        self.rowid[self.nnz : self.nnz + m] = n
        self.nnz += m
        self.indptr[n + 1] = self.nnz
        self.n = n + 1

    def _grow_rows(self, cap: int) -> None:
        n = self.n
        y = np.zeros(cap, dtype=np.float64)
        y[:n] = self.y[:n]
        self.y = y
        ip = np.zeros(cap + 1, dtype=np.int64)
        ip[: n + 1] = self.indptr[: n + 1]
        self.indptr = ip

    def _grow_nnz(self, size: int) -> None:
        for name, dt in (("indices", np.int32), ("data", np.float64), ("rowid", np.int64)):
            old = getattr(self, name)
            new = np.zeros(size, dtype=dt)
            new[: self.nnz] = old[: self.nnz]
            setattr(self, name, new)

    # -- plain arrays (node-parallel payloads, state packing) -----------------------------------
    def to_arrays(self) -> dict[str, np.ndarray]:
        """``inv`` (n, n), ``y`` (n,), ``indptr`` (n + 1,), ``indices``/``data`` (nnz,): copies."""
        n, nnz = self.n, self.nnz
        return {
            "inv": self.inv.copy(),
            "y": self.y[:n].copy(),
            "indptr": self.indptr[: n + 1].copy(),
            "indices": self.indices[:nnz].copy(),
            "data": self.data[:nnz].copy(),
        }

    @classmethod
    def from_arrays(cls, a: Mapping[str, np.ndarray]) -> _RlsNode:
        """Inverse of :meth:`to_arrays`, with the buffer layout of a live node of that size."""
        nd = cls()
        n = int(np.asarray(a["y"]).shape[0])
        if n == 0:
            return nd
        indptr = np.asarray(a["indptr"], dtype=np.int64)
        cap = _capacity(n)
        nd.inv = np.array(a["inv"], dtype=np.float64).reshape(n, n)
        nd.y = np.zeros(cap, dtype=np.float64)
        nd.y[:n] = a["y"]
        nd.indptr = np.zeros(cap + 1, dtype=np.int64)
        nd.indptr[: n + 1] = indptr - indptr[0]
        m = int(indptr[n] - indptr[0])
        size = 256
        while size < m:
            size *= 2
        nd.indices = np.zeros(size, dtype=np.int32)
        nd.indices[:m] = a["indices"]
        nd.data = np.zeros(size, dtype=np.float64)
        nd.data[:m] = a["data"]
        nd.rowid = np.zeros(size, dtype=np.int64)
        nd.rowid[:m] = np.repeat(np.arange(n), np.diff(nd.indptr[: n + 1]))
        nd.nnz = m
        nd.n = n
        return nd

    # -- many examples ------------------------------------------------------------------------
    def instances(self, n_features: int) -> sp.csr_matrix:
        n, nnz = self.n, self.nnz
        return sp.csr_matrix(
            (self.data[:nnz].copy(), self.indices[:nnz].copy(), self.indptr[: n + 1].copy()),
            shape=(n, n_features),
        )

    def batch_margins(self, X: sp.csr_matrix, sq: np.ndarray) -> np.ndarray:
        """``w.x`` for every row of ``X`` (each with itself in the inverse), vectorised."""
        n = self.n
        if n == 0:
            return np.zeros(X.shape[0], dtype=np.float64)
        S = self.instances(X.shape[1])
        K = np.asarray((X @ S.T).toarray(), dtype=np.float64)  # (docs, n): k per document
        A = K @ self.inv
        num = A @ self.y[:n]
        den = 1.0 + sq - np.einsum("ij,ij->i", A, K)
        return num / den


class HRLS(CesaModel):
    """H-RLS (paper Sect. 4): per-node regularised least squares in dual form.

    At node ``i`` with stored instances ``S_i`` (columns) and targets ``y^(i)`` in {-1, +1},
    ``w_i = (I + S_i S_i^T + x x^T)^{-1} S_i y^(i)`` (the current instance in the inverse) and
    ``g_i = [w_i.x >= 0]``. Examples are processed one at a time in order; ``t`` counts the
    examples seen since the model was created (1 for the first). At an eligible node, ``x`` is
    stored when ``|w_i.x| <= sqrt(5 ln t / N_i)`` with ``N_i`` the number stored so far;
    **(choice)** ``N_i = 0`` always stores (the threshold is +inf). Storing costs O(N_i^2)
    (block inverse); predicting a document at a node costs O(N_i^2) too.

    Parameters
    ----------
    epochs : int, default 1
    shuffle : bool, default False
    selective : bool, default True
        False stores every eligible instance (the variant analysed in Theorem 3).
    sampling_constant : float, default 5.0
        The ``5`` in ``sqrt(5 ln t / N_i)``.

    State (all numpy, ``np.savez``-able): ``t`` (1,), ``n_stored`` (n_nodes,), ``row_offsets``
    (n_nodes + 1,) into the stored rows, which are the CSR ``inst_indptr`` / ``inst_indices`` /
    ``inst_data`` with ``targets``, and ``inv_offsets`` (n_nodes + 1,) into ``inv_data`` (each
    node's ``N_i x N_i`` inverse of ``I + S_i^T S_i``, row-major). Combine rule: none is
    meaningful (stored sets do not average); the class says *mean* only to satisfy the interface:
    **train H-RLS on one shard** (no mixing) or route examples per node with :func:`eligible_rows`.
    """

    name: ClassVar[str] = "h_rls"
    combine: ClassVar[Combine] = "mean"
    defaults: ClassVar[dict[str, Any]] = {
        "epochs": 1,
        "shuffle": False,
        "selective": True,
        "sampling_constant": 5.0,
    }

    def __init__(self, taxonomy: Taxonomy, n_features: int, **params: Any) -> None:
        super().__init__(taxonomy, n_features, **params)
        self._nodes: list[_RlsNode] | None = None
        self._nodes_for: ModelState | None = None

    def validate_params(self) -> None:
        super().validate_params()
        self._check_param("selective", isinstance(self.params.get("selective"), bool), "a bool")
        c = self.params.get("sampling_constant")
        self._check_param(
            "sampling_constant",
            isinstance(c, int | float) and not isinstance(c, bool) and c > 0,
            "a positive number",
        )

    # -- state <-> working nodes ------------------------------------------------------------
    def init_state(self) -> ModelState:
        self._nodes = [_RlsNode() for _ in range(self.taxonomy.n_nodes)]
        state = self._pack(self._nodes, 0)
        self._nodes_for = state
        return state

    def set_state(self, state: ModelState) -> HRLS:
        self.state_ = state
        self._nodes = None
        self._nodes_for = None
        return self

    def _working(self) -> list[_RlsNode]:
        state = self._state()
        if self._nodes is None or self._nodes_for is not state:
            self._nodes = self._unpack(state)
            self._nodes_for = state
        return self._nodes

    def _pack(self, nodes: Sequence[_RlsNode], t: int) -> ModelState:
        n_stored = np.array([nd.n for nd in nodes], dtype=np.int64)
        row_off = np.concatenate([[0], np.cumsum(n_stored)]).astype(np.int64)
        inv_off = np.concatenate([[0], np.cumsum(n_stored**2)]).astype(np.int64)
        nnz = np.array([nd.nnz for nd in nodes], dtype=np.int64)
        nnz_off = np.concatenate([[0], np.cumsum(nnz)])
        indptr = np.zeros(int(row_off[-1]) + 1, dtype=np.int64)
        for i, nd in enumerate(nodes):
            if nd.n:
                indptr[row_off[i] + 1 : row_off[i + 1] + 1] = nd.indptr[1 : nd.n + 1] + nnz_off[i]
        return ModelState(
            {
                "t": np.array([t], dtype=np.int64),
                "n_stored": n_stored,
                "row_offsets": row_off,
                "inst_indptr": indptr,
                "inst_indices": np.concatenate([nd.indices[: nd.nnz] for nd in nodes]).astype(np.int32),
                "inst_data": np.concatenate([nd.data[: nd.nnz] for nd in nodes]).astype(np.float64),
                "targets": np.concatenate([nd.y[: nd.n] for nd in nodes]).astype(np.float64),
                "inv_offsets": inv_off,
                "inv_data": np.concatenate([nd.inv.ravel() for nd in nodes]).astype(np.float64),
            },
            {"examples_seen": float(t), "stored": float(n_stored.sum())},
            self.combine,
        )

    def _unpack(self, state: ModelState) -> list[_RlsNode]:
        return [self._unpack_node(state, i) for i in range(self.taxonomy.n_nodes)]

    @staticmethod
    def _node_arrays(state: ModelState, i: int) -> dict[str, np.ndarray] | None:
        """Node ``i``'s slice of a packed state as :meth:`_RlsNode.to_arrays` arrays (None: empty)."""
        a = state.arrays
        n = int(a["n_stored"][i])
        if not n:
            return None
        r0, r1 = int(a["row_offsets"][i]), int(a["row_offsets"][i + 1])
        p0, p1 = int(a["inst_indptr"][r0]), int(a["inst_indptr"][r1])
        v0, v1 = int(a["inv_offsets"][i]), int(a["inv_offsets"][i + 1])
        return {
            "inv": np.asarray(a["inv_data"][v0:v1], dtype=np.float64).reshape(n, n),
            "y": np.asarray(a["targets"][r0:r1], dtype=np.float64),
            "indptr": np.asarray(a["inst_indptr"][r0 : r1 + 1], dtype=np.int64) - p0,
            "indices": np.asarray(a["inst_indices"][p0:p1], dtype=np.int32),
            "data": np.asarray(a["inst_data"][p0:p1], dtype=np.float64),
        }

    def _unpack_node(self, state: ModelState, i: int) -> _RlsNode:
        arrays = self._node_arrays(state, i)
        return _RlsNode() if arrays is None else _RlsNode.from_arrays(arrays)

    # -- training ------------------------------------------------------------------------------
    def partial_fit(self, batch: SparseBatch, seed: int = 0, epoch: int = 0) -> dict[str, float]:
        if self.state_ is None:
            self.validate_params()
            self.state_ = self.init_state()
        nodes = self._working()
        X = self._check_batch(batch)
        gold = self._gold(batch)
        elig = eligible_matrix(self.taxonomy, gold)
        t = int(self._state().arrays["t"][0])
        selective = bool(self.params["selective"])
        const = float(self.params["sampling_constant"])
        xdense = np.zeros(self.n_features, dtype=np.float64)
        indptr, indices, data = X.indptr, X.indices, X.data
        stored = mistakes = 0
        for r in self._order(X.shape[0], seed, epoch):
            t += 1
            s, e = indptr[r], indptr[r + 1]
            idx = indices[s:e]
            val = data[s:e].astype(np.float64)
            xdense[idx] = val
            kappa = float(val @ val)
            y = gold[r]
            log_t = math.log(t)
            for i in np.flatnonzero(elig[r]):
                nd = nodes[i]
                m, _k, a, den = nd.margin(xdense, kappa)
                yi = bool(y[i])
                if (m >= 0.0) != yi:
                    mistakes += 1
                if not selective or nd.n == 0 or abs(m) <= math.sqrt(const * log_t / nd.n):
                    nd.store(idx, val, 1.0 if yi else -1.0, a, den)
                    stored += 1
            xdense[idx] = 0.0
        self.state_ = self._pack(nodes, t)
        self._nodes_for = self.state_
        return {
            "examples": float(X.shape[0]),
            "updates": float(stored),
            "loss": float(mistakes),
            "stored": float(stored),
        }

    # -- node-parallel hooks: payload = _RlsNode.to_arrays() ------------------------------------
    def node_parallel(self) -> bool:
        return True

    def node_init(self, node: int) -> dict[str, np.ndarray] | None:
        return self._node_arrays(self._state(), int(node))

    def fit_node(
        self,
        node: int,
        X: sp.csr_matrix,
        y: np.ndarray,
        t: np.ndarray,
        seed: int = 0,
        epoch: int = 0,
        init: Mapping[str, np.ndarray] | None = None,
    ) -> tuple[dict[str, np.ndarray], dict[str, float]]:
        nd = _RlsNode.from_arrays(init) if init is not None else _RlsNode()
        selective = bool(self.params["selective"])
        const = float(self.params["sampling_constant"])
        X = sp.csr_matrix(X)
        xdense = np.zeros(self.n_features, dtype=np.float64)
        indptr, indices, data = X.indptr, X.indices, X.data
        stored = mistakes = 0
        for r in range(X.shape[0]):
            s, e = indptr[r], indptr[r + 1]
            idx = indices[s:e]
            val = data[s:e].astype(np.float64)
            xdense[idx] = val
            kappa = float(val @ val)
            log_t = math.log(int(t[r]))
            m, _k, a, den = nd.margin(xdense, kappa)
            yi = bool(y[r])
            if (m >= 0.0) != yi:
                mistakes += 1
            if not selective or nd.n == 0 or abs(m) <= math.sqrt(const * log_t / nd.n):
                nd.store(idx, val, 1.0 if yi else -1.0, a, den)
                stored += 1
            xdense[idx] = 0.0
        return nd.to_arrays(), {"updates": float(stored), "loss": float(mistakes), "stored": float(stored)}

    def assemble_state(
        self,
        payloads: Mapping[int, Mapping[str, np.ndarray]],
        examples: int,
        counters: Mapping[str, float] | None = None,
    ) -> ModelState:
        self._node_payloads_complete(payloads)
        t0 = int(self.state_.arrays["t"][0]) if self.state_ is not None else 0
        nodes = [_RlsNode()] + [_RlsNode.from_arrays(payloads[i]) for i in range(1, self.taxonomy.n_nodes)]
        self.state_ = self._pack(nodes, t0 + int(examples))
        self._nodes = nodes
        self._nodes_for = self.state_
        return self.state_

    def stored_per_node(self) -> dict[str, int]:
        """Number of stored instances ``N_i`` per node name (paper: space of the classifier)."""
        n = self._state().arrays["n_stored"]
        return {self.taxonomy.names[i]: int(n[i]) for i in range(1, self.taxonomy.n_nodes)}

    # -- prediction ------------------------------------------------------------------------------
    def scores(self, batch: SparseBatch) -> np.ndarray:
        """``w_i.x`` per node with ``x`` itself in the inverse (dual form), (n_docs, n_nodes)."""
        nodes = self._working()
        X = self._check_batch(batch).astype(np.float64)
        sq = np.asarray(X.multiply(X).sum(axis=1)).ravel()
        out = np.zeros((X.shape[0], self.taxonomy.n_nodes), dtype=np.float64)
        for i in range(1, self.taxonomy.n_nodes):
            out[:, i] = nodes[i].batch_margins(X, sq)
        return out


class ApproxHBayes(HRLS):
    """APPROX-H-BAYES (paper Sect. 4): H-RLS training; prediction by the H-BAYES rule
    (:func:`sparkhc.decoding.hbayes_decode`) on ``p_i = (1 + w_i.x) / 2`` clipped to [0, 1].

    Parameters as :class:`HRLS`, plus ``costs`` ("normalized", the paper's choice, or "uniform").
    The trained state is the same as H-RLS's: ``ApproxHBayes(...).set_state(h_rls.get_state())``
    decodes an H-RLS model the H-BAYES way.
    """

    name: ClassVar[str] = "ah_bay"
    defaults: ClassVar[dict[str, Any]] = {**HRLS.defaults, "costs": "normalized"}

    def validate_params(self) -> None:
        super().validate_params()
        self._check_param("costs", self.params.get("costs") in ("normalized", "uniform"), "'normalized' or 'uniform'")

    def costs(self) -> np.ndarray:
        if self.params.get("costs", "normalized") == "uniform":
            return uniform_costs(self.taxonomy)
        return normalized_costs(self.taxonomy)

    def predict_multilabel(self, batch: SparseBatch) -> tuple[np.ndarray, np.ndarray]:
        s = self.scores(batch)
        p = np.clip((1.0 + s) / 2.0, 0.0, 1.0)
        return hbayes_decode(self.taxonomy, p, self.costs()), s


# ====================================================================================== SVMs
class HSVM(CesaModel):
    """H-SVM (paper Sect. 5): node ``i`` is a linear SVM (C = 1) trained on the examples whose
    parent is gold-positive (roots: all examples), decoded with rule (4), ``g_i = [w_i.x + b_i > 0]``.

    Each node solves ``min ½ (‖w‖² + b²) + C Σ hinge`` (the bias regularised as a constant feature 1,
    as LIBLINEAR and scikit-learn's ``LinearSVC(loss="hinge")`` do; libSVM, which the paper used,
    leaves it unregularised) by :func:`sparkhc.linear.train_linear_svm` (dual coordinate descent,
    projected-gradient tolerance 1e-4, at most ``max_iter`` passes, order seeded by ``seed``). A node
    whose examples are all of one class (or that has none) is the constant ``w = 0``, ``b = ±1``.

    A batch learner: :meth:`partial_fit` trains every node on the given batch from scratch
    (the previous state is replaced); it is not incremental. State: ``W`` (n_nodes, n_features),
    ``b`` (n_nodes,); combine *mean* (averaging shard SVMs is a heuristic, not exact).
    """

    name: ClassVar[str] = "h_svm"
    combine: ClassVar[Combine] = "mean"
    defaults: ClassVar[dict[str, Any]] = {"epochs": 1, "shuffle": False, "C": 1.0, "max_iter": 10000}
    hierarchical: ClassVar[bool] = True
    incremental: ClassVar[bool] = False

    def validate_params(self) -> None:
        super().validate_params()
        c = self.params.get("C")
        self._check_param("C", isinstance(c, int | float) and not isinstance(c, bool) and c > 0, "a positive number")
        mi = self.params.get("max_iter")
        self._check_param("max_iter", isinstance(mi, int) and not isinstance(mi, bool) and mi > 0, "a positive int")

    def init_state(self) -> ModelState:
        n = self.taxonomy.n_nodes
        return ModelState(
            {"W": np.zeros((n, self.n_features), dtype=np.float64), "b": np.full(n, -1.0)},
            {},
            self.combine,
        )

    def partial_fit(self, batch: SparseBatch, seed: int = 0, epoch: int = 0) -> dict[str, float]:
        self.validate_params()
        X = self._check_batch(batch)
        gold = self._gold(batch)
        elig = eligible_matrix(self.taxonomy, gold) if self.hierarchical else None
        state = self.init_state()
        W, b = state.arrays["W"], state.arrays["b"]
        not_conv = 0
        examples = 0
        for i in range(1, self.taxonomy.n_nodes):
            rows = np.flatnonzero(elig[:, i]) if elig is not None else np.arange(X.shape[0])
            examples += rows.size
            w, bi, ok = train_linear_svm(
                X[rows], gold[rows, i], float(self.params["C"]), seed, int(self.params["max_iter"])
            )
            W[i], b[i] = w, bi
            not_conv += 0 if ok else 1
        state.counters = {"node_examples": float(examples), "not_converged": float(not_conv)}
        self.state_ = state
        return {"examples": float(X.shape[0]), "updates": 0.0, "loss": 0.0, "not_converged": float(not_conv)}

    def scores(self, batch: SparseBatch) -> np.ndarray:
        st = self._state().arrays
        X = self._check_batch(batch)
        out = np.asarray(X @ st["W"].T, dtype=np.float64) + st["b"][None, :]
        out[:, 0] = 0.0
        return out

    # -- node-parallel hooks: payload {"idx", "val"} (nonzero weights), "b", "converged" ----------
    def node_parallel(self) -> bool:
        return True

    def fit_node(
        self,
        node: int,
        X: sp.csr_matrix,
        y: np.ndarray,
        t: np.ndarray,
        seed: int = 0,
        epoch: int = 0,
        init: Mapping[str, np.ndarray] | None = None,
    ) -> tuple[dict[str, np.ndarray], dict[str, float]]:
        w, bi, ok = train_linear_svm(
            sp.csr_matrix(X), np.asarray(y, dtype=bool), float(self.params["C"]), seed, int(self.params["max_iter"])
        )
        nz = np.flatnonzero(w)
        payload = {
            "idx": nz.astype(np.int64),
            "val": w[nz],
            "b": np.array([bi], dtype=np.float64),
            "converged": np.array([1 if ok else 0], dtype=np.int8),
        }
        return payload, {"node_examples": float(X.shape[0]), "not_converged": 0.0 if ok else 1.0}

    def assemble_state(
        self,
        payloads: Mapping[int, Mapping[str, np.ndarray]],
        examples: int,
        counters: Mapping[str, float] | None = None,
    ) -> ModelState:
        self._node_payloads_complete(payloads)
        state = self.init_state()
        W, b = state.arrays["W"], state.arrays["b"]
        for i, pl in payloads.items():
            W[int(i), np.asarray(pl["idx"], dtype=np.int64)] = pl["val"]
            b[int(i)] = float(pl["b"][0])
        c = counters or {}
        state.counters = {
            "node_examples": float(c.get("node_examples", 0.0)),
            "not_converged": float(sum(1 for pl in payloads.values() if not int(pl["converged"][0]))),
        }
        self.state_ = state
        return state

    def _g(self, scores: np.ndarray) -> np.ndarray:
        return scores > 0.0


class SVM(HSVM):
    """Flat SVM: one linear SVM (C = 1) per node on every example; predictions G-truncated."""

    name: ClassVar[str] = "svm"
    hierarchical: ClassVar[bool] = False
