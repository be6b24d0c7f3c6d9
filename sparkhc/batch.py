"""SparseBatch: what every model consumes.

A batch holds CSR features (float32, one row per document), the documents' ids and, when known,
their gold label sets as label names. Build it from an Arrow table or record batch in the
documented features layout (``indices`` array<int32>, ``values`` array<float32>, ``labels``
array<string>) with :func:`SparseBatch.from_arrow`: no Python object per row is created for the
features.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from sparkhc.errors import SchemaError
from sparkhc.taxonomy import Taxonomy

if TYPE_CHECKING:  # scipy is imported where it is used: the readers import this module's names
    import scipy.sparse as sp

# Column names of the raw-documents and features layouts: defined here once (the Spark side
# re-exports them from sparkhc.spark.schemas).
DOC_ID = "doc_id"
SPLIT = "split"
FOLD = "fold"
LABELS = "labels"
LABEL_IDS = "label_ids"
INDICES = "indices"
VALUES = "values"
COUNTS = "counts"
# raw documents (the input of featurize)
TEXT = "text"
TOKENS = "tokens"
#: The other name of the document id accepted in raw documents by every verb (featurize,
#: reclassify): a record may carry ``doc_id`` or ``id`` (the README's format), or both when they
#: are equal; the features and predictions always name it ``doc_id``.
ID_ALIAS = "id"
#: ``SparseBatch.extra`` column (2-D, one row per document): node scores that replace the gold
#: labels as the supervision of the models that accept them (the Xiao et al. models: a document
#: is labeled when its row has a positive score, e.g. the weak labels of dataless classification;
#: set by :func:`sparkhc.spark.training.fit_subsets`)
NODE_SCORES = "node_scores"


@dataclass
class SparseBatch:
    """A block of documents.

    Attributes
    ----------
    X : scipy.sparse.csr_matrix, float32, shape (n_docs, n_features)
        Weighted (usually L2-normalised) features.
    doc_ids : ndarray of str
    labels : list of list of str, or None
        Gold label names as given (ancestors may or may not be listed).
    counts : csr_matrix or None
        Raw term counts (same sparsity pattern) for the generative models.
    extra : dict
        Other columns carried along (e.g. ``split``, ``fold``) as numpy arrays.
    """

    X: sp.csr_matrix
    doc_ids: np.ndarray
    labels: list[list[str]] | None = None
    counts: sp.csr_matrix | None = None
    extra: dict[str, np.ndarray] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.X.shape[0] != len(self.doc_ids):
            raise ValueError("X and doc_ids have different lengths")
        if self.labels is not None and len(self.labels) != len(self.doc_ids):
            raise ValueError("labels and doc_ids have different lengths")

    def __len__(self) -> int:
        return int(self.X.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.X.shape[1])

    def subset(self, rows: np.ndarray | Sequence[int]) -> SparseBatch:
        rows = np.asarray(rows, dtype=np.int64)
        return SparseBatch(
            X=self.X[rows],
            doc_ids=self.doc_ids[rows],
            labels=None if self.labels is None else [self.labels[i] for i in rows],
            counts=None if self.counts is None else self.counts[rows],
            extra={k: v[rows] for k, v in self.extra.items()},
        )

    @staticmethod
    def concat(batches: Sequence[SparseBatch]) -> SparseBatch:
        import scipy.sparse as sp

        if not batches:
            raise ValueError("no batches to concatenate")
        labels = None
        if all(b.labels is not None for b in batches):
            labels = [lab for b in batches for lab in (b.labels or [])]
        counts = None
        if all(b.counts is not None for b in batches):
            counts = sp.vstack([b.counts for b in batches], format="csr")
        keys = set.intersection(*(set(b.extra) for b in batches))
        return SparseBatch(
            X=sp.vstack([b.X for b in batches], format="csr"),
            doc_ids=np.concatenate([b.doc_ids for b in batches]),
            labels=labels,
            counts=counts,
            extra={k: np.concatenate([b.extra[k] for b in batches]) for k in keys},
        )

    # ------------------------------------------------------------------ labels
    def label_matrix(self, taxonomy: Taxonomy, closed: bool = True) -> sp.csr_matrix:
        """Binary CSR (n_docs, n_nodes) of the gold labels; with ``closed`` the ancestor closure
        (tree(m)), root excluded. Unknown labels raise an error naming the label and document."""
        if self.labels is None:
            raise ValueError("this batch has no labels")
        return label_matrix(self.labels, taxonomy, closed=closed, doc_ids=self.doc_ids)

    def leaf_sets(self, taxonomy: Taxonomy) -> list[np.ndarray]:
        """Gold leaf sets ``m`` in ``taxonomy`` (virtual ``/_self`` leaves for partial paths)."""
        if self.labels is None:
            raise ValueError("this batch has no labels")
        # documents share few distinct label lists (20 Newsgroups: 20 in 11,314 documents): map each
        # list once (a training calls this every epoch; per document it was most of the epoch's time)
        seen: dict[tuple[str, ...], np.ndarray] = {}
        out = []
        for i, labs in enumerate(self.labels):
            key = tuple(labs)
            m = seen.get(key)
            if m is None:
                try:
                    m = seen[key] = taxonomy.to_leaf_set(labs)
                except Exception as e:  # name the document
                    raise type(e)(f"document {self.doc_ids[i]!r}: {e}") from None
                m.setflags(write=False)  # shared by the documents with this label list
            out.append(m)
        return out

    # ------------------------------------------------------------------ arrow
    @classmethod
    def from_arrow(
        cls,
        table: pa.Table | pa.RecordBatch,
        n_features: int,
        with_counts: bool = False,
        extra_columns: Sequence[str] = (),
        source: str = "features",
    ) -> SparseBatch:
        """Build a batch from the features layout without per-row Python objects."""
        import scipy.sparse as sp

        names = set(table.schema.names)
        for col in (DOC_ID, INDICES, VALUES):
            if col not in names:
                raise SchemaError(
                    f"{source}: column {col!r} is missing (columns: {sorted(names)}); expected the "
                    "features layout written by 'sparkhc featurize'"
                )
        n = table.num_rows
        ind_col = _flat_list(table.column(INDICES) if isinstance(table, pa.Table) else table.column(INDICES))
        val_col = _flat_list(table.column(VALUES) if isinstance(table, pa.Table) else table.column(VALUES))
        offsets, indices = ind_col
        voffsets, values = val_col
        if not np.array_equal(offsets, voffsets):
            raise SchemaError(f"{source}: 'indices' and 'values' lists have different lengths in some row")
        if indices.size and (indices.min() < 0 or indices.max() >= n_features):
            bad = int(np.flatnonzero((indices < 0) | (indices >= n_features))[0])
            row = int(np.searchsorted(offsets, bad, side="right") - 1)
            raise SchemaError(
                f"{source}: row {row}: feature index {int(indices[bad])} outside [0, {n_features})"
            )
        if values.size and not np.all(np.isfinite(values)):
            bad = int(np.flatnonzero(~np.isfinite(values))[0])
            row = int(np.searchsorted(offsets, bad, side="right") - 1)
            raise SchemaError(f"{source}: row {row}: non-finite feature value {float(values[bad])}")
        X = sp.csr_matrix(
            (values.astype(np.float32, copy=False), indices.astype(np.int32, copy=False), offsets),
            shape=(n, n_features),
        )
        counts = None
        if with_counts:
            if COUNTS not in names:
                raise SchemaError(f"{source}: column {COUNTS!r} (raw counts) is missing")
            coffsets, cvalues = _flat_list(table.column(COUNTS))
            if not np.array_equal(coffsets, offsets):
                raise SchemaError(f"{source}: 'counts' and 'indices' lists differ in length")
            counts = sp.csr_matrix(
                (cvalues.astype(np.float32, copy=False), indices.astype(np.int32, copy=False), offsets),
                shape=(n, n_features),
            )
        doc_ids = np.asarray(table.column(DOC_ID).to_pylist(), dtype=object).astype(str)
        labels = None
        if LABELS in names:
            labels = [list(x) if x is not None else [] for x in table.column(LABELS).to_pylist()]
        extra = {c: np.asarray(table.column(c).to_pylist()) for c in extra_columns if c in names}
        return cls(X=X, doc_ids=doc_ids, labels=labels, counts=counts, extra=extra)


def _flat_list(col: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(offsets int64, flat values) of a list column, nulls treated as empty lists."""
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    if col.null_count:
        col = col.fill_null(pa.scalar([], type=col.type))
    if pa.types.is_large_list(col.type):
        col = col.cast(pa.list_(col.type.value_type))
    offsets = np.asarray(col.offsets, dtype=np.int64)
    flat = col.flatten() if col.offset == 0 else col.values.slice(offsets[0], offsets[-1] - offsets[0])
    offsets = offsets - offsets[0]
    return offsets, np.asarray(flat.to_numpy(zero_copy_only=False))


def label_matrix(
    labels: Sequence[Sequence[str]],
    taxonomy: Taxonomy,
    closed: bool = True,
    doc_ids: Sequence[str] | np.ndarray | None = None,
) -> sp.csr_matrix:
    """Binary CSR (n_docs, n_nodes) of label-name sets; ancestor-closed when ``closed``."""
    rows: list[int] = []
    cols: list[int] = []
    for i, labs in enumerate(labels):
        for name in labs:
            if name not in taxonomy:
                who = f"document {doc_ids[i]!r}" if doc_ids is not None else f"row {i}"
                raise SchemaError(f"{who}: label {name!r} is not a node of the taxonomy {taxonomy.source}")
            rows.append(i)
            cols.append(taxonomy.id(name))
    return _node_matrix(np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64), len(labels), taxonomy, closed)


def _node_matrix(rows: np.ndarray, cols: np.ndarray, n_docs: int, taxonomy: Taxonomy, closed: bool) -> sp.csr_matrix:
    """Binary CSR (n_docs, n_nodes) with ones at (rows, cols), ancestor-closed when ``closed``."""
    import scipy.sparse as sp

    m = sp.csr_matrix((np.ones(len(rows), dtype=np.float32), (rows, cols)), shape=(n_docs, taxonomy.n_nodes))
    if closed:
        m = m @ taxonomy.ancestor_matrix()
    m.data[:] = 1.0
    m.sum_duplicates()
    m.data[:] = 1.0
    m.eliminate_zeros()
    return m.tocsr()


def leaf_matrix(leaf_sets: Sequence[np.ndarray], taxonomy: Taxonomy) -> sp.csr_matrix:
    """Binary CSR (n_docs, n_nodes) of predicted leaf sets (node ids of ``taxonomy``, virtual
    leaves included), ancestor-closed, root excluded: the matrix :func:`label_matrix` gives for the
    label names of :meth:`sparkhc.models.base.HierModel.predict` (virtual leaves map to their
    parent, whose closure is the same), without the round trip through names."""
    sizes = np.fromiter((len(m) for m in leaf_sets), dtype=np.int64, count=len(leaf_sets))
    ids = np.concatenate([np.asarray(m, dtype=np.int64) for m in leaf_sets]) if sizes.sum() else np.zeros(0, np.int64)
    parent = np.asarray(taxonomy.parent, dtype=np.int64)
    real = np.where(np.asarray(taxonomy.virtual, dtype=bool)[ids], parent[ids], ids)
    return _node_matrix(np.repeat(np.arange(len(leaf_sets)), sizes), real, len(leaf_sets), taxonomy, True)
