"""Issue 16, point 4: one id field name across every verb (``doc_id`` or ``id``), and reclassify's
bad records: named by file AND line, set aside with ``--on-invalid quarantine``, and a failed
partition is not counted as done in the progress line.

Small made-up collections of the tiny corpus (tests.unit.test_model_store), a model trained serially
on it; the expected line numbers are those of the files written here."""

from __future__ import annotations

import json
import logging
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sparkhc.spark.reclassify import QUARANTINE_FILE, read_output, reclassify
from tests.reliability import error_line, run_main, tiny_records, write_jsonl, write_taxonomy
from tests.unit.test_model_store import parse, tiny_docs, train_tiny_model


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    return train_tiny_model(tmp_path_factory.mktemp("bad_records") / "model", epochs=2)


def day_dir(coll: Path, day: str) -> Path:
    d = coll / f"ingest_date={day}"
    d.mkdir(parents=True)
    return d


def texts(n: int, seed: int, prefix: str) -> list[dict]:
    return [{"text": d["text"], "_id": d["doc_id"]} for d in tiny_docs(n, seed, prefix=prefix)]


# ---------------------------------------------------------------------- one id field name
def test_reclassify_accepts_id_or_doc_id_and_refuses_disagreeing_ids(spark, model, tmp_path):
    coll, out = tmp_path / "c", tmp_path / "o"
    docs = texts(4, 1, "a")
    # the README's format: "id"
    write_jsonl(day_dir(coll, "2024-01-01") / "docs.jsonl", [{"id": d["_id"], "text": d["text"]} for d in docs])
    # both fields, equal, and a Parquet partition with an "id" column
    write_jsonl(day_dir(coll, "2024-01-02") / "docs.jsonl",
                [{"id": "b1", "doc_id": "b1", "text": docs[0]["text"]}, {"doc_id": "b2", "text": docs[1]["text"]}])
    pq.write_table(pa.table({"id": ["c1", "c2"], "text": [docs[2]["text"], docs[3]["text"]]}),
                   day_dir(coll, "2024-01-03") / "part-0.parquet")
    # both fields, disagreeing, on line 2
    write_jsonl(day_dir(coll, "2024-01-04") / "docs.jsonl",
                [{"id": "d1", "text": docs[0]["text"]}, {"id": "d2", "doc_id": "dx", "text": docs[1]["text"]}])
    s = reclassify(spark, coll, out, model_dir=model)
    assert s["partitions"]["classified"] == ["2024-01-01", "2024-01-02", "2024-01-03"]
    t = read_output(out)
    got = sorted(zip(t.column("ingest_date").to_pylist(), t.column("doc_id").to_pylist(), strict=True))
    assert got == [("2024-01-01", d["_id"]) for d in docs] + [("2024-01-02", "b1"), ("2024-01-02", "b2"),
                                                              ("2024-01-03", "c1"), ("2024-01-03", "c2")]
    assert s["partitions"]["failed"] == ["2024-01-04"]
    err = s["failures"][0]["error"]
    assert "ingest_date=2024-01-04/docs.jsonl, line 2: fields 'doc_id' = 'dx' and 'id' = 'd2' disagree" in err


def test_featurize_accepts_id_or_doc_id_and_refuses_disagreeing_ids(spark, tmp_path, capsys):
    from sparkhc.cli import run

    tax = write_taxonomy(tmp_path / "taxonomy.tsv")
    recs = tiny_records(6)  # they carry "id"
    as_doc_id = [{("doc_id" if k == "id" else k): v for k, v in r.items()} for r in recs]
    common = ["--taxonomy", str(tax), "--set", "featurize.min_df=1", "--set", "featurize.partitions=1"]
    for name, rows in (("id", recs), ("doc_id", as_doc_id), ("both", [{**r, "doc_id": r["id"]} for r in recs])):
        out = tmp_path / f"f_{name}"
        assert run(["featurize", "--input", str(write_jsonl(tmp_path / f"{name}.jsonl", rows)), "--out", str(out),
                    *common]) == 0
        ids = pq.read_table(out / "features", columns=["doc_id"]).column("doc_id").to_pylist()
        assert sorted(ids) == sorted(r["id"] for r in recs), name
    # raw Parquet with an "id" column
    raw = tmp_path / "raw.parquet"
    pq.write_table(pa.table({"id": [r["id"] for r in recs], "text": [r["text"] for r in recs],
                             "labels": [r["labels"] for r in recs], "split": [r["split"] for r in recs]}), raw)
    assert run(["featurize", "--input", str(raw), "--out", str(tmp_path / "f_pq"), *common]) == 0
    assert pq.read_table(tmp_path / "f_pq" / "features").num_rows == 6
    # disagreeing, or neither: errors naming file, line and fields
    bad = write_jsonl(tmp_path / "bad.jsonl", [*recs[:2], {**recs[2], "doc_id": "other"}])
    code, _, err = run_main(["featurize", "--input", bad, "--out", tmp_path / "x", *common], capsys)
    assert code == 2 and "bad.jsonl, line 3: fields 'id' = 'd0002' and 'doc_id' = 'other' disagree" in error_line(err)
    none = write_jsonl(tmp_path / "none.jsonl", [*recs[:2], {k: v for k, v in recs[2].items() if k != "id"}])
    code, _, err = run_main(["featurize", "--input", none, "--out", tmp_path / "x", *common], capsys)
    assert code == 2 and "none.jsonl, line 3: missing document id field 'id' or 'doc_id'" in error_line(err)


# ---------------------------------------------------------------------- bad records in reclassify
def bad_collection(coll: Path) -> dict[str, list[str]]:
    """Day 1 good; day 2: a malformed line 3; day 3: no id on line 2, a duplicate id on lines 1
    and 4. Returns the ids that are good in each partition."""
    a, b, c = texts(3, 2, "a"), texts(4, 3, "b"), texts(4, 4, "c")
    write_jsonl(day_dir(coll, "2024-01-01") / "docs.jsonl", [{"doc_id": d["_id"], "text": d["text"]} for d in a])
    write_jsonl(day_dir(coll, "2024-01-02") / "docs.jsonl",
                [{"doc_id": b[0]["_id"], "text": b[0]["text"]}, {"id": b[1]["_id"], "text": b[1]["text"]},
                 '{"doc_id": "broken", "text": "goal', {"doc_id": b[2]["_id"], "text": b[2]["text"]}])
    write_jsonl(day_dir(coll, "2024-01-03") / "docs.jsonl",
                [{"doc_id": "dup", "text": c[0]["text"]}, {"text": c[1]["text"]},
                 {"doc_id": c[2]["_id"], "text": c[2]["text"]}, {"id": "dup", "text": c[3]["text"]}])
    return {"2024-01-01": [d["_id"] for d in a], "2024-01-02": [b[0]["_id"], b[1]["_id"], b[2]["_id"]],
            "2024-01-03": [c[2]["_id"]]}


def test_bad_records_named_by_file_and_line_and_failed_partitions_not_done(spark, model, tmp_path, caplog):
    coll, out = tmp_path / "c", tmp_path / "o"
    bad_collection(coll)
    seen: list[dict] = []
    with caplog.at_level(logging.INFO, logger="sparkhc.spark.reclassify"):
        s = reclassify(spark, coll, out, model_dir=model, batch_partitions=3, progress=seen.append)
    assert s["partitions"]["classified"] == ["2024-01-01"]
    assert s["partitions"]["failed"] == ["2024-01-02", "2024-01-03"]
    errors = {f["partition"]: f["error"] for f in s["failures"]}
    assert "ingest_date=2024-01-02/docs.jsonl, line 3: malformed JSON" in errors["2024-01-02"]
    assert "1 bad record(s) in partition ingest_date=2024-01-02 (malformed JSON 1)" in errors["2024-01-02"]
    assert "--on-invalid quarantine" in errors["2024-01-02"]
    # the first bad line in file order is named; the counts cover every bad record
    assert "ingest_date=2024-01-03/docs.jsonl, line 1: duplicate doc_id 'dup' (2 records: line 1, line 4)" in \
        errors["2024-01-03"]
    assert "(duplicate id 2, missing id 1)" in errors["2024-01-03"]
    # the progress: one partition done of three, two failed (the failed ones are not "done")
    assert seen == [{"batch": 1, "batches": 1, "partitions_done": 1, "partitions_failed": 2,
                     "partitions_total": 3, "seconds": seen[0]["seconds"]}]
    assert any("(1/3 partitions done, 2 failed)" in r.getMessage() for r in caplog.records)
    assert not (out / "ingest_date=2024-01-02").exists() and not (out / "ingest_date=2024-01-03").exists()


def test_quarantine_sets_bad_records_aside_with_counts(spark, model, tmp_path, capsys):
    from sparkhc.cli import dispatch as run

    coll, out = tmp_path / "c", tmp_path / "o"
    good = bad_collection(coll)
    assert run(parse(["reclassify", "--input", str(coll), "--out", str(out), "--model", str(model),
                      "--on-invalid", "quarantine"]), spark=spark) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["partitions"]["classified"] == ["2024-01-01", "2024-01-02", "2024-01-03"] and s["failures"] == []
    assert s["quarantined"] == 4 and s["documents"] == 3 + 3 + 1
    per = {p["partition"]: p for p in s["per_partition"]}
    assert "quarantined" not in per["2024-01-01"]
    assert per["2024-01-02"]["quarantine_reasons"] == {"malformed JSON": 1}
    assert per["2024-01-03"]["quarantine_reasons"] == {"duplicate id": 2, "missing id": 1}
    t = read_output(out)
    for day, ids in good.items():
        assert sorted(d for d, p in zip(t.column("doc_id").to_pylist(), t.column("ingest_date").to_pylist(),
                                        strict=True) if p == day) == sorted(ids)
    aside = [json.loads(x) for x in (out / "ingest_date=2024-01-03" / QUARANTINE_FILE).read_text().splitlines()]
    assert sorted((r["where"].rsplit("/", 1)[-1], r["reason"]) for r in aside) == [
        ("docs.jsonl, line 1", "duplicate id"), ("docs.jsonl, line 2", "missing id"),
        ("docs.jsonl, line 4", "duplicate id")]
    line2 = next(r for r in aside if r["where"].endswith("line 2"))
    assert json.loads(line2["record"]) == json.loads((coll / "ingest_date=2024-01-03" / "docs.jsonl")
                                                     .read_text().splitlines()[1])
    marker = json.loads((out / "ingest_date=2024-01-02" / "_CLASSIFIED.json").read_text())
    assert marker["quarantined"] == 1 and marker["quarantine_file"] == QUARANTINE_FILE and marker["documents"] == 3
    aside2 = (out / "ingest_date=2024-01-02" / QUARANTINE_FILE).read_text().splitlines()
    assert len(aside2) == 1 and json.loads(aside2[0])["record"] == '{"doc_id": "broken", "text": "goal'
    # Spark does not see the quarantine file as data
    assert spark.read.parquet(str(out)).count() == 7


def test_normalize_raw_takes_id_or_doc_id(spark):
    """The Spark side of the raw documents (DataFrame input of featurize, reclassify): ``id`` is
    read as ``doc_id``; both columns are fine where they agree (or one is null); a row where they
    disagree fails the job with a message naming both values."""
    from pyspark.sql import functions as F

    from sparkhc.errors import SchemaError
    from sparkhc.spark.featurize import normalize_raw

    def frame(rows, ddl):  # raw documents without gold labels, as reclassify reads them
        return spark.createDataFrame(rows, ddl).withColumn("labels", F.lit(None).cast("array<string>"))

    only_id = frame([("a", "goal")], "id string, text string")
    assert [tuple(r) for r in normalize_raw(only_id).select("doc_id", "text").collect()] == [("a", "goal")]
    both = frame([("a", "a", "x"), ("b", None, "y"), (None, "c", "z")], "doc_id string, id string, text string")
    assert sorted(r[0] for r in normalize_raw(both).select("doc_id").collect()) == ["a", "b", "c"]
    bad = frame([("a", "a", "x"), ("b", "bb", "y")], "doc_id string, id string, text string")
    with pytest.raises(Exception, match=r"columns 'doc_id' and 'id' disagree: b vs bb"):
        normalize_raw(bad, source="mine").collect()
    with pytest.raises(SchemaError, match=r"column 'doc_id' \(or 'id'\) is missing"):
        normalize_raw(frame([("goal",)], "text string"))
    with pytest.raises(SchemaError, match=r"column 'id' has type bigint, expected string"):
        normalize_raw(frame([(1, "goal")], "id long, text string"))


def test_scan_names_malformed_lines_in_reclassify_wording(tmp_path):
    """The driver's scan of a partition parses lines with the readers' parse (issue 30) and keeps
    reclassify's wording: every malformed line is "malformed JSON", a byte order mark is read on any
    line (as Spark's JSON reader reads it), the record is the line as it is."""
    import json as _json

    from sparkhc.spark.reclassify import discover_partitions, scan_bad_records

    coll = tmp_path / "c"
    not_utf8 = b'{"doc_id": "b", "text": "\xff"}'
    cut = '{"doc_id": "d", "text": "z'
    write_jsonl(day_dir(coll, "2024-01-01") / "docs.jsonl",
                [{"doc_id": "a", "text": "x"}, not_utf8, "[1, 2]", '\ufeff{"doc_id": "c", "text": "y"}', cut,
                 {"text": "no id"}])
    part, = discover_partitions(coll)
    with pytest.raises(_json.JSONDecodeError) as e:
        _json.loads(cut)
    got = [(b.where.rsplit(", ", 1)[-1], b.reason, b.detail, b.record) for b in scan_bad_records(part)]
    column = not_utf8.index(b"\xff") + 1
    assert got == [
        ("line 2", "malformed JSON", f"malformed line: not valid UTF-8 (byte 0xff at column {column})",
         (not_utf8 + b"\n").decode("utf-8", "replace")),  # (the line break kept, as ever)
        ("line 3", "malformed JSON", "malformed line: not a JSON object", "[1, 2]"),
        ("line 5", "malformed JSON", f"malformed JSON: {e.value.msg} at column {e.value.colno}", cut),
        ("line 6", "missing id", "record with a null or missing doc_id (or id)", '{"text": "no id"}'),
    ]


# ---------------------------------------------------------------------- one record-check core (issue 30)
def test_reclassify_scan_is_the_core_with_its_declared_rules(tmp_path):
    """reclassify's scan of a partition gives, line for line, the reclassify column of the rules table
    of tests/unit/test_record_rules.py (its declared differences from featurize, and nothing else)."""
    from sparkhc.spark.reclassify import discover_partitions, scan_bad_records
    from tests.unit.test_record_rules import SAME, expected, write_fixture

    coll = tmp_path / "c"
    path = write_fixture(day_dir(coll, "2024-01-01") / "docs.jsonl")
    part, = discover_partitions(coll)
    got = {int(b.where.rsplit(" ", 1)[-1]): (b.reason, b.detail) for b in scan_bad_records(part)}
    want = {no: f if r == SAME else r for no, (f, r) in expected(path).items()}
    assert got == {no: r for no, r in want.items() if r is not None}


def test_featurize_executors_and_driver_agree_on_the_rules_fixture(spark, tmp_path):
    """featurize's executors (sources, a _TaskSink) and the driver's reader decide the rules fixture
    alike: the featurize column of the table, counted the same way."""
    from sparkhc.corpus.readers import read_jsonl
    from sparkhc.spark.sources import JsonlOptions, read_jsonl_tokens
    from sparkhc.text.spec import FeatureSpec
    from tests.unit.test_record_rules import LINES, expected, write_fixture

    path = write_fixture(tmp_path / "docs.jsonl")
    opts = {"require_labels": False, "on_invalid": "quarantine", "on_empty": "quarantine"}
    batches, driver = read_jsonl(path, **opts)
    ids = sorted(r["doc_id"] for b in batches for r in b.to_pylist())
    tc = read_jsonl_tokens(spark, [str(path)], FeatureSpec(fit_on=None), JsonlOptions(**opts))
    try:
        assert sorted(r[0] for r in tc.tokens.select("doc_id").collect()) == ids == ["a", "j"]
        for rep in (driver, tc.report):
            assert (rep.read, rep.emitted, rep.quarantined) == (len(LINES), 2, len(LINES) - 2)
        featurize = {no: f for no, (f, _) in expected(path).items() if f is not None}
        assert dict(tc.report.quarantine_reasons) == dict(driver.quarantine_reasons) == dict(
            Counter(reason for reason, _ in featurize.values()))
    finally:
        tc.release()
