"""A predictions folder (the output of ``sparkhc predict``): its layout, owned here, and its
metadata read without Spark.

Layout: ``<folder>/data/`` (:data:`PRED_DATA_DIR`: Parquet rows ``doc_id``, ``labels``, and the
predicted labels and scores) and ``<folder>/_MODEL.json`` (:data:`PRED_META_FILE`, written by
:func:`prediction_meta`'s dict: the model, its version and taxonomy, the features and the
selection). :func:`sparkhc.spark.pipelines.predict` writes it, ``sparkhc evaluate`` checks it before
Spark starts (:func:`evaluation_inputs`), :func:`sparkhc.spark.pipelines.evaluate` and
:func:`sparkhc.report.collect` read it through this module."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sparkhc import fsio
from sparkhc.errors import ModelError, SchemaError
from sparkhc.features import TAXONOMY_FILE, features_taxonomy
from sparkhc.taxonomy import Taxonomy

PRED_META_FILE = "_MODEL.json"
#: the folder of the prediction rows (Parquet)
PRED_DATA_DIR = "data"


def data_location(predictions: str | Path) -> str:
    """Where the prediction rows of ``predictions`` are (a path, or a URI with its query kept)."""
    return fsio.child(predictions, PRED_DATA_DIR)


def prediction_meta(*, model_dir: str | Path, model_version: str, model_meta: dict[str, Any],
                    features: str | Path | None, selection: dict[str, Any], documents: int, seconds: float,
                    input_path: str | Path | None = None) -> dict[str, Any]:
    """The ``_MODEL.json`` of a predictions folder (``features``: the features folder decoded, or
    None for raw documents read from ``input_path``; the folder then holds the model's taxonomy)."""
    return {
        "model_dir": fsio.absolute(model_dir), "model_version": model_version, "model": model_meta["model"],
        "taxonomy_fingerprint": model_meta["taxonomy_fingerprint"],
        "features": fsio.absolute(features) if features is not None else None,
        "input": fsio.absolute(input_path) if input_path is not None else None,
        "selection": selection, "documents": documents, "scored_labels": model_meta.get("scored_labels"),
        "seconds": round(seconds, 2),
    }


def read_prediction_meta(predictions: str | Path) -> tuple[fsio.Folder, dict[str, Any]]:
    """The folder and the ``_MODEL.json`` of a predictions folder (a local path or a URI)."""
    folder = fsio.Folder(predictions)
    if not folder.is_file(PRED_META_FILE):
        raise SchemaError(f"{folder.name}: not a predictions folder ({PRED_META_FILE} missing)")
    try:
        pmeta: dict[str, Any] = json.loads(folder.read_text(PRED_META_FILE))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise SchemaError(f"{folder.where(PRED_META_FILE)}: corrupt prediction metadata ({e})") from None
    return folder, pmeta


def evaluation_inputs(predictions: str | Path, features: str | Path | None = None
                      ) -> tuple[fsio.Folder, dict[str, Any], str | None, Taxonomy]:
    """What an evaluation of ``predictions`` reads besides the prediction rows: the folder, its
    metadata, the features folder (``features`` or the one the predictions were made from; None for
    predictions of raw documents, whose folder holds the taxonomy) and its taxonomy, checked to be
    the predictions' taxonomy. The taxonomy returned is that of the concepts the predictions name
    (:meth:`~sparkhc.taxonomy.Taxonomy.concept_taxonomy`: a polyhierarchy's concept DAG, whose
    closure is over every parent)."""
    folder, pmeta = read_prediction_meta(predictions)
    feats = str(features) if features is not None else pmeta.get("features")
    if feats is None:
        if not folder.is_file(TAXONOMY_FILE):
            raise SchemaError(f"{folder.name}: predictions of raw documents without {TAXONOMY_FILE}; pass --features")
        taxonomy = Taxonomy.from_tsv_text(folder.read_text(TAXONOMY_FILE), source=folder.where(TAXONOMY_FILE))
        where = folder.where(TAXONOMY_FILE)
    else:
        taxonomy = features_taxonomy(feats)
        where = str(feats)
    if taxonomy.fingerprint() != pmeta["taxonomy_fingerprint"]:
        raise ModelError(f"{folder.name}: predictions use taxonomy {pmeta['taxonomy_fingerprint']}, "
                         f"{where} has {taxonomy.fingerprint()}")
    return folder, pmeta, feats, taxonomy.concept_taxonomy()
