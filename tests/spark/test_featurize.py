"""featurize / transform / read_features on a hand-checked six-document corpus.

Tokens (default pattern, no stop words) and the expected features, worked out by hand:

    doc  split  fold  labels          text / tokens                  -> terms
    d1   train  1     fruit/banana    "banana cherry"                -> banana cherry
    d2   test   0     fruit           "The apple!"                   -> the apple
    d3   train  0     fruit/apple     "Apple banana apple."          -> apple banana apple
    d4   test   null  veg             "123 !!"                       -> (nothing)
    d5   train  null  veg             tokens [Cherry, durian, 42]    -> cherry durian
    d6   null   null  []              "durian durian elderberry"     -> durian durian elderberry

Fit on split == train (d1, d3, d5): N = 3, vocabulary apple(0) banana(1) cherry(2) durian(3) with
df 1, 2, 2, 1; "the" and "elderberry" occur only outside the training split and are not features.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import math
import os
import shutil
import time
import zlib

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sparkhc.batch import SparseBatch
from sparkhc.errors import InputDataError, SchemaError
from sparkhc.features import read_features_local, read_summary
from sparkhc.spark import featurize as featurize_mod
from sparkhc.spark.featurize import OutputExistsError, featurize, transform
from sparkhc.spark.io import (
    batches_rdd,
    map_batches,
    partition_to_batch,
    read_features,
)
from sparkhc.taxonomy import Taxonomy
from sparkhc.text import FeatureSpec
from tests.conftest import corpus_dir

RAW_DDL = "doc_id string, text string, tokens array<string>, labels array<string>, split string, fold int"
ROWS = [
    ("d3", "Apple banana apple.", None, ["fruit/apple"], "train", 0),
    ("d1", "banana cherry", None, ["fruit/banana"], "train", 1),
    ("d2", "The apple!", None, ["fruit"], "test", 0),
    ("d4", "123 !!", None, ["veg"], "test", None),
    ("d5", "ignored", ["Cherry", "durian", "42"], ["veg"], "train", None),
    ("d6", "durian durian elderberry", None, [], None, None),
]
# indices and raw counts per document (see the module docstring)
EXPECTED = {
    "d1": ([1, 2], [1, 1]),
    "d2": ([0], [1]),
    "d3": ([0, 1], [2, 1]),
    "d4": ([], []),
    "d5": ([2, 3], [1, 1]),
    "d6": ([3], [2]),
}
DF = {"apple": 1, "banana": 2, "cherry": 2, "durian": 1}
# taxonomy ids in level order, children sorted by name: ROOT 0, fruit 1, veg 2, fruit/apple 3, fruit/banana 4
LABEL_IDS = {"d1": [4], "d2": [1], "d3": [3], "d4": [2], "d5": [2], "d6": []}
PARAMS = {"weighting": "log_tf_idf", "l2_normalize": True, "fit_on": ["train"]}

EXPECTED_ARROW = pa.schema(
    [
        ("doc_id", pa.string()),
        ("split", pa.string()),
        ("fold", pa.int32()),
        ("labels", pa.list_(pa.string())),
        ("label_ids", pa.list_(pa.int32())),
        ("indices", pa.list_(pa.int32())),
        ("values", pa.list_(pa.float32())),
        ("counts", pa.list_(pa.float32())),
    ]
)


def idf(df: int, n: int = 3) -> float:
    return math.log((1 + n) / (1 + df)) + 1


@pytest.fixture(scope="module")
def taxonomy():
    return Taxonomy.from_edges(
        [("ROOT", "fruit"), ("ROOT", "veg"), ("fruit", "fruit/apple"), ("fruit", "fruit/banana")], root="ROOT"
    )


@pytest.fixture(scope="module")
def raw_df(spark):
    return spark.createDataFrame(ROWS, RAW_DDL)


@pytest.fixture(scope="module")
def featurized(spark, raw_df, taxonomy, tmp_path_factory):
    out = tmp_path_factory.mktemp("feat") / "out"
    summary = featurize(
        spark, raw_df, out, PARAMS, taxonomy=taxonomy, num_partitions=2, extra_files={"corpus.json": "{}\n"}
    )
    return out, summary


def file_hashes(out) -> dict[str, str]:
    d = out / "features"
    return {p: hashlib.sha256((d / p).read_bytes()).hexdigest() for p in sorted(os.listdir(d))}


def by_doc(out) -> dict[str, dict]:
    table = pq.read_table(out / "features")
    return {r["doc_id"]: r for r in table.to_pylist()}


# ------------------------------------------------------------------ layout and values
def test_layout_and_exact_schema(featurized, spark):
    out, summary = featurized
    assert sorted(os.listdir(out)) == [
        "_SUMMARY.json", "corpus.json", "feature_spec.json", "features", "taxonomy.tsv"
    ]
    assert (out / "corpus.json").read_text() == "{}\n"
    parts = sorted(p for p in os.listdir(out / "features") if p.endswith(".parquet"))
    assert parts == ["part-00000.parquet", "part-00001.parquet"]
    assert not [p for p in os.listdir(out / "features") if p.endswith(".crc")]
    for p in parts:
        meta = pq.read_metadata(out / "features" / p)
        # nothing run-dependent in the footer: the writer name and Spark's version and schema only
        assert meta.created_by.startswith("parquet-cpp-arrow version")
        assert set(meta.metadata) == {b"org.apache.spark.version", b"org.apache.spark.sql.parquet.row.metadata",
                                      b"ARROW:schema"}
        schema = pq.read_schema(out / "features" / p)
        assert schema.names == EXPECTED_ARROW.names
        for f in EXPECTED_ARROW:
            got = schema.field(f.name).type
            want = f.type
            if pa.types.is_list(want):
                assert pa.types.is_list(got) and got.value_type == want.value_type, f.name
            else:
                assert got == want, f.name
    df = spark.read.parquet(str(out / "features"))
    assert df.schema.simpleString() == (
        "struct<doc_id:string,split:string,fold:int,labels:array<string>,label_ids:array<int>,"
        "indices:array<int>,values:array<float>,counts:array<float>>"
    )


def test_one_row_per_document_sorted_within_files(featurized):
    out, _ = featurized
    ids = []
    for p in sorted(os.listdir(out / "features")):
        if p.endswith(".parquet"):
            file_ids = pq.read_table(out / "features" / p).column("doc_id").to_pylist()
            assert file_ids == sorted(file_ids)
            ids += file_ids
    assert sorted(ids) == ["d1", "d2", "d3", "d4", "d5", "d6"]


def test_counts_indices_labels_by_hand(featurized):
    rows = by_doc(featurized[0])
    for doc, (indices, counts) in EXPECTED.items():
        r = rows[doc]
        assert r["indices"] == indices, doc
        assert r["counts"] == counts, doc
        assert r["label_ids"] == LABEL_IDS[doc], doc
    assert rows["d6"]["labels"] == [] and rows["d6"]["split"] is None
    assert rows["d3"]["fold"] == 0 and rows["d5"]["fold"] is None


def test_values_weighted_and_l2_normalised(featurized):
    rows = by_doc(featurized[0])
    # d3: apple (count 2, df 1), banana (count 1, df 2)
    a, b = math.log(3) * idf(1), math.log(2) * idf(2)
    np.testing.assert_allclose(rows["d3"]["values"], np.array([a, b]) / math.hypot(a, b), rtol=1e-6)
    for doc, r in rows.items():
        if r["indices"]:
            assert abs(math.sqrt(sum(v * v for v in r["values"])) - 1.0) < 1e-6, doc
        else:
            assert r["values"] == []


def test_vocabulary_and_idf_fitted_on_train_only(featurized):
    out, summary = featurized
    spec = FeatureSpec.load(out)
    assert spec.vocabulary == tuple(DF)
    assert spec.df == tuple(DF.values())
    assert spec.n_fit_docs == 3
    np.testing.assert_allclose(spec.idf, [idf(d) for d in DF.values()])
    assert summary["vocabulary_size"] == 4 and summary["n_fit_docs"] == 3


def test_summary(featurized, taxonomy):
    out, summary = featurized
    assert read_summary(out) == summary
    assert summary["n_documents"] == 6
    assert summary["documents_per_split"] == {"<null>": 1, "test": 2, "train": 3}
    assert summary["empty_documents"] == 1 and summary["empty_documents_per_split"]["test"] == 1
    assert summary["documents_without_tokens"] == 1
    assert summary["nnz"] == sum(len(i) for i, _ in EXPECTED.values())
    assert summary["taxonomy"]["fingerprint"] == taxonomy.fingerprint()
    assert summary["spec_fingerprint"] == FeatureSpec.load(out).fingerprint
    assert [f["name"] for f in summary["files"]] == ["part-00000.parquet", "part-00001.parquet"]
    assert {f["name"]: f["sha256"] for f in summary["files"]} == {
        k: v for k, v in file_hashes(out).items() if k.endswith(".parquet")
    }
    assert summary["seconds"] > 0


# ------------------------------------------------------------------ determinism, overwrite, atomicity
def test_rerun_is_byte_identical_then_overwrite(spark, raw_df, taxonomy, featurized, tmp_path):
    out, _ = featurized
    other = tmp_path / "again"
    # a different input partitioning and row order must not change the files
    shuffled = raw_df.repartition(3).orderBy("text")
    featurize(spark, shuffled, other, PARAMS, taxonomy=taxonomy, num_partitions=2)
    assert file_hashes(other) == file_hashes(out)
    assert (other / "feature_spec.json").read_bytes() == (out / "feature_spec.json").read_bytes()

    with pytest.raises(OutputExistsError, match="overwrite=True"):
        featurize(spark, raw_df, other, PARAMS)

    # overwrite: a hashing spec replaces the directory atomically
    params = {"mode": "hashing", "hash_bits": 4, "weighting": "tf", "l2_normalize": False, "fit_on": None}
    summary = featurize(spark, raw_df, other, params, overwrite=True, num_partitions=1)
    assert sorted(os.listdir(tmp_path)) == ["again"]
    assert summary["mode"] == "hashing" and summary["n_features"] == 16 and summary["taxonomy"] is None
    assert not (other / "taxonomy.tsv").exists()
    rows = by_doc(other)
    terms = {"d3": ["apple", "banana", "apple"], "d6": ["durian", "durian", "elderberry"]}
    for doc, toks in terms.items():
        counts: dict[int, int] = {}
        for t in toks:
            j = zlib.crc32(t.encode("utf-8")) % 16
            counts[j] = counts.get(j, 0) + 1
        assert rows[doc]["indices"] == sorted(counts), doc
        assert rows[doc]["values"] == [float(counts[j]) for j in sorted(counts)], doc
        assert rows[doc]["label_ids"] is None
    # df per bucket from Spark's crc32 equals Python's zlib.crc32 over all six documents
    spec = FeatureSpec.load(other)
    all_terms = [["banana", "cherry"], ["the", "apple"], ["apple", "banana"], [], ["cherry", "durian"],
                 ["durian", "elderberry"]]
    want = np.zeros(16, dtype=int)
    for toks in all_terms:
        for j in {zlib.crc32(t.encode()) % 16 for t in toks}:
            want[j] += 1
    assert list(spec.df) == want.tolist()


def test_crash_leaves_no_output(spark, raw_df, taxonomy, tmp_path, monkeypatch):
    real_write = featurize_mod._write_parquet

    def write_then_crash(df, path):
        real_write(df, path)  # the part files are on disk ...
        raise RuntimeError("simulated crash during the write")  # ... when the job dies

    monkeypatch.setattr(featurize_mod, "_write_parquet", write_then_crash)
    out = tmp_path / "out"
    with pytest.raises(RuntimeError, match="simulated crash"):
        featurize(spark, raw_df, out, PARAMS, taxonomy=taxonomy, num_partitions=2)
    assert os.listdir(tmp_path) == []
    monkeypatch.undo()

    # overwrite=True over an existing out_dir, failing while renaming the new directory in:
    # the old directory is put back and the temporary one removed
    out.mkdir()
    (out / "keep.txt").write_text("old")
    real_replace = os.replace

    def failing_replace(src, dst):
        # the new directory itself (the one directory swap, sparkhc.persistence.replace_dir)
        if ".tmp-" in os.path.basename(src) and os.path.isdir(src):
            raise OSError("simulated crash while renaming into place")
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError, match="simulated crash"):
        featurize(spark, raw_df, out, PARAMS, taxonomy=taxonomy, num_partitions=2, overwrite=True)
    assert os.listdir(tmp_path) == ["out"] and os.listdir(out) == ["keep.txt"]


# ------------------------------------------------------------------ input errors
def test_duplicate_doc_ids_rejected(spark, tmp_path):
    df = spark.createDataFrame([("x", "aa bb", None, [], "train", None)] * 2 + [("y", "cc", None, [], "train", 1)], RAW_DDL)
    with pytest.raises(InputDataError, match=r"duplicate.*'x'"):
        featurize(spark, df, tmp_path / "o", {"fit_on": None})
    assert os.listdir(tmp_path) == []


def test_unknown_label_rejected(spark, raw_df, tmp_path):
    tax = Taxonomy.from_edges([("ROOT", "fruit"), ("fruit", "fruit/apple")], root="ROOT")
    with pytest.raises(InputDataError, match=r"fruit/banana.*'d1'"):
        featurize(spark, raw_df, tmp_path / "o", PARAMS, taxonomy=tax)


def test_raw_schema_errors(spark, tmp_path):
    bad = spark.createDataFrame([("d", 5, ["a"])], "doc_id string, text int, labels array<string>")
    with pytest.raises(SchemaError, match="'text' has type int"):
        featurize(spark, bad, tmp_path / "o", PARAMS)
    no_labels = spark.createDataFrame([("d", "x")], "doc_id string, text string")
    with pytest.raises(SchemaError, match="'labels' is missing"):
        featurize(spark, no_labels, tmp_path / "o", PARAMS)
    with pytest.raises(InputDataError, match="fit filter"):
        only_test = spark.createDataFrame([("d", "aa bb", ["l"], "test")], "doc_id string, text string, labels array<string>, split string")
        featurize(spark, only_test, tmp_path / "o", PARAMS)


# ------------------------------------------------------------------ reading back
def test_read_features_and_transform_agree(spark, raw_df, featurized, taxonomy):
    out, _ = featurized
    df, spec = read_features(spark, out)
    assert df.count() == 6
    written = {r["doc_id"]: r.asDict() for r in df.collect()}
    fresh = {r["doc_id"]: r.asDict() for r in transform(spark, raw_df, spec, taxonomy).collect()}
    assert fresh == written


def test_read_features_local(featurized):
    batch, spec = read_features_local(featurized[0])
    assert isinstance(batch, SparseBatch) and batch.X.shape == (6, 4)
    assert batch.counts is not None
    i = list(batch.doc_ids).index("d3")
    assert batch.counts[i].toarray().ravel().tolist() == [2.0, 1.0, 0.0, 0.0]
    assert sorted(batch.extra["split"].tolist(), key=str) == sorted([r[4] for r in ROWS], key=str)


def test_batches_one_per_partition(spark, featurized):
    df, spec = read_features(spark, featurized[0])
    df = df.repartition(3, "doc_id")
    batches = batches_rdd(df, spec.n_features, with_counts=True).collect()
    assert len(batches) == 3  # one per partition, empty ones included
    merged = SparseBatch.concat(batches)
    assert sorted(merged.doc_ids.tolist()) == ["d1", "d2", "d3", "d4", "d5", "d6"]
    assert merged.counts is not None and merged.counts.sum() == 10

    out = map_batches(df, _nnz_per_doc, "doc_id string, nnz int", spec.n_features)
    assert {r["doc_id"]: r["nnz"] for r in out.collect()} == {d: len(i) for d, (i, _) in EXPECTED.items()}


def _nnz_per_doc(batch: SparseBatch):
    yield pa.RecordBatch.from_pydict(
        {"doc_id": batch.doc_ids.tolist(), "nnz": np.diff(batch.X.indptr).astype(np.int32)},
        schema=pa.schema([("doc_id", pa.string()), ("nnz", pa.int32())]),
    )


def test_partition_to_batch_from_pandas_and_empty():
    pdf = pd.DataFrame(
        {"doc_id": ["a", "b"], "indices": [np.array([0, 2], np.int32), np.array([], np.int32)],
         "values": [np.array([0.6, 0.8], np.float32), np.array([], np.float32)], "labels": [["x"], []]}
    )
    b = partition_to_batch([pdf], n_features=3, extra_columns=())
    np.testing.assert_allclose(b.X.toarray(), [[0.6, 0.0, 0.8], [0.0, 0.0, 0.0]], rtol=1e-6)
    assert b.labels == [["x"], []]
    assert len(partition_to_batch(iter([]), n_features=3)) == 0


def _copy_with_part(featurized, tmp_path, table: pa.Table):
    bad = tmp_path / "bad"
    shutil.copytree(featurized[0], bad)
    part = bad / "features" / "part-00001.parquet"
    pq.write_table(table, part)
    return bad, part


def test_schema_mismatch_on_read_names_file_and_column(spark, featurized, tmp_path):
    table = pq.read_table(featurized[0] / "features" / "part-00001.parquet")
    as_string = table.set_column(
        table.schema.get_field_index("values"), "values", pa.array([str(v) for v in table.column("values").to_pylist()])
    )
    bad, part = _copy_with_part(featurized, tmp_path, as_string)
    for read in (lambda: read_features(spark, bad), lambda: read_features_local(bad)):
        with pytest.raises(SchemaError, match=r"part-00001\.parquet: column 'values' has type string, expected array<float>"):
            read()
    bad2, _ = _copy_with_part(featurized, tmp_path / "x", table.drop_columns(["counts"]))
    with pytest.raises(SchemaError, match="column 'counts' is missing"):
        read_features(spark, bad2)
    with pytest.raises(InputDataError, match="not found"):
        read_features(spark, tmp_path / "nothing")


# ------------------------------------------------------------------ real data
@pytest.mark.slow
def test_20newsgroups(spark, tmp_path):
    path = corpus_dir("20newsgroups") / "docs.jsonl.gz"
    with gzip.open(path, "rt", encoding="utf-8") as f:
        recs = [json.loads(line) for line in f]
    pdf = pd.DataFrame(
        {
            "doc_id": [r["id"] for r in recs],
            "text": [r["text"] for r in recs],
            "labels": [r["labels"] for r in recs],
            "split": [r["split"] for r in recs],
        }
    )
    raw = spark.createDataFrame(pdf, "doc_id string, text string, labels array<string>, split string")
    taxonomy = Taxonomy.load(corpus_dir("20newsgroups") / "taxonomy.tsv")
    t0 = time.perf_counter()
    summary = featurize(spark, raw, tmp_path / "ng", {"fit_on": ["train"]}, taxonomy=taxonomy)
    seconds = time.perf_counter() - t0
    print(f"\n20newsgroups featurize: {seconds:.1f} s; timings {summary['timings']}")
    assert summary["n_documents"] == 18846
    assert summary["documents_per_split"] == {"test": 7532, "train": 11314}
    assert summary["n_fit_docs"] == 11314
    batch, spec = read_features_local(tmp_path / "ng")
    assert len(batch) == 18846 and batch.n_features == spec.n_features == summary["vocabulary_size"]
    norms = np.sqrt(np.asarray(batch.X.multiply(batch.X).sum(axis=1)).ravel())
    nonempty = np.diff(batch.X.indptr) > 0
    np.testing.assert_allclose(norms[nonempty], 1.0, rtol=1e-5)
    assert batch.label_matrix(taxonomy).shape == (18846, taxonomy.n_nodes)
