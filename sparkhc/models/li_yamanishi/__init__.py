"""Li & Yamanishi (1997), finite mixture models: the model family as one package.

:mod:`.classifiers` holds the classifiers (FMM, HCM, WBM, COS, numpy/scipy); this module puts them
behind the :class:`~sparkhc.models.base.HierModel` interface as product models over taxonomy leaves.

Adapters that put the classifiers of :mod:`sparkhc.models.li_yamanishi.classifiers` behind the :class:`HierModel`
interface, so that they are trained on Spark, saved, registered, used by ``predict`` and scored by
``evaluate`` like every other model (registry names ``fmm``, ``hcm``, ``wbm``, ``cos``).

Problem
    Flat multi-label over the leaves of the taxonomy (virtual ``/_self`` leaves included): the
    categories are the leaves that have at least one training document ("present" leaves) and a
    document's categories are its gold leaves (:meth:`SparseBatch.leaf_sets`). Each category is
    tested against its complement (the training documents not in it), as in the paper.

Training is counting
    The state (combine ``"sum"``) holds the sufficient statistics of
    :func:`sparkhc.models.li_yamanishi.classifiers.sufficient_statistics` over all leaves: ``category_word`` (CSR
    float64, leaves x features) ``= Yᵀ·Counts`` over the documents' **raw term counts**
    (:attr:`SparseBatch.counts`, the ``counts`` column of the features), ``word_total``
    (features,), ``category_docs`` (leaves,), ``n_docs`` (1,). :meth:`partial_fit` *adds* its
    batch's statistics to the current state, so one pass over the shards followed by the sum of the
    partition states (:func:`sparkhc.spark.mixing.train.train_ipm` with ``epochs = 1``) is exactly the
    counting of the whole training set, in any partitioning (the counts are integers: float64 sums
    are exact). Counting is one pass: calls with ``epoch > 0`` change nothing.

Fitting is lazy
    The fitted parameters (clusters, ``P(w|k)``, EM weights, ...) are derived from the statistics on
    first use (:meth:`decode`, :meth:`decision_function`) and cached until the state changes
    (:meth:`set_state`, :meth:`partial_fit`). They are fitted on the present leaves and on the
    features seen in training (``word_total > 0``; the others are covered by no model, so dropping
    them changes no score).

Decoding
    Per-node scores ``(n_docs, n_nodes)``: leaf columns hold
    :meth:`sparkhc.models.li_yamanishi.classifiers.FMM.decision_function` (per-word log-likelihood ratio, or the cosine
    difference for COS), every other column ``-inf`` (internal nodes and leaves without training
    documents). A document gets the leaves whose score is ``> eps``; when none is, with
    ``fallback = "best"`` (default, like FLAT) the single best leaf, unless no leaf has a finite
    score (no word of the document is covered: the empty set); with ``fallback = "none"`` the empty
    set (the paper's rule). ``eps = -inf`` with ``fallback = "none"`` predicts every leaf with a
    finite score, so the predictions' ``pred_scores`` hold everything a threshold sweep needs.

Memory: the state is sparse, but fitting makes dense ``(present leaves, seen features)`` arrays (a
few of them, float64) as :mod:`sparkhc.models.li_yamanishi.classifiers` does.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp

from sparkhc.batch import SparseBatch
from sparkhc.errors import ConfigError, InputDataError, ModelError
from sparkhc.models.base import HierModel, ModelState
from sparkhc.models.li_yamanishi import classifiers as _fmm

__all__ = ["COSHier", "FMMHier", "HCMHier", "WBMHier", "STAT_KEYS"]

#: registry names of this module's models (Li & Yamanishi 1997, over raw counts); read by :mod:`sparkhc.models` without importing
MODELS = {"fmm": "FMMHier", "hcm": "HCMHier", "wbm": "WBMHier", "cos": "COSHier"}

STAT_KEYS = _fmm.STAT_KEYS
FALLBACKS = ("best", "none")


def _is_int(v: Any) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool | np.bool_)


def _is_real(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool | np.bool_)


def _is_finite_real(v: Any) -> bool:
    return _is_real(v) and math.isfinite(float(v))


def _is_bool(v: Any) -> bool:
    return isinstance(v, bool | np.bool_)


#: (check, expected) of each parameter, in the scikit-learn message style
_Check = tuple[Callable[[Any], bool], str]


class _LiYamanishiModel(HierModel):
    """Shared state handling, counting and decoding; subclasses name the classifier."""

    combine: ClassVar[Any] = "sum"
    #: the model reads the raw term counts (``SparseBatch.counts``): train and decode batches must be
    #: built with ``with_counts=True``
    needs_counts: ClassVar[bool] = True
    #: training is one counting pass: more epochs change nothing
    single_pass: ClassVar[bool] = True
    #: the classifier of :mod:`sparkhc.models.li_yamanishi.classifiers` and the parameters passed to it
    inner: ClassVar[type] = _fmm.FMM
    inner_params: ClassVar[tuple[str, ...]] = ()
    common_defaults: ClassVar[dict[str, Any]] = {"eps": 0.0, "fallback": "best"}
    checks: ClassVar[dict[str, _Check]] = {}

    def __init__(self, taxonomy: Any, n_features: int, **params: Any) -> None:
        super().__init__(taxonomy, n_features, **params)
        self._fitted: tuple[Any, np.ndarray, np.ndarray] | None = None

    # -- parameters --------------------------------------------------------------------------
    def validate_params(self) -> None:
        p = self.params
        eps = p["eps"]
        self._check_param("eps", _is_real(eps) and not math.isnan(float(eps)), "a float (-inf allowed)")
        self._check_param("fallback", p["fallback"] in FALLBACKS, f"one of {FALLBACKS}")
        for key, (ok, expected) in self.checks.items():
            self._check_param(key, ok(p[key]), expected)
        self._make_inner([])._validate_params()  # the classifier's own (cross-parameter) rules
        if len(self.taxonomy.leaves) == 0 or self.taxonomy.n_nodes < 2:
            raise ModelError(f"the taxonomy {self.taxonomy.source} has no leaves: nothing to classify")

    def _make_inner(self, categories: list[str]) -> Any:
        kwargs = {k: self.params[k] for k in self.inner_params}
        return self.inner(categories=categories, **kwargs)

    # -- state -------------------------------------------------------------------------------
    @property
    def n_leaves(self) -> int:
        return len(self.taxonomy.leaves)

    def init_state(self) -> ModelState:
        """Zero statistics over all leaves and features."""
        L, V = self.n_leaves, self.n_features
        arrays = {
            "category_word": sp.csr_matrix((L, V), dtype=np.float64),
            "word_total": np.zeros(V, dtype=np.float64),
            "category_docs": np.zeros(L, dtype=np.float64),
            "n_docs": np.zeros(1, dtype=np.float64),
        }
        return ModelState(arrays, {}, "sum")

    def set_state(self, state: ModelState) -> _LiYamanishiModel:
        self._check_state(state)
        self.state_ = state
        self._fitted = None
        return self

    def _check_state(self, state: ModelState) -> None:
        missing = [k for k in STAT_KEYS if k not in state.arrays]
        if missing:
            raise ModelError(f"model {self.name!r}: the state has no statistics {missing}")
        L, V = self.n_leaves, self.n_features
        want = {"category_word": (L, V), "word_total": (V,), "category_docs": (L,), "n_docs": (1,)}
        for k, shape in want.items():
            got = tuple(state.arrays[k].shape)
            if got != shape:
                raise ModelError(
                    f"model {self.name!r}: state array {k!r} has shape {got}, expected {shape} "
                    f"({L} leaves of taxonomy {self.taxonomy.source}, n_features={V})"
                )

    def statistics(self) -> dict[str, np.ndarray]:
        """The summed statistics as dense float64 arrays (the layout of
        :func:`sparkhc.models.li_yamanishi.classifiers.sufficient_statistics`, one row per leaf in
        ``taxonomy.leaves`` order)."""
        arrays = self.get_state().arrays
        out = {k: np.asarray(arrays[k], dtype=np.float64) for k in STAT_KEYS if k != "category_word"}
        cw = arrays["category_word"]
        out["category_word"] = cw.toarray() if sp.issparse(cw) else np.asarray(cw, dtype=np.float64)
        return out

    # -- counting ----------------------------------------------------------------------------
    def _counts(self, batch: SparseBatch) -> sp.csr_matrix:
        if batch.counts is None:
            raise ConfigError(
                f"model {self.name!r} reads raw term counts but the batch has none: build it with "
                "with_counts=True from features that have the 'counts' column"
            )
        if batch.counts.shape[1] != self.n_features:
            raise ModelError(
                f"the batch has {batch.counts.shape[1]} features but model {self.name!r} was built for "
                f"{self.n_features}"
            )
        return sp.csr_matrix(batch.counts)

    def leaf_matrix(self, batch: SparseBatch) -> sp.csr_matrix:
        """Binary CSR (n_docs, n_leaves) of the documents' gold leaves (``taxonomy.leaves`` order);
        documents without labels have an empty row (they count in every complement)."""
        if batch.labels is None:
            raise InputDataError(f"model {self.name!r} needs gold labels to train; the batch has none")
        sets = batch.leaf_sets(self.taxonomy)
        col = np.full(self.taxonomy.n_nodes, -1, dtype=np.int64)
        col[self.taxonomy.leaves] = np.arange(self.n_leaves)
        sizes = np.array([len(m) for m in sets], dtype=np.int64)
        nodes = np.concatenate(sets).astype(np.int64) if sets and sizes.sum() else np.zeros(0, np.int64)
        rows = np.repeat(np.arange(len(sets)), sizes)
        return sp.csr_matrix(
            (np.ones(len(nodes), dtype=np.float64), (rows, col[nodes])), shape=(len(sets), self.n_leaves)
        )

    def shard_statistics(self, batch: SparseBatch) -> dict[str, Any]:
        """Statistics of one batch: those of :func:`sparkhc.models.li_yamanishi.classifiers.sufficient_statistics` of
        (raw counts, gold leaves), with ``category_word`` kept sparse."""
        X = _fmm._as_counts(self._counts(batch))
        M = self.leaf_matrix(batch)
        cw = sp.csr_matrix(M.T @ X, dtype=np.float64)
        cw.sum_duplicates()
        cw.eliminate_zeros()
        cw.sort_indices()
        return {
            "category_word": cw,
            "word_total": np.asarray(X.sum(axis=0), dtype=np.float64).ravel(),
            "category_docs": np.asarray(M.sum(axis=0), dtype=np.float64).ravel(),
            "n_docs": np.array([float(X.shape[0])]),
        }

    def partial_fit(self, batch: SparseBatch, seed: int = 0, epoch: int = 0) -> dict[str, float]:
        """Add the batch's statistics to the state (at ``epoch = 0``; a no-op afterwards)."""
        self.validate_params()
        if self.state_ is None:
            self.state_ = self.init_state()
        n = float(len(batch))
        if epoch > 0:
            return {"examples": n, "updates": 0.0, "loss": 0.0}
        st = self.shard_statistics(batch)
        cur = self.state_.arrays
        arrays = dict(cur)
        for k, v in st.items():
            if sp.issparse(v):
                s = (sp.csr_matrix(cur[k], dtype=np.float64) + v).tocsr()
                s.sort_indices()
                arrays[k] = s
            else:
                arrays[k] = np.asarray(cur[k], dtype=np.float64) + v
        self.state_ = ModelState(arrays, dict(self.state_.counters), "sum")
        self._fitted = None
        labeled = float(np.count_nonzero(np.diff(self.leaf_matrix(batch).indptr)))
        return {"examples": n, "updates": labeled, "loss": 0.0}

    # -- fitted parameters -------------------------------------------------------------------
    def fitted(self) -> tuple[Any, np.ndarray, np.ndarray]:
        """``(classifier, feature columns, leaf node ids)``: the :mod:`sparkhc.models.li_yamanishi.classifiers`
        classifier fitted on the present leaves (node ids, in its column order) and the features
        seen in training (columns of the counts it scores). Cached until the state changes."""
        if self._fitted is None:
            self.validate_params()
            arrays = self.get_state().arrays
            present = np.flatnonzero(np.asarray(arrays["category_docs"]) > 0)
            if present.size == 0:
                raise ModelError(f"model {self.name!r}: no training document has a label; nothing to fit")
            T = np.asarray(arrays["word_total"], dtype=np.float64)
            cols = np.flatnonzero(T > 0)
            if cols.size == 0:
                raise ModelError(f"model {self.name!r}: the training documents have no words; nothing to fit")
            cw = arrays["category_word"]
            cw = sp.csr_matrix(cw, dtype=np.float64)
            F = cw[present][:, cols].toarray()
            nodes = self.taxonomy.leaves[present].astype(np.int64)
            inner = self._make_inner([self.taxonomy.names[int(c)] for c in nodes])
            inner.fit_from_statistics(
                {
                    "category_word": F,
                    "word_total": T[cols],
                    "category_docs": np.asarray(arrays["category_docs"], dtype=np.float64)[present],
                    "n_docs": np.asarray(arrays["n_docs"], dtype=np.float64),
                }
            )
            self._fitted = (inner, cols, nodes)
        return self._fitted

    def decision_function(self, counts: Any) -> np.ndarray:
        """Scores (n_docs, n_present_leaves) of raw counts (n_docs, n_features), columns in the order
        of ``fitted()[2]``; the classifier's :meth:`~sparkhc.models.li_yamanishi.classifiers.FMM.decision_function`."""
        inner, cols, _ = self.fitted()
        X = _fmm._as_counts(counts)
        if X.shape[1] != self.n_features:
            raise ModelError(
                f"the counts have {X.shape[1]} features but model {self.name!r} was built for {self.n_features}"
            )
        return np.asarray(inner.decision_function(X[:, cols]), dtype=np.float64)

    # -- decoding ----------------------------------------------------------------------------
    def decode(self, batch: SparseBatch) -> tuple[list[np.ndarray], np.ndarray | None]:
        """Leaves with score ``> eps`` (fallback: see the module docstring) and per-node scores
        ``(n_docs, n_nodes)`` float64: leaf columns the scores, every other column ``-inf``."""
        _, _, nodes = self.fitted()
        S = self.decision_function(self._counts(batch))
        n = S.shape[0]
        scores = np.full((n, self.taxonomy.n_nodes), -np.inf)
        scores[:, nodes] = S
        chosen = S > float(self.params["eps"])
        if self.params["fallback"] == "best" and S.shape[1]:
            none = np.flatnonzero(~chosen.any(axis=1))
            if none.size:
                best = np.argmax(S[none], axis=1)  # first on ties
                ok = np.isfinite(S[none, best])
                chosen[none[ok], best[ok]] = True
        sets = [nodes[np.flatnonzero(row)].astype(np.int32) for row in chosen]
        return sets, scores

    def __getstate__(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["_fitted"] = None  # derived; rebuilt on demand
        return d


_SCHEME: _Check = (lambda v: v in _fmm.SCHEMES, f"one of {_fmm.SCHEMES}")


class FMMHier(_LiYamanishiModel):
    """FMM (finite mixture of soft word clusters; :class:`sparkhc.models.li_yamanishi.classifiers.FMM`) over leaves."""

    name: ClassVar[str] = "fmm"
    inner = _fmm.FMM
    inner_params = ("gamma", "eta", "n_iter", "tol", "theta_floor", "scheme")
    defaults: ClassVar[dict[str, Any]] = {
        "gamma": 0.0,
        "eta": 1.0,
        "n_iter": 50,
        "tol": 1e-10,
        "theta_floor": 1e-10,
        "scheme": "global",
        **_LiYamanishiModel.common_defaults,
    }
    checks: ClassVar[dict[str, _Check]] = {
        "gamma": (lambda v: _is_real(v) and 0 <= float(v) < 1, "a float in the range [0, 1)"),
        "eta": (lambda v: _is_finite_real(v) and float(v) > 0, "a float in the range (0, inf)"),
        "n_iter": (lambda v: _is_int(v) and int(v) >= 0, "an int >= 0"),
        "tol": (lambda v: _is_finite_real(v) and float(v) >= 0, "a float >= 0"),
        "theta_floor": (lambda v: _is_real(v) and 0 <= float(v) < 1e-2, "a float in the range [0, 0.01)"),
        "scheme": _SCHEME,
    }


class HCMHier(_LiYamanishiModel):
    """HCM (hard clusters, expected likelihood estimator; :class:`sparkhc.models.li_yamanishi.classifiers.HCM`)."""

    name: ClassVar[str] = "hcm"
    inner = _fmm.HCM
    inner_params = ("gamma", "clustering", "top_l", "top_m", "rest_cluster", "scheme")
    defaults: ClassVar[dict[str, Any]] = {
        "gamma": 0.5,
        "clustering": "gamma",
        "top_l": 5,
        "top_m": 5,
        "rest_cluster": True,
        "scheme": "global",
        **_LiYamanishiModel.common_defaults,
    }
    checks: ClassVar[dict[str, _Check]] = {
        "gamma": (lambda v: _is_real(v) and 0 <= float(v) < 1, "a float in the range [0, 1)"),
        "clustering": (lambda v: v in ("gamma", "top"), "'gamma' or 'top'"),
        "top_l": (lambda v: _is_int(v) and int(v) >= 1, "an int >= 1"),
        "top_m": (lambda v: _is_int(v) and int(v) >= 1, "an int >= 1"),
        "rest_cluster": (_is_bool, "a bool"),
        "scheme": _SCHEME,
    }


class WBMHier(_LiYamanishiModel):
    """WBM (word-based multinomials, additive smoothing; :class:`sparkhc.models.li_yamanishi.classifiers.WBM`)."""

    name: ClassVar[str] = "wbm"
    inner = _fmm.WBM
    inner_params = ("alpha",)
    defaults: ClassVar[dict[str, Any]] = {"alpha": 1.0, **_LiYamanishiModel.common_defaults}
    checks: ClassVar[dict[str, _Check]] = {
        "alpha": (lambda v: _is_finite_real(v) and float(v) > 0, "a float in the range (0, inf)"),
    }


class COSHier(_LiYamanishiModel):
    """COS (cosine against the category and its complement; :class:`sparkhc.models.li_yamanishi.classifiers.COS`)."""

    name: ClassVar[str] = "cos"
    inner = _fmm.COS
    inner_params = ("complement",)
    defaults: ClassVar[dict[str, Any]] = {"complement": True, **_LiYamanishiModel.common_defaults}
    checks: ClassVar[dict[str, _Check]] = {"complement": (_is_bool, "a bool")}
