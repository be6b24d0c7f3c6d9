"""Progress lines inside long stages (issue 53): at most one every few seconds, none for a stage
that ends sooner, with the epochs or documents done and the time left where it is known. No Spark:
the status tracker is a stand-in."""

from __future__ import annotations

import logging
import re
import threading
import time
from types import SimpleNamespace

import pytest

from sparkhc.progress import (
    EPOCH_SOURCES,
    INTERVAL,
    EpochProgress,
    Throttle,
    duration,
    epoch_progress,
    time_left,
)


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_throttle_waits_an_interval_before_the_first_line_and_between_lines() -> None:
    clock = Clock()
    th = Throttle(5.0, clock)
    printed = []
    for step in range(61):  # a poll every 0.25 s for 15 s
        clock.t = 1000.0 + step * 0.25
        if th.due():
            printed.append(clock.t - 1000.0)
    assert printed == [5.0, 10.0, 15.0]
    assert INTERVAL == 5.0


def test_a_stage_shorter_than_the_interval_prints_nothing() -> None:
    clock = Clock()
    th = Throttle(5.0, clock)
    clock.t += 4.99
    assert not th.due()


def test_time_left_and_durations() -> None:
    assert time_left(10.0, 2, 10) == ", ~40 s left"
    assert time_left(10.0, 0, 10) == "" and time_left(10.0, 3, 0) == "" and time_left(10.0, 10, 10) == ""
    assert duration(59.4) == "59 s" and duration(125) == "2 min 5 s" and duration(3 * 3600 + 240) == "3 h 4 min"


def _record(name: str, msg: str, args: tuple, level: int = logging.DEBUG) -> logging.LogRecord:
    return logging.LogRecord(name, level, __file__, 1, msg, args, None)


SELECTION = "select_epochs: %sepoch %d, validation hF %.4f, macro-F1 %.4f (%d documents)%s"
ENGINE = "epoch %d/%d: %d examples in %d shards, %d updates, mean loss %.4f, %.2f s%s"


def test_epoch_records_become_throttled_lines_with_what_is_known() -> None:
    out = logging.getLogger("test.progress.out")
    clock = Clock()
    f = EpochProgress(out, "train", 5.0, clock)
    lines: list[str] = []
    f._emit = lambda text, _emit=f._emit: (lines.append(text) if f.throttle.ready() else None, _emit(text))
    # the validation training: a scored epoch every second for 12 s
    for e in range(1, 13):
        clock.t = 1000.0 + e
        rec = _record(EPOCH_SOURCES[0], SELECTION,
                      ("C=0.3 ", e, 0.9, 0.8, 1131, f"; best {e}, at least 10 more epochs (~12 s at 1.0 s an epoch)"))
        assert f.filter(rec) is False  # the debug record itself is withheld
    assert lines == [
        "choosing the epochs on validation data: C=0.3 epoch 5 scored (hF 0.900, macro-F1 0.800); best 5, at least "
        "10 more epochs (~12 s at 1.0 s an epoch)",
        "choosing the epochs on validation data: C=0.3 epoch 10 scored (hF 0.900, macro-F1 0.800); best 10, at "
        "least 10 more epochs (~12 s at 1.0 s an epoch)"]
    # an epoch trained between two scored ones says less: no line for it
    clock.t = 1016.0
    f.filter(_record(EPOCH_SOURCES[1], ENGINE, (13, 100, 9000, 2, 500, 0.5, 3.0, "")))
    assert len(lines) == 2
    # a barrier stage of the selection (epochs trained, none scored for a while): each is a line
    clock.t = 1018.0
    f.filter(_record(EPOCH_SOURCES[1], ENGINE, (14, 100, 9000, 2, 500, 0.5, 3.0, "")))
    assert lines[-1] == "epoch 14 trained (3.0 s)"
    # the final training: its count is known, so is the time left
    for e in range(1, 11):
        clock.t = 1018.0 + 2 * e
        f.final_epoch({"epoch": e, "epochs": 10, "seconds": 2.0})
        f.filter(_record(EPOCH_SOURCES[1], ENGINE, (e, 10, 9000, 2, 500, 0.5, 2.0, "")))  # left to the callback
    assert lines[-3:] == ["final training on every document: epoch 3 of 10, ~14 s left",
                          "final training on every document: epoch 6 of 10, ~8 s left",
                          "final training on every document: epoch 9 of 10, ~2 s left"]
    assert f.lines == 6
    # records of INFO and above pass untouched
    assert f.filter(_record(EPOCH_SOURCES[0], "select_epochs: C=%g beats", (0.1,), logging.INFO)) is True


def test_a_record_of_another_form_is_withheld_without_a_line() -> None:
    clock = Clock()
    f = EpochProgress(logging.getLogger("test.progress.out"), "train", 5.0, clock)
    clock.t += 10
    assert f.filter(_record(EPOCH_SOURCES[0], "select_epochs: %s", ("something else",))) is False
    assert f.filter(_record(EPOCH_SOURCES[1], ENGINE, ("not a number",))) is False
    assert f.lines == 0


def test_epoch_progress_at_the_default_verbosity_and_with_v(caplog: pytest.LogCaptureFixture) -> None:
    out = logging.getLogger("sparkhc.test_progress")
    src = logging.getLogger(EPOCH_SOURCES[1])
    before = src.level
    caplog.set_level(logging.INFO)
    with epoch_progress(out) as f:
        assert f is not None and src.level == logging.DEBUG
        f.throttle.start -= 10
        f.throttle._last -= 10
        src.debug(ENGINE, 1, 100, 10, 2, 5, 0.5, 1.25, "")
        src.info("an info line passes")
    assert src.level == before and f not in src.filters
    msgs = [r.getMessage() for r in caplog.records]
    assert msgs[0].startswith("train: epoch 1 trained (1.2 s) (") and msgs[1] == "an info line passes"
    assert not any(r.levelno == logging.DEBUG for r in caplog.records)
    caplog.clear()
    caplog.set_level(logging.DEBUG)  # -v: every epoch is its own line; nothing changed
    with epoch_progress(out) as f2:
        assert f2 is None and src.filters == []


# --- Spark stages, with a stand-in status tracker ------------------------------------------------


class FakeTracker:
    """One job of one stage of 8 tasks, a task done every 0.2 s from the time ``start`` is set."""

    def __init__(self, sc: FakeContext) -> None:
        self.sc = sc

    def _done(self) -> int:
        return min(8, int((time.monotonic() - self.sc.start) / 0.2))

    def getActiveStageIds(self) -> list[int]:
        return [3] if self.sc.start and self._done() < 8 else []

    def getJobIdsForGroup(self, group: str) -> list[int]:
        return [7] if group == self.sc.props.get("spark.jobGroup.id") else []

    def getJobInfo(self, job: int) -> SimpleNamespace:
        return SimpleNamespace(status="RUNNING" if self._done() < 8 else "SUCCEEDED", stageIds=[3])

    def getStageInfo(self, sid: int) -> SimpleNamespace:
        return SimpleNamespace(numTasks=8, numCompletedTasks=self._done())


class FakeContext:
    def __init__(self) -> None:
        self.props: dict[str, str | None] = {"spark.jobGroup.id": "outer"}
        self.start = 0.0
        self.lock = threading.Lock()

    def getLocalProperty(self, k: str) -> str | None:
        return self.props.get(k)

    def setLocalProperty(self, k: str, v: str | None) -> None:
        self.props[k] = v

    def setJobGroup(self, group: str, description: str) -> None:
        self.props.update({"spark.jobGroup.id": group, "spark.job.description": description})

    def statusTracker(self) -> FakeTracker:
        return FakeTracker(self)


def test_spark_stage_lines_are_throttled_and_name_documents_and_time_left(caplog: pytest.LogCaptureFixture) -> None:
    from sparkhc.spark.progress import stage_progress

    caplog.set_level(logging.INFO, logger="sparkhc.progress")
    spark = SimpleNamespace(sparkContext=FakeContext())
    with stage_progress(spark, "predict: decoding", total=800, interval=0.3, poll=0.02) as prog:
        assert spark.sparkContext.props["spark.jobGroup.id"].startswith("sparkhc-progress-")
        spark.sparkContext.start = time.monotonic()
        time.sleep(1.2)  # the stage's 8 tasks take 1.6 s
    assert spark.sparkContext.props["spark.jobGroup.id"] == "outer"  # the thread's group is put back
    assert spark.sparkContext.props["spark.job.description"] is None
    assert 1 <= len(prog.lines) <= 4  # at most one per interval, none in the first one
    stamps = [r.created for r in caplog.records]
    assert all(b - a >= 0.29 for a, b in zip(stamps, stamps[1:], strict=False))
    for line in prog.lines:
        assert line.startswith("predict: decoding (800 documents): ") and " so far" in line
        m = re.search(r": ~(\d+) done \((\d) of 8 Spark tasks\), .* so far, ~\d+ s left$", line)
        if m is None:  # no task done yet, or all: no estimate of documents or time
            assert re.search(r": [08] of 8 Spark tasks done, \d+ s so far$", line), line
        else:
            assert int(m.group(1)) == 100 * int(m.group(2))
    assert any(" done (" in line for line in prog.lines)


def test_a_short_spark_stage_prints_nothing(caplog: pytest.LogCaptureFixture) -> None:
    from sparkhc.spark.progress import stage_progress

    caplog.set_level(logging.INFO, logger="sparkhc.progress")
    spark = SimpleNamespace(sparkContext=FakeContext())
    with stage_progress(spark, "evaluate: counting", interval=5.0, poll=0.02) as prog:
        spark.sparkContext.start = time.monotonic()
        time.sleep(0.3)
    assert prog.lines == [] and not caplog.records
