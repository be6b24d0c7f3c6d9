"""Small trainings in the driver process (``train.execution``).

A training on a few megabytes of features (20 Newsgroups: 14 MB of Parquet, 11,314 training
documents) costs little compute, but on Spark it pays per-job and per-session costs: the first
Parquet scan of the session, the label-combinations shuffle, starting the Python workers with their
imports and compiled kernels, staging the shards, the barrier stage; on such inputs they cost more
than the epochs themselves (the Spark path's breakdown: ``docs/archive/benchmarks-history.md``,
section profile-train; the driver execution's: ``docs/benchmarks.md``, section smalljobs-20ng).
Here the same training runs in the driver process:

* the features are read with pyarrow (:func:`sparkhc.features.read_features_local`, the same
  validation as the Spark reader) and the documents selected (:class:`sparkhc.features.Selection`);
* the label combinations come from those rows (what :func:`sparkhc.spark.pipelines.label_combinations`
  computes with a Spark job);
* the shards are the barrier mode's: shard ``pmod(hash(doc_id), shards)`` with Spark's own
  ``hash`` (:func:`spark_hash`, Murmur3 as Spark computes it), each sorted by doc id;
* every epoch runs each shard from the epoch's base state with the barrier mode's code
  (:func:`sparkhc.spark.mixing.mix.shard_epoch`; the shards run in threads, the compiled kernels release
  the GIL) and mixes their deltas in shard order (:func:`sparkhc.spark.mixing.mix.mix_deltas`), so the
  weights are bit-identical to the Spark path's (tests/spark/test_small.py);
* checkpoints, progress records and the model metadata are those of the Spark path.

``train.execution``: ``auto`` runs here when the master is local (``local``, ``local[N]``: the
driver is on the machine that would run the tasks), the features are a local path of at most
:data:`AUTO_MAX_INPUT_BYTES` of Parquet, ``train.mixing`` is not ``jobs`` (its float summation order
differs) and the model's state is at most :data:`AUTO_MAX_STATE_BYTES`; ``driver`` runs here whatever
the size or master (for the models that allow it); ``spark`` never. Models trained by mixing whose
states mix by row-sparse deltas, the models fitted on the driver anyway (``local`` strategy) and
the MDC models (``m3mdc``, ``mdc_br``: the Spark path's pair blocks, the pairs of a round in threads,
:func:`sparkhc.spark.mdc.fit_mdc_driver`) train here; node-parallel and EM models stay on Spark. The validation models
of ``train.select_epochs`` and the inner folds of ``train.calibrate`` train here too, on the same rows.
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from pyspark.sql import SparkSession

from sparkhc import fsio
from sparkhc.batch import SparseBatch
from sparkhc.config import TrainConfig
from sparkhc.errors import InputDataError
from sparkhc.features import Selection, features_layout, read_features_local
from sparkhc.models.base import HierModel
from sparkhc.text.spec import FeatureSpec

log = logging.getLogger(__name__)

#: ``train.execution = "auto"``: largest Parquet input (all part files, before selection) trained in the driver
AUTO_MAX_INPUT_BYTES = 64 << 20
#: ``train.execution = "auto"``: largest model state (all arrays) trained in the driver
AUTO_MAX_STATE_BYTES = 256 << 20

# ----------------------------------------------------------------------------- Spark's hash()
_C1, _C2 = np.uint32(0xCC9E2D51), np.uint32(0x1B873593)


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint32(r)) | (x >> np.uint32(32 - r))


def _mix(h: np.ndarray, k: np.ndarray) -> np.ndarray:
    k = _rotl(k * _C1, 15) * _C2
    h = _rotl(h ^ k, 13)
    return h * np.uint32(5) + np.uint32(0xE6546B64)


def spark_hash(values: Sequence[str] | np.ndarray, seed: int = 42) -> np.ndarray:
    """Spark SQL's ``hash(s)`` of each string (int32): Murmur3 x86_32 of the UTF-8 bytes as Spark's
    ``Murmur3_x86_32.hashUnsafeBytes`` computes it (4-byte little-endian words, then each trailing
    byte, sign-extended, mixed as a word of its own), seed 42. Vectorized over the strings."""
    enc = [str(v).encode("utf-8") for v in values]
    n = len(enc)
    if n == 0:
        return np.zeros(0, dtype=np.int32)
    lens = np.fromiter((len(b) for b in enc), dtype=np.int64, count=n)
    width = (int(lens.max()) // 4 + 1) * 4
    buf = np.zeros((n, width), dtype=np.uint8)
    flat = np.frombuffer(b"".join(enc), dtype=np.uint8)
    starts = np.cumsum(lens) - lens
    buf[np.repeat(np.arange(n), lens), np.arange(flat.size) - np.repeat(starts, lens)] = flat
    words = buf.view("<u4")
    h = np.full(n, seed, dtype=np.uint32)
    nw = lens // 4
    with np.errstate(over="ignore"):
        for j in range(int(nw.max())):
            m = j < nw
            h[m] = _mix(h[m], words[m, j])
        tail = lens % 4
        for t in range(3):
            m = t < tail
            byte = buf[m, nw[m] * 4 + t].view(np.int8).astype(np.int32).view(np.uint32)
            h[m] = _mix(h[m], byte)
        h = _fmix(h, lens.astype(np.uint32))
    return h.view(np.int32)


def _fmix(h: np.ndarray, length: np.ndarray | np.uint32) -> np.ndarray:
    """Murmur3's finalisation of ``h`` (uint32) for an input of ``length`` bytes (overflow ignored
    by the caller)."""
    h = h ^ length
    h ^= h >> np.uint32(16)
    h *= np.uint32(0x85EBCA6B)
    h ^= h >> np.uint32(13)
    h *= np.uint32(0xC2B2AE35)
    h ^= h >> np.uint32(16)
    return h


def spark_hash_long(values: Sequence[int] | np.ndarray, seed: int = 42) -> np.ndarray:
    """Spark SQL's ``hash(v)`` of each bigint (int32): ``Murmur3_x86_32.hashLong`` (the low then
    the high 32-bit word mixed, finalised as 8 bytes), seed 42. Hash partitioning puts a row with
    key ``v`` into partition ``pmod(hash(v), n)``. Vectorized over the values."""
    v = np.asarray(values, dtype=np.int64).view(np.uint64)
    low = (v & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    high = (v >> np.uint64(32)).astype(np.uint32)
    h = np.full(v.shape, np.int64(seed) & 0xFFFFFFFF, dtype=np.uint64).astype(np.uint32)
    with np.errstate(over="ignore"):
        return _fmix(_mix(_mix(h, low), high), np.uint32(8)).view(np.int32)


def spark_hash_int(value: int, seeds: np.ndarray) -> np.ndarray:
    """Spark's ``Murmur3_x86_32.hashInt(value, seed)`` for each seed (int32): what ``hash(col, 17)``
    computes for its second argument, an int literal, from the hash of the first as the seed."""
    h = np.asarray(seeds).astype(np.int32).view(np.uint32)
    k = np.full(h.shape, np.int64(value) & 0xFFFFFFFF, dtype=np.uint64).astype(np.uint32)
    with np.errstate(over="ignore"):
        return _fmix(_mix(h, k), np.uint32(4)).view(np.int32)


def validation_cut(fraction: float) -> int:
    """The hash cut of a validation slice of ``fraction`` of the documents (out of 10000), checked."""
    if not 0.0 < float(fraction) < 1.0:
        raise ValueError(f"the validation fraction must be in (0, 1), not {fraction}")
    return int(round(float(fraction) * 10000))


def validation_bands(fraction: float) -> int:
    """How many disjoint validation bands of ``fraction`` the hash range holds (``10000 // cut``)."""
    return 10000 // validation_cut(fraction)


def validation_ids(doc_ids: Sequence[str] | np.ndarray, fraction: float, seed: int, band: int = 0) -> np.ndarray:
    """Which documents :func:`sparkhc.spark.mixing.selection.validation_split` holds out (a bool per id):
    ``band * cut <= pmod(hash(doc_id, seed + 17), 10000) < (band + 1) * cut`` with
    ``cut = validation_cut(fraction)``, as Spark SQL computes it (band 0: the first ``fraction``)."""
    cut = validation_cut(fraction)
    if not 0 <= int(band) < validation_bands(fraction):
        raise ValueError(f"validation band {band} out of range for the fraction {fraction}")
    h = np.mod(spark_hash_int(int(seed) + 17, spark_hash(doc_ids)).astype(np.int64), 10000)
    return (h >= int(band) * cut) & (h < (int(band) + 1) * cut)


def shard_ids(doc_ids: Sequence[str] | np.ndarray, shards: int) -> np.ndarray:
    """``pmod(hash(doc_id), shards)``: the shard barrier mixing gives each document."""
    return np.mod(spark_hash(doc_ids).astype(np.int64), int(shards))


# ----------------------------------------------------------------------------- the session
_LOCAL = re.compile(r"^local(?:\[(\*|\d+)(?:,\s*\d+)?\])?$")


class DeferredSession:
    """The SparkSession a verb would start, started on first use (:meth:`get`) only: until then
    its master and task slots come from the configuration alone (no JVM), so a training that runs
    in the driver (``train.execution``) never starts Spark. Made by :func:`deferred_session`."""

    def __init__(self, factory: Callable[[], SparkSession], master: str) -> None:
        self._factory = factory
        self._session: SparkSession | None = None
        self.master = master
        #: seconds :meth:`get` took to start the session (0.0 while not started)
        self.startup_seconds = 0.0

    @property
    def started(self) -> bool:
        return self._session is not None

    def get(self) -> SparkSession:
        if self._session is None:
            log.info("starting the Spark session (master %s)", self.master)
            t0 = time.perf_counter()
            self._session = self._factory()
            self.startup_seconds = time.perf_counter() - t0
        return self._session

    def task_slots(self) -> int:
        """Spark's ``defaultParallelism`` for this master: N of ``local[N]``, 1 for ``local``, the
        CPUs this process may run on for ``local[*]`` (what the JVM's availableProcessors reports
        without a container CPU quota); the started session's own figure otherwise."""
        m = _LOCAL.match(self.master)
        if self._session is not None or m is None:
            return int(self.get().sparkContext.defaultParallelism)
        if m.group(1) is None:
            return 1
        if m.group(1) == "*":
            return _cpus()
        return int(m.group(1))


#: a session argument: a started session, or one started on first use
SessionLike = SparkSession | DeferredSession


def _cpus() -> int:
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        n = os.cpu_count() or 1
    quota = Path("/sys/fs/cgroup/cpu.max")  # cgroup v2 quota, which the JVM honours
    try:
        q, period = quota.read_text().split()[:2]
        if q != "max":
            n = min(n, max(1, -(-int(q) // int(period))))
    except (OSError, ValueError):
        pass
    return max(1, n)


def _conf_sets_parallelism() -> bool:
    """Whether a spark-defaults.conf the session would read sets ``spark.default.parallelism``."""
    for d in (os.environ.get("SPARK_CONF_DIR"), os.path.join(os.environ.get("SPARK_HOME", ""), "conf")):
        f = Path(d) / "spark-defaults.conf" if d else None
        try:
            if f is not None and f.is_file() and re.search(r"^\s*spark\.default\.parallelism\b", f.read_text(),
                                                           re.MULTILINE):
                return True
        except OSError:
            pass
    return False


def deferred_session(app_name: str, master: str | None) -> SessionLike:
    """The session :func:`sparkhc.spark.session.get_session` would give (``app_name``,
    ``master``), deferred when its master is known without starting it: not under spark-submit
    (the submitted master lives in the JVM), no session already active, and no spark-defaults.conf
    that sets ``spark.default.parallelism``. Otherwise the session, started now."""
    from sparkhc.spark.session import get_session, submitted

    if submitted() or SparkSession.getActiveSession() is not None or _conf_sets_parallelism():
        return get_session(app_name=app_name, master=master)
    resolved = master or os.environ.get("SPARKHC_MASTER", "local[*]")
    return DeferredSession(lambda: get_session(app_name=app_name, master=resolved), resolved)


def active(spark: SessionLike) -> SparkSession:
    """The session itself (a deferred one is started now)."""
    return spark.get() if isinstance(spark, DeferredSession) else spark


def master_of(spark: SessionLike) -> str:
    return spark.master if isinstance(spark, DeferredSession) else (spark.sparkContext.master or "")


def startup_seconds(spark: SessionLike) -> float:
    """Seconds a deferred session took to start (0.0 for a session given started)."""
    return spark.startup_seconds if isinstance(spark, DeferredSession) else 0.0


def task_slots(spark: SessionLike) -> int:
    """Spark's ``defaultParallelism`` (a deferred session's without starting it)."""
    return spark.task_slots() if isinstance(spark, DeferredSession) else int(spark.sparkContext.defaultParallelism)


# ----------------------------------------------------------------------------- the choice
def is_local_master(spark: SessionLike) -> bool:
    return _LOCAL.match(master_of(spark)) is not None


def read_rows(spark: SessionLike, train: TrainConfig, features: str | Path, selection: Selection,
              with_counts: bool) -> tuple[SparseBatch, FeatureSpec] | None:
    """The selected documents (and the feature spec) read in this process when the training may
    run here (``train.execution``, see the module doc), else None (train on Spark). ``spark`` may
    be a :class:`DeferredSession`: the choice never starts it."""
    setting = train.execution  # one of auto | spark | driver (checked by sparkhc.config)
    if setting == "spark":
        return None
    path = fsio.local_path(str(features))
    if path is None:
        if setting == "driver":
            log.info("train.execution = driver: %s is not a local path; training on Spark", features)
        return None
    if setting == "auto":
        if not is_local_master(spark) or train.mixing == "jobs":
            return None
        size = sum(p.stat().st_size for p in features_layout(path)[2])
        if size > AUTO_MAX_INPUT_BYTES:
            log.info("features %s: %.1f MiB of Parquet > %d MiB; training on Spark", path, size / 2**20,
                     AUTO_MAX_INPUT_BYTES >> 20)
            return None
    batch, spec = read_features_local(path, with_counts=with_counts)
    rows = selection.subset(batch)
    ids = np.sort(rows.doc_ids)
    dup = ids[1:][ids[1:] == ids[:-1]]
    if dup.size:  # the Spark path's order of equal ids depends on its partitions
        if setting == "driver":
            raise InputDataError(f"{features}: doc_id must be unique to train in the driver (train.execution = "
                                 f"driver): {dup.size} duplicate(s), e.g. {str(dup[0])!r}")
        log.info("features %s: duplicate doc ids; training on Spark", path)
        return None
    return rows, spec


def can_train(model: HierModel, train: TrainConfig) -> bool:
    """Whether ``model`` trains in the driver (rows read by :func:`read_rows`): models fitted on
    the driver anyway, and those trained by mixing whose states mix by deltas (with ``auto``: a
    state of at most :data:`AUTO_MAX_STATE_BYTES`)."""
    from sparkhc.spark import deltas

    strategy = model.training_strategy(node_parallel=train.node_parallel)
    if strategy == "local" or (strategy == "batch" and model.fits_open):
        return True  # fitted on the driver anyway, or the MDC models' pair blocks (sparkhc.spark.mdc.fit_mdc_driver)
    if strategy != "mixing":
        return False
    state = model.init_state()
    if not deltas.supports(state):
        return False
    size = sum(int(getattr(a, "nbytes", 0)) for a in state.arrays.values())
    return train.execution == "driver" or size <= AUTO_MAX_STATE_BYTES


def label_combinations_of(rows: SparseBatch) -> list[list[str]]:
    """The distinct sorted label lists of ``rows``, sorted (as
    :func:`sparkhc.spark.pipelines.label_combinations` computes them on Spark)."""
    return [list(t) for t in sorted({tuple(sorted(labs)) for labs in rows.labels or []})]


def sorted_by_id(batch: SparseBatch) -> SparseBatch:
    """The documents of ``batch`` in doc-id order (a shard as the Spark path holds it)."""
    return batch.subset(np.argsort(batch.doc_ids, kind="stable"))


# ----------------------------------------------------------------------------- the training
