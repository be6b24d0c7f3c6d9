"""Progress lines inside long stages, for people: at most one every :data:`INTERVAL` seconds, and
none for a stage that ends sooner (issue 53).

:class:`Throttle` decides when a line is due; :func:`epoch_progress` turns the training's per-epoch
debug records (hidden at the default verbosity) into such lines while a training runs;
:func:`sparkhc.spark.progress.stage_progress` does the same for Spark jobs. No pyspark here.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

#: seconds between two progress lines, and before the first one
INTERVAL = 5.0

#: the loggers whose per-epoch debug records :func:`epoch_progress` reads: the validation training's
#: scores (``select_epochs: ... epoch N, validation hF ...``) and each epoch trained by mixing
EPOCH_SOURCES = ("sparkhc.spark.mixing.selection", "sparkhc.spark.mixing.engine")


class Throttle:
    """When a progress line is due: never within ``interval`` seconds of the start or of the last
    line (so a stage that ends within ``interval`` seconds prints none)."""

    def __init__(self, interval: float = INTERVAL, clock: Callable[[], float] = time.monotonic) -> None:
        self.interval = float(interval)
        self.clock = clock
        self.start = clock()
        self._last = self.start

    def elapsed(self) -> float:
        return self.clock() - self.start

    def ready(self) -> bool:
        """Whether a line may be printed now."""
        return self.clock() - self._last >= self.interval

    def mark(self) -> None:
        """A line was printed now."""
        self._last = self.clock()

    def due(self) -> bool:
        """Whether a line may be printed now (and, if so, counts it as printed)."""
        if not self.ready():
            return False
        self.mark()
        return True


def duration(seconds: float) -> str:
    """``7 s``, ``2 min 5 s``, ``1 h 4 min``."""
    s = max(0, int(round(seconds)))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    return f"{s // 3600} h {s % 3600 // 60} min"


def time_left(elapsed: float, done: float, total: float) -> str:
    """``, ~12 s left`` at the pace so far (``elapsed`` seconds for ``done`` of ``total``); "" when
    nothing is done yet or the total is unknown."""
    if not total or done <= 0 or done >= total:
        return ""
    return f", ~{duration(elapsed * (total - done) / done)} left"


class EpochProgress(logging.Filter):
    """A filter on the :data:`EPOCH_SOURCES` loggers: their records of INFO and above pass; their
    DEBUG records (one per epoch) are withheld and become, at most every :data:`INTERVAL` seconds, one
    INFO line on ``out`` with the epochs done and, in the final training, the time left.

    :meth:`final_epoch` is the training's own progress callback for the final training
    (``fit_model(progress=...)``): it knows the epoch count, so it gives the time left."""

    def __init__(self, out: logging.Logger, what: str = "train", interval: float = INTERVAL,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.out = out
        self.what = what
        self.throttle = Throttle(interval, clock)
        self.final = False
        self._final_start: float | None = None
        #: when the validation training last scored an epoch (its lines say more than an epoch trained)
        self._scored: float | None = None
        self.lines = 0

    def _emit(self, text: str) -> None:
        if self.throttle.due():
            self.lines += 1
            self.out.info("%s: %s (%s so far)", self.what, text, duration(self.throttle.elapsed()))

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.INFO:
            return True
        try:
            text = self._describe(record)
        except Exception:  # a record of another form: withheld, as at the default verbosity
            text = None
        if text is not None:
            self._emit(text)
        return False

    def _describe(self, record: logging.LogRecord) -> str | None:
        msg = str(record.msg)
        if not isinstance(record.args, tuple):
            return None
        args: tuple[Any, ...] = record.args
        if record.name.endswith(".selection") and msg.startswith("select_epochs: %sepoch %d"):
            self._scored = self.throttle.clock()
            tag, epoch, hf, maf = args[0], int(args[1]), float(args[2]), float(args[3])
            rest = str(args[5]).lstrip("; ") if len(args) > 5 else ""
            return (f"choosing the epochs on validation data: {tag}epoch {epoch} scored (hF {hf:.3f}, "
                    f"macro-F1 {maf:.3f})" + (f"; {rest}" if rest else ""))
        if record.name.endswith(".engine") and msg.startswith("epoch %d/%d") and not self.final:
            # an epoch trained: worth a line while no epoch is scored (a barrier stage trains all its
            # epochs before the first is scored), not between two scored epochs
            if self._scored is not None and self.throttle.clock() - self._scored < self.throttle.interval:
                return None
            return f"epoch {int(args[0])} trained ({float(args[6]):.1f} s)"
        return None

    def final_epoch(self, info: dict[str, Any]) -> None:
        """The final training's record of an epoch (``epoch``, ``epochs``)."""
        now = self.throttle.clock()
        if not self.final:
            self.final, self._final_start = True, now - float(info.get("seconds", 0.0) or 0.0)
        epoch, epochs = int(info.get("epoch", 0)), int(info.get("epochs", 0))
        assert self._final_start is not None
        left = time_left(now - self._final_start, epoch, epochs)
        self._emit(f"final training on every document: epoch {epoch} of {epochs}{left}")


@contextmanager
def epoch_progress(out: logging.Logger, what: str = "train") -> Iterator[EpochProgress | None]:
    """While the block runs, the training's per-epoch debug records become throttled progress lines
    on ``out`` (:class:`EpochProgress`); yields None (nothing changed) when ``out`` logs DEBUG (``-v``
    prints every epoch itself) or does not log INFO."""
    if out.isEnabledFor(logging.DEBUG) or not out.isEnabledFor(logging.INFO):
        yield None
        return
    f = EpochProgress(out, what)
    saved = []
    for name in EPOCH_SOURCES:
        lg = logging.getLogger(name)
        saved.append((lg, lg.level))
        lg.addFilter(f)
        lg.setLevel(logging.DEBUG)
    try:
        yield f
    finally:
        for lg, level in saved:
            lg.removeFilter(f)
            lg.setLevel(level)
