"""Distributed decoding: every partition decodes its documents with the broadcast model.

Output rows: ``doc_id``, ``pred_labels`` (deepest predicted labels, virtual leaves mapped back),
``pred_scores`` (the score of each predicted label's node, aligned), the gold ``labels`` when the
features have them, ``split``, ``fold``, ``model_version``, ``pred_pref_labels`` (the labels shown
for ``pred_labels``, e.g. a SKOS vocabulary's preferred labels; null without). The labels are
concepts: a polyhierarchy's positions are mapped back (:meth:`sparkhc.taxonomy.Taxonomy.concept_predictions`).
With ``predict --top K`` a ``suggestions`` column holds the ``K`` best labels not predicted, with their
calibrated score and margin, and ``pred_calibrated`` the calibrated scores of ``pred_labels``
(:mod:`sparkhc.suggestions`); with ``--explain N`` an ``explanations``
column holds, for each predicted label, its ``N`` largest feature contributions (:mod:`sparkhc.explain`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame

from sparkhc.batch import DOC_ID, FOLD, LABELS, SPLIT, SparseBatch
from sparkhc.errors import ModelError
from sparkhc.models.base import HierModel
from sparkhc.persistence import state_from_bytes, state_to_bytes
from sparkhc.suggestions import SuggestionCalibration

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


SUGGESTIONS = "suggestions"
PRED_CALIBRATED = "pred_calibrated"
EXPLANATIONS = "explanations"
SUGGESTION_TYPE = pa.list_(pa.struct([("label", pa.string()), ("score", pa.float64()), ("margin", pa.float32()),
                                      ("pref_label", pa.string())]))
EXPLANATION_TYPE = pa.list_(pa.struct([("label", pa.string()), ("score", pa.float64()), ("bias", pa.float64()),
                                       ("features", pa.list_(pa.string())),
                                       ("contributions", pa.list_(pa.float64()))]))
SUGGESTION_DDL = f"{SUGGESTIONS} array<struct<label:string,score:double,margin:float,pref_label:string>>"
EXPLANATION_DDL = (f"{EXPLANATIONS} array<struct<label:string,score:double,bias:double,features:array<string>,"
                   "contributions:array<double>>>")


@dataclass(frozen=True)
class PredictExtras:
    """What ``predict`` adds to its rows: ``top`` suggestions per document scored by ``calibration``,
    and the ``explain`` largest feature contributions of every predicted label, named by ``vocabulary``."""

    top: int = 0
    explain: int = 0
    calibration: SuggestionCalibration | None = None
    vocabulary: tuple[str, ...] | None = None

    def __bool__(self) -> bool:
        return self.top > 0 or self.explain > 0


def pred_schema(extras: PredictExtras | None = None) -> pa.Schema:
    """:data:`PRED_SCHEMA` with the columns ``extras`` adds."""
    schema = PRED_SCHEMA
    if extras is not None and extras.top > 0:
        schema = schema.append(pa.field(SUGGESTIONS, SUGGESTION_TYPE)).append(
            pa.field(PRED_CALIBRATED, pa.list_(pa.float64())))
    if extras is not None and extras.explain > 0:
        schema = schema.append(pa.field(EXPLANATIONS, EXPLANATION_TYPE))
    return schema


def pred_ddl(extras: PredictExtras | None = None) -> str:
    """:data:`PRED_DDL` with the columns ``extras`` adds (the order of :func:`pred_schema`)."""
    parts = [PRED_DDL]
    if extras is not None and extras.top > 0:
        parts += [SUGGESTION_DDL, f"{PRED_CALIBRATED} array<double>"]
    if extras is not None and extras.explain > 0:
        parts.append(EXPLANATION_DDL)
    return ", ".join(parts)


def check_extras(model_name: str, meta: dict[str, Any], top: int = 0, explain: int = 0, where: str = "") -> None:
    """Refuse, in one line, ``--top`` / ``--explain`` that a model (its registry name and metadata)
    cannot give: read before any document is (``where``: the model's location). A taxonomy too large
    for suggestions has no calibration record but the reason (:func:`sparkhc.suggestions.too_large`)."""
    from sparkhc.models import get_model_class

    if top < 0 or explain < 0:
        raise ModelError(f"--top and --explain take a count >= 0, not {top if top < 0 else explain}")
    name = f"model {where}" if where else f"model {model_name!r}"
    if top > 0:
        rec = ((meta.get("training") or {}).get("calibration") or {}).get("suggestions")
        if not isinstance(rec, dict) or "margins" not in rec:
            why = rec.get("skipped") if isinstance(rec, dict) else (
                "it was trained without suggestion calibration (the global model with train.calibrate = auto and an "
                "epoch selection, or train.calibrate = on, fits it)")
            raise ModelError(f"predict --top: {name} has no calibrated suggestion scores: {why}")
    if explain > 0 and not get_model_class(model_name).explains:
        raise ModelError(f"predict --explain: {name} ({model_name!r}) has no per-feature contributions; the "
                         "linear models flat, tree and global do")


def predict_extras(model: HierModel, meta: dict[str, Any], top: int = 0, explain: int = 0,
                   vocabulary: tuple[str, ...] | None = None, where: str = "") -> PredictExtras:
    """The :class:`PredictExtras` of ``--top`` / ``--explain`` for a loaded model and its metadata;
    a model that cannot give them is refused in one line (:func:`check_extras`)."""
    from sparkhc import suggestions

    check_extras(model.name, meta, top, explain, where)
    calib = None
    if top > 0:
        why = suggestions.too_large(model.taxonomy.n_edges)
        if why:
            raise ModelError(f"predict --top: {f'model {where}' if where else model.name}: {why}")
        calib = SuggestionCalibration.from_dict(meta["training"]["calibration"]["suggestions"])
    return PredictExtras(int(top), int(explain), calib, vocabulary if explain > 0 else None)


def decoded_batch(model: HierModel, batch: SparseBatch
             ) -> tuple[list[np.ndarray], list[list[str]], list[list[float]]]:
    """The decoded leaf sets (ids, in label order), label names and aligned scores of ``batch``."""
    leaf_sets, picked = model.decode_picked(batch)
    tax = model.taxonomy
    leaves: list[np.ndarray] = []
    labels: list[list[str]] = []
    out_scores: list[list[float]] = []
    for m, sc in zip(leaf_sets, picked, strict=True):
        m = np.asarray(m, dtype=np.int64)
        order = np.argsort([tax.real_id(int(c)) for c in m], kind="stable")
        leaves.append(m[order])
        labels.append([tax.names[tax.real_id(int(m[j]))] for j in order])
        out_scores.append([float(sc[j]) for j in order])
    return leaves, labels, out_scores


def decode_batch(model: HierModel, batch: SparseBatch) -> tuple[list[list[str]], list[list[float]]]:
    """Label names and aligned scores for every document of ``batch``."""
    _, labels, scores = decoded_batch(model, batch)
    return labels, scores


def suggestion_rows(model: HierModel, batch: SparseBatch, leaves: list[np.ndarray], labels: list[list[str]],
                    extras: PredictExtras) -> tuple[list[list[dict[str, Any]]], list[list[float]]]:
    """The ``suggestions`` of every document (the ``extras.top`` concepts not in its decoded tree,
    ``leaves``, with the highest margins, and their calibrated scores) and the calibrated scores of
    its predicted labels (``labels``, aligned: concept names, or node names of the model taxonomy)."""
    from sparkhc.decoding import tree_index
    from sparkhc.suggestions import concept_margins, top_candidates

    assert extras.calibration is not None
    tax = model.taxonomy
    idx = tree_index(tax)
    chosen = np.stack([idx.closure(m) for m in leaves]) if leaves else np.zeros((0, tax.n_nodes), dtype=bool)
    S = model.edge_scores_of(batch)  # type: ignore[attr-defined]
    margins, is_chosen, cc = concept_margins(tax, S, model.decode_bf(), int(model.params.get("R", 3)),  # type: ignore[attr-defined]
                                             chosen=chosen)
    col = {name: j for j, name in enumerate(cc.names)}
    sugg, conf = [], []
    for i, row in enumerate(top_candidates(margins, is_chosen, extras.top)):
        scores = extras.calibration.score([m for _, m in row])
        sugg.append([{"label": cc.names[j], "score": float(q), "margin": float(m),
                      "pref_label": tax.display_name(cc.names[j]) if tax.has_display_names else None}
                     for (j, m), q in zip(row, scores, strict=True)])
        js = [col[n] if n in col else col[tax.concept_name(tax.id(n))] for n in labels[i]]  # concepts or positions
        conf.append([float(q) for q in extras.calibration.score(margins[i, js])])
    return sugg, conf


def explanation_rows(model: HierModel, batch: SparseBatch, leaves: list[np.ndarray], labels: list[list[str]],
                     concept_labels: list[list[str]], extras: PredictExtras) -> list[list[dict[str, Any]]]:
    """The ``explanations`` of every document, one per predicted label (``concept_labels``, in order):
    the explanation of the decoded leaf behind it (of a polyhierarchy's concept, its position with the
    highest score)."""
    from sparkhc.explain import explain

    tax = model.taxonomy
    contrib = model.feature_contributions(batch, leaves)
    out = []
    for per_leaf, names, concepts in zip(contrib, labels, concept_labels, strict=True):
        best: dict[str, dict[str, Any]] = {}
        for (fi, c), name in zip(per_leaf, names, strict=True):
            e = explain(fi, c, extras.explain, model.n_features, extras.vocabulary)
            concept = tax.concept_name(tax.id(name))
            if concept not in best or e.score > best[concept]["score"]:
                best[concept] = {"label": concept, "score": e.score, "bias": e.bias, "features": e.features,
                                 "contributions": e.contributions}
        out.append([best[c] for c in concepts])
    return out


def make_predict_fn(
    model_name: str,
    params: dict[str, Any],
    taxonomy: Any,
    n_features: int,
    state_bc: Any,
    version: str,
    with_counts: bool = False,
    extras_bc: Any = None,
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from sparkhc.models import get_model_class

        model = get_model_class(model_name)(taxonomy, n_features, **params)
        model.set_state(state_from_bytes(state_bc.value))
        yield from predict_batches(model, version, batches, with_counts,
                                   extras_bc.value if extras_bc is not None else None)

    return run


def predict_batches(model: HierModel, version: str, batches: Iterable[pa.RecordBatch],
                    with_counts: bool = False, extras: PredictExtras | None = None) -> Iterator[pa.RecordBatch]:
    """Prediction rows (:func:`pred_schema` of ``extras``) of features record batches: the executors'
    step, also run in the driver (:mod:`sparkhc.spark.smalljobs`)."""
    n_features = model.n_features
    schema = pred_schema(extras)
    for rb in batches:
        if rb.num_rows == 0:
            continue
        batch = SparseBatch.from_arrow(rb, n_features, with_counts=with_counts, extra_columns=(SPLIT, FOLD))
        leaves, pos_labels, pos_scores = decoded_batch(model, batch)
        names = rb.schema.names
        tax = model.taxonomy  # positions -> concepts (a polyhierarchy), and the labels shown
        labels, scores = tax.concept_predictions(pos_labels, pos_scores)
        gold: Any = rb.column(LABELS) if LABELS in names else [None] * rb.num_rows
        if tax.is_polyhierarchy and LABELS in names:
            gold = tax.concept_labels(rb.column(LABELS).to_pylist())
        cols: dict[str, Any] = {
            DOC_ID: rb.column(DOC_ID),
            PRED_LABELS: labels,
            PRED_SCORES: scores,
            LABELS: gold,
            SPLIT: rb.column(SPLIT) if SPLIT in names else [None] * rb.num_rows,
            FOLD: rb.column(FOLD).cast(pa.int32()) if FOLD in names else [None] * rb.num_rows,
            MODEL_VERSION: [version] * rb.num_rows,
            PRED_PREF_LABELS: tax.display_names(labels) or pa.nulls(rb.num_rows, pa.list_(pa.string())),
        }
        if extras is not None and extras.top > 0:
            cols[SUGGESTIONS], cols[PRED_CALIBRATED] = suggestion_rows(model, batch, leaves, labels, extras)
        if extras is not None and extras.explain > 0:
            cols[EXPLANATIONS] = explanation_rows(model, batch, leaves, pos_labels, labels, extras)
        yield pa.RecordBatch.from_pydict(cols, schema=schema)


def predict_df(features: DataFrame, model: HierModel, version: str, extras: PredictExtras | None = None) -> DataFrame:
    """Decode every row of a features DataFrame in parallel with the broadcast model."""
    sc = features.sparkSession.sparkContext
    bc = sc.broadcast(state_to_bytes(model.get_state()))
    ebc = sc.broadcast(extras) if extras else None
    # models that read raw term counts (e.g. fmm, hcm, wbm, cos) get the features' counts column too
    with_counts = model.needs_counts
    fn = make_predict_fn(model.name, model.params, model.taxonomy, model.n_features, bc, version, with_counts, ebc)
    return features.mapInArrow(fn, pred_ddl(extras))
