"""Majority baseline: predicts the leaves that at least half of the training documents hold (or
the most frequent leaf when none does), whatever the document. A sanity floor for any corpus, and
the worked example of adding a model in ``docs/architecture.md``: this file and its test are all
it takes; the registry and the conformance suite find it."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from sparkhc.batch import SparseBatch
from sparkhc.models.base import HierModel, ModelState

MODELS = {"majority": "Majority"}


class Majority(HierModel):
    name = "majority"
    combine = "sum"  # shard states hold counts: mixing sums them
    single_pass = True  # counting: a second epoch would count every document again
    defaults: ClassVar[dict[str, Any]] = {"min_share": 0.5}

    def validate_params(self) -> None:
        share = self.params["min_share"]
        self._check_param("min_share", isinstance(share, float) and 0 < share <= 1, "a float in (0, 1]")

    def init_state(self) -> ModelState:
        counts = np.zeros(self.taxonomy.n_nodes, dtype=np.float64)
        return ModelState({"leaf_docs": counts, "docs": np.zeros(1)}, {}, self.combine)

    def partial_fit(self, batch: SparseBatch, seed: int = 0, epoch: int = 0) -> dict[str, float]:
        if self.state_ is None:
            self.state_ = self.init_state()
        counts = self.state_.arrays["leaf_docs"]
        for leaves in batch.leaf_sets(self.taxonomy):
            counts[leaves] += 1.0
        self.state_.arrays["docs"] += len(batch)
        return {"examples": float(len(batch)), "updates": 0.0, "loss": 0.0}

    def decode(self, batch: SparseBatch) -> tuple[list[np.ndarray], np.ndarray | None]:
        counts = self.get_state().arrays["leaf_docs"]
        share = counts / max(float(self.get_state().arrays["docs"][0]), 1.0)
        chosen = np.flatnonzero(share >= self.params["min_share"])
        if chosen.size == 0 and counts.any():
            chosen = np.array([int(np.argmax(counts))])
        scores = np.tile(share, (len(batch), 1))
        return [chosen.astype(np.int32) for _ in range(len(batch))], scores
