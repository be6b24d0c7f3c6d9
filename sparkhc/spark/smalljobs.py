"""Small ``predict`` and ``evaluate`` jobs in the driver process, without starting Spark.

A few hundred documents decode in a fraction of a second, but a Spark job first pays for the JVM, the
session, the Python workers and the first Parquet scan (tens of seconds). ``predict.execution``
decides where both verbs run, as ``train.execution`` does for a training (:mod:`sparkhc.spark.plan`):

* ``auto`` (the default): in this process when the master is local, the input is a local path (a
  features folder, raw documents or a predictions folder) of at most
  :data:`~sparkhc.spark.plan.AUTO_MAX_INPUT_BYTES` and, for ``evaluate``, the model is not a
  multi-dimensional one; on Spark otherwise;
* ``driver``: in this process whatever the size or master (local paths only);
* ``spark``: always on Spark.

The driver runs the executors' own code on the same record batches: the raw documents are read and
checked by :func:`sparkhc.corpus.readers.read_any` (the record checks of the Spark readers), bagged by
:func:`~sparkhc.spark.featurize.bag_batch` and weighted by
:func:`~sparkhc.spark.featurize.terms_features_batch` (both in
:func:`~sparkhc.spark.featurize.raw_features_batch`); the documents are decoded by
:func:`~sparkhc.spark.predict.predict_batches` and counted by
:func:`~sparkhc.spark.evaluate.metric_counts`. The predictions and metrics are the Spark path's
(tests/spark/test_predict_input.py).
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from sparkhc import fsio
from sparkhc.batch import FOLD, SPLIT
from sparkhc.features import Selection, check_footers, features_layout
from sparkhc.spark.plan import AUTO_MAX_INPUT_BYTES
from sparkhc.spark.session import SessionLike, is_local_master, submitted
from sparkhc.taxonomy import Taxonomy
from sparkhc.text.spec import FeatureSpec

log = logging.getLogger(__name__)

#: the part file of predictions written in the driver
LOCAL_PART = "part-00000.parquet"


def _tree_bytes(path: Path) -> int:
    """Bytes of a file, or of every file under a folder."""
    if path.is_file():
        return path.stat().st_size
    return sum((Path(d) / f).stat().st_size for d, _, files in os.walk(path) for f in files)


def place(spark: SessionLike, setting: str, location: str | Path, what: str) -> tuple[str, str]:
    """Where a predict or evaluate of ``location`` (the input: ``what`` names it in the reason) runs
    with ``predict.execution = setting``: ("driver" | "spark", why)."""
    if setting == "spark":
        return "spark", "predict.execution = spark"
    local = fsio.local_path(str(location))
    if local is None:
        return "spark", f"{what} {fsio.redact(location)} is not a local path"
    if setting == "auto":
        if submitted() or not is_local_master(spark):
            return "spark", "predict.execution = auto: the master is not local"
        size = _tree_bytes(local)
        if size > AUTO_MAX_INPUT_BYTES:
            return "spark", (f"predict.execution = auto: {what} of {size / 2**20:.1f} MiB > "
                             f"{AUTO_MAX_INPUT_BYTES >> 20} MiB")
    return "driver", f"predict.execution = {setting}: a small local {what}, read in this process"


# ---------------------------------------------------------------------------------------- inputs
def select_table(table: pa.Table, selection: Selection) -> pa.Table:
    """The rows of a table with ``split`` and ``fold`` columns that ``selection`` selects."""
    split = np.asarray(table.column(SPLIT).to_pylist(), dtype=object)
    fold = np.asarray(table.column(FOLD).to_pylist(), dtype=object)
    return table.filter(pa.array(selection.mask(split, fold)))


def groups_of(table: pa.Table) -> dict[tuple[str | None, int | None], int]:
    """Documents per (split, fold) of a table (as :func:`sparkhc.features.selection_groups`)."""
    return dict(Counter(zip(table.column(SPLIT).to_pylist(), table.column(FOLD).to_pylist(), strict=True)))


def read_features_table(features: str | Path) -> tuple[pa.Table, FeatureSpec]:
    """A local features folder as one table (files in name order) and its spec."""
    root, _, parts = features_layout(str(fsio.local_path(str(features))))
    check_footers(parts)
    spec = FeatureSpec.load(root)
    tables = []
    for p in parts:
        with pq.ParquetFile(p) as f:
            tables.append(f.read())
    return pa.concat_tables(tables, promote_options="permissive"), spec


def raw_features_table(input_path: str | Path, spec: FeatureSpec, taxonomy: Taxonomy,
                       read_opts: dict[str, Any]) -> tuple[pa.Table, Any]:
    """Raw documents of a local ``input_path`` (any format :func:`~sparkhc.corpus.readers.read_any`
    reads) in the features layout of the fitted ``spec``, and the read report."""
    from sparkhc.corpus import readers
    from sparkhc.spark.featurize import raw_features_batch
    from sparkhc.spark.schemas import FEATURES_ARROW_SCHEMA

    local = fsio.local_path(str(input_path))
    assert local is not None
    batches, report = readers.read_any(local, taxonomy=taxonomy, **read_opts)
    rows = [raw_features_batch(b, spec, taxonomy) for b in batches if b.num_rows]
    return pa.Table.from_batches(rows, schema=FEATURES_ARROW_SCHEMA), report


def read_predictions_table(predictions: str | Path) -> pa.Table:
    """The prediction rows of a local predictions folder (Spark's or :data:`LOCAL_PART`)."""
    from sparkhc.predictions import data_location

    local = fsio.local_path(data_location(predictions))
    assert local is not None
    files = sorted(p for p in local.rglob("*.parquet") if not p.name.startswith((".", "_")))
    tables = []
    for p in files:
        with pq.ParquetFile(p) as f:
            tables.append(f.read())
    if not tables:
        from sparkhc.spark.predict import PRED_SCHEMA

        return PRED_SCHEMA.empty_table()
    return pa.concat_tables(tables, promote_options="permissive")


def batches_of(table: pa.Table, size: int = 4096) -> Iterator[pa.RecordBatch]:
    """``table`` in record batches of at most ``size`` rows."""
    yield from table.to_batches(max_chunksize=size)
