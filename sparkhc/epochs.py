"""The number of training epochs chosen on validation data (``train.epochs = 0``, the default).

A fresh model is trained on the training documents less a seeded validation slice, scored on the
slice after every epoch, and the training then runs on all training documents for the first epoch
count with the best score. The score is hF + LB macro-F1 over the model taxonomy's real nodes
(:data:`CRITERION`): hF alone is flat after a few epochs while the rare labels are still being
learnt (docs/benchmarks.md, "epoch-selection"). The validation training stops early once
``patience`` epochs in a row have not beaten the best score (:class:`EarlyStopping`), or at
``max_epochs``.

Pure numpy: the Spark and driver paths of :func:`sparkhc.spark.ipm.select_epochs` share it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: the validation score: the sum of these metrics of :class:`sparkhc.metrics.MetricCounts`
CRITERION = ("hF", "LBMaF")
#: ``train.epochs = 0`` for models that are not trained by mixing (no validation curve): this many
FALLBACK_EPOCHS = 10


def validation_score(metrics: dict[str, float]) -> float:
    """The selection score of one epoch's validation metrics: the sum of :data:`CRITERION`."""
    return float(sum(float(metrics[k]) for k in CRITERION))


@dataclass
class EarlyStopping:
    """The validation curve of one selection and when to stop it.

    :meth:`add` appends an epoch's score and says whether to stop: ``patience`` (> 0) epochs
    after the best so far without a higher score. ``patience = 0`` never stops early. The chosen
    epoch count (:attr:`best`) is the first maximum of the curve, so a curve cut by the rule and
    the same curve run to the end give the same choice whenever the end adds no higher score.
    """

    patience: int
    curve: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        if int(self.patience) < 0:
            raise ValueError(f"patience must be >= 0 (0 = no early stopping), not {self.patience}")

    @property
    def best(self) -> int:
        """The chosen number of epochs: the first with the highest score (the fewest epochs)."""
        if not self.curve:
            raise ValueError("no epoch scored")
        return int(np.argmax(self.curve)) + 1

    def should_stop(self) -> bool:
        return int(self.patience) > 0 and len(self.curve) - self.best >= int(self.patience)

    def add(self, score: float) -> bool:
        """Record the next epoch's score; True when the training should stop after it."""
        self.curve.append(float(score))
        return self.should_stop()

    def summary(self) -> dict[str, Any]:
        return {"epochs": self.best, "epochs_run": len(self.curve), "patience": int(self.patience),
                "criterion": "+".join(CRITERION), "stopped_early": self.should_stop()}
