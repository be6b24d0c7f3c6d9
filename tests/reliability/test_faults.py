"""Fault tolerance (issue 9 item 2), slow: a Python worker killed in the middle of a training
epoch and of a reclassification partition, and a driver killed after an epoch checkpoint.

Spark retries a failed task only when ``spark.task.maxFailures`` > 1; in local mode that is the
second number of ``local[N,F]`` (plain ``local[2]``, the shared test session, never retries). So
the faults run in a subprocess with master ``local[2,3]``, one JVM for all of them:

1. ``train`` uninterrupted (3 epochs, 2 shards; barrier mixing, the local-mode default) -> reference model;
2. the same with ``fault_hook`` killing the Python worker (``os._exit``) of shard 0 after its
   epoch-2 pass, on the first attempt only (a marker file) -> Spark reruns the task;
3. the same with the hook raising instead of dying;
4. ``reclassify`` of a small collection, then again with the worker of the first prediction task
   killed once -> the same rows;
5. ``train`` with per-epoch checkpoints where the driver process ``os._exit``\\ s right after the
   epoch-2 checkpoint; the test then resumes in process (the shared session) from that
   checkpoint.

Every run must give byte-identical ``state.npz`` (and equal prediction rows) to the uninterrupted
run. The figures are printed (``-s``) and quoted in docs/reliability.md.
Run: ``python -m pytest -m slow tests/reliability/test_faults.py -s``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from sparkhc.cli import run
from tests.reliability import tiny_records, write_jsonl, write_taxonomy

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r'''
import json, os, sys, time
from pathlib import Path

args = json.loads(sys.argv[1])
work = Path(args["work"])
from sparkhc.spark.session import get_session

spark = get_session(app_name="sparkhc-faults", master="local[2,3]",
                    extra_conf={"spark.sql.shuffle.partitions": "4", "spark.ui.enabled": "false"})
from sparkhc.config import load_config
from sparkhc.spark import pipelines
from sparkhc.spark import reclassify as rc

cfg = load_config(overrides=["train.epochs=3", "train.shards=2", "train.checkpoint=false",
                                "train.execution=spark"])  # Spark task retries are under test
feats = args["features"]
res = {"master": spark.sparkContext.master,
       "maxFailures": spark.sparkContext.getConf().get("spark.task.maxFailures", "(from master)")}


def failed_tasks():
    st = spark.sparkContext.statusTracker()
    n = 0
    for job in st.getJobIdsForGroup(None):
        info = st.getJobInfo(job)
        for sid in (info.stageIds if info else []):
            s = st.getStageInfo(sid)
            n += s.numFailedTasks if s else 0
    return n


class Once:
    """Fault hook: on shard ``shard`` after epoch ``epoch``, the first attempt only (marker file)."""

    def __init__(self, marker, how, shard=0, epoch=1):
        self.marker, self.how, self.shard, self.epoch = str(marker), how, shard, epoch

    def __call__(self, shard, epoch):
        if shard != self.shard or epoch != self.epoch or os.path.exists(self.marker):
            return
        with open(self.marker, "w") as f:
            f.write(str(os.getpid()))
        if self.how == "kill":
            os._exit(137)
        raise RuntimeError("injected fault in the training task")


def timed(key, fn):
    t = time.perf_counter()
    out = fn()
    res[key + "_seconds"] = round(time.perf_counter() - t, 1)
    return out


timed("train_reference", lambda: pipelines.train(spark, cfg, feats, work / "ref"))
f0 = failed_tasks()
for how in ("kill", "raise"):
    marker = work / f"{how}.marker"
    timed(f"train_{how}", lambda: pipelines.train(spark, cfg, feats, work / how, fault_hook=Once(marker, how)))
    res[f"{how}_fault_fired_in_pid"] = marker.read_text() if marker.exists() else None
    res[f"{how}_failed_tasks"] = failed_tasks() - f0
    f0 = failed_tasks()
    res[f"{how}_state_identical"] = (work / how / "state.npz").read_bytes() == (work / "ref" / "state.npz").read_bytes()

# reclassify: the first prediction task of the run dies once
real_make = rc.make_predict_fn


def make_killing(*a, **k):
    fn = real_make(*a, **k)
    marker = str(work / "reclassify.marker")

    def run(batches):
        for i, rb in enumerate(fn(batches)):
            yield rb
            if not os.path.exists(marker):
                with open(marker, "w") as f:
                    f.write(str(os.getpid()))
                os._exit(137)

    return run


s1 = timed("reclassify_reference", lambda: rc.reclassify(spark, args["collection"], work / "rc_ref",
                                                         model_dir=work / "ref", batch_partitions=4))
rc.make_predict_fn = make_killing
f0 = failed_tasks()
s2 = timed("reclassify_kill", lambda: rc.reclassify(spark, args["collection"], work / "rc_kill",
                                                    model_dir=work / "ref", batch_partitions=4))
rc.make_predict_fn = real_make
res["reclassify_failed_tasks"] = failed_tasks() - f0
res["reclassify_fault_fired_in_pid"] = (work / "reclassify.marker").read_text()
res["reclassify_documents"] = [s1["documents"], s2["documents"]]
res["reclassify_failures"] = [len(s1["failures"]), len(s2["failures"])]
(work / "results.json").write_text(json.dumps(res, indent=2))

# driver death as soon as the checkpoint of epoch 2 (of 3) is there (written by the driver with
# one job per epoch, by barrier task 0 with barrier mixing): a thread watches for it
import threading


def die_after_epoch_two():
    f = work / "ckpt" / "latest" / "checkpoint.json"
    while True:
        try:
            if json.loads(f.read_text())["epoch"] >= 1:
                os._exit(137)
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.001)


threading.Thread(target=die_after_epoch_two, daemon=True).start()
# one job per epoch: the driver is between epochs when it dies (with barrier mixing the stage may
# already have finished epoch 3; tests/spark/test_ipm.py covers barrier resumption)
cfg_jobs = load_config(overrides=["train.epochs=3", "train.shards=2", "train.checkpoint=false", "train.mixing=jobs"])
pipelines.train(spark, cfg_jobs, feats, work / "died", checkpoint_dir=work / "ckpt")
raise SystemExit("the driver should have died")
'''


@pytest.mark.slow
def test_FT_worker_kill_retry_and_driver_death_resume(spark, tmp_path):
    from sparkhc.config import load_config
    from sparkhc.spark import pipelines
    from sparkhc.spark.reclassify import read_output

    # a tiny featurized corpus and a date-partitioned collection (3 days)
    tax = write_taxonomy(tmp_path / "taxonomy.tsv")
    docs = write_jsonl(tmp_path / "docs.jsonl", tiny_records(60))
    feats = tmp_path / "features"
    assert run(["featurize", "--input", str(docs), "--taxonomy", str(tax), "--out", str(feats),
                "--set", "featurize.min_df=1", "--set", "featurize.partitions=2"]) == 0
    coll = tmp_path / "collection"
    for k, day in enumerate(["2024-01-01", "2024-01-02", "2024-01-03"]):
        recs = tiny_records(20, seed=10 + k, prefix=f"{day}/")
        write_jsonl(coll / f"ingest_date={day}" / "docs.jsonl", [{"doc_id": r["id"], "text": r["text"]} for r in recs])

    work = tmp_path / "work"
    work.mkdir()
    script = tmp_path / "faults.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYSPARK_PYTHON": sys.executable,
           "PYSPARK_DRIVER_PYTHON": sys.executable}
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, str(script), json.dumps({"work": str(work), "features": str(feats),
                                                                    "collection": str(coll)})],
                          env=env, capture_output=True, text=True, timeout=1500, cwd=str(ROOT))
    secs = time.perf_counter() - t0
    assert (work / "results.json").is_file(), proc.stderr[-5000:]
    res = json.loads((work / "results.json").read_text())
    print("\nfault injection:", json.dumps(res, indent=2), f"\nsubprocess {secs:.0f} s, exit {proc.returncode}")

    # 1-3: a killed / failing training task is retried and the model is exactly the reference
    assert res["master"] == "local[2,3]"
    for how in ("kill", "raise"):
        assert res[f"{how}_fault_fired_in_pid"], how
        assert res[f"{how}_failed_tasks"] >= 1, how
        assert res[f"{how}_state_identical"], how
    # 4: the killed reclassification task is retried: same rows, no failed partition
    assert res["reclassify_fault_fired_in_pid"] and res["reclassify_failed_tasks"] >= 1
    assert res["reclassify_failures"] == [0, 0] and res["reclassify_documents"] == [60, 60]
    cols = ["doc_id", "labels", "scores", "model_version", "ingest_date"]
    a = read_output(work / "rc_ref").select(cols).sort_by("doc_id")
    b = read_output(work / "rc_kill").select(cols).sort_by("doc_id")
    assert a.equals(b)

    # 5: the driver died after the epoch-2 checkpoint: no model, a checkpoint of epoch 2
    assert proc.returncode == 137, proc.stderr[-3000:]
    assert not (work / "died").exists()
    ckpt = json.loads((work / "ckpt" / "latest" / "checkpoint.json").read_text())
    assert ckpt["epoch"] == 1
    # resume in this process (another session, another master: the shards do not depend on it)
    epochs: list[int] = []
    cfg = load_config(overrides=["train.epochs=3", "train.shards=2", "train.checkpoint=false", "train.mixing=jobs"])
    from sparkhc.spark.mixing import jobs

    real_run_epoch = jobs.run_epoch

    def counting(spark_, shards_df, model, seed, epoch, *a, **k):
        epochs.append(epoch)
        return real_run_epoch(spark_, shards_df, model, seed, epoch, *a, **k)

    jobs.run_epoch = counting
    try:
        pipelines.train(spark, cfg, feats, work / "resumed", checkpoint_dir=work / "ckpt")
    finally:
        jobs.run_epoch = real_run_epoch
    assert epochs == [2], "only the last epoch is run again"
    assert (work / "resumed" / "state.npz").read_bytes() == (work / "ref" / "state.npz").read_bytes()
    assert pq.read_table(feats / "features").num_rows == 60
