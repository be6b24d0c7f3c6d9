"""Distributed decoding: every partition decodes its documents with the broadcast model.

Output rows: ``doc_id``, ``pred_labels`` (deepest predicted labels, virtual leaves mapped back),
``pred_scores`` (the score of each predicted label's node, aligned), the gold ``labels`` when the
features have them, ``split``, ``fold``, ``model_version``, ``pred_pref_labels`` (the labels shown
for ``pred_labels``, e.g. a SKOS vocabulary's preferred labels; null without). The labels are
concepts: a polyhierarchy's positions are mapped back (:meth:`sparkhc.taxonomy.Taxonomy.concept_predictions`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame

from sparkhc.batch import DOC_ID, FOLD, LABELS, SPLIT, SparseBatch
from sparkhc.models.base import HierModel
from sparkhc.persistence import state_from_bytes, state_to_bytes

PRED_LABELS = "pred_labels"
PRED_SCORES = "pred_scores"
MODEL_VERSION = "model_version"
PRED_PREF_LABELS = "pred_pref_labels"

PRED_SCHEMA = pa.schema(
    [
        (DOC_ID, pa.string()),
        (PRED_LABELS, pa.list_(pa.string())),
        (PRED_SCORES, pa.list_(pa.float32())),
        (LABELS, pa.list_(pa.string())),
        (SPLIT, pa.string()),
        (FOLD, pa.int32()),
        (MODEL_VERSION, pa.string()),
        (PRED_PREF_LABELS, pa.list_(pa.string())),
    ]
)
PRED_DDL = (
    f"{DOC_ID} string, {PRED_LABELS} array<string>, {PRED_SCORES} array<float>, "
    f"{LABELS} array<string>, {SPLIT} string, {FOLD} int, {MODEL_VERSION} string, "
    f"{PRED_PREF_LABELS} array<string>"
)


def decode_batch(model: HierModel, batch: SparseBatch) -> tuple[list[list[str]], list[list[float]]]:
    """Label names and aligned scores for every document of ``batch``."""
    leaf_sets, picked = model.decode_picked(batch)
    tax = model.taxonomy
    labels: list[list[str]] = []
    out_scores: list[list[float]] = []
    for m, sc in zip(leaf_sets, picked, strict=True):
        m = np.asarray(m, dtype=np.int64)
        order = np.argsort([tax.real_id(int(c)) for c in m], kind="stable")
        labels.append([tax.names[tax.real_id(int(m[j]))] for j in order])
        out_scores.append([float(sc[j]) for j in order])
    return labels, out_scores


def make_predict_fn(
    model_name: str,
    params: dict[str, Any],
    taxonomy: Any,
    n_features: int,
    state_bc: Any,
    version: str,
    with_counts: bool = False,
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from sparkhc.models import get_model_class

        model = get_model_class(model_name)(taxonomy, n_features, **params)
        model.set_state(state_from_bytes(state_bc.value))
        yield from predict_batches(model, version, batches, with_counts)

    return run


def predict_batches(model: HierModel, version: str, batches: Iterable[pa.RecordBatch],
                    with_counts: bool = False) -> Iterator[pa.RecordBatch]:
    """Prediction rows (:data:`PRED_SCHEMA`) of features record batches: the executors' step, also
    run in the driver (:mod:`sparkhc.spark.smalljobs`)."""
    n_features = model.n_features
    for rb in batches:
        if rb.num_rows == 0:
            continue
        batch = SparseBatch.from_arrow(rb, n_features, with_counts=with_counts, extra_columns=(SPLIT, FOLD))
        labels, scores = decode_batch(model, batch)
        names = rb.schema.names
        tax = model.taxonomy  # positions -> concepts (a polyhierarchy), and the labels shown
        labels, scores = tax.concept_predictions(labels, scores)
        gold: Any = rb.column(LABELS) if LABELS in names else [None] * rb.num_rows
        if tax.is_polyhierarchy and LABELS in names:
            gold = tax.concept_labels(rb.column(LABELS).to_pylist())
        yield pa.RecordBatch.from_pydict(
            {
                DOC_ID: rb.column(DOC_ID),
                PRED_LABELS: labels,
                PRED_SCORES: scores,
                LABELS: gold,
                SPLIT: rb.column(SPLIT) if SPLIT in names else [None] * rb.num_rows,
                FOLD: rb.column(FOLD).cast(pa.int32()) if FOLD in names else [None] * rb.num_rows,
                MODEL_VERSION: [version] * rb.num_rows,
                PRED_PREF_LABELS: tax.display_names(labels) or pa.nulls(rb.num_rows, pa.list_(pa.string())),
            },
            schema=PRED_SCHEMA,
        )


def predict_df(features: DataFrame, model: HierModel, version: str) -> DataFrame:
    """Decode every row of a features DataFrame in parallel with the broadcast model."""
    sc = features.sparkSession.sparkContext
    bc = sc.broadcast(state_to_bytes(model.get_state()))
    # models that read raw term counts (e.g. fmm, hcm, wbm, cos) get the features' counts column too
    with_counts = model.needs_counts
    fn = make_predict_fn(model.name, model.params, model.taxonomy, model.n_features, bc, version, with_counts)
    return features.mapInArrow(fn, PRED_DDL)
