"""Progress lines of the Spark jobs a long stage runs (featurize's read, predict and evaluate on
Spark): a thread in the driver polls Spark's status tracker for the jobs of the block's job group
and logs, at most every :data:`sparkhc.progress.INTERVAL` seconds and never for a block that ends
sooner, the tasks done, the documents done where their number is known, and the time left."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from sparkhc.progress import INTERVAL, Throttle, duration, time_left

log = logging.getLogger("sparkhc.progress")

#: seconds between two polls of the status tracker
POLL = 0.5
#: the local properties ``SparkContext.setJobGroup`` sets (restored after the block)
_GROUP_KEYS = ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel")


@dataclass
class StageProgress:
    """What the block is doing (``what``, may change between its steps) and, when known, how many
    ``unit`` it handles in all (``total``)."""

    what: str
    total: int | None = None
    unit: str = "documents"
    lines: list[str] = field(default_factory=list)
    #: when each stage (id) was first seen running (its time left is reckoned from there)
    _seen: dict[int, float] = field(default_factory=dict)

    def line(self, elapsed: float, stages: list[tuple[int, int, int]], first: tuple[int, int] | None,
             now: float) -> str | None:
        """The progress line for the running ``stages`` ((id, tasks, tasks done) each; ``first``: (tasks,
        done) of the first stage of the running job, the one that reads the documents), None when no
        stage runs (the driver works between two jobs)."""
        if not stages:
            return None
        tasks = sum(s[1] for s in stages)
        done = sum(s[2] for s in stages)
        start = min(self._seen.setdefault(s[0], now) for s in stages)
        head = f"{self.what} ({self.total:,} {self.unit})" if self.total else self.what
        if self.total and first is not None and first[0] and 0 < first[1] < first[0]:
            # documents done: known per finished task (a task's documents are done when it ends)
            body = f"~{round(self.total * first[1] / first[0]):,} done ({done} of {tasks} Spark tasks)"
        else:
            body = f"{done} of {tasks} Spark tasks done"
        return f"{head}: {body}, {duration(elapsed)} so far{time_left(now - start, done, tasks)}"


def _status(sc: Any, group: str) -> tuple[list[tuple[int, int, int]], tuple[int, int] | None]:
    """The running stages of ``group``'s running jobs ((id, tasks, done) each) and (tasks, done) of the
    first stage of the newest running job."""
    tracker = sc.statusTracker()
    active = set(tracker.getActiveStageIds())
    stages: list[tuple[int, int, int]] = []
    first: tuple[int, int] | None = None
    for job in sorted(tracker.getJobIdsForGroup(group)):
        info = tracker.getJobInfo(job)
        if info is None or str(info.status) != "RUNNING":
            continue
        ids = sorted(int(s) for s in info.stageIds)
        for sid in ids:
            st = tracker.getStageInfo(sid) if sid in active else None
            if st is not None:
                stages.append((sid, int(st.numTasks), int(st.numCompletedTasks)))
        head = tracker.getStageInfo(ids[0]) if ids else None
        if head is not None:
            first = (int(head.numTasks), int(head.numCompletedTasks))
        elif ids:  # the reading stage is over (no longer tracked as running): all its documents done
            first = (1, 1)
    return stages, first


@contextmanager
def stage_progress(spark: Any, what: str, total: int | None = None, unit: str = "documents",
                   interval: float = INTERVAL, poll: float = POLL,
                   clock: Callable[[], float] = time.monotonic) -> Iterator[StageProgress]:
    """Throttled progress lines (on the ``sparkhc.progress`` logger, INFO) of the Spark jobs started
    by this thread inside the block (a job group of their own; the thread's previous group is put
    back after it). ``total``: the number of ``unit`` the block handles, when known."""
    prog = StageProgress(what, total, unit)
    if not log.isEnabledFor(logging.INFO):
        yield prog
        return
    sc = spark.sparkContext
    group = f"sparkhc-progress-{uuid.uuid4().hex[:12]}"
    saved = {k: sc.getLocalProperty(k) for k in _GROUP_KEYS}
    sc.setJobGroup(group, what)
    stop = threading.Event()
    throttle = Throttle(interval, clock)

    def run() -> None:
        while not stop.wait(poll):
            try:  # every poll: when each stage was first seen running is its start
                stages, first = _status(sc, group)
            except Exception:  # the session is stopping: no more lines
                return
            now = clock()
            for s in stages:
                prog._seen.setdefault(s[0], now)
            if not throttle.ready():
                continue
            line = prog.line(throttle.elapsed(), stages, first, now)
            if line is not None and not stop.is_set():
                throttle.mark()
                prog.lines.append(line)
                log.info("%s", line)

    thread = threading.Thread(target=run, name="sparkhc-progress", daemon=True)
    thread.start()
    try:
        yield prog
    finally:
        stop.set()
        thread.join(timeout=2 * poll + 1)
        for k, v in saved.items():
            sc.setLocalProperty(k, v)
