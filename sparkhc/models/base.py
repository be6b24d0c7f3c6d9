"""Model state and the base class every model family implements.

``ModelState`` is the one way model parameters travel: named numpy arrays plus integer/float
counters and a combine rule. *mean* (PA / perceptron weights: iterative parameter mixing,
Murawaki 2013 Alg. 6) or *sum* (naive Bayes / EM sufficient statistics). Mixing on Spark, saving
and loading are written once against it (``sparkhc.spark.mixing``, ``sparkhc.persistence``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import numpy as np
import scipy.sparse as sp

from sparkhc.batch import SparseBatch
from sparkhc.errors import ConfigError, ModelError, NotFittedError
from sparkhc.taxonomy import Taxonomy

Combine = Literal["mean", "sum"]
#: How a model is trained on Spark (the Spark layer maps each to one driver,
#: ``sparkhc.spark.training.DRIVERS``): ``mixing`` (iterative parameter mixing of shard states,
#: ``partial_fit`` per shard and epoch; summed states for counting models), ``node_parallel`` (one
#: task per group of taxonomy nodes, exactly the serial model), ``em`` (one aggregation pass per
#: EM step), ``batch`` (one exact fit on the driver, sub-problems on Spark), ``local`` (the
#: selected documents collected on the driver and ``fit`` there: models whose training is one
#: in-process procedure that neither mixes nor decomposes, and that fit small data).
TrainingStrategy = Literal["mixing", "node_parallel", "em", "batch", "local"]
TRAINING_STRATEGIES: tuple[TrainingStrategy, ...] = ("mixing", "node_parallel", "em", "batch", "local")


@dataclass
class ModelState:
    """Named arrays, counters and the rule that combines states of several shards.

    Arrays may be dense numpy arrays or scipy CSR matrices (sparse weight matrices).
    """

    arrays: dict[str, Any]
    counters: dict[str, float] = field(default_factory=dict)
    combine: Combine = "mean"

    def copy(self) -> ModelState:
        return ModelState(
            {k: v.copy() for k, v in self.arrays.items()}, dict(self.counters), self.combine
        )


@dataclass
class StateSum:
    """Partial aggregate of states: the sum of arrays and counters and how many were added.

    ``add`` and ``merge`` are associative and commutative, so Spark's ``treeAggregate`` can
    combine partitions in any order; :meth:`result` divides by the count for *mean* states.
    """

    arrays: dict[str, Any] = field(default_factory=dict)
    counters: dict[str, float] = field(default_factory=dict)
    n: int = 0
    combine: Combine = "mean"
    dtypes: dict[str, Any] = field(default_factory=dict)

    def add(self, state: ModelState) -> StateSum:
        # float arrays are summed in float64: a sum of a few float32 values is then exact in
        # practice, so the result does not depend on the order Spark combines partitions in
        arrays = {k: _widen(v) for k, v in state.arrays.items()}
        dtypes = {k: v.dtype for k, v in state.arrays.items()}
        return self.merge(StateSum(arrays, dict(state.counters), 1, state.combine, dtypes))

    def merge(self, other: StateSum) -> StateSum:
        if other.n == 0:
            return self
        if self.n == 0:
            return StateSum(
                {k: _copy(v) for k, v in other.arrays.items()},
                dict(other.counters),
                other.n,
                other.combine,
                dict(other.dtypes),
            )
        if set(self.arrays) != set(other.arrays):
            raise ValueError(f"cannot combine states with arrays {sorted(self.arrays)} and {sorted(other.arrays)}")
        arrays = {k: _add(self.arrays[k], other.arrays[k]) for k in self.arrays}
        counters = dict(self.counters)
        for k, v in other.counters.items():
            counters[k] = counters.get(k, 0) + v
        return StateSum(arrays, counters, self.n + other.n, self.combine, {**other.dtypes, **self.dtypes})

    def result(self) -> ModelState:
        if self.n == 0:
            raise ValueError("no states to combine")
        if self.combine == "mean":
            arrays = {k: _scale(v, 1.0 / self.n) for k, v in self.arrays.items()}
        else:
            arrays = dict(self.arrays)
        arrays = {k: _cast(v, self.dtypes.get(k)) for k, v in arrays.items()}
        return ModelState(arrays, dict(self.counters), self.combine)


def combine_states(states: Iterable[ModelState]) -> ModelState:
    """Serial reference of the Spark mixing: mean (or sum) of the states."""
    acc = StateSum()
    for s in states:
        acc = acc.add(s)
    return acc.result()


def _widen(v: Any) -> Any:
    if v.dtype == np.float32:
        return v.astype(np.float64)
    return v


def _cast(v: Any, dtype: Any) -> Any:
    if dtype is None or v.dtype == dtype:
        return v
    return v.astype(dtype)


def _copy(v: Any) -> Any:
    return v.copy()


def _add(a: Any, b: Any) -> Any:
    if sp.issparse(a) or sp.issparse(b):
        out = (sp.csr_matrix(a) + sp.csr_matrix(b)).tocsr()
        out.sort_indices()
        return out
    return a + b


def _scale(v: Any, f: float) -> Any:
    if v.dtype.kind != "f":
        # integer arrays (e.g. counts per shard) average to the nearest integer
        return np.rint(v * f) if not sp.issparse(v) else v
    if sp.issparse(v):
        return (v * v.dtype.type(f)).tocsr()
    return v * v.dtype.type(f)


class HierModel:
    """Base class of hierarchical classifiers over a :class:`Taxonomy`.

    Subclasses set ``name`` and ``combine`` and implement :meth:`init_state`,
    :meth:`partial_fit`, :meth:`decode` and parameter validation. ``__init__`` only stores
    arguments (scikit-learn convention); learned state lives in ``state_``.
    """

    name: ClassVar[str] = "base"
    combine: ClassVar[Combine] = "mean"
    #: parameters and their defaults; subclasses override
    defaults: ClassVar[dict[str, Any]] = {}

    # -- how the model trains (declared here, read by the Spark layer) -------------------------
    #: the training strategy (see :data:`TrainingStrategy`); a model may also train node-parallel
    #: when :meth:`node_parallel` says its node learners are independent
    training: ClassVar[TrainingStrategy] = "mixing"
    #: reads the raw term counts (``SparseBatch.counts``) in training and decoding
    needs_counts: ClassVar[bool] = False
    #: one counting pass is the whole training: ``train.epochs`` does not apply
    single_pass: ClassVar[bool] = False
    #: label sets that stop at an internal node are modelled natively: no virtual ``/_self`` leaves
    native_partial_paths: ClassVar[bool] = False
    #: one class per class space (multi-dimensional classification: evaluate adds MDC metrics)
    multi_dimensional: ClassVar[bool] = False
    #: node scores are linear in the features: :meth:`feature_contributions` (``predict --explain``)
    explains: ClassVar[bool] = False
    #: trains and decodes on the tree of paths of a polyhierarchy (a concept with several parents:
    #: one position per path, :mod:`sparkhc.polyhierarchy`); every model over a tree taxonomy can, a
    #: model whose taxonomy must have another shape (the class spaces of MDC) declares False and
    #: training refuses a polyhierarchy in one line naming the models that can
    supports_polyhierarchy: ClassVar[bool] = True
    #: a saved model can continue training on new documents (``sparkhc train --warm-start``)
    warm_startable: ClassVar[bool] = True
    #: every training document needs a label: ``sparkhc train`` and the ``pyspark.ml`` estimator
    #: skip (and count) documents with an empty label set; False: they are data (unlabelled
    #: documents of semi-supervised EM, the all-negative examples of the H-loss learners)
    requires_labels: ClassVar[bool] = False

    # -- optional capabilities (declared here; the Spark layer reads them, never probes) -------
    #: the state arrays with one row per feature (feature-major) of which a shard-local epoch
    #: writes only the rows that :attr:`touched_rows_` marks, when it sets it: the row-sparse
    #: deltas of parameter mixing then compare only those rows (:meth:`changed_rows`)
    touched_arrays: ClassVar[tuple[str, ...]] = ()
    #: after :meth:`partial_fit`: a bool per row of the :attr:`touched_arrays`, True for the rows
    #: the epoch may have written; None: any row may have changed
    touched_rows_: np.ndarray | None = None
    #: threads :meth:`decode` may use on a large batch (models that decode block by block, the PA
    #: models: their compiled kernels release the GIL); set by the owner of a model instance (the
    #: epoch selection's validation model, scored in the driver). Not a parameter: the leaf sets and
    #: scores are the same whatever the value. Other models ignore it.
    decode_threads: int = 1
    #: the factor of the step caps of a shard-local epoch (CoCoA+'s sigma'): the number of shards
    #: when parameter mixing runs with ``train.step_scale = "shards"``, else 1; set on the scratch
    #: models of the mixing engines (:class:`sparkhc.spark.mixing.engine.ModelSpec`). Not a
    #: parameter: the PA models cap their steps by ``C x step_scale``; other models ignore it.
    step_scale: float = 1.0
    #: the number of shards whose states the mixing averages (1: serial training); set with
    #: :attr:`step_scale` on the scratch models of the mixing engines. Dual solvers keep their
    #: duals scaled by ``step_scale / n_shards`` (``sparkhc.struct_dcd``); other models ignore it.
    n_shards: int = 1
    #: what a shard-local training keeps from one epoch to the next besides the mixed state (the
    #: working sets of ``solver = "dcd"``): the engines hand each shard its own back before its
    #: next epoch (:func:`sparkhc.spark.mixing.mix.shard_epoch`); None for a fresh start
    shard_memory: Any = None

    @property
    def keeps_shard_memory(self) -> str:
        """What needs :attr:`shard_memory` kept between a shard's epochs (a setting, for messages);
        empty when nothing does (every engine can train the model)."""
        return ""
    #: :meth:`fit_open` is implemented: the exact batch fit with the rows held by a pair solver
    #: elsewhere (the MDC models: ``sparkhc.spark.mdc`` runs it in the driver or on Spark)
    fits_open: ClassVar[bool] = False

    def changed_rows(self) -> dict[str, np.ndarray | None]:
        """Per array of :attr:`touched_arrays`, the rows the last :meth:`partial_fit` may have
        changed (:attr:`touched_rows_`; None: any), for :func:`sparkhc.spark.deltas.encode`."""
        return {name: self.touched_rows_ for name in self.touched_arrays}

    def supports_edge_offsets(self) -> bool:
        """Whether this instance can carry per-edge score offsets (``train.calibrate``): a model
        that returns True implements ``shift_edges(offsets)``, which adds ``offsets[e]`` to the
        score of edge ``e`` for every document and leaves an ordinary state."""
        return False

    def shift_edges(self, offsets: np.ndarray) -> None:
        """Add ``offsets[e]`` to the score of edge ``e`` for every document (models whose
        :meth:`supports_edge_offsets` is True implement it)."""
        raise ModelError(f"model {self.name!r} cannot carry per-edge score offsets (train.calibrate)")

    def feature_contributions(self, batch: SparseBatch, nodes: list[np.ndarray]
                              ) -> list[list[tuple[np.ndarray, np.ndarray]]]:
        """Per document ``i`` and node ``c`` of ``nodes[i]``: the feature indices and contributions whose
        sum is the score of ``c`` the decoder uses (models whose :attr:`explains` is True)."""
        raise ModelError(f"model {self.name!r} has no per-feature contributions (predict --explain)")

    def fit_open(self, counts: list[np.ndarray], open_blocks: Any) -> HierModel:
        """The exact fit where the rows never come to this process (models with :attr:`fits_open`):
        ``counts`` are the class counts, ``open_blocks(solver, active)`` opens the model's pair
        solver on the blocks built where the rows are."""
        raise ModelError(f"model {self.name!r} has no open fit (fits_open is False)")

    def node_parallel(self) -> bool:
        """Whether the node learners are independent given the gold labels, so that each node can
        be trained in its own task (``training = "node_parallel"`` when ``train.node_parallel``)."""
        return False

    def training_strategy(self, node_parallel: bool = True) -> TrainingStrategy:
        """The strategy this instance trains by: ``node_parallel`` when allowed and possible, else
        the class's :attr:`training`."""
        if node_parallel and self.node_parallel():
            return "node_parallel"
        return self.training

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        init = cls.__dict__.get("__init__")
        if init is not None and not init.__doc__:  # help() of every model says where its parameters come from
            init.__doc__ = HierModel.__init__.__doc__

    def __init__(self, taxonomy: Taxonomy, n_features: int, **params: Any) -> None:
        """A model of ``taxonomy`` over ``n_features`` features: ``params``, and the class's
        :attr:`defaults` for every parameter they do not set (for a published model, the paper's).
        Built so with no parameters, it is not always the model ``sparkhc train`` trains: that one
        also takes ``[model.<name>]`` of ``sparkhc/conf/defaults.toml`` and ``epochs`` and ``seed``
        of ``[train]``; :meth:`configured` builds it."""
        unknown = sorted(set(params) - set(self.defaults))
        if unknown:
            raise ConfigError(
                f"unknown parameter(s) {unknown} for model {self.name!r}; known: {sorted(self.defaults)}"
            )
        self.taxonomy = taxonomy
        self.n_features = int(n_features)
        self.params: dict[str, Any] = {**self.defaults, **params}
        self.state_: ModelState | None = None

    @classmethod
    def configured(cls, taxonomy: Taxonomy, n_features: int, **params: Any) -> Any:
        """The model ``sparkhc train``, the ``pyspark.ml`` estimator and ``sparkhc tune`` build when
        nothing is configured: the class's :attr:`defaults`, then ``[model.<name>]`` of
        ``sparkhc/conf/defaults.toml``, then ``epochs`` and ``seed`` of ``[train]``
        (:func:`sparkhc.config.model_params`), then ``params``. How it is trained (the epoch and
        ``C = "auto"`` selection, calibration, mixing) is ``sparkhc train``'s; a direct :meth:`fit`
        needs a number for ``C``."""
        from sparkhc.config import load_config, model_params

        return cls(taxonomy, n_features, **{**model_params(cls, load_config()), **params})

    # -- parameters --------------------------------------------------------------------------
    def _check_param(self, key: str, ok: bool, expected: str) -> None:
        if not ok:
            raise ConfigError(
                f"The {key!r} parameter of {type(self).__name__} must be {expected}. "
                f"Got {self.params[key]!r} instead."
            )

    def validate_params(self) -> None:
        """Raise :class:`ConfigError` for a bad parameter (called by fit)."""

    # -- state -------------------------------------------------------------------------------
    def init_state(self) -> ModelState:
        raise NotImplementedError

    def get_state(self) -> ModelState:
        if self.state_ is None:
            raise NotFittedError(f"model {self.name!r} is not fitted yet")
        return self.state_

    def set_state(self, state: ModelState) -> HierModel:
        self.state_ = state
        return self

    # -- training ----------------------------------------------------------------------------
    def partial_fit(self, batch: SparseBatch, seed: int = 0, epoch: int = 0) -> dict[str, float]:
        """One epoch over ``batch`` (a shard) starting from the current state; returns counters
        (at least ``examples``, ``updates``, ``loss``)."""
        raise NotImplementedError

    def fit(self, batch: SparseBatch, epochs: int | None = None, seed: int = 0) -> HierModel:
        """Serial training: ``epochs`` calls of :meth:`partial_fit` from a fresh state."""
        self.validate_params()
        self.state_ = self.init_state()
        self.shard_memory = None
        n = int(epochs if epochs is not None else self.params.get("epochs", 1))
        for e in range(n):
            self.partial_fit(batch, seed=seed, epoch=e)
        return self

    # -- prediction --------------------------------------------------------------------------
    def decode(self, batch: SparseBatch) -> tuple[list[np.ndarray], np.ndarray | None]:
        """Predicted leaf sets (ids in ``self.taxonomy``) and optional per-node scores
        (n_docs, n_nodes) for threshold sweeps."""
        raise NotImplementedError

    def decode_picked(self, batch: SparseBatch) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Predicted leaf sets and the scores of their nodes (aligned; NaN for a model without
        per-node scores): what predictions store. Models with large score matrices override it to
        decode block by block."""
        leaf_sets, scores = self.decode(batch)
        if scores is None:
            return leaf_sets, [np.full(len(m), np.nan, dtype=np.float32) for m in leaf_sets]
        return leaf_sets, [scores[i, np.asarray(m, dtype=np.int64)] for i, m in enumerate(leaf_sets)]

    def predict(self, batch: SparseBatch) -> list[list[str]]:
        """Predicted label names (deepest labels; virtual leaves mapped back)."""
        leaf_sets, _ = self.decode(batch)
        return [self.taxonomy.to_labels(m) for m in leaf_sets]

    def model_size(self, tol: float = 1e-7) -> int:
        """Number of weights with ``|w| > tol`` (Murawaki 2013, Sect. 5)."""
        total = 0
        for v in self.get_state().arrays.values():
            if sp.issparse(v):
                total += int(np.count_nonzero(np.abs(v.data) > tol))
            elif v.dtype.kind == "f":
                total += int(np.count_nonzero(np.abs(v) > tol))
        return total


def shuffled_order(n: int, seed: int, epoch: int, shard: int = 0) -> np.ndarray:
    """Per-epoch shuffle (Murawaki Alg. 1/5 "shuffle"), reproducible from (seed, epoch, shard)."""
    rng = np.random.default_rng([int(seed), int(epoch), int(shard)])
    return rng.permutation(n)


def leaf_indicator(leaf_sets: Sequence[np.ndarray], n_nodes: int) -> sp.csr_matrix:
    rows = np.repeat(np.arange(len(leaf_sets)), [len(m) for m in leaf_sets])
    cols = np.concatenate([np.asarray(m, dtype=np.int64) for m in leaf_sets]) if leaf_sets else np.zeros(0, int)
    return sp.csr_matrix((np.ones(len(cols), dtype=np.float32), (rows, cols)), shape=(len(leaf_sets), n_nodes))
