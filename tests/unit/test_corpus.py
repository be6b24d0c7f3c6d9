"""Corpus readers, registry and fetcher.

Expected values come from ../shared/data/*/SOURCE.md and INDEX.md (real data) or are written
by hand for the tiny files made here.
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import io
import json
import tarfile
import urllib.error
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sparkhc.corpus import (
    RAW_SCHEMA,
    ChecksumError,
    Download,
    DuplicateIdError,
    EmptyDocumentError,
    UnknownCorpusError,
    UnknownLabelError,
    all_corpora,
    apte_mod_categories,
    download,
    fetch,
    find_corpus,
    get_corpus,
    read_any,
    read_folds,
    read_jsonl,
    read_label_dirs,
    read_lyrl2004,
    read_parquet,
    to_table,
)
from sparkhc.corpus import registry as registry_mod
from sparkhc.errors import DataUnavailableError, InputDataError, SchemaError
from sparkhc.taxonomy import Taxonomy
from tests.conftest import corpus_dir

TAX7 = Taxonomy.from_edges(
    [("ROOT", "A"), ("ROOT", "B"), ("A", "A1"), ("A", "A2"), ("B", "B1"), ("B", "B2")], root="ROOT"
)


def write_lines(path: Path, lines: list[str | bytes], gz: bool = False) -> Path:
    data = b"".join((ln if isinstance(ln, bytes) else ln.encode("utf-8")) + b"\n" for ln in lines)
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def doc(i: str | int, labels: list[str] | None = None, **kw: object) -> str:
    rec: dict[str, object] = {"id": i, "labels": ["A1"] if labels is None else labels, "text": f"text {i}"}
    rec.update(kw)
    return json.dumps(rec)


def read_all(batches_report):
    batches, report = batches_report
    table = to_table(batches)
    return table, report


def no_files(root: Path) -> bool:
    return not root.exists() or not [p for p in root.rglob("*") if p.is_file()]


# ------------------------------------------------------------------------------------------ schema
def test_raw_schema_is_the_documented_layout():
    assert RAW_SCHEMA.names == ["doc_id", "text", "tokens", "labels", "split", "fold"]
    assert RAW_SCHEMA.field("doc_id").type == pa.string() and not RAW_SCHEMA.field("doc_id").nullable
    assert RAW_SCHEMA.field("text").nullable and RAW_SCHEMA.field("tokens").nullable
    assert RAW_SCHEMA.field("tokens").type == pa.list_(pa.string())
    assert RAW_SCHEMA.field("labels").type == pa.list_(pa.string())
    assert RAW_SCHEMA.field("fold").type == pa.int32()
    assert RAW_SCHEMA.field("split").type == pa.string() and RAW_SCHEMA.field("split").nullable


# ------------------------------------------------------------------------------------------ JSONL: good input
def test_jsonl_gzip_text_fields_batches_and_types(tmp_path):
    lines = [
        json.dumps({"id": 1, "title": "T1", "text": "body 1", "labels": ["A1"], "split": "train", "fold": 2}),
        json.dumps({"id": "d2", "title": "T2", "text": "", "labels": [], "split": "test"}),
        json.dumps({"id": "d3", "tokens": ["x", "y"], "labels": ["B", "B2"]}),
    ]
    p = write_lines(tmp_path / "docs.jsonl", lines, gz=True)  # gzip found by magic bytes, not suffix
    batches, report = read_jsonl(p, text_fields=["title", "text"], batch_size=2, taxonomy=TAX7)
    got = list(batches)
    assert [b.num_rows for b in got] == [2, 1]
    assert all(b.schema == RAW_SCHEMA for b in got)
    t = pa.Table.from_batches(got)
    assert t.column("doc_id").to_pylist() == ["1", "d2", "d3"]
    assert t.column("text").to_pylist() == ["T1\nbody 1", "T2", None]
    assert t.column("tokens").to_pylist() == [None, None, ["x", "y"]]
    assert t.column("labels").to_pylist() == [["A1"], [], ["B", "B2"]]
    assert t.column("split").to_pylist() == ["train", "test", None]
    assert t.column("fold").to_pylist() == [2, None, None]
    assert (report.read, report.emitted, report.quarantined, report.batches) == (3, 3, 0, 2)
    assert report.no_labels == 1 and report.finished


def test_jsonl_ancestors_and_protocol_selection(tmp_path):
    p = write_lines(tmp_path / "d.jsonl", [
        doc("a", ["A1", "B2"], keep=True), doc("b", ["A2"], keep=False), doc("c", ["B1", "A2"], keep=True),
    ])
    t, rep = read_all(read_jsonl(
        p, taxonomy=TAX7, ancestors=True, allowed_labels={"A1", "B1", "B2"},
        select=lambda o: None if o["keep"] else "keep is false",
    ))
    assert t.column("doc_id").to_pylist() == ["a", "c"]
    # ancestor closure in level order: A, B, then leaves
    assert t.column("labels").to_pylist() == [["A", "B", "A1", "B2"], ["B", "B1"]]
    assert (rep.read, rep.emitted, rep.excluded, rep.quarantined) == (3, 2, 1, 0)
    assert rep.excluded_reasons == {"keep is false": 1}
    assert rep.labels_restricted == 1 and rep.restricted_label_counts == {"A2": 1}


def test_jsonl_folds_table(tmp_path):
    folds = tmp_path / "folds.tsv"
    folds.write_text("id\tfold\na\t0\nb\t1\nzz\t4\n")
    p = write_lines(tmp_path / "d.jsonl", [doc("a"), doc("b")])
    t, rep = read_all(read_jsonl(p, folds=read_folds(folds)))
    assert t.column("fold").to_pylist() == [0, 1]
    assert rep.notes == [f"1 id(s) of {folds} match no document read"]
    p2 = write_lines(tmp_path / "d2.jsonl", [doc("a"), doc("q")])
    with pytest.raises(InputDataError, match=r"d2\.jsonl, line 2 \(document 'q'\): document has no line in"):
        read_all(read_jsonl(p2, folds=read_folds(folds)))


# ------------------------------------------------------------------------------------------ JSONL: bad input
def test_malformed_json_names_file_and_line(tmp_path):
    p = write_lines(tmp_path / "bad.jsonl", [doc("a"), doc("b"), '{"id": "c", "labels": [}'])
    with pytest.raises(InputDataError, match=r"bad\.jsonl, line 3: malformed JSON") as e:
        read_all(read_jsonl(p))
    assert str(p) in str(e.value)


def test_malformed_json_quarantine_counts(tmp_path):
    p = write_lines(tmp_path / "bad.jsonl", [doc("a"), "not json", "[1, 2]", doc("d")])
    t, rep = read_all(read_jsonl(p, on_invalid="quarantine"))
    assert t.num_rows == 2
    assert (rep.read, rep.emitted, rep.quarantined) == (4, 2, 2)
    assert rep.read == rep.emitted + rep.quarantined
    assert rep.quarantine_reasons == {"malformed JSON": 1, "not a JSON object": 1}
    assert rep.quarantine_samples[0] == (f"{p}, line 2", "malformed JSON")


def test_lone_surrogate_and_deep_nesting_are_named_errors(tmp_path):
    """A lone UTF-16 surrogate escape (no UTF-8 text holds it) and JSON nested beyond the recursion
    limit are malformed lines naming the file and line (they crashed the reader before); a surrogate
    pair and an escaped backslash before 'ud800' are fine."""
    lone = '{"id": "c", "labels": ["A1"], "text": "x \\ud800 y"}'
    deep = '{"id": "d", "labels": ["A1"], "text": "x", "n": ' + "[" * 5000 + "]" * 5000 + "}"
    pair = '{"id": "e", "labels": ["A1"], "text": "smile \\ud83d\\ude00"}'
    literal = '{"id": "f", "labels": ["A1"], "text": "a \\\\ud800 b"}'
    p = write_lines(tmp_path / "s.jsonl", [doc("a"), lone])
    with pytest.raises(InputDataError, match=r"s\.jsonl, line 2: malformed JSON: a lone UTF-16 surrogate escape "
                       r"'\\\\ud800' at column 42"):
        read_all(read_jsonl(p))
    p = write_lines(tmp_path / "n.jsonl", [deep])
    with pytest.raises(InputDataError, match=r"n\.jsonl, line 1: malformed JSON: nested too deeply"):
        read_all(read_jsonl(p))
    p = write_lines(tmp_path / "q.jsonl", [doc("a"), lone, deep, pair, literal])
    t, rep = read_all(read_jsonl(p, on_invalid="quarantine"))
    assert t.column("doc_id").to_pylist() == ["a", "e", "f"]
    assert rep.quarantine_reasons == {"malformed JSON": 2}
    assert "\U0001f600" in t.column("text").to_pylist()[1] and "\\ud800" in t.column("text").to_pylist()[2]


def test_missing_id(tmp_path):
    p = write_lines(tmp_path / "d.jsonl", [doc("a"), json.dumps({"labels": ["A1"], "text": "x"})])
    with pytest.raises(InputDataError, match=r"d\.jsonl, line 2: missing document id field 'id'"):
        read_all(read_jsonl(p))
    t, rep = read_all(read_jsonl(p, on_invalid="quarantine"))
    assert (rep.read, rep.emitted, rep.quarantined) == (2, 1, 1)
    assert rep.quarantine_reasons == {"missing id": 1}


def test_duplicate_id_names_both_lines(tmp_path):
    p = write_lines(tmp_path / "d.jsonl", [doc("a"), doc("b"), doc("a")])
    with pytest.raises(DuplicateIdError) as e:
        read_all(read_jsonl(p))
    msg = str(e.value)
    assert "'a'" in msg and f"{p}, line 1" in msg and f"{p}, line 3" in msg


def test_duplicate_id_across_files(tmp_path):
    p1 = write_lines(tmp_path / "train.jsonl", [doc("a"), doc("b")])
    p2 = write_lines(tmp_path / "test.jsonl", [doc("c"), doc("b")])
    with pytest.raises(DuplicateIdError, match=r"train\.jsonl, line 2.*test\.jsonl, line 2"):
        read_all(read_jsonl([p1, p2]))
    t, rep = read_all(read_jsonl([p1, p2], on_invalid="quarantine"))
    assert t.column("doc_id").to_pylist() == ["a", "b", "c"]
    assert (rep.read, rep.emitted, rep.quarantined) == (4, 3, 1)
    assert rep.quarantine_samples == [("b", "duplicate id")]


def test_empty_document_error_by_default(tmp_path):
    p = write_lines(tmp_path / "d.jsonl", [doc("a"), json.dumps({"id": "e", "labels": ["A1"], "text": "  \n"})])
    with pytest.raises(EmptyDocumentError, match=r"d\.jsonl, line 2: document 'e' is empty"):
        read_all(read_jsonl(p))


def test_empty_document_quarantine_and_keep(tmp_path):
    p = write_lines(tmp_path / "d.jsonl", [
        doc("a"),
        json.dumps({"id": "e1", "labels": ["A1"], "text": ""}),
        json.dumps({"id": "e2", "labels": ["A1"]}),
        json.dumps({"id": "e3", "labels": ["A1"], "tokens": []}),
        json.dumps({"id": "t", "labels": ["A1"], "tokens": ["w"]}),
    ])
    t, rep = read_all(read_jsonl(p, on_empty="quarantine"))
    assert t.column("doc_id").to_pylist() == ["a", "t"]
    assert (rep.read, rep.emitted, rep.quarantined) == (5, 2, 3)
    assert rep.read == rep.emitted + rep.quarantined
    assert rep.quarantine_reasons == {"empty document": 3}
    assert [s[0] for s in rep.quarantine_samples] == ["e1", "e2", "e3"]
    t, rep = read_all(read_jsonl(p, on_empty="keep"))
    assert t.num_rows == 5 and rep.empty_kept == 3


def test_unknown_label_error_names_label_doc_file_line(tmp_path):
    p = write_lines(tmp_path / "d.jsonl", [doc("a", ["A1"]), doc("b", ["A", "Z9"])])
    with pytest.raises(UnknownLabelError) as e:
        read_all(read_jsonl(p, taxonomy=TAX7))
    msg = str(e.value)
    assert "'Z9'" in msg and "'b'" in msg and f"{p}, line 2" in msg


def test_root_is_not_a_label(tmp_path):
    p = write_lines(tmp_path / "d.jsonl", [doc("a", ["ROOT", "A"])])
    with pytest.raises(UnknownLabelError, match="'ROOT' is the taxonomy root"):
        read_all(read_jsonl(p, taxonomy=TAX7))


def test_unknown_label_drop_counts_and_samples(tmp_path):
    p = write_lines(tmp_path / "d.jsonl", [
        doc("a", ["A1", "Z9"]), doc("b", ["Z9"]), doc("c", ["B1", "Q"]), doc("d", ["B"]),
    ])
    t, rep = read_all(read_jsonl(p, taxonomy=TAX7, unknown_labels="drop"))
    assert t.column("labels").to_pylist() == [["A1"], [], ["B1"], ["B"]]
    assert (rep.read, rep.emitted, rep.quarantined) == (4, 4, 0)
    assert rep.labels_dropped == 3
    assert rep.dropped_label_counts == {"Z9": 2, "Q": 1}
    assert rep.dropped_label_samples == [("a", "Z9"), ("b", "Z9"), ("c", "Q")]
    assert rep.no_labels == 1
    t, rep = read_all(read_jsonl(p, taxonomy=TAX7, unknown_labels="quarantine"))
    assert t.column("doc_id").to_pylist() == ["d"]
    assert (rep.read, rep.emitted, rep.quarantined) == (4, 1, 3)


def test_non_utf8_bytes(tmp_path):
    good = doc("a").encode()
    bad = b'{"id": "b", "labels": ["A1"], "text": "caf\xe9"}'
    p = write_lines(tmp_path / "d.jsonl", [good, bad])
    offset = len(good) + 1 + bad.index(b"\xe9")
    with pytest.raises(InputDataError) as e:
        read_all(read_jsonl(p))
    msg = str(e.value)
    assert f"{p}, line 2" in msg and "0xe9" in msg and f"byte offset {offset}" in msg
    t, rep = read_all(read_jsonl(p, on_invalid="quarantine"))
    assert (rep.read, rep.emitted, rep.quarantined) == (2, 1, 1)


@pytest.mark.parametrize(
    ("record", "pattern"),
    [
        ({"id": "x", "labels": "A1", "text": "t"}, r"'labels' must be a list of non-empty strings, got str"),
        ({"id": "x", "labels": ["A1", 3], "text": "t"}, r"'labels' must be a list .* containing int 3"),
        ({"id": "x", "labels": ["A1", ""], "text": "t"}, r"'labels' must be a list of non-empty strings"),
        ({"id": "x", "text": "t"}, r"missing labels field 'labels'"),
        ({"id": "x", "labels": ["A1"], "text": 5}, r"'text' must be a string, got int"),
        ({"id": "x", "labels": ["A1"], "tokens": "a b"}, r"'tokens' must be a list of strings"),
        ({"id": "x", "labels": ["A1"], "text": "t", "fold": "1"}, r"'fold' must be a 32-bit integer, got str"),
        ({"id": "x", "labels": ["A1"], "text": "t", "split": 1}, r"'split' must be a string, got int"),
        ({"id": True, "labels": ["A1"], "text": "t"}, r"'id' must be a non-empty string or an integer, got bool"),
        ({"id": 1.5, "labels": ["A1"], "text": "t"}, r"'id' must be .* got float"),
    ],
)
def test_wrong_field_types(tmp_path, record, pattern):
    p = write_lines(tmp_path / "d.jsonl", [doc("ok"), json.dumps(record)])
    with pytest.raises(InputDataError, match=r"d\.jsonl, line 2.*" + pattern):
        read_all(read_jsonl(p))


def test_gz_suffix_without_gzip_data_and_missing_file(tmp_path):
    p = write_lines(tmp_path / "d.jsonl.gz", [doc("a")])
    with pytest.raises(InputDataError, match="not gzip"):
        read_all(read_jsonl(p))
    with pytest.raises(InputDataError, match="file not found"):
        read_jsonl(tmp_path / "nope.jsonl")


def test_truncated_gzip(tmp_path):
    data = gzip.compress(("\n".join(doc(i) for i in range(2000)) + "\n").encode())
    p = tmp_path / "t.jsonl.gz"
    p.write_bytes(data[: len(data) // 2])
    with pytest.raises(InputDataError, match=r"t\.jsonl\.gz: read error"):
        read_all(read_jsonl(p))


def test_bad_parameters_fail_at_call_time(tmp_path):
    p = write_lines(tmp_path / "d.jsonl", [doc("a")])
    with pytest.raises(ValueError, match="'on_empty' parameter must be one of"):
        read_jsonl(p, on_empty="drop")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'batch_size'"):
        read_jsonl(p, batch_size=0)


# ------------------------------------------------------------------------------------------ Parquet
def test_parquet_round_trip(tmp_path):
    p = write_lines(tmp_path / "d.jsonl", [
        doc("a", ["A1"], split="train", fold=1), json.dumps({"id": "b", "labels": ["B"], "tokens": ["u", "v"]}),
    ])
    table, _ = read_all(read_jsonl(p))
    pq.write_table(table, tmp_path / "d.parquet")
    back, rep = read_all(read_parquet(tmp_path / "d.parquet", taxonomy=TAX7))
    assert back.equals(table)
    assert (rep.read, rep.emitted) == (2, 2)


def test_parquet_optional_columns_and_large_types(tmp_path):
    t = pa.table({
        "doc_id": pa.array(["a", "b"], type=pa.large_string()),
        "text": ["x", "y"],
        "labels": pa.array([["A1"], []], type=pa.large_list(pa.large_string())),
        "fold": pa.array([3, 4], type=pa.int64()),
    })
    pq.write_table(t, tmp_path / "d.parquet")
    back, _ = read_all(read_parquet(tmp_path / "d.parquet"))
    assert back.schema == RAW_SCHEMA
    assert back.column("tokens").to_pylist() == [None, None] and back.column("split").null_count == 2
    assert back.column("fold").to_pylist() == [3, 4]


def test_parquet_missing_column(tmp_path):
    pq.write_table(pa.table({"doc_id": ["a"], "text": ["x"]}), tmp_path / "m.parquet")
    with pytest.raises(SchemaError, match=r"m\.parquet: required column 'labels' is missing"):
        read_parquet(tmp_path / "m.parquet")


def test_parquet_mistyped_column(tmp_path):
    pq.write_table(pa.table({"doc_id": ["a"], "text": ["x"], "labels": ["A1"]}), tmp_path / "w.parquet")
    with pytest.raises(SchemaError, match=r"w\.parquet: column 'labels' has type string, expected list<item: string>"):
        read_parquet(tmp_path / "w.parquet")
    pq.write_table(pa.table({"doc_id": [1], "text": ["x"], "labels": [["A1"]]}), tmp_path / "i.parquet")
    with pytest.raises(SchemaError, match=r"i\.parquet: column 'doc_id' has type int64"):
        read_parquet(tmp_path / "i.parquet")


def test_parquet_duplicate_id(tmp_path):
    labels = pa.array([[], [], []], type=pa.list_(pa.string()))
    pq.write_table(pa.table({"doc_id": ["a", "b", "a"], "text": ["x", "y", "z"], "labels": labels}),
                   tmp_path / "d.parquet")
    with pytest.raises(DuplicateIdError, match=r"d\.parquet, row 1, again at .*d\.parquet, row 3"):
        read_all(read_parquet(tmp_path / "d.parquet"))


def test_parquet_null_id_and_empty_quarantine(tmp_path):
    pq.write_table(
        pa.table({"doc_id": ["a", None, "c"], "text": ["x", "y", ""], "labels": [["A1"], ["A1"], ["B"]]}),
        tmp_path / "n.parquet",
    )
    with pytest.raises(InputDataError, match=r"n\.parquet, row 2: column 'doc_id' is null"):
        read_all(read_parquet(tmp_path / "n.parquet"))
    t, rep = read_all(read_parquet(tmp_path / "n.parquet", on_invalid="quarantine", on_empty="quarantine"))
    assert t.column("doc_id").to_pylist() == ["a"]
    assert (rep.read, rep.emitted, rep.quarantined) == (3, 1, 2)
    assert rep.quarantine_reasons == {"missing id": 1, "empty document": 1}


def test_parquet_null_labels(tmp_path):
    labels = pa.array([["A1"], None], type=pa.list_(pa.string()))
    pq.write_table(pa.table({"doc_id": ["a", "b"], "text": ["x", "y"], "labels": labels}), tmp_path / "u.parquet")
    with pytest.raises(InputDataError, match=r"u\.parquet, row 2 \(document 'b'\): column 'labels' is null"):
        read_all(read_parquet(tmp_path / "u.parquet"))
    t, _ = read_all(read_parquet(tmp_path / "u.parquet", require_labels=False))
    assert t.column("labels").to_pylist() == [["A1"], []]


def test_read_any_dispatch(tmp_path):
    (tmp_path / "j").mkdir()
    write_lines(tmp_path / "j" / "a.jsonl.gz", [doc("a")], gz=True)
    t, _ = read_all(read_any(tmp_path / "j" / "a.jsonl.gz"))
    assert t.column("doc_id").to_pylist() == ["a"]
    (tmp_path / "pq").mkdir()
    pq.write_table(t, tmp_path / "pq" / "part-0001.parquet")
    (tmp_path / "pq" / "_SUCCESS").write_text("")
    t2, _ = read_all(read_any(tmp_path / "pq", taxonomy=TAX7))
    assert t2.equals(t)
    (tmp_path / "dirs" / "A1").mkdir(parents=True)
    (tmp_path / "dirs" / "A1" / "1").write_text("hello")
    t3, _ = read_all(read_any(tmp_path / "dirs"))
    assert t3.column("labels").to_pylist() == [["A1"]]
    (tmp_path / "x.csv").write_text("a,b\n")
    with pytest.raises(InputDataError, match="unknown input format"):
        read_any(tmp_path / "x.csv")


# ------------------------------------------------------------------------------------------ label dirs
def test_label_dirs_split_layout_latin1(tmp_path):
    root = tmp_path / "ng"
    for rel, data in {
        "20news-bydate-train/alt.atheism/10": b"caf\xe9",
        "20news-bydate-train/alt.atheism/9": b"nine",
        "20news-bydate-train/alt.atheism/.DS_Store": b"junk",
        "20news-bydate-test/comp.graphics/5": b"graphics",
    }.items():
        f = root / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(data)
    tax = Taxonomy.from_tsv_text(registry_mod.TWENTY_NG_TAXONOMY_TSV, root="ROOT")
    t, rep = read_all(read_label_dirs(root, taxonomy=tax, ancestors=True))
    # test sorts before train alphabetically; files in numeric order
    assert t.column("doc_id").to_pylist() == [
        "20news-bydate-test/comp.graphics/5", "20news-bydate-train/alt.atheism/9", "20news-bydate-train/alt.atheism/10",
    ]
    assert t.column("split").to_pylist() == ["test", "train", "train"]
    assert t.column("labels").to_pylist() == [
        ["computer", "comp.graphics"], ["religion", "alt.atheism"], ["religion", "alt.atheism"],
    ]
    assert t.column("text").to_pylist()[2] == "café"
    assert (rep.read, rep.emitted, rep.skipped_files) == (3, 3, 1)


def test_label_dirs_flat_layout_and_decode_error(tmp_path):
    root = tmp_path / "c"
    (root / "x").mkdir(parents=True)
    (root / "y").mkdir()
    (root / "x" / "1.txt").write_bytes(b"hello")
    (root / "y" / "2.txt").write_bytes(b"\xff\xfe bad")
    with pytest.raises(InputDataError, match=r"2\.txt \(document 'y/2\.txt'\): cannot decode as utf-8: byte 0xff at byte offset 0"):
        read_all(read_label_dirs(root, encoding="utf-8"))
    t, rep = read_all(read_label_dirs(root, encoding="utf-8", on_invalid="quarantine"))
    assert t.column("labels").to_pylist() == [["x"]] and t.column("split").to_pylist() == [None]
    assert (rep.read, rep.emitted, rep.quarantined) == (2, 1, 1)
    with pytest.raises(UnknownLabelError, match="label 'x'"):
        read_all(read_label_dirs(root, taxonomy=TAX7))


# ------------------------------------------------------------------------------------------ LYRL2004
def test_lyrl2004_tokens_and_qrels(tmp_path):
    tok = tmp_path / "lyrl2004_tokens_train.dat.gz"
    tok.write_bytes(gzip.compress(
        b".I 2286\n.W\nmacedonian president kiro\ngligorov said\n\n.I 2287\n.W\nvoting\n\n.I 2288\n.W\nnothing\n"
    ))
    qrels = tmp_path / "rcv1-v2.topics.qrels"
    qrels.write_text("C15 2286 1\nCCAT 2286 1\nGCAT 2287 1\n")
    tax = Taxonomy.from_edges([("Root", "CCAT"), ("CCAT", "C15"), ("Root", "GCAT")], root="Root")
    with pytest.raises(InputDataError, match=r"line 10: document '2288' has no line in the qrels"):
        read_all(read_lyrl2004(tok, qrels, taxonomy=tax))
    t, rep = read_all(read_lyrl2004(tok, qrels, taxonomy=tax, missing_labels="quarantine"))
    assert t.column("doc_id").to_pylist() == ["2286", "2287"]
    assert t.column("tokens").to_pylist() == [["macedonian", "president", "kiro", "gligorov", "said"], ["voting"]]
    assert t.column("labels").to_pylist() == [["C15", "CCAT"], ["GCAT"]]
    assert t.column("split").to_pylist() == ["train", "train"] and t.column("text").null_count == 2
    assert (rep.read, rep.emitted, rep.quarantined) == (3, 2, 1)


def test_lyrl2004_duplicate_and_malformed_blocks(tmp_path):
    tok = tmp_path / "lyrl2004_tokens_test_pt1.dat"
    tok.write_text(".I 1\n.W\na b\n\n.I\n.W\nlost\n\n.I 1\n.W\nagain\n\n.I 2\n.W\nc\n")
    qrels = {"1": ["C15"], "2": ["GCAT"]}
    with pytest.raises(InputDataError, match=r"pt1\.dat, line 5: expected '\.I <docid>'"):
        read_all(read_lyrl2004(tok, qrels))
    t, rep = read_all(read_lyrl2004(tok, qrels, on_invalid="quarantine"))
    assert t.column("doc_id").to_pylist() == ["1", "2"] and t.column("split").to_pylist() == ["test", "test"]
    assert t.column("tokens").to_pylist() == [["a", "b"], ["c"]]
    assert (rep.read, rep.emitted, rep.quarantined) == (4, 2, 2)
    assert rep.quarantine_reasons == {"malformed block": 1, "duplicate id": 1}


def test_lyrl2004_bad_qrels_line(tmp_path):
    tok = tmp_path / "lyrl2004_tokens_test_pt0.dat"
    tok.write_text(".I 1\n.W\na\n")
    qrels = tmp_path / "q"
    qrels.write_text("C15 1 1\nC15 1\n")
    with pytest.raises(InputDataError, match=r"q, line 2: expected '<topic> <docid> 1'"):
        read_lyrl2004(tok, qrels)


# ------------------------------------------------------------------------------------------ registry
def test_unknown_corpus_lists_known_names():
    with pytest.raises(UnknownCorpusError) as e:
        get_corpus("20ng")
    assert "'20ng'" in str(e.value) and "20newsgroups" in str(e.value) and "rcv1v2_subset" in str(e.value)


def test_registry_lists_the_index_corpora():
    names = [c.name for c in all_corpora()]
    for name in ("20newsgroups", "reuters21578", "rcv1v2_subset", "ohsumed23", "meka_imdb"):
        assert name in names
    assert all(c.description and c.protocol for c in all_corpora())
    assert get_corpus("20newsgroups").can_download and not get_corpus("reuters21578").can_download


def test_protocol_helpers():
    ng = get_corpus("20newsgroups")
    assert ng.splits == ("train", "test") and ng.n_folds is None
    [r] = ng.rounds()
    t = pa.table({"split": ["train", "test", None], "fold": pa.array([None, None, None], pa.int32())})
    assert r.train_mask(t).tolist() == [True, False, False] and r.test_mask(t).tolist() == [False, True, False]
    rcv = get_corpus("rcv1v2_subset")
    rounds = rcv.rounds()
    assert rcv.n_folds == 5 and [r.test_folds for r in rounds] == [(0,), (1,), (2,), (3,), (4,)]
    assert rounds[2].train_folds == (0, 1, 3, 4)
    assert rounds[2].sql_filters() == ("fold IN (0, 1, 3, 4)", "fold IN (2)")
    [imdb] = get_corpus("meka_imdb").rounds()
    assert imdb.test_folds == (0,) and imdb.train_folds == (1, 2, 3, 4)


def test_20ng_embedded_taxonomy_is_the_staged_file():
    # sha256 of taxonomy.tsv from ../shared/data/20newsgroups/SOURCE.md
    digest = hashlib.sha256(registry_mod.TWENTY_NG_TAXONOMY_TSV.encode("utf-8")).hexdigest()
    assert digest == "a5311efbbce063597bceeecbb9f54fe062bda6ad156a1b3b29c87fcb29cea97e"


def test_flat_taxonomy_built_from_labels(tmp_path):
    d = tmp_path / "meka_imdb"
    d.mkdir()
    write_lines(d / "docs.jsonl.gz", [
        json.dumps({"id": 0, "labels": ["Drama", "War"], "tokens": ["a"]}),
        json.dumps({"id": 1, "labels": ["Comedy"], "tokens": []}),
    ], gz=True)
    (d / "folds.tsv").write_text("id\tfold\n0\t0\n1\t3\n")
    info = get_corpus("meka_imdb")
    tax = info.load_taxonomy(tmp_path)
    assert tax.root_name == "ROOT" and tax.names[1:] == ("Comedy", "Drama", "War")
    assert info.scored_labels(tax) == ["Comedy", "Drama", "War"]
    t, rep = read_all(info.read(tmp_path))
    assert t.column("fold").to_pylist() == [0, 3] and t.column("split").null_count == 2
    assert rep.empty_kept == 1  # the protocol keeps documents without vocabulary words


def test_rcv1v2_lyrl2004_entry_on_synthetic_files(tmp_path):
    d = tmp_path / "rcv1v2"
    d.mkdir()
    (d / "lyrl2004_tokens_train.dat.gz").write_bytes(gzip.compress(b".I 26151\n.W\nstocks fell\n"))
    for i in range(4):
        (d / f"lyrl2004_tokens_test_pt{i}.dat").write_text(f".I {100 + i}\n.W\nword{i}\n")
    (d / "rcv1-v2.topics.qrels.gz").write_bytes(gzip.compress(
        b"C15 26151 1\nCCAT 26151 1\nGCAT 100 1\nGCAT 101 1\nGCAT 102 1\nCCAT 103 1\n"
    ))
    (d / "rcv1.topics.hier.orig").write_text(
        "parent: None       child: Root   child-description: Root\n"
        "parent: Root       child: CCAT   child-description: CORPORATE/INDUSTRIAL\n"
        "parent: CCAT       child: C15    child-description: PERFORMANCE\n"
        "parent: Root       child: GCAT   child-description: GOVERNMENT/SOCIAL\n"
    )
    info = get_corpus("rcv1v2")
    assert find_corpus("rcv1v2", data_dir=tmp_path, download=False) == d
    tax = info.load_taxonomy(tmp_path)
    assert tax.root_name == "Root" and info.scored_labels(tax) == ["CCAT", "GCAT", "C15"]
    t, rep = read_all(info.read(tmp_path))
    assert t.column("doc_id").to_pylist() == ["26151", "100", "101", "102", "103"]
    assert t.column("split").to_pylist() == ["train"] + ["test"] * 4
    assert t.column("labels").to_pylist()[0] == ["C15", "CCAT"]
    assert (rep.read, rep.emitted) == (5, 5)


# ------------------------------------------------------------------------------------------ real data
def test_real_20newsgroups():
    d = corpus_dir("20newsgroups")
    info = get_corpus("20newsgroups")
    tax = info.load_taxonomy(d)
    assert (tax.n_nodes - 1, len(tax.leaves), tax.max_depth) == (26, 20, 2)
    assert len(info.scored_labels(tax)) == 20
    t, rep = read_all(info.read(d))  # labels checked against the taxonomy (unknown -> error)
    assert t.num_rows == 18846 and rep.emitted == rep.read == 18846
    splits = t.column("split").to_pylist()
    assert (splits.count("train"), splits.count("test")) == (11314, 7532)
    labels = t.column("labels").to_pylist()
    assert all(len(x) == 2 and all(lab in tax for lab in x) for x in labels)
    assert t.column("doc_id")[0].as_py() == "train/alt.atheism/49960"
    assert labels[0] == ["religion", "alt.atheism"]


def test_real_reuters21578_modapte():
    d = corpus_dir("reuters21578")
    info = get_corpus("reuters21578")
    cats = apte_mod_categories(d / "docs.jsonl.gz")
    assert len(cats) == 90
    tax = info.load_taxonomy(d)
    assert sorted(info.scored_labels(tax)) == sorted(cats)
    full = info.load_taxonomy(d, protocol=False)
    assert len(full.leaves) == 135 and sorted(info.scored_labels(full)) == sorted(cats)
    t, rep = read_all(info.read(d))
    splits = t.column("split").to_pylist()
    assert (splits.count("train"), splits.count("test")) == (7770, 3019)
    # the ModApte selection is a protocol exclusion, counted, not an error
    assert (rep.read, rep.excluded, rep.quarantined) == (21578, 21578 - 10789, 0)
    assert rep.excluded_reasons["not ApteMod (split unused)"] == 8676
    seen = {lab for x in t.column("labels").to_pylist() for lab in x}
    assert seen == set(cats) and all(t.column("labels").to_pylist())
    first = t.column("text")[0].as_py()
    assert first.startswith("BAHIA COCOA REVIEW\nShowers continued")


def test_real_rcv1v2_subset():
    d = corpus_dir("rcv1v2_subset")
    info = get_corpus("rcv1v2_subset")
    assert find_corpus("rcv1v2_subset", data_dir=d.parent, verify=True) == d
    tax = info.load_taxonomy(d)
    assert (tax.n_nodes - 1, tax.max_depth, tax.root_name) == (103, 4, "Root")
    assert len(info.scored_labels(tax)) == 103
    t, rep = read_all(info.read(d))
    assert t.num_rows == 2316 and rep.emitted == 2316
    folds = t.column("fold").to_pylist()
    assert sorted(set(folds)) == [0, 1, 2, 3, 4] and folds.count(0) == 464
    assert t.column("split").null_count == 2316 and t.column("text").null_count == 2316
    assert t.column("labels")[0].as_py() == ["C152", "C15", "CCAT"]
    r = info.rounds()[0]
    assert int(r.test_mask(t).sum()) == 464 and int(r.train_mask(t).sum()) == 2316 - 464


def test_real_ohsumed23():
    d = corpus_dir("ohsumed23")
    info = get_corpus("ohsumed23")
    tax = info.load_taxonomy(d)
    t, _ = read_all(info.read(d))
    splits = t.column("split").to_pylist()
    assert (splits.count("train"), splits.count("test")) == (3357, 4043)
    assert len(info.scored_labels(tax)) == 23


@pytest.mark.slow
def test_real_meka_imdb():
    d = corpus_dir("meka_imdb")
    info = get_corpus("meka_imdb")
    tax = info.load_taxonomy(d)
    assert len(info.scored_labels(tax)) == 28 and tax.max_depth == 1
    t, rep = read_all(info.read(d))
    assert t.num_rows == 120919 and rep.empty_kept == 24
    [r] = info.rounds()
    assert int(r.test_mask(t).sum()) == 24184 and int(r.train_mask(t).sum()) == 120919 - 24184


# ------------------------------------------------------------------------------------------ fetch / find
def make_bydate_tar(path: Path) -> Path:
    members = {
        "20news-bydate-test/sci.space/7": b"space test",
        "20news-bydate-train/comp.graphics/10": b"ten",
        "20news-bydate-train/comp.graphics/9": b"nine",
        "20news-bydate-train/alt.atheism/49960": b"From: x\n\ncaf\xe9\n",
    }
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name in ("20news-bydate-test", "20news-bydate-train"):
            info = tarfile.TarInfo(name)
            info.type = tarfile.DIRTYPE
            tf.addfile(info)
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(buf.getvalue())
    return path


def fake_20ng(tar: Path) -> object:
    sha = hashlib.sha256(tar.read_bytes()).hexdigest()
    return dataclasses.replace(
        get_corpus("20newsgroups"), downloads=(Download("20news-bydate.tar.gz", (tar.as_uri(),), sha),)
    )


def test_download_checksum_mismatch_leaves_no_file(tmp_path):
    src = tmp_path / "src" / "blob.bin"
    src.parent.mkdir(parents=True)
    src.write_bytes(b"some bytes")
    cache = tmp_path / "cache"
    with pytest.raises(ChecksumError, match="sha256 mismatch"):
        download(src.as_uri(), cache / "downloads" / "blob.bin", "0" * 64)
    assert no_files(cache)
    # the same through fetch()
    tar = make_bydate_tar(tmp_path / "src" / "20news-bydate.tar.gz")
    bad = dataclasses.replace(
        get_corpus("20newsgroups"), downloads=(Download("20news-bydate.tar.gz", (tar.as_uri(),), "f" * 64),)
    )
    with pytest.raises(ChecksumError):
        fetch(bad, cache)
    assert no_files(cache)


def test_download_ok_is_atomic(tmp_path):
    src = tmp_path / "blob.bin"
    src.write_bytes(b"abc")
    dest = download(src.as_uri(), tmp_path / "c" / "blob.bin", hashlib.sha256(b"abc").hexdigest())
    assert dest.read_bytes() == b"abc" and [p.name for p in dest.parent.iterdir()] == ["blob.bin"]


def test_offline_find_corpus_says_what_to_put_where(tmp_path):
    def offline(url, timeout=None):
        raise urllib.error.URLError("network is unreachable")

    cache = tmp_path / "cache"
    with pytest.raises(DataUnavailableError) as e:
        find_corpus("20newsgroups", data_dir=tmp_path / "data", cache_dir=cache, opener=offline)
    msg = str(e.value)
    assert "network is unreachable" in msg
    assert ("Put docs.jsonl.gz (sha256 1bf45a491691ba2b3ac1543b17777f81f1c3a0b21374e83773aeb22d14d0f1ea) "
            "and taxonomy.tsv (sha256 a5311efbbce063597bceeecbb9f54fe062bda6ad156a1b3b29c87fcb29cea97e) "
            f"into {cache / '20newsgroups'}/") in msg
    assert "--data-dir" in msg
    assert no_files(cache)


def test_offline_env_and_no_download_corpus(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARKHC_OFFLINE", "1")
    with pytest.raises(DataUnavailableError, match=r"offline .*Put docs\.jsonl\.gz"):
        find_corpus("20newsgroups", cache_dir=tmp_path / "c")
    monkeypatch.delenv("SPARKHC_OFFLINE")
    monkeypatch.delenv("SPARKHC_DATA_DIR", raising=False)
    with pytest.raises(DataUnavailableError, match=r"Put docs\.jsonl\.gz .*taxonomy\.tsv .*folds\.tsv"):
        find_corpus("rcv1v2_subset", cache_dir=tmp_path / "c")


def test_fetch_20ng_from_file_url_converts(tmp_path, monkeypatch):
    tar = make_bydate_tar(tmp_path / "src" / "20news-bydate.tar.gz")
    info = fake_20ng(tar)
    monkeypatch.setitem(registry_mod._REGISTRY, "20newsgroups", info)
    monkeypatch.delenv("SPARKHC_DATA_DIR", raising=False)
    monkeypatch.delenv("SPARKHC_OFFLINE", raising=False)
    cache = tmp_path / "cache"
    path = find_corpus("20newsgroups", data_dir=tmp_path / "nodata", cache_dir=cache)
    assert path == cache / "20newsgroups"
    assert (path / "taxonomy.tsv").read_text() == registry_mod.TWENTY_NG_TAXONOMY_TSV
    recs = [json.loads(x) for x in gzip.open(path / "docs.jsonl.gz", "rt", encoding="utf-8")]
    assert [r["id"] for r in recs] == [
        "train/alt.atheism/49960", "train/comp.graphics/9", "train/comp.graphics/10", "test/sci.space/7",
    ]
    assert recs[0] == {"id": "train/alt.atheism/49960", "split": "train", "newsgroup": "alt.atheism",
                       "labels": ["religion", "alt.atheism"], "text": "From: x\n\ncafé\n"}
    assert recs[1]["labels"] == ["computer", "comp.graphics"]
    assert recs[3]["labels"] == ["science", "sci.space"] and recs[3]["split"] == "test"
    manifest = json.loads((path / "FETCHED.json").read_text())
    assert manifest["summary"] == {"docs": 4, "train": 3, "test": 1}
    # the converted corpus reads with the registry's protocol
    t, rep = read_all(info.read(path))
    assert t.column("split").to_pylist() == ["train", "train", "train", "test"] and rep.emitted == 4

    def no_network(url, timeout=None):
        raise AssertionError("must not download again")

    assert find_corpus("20newsgroups", cache_dir=cache, opener=no_network) == path


def test_converter_rejects_unexpected_member(tmp_path):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        ti = tarfile.TarInfo("20news-bydate-train/rec.cooking/1")
        ti.size = 1
        tf.addfile(ti, io.BytesIO(b"x"))
    tar = tmp_path / "20news-bydate.tar.gz"
    tar.write_bytes(buf.getvalue())
    with pytest.raises(InputDataError, match="'rec.cooking' is not one of the 20 newsgroups"):
        registry_mod.convert_20newsgroups_bydate({"20news-bydate.tar.gz": tar}, tmp_path / "out")
    cache = tmp_path / "cache"
    with pytest.raises(InputDataError):
        fetch(fake_20ng(tar), cache)
    assert not (cache / "20newsgroups").exists()
    assert [p.name for p in cache.iterdir()] == ["downloads"]  # only the verified archive is kept


def test_jsonl_split_values_rename_the_split(tmp_path):
    p = write_lines(tmp_path / "d.jsonl", [
        json.dumps({"id": "a", "text": "x", "labels": [], "lewissplit": "TRAIN"}),
        json.dumps({"id": "b", "text": "y", "labels": [], "lewissplit": "TEST"}),
        json.dumps({"id": "c", "text": "z", "labels": [], "lewissplit": "NOT-USED"}),
    ])
    t, _ = read_all(read_jsonl(p, split_field="lewissplit", split_values={"TRAIN": "train", "TEST": "test"}))
    assert t.column("split").to_pylist() == ["train", "test", "NOT-USED"]  # unmapped values kept


def test_reuters_lewis_and_topics_protocols_select_by_the_raw_fields(tmp_path):
    """The two Li & Yamanishi protocols over the Reuters files, on hand-made records: Lewis keeps
    TRAIN stories unless TOPICS="BYPASS" and every TEST story; the TOPICS ModApte variant keeps
    the ModApte train / test stories with every topic (not only the 90 ApteMod ones)."""
    recs = [
        {"id": 1, "lewissplit": "TRAIN", "topics_attr": "YES", "split": "train", "labels": ["wheat"]},
        {"id": 2, "lewissplit": "TRAIN", "topics_attr": "BYPASS", "split": "unused", "labels": []},
        {"id": 3, "lewissplit": "TEST", "topics_attr": "NO", "split": "unused", "labels": []},
        {"id": 4, "lewissplit": "NOT-USED", "topics_attr": "YES", "split": "test", "labels": ["rare"]},
    ]
    d = tmp_path / "reuters21578"
    d.mkdir()
    from sparkhc.corpus.readers import write_jsonl_gz

    write_jsonl_gz([{**r, "title": f"t{r['id']}", "text": "b"} for r in recs], d / "docs.jsonl.gz")
    (d / "taxonomy_topics.tsv").write_text("ROOT\tgrain\ngrain\twheat\nROOT\trare\n", encoding="utf-8")
    lewis = get_corpus("reuters21578_lewis")
    assert lewis.corpus_dir(tmp_path) == d  # the staged reuters21578 folder
    t, rep = read_all(lewis.read(tmp_path))
    assert t.column("doc_id").to_pylist() == ["1", "3"] and t.column("split").to_pylist() == ["train", "test"]
    assert rep.excluded == 2
    t, _ = read_all(get_corpus("reuters21578_topics").read(tmp_path))
    assert t.column("doc_id").to_pylist() == ["1", "4"] and t.column("labels").to_pylist() == [["wheat"], ["rare"]]


def test_reuters_lewis_counts_on_the_staged_copy():
    """The paper's Table 14 sizes (13,625 / 6,188) and the ModApte TOPICS="YES" split (9,603 / 3,299)."""
    d = corpus_dir("reuters21578")
    for name in ("reuters21578_lewis", "reuters21578_topics"):
        info = get_corpus(name)
        t, _ = read_all(info.read(d.parent))
        splits = t.column("split").to_pylist()
        assert tuple((s, splits.count(s)) for s in ("train", "test")) == info.split_counts
