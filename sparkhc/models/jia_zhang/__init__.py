"""Jia & Zhang (AAAI 2020), multi-dimensional classification: the model family as one package.

Modules: :mod:`.solver` (the M3MDC and BR solvers, numpy/scipy), :mod:`.spaces` (class spaces
declared from label fields of text documents, and the MDC taxonomy), :mod:`.data` (the numeric MDC
data sets); this module: the registered models, behind the
:class:`~sparkhc.models.base.HierModel` interface.

``m3mdc`` (Jia & Zhang, AAAI 2020) and its baseline ``mdc_br`` (independent one-vs-one linear SVMs
per class space, λ2 = 0) from :mod:`sparkhc.models.jia_zhang.solver`, registered so that ``sparkhc train /
predict / evaluate`` run them on featurized text.

How MDC maps onto the hierarchical interface
--------------------------------------------
The taxonomy is the MDC taxonomy written by ``sparkhc featurize --class-spaces`` (or any
``parent<TAB>child`` file of that shape): the root's children are the class spaces and their
children, all leaves, the classes (:class:`~sparkhc.class_spaces.MDCLayout`; class index = position
in the taxonomy's order, i.e. sorted by name). A training document must carry exactly one class
label per space (an error names the document otherwise). The model predicts exactly one leaf per
space, so a prediction is an ordinary label set: the predictions Parquet, the hierarchical and
label-based metrics and the model directory work unchanged, and ``sparkhc evaluate`` adds the MDC
metrics (Hamming Score, Exact Match, Sub-Exact Match, per-space accuracy) for these models.
``pred_scores`` are the vote shares of the predicted classes (votes / (K_j − 1)).

Training is one batch fit on the driver, not an epoch loop: ``sparkhc.spark.mdc.fit_mdc_spark``
collects the selected documents and sets :attr:`M3MDCModel.solver` to a Spark pair solver, so that
the pairwise SVM sub-problems of every sweep run as Spark tasks. The state (``W``, ``b``, ``C``, the
pair layout) is saved as named arrays like every other model's.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from sparkhc.batch import SparseBatch
from sparkhc.class_spaces import MDCLayout
from sparkhc.errors import ModelError
from sparkhc.models.base import HierModel, ModelState, TrainingStrategy
from sparkhc.models.jia_zhang.solver import M3MDC, BinaryRelevanceSVM, PairSolver
from sparkhc.taxonomy import Taxonomy

#: registry names of this module's models (Jia & Zhang 2020; need MDC features: featurize
#: --class-spaces); read by :mod:`sparkhc.models` without importing
MODELS = {"m3mdc": "M3MDCModel", "mdc_br": "BRModel"}

class M3MDCModel(HierModel):
    """M3MDC over an MDC taxonomy (parameters: those of :class:`sparkhc.models.jia_zhang.solver.M3MDC`).

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from sparkhc.batch import SparseBatch
    >>> from sparkhc.taxonomy import Taxonomy
    >>> tax = Taxonomy.from_edges([("ROOT", "a"), ("ROOT", "b"), ("a", "a/0"), ("a", "a/1"),
    ...                            ("b", "b/0"), ("b", "b/1")], root="ROOT")
    >>> X = sp.csr_matrix(np.array([[0, 0], [0, 1], [1, 0], [1, 1]], dtype=np.float32))
    >>> labels = [["a/0", "b/0"], ["a/0", "b/1"], ["a/1", "b/0"], ["a/1", "b/1"]]
    >>> batch = SparseBatch(X, np.array(["d1", "d2", "d3", "d4"]), labels)
    >>> M3MDCModel(tax, 2).fit(batch).predict(batch) == labels
    True
    """

    name: ClassVar[str] = "m3mdc"
    fits_open: ClassVar[bool] = True
    defaults: ClassVar[dict[str, Any]] = {
        "lambda1": 0.1,
        "lambda2": 0.001,
        "tol": 1e-4,
        "max_iter": 20,
        "gap_tol": 1e-6,
        "max_inner_iter": 1000,
        "smo_tol": 1e-10,
        "smo_max_iter": 200_000,
        "ridge": 1e-8,
        # "auto": "smo" up to SMO_MAX_ROWS training rows, else "dcd"; "dcd": dual coordinate
        # descent through w, O(nnz) per pass, no n x n matrix; "smo": SMO on each pair's own Gram
        # matrix (8 n_i^2 bytes per pair)
        "w_solver": "auto",
        "dcd_max_passes": 20_000,
        # "auto": the W steps before the last to a looser gap (early_gap_tol, then following the
        # alternation's progress) with DCD, every W step to gap_tol with SMO; "adaptive", "fixed"
        "gap_schedule": "auto",
        "early_gap_tol": 1e-3,
    }
    estimator_class: ClassVar[Any] = M3MDC
    #: sparkhc evaluate adds the MDC metrics
    multi_dimensional: ClassVar[bool] = True
    supports_polyhierarchy: ClassVar[bool] = False  # the taxonomy is its class spaces (depth 2, one class each)
    #: one exact fit on the driver, the pairwise sub-problems of every sweep on Spark (sparkhc.spark.mdc)
    training: ClassVar[TrainingStrategy] = "batch"
    warm_startable: ClassVar[bool] = False
    #: the MDC taxonomy has no partial paths: no virtual /_self leaves
    native_partial_paths: ClassVar[bool] = True

    def __init__(self, taxonomy: Taxonomy, n_features: int, **params: Any) -> None:
        super().__init__(taxonomy, n_features, **params)
        self.layout = MDCLayout.from_taxonomy(taxonomy)
        #: where the pairwise sub-problems run (None: serially); set by the Spark layer, not saved
        self.solver: PairSolver | None = None
        self.history_: list[dict[str, Any]] = []
        self._estimator: Any = None

    def _new_estimator(self) -> Any:
        return self.estimator_class(**self.params, solver=self.solver)

    def validate_params(self) -> None:
        est = self._new_estimator()
        validate = getattr(est, "_validate", None)
        if validate is not None:
            validate()

    # -- training ----------------------------------------------------------------------------
    def init_state(self) -> ModelState:
        raise ModelError(f"model {self.name!r} is fitted in one batch (fit), not by epochs or from a state")

    def partial_fit(self, batch: SparseBatch, seed: int = 0, epoch: int = 0) -> dict[str, float]:
        raise ModelError(
            f"model {self.name!r} is fitted in one batch (fit); incremental training (--warm-start) is not supported"
        )

    def fit(self, batch: SparseBatch, epochs: int | None = None, seed: int = 0) -> M3MDCModel:
        """Fit on every document of ``batch`` (``epochs`` and ``seed`` are unused: the fit is exact)."""
        self.validate_params()
        if batch.labels is None:
            raise ModelError(f"model {self.name!r}: the training documents have no labels")
        if batch.n_features != self.n_features:
            raise ModelError(f"the batch has {batch.n_features} features; the model was built for {self.n_features}")
        Y = self.layout.targets(batch.labels, batch.doc_ids)
        est = self._new_estimator().fit(batch.X, Y, self.layout.n_classes)
        return self._fitted(est, len(batch))

    def fit_open(self, counts: list[np.ndarray], open_blocks: Any) -> M3MDCModel:
        """Fit where the rows never come to this process: ``counts`` are the class counts of every
        space, ``open_blocks(solver, active_pairs)`` opens :attr:`solver` on the pair blocks built
        where the rows are (``sparkhc.spark.mdc.fit_mdc_spark``)."""
        self.validate_params()
        if self.solver is None:
            raise ModelError(f"model {self.name!r}: fit_open needs a pair solver that holds the rows")
        solver = self.solver
        est = self._new_estimator()
        est.fit_open(solver, self.layout.n_classes, counts, self.n_features, lambda active: open_blocks(solver, active))
        return self._fitted(est, int(counts[0].sum()) if counts else 0)

    def _fitted(self, est: Any, n_docs: int) -> M3MDCModel:
        self.history_ = list(getattr(est, "history_", []))
        counters: dict[str, float] = {"documents": float(n_docs), "pairs": float(est.pairs_.shape[0])}
        if hasattr(est, "n_iter_"):
            counters.update(alternations=float(est.n_iter_), converged=float(est.converged_))
        if hasattr(est, "capped_sub_problems_"):  # no cap reached unreported: the counts in the summary
            counters.update(sub_problems=float(est.sub_problems_), capped_sub_problems=float(est.capped_sub_problems_),
                            sweep_capped=float(est.sweep_capped_))
        if hasattr(est, "sweeps_"):  # the W-step sweeps of the whole fit (every alternation)
            counters.update(sweeps=float(est.sweeps_))
        self._estimator = est
        self.state_ = ModelState(est.get_state(), counters, "mean")
        return self

    def set_state(self, state: ModelState) -> M3MDCModel:
        est = self.estimator_class(**self.params)
        est.set_state(state.arrays)
        if list(est.n_classes_) != self.layout.n_classes:
            raise ModelError(
                f"model state has class spaces of {list(est.n_classes_)} classes; the taxonomy has "
                f"{self.layout.n_classes} ({list(self.layout.names)})"
            )
        if est.W_.shape[0] != self.n_features:
            raise ModelError(f"model state has {est.W_.shape[0]} features; expected {self.n_features}")
        self._estimator = est
        self.state_ = state
        return self

    # -- prediction --------------------------------------------------------------------------
    def decode(self, batch: SparseBatch) -> tuple[list[np.ndarray], np.ndarray | None]:
        """One leaf per class space (one-vs-one voting); scores: vote shares of every class leaf."""
        if self._estimator is None:
            self.set_state(self.get_state())
        est = self._estimator
        votes = est.votes(batch.X)
        n = len(batch)
        scores = np.full((n, self.taxonomy.n_nodes), np.nan)
        Y = np.empty((n, len(votes)), dtype=np.int64)
        for j, v in enumerate(votes):
            Y[:, j] = np.argmax(v, axis=1)
            scores[:, self.layout.leaves[j]] = v / max(v.shape[1] - 1, 1)
        return self.layout.leaf_sets(Y), scores

    def predict_targets(self, batch: SparseBatch) -> np.ndarray:
        """``(n, q)`` class indices (positions in :attr:`layout`)."""
        if self._estimator is None:
            self.set_state(self.get_state())
        return np.asarray(self._estimator.predict(batch.X))


class BRModel(M3MDCModel):
    """The BR baseline of M3MDC: independent one-vs-one linear SVMs per class space (λ2 = 0)."""

    name: ClassVar[str] = "mdc_br"
    defaults: ClassVar[dict[str, Any]] = {"lambda1": 0.1, "smo_tol": 1e-10, "smo_max_iter": 200_000,
                                          "w_solver": "auto", "dcd_max_passes": 20_000, "gap_tol": 1e-6}
    estimator_class: ClassVar[Any] = BinaryRelevanceSVM
