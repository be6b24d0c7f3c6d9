"""The mixing-engine interface (:class:`Engine`) and what every engine shares: the recipe of the
scratch models its shards train (:class:`ModelSpec`) and the per-epoch record (:func:`epoch_info`,
:func:`log_epoch`). The engines: :mod:`.jobs` (one Spark job per epoch), :mod:`.barrier` (every
epoch in one barrier stage), :mod:`.driver` (in this process); :mod:`.train` picks one."""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

from sparkhc.models.base import HierModel
from sparkhc.spark.mixing.settings import Hooks, MixingSettings
from sparkhc.taxonomy import Taxonomy

log = logging.getLogger(__name__)


class Engine(ABC):
    """Runs the epochs of one training by iterative parameter mixing: every epoch, each shard runs
    one shard-local epoch from the epoch's base state (:func:`sparkhc.spark.mixing.mix.shard_epoch`)
    and the shards' results are mixed (:func:`sparkhc.spark.mixing.mix.mix`). Every engine gives
    the same mixture of the same shards (the jobs engine up to the order of float64 summation;
    barrier and driver bit for bit). An engine holds its input (a DataFrame, or rows read in the
    driver) from its construction."""

    #: the engine's name (``train.mixing``'s ``jobs`` / ``barrier``; ``driver`` for rows in this process)
    name: ClassVar[str]

    @abstractmethod
    def run(self, settings: MixingSettings, model: HierModel, start_epoch: int, hooks: Hooks) -> None:
        """Epochs ``start_epoch..settings.epochs - 1`` from ``model``'s current state (fresh, warm
        or resumed: :func:`sparkhc.spark.mixing.train.train_ipm` sets it), with ``settings.shards``
        already resolved; ``model`` holds the mixed state afterwards. Each epoch is reported to
        ``hooks.progress`` and, with ``settings.checkpoint_dir``, checkpointed; an
        ``hooks.on_epoch_state`` that returns True stops the training after that epoch."""


@dataclass(frozen=True, eq=False)
class ModelSpec:
    """What builds a scratch copy of a model where a shard trains (a task, a thread): its registry
    name, parameters, taxonomy and feature count, and the step scale of the shards' epochs
    (:attr:`HierModel.step_scale`, :meth:`MixingSettings.local_scale`). Pickles cleanly; the state
    travels apart."""

    name: str
    params: dict[str, Any]
    taxonomy: Taxonomy
    n_features: int
    step_scale: float = 1.0
    n_shards: int = 1

    @classmethod
    def of(cls, model: HierModel, step_scale: float = 1.0, n_shards: int = 1) -> ModelSpec:
        return cls(model.name, model.params, model.taxonomy, model.n_features, float(step_scale), int(n_shards))

    def build(self) -> HierModel:
        from sparkhc.models import get_model_class

        m = get_model_class(self.name)(self.taxonomy, self.n_features, **self.params)
        m.step_scale = self.step_scale
        m.n_shards = self.n_shards
        return m


#: keys of an epoch record that describe the run, not the model (left out of model metadata)
RUN_FIGURES = ("seconds", "broadcast_bytes", "result_bytes")


def epoch_info(epoch: int, epochs: int, counters: dict[str, float], secs: float) -> dict[str, Any]:
    """The per-epoch record (driver log line, ``progress`` callback, model metadata without
    :data:`RUN_FIGURES`). The jobs engine adds the bytes it shipped: ``broadcast_bytes`` (the base
    state or delta broadcast for the epoch, :class:`sparkhc.spark.mixing.jobs.BaseChain`) and
    ``result_bytes`` (the partitions' results)."""
    n = max(counters.get("examples", 0.0), 1.0)
    info = {
        "epoch": epoch + 1,
        "epochs": epochs,
        "shards": int(counters.get("shards", 0)),
        "examples": int(counters.get("examples", 0)),
        "updates": int(counters.get("updates", 0)),
        "mean_loss": counters.get("loss", 0.0) / n,
        "seconds": round(secs, 3),
    }
    for k in ("broadcast_bytes", "result_bytes"):
        if k in counters:
            info[k] = int(counters[k])
    for k in ("gap", "primal", "rel_gap"):  # a certified solver's duality gap at the epoch's base
        if k in counters:
            info[k] = float(counters[k])
    return info


def log_epoch(info: dict[str, Any]) -> None:
    shipped = ""
    if "rel_gap" in info:
        shipped = f", relative duality gap {info['rel_gap']:.2e}"
    if "broadcast_bytes" in info:
        shipped += f", shipped {info['broadcast_bytes']:,} B out and {info.get('result_bytes', 0):,} B back"
    log.debug(
        "epoch %d/%d: %d examples in %d shards, %d updates, mean loss %.4f, %.2f s%s",
        info["epoch"], info["epochs"], info["examples"], info["shards"], info["updates"],
        info["mean_loss"], info["seconds"], shipped,
    )
