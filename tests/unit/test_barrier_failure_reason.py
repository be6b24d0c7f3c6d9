"""The barrier engine's retry warning names why the stage failed, not only the Py4J call."""

from __future__ import annotations

from sparkhc.spark.mixing.barrier import failure_reason

PY4J_LOST = """An error occurred while calling z:org.apache.spark.api.python.PythonRDD.collectAndServe.
: org.apache.spark.SparkException: Job aborted due to stage failure: Could not recover from a failed barrier ResultStage. Most recent failure reason: Stage failed because barrier task ResultTask(3, 1) finished unsuccessfully.
ExecutorLostFailure (executor 1 exited caused by one of the running tasks) Reason: Command exited with code 137
\tat org.apache.spark.scheduler.DAGScheduler.failJobAndIndependentStages(DAGScheduler.scala:2856)
\tat org.apache.spark.scheduler.DAGScheduler.$anonfun$abortStage$2(DAGScheduler.scala:2792)
"""

PY4J_SLOTS = """An error occurred while calling z:org.apache.spark.api.python.PythonRDD.collectAndServe.
: org.apache.spark.scheduler.BarrierJobSlotsNumberCheckFailed: [SPARK-24819]: Barrier execution mode does not allow run a barrier stage that requires more slots than the total number of slots in the cluster currently. Please init a new cluster with more resources(e.g. CPU, GPU) or repartition the input RDD(s) to reduce the number of slots required to run this barrier stage.
\tat org.apache.spark.errors.SparkCoreErrors$.numPartitionsGreaterThanMaxNumConcurrentTasksError(SparkCoreErrors.scala:242)
"""


def test_a_lost_executor_is_named():
    r = failure_reason(RuntimeError(PY4J_LOST))
    assert r.startswith("org.apache.spark.SparkException: Job aborted due to stage failure")
    assert "ExecutorLostFailure (executor 1 exited" in r and "code 137" in r
    assert "collectAndServe" not in r and "DAGScheduler.scala" not in r


def test_a_slot_check_that_gave_up_is_named():
    r = failure_reason(RuntimeError(PY4J_SLOTS))
    assert r.startswith("org.apache.spark.scheduler.BarrierJobSlotsNumberCheckFailed")
    assert len(r) <= 400


def test_any_other_error_keeps_its_first_line():
    assert failure_reason(OSError("disk full\nmore")) == "disk full"
    assert failure_reason(RuntimeError("")) == "RuntimeError"
