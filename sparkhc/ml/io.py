"""Between DataFrames and sparkhc's features folders.

:func:`read_features` reads a features folder (``sparkhc featurize``) as a DataFrame the
estimator takes as it is (the number of features and the feature spec travel in the ``indices``
column's metadata). :func:`write_features` writes a DataFrame with a vector column (the output of
an MLlib feature pipeline) as a features folder that ``sparkhc predict`` and ``sparkhc train``
read.
"""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path
from typing import Any

from pyspark.ml.util import MLWriter
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from sparkhc.batch import COUNTS, DOC_ID, FOLD, INDICES, LABEL_IDS, LABELS, SPLIT, VALUES
from sparkhc.errors import ModelError, SparkhcError
from sparkhc.features import CORPUS_FILE, FEATURES_DIR, SUMMARY_FILE, TAXONOMY_FILE
from sparkhc.fsio import replace_dir
from sparkhc.ml._input import META_KEY, check_labels_column, detect_features, training_rows
from sparkhc.persistence import atomic_dir
from sparkhc.taxonomy import Taxonomy
from sparkhc.text.spec import SPEC_FILE, FeatureSpec

#: where a saved stage keeps Spark's Param metadata (inside the sparkhc model folder)
PARAMS_DIR = "metadata"
PARAMS_FILE = "part-00000"


def local_path(path: str) -> Path:
    """A local file-system path (sparkhc model folders are local, as for the CLI)."""
    s = str(path)
    if s.startswith("file://"):
        s = s[len("file://"):]
    elif s.startswith("file:"):
        s = s[len("file:"):]
    elif "://" in s:
        raise ModelError(f"{s}: only local paths are supported for sparkhc model folders")
    return Path(s)


def read_features(spark: SparkSession, path: str | Path) -> DataFrame:
    """A features folder as a DataFrame in sparkhc's layout, ready for :class:`HierarchicalClassifier`
    (its ``indices`` column carries the number of features and the feature spec's fingerprint)."""
    from sparkhc.spark.io import read_features as _read

    df, spec = _read(spark, str(path))
    md = {META_KEY: {"n_features": spec.n_features, "feature_spec_fingerprint": spec.fingerprint,
                     "features_path": str(Path(path).resolve())}}
    return df.withColumn(INDICES, F.col(INDICES).alias(INDICES, metadata=md))


def placeholder_spec(n_features: int) -> FeatureSpec:
    """A fitted FeatureSpec that records only the number of features (terms ``#0000000``, ...):
    the spec of vectors made outside sparkhc, whose real spec is the Spark pipeline that made them."""
    width = len(str(max(n_features - 1, 0)))
    return FeatureSpec(mode="vocab", weighting="tf", l2_normalize=False, stop_words=False, fit_on=None,
                       vocabulary=tuple(f"#{i:0{width}d}" for i in range(n_features)),
                       df=(0,) * n_features, n_fit_docs=0)


def write_features(
    df: DataFrame,
    out: str | Path,
    taxonomy: Taxonomy | str | Path,
    features_col: str = "features",
    labels_col: str = "labels",
    doc_id_col: str = "doc_id",
    scored_labels: list[str] | None = None,
    num_partitions: int = 1,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Write ``df`` (a vector column, label names, document ids, optional ``split``/``fold``) as a
    sparkhc features folder: ``features/part-*.parquet`` (values and counts are the vector's values),
    ``taxonomy.tsv``, ``corpus.json`` and a placeholder ``feature_spec.json`` (see
    :func:`placeholder_spec`). Every label must be a taxonomy node."""
    from sparkhc.fsio import OutputFs
    from sparkhc.spark.featurize import _rename_parts, _write_parquet

    who = "write_features"
    tax = taxonomy if isinstance(taxonomy, Taxonomy) else Taxonomy.load(taxonomy)
    out = Path(out).absolute()
    if out.exists() and not overwrite:
        raise SparkhcError(f"{out} already exists; pass overwrite=True to replace it")
    check_labels_column(df, labels_col, who)
    inp = detect_features(df, features_col, 0, who)
    if doc_id_col not in df.columns:
        raise SparkhcError(f"{who}: document id column {doc_id_col!r} is missing (columns: {df.columns})")
    labels = F.coalesce(F.col(labels_col), F.array().cast("array<string>"))
    rows = training_rows(df, inp, labels, F.col(doc_id_col).cast("string"))
    names = F.array(*[F.lit(n) for n in tax.names])
    extra = df.select(F.col(doc_id_col).cast("string").alias("_id"),
                      (F.col(SPLIT).cast("string") if SPLIT in df.columns else F.lit(None).cast("string")).alias(SPLIT),
                      (F.col(FOLD).cast("int") if FOLD in df.columns else F.lit(None).cast("int")).alias(FOLD))
    ids = F.array_sort(F.array_distinct(F.transform(LABELS, lambda x: (F.array_position(names, x) - 1).cast("int"))))
    feats = (rows.join(extra, rows[DOC_ID] == extra["_id"]).select(
        DOC_ID, SPLIT, FOLD, LABELS, ids.alias(LABEL_IDS), INDICES, VALUES, COUNTS))
    bad = feats.where(F.array_contains(LABEL_IDS, -1)).select(DOC_ID, LABELS).first()
    if bad is not None:
        raise SparkhcError(f"{who}: document {bad[0]!r}: labels {list(bad[1])} include a label outside the "
                           f"taxonomy {tax.source}")
    feats = feats.repartition(int(num_partitions), F.col(DOC_ID)).sortWithinPartitions(DOC_ID)
    with atomic_dir(out, overwrite=True) as tmp:  # existence checked above, with the message of this API
        _write_parquet(feats, (tmp / FEATURES_DIR).as_uri())
        files = _rename_parts(OutputFs(tmp), str(tmp / FEATURES_DIR))
        placeholder_spec(inp.n_features).save(tmp / SPEC_FILE)
        tax.to_tsv(tmp / TAXONOMY_FILE)
        corpus = {"corpus": "DataFrame", "protocol": None, "scored_labels": scored_labels,
                  "external_features": f"vectors of column {features_col!r} (a Spark ML pipeline); "
                                       "feature_spec.json holds placeholder terms",
                  "taxonomy_fingerprint": tax.fingerprint()}
        (tmp / CORPUS_FILE).write_text(json.dumps(corpus, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        summary = {"n_documents": sum(f["rows"] for f in files), "n_features": inp.n_features, "files": files}
        (tmp / SUMMARY_FILE).write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return summary


def save_stage(instance: Any, spark: SparkSession, path: str, overwrite: bool, write_body: Any,
               extra_metadata: dict[str, Any] | None = None) -> None:
    """Save a fitted stage as one folder, atomically: ``write_body(staging)`` writes the stage's own
    files (a sparkhc model folder, a feature spec), then Spark's Param metadata goes to
    ``metadata/part-00000`` (timestamp 0: the same stage gives the same files); the folder replaces
    ``path`` by rename, and a failed save leaves any old one intact."""
    from pyspark.ml.util import DefaultParamsWriter

    out = local_path(path)
    if out.exists() and not overwrite:
        raise ModelError(f"{out} already exists; use write().overwrite().save(path) to replace it")
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = out.parent / f".{out.name}.ml-{uuid.uuid4().hex[:12]}"
    try:
        write_body(staging)
        params = json.loads(DefaultParamsWriter._get_metadata_to_save(instance, spark, extraMetadata=extra_metadata))
        params["timestamp"] = 0
        (staging / PARAMS_DIR).mkdir(parents=True, exist_ok=True)
        (staging / PARAMS_DIR / PARAMS_FILE).write_text(json.dumps(params, sort_keys=True) + "\n", encoding="utf-8")
        replace_dir(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


class StageWriter(MLWriter):
    """The ``MLWriter`` of every fitted sparkhc stage: :func:`save_stage` with the stage's
    ``write_body`` (no Hadoop delete first: the folder is replaced atomically)."""

    def __init__(self, instance: Any, write_body: Any, extra_metadata: dict[str, Any] | None = None) -> None:
        super().__init__()
        self.instance = instance
        self.write_body = write_body
        self.extra_metadata = extra_metadata

    def save(self, path: str) -> None:
        self.saveImpl(path)

    def saveImpl(self, path: str) -> None:
        save_stage(self.instance, self.sparkSession, path, self.shouldOverwrite, self.write_body,
                   self.extra_metadata)
