"""Scheduled batch reclassification (sparkhc.spark.reclassify) on a tiny date-partitioned
collection: only new partitions are classified, reruns are byte-identical no-ops, a promoted
model plus ``--all`` rewrites everything, and interrupted runs never leave a partial partition."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sparkhc import model_store
from sparkhc.errors import SchemaError
from sparkhc.spark.reclassify import discover_partitions, read_output, reclassify
from tests.unit.test_model_store import tiny_docs, train_tiny_model

DAYS = ["2024-01-01", "2024-01-02", "2024-01-03"]


class InjectedCrash(BaseException):  # noqa: N818 - named for what it simulates
    """A crash: a BaseException, so that no cleanup runs, as when the process is killed."""


class Fault:
    """Fault hook passed to ``reclassify(fault_hook=...)``: at ``where`` ("task" or "driver") for the
    partition ``value``, raise (``how="raise"``), crash without cleanup (``how="crash"``) or kill
    the process (``how="kill"``, exit status 137). Picklable: the task hook runs on the executors."""

    def __init__(self, where: str, value: str, how: str = "raise"):
        self.where, self.value, self.how = where, value, how

    def __call__(self, where: str, value: str) -> None:
        if where != self.where or value != self.value:
            return
        msg = f"injected fault ({where}) in partition {value}"
        if self.how == "kill":
            import os

            os._exit(137)
        if self.how == "crash":
            raise InjectedCrash(msg)
        raise RuntimeError(msg)


def write_day(collection: Path, day: str, n: int, seed: int, fmt: str = "parquet") -> list[dict]:
    docs = [{**d, "labels": None} for d in tiny_docs(n, seed, prefix=f"{day}/")]  # new documents: no labels
    d = collection / f"ingest_date={day}"
    d.mkdir(parents=True)
    if fmt == "parquet":
        table = pa.table({"doc_id": [x["doc_id"] for x in docs], "text": [x["text"] for x in docs]})
        pq.write_table(table, d / "part-0.parquet")
    else:
        with open(d / "docs.jsonl", "w") as f:
            for x in docs:
                f.write(json.dumps({"doc_id": x["doc_id"], "text": x["text"]}) + "\n")
    return tiny_docs(n, seed, prefix=f"{day}/")


def snapshot(out: Path) -> dict[str, str]:
    """sha256 of every output file except the run summaries (they grow by one per run)."""
    return {
        str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(out.rglob("*"))
        if p.is_file() and "_runs" not in p.parts and p.name != ".reclassify.lock"
    }


def partition_versions(out: Path) -> dict[str, set[str]]:
    t = read_output(out)
    res: dict[str, set[str]] = {}
    for day, v in zip(t.column("ingest_date").to_pylist(), t.column("model_version").to_pylist(), strict=True):
        res.setdefault(day, set()).add(v)
    return res


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    base = tmp_path_factory.mktemp("reclassify")
    models = base / "models"
    a = train_tiny_model(base / "model_a", epochs=3)
    b = train_tiny_model(base / "model_b", epochs=5, C=0.3, seed=1)
    model_store.register(models, a, promote_to_current=True)
    return base, models, b


def test_reclassify_end_to_end(spark, setup):
    base, models, model_b = setup
    coll, out = base / "collection", base / "out"
    gold: dict[str, str] = {}
    for i, day in enumerate(DAYS):
        for d in write_day(coll, day, 12, seed=10 + i):
            gold[d["doc_id"]] = d["labels"][0]
    v1 = model_store.weights_hash(model_store.resolve(models))

    # ---- run 1: the three partitions
    s1 = reclassify(spark, coll, out, models_root=models)
    assert s1["partitions"]["classified"] == DAYS and s1["failures"] == []
    assert s1["documents"] == 36
    assert s1["model"]["registry_version"] == "v0001" and s1["model"]["model_version"] == v1
    assert json.loads((out / "_runs" / f"{s1['run_id']}.json").read_text())["documents"] == 36
    t = read_output(out)
    assert t.num_rows == 36 and len(set(t.column("doc_id").to_pylist())) == 36
    assert set(t.column("model_version").to_pylist()) == {v1}
    assert set(t.column("run_id").to_pylist()) == {s1["run_id"]}
    assert set(t.column("taxonomy_fingerprint").to_pylist()) == {s1["model"]["taxonomy_fingerprint"]}
    assert pa.types.is_timestamp(t.schema.field("classified_at").type)
    for labels, scores in zip(t.column("labels").to_pylist(), t.column("scores").to_pylist(), strict=True):
        assert len(labels) == len(scores) >= 1
    correct = sum(gold[d] in labs for d, labs in zip(t.column("doc_id").to_pylist(), t.column("labels").to_pylist(),
                                                     strict=True))
    assert correct >= 30, f"the tiny model should get most tiny documents right ({correct}/36)"
    assert sum(s1["label_counts"].values()) == sum(len(x) for x in t.column("labels").to_pylist())
    # Spark reads the output with the partition column, ignoring _runs/ and markers
    sdf = spark.read.parquet(out.as_uri())
    assert sdf.count() == 36 and "ingest_date" in sdf.columns
    snap1 = snapshot(out)

    # ---- run 2: a fourth day (JSON Lines this time): only it is classified
    write_day(coll, "2024-01-04", 10, seed=20, fmt="json")
    s2 = reclassify(spark, coll, out, models_root=models)
    assert s2["partitions"]["classified"] == ["2024-01-04"]
    assert s2["partitions"]["skipped"] == DAYS
    assert s2["documents"] == 10
    snap2 = snapshot(out)
    assert {k: v for k, v in snap2.items() if "2024-01-04" not in k} == snap1

    # ---- run 3: nothing changed: nothing classified, byte-identical output
    s3 = reclassify(spark, coll, out, models_root=models)
    assert s3["partitions"]["classified"] == [] and s3["documents"] == 0
    assert snapshot(out) == snap2
    assert len(list((out / "_runs").glob("*.json"))) == 3

    # ---- promote a new model: every partition is stale; --all rewrites all four
    v2_name = model_store.register(models, model_b, promote_to_current=True)
    v2 = model_store.weights_hash(model_store.resolve(models))
    assert v2 != v1
    plan = reclassify(spark, coll, out, models_root=models, dry_run=True)
    assert plan["partitions"]["to_classify"] == [*DAYS, "2024-01-04"]
    assert snapshot(out) == snap2, "a dry run writes nothing"
    s4 = reclassify(spark, coll, out, models_root=models, all_partitions=True)
    assert s4["partitions"]["classified"] == [*DAYS, "2024-01-04"]
    assert s4["model"]["registry_version"] == v2_name
    t4 = read_output(out)
    assert t4.num_rows == 46 and len(set(t4.column("doc_id").to_pylist())) == 46  # no duplicates
    assert partition_versions(out) == {d: {v2} for d in [*DAYS, "2024-01-04"]}
    assert set(t4.column("run_id").to_pylist()) == {s4["run_id"]}

    # ---- a run killed in the middle of a partition: absent or complete, never partial. A run
    # applying model A to everything is killed while it replaces 2024-01-02 (day 1 is done, day 2's
    # new files are written but not moved in) and before it reaches the new day 5
    write_day(coll, "2024-01-05", 8, seed=30)
    with pytest.raises(InjectedCrash):
        reclassify(spark, coll, out, model_dir=base / "model_a", all_partitions=True,
                   fault_hook=Fault("driver", "2024-01-02", "crash"))
    assert partition_versions(out) == {"2024-01-01": {v1}, "2024-01-02": {v2}, "2024-01-03": {v2},
                                       "2024-01-04": {v2}}
    assert read_output(out).num_rows == 46
    left = [p for p in out.iterdir() if p.name.startswith(".ingest_date=2024-01-02.tmp-")]
    assert left and list(left[0].glob("part-*.parquet")), "the kill left its (hidden) new files, as a real one would"
    assert spark.read.parquet(out.as_uri()).count() == 46  # readers do not see them

    # ---- a task failing in the middle of writing day 5: the batch (day 1 stale, day 5 new) is
    # retried partition by partition; day 1 succeeds, day 5 is recorded as failed and stays absent
    s5 = reclassify(spark, coll, out, models_root=models, fault_hook=Fault("task", "2024-01-05"))
    assert s5["partitions"]["to_classify"] == ["2024-01-01", "2024-01-05"]
    assert s5["partitions"]["classified"] == ["2024-01-01"] and s5["partitions"]["failed"] == ["2024-01-05"]
    assert s5["failures"][0]["error"].endswith("RuntimeError: injected fault (task) in partition 2024-01-05")
    assert any(c.startswith("removed .ingest_date=2024-01-02.tmp-") for c in s5["cleaned"])
    assert not (out / "ingest_date=2024-01-05").exists()
    assert not [p for p in out.iterdir() if p.name.startswith(".") and p.name != ".reclassify.lock"]

    # ---- the next normal run completes the interrupted work
    s6 = reclassify(spark, coll, out, models_root=models)
    assert s6["partitions"]["classified"] == ["2024-01-05"] and s6["failures"] == []
    t6 = read_output(out)
    assert t6.num_rows == 54 and len(set(t6.column("doc_id").to_pylist())) == 54
    assert partition_versions(out) == {d: {v2} for d in [*DAYS, "2024-01-04", "2024-01-05"]}


def test_discover_partitions_errors(tmp_path):
    (tmp_path / "day=2024-01-01").mkdir()
    (tmp_path / "day=2024-01-01" / "a.parquet").write_bytes(b"")
    with pytest.raises(SchemaError, match=r"partitioned by \['day'\]"):
        discover_partitions(tmp_path)
    parts = discover_partitions(tmp_path, "day")
    assert [p.value for p in parts] == ["2024-01-01"] and parts[0].format == "parquet"
    (tmp_path / "day=2024-01-02").mkdir()
    (tmp_path / "day=2024-01-02" / "notes.txt").write_text("x")
    with pytest.raises(SchemaError, match="no input files"):
        discover_partitions(tmp_path, "day")


def test_reclassify_cli_and_job_entry(spark, setup, capsys, monkeypatch):
    from sparkhc.cli import dispatch as run
    from sparkhc.cli.reclassify import reclassify_main
    from tests.unit.test_model_store import parse

    base, models, _ = setup
    coll, out = base / "cli_collection", base / "cli_out"
    for d in tiny_docs(5, 7, prefix="x"):
        p = coll / "day=2024-02-01"
        p.mkdir(parents=True, exist_ok=True)
        with open(p / "part.jsonl", "a") as f:
            f.write(json.dumps({"doc_id": d["doc_id"], "text": d["text"]}) + "\n")
    monkeypatch.setenv("SPARKHC_MODELS", str(models))
    # faults reach the product only through reclassify(fault_hook=...): the environment variable
    # that used to inject them (and could os._exit a production run) has no effect any more
    monkeypatch.setenv("SPARKHC_RECLASSIFY_FAULT", "task:*")
    args = ["reclassify", "--input", str(coll), "--out", str(out), "--partition-column", "day"]
    assert run(parse([*args, "--dry-run"]), spark=spark) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["dry_run"] is True and plan["partitions"]["to_classify"] == ["2024-02-01"]
    assert not out.exists()
    assert run(parse(args), spark=spark) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["partitions"]["classified"] == ["2024-02-01"] and summary["documents"] == 5
    assert read_output(out, "day").num_rows == 5

    # nothing to do: Spark is not even started (spark=None, as the CLI passes it)
    def no_spark(*a, **k):
        raise AssertionError("a run with nothing to classify must not start Spark")

    monkeypatch.setattr("sparkhc.spark.session.get_session", no_spark)
    assert run(parse(args)) == 0
    assert json.loads(capsys.readouterr().out)["partitions"]["skipped"] == ["2024-02-01"]

    # the spark-submit entry: user errors exit 2 with a one-line message
    assert reclassify_main(["--input", str(coll), "--out", str(out), "--model", str(base / "nope")]) == 2
    assert "model directory not found" in capsys.readouterr().err
    assert reclassify_main(["--input", str(coll), "--out", str(out)]) == 2  # partition column ingest_date
    assert "partitioned by ['day'] (use --partition-column)" in capsys.readouterr().err

    # the Airflow example DAG imports without Airflow and checks a real summary
    import runpy

    dag_file = Path(__file__).resolve().parents[2] / "docs" / "examples" / "airflow_reclassify_dag.py"
    ns = runpy.run_path(str(dag_file))
    assert "--models" in ns["reclassify_command"]() and "params.all" in ns["reclassify_command"]()
    assert ns["check_summary"](json.dumps(summary))["documents"] == 5
    with pytest.raises(RuntimeError, match="1 partition\\(s\\) failed: 2024-02-01: boom"):
        ns["check_summary"](json.dumps({**summary, "partitions": {"failed": ["2024-02-01"]},
                                        "failures": [{"partition": "2024-02-01", "error": "boom"}]}))


@pytest.mark.slow
def test_real_kill_mid_partition_then_recovery(spark, setup):
    """The driver process is really killed (os._exit) in the middle of a partition; the partition
    is absent afterwards and the next run (here, in-process) completes it."""
    import os
    import subprocess
    import sys

    base, models, _ = setup
    coll, out = base / "kill_collection", base / "kill_out"
    for i, day in enumerate(DAYS):
        write_day(coll, day, 6, seed=40 + i)
    root = Path(__file__).resolve().parents[2]
    # the run in its own process, with the kill hook passed in explicitly (no environment variable)
    script = (
        "import sys\n"
        "from sparkhc.spark.reclassify import reclassify\n"
        "from tests.spark.test_reclassify import Fault\n"
        "reclassify(None, sys.argv[1], sys.argv[2], models_root=sys.argv[3], master='local[1]',\n"
        f"           fault_hook=Fault('driver', {DAYS[1]!r}, 'kill'))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(root)}
    proc = subprocess.run([sys.executable, "-c", script, str(coll), str(out), str(models)], cwd=root, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 137, proc.stderr[-3000:]
    assert (out / f"ingest_date={DAYS[0]}").is_dir()  # published before the kill
    assert not (out / f"ingest_date={DAYS[1]}").exists() and not (out / f"ingest_date={DAYS[2]}").exists()
    assert not (out / "_runs").exists()  # the killed run wrote no summary
    s = reclassify(spark, coll, out, models_root=models)
    assert s["partitions"]["classified"] == DAYS[1:] and s["partitions"]["skipped"] == DAYS[:1]
    assert read_output(out).num_rows == 18
