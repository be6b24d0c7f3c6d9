"""The number of training epochs chosen on validation data (``train.epochs = 0``, the default).

A fresh model is trained on the training documents less a seeded validation slice, scored on the
slice after every epoch, and the training then runs on all training documents for the first epoch
count with the best score. The score is hF + LB macro-F1 over the model taxonomy's real nodes
(:data:`CRITERION`): hF alone is flat after a few epochs while the rare labels are still being
learnt (docs/benchmarks.md, "epoch-selection"). The curve is smoothed by a trailing mean over
:data:`WINDOW` epochs (a 10% slice is small: one noisy early peak would otherwise stop the
selection; docs/benchmarks.md, "epoch-selection-nested": on slices the choice was not made on,
the smoothed rule scored best of the rules tried). The validation training stops early once
``max(patience, PATIENCE_GROWTH x best)`` epochs in a row have not beaten the best smoothed score
(:class:`EarlyStopping`), or at ``max_epochs``. The wait grows with the epoch of the best score so
far (the "patience increase" of Bengio's early-stopping recipe): a curve that climbs slowly, as
iterative parameter mixing over many small shards does (each shard's update enters the mixture
divided by the shard count), is not cut on a plateau it would leave, while a fast curve still stops
``patience`` epochs after its best (docs/benchmarks.md, "mixing-shards-default": with a wait of
10 epochs flat, 10 shards stopped 2.8 points of validation score short on rcv1v2_subset).

Pure numpy: the Spark and driver paths of :func:`sparkhc.spark.ipm.select_epochs` share it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: the validation score: the sum of these metrics of :class:`sparkhc.metrics.MetricCounts`
CRITERION = ("hF", "LBMaF")
#: epochs of the trailing mean the selection compares (1 = the raw curve)
WINDOW = 3
#: the wait after the best epoch ``b`` so far is ``max(patience, ceil(PATIENCE_GROWTH * b))`` epochs
#: (0 = a flat ``patience``); 0.5 chosen on validation curves only (docs/benchmarks.md,
#: "mixing-shards-default": the smallest of 0 / 0.25 / 0.5 / 0.75 / 1 whose in-sample regret is
#: below 0.05 points at 1, 2 and 10 shards on the three corpora)
PATIENCE_GROWTH = 0.5
#: ``train.epochs = 0`` for models that are not trained by mixing (no validation curve): this many
FALLBACK_EPOCHS = 10


def validation_score(metrics: dict[str, float]) -> float:
    """The selection score of one epoch's validation metrics: the sum of :data:`CRITERION`."""
    return float(sum(float(metrics[k]) for k in CRITERION))


@dataclass
class EarlyStopping:
    """The validation curve of one selection and when to stop it.

    :meth:`add` appends an epoch's score and says whether to stop: :meth:`wait` epochs after the
    best so far (``max(patience, ceil(growth * best))``, ``patience`` > 0) without a higher
    smoothed score (:attr:`smoothed`: the mean of the last ``window`` scores, fewer at the start).
    ``patience = 0`` never stops early. The chosen epoch
    count (:attr:`best`) is the first maximum of the smoothed curve, so a curve cut by the rule and
    the same curve run to the end give the same choice whenever the end adds no higher score.
    """

    patience: int
    window: int = WINDOW
    growth: float = PATIENCE_GROWTH
    curve: list[float] = field(default_factory=list)
    smoothed: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        if int(self.patience) < 0:
            raise ValueError(f"patience must be >= 0 (0 = no early stopping), not {self.patience}")
        if int(self.window) < 1:
            raise ValueError(f"window must be >= 1, not {self.window}")
        if not float(self.growth) >= 0:
            raise ValueError(f"growth must be >= 0, not {self.growth}")

    @property
    def best(self) -> int:
        """The chosen number of epochs: the first with the highest smoothed score (the fewest epochs)."""
        if not self.smoothed:
            raise ValueError("no epoch scored")
        return int(np.argmax(self.smoothed)) + 1

    def wait(self) -> int:
        """Epochs without a better smoothed score after which :meth:`add` stops (for the best so far)."""
        return max(int(self.patience), math.ceil(float(self.growth) * self.best - 1e-9))

    def should_stop(self) -> bool:
        return int(self.patience) > 0 and len(self.curve) - self.best >= self.wait()

    def add(self, score: float) -> bool:
        """Record the next epoch's score; True when the training should stop after it."""
        self.curve.append(float(score))
        tail = self.curve[-int(self.window):]
        self.smoothed.append(float(sum(tail) / len(tail)))
        return self.should_stop()

    def summary(self) -> dict[str, Any]:
        return {"epochs": self.best, "epochs_run": len(self.curve), "patience": int(self.patience),
                "patience_growth": float(self.growth), "window": int(self.window), "criterion": "+".join(CRITERION),
                "stopped_early": self.should_stop(),
                "smoothed_score": list(self.smoothed)}
