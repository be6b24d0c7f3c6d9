"""M3MDC: maximum margin multi-dimensional classification, and its binary-relevance baseline.

Jia & Zhang, "Maximum Margin Multi-Dimensional Classification", AAAI 2020 (restated in
``ALGORITHMS.md``). Each example has one class in each of ``q`` class spaces; space ``j`` has
``K_j`` classes. One-vs-one decomposition inside every space gives ``m = Σ K_j (K_j − 1) / 2``
binary problems ``(w_i, b_i)``; the columns of ``W`` (``d × m``) are coupled through a learned
pair covariance ``C`` (``m × m``)::

    min_{W, b, C}  Σ_i Σ_j ξ_ij + (λ1/2) tr(W Wᵀ) + (λ2/2) tr(W C⁻¹ Wᵀ)
    s.t.           y_ij (⟨w_i, x_ij⟩ + b_i) ≥ 1 − ξ_ij,  ξ_ij ≥ 0,  C ⪰ 0,  tr(C) ≤ 1

solved by alternating (a) the W, b step with C fixed and (b) the closed-form C step
``C = (WᵀW)^{1/2} / tr((WᵀW)^{1/2})``.

How the W step is solved (exactly)
----------------------------------
With ``C`` fixed the W step is the convex QP ``Σ_i L_i(w_i, b_i) + ½ tr(W Q Wᵀ)`` with
``Q = λ1 I + λ2 C⁻¹`` and ``L_i`` the hinge loss of pair ``i``. Its dual is the paper's Eq. (8)::

    max_α  Σ α − ½ tr(G M Gᵀ),   G = [g_1 … g_m],  g_i = Σ_j α_ij y_ij x_ij,  M = Q⁻¹
    s.t.   0 ≤ α_ij ≤ 1,  Σ_j α_ij y_ij = 0  (one equality per pair: the unregularised b_i)

with ``W = G M`` (Eq. 5). The pairwise blocks ``α_i`` are *not* independent given ``C`` alone: the
off-diagonal entries of ``M`` couple them (the paper's sub-QP (9) depends on the other pairs'
multipliers through ``S_ij`` and is swept pair after pair). To solve the blocks in parallel and
still reach the exact optimum we use parallel (Jacobi) block ascent with an exact line search:
every sweep solves the paper's sub-problem (9) of *every* pair from the same point ``α`` — the
dual restricted to block ``i`` with the other blocks fixed, a linear-SVM dual with a shifted linear
term, i.e. the dual of ``min_{w,b} L_i(w, b) + (1/(2 M_ii)) ‖w − c_i‖²`` with
``c_i = Σ_{k≠i} M_ik g_k`` — by SMO with second-order working-set selection (Fan, Chen & Lin 2005,
the LIBSVM solver) or by dual coordinate descent (``w_solver``, below), warm-started from
``α_i``, all pairs in parallel (on Spark: ``sparkhc.spark.mdc.SparkPairSolver``). The joint direction ``Δ = α' − α`` is an ascent direction
(each block's part ascends the dual) and keeps every equality; the dual is a concave quadratic on
the plane spanned by ``Δ`` and the previous sweep's step ``P``, so the step maximises it exactly:
along ``Δ`` on the feasible segment ``[0, 1]``, or at the plane's maximiser when that lies in the
box (momentum against the zig-zag of Jacobi steps; dropped for the next sweep whenever a sweep
does not lower the best primal value — an adaptive restart). The dual never decreases; a sweep
with no ascent left at the final SMO tolerance ends the W step (rounding level). The SMO tolerance
starts at 1e-3 and is tightened with the duality gap down to ``smo_tol`` (1e-10): loose
sub-problems far from the optimum only cost accuracy that later sweeps recover. After each sweep
``W = G M`` and each ``b_i`` is the midpoint of the exact minimiser interval of the hinge loss for
that ``w_i`` (the paper's "moderate" bias); the primal values of these points are not monotone,
so the lowest one is kept, and the sweeps stop when the certified duality gap
``min primal(W, b) − dual(α)`` is below ``gap_tol · max(1, |primal|)`` (1e-9): the returned ``W, b``
are optimal for the stated objective to that relative accuracy (no surrogate such as a
regularised bias; the gap is recorded in ``history_``). When ``M`` is diagonal (``C = I/m`` at the
first alternation, or λ2 = 0) the blocks are independent, one sweep at the final SMO tolerance
solves the W step, and λ2 = 0 gives exactly the BR baseline.

This replaced a Gershgorin-majorised proximal scheme with Nesterov extrapolation, which needed
more sweeps for the same duality gap (the comparison: ``docs/benchmarks.md``, section
design-notes).

Where the pairs live: blocks, two rounds per sweep
--------------------------------------------------
Every active pair is a :class:`PairBlock`: its own rows of ``X``, its multipliers ``α_i``, the
last solve's direction ``Δ_i`` and the last step ``P_i``. A :class:`PairSolver` keeps the blocks
(in this process, :class:`SerialPairSolver`; in a cached RDD on the executors,
``sparkhc.spark.mdc.SparkPairSolver``) and runs two rounds per sweep on all of them: a
:class:`SolveOrder` (every pair's sub-problem from its current ``α_i``; reports ``Σ Δ_ij y_ij x_ij``,
``Σ Δ_ij`` and, when momentum is possible, the largest feasible step along 64 rays of the
``(Δ, P)`` plane) and an :class:`ApplyOrder` (the step ``α ← α + a Δ + b P`` the line search chose,
then ``g_i``, ``Σ α_i``, the optimal bias and the hinge loss of column ``i`` of ``W = G̃ M``, with
``G̃`` the ``G`` the step predicts). The driver holds only ``d × m`` matrices: the line search,
the duality gap (primal of ``(G̃ M, b)``, dual of the applied ``α``) and the C step are computed
from the ``d``-sized reports; no row and no multiplier is gathered (``fit_open``; the in-memory
``fit`` gathers ``alpha_`` once at the end). The momentum step is taken only when it lies in the
polygon spanned by the reported rays (every pair's feasible region is convex and contains it: a
conservative test of the box).

The sub-problem solvers (``w_solver``)
-------------------------------------
``"auto"`` (the default): ``"smo"`` for at most ``SMO_MAX_ROWS`` (2,000) training rows, ``"dcd"``
above. On the small data sets of the paper (Edm, Flare1) both give the same predictions, and DCD
is the slower solver there (``docs/benchmarks.md``, section design-notes). The threshold
itself was not tuned (an 8,100-row fold takes DCD; SMO holds ``8 n_i²`` bytes per pair).
``"dcd"``: dual coordinate descent through the pair's weight vector
(:func:`_solve_pair_dcd`; Hsieh et al. 2008, as in LIBLINEAR, with its shrinking; the passes are
those of :class:`sparkhc.dcd.DualCD`, the core shared with binary relevance and the hinge SVM of
H-SVM): ``O(nnz)`` of
the pair's rows per pass and no ``n × n`` matrix, the unregularised bias's equality kept by the
method of multipliers, the same KKT stopping rule as SMO. Its sub-problem tolerance follows the
relative duality gap of the W step (1× instead of SMO's 1e-2×), which stops at ``gap_tol``
(default 1e-6, relative) — the certificate is the W step's duality gap whatever the sub-solver.
Its final objective equals the exact SMO solver's to about that tolerance, with the same
predictions (``docs/benchmarks.md``, section design-notes; ``tests/unit/test_m3mdc_dcd.py``
checks it within 1e-4 relative). It is what scales in rows (``docs/benchmarks.md``, section mdc).
On dense numeric features (min-max scaled: every column in [0, 1] around a large common mean) three
things keep DCD from crawling (issue 33; ``docs/benchmarks.md``, section mdc-real): the passes run on
the pair's centred rows ``x_j − μ`` (:func:`_centred_rows`; the same dual on ``Σ α y = 0``, so the
same optimum; sparse text rows stay as they are), a solve also stops on its own certified relative
duality gap (:func:`_pair_gap`, a tenth of its tolerance), and every ``FACE_EVERY`` passes a face step
(:func:`_face_step`) solves the free multipliers and the bias exactly on the face DCD has found
(taken only when it raises the dual). The face step is a projected Newton step: its direction is
followed past the first bound it meets, projected on the box, and the best of the doubling steps by
their exact dual gain is taken (:func:`_face_path`). When the face has more free multipliers than
features (a rare class whose ``w`` is near 0: on yeast ~1,400 multipliers of the other class sit
within 1e-4 of the margin) its system is singular, is solved through the ``d × d`` matrix
``X_Fᵀ X_F`` (:func:`sparkhc.models.jia_zhang.kernels.face_solve_thin`), and its direction is a ray
along which the dual rises linearly: without the projected path such sub-problems took 4,000-13,000
passes (``docs/benchmarks.md``, section mdc-real). Centred rows with every entry stored run their
passes and products on a dense view (:mod:`sparkhc.models.jia_zhang.kernels`; the same sums in the
same order as the CSR ones), kept per block. A solve or a W step that stops at its cap is counted
(``history_``: ``sub_problems``, ``capped_sub_problems``, ``sweep_capped``; the model's counters; the
Spark and driver fits' results) and the fit warns (:class:`M3MDCConvergenceWarning`) with the
setting to raise and the certified duality gap it reached.
``"smo"``: SMO with second-order working-set selection (described next) on the pair's own Gram
matrix ``X_i X_iᵀ`` (``8 n_i²`` bytes, computed once per block and process, never pickled).

How tightly each alternation's W step is solved (``gap_schedule``)
------------------------------------------------------------------
The paper is silent on the accuracy of the W steps. ``"fixed"``: every W step to the relative gap
``gap_tol``, the alternation stops when ``‖ΔW‖/‖W‖ < tol``. ``"adaptive"``: the first W step to
``early_gap_tol`` (1e-3), each later one to ``GAP_PROGRESS`` (a tenth) of the relative decrease of
the objective in the previous alternation (never looser than before, never tighter than
``gap_tol``): an alternation that will still move the objective by 1e-3 gains nothing from a
W step certified to 1e-6. Each W step of the adaptive schedule also knows the incumbent (the
previous alternation's ``W, b``): whenever its dual shows that no ``W`` can beat the incumbent by
more than the step's target, the target is tightened by ``GAP_PROGRESS``; once it is ``gap_tol``
and still no ``W`` can, the W step stops (``stationary`` in ``history_``) and so does the
alternation — the C step is exact, so ``(W, C)`` is a fixed point to that accuracy (the objective
is jointly convex in ``W, b, C``). ``‖ΔW‖/‖W‖ < tol`` stops it only after a W step at ``gap_tol``.
So the last W step is always certified to ``gap_tol``; the earlier ones (``gap_target`` in
``history_``) are not. With the adaptive schedule a W step's first DCD sweep also starts at ten
times its target (at most 0.1) instead of 1e-3. ``"auto"`` (the default): adaptive with DCD, fixed
with SMO (its sub-problems are cheap; its results are those of the committed paper pages).
The adaptive schedule, its ``early_gap_tol``, the first tolerance and the sub-problem tolerance
were chosen on training rows only, no test score looked at (the figures: ``docs/benchmarks.md``,
section design-notes).

Warm starts, the stopping rule and what a fit records
-----------------------------------------------------
Every W step starts from the dual solution of the previous one: the blocks keep their multipliers
``α_i`` (and ``G``) across sweeps and alternations, and each sweep's sub-problems start from them
(the DCD passes of :class:`sparkhc.dcd.DualCD` warm-started at ``α_i``). The alternation stops on
the relative change of the objective: with the adaptive schedule (DCD), when a W step certified to
``gap_tol`` shows that no ``W`` lowers the W step's objective at the previous alternation's point
by more than ``gap_tol · max(1, |objective|)`` (``stationary`` in ``history_``: the relative
decrease of the objective another alternation could bring is at most ``gap_tol``, 1e-6); with either schedule also when
``‖ΔW‖/‖W‖ < tol`` after a W step certified to ``gap_tol``; at the latest after ``max_iter``
alternations (``converged_`` False). A fit records ``n_iter_`` (alternations), ``sweeps_`` (W-step
sweeps of the whole fit), ``sub_problems_`` and ``capped_sub_problems_`` (pair solves, and those
stopped at ``dcd_max_passes`` / ``smo_max_iter``) and ``sweep_capped_`` (W steps stopped at
``max_inner_iter``); the model's counters repeat them (``alternations``, ``sweeps``,
``sub_problems``, ``capped_sub_problems``, ``sweep_capped``).

Sparse features
---------------
``X`` may be a scipy CSR matrix (text features from ``sparkhc featurize``: tens of thousands of
terms); it is never densified. ``W`` (``d × m``) and ``G`` are dense, the products with ``X`` are
sparse. The SMO iterations run in a numba-compiled loop when numba is installed
(``sparkhc[fast]``; faster than the numpy reference loop, with the same working sets).

The C step and the ridge
------------------------
``C = (A)^{1/2} / tr(A^{1/2})`` with ``A = WᵀW + ε I`` computed from an eigen-decomposition of
``A``; ``C⁻¹`` and ``M`` are formed from the same eigenpairs (no explicit inverse). This is the *exact*
minimiser over ``{C ≻ 0, tr C ≤ 1}`` of the objective plus ``(λ2 ε / 2) tr(C⁻¹)`` (Zhang & Yeung
2014 use the same perturbation), so the alternation monotonically decreases this perturbed
objective — the one recorded in ``history_`` (should the W step, solved to its tolerance, ever
end above the previous objective, the previous ``W`` is kept, so the record is exactly
non-increasing). ``ε = ridge · tr(W₁ᵀW₁)/m`` is fixed after the first W step (``ridge = 1e-8``),
which keeps ``C`` invertible when ``W`` is rank-deficient (``m > d``).

Degenerate pairs and prediction
-------------------------------
A pair ``(a, b)`` (``a < b``; ``+1`` means class ``a``) whose training data lack one or both
classes has no margin to maximise: it is excluded from the optimisation and from ``C`` (its row
and column of ``C_`` are zero) and becomes a constant voter — ``w = 0``, ``b = +1`` (only ``a``
seen), ``b = −1`` (only ``b`` seen) or ``b = 0`` (neither; abstains). Prediction: each pair votes
for ``a`` if ``w·x + b > 0``, for ``b`` if ``< 0`` and abstains at exactly 0; in each class space
the class with most votes wins, ties going to the lowest class index.
"""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import scipy.sparse as sp

from sparkhc.dcd import DualCD, Rows
from sparkhc.errors import ConfigError, InputDataError, ModelError, NotFittedError
from sparkhc.models.jia_zhang.kernels import (
    cholesky_shifted,
    dense_products,
    face_path_loop,
    face_solve_thin_loop,
)

logger = logging.getLogger(__name__)

_NO_INDEX = np.zeros(1, dtype=np.int64)  # the index arrays of dense rows (unused by the pass)
_TAU = 1e-12  # LIBSVM's floor for non-positive curvature in working-set selection

Matrix = Any  # np.ndarray or scipy.sparse CSR matrix (n × d)


# ---------------------------------------------------------------------------------------------
# The pairwise sub-problem (module-level: pickles cleanly for Spark)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class PairData:
    """A training matrix and the examples of one-vs-one pairs (a :class:`PairBlock` holds one
    with its pair's rows only).

    ``X`` is an ``n × d`` matrix (scipy CSR for sparse text, or a dense array, never densified),
    ``rows[i]`` the example indices of pair ``i`` and ``signs[i]`` their ``±1`` targets (``+1``:
    the pair's lower class). SMO reads its kernel entries from the Gram matrix ``K = X Xᵀ``
    (:attr:`gram`, ``n × n`` float64), computed on first use in each process and never pickled.
    """

    X: Matrix
    rows: tuple[np.ndarray, ...]
    signs: tuple[np.ndarray, ...]

    @classmethod
    def build(cls, X: Matrix, rows: Sequence[np.ndarray], signs: Sequence[np.ndarray]) -> PairData:
        return cls(
            X,
            tuple(np.asarray(r, dtype=np.int64) for r in rows),
            tuple(np.asarray(s, dtype=np.float64) for s in signs),
        )

    @property
    def n_pairs(self) -> int:
        return len(self.rows)

    @property
    def gram(self) -> np.ndarray:
        """``X Xᵀ`` (float64, C order), computed once per process."""
        g = self.__dict__.get("_gram")
        if g is None:
            X = self.csr if sp.issparse(self.X) and self.X.dtype != np.float64 else self.X  # float32 rows: in float64
            prod = X @ X.T
            g = np.ascontiguousarray(prod.toarray() if sp.issparse(prod) else prod, dtype=np.float64)
            object.__setattr__(self, "_gram", g)
        return g

    @property
    def csr(self) -> sp.csr_matrix:
        """``X`` as float64 CSR with sorted indices (the DCD solver's layout), made once per process."""
        c = self.__dict__.get("_csr")
        if c is None:
            X = self.X
            if sp.issparse(X) and X.format == "csr" and X.dtype == np.float64 and X.has_sorted_indices:
                c = X  # already the layout (rows shared by the blocks of a partition: no copy)
            else:
                c = sp.csr_matrix(X, dtype=np.float64)
                c.sort_indices()
            object.__setattr__(self, "_csr", c)
        return c

    @property
    def sq_norms(self) -> np.ndarray:
        """``‖x_j‖²`` of every training example, computed once per process."""
        q = self.__dict__.get("_sq")
        if q is None:
            c = self.csr
            q = np.asarray(c.multiply(c).sum(axis=1), dtype=np.float64).ravel()
            object.__setattr__(self, "_sq", q)
        return q

    def pass_rows(self, pair: int) -> tuple[sp.csr_matrix, sp.csr_matrix, np.ndarray, np.ndarray | None,
                                            np.ndarray | None]:
        """The rows of ``pair`` as given (CSR), the rows DCD's passes run on (centred when that stays
        small: :func:`_centred_rows`), their squared norms, and, when every entry of those is
        stored, the same numbers as C-ordered ``n × d`` and ``d × n`` arrays. Centred rows are kept
        per process (computed once per block, not once per solve); sparse rows, which stay as they
        are, are not (a block's rows are sliced per solve unless they are all of ``X``)."""
        cache = self.__dict__.get("_pass")
        if cache is None:
            cache = {}
            object.__setattr__(self, "_pass", cache)
        hit = cache.get(pair)
        if hit is not None:
            return hit  # type: ignore[no-any-return]
        rows = self.rows[pair]
        n_all = self.csr.shape[0]
        whole = rows.size == n_all and (n_all == 0 or (rows[0] == 0 and rows[-1] == n_all - 1))  # sorted, distinct
        raw = self.csr if whole else self.csr[rows]
        Xp = _centred_rows(raw)
        sq = np.asarray(Xp.multiply(Xp).sum(axis=1), dtype=np.float64).ravel()
        n, d = Xp.shape
        dense = Xp.data.reshape(n, d) if n and Xp.nnz == n * d else None  # full sorted rows: row-major
        out = (raw, Xp, sq, dense, None if dense is None else np.ascontiguousarray(dense.T))
        if Xp is not raw:
            cache[pair] = out
        return out

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k not in ("_gram", "_csr", "_sq", "_pass")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    def scores(self, W: np.ndarray) -> list[np.ndarray]:
        """``⟨w_i, x_ij⟩`` for the examples of every pair (``W``: one column per active pair)."""
        F = np.asarray(self.X @ W)
        return [F[r, i] for i, r in enumerate(self.rows)]

    def combine(self, alpha: Sequence[np.ndarray]) -> np.ndarray:
        """``G = [g_1 … g_m]`` with ``g_i = Σ_j α_ij y_ij x_ij`` (``d × m``)."""
        m = len(self.rows)
        d = self.X.shape[1]
        if m == 0:
            return np.zeros((d, 0))
        if m == 1:  # a block's own pair: one product with a vector, no sparse matrix built
            z = np.zeros(self.X.shape[0])
            z[self.rows[0]] = np.asarray(alpha[0], dtype=np.float64) * self.signs[0]
            return np.asarray(self.X.T @ z, dtype=np.float64).reshape(d, 1)
        rows = np.concatenate(self.rows)
        cols = np.repeat(np.arange(m), [r.size for r in self.rows])
        vals = np.concatenate([np.asarray(a, dtype=np.float64) * y for a, y in zip(alpha, self.signs, strict=True)])
        A = sp.csr_matrix((vals, (rows, cols)), shape=(self.X.shape[0], m))
        G = self.X.T @ A if sp.issparse(self.X) else self.X.T @ A.toarray()
        return np.asarray(G.toarray() if sp.issparse(G) else G, dtype=np.float64)


@dataclass(frozen=True)
class PairTask:
    """One sub-problem ``min_{w,b} Σ hinge + (scale/2) ‖w − center‖²`` of pair ``pair``."""

    pair: int
    center: np.ndarray
    scale: float
    alpha0: np.ndarray | None
    tol: float
    max_iter: int
    #: ``"dcd"`` (dual coordinate descent through ``w``, no Gram matrix; ``max_iter`` counts passes)
    #: or ``"smo"`` (SMO on the Gram matrix of ``data``; ``max_iter`` counts SMO iterations)
    method: str = "smo"


@dataclass(frozen=True)
class PairResult:
    pair: int
    w: np.ndarray
    b: float
    alpha: np.ndarray
    iterations: int
    converged: bool


def solve_pair_task(data: PairData, task: PairTask) -> PairResult:
    """Solve one centred linear-SVM sub-problem exactly (SMO in the dual, then the exact bias).

    Dual: ``max_α Σ_j α_j (1 − y_j ⟨x_j, c⟩) − (1/(2 s)) ‖Σ_j α_j y_j x_j‖²`` s.t.
    ``0 ≤ α ≤ 1``, ``Σ α_j y_j = 0``; primal ``w = c + (1/s) Σ α_j y_j x_j``.
    """
    if task.method == "dcd":
        return _solve_pair_dcd(data, task)
    if task.method != "smo":
        raise ConfigError(f"unknown W-step sub-problem solver {task.method!r}; expected 'dcd' or 'smo'")
    rows = data.rows[task.pair]
    y = data.signs[task.pair]
    X = data.X
    center = np.asarray(task.center, dtype=np.float64)
    p = 1.0 - y * np.asarray(X @ center).ravel()[rows]
    k_alpha = None
    if task.alpha0 is not None and np.any(task.alpha0):  # the warm start's K_p (α ∘ y), through X
        z = np.zeros(X.shape[0])
        z[rows] = task.alpha0 * y
        k_alpha = np.asarray(X @ np.asarray(X.T @ z).ravel()).ravel()[rows]
    alpha, iterations, converged = smo(
        data.gram, y, p, float(task.scale), task.alpha0, task.tol, task.max_iter, rows=rows, k_alpha=k_alpha
    )
    z = np.zeros(X.shape[0])
    z[rows] = alpha * y
    w = center + np.asarray(X.T @ z).ravel() / task.scale
    b = optimal_bias(np.asarray(X @ w).ravel()[rows], y)
    return PairResult(task.pair, w, b, alpha, iterations, converged)


def _solve_pair_dcd(data: PairData, task: PairTask) -> PairResult:
    """:func:`solve_pair_task` by dual coordinate descent through ``w`` (no Gram matrix).

    The sub-problem's dual ``max_α Σ_j α_j (1 − y_j ⟨x_j, c⟩) − (1/(2 s)) ‖Σ_j α_j y_j x_j‖²``
    (``0 ≤ α ≤ 1``, ``Σ_j α_j y_j = 0``) is solved LIBLINEAR-style (Hsieh et al., ICML 2008): one
    coordinate at a time in a seeded random order, the gradient ``y_j (⟨x_j, w⟩ + b) − 1`` read from
    the maintained ``w = c + (1/s) Σ α y x``, so a pass costs ``O(nnz)`` of the pair's rows, with
    LIBLINEAR's shrinking (multipliers at a bound whose gradient points outwards by more than the
    previous pass's largest projected gradient leave the pass; all return before stopping). The
    equality (the unregularised bias) is enforced by the method of multipliers: a pass maximises
    the augmented dual ``D(α) − β σ − (ρ/2) σ²`` (``σ = Σ α_j y_j``; the bias is ``b = β + ρ σ``,
    ``ρ`` the mean ``‖x_j‖² / s`` of the pair, i.e. a bias feature of that norm), then ``β ← β + ρ σ``
    (proximal point on ``b``). Stops when the KKT violation ``max_{I_up} v − min_{I_low} v`` of the
    *equality-constrained* problem (``v_j = y_j − ⟨x_j, w⟩``: the quantity :func:`smo` stops on) is at
    most ``task.tol`` at a point whose ``σ`` residue was removed (:func:`_restore_equality`), so the
    returned ``α`` is feasible for the W step's dual. ``task.max_iter`` caps the passes.
    """
    rows = data.rows[task.pair]
    y = data.signs[task.pair]
    # the pair's rows as given, and the rows the passes run on (centred when that stays small)
    Xraw, Xp, sq, dense, dense_t = data.pass_rows(task.pair)
    n = rows.size
    inv_s = 1.0 / float(task.scale)
    center = np.asarray(task.center, dtype=np.float64)
    alpha = np.zeros(n) if task.alpha0 is None else np.array(task.alpha0, dtype=np.float64)

    rmatvec = dense_products()

    def through(a: np.ndarray, X: sp.csr_matrix = Xp) -> np.ndarray:  # (1/s) Σ a_j y_j x_j
        if dense is not None and X is Xp:  # the same sums in the same order as the CSR product
            return rmatvec(dense, a * y) * inv_s  # type: ignore[no-any-return]
        return np.asarray(X.T @ (a * y)).ravel() * inv_s

    def scores(w: np.ndarray, X: sp.csr_matrix = Xp) -> np.ndarray:
        if dense_t is not None and X is Xp:
            return rmatvec(dense_t, w)  # type: ignore[no-any-return]
        return np.asarray(X @ w).ravel()

    w = center + through(alpha)
    mean_sq = float(sq.mean()) if n else 0.0
    rho = (mean_sq if mean_sq > 0 else 1.0) * inv_s
    qd = sq * inv_s + rho
    f0 = scores(w)
    sigma = float(alpha @ y)
    feasible = abs(sigma) <= 1e-12 * max(n, 1)
    if task.alpha0 is not None and feasible and (
            _kkt_violation(y - f0, alpha, y) <= task.tol
            or _pair_gap(f0, y, alpha, w, center, task.scale) <= GAP_SHARE * task.tol):  # the warm start is already a solution
        w = center + through(alpha, Xraw)
        return PairResult(task.pair, w, optimal_bias(scores(w, Xraw), y), alpha, 0, True)
    layout = Rows(_NO_INDEX, _NO_INDEX, dense.reshape(-1), dense.shape[1], dense.shape) if dense is not None else \
        Rows(Xp.indptr, Xp.indices, Xp.data, 0, Xp.shape)  # dense: the same steps without CSR's index gather
    cd = DualCD(layout, y, qd, np.ones(n), np.zeros(n), alpha, w, inv_s=inv_s, beta=optimal_bias(f0, y), rho=rho,
                seed=task.pair)
    converged = False
    passes = 0
    everything_active = n
    next_face = FACE_EVERY
    interval, next_check = 1, 1  # the duality-gap checks: after 1, 2, 4, ... passes, then every GAP_CHECK_MAX
    for passes in range(1, int(task.max_iter) + 1):  # noqa: B007 - the count is returned
        st = cd.run_pass()
        cd.beta += rho * cd.sigma
        if st.vmax - st.vmin > task.tol:  # measured during the pass (slightly stale): no KKT check yet
            if passes >= next_check:  # but the certificate of the sub-problem may already hold
                interval = min(2 * interval, GAP_CHECK_MAX)
                next_check = passes + interval
                a_r = _restore_equality(cd.alpha, y)
                if abs(float(a_r @ y)) <= 1e-12 * max(n, 1):
                    w_r = center + through(a_r)
                    f_r = scores(w_r)
                    if _pair_gap(f_r, y, a_r, w_r, center, task.scale) <= GAP_SHARE * task.tol:
                        cd.move_to(a_r, w_r)
                        converged = True
                        break
                    moved = False
                    for _ in range(FACE_STEPS if passes >= next_face else 0):  # the exact minimiser on the face DCD has found
                        a_f = _face_step(Xp, y, a_r, f_r, task.scale, dense)
                        if a_f is None:
                            break
                        a_r, moved = a_f, True
                        w_r = center + through(a_r)
                        f_r = scores(w_r)
                    if passes >= next_face:
                        next_face = passes + FACE_EVERY
                    if moved:
                        cd.reset(a_r, w_r, optimal_bias(f_r, y))
                        if _pair_gap(f_r, y, cd.alpha, cd.w, center, task.scale) <= GAP_SHARE * task.tol:
                            converged = True
                            break
                        continue
            cd.shrink()
            continue
        if cd.active.size < everything_active:  # converged on the active set: one full pass before any check
            cd.unshrink()
            continue
        a_r = _restore_equality(cd.alpha, y)
        cd.move_to(a_r, cd.w + through(a_r - cd.alpha))
        if abs(cd.sigma) > 1e-12 * max(n, 1):  # residue left on bounded multipliers: keep going
            continue
        f = scores(cd.w)
        if _kkt_violation(y - f, cd.alpha, y) <= task.tol or \
                _pair_gap(f, y, cd.alpha, cd.w, center, task.scale) <= GAP_SHARE * task.tol:
            converged = True
            break
    alpha = cd.alpha
    w = center + through(alpha, Xraw)  # without the drift of the incremental updates, on the rows as given
    b = optimal_bias(scores(w, Xraw), y)
    return PairResult(task.pair, w, b, alpha, passes, converged)


#: a DCD sub-problem at tolerance ``tol`` also stops when its relative duality gap is at most
#: ``GAP_SHARE * tol`` (the KKT violation ``tol`` leaves a gap of about that order; a share of it
#: leaves the W step's sweeps room to progress)
GAP_SHARE = 0.1
#: the DCD sub-problem checks its duality gap after 1, 2, 4, ... passes, then every this many
GAP_CHECK_MAX = 16


def _pair_gap(f: np.ndarray, y: np.ndarray, alpha: np.ndarray, w: np.ndarray, center: np.ndarray,
              scale: float) -> float:
    """The relative duality gap of a centred sub-problem at a feasible ``α`` (``Σ α_j y_j = 0``)
    and its ``w = c + (1/s) Σ α_j y_j x_j``, from the scores ``f = ⟨x_j, w⟩`` (rows centred or
    not: the optimal bias absorbs a shift):
    ``(P − D) / max(1, |P|)`` with ``P = Σ hinge(f + b*) + (s/2) ‖w − c‖²`` (``b*`` the optimal
    bias) and ``D = Σ α − s ⟨c, w − c⟩ − (s/2) ‖w − c‖²`` (the dual of :func:`solve_pair_task`)."""
    dw = w - center
    reg = 0.5 * float(scale) * float(np.sum(dw * dw))
    primal = float(np.maximum(0.0, 1.0 - y * (f + optimal_bias(f, y))).sum()) + reg
    dual = float(alpha.sum()) - float(scale) * float(np.sum(center * dw)) - reg
    return (primal - dual) / max(1.0, abs(primal))


#: at a duality-gap check, at most this many face steps (:func:`_face_step`) ...
FACE_STEPS = 8
#: ... when it costs at most as much as a system of this order (``|F|³`` with ``|F|`` free multipliers
#: and ``d`` features, ``|F| d²`` when ``|F| > d``: :func:`_face_step`) ...
FACE_MAX_FREE = 400
#: ... after this many passes of a solve, and then every this many passes. With the projected path
#: the steps pay on dense numeric data: FACE_EVERY / FACE_STEPS were chosen for the fit time of
#: yeast and scene among a few pairs (speed only: every fit is certified to the same gap)
FACE_EVERY = 16


def _face_step(X: sp.csr_matrix, y: np.ndarray, alpha: np.ndarray, f: np.ndarray, scale: float,
               dense: np.ndarray | None = None) -> np.ndarray | None:
    """Move a feasible ``α`` towards the minimiser of the sub-problem's dual on its current face
    (the bounded multipliers fixed, the free ones ``F`` and the bias solved from
    ``y_j (⟨x_j, w⟩ + b) = 1`` on ``F`` with ``Σ_F Δα_j y_j = 0``: a system of order ``|F| + 1``),
    as far as the box allows; ``None`` unless that raises the dual.

    DCD finds the face (which multipliers sit at 0 or 1) in few passes but converges slowly on it
    when the free examples' rows are ill-conditioned (C = 1/s large): this is the Newton step of
    an active-set method on that face, after which DCD continues (and corrects the face if it
    was wrong). ``f``: the scores ``⟨x_j, w⟩`` of ``α`` on the rows ``X`` (centred or not)."""
    idx = np.flatnonzero((alpha > 0.0) & (alpha < 1.0))
    nf = idx.size
    d = X.shape[1]
    if nf == 0 or nf * min(nf, d) ** 2 > FACE_MAX_FREE ** 3:
        return None
    XF = X[idx].toarray() if dense is None else dense[idx]
    yF = y[idx]
    delta = np.empty(nf)
    if nf > d:  # X_F X_Fᵀ is singular: the same system through the d x d matrix X_Fᵀ X_F
        solve = face_solve_thin_loop()
    else:
        solve = _face_solve_compiled if _kernels_available() else _face_solve_numpy
    quad = solve(XF, yF - f[idx], float(scale), delta)  # the change of α_j y_j on F; δᵀ K δ / s
    if not quad >= 0.0:  # the system was not positive definite
        return None
    d_alpha = delta * yF
    a = alpha[idx]
    with np.errstate(divide="ignore", invalid="ignore"):
        lim = np.where(d_alpha > 0, (1.0 - a) / d_alpha, np.where(d_alpha < 0, -a / d_alpha, np.inf))
    t = min(1.0, float(lim.min()))
    # the dual's change along the step: t (Σ Δα − ⟨f_F, δ⟩) − t² δᵀ K δ / (2 s)
    gain = t * (float(d_alpha.sum()) - float(np.sum(f[idx] * delta))) - 0.5 * t * t * quad
    if not t > 0.0:
        return None
    out = alpha.copy()
    out[idx] = np.clip(a + t * d_alpha, 0.0, 1.0)
    if t < 1.0 or nf > d:  # past the first bound, projected on the box (a singular system: a ray)
        out, gain = _face_path(XF, yF, f[idx], a, d_alpha, lim, float(scale), alpha, idx, y, out, gain,
                               np.inf if nf > d else 1.0)
    if not gain > 0.0:
        return None
    out = _restore_equality(out, y)
    if abs(float(out @ y)) > 1e-12 * max(y.size, 1):
        return None
    return out


#: :func:`_face_path` tries steps ``t_1 · 2^k`` along the face step's ray, at most this many
FACE_PATH_STEPS = 48


def _face_path(XF: np.ndarray, yF: np.ndarray, fF: np.ndarray, a: np.ndarray, d_alpha: np.ndarray, lim: np.ndarray,
               scale: float, alpha: np.ndarray, idx: np.ndarray, y: np.ndarray, out: np.ndarray,
               gain: float, t_max: float) -> tuple[np.ndarray, float]:
    """The best of the projected steps ``clip(α_F + t Δα_F)`` (equality restored) for ``t`` from the
    first bound on, doubling up to the last, by their exact gain of the dual
    ``Σ Δα_j (1 − y_j f_j) − ‖Σ Δα_j y_j x_j‖² / (2 s)``; ``(out, gain)``: the first bound's step.

    When the face has more free multipliers than features (a rare class whose ``w`` is near 0:
    every example of the other class lies within rounding of the margin), the face system is
    singular and its solution is a ray along which the dual rises linearly until the box stops
    it: the first bound frees one multiplier per step where hundreds must reach a bound
    (gradient projection; the caller checks the equality)."""
    finite = lim[np.isfinite(lim) & (lim > 0)]
    if finite.size == 0:
        return out, gain
    t, t_end = float(finite.min()), min(2.0 * float(finite.max()), t_max)
    offset = float(alpha @ y) - float(a @ yF)  # the multipliers off the face, all at a bound
    best = np.empty(a.size)
    # candidates whose equality is lost (the residue does not fit the free multipliers) are no dual points
    best_gain, found = face_path_loop()(np.ascontiguousarray(XF), yF, fF, a, d_alpha, t, t_end, offset,
                                        float(scale), float(gain), FACE_PATH_STEPS, 1e-12 * max(y.size, 1), best)
    if not found:
        return out, gain
    out = alpha.copy()
    out[idx] = best
    return out, float(best_gain)


def _face_solve_scalar(XF, r, scale, delta):  # type: ignore[no-untyped-def]
    """Solve ``(K/s + ε I) δ + b 1 = r``, ``Σ δ = 0`` (``K = X_F X_Fᵀ``, ``ε = 1e-10 · tr(K/s)/|F|``
    keeps it definite when ``|F| > d + 1``) into ``delta``; returns ``δᵀ K δ / s`` (−1 when the
    Cholesky factorisation fails). Element by element for numba: the same operations in the same
    order on every thread and process (no threaded BLAS), so the driver and Spark fits stay equal
    bit for bit."""
    nf, d = XF.shape
    XT = np.ascontiguousarray(XF.T)
    A = np.zeros((nf, nf))
    tr = 0.0
    for i in range(nf):
        for k in range(d):  # A[i, j] summed over k in order, the j of a row side by side (vectorised)
            xik = XF[i, k]
            for j in range(i + 1):
                A[i, j] += xik * XT[k, j]
        for j in range(i + 1):
            A[i, j] = A[i, j] / scale
            A[j, i] = A[i, j]
        tr += A[i, i]
    eps = 1e-10 * max(tr / nf, 1e-300)
    L = np.zeros((nf, nf))
    if not cholesky_shifted(A, eps, L):
        return -1.0
    p = np.empty(nf)
    q = np.empty(nf)
    for i in range(nf):  # L z = r, L z' = 1
        ap = r[i]
        aq = 1.0
        for k in range(i):
            ap -= L[i, k] * p[k]
            aq -= L[i, k] * q[k]
        p[i] = ap / L[i, i]
        q[i] = aq / L[i, i]
    for i in range(nf - 1, -1, -1):  # Lᵀ p = z, Lᵀ q = z'
        ap = p[i]
        aq = q[i]
        for k in range(i + 1, nf):
            ap -= L[k, i] * p[k]
            aq -= L[k, i] * q[k]
        p[i] = ap / L[i, i]
        q[i] = aq / L[i, i]
    sp_ = 0.0
    sq_ = 0.0
    for i in range(nf):
        sp_ += p[i]
        sq_ += q[i]
    b = sp_ / sq_
    for i in range(nf):
        delta[i] = p[i] - b * q[i]
    quad = 0.0
    for i in range(nf):
        acc = 0.0
        for j in range(nf):
            acc += A[i, j] * delta[j]
        quad += delta[i] * acc
    return quad


def _face_solve_numpy(XF: np.ndarray, r: np.ndarray, scale: float, delta: np.ndarray) -> float:
    """:func:`_face_solve_scalar` with numpy and LAPACK (without numba; the same system)."""
    nf = XF.shape[0]
    A = (XF @ XF.T) / scale
    try:
        L = np.linalg.cholesky(A + 1e-10 * max(float(np.trace(A)) / nf, 1e-300) * np.eye(nf))
    except np.linalg.LinAlgError:
        return -1.0
    pq = np.linalg.solve(L.T, np.linalg.solve(L, np.column_stack([r, np.ones(nf)])))
    delta[:] = pq[:, 0] - (pq[:, 0].sum() / pq[:, 1].sum()) * pq[:, 1]
    return float(delta @ A @ delta)


def _compile_face_solve() -> Any:
    from sparkhc import kernels

    return kernels._njit(_face_solve_scalar) if kernels.HAVE_NUMBA else _face_solve_scalar


_face_solve_compiled = _compile_face_solve()


#: :func:`_centred_rows` centres a pair's rows when the dense centred copy has at most this many
#: entries per stored non-zero of the rows (dense numeric features: yes; sparse text: no)
CENTRE_MAX_FILL = 4.0


def _centred_rows(X: sp.csr_matrix) -> sp.csr_matrix:
    """The rows ``x_j − μ`` (``μ``: their mean) as dense-filled CSR, or ``X`` itself when that
    copy would hold more than :data:`CENTRE_MAX_FILL` entries per non-zero of ``X`` (sparse text).

    The sub-problem does not change: its dual depends on the rows only through
    ``Σ_j α_j y_j x_j``, which is the same for ``x_j − μ`` whenever ``Σ_j α_j y_j = 0`` (the
    equality of the unregularised bias; the bias absorbs ``⟨w, μ⟩``). What changes is the
    conditioning of the coordinate steps: with features that share a large mean (min-max scaled
    numeric data, all in [0, 1]) each step's curvature ``‖x_j‖² / s`` is mostly ``‖μ‖² / s``, a
    direction the equality removes, and DCD crawls (yeast: ``‖x‖² ≈ 25`` against
    ``‖x − μ‖² ≈ 1.6``; > 20,000 passes uncentred against about 1,300 centred at tolerance 1e-2).
    """
    n, d = X.shape
    if n == 0 or n * d > CENTRE_MAX_FILL * max(X.nnz, 1):
        return X
    D = X.toarray()
    D -= D.mean(axis=0)
    C = sp.csr_matrix(D)
    if C.nnz != n * d:  # keep every entry (a centred zero is a real zero only by chance): full rows
        C = sp.csr_matrix((D.ravel(), np.tile(np.arange(d, dtype=np.int32), n),
                           np.arange(0, n * d + 1, d, dtype=np.int32)), shape=(n, d))
    C.sort_indices()
    return C


def _kkt_violation(v: np.ndarray, alpha: np.ndarray, y: np.ndarray) -> float:
    """``max_{I_up} v − min_{I_low} v`` (``v = −y ∘ ∇``; 0 when a set is empty)."""
    pos = y > 0
    up = np.where(pos, alpha < 1.0, alpha > 0.0)
    low = np.where(pos, alpha > 0.0, alpha < 1.0)
    if not up.any() or not low.any():
        return 0.0
    return float(v[up].max() - v[low].min())


def smo(
    K: np.ndarray,
    y: np.ndarray,
    p: np.ndarray,
    scale: float,
    alpha0: np.ndarray | None,
    tol: float,
    max_iter: int,
    rows: np.ndarray | None = None,
    k_alpha: np.ndarray | None = None,
) -> tuple[np.ndarray, int, bool]:
    """Minimise ``½ αᵀ Q α − pᵀ α`` with ``Q = (y yᵀ ∘ K_p) / scale``, ``0 ≤ α ≤ 1``, ``yᵀα = 0``.

    ``K_p`` is ``K`` itself, or with ``rows`` its sub-matrix ``K[rows][:, rows]``, read entry by
    entry (never copied whole). SMO with the second-order working-set selection of Fan, Chen & Lin
    (JMLR 2005). Stops when the maximal KKT violation ``max_{I_up} −y_t ∇_t − min_{I_low} −y_t ∇_t``
    is at most ``tol``. ``alpha0`` must be feasible (it is the warm start); ``k_alpha``, when given,
    is ``K_p (alpha0 ∘ y)`` (cheaper through sparse features than from ``K``). Returns
    ``(alpha, iterations, converged)``. The iterations run in a numba-compiled loop when
    :func:`sparkhc.kernels.available` (``pip install sparkhc[fast]``), else in numpy
    (:func:`_smo_loop_numpy`, the reference; both select the same working sets).
    """
    n = y.shape[0]
    K = np.ascontiguousarray(K, dtype=np.float64)
    idx = np.arange(n, dtype=np.int64) if rows is None else np.ascontiguousarray(rows, dtype=np.int64)
    inv = 1.0 / scale
    kd = K[idx, idx] * inv
    y = np.ascontiguousarray(y, dtype=np.float64)
    alpha = np.zeros(n) if alpha0 is None else np.array(alpha0, dtype=np.float64)
    v = y * np.asarray(p, dtype=np.float64)  # v = −y ∘ ∇f
    if k_alpha is not None:
        v -= inv * np.asarray(k_alpha, dtype=np.float64)
    else:
        nz = np.flatnonzero(alpha)
        if nz.size:
            v -= inv * ((alpha[nz] * y[nz]) @ K[idx[nz]][:, idx])
    pos = y > 0
    up = np.where(pos, alpha < 1.0, alpha > 0.0)
    low = np.where(pos, alpha > 0.0, alpha < 1.0)
    loop = _smo_loop_compiled if _kernels_available() else _smo_loop_numpy
    iterations, converged = loop(K, idx, y, kd, v, alpha, up, low, inv, float(tol), int(max_iter))
    return alpha, int(iterations), bool(converged)


def _smo_loop_numpy(
    K: np.ndarray,
    rows: np.ndarray,
    y: np.ndarray,
    kd: np.ndarray,
    v: np.ndarray,
    alpha: np.ndarray,
    up: np.ndarray,
    low: np.ndarray,
    inv: float,
    tol: float,
    max_iter: int,
) -> tuple[int, bool]:
    """The SMO iterations of :func:`smo` (updates ``v``, ``alpha``, ``up``, ``low`` in place)."""
    n = y.shape[0]
    pos = y > 0
    neg_inf = np.full(n, -np.inf)
    pos_inf = np.full(n, np.inf)
    for it in range(max_iter):
        v_up = np.where(up, v, neg_inf)
        i = int(np.argmax(v_up))
        m_val = v_up[i]
        if not np.isfinite(m_val) or m_val - np.where(low, v, pos_inf).min() <= tol:
            return it, True
        gap = m_val - v
        k_i = K[rows[i]][rows] * inv
        curv = kd[i] + kd - 2.0 * k_i
        np.maximum(curv, _TAU, out=curv)
        gain = np.where(low & (gap > 0.0), gap * gap / curv, -1.0)
        j = int(np.argmax(gain))
        # move along d (d_i = y_i, d_j = −y_j): keeps yᵀα, decreases f at rate gap_j
        t_i = 1.0 - alpha[i] if pos[i] else alpha[i]
        t_j = alpha[j] if pos[j] else 1.0 - alpha[j]
        t = min(gap[j] / curv[j], t_i, t_j)
        # land exactly on a bound when the step is clipped by it
        alpha[i] = (1.0 if pos[i] else 0.0) if t == t_i else min(max(alpha[i] + t * y[i], 0.0), 1.0)
        alpha[j] = (0.0 if pos[j] else 1.0) if t == t_j else min(max(alpha[j] - t * y[j], 0.0), 1.0)
        for k in (i, j):
            up[k] = alpha[k] < 1.0 if pos[k] else alpha[k] > 0.0
            low[k] = alpha[k] > 0.0 if pos[k] else alpha[k] < 1.0
        v -= t * (k_i - K[rows[j]][rows] * inv)
    return max_iter, False


def _smo_loop_scalar(K, rows, y, kd, v, alpha, up, low, inv, tol, max_iter):  # type: ignore[no-untyped-def]
    """:func:`_smo_loop_numpy` written element by element for numba (same selections and updates)."""
    n = y.shape[0]
    for it in range(max_iter):
        i = -1
        m_val = -np.inf
        m_low = np.inf
        for t in range(n):
            if up[t] and v[t] > m_val:
                m_val = v[t]
                i = t
            if low[t] and v[t] < m_low:
                m_low = v[t]
        if i < 0 or m_val - m_low <= tol:
            return it, True
        ri = rows[i]
        j = 0
        best = -np.inf
        for t in range(n):
            g = -1.0
            if low[t] and m_val - v[t] > 0.0:
                c = kd[i] + kd[t] - 2.0 * (K[ri, rows[t]] * inv)
                if c < _TAU:
                    c = _TAU
                g = (m_val - v[t]) * (m_val - v[t]) / c
            if g > best:
                best = g
                j = t
        rj = rows[j]
        c = kd[i] + kd[j] - 2.0 * (K[ri, rj] * inv)
        if c < _TAU:
            c = _TAU
        pos_i = y[i] > 0
        pos_j = y[j] > 0
        t_i = 1.0 - alpha[i] if pos_i else alpha[i]
        t_j = alpha[j] if pos_j else 1.0 - alpha[j]
        step = min((m_val - v[j]) / c, t_i, t_j)
        if step == t_i:
            alpha[i] = 1.0 if pos_i else 0.0
        else:
            alpha[i] = min(max(alpha[i] + step * y[i], 0.0), 1.0)
        if step == t_j:
            alpha[j] = 0.0 if pos_j else 1.0
        else:
            alpha[j] = min(max(alpha[j] - step * y[j], 0.0), 1.0)
        for k in (i, j):
            if y[k] > 0:
                up[k] = alpha[k] < 1.0
                low[k] = alpha[k] > 0.0
            else:
                up[k] = alpha[k] > 0.0
                low[k] = alpha[k] < 1.0
        for t in range(n):
            v[t] -= step * (K[ri, rows[t]] * inv - K[rj, rows[t]] * inv)
    return max_iter, False


def _kernels_available() -> bool:
    from sparkhc import kernels

    return kernels.available()


def _compile_smo_loop() -> Any:
    from sparkhc import kernels

    return kernels._njit(_smo_loop_scalar) if kernels.HAVE_NUMBA else _smo_loop_scalar


_smo_loop_compiled = _compile_smo_loop()


def optimal_bias(f: np.ndarray, y: np.ndarray) -> float:
    """The midpoint of the exact minimiser interval of ``b ↦ Σ_j max(0, 1 − y_j (f_j + b))``.

    Both classes must be present (otherwise the loss has no finite minimiser interval). With the
    breakpoints ``t_j = y_j − f_j`` (the hinge of example j is zero from ``t_j`` on for ``y = +1``,
    up to ``t_j`` for ``y = −1``) the right derivative at ``c`` is ``#{t_j ≤ c} − n₊`` and the left
    one ``#{t_j < c} − n₊`` (``n₊`` positives): the interval runs from the ``n₊``-th smallest
    breakpoint to the next one, found by selection in ``O(n)``.
    """
    t = np.asarray(y, dtype=np.float64) - np.asarray(f, dtype=np.float64)
    k = int(np.count_nonzero(y > 0))
    lo, hi = np.partition(t, (k - 1, k))[[k - 1, k]]
    return float(0.5 * (lo + hi))


def _restore_equality(a: np.ndarray, y: np.ndarray, offset: float = 0.0) -> np.ndarray:
    """Remove the rounding residue of ``Σ_j a_j y_j = 0`` (spread over the free multipliers;
    ``offset``: the sum ``Σ a_j y_j`` of multipliers not passed, all at a bound).

    The steps of the W step keep the equality in exact arithmetic; without this the residue would
    be amplified by long momentum steps and the dual value would overestimate (negative gaps).
    """
    r = float(a @ y) + offset
    free = (a > 0.0) & (a < 1.0)
    if r and free.any():
        a = a.copy()
        a[free] -= y[free] * (r / int(free.sum()))
        np.clip(a, 0.0, 1.0, out=a)
    return a


def hinge_losses(data: PairData, W: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``L_i = Σ_j max(0, 1 − y_ij (⟨w_i, x_ij⟩ + b_i))`` for every active pair."""
    out = np.empty(data.n_pairs)
    for i, (f, y) in enumerate(zip(data.scores(W), data.signs, strict=True)):
        out[i] = np.maximum(0.0, 1.0 - y * (f + b[i])).sum()
    return out


# ---------------------------------------------------------------------------------------------
# Where the sub-problems run: serially here, or on Spark (sparkhc.spark.mdc)
# ---------------------------------------------------------------------------------------------


#: directions of the (Δ, P) plane on which every pair reports how far the momentum step may go
PLANE_RAYS = 64


@dataclass(frozen=True)
class SolveOrder:
    """One sweep's sub-problems (broadcast to every pair): pair ``i`` solves
    ``min_{w,b} L_i + (scales[i]/2) ‖w − centers[:, i]‖²`` from its current multipliers."""

    centers: np.ndarray
    scales: np.ndarray
    tol: float
    max_iter: int
    method: str
    #: report the radii of the feasible region of the momentum plane (0: not needed)
    rays: int = 0


@dataclass(frozen=True)
class ApplyOrder:
    """Move every pair's multipliers to ``α + a Δ + b P`` (``Δ``: the last solve's direction,
    ``P``: the last step taken), then evaluate column ``pair`` of ``W`` on the pair's rows."""

    a: float
    b: float
    W: np.ndarray


@dataclass(frozen=True)
class SolveReport:
    pair: int
    #: ``Σ_j Δ_j y_j x_j`` (d,) and ``Σ_j Δ_j``
    dg: np.ndarray
    delta_sum: float
    iterations: int
    converged: bool
    #: per ray of the momentum plane the largest feasible step (``SolveOrder.rays`` values) or None
    radii: np.ndarray | None


@dataclass(frozen=True)
class ApplyReport:
    pair: int
    #: ``g = Σ_j α_j y_j x_j`` (d,) of the multipliers after the step, ``Σ α`` and ``Σ P``
    g: np.ndarray
    alpha_sum: float
    step_sum: float
    #: the optimal bias of the evaluated column and its hinge loss
    bias: float
    hinge: float


@dataclass(eq=False)
class PairBlock:
    """One active pair's rows and dual variables: what a pair's tasks keep between sweeps.

    ``data`` holds only this pair's rows (a one-pair :class:`PairData`); ``alpha`` the multipliers,
    ``delta`` the direction of the last solve, ``last`` the last step taken (the momentum
    direction). :meth:`run` executes a :class:`SolveOrder` or an :class:`ApplyOrder` on them and
    returns a ``d``-sized report: nothing of the rows leaves the block.
    """

    pair: int
    data: PairData
    alpha: np.ndarray
    delta: np.ndarray
    last: np.ndarray

    @classmethod
    def build(cls, pair: int, X: Matrix, y: np.ndarray, rows: np.ndarray | None = None) -> PairBlock:
        """The block of ``pair`` on the rows ``rows`` of ``X`` (default: all of them). Blocks given
        the same ``X`` share it (pickled once with them)."""
        r = np.arange(X.shape[0]) if rows is None else rows
        n = int(np.asarray(r).size)
        return cls(pair, PairData.build(X, [r], [y]), np.zeros(n), np.zeros(n), np.zeros(n))

    @property
    def n_rows(self) -> int:
        return int(self.alpha.size)

    def run(self, order: SolveOrder | ApplyOrder) -> SolveReport | ApplyReport:
        return self.solve(order) if isinstance(order, SolveOrder) else self.apply(order)

    def _through(self, a: np.ndarray) -> np.ndarray:
        return self.data.combine([a])[:, 0]

    def solve(self, order: SolveOrder) -> SolveReport:
        i = self.pair
        task = PairTask(0, order.centers[:, i], float(order.scales[i]), self.alpha, order.tol, order.max_iter,
                        order.method)
        r = solve_pair_task(self.data, task)
        self.delta = r.alpha - self.alpha
        radii = _plane_radii(self.alpha, self.delta, self.last, order.rays) if order.rays else None
        return SolveReport(i, self._through(self.delta), float(self.delta.sum()), r.iterations, r.converged, radii)

    def apply(self, order: ApplyOrder) -> ApplyReport:
        if order.a or order.b:
            x = self.alpha + order.a * self.delta
            if order.b:
                x = x + order.b * self.last
            new = _restore_equality(np.clip(x, 0.0, 1.0), self.data.signs[0])
            self.last = new - self.alpha
            self.alpha = new
        else:
            self.last = np.zeros_like(self.alpha)
        y = self.data.signs[0]
        f = self.data.scores(order.W[:, [self.pair]])[0]
        b = optimal_bias(f, y)
        hinge = float(np.maximum(0.0, 1.0 - y * (f + b)).sum())
        return ApplyReport(self.pair, self._through(self.alpha), float(self.alpha.sum()), float(self.last.sum()),
                           b, hinge)


def pair_blocks(data: PairData) -> list[PairBlock]:
    """One :class:`PairBlock` per pair of ``data`` (its rows copied out of ``data.X``)."""
    return [PairBlock.build(i, data.X[r], y) for i, (r, y) in enumerate(zip(data.rows, data.signs, strict=True))]


def _ray_directions(k: int) -> tuple[np.ndarray, np.ndarray]:
    theta = 2.0 * np.pi * np.arange(k) / k
    return np.cos(theta), np.sin(theta)


def _plane_radii(alpha: np.ndarray, delta: np.ndarray, last: np.ndarray, k: int) -> np.ndarray:
    """For ``k`` rays ``(cos θ, sin θ)`` of the ``(a, b)`` plane the largest ``r`` with
    ``0 ≤ α + r (cos θ Δ + sin θ P) ≤ 1`` (``inf`` when unbounded)."""
    u, v = _ray_directions(k)
    out = np.full(k, np.inf)
    moving = (delta != 0.0) | (last != 0.0)
    a, dl, ls = alpha[moving], delta[moving], last[moving]
    for s in range(0, k, 8):  # a few rays at a time: n x 8 temporaries
        D = np.outer(dl, u[s:s + 8]) + np.outer(ls, v[s:s + 8])
        with np.errstate(divide="ignore", invalid="ignore"):
            lim = np.where(D > 0, (1.0 - a)[:, None] / D, np.where(D < 0, -a[:, None] / D, np.inf))
        if lim.size:
            out[s:s + 8] = np.maximum(lim.min(axis=0), 0.0)
    return out


def _in_plane_region(radii: np.ndarray, a: float, b: float) -> bool:
    """Whether ``(a, b)`` lies in the polygon spanned by the origin and the ray points
    ``radii[k] (cos θ_k, sin θ_k)`` (inside every pair's feasible region, which is convex and
    contains them: a conservative test)."""
    k = radii.size
    if a == 0.0 and b == 0.0:
        return True
    th = float(np.arctan2(b, a)) % (2.0 * np.pi)
    lo = int(th // (2.0 * np.pi / k)) % k
    hi = (lo + 1) % k
    u, v = _ray_directions(k)
    r0, r1 = min(float(radii[lo]), 1e12), min(float(radii[hi]), 1e12)
    p0x, p0y, p1x, p1y = r0 * u[lo], r0 * v[lo], r1 * u[hi], r1 * v[hi]
    det = p0x * p1y - p0y * p1x  # > 0 unless a radius is 0 (then only the origin is certain)
    if det <= 0.0:
        return False
    s = (a * p1y - b * p1x) / det  # (a, b) = s p0 + t p1
    t = (p0x * b - p0y * a) / det
    return bool(s >= 0.0 and t >= 0.0 and s + t <= 1.0)


class PairSolver(Protocol):
    """Keeps the :class:`PairBlock` of every active pair and runs orders on all of them; must
    return the reports in pair order."""

    def open(self, blocks: Sequence[PairBlock]) -> None: ...

    def run(self, order: SolveOrder | ApplyOrder) -> list[Any]: ...

    def alphas(self) -> list[np.ndarray]: ...

    def close(self) -> None: ...


class SerialPairSolver:
    """The reference: the blocks in this process, the pairs one after another."""

    def __init__(self) -> None:
        self._blocks: list[PairBlock] | None = None

    def open(self, blocks: Sequence[PairBlock]) -> None:
        self._blocks = list(blocks)

    def _open(self) -> list[PairBlock]:
        if self._blocks is None:
            raise RuntimeError("SerialPairSolver used before open")
        return self._blocks

    def run(self, order: SolveOrder | ApplyOrder) -> list[Any]:
        return [b.run(order) for b in self._open()]

    def alphas(self) -> list[np.ndarray]:
        return [b.alpha for b in self._open()]

    def close(self) -> None:
        self._blocks = None


class ThreadPairSolver:
    """The blocks in this process, the pairs of a round run in ``threads`` threads.

    Every block runs the same code on its own arrays whichever thread runs it (the compiled DCD
    and SMO kernels release the GIL, as do scipy's sparse products), and the reports come back in
    pair order, so the fit is bit for bit :class:`SerialPairSolver`'s on the same blocks (and the
    Spark pair solver's on the blocks it builds: ``sparkhc.spark.mdc.fit_mdc_driver``). The blocks
    are handed to the threads largest first (no thread waits on a long pair started last)."""

    def __init__(self, threads: int = 1) -> None:
        self.threads = max(1, int(threads))
        self._blocks: list[PairBlock] | None = None
        self._order: list[int] = []
        self._pool: ThreadPoolExecutor | None = None
        #: rounds run by :meth:`run` since :meth:`open` (two per W-step sweep)
        self.rounds = 0

    def open(self, blocks: Sequence[PairBlock]) -> None:
        self.close()
        self._blocks = sorted(blocks, key=lambda b: b.pair)
        self._order = sorted(range(len(self._blocks)), key=lambda k: (-self._blocks[k].n_rows, k))  # type: ignore[index]
        self.rounds = 0
        if self.threads > 1 and len(self._blocks) > 1:
            self._pool = ThreadPoolExecutor(max_workers=min(self.threads, len(self._blocks)),
                                            thread_name_prefix="sparkhc-pairs")

    def _open(self) -> list[PairBlock]:
        if self._blocks is None:
            raise RuntimeError("ThreadPairSolver used before open")
        return self._blocks

    def run(self, order: SolveOrder | ApplyOrder) -> list[Any]:
        blocks = self._open()
        self.rounds += 1
        if self._pool is None:
            return [b.run(order) for b in blocks]
        futures = {k: self._pool.submit(blocks[k].run, order) for k in self._order}
        return [futures[k].result() for k in range(len(blocks))]

    def alphas(self) -> list[np.ndarray]:
        return [b.alpha for b in self._open()]

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        self._blocks = None


def balanced_groups(sizes: Sequence[int], n_groups: int) -> list[list[int]]:
    """The pairs (by index) in ``n_groups`` groups of about equal rows (largest first onto the
    lightest group), heaviest group first, the pairs of a group in index order."""
    n_groups = max(1, min(int(n_groups), len(sizes)))
    load = [0] * n_groups
    groups: list[list[int]] = [[] for _ in range(n_groups)]
    for i in sorted(range(len(sizes)), key=lambda k: (-sizes[k], k)):
        g = min(range(n_groups), key=lambda k: (load[k], k))
        groups[g].append(i)
        load[g] += int(sizes[i])
    order = sorted(range(n_groups), key=lambda k: (-load[k], k))
    return [sorted(groups[k]) for k in order if groups[k]]


def group_blocks(ids: np.ndarray, X: sp.csr_matrix, Y: np.ndarray, members: Sequence[int],
                 active: Sequence[tuple[int, int, int]], share: bool) -> list[PairBlock]:
    """The blocks of the active pairs ``members`` (indices into ``active``: ``(space, a, b)``) from
    the rows of a group (``ids``, CSR ``X``, class indices ``Y``; any order: sorted here by ``ids``,
    so the blocks do not depend on where the rows came from).

    ``share`` (the DCD sub-problems): the blocks index one float64 copy of the group's rows, so a
    row is stored (and, on Spark, moved at every round) once per group instead of once per pair
    (a row is in ``K_j − 1`` pairs of every space ``j``: 15 on bench_mdc's data); the products of
    a block with its rows are the same numbers. Else (SMO, which builds a Gram matrix per block)
    every block has a copy of its own rows."""
    order = np.argsort(ids, kind="stable")
    X = sp.csr_matrix(X)[order]
    Y = np.asarray(Y)[order]
    X.sort_indices()
    shared = sp.csr_matrix(X, dtype=np.float64) if share else None
    if shared is not None:
        shared.sort_indices()
    blocks: list[PairBlock] = []
    for i in members:
        j, a, b = active[i]
        r = np.flatnonzero((Y[:, j] == a) | (Y[:, j] == b))
        y = np.where(Y[r, j] == a, 1.0, -1.0)
        blocks.append(PairBlock.build(i, shared, y, r) if shared is not None else PairBlock.build(i, X[r], y))
    return blocks


# ---------------------------------------------------------------------------------------------
# The C step and the objective
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PairCovariance:
    """``C = U diag(c) Uᵀ`` kept as eigenpairs, so that ``C⁻¹`` and ``(λ1 I + λ2 C⁻¹)⁻¹`` are
    formed stably even when some ``c_k`` are tiny."""

    U: np.ndarray
    c: np.ndarray

    @classmethod
    def identity(cls, m: int) -> PairCovariance:
        """The paper's initial ``C = I/m``."""
        return cls(np.eye(m), np.full(m, 1.0 / max(m, 1)))

    @classmethod
    def from_matrix(cls, C: np.ndarray) -> PairCovariance:
        c, U = np.linalg.eigh(0.5 * (C + C.T))
        if c.size and c.min() <= 0:
            raise InputDataError(f"C must be positive definite; smallest eigenvalue {c.min():.3g}")
        return cls(U, c)

    def matrix(self) -> np.ndarray:
        C = (self.U * self.c) @ self.U.T
        return 0.5 * (C + C.T)

    def inverse(self) -> np.ndarray:
        P = (self.U / self.c) @ self.U.T
        return 0.5 * (P + P.T)

    def coupling(self, W: np.ndarray) -> float:
        """``tr(W C⁻¹ Wᵀ)``."""
        return float(np.sum((W @ self.U) ** 2 / self.c))

    def trace_inverse(self) -> float:
        return float(np.sum(1.0 / self.c))

    def is_diagonal(self) -> bool:
        return bool(np.array_equal(self.U, np.eye(self.U.shape[0])))


def c_step(W: np.ndarray, eps: float = 0.0) -> PairCovariance:
    """Eq. (12): ``C = A^{1/2} / tr(A^{1/2})`` with ``A = WᵀW + eps I``, as eigenpairs.

    This is the exact minimiser of ``tr((WᵀW + eps I) C⁻¹)`` over ``C ≻ 0, tr(C) ≤ 1``. If
    ``A`` is zero (``W = 0`` and ``eps = 0``) the result is ``I/m``.
    """
    m = W.shape[1]
    A = W.T @ W + eps * np.eye(m)
    lam, U = np.linalg.eigh(0.5 * (A + A.T))
    root = np.sqrt(np.clip(lam, 0.0, None))
    total = float(root.sum())
    if total <= 0.0:
        return PairCovariance.identity(m)
    return PairCovariance(U, root / total)


def update_c(W: np.ndarray, eps: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """The C step (Eq. 12) as matrices: ``(C, C⁻¹)``; ``C⁻¹`` is finite when ``WᵀW + eps I ≻ 0``."""
    cov = c_step(W, eps)
    with np.errstate(divide="ignore"):
        return cov.matrix(), cov.inverse()


def _objective(
    data: PairData,
    W: np.ndarray,
    b: np.ndarray,
    cov: PairCovariance,
    lambda1: float,
    lambda2: float,
    eps: float,
) -> float:
    return _regularised(float(hinge_losses(data, W, b).sum()), W, cov, lambda1, lambda2, eps)


def _regularised(
    hinge: float, W: np.ndarray, cov: PairCovariance, lambda1: float, lambda2: float, eps: float
) -> float:
    """The objective from the hinge loss ``Σ ξ`` of ``(W, b)`` (computed where the rows are)."""
    reg1 = 0.5 * lambda1 * float(np.sum(W * W))
    reg2 = 0.5 * lambda2 * (cov.coupling(W) + eps * cov.trace_inverse()) if lambda2 else 0.0
    return hinge + reg1 + reg2


def objective(
    data: PairData,
    W: np.ndarray,
    b: np.ndarray,
    C: np.ndarray,
    lambda1: float,
    lambda2: float,
    eps: float = 0.0,
) -> float:
    """``Σ ξ + (λ1/2) tr(WWᵀ) + (λ2/2) [tr(W C⁻¹ Wᵀ) + eps tr(C⁻¹)]`` over the active pairs."""
    return _objective(data, W, b, PairCovariance.from_matrix(C), lambda1, lambda2, eps)


def mdc_metrics(gold: np.ndarray, pred: np.ndarray) -> dict[str, float]:
    """Hamming Score, Exact Match and Sub-Exact Match (Jia & Zhang 2020, Experiments).

    ``gold`` and ``pred`` are ``(n, q)`` arrays of class indices. With ``r_i`` the number of class
    spaces predicted correctly for example ``i``: Hamming Score ``= mean(r_i / q)``, Exact Match
    ``= mean(r_i == q)``, Sub-Exact Match ``= mean(r_i ≥ q − 1)``.
    """
    gold = np.asarray(gold)
    pred = np.asarray(pred)
    if gold.shape != pred.shape or gold.ndim != 2 or gold.shape[0] == 0:
        raise InputDataError(
            f"gold and pred must be equal non-empty (n, q) arrays; got {gold.shape} and {pred.shape}"
        )
    from sparkhc.metrics import MDCCounts  # the one metrics module

    counts = MDCCounts(gold.shape[1])
    counts.add(gold, pred)
    m = counts.compute()
    return {k: float(m[k]) for k in ("hamming_score", "exact_match", "sub_exact_match")}


# ---------------------------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------------------------


def _check_positive(
    owner: str, name: str, value: Any, allow_zero: bool = False, integer: bool = False
) -> None:
    ok_type = isinstance(value, int | np.integer) if integer else isinstance(value, int | float | np.number)
    ok = (
        ok_type
        and not isinstance(value, bool)
        and np.isfinite(value)
        and (value >= 0 if allow_zero else value > 0)
    )
    if not ok:
        kind = "an integer" if integer else "a float"
        bound = ">= 0" if allow_zero else "> 0"
        raise ConfigError(f"The {name!r} parameter of {owner} must be {kind} {bound}. Got {value!r} instead.")


class M3MDCConvergenceWarning(RuntimeWarning):
    """A fit of M3MDC or its BR baseline reached a cap (``dcd_max_passes``, ``smo_max_iter`` or
    ``max_inner_iter``); the message names it and the certified duality gap reached."""


W_SOLVERS = ("auto", "dcd", "smo")
#: ``gap_schedule``: "auto" (adaptive with DCD, fixed with SMO), "adaptive", "fixed" (module docstring)
GAP_SCHEDULES = ("auto", "adaptive", "fixed")
#: the adaptive schedule's next W-step gap target: this fraction of the last alternation's relative decrease
GAP_PROGRESS = 0.1
#: with the adaptive schedule, a W step's first DCD sub-problem tolerance: this multiple of its gap target
DCD_FIRST_TOL = 10.0
#: with DCD, a W-step sweep's sub-problem tolerance: this multiple of the W step's relative gap
DCD_TIGHTEN = 1.0
#: ``w_solver="auto"`` takes SMO up to this many training rows, DCD above (module docstring)
SMO_MAX_ROWS = 2000


def resolve_w_solver(w_solver: str, n_rows: int) -> str:
    """The sub-problem solver that ``w_solver`` means for a fit on ``n_rows`` training rows."""
    if w_solver != "auto":
        return w_solver
    return "smo" if n_rows <= SMO_MAX_ROWS else "dcd"


def _check_w_solver(owner: str, w_solver: Any, dcd_max_passes: Any) -> None:
    if w_solver not in W_SOLVERS:
        raise ConfigError(f"The 'w_solver' parameter of {owner} must be one of {list(W_SOLVERS)}. Got {w_solver!r} instead.")
    _check_positive(owner, "dcd_max_passes", dcd_max_passes, integer=True)


def _as_features(X: Any) -> Matrix:
    if sp.issparse(X):
        return sp.csr_matrix(X, dtype=np.float64)
    A = np.ascontiguousarray(X, dtype=np.float64)
    if A.ndim != 2:
        raise InputDataError(f"X must be a 2-D array; got shape {A.shape}")
    if not np.all(np.isfinite(A)):
        raise InputDataError("X contains NaN or infinite values")
    return A


def ovo_pairs(n_classes: Sequence[int] | np.ndarray) -> np.ndarray:
    """The one-vs-one pairs ``(space, a, b)``, ``a < b``, space by space (the paper's order)."""
    out = [
        (j, a, b) for j, k in enumerate(int(v) for v in n_classes) for a in range(k) for b in range(a + 1, k)
    ]
    return np.array(out, dtype=np.int64).reshape(-1, 3)


class _OvOModel:
    """Shared one-vs-one bookkeeping, voting, and state of M3MDC and BR."""

    _state_keys: tuple[str, ...] = ("W", "b", "pairs", "n_classes", "active")

    W_: np.ndarray
    b_: np.ndarray
    pairs_: np.ndarray
    n_classes_: np.ndarray
    active_: np.ndarray
    #: the dual variables per active pair (None after :meth:`fit_open`: they stay with the rows)
    alpha_: list[np.ndarray] | None

    def _prepare(
        self, X: Any, Y: Any, n_classes: Sequence[int] | None
    ) -> tuple[Matrix, PairData, np.ndarray]:
        X = _as_features(X)
        Y = np.asarray(Y)
        if Y.ndim != 2 or Y.shape[0] != X.shape[0]:
            raise InputDataError(f"Y must be an (n, q) array with n = {X.shape[0]} rows; got shape {Y.shape}")
        if Y.shape[0] == 0 or Y.shape[1] == 0:
            raise InputDataError("Y is empty")
        if not np.issubdtype(Y.dtype, np.integer):
            raise InputDataError(f"Y must hold integer class indices; got dtype {Y.dtype}")
        if n_classes is None:
            n_classes = [int(Y[:, j].max()) + 1 for j in range(Y.shape[1])]
        n_classes = [int(k) for k in n_classes]
        if len(n_classes) != Y.shape[1]:
            raise InputDataError(f"n_classes has {len(n_classes)} entries for {Y.shape[1]} class spaces")
        for j, k in enumerate(n_classes):
            bad = (Y[:, j] < 0) | (Y[:, j] >= k)
            if bad.any():
                raise InputDataError(
                    f"class space {j}: {int(bad.sum())} targets outside 0..{k - 1} (first at row {int(np.argmax(bad))})"
                )
        counts = [np.bincount(Y[:, j], minlength=k) for j, k in enumerate(n_classes)]
        active_pairs = self._begin(n_classes, counts, X.shape[1])
        rows: list[np.ndarray] = []
        signs: list[np.ndarray] = []
        for j, a, b in active_pairs:
            r = np.flatnonzero((Y[:, j] == a) | (Y[:, j] == b))
            rows.append(r)
            signs.append(np.where(Y[r, j] == a, 1.0, -1.0))
        return X, PairData.build(X, rows, signs), self._fit_layout[2]

    def _begin(self, n_classes: Sequence[int], counts: Sequence[np.ndarray], d: int) -> list[tuple[int, int, int]]:
        """The one-vs-one layout from the class counts of every space: sets the layout of the fit
        and returns the active pairs ``(space, a, b)`` (both classes seen) in order."""
        n_classes = [int(k) for k in n_classes]
        pairs = ovo_pairs(n_classes)
        m = pairs.shape[0]
        b_const = np.zeros(m)
        active = np.zeros(m, dtype=bool)
        for i, (j, a, b) in enumerate(pairs):
            has_a = bool(counts[j][a] > 0)
            has_b = bool(counts[j][b] > 0)
            if has_a and has_b:
                active[i] = True
            else:
                b_const[i] = 1.0 if has_a else (-1.0 if has_b else 0.0)
        if not active.any():
            logger.warning("no class space has two classes in the training data: every pair is constant")
        self._fit_layout = (pairs, np.array(n_classes, dtype=np.int64), active, b_const, int(d))
        self._fit_rows = int(counts[0].sum()) if len(counts) else 0
        return [(int(j), int(a), int(b)) for j, a, b in pairs[active]]

    def _solver(self) -> PairSolver:
        solver: PairSolver | None = getattr(self, "solver", None)
        return solver if solver is not None else SerialPairSolver()

    def fit(self, X: Any, Y: Any, n_classes: Sequence[int] | None = None) -> Any:
        """Fit on in-memory ``X`` (n × d, dense or CSR) and ``Y`` (n × q class indices)."""
        self._check_params()
        X, data, _ = self._prepare(X, Y, n_classes)
        solver = self._solver()
        solver.open(pair_blocks(data))
        try:
            self._fit_open(solver)
            self.alpha_ = solver.alphas()
        finally:
            solver.close()
        return self

    def fit_open(self, solver: PairSolver, n_classes: Sequence[int], counts: Sequence[np.ndarray], d: int,
                 open_blocks: Any) -> Any:
        """Fit where the rows never come here: ``counts`` are the class counts of every space,
        ``open_blocks(active_pairs)`` opens ``solver`` on the blocks of the active pairs
        ``(space, a, b)`` (in that order, built where the rows are; :mod:`sparkhc.spark.mdc`)."""
        self._check_params()
        active = self._begin(n_classes, counts, d)
        open_blocks(active)
        try:
            self._fit_open(solver)
        finally:
            solver.close()
        self.alpha_ = None  # the multipliers stay where the rows are
        return self

    def _check_params(self) -> None:
        raise NotImplementedError

    def _caps_report(self, solves: int, capped: int, sweep_capped: int, rel_gap: float) -> None:
        """Record how many pair sub-problems the fit solved and how many stopped at their cap
        (``sub_problems_``, ``capped_sub_problems_``, ``sweep_capped_``: W steps stopped at
        ``max_inner_iter``) and warn (:class:`M3MDCConvergenceWarning`, naming the setting to raise)
        when any cap was reached: the fit's last W step is still certified by its duality gap
        (``rel_gap``, relative; in ``history_``), but it took longer than it should."""
        self.sub_problems_, self.capped_sub_problems_, self.sweep_capped_ = int(solves), int(capped), int(sweep_capped)
        if not capped and not sweep_capped:
            return
        method = getattr(self, "w_solver_", "?")
        cap_name = "dcd_max_passes" if method == "dcd" else "smo_max_iter"
        parts = []
        if capped:
            parts.append(f"{capped} of {solves} pair sub-problems stopped at {cap_name}="
                         f"{getattr(self, cap_name)} (raise {cap_name})")
        if sweep_capped:
            parts.append(f"{sweep_capped} W step(s) stopped at max_inner_iter={getattr(self, 'max_inner_iter', '?')} "
                         "sweeps (raise max_inner_iter)")
        gap = "" if not np.isfinite(rel_gap) else f"; the last W step's certified relative duality gap is {rel_gap:.2e}"
        warnings.warn(f"{type(self).__name__}: " + "; ".join(parts) + gap, M3MDCConvergenceWarning, stacklevel=3)

    def _fit_open(self, solver: PairSolver) -> None:
        raise NotImplementedError

    def _store_pairs(self, W: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Set the fitted one-vs-one attributes from the active pairs' ``W, b``; returns their index."""
        pairs, n_classes, active, b_const, d = self._fit_layout
        del self._fit_layout
        idx = np.flatnonzero(active)
        self.pairs_, self.n_classes_, self.active_ = pairs, n_classes, active
        self.W_ = np.zeros((d, pairs.shape[0]))
        self.b_ = b_const.copy()
        self.W_[:, idx] = W
        self.b_[idx] = b
        return idx

    def _check_fitted(self) -> None:
        if not hasattr(self, "W_"):
            raise NotFittedError(f"this {type(self).__name__} is not fitted yet; call fit first")

    def decision_function(self, X: Any) -> np.ndarray:
        """``X W + b``: one column per pair (constant for degenerate pairs)."""
        self._check_fitted()
        X = _as_features(X)
        if X.shape[1] != self.W_.shape[0]:
            raise InputDataError(f"X has {X.shape[1]} features; the model was fitted with {self.W_.shape[0]}")
        return np.asarray(X @ self.W_) + self.b_

    def votes(self, X: Any) -> list[np.ndarray]:
        """One-vs-one votes: per class space an ``(n, K_j)`` count array (a pair at exactly 0 abstains)."""
        scores = self.decision_function(X)
        n = scores.shape[0]
        out = []
        for j, k in enumerate(self.n_classes_):
            votes = np.zeros((n, int(k)), dtype=np.int64)
            for i in np.flatnonzero(self.pairs_[:, 0] == j):
                _, a, b = self.pairs_[i]
                votes[:, a] += scores[:, i] > 0
                votes[:, b] += scores[:, i] < 0
            out.append(votes)
        return out

    def predict(self, X: Any) -> np.ndarray:
        """One-vs-one voting per class space; ties go to the lowest class index."""
        votes = self.votes(X)
        n = votes[0].shape[0] if votes else 0
        out = np.empty((n, len(votes)), dtype=np.int64)
        for j, v in enumerate(votes):
            out[:, j] = np.argmax(v, axis=1)
        return out

    def get_state(self) -> dict[str, np.ndarray]:
        """Named numpy arrays (``np.savez``-able, no pickle) that :meth:`set_state` restores."""
        self._check_fitted()
        return {k: np.array(getattr(self, f"{k}_")) for k in self._state_keys}

    def set_state(self, state: dict[str, np.ndarray]) -> None:
        missing = [k for k in self._state_keys if k not in state]
        if missing:
            raise ModelError(f"{type(self).__name__} state lacks {missing}")
        W = np.asarray(state["W"], dtype=np.float64)
        pairs = np.asarray(state["pairs"], dtype=np.int64)
        n_classes = np.asarray(state["n_classes"], dtype=np.int64)
        m = pairs.shape[0]
        if W.ndim != 2 or W.shape[1] != m or np.asarray(state["b"]).shape != (m,):
            raise ModelError(f"state W {W.shape} / b {np.asarray(state['b']).shape} do not match {m} pairs")
        if not np.array_equal(pairs, ovo_pairs(n_classes)):
            raise ModelError("state pairs do not match n_classes")
        if "C" in self._state_keys and np.asarray(state["C"]).shape != (m, m):
            raise ModelError(f"state C {np.asarray(state['C']).shape} does not match {m} pairs")
        for k in self._state_keys:
            setattr(self, f"{k}_", np.array(state[k]))
        self.W_, self.pairs_, self.n_classes_ = W, pairs, n_classes
        self.b_ = np.asarray(state["b"], dtype=np.float64)
        self.active_ = np.asarray(state["active"], dtype=bool)


class BinaryRelevanceSVM(_OvOModel):
    """The BR baseline: an independent one-vs-one linear SVM per class space (λ2 = 0).

    Each pair solves ``min Σ ξ + (λ1/2) ‖w‖²`` (unregularised bias) with the same sub-problem solver
    as M3MDC; equivalent to LIBSVM's linear ``C``-SVC with ``C = 1/λ1`` per pair.

    Parameters
    ----------
    lambda1 : float, default 0.1
    smo_tol, smo_max_iter : KKT tolerance and iteration cap of the per-pair SMO (``w_solver="smo"``:
        one solve at ``smo_tol``); with ``"dcd"`` ``smo_tol`` is the floor of the tolerance.
    solver : PairSolver, optional
        Where the pairwise problems run (serial by default; see ``sparkhc.spark.mdc``).
    w_solver, dcd_max_passes : as for :class:`M3MDC` (default ``"dcd"``: the W step of M3MDC with
        λ2 = 0, sweeps of warm-started DCD solves until the relative duality gap is below
        ``gap_tol``, default 1e-6).
    """

    def __init__(
        self,
        lambda1: float = 0.1,
        smo_tol: float = 1e-10,
        smo_max_iter: int = 200_000,
        solver: PairSolver | None = None,
        w_solver: str = "auto",
        dcd_max_passes: int = 20_000,
        gap_tol: float = 1e-6,
    ) -> None:
        self.lambda1 = lambda1
        self.gap_tol = gap_tol
        self.smo_tol = smo_tol
        self.smo_max_iter = smo_max_iter
        self.solver = solver
        self.w_solver = w_solver
        self.dcd_max_passes = dcd_max_passes

    def _check_params(self) -> None:
        owner = type(self).__name__
        _check_positive(owner, "lambda1", self.lambda1)
        _check_positive(owner, "smo_tol", self.smo_tol)
        _check_positive(owner, "smo_max_iter", self.smo_max_iter, integer=True)
        _check_w_solver(owner, self.w_solver, self.dcd_max_passes)
        _check_positive(owner, "gap_tol", self.gap_tol, allow_zero=True)

    def _fit_open(self, solver: PairSolver) -> None:
        """M3MDC's W step with λ2 = 0 (independent pairs, ``M = I/λ1``): SMO solves each pair once
        at ``smo_tol``; DCD's sweeps tighten the sub-problems until the duality gap is below
        ``gap_tol`` (relative)."""
        _, _, active, _, d = self._fit_layout
        ma = int(active.sum())
        w_step = M3MDC(lambda1=self.lambda1, lambda2=0.0, gap_tol=self.gap_tol, smo_tol=self.smo_tol,
                       smo_max_iter=self.smo_max_iter, w_solver=self.w_solver, dcd_max_passes=self.dcd_max_passes)
        W, b, _, _, sweeps, its, gap, _ = w_step._w_step(solver, np.zeros((d, ma)), PairCovariance.identity(ma),
                                                      self._fit_rows)
        self._store_pairs(W, b)
        self.smo_iterations_ = int(its)
        self.sweeps_ = int(sweeps)
        self.duality_gap_ = float(gap)
        self.w_solver_ = resolve_w_solver(self.w_solver, self._fit_rows)
        self._caps_report(w_step._w_solves, w_step._w_capped, int(w_step._w_sweep_capped), float("nan"))


class M3MDC(_OvOModel):
    """Maximum margin multi-dimensional classification (Jia & Zhang, AAAI 2020, Table 1).

    Parameters
    ----------
    lambda1, lambda2 : float, default 0.1 and 0.001
        Weights of ``(1/2) tr(W Wᵀ)`` and ``(1/2) tr(W C⁻¹ Wᵀ)`` (the paper's defaults).
    tol : float, default 1e-4
        Stop the alternation when ``‖W_t − W_{t−1}‖_F / ‖W_t‖_F < tol``.
    max_iter : int, default 20
        Maximal number of alternations (W step + C step).
    gap_tol, max_inner_iter : stop the W step's parallel sweeps when the duality gap of the W-step
        QP is below ``gap_tol · max(1, |primal|)`` (default 1e-6; at most 1000 sweeps).
    smo_tol, smo_max_iter : the smallest KKT tolerance of the per-pair sub-problems (both
        solvers) and SMO's iteration cap.
    w_solver : ``"auto"`` (default: ``"smo"`` up to ``SMO_MAX_ROWS`` training rows, else ``"dcd"``),
        ``"dcd"`` (no Gram matrix) or ``"smo"`` (each pair's ``n_i × n_i`` Gram matrix).
    dcd_max_passes : cap on the passes of one DCD sub-problem solve.
    gap_schedule, early_gap_tol : how tightly the W steps before the last are solved: ``"auto"``
        (default: ``"adaptive"`` with DCD, ``"fixed"`` with SMO), ``"adaptive"`` (the first W step
        to the relative gap ``early_gap_tol``, default 1e-3, then following the alternation's
        progress; the last W step is always certified to ``gap_tol``) or ``"fixed"`` (every W step
        to ``gap_tol``); module docstring.
    ridge : float, default 1e-8
        Relative ridge ``ε = ridge · tr(W₁ᵀW₁)/m`` of the C step (module docstring).
    solver : PairSolver, optional
        Where the pairwise sub-problems run (serial by default; ``SparkPairSolver`` on Spark).

    Attributes
    ----------
    W_ (d × m), b_ (m,), C_ (m × m; zero rows/columns for degenerate pairs), pairs_ (m × 3:
    space, a, b), n_classes_, active_, alpha_ (dual variables per active pair), history_ (one
    dict per alternation: objective after the W and after the C step, ‖ΔW‖_F, sweeps, duality
    gap of the W step and the relative gap it was asked for, whether it found the incumbent
    stationary), n_iter_, converged_, eps_ (the ridge ε actually used), sweeps_ (W-step sweeps of
    the fit), sub_problems_, capped_sub_problems_, sweep_capped_ (module docstring).

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 1.0]])
    >>> Y = np.array([[0, 0], [0, 1], [1, 0], [1, 1]])
    >>> M3MDC().fit(X, Y).predict(X).tolist()
    [[0, 0], [0, 1], [1, 0], [1, 1]]
    """

    _state_keys = ("W", "b", "C", "pairs", "n_classes", "active")

    C_: np.ndarray

    def __init__(
        self,
        lambda1: float = 0.1,
        lambda2: float = 0.001,
        tol: float = 1e-4,
        max_iter: int = 20,
        gap_tol: float = 1e-6,
        max_inner_iter: int = 1000,
        smo_tol: float = 1e-10,
        smo_max_iter: int = 200_000,
        ridge: float = 1e-8,
        solver: PairSolver | None = None,
        w_solver: str = "auto",
        dcd_max_passes: int = 20_000,
        gap_schedule: str = "auto",
        early_gap_tol: float = 1e-3,
    ) -> None:
        self.lambda1 = lambda1
        self.lambda2 = lambda2
        self.tol = tol
        self.max_iter = max_iter
        self.gap_tol = gap_tol
        self.max_inner_iter = max_inner_iter
        self.smo_tol = smo_tol
        self.smo_max_iter = smo_max_iter
        self.ridge = ridge
        self.solver = solver
        self.w_solver = w_solver
        self.dcd_max_passes = dcd_max_passes
        self.gap_schedule = gap_schedule
        self.early_gap_tol = early_gap_tol

    # -- parameters ---------------------------------------------------------------------------

    def _validate(self) -> None:
        owner = type(self).__name__
        _check_positive(owner, "lambda1", self.lambda1)
        _check_positive(owner, "lambda2", self.lambda2, allow_zero=True)
        _check_positive(owner, "tol", self.tol, allow_zero=True)
        _check_positive(owner, "max_iter", self.max_iter, integer=True)
        _check_positive(owner, "gap_tol", self.gap_tol, allow_zero=True)
        _check_positive(owner, "max_inner_iter", self.max_inner_iter, integer=True)
        _check_positive(owner, "smo_tol", self.smo_tol)
        _check_positive(owner, "smo_max_iter", self.smo_max_iter, integer=True)
        _check_positive(owner, "ridge", self.ridge, allow_zero=True)
        _check_w_solver(owner, self.w_solver, self.dcd_max_passes)
        if self.gap_schedule not in GAP_SCHEDULES:
            raise ConfigError(f"The 'gap_schedule' parameter of {owner} must be one of {list(GAP_SCHEDULES)}. "
                              f"Got {self.gap_schedule!r} instead.")
        _check_positive(owner, "early_gap_tol", self.early_gap_tol, allow_zero=True)

    def _adaptive(self, method: str) -> bool:
        """Whether the alternation uses the adaptive gap schedule (``gap_schedule``) with ``method``."""
        return self.gap_schedule == "adaptive" or (self.gap_schedule == "auto" and method == "dcd")

    # -- fitting ------------------------------------------------------------------------------

    def _check_params(self) -> None:
        self._validate()

    def _fit_open(self, solver: PairSolver) -> None:
        """Alternate the W, b step and the C step from ``C = I/m`` (Table 1 of the paper).

        With the adaptive gap schedule (``gap_schedule``; module docstring) the W steps before the
        last are solved to a looser relative gap and the alternation ends only on a W step
        certified to ``gap_tol``."""
        _, _, active, _, d = self._fit_layout
        ma = int(active.sum())
        W = np.zeros((d, ma))
        b = np.zeros(ma)
        G = np.zeros((d, ma))
        hinge = 0.0
        cov = PairCovariance.identity(ma)
        eps = 0.0
        f_prev = np.inf
        self.history_: list[dict[str, Any]] = []
        self.converged_ = False
        self.w_solver_ = resolve_w_solver(self.w_solver, self._fit_rows)
        adaptive = self._adaptive(self.w_solver_)
        gap_tol = float(self.gap_tol)
        target = max(gap_tol, float(self.early_gap_tol)) if adaptive else gap_tol
        for t in range(1, int(self.max_iter) + 1):
            t0 = time.perf_counter()
            W_prev, b_prev, hinge_prev = W, b, hinge
            incumbent = (W_prev, b_prev, hinge_prev) if adaptive and t > 1 else None
            W, b, G, hinge, sweeps, smo_its, gap, stationary = self._w_step(
                solver, G, cov, self._fit_rows, target=target, incumbent=incumbent)
            if t == 1 and ma:
                mean_sq = float(np.sum(W * W)) / ma
                eps = float(self.ridge) * (mean_sq if mean_sq > 0 else 1.0)
            f_w = _regularised(hinge, W, cov, self.lambda1, self.lambda2, eps)
            kept = f_w > f_prev  # only possible within the W step's tolerance: keep the old W
            if kept:
                W, b, f_w, hinge = W_prev, b_prev, f_prev, hinge_prev
            if ma:
                cov = c_step(W, eps)
            f_c = _regularised(hinge, W, cov, self.lambda1, self.lambda2, eps)
            decrease = ((f_w if t == 1 else f_prev) - f_c) / max(abs(f_c), 1.0)
            f_prev = f_c
            dw = float(np.linalg.norm(W - W_prev))
            norm_w = float(np.linalg.norm(W))
            rel = dw / norm_w if norm_w > 0 else 0.0
            target = self._w_target  # tightened by the W step when it could not beat the incumbent
            certified = target <= gap_tol
            self.history_.append(
                {
                    "iteration": t,
                    "objective_after_w": f_w,
                    "objective_after_c": f_c,
                    "delta_w": dw,
                    "rel_delta_w": rel,
                    "inner_sweeps": sweeps,
                    "duality_gap": gap,
                    "gap_target": self._w_target,
                    "smo_iterations": smo_its,
                    "kept_previous_w": bool(kept),
                    "stationary": bool(stationary),
                    "sub_problems": self._w_solves,
                    "capped_sub_problems": self._w_capped,
                    "sweep_capped": self._w_sweep_capped,
                    "seconds": time.perf_counter() - t0,
                }
            )
            logger.info(
                "M3MDC alternation %d: objective %.10g -> %.10g, |dW| %.3e (rel %.3e), %d sweeps, gap %.2e "
                "(target %.1e), %.2fs",
                t,
                f_w,
                f_c,
                dw,
                rel,
                sweeps,
                gap,
                self.history_[-1]["gap_target"],
                time.perf_counter() - t0,
            )
            if stationary or (rel < self.tol and certified):
                self.converged_ = True
                break
            if adaptive:
                # the next W step need not be solved much beyond what the alternation still gains;
                # a W change below tol at a loose target is confirmed at gap_tol
                target = max(gap_tol, min(target, GAP_PROGRESS * max(decrease, 0.0)))
                if rel < self.tol:
                    target = gap_tol
        self.n_iter_ = len(self.history_)
        self.sweeps_ = int(sum(h["inner_sweeps"] for h in self.history_))
        self._caps_report(
            sum(h["sub_problems"] for h in self.history_), sum(h["capped_sub_problems"] for h in self.history_),
            sum(h["sweep_capped"] for h in self.history_),
            self.history_[-1]["duality_gap"] / max(abs(self.history_[-1]["objective_after_w"]), 1.0)
            if self.history_ else 0.0)
        self.eps_ = eps
        self._store(W, b, cov.matrix())

    def fit_fixed_c(self, X: Any, Y: Any, C: np.ndarray, n_classes: Sequence[int] | None = None) -> M3MDC:
        """Only the W, b step, for a given positive definite ``C`` over the active pairs."""
        self._validate()
        X, data, active = self._prepare(X, Y, n_classes)
        ma = len(data.rows)
        C = np.asarray(C, dtype=np.float64)
        if C.shape != (ma, ma):
            raise InputDataError(f"C must be {ma} x {ma} (the active pairs); got {C.shape}")
        cov = PairCovariance.from_matrix(C)
        solver = self._solver()
        solver.open(pair_blocks(data))
        try:
            W, b, _, _, sweeps, _, gap, _ = self._w_step(solver, np.zeros((X.shape[1], ma)), cov, X.shape[0])
            alpha = solver.alphas()
        finally:
            solver.close()
        self.history_ = []
        self.n_iter_ = 0
        self.converged_ = True
        self.eps_ = 0.0
        self.inner_sweeps_ = sweeps
        self.sweeps_ = int(sweeps)
        self.duality_gap_ = gap
        self._store(W, b, C)
        self.alpha_ = alpha
        return self

    def _store(self, W: np.ndarray, b: np.ndarray, C: np.ndarray) -> None:
        idx = self._store_pairs(W, b)
        m = self.pairs_.shape[0]
        self.C_ = np.zeros((m, m))
        self.C_[np.ix_(idx, idx)] = C

    def _w_step(
        self,
        solver: PairSolver,
        G: np.ndarray,
        cov: PairCovariance,
        n_rows: int,
        target: float | None = None,
        incumbent: tuple[np.ndarray, np.ndarray, float] | None = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, float, int, int, float, bool]:
        """Parallel block ascent with exact line search (and momentum) on the dual of the W step.

        See the module docstring. Warm-started from the multipliers the solver's blocks hold
        (``G``: their ``Σ α y x`` per pair). Every sweep is two rounds over the blocks: a
        :class:`SolveOrder` (the sub-problems, from the current multipliers) and an
        :class:`ApplyOrder` (the step the line search chose, and the evaluation of ``W``); the
        line search and the duality gap are computed here from their ``d``-sized reports. Stops
        at the relative gap ``target`` (default ``gap_tol``). ``incumbent``: the previous
        alternation's ``(W, b, hinge)``; whenever the dual shows that no ``W`` beats it by more than
        the target, the target is tightened (``GAP_PROGRESS`` ×, down to ``gap_tol``), and at ``gap_tol`` the step stops and
        reports the incumbent as stationary (the alternation is at a fixed point to that
        accuracy). Returns ``W, b, G, hinge loss of (W, b), sweeps, sub-solver iterations,
        duality_gap, stationary``.
        """
        ma = G.shape[1]
        d = G.shape[0]
        if ma == 0:
            return np.zeros((d, 0)), np.zeros(0), G, 0.0, 0, 0, 0.0, False
        gap_tol = float(self.gap_tol) if target is None else max(float(target), float(self.gap_tol))
        p_inc = self._incumbent_value(incumbent, cov)
        stationary = False
        M = self._w_metric(cov, ma)
        Md = np.diag(M).copy()
        uncoupled = not np.any(M - np.diag(Md))  # independent pairs: no line search needed
        method = resolve_w_solver(self.w_solver, n_rows)
        dcd = method == "dcd"
        exact = uncoupled and not dcd  # SMO at smo_tol: one sweep solves the W step
        smo_tol = float(self.smo_tol)
        cap_name = "dcd_max_passes" if dcd else "smo_max_iter"
        cap = int(getattr(self, cap_name))
        tighten, sub_tol = self._sub_tolerance(method, exact, target is not None, gap_tol)
        smo_its = 0
        self._w_solves, self._w_capped, self._w_sweep_capped = 0, 0, False
        sweeps = 0
        gap = np.inf
        W = G @ M
        b = np.zeros(ma)
        hinge_best = 0.0
        pG: np.ndarray | None = None  # Σ P y x of the previous sweep's step P (the momentum direction)
        p_sum = 0.0
        momentum = False
        best = np.inf  # the lowest primal value seen, at (W, b)
        scales = 1.0 / Md
        for sweeps in range(1, int(self.max_inner_iter) + 1):  # noqa: B007 - the count is returned
            GM = G @ M
            # pair i's exact sub-problem with the other pairs fixed (the paper's Eq. 9), all in parallel
            use_momentum = momentum and not uncoupled
            order = SolveOrder(GM - G * Md, scales, sub_tol, cap, method, PLANE_RAYS if use_momentum else 0)
            solved = self._solve_sweep(solver, order, cap_name, sweeps)
            smo_its += sum(r.iterations for r in solved)
            dG = np.column_stack([r.dg for r in solved])
            d_sum = float(sum(r.delta_sum for r in solved))
            if uncoupled:
                step: tuple[float, float] | None = (1.0, 0.0)
            else:
                radii = np.min([r.radii for r in solved if r.radii is not None], axis=0) if use_momentum else None
                step = self._line_search(M, GM, dG, d_sum, pG if use_momentum else None, p_sum, radii)
                if step is None:
                    if sub_tol > smo_tol:  # the loose sub-problem solutions gave no ascent: tighten
                        sub_tol = max(smo_tol, 1e-3 * sub_tol)
                        continue
                    if np.isfinite(gap):  # no ascent left at the final tolerance: rounding level
                        logger.info("M3MDC: W step stopped at rounding level (duality gap %.3g)", gap)
                        break
                    step = (0.0, 0.0)
            assert step is not None
            a_step, b_step = step
            G_t = G + a_step * dG
            if b_step and pG is not None:
                G_t = G_t + b_step * pG
            W_t = G_t @ M  # stationarity, the paper's Eq. (5)
            applied: list[ApplyReport] = solver.run(ApplyOrder(a_step, b_step, W_t))
            G_new = np.column_stack([r.g for r in applied])
            pG, G = G_new - G, G_new
            p_sum = float(sum(r.step_sum for r in applied))
            momentum = True
            b_t = np.array([r.bias for r in applied])
            hinge = float(sum(r.hinge for r in applied))
            primal = hinge + 0.5 * float(np.sum(G_t * W_t))  # ½ tr(W Q Wᵀ) = ½ tr(G M Gᵀ) at W = G M
            dual = float(sum(r.alpha_sum for r in applied)) - 0.5 * float(np.sum(G * (G @ M)))  # never decreases
            if primal < best:  # the primal values of the dual iterates are not monotone: keep the best
                best, W, b, hinge_best = primal, W_t, b_t, hinge
            else:
                momentum = False  # adaptive restart: no momentum in the next sweep
            gap = best - dual
            logger.debug("M3MDC W step sweep %d: duality gap %.3g, sub-problem tolerance %.1e", sweeps, gap, sub_tol)
            if exact or gap <= gap_tol * max(abs(best), 1.0):
                break
            if incumbent is not None and p_inc - dual <= gap_tol * max(abs(p_inc), 1.0):  # no W beats it by the target
                if gap_tol > self.gap_tol:  # the alternation is slowing down: ask for more (GAP_PROGRESS x)
                    gap_tol = max(float(self.gap_tol), GAP_PROGRESS * gap_tol)
                else:
                    stationary = True
                    break
            if uncoupled and sub_tol <= smo_tol:  # solved at the final tolerance: rounding level
                logger.info("M3MDC: W step stopped at the final sub-problem tolerance (duality gap %.3g)", gap)
                break
            # inexact sub-problems while far from the optimum; the final sweeps use smo_tol
            nxt = tighten * gap / max(abs(best), 1.0)
            if uncoupled:  # nothing else moves: every further sweep must ask for more
                nxt = min(nxt, 0.1 * sub_tol)
            sub_tol = max(smo_tol, min(sub_tol, nxt))
        else:
            self._w_sweep_capped = True
            logger.warning("M3MDC: W step stopped after max_inner_iter=%d sweeps (duality gap %.3g)",
                           self.max_inner_iter, gap)
        self._w_target = gap_tol  # the relative gap the step was asked for in the end
        if stationary and p_inc <= best:
            assert incumbent is not None
            W, b, hinge_best, gap = incumbent[0], incumbent[1], float(incumbent[2]), p_inc - dual
        return W.copy(), b, G, hinge_best, sweeps, smo_its, float(gap), stationary

    def _sub_tolerance(self, method: str, exact: bool, targeted: bool, gap_tol: float) -> tuple[float, float]:
        """``(tighten, first tolerance)`` of the sub-problems. Their tolerance follows the relative
        duality gap of the W step, down to smo_tol: DCD's (its own relative duality gap, or KKT
        violation) at DCD_TIGHTEN x (the Jacobi step gains less than the blocks' remaining gaps: at
        1x the sweeps stall at the gap they started from), SMO's (KKT violation) at 1e-2 x (its
        extra iterations are cheap). Loose first sweeps when the target is loose (adaptive DCD)."""
        smo_tol = float(self.smo_tol)
        dcd = method == "dcd"
        sub_tol = smo_tol if exact else max(smo_tol, 1e-3)
        if dcd and targeted and self._adaptive(method):
            sub_tol = max(smo_tol, min(DCD_FIRST_TOL * gap_tol, 1e-1))
        return (DCD_TIGHTEN if dcd else 1e-2), sub_tol

    def _incumbent_value(self, incumbent: tuple[np.ndarray, np.ndarray, float] | None, cov: PairCovariance) -> float:
        """The previous alternation's value in this W step's objective Σ ξ + ½ tr(W Q Wᵀ) (inf: none)."""
        if incumbent is None:
            return float(np.inf)
        W_inc = incumbent[0]
        reg = float(self.lambda1) * float(np.sum(W_inc * W_inc))
        if self.lambda2:
            reg += float(self.lambda2) * cov.coupling(W_inc)
        return float(incumbent[2]) + 0.5 * reg

    def _w_metric(self, cov: PairCovariance, ma: int) -> np.ndarray:
        """``M = Q⁻¹`` of the W step (``W = G M``, the paper's Eq. 5): ``I / λ1`` without coupling."""
        if not self.lambda2:
            return np.eye(ma) / self.lambda1
        q = self.lambda1 + self.lambda2 / cov.c
        M = (cov.U / q) @ cov.U.T
        return 0.5 * (M + M.T)

    def _solve_sweep(self, solver: PairSolver, order: SolveOrder, cap_name: str, sweeps: int) -> list[SolveReport]:
        """The sweep's sub-problems, solved; the pairs that hit the cap counted and named in a warning."""
        solved: list[SolveReport] = solver.run(order)
        capped = [r.pair for r in solved if not r.converged]
        self._w_solves += len(solved)
        self._w_capped += len(capped)
        if capped:
            logger.warning("M3MDC: %s hit %s=%d on %d pair(s) (%s) in W-step sweep %d", order.method, cap_name,
                           order.max_iter, len(capped), ", ".join(map(str, capped[:10])), sweeps)
        return solved

    @staticmethod
    def _line_search(
        M: np.ndarray,
        GM: np.ndarray,
        dG: np.ndarray,
        d_sum: float,
        pG: np.ndarray | None,
        p_sum: float,
        radii: np.ndarray | None,
    ) -> tuple[float, float] | None:
        """The step ``(a, b)`` from ``α`` to ``α + a Δ + b P`` (``Δ``: the Jacobi direction, ``P``:
        the previous step; ``dG``, ``pG`` their ``Σ y x`` per pair, ``d_sum``, ``p_sum`` their
        sums); ``None`` when no ascent is possible.

        The dual ``Σ α − ½ tr(G M Gᵀ)`` is a concave quadratic on that plane: the step is its
        maximiser ``(a*, b*)`` when it gains and lies inside the feasible region the pairs reported
        (``radii``: per ray of the plane the largest step keeping every multiplier in ``[0, 1]``),
        else ``a = t``, the maximiser on the feasible segment ``t ∈ [0, 1]`` of ``Δ`` (``b = 0``).
        Both directions keep every ``Σ_j α_ij y_ij = 0``.
        """
        g_d = d_sum - float(np.sum(dG * GM))
        dGM = dG @ M
        q_dd = float(np.sum(dG * dGM))
        t = min(1.0, g_d / q_dd) if q_dd > 0 else (1.0 if g_d > 0 else 0.0)
        t = max(t, 0.0)
        if pG is not None and radii is not None:
            g_p = p_sum - float(np.sum(pG * GM))
            q_dp = float(np.sum(pG * dGM))
            q_pp = float(np.sum(pG * (pG @ M)))
            det = q_dd * q_pp - q_dp * q_dp
            if q_dd > 0 and q_pp > 0 and det > 1e-12 * q_dd * q_pp:
                a_star = (g_d * q_pp - g_p * q_dp) / det
                b_star = (g_p * q_dd - g_d * q_dp) / det
                gain = a_star * g_d + b_star * g_p - 0.5 * (a_star * a_star * q_dd + 2 * a_star * b_star * q_dp
                                                            + b_star * b_star * q_pp)
                if gain > 0 and _in_plane_region(radii, a_star, b_star):
                    return a_star, b_star
        if t <= 0.0:
            return None
        return t, 0.0
