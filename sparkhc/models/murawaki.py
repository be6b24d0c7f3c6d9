"""Murawaki 2013 (IJCNLP, "Global model for hierarchical multi-label text classification").

Three model families trained online with Passive-Aggressive (PA-I, Crammer et al. 2006) updates:

* :class:`FlatPA` -- FLAT (Sect. 3): one binary PA-I classifier per leaf (virtual ``/_self`` leaves
  included); decoding takes every positive leaf, else the single best.
* :class:`TreePA` -- TREE (Sect. 3.2): one binary PA-I classifier per edge ``p -> c``, trained on
  ALL documents or only on SIB documents (those with a gold leaf under ``p``); decoded by top-down
  local search (LS, Alg. 2) or exact dynamic programming (DP, Alg. 3). LS-ALL, LS-SIB, DP-ALL and
  DP-SIB are its four configurations.
* :class:`GlobalPA` -- GT (Sect. 4.4, Alg. 5): the global model trained by structured PA-I with
  prediction-based updates and the cost ``1 - example F``, optionally with branching features
  (BF, Sect. 4.3, R = 3, node-specific and shared); decoded by DP. Extensions: cost-augmented
  updates with a Hamming margin and PA-II steps (``update=``, ``pa=``).

Weights live in a :class:`~sparkhc.models.base.ModelState` (combine ``"mean"``: iterative parameter
mixing, Alg. 6): ``"W"`` feature-major ``(n_features, n_columns)`` -- columns are edges (``c - 1``
for node ``c``) for TREE/GT and leaves (in ``taxonomy.leaves`` order) for FLAT -- and, with
branching features, ``"bf"`` of shape ``(n_nodes + 1, R + 1)`` (layout in :mod:`sparkhc.decoding`).
Weights are stored as float32 by default (``dtype="float64"`` for exact reference runs); the
step size ``tau`` and the loss are always computed in float64. ``GlobalPA(layout="sparse")`` stores
``W`` (and ``Wa``) as CSR matrices of the support only (the weights of feature/edge pairs met in a
training document and its gold tree), for vocabularies and taxonomies whose dense weights do not fit.

Per training example the cost is one gather-product ``x.data @ W[x.indices]`` (``nnz(x)``
contiguous rows of ``W``), one DP over the taxonomy (``O(depth)`` vectorised numpy calls, see
:mod:`sparkhc.decoding`) and a scatter into ``nnz(x) x |edges touched|`` entries of ``W``: no loop
over features and no dense vocabulary-sized temporaries. With numba installed the epochs run in the compiled kernels
of :mod:`sparkhc.kernels` (same arithmetic; ``SPARKHC_KERNELS=0`` forces the numpy code here, the
reference); after :meth:`partial_fit` the attribute ``touched_rows_`` then marks the rows of ``W``
the epoch wrote (``None`` on the numpy path), for row-sparse deltas (:mod:`sparkhc.spark.deltas`).

Examples
--------
>>> from sparkhc.taxonomy import Taxonomy
>>> from sparkhc.batch import SparseBatch
>>> import numpy as np, scipy.sparse as sp
>>> tax = Taxonomy.from_edges([("R", "A"), ("R", "B"), ("A", "A1"), ("A", "A2")])
>>> X = sp.csr_matrix(np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1]], dtype=np.float32))
>>> batch = SparseBatch(X, np.array(["d1", "d2", "d3"]), [["A1"], ["A2"], ["B"]])
>>> GlobalPA(tax, 3, epochs=3).fit(batch).predict(batch)
[['A1'], ['A2'], ['B']]
"""

from __future__ import annotations

import math
import numbers
import os
import weakref
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp

from sparkhc import kernels as _kernels
from sparkhc import struct_dcd
from sparkhc.batch import SparseBatch
from sparkhc.decoding import (
    TreeIndex,
    bf_bucket,
    dp_solve,
    dp_solve_one,
    edge_scores,
    flat_select,
    local_search_mask,
    mask_to_sets,
    row_scores,
    tree_index,
)
from sparkhc.edge_init import edge_problems, solve_edges
from sparkhc.errors import InputDataError, ModelError
from sparkhc.models.base import HierModel, ModelState, shuffled_order

__all__ = ["FlatPA", "TreePA", "GlobalPA", "pa_binary_step", "GoldSets", "rare_margins"]

#: registry names of this module's models (Murawaki 2013); read by :mod:`sparkhc.models` without importing
MODELS = {"flat": "FlatPA", "tree": "TreePA", "global": "GlobalPA"}

#: documents decoded per sparse product in :meth:`decode` (bounds the dense score block)
DECODE_CHUNK = 2048


# ------------------------------------------------------------------------------- gold label sets
def bf_difference(
    gold_f: np.ndarray, sel: np.ndarray, kk: np.ndarray, internal: np.ndarray, R: int
) -> tuple[np.ndarray, np.ndarray]:
    """The branching part of ``Delta = Phi(x, m) - Phi(x, m^)``: the flat indices ``u`` into
    ``bf`` (``(n_nodes + 1) x (R + 1)``, the last row the shared indicators) whose count differs
    and the difference ``net`` (gold minus predicted). ``gold_f``: the gold tree's indicator
    indices (``GoldSets.bf``); ``sel``/``kk``: the predicted tree's nodes and children counts."""
    n_nodes = sel.shape[0]
    pin = np.flatnonzero(sel & internal)
    bk = bf_bucket(kk[pin], R)
    pred_f = np.concatenate([pin * (R + 1) + bk, n_nodes * (R + 1) + bk])
    u, inv = np.unique(np.concatenate([gold_f, pred_f]), return_inverse=True)
    net = np.bincount(inv, weights=np.concatenate([np.ones(gold_f.size), -np.ones(pred_f.size)]), minlength=u.size)
    nz = net != 0
    return u[nz], net[nz]


@dataclass
class GoldSets:
    """Gold label sets of a batch in flat (CSR-like) arrays, computed once per batch.

    ``leaves[leaves_ptr[i]:leaves_ptr[i+1]]`` is ``m_i`` and ``nodes[nodes_ptr[i]:...]`` is
    ``tree(m_i)`` as node ids (root excluded, ascending). ``bf[bf_ptr[i]:...]`` (with branching
    features) are the flat indices into ``bf.reshape(-1)`` of the indicators of ``Phi_BF(x, m_i)``:
    for every internal node ``p`` of ``tree(m_i)`` (root included) with ``k`` children in it, the
    node-specific ``(p, b(k))`` and the shared ``(-1, b(k))``, repeated when several nodes share it.
    ``phi2[i]`` is ``||phi(x_i)||^2``.
    """

    leaves: np.ndarray
    leaves_ptr: np.ndarray
    nodes: np.ndarray
    nodes_ptr: np.ndarray
    phi2: np.ndarray
    bf: np.ndarray | None = None
    bf_ptr: np.ndarray | None = None


#: batches whose gold sets a model keeps (a scratch model running several shards in turn, e.g. 10
#: shards on 2 driver threads, reuses each shard's across epochs; they are small next to the
#: features, of which only the last batch's prepared copy is kept)
_CACHE_BATCHES = 64


def _cache_get(cache: dict[int, tuple[Any, Any, Any]], batch: Any, key: Any) -> Any:
    """The value cached for ``batch`` (the same object, alive) under ``key``, or None."""
    hit = cache.get(id(batch))
    if hit is not None and hit[0]() is batch and hit[1] == key:
        return hit[2]
    return None


def _cache_put(cache: dict[int, tuple[Any, Any, Any]], batch: Any, key: Any, value: Any, limit: int) -> None:
    """Cache ``value`` for ``batch`` (by a weak reference: a dead batch's entry is dropped),
    keeping at most ``limit`` batches (the oldest go first)."""
    for k in [k for k, v in cache.items() if v[0]() is None]:
        del cache[k]
    while len(cache) >= max(1, int(limit)):
        del cache[next(iter(cache))]
    try:
        cache[id(batch)] = (weakref.ref(batch), key, value)
    except TypeError:
        pass


def _gold_sets(
    batch: SparseBatch, X: sp.csr_matrix, idx: TreeIndex, model: HierModel, R: int | None
) -> GoldSets:
    tax = model.taxonomy
    sets = batch.leaf_sets(tax)
    n = len(sets)
    sizes = np.array([len(m) for m in sets], dtype=np.int64)
    if n and sizes.min() == 0:
        i = int(np.flatnonzero(sizes == 0)[0])
        raise InputDataError(
            f"document {batch.doc_ids[i]!r} has an empty gold label set ({int((sizes == 0).sum())} such "
            f"document(s) in this batch); {type(model).__name__} needs at least one label per "
            "training document"
        )
    leaves = np.concatenate(sets).astype(np.int64) if n else np.zeros(0, np.int64)
    leaves_ptr = np.concatenate([[0], np.cumsum(sizes)])
    rows = np.repeat(np.arange(n), sizes)
    Y = sp.csr_matrix((np.ones(len(leaves), np.float32), (rows, leaves)), shape=(n, idx.n_nodes))
    closed = (Y @ tax.ancestor_matrix()).tocsr()
    closed.sum_duplicates()
    closed.sort_indices()
    nodes = closed.indices.astype(np.int64)
    nodes_ptr = closed.indptr.astype(np.int64)
    d = X.data.astype(np.float64)
    row_of = np.repeat(np.arange(n), np.diff(X.indptr))
    phi2 = np.bincount(row_of, weights=d * d, minlength=n)
    out = GoldSets(leaves, leaves_ptr, nodes, nodes_ptr, phi2)
    if R is not None:
        # branching of tree(m): the parent of every node of tree(m), counted per (doc, parent)
        nrow = np.repeat(np.arange(n), np.diff(nodes_ptr))
        key = nrow * idx.n_nodes + idx.parent[nodes]
        uk, k = np.unique(key, return_counts=True)
        doc, par = np.divmod(uk, idx.n_nodes)
        b = bf_bucket(k, R)
        own = par * (R + 1) + b
        shared = idx.n_nodes * (R + 1) + b
        flat = np.stack([own, shared], axis=1).reshape(-1)
        cnt = np.bincount(doc, minlength=n) * 2
        out.bf = flat
        out.bf_ptr = np.concatenate([[0], np.cumsum(cnt)])
    return out


#: rows whose L2 norm is within this of 1 count as unit rows (kept bit for bit)
UNIT_NORM_TOL = 1e-4


def unit_rows(X: sp.csr_matrix) -> sp.csr_matrix:
    """``X`` with every non-zero row scaled to unit L2 norm (``normalize = "l2"``, the PA models'
    default): the step ``min(C, loss / ||x||^2)`` of a passive-aggressive update then reaches C
    whatever the scale of the features (raw counts, tf-idf without a Normalizer, hashed counts), and
    the bias feature keeps its weight against the words. Rows already of unit norm (within
    :data:`UNIT_NORM_TOL`: the CLI's l2-normalized features) are kept bit for bit, and ``X`` itself is
    returned when every row is."""
    n = X.shape[0]
    d = X.data.astype(np.float64)
    row_of = np.repeat(np.arange(n), np.diff(X.indptr))
    norms = np.sqrt(np.bincount(row_of, weights=d * d, minlength=n))
    off = (norms > 0) & (np.abs(norms - 1.0) > UNIT_NORM_TOL)
    if not off.any():
        return X
    scale = np.where(off, 1.0 / np.where(norms > 0, norms, 1.0), 1.0)
    out = X.copy()
    out.data = (d * scale[row_of]).astype(X.dtype)
    return out


def rare_margins(counts: np.ndarray, margin: float, power: float) -> np.ndarray:
    """The margin of each edge when it is a gold edge the prediction misses (``GlobalPA``
    ``margin_rare``): ``margin * (n_max / n_e) ** power`` for an edge with ``n_e > 0`` gold
    documents (``n_max`` the largest count; only the ratios matter, so the mean of the shards'
    counts gives the same margins as their sum), ``margin`` for an edge never gold."""
    n = np.asarray(counts, dtype=np.float64)
    out = np.full(n.shape, float(margin))
    pos = n > 0
    if pos.any():
        out[pos] = float(margin) * (n.max() / n[pos]) ** float(power)
    return out


def _is_int(v: Any) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool | np.bool_)


def _is_real(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool | np.bool_)


#: ``GlobalPA`` ``layout="auto"``: the sparse layout when the dense weights (``W``, and ``Wa`` with
#: averaging) would take more bytes than this
AUTO_SPARSE_BYTES = 4 << 30


def dense_message(name: str, shape: tuple[int, int], dtype: Any, copies: int) -> str:
    size = shape[0] * shape[1] * np.dtype(dtype).itemsize * copies
    what = f"{copies} arrays" if copies > 1 else "an array"
    return (f"model {name!r}: the dense weights need {size / 2**30:.1f} GiB ({what} of shape "
            f"({shape[0]}, {shape[1]}), {np.dtype(dtype).name}: features x edges)")


def physical_memory() -> int | None:
    """Bytes of physical memory plus swap of this machine (None when unknown)."""
    try:
        info = dict(line.split(":", 1) for line in open("/proc/meminfo", encoding="ascii"))
        return (int(info["MemTotal"].split()[0]) + int(info.get("SwapTotal", "0 kB").split()[0])) * 1024
    except (OSError, KeyError, ValueError):
        try:
            return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
        except (OSError, ValueError, AttributeError):
            return None


def check_dense_fits(name: str, shape: tuple[int, int], dtype: Any, copies: int, hint: str) -> None:
    """Refuse, in one line and before allocating, dense weights larger than this machine's memory."""
    mem = physical_memory()
    size = shape[0] * shape[1] * np.dtype(dtype).itemsize * copies
    if mem is not None and size > mem:
        raise ModelError(f"{dense_message(name, shape, dtype, copies)}, more than this machine's "
                         f"{mem / 2**30:.1f} GiB of memory{hint}")


# ---------------------------------------------------------------------------------- PA-I binary
def pa_binary_step(
    W: np.ndarray,
    fi: np.ndarray,
    fv: np.ndarray,
    phi2: float,
    cols: np.ndarray | None,
    y: np.ndarray,
    C: float,
) -> tuple[int, float]:
    """One PA-I step (Murawaki 2013, Alg. 1) for many independent binary classifiers at once.

    Column ``j`` of ``W`` (or ``cols[j]``) is the classifier of target ``y[j]`` in {-1, +1}:
    ``l = max(0, 1 - y w.x)``; if ``l > 0``: ``tau = min(C, l / ||x||^2)``, ``w += tau y x``.
    ``fi``/``fv`` are the indices and values of ``x``. Updates ``W`` in place; returns
    ``(number of classifiers updated, sum of their losses)``.
    """
    if cols is None:
        s = row_scores(W, fi, fv)
    elif 8 * cols.size >= W.shape[1]:
        s = row_scores(W, fi, fv)[cols]
    else:  # few columns of a wide W: gather just them
        s = fv @ W[fi[:, None], cols]
    loss = 1.0 - y * s.astype(np.float64)
    upd = np.flatnonzero(loss > 0)
    if upd.size == 0 or phi2 <= 0.0:
        return 0, float(loss[upd].sum()) if upd.size else 0.0
    lu = loss[upd]
    step = np.minimum(C, lu / phi2) * y[upd]
    fv64 = fv.astype(np.float64)
    if cols is None and 4 * upd.size >= W.shape[1]:
        # most classifiers move: whole-row update (contiguous), adding exact zeros elsewhere
        full = np.zeros(W.shape[1])
        full[upd] = step
        W[fi] += np.multiply.outer(fv64, full)
    else:
        target = upd if cols is None else cols[upd]
        W[fi[:, None], target] += np.multiply.outer(fv64, step)
    return int(upd.size), float(lu.sum())


# ----------------------------------------------------------------------- sparse layout (GlobalPA)
def _edge_scores(X: sp.csr_matrix, W: Any) -> np.ndarray:
    """``X @ W`` as a dense block for a dense or a CSR ``W`` (the same values either way)."""
    if not sp.issparse(W):
        return edge_scores(X, W)
    if _kernels.available():
        return _kernels.csr_scores(X, W)
    return np.asarray((X @ W).toarray())


def _set_csr(M: sp.csr_matrix, data: np.ndarray, indices: np.ndarray, indptr: np.ndarray) -> None:
    """Replace the arrays of the CSR ``M`` in place (rows sorted by column)."""
    M.data, M.indices, M.indptr = data, indices, indptr
    M.has_sorted_indices = True


def _csr_union(A: sp.csr_matrix, B: sp.csr_matrix) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """:func:`sparkhc.kernels.csr_union` (the union of two sorted CSR patterns and where ``A``'s
    entries go in it; None when ``B``'s are all in ``A``), with a numpy path."""
    if _kernels.available():
        return _kernels.csr_union(A, B)
    U = (sp.csr_matrix((np.ones(A.nnz, np.int8), A.indices, A.indptr), shape=A.shape)
         + sp.csr_matrix((np.ones(B.nnz, np.int8), B.indices, B.indptr), shape=B.shape)).tocsr()
    if U.nnz == A.nnz:
        return None
    U.sort_indices()

    def keys(ptr: np.ndarray, ind: np.ndarray) -> np.ndarray:
        return np.repeat(np.arange(ptr.size - 1, dtype=np.int64), np.diff(ptr)) * A.shape[1] + ind

    return U.indptr, U.indices, np.searchsorted(keys(U.indptr, U.indices), keys(A.indptr, A.indices))


def _share_pattern(mats: list[sp.csr_matrix], extra: sp.csr_matrix | None = None) -> None:
    """Store every CSR of ``mats`` (same shape, sorted rows) on the union of their patterns and
    ``extra``'s, in place, the new entries as zeros and the index arrays shared."""
    P = mats[0]
    for M in mats[1:] + ([extra] if extra is not None else []):
        u = _csr_union(P, M)
        if u is not None:
            P = sp.csr_matrix((np.zeros(u[1].size, np.int8), u[1], u[0]), shape=P.shape)
    for M in mats:
        u = _csr_union(M, P)
        data = M.data
        if u is not None:
            data = np.zeros(u[1].size, dtype=M.dtype)
            data[u[2]] = M.data
        _set_csr(M, data, P.indices, P.indptr)


def batch_support(X: sp.csr_matrix, gold: GoldSets, n_edges: int) -> sp.csr_matrix:
    """The support of a batch, ``(n_rows, n_edges)``: (f, e) for every feature ``f`` of a document
    (``X`` with the bias column) and every edge ``e`` of its gold tree (a sparse product; only
    the pattern matters)."""
    n = X.shape[0]
    XT = sp.csr_matrix((np.ones(X.nnz, np.float32), X.indices, X.indptr), shape=X.shape).T.tocsr()
    G = sp.csr_matrix((np.ones(gold.nodes.size, np.float32), gold.nodes - 1, gold.nodes_ptr), shape=(n, n_edges))
    S = (XT @ G).tocsr()
    S.sort_indices()
    return S


def _pattern_mask(W: sp.csr_matrix) -> np.ndarray:
    """The stored entries of the CSR ``W`` as a dense bool mask (the numpy reference of the sparse layout)."""
    mask = np.zeros(W.shape, dtype=bool)
    mask[np.repeat(np.arange(W.shape[0]), np.diff(W.indptr)), W.indices] = True
    return mask


def _store_dense(W: sp.csr_matrix, Wd: np.ndarray, Wa: sp.csr_matrix | None, Wad: np.ndarray | None,
                 mask: np.ndarray) -> None:
    """Store the dense ``Wd`` (and ``Wad``) into the CSR ``W`` (``Wa``) in place, on the entries of
    ``mask`` (the numpy reference of the sparse layout)."""
    r, c = np.nonzero(mask)
    indptr = np.concatenate([[0], np.cumsum(np.bincount(r, minlength=W.shape[0]))]).astype(np.int64)
    _set_csr(W, Wd[r, c], c.astype(np.int64), indptr)
    if Wa is not None and Wad is not None:
        _set_csr(Wa, Wad[r, c], c.astype(np.int64), indptr.copy())


# ------------------------------------------------------------------------------------ base class
class _PAModel(HierModel):
    """Shared parameters, state handling and checks of the PA models."""

    combine: ClassVar[Any] = "mean"
    defaults: ClassVar[dict[str, Any]] = {"C": 1.0, "epochs": 10, "dtype": "float32", "seed": 0, "bias": 0.0,
                                          "normalize": "off"}
    requires_labels: ClassVar[bool] = True
    explains: ClassVar[bool] = True
    #: the compiled epochs mark the rows of ``W`` they write in ``touched_rows_``; the averaged
    #: weights ``Wa`` are written in the same rows
    touched_arrays: ClassVar[tuple[str, ...]] = ("W", "Wa")

    # -- parameters ------------------------------------------------------------------------------
    def validate_params(self) -> None:
        p = self.params
        C = p["C"]
        self._check_param(
            "C",
            C == "auto" or (_is_real(C) and math.isfinite(float(C)) and float(C) > 0),
            "a float in the range (0, inf), or 'auto' (chosen on inner validation folds by sparkhc train)",
        )
        ep = p["epochs"]
        self._check_param("epochs", _is_int(ep) and int(ep) >= 1, "an int >= 1")
        self._check_param("dtype", p["dtype"] in ("float32", "float64"), "'float32' or 'float64'")
        self._check_param("seed", _is_int(p["seed"]), "an int")
        b = p["bias"]
        self._check_param("bias", _is_real(b) and math.isfinite(float(b)) and float(b) >= 0, "a float >= 0")
        self._check_param("normalize", p["normalize"] in ("l2", "off"), "'l2' or 'off'")
        if self.taxonomy.n_edges == 0:
            raise ModelError(f"the taxonomy {self.taxonomy.source} has no edges: nothing to classify")

    @property
    def _C(self) -> float:
        """The cap C of the updates' steps, times :attr:`step_scale` (a shard's epoch of parameter
        mixing with ``train.step_scale = "shards"``: C x the number of shards); ``"auto"`` must have
        been resolved (by :func:`sparkhc.spark.training.fit_model`, which chooses it on validation folds)."""
        C = self.params["C"]
        if C == "auto":
            raise ModelError(f"model {self.name!r}: C = 'auto' is chosen on validation folds by `sparkhc train` / "
                             "fit_model; give a number to train the model directly")
        return float(C) * float(self.step_scale)

    @property
    def _dtype(self) -> np.dtype:
        return np.dtype(self.params["dtype"])

    @property
    def _index(self) -> TreeIndex:
        ix = self.__dict__.get("_tree_index")
        if ix is None:
            ix = tree_index(self.taxonomy)
            self.__dict__["_tree_index"] = ix
        return ix

    def __getstate__(self) -> dict[str, Any]:
        # caches hold weak references and derived arrays: rebuilt on demand
        return {k: v for k, v in self.__dict__.items()
                if k not in ("_tree_index", "_gold_cache", "_prep_cache", "_supp_cache", "touched_rows_")}

    @property
    def _n_rows(self) -> int:
        """Rows of ``W``: the features, plus one for the bias feature when ``bias > 0``."""
        return self.n_features + (1 if float(self.params["bias"]) > 0 else 0)

    # -- state -----------------------------------------------------------------------------------
    def _n_columns(self) -> int:
        return self.taxonomy.n_edges

    def init_state(self) -> ModelState:
        self.validate_params()
        shape = (self._n_rows, self._n_columns())
        check_dense_fits(self.name, shape, self._dtype, self._dense_copies(), self._layout_hint())
        try:
            arrays = {"W": np.zeros(shape, dtype=self._dtype)}
        except MemoryError as e:
            raise ModelError(f"{dense_message(self.name, shape, self._dtype, self._dense_copies())}: {e}"
                             f"{self._layout_hint()}") from None
        return ModelState(arrays, {}, "mean")

    def _dense_copies(self) -> int:
        """How many arrays of the shape of ``W`` a fresh state holds."""
        return 1

    def _layout_hint(self) -> str:
        """What to set when the dense weights do not fit (the global model's sparse layout)."""
        return ""

    def fit(self, batch: SparseBatch, epochs: int | None = None, seed: int | None = None) -> HierModel:  # type: ignore[override]
        """Serial training from a fresh state: ``epochs`` (default: the parameter) calls of
        :meth:`partial_fit` with ``seed`` (default: the parameter)."""
        return super().fit(batch, epochs=epochs, seed=int(self.params["seed"] if seed is None else seed))

    def _weights(self, name: str, shape: tuple[int, ...], sparse_ok: bool = False) -> Any:
        """A state array as a writeable C-contiguous ndarray (its dtype is kept), written back
        into the state when it had to be converted, so that in-place updates land in ``state_``.
        With ``sparse_ok`` a sparse array comes as a CSR matrix with sorted indices (the global
        model's sparse layout), itself when it is one."""
        assert self.state_ is not None
        arr = self.state_.arrays.get(name)
        if arr is None:
            raise ModelError(f"model {self.name!r}: the state has no array {name!r}")
        if sp.issparse(arr) and sparse_ok:
            if arr.shape != shape:
                raise ModelError(f"model {self.name!r}: state array {name!r} has shape {arr.shape}, expected {shape} "
                                 f"(n_features={self.n_features}, taxonomy {self.taxonomy.source})")
            if not isinstance(arr, sp.csr_matrix):
                arr = sp.csr_matrix(arr)
                self.state_.arrays[name] = arr
            if not arr.has_sorted_indices:
                arr.sort_indices()
            return arr
        if sp.issparse(arr):
            arr = arr.toarray()
        if arr.shape != shape:
            raise ModelError(
                f"model {self.name!r}: state array {name!r} has shape {arr.shape}, expected {shape} "
                f"(n_features={self.n_features}, taxonomy {self.taxonomy.source})"
            )
        if not (isinstance(arr, np.ndarray) and arr.flags.c_contiguous and arr.flags.writeable):
            arr = np.array(arr, order="C")
            self.state_.arrays[name] = arr
        return arr

    def _prepare(self, batch: SparseBatch) -> sp.csr_matrix:
        """The batch's CSR features (canonical), with the constant ``bias`` feature appended as the
        last column when ``bias > 0``; the last batch's is cached (the gold sets of up to
        :data:`_CACHE_BATCHES` batches are, :meth:`_gold`)."""
        bias = float(self.params["bias"])
        key = (bias, len(batch), self.params["normalize"])
        cache = self.__dict__.setdefault("_prep_cache", {})
        hit = _cache_get(cache, batch, key)
        if hit is not None:
            return hit
        X = self._prepare_uncached(batch, bias)
        _cache_put(cache, batch, key, X, limit=1)
        return X

    def _prepare_uncached(self, batch: SparseBatch, bias: float) -> sp.csr_matrix:
        if batch.n_features != self.n_features:
            raise ModelError(
                f"the batch has {batch.n_features} features but model {self.name!r} was built for "
                f"{self.n_features}"
            )
        X = batch.X
        if not sp.isspmatrix_csr(X):
            X = sp.csr_matrix(X)
        if not X.has_canonical_format:
            X = X.copy()
            X.sum_duplicates()
        if self.params["normalize"] == "l2":
            X = unit_rows(X)
        if bias > 0:
            n = X.shape[0]
            nnz = np.diff(X.indptr)
            data = np.insert(X.data, X.indptr[1:], np.asarray(bias, dtype=X.dtype))
            indices = np.insert(X.indices, X.indptr[1:], self.n_features)
            indptr = np.concatenate([[0], np.cumsum(nnz + 1)])
            X = sp.csr_matrix((data, indices, indptr), shape=(n, self.n_features + 1))
        return X

    def _gold(self, batch: SparseBatch, X: sp.csr_matrix, R: int | None) -> GoldSets:
        # the gold sets depend on X only through the bias column (phi2): keyed by the bias, not by X
        key = (float(self.params["bias"]), X.shape, R, len(batch))
        cache = self.__dict__.setdefault("_gold_cache", {})
        hit = _cache_get(cache, batch, key)
        if hit is not None:
            return hit
        gold = _gold_sets(batch, X, self._index, self, R)
        _cache_put(cache, batch, key, gold, limit=_CACHE_BATCHES)
        return gold

    def _support(self, batch: SparseBatch, X: sp.csr_matrix, gold: GoldSets) -> sp.csr_matrix:
        """:func:`batch_support` of ``batch`` (the last batch's is cached)."""
        key = (float(self.params["bias"]), X.shape, X.nnz, len(batch))
        cache = self.__dict__.setdefault("_supp_cache", {})
        hit = _cache_get(cache, batch, key)
        if hit is None:
            hit = batch_support(X, gold, self._index.n_edges)
            _cache_put(cache, batch, key, hit, limit=1)
        return hit

    def _start_epoch(self) -> None:
        self.validate_params()
        if self.state_ is None:
            self.state_ = self.init_state()

    def _scores_block(self, X: sp.csr_matrix) -> np.ndarray:
        W = self._weights("W", (self._n_rows, self._n_columns()))
        return edge_scores(X, W)

    def decode(
        self, batch: SparseBatch, return_scores: bool = True
    ) -> tuple[list[np.ndarray], np.ndarray | None]:
        """Predicted leaf sets and, with ``return_scores``, per-node scores ``(n_docs, n_nodes)``
        (float32): the score of the edge into each node (root column 0; see subclasses)."""
        self.get_state()
        X = self._prepare(batch)
        n = X.shape[0]
        sets: list[np.ndarray] = []
        scores = np.zeros((n, self.taxonomy.n_nodes), dtype=np.float32) if return_scores else None
        blocks = [(a, min(n, a + DECODE_CHUNK)) for a in range(0, n, DECODE_CHUNK)]

        def block(ab: tuple[int, int]) -> tuple[list[np.ndarray], np.ndarray | None]:
            return self._decode_block(X[ab[0]:ab[1]], return_scores)

        def keep(ab: tuple[int, int], got: tuple[list[np.ndarray], np.ndarray | None]) -> None:
            sets.extend(got[0])
            if scores is not None:
                scores[ab[0]:ab[1]] = got[1]

        threads = min(int(self.decode_threads), len(blocks))
        if threads > 1:  # independent blocks, in waves of `threads` (at most that many score blocks held)
            keep(blocks[0], block(blocks[0]))  # alone: it builds what is built lazily
            with ThreadPoolExecutor(threads) as pool:
                for i in range(1, len(blocks), threads):
                    wave = blocks[i:i + threads]
                    for ab, got in zip(wave, pool.map(block, wave), strict=True):
                        keep(ab, got)
        else:
            for ab in blocks:
                keep(ab, block(ab))
        return sets, scores

    def decode_picked(self, batch: SparseBatch) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """:meth:`decode`'s leaf sets and the scores of their nodes, block by block: never the
        ``(n_docs, n_nodes)`` score matrix of the whole batch (tens of thousands of nodes)."""
        self.get_state()
        X = self._prepare(batch)
        sets: list[np.ndarray] = []
        picked: list[np.ndarray] = []
        for a in range(0, X.shape[0], DECODE_CHUNK):
            part, sc = self._decode_picked_block(X[a:a + DECODE_CHUNK])
            sets.extend(part)
            picked.extend(sc)
        return sets, picked

    def _decode_block(self, X: sp.csr_matrix, with_scores: bool) -> tuple[list[np.ndarray], np.ndarray | None]:
        raise NotImplementedError

    def _decode_picked_block(self, X: sp.csr_matrix) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """One block of :meth:`decode_picked`: the leaf sets and the scores of their nodes."""
        part, sc = self._decode_block(X, True)
        assert sc is not None
        return part, [sc[i, np.asarray(m, dtype=np.int64)] for i, m in enumerate(part)]

    # -- explanations (predict --explain) -----------------------------------------------------------
    @contextmanager
    def _predicting(self) -> Iterator[None]:
        """Within it :meth:`_decode_W` gives the weights the model predicts with (GlobalPA: averaged)."""
        yield

    def _decode_W(self) -> Any:
        return self._weights("W", (self._n_rows, self._n_columns()))

    def _node_columns(self, nodes: np.ndarray) -> np.ndarray:
        """The columns of ``W`` scoring ``nodes``: the edge into each node (FLAT: the leaf's column)."""
        return np.asarray(nodes, dtype=np.int64) - 1

    def feature_contributions(self, batch: SparseBatch, nodes: list[np.ndarray]
                              ) -> list[list[tuple[np.ndarray, np.ndarray]]]:
        """Per document ``i`` and node ``c`` of ``nodes[i]``: ``(features, contributions)``, the features
        of the document as the model sees them (normalised; the bias feature is index ``n_features``)
        and ``x_f * W[f, column of c]`` in float64, whose sum is the node's score (the edge score the
        decoder uses)."""
        with self._predicting():
            X = self._prepare(batch)
            W = self._decode_W()
            out: list[list[tuple[np.ndarray, np.ndarray]]] = []
            for i, ns in enumerate(nodes):
                a, b = int(X.indptr[i]), int(X.indptr[i + 1])
                fi, fv = X.indices[a:b].astype(np.int64), X.data[a:b].astype(np.float64)
                cols = self._node_columns(ns)
                block = W[fi][:, cols]
                block = block.toarray() if sp.issparse(block) else np.asarray(block)
                contrib = fv[:, None] * block.astype(np.float64)
                out.append([(fi, contrib[:, j]) for j in range(len(cols))])
        return out

    # -- local (binary) training shared by FLAT and TREE --------------------------------------------
    def _binary_epoch(
        self,
        X: sp.csr_matrix,
        order: np.ndarray,
        phi2: np.ndarray,
        pos: np.ndarray,
        pos_ptr: np.ndarray,
        cols: np.ndarray | None = None,
        ycols: np.ndarray | None = None,
    ) -> dict[str, float]:
        """One epoch of independent PA-I classifiers, one per column of W.

        Without ``cols``: document ``i`` trains every column, positive for the columns
        ``pos[pos_ptr[i]:pos_ptr[i+1]]`` and negative for the others. With ``cols`` (SIB data):
        it trains only the columns ``cols[pos_ptr[i]:pos_ptr[i+1]]`` with targets ``ycols`` (+-1)
        at the same positions.
        """
        W = self._weights("W", (self._n_rows, self._n_columns()))
        C = self._C
        if _kernels.available():
            touched = np.zeros(W.shape[0], dtype=bool)
            out = _kernels.binary_epoch(X, order, W, phi2, pos, pos_ptr, C, cols=cols, ycols=ycols, touched=touched)
            self.__dict__["touched_rows_"] = touched
            return out
        self.__dict__["touched_rows_"] = None
        ncol = W.shape[1]
        indptr, indices, data = X.indptr, X.indices, X.data
        n_upd = n_bin = n_active = 0
        loss = 0.0
        y_all = np.empty(ncol, dtype=np.float64)
        for i in order:
            fi = indices[indptr[i] : indptr[i + 1]]
            fv = data[indptr[i] : indptr[i + 1]]
            lo, hi = pos_ptr[i], pos_ptr[i + 1]
            if cols is None:
                y_all.fill(-1.0)
                y_all[pos[lo:hi]] = 1.0
                u, lsum = pa_binary_step(W, fi, fv, float(phi2[i]), None, y_all, C)
                n_bin += ncol
            else:
                assert ycols is not None
                u, lsum = pa_binary_step(W, fi, fv, float(phi2[i]), cols[lo:hi], ycols[lo:hi], C)
                n_bin += hi - lo
            n_upd += u
            loss += lsum
            n_active += int(u > 0)
        return {
            "examples": float(len(order)),
            "updates": float(n_upd),
            "loss": loss,
            "binary_examples": float(n_bin),
            "examples_updated": float(n_active),
        }


# ------------------------------------------------------------------------------------------- FLAT
class FlatPA(_PAModel):
    """FLAT (Murawaki 2013, Sect. 3): one PA-I binary classifier per leaf label.

    Parameters
    ----------
    taxonomy : Taxonomy
        The model taxonomy (with virtual ``/_self`` leaves for partial-path data).
    n_features : int
    C : float or "auto", default 1.0
        PA-I aggressiveness. ``"auto"``: chosen among :data:`sparkhc.epochs.AUTO_C_GRID` on inner
        validation folds by :func:`sparkhc.spark.training.fit_model` (``sparkhc train``, the
        ``pyspark.ml`` estimator), which stores the chosen number; a direct :meth:`fit` needs a number.
    epochs : int, default 10
    dtype : {"float32", "float64"}, default "float32"
        Storage type of the weights.
    seed : int, default 0
        Shuffling seed used by :meth:`fit` when none is given.
    bias : float, default 0.0
        When ``> 0``, a constant feature of this value is appended to every document (one more,
        last, row of ``W``): each classifier gets a learned intercept. Not in the paper.
    normalize : {"off", "l2"}, default "off"
        ``"l2"`` (the configured default of ``sparkhc train`` and the ``pyspark.ml`` estimator,
        ``defaults.toml``): every document's feature vector is scaled to unit L2 norm before the
        bias is appended, in training and in decoding (:func:`unit_rows`; rows already of unit norm
        are kept bit for bit), so C means the same on any feature scale. ``"off"``: as given (the
        paper's model; models saved before this parameter existed load with it).

    State: ``W`` of shape ``(n_features, n_leaves)``, column ``j`` the classifier of leaf
    ``taxonomy.leaves[j]``. Decoding: every leaf with positive score, else the single best.

    Defaults: the class defaults (the Parameters above) are the paper's FLAT, the model the
    runners in ``experiments/`` and a directly built model get. The configured default, what ``sparkhc train``,
    the ``pyspark.ml`` estimator, ``sparkhc tune`` and :meth:`configured` build, sets
    ``[model.flat]`` of ``sparkhc/conf/defaults.toml`` on top of them.
    """

    name: ClassVar[str] = "flat"

    def _n_columns(self) -> int:
        return len(self._index.leaves)

    def _node_columns(self, nodes: np.ndarray) -> np.ndarray:
        return np.searchsorted(self._index.leaves, np.asarray(nodes, dtype=np.int64))

    def partial_fit(self, batch: SparseBatch, seed: int = 0, epoch: int = 0) -> dict[str, float]:
        """One PA-I epoch (Alg. 1) of every leaf classifier over ``batch`` in the order
        ``shuffled_order(len(batch), seed, epoch)``, starting from the current state."""
        self._start_epoch()
        X = self._prepare(batch)
        gold = self._gold(batch, X, None)
        col_of = np.full(self._index.n_nodes, -1, dtype=np.int64)
        col_of[self._index.leaves] = np.arange(len(self._index.leaves))
        pos = col_of[gold.leaves]
        order = shuffled_order(len(batch), seed, epoch)
        return self._binary_epoch(X, order, gold.phi2, pos, gold.leaves_ptr)

    def _decode_block(self, X: sp.csr_matrix, with_scores: bool) -> tuple[list[np.ndarray], np.ndarray | None]:
        S = self._scores_block(X)
        leaves = self._index.leaves
        sets = [leaves[c] for c in mask_to_sets(flat_select(S))]
        if not with_scores:
            return sets, None
        scores = np.full((X.shape[0], self._index.n_nodes), -np.inf, dtype=np.float32)
        scores[:, leaves] = S
        return sets, scores

    def decode(
        self, batch: SparseBatch, return_scores: bool = True
    ) -> tuple[list[np.ndarray], np.ndarray | None]:
        """Predicted leaf sets and per-node scores: the leaf classifiers' scores in the leaf
        columns, ``-inf`` elsewhere."""
        return super().decode(batch, return_scores)


# ------------------------------------------------------------------------------------------- TREE
class TreePA(_PAModel):
    """TREE (Murawaki 2013, Sect. 3.2): independent PA-I edge classifiers ``w_{p->c}``.

    Parameters
    ----------
    taxonomy, n_features, C, epochs, dtype, seed, bias
        As :class:`FlatPA`.
    data : {"all", "sib"}, default "all"
        ALL: ``w_{p->c}`` is trained on every document, positive iff it has a gold leaf under
        ``c``. SIB: only on documents with a gold leaf under ``p`` (the root: all documents).
    decoder : {"ls", "dp"}, default "dp"
        Top-down local search (Alg. 2) or exact dynamic programming (Alg. 3).

    State: ``W`` of shape ``(n_features, n_edges)``; column ``c - 1`` is the edge into node ``c``.
    Local classifiers are independent, so one epoch here equals one epoch of each edge's own
    Alg. 1 run in the shared shuffled order (the paper trains them in parallel).

    Defaults: the class defaults (the Parameters above) are the paper's TREE, the model the
    runners in ``experiments/`` and a directly built model get. The configured default, what ``sparkhc train``,
    the ``pyspark.ml`` estimator, ``sparkhc tune`` and :meth:`configured` build, sets
    ``[model.tree]`` of ``sparkhc/conf/defaults.toml`` on top of them.
    """

    name: ClassVar[str] = "tree"
    defaults: ClassVar[dict[str, Any]] = {**_PAModel.defaults, "data": "all", "decoder": "dp"}

    def validate_params(self) -> None:
        super().validate_params()
        self._check_param("data", self.params["data"] in ("all", "sib"), "'all' or 'sib'")
        self._check_param("decoder", self.params["decoder"] in ("ls", "dp"), "'ls' or 'dp'")

    def partial_fit(self, batch: SparseBatch, seed: int = 0, epoch: int = 0) -> dict[str, float]:
        """One PA-I epoch of every edge classifier over ``batch`` (order
        ``shuffled_order(len(batch), seed, epoch)``), starting from the current state."""
        self._start_epoch()
        X = self._prepare(batch)
        gold = self._gold(batch, X, None)
        idx = self._index
        pos = gold.nodes - 1
        order = shuffled_order(len(batch), seed, epoch)
        if self.params["data"] == "all":
            return self._binary_epoch(X, order, gold.phi2, pos, gold.nodes_ptr)
        cols, cols_ptr, ycols = self._sib_columns(gold, idx)
        return self._binary_epoch(X, order, gold.phi2, cols, cols_ptr, cols=cols, ycols=ycols)

    @staticmethod
    def _sib_columns(gold: GoldSets, idx: TreeIndex) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per document: the edges out of the root and out of every internal node of tree(m)
        (``cols[cols_ptr[i]:cols_ptr[i+1]]``) and their targets (+1 iff the edge is in tree(m))."""
        n = len(gold.nodes_ptr) - 1
        nrow = np.repeat(np.arange(n), np.diff(gold.nodes_ptr))
        internal = ~idx.is_leaf[gold.nodes]
        par_doc = np.concatenate([np.arange(n), nrow[internal]])
        par = np.concatenate([np.zeros(n, np.int64), gold.nodes[internal]])
        o = np.argsort(par_doc, kind="stable")
        par_doc, par = par_doc[o], par[o]
        cnt = idx.n_children[par]
        first_edge = idx.first_child[par] - 1
        total = int(cnt.sum())
        # concatenate the ranges [first_edge, first_edge + cnt) without a Python loop
        starts = np.repeat(first_edge - np.concatenate([[0], np.cumsum(cnt)[:-1]]), cnt)
        cols = starts + np.arange(total)
        cols_ptr = np.concatenate([[0], np.cumsum(np.bincount(par_doc, weights=cnt, minlength=n))]).astype(
            np.int64
        )
        col_doc = np.repeat(par_doc, cnt)
        gold_key = nrow * idx.n_nodes + gold.nodes
        col_key = col_doc * idx.n_nodes + cols + 1
        ycols = np.where(np.isin(col_key, gold_key), 1.0, -1.0)
        return cols.astype(np.int64), cols_ptr, ycols

    def _decode_block(self, X: sp.csr_matrix, with_scores: bool) -> tuple[list[np.ndarray], np.ndarray | None]:
        S = self._scores_block(X)
        idx = self._index
        if self.params["decoder"] == "ls":
            sel = local_search_mask(idx, S)
        else:
            sel = dp_solve(idx, S).selected
        if not with_scores:
            return mask_to_sets(sel & idx.is_leaf), None
        scores = np.zeros((X.shape[0], idx.n_nodes), dtype=np.float32)
        scores[:, 1:] = S
        return mask_to_sets(sel & idx.is_leaf), scores


# ----------------------------------------------------------------------------------------- GLOBAL
class GlobalPA(_PAModel):
    """GT (Murawaki 2013, Sect. 4.4, Alg. 5): the global model trained by structured PA-I.

    ``score(x, m) = sum_{p->c in tree(m)} w_{p->c}.phi(x)`` (+ branching terms). Per example:
    ``m^ = DP(x; w)``; cost ``rho = 1 - 2|m & m^| / (|m| + |m^|)`` on leaf sets; if ``m^ != m``:
    ``l = score(m^) - score(m) + sqrt(rho)``, skipped when ``l <= 0``; ``Delta = Phi(x, m) -
    Phi(x, m^)`` touches only the edges in the symmetric difference of ``tree(m)`` and ``tree(m^)``
    (``+phi`` on gold-only edges, ``-phi`` on predicted-only ones) and the branching indicators
    that differ; ``||Delta||^2 = |tree(m) ^ tree(m^)| ||phi||^2 + ||Delta_BF||^2``;
    ``tau = min(C, l / ||Delta||^2)`` (PA-I; ``pa="II"``: ``l / (||Delta||^2 + 1 / (2C))``);
    ``w += tau Delta``.

    Parameters
    ----------
    taxonomy, n_features, C, epochs, dtype, seed, bias
        As :class:`FlatPA`.
    branching : bool, default False
        Branching features (Sect. 4.3): at every internal node of ``tree(m)`` (root included)
        with ``k`` children chosen, one node-specific and one shared indicator of the bucket
        ``1, ..., R, >R`` of ``k``.
    R : int, default 3
        Number of explicit branching buckets.
    update : {"prediction", "cost_augmented"}, default "prediction"
        ``"prediction"`` is Alg. 5 as published (``m^`` = the prediction, margin ``sqrt(rho)``).
        ``"cost_augmented"`` (an extension, not in the paper): ``m^ = argmax_m score(x, m) +
        margin * |tree(m) ^ tree(m_gold)|`` -- the same DP on edge scores shifted by ``+margin`` off
        the gold tree and ``-margin`` on it -- and ``l = score(m^) - score(m) + margin *
        |tree(m) ^ tree(m^)|``: the most violated Hamming-margin constraint, so a correctly
        classified example still updates until it clears the margin (as a hinge-loss SVM does).
    margin : float, default 1.0
        The per-edge Hamming margin of ``update="cost_augmented"`` (unused otherwise).
    margin_rare : float, default 0.0
        Label-frequency-aware margins (an extension, with ``update="cost_augmented"``): a gold
        edge ``e`` the prediction misses costs ``margin * (n_max / n_e) ** margin_rare`` instead of
        ``margin`` (:func:`rare_margins`), where ``n_e`` counts the training documents whose gold
        tree holds ``e`` and ``n_max`` is the largest such count; a predicted edge off the gold
        tree still costs ``margin``. So the edges into rare labels must clear a larger margin on
        their positives (the cost-sensitive Hamming loss; cf. the label-distribution-aware margins
        ``~ n^(-1/4)`` of Cao et al. 2019), which raises their recall; frequent edges keep
        ``margin``, and ``0`` is the plain Hamming margin. The counts are kept in the state
        (``edge_counts``): a fresh state takes them from the first epoch's documents, so with
        parameter mixing the first epoch's shards use their own counts and every later epoch the
        mean over the shards (the same ratios as the global counts).
    pa : {"I", "II"}, default "I"
        The step size. ``"I"``: PA-I (Alg. 5), ``tau = min(C, l / ||Delta||^2)`` (linear slack,
        hinge loss). ``"II"`` (an extension, not in the paper): PA-II (Crammer et al. 2006),
        ``tau = l / (||Delta||^2 + 1 / (2C))`` (squared slack, as the squared hinge of LIBLINEAR's
        default SVM).
    average : bool, default False
        Averaged weights (the averaged perceptron of Collins 2002, for PA): the model predicts
        with the mean of the weights after every training example of every epoch instead of the
        last weights. Kept with the lazy-update trick (Daume 2006): ``Wa`` accumulates every
        update multiplied by its time ``t_e + j / n`` (``t_e`` the epochs completed before it,
        ``j`` its 0-based position among the ``n`` examples of the shard's epoch) and ``t``
        counts the epochs, so that the average is ``W - Wa / t``. Every state array changes only
        where ``W`` changes (row-sparse deltas) and mixes by the mean, so with iterative
        parameter mixing the average is the time average of the mixed trajectory (each shard's
        epoch spread over the same unit of time); with one shard it equals Collins' average
        over the ``t * n`` examples exactly.

    layout : {"dense", "sparse", "auto"}, default "dense"
        How ``W`` (and ``Wa``) are stored. ``"dense"``: an array of ``features x edges`` (the
        paper's model). ``"sparse"`` (memory that grows with the documents, not with ``features x
        edges``): a CSR matrix of the model restricted to a support, every other weight being zero
        and staying zero. The support of an epoch over a batch: the pairs (feature ``f``, edge
        ``e``) with ``f`` in a document of the batch whose gold tree holds ``e`` (stored as zeros
        first when missing), and every stored weight (so every non-zero one). A predicted-only
        edge's update changes only the weights in it, and ``||Delta||^2`` counts only those
        coordinates: the exact PA step of the restricted model, whose scores and DP decoding are
        exact. Serial training is so the model restricted to the training set's support; with
        parameter mixing a shard's epoch is restricted to its documents' support plus every
        weight the mixed model has learned (the mean of the shards' CSR matrices: zero entries
        may be dropped, they come back from the documents that support them). ``"auto"``: sparse
        when the dense weights would take more than :data:`AUTO_SPARSE_BYTES` (4 GiB), dense
        otherwise. A dense layout larger than the machine's memory is refused in one line, before
        allocating.

    init : {"zero", "edges"}, default "zero"
        The first epoch of a fresh state (an extension, not in the paper). ``"zero"``: a PA epoch
        from zero weights (Alg. 5). ``"edges"``: every edge's column of ``W`` is set to its binary
        L2-loss SVM on the epoch's documents under the edge's parent, solved in batch by dual
        coordinate descent to LIBLINEAR's tolerance (:mod:`sparkhc.edge_init`); the PA epochs follow
        from there. With parameter mixing every shard solves its own documents' problems and the
        mixing averages them. The sparse layout, and a state that is not fresh (a warm start), start
        with a PA epoch.
    init_C : float, default 1.0
        The edge SVMs' C (``init = "edges"``; LIBLINEAR's default).

    State: ``W`` ``(n_features, n_edges)`` and, with branching, ``bf`` ``(n_nodes + 1, R + 1)``;
    with ``average``, also ``Wa`` (and ``bfa``) of the same shapes and ``t`` of shape ``(1,)``.
    In the sparse layout ``W`` and ``Wa`` are scipy CSR matrices of that shape, on one pattern.

    Defaults: the class defaults (the Parameters above) are the paper's GT (Alg. 5, C = 1), the model the
    runners in ``experiments/`` and a directly built model get. The configured default, what ``sparkhc train``,
    the ``pyspark.ml`` estimator, ``sparkhc tune`` and :meth:`configured` build, sets
    ``[model.global]`` of ``sparkhc/conf/defaults.toml`` on top of them.
    """

    name: ClassVar[str] = "global"
    defaults: ClassVar[dict[str, Any]] = {
        **_PAModel.defaults, "branching": False, "R": 3, "update": "prediction", "margin": 1.0, "pa": "I",
        "average": False, "margin_rare": 0.0, "layout": "dense", "init": "zero", "init_C": 1.0,
        "solver": "pa", "passes": 5,
    }

    def validate_params(self) -> None:
        super().validate_params()
        self._check_param("branching", isinstance(self.params["branching"], bool | np.bool_), "a bool")
        R = self.params["R"]
        self._check_param("R", _is_int(R) and int(R) >= 1, "an int >= 1")
        self._check_param("update", self.params["update"] in ("prediction", "cost_augmented"),
                          "'prediction' or 'cost_augmented'")
        m = self.params["margin"]
        self._check_param("margin", _is_real(m) and math.isfinite(float(m)) and float(m) > 0,
                          "a float in the range (0, inf)")
        self._check_param("pa", self.params["pa"] in ("I", "II"), "'I' or 'II'")
        self._check_param("average", isinstance(self.params["average"], bool | np.bool_), "a bool")
        r = self.params["margin_rare"]
        self._check_param("margin_rare", _is_real(r) and math.isfinite(float(r)) and float(r) >= 0,
                          "a float >= 0")
        self._check_param("layout", self.params["layout"] in ("dense", "sparse", "auto"),
                          "'dense', 'sparse' or 'auto'")
        self._check_param("init", self.params["init"] in ("zero", "edges"), "'zero' or 'edges'")
        ic = self.params["init_C"]
        self._check_param("init_C", _is_real(ic) and math.isfinite(float(ic)) and float(ic) > 0,
                          "a float in the range (0, inf)")
        self._check_param("solver", self.params["solver"] in ("pa", "dcd"), "'pa' or 'dcd'")
        ps = self.params["passes"]
        self._check_param("passes", _is_int(ps) and int(ps) >= 1, "an int >= 1")
        if self.params["solver"] == "dcd":
            why = [f"{k} = {self.params[k]!r}" for k, bad in (
                ("update", self.params["update"] != "cost_augmented"), ("average", bool(self.params["average"])),
                ("layout", self.params["layout"] == "sparse"), ("init", self.params["init"] != "zero")) if bad]
            if why:
                raise ModelError(f"model 'global': solver = 'dcd' trains with update = 'cost_augmented', average = "
                                 f"false, a dense layout and init = 'zero'; got {', '.join(why)}")

    @property
    def _sparse(self) -> bool:
        """Whether a fresh state stores ``W`` (and ``Wa``) in the sparse layout: ``layout="sparse"``,
        or ``"auto"`` with dense weights of more than :data:`AUTO_SPARSE_BYTES`."""
        lay = self.params["layout"]
        if lay == "auto":
            size = self._n_rows * self._index.n_edges * self._dtype.itemsize * self._dense_copies()
            return size > AUTO_SPARSE_BYTES
        return bool(lay == "sparse")

    def _dense_copies(self) -> int:
        return 2 if self._avg else 1

    def _layout_hint(self) -> str:
        return ('; set model.global.layout = "sparse" (`--set model.global.layout=sparse`: weights only for '
                'the feature/edge pairs the training documents hold)')

    @property
    def _pa2(self) -> bool:
        """Whether steps are PA-II (squared slack) rather than PA-I."""
        return self.params["pa"] == "II"

    @property
    def _aug(self) -> float:
        """The Hamming margin of cost-augmented updates (0 = prediction-based, Alg. 5)."""
        return float(self.params["margin"]) if self.params["update"] == "cost_augmented" else 0.0

    @property
    def _R(self) -> int | None:
        return int(self.params["R"]) if self.params["branching"] else None

    @property
    def _rare(self) -> float:
        """The exponent of the label-frequency-aware margins (0: one Hamming margin for every edge,
        and always 0 without cost-augmented updates)."""
        return float(self.params["margin_rare"]) if self._aug > 0 else 0.0

    @property
    def _avg(self) -> bool:
        return bool(self.params["average"])

    def init_state(self) -> ModelState:
        if self._sparse:
            self.validate_params()
            shape = (self._n_rows, self._index.n_edges)
            state = ModelState({"W": sp.csr_matrix(shape, dtype=self._dtype)}, {}, "mean")
        else:
            state = super().init_state()
        R = self._R
        if R is not None:
            state.arrays["bf"] = np.zeros((self._index.n_nodes + 1, R + 1), dtype=self._dtype)
        if self._rare > 0:
            state.arrays["edge_counts"] = np.zeros(self._index.n_edges, dtype=np.float64)
        if self._avg:
            W = state.arrays["W"]
            state.arrays["Wa"] = sp.csr_matrix(W.shape, dtype=W.dtype) if sp.issparse(W) else np.zeros_like(W)
            if R is not None:
                state.arrays["bfa"] = np.zeros_like(state.arrays["bf"])
            state.arrays["t"] = np.zeros(1, dtype=np.float64)
        return state

    def _avg_arrays(self) -> tuple[Any, np.ndarray | None, np.ndarray | None]:
        """``(Wa, bfa, t)`` of an averaging model's state (``None`` without ``average``; ``Wa`` a CSR
        matrix in the sparse layout)."""
        if not self._avg:
            return None, None, None
        Wa = self._weights("Wa", (self._n_rows, self._index.n_edges), sparse_ok=True)
        R = self._R
        bfa = self._weights("bfa", (self._index.n_nodes + 1, R + 1)) if R is not None else None
        return Wa, bfa, self._weights("t", (1,))

    def averaged_arrays(self) -> dict[str, np.ndarray]:
        """The weights the model predicts with: ``W`` (and ``bf``), or with ``average`` their
        averages ``W - Wa / t`` (``bf - bfa / t``), in the weights' dtype."""
        W = self._weights("W", (self._n_rows, self._index.n_edges), sparse_ok=True)
        bf = self._bf()
        out = {"W": W} if bf is None else {"W": W, "bf": bf}
        Wa, bfa, t = self._avg_arrays()
        if t is None or float(t[0]) <= 0:
            return out
        f = 1.0 / float(t[0])
        out["W"] = (W - Wa * W.dtype.type(f)).astype(W.dtype, copy=False)
        if bf is not None and bfa is not None:
            out["bf"] = (bf - bfa * bf.dtype.type(f)).astype(bf.dtype, copy=False)
        return out

    @contextmanager
    def _predicting(self) -> Iterator[None]:
        """Within it the decoders use the weights the model predicts with (the averaged ones with
        ``average``: :meth:`_decode_W`, :meth:`_decode_bf`)."""
        self.__dict__["_eff"] = self.averaged_arrays() if self._avg else None
        try:
            yield
        finally:
            self.__dict__.pop("_eff", None)

    def decode(
        self, batch: SparseBatch, return_scores: bool = True
    ) -> tuple[list[np.ndarray], np.ndarray | None]:
        """Predicted leaf sets and per-node scores (the edge scores; see :class:`_PAModel`), with
        the averaged weights when ``average``."""
        with self._predicting():
            return super().decode(batch, return_scores)

    def decode_picked(self, batch: SparseBatch) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """:meth:`_PAModel.decode_picked` with the weights :meth:`decode` uses (averaged with ``average``)."""
        with self._predicting():
            return super().decode_picked(batch)

    def model_size(self, tol: float = 1e-7) -> int:
        """Number of weights the model predicts with whose ``|w| > tol``."""
        return sum(int(np.count_nonzero(np.abs(v.data if sp.issparse(v) else v) > tol))
                   for v in self.averaged_arrays().values())

    # -- per-edge offsets (train.calibrate, sparkhc.calibration) ---------------------------------
    def edge_scores_of(self, batch: SparseBatch) -> np.ndarray:
        """The edge scores ``(n_docs, n_edges)`` (float64) the model decodes ``batch`` with (the
        averaged weights with ``average``); with :meth:`decode_bf`, the input of the exact DP."""
        with self._predicting():
            return np.asarray(self._scores_block(self._prepare(batch)), dtype=np.float64)

    def decode_bf(self) -> np.ndarray | None:
        """The branching weights the model decodes with (averaged with ``average``; None without
        branching features)."""
        return self.averaged_arrays().get("bf") if self._R is not None else None

    def supports_edge_offsets(self) -> bool:
        """Per-edge offsets live in the bias weights: with a bias feature (``bias > 0``)."""
        return float(self.params.get("bias", 0.0)) > 0

    def shift_edges(self, offsets: np.ndarray) -> None:
        """Add ``offsets[e]`` to the score of edge ``e`` for every document, through the bias
        weights (``W[bias row, e] += offsets[e] / bias``): the model stays an ordinary state and
        its exact DP decodes the shifted scores. Needs ``bias > 0``."""
        bias = float(self.params["bias"])
        if bias <= 0:
            raise ModelError(f"model {self.name!r}: per-edge offsets live in the bias weights; they need bias > 0 "
                             f"(model.global.bias), not {bias}")
        off = np.asarray(offsets, dtype=np.float64)
        if off.shape != (self._index.n_edges,):
            raise ModelError(f"model {self.name!r}: {off.shape} offsets for {self._index.n_edges} edges")
        if not np.isfinite(off).all():
            raise ModelError(f"model {self.name!r}: non-finite edge offsets")
        W = self._weights("W", (self._n_rows, self._index.n_edges), sparse_ok=True)
        add = (off / bias).astype(W.dtype)
        if sp.issparse(W):  # the bias row's entries: every edge (float32 sums, as the dense row's)
            n_e = self._index.n_edges
            row = sp.csr_matrix((add, (np.full(n_e, self.n_features), np.arange(n_e))), shape=W.shape)
            new = (W + row).tocsr()
            new.sort_indices()
            _set_csr(W, new.data, new.indices, new.indptr)
        else:
            W[self.n_features] += add

    def _decode_W(self) -> Any:
        """The weights decoding uses: the averaged ones while :meth:`decode` runs with averaging."""
        eff = self.__dict__.get("_eff")
        return eff["W"] if eff is not None else self._weights("W", (self._n_rows, self._index.n_edges), sparse_ok=True)

    def _scores_block(self, X: sp.csr_matrix) -> np.ndarray:
        return _edge_scores(X, self._decode_W())

    def _decode_bf(self) -> np.ndarray | None:
        eff = self.__dict__.get("_eff")
        return eff.get("bf") if eff is not None else self._bf()

    def _bf(self) -> np.ndarray | None:
        R = self._R
        if R is None:
            return None
        return self._weights("bf", (self._index.n_nodes + 1, R + 1))

    def partial_fit(self, batch: SparseBatch, seed: int = 0, epoch: int = 0) -> dict[str, float]:
        """One epoch of Alg. 5 over ``batch`` in the order ``shuffled_order(len(batch), seed,
        epoch)``, starting from the current state (the shard step of Alg. 6).

        Returns counters: ``examples``, ``updates``, ``loss`` (sum of ``l`` over updated
        examples), ``cost`` (sum of ``rho``), ``exact`` (examples with ``m^ = m``), ``tau`` (sum
        of step sizes). An example whose ``||Delta||`` is 0 (an empty document without branching
        features) adds its loss but cannot update.
        """
        self._start_epoch()
        X = self._prepare(batch)
        R = self._R
        gold = self._gold(batch, X, R)
        idx = self._index
        W = self._weights("W", (self._n_rows, idx.n_edges), sparse_ok=True)
        bf = self._bf()
        Wa, bfa, t = self._avg_arrays()
        if sp.issparse(W):  # the batch's support joins the stored entries (Wa on the same pattern)
            _share_pattern([W] if Wa is None else [W, Wa], self._support(batch, X, gold))
        t0 = float(t[0]) if t is not None else 0.0
        C = self._C
        order = shuffled_order(len(batch), seed, epoch)
        mpos = None
        if self._rare > 0:
            counts = self._weights("edge_counts", (idx.n_edges,))
            if not counts.any():  # a fresh state: this batch's gold edge counts
                counts[:] = np.bincount(gold.nodes - 1, minlength=idx.n_edges)
            mpos = rare_margins(counts, self._aug, self._rare)
        if self.params["solver"] == "dcd":
            return self._dcd_round(batch, X, gold, W, bf, mpos, seed, epoch)
        if self.params["init"] == "edges" and int(epoch) == 0 and not sp.issparse(W) and not W.any():
            out = self._edge_init(X, gold, W, seed)
            if t is not None:
                t[0] = t0 + 1.0
            return out
        if _kernels.available():
            touched = np.zeros(W.shape[0], dtype=bool)
            out = _kernels.gt_epoch(X, order, W, bf, R if R is not None else 3, idx, gold, C, touched=touched,
                                    aug=self._aug, pa2=self._pa2, Wa=Wa, bfa=bfa, t0=t0, mpos=mpos)
            self.__dict__["touched_rows_"] = touched
        elif sp.issparse(W):  # the numpy reference: dense copies, the stored entries as a mask
            self.__dict__["touched_rows_"] = None
            check_dense_fits(self.name, W.shape, W.dtype, self._dense_copies(),
                             " (the sparse layout trains without dense copies in the compiled kernels: "
                             "pip install numba)")
            Wd = W.toarray()
            Wad = Wa.toarray() if Wa is not None else None
            mask = _pattern_mask(W)
            out = self._gt_epoch_numpy(X, order, Wd, bf, R, idx, gold, C, self._aug, self._pa2, Wad, bfa, t0, mpos,
                                       support=mask)
            _store_dense(W, Wd, Wa, Wad, mask)
        else:
            self.__dict__["touched_rows_"] = None
            out = self._gt_epoch_numpy(X, order, W, bf, R, idx, gold, C, self._aug, self._pa2, Wa, bfa, t0, mpos)
        if t is not None:
            t[0] = t0 + 1.0
        return out

    @property
    def keeps_shard_memory(self) -> str:
        return "model.global.solver = 'dcd'" if self.params["solver"] == "dcd" else ""

    def _dcd_round(self, batch: SparseBatch, X: sp.csr_matrix, gold: GoldSets, W: Any, bf: np.ndarray | None,
                   mpos: np.ndarray | None, seed: int, epoch: int) -> dict[str, float]:
        """One round of ``solver = "dcd"`` (:func:`sparkhc.struct_dcd.dcd_round`) over ``batch``:
        the oracle at the current weights, then ``passes`` passes over the working sets kept in
        :attr:`shard_memory`; the counters carry the shard's part of the duality gap."""
        if sp.issparse(W):
            raise ModelError("model 'global': solver = 'dcd' needs the dense layout; these weights are sparse "
                             "(layout = 'auto' chose it for their size): set model.global.layout = 'dense' or "
                             "solver = 'pa'")
        idx = self._index
        aug = self._aug
        margins = struct_dcd.Margins(mpos if mpos is not None else np.full(idx.n_edges, aug), aug)
        problem = struct_dcd.Problem(X, gold, idx, self._R)
        touched = np.zeros(W.shape[0], dtype=bool)
        mem = self.shard_memory if isinstance(self.shard_memory, struct_dcd.WorkingSets) else None
        sigma = float(self.step_scale)
        ws, out = struct_dcd.dcd_round(problem, W, bf, mem, margins, float(self.params["C"]), sigma,
                                       sigma / max(1, int(self.n_shards)), int(self.params["passes"]),
                                       (int(seed), int(epoch), 7), touched)
        self.shard_memory = ws
        self.__dict__["touched_rows_"] = touched
        out["examples"] = float(X.shape[0])
        return out

    def _edge_init(self, X: sp.csr_matrix, gold: GoldSets, W: np.ndarray, seed: int) -> dict[str, float]:
        """The first epoch of a fresh dense model with ``init = "edges"``: every edge's column of
        ``W`` from its binary L2-loss SVM on the shard's documents (:mod:`sparkhc.edge_init`, C =
        ``init_C``), branching weights left at zero; the counters of a PA epoch (no update) plus the
        solver's (``init_*``)."""
        idx = self._index
        probs = edge_problems(gold.nodes, gold.nodes_ptr, idx.parent, idx.n_children, idx.first_child)
        sol = solve_edges(X, probs, W, float(self.params["init_C"]), seed=int(seed))
        touched = np.zeros(W.shape[0], dtype=bool)
        touched[X.indices] = True
        self.__dict__["touched_rows_"] = touched
        out = {"examples": float(X.shape[0]), "updates": 0.0, "loss": 0.0, "cost": 0.0, "exact": 0.0, "tau": 0.0}
        out.update(sol.counters())
        return out

    @staticmethod
    def _gt_epoch_numpy(
        X: sp.csr_matrix,
        order: np.ndarray,
        W: np.ndarray,
        bf: np.ndarray | None,
        R: int | None,
        idx: TreeIndex,
        gold: GoldSets,
        C: float,
        aug: float = 0.0,
        pa2: bool = False,
        Wa: np.ndarray | None = None,
        bfa: np.ndarray | None = None,
        t0: float = 0.0,
        mpos: np.ndarray | None = None,
        support: np.ndarray | None = None,
    ) -> dict[str, float]:
        """The numpy reference of one GT epoch (also used when numba is absent); ``pa2``: PA-II
        steps ``tau = l / (||Delta||^2 + 1 / (2C))`` instead of PA-I ``min(C, l / ||Delta||^2)``;
        ``Wa``/``bfa`` (averaging): every update is also added to them multiplied by its time
        ``t0 + j / len(order)`` (``j`` the example's 0-based position in ``order``); ``mpos``
        (with ``aug > 0``): the margin of each edge when it is a missed gold edge (``margin_rare``),
        ``aug`` that of a predicted edge off the gold tree. ``support`` (bool, the shape of ``W``;
        the sparse layout): the weights that exist, the others staying zero: an update changes only
        those, and ``||Delta||^2`` counts only the coordinates in it."""
        use_mpos = mpos is not None and aug > 0.0
        bf_flat = bf.reshape(-1) if bf is not None else None
        bfa_flat = bfa.reshape(-1) if bfa is not None else None
        n_order = len(order)
        n_nodes = idx.n_nodes
        leaves = idx.leaves
        internal = ~idx.is_leaf
        indptr, indices, data = X.indptr, X.indices, X.data
        g_leaves, g_lptr = gold.leaves, gold.leaves_ptr
        g_nodes, g_nptr = gold.nodes, gold.nodes_ptr
        g_bf, g_bptr = gold.bf, gold.bf_ptr
        phi2 = gold.phi2
        n_upd = n_exact = 0
        loss_sum = cost_sum = tau_sum = 0.0
        gm = np.zeros(n_nodes, dtype=bool)
        Rb = R if R is not None else 3
        for j, i in enumerate(order):
            a, b = indptr[i], indptr[i + 1]
            fi = indices[a:b]
            fv = data[a:b]
            s = row_scores(W, fi, fv)
            gn = g_nodes[g_nptr[i] : g_nptr[i + 1]]
            gm.fill(False)
            gm[0] = True
            gm[gn] = True
            if use_mpos:  # per-edge margins of missed gold edges: computed in float64 (as the kernel)
                assert mpos is not None
                s_aug = (s + np.where(gm[1:], -mpos, aug)).astype(s.dtype)
                sel, _, kk = dp_solve_one(idx, s_aug, bf, Rb)
            elif aug > 0.0:  # cost-augmented: shift the edge scores by the Hamming margin
                s_aug = s + np.where(gm[1:], -aug, aug).astype(s.dtype)
                sel, _, kk = dp_solve_one(idx, s_aug, bf, Rb)
            else:
                sel, _, kk = dp_solve_one(idx, s, bf, Rb)
            diff = sel != gm
            if not diff.any():  # tree(m^) = tree(m): m^ = m, no loss
                n_exact += 1
                continue
            gl = g_leaves[g_lptr[i] : g_lptr[i + 1]]
            n_pred = int(np.count_nonzero(sel[leaves]))
            inter = int(np.count_nonzero(sel[gl]))
            rho = 1.0 - 2.0 * inter / (gl.size + n_pred)
            plus = np.flatnonzero(diff & gm)  # gold-only nodes: their edges get +phi
            minus = np.flatnonzero(diff & sel)  # predicted-only nodes: -phi
            s64 = s.astype(np.float64)
            margin = float(s64[minus - 1].sum() - s64[plus - 1].sum())
            bf_n2 = 0.0
            if bf_flat is not None:
                assert kk is not None and g_bf is not None and g_bptr is not None and R is not None
                u, net = bf_difference(g_bf[g_bptr[i] : g_bptr[i + 1]], sel, kk, internal, R)
                margin -= float(bf_flat[u].astype(np.float64) @ net)
                bf_n2 = float(net @ net)
            if use_mpos:
                assert mpos is not None
                loss = margin + (float(mpos[plus - 1].sum()) + aug * minus.size)
            else:
                loss = margin + (aug * (plus.size + minus.size) if aug > 0.0 else math.sqrt(rho))
            cost_sum += rho
            if loss <= 0.0:
                continue
            loss_sum += loss
            fv64 = fv.astype(np.float64)
            if support is not None:  # the coordinates of Delta that exist
                keep = support[fi[:, None], np.concatenate([plus, minus]) - 1]
                norm2 = float(((fv64 * fv64)[:, None] * keep).sum()) + bf_n2
            else:
                norm2 = (plus.size + minus.size) * float(phi2[i]) + bf_n2
            if norm2 <= 0.0:
                continue
            tau = loss / (norm2 + 0.5 / C) if pa2 else min(C, loss / norm2)
            tau_sum += tau
            n_upd += 1
            tw = t0 + j / n_order
            if fi.size:
                cols = np.concatenate([plus, minus]) - 1
                sign = np.concatenate([np.full(plus.size, tau), np.full(minus.size, -tau)])
                upd = np.multiply.outer(fv64, sign)
                if support is not None:
                    upd *= keep
                W[fi[:, None], cols] += upd
                if Wa is not None:
                    Wa[fi[:, None], cols] += upd * tw
            if bf_flat is not None and bf_n2 > 0:
                bf_flat[u] += tau * net
                if bfa_flat is not None:
                    bfa_flat[u] += tau * net * tw
        return {
            "examples": float(len(order)),
            "updates": float(n_upd),
            "loss": loss_sum,
            "cost": cost_sum,
            "exact": float(n_exact),
            "tau": tau_sum,
        }

    def _fused_decode(self, X: sp.csr_matrix) -> list[tuple[np.ndarray, np.ndarray]] | None:
        """The sparse layout's decoding fused per document (:func:`sparkhc.kernels.csr_decode`: the
        same leaf sets and scores, no ``(documents x edges)`` block); None where it does not apply
        (the dense layout, or no compiled kernels)."""
        W = self._decode_W()
        if not (sp.issparse(W) and _kernels.available()):
            return None
        R = self._R
        return _kernels.csr_decode(X, W, self._index, self._decode_bf(), R if R is not None else 3)

    def _decode_picked_block(self, X: sp.csr_matrix) -> tuple[list[np.ndarray], list[np.ndarray]]:
        fused = self._fused_decode(X)
        if fused is None:
            return super()._decode_picked_block(X)
        return [m for m, _ in fused], [s for _, s in fused]

    def _decode_block(self, X: sp.csr_matrix, with_scores: bool) -> tuple[list[np.ndarray], np.ndarray | None]:
        if not with_scores:
            fused = self._fused_decode(X)
            if fused is not None:
                return [m for m, _ in fused], None
        S = self._scores_block(X)
        idx = self._index
        R = self._R
        res = dp_solve(idx, S, bf=self._decode_bf(), R=R if R is not None else 3, with_k=False)
        if not with_scores:
            return res.leaf_sets(idx), None
        scores = np.zeros((X.shape[0], idx.n_nodes), dtype=np.float32)
        scores[:, 1:] = S
        return res.leaf_sets(idx), scores
