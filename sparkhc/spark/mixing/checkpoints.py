"""Per-epoch checkpoints of a mixing training: ``<folder>/latest/{state.npz, checkpoint.json}``,
replaced atomically after every epoch (by the driver, or by task 0 of the barrier stage), and the
resume of a rerun after the last checkpointed epoch when the checkpoint is for the same training
(model, parameters, seed, shards, taxonomy, feature count and the caller's data key)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from sparkhc.models.base import HierModel, ModelState
from sparkhc.persistence import atomic_dir, read_npz, write_json_atomic, write_npz
from sparkhc.spark.mixing.settings import MixingSettings

log = logging.getLogger(__name__)


class Checkpoint:
    """The checkpoint folder of one training (pickles cleanly: barrier task 0 writes it)."""

    def __init__(self, folder: str | Path, seed: int, shards: int, data: dict[str, Any] | None = None) -> None:
        self.folder = Path(folder)
        self.seed, self.shards, self.data = seed, shards, data

    @classmethod
    def of(cls, settings: MixingSettings) -> Checkpoint | None:
        """The checkpoint of ``settings`` (``checkpoint_dir``; None: none; shards resolved)."""
        if settings.checkpoint_dir is None:
            return None
        return cls(settings.checkpoint_dir, settings.seed, settings.shards, settings.checkpoint_key)

    def __str__(self) -> str:
        return str(self.folder)

    def key(self, model: HierModel) -> dict[str, Any]:
        return {"model": model.name, "params": model.params, "seed": self.seed, "shards": self.shards,
                "taxonomy": model.taxonomy.fingerprint(include_virtual=True), "n_features": model.n_features,
                "data": self.data or {}}

    def save(self, model: HierModel, epoch: int) -> None:
        """``model``'s state as the checkpoint of epoch ``epoch`` (0-based)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        with atomic_dir(self.folder / "latest", overwrite=True) as tmp:
            with open(tmp / "state.npz", "wb") as fh:
                write_npz(fh, model.get_state().arrays)
            write_json_atomic(tmp / "checkpoint.json", {**self.key(model), "epoch": epoch,
                                                        "counters": model.get_state().counters})

    def load(self, model: HierModel, epochs: int) -> int | None:
        """Set ``model``'s state to the checkpoint's and return its epoch; None (state untouched)
        when there is none, it is for another training, or it is past the ``epochs`` this training
        runs (a longer run of the same configuration that stopped: its state has more epochs than
        asked for)."""
        meta_file = self.folder / "latest" / "checkpoint.json"
        if not meta_file.is_file():
            return None
        meta = json.loads(meta_file.read_text(encoding="utf-8"))
        key = self.key(model)
        if any(json.dumps(meta.get(k), sort_keys=True) != json.dumps(v, sort_keys=True) for k, v in key.items()):
            log.warning("checkpoint %s is for another configuration; starting from scratch", self.folder)
            return None
        if int(meta["epoch"]) + 1 > int(epochs):
            log.warning("checkpoint %s holds %d epochs, more than the %d of this training (a longer run that "
                        "stopped); starting from scratch", self.folder, int(meta["epoch"]) + 1, int(epochs))
            return None
        with open(self.folder / "latest" / "state.npz", "rb") as fh:
            arrays = read_npz(fh)
        model.set_state(ModelState(arrays, meta.get("counters", {}), model.combine))
        return int(meta["epoch"])
