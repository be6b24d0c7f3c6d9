"""Issue 30, point 4: the record-check core's declared rules (:class:`sparkhc.corpus.records.RecordRules`).

featurize reads with the readers' rules (``FEATURIZE_RULES``), reclassify's scan of a partition with
``RECLASSIFY_RULES``. One fixture with every kind of bad record goes through the same JSON Lines reader
with both; the outcome of every line is pinned for both in one table, so the two rule sets differ
exactly where the table says (the declared differences) and nowhere else. ``tests/spark/
test_reclassify_bad_records.py`` runs reclassify's own scan and featurize's executors on this fixture.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sparkhc.corpus.formats.jsonl import read_jsonl
from sparkhc.corpus.formats.parquet import read_parquet
from sparkhc.corpus.records import FEATURIZE_RULES, RECLASSIFY_RULES, RecordRules, ScanReport

NOT_UTF8 = b'{"doc_id": "b", "text": "\xff"}'
CUT = '{"doc_id": "d", "text": "z'

#: one record a line (line numbers are 1-based)
LINES: list[bytes] = [
    b'{"doc_id": "a", "text": "x"}',                       # 1  good (then repeated on line 11)
    NOT_UTF8,                                              # 2
    b"[1, 2]",                                             # 3
    CUT.encode(),                                          # 4
    b'{"text": "no id"}',                                  # 5
    b'{"id": "d2", "doc_id": "dx", "text": "t"}',          # 6
    b'{"id": true, "text": "t"}',                          # 7
    b'{"id": "", "text": "t"}',                            # 8
    b'{"doc_id": "e", "text": 5}',                         # 9
    b'{"doc_id": "f", "text": "  "}',                      # 10
    b'{"doc_id": "a", "text": "again"}',                   # 11
    '\ufeff{"doc_id": "g", "text": "t"}'.encode(),         # 12
    b'{"doc_id": "h", "text": "\\ud800"}',                 # 13
    b'{"doc_id": "i", "text": "t", "labels": "x"}',        # 14
    b'{"doc_id": "j", "text": "fine"}',                    # 15 good
]
SAME = "same"


def expected(path: Path) -> dict[int, tuple[object, object]]:
    """line -> (featurize's outcome, reclassify's): None (read), (reason, detail), or SAME."""
    col = NOT_UTF8.index(b"\xff") + 1
    offset = len(LINES[0]) + 1 + col - 1
    bom = json.JSONDecodeError
    try:
        json.loads('\ufeff{"doc_id": "g"}')
    except bom as e:
        bom_msg = f"malformed JSON: {e.msg} at column {e.colno}"
    try:
        json.loads(CUT)
    except json.JSONDecodeError as e:
        cut_msg = f"malformed JSON: {e.msg} at column {e.colno}"
    rec = "; every document of a partition must have its own id"
    return {
        2: (("not UTF-8", f"not valid UTF-8: byte 0xff at byte offset {offset} (column {col} of the line)"),
            ("malformed JSON", f"malformed line: not valid UTF-8 (byte 0xff at column {col})")),
        3: (("not a JSON object", "expected a JSON object, got list"),
            ("malformed JSON", "malformed line: not a JSON object")),
        4: (("malformed JSON", cut_msg), SAME),
        5: (("missing id", "missing document id field 'id' or 'doc_id'"),
            ("missing id", "record with a null or missing doc_id (or id)")),
        6: (("conflicting ids", "fields 'id' = 'd2' and 'doc_id' = 'dx' disagree; give one id field (or equal values)"),
            ("conflicting ids", "fields 'doc_id' = 'dx' and 'id' = 'd2' disagree")),
        7: (("bad id", "field 'id' must be a non-empty string or an integer, got bool True"), None),
        8: (("bad id", "field 'id' must be a non-empty string or an integer, got str ''"), None),
        9: (("wrong type", "field 'text' must be a string, got int"), None),
        10: (("empty document", "document 'f' is empty (no text and no tokens)"), None),
        1: (None, ("duplicate id", f"duplicate doc_id 'a' (2 records: line 1, line 11){rec}")),
        11: (("duplicate id", f"duplicate doc id 'a': first seen at {path}, line 1, again at {path}, line 11"),
             ("duplicate id", f"duplicate doc_id 'a' (2 records: line 1, line 11){rec}")),
        12: (("malformed JSON", bom_msg), None),
        13: (("malformed JSON", "malformed JSON: a lone UTF-16 surrogate escape '\\\\ud800' at column 26 (no UTF-8 "
              "text can hold it)"), None),
        14: (("wrong type", "field 'labels' must be a list of non-empty strings, got str 'x'"), None),
    }


def write_fixture(path: Path) -> Path:
    path.write_bytes(b"\n".join(LINES) + b"\n")
    return path


def outcomes(path: Path, rules: RecordRules) -> dict[int, tuple[str, str]]:
    """line -> (reason, detail) of every record the core sets aside under ``rules``."""
    batches, report = read_jsonl(path, require_labels=False, on_invalid="quarantine", on_empty="quarantine",
                                 rules=rules)
    for _ in batches:
        pass
    assert isinstance(report, ScanReport) and report.finished
    assert report.read == len(LINES) == report.emitted + report.quarantined
    return {int(b.where.rsplit(" ", 1)[-1]): (b.reason, b.detail) for b in report.set_aside}


def test_the_rule_sets_differ_exactly_where_declared(tmp_path):
    path = write_fixture(tmp_path / "docs.jsonl")
    # keep_all only keeps the records: featurize's decisions are FEATURIZE_RULES' own
    featurize = outcomes(path, dataclasses.replace(FEATURIZE_RULES, keep_all=True))
    reclassify = outcomes(path, RECLASSIFY_RULES)
    table = expected(path)
    got = {}
    for no in sorted(set(featurize) | set(reclassify)):
        f, r = featurize.get(no), reclassify.get(no)
        got[no] = (f, SAME if r == f and f is not None else r)
    assert got == table


def test_keep_all_does_not_change_featurize_decisions(tmp_path):
    path = write_fixture(tmp_path / "docs.jsonl")
    reports = []
    for rules in (None, dataclasses.replace(FEATURIZE_RULES, keep_all=True)):
        batches, report = read_jsonl(path, require_labels=False, on_invalid="quarantine", on_empty="quarantine",
                                     rules=rules)
        rows = [r for b in batches for r in b.to_pylist()]
        reports.append((rows, report.read, report.emitted, dict(report.quarantine_reasons), report.quarantine_samples))
    assert reports[0] == reports[1]


def test_reclassify_rules_on_parquet_read_ids_only(tmp_path):
    """Parquet under reclassify's rules: only the id columns are read (no labels column needed, the
    schema is not checked), ids as strings ("" is one), every row of a repeated id set aside."""
    p = tmp_path / "p.parquet"
    pq.write_table(pa.table({"doc_id": ["a", None, "a", "b", None, "", "b"], "id": ["a", None, "x", None, "c", "", None],
                             "text": [1, 2, 3, 4, 5, 6, 7]}), p)
    q = tmp_path / "q.parquet"
    pq.write_table(pa.table({"text": ["t", "u"]}), q)
    batches, report = read_parquet([p, q], require_labels=False, on_invalid="quarantine", rules=RECLASSIFY_RULES)
    assert list(batches) == []
    assert isinstance(report, ScanReport)
    got = [(b.where.rsplit("/", 1)[-1], b.reason, b.detail, b.doc_id)
           for b in sorted(report.set_aside, key=lambda b: b.order)]
    missing = "record with a null or missing doc_id (or id)"
    dup = "duplicate doc_id 'b' (2 records: row 4, row 7); every document of a partition must have its own id"
    assert got == [("p.parquet, row 2", "missing id", missing, None),
                   ("p.parquet, row 3", "conflicting ids", "fields 'doc_id' = 'a' and 'id' = 'x' disagree", "a"),
                   ("p.parquet, row 4", "duplicate id", dup, "b"),
                   ("p.parquet, row 7", "duplicate id", dup, "b"),
                   ("q.parquet, row 1", "missing id", missing, None),
                   ("q.parquet, row 2", "missing id", missing, None)]
    assert report.emitted == 3 and report.read == 9 and report.finished


def test_keep_all_needs_a_scan_report():
    from sparkhc.corpus.records import ReadReport, RecordSink

    with pytest.raises(ValueError, match="ScanReport"):
        RecordSink(ReadReport(), 10, None, "error", "error", "quarantine", None, False, True, RECLASSIFY_RULES)


def test_reclassify_rules_raise_on_the_first_repeated_id_when_not_quarantining(tmp_path):
    from sparkhc.corpus.records import DuplicateIdError

    path = tmp_path / "d.jsonl"
    path.write_text('{"doc_id": "x"}\n{"id": "y"}\n{"id": "x"}\n')
    batches, _ = read_jsonl(path, require_labels=False, rules=RECLASSIFY_RULES)
    with pytest.raises(DuplicateIdError, match=r"d\.jsonl, line 1 \(document 'x'\): duplicate doc_id 'x' "
                                               r"\(2 records: line 1, line 3\)"):
        list(batches)
