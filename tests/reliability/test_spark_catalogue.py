"""Bad-input catalogue through the CLI entry points (featurize, train, predict, evaluate) and the
taxonomy they load, plus determinism (issue 9 item 3) and atomicity (item 4) of the writes.

One tiny corpus is featurized, trained and predicted once per module through ``sparkhc.cli.run``
(the ``base`` fixture); every bad-input case copies what it needs and breaks one thing. CLI cases
run ``sparkhc.cli.main`` in process and check the exit status (2 = user error) and the one-line
message. The case ids (``FZ-*``, ``TAX-*``, ``TR-*``, ``PR-*``, ``EV-*``, ``DET-*``, ``AT-*``) are
the rows of docs/reliability.md.
"""

from __future__ import annotations

import gzip
import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sparkhc.cli import run
from tests.reliability import (
    TAXONOMY_TSV,
    VOCAB,
    error_line,
    leftovers,
    run_main,
    tiny_records,
    tree_snapshot,
    write_jsonl,
    write_taxonomy,
)

VOCAB_WORDS = [VOCAB[k] for k in sorted(VOCAB)]
TRAIN_SET = ["--set", "train.epochs=1", "--set", "train.shards=2"]
FEAT_SET = ["--set", "featurize.min_df=1", "--set", "featurize.partitions=2"]


@dataclass
class Base:
    root: Path
    taxonomy: Path
    docs: Path
    features: Path
    model: Path
    predictions: Path
    n_docs: int
    featurize_summary: dict


@pytest.fixture(scope="module")
def base(spark, tmp_path_factory) -> Base:
    """featurize (unknown labels dropped) -> train -> predict -> evaluate a 41-document corpus."""
    root = tmp_path_factory.mktemp("reliability")
    tax = write_taxonomy(root / "taxonomy.tsv")
    recs = tiny_records(40)
    recs[5]["labels"] = ["football", "cricket"]  # an unknown label, dropped and counted
    recs.append({"id": "n0", "text": "123 !!", "labels": ["tennis"], "split": "train"})  # text, no tokens
    docs = write_jsonl(root / "docs.jsonl", recs)
    feats, model, pred = root / "features", root / "model", root / "predictions"
    assert run(["featurize", "--input", str(docs), "--taxonomy", str(tax), "--out", str(feats),
                "--unknown-labels", "drop", *FEAT_SET]) == 0
    summary = json.loads((feats / "_SUMMARY.json").read_text())
    assert run(["train", "--features", str(feats), "--out", str(model), *TRAIN_SET]) == 0
    assert run(["predict", "--model", str(model), "--features", str(feats), "--out", str(pred)]) == 0
    assert run(["evaluate", "--predictions", str(pred)]) == 0
    return Base(root, tax, docs, feats, model, pred, len(recs), summary)


def copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def first_part(features: Path) -> Path:
    return sorted((features / "features").glob("part-*.parquet"))[0]


def rewrite_column(part: Path, name: str, values: list, type_: pa.DataType | None = None) -> None:
    t = pq.read_table(part)
    i = t.schema.get_field_index(name)
    field = t.schema.field(name) if type_ is None else pa.field(name, type_)
    t = t.set_column(i, field, pa.array(values, field.type))
    pq.write_table(t, part)


def expect_user_error(capsys, argv, pattern: str) -> str:
    code, _, err = run_main(argv, capsys)
    msg = error_line(err)
    assert code == 2, f"exit {code}: {err[-2000:]}"
    assert re.search(pattern, msg), msg
    return msg


# ======================================================================================= featurize
# (case id, lines of the bad JSONL file (None = the good records), pattern of the message).
# Line 3 is the bad one; the message must name the file and line, and the field and value.
def _good(i: int) -> dict:
    return tiny_records(3)[i]


FZ_CASES = [
    ("FZ-01-malformed-json", '{"id": "x", "text": "a b", "labels": ["tennis"]',
     r"bad\.jsonl, line 3: malformed JSON: Expecting ',' delimiter at column \d+"),
    ("FZ-02-not-an-object", "[1, 2]", r"bad\.jsonl, line 3: expected a JSON object, got list"),
    ("FZ-03-missing-id", {"text": "goal", "labels": ["football"]},
     r"bad\.jsonl, line 3: missing document id field 'id'"),
    ("FZ-04-id-wrong-type", {"id": True, "text": "goal", "labels": ["football"]},
     r"bad\.jsonl, line 3: field 'id' must be a non-empty string or an integer, got bool True"),
    ("FZ-05-id-empty", {"id": " ", "text": "goal", "labels": ["football"]},
     r"bad\.jsonl, line 3: field 'id' must be a non-empty string or an integer, got str ' '"),
    ("FZ-06-text-wrong-type", {"id": "x", "text": ["goal"], "labels": ["football"]},
     r"bad\.jsonl, line 3 \(document 'x'\): field 'text' must be a string, got list"),
    ("FZ-07-labels-not-a-list", {"id": "x", "text": "goal", "labels": "football"},
     r"bad\.jsonl, line 3 \(document 'x'\): field 'labels' must be a list of non-empty strings, got str 'football'"),
    ("FZ-08-label-null", {"id": "x", "text": "goal", "labels": ["football", None]},
     r"line 3 \(document 'x'\): field 'labels' must be a list of non-empty strings, got a list containing null None"),
    ("FZ-09-label-empty-string", {"id": "x", "text": "goal", "labels": [""]},
     r"line 3 \(document 'x'\): field 'labels' must be a list of non-empty strings, got a list containing str ''"),
    ("FZ-10-missing-labels", {"id": "x", "text": "goal"},
     r"bad\.jsonl, line 3 \(document 'x'\): missing labels field 'labels'"),
    ("FZ-11-tokens-wrong-type", {"id": "x", "tokens": ["goal", 7], "labels": ["football"]},
     r"line 3 \(document 'x'\): field 'tokens' must be a list of strings, got a list containing int 7"),
    ("FZ-12-split-wrong-type", {"id": "x", "text": "goal", "labels": ["football"], "split": 1},
     r"line 3 \(document 'x'\): field 'split' must be a string, got int"),
    ("FZ-13-fold-wrong-type", {"id": "x", "text": "goal", "labels": ["football"], "fold": "1"},
     r"line 3 \(document 'x'\): field 'fold' must be a 32-bit integer, got str '1'"),
    ("FZ-14-fold-overflow", {"id": "x", "text": "goal", "labels": ["football"], "fold": 2**40},
     r"line 3 \(document 'x'\): field 'fold' must be a 32-bit integer, got int 1099511627776"),
    ("FZ-15-non-utf8", b'{"id": "x", "text": "caf\xe9", "labels": ["tennis"]}',
     r"bad\.jsonl, line 3: not valid UTF-8: byte 0xe9 at byte offset \d+ \(column 25 of the line\)"),
    ("FZ-16-empty-text", {"id": "x", "text": "", "labels": ["tennis"]},
     r"bad\.jsonl, line 3: document 'x' is empty \(no text and no tokens\)"),
    ("FZ-17-whitespace-text", {"id": "x", "text": " \t ", "labels": ["tennis"]},
     r"line 3: document 'x' is empty \(no text and no tokens\)"),
    ("FZ-18-null-text-no-tokens", {"id": "x", "text": None, "tokens": [], "labels": ["tennis"]},
     r"line 3: document 'x' is empty \(no text and no tokens\)"),
    ("FZ-19-duplicate-id", {"id": "d0000", "text": "goal", "labels": ["football"]},
     r"line 3 \(document 'd0000'\): duplicate doc id 'd0000': first seen at .*bad\.jsonl, line 1, again at "
     r".*bad\.jsonl, line 3"),
    ("FZ-20-unknown-label", {"id": "x", "text": "goal", "labels": ["football", "cricket"]},
     r"bad\.jsonl, line 3: document 'x': label 'cricket' is not a node of the taxonomy .*taxonomy\.tsv; "
     r"pass unknown_labels='drop'"),
    ("FZ-21-root-as-label", {"id": "x", "text": "goal", "labels": ["ROOT"]},
     r"line 3: document 'x': label 'ROOT' is the taxonomy root, not a label"),
]


@pytest.mark.parametrize("case,bad,pattern", FZ_CASES, ids=[c[0] for c in FZ_CASES])
def test_featurize_bad_jsonl_record(case, bad, pattern, base, tmp_path, capsys):
    path = write_jsonl(tmp_path / "bad.jsonl", [_good(0), _good(1), bad])
    expect_user_error(capsys, ["featurize", "--input", path, "--taxonomy", base.taxonomy, "--out",
                               tmp_path / "out"], pattern)
    assert not (tmp_path / "out").exists() and leftovers(tmp_path) == []


def test_FZ_01b_malformed_json_column_points_into_the_line(base, tmp_path, capsys):
    bad = '{"id": "x", "text": "a b", "labels": ["tennis"]'  # 47 characters, the '}' is missing
    path = write_jsonl(tmp_path / "bad.jsonl", [_good(0), _good(1), bad])
    expect_user_error(capsys, ["featurize", "--input", path, "--taxonomy", base.taxonomy, "--out", tmp_path / "o"],
                      r"line 3: malformed JSON: Expecting ',' delimiter at column 48")


def test_FZ_22_truncated_gzip(base, tmp_path, capsys):
    data = gzip.compress(b"".join(json.dumps(r).encode() + b"\n" for r in tiny_records(200)))
    path = tmp_path / "docs.jsonl.gz"
    path.write_bytes(data[: len(data) // 2])
    expect_user_error(capsys, ["featurize", "--input", path, "--taxonomy", base.taxonomy, "--out", tmp_path / "o"],
                      r"docs\.jsonl\.gz: read error \(corrupt or truncated gzip data\?\) after line \d+")


def test_FZ_23_gz_suffix_without_gzip_data(base, tmp_path, capsys):
    path = write_jsonl(tmp_path / "docs.jsonl.gz", tiny_records(3))
    expect_user_error(capsys, ["featurize", "--input", path, "--taxonomy", base.taxonomy, "--out", tmp_path / "o"],
                      r"docs\.jsonl\.gz: has a \.gz suffix but is not gzip data")


def test_FZ_24_input_not_found(base, tmp_path, capsys):
    expect_user_error(capsys, ["featurize", "--input", tmp_path / "nope.jsonl", "--taxonomy", base.taxonomy,
                               "--out", tmp_path / "o"], r"nope\.jsonl: input not found")


def test_FZ_25_unknown_input_format(base, tmp_path, capsys):
    path = tmp_path / "docs.csv"
    path.write_text("id,text,labels\n")
    expect_user_error(capsys, ["featurize", "--input", path, "--taxonomy", base.taxonomy, "--out", tmp_path / "o"],
                      r"docs\.csv: unknown input format; expected \.parquet, \.jsonl\(\.gz\) or a directory")


RAW_PARQUET_CASES = [
    ("FZ-26-parquet-missing-labels-column", {"doc_id": ["a"], "text": ["goal"]},
     r"raw\.parquet: required column 'labels' is missing"),
    ("FZ-27-parquet-text-wrong-type", {"doc_id": ["a"], "text": [5], "labels": [["football"]]},
     r"raw\.parquet: column 'text' has type int64, expected string"),
    ("FZ-28-parquet-null-doc-id", {"doc_id": ["a", None], "text": ["goal", "pitch"], "labels": [["football"]] * 2},
     r"raw\.parquet, row 2: column 'doc_id' is null or empty"),
    ("FZ-29-parquet-duplicate-id", {"doc_id": ["a", "a"], "text": ["goal", "pitch"], "labels": [["football"]] * 2},
     r"raw\.parquet, row 2 \(document 'a'\): duplicate doc id 'a': first seen at .*raw\.parquet, row 1"),
    ("FZ-30-parquet-null-labels", {"doc_id": ["a"], "text": ["goal"], "labels": pa.array([None], pa.list_(pa.string()))},
     r"raw\.parquet, row 1 \(document 'a'\): column 'labels' is null"),
]


@pytest.mark.parametrize("case,columns,pattern", RAW_PARQUET_CASES, ids=[c[0] for c in RAW_PARQUET_CASES])
def test_featurize_bad_raw_parquet(case, columns, pattern, base, tmp_path, capsys):
    pq.write_table(pa.table(columns), tmp_path / "raw.parquet")
    expect_user_error(capsys, ["featurize", "--input", tmp_path / "raw.parquet", "--taxonomy", base.taxonomy,
                               "--out", tmp_path / "o"], pattern)


def test_FZ_31_input_without_taxonomy(base, tmp_path, capsys):
    expect_user_error(capsys, ["featurize", "--input", base.docs, "--out", tmp_path / "o"],
                      r"^--taxonomy \(or --class-spaces\) is required with --input$")


def test_FZ_32_unknown_corpus(base, tmp_path, capsys):
    expect_user_error(capsys, ["featurize", "--corpus", "20newsgroup", "--out", tmp_path / "o"],
                      r"unknown corpus '20newsgroup'; known corpora: .*20newsgroups")


def test_FZ_33_output_exists_without_overwrite(base, tmp_path, capsys):
    """Checked before the input is read or Spark starts, naming the flag (issue 31)."""
    out = tmp_path / "o"
    out.mkdir()
    (out / "keep").write_text("old")
    docs = write_jsonl(tmp_path / "docs.jsonl", tiny_records(4))
    expect_user_error(capsys, ["featurize", "--input", docs, "--taxonomy", base.taxonomy, "--out", out],
                      r"o already exists; pass --overwrite to replace it")
    assert (out / "keep").read_text() == "old"


def test_FZ_34_unknown_labels_dropped_counts_in_equal_counts_out(base):
    """--unknown-labels drop: the label is removed and counted, the document kept; records read =
    rows written (the text-only-digits document is kept with empty features and counted)."""
    corpus = json.loads((base.features / "corpus.json").read_text())["read_report"]
    assert corpus["read"] == corpus["emitted"] == base.n_docs == 41
    assert corpus["quarantined"] == 0 and corpus["labels_dropped"] == 1
    assert corpus["dropped_label_counts"] == {"cricket": 1} and corpus["dropped_label_samples"] == [["d0005", "cricket"]]
    s = base.featurize_summary
    assert s["n_documents"] == 41 == pq.read_table(base.features / "features").num_rows
    assert s["documents_without_tokens"] == 1 and s["empty_documents"] == 1
    row = [r for r in pq.read_table(base.features / "features").to_pylist() if r["doc_id"] == "d0005"][0]
    assert row["labels"] == ["football"]


def test_FZ_35_label_dirs_without_label_directories(base, tmp_path, capsys):
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "stray.txt").write_text("x")
    expect_user_error(capsys, ["featurize", "--input", tmp_path / "corpus", "--taxonomy", base.taxonomy,
                               "--out", tmp_path / "o"], r"corpus: no label or split directories found")


def test_FZ_36_huge_document_is_kept(base, tmp_path):
    """A 10 MB document (1.6 million words) featurizes in local mode without blowing memory: its row
    is kept with exact counts, and the driver's peak RSS grows by less than 40 times its size."""
    import resource

    rng = np.random.default_rng(0)
    words = [w for ws in VOCAB_WORDS for w in ws]
    picks = rng.integers(len(words), size=1_650_000)
    text = " ".join(words[i] for i in picks)
    assert len(text.encode()) >= 10_000_000
    recs = [*tiny_records(8), {"id": "huge", "text": text, "labels": ["physics"], "split": "train"}]
    docs = write_jsonl(tmp_path / "docs.jsonl", recs)
    peak0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    out = tmp_path / "f"
    assert run(["featurize", "--input", str(docs), "--taxonomy", str(base.taxonomy), "--out", str(out),
                "--set", "featurize.min_df=1", "--set", "featurize.max_df=1.0", "--set", "featurize.partitions=1"]) == 0
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - peak0
    rows = {r["doc_id"]: r for r in pq.read_table(out / "features").to_pylist()}
    assert len(rows) == 9 and rows["huge"]["labels"] == ["physics"]
    counts = dict(zip(rows["huge"]["indices"], rows["huge"]["counts"], strict=True))
    assert sum(counts.values()) == len(picks)  # every word counted
    print(f"\nFZ-36: {len(text.encode()) / 1e6:.1f} MB document, {len(counts)} distinct terms, driver peak RSS "
          f"+{grown / 1e6:.0f} MB")
    assert grown < 40 * len(text.encode())


# ======================================================================================= taxonomy
TAX_CASES = [
    ("TAX-01-cycle", "A\tB\nB\tC\nC\tA\n", r"t\.tsv: cycle: ([ABC]) -> [ABC] -> [ABC] -> \1 \(no root\)"),
    ("TAX-02-cycle-without-root", "A\tB\nB\tA\n", r"t\.tsv: cycle: (A -> B -> A|B -> A -> B) \(no root\)"),
    ("TAX-03-detached-cycle", "ROOT\tA\nX\tY\nY\tX\n", r"t\.tsv: cycle: .* \(2 node\(s\) not reachable from the root"),
    ("TAX-04-self-loop", "ROOT\tA\nA\tA\n", r"t\.tsv, line 2: cycle: node 'A' is its own parent"),
    # (before issue 56 a second parent was refused; a polyhierarchy is refused only when its tree of paths is
    # too large: 16 levels of two concepts, each a child of both above, have 2 x (2^16 - 1) = 131070 positions)
    ("TAX-05-too-many-positions", "ROOT\ta1\nROOT\tb1\n" + "".join(
        f"{p}{i}\t{c}{i + 1}\n" for i in range(1, 16) for p in "ab" for c in "ab"),
     r"t\.tsv: the polyhierarchy of 32 concepts has 131070 positions \(paths from the root\), above the limit of "
     r"100000; raise featurize\.max_positions \(--set featurize\.max_positions=N\)"),
    ("TAX-06-empty-file", "", r"t\.tsv: the taxonomy is empty \(no parent/child edges\)"),
    ("TAX-07-comments-only", "# parent\tchild\n\n", r"t\.tsv: the taxonomy is empty"),
    ("TAX-08-three-columns", "ROOT\tsports\nsports\tfootball\textra\n",
     r"t\.tsv, line 2: expected 'parent<TAB>child', got 3 tab-separated field\(s\)"),
    ("TAX-09-non-utf8", b"ROOT\tsports\nsports\tf\xfctbol\n", r"t\.tsv: not UTF-8 at byte 20"),
    ("TAX-12-reserved-suffix", "ROOT\tsports\nsports\tsports/_self\n",
     r"t\.tsv, line 2: node name 'sports/_self' ends with the reserved suffix '/_self'"),
    ("TAX-13-rcv1-bad-line", "parent: None child: Root child-description: R\nparent Root child CCAT\n",
     r"t\.tsv, line 2: expected 'parent: X child: Y child-description: \.\.\.'"),
    ("TAX-14-empty-node-name", "ROOT\tsports\n\tfootball\n", r"t\.tsv, line 2: empty node name"),
]


@pytest.mark.parametrize("case,text,pattern", TAX_CASES, ids=[c[0] for c in TAX_CASES])
def test_featurize_bad_taxonomy(case, text, pattern, base, tmp_path, capsys):
    tax = write_taxonomy(tmp_path / "t.tsv", text)
    expect_user_error(capsys, ["featurize", "--input", base.docs, "--taxonomy", tax, "--out", tmp_path / "o"], pattern)


def test_TAX_15_taxonomy_file_not_found(base, tmp_path, capsys):
    expect_user_error(capsys, ["featurize", "--input", base.docs, "--taxonomy", tmp_path / "t.tsv", "--out",
                               tmp_path / "o"], r"t\.tsv: taxonomy file not found")


# ======================================================================================= train
def test_TR_01_features_folder_not_found(base, tmp_path, capsys):
    expect_user_error(capsys, ["train", "--features", tmp_path / "nope", "--out", tmp_path / "m"],
                      r"nope: features directory not found \(expected the out_dir of featurize\)")


def test_TR_02_not_a_features_folder(base, tmp_path, capsys):
    (tmp_path / "f").mkdir()
    expect_user_error(capsys, ["train", "--features", tmp_path / "f", "--out", tmp_path / "m"],
                      r"f: no features/ subdirectory; expected the out_dir of featurize")


def test_TR_03_column_of_wrong_type(base, tmp_path, capsys):
    f = copy(base.features, tmp_path / "f")
    part = first_part(f)
    t = pq.read_table(part)
    rewrite_column(part, "indices", [[float(x) for x in v] for v in t.column("indices").to_pylist()],
                   pa.list_(pa.float64()))
    expect_user_error(capsys, ["train", "--features", f, "--out", tmp_path / "m"],
                      r"part-00000\.parquet: column 'indices' has type array<double>, expected array<int>")


def test_TR_04_missing_column(base, tmp_path, capsys):
    f = copy(base.features, tmp_path / "f")
    part = first_part(f)
    pq.write_table(pq.read_table(part).drop_columns(["values"]), part)
    expect_user_error(capsys, ["train", "--features", f, "--out", tmp_path / "m"],
                      r"part-00000\.parquet: column 'values' is missing \(columns: .*\); expected the features layout")


def test_TR_05_part_file_not_parquet(base, tmp_path, capsys):
    f = copy(base.features, tmp_path / "f")
    first_part(f).write_bytes(b"this is not parquet")
    expect_user_error(capsys, ["train", "--features", f, "--out", tmp_path / "m"],
                      r"part-00000\.parquet: not a readable Parquet file")


def test_TR_06_feature_spec_missing(base, tmp_path, capsys):
    f = copy(base.features, tmp_path / "f")
    (f / "feature_spec.json").unlink()
    expect_user_error(capsys, ["train", "--features", f, "--out", tmp_path / "m"],
                      r"f: feature_spec\.json is missing; expected the out_dir of featurize")


def test_TR_07_feature_spec_truncated(base, tmp_path, capsys):
    f = copy(base.features, tmp_path / "f")
    spec = f / "feature_spec.json"
    spec.write_text(spec.read_text()[:50])
    expect_user_error(capsys, ["train", "--features", f, "--out", tmp_path / "m"],
                      r"feature_spec\.json: not valid JSON \(.*\); the feature spec is truncated or corrupt")


def test_TR_08_feature_spec_edited(base, tmp_path, capsys):
    f = copy(base.features, tmp_path / "f")
    spec = f / "feature_spec.json"
    content = json.loads(spec.read_text())
    content["params"]["min_df"] = 3
    spec.write_text(json.dumps(content))
    expect_user_error(capsys, ["train", "--features", f, "--out", tmp_path / "m"],
                      r"feature_spec\.json: fingerprint mismatch \(stored \w+, content \w+\); the file was edited")


def test_TR_09_taxonomy_missing_from_features(base, tmp_path, capsys):
    f = copy(base.features, tmp_path / "f")
    (f / "taxonomy.tsv").unlink()
    expect_user_error(capsys, ["train", "--features", f, "--out", tmp_path / "m"],
                      r"f: no taxonomy\.tsv in the features folder \(featurize with a taxonomy\)")


@pytest.fixture(scope="module")
def nan_runs(base, tmp_path_factory):
    """train --overwrite and predict --overwrite on features holding a NaN value, over copies of
    the good model and predictions: (exit status, stderr, before, after) of each."""
    import contextlib
    import io

    from sparkhc.cli import main

    root = tmp_path_factory.mktemp("nan")
    f = copy(base.features, root / "features")
    part = first_part(f)
    vals = pq.read_table(part).column("values").to_pylist()
    row = next(i for i, v in enumerate(vals) if v)
    vals[row][0] = float("nan")
    rewrite_column(part, "values", vals)
    model, pred = copy(base.model, root / "model"), copy(base.predictions, root / "pred")
    res = {}
    for verb, target, argv in (
        ("train", model, ["train", "--features", f, "--out", model, "--overwrite", "--set", "train.epochs=1",
                          "--set", "train.shards=1"]),
        ("predict", pred, ["predict", "--model", base.model, "--features", f, "--out", pred, "--overwrite",
                           "--split", "all"]),
    ):
        before = tree_snapshot(target)
        err = io.StringIO()
        with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as exc:
            main([str(a) for a in argv])
        res[verb] = (exc.value.code, err.getvalue(), before, tree_snapshot(target), root)
    return res


def test_TR_10_nan_feature_value(nan_runs):
    code, err, *_ = nan_runs["train"]
    assert code == 2 and re.search(r"features: row \d+: non-finite feature value nan", error_line(err)), err[-3000:]


def test_TR_11_inf_and_out_of_range_values_named_by_reader(base, tmp_path):
    """The features reader names the row and value (inf, an index >= n_features): the same check
    runs in every Spark task (TR-10 for how it reaches the CLI)."""
    from sparkhc.errors import SchemaError
    from sparkhc.features import read_features_local

    f = copy(base.features, tmp_path / "f")
    part = first_part(f)
    vals = pq.read_table(part).column("values").to_pylist()
    vals[1][0] = float("inf")
    rewrite_column(part, "values", vals)
    with pytest.raises(SchemaError, match=r"row 1: non-finite feature value inf"):
        read_features_local(f)
    g = copy(base.features, tmp_path / "g")
    part = first_part(g)
    idx = pq.read_table(part).column("indices").to_pylist()
    idx[2][-1] = 10**6
    rewrite_column(part, "indices", idx)
    with pytest.raises(SchemaError, match=r"row 2: feature index 1000000 outside \[0, \d+\)"):
        read_features_local(g)


def test_TR_12_unknown_model_name(base, tmp_path, capsys):
    expect_user_error(capsys, ["train", "--features", base.features, "--out", tmp_path / "m", "--model", "globl"],
                      r"unknown model 'globl'; known models: .*global")


def test_TR_13_model_output_exists(base, tmp_path, capsys):
    out = copy(base.model, tmp_path / "m")
    before = tree_snapshot(out)
    expect_user_error(capsys, ["train", "--features", base.features, "--out", out],
                      r"m already exists; pass --overwrite to replace it")
    assert tree_snapshot(out) == before


def test_TR_14_empty_training_selection(base, tmp_path, capsys):
    expect_user_error(capsys, ["train", "--features", base.features, "--out", tmp_path / "m", "--split", "trian",
                               *TRAIN_SET], r"no training documents: .*split 'trian'")


def test_TR_15_unknown_model_parameter(base, tmp_path, capsys):
    expect_user_error(capsys, ["train", "--features", base.features, "--out", tmp_path / "m", "--set",
                               "model.global.c=1.0"],
                      r"--set model\.global\.c=1\.0: unknown key 'c' in \[model\.global\] \(did you mean 'C'\?\); "
                      r"valid keys: C, R, ")


def test_TR_16_bad_model_parameter_value(base, tmp_path, capsys):
    expect_user_error(capsys, ["train", "--features", base.features, "--out", tmp_path / "m", "--set",
                               "model.global.C=-1"],
                      r"The 'C' parameter of GlobalPA must be a float in the range \(0, inf\), or 'auto' .*\. "
                      r"Got -1 instead\.")


def test_TR_17_warm_start_from_another_model_type(base, tmp_path, capsys):
    expect_user_error(capsys, ["train", "--features", base.features, "--out", tmp_path / "m", "--model", "flat",
                               "--warm-start", base.model],
                      r"--warm-start model .*model is a 'global' model, not 'flat'")


def test_TR_18_warm_start_model_not_found(base, tmp_path, capsys):
    expect_user_error(capsys, ["train", "--features", base.features, "--out", tmp_path / "m", "--warm-start",
                               tmp_path / "nope"], r"nope: model directory not found")


# ======================================================================================= predict
def _predict(base: Base, tmp_path: Path, model: Path, features: Path | None = None) -> list[str]:
    return ["predict", "--model", model, "--features", features or base.features, "--out", tmp_path / "p"]


MODEL_DIR_CASES = [
    ("PR-02-metadata-missing", lambda m: (m / "metadata.json").unlink(),
     r"m: not a model directory or truncated: metadata\.json is missing"),
    ("PR-03-state-missing", lambda m: (m / "state.npz").unlink(), r"m: truncated model directory: state\.npz is missing"),
    ("PR-04-state-truncated", lambda m: (m / "state.npz").write_bytes((m / "state.npz").read_bytes()[:200]),
     r"state\.npz: corrupt or truncated"),
    ("PR-05-metadata-corrupt", lambda m: (m / "metadata.json").write_text('{"format": "sparkhc-mo'),
     r"metadata\.json: corrupt metadata \("),
    ("PR-06-newer-format", lambda m: _edit_meta(m, format_version=99),
     r"metadata\.json: model format version 99 is newer than this sparkhc understands \(1\); upgrade sparkhc"),
    ("PR-07-not-a-model", lambda m: _edit_meta(m, format="something-else"),
     r"metadata\.json: not a sparkhc model \(format 'something-else'\)"),
    ("PR-08-taxonomy-file-edited", lambda m: (m / "taxonomy.tsv").write_text(TAXONOMY_TSV + "tennis\tclay\n"),
     r"m: taxonomy\.tsv does not match metadata\.json \(corrupt model directory\)"),
    ("PR-09-taxonomy-file-missing", lambda m: (m / "taxonomy.tsv").unlink(),
     r"m: truncated model directory: taxonomy\.tsv is missing"),
]


def _edit_meta(m: Path, **kv) -> None:
    meta = json.loads((m / "metadata.json").read_text())
    meta.update(kv)
    (m / "metadata.json").write_text(json.dumps(meta))


@pytest.mark.parametrize("case,breaker,pattern", MODEL_DIR_CASES, ids=[c[0] for c in MODEL_DIR_CASES])
def test_predict_with_broken_model_directory(case, breaker, pattern, base, tmp_path, capsys):
    m = copy(base.model, tmp_path / "m")
    breaker(m)
    expect_user_error(capsys, _predict(base, tmp_path, m), pattern)
    assert not (tmp_path / "p").exists()


def test_PR_01_model_not_found(base, tmp_path, capsys):
    expect_user_error(capsys, _predict(base, tmp_path, tmp_path / "nope"), r"nope: model directory not found")


def test_PR_10_model_of_another_taxonomy(base, tmp_path, capsys):
    f = copy(base.features, tmp_path / "f")
    (f / "taxonomy.tsv").write_text(TAXONOMY_TSV + "tennis\tclay\n")
    expect_user_error(capsys, _predict(base, tmp_path, base.model, f),
                      r"model: the model was trained on taxonomy \w+ but the data uses taxonomy \w+ \(.*taxonomy\.tsv\); "
                      r"retrain the model or use the matching taxonomy")


def test_PR_11_model_of_another_feature_spec(base, tmp_path, capsys):
    f = copy(base.features, tmp_path / "f")
    spec = f / "feature_spec.json"
    content = json.loads(spec.read_text())
    content["params"]["l2_normalize"] = False  # another (valid) spec: featurized differently
    del content["fingerprint"]
    spec.write_text(json.dumps(content))
    expect_user_error(capsys, _predict(base, tmp_path, base.model, f),
                      r"model: the model was trained on features \w+ but the data has features \w+; featurize with "
                      r"--like MODEL \(the model's feature_spec\.json\)")


def test_PR_12_predictions_exist_without_overwrite(base, tmp_path, capsys):
    out = copy(base.predictions, tmp_path / "p")
    before = tree_snapshot(out)
    expect_user_error(capsys, _predict(base, tmp_path, base.model), r"p already exists; pass --overwrite to replace it")
    assert tree_snapshot(out) == before


def test_PR_13_nan_feature_value(nan_runs):
    code, err, *_ = nan_runs["predict"]
    assert code == 2 and re.search(r"non-finite feature value nan", error_line(err)), err[-3000:]


def test_PR_14_empty_selection_is_a_user_error(base, tmp_path, capsys):
    """An empty selection is an error for predict (issue 16): exit 2 naming the splits and folds
    that are there; nothing is written."""
    expect_user_error(capsys, ["predict", "--model", base.model, "--features", base.features, "--out",
                               tmp_path / "p", "--split", "nosuch"],
                      r"selection \(split 'nosuch', fold None, exclude_fold None\) matches no document; the features "
                      r"hold 41 document\(s\) with split\(s\) 'test', 'train' and fold\(s\) none")
    assert not (tmp_path / "p").exists() and leftovers(tmp_path) == []


# ======================================================================================= evaluate
def test_EV_01_not_a_predictions_folder(base, tmp_path, capsys):
    (tmp_path / "p").mkdir()
    expect_user_error(capsys, ["evaluate", "--predictions", tmp_path / "p"],
                      r"p: not a predictions folder \(_MODEL\.json missing\)")


def test_EV_02_predictions_folder_not_found(base, tmp_path, capsys):
    expect_user_error(capsys, ["evaluate", "--predictions", tmp_path / "nope"],
                      r"nope: not a predictions folder \(_MODEL\.json missing\)")


def _predictions_with_labels(base: Base, tmp_path: Path, labels) -> Path:
    p = copy(base.predictions, tmp_path / "p")
    for part in sorted((p / "data").glob("part-*.parquet")):
        n = pq.read_metadata(part).num_rows
        rewrite_column(part, "labels", [labels] * n)
    for crc in (p / "data").glob(".*.crc"):
        crc.unlink()
    return p


def test_EV_03_predictions_without_gold_labels(base, tmp_path, capsys):
    p = _predictions_with_labels(base, tmp_path, None)
    expect_user_error(capsys, ["evaluate", "--predictions", p],
                      r"p: 10 prediction rows have no gold labels; cannot evaluate")
    assert (p / "metrics.json").read_bytes() == (base.predictions / "metrics.json").read_bytes()


def test_EV_04_predictions_of_unlabelled_documents(base, tmp_path, capsys):
    p = _predictions_with_labels(base, tmp_path, [])
    expect_user_error(capsys, ["evaluate", "--predictions", p],
                      r"p: none of the 10 prediction rows has gold labels; cannot evaluate")


def test_EV_05_no_prediction_rows(base, tmp_path, capsys):
    p = copy(base.predictions, tmp_path / "p")  # predict refuses an empty selection (PR-14): empty it by hand
    t = pq.read_table(p / "data")
    shutil.rmtree(p / "data")
    (p / "data").mkdir()
    pq.write_table(t.slice(0, 0), p / "data" / "part-00000.parquet")
    expect_user_error(capsys, ["evaluate", "--predictions", p], r"p: no prediction rows; nothing to evaluate")


def test_EV_06_features_of_another_taxonomy(base, tmp_path, capsys):
    f = copy(base.features, tmp_path / "f")
    (f / "taxonomy.tsv").write_text(TAXONOMY_TSV + "tennis\tclay\n")
    expect_user_error(capsys, ["evaluate", "--predictions", base.predictions, "--features", f, "--out",
                               tmp_path / "m.json"], r"predictions: predictions use taxonomy \w+, .*f has \w+")


def test_EV_07_metrics_out_in_a_missing_folder(base, tmp_path, capsys):
    code, _, err = run_main(["evaluate", "--predictions", base.predictions, "--out", tmp_path / "new" / "m.json"],
                            capsys)
    assert code == 0, err[-2000:]
    assert json.loads((tmp_path / "new" / "m.json").read_text())["metrics"]["n_docs"] == 10


def test_EV_08_corrupt_prediction_metadata(base, tmp_path, capsys):
    p = copy(base.predictions, tmp_path / "p")
    (p / "_MODEL.json").write_text('{"model_dir": "/x", "mod')
    expect_user_error(capsys, ["evaluate", "--predictions", p], r"_MODEL\.json: corrupt prediction metadata")


# ======================================================================================= determinism
@pytest.fixture(scope="module")
def second_run(base):
    """The same features, configuration and seed trained and predicted a second time."""
    model, pred = base.root / "model_again", base.root / "predictions_again"
    assert run(["train", "--features", str(base.features), "--out", str(model), *TRAIN_SET]) == 0
    assert run(["predict", "--model", str(model), "--features", str(base.features), "--out", str(pred)]) == 0
    return model, pred


TIMING_KEYS = ("seconds",)


def _without_timings(obj):
    if isinstance(obj, dict):
        return {k: _without_timings(v) for k, v in obj.items() if k not in TIMING_KEYS}
    if isinstance(obj, list):
        return [_without_timings(v) for v in obj]
    return obj


def test_DET_01_same_data_config_seed_gives_identical_state(base, second_run):
    model, _ = second_run
    for f in ("state.npz", "taxonomy.tsv", "feature_spec.json"):
        assert (model / f).read_bytes() == (base.model / f).read_bytes(), f


def test_DET_02_metadata_identical_except_timings(base, second_run):
    model, _ = second_run
    a = json.loads((base.model / "metadata.json").read_text())
    b = json.loads((model / "metadata.json").read_text())
    assert _without_timings(a) == _without_timings(b)


def test_DET_03_metadata_byte_identical(base, second_run):
    model, _ = second_run
    assert (model / "metadata.json").read_bytes() == (base.model / "metadata.json").read_bytes()


def test_DET_04_identical_predictions(base, second_run):
    _, pred = second_run
    a = pq.read_table(base.predictions / "data").sort_by("doc_id")
    b = pq.read_table(pred / "data").sort_by("doc_id")
    assert a.drop_columns(["model_version"]).equals(b.drop_columns(["model_version"]))
    assert a.column("model_version").to_pylist() == b.column("model_version").to_pylist()  # same weights

    def contents(p: Path) -> list[bytes]:  # Spark's part names hold a random job id; the bytes do not
        return [f.read_bytes() for f in sorted((p / "data").glob("part-*.parquet"))]

    assert contents(pred) == contents(base.predictions)
    ma = json.loads((base.predictions / "_MODEL.json").read_text())
    mb = json.loads((pred / "_MODEL.json").read_text())
    assert {k: v for k, v in ma.items() if k not in ("seconds", "model_dir")} == {
        k: v for k, v in mb.items() if k not in ("seconds", "model_dir")}


def test_DET_05_shard_count_changes_the_model(base, tmp_path):
    """Documented: the shards are the partitions of iterative parameter mixing, so another shard
    count mixes other shard-local models and gives another (equally valid) model."""
    model = tmp_path / "m3"
    assert run(["train", "--features", str(base.features), "--out", str(model), "--set", "train.epochs=1",
                "--set", "train.shards=3"]) == 0
    assert (model / "state.npz").read_bytes() != (base.model / "state.npz").read_bytes()
    a, b = np.load(base.model / "state.npz"), np.load(model / "state.npz")
    diffs = {k: float(np.max(np.abs(a[k] - b[k]))) for k in a.files if a[k].dtype.kind == "f" and a[k].size}
    scale = {k: float(np.max(np.abs(a[k]))) for k in diffs}
    print(f"\nDET-05 shards 2 vs 3: max |w2 - w3| {diffs}, max |w2| {scale}")
    assert max(diffs.values()) > 0


def test_DET_06_predict_partition_count_does_not_change_predictions(base, tmp_path):
    """Decoding is per document: predict.partitions changes the files, not the rows."""
    pred = tmp_path / "p"
    assert run(["predict", "--model", str(base.model), "--features", str(base.features), "--out", str(pred),
                "--set", "predict.partitions=3"]) == 0
    a = pq.read_table(base.predictions / "data").sort_by("doc_id")
    b = pq.read_table(pred / "data").sort_by("doc_id")
    assert a.equals(b)


# ======================================================================================= atomicity
def test_AT_03_failed_training_keeps_previous_model(nan_runs):
    code, _, before, after, root = nan_runs["train"]
    assert code != 0 and after == before
    assert leftovers(root) == []


def test_AT_04_failed_prediction_job_keeps_previous_predictions(nan_runs):
    code, _, before, after, root = nan_runs["predict"]
    assert code != 0 and after == before
    assert leftovers(root) == []


def test_AT_08_crash_after_the_prediction_files_keeps_previous_predictions(base, tmp_path, monkeypatch):
    """predict --overwrite dies after Spark wrote the new data/ (while writing _MODEL.json): the
    previous predictions are intact and the temporary folder is removed."""
    from sparkhc.spark import pipelines

    pred = copy(base.predictions, tmp_path / "p")
    before = tree_snapshot(pred)

    def crash(*a, **k):
        raise OSError("killed while writing _MODEL.json (simulated)")

    monkeypatch.setattr(pipelines, "json_text", crash)  # the _MODEL.json text, made after data/ is written
    with pytest.raises(OSError, match="simulated"):
        run(["predict", "--model", str(base.model), "--features", str(base.features), "--out", str(pred),
             "--overwrite"])
    assert tree_snapshot(pred) == before and leftovers(tmp_path) == []


def test_AT_09_crash_while_writing_metrics_keeps_previous_metrics(base, tmp_path, monkeypatch):
    """evaluate dies in the middle of writing metrics.json (disk full): the previous metrics.json
    is intact."""
    from tests.reliability import disk_full_during

    pred = copy(base.predictions, tmp_path / "p")
    before = (pred / "metrics.json").read_bytes()
    disk_full_during(monkeypatch, "/.metrics.json.tmp-")
    with pytest.raises(OSError, match="No space left"):
        run(["evaluate", "--predictions", str(pred)])
    assert (pred / "metrics.json").read_bytes() == before


# ======================================================================================= reclassify
def _day(coll: Path, day: str) -> Path:
    d = coll / f"ingest_date={day}"
    d.mkdir(parents=True)
    return d


def _raw(recs: list[dict]) -> list[dict]:
    return [{"doc_id": r["id"], "text": r["text"]} for r in recs]


@pytest.fixture(scope="module")
def reclassified(base):
    """One reclassify run over a collection with one bad input per partition (the failing batch
    is retried partition by partition): the run summary and the output folder."""
    from sparkhc.spark.reclassify import reclassify

    coll, out = base.root / "collection", base.root / "reclassified"
    good = _raw(tiny_records(6, seed=3, prefix="g"))
    write_jsonl(_day(coll, "2024-01-01") / "docs.jsonl", good)                                       # RC-05 ok
    write_jsonl(_day(coll, "2024-01-02") / "docs.jsonl", [good[0], '{"doc_id": "m1", "text": "goal', good[1]])
    write_jsonl(_day(coll, "2024-01-03") / "docs.jsonl", [good[0], {"text": "no id here"}])
    write_jsonl(_day(coll, "2024-01-04") / "docs.jsonl", [good[0], good[1], {**good[0], "text": "again"}])
    pq.write_table(pa.table({"doc_id": ["p1"], "text": [5]}), _day(coll, "2024-01-05") / "part-0.parquet")
    write_jsonl(_day(coll, "2024-01-06") / "docs.jsonl", [good[0], b'{"doc_id": "u1", "text": "caf\xe9 goal"}'])
    (_day(coll, "2024-01-07") / "docs.jsonl").write_bytes(b"")
    summary = reclassify(None, coll, out, model_dir=base.model)
    return summary, out


def _failure(summary: dict, day: str) -> str:
    return next((f["error"] for f in summary["failures"] if f["partition"] == day), "")


def _classified(out: Path, day: str) -> list[str]:
    from sparkhc.spark.reclassify import read_output

    t = read_output(out)
    return [d for d, p in zip(t.column("doc_id").to_pylist(), t.column("ingest_date").to_pylist(), strict=True)
            if p == day]


def test_RC_05_good_partition_every_document_classified(reclassified):
    summary, out = reclassified
    assert "2024-01-01" in summary["partitions"]["classified"]
    assert sorted(_classified(out, "2024-01-01")) == [f"g{i:04d}" for i in range(6)]


def test_RC_06_malformed_json_line_named(reclassified):
    summary, _ = reclassified
    assert "2024-01-02" in summary["partitions"]["failed"]
    assert re.search(r"docs\.jsonl.*malformed", _failure(summary, "2024-01-02")), _failure(summary, "2024-01-02")


def test_RC_06b_malformed_json_line_fails_the_partition_only(reclassified):
    """Observed today: not silent (the partition fails, nothing of it is published, the run exits
    1 and the other partitions are classified), only the message is unclear (RC-06)."""
    summary, out = reclassified
    assert "2024-01-02" in summary["partitions"]["failed"] and _classified(out, "2024-01-02") == []
    assert not (out / "ingest_date=2024-01-02").exists()


def test_RC_07_record_without_doc_id_named(reclassified):
    summary, _ = reclassified
    assert "2024-01-03" in summary["partitions"]["failed"]
    assert re.search(r"docs\.jsonl.*null or missing doc_id", _failure(summary, "2024-01-03")), _failure(summary, "2024-01-03")


def test_RC_08_duplicate_doc_id_in_a_partition(reclassified):
    summary, out = reclassified
    assert "2024-01-04" in summary["partitions"]["failed"], _classified(out, "2024-01-04")
    assert re.search(r"duplicate doc_id.*'g0000'", _failure(summary, "2024-01-04")), _failure(summary, "2024-01-04")


def test_RC_09_parquet_partition_with_wrong_column_type(reclassified):
    summary, out = reclassified
    assert "2024-01-05" in summary["partitions"]["failed"] and _classified(out, "2024-01-05") == []
    assert re.search(r"ingest_date=2024-01-05: column 'text' has type bigint, expected string",
                     _failure(summary, "2024-01-05")), _failure(summary, "2024-01-05")


def test_RC_10_non_utf8_line_named(reclassified):
    summary, out = reclassified
    assert "2024-01-06" in summary["partitions"]["failed"] and _classified(out, "2024-01-06") == []
    assert re.search(r"docs\.jsonl.*malformed", _failure(summary, "2024-01-06")), _failure(summary, "2024-01-06")


def test_RC_11_empty_partition_is_classified_with_zero_documents(reclassified):
    summary, out = reclassified
    assert "2024-01-07" in summary["partitions"]["classified"]
    marker = json.loads((out / "ingest_date=2024-01-07" / "_CLASSIFIED.json").read_text())
    assert marker["documents"] == 0


def test_RC_12_run_summary_accounts_for_every_partition(reclassified):
    """Partitions in = classified + failed (nothing skipped silently); the run exits 3 through
    the CLI when a partition failed."""
    summary, _ = reclassified
    p = summary["partitions"]
    assert p["found"] == 7 == len(p["classified"]) + len(p["failed"])
    assert sum(d["documents"] for d in summary["per_partition"]) == summary["documents"]


def test_RC_01_collection_not_found(base, tmp_path, capsys):
    expect_user_error(capsys, ["reclassify", "--input", tmp_path / "nope", "--out", tmp_path / "o", "--model",
                               base.model],
                      r"nope: input collection not found \(expected a directory of ingest_date=VALUE folders\)")


def test_RC_02_model_without_feature_spec(base, tmp_path, capsys):
    m = copy(base.model, tmp_path / "m")
    (m / "feature_spec.json").unlink()
    write_jsonl(_day(tmp_path / "c", "2024-01-01") / "d.jsonl", _raw(tiny_records(2)))
    expect_user_error(capsys, ["reclassify", "--input", tmp_path / "c", "--out", tmp_path / "o", "--model", m],
                      r"m: no feature_spec\.json; reclassification needs the model's feature spec")


def test_RC_03_unknown_partition_value(base, tmp_path, capsys):
    write_jsonl(_day(tmp_path / "c", "2024-01-01") / "d.jsonl", _raw(tiny_records(2)))
    expect_user_error(capsys, ["reclassify", "--input", tmp_path / "c", "--out", tmp_path / "o", "--model",
                               base.model, "--partitions", "2024-13-01"],
                      r"c: no partition ingest_date=2024-13-01 \(1 requested value\(s\) not found\)")


def test_RC_04_partition_without_input_files(base, tmp_path, capsys):
    (_day(tmp_path / "c", "2024-01-01") / "notes.txt").write_text("x")
    expect_user_error(capsys, ["reclassify", "--input", tmp_path / "c", "--out", tmp_path / "o", "--model",
                               base.model], r"ingest_date=2024-01-01: no input files; expected \*\.parquet or JSON Lines")


def test_CLI_08_predict_and_evaluate_say_what_they_do(base, tmp_path, capsys, caplog):
    """predict and evaluate log a line before each long step and one when done (they used to be
    silent for 20 to 40 s): the features and model read, the documents to decode, what was written."""
    import logging

    caplog.set_level(logging.INFO, logger="sparkhc")
    pred = tmp_path / "pred"
    spark_path = ["--set", "predict.execution=spark"]  # small inputs run in the process by default (issue 53)
    code, _, err = run_main(["predict", "--model", base.model, "--features", base.features, "--out", pred, *spark_path],
                            capsys)
    assert code == 0, err
    code, _, err = run_main(["evaluate", "--predictions", pred, *spark_path], capsys)
    assert code == 0, err
    lines = [r.getMessage() for r in caplog.records if r.name == "sparkhc.spark.pipelines"]
    n_test = sum(1 for r in tiny_records(40) if r["split"] == "test")
    version = json.loads((pred / "_MODEL.json").read_text())["model_version"]
    assert len(lines) == 6, lines
    assert lines[:2] == [f"predict: reading features {base.features} and model {base.model} (on Spark)",
                         "predict: decoding the documents (split 'test', fold None, exclude_fold None) with the "
                         f"global model {version} on Spark ..."]
    assert re.fullmatch(rf"predict: wrote {n_test} predictions to {re.escape(str(pred))} \(\d+\.\d s\)", lines[2])
    assert lines[3:5] == [f"evaluate: reading predictions {pred} (the global model {version}) against the features "
                          f"{base.features.resolve()}",
                          f"evaluate: aggregating the metric counts of {n_test} documents on Spark ..."]
    assert re.fullmatch(rf"evaluate: wrote {re.escape(str(pred / 'metrics.json'))} \(\d+\.\d s\)", lines[5])
