"""Label directories and raw-documents Parquet read by Spark on the executors (issue 19, point 4):
:func:`sparkhc.spark.sources.read_label_dirs_tokens` and :func:`~sparkhc.spark.sources.read_parquet_tokens`
against the driver-side readers (:func:`sparkhc.corpus.readers.read_label_dirs`,
:func:`~sparkhc.corpus.readers.read_parquet`), which are the independent reference: same documents, same
bags of words, same read report, same error messages naming the file (and row); ``file:`` URIs; and
``sparkhc featurize --input`` never reads a document on the driver."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sparkhc.cli import run
from sparkhc.corpus import readers
from sparkhc.errors import InputDataError, SchemaError
from sparkhc.spark.sources import JsonlOptions, read_label_dirs_tokens, read_parquet_tokens
from sparkhc.taxonomy import Taxonomy
from sparkhc.text.spec import FeatureSpec
from tests.reliability import TAXONOMY_TSV, tiny_records, write_taxonomy

SPEC = FeatureSpec(fit_on=None)
TAX = Taxonomy.from_tsv_text(TAXONOMY_TSV, root="ROOT", source="tiny taxonomy")


def _bags(table: pa.Table) -> dict[str, tuple[Counter, list, str | None, int | None]]:
    tok = SPEC.tokenizer
    cols = [table.column(c).to_pylist() for c in ("doc_id", "text", "tokens", "labels", "split", "fold")]
    return {d: (Counter(tok.tokenize_document(t, k)), lab, s, f) for d, t, k, lab, s, f in zip(*cols, strict=True)}


def _got(tc) -> dict[str, tuple[Counter, list, str | None, int | None]]:
    rows = tc.tokens.collect()
    return {r["doc_id"]: (Counter(dict(zip(r["terms"], r["term_counts"], strict=True))), r["labels"], r["split"],
                          r["fold"]) for r in rows}


def _same(tc, batches_report) -> None:
    batches, rep = batches_report
    table = readers.to_table(batches)
    try:
        assert _got(tc) == _bags(table)
        assert tc.report.to_dict() == rep.to_dict()
    finally:
        tc.release()


# ---------------------------------------------------------------------------------------- label dirs
def _label_dirs(root: Path, n: int = 40) -> Path:
    """``root/<split dir>/<label>/<n>``: tiny records as files, plus what the reader skips (hidden files,
    a stray top-level file, a folder inside a label folder) and a file Spark's listing hides (``_x``)."""
    for r in tiny_records(n):
        d = root / f"corpus-{r['split']}" / r["labels"][0]
        d.mkdir(parents=True, exist_ok=True)
        (d / str(int(r["id"][1:]))).write_bytes(r["text"].encode("latin-1"))
    (root / "corpus-train" / "tennis" / ".hidden").write_text("not read")
    (root / "corpus-train" / "tennis" / "_underscore").write_bytes("caf\xe9 racket serve".encode("latin-1"))
    (root / "corpus-train" / "tennis" / "sub").mkdir()
    (root / "corpus-train" / "tennis" / "sub" / "1").write_text("skipped: below a label folder")
    (root / "README").write_text("a stray file")
    return root


@pytest.fixture()
def small_files(spark):
    """Every file a scan task of its own (Spark's open cost per file of 1 GB)."""
    key = "spark.sql.files.openCostInBytes"
    old = spark.conf.get(key)
    spark.conf.set(key, str(1 << 30))
    yield
    spark.conf.set(key, old)


def test_label_dirs_same_documents_bags_and_report(spark, small_files, tmp_path):
    root = _label_dirs(tmp_path / "ld")
    tc = read_label_dirs_tokens(spark, str(root), SPEC, JsonlOptions(taxonomy=TAX))
    assert tc.tokens.rdd.getNumPartitions() > 1
    assert "corpus-train/tennis/_underscore" in {r["doc_id"] for r in tc.tokens.select("doc_id").collect()}
    _same(tc, readers.read_label_dirs(root, taxonomy=TAX))


def test_label_dirs_a_file_spark_does_not_read_is_an_error(spark, tmp_path, monkeypatch):
    """No silent loss: were a listed file left out of the scan, the read fails naming it."""
    from sparkhc.spark import sources

    root = _label_dirs(tmp_path / "ld")
    monkeypatch.setattr(sources, "_hidden_from_spark", lambda name: False)  # "_underscore" then never read
    with pytest.raises(InputDataError, match="tennis/_underscore: 1 listed file"):
        read_label_dirs_tokens(spark, str(root), SPEC, JsonlOptions())


def test_label_dirs_file_uri_and_split_layout(spark, tmp_path):
    root = _label_dirs(tmp_path / "ld")
    tc = read_label_dirs_tokens(spark, root.as_uri(), SPEC, JsonlOptions())
    try:
        ref = readers.to_table(readers.read_label_dirs(root)[0])
        assert _got(tc) == _bags(ref)
        assert sorted(tc.splits) == ["test", "train"]
        assert tc.report.emitted == ref.num_rows and tc.report.skipped_files == 3
    finally:
        tc.release()


def test_label_dirs_bad_inputs_same_errors_and_counts(spark, tmp_path):
    root = tmp_path / "ld"
    (root / "cricket").mkdir(parents=True)
    (root / "tennis").mkdir(parents=True)
    (root / "tennis" / "1").write_text("racket serve")
    (root / "tennis" / "2").write_text("   ")
    (root / "tennis" / "3").write_bytes(b"caf\xe9 racket")
    (root / "cricket" / "1").write_text("bat wicket")
    cases = [
        {"taxonomy": TAX},                                                         # unknown label: error
        {"taxonomy": TAX, "unknown_labels": "quarantine"},                          # the empty document: error
        {"taxonomy": TAX, "unknown_labels": "drop", "on_empty": "keep"},
        {"taxonomy": TAX, "unknown_labels": "quarantine", "on_empty": "quarantine", "encoding": "utf-8"},
        {"encoding": "utf-8"},                                                      # decoding error: error
        {"encoding": "utf-8", "on_invalid": "quarantine", "on_empty": "quarantine"},
    ]
    for opts in cases:
        ref_opts = dict(opts)
        enc = ref_opts.pop("encoding", "latin-1")
        try:
            batches, rep = readers.read_label_dirs(root, encoding=enc, **ref_opts)
            table = readers.to_table(batches)
        except InputDataError as e:
            with pytest.raises(type(e)) as got:
                read_label_dirs_tokens(spark, str(root), SPEC, JsonlOptions(**opts))
            assert str(got.value) == str(e), opts
            assert str(root / "cricket" / "1") in str(e) or str(root / "tennis") in str(e)
            continue
        tc = read_label_dirs_tokens(spark, str(root), SPEC, JsonlOptions(**opts))
        try:
            assert _got(tc) == _bags(table), opts
            assert tc.report.to_dict() == rep.to_dict(), opts
        finally:
            tc.release()


# ---------------------------------------------------------------------------------------- Parquet
def _parquet_files(folder: Path) -> list[Path]:
    """Two raw-documents files with other schemas (``id`` and ``doc_id``; int64 and int16 folds),
    several row groups each."""
    folder.mkdir(parents=True, exist_ok=True)
    recs = tiny_records(60)
    a = pa.table({"id": [r["id"] for r in recs[:35]], "text": [r["text"] for r in recs[:35]],
                  "labels": [r["labels"] for r in recs[:35]], "split": [r["split"] for r in recs[:35]],
                  "fold": pa.array([i % 3 for i in range(35)], pa.int64())})
    b = pa.table({"doc_id": [r["id"] for r in recs[35:]],
                  "tokens": [r["text"].split() for r in recs[35:]],
                  "labels": [r["labels"] for r in recs[35:]],
                  "fold": pa.array([i % 2 for i in range(25)], pa.int16())})
    pq.write_table(a, folder / "a.parquet", row_group_size=8)
    pq.write_table(b, folder / "b.parquet", row_group_size=8)
    return [folder / "a.parquet", folder / "b.parquet"]


@pytest.fixture()
def small_row_groups(spark):
    """Splits of 2 KB: a file is read by several tasks (each a few row groups)."""
    key = "spark.sql.files.maxPartitionBytes"
    old = spark.conf.get(key)
    spark.conf.set(key, "2048")
    yield
    spark.conf.set(key, old)


def test_parquet_same_documents_bags_and_report(spark, small_row_groups, tmp_path):
    files = _parquet_files(tmp_path / "pq")
    tc = read_parquet_tokens(spark, [str(f) for f in files], SPEC, JsonlOptions(taxonomy=TAX))
    assert tc.tokens.rdd.getNumPartitions() > 1
    _same(tc, readers.read_parquet(files, taxonomy=TAX))
    # one scan of the folder (one schema), file: URIs
    tc = read_parquet_tokens(spark, [files[0].as_uri()], SPEC, JsonlOptions(), root=(tmp_path / "pq").as_uri())
    ref = readers.to_table(readers.read_parquet(files[0])[0])
    try:
        assert _got(tc) == _bags(ref)
    finally:
        tc.release()


def test_parquet_bad_rows_same_errors_and_counts(spark, small_row_groups, tmp_path):
    recs = tiny_records(30)
    ids = [r["id"] for r in recs]
    ids[5], ids[12], ids[20] = None, " ", ids[3]          # missing, blank, repeated id
    labels = [r["labels"] for r in recs]
    labels[8], labels[9], labels[25] = None, ["tennis", ""], ["cricket"]
    texts = [r["text"] for r in recs]
    texts[15] = " "
    folds = [1] * 30
    folds[27] = 1 << 40
    t = pa.table({"doc_id": ids, "text": texts, "labels": labels, "fold": pa.array(folds, pa.int64())})
    path = tmp_path / "bad.parquet"
    pq.write_table(t, path, row_group_size=4)
    cases = [{}, {"on_invalid": "quarantine"}, {"on_invalid": "quarantine", "unknown_labels": "drop"},
             {"on_invalid": "quarantine", "unknown_labels": "quarantine", "on_empty": "quarantine",
              "require_labels": False}]
    for opts in cases:
        try:
            batches, rep = readers.read_parquet(path, taxonomy=TAX, **opts)
            table = readers.to_table(batches)
        except InputDataError as e:
            assert ", row " in str(e)
            with pytest.raises(type(e)) as got:
                read_parquet_tokens(spark, [str(path)], SPEC, JsonlOptions(taxonomy=TAX, **opts))
            assert str(got.value) == str(e), opts
            continue
        tc = read_parquet_tokens(spark, [str(path)], SPEC, JsonlOptions(taxonomy=TAX, **opts))
        try:
            assert _got(tc) == _bags(table), opts
            assert tc.report.to_dict() == rep.to_dict(), opts
        finally:
            tc.release()


def test_parquet_schema_errors_name_the_file(spark, tmp_path):
    good, bad = tmp_path / "good.parquet", tmp_path / "bad.parquet"
    pq.write_table(pa.table({"doc_id": ["a"], "text": ["x"], "labels": [["tennis"]]}), good)
    pq.write_table(pa.table({"doc_id": ["a"], "text": ["x"]}), bad)
    with pytest.raises(SchemaError, match=f"{bad}: required column 'labels'"):
        read_parquet_tokens(spark, [str(good), str(bad)], SPEC, JsonlOptions())
    (tmp_path / "junk.parquet").write_bytes(b"not parquet")
    with pytest.raises(InputDataError, match="junk.parquet: not a readable Parquet file"):
        read_parquet_tokens(spark, [str(tmp_path / "junk.parquet")], SPEC, JsonlOptions())


# ---------------------------------------------------------------------------------------- CLI
def _no_driver_reading(monkeypatch) -> None:
    """The driver-side readers and record checks fail if the driver calls them (the executors'
    Python workers import the modules afresh and are not patched)."""
    def fail(*a, **k):
        raise AssertionError("a raw document was read on the driver")

    for name in ("read_any", "read_label_dirs", "read_parquet", "read_jsonl", "label_dir_record", "parquet_record",
                 "to_table"):
        monkeypatch.setattr(readers, name, fail)


FEAT = ["--set", "featurize.min_df=1", "--set", "featurize.partitions=2"]


def _outputs(out: Path) -> dict[str, bytes]:
    """Every file of a features folder but ``_SUMMARY.json`` (timings)."""
    return {str(f.relative_to(out)): f.read_bytes() for f in sorted(out.rglob("*")) if f.is_file()
            and f.name != "_SUMMARY.json"}


def test_cli_featurize_label_dirs_and_parquet_on_the_executors(spark, tmp_path, monkeypatch):
    """``featurize --input`` of a label-directory corpus, a Parquet folder and its ``file:`` URI writes
    the very bytes of the driver-side readers' pipeline, with no document read on the driver."""
    from sparkhc.spark import pipelines

    root = _label_dirs(tmp_path / "ld")
    _parquet_files(tmp_path / "pq")
    tax = write_taxonomy(tmp_path / "taxonomy.tsv")
    inputs = {"ld": str(root), "pq": str(tmp_path / "pq")}

    def featurize(src: str, out: Path) -> dict[str, bytes]:
        assert run(["featurize", "--input", src, "--taxonomy", str(tax), "--out", str(out), *FEAT]) == 0
        return _outputs(out)

    with monkeypatch.context() as m:  # the reference: the driver-side readers (the pipeline before issue 19.4)
        m.setattr(pipelines, "_spark_jsonl_source", lambda *a, **k: None)
        expected = {name: featurize(src, tmp_path / f"ref-{name}") for name, src in inputs.items()}
    _no_driver_reading(monkeypatch)
    for name, src in inputs.items():
        assert featurize(src, tmp_path / f"out-{name}") == expected[name], name
    rep = json.loads((tmp_path / "out-ld" / "corpus.json").read_text())["read_report"]
    assert rep["skipped_files"] == 3 and rep["source"] == str(root) and rep["emitted"] == 41
    out = tmp_path / "out-uri"
    assert run(["featurize", "--input", (tmp_path / "pq").as_uri(), "--taxonomy", str(tax), "--out", str(out),
                *FEAT]) == 0
    got, ref = _outputs(out), expected["pq"]
    assert {k: v for k, v in got.items() if k != "corpus.json"} == {k: v for k, v in ref.items() if k != "corpus.json"}


SPACES_NO_OTHER = """
[[class_space]]
name = "genre"
field = "genre"
top_k = 2                 # politics, sport (tech ties with them, arts behind): the others are withdrawn
other = ""

[[class_space]]
name = "mood"
field = "moods"
multiple = "exclude"
top_k = 1
other = ""
"""


@pytest.mark.parametrize("spaces", ["other", "withdraw"])
def test_cli_class_spaces_on_the_executors(spark, tmp_path, monkeypatch, spaces):
    """``featurize --input docs.jsonl.gz --class-spaces``: the kept classes fitted from counts aggregated
    on Spark, documents relabelled and withdrawn on the executors; the very bytes of the driver-side
    pipeline (withdrawal reasons counted in the same order), no document read on the driver."""
    from sparkhc.spark import pipelines
    from tests.spark.test_mdc_text_spark import SPACES, _write_corpus

    docs = tmp_path / "docs.jsonl.gz"
    _write_corpus(docs)
    conf = tmp_path / "spaces.toml"
    conf.write_text(SPACES if spaces == "other" else SPACES_NO_OTHER)

    def featurize(out: Path) -> dict[str, bytes]:
        assert run(["featurize", "--input", str(docs), "--class-spaces", str(conf), "--out", str(out), *FEAT,
                    "--set", "featurize.max_df=1.0"]) == 0
        return _outputs(out)

    with monkeypatch.context() as m:
        m.setattr(pipelines, "_spark_jsonl_source", lambda *a, **k: None)
        expected = featurize(tmp_path / "ref")
    _no_driver_reading(monkeypatch)
    assert featurize(tmp_path / "out") == expected
    rep = json.loads(expected["corpus.json"])["read_report"]
    if spaces == "withdraw":
        assert len(rep["excluded_reasons"]) == 4 and rep["excluded"] > 2


def test_apte_mod_categories_on_spark(spark, data_dir):
    """Reuters-21578's ApteMod categories computed by the executors equal the driver-side scan (90)."""
    from sparkhc.corpus import registry
    from sparkhc.spark.sources import apte_mod_categories

    docs = data_dir / "reuters21578" / "docs.jsonl.gz"
    if not docs.is_file():
        pytest.skip("reuters21578 not staged")
    got = apte_mod_categories(spark, docs)
    assert got == registry.apte_mod_categories(docs) and len(got) == 90
