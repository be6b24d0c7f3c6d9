"""The JSON Lines reader on the executors (:mod:`sparkhc.spark.sources`) against the driver-side
reader (:func:`sparkhc.corpus.readers.read_jsonl`), which is the independent reference: same
documents, same bags of words, same read report, same error message naming file, line and byte
offset, also for records in later blocks of a file that Spark splits into several tasks."""

from __future__ import annotations

import gzip
from collections import Counter
from pathlib import Path

import pytest

from sparkhc.corpus import readers
from sparkhc.errors import InputDataError
from sparkhc.spark.sources import JsonlOptions, read_jsonl_tokens
from sparkhc.taxonomy import Taxonomy
from sparkhc.text.spec import FeatureSpec
from tests.reliability import tiny_records, write_jsonl, write_taxonomy

SPEC = FeatureSpec(fit_on=None)


def _records(n: int) -> list:
    recs = tiny_records(n)
    for r in recs:
        r["text"] = r["text"] + " filler words to make the lines longer"
    return recs


def _driver(path: Path, **opts):
    batches, report = readers.read_jsonl(path, **opts)
    table = readers.to_table(batches)
    return table, report


def _spark(spark, path: Path, **opts):
    return read_jsonl_tokens(spark, [str(path)], SPEC, JsonlOptions(**opts))


def _bags(table) -> dict[str, Counter]:
    tok = SPEC.tokenizer
    return {d: Counter(tok.tokenize_document(t, k)) for d, t, k in
            zip(table.column("doc_id").to_pylist(), table.column("text").to_pylist(),
                table.column("tokens").to_pylist(), strict=True)}


def test_good_corpus_same_documents_bags_and_report(spark, small_splits, tmp_path):
    path = write_jsonl(tmp_path / "docs.jsonl", _records(300))
    table, rep = _driver(path)
    tc = _spark(spark, path)
    try:
        rows = tc.tokens.collect()
        assert tc.tokens.rdd.getNumPartitions() > 1  # several blocks
        got = {r["doc_id"]: Counter(dict(zip(r["terms"], r["term_counts"], strict=True))) for r in rows}
        assert got == _bags(table)
        labels = {r["doc_id"]: (r["labels"], r["split"], r["fold"]) for r in rows}
        assert labels == {d: (lab, s, f) for d, lab, s, f in zip(*(table.column(c).to_pylist() for c in
                                                                     ("doc_id", "labels", "split", "fold")), strict=True)}
        assert tc.report.to_dict() == rep.to_dict()
        assert tc.splits == sorted(set(table.column("split").to_pylist()))
    finally:
        tc.release()


BAD = [
    '{"id": "x1", "text": "a b", "labels": ["tennis"]',
    b'{"id": "x2", "text": "caf\xe9", "labels": ["tennis"]}',
    {"id": "x3", "text": "  ", "labels": ["tennis"]},
    {"id": "x4", "text": "goal", "labels": ["cricket"]},
    {"text": "goal", "labels": ["football"]},
    [1, 2],
]


def _with_bad(n: int, at: dict[int, object]) -> list:
    recs: list = _records(n)
    for i, bad in sorted(at.items(), reverse=True):
        recs.insert(i, bad)
    return recs


@pytest.mark.parametrize("k", range(len(BAD)))
def test_error_in_a_later_block_names_the_same_line_and_offset(spark, small_splits, tmp_path, k):
    tax = Taxonomy.load(write_taxonomy(tmp_path / "taxonomy.tsv"))
    path = write_jsonl(tmp_path / "docs.jsonl", _with_bad(300, {250: BAD[k], 280: BAD[(k + 1) % len(BAD)]}))
    with pytest.raises(InputDataError) as want:
        _driver(path, taxonomy=tax)
    with pytest.raises(InputDataError) as got:
        _spark(spark, path, taxonomy=tax)
    assert type(got.value) is type(want.value)
    assert str(got.value) == str(want.value)
    assert ", line 251" in str(got.value)


def test_quarantine_report_equals_the_driver_readers(spark, small_splits, tmp_path):
    tax = Taxonomy.load(write_taxonomy(tmp_path / "taxonomy.tsv"))
    path = write_jsonl(tmp_path / "docs.jsonl", _with_bad(300, _quarantined_records()))
    _check_quarantine(spark, path, tax)


def _quarantined_records() -> dict[int, object]:
    at: dict[int, object] = {3 + 40 * i: b for i, b in enumerate(BAD)}
    at[200] = {"id": "d0005", "text": "goal again", "labels": ["football"]}  # a duplicate id, later block
    at[230] = {"id": "x9", "text": "goal", "labels": ["football", "cricket"]}
    return at


def _check_quarantine(spark, path: Path, tax: Taxonomy, partitions: int | None = None) -> None:
    opts = {"taxonomy": tax, "on_invalid": "quarantine", "on_empty": "quarantine", "unknown_labels": "drop"}
    table, rep = _driver(path, **opts)
    tc = _spark(spark, path, **opts)
    try:
        if partitions is not None:
            assert tc.tokens.rdd.getNumPartitions() == partitions
        assert tc.report.to_dict() == rep.to_dict()
        # quarantined by hand: x1 malformed JSON, x2 not UTF-8, x3 empty, the record without an id, [1, 2]
        # (not an object), the second d0005 (duplicate id); x4 and x9 lose 'cricket' (x4 is kept unlabelled)
        assert rep.quarantined == 6 and rep.labels_dropped == 2 and rep.no_labels == 1
        assert sorted(r["doc_id"] for r in tc.tokens.select("doc_id").collect()) == sorted(
            table.column("doc_id").to_pylist())
    finally:
        tc.release()


def test_duplicate_id_error_names_both_places(spark, small_splits, tmp_path):
    path = write_jsonl(tmp_path / "docs.jsonl", _with_bad(300, {260: {"id": "d0002", "text": "goal",
                                                                      "labels": ["football"]}}))
    with pytest.raises(readers.DuplicateIdError) as want:
        _driver(path)
    with pytest.raises(readers.DuplicateIdError) as got:
        _spark(spark, path)
    assert str(got.value) == str(want.value)
    assert "first seen at" in str(got.value) and "line 261" in str(got.value)


def test_several_files_gzip_and_plain(spark, tmp_path):
    recs = _records(40)
    a = write_jsonl(tmp_path / "a.jsonl", recs[:25])
    b = tmp_path / "b.jsonl.gz"
    readers.write_jsonl_gz(recs[25:], b)
    batches, rep = readers.read_jsonl([a, b])
    table = readers.to_table(batches)
    tc = read_jsonl_tokens(spark, [str(a), str(b)], SPEC, JsonlOptions())
    try:
        assert tc.report.to_dict() == rep.to_dict()
        assert sorted(r["doc_id"] for r in tc.tokens.collect()) == sorted(table.column("doc_id").to_pylist())
    finally:
        tc.release()


def test_uri_helpers(tmp_path):
    from sparkhc import fsio
    from sparkhc.spark import hfs

    assert hfs.has_scheme("hdfs://nn:8020/x") and hfs.has_scheme("s3a://b/k") and hfs.has_scheme("file:/x")
    assert not hfs.has_scheme("/tmp/x") and not hfs.has_scheme("rel/x")
    assert hfs.local_path("file:///tmp/a%20b") == Path("/tmp/a b") and hfs.local_path("hdfs://nn/x") is None
    out = fsio.OutputFs(str(tmp_path / "o"))
    assert out.local and out.root == str(tmp_path / "o") and out.uri == (tmp_path / "o").as_uri()
    tmp = out.sibling(".tmp-1")
    tmp.makedirs()
    tmp.write_bytes(tmp.child("a.txt"), b"new")
    (tmp_path / "o").mkdir()
    (tmp_path / "o" / "old.txt").write_text("old")
    tmp.publish(out)  # replaces the existing folder, leaves nothing beside it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o"] and (tmp_path / "o" / "a.txt").read_bytes() == b"new"


def test_a_relative_path_with_dotdot_reads_like_the_plain_path(spark, tmp_path, monkeypatch):
    # the README's `--data-dir ../shared/data`: the URI of the file must be the one Spark reports
    # (Hadoop collapses ".."), or the per-file index misses it (a KeyError before the fix)
    (tmp_path / "proj").mkdir()
    path = write_jsonl(tmp_path / "docs.jsonl", _records(20))
    monkeypatch.chdir(tmp_path / "proj")
    table, rep = _driver(path)
    tc = _spark(spark, Path("..") / "docs.jsonl")
    try:
        assert sorted(r["doc_id"] for r in tc.tokens.select("doc_id").collect()) == sorted(
            table.column("doc_id").to_pylist())
        assert tc.report.read == rep.read == 20
    finally:
        tc.release()


def _gz(tmp_path: Path, recs: list) -> Path:
    """The records as one gzip file (read by one scan task: the lines are spread over the cores)."""
    plain = write_jsonl(tmp_path / "plain.jsonl", recs)
    path = tmp_path / "docs.jsonl.gz"
    path.write_bytes(gzip.compress(plain.read_bytes(), mtime=0))
    return path


def test_one_gzip_file_is_spread_over_the_cores_with_the_same_report(spark, tmp_path):
    from sparkhc.spark.sources import _scan_tasks, spread_lines

    tax = Taxonomy.load(write_taxonomy(tmp_path / "taxonomy.tsv"))
    path = _gz(tmp_path, _with_bad(300, _quarantined_records()))
    assert _scan_tasks(spark, [str(path)]) == 1 < spark.sparkContext.defaultParallelism
    # the scan ids the JVM assigns: increasing with the line's place in the file, so sorting by them
    # gives the file's lines in order; every line lands in one of the 2 tasks
    lines = (spark.read.option("lineSep", "\n").text(str(path))
             .selectExpr("cast(value as binary) as v", "_metadata.file_path as p", "_metadata.file_block_start as b"))
    spread = spread_lines(lines, 2)
    assert spread.rdd.getNumPartitions() == 2
    raw = gzip.decompress(path.read_bytes()).split(b"\n")[:-1]
    got = sorted((r["_m"], bytes(r["v"])) for r in spread.collect())
    assert [v for _, v in got] == raw
    _check_quarantine(spark, path, tax, partitions=2)


@pytest.mark.parametrize("k", [0, 1, 5])
def test_one_gzip_file_spread_names_the_same_line_and_offset(spark, tmp_path, k):
    path = _gz(tmp_path, _with_bad(300, {250: BAD[k], 280: BAD[(k + 1) % len(BAD)]}))
    with pytest.raises(InputDataError) as want:
        _driver(path)
    with pytest.raises(InputDataError) as got:
        _spark(spark, path)
    assert str(got.value) == str(want.value)
    assert ", line 251" in str(got.value)


def test_flat_taxonomy_labels_collected_by_the_read(spark, tmp_path):
    """collect_labels: the labels (strings of a list field) of every record that is a JSON object, also
    of the records set aside, as the driver's scan for a flat taxonomy takes them; counted by hand."""
    from sparkhc.corpus import registry

    recs = [
        {"id": "a", "text": "goal", "labels": ["sport", "news"]},
        {"id": "b", "text": "  ", "labels": ["empty-only"]},  # quarantined: empty; its label counts
        {"id": "c", "text": "x y", "labels": "notalist"},  # quarantined: wrong type, no label
        '{"id": "d", "text": broken',  # quarantined: malformed JSON
        {"id": "e", "text": "word", "labels": ["news", 3]},  # quarantined: wrong type; "news" only
        {"id": "f", "text": "more words", "labels": []},
    ]
    path = _gz(tmp_path, recs)
    opts = {"on_invalid": "quarantine", "on_empty": "quarantine"}
    tc = read_jsonl_tokens(spark, [str(path)], SPEC, JsonlOptions(collect_labels=True, **opts))
    try:
        assert tc.labels == ["empty-only", "news", "sport"]
        assert tc.report.quarantined == 4 and tc.report.emitted == 2
        assert tc.report.to_dict() == _driver(path, **opts)[1].to_dict()
    finally:
        tc.release()
    # on a file the driver's scan accepts, the same set as that scan
    clean = _gz(tmp_path / "clean", [recs[0], recs[1], recs[5]])
    tc = read_jsonl_tokens(spark, [str(clean)], SPEC, JsonlOptions(collect_labels=True, on_empty="keep"))
    try:
        assert tc.labels == registry._label_set(clean) == ["empty-only", "news", "sport"]
    finally:
        tc.release()


def test_repeated_id_hash_without_a_repeated_id_reads_everything(spark, tmp_path, monkeypatch):
    """When two ids share a 64-bit hash the ids are checked exactly: no repeat, nothing set aside."""
    from sparkhc.spark import sources

    monkeypatch.setattr(sources, "_repeated_hashes", lambda parts: True)
    path = _gz(tmp_path, _records(50))
    table, rep = _driver(path)
    tc = _spark(spark, path)
    try:
        assert tc.report.to_dict() == rep.to_dict() and rep.quarantined == 0
        assert sorted(r["doc_id"] for r in tc.tokens.collect()) == sorted(table.column("doc_id").to_pylist())
    finally:
        tc.release()


def test_reader_counts_equal_a_counting_pass(spark, tmp_path):
    """The (split, fold) counts of the read give featurize the numbers its counting pass gives."""
    from sparkhc.spark.featurize import _counted, _scan

    recs = _records(40)
    for i, r in enumerate(recs):
        r["fold"] = i % 3
    recs[7]["text"] = "1234 5678"  # no token
    path = write_jsonl(tmp_path / "docs.jsonl", recs)
    tc = _spark(spark, path)
    try:
        assert sum(tc.groups.values()) == 40 and tc.no_tokens == 1
        for spec in (FeatureSpec(fit_on=None), FeatureSpec(fit_on=("train",)),
                     FeatureSpec(fit_on=("train",), fit_exclude_folds=(1,))):
            assert _counted(spec, tc.groups, tc.no_tokens) == _scan(tc.tokens, spec, None, checked=True)
        # by hand: train documents are those with i % 4 != 3, fold 1 those with i % 3 == 1
        train_not_1 = sum(1 for i in range(40) if i % 4 != 3 and i % 3 != 1)
        assert _counted(FeatureSpec(fit_on=("train",), fit_exclude_folds=(1,)), tc.groups, 1)["n_fit"] == train_not_1
    finally:
        tc.release()
