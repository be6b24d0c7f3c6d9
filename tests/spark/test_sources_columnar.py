"""The columnar reading of JSON Lines batches on the executors (:func:`sparkhc.corpus.readers.jsonl_clean_batch`
in :func:`sparkhc.spark.sources.parse_partition`) against the line-by-line reference path (``jsonl_object``,
``_jsonl_record``, ``_Sink.add``): the same output rows byte for byte, the same task report, and every batch
with a line the two parsers might read differently (or a record that is not clean) left to the reference
path, so errors and quarantine counts stay the reference's. Also the numpy bags of words of pre-tokenized
documents (:func:`sparkhc.spark.featurize.bag_batch`) against ``Counter`` per document."""

from __future__ import annotations

import json
import random
from collections import Counter
from typing import Any

import pyarrow as pa
import pytest

from sparkhc.corpus import readers
from sparkhc.errors import InputDataError
from sparkhc.spark import sources
from sparkhc.spark.featurize import _tokens_of, bag_batch
from sparkhc.spark.sources import JsonlOptions, read_jsonl_tokens
from sparkhc.taxonomy import Taxonomy
from sparkhc.text.spec import FeatureSpec

SPEC = FeatureSpec(fit_on=None)
PATH = "file:/data/docs.jsonl"


class _Bc:
    def __init__(self, value: Any) -> None:
        self.value = value


def _line(rec: Any) -> bytes:
    if isinstance(rec, bytes):
        return rec
    if isinstance(rec, str):
        return rec.encode("utf-8")
    return json.dumps(rec, ensure_ascii=False).encode("utf-8")


def _batches(lines: list[bytes], size: int, spread: bool) -> list[pa.RecordBatch]:
    out = []
    for i in range(0, len(lines), size):
        chunk = lines[i:i + size]
        cols = [pa.array(chunk, pa.binary()), pa.array([PATH] * len(chunk)), pa.array([0] * len(chunk), pa.int64())]
        names = ["v", "p", "b"]
        if spread:
            cols.append(pa.array(range(i, i + len(chunk)), pa.int64()))
            names.append(sources.SCAN_ID)
        out.append(pa.RecordBatch.from_arrays(cols, names=names))
    return out


def _parse(lines: list[bytes], opts: JsonlOptions, columnar: bool, monkeypatch: pytest.MonkeyPatch,
           size: int = 4, spread: bool = False) -> tuple[pa.Table, dict[str, Any], list[bool]]:
    """parse_partition over ``lines`` with the columnar reading on or off: (output rows, task report,
    per batch whether it was read as columns)."""
    used: list[bool] = []
    clean = readers.jsonl_clean_batch

    def spy(*a: Any, **k: Any) -> Any:
        res = clean(*a, **k)
        used.append(res is not None)
        return res

    monkeypatch.setattr(readers, "jsonl_clean_batch", spy)
    init = sources._JsonlRecords.__init__

    def patched(self: Any, *a: Any, **k: Any) -> None:
        init(self, *a, **k)
        self.columnar_ok = self.columnar_ok and columnar

    monkeypatch.setattr(sources._JsonlRecords, "__init__", patched)
    try:
        out = list(sources.parse_partition(iter(_batches(lines, size, spread)), _Bc(opts), _Bc(SPEC),
                                           _Bc(({PATH: 0}, ["docs.jsonl"])), None))
    finally:
        monkeypatch.undo()
    report = json.loads(out[-1].column(sources.REPORT)[0].as_py())
    return pa.Table.from_batches(out[:-1], schema=out[-1].schema), report, used


def _same(lines: list[bytes], opts: JsonlOptions, monkeypatch: pytest.MonkeyPatch, **kw: Any) -> list[bool]:
    got, rep, used = _parse(lines, opts, True, monkeypatch, **kw)
    want, ref, unused = _parse(lines, opts, False, monkeypatch, **kw)
    assert not any(unused)
    assert got.equals(want)
    assert rep == ref
    return used


TAX = Taxonomy.from_edges([("ROOT", "sport"), ("sport", "tennis"), ("sport", "golf"), ("ROOT", "news")],
                          source="<test>")


def _text_records() -> list[Any]:
    return [
        {"id": "a1", "title": "Café au lait", "text": "line one\nline \"two\"\tend", "labels": ["tennis"],
         "split": "train", "fold": 3},
        {"id": "a2", "title": "", "text": "naïve résumé 😀 \u00e9", "labels": ["tennis", "sport"], "split": "test",
         "extra": {"nested": [1, {"x": None}], "n": 1.5e3}},
        '{"id": "a3", "title": null, "text": "escaped \\u00e9 \\/ \\\\ \\" \\n", "labels": [], "split": "train"}',
        {"id": "a4", "text": "   ", "title": "  ", "labels": ["news"], "fold": -2147483647},
        {"doc_id": "a5", "id": "a5", "text": "both ids agree", "labels": ["golf"]},
        {"id": " padded ", "text": "ids are kept as given", "labels": ["golf", "news"], "split": None},
        {"id": "\u00e9t\u00e9", "text": "a non-ASCII id", "labels": ["news"]},
        "",
        "  \t",
        {"id": "a8", "title": "only a title", "labels": ["sport"], "tokens": None},
    ]


def _token_records(n: int) -> list[Any]:
    rng = random.Random(7)
    vocab = ["The", "the", "THE", "game", "Game", "x1", "1984", "u.s.", "wörld", "straße", "of", "and", ""]
    return [{"id": i, "labels": rng.sample(["tennis", "golf", "news"], rng.randint(1, 2)),
             "tokens": [rng.choice(vocab) for _ in range(rng.randint(0, 9))]} for i in range(n)]


@pytest.mark.parametrize("spread", [False, True])
def test_clean_text_batches_equal_the_line_by_line_path(monkeypatch, spread):
    lines = [_line(r) for r in _text_records()]
    opts = JsonlOptions(text_fields=("title", "text"), taxonomy=TAX, on_empty="keep")
    used = _same(lines, opts, monkeypatch, size=len(lines), spread=spread)
    assert used == [True]  # the whole file in one batch, read as columns


def test_clean_token_batches_equal_the_line_by_line_path(monkeypatch):
    lines = [_line(r) for r in _token_records(200)]
    folds = readers.FoldTable({str(i): i % 5 for i in range(200)})
    for opts in (JsonlOptions(on_empty="keep", collect_labels=True),
                 JsonlOptions(on_empty="keep", folds=folds, taxonomy=TAX, split_field=None),
                 JsonlOptions(on_empty="keep", allowed_labels={"tennis", "golf", "news"},
                              split_values={"train": "TRAIN"})):
        used = _same(lines, opts, monkeypatch, size=64)
        assert all(used)


# lines that pyarrow's JSON reader and json.loads might read differently, and records that are not clean
UNCLEAN = [
    b'{"id":"u","id":"v","labels":["news"],"text":"x"}',  # a repeated key: json.loads keeps the last
    b'{"id":"u","labels":["news"],"text":"x"} {"id":"w","labels":["news"],"text":"y"}',  # two objects
    b'{"id":"u","labels":["news"],"text":"x"}{"id":"w","labels":["news"],"text":"y"}',
    b'{"id":"u","labels":["news"],"text":"x"} trailing',
    b'\xef\xbb\xbf{"id":"u","labels":["news"],"text":"x"}',  # a byte order mark (not the file's first line)
    b'{"id":"u","labels":["news"],"text":"caf\xe9"}',  # not UTF-8
    b'{"id":"u","labels":["news"],"text":"\\ud800"}',  # a lone surrogate (the reference reports it malformed)
    b'{"id":"u","labels":["news"],"text":"\\ud83d\\ude00"}',  # a surrogate pair (screened all the same)
    b'{"id":"u","labels":["news"],"text":"a\x01b"}',  # a control character
    b'{"id":"u","labels":["news"],"text":"x","n":' + b"[" * 600 + b"]" * 600 + b"}",  # deep nesting
    b'{"id":"u","labels":["news"],"text":"x","n":NaN}',  # NaN in another field: both read it (clean)
    b'{"id":5.0,"labels":["news"],"text":"x"}',  # a float id
    b'{"id":true,"labels":["news"],"text":"x"}',
    b'{"id":99999999999999999999,"labels":["news"],"text":"x"}',  # beyond int64: json.loads reads it
    b'{"id":"   ","labels":["news"],"text":"x"}',
    b'{"id":"\\u3000","labels":["news"],"text":"x"}',  # blank for str.strip()
    b'{"labels":["news"],"text":"x"}',
    b'{"id":"u","doc_id":"v","labels":["news"],"text":"x"}',
    b'{"id":"u","labels":["news", "news"],"text":"x"}',  # a repeated label
    b'{"id":"u","labels":["news", null],"text":"x"}',
    b'{"id":"u","labels":["news", ""],"text":"x"}',
    b'{"id":"u","labels":["cricket"],"text":"x"}',  # not in the taxonomy
    b'{"id":"u","labels":"news","text":"x"}',
    b'{"id":"u","text":"x"}',  # no labels
    b'{"id":"u","labels":["news"],"text":5}',
    b'{"id":"u","labels":["news"],"text":"\\u2003"}',  # an empty document (str.strip)
    b'{"id":"u","labels":["news"],"tokens":["a", null]}',
    b'{"id":"u","labels":["news"],"tokens":["a", 1]}',
    b'{"id":"u","labels":["news"],"text":"x","split":3}',
    b'{"id":"u","labels":["news"],"text":"x","fold":2147483648}',
    b'{"id":"u","labels":["news"],"text":"x","fold":"1"}',
    b'{"id":"u","labels":["news"],"text":"x","fold":1.0}',
    b'{"id":"u","labels":["news"],"text":"x","fold":false}',
    b'[1, 2]',
    b'"a string"',
    b'{}',
    b'\x0c',  # blank for bytes.strip(): skipped by both
    b'{"id":"u","labels":["news"],"text":"x"}\r',
    b'{"id":"2020-01-01","labels":["news"],"text":"x"}',
    b'{"id":"a1","labels":["news"],"text":"a repeated id"}',
]
CLEAN_TOO = {b'{"id":"u","labels":["news"],"text":"x","n":NaN}', b'\x0c', b'{"id":"u","labels":["news"],"text":"x"}\r', b'{"id":"2020-01-01","labels":["news"],"text":"x"}',
             b'{"id":"a1","labels":["news"],"text":"a repeated id"}'}


def _file_with(line: bytes) -> list[bytes]:
    lines = [_line({"id": f"a{i}", "text": f"document {i}", "labels": ["tennis"], "split": "train", "fold": i})
             for i in range(12)]
    lines.insert(6, line)
    return lines


@pytest.mark.parametrize("k", range(len(UNCLEAN)))
@pytest.mark.parametrize("on_invalid", ["quarantine", "error"])
def test_unclean_lines_leave_their_batch_to_the_reference_path(monkeypatch, k, on_invalid):
    line = UNCLEAN[k]
    lines = _file_with(line)
    opts = JsonlOptions(taxonomy=TAX, on_invalid=on_invalid, on_empty="quarantine" if on_invalid == "quarantine"
                        else "error", unknown_labels=on_invalid)
    def outcome(columnar: bool) -> Any:
        try:
            return _parse(lines, opts, columnar, monkeypatch, size=4)
        except Exception as e:  # the reference path's own failures (a lone surrogate: not encodable)
            return type(e), str(e)

    got, want = outcome(True), outcome(False)
    if len(want) == 2:
        assert got == want
        return
    assert got[0].equals(want[0])
    assert got[1] == want[1]
    # the batch of the line (lines 4-7) is read line by line, the others as columns
    assert got[2] == [True, line in CLEAN_TOO, True, True]


def test_error_message_through_spark_is_the_reference_one(spark, tmp_path):
    path = tmp_path / "docs.jsonl"
    path.write_bytes(b"\n".join(_file_with(b'{"id":"u","labels":["news", null],"text":"x"}')) + b"\n")
    with pytest.raises(InputDataError) as e:
        readers.to_table(readers.read_jsonl(path, taxonomy=TAX)[0])
    with pytest.raises(InputDataError) as f:
        read_jsonl_tokens(spark, [str(path)], SPEC, JsonlOptions(taxonomy=TAX))
    assert str(f.value) == str(e.value)
    assert "line 7" in str(f.value)


def test_token_corpus_through_spark_equals_the_driver_reader(spark, tmp_path):
    path = tmp_path / "docs.jsonl"
    recs = _token_records(3000) + [{"id": "t1", "text": "raw text beside tokens", "labels": ["news"]}]
    path.write_bytes(b"\n".join(_line(r) for r in recs) + b"\n")
    batches, rep = readers.read_jsonl(path, on_empty="keep")
    table = readers.to_table(batches)
    tc = read_jsonl_tokens(spark, [str(path)], SPEC, JsonlOptions(on_empty="keep"))
    try:
        got = {r["doc_id"]: (list(zip(r["terms"], r["term_counts"], strict=True)), r["labels"])
               for r in tc.tokens.collect()}
        tok = SPEC.tokenizer
        want = {d: (list(Counter(tok.tokenize_document(t, k)).items()), lab) for d, t, k, lab in
                zip(*(table.column(c).to_pylist() for c in ("doc_id", "text", "tokens", "labels")), strict=True)}
        assert got == want
        assert tc.report.to_dict() == rep.to_dict()
    finally:
        tc.release()


@pytest.mark.parametrize("params", [{}, {"stop_words": True}, {"token_pattern": r"\w+"}])
def test_bags_of_token_lists_equal_a_counter_per_document(params):
    spec = FeatureSpec.from_params(params)
    rng = random.Random(3)
    vocab = ["The", "the", "THE", "a", "Ab", "ab", "x1", "", "wörld", "Wörld", "İstanbul", "straße", "STRASSE",
             "u.s.", "hello", "and", "of", None]
    for _ in range(40):
        n = rng.randint(1, 40)
        toks = [[rng.choice(vocab) for _ in range(rng.randint(0, 12))] for _ in range(n)]
        b = pa.RecordBatch.from_arrays(
            [pa.array([str(i) for i in range(n)]), pa.nulls(n, pa.string()), pa.array(toks, pa.list_(pa.string())),
             pa.array([[]] * n, pa.list_(pa.string())), pa.nulls(n, pa.string()), pa.nulls(n, pa.int32())],
            schema=readers.RAW_SCHEMA).slice(rng.randint(0, n // 3))
        bags = [Counter(t) for t in _tokens_of(b, spec)]
        out = bag_batch(b, spec)
        assert out.column("terms").to_pylist() == [list(c) for c in bags]
        assert out.column("term_counts").to_pylist() == [list(c.values()) for c in bags]


def test_columnar_reading_is_left_to_the_loop_with_protocol_callables(monkeypatch):
    lines = [_line(r) for r in _token_records(20)]
    opts = JsonlOptions(on_empty="keep", select=lambda obj: None)
    got, rep, used = _parse(lines, opts, True, monkeypatch)
    assert used == []  # not even tried: select sees the parsed object
    want, ref, _ = _parse(lines, opts, False, monkeypatch)
    assert got.equals(want) and rep == ref
