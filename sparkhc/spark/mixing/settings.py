"""What one mixing training is asked to do (:class:`MixingSettings`) and the driver-side callbacks
it reports to (:class:`Hooks`); ``train.shards`` resolved to a number (:func:`resolve_shards`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sparkhc import config
from sparkhc.models.base import ModelState
from sparkhc.spark.session import SessionLike, task_slots

if TYPE_CHECKING:
    from sparkhc.config import TrainConfig

#: ``train.mixing``, the Spark engine: auto (barrier in local mode or with a shared exchange URI),
#: barrier, jobs. The third engine, the driver engine, is not a mode: rows read in the driver
#: (``train.execution``, :mod:`sparkhc.spark.plan`) always train there, as the barrier engine would
MIXING_MODES = config.MIXING_MODES  # train.mixing's choices
#: ``train.step_scale``: how far a shard's steps may go (:class:`MixingSettings`)
STEP_SCALES = ("one", "shards")


@dataclass(frozen=True)
class MixingSettings:
    """The settings of one training by iterative parameter mixing (pure data: they pickle to the
    barrier stage's tasks).

    ``epochs``: train epochs ``0..epochs-1`` (a resumed checkpoint skips the done ones);
    ``shards``: 0 = auto (:func:`resolve_shards`; :func:`sparkhc.spark.mixing.train.train_ipm`
    resolves it before any engine runs); ``seed``: the shards' shuffles (``seed + 1000003 *
    shard``); ``with_counts``: the shards carry raw term counts (``HierModel.needs_counts``);
    ``mixing``: :data:`MIXING_MODES` (``train.mixing``: the Spark engine, jobs or barrier; the
    driver engine, for rows read in the driver, does not read it); ``exchange_dir``: barrier mixing's
    exchange location (None: a local temp directory); ``checkpoint_dir``: per-epoch checkpoints
    and resume (:class:`sparkhc.spark.mixing.checkpoints.Checkpoint`), ``checkpoint_key``: what the
    checkpoint must also match (the training data); ``warm_start``: continue from the model's
    state; ``stop_chunk``: with an ``on_epoch_state`` hook, barrier mixing runs stages of that many
    epochs (0: one stage), so that an early stop saves the later epochs. ``step_scale``: ``"one"``
    (Murawaki 2013 Alg. 6: every shard trains as if alone, and the mean of ``K`` shards moves the
    model ``1 / K`` as far as one shard's epoch) or ``"shards"`` (``train.step_scale``; CoCoA+'s
    adding, Ma et al. 2015): a shard's steps are capped by ``C x K`` instead of ``C``
    (:meth:`local_scale`), so that the mean adds up the shards' steps, each capped by ``C`` as in
    serial training; one shard is serial training either way. ``gap_tol`` (> 0): a model whose
    epochs certify a duality gap (``model.global.solver = "dcd"``) stops after the first epoch
    whose base state has a relative gap of at most ``gap_tol`` (:func:`certified`).
    """

    epochs: int
    shards: int = 0
    seed: int = 0
    with_counts: bool = False
    mixing: str = "auto"
    exchange_dir: str | Path | None = None
    checkpoint_dir: str | Path | None = None
    checkpoint_key: dict[str, Any] | None = None
    warm_start: bool = False
    stop_chunk: int = 0
    step_scale: str = "one"
    gap_tol: float = 0.0

    def __post_init__(self) -> None:
        if self.mixing not in MIXING_MODES:
            raise ValueError(f"mixing must be 'auto', 'barrier' or 'jobs', not {self.mixing!r}")
        if self.step_scale not in STEP_SCALES:
            raise ValueError(f"step_scale must be 'one' or 'shards', not {self.step_scale!r}")

    def certified(self, info: dict[str, Any]) -> bool:
        """Whether an epoch's record (:func:`~sparkhc.spark.mixing.engine.epoch_info`) ends the
        training by its certificate (:func:`certified`)."""
        return certified(self.gap_tol, info)

    def local_scale(self) -> float:
        """The factor of the shards' step caps (:attr:`HierModel.step_scale`): the number of shards
        with ``step_scale = "shards"`` (resolved: :func:`resolve_shards` first), else 1."""
        return float(max(1, int(self.shards))) if self.step_scale == "shards" else 1.0

    @classmethod
    def from_train(cls, train: TrainConfig, epochs: int, **fields: Any) -> MixingSettings:
        """The settings of ``[train]`` (shards, seed, mixing, exchange_dir) for ``epochs`` epochs,
        with ``fields`` (the other fields) given by the caller."""
        fields.setdefault("gap_tol", float(getattr(train, "gap_tol", 0.0)))
        return cls(epochs=int(epochs), shards=train.shards, seed=train.seed, mixing=train.mixing,
                   exchange_dir=train.exchange_dir or None, step_scale=train.step_scale, **fields)


@dataclass(frozen=True)
class Hooks:
    """Callbacks of one mixing training. ``progress(info)``: each epoch's record on the driver, in
    order; ``on_epoch_state(epoch, state)``: the mixed state after each epoch on the driver, True
    to stop after it (an early stop); ``fault_hook(shard, epoch)``: called in the task after each
    shard-local epoch (fault injection in tests; pickled to the tasks); ``stage_epochs(done,
    limit)``: barrier mixing asks it, before each stage, how many epochs that stage runs (at most
    ``limit``, the stage ``stop_chunk`` and the epochs give; 0 ends the training: a time budget,
    :meth:`sparkhc.epochs.TimeBudget.stage_epochs`)."""

    progress: Callable[[dict[str, Any]], None] | None = None
    on_epoch_state: Callable[[int, ModelState], bool | None] | None = None
    fault_hook: Callable[[int, int], None] | None = None
    stage_epochs: Callable[[int, int], int] | None = None


def certified(gap_tol: float, info: dict[str, Any]) -> bool:
    """Whether an epoch's record ends a training by its certificate: ``rel_gap <= gap_tol`` (> 0)."""
    return gap_tol > 0 and "rel_gap" in info and float(info["rel_gap"]) <= gap_tol


def resolve_shards(spark: SessionLike, shards: int) -> int:
    """The number of shards of ``train.shards``: itself when positive; 0 (auto): the task slots
    Spark reports (``defaultParallelism``: the executors' cores, or N of ``local[N]``). Shards
    beyond the slots do not run at the same time, so they add no speed, and every extra shard costs
    accuracy per epoch: the mixed model moves by the mean of the shards' changes, so each
    document's correction reaches it divided by the number of shards (docs/benchmarks.md,
    section mixing-shards-default, "Accuracy against the number of shards")."""
    if int(shards) < 0:
        raise ValueError(f"shards must be >= 0 (0 = auto), not {shards}")
    return int(shards) if int(shards) > 0 else max(1, task_slots(spark))


def mixing_engine(master: str, requested: str, mixes_by_deltas: bool, exchange_dir: str | Path | None = None) -> str:
    """``"barrier"`` or ``"jobs"``: the Spark engine for ``requested`` (``train.mixing``) on
    ``master``. ``auto`` picks barrier mixing, for states that mix by row-sparse deltas
    (``mixes_by_deltas``, :func:`sparkhc.spark.deltas.supports`), in local mode (the exchange
    directory is then on the one machine) or when ``exchange_dir`` is a URI of a shared store
    (``hdfs://``, ``s3://``, ``gs://``, ...: every executor reaches it); one Spark job per epoch
    otherwise (a cluster with no exchange directory, or a plain path that may be local to each
    machine: ``barrier`` must then be asked for)."""
    from sparkhc import fsio

    if requested == "jobs" or not mixes_by_deltas:
        return "jobs"
    if requested == "barrier":
        return "barrier"
    if exchange_dir is not None and fsio.is_uri(exchange_dir):
        return "barrier"
    return "barrier" if master.startswith("local") else "jobs"
