"""Small slices of real corpora for the conformance suite, built with the product's core code
(corpus registry and readers, FeatureSpec, class spaces, model_taxonomy): no Spark."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from typing import Any

import numpy as np
import pyarrow as pa
import scipy.sparse as sp

from sparkhc.batch import DOC_ID, LABELS, SPLIT, TEXT, TOKENS, SparseBatch
from sparkhc.features import FEATURES_ARROW_SCHEMA, model_taxonomy
from sparkhc.models import get_model_class
from sparkhc.models.base import HierModel
from sparkhc.taxonomy import Taxonomy
from sparkhc.text.spec import FeatureSpec
from tests.conftest import corpus_dir

N_TRAIN = 200
N_TEST = 80


@dataclass
class Slice:
    """A train and a test batch over one taxonomy (``spaces``: class-space names for MDC)."""

    taxonomy: Taxonomy
    train: SparseBatch
    test: SparseBatch
    n_features: int
    spaces: list[str] | None = None

    def features_table(self) -> pa.Table:
        """The training documents in the features layout (what Spark training reads)."""
        return batch_table(self.train)


def _featurize(train: pa.Table, test: pa.Table) -> tuple[SparseBatch, SparseBatch, int]:
    spec = FeatureSpec.from_params({"min_df": 2, "max_df": 0.5})

    def tokens(table: pa.Table) -> list[list[str]]:
        texts = table.column(TEXT).to_pylist() if TEXT in table.column_names else [None] * table.num_rows
        toks = table.column(TOKENS).to_pylist() if TOKENS in table.column_names else [None] * table.num_rows
        return [spec.tokenize_document(t, k) for t, k in zip(texts, toks, strict=True)]

    tr_tokens = tokens(train)
    fitted = spec.fit_documents(tr_tokens)

    def batch(table: pa.Table, toks: list[list[str]]) -> SparseBatch:
        off, idx, val, cnt = fitted.transform_many(toks)
        shape = (table.num_rows, fitted.n_features)
        X = sp.csr_matrix((val, idx, off), shape=shape)
        C = sp.csr_matrix((cnt, idx, off), shape=shape)
        return SparseBatch(X=X, doc_ids=np.asarray(table.column(DOC_ID).to_pylist(), dtype=object),
                           labels=[list(x or []) for x in table.column(LABELS).to_pylist()], counts=C)

    return batch(train, tr_tokens), batch(test, tokens(test)), fitted.n_features


def _sorted(table: pa.Table) -> pa.Table:
    return table.sort_by(DOC_ID)


def hier_slice() -> Slice:
    """The first documents (by id) of RCV1-v2: a depth-4 tree whose internal nodes are labels."""
    from sparkhc.corpus import readers, registry

    root = corpus_dir("rcv1v2_subset")
    info = registry.get_corpus("rcv1v2_subset")
    tax = info.load_taxonomy(root)
    batches, _ = info.read(root, taxonomy=tax)
    table = _sorted(readers.to_table(batches)).slice(0, N_TRAIN + N_TEST)
    train, test = table.slice(0, N_TRAIN), table.slice(N_TRAIN, N_TEST)
    tr, te, n_features = _featurize(train, test)
    return Slice(tax, tr, te, n_features)


def mdc_slice() -> Slice:
    """Reuters-21578 ModApte documents with one topic and one place (5 kept values + other each)."""
    from sparkhc.class_spaces import ClassSpaces
    from sparkhc.corpus import readers, registry

    root = corpus_dir("reuters21578")
    info = registry.get_corpus("reuters21578")
    spaces = ClassSpaces.load(str(resources.files("sparkhc") / "conf" / "mdc_reuters21578.toml"))
    batches, report = info.read(root, labels_from=spaces.candidate_labels)
    table = _sorted(readers.to_table(batches))
    split = np.asarray(table.column(SPLIT).to_pylist(), dtype=object)
    fitted = spaces.fit(table.column(LABELS).to_pylist(), split == "train")
    table = fitted.apply_table(table, report)
    split = np.asarray(table.column(SPLIT).to_pylist(), dtype=object)
    train = table.take(np.flatnonzero(split == "train")[:N_TRAIN])
    test = table.take(np.flatnonzero(split == "test")[:N_TEST])
    tr, te, n_features = _featurize(train, test)
    return Slice(fitted.taxonomy(), tr, te, n_features, spaces=list(spaces.names))


def small_params(cls: Any) -> dict[str, Any]:
    """Keep the iterative batch solvers short (the suite checks behaviour, not convergence)."""
    return {"max_iter": 5} if cls.training in ("em", "batch") and "max_iter" in cls.defaults else {}


#: parameter variants that change how a model stores or trains its state, checked as cases of
#: their own next to each registered name's default (``case`` ids ``name-variant``)
VARIANTS: dict[str, dict[str, dict[str, Any]]] = {
    "global": {"sparse": {"layout": "sparse"}},  # issue 33: CSR weights of the support
}


def cases(names: list[str]) -> list[Any]:
    """``(name, params)`` for every name (its defaults) and every variant of :data:`VARIANTS`, as
    pytest params with readable ids."""
    import pytest

    out = [pytest.param(n, {}, id=n) for n in names]
    for n in names:
        out += [pytest.param(n, p, id=f"{n}-{v}") for v, p in VARIANTS.get(n, {}).items()]
    return out


def new_model(name: str, data: Slice, **params: Any) -> HierModel:
    """A fresh model for the slice, on the model taxonomy ``sparkhc train`` would use."""
    cls = get_model_class(name)
    tax = model_taxonomy(data.taxonomy, data.train.labels or [], self_leaves=not cls.native_partial_paths)
    model: HierModel = cls(tax, data.n_features, **{**small_params(cls), **params})
    return model


def batch_table(batch: SparseBatch) -> pa.Table:
    """A batch in the features layout (no split, fold or label ids)."""
    X = batch.X.tocsr()
    C = batch.counts.tocsr() if batch.counts is not None else X
    n = X.shape[0]

    def lists(data: np.ndarray, dtype: pa.DataType) -> pa.ListArray:
        return pa.ListArray.from_arrays(pa.array(X.indptr.astype(np.int32)), pa.array(data, type=dtype))

    cols = {
        "doc_id": pa.array([str(d) for d in batch.doc_ids], type=pa.string()),
        "split": pa.nulls(n, type=pa.string()),
        "fold": pa.nulls(n, type=pa.int32()),
        "labels": pa.array(batch.labels or [[] for _ in range(n)], type=pa.list_(pa.string())),
        "label_ids": pa.nulls(n, type=pa.list_(pa.int32())),
        "indices": lists(X.indices.astype(np.int32), pa.int32()),
        "values": lists(X.data.astype(np.float32), pa.float32()),
        "counts": lists(C.data.astype(np.float32), pa.float32()),
    }
    return pa.Table.from_pydict(cols).cast(FEATURES_ARROW_SCHEMA)
