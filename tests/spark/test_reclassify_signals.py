"""SIGTERM to a running ``sparkhc reclassify`` (a scheduler's timeout, ``kill``): a real subprocess
gets the signal while it classifies; it logs one line, writes and prints the run summary of what
it did (``interrupted``, the partitions ``not_done``) and exits 143. The next run does the rest."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.unit.test_model_store import tiny_docs, train_tiny_model

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_sigterm_logs_a_line_and_writes_the_run_summary(tmp_path):
    model = train_tiny_model(tmp_path / "model", epochs=1)
    coll, out = tmp_path / "collection", tmp_path / "out"
    days = [f"2024-03-{d:02d}" for d in range(1, 9)]
    for k, day in enumerate(days):
        docs = tiny_docs(5, k, prefix=f"p{k}-")
        (coll / f"ingest_date={day}").mkdir(parents=True)
        pq.write_table(pa.table({"doc_id": [d["doc_id"] for d in docs], "text": [d["text"] for d in docs]}),
                       coll / f"ingest_date={day}" / "part-0.parquet")
    summary_file = tmp_path / "summary.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SPARK_LOCAL_IP": "127.0.0.1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "sparkhc.cli", "reclassify", "--input", str(coll), "--out", str(out), "--model",
         str(model), "--batch-partitions", "1", "--master", "local[1]", "--summary-json", str(summary_file)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    err_lines: list[str] = []

    def read_stderr() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            err_lines.append(line)

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    deadline = time.monotonic() + 600
    while not any("reclassify: batch 1/" in ln for ln in err_lines):  # one partition done, more to go
        assert proc.poll() is None and time.monotonic() < deadline, "".join(err_lines[-30:])
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    assert proc.stdout is not None
    stdout = proc.stdout.read()  # (stderr is the reader's)
    proc.wait(timeout=300)
    reader.join(timeout=30)
    err = "".join(err_lines)
    assert proc.returncode == 143, err[-3000:]
    stopped = [ln for ln in err_lines if "SIGTERM received: stopped after" in ln]
    assert len(stopped) == 1, err[-3000:]
    summary = json.loads(stdout)
    assert summary["interrupted"] == "SIGTERM"
    parts = summary["partitions"]
    assert parts["classified"] and parts["not_done"], parts  # stopped in the middle of the run
    assert sorted(parts["classified"] + parts["failed"] + parts["not_done"]) == days
    assert summary["documents"] == 5 * len(parts["classified"])
    assert json.loads(summary_file.read_text()) == summary
    assert json.loads((out / "_runs" / f"{summary['run_id']}.json").read_text()) == summary
    # what was published is complete; the next run does the partitions not done
    for day in parts["classified"]:
        assert (out / f"ingest_date={day}" / "_CLASSIFIED.json").is_file()
    for day in parts["not_done"]:
        assert not (out / f"ingest_date={day}").exists()
    from sparkhc.cli.reclassify import reclassify_main

    assert reclassify_main(["--input", str(coll), "--out", str(out), "--model", str(model), "--master",
                            "local[1]"]) == 0
