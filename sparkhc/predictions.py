"""A predictions folder (the output of ``sparkhc predict``), read without Spark: its metadata
``_MODEL.json`` and the features folder it is evaluated against. ``sparkhc evaluate`` checks these
before Spark starts; :func:`sparkhc.spark.pipelines.evaluate` reads them the same way."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sparkhc import fsio
from sparkhc.errors import ModelError, SchemaError
from sparkhc.features import features_taxonomy
from sparkhc.taxonomy import Taxonomy

PRED_META_FILE = "_MODEL.json"


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
                      ) -> tuple[fsio.Folder, dict[str, Any], str, Taxonomy]:
    """What an evaluation of ``predictions`` reads besides the prediction rows: the folder, its
    metadata, the features folder (``features`` or the one the predictions were made from) and its
    taxonomy, checked to be the predictions' taxonomy."""
    folder, pmeta = read_prediction_meta(predictions)
    feats = str(features) if features is not None else str(pmeta["features"])
    taxonomy = features_taxonomy(feats)
    if taxonomy.fingerprint() != pmeta["taxonomy_fingerprint"]:
        raise ModelError(f"{folder.name}: predictions use taxonomy {pmeta['taxonomy_fingerprint']}, "
                         f"{feats} has {taxonomy.fingerprint()}")
    return folder, pmeta, feats, taxonomy
