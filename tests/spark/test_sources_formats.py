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


def test_parquet_same_documents_bags_and_report(spark, small_splits, tmp_path):
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


def test_parquet_bad_rows_same_errors_and_counts(spark, small_splits, tmp_path):
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

    from sparkhc.corpus import registry

    for name in ("read_any", "read_label_dirs", "read_parquet", "read_jsonl", "read_lyrl2004", "read_qrels",
                 "label_dir_record", "parquet_record", "to_table"):
        monkeypatch.setattr(readers, name, fail)
    for name in ("read_jsonl", "read_lyrl2004", "apte_mod_categories"):
        monkeypatch.setattr(registry, name, fail)
    monkeypatch.setattr(registry.CorpusInfo, "read", fail)


FEAT = ["--set", "featurize.min_df=1", "--set", "featurize.partitions=2"]


def _outputs(out: Path) -> dict[str, bytes]:
    """Every file of a features folder but ``_SUMMARY.json`` (timings)."""
    return {str(f.relative_to(out)): f.read_bytes() for f in sorted(out.rglob("*")) if f.is_file()
            and f.name != "_SUMMARY.json"}


def _reference_then_executors(monkeypatch, featurize, tmp_path: Path) -> dict[str, bytes]:
    """``featurize(out)`` with the driver-side readers (the pipeline before issue 19, point 4), then on the
    executors with the driver-side readers failing if the driver calls them: the same bytes (returned)."""
    from sparkhc.spark import pipelines

    with monkeypatch.context() as m:
        m.setattr(pipelines, "_spark_jsonl_source", lambda *a, **k: None)
        expected = featurize(tmp_path / "ref")
    _no_driver_reading(monkeypatch)
    assert featurize(tmp_path / "out") == expected
    return expected


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
    from tests.spark.test_mdc_text_spark import SPACES, _write_corpus

    docs = tmp_path / "docs.jsonl.gz"
    _write_corpus(docs)
    conf = tmp_path / "spaces.toml"
    conf.write_text(SPACES if spaces == "other" else SPACES_NO_OTHER)

    def featurize(out: Path) -> dict[str, bytes]:
        assert run(["featurize", "--input", str(docs), "--class-spaces", str(conf), "--out", str(out), *FEAT,
                    "--set", "featurize.max_df=1.0"]) == 0
        return _outputs(out)

    expected = _reference_then_executors(monkeypatch, featurize, tmp_path)
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


# ---------------------------------------------------------------------------------------- LYRL2004
HIER = ("parent: None   child: Root   child-description: Root\n"
        "parent: Root   child: CCAT   child-description: CORPORATE\n"
        "parent: Root   child: GCAT   child-description: GOVERNMENT\n"
        "parent: CCAT   child: C15    child-description: PERFORMANCE\n"
        "parent: GCAT   child: GSPO   child-description: SPORTS\n")
RCV1_TAX_LABELS = ("CCAT", "GCAT", "C15", "GSPO")


def _lyrl_block(doc_id: str, words: list[str]) -> str:
    return f".I {doc_id}\n.W\n" + " ".join(words[:3]) + "\n" + " ".join(words[3:]) + "\n\n"


def _write_lyrl(folder: Path, n: int = 60, *, gz: bool = True, extra: str = "") -> tuple[list[Path], Path]:
    """Token files (train and four test parts, gzip or not) and qrels of ``n`` documents; ``extra`` is
    appended to the train file (bad blocks)."""
    import gzip as gz_mod

    folder.mkdir(parents=True, exist_ok=True)
    recs = tiny_records(n)
    parts: dict[str, list[str]] = {"train": [], **{f"test_pt{k}": [] for k in range(4)}}
    qrels = []
    for i, r in enumerate(recs):
        part = "train" if i % 3 == 0 else f"test_pt{i % 4}"
        doc_id = str(1000 + i)
        parts[part].append(_lyrl_block(doc_id, r["text"].split()))
        for t in (RCV1_TAX_LABELS[i % 4], RCV1_TAX_LABELS[(i + 1) % 4], RCV1_TAX_LABELS[i % 4]):
            qrels.append(f"{t} {doc_id} 1\n")
    parts["train"].append(extra)
    files = []
    for part, blocks in parts.items():
        data = "".join(blocks).encode("utf-8")
        f = folder / f"lyrl2004_tokens_{part}.dat{'.gz' if gz else ''}"
        f.write_bytes(gz_mod.compress(data, mtime=0) if gz else data)
        files.append(f)
    q = folder / "rcv1-v2.topics.qrels.gz"
    q.write_bytes(gz_mod.compress("".join(qrels).encode("utf-8"), mtime=0))
    (folder / "rcv1.topics.hier.orig").write_text(HIER)
    return files, q


def _rcv1_tax(folder: Path) -> Taxonomy:
    return Taxonomy.load(folder / "rcv1.topics.hier.orig", root="Root")


def test_lyrl2004_same_documents_bags_and_report(spark, small_splits, tmp_path):
    from sparkhc.spark.sources import read_lyrl2004_tokens

    for gz in (True, False):  # uncompressed: every file split into blocks of 2 KB (records across blocks)
        files, qrels = _write_lyrl(tmp_path / f"lyrl{gz}", gz=gz)
        tax = _rcv1_tax(tmp_path / f"lyrl{gz}")
        tc = read_lyrl2004_tokens(spark, [str(f) for f in files], str(qrels), SPEC, JsonlOptions(taxonomy=tax))
        _same(tc, readers.read_lyrl2004(files, qrels, taxonomy=tax))


BAD_BLOCKS = {
    "malformed": ".I 77 x\n.W\nracket\n\n",
    "no-w": ".I 78\nracket serve\n\n",
    "dup": _lyrl_block("1003", ["racket", "serve", "deuce", "volley"]),
    "no-qrels": _lyrl_block("79", ["racket", "serve", "deuce", "volley"]),
    "second-w": ".I 80\n.W\nracket\n.W\nserve\n",
    "dup-second-w": ".I 1006\n.W\nracket\n.W\nserve\n",
    "empty": ".I 81\n.W\n\n",
}


@pytest.mark.parametrize("bad", sorted(BAD_BLOCKS))
def test_lyrl2004_bad_blocks_same_errors_and_counts(spark, tmp_path, bad):
    from sparkhc.spark.sources import read_lyrl2004_tokens

    files, qrels = _write_lyrl(tmp_path / "lyrl", n=24, extra=BAD_BLOCKS[bad])
    _gzip_append(qrels, "C15 81 1\nGSPO 80 1\n")
    tax = _rcv1_tax(tmp_path / "lyrl")
    for opts in ({}, {"on_invalid": "quarantine"}, {"on_invalid": "quarantine", "on_empty": "quarantine"}):
        for missing in ("error", "empty", "quarantine"):
            try:
                batches, rep = readers.read_lyrl2004(files, qrels, taxonomy=tax, missing_labels=missing, **opts)
                table = readers.to_table(batches)
            except InputDataError as e:
                with pytest.raises(type(e)) as got:
                    read_lyrl2004_tokens(spark, [str(f) for f in files], str(qrels), SPEC,
                                         JsonlOptions(taxonomy=tax, **opts), missing_labels=missing)
                assert str(got.value) == str(e), (bad, opts, missing)
                continue
            tc = read_lyrl2004_tokens(spark, [str(f) for f in files], str(qrels), SPEC,
                                      JsonlOptions(taxonomy=tax, **opts), missing_labels=missing)
            try:
                assert _got(tc) == _bags(table), (bad, opts, missing)
                assert tc.report.to_dict() == rep.to_dict(), (bad, opts, missing)
            finally:
                tc.release()


def _gzip_append(path: Path, text: str) -> None:
    import gzip as gz_mod

    path.write_bytes(gz_mod.compress(gz_mod.decompress(path.read_bytes()) + text.encode("utf-8"), mtime=0))


@pytest.mark.parametrize("bad", ["text-before", "bad-utf8", "bad-qrels"])
def test_lyrl2004_fatal_errors_same_message(spark, tmp_path, bad):
    import gzip as gz_mod

    from sparkhc.spark.sources import read_lyrl2004_tokens

    files, qrels = _write_lyrl(tmp_path / "lyrl", n=12)
    if bad == "text-before":
        files[1].write_bytes(gz_mod.compress(b"stray words\n" + gz_mod.decompress(files[1].read_bytes()), mtime=0))
    elif bad == "bad-utf8":
        files[2].write_bytes(gz_mod.compress(gz_mod.decompress(files[2].read_bytes()) + b".I 99\n.W\ncaf\xe9\n",
                                             mtime=0))
    else:
        _gzip_append(qrels, "C15 99\n")
    with pytest.raises(InputDataError) as ref:
        readers.to_table(readers.read_lyrl2004(files, qrels)[0])
    with pytest.raises(InputDataError) as got:
        read_lyrl2004_tokens(spark, [str(f) for f in files], str(qrels), SPEC, JsonlOptions())
    assert str(got.value) == str(ref.value)


def test_cli_featurize_rcv1v2_lyrl2004_on_the_executors(spark, tmp_path, monkeypatch):
    """``featurize --corpus rcv1v2`` (LYRL2004 token files + qrels) writes the very bytes of the
    driver-side reader's pipeline, with no document read on the driver."""
    _write_lyrl(tmp_path / "rcv1v2", n=60)

    def featurize(out: Path) -> dict[str, bytes]:
        assert run(["featurize", "--corpus", "rcv1v2", "--data-dir", str(tmp_path), "--out", str(out), *FEAT]) == 0
        return _outputs(out)

    _reference_then_executors(monkeypatch, featurize, tmp_path)
