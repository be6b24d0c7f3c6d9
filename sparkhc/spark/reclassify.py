"""Scheduled batch reclassification of a growing, date-partitioned document collection.

Input: raw documents (Parquet or JSON Lines, the raw-documents columns of
:mod:`sparkhc.spark.schemas`; ``labels`` may be absent) in Hive-style partition directories::

    collection/ingest_date=2024-01-01/part-0.parquet
    collection/ingest_date=2024-01-02/docs.jsonl.gz
    ...

Output: predictions partitioned the same way, one directory per input partition::

    out/ingest_date=2024-01-01/part-00000.parquet   doc_id, labels (predicted), scores,
                                                    model_version, taxonomy_fingerprint,
                                                    run_id, classified_at
    out/ingest_date=2024-01-01/_CLASSIFIED.json     model version, input fingerprint, run, rows
    out/_runs/<run_id>.json                         the summary of every run

(The partition column lives in the directory names, as Spark's ``partitionBy`` writes it;
``spark.read.parquet(out)`` and ``pyarrow.dataset(out, partitioning="hive")`` give it back.)

A partition is *done* when its ``_CLASSIFIED.json`` names the model version being applied and the
input fingerprint (names and sizes of the partition's input files) it has now; a run classifies
only the partitions that are not done (new partitions, partitions whose input changed, or all of
them after a new model was promoted), or every partition with ``all_partitions=True``
(``--all``). Reruns are idempotent: done partitions are not touched, so their files stay
byte-identical, and a reclassified partition replaces the old one as a whole (no duplicates).

Atomicity: the partitions to classify are processed in batches (``batch_partitions``, default
8): one Spark job per batch writes all its partitions into a hidden staging directory
(``partitionBy`` on the partition's index in the batch; hidden names are ignored by Spark and
pyarrow readers). Then, partition by partition, the driver moves the partition's files to a hidden
``.<name>.tmp-<run_id>`` directory, renames the part files to ``part-NNNNN.parquet``, adds the
marker and renames the directory into place; an existing partition is replaced by two renames
(aside, then in). A crash at any point leaves every
partition either absent or complete; the next run removes stale temp directories (and restores a
partition caught between the two renames) under a lock file, so two runs never write the same
output at once. Paths must be on a file system shared by the driver and the executors (as for
``featurize``); the renames are done by the driver.

Ids: a record's id is its ``doc_id`` or its ``id`` field (both are accepted, as by ``featurize``;
a record with both is invalid unless they are equal); the predictions name it ``doc_id``.

Bad records (a malformed JSON line, no id, ``doc_id`` and ``id`` disagreeing, an id repeated in the
partition): by default the partition fails with an error naming the file and line (or Parquet row)
of the first one and the counts by reason; with ``on_invalid="quarantine"`` (``--on-invalid
quarantine``) the other records are classified and the bad ones are written aside, one JSON line
each (file and line, reason, record), to ``<partition>/_quarantined.jsonl``, counted in the marker
and the run summary. A cheap Spark aggregate finds them; only a partition where it found some is
read again on the driver to name the lines, by the record-check core with reclassify's declared rules
(:data:`sparkhc.corpus.records.RECLASSIFY_RULES`, which read what Spark's JSON reader reads).

Failures: when the Spark job of a batch fails, its partitions are retried one by one; an error
in one partition is logged and recorded in the run summary, the partition is left as it was, and
the run goes on with the others; the caller exits non-zero.

Progress: one log line per partition and per batch (``batch 2/5: ... (16/40 partitions done,
1 failed)``; a failed partition is not counted as done), on the driver: in local runs on the
console, on clusters in the driver log.

Fault injection (tests only): an explicit ``fault_hook`` argument of :func:`reclassify` (no
environment variable, no CLI flag), a callable ``hook(where, partition_value)`` called at two
points: ``where="task"`` inside the Spark task right after it handed a record batch of the
partition to the writer (so the hook must be picklable; raising there fails the task), and
``where="driver"`` on the driver after the partition's files were written, before the rename into
place. A hook that raises an ``Exception`` fails the partition as a real error would (cleanup
runs); one that raises a ``BaseException`` or calls ``os._exit`` simulates a crash or a kill
(nothing is cleaned up).
"""

from __future__ import annotations

import datetime as _dt
import functools
import hashlib
import json
import logging
import os
import re
import shutil
import time
import urllib.parse
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sparkhc import model_store
from sparkhc.batch import ID_ALIAS
from sparkhc.corpus import formats
from sparkhc.corpus.records import RECLASSIFY_RULES, ScanReport, SetAside
from sparkhc.errors import InputDataError, ModelError, SchemaError, SparkhcError, Terminated
from sparkhc.persistence import load_model, read_metadata, replace_dir, state_to_bytes, write_json_atomic
from sparkhc.spark.featurize import features_from_raw_partition, id_columns, normalize_raw
from sparkhc.spark.predict import (
    EXPLANATIONS,
    PRED_CALIBRATED,
    PRED_LABELS,
    PRED_SCORES,
    SUGGESTIONS,
    PredictExtras,
    make_predict_fn,
    pred_ddl,
    predict_extras,
)
from sparkhc.spark.schemas import DOC_ID, FEATURES_SCHEMA, LABELS, RAW_SCHEMA, SPLIT
from sparkhc.text.spec import FeatureSpec

log = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_PARTITION_COLUMN",
    "FaultHook",
    "MARKER_FILE",
    "OUTPUT_COLUMNS",
    "RUNS_DIR",
    "InputPartition",
    "discover_partitions",
    "read_output",
    "reclassify",
    "resolve_model",
]

DEFAULT_PARTITION_COLUMN = "ingest_date"
MARKER_FILE = "_CLASSIFIED.json"
RUNS_DIR = "_runs"
QUARANTINE_FILE = "_quarantined.jsonl"  # records set aside with on_invalid="quarantine" (hidden from readers)
LOCK_FILE = ".reclassify.lock"
SCORES = "scores"
MODEL_VERSION = "model_version"
TAXONOMY_FINGERPRINT = "taxonomy_fingerprint"
RUN_ID = "run_id"
CLASSIFIED_AT = "classified_at"
OUTPUT_COLUMNS = (DOC_ID, LABELS, SCORES, MODEL_VERSION, TAXONOMY_FINGERPRINT, RUN_ID, CLASSIFIED_AT)

# the input formats reclassify reads, as the format registry knows them
_PARQUET_SUFFIXES = formats.get("parquet").suffixes
_JSON_SUFFIXES = formats.get("jsonl").suffixes
_PART = re.compile(r"^part-(\d+)-.*\.parquet$")
_HIDDEN = ("_", ".")


#: Fault injection for tests: ``hook(where, partition_value)`` with ``where`` in {"task", "driver"}.
FaultHook = Callable[[str, str], None]


# ---------------------------------------------------------------------- input partitions
@dataclass(frozen=True)
class InputPartition:
    """One ``column=value`` directory of the input collection."""

    name: str  # directory name, e.g. "ingest_date=2024-01-01"
    value: str  # decoded value, e.g. "2024-01-01"
    path: Path
    files: tuple[Path, ...]
    format: str  # "parquet" | "json"
    fingerprint: str = field(default="")


def _visible_files(d: Path) -> list[Path]:
    out = []
    for p in sorted(d.rglob("*")):
        rel = p.relative_to(d).parts
        if any(part.startswith(_HIDDEN) for part in rel):
            continue
        if p.is_file():
            out.append(p)
    return out


def _detect_format(files: list[Path], fmt: str, where: Path) -> tuple[str, list[Path]]:
    parquet = [p for p in files if p.name.endswith(_PARQUET_SUFFIXES)]
    jsonl = [p for p in files if p.name.endswith(_JSON_SUFFIXES)]
    if fmt == "parquet" or (fmt == "auto" and parquet):
        if not parquet:
            raise SchemaError(f"{where}: no .parquet files (--format parquet)")
        return "parquet", parquet
    if fmt in ("json", "auto") and jsonl:
        return "json", jsonl
    raise SchemaError(
        f"{where}: no input files; expected *.parquet or JSON Lines (*.jsonl, *.json, *.ndjson, optionally .gz)"
    )


def _fingerprint(part_dir: Path, files: list[Path]) -> str:
    """Names and sizes of the input files: changes when files are added, removed or rewritten
    with another size (not when a collection is copied elsewhere)."""
    lines = [f"{p.relative_to(part_dir).as_posix()}\t{p.stat().st_size}" for p in files]
    return hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()[:16]


def discover_partitions(input_dir: str | Path, column: str = DEFAULT_PARTITION_COLUMN,
                        fmt: str = "auto") -> list[InputPartition]:
    """The ``column=value`` partitions of an input collection, sorted by value.

    Raises :class:`SchemaError` when the folder has no such partition (naming the partition
    columns it does have), or a partition has no readable input files.
    """
    root = Path(input_dir)
    if not root.is_dir():
        raise SchemaError(f"{root}: input collection not found (expected a directory of {column}=VALUE folders)")
    if fmt not in ("auto", "parquet", "json"):
        raise SparkhcError(f"The 'format' parameter must be one of auto, parquet, json. Got {fmt!r} instead.")
    prefix = f"{column}="
    parts = []
    others = set()
    for d in sorted(root.iterdir()):
        if not d.is_dir() or d.name.startswith(_HIDDEN):
            continue
        if not d.name.startswith(prefix):
            if "=" in d.name:
                others.add(d.name.split("=", 1)[0])
            continue
        files = _visible_files(d)
        kind, used = _detect_format(files, fmt, d)
        value = urllib.parse.unquote(d.name[len(prefix):])
        parts.append(InputPartition(d.name, value, d, tuple(used), kind, _fingerprint(d, used)))
    if not parts:
        hint = f"; it is partitioned by {sorted(others)} (use --partition-column)" if others else ""
        raise SchemaError(f"{root}: no {column}=VALUE partition directories{hint}")
    return sorted(parts, key=lambda p: (p.value, p.name))


#: JSON lines that do not parse (or are not UTF-8) land here instead of becoming all-null rows
_CORRUPT = "_corrupt_record"
_JSON_SCHEMA = T.StructType([*(T.StructField(f.name, f.dataType, True) for f in RAW_SCHEMA.fields),
                             T.StructField(ID_ALIAS, T.StringType(), True),  # doc_id or id (or both, equal)
                             T.StructField(_CORRUPT, T.StringType(), True)])


def read_partition(spark: SparkSession, part: InputPartition) -> DataFrame:
    """Raw documents of one partition (``labels`` is optional: new documents have none)."""
    # plain paths: as_uri() would escape the "=" of partition directories, which Hadoop keeps literal
    uris = [str(p.absolute()) for p in part.files]
    if part.format == "parquet":
        df = spark.read.parquet(*uris)
    else:
        df = (spark.read.schema(_JSON_SCHEMA).option("mode", "PERMISSIVE")
              .option("columnNameOfCorruptRecord", _CORRUPT).json(uris))
    if LABELS not in df.columns:
        df = df.withColumn(LABELS, F.lit(None).cast(T.ArrayType(T.StringType())))
    return df


# ---------------------------------------------------------------------- model
@dataclass(frozen=True)
class ResolvedModel:
    path: Path
    version: str  # content hash of the weights
    registry_version: str | None
    registry_root: Path | None


def resolve_model(models_root: str | Path | None = None, version: str = model_store.CURRENT,
                  model_dir: str | Path | None = None) -> ResolvedModel:
    """The model to apply: a registry version (default ``current``) or a model directory."""
    if (models_root is None) == (model_dir is None):
        raise SparkhcError("give either a model registry (--models ROOT) or a model directory (--model DIR)")
    if model_dir is not None:
        d = Path(model_dir)
        read_metadata(d)
        return ResolvedModel(d, model_store.weights_hash(d), None, None)
    assert models_root is not None
    d = model_store.resolve(models_root, version)
    return ResolvedModel(d, model_store.weights_hash(d), d.name, Path(models_root))


# ---------------------------------------------------------------------- output helpers
def _read_marker(d: Path) -> dict[str, Any] | None:
    f = d / MARKER_FILE
    if not f.is_file():
        return None
    try:
        data: dict[str, Any] = json.loads(f.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None  # unreadable marker: classify again
    return data


def _rename_parts(d: Path) -> list[str]:
    """Spark's part files -> part-00000.parquet, ... in task order; drop _SUCCESS and .crc."""
    parts = []
    for name in sorted(os.listdir(d)):
        if name.endswith(".crc") or name == "_SUCCESS":
            os.remove(d / name)
            continue
        m = _PART.match(name)
        if m:
            parts.append((int(m.group(1)), name))
    names = []
    for i, (_, name) in enumerate(sorted(parts)):
        new = f"part-{i:05d}.parquet"
        os.rename(d / name, d / new)
        names.append(new)
    return names


def _count(d: Path, files: list[str]) -> tuple[int, Counter[str]]:
    """Rows and predicted-label counts of the written files (read back with pyarrow: also a check
    that every file is complete and readable)."""
    rows = 0
    labels: Counter[str] = Counter()
    for name in files:
        t = pq.read_table(d / name, columns=[LABELS])
        rows += t.num_rows
        flat = pc.list_flatten(t.column(LABELS))
        labels.update(x for x in flat.to_pylist() if x is not None)
    return rows, labels


@contextmanager
def _lock(out: Path) -> Iterator[None]:
    out.mkdir(parents=True, exist_ok=True)
    f = open(out / LOCK_FILE, "a+")  # noqa: SIM115 - held for the whole run
    try:
        try:
            import fcntl

            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except ImportError:  # not POSIX: no file lock
            log.warning("reclassify: no file lock on this platform (fcntl is POSIX only): a concurrent run writing "
                        "to %s is not refused", out)
        except BlockingIOError:
            raise SparkhcError(f"{out}: another reclassify run is writing here (lock {out / LOCK_FILE})") from None
        yield
    finally:
        f.close()


_STALE = re.compile(r"^\.(?P<name>.+)\.(?P<kind>tmp|old)-[0-9A-Za-z_-]+$")


def _cleanup(out: Path) -> list[str]:
    """Remove temp directories of crashed runs; restore a partition caught between the two
    renames of a replacement (its old copy is complete). Called under the lock."""
    done = []
    for p in sorted(out.iterdir()):
        m = _STALE.match(p.name)
        if not m or not p.is_dir():
            continue
        target = out / m.group("name")
        if m.group("kind") == "old" and not target.exists():
            os.replace(p, target)
            done.append(f"restored {target.name}")
        else:
            shutil.rmtree(p, ignore_errors=True)
            done.append(f"removed {p.name}")
    for line in done:
        log.info("reclassify: %s (left by an interrupted run)", line)
    return done


def _new_run_id(now: _dt.datetime) -> str:
    return now.strftime("%Y%m%dT%H%M%SZ") + "-" + uuid.uuid4().hex[:8]


# ---------------------------------------------------------------------- the job
def reclassify(
    spark: SparkSession | None,
    input_dir: str | Path,
    out: str | Path,
    models_root: str | Path | None = None,
    model_version: str = model_store.CURRENT,
    model_dir: str | Path | None = None,
    partition_column: str = DEFAULT_PARTITION_COLUMN,
    input_format: str = "auto",
    all_partitions: bool = False,
    partitions: list[str] | None = None,
    dry_run: bool = False,
    batch_partitions: int = 8,
    fault_hook: FaultHook | None = None,
    on_invalid: str | None = None,
    progress: Callable[[dict[str, Any]], None] | None = None,
    master: str | None = None,
    top: int | None = None,
    explain: int | None = None,
) -> dict[str, Any]:
    """Classify the partitions of ``input_dir`` not yet classified by the model; return the run
    summary (also written to ``<out>/_runs/<run_id>.json``).

    Parameters
    ----------
    spark : SparkSession or None
        None: created (with ``master``) only when there is something to classify, so a
        scheduled run that finds nothing new does not start Spark.
    input_dir : path
        The collection: ``<partition_column>=VALUE`` directories of Parquet or JSON Lines files.
    out : path
        Output root (same partition directories, plus ``_runs/``).
    models_root, model_version : path, str
        A model registry and the version to apply (default ``current``) ...
    model_dir : path
        ... or a model directory. It must hold ``feature_spec.json`` (saved by ``train``).
    partition_column : str
        The partition column (default ``ingest_date``).
    input_format : {"auto", "parquet", "json"}
    all_partitions : bool
        Reclassify every partition (``--all``), e.g. to rewrite everything with a new model
        even where the version is unchanged.
    partitions : list of str, optional
        Only these partition values (others are left alone).
    dry_run : bool
        Plan only: report what would be classified, write nothing (not even the summary).
    batch_partitions : int
        Partitions classified by one Spark job (default 8): fewer jobs for many small daily
        partitions; a failed batch is retried partition by partition to isolate the culprit.
    on_invalid : {"error", "quarantine"} or None
        None: the option of the run that created ``out`` (:data:`OPTIONS_FILE`), else ``"error"``; a
        value other than that run's is refused (one output, one set of options). Records that cannot be classified (a malformed JSON line, no ``doc_id``/``id``, ``doc_id``
        and ``id`` disagreeing, an id repeated in the partition): fail the partition with an error
        naming the file and line (default), or classify the other records and set these aside in
        ``<partition>/_quarantined.jsonl`` (file, line, reason, record), counted in the marker and
        in the run summary (``--on-invalid quarantine``).
    fault_hook : callable, optional
        Fault injection for tests: ``fault_hook(where, partition_value)`` (see the module docstring).
    progress : callable, optional
        Called with a dict after each batch (for progress bars); logging happens anyway.
    top, explain : int, optional
        ``predict --top`` / ``--explain`` (:mod:`sparkhc.spark.predict`): the columns ``suggestions`` and
        ``pred_calibrated``, and ``explanations``. None: the value of the run that created ``out``, else 0;
        recorded with the output's options like ``on_invalid`` (one output, one schema).
    """
    if on_invalid not in (None, "error", "quarantine"):
        raise SparkhcError(f"on_invalid must be 'error' or 'quarantine', got {on_invalid!r}")
    t0 = time.perf_counter()
    given = {"on_invalid": on_invalid, "top": top, "explain": explain}
    options = output_options(out, given, {"on_invalid": "error", "top": 0, "explain": 0})
    started = _dt.datetime.now(_dt.UTC).replace(microsecond=0)
    run_id = _new_run_id(started)
    out = Path(out).absolute()
    resolved = resolve_model(models_root, model_version, model_dir)
    model, meta, spec = _model_with_spec(resolved)
    extras = predict_extras(model, meta, int(options["top"]), int(options["explain"]), spec.vocabulary,
                            str(resolved.path))
    version = resolved.version
    found = _wanted_partitions(discover_partitions(input_dir, partition_column, input_format), partitions, input_dir,
                               partition_column)
    summary = _run_header(run_id, started, input_dir, out, partition_column, all_partitions, resolved, meta, spec)
    summary["options"] = options
    run = _Run(run_id, started, fault_hook, str(options["on_invalid"]), extras)
    with _lock(out) if not dry_run else _nolock():
        cleaned = [] if dry_run else _cleanup(out)
        if not dry_run:
            record_options(out, given)
        todo, skipped = _pending(found, out, version, all_partitions)
        log.info("reclassify %s: %d partitions, %d to classify, %d done by model %s%s", run_id, len(found),
                 len(todo), len(skipped), version,
                 f" ({resolved.registry_version})" if resolved.registry_version else "")
        summary["partitions"] = {"found": len(found), "to_classify": [p.value for p, _ in todo],
                                 "skipped": skipped, "orphaned": _orphaned(out, input_dir, partition_column)}
        summary["cleaned"] = cleaned
        if dry_run:
            summary["dry_run"] = True
            summary["seconds"] = round(time.perf_counter() - t0, 3)
            return summary
        stopped: BaseException | None = None  # SIGTERM (the CLI's handler) or Ctrl-C: stop, say what was done
        try:
            if todo:  # no Spark at all when there is nothing to classify
                if spark is None:
                    from sparkhc.spark.session import get_session

                    spark = get_session(app_name="sparkhc-reclassify", master=master)
                run.classify(spark, out, model, spec, version, str(meta["taxonomy_fingerprint"]), todo,
                             batch_partitions, progress)
        except (Terminated, KeyboardInterrupt) as e:
            stopped = e
        run.finish(summary, todo, stopped, t0, out, partition_column)
        if stopped is not None:
            if isinstance(stopped, Terminated):
                stopped.summary = summary
            raise stopped
    log.info("reclassify %s: %d partitions, %d documents, %d failures, %.1f s", run_id, len(run.done),
             summary["documents"], len(run.failures), summary["seconds"])
    return summary


def _model_with_spec(resolved: Any) -> tuple[Any, dict[str, Any], FeatureSpec]:
    """The model, its metadata and its feature spec (a model without one, or with another, refused)."""
    model, meta = load_model(resolved.path)
    spec_file = resolved.path / "feature_spec.json"
    if not spec_file.is_file():
        raise ModelError(f"{resolved.path}: no feature_spec.json; reclassification needs the model's feature spec "
                         "(models saved by `sparkhc train` have it)")
    spec = FeatureSpec.load(spec_file)
    if meta.get("feature_spec_fingerprint") not in (None, spec.fingerprint):
        raise ModelError(f"{resolved.path}: feature_spec.json does not match metadata.json (corrupt model directory)")
    return model, meta, spec


def _wanted_partitions(found: list[InputPartition], partitions: list[str] | None, input_dir: str | Path,
                       partition_column: str) -> list[InputPartition]:
    """Only the requested partition values (one not found refused), else all."""
    if not partitions:
        return found
    wanted = set(partitions)
    unknown = sorted(wanted - {p.value for p in found})
    if unknown:
        raise SchemaError(f"{input_dir}: no partition {partition_column}={unknown[0]} "
                          f"({len(unknown)} requested value(s) not found)")
    return [p for p in found if p.value in wanted]


def _run_header(run_id: str, started: _dt.datetime, input_dir: str | Path, out: Path, partition_column: str,
                all_partitions: bool, resolved: Any, meta: dict[str, Any], spec: FeatureSpec) -> dict[str, Any]:
    """The run summary's head: the run, the collection and the model applied."""
    return {
        "run_id": run_id,
        "started_at": started.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "input": str(Path(input_dir).absolute()),
        "output": str(out),
        "partition_column": partition_column,
        "mode": "all" if all_partitions else "pending",
        "model": {
            "model_version": resolved.version,
            "registry_version": resolved.registry_version,
            "registry": None if resolved.registry_root is None else str(resolved.registry_root.absolute()),
            "path": str(resolved.path.absolute()),
            "name": meta.get("model"),
            "taxonomy_fingerprint": str(meta["taxonomy_fingerprint"]),
            "feature_spec_fingerprint": spec.fingerprint,
        },
    }


def _pending(found: list[InputPartition], out: Path, version: str,
             all_partitions: bool) -> tuple[list[tuple[InputPartition, str]], list[str]]:
    """``(todo, skipped)``: the partitions to classify, each with its reason (new, the model or the
    input changed, ``--all``), and the values of those already classified by this model."""
    todo: list[tuple[InputPartition, str]] = []
    skipped: list[str] = []
    for p in found:
        marker = _read_marker(out / p.name)
        if all_partitions:
            reason = "--all"
        elif marker is None:
            reason = "new"
        elif marker.get(MODEL_VERSION) != version:
            reason = f"model changed ({marker.get(MODEL_VERSION)} -> {version})"
        elif marker.get("input_fingerprint") != p.fingerprint:
            reason = "input changed"
        else:
            skipped.append(p.value)
            continue
        todo.append((p, reason))
    return todo, skipped


def _orphaned(out: Path, input_dir: str | Path, partition_column: str) -> list[str]:
    """Output partitions whose input partition is gone."""
    if not out.is_dir():
        return []
    names = {p.name for p in discover_partitions_quiet(input_dir, partition_column)}
    return sorted(d.name for d in out.iterdir()
                  if d.is_dir() and d.name.startswith(f"{partition_column}=") and d.name not in names)


@dataclass
class _Run:
    """One reclassification run's classification: what it did, partition by partition."""

    run_id: str
    started: _dt.datetime
    fault_hook: FaultHook | None
    on_invalid: str
    extras: Any
    done: list[dict[str, Any]] = field(default_factory=list)
    failures: list[dict[str, Any]] = field(default_factory=list)
    label_counts: Counter[str] = field(default_factory=Counter)

    def classify(self, spark: SparkSession, out: Path, model: Any, spec: FeatureSpec, version: str, tax_fp: str,
                 todo: list[tuple[InputPartition, str]], batch_partitions: int,
                 progress: Callable[[dict[str, Any]], None] | None) -> None:
        """The partitions of ``todo`` in batches of ``batch_partitions``, one Spark job a batch, with one
        broadcast of the weights and of the spec for all of them."""
        state_bc = spark.sparkContext.broadcast(state_to_bytes(model.get_state()))
        spec_bc = spark.sparkContext.broadcast(spec)
        extras_bc = spark.sparkContext.broadcast(self.extras) if self.extras else None
        job = _Job(spark, out, make_predict_fn(model.name, model.params, model.taxonomy, model.n_features,
                                               state_bc, version, extras_bc=extras_bc),
                   spec_bc, version, tax_fp, self.run_id, self.started, self.fault_hook, self.on_invalid, self.extras)
        reasons = {p.name: r for p, r in todo}
        size = max(1, int(batch_partitions))
        batches = [[p for p, _ in todo[k:k + size]] for k in range(0, len(todo), size)]
        try:
            for b, parts in enumerate(batches, start=1):
                t1 = time.perf_counter()
                for p, res in job.run(parts):
                    self._record(p, res, b, reasons[p.name])
                secs = time.perf_counter() - t1
                # a failed partition is not done: it is counted on its own
                log.info("reclassify: batch %d/%d: %d partitions in %.1f s (%d/%d partitions done, %d failed)",
                         b, len(batches), len(parts), secs, len(self.done), len(todo), len(self.failures))
                if progress is not None:
                    progress({"batch": b, "batches": len(batches), "partitions_done": len(self.done),
                              "partitions_failed": len(self.failures), "partitions_total": len(todo),
                              "seconds": round(secs, 3)})
        finally:
            for bc in (state_bc, spec_bc):
                try:
                    bc.unpersist()
                except Exception:  # (after a SIGTERM the Py4J call may be cut short: leave it to the exit)
                    log.debug("unpersist failed", exc_info=True)

    def _record(self, p: InputPartition, res: Any, batch: int, reason: str) -> None:
        """One partition's outcome: done (with its counts) or failed (with its error)."""
        if isinstance(res, BaseException):
            msg = _error_text(res)
            self.failures.append({"partition": p.value, "error": msg, "detail": str(res)[-4000:]})
            log.error("reclassify: %s failed: %s", p.name, msg)
            return
        rows, labels, files, bad = res
        self.label_counts.update(labels)
        self.done.append({"partition": p.value, "documents": rows, "files": len(files), "batch": batch,
                          "reason": reason, **_quarantine_counts(bad)})
        log.info("reclassify: %s: %d documents (%s)%s", p.name, rows, reason,
                 f", {len(bad)} bad record(s) set aside in {QUARANTINE_FILE}" if bad else "")

    def finish(self, summary: dict[str, Any], todo: list[tuple[InputPartition, str]], stopped: BaseException | None,
               t0: float, out: Path, partition_column: str) -> None:
        """The run summary completed (what was done, failed or not done when stopped; the model versions
        the output holds) and written to ``<out>/_runs/<run_id>.json``."""
        finished = _dt.datetime.now(_dt.UTC).replace(microsecond=0)
        summary["partitions"].update({
            "classified": [d["partition"] for d in self.done],
            "failed": [f["partition"] for f in self.failures],
        })
        if stopped is not None:  # partitions neither classified nor failed: the next run does them
            ended = {d["partition"] for d in self.done} | {f["partition"] for f in self.failures}
            summary["partitions"]["not_done"] = [p.value for p, _ in todo if p.value not in ended]
            summary["interrupted"] = getattr(stopped, "name", "SIGINT")
            log.warning("reclassify %s: %s received: stopped after %d of %d partitions (%d failed); the next run "
                        "classifies the %d not done", self.run_id, summary["interrupted"], len(self.done), len(todo),
                        len(self.failures), len(summary["partitions"]["not_done"]))
        summary.update({
            "finished_at": finished.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "documents": sum(d["documents"] for d in self.done),
            "quarantined": sum(d.get("quarantined", 0) for d in self.done),
            "label_counts": dict(sorted(self.label_counts.items())),
            "per_partition": self.done,
            "failures": self.failures,
            "seconds": round(time.perf_counter() - t0, 3),
        })
        versions = model_versions(out, partition_column)
        summary["model_versions"] = versions
        if len(versions) > 1:
            summary["mixed_model_versions"] = True
            log.warning("reclassify %s: %s holds the predictions of %d model versions (%s); the next run "
                        "reclassifies the partitions of the others", self.run_id, out, len(versions),
                        "; ".join(f"{v}: {len(ps)} partition(s)" for v, ps in versions.items()))
        runs = out / RUNS_DIR
        runs.mkdir(parents=True, exist_ok=True)
        write_json_atomic(runs / f"{self.run_id}.json", summary)


#: the options of the run that created an output (hidden from readers): later runs reuse them or are refused
OPTIONS_FILE = "_OPTIONS.json"


def output_options(out: str | Path, given: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    """The options of a run writing to ``out``: those recorded by earlier runs (:data:`OPTIONS_FILE`,
    :func:`record_options`) where ``given`` has None, else ``given`` or ``defaults``; an option given
    with another value than the recorded one is refused (partitions written under two sets of
    options would read as one output)."""
    f = Path(out) / OPTIONS_FILE
    recorded: dict[str, Any] = {}
    if f.is_file():
        try:
            recorded = json.loads(f.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise SchemaError(f"{f}: corrupt options record ({e})") from None
    resolved = {}
    for key, default in defaults.items():
        value = given.get(key)
        if value is not None and key in recorded and recorded[key] != value:
            flag = "--" + key.replace("_", "-")
            raise SparkhcError(f"{out} was written with {flag} {recorded[key]} ({f}); this run passes {flag} {value}: "
                               f"leave {flag} out to reuse it, or write to another --out")
        resolved[key] = value if value is not None else recorded.get(key, default)
    return resolved


def record_options(out: Path, given: dict[str, Any]) -> None:
    """Add the options a run was given (not None) to ``out``'s :data:`OPTIONS_FILE`: an option first
    given by a later run (e.g. ``--on-invalid quarantine``, which a failed partition's error suggests)
    is recorded then."""
    f = Path(out) / OPTIONS_FILE
    recorded = json.loads(f.read_text(encoding="utf-8")) if f.is_file() else {}
    merged = {**recorded, **{k: v for k, v in given.items() if v is not None}}
    if merged != recorded or not f.is_file():
        f.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(f, merged)


def model_versions(out: Path, partition_column: str) -> dict[str, list[str]]:
    """The model version of every classified partition of ``out`` (its marker), by version."""
    found: dict[str, list[str]] = {}
    if not Path(out).is_dir():
        return found
    for d in sorted(Path(out).iterdir()):
        if d.is_dir() and d.name.startswith(f"{partition_column}="):
            marker = _read_marker(d)
            if marker is not None:
                found.setdefault(str(marker.get(MODEL_VERSION)), []).append(d.name.split("=", 1)[1])
    return found


_ERROR_LINE = re.compile(r"^\s*(?:[\w.]+\.)?(\w*(?:Error|Exception|Exit)\w*): (.+)$")


def _error_text(e: BaseException) -> str:
    """One line for an error: Spark wraps Python worker errors in a message whose first line is
    generic ("An exception was thrown from the Python worker:"); take the worker's own last
    ``SomeError: message`` line instead."""
    text = str(e).strip()
    first = text.splitlines()[0] if text else ""
    if first.endswith(":") or "Traceback" in text:
        found = [m for m in map(_ERROR_LINE.match, text.splitlines()) if m]
        if found:
            return f"{type(e).__name__}: {found[-1].group(1)}: {found[-1].group(2).strip()}"[:500]
    return f"{type(e).__name__}: {first}"[:500]


@contextmanager
def _nolock() -> Iterator[None]:
    yield


def discover_partitions_quiet(input_dir: str | Path, column: str) -> list[InputPartition]:
    """Partition directories without reading their file lists (names only)."""
    root = Path(input_dir)
    if not root.is_dir():
        return []
    prefix = f"{column}="
    return [InputPartition(d.name, urllib.parse.unquote(d.name[len(prefix):]), d, (), "")
            for d in sorted(root.iterdir()) if d.is_dir() and d.name.startswith(prefix)]


_SLOT = "_slot"  # staging partition column: the index of the input partition in its batch

PartitionResult = tuple[int, Counter[str], list[str], "list[BadRecord]"] | BaseException


@dataclass
class _Job:
    """Classifies batches of partitions: one Spark job per batch writes every partition of the
    batch into a hidden staging directory (``partitionBy`` on the partition's index in the
    batch), then each partition is completed and renamed into place on its own."""

    spark: SparkSession
    out: Path
    predict_fn: Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]
    spec_bc: Any
    version: str
    tax_fp: str
    run_id: str
    classified_at: _dt.datetime
    fault_hook: FaultHook | None
    on_invalid: str = "error"
    extras: PredictExtras | None = None
    _n: int = 0
    _bad: dict[str, list[BadRecord]] = field(default_factory=dict)  # partition name -> records set aside

    def run(self, parts: list[InputPartition]) -> Iterator[tuple[InputPartition, PartitionResult]]:
        self._n += 1
        staging = self.out / f".staging-{self._n}.tmp-{self.run_id}"
        try:
            try:
                self._write(parts, staging)
            except Exception as e:
                shutil.rmtree(staging, ignore_errors=True)
                if len(parts) == 1:
                    yield parts[0], e
                    return
                # find the partition(s) at fault: every partition on its own
                log.warning("reclassify: a batch of %d partitions failed (%s); retrying them one by one",
                            len(parts), _error_text(e))
                for p in parts:
                    yield from self.run([p])
                return
            for i, p in enumerate(parts):
                try:
                    yield p, self._install(p, staging / f"{_SLOT}={i}")
                except Exception as e:
                    yield p, e
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def _write(self, parts: list[InputPartition], staging: Path) -> None:
        inputs = [read_partition(self.spark, p) for p in parts]
        found = check_partitions(parts, inputs, self.on_invalid)
        raws = []
        for i, (p, df, check) in enumerate(zip(parts, inputs, found, strict=True)):
            self._bad[p.name] = check.bad
            if check.keep is not None:
                df = df.where(check.keep)
            raw = normalize_raw(df, source=str(p.path))
            # the split column (not needed to classify) carries the partition through decoding
            raws.append(raw.withColumn(SPLIT, F.lit(str(i))))
        raw = functools.reduce(DataFrame.unionByName, raws)
        # featurize.transform with the run's spec broadcast (no taxonomy: gold labels are not needed)
        feats = raw.mapInArrow(
            functools.partial(features_from_raw_partition, spec_bc=self.spec_bc, taxonomy_bc=None), FEATURES_SCHEMA
        )
        fn = self.predict_fn
        if self.fault_hook is not None:
            fn = functools.partial(_with_task_hook, fn, self.fault_hook, {str(i): p.value for i, p in enumerate(parts)})
        preds = feats.mapInArrow(fn, pred_ddl(self.extras))
        added = [F.col(c) for c in (SUGGESTIONS, PRED_CALIBRATED, EXPLANATIONS) if c in preds.columns]
        result = preds.select(
            F.col(DOC_ID),
            F.col(PRED_LABELS).alias(LABELS),
            F.col(PRED_SCORES).alias(SCORES),
            *added,
            F.lit(self.version).alias(MODEL_VERSION),
            F.lit(self.tax_fp).alias(TAXONOMY_FINGERPRINT),
            F.lit(self.run_id).alias(RUN_ID),
            F.lit(self.classified_at).cast(T.TimestampType()).alias(CLASSIFIED_AT),
            F.col(SPLIT).alias(_SLOT),
        )
        (
            result.write.mode("errorifexists")
            .option("compression", "snappy")
            .partitionBy(_SLOT)
            .parquet(str(staging))  # a plain path: as_uri() would escape "=" in names
        )

    def _install(self, part: InputPartition, written: Path) -> tuple[int, Counter[str], list[str], list[BadRecord]]:
        final = self.out / part.name
        tmp = self.out / f".{part.name}.tmp-{self.run_id}"
        try:
            if written.is_dir():
                os.rename(written, tmp)
            else:  # a partition without documents: no rows, no files, just the marker
                tmp.mkdir()
            if self.fault_hook is not None:
                self.fault_hook("driver", part.value)
            files = _rename_parts(tmp)
            rows, labels = _count(tmp, files)
            bad = self._bad.get(part.name, [])
            if bad:  # set aside: one JSON line per record, next to the partition's predictions
                with open(tmp / QUARANTINE_FILE, "w", encoding="utf-8") as f:
                    f.writelines(json.dumps(b.to_dict(), ensure_ascii=False) + "\n" for b in bad)
            write_json_atomic(tmp / MARKER_FILE, {
                MODEL_VERSION: self.version,
                TAXONOMY_FINGERPRINT: self.tax_fp,
                "input_fingerprint": part.fingerprint,
                "input_files": [p.relative_to(part.path).as_posix() for p in part.files],
                RUN_ID: self.run_id,
                CLASSIFIED_AT: self.classified_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "documents": rows,
                "files": files,
                **_quarantine_counts(bad),
            })
            replace_dir(tmp, final)
        except Exception:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return rows, labels, files, bad


def _quarantine_counts(bad: list[BadRecord]) -> dict[str, Any]:
    """The marker's / summary's account of the records set aside (empty when there are none)."""
    if not bad:
        return {}
    return {"quarantined": len(bad), "quarantine_reasons": dict(sorted(Counter(b.reason for b in bad).items())),
            "quarantine_file": QUARANTINE_FILE}


#: A record of an input partition that cannot be classified (found by :func:`scan_bad_records`):
#: ``where`` ("FILE, line N" or "FILE, row N"), ``reason`` ("malformed JSON" | "missing id" |
#: "conflicting ids" | "duplicate id"), ``detail``, ``doc_id``, ``record`` (the raw line, JSON Lines)
#: and ``order``; written to ``_quarantined.jsonl`` by ``to_dict``. The core's record (records.SetAside).
BadRecord = SetAside


def scan_bad_records(part: InputPartition) -> list[BadRecord]:
    """Every record of a partition that cannot be classified, with its file and line (JSON Lines) or
    row (Parquet): read on the driver by the partition's format reader on the record-check core with
    reclassify's declared rules (:data:`sparkhc.corpus.records.RECLASSIFY_RULES`: the id only, any
    JSON value an id, every malformed line "malformed JSON", every record of a repeated id set aside).
    Called only for partitions where the Spark check of :func:`check_partitions` found something."""
    fmt = formats.get("jsonl" if part.format == "json" else "parquet")
    batches, report = fmt.reader()(list(part.files), require_labels=False, on_invalid="quarantine",
                                   rules=RECLASSIFY_RULES)
    for _ in batches:  # (ids only: no batch is built; the report is complete once the reader ran)
        pass
    assert isinstance(report, ScanReport)
    return sorted(report.set_aside, key=lambda b: b.order)


@dataclass
class PartitionCheck:
    """What :func:`check_partitions` found in one partition: the rows to classify (a filter) and,
    with ``on_invalid="quarantine"``, the records set aside."""

    keep: Column | None = None  # None: every row
    bad: list[BadRecord] = field(default_factory=list)


def check_partitions(parts: list[InputPartition], inputs: list[DataFrame],
                     on_invalid: str = "error") -> list[PartitionCheck]:
    """Find malformed JSON lines, records without an id (``doc_id`` or ``id``), records whose
    ``doc_id`` and ``id`` disagree and duplicate ids (one Spark job for the batch). Where something
    is found, the partition's files are read again on the driver (:func:`scan_bad_records`, the core
    with reclassify's rules) to name every bad record's file and line; the Spark aggregate only decides
    which partitions are scanned and filters the rows to classify by the same tests. ``on_invalid="error"``: raise :class:`InputDataError` naming
    the first one and the counts (in a batch the partitions are then retried one by one, so each bad
    partition is reported with its own error); ``"quarantine"``: the other records are classified,
    the bad ones are returned (written aside by the caller)."""
    if on_invalid not in ("error", "quarantine"):
        raise SparkhcError(f"on_invalid must be 'error' or 'quarantine', got {on_invalid!r}")
    checks = []
    exprs = []
    for i, df in enumerate(inputs):
        corrupt_col = F.col(_CORRUPT) if _CORRUPT in df.columns else F.lit(None).cast(T.StringType())
        ident, conflict = id_columns(df)
        exprs.append((ident, conflict, corrupt_col))
        checks.append(df.select(F.lit(i).alias("slot"), ident.alias(DOC_ID), conflict.alias("_conflict"),
                                corrupt_col.alias(_CORRUPT), F.input_file_name().alias("file")))
    rows = functools.reduce(DataFrame.unionByName, checks)
    parsed = F.col(_CORRUPT).isNull()
    stats = rows.groupBy("slot").agg(
        F.count(F.lit(1)).alias("n"),
        F.sum((~parsed).cast("long")).alias("corrupt"),
        F.sum((parsed & F.col(DOC_ID).isNull()).cast("long")).alias("null_ids"),
        F.sum((parsed & F.col("_conflict")).cast("long")).alias("conflicts"),
        F.count_distinct(F.when(parsed & ~F.col("_conflict"), F.col(DOC_ID))).alias("distinct"),
    ).collect()
    out = [PartitionCheck() for _ in parts]
    for r in sorted(stats, key=lambda r: r["slot"]):
        part = parts[r["slot"]]
        corrupt, null_ids, conflicts = (int(r[k] or 0) for k in ("corrupt", "null_ids", "conflicts"))
        dups = int(r["n"]) - corrupt - null_ids - conflicts - int(r["distinct"])
        if not (corrupt or null_ids or conflicts or dups):
            continue
        bad = scan_bad_records(part)
        counts = Counter(b.reason for b in bad)
        if on_invalid == "error" or not bad:
            if bad:
                first = bad[0]
                raise InputDataError(
                    f"{first.where}: {first.detail}; {len(bad)} bad record(s) in partition {part.name} "
                    f"({', '.join(f'{k} {v}' for k, v in sorted(counts.items()))}); pass --on-invalid quarantine "
                    "(on_invalid='quarantine') to classify the others and set these aside")
            # the Spark check and the driver's scan disagree: name what Spark saw
            raise InputDataError(f"{part.path}: {corrupt} malformed JSON line(s), {null_ids} record(s) with a null or "
                                 f"missing {DOC_ID}, {conflicts} with disagreeing {DOC_ID} and {ID_ALIAS}, {dups} "
                                 "duplicate id row(s)")
        ident, conflict, corrupt_col = exprs[r["slot"]]  # the same tests on the partition's own columns
        keep = corrupt_col.isNull() & ident.isNotNull() & ~conflict
        dup_ids = sorted({b.doc_id for b in bad if b.reason == "duplicate id" and b.doc_id is not None})
        if dup_ids:
            keep = keep & ~ident.isin(dup_ids)
        out[r["slot"]] = PartitionCheck(keep, bad)
        log.warning("reclassify: %s: %d bad record(s) set aside (%s)", part.name, len(bad),
                    ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    return out


def _with_task_hook(
    fn: Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]], hook: FaultHook, values: dict[str, str],
    batches: Iterator[pa.RecordBatch],
) -> Iterator[pa.RecordBatch]:
    """Fault injection (tests): call ``hook("task", value)`` right after the task handed the writer
    a record batch of the partition ``value`` (``values`` maps the slot to it), so a hook that
    raises leaves some of the partition's rows in files."""
    for rb in fn(batches):
        yield rb
        for slot in sorted(set(rb.column(SPLIT).to_pylist())):
            hook("task", values[slot])


# ---------------------------------------------------------------------- reading the output
def read_output(out: str | Path, partition_column: str = DEFAULT_PARTITION_COLUMN) -> pa.Table:
    """All classified partitions as one Arrow table with the partition column (as a string),
    read with pyarrow (no Spark): for checks, reports and small downstream jobs."""
    root = Path(out)
    tables = []
    for d in discover_partitions_quiet(root, partition_column):
        for f in sorted(d.path.glob("part-*.parquet")):
            t = pq.read_table(f)
            tables.append(t.append_column(partition_column, pa.array([d.value] * t.num_rows, pa.string())))
    if not tables:
        return pa.table({c: pa.array([], pa.string()) for c in (*OUTPUT_COLUMNS[:1], partition_column)})
    return pa.concat_tables(tables, promote_options="permissive")
