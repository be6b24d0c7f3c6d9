"""docs/architecture.md, "Adding an input format": the worked example (a tab-separated format) is
registered exactly as the page shows it, and read through both adapters of the one record-check core:
the driver-side reader (``read_any``) and ``featurize --input`` on Spark's executors. Both give the
documents, messages and read report that the same documents give as JSON Lines."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from sparkhc.corpus import formats, readers
from sparkhc.errors import InputDataError
from tests.reliability import error_line, run_main, tiny_records, write_jsonl, write_taxonomy

ROOT = Path(__file__).resolve().parents[2]
MARK = "<!-- formats/tabbed.py -->"
FEAT_SET = ["--set", "featurize.min_df=1", "--set", "featurize.partitions=1"]


def doc_example() -> str:
    """The module the page shows, as it is."""
    after = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8").split(MARK, 1)[1]
    m = re.match(r"\s*```python\n(.*?)```", after, re.S)
    assert m is not None, f"no python block after {MARK} in docs/architecture.md"
    return m.group(1)


@pytest.fixture(scope="module")
def tabbed(tmp_path_factory):
    from pyspark import cloudpickle

    path = tmp_path_factory.mktemp("format") / "tabbed_example.py"
    path.write_text(doc_example(), encoding="utf-8")
    spec = importlib.util.spec_from_file_location("tabbed_example", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    # a module of sparkhc/corpus/formats/ is imported on the executors; this copy travels by value
    cloudpickle.register_pickle_by_value(mod)
    formats.register(mod.FORMAT)  # what the package does with every module that has a FORMAT
    try:
        yield mod
    finally:
        formats.unregister("tabbed")
        cloudpickle.unregister_pickle_by_value(mod)
        del sys.modules[spec.name]


def records(n: int = 8) -> list[dict]:
    return [{k: v for k, v in r.items() if k != "split"} for r in tiny_records(n)]


def tab_line(r: dict) -> str:
    return f"{r['id']}\t{','.join(r['labels'])}\t{r['text']}"


def write_tab(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def test_the_example_is_registered_and_found_by_suffix(tabbed, tmp_path):
    assert formats.get("tabbed") is tabbed.FORMAT
    assert [f.name for f in formats.file_formats()] == ["parquet", "jsonl", "tabbed"]
    with pytest.raises(InputDataError, match=r"expected \.parquet, \.jsonl\(\.gz\), \.tab\(\.gz\) or a directory"):
        readers.read_any(write_tab(tmp_path / "x.txt", ["a\tb\tc"]))


def test_driver_reader_gives_what_json_lines_give(tabbed, tmp_path):
    recs = records()
    tab = write_tab(tmp_path / "docs.tab", [tab_line(r) for r in recs])
    jsonl = write_jsonl(tmp_path / "docs.jsonl", recs)
    got, rep = readers.read_any(tab)
    table = readers.to_table(got)
    want, jrep = readers.read_any(jsonl)
    assert table.equals(readers.to_table(want))
    assert (rep.read, rep.emitted, rep.quarantined) == (jrep.read, jrep.emitted, jrep.quarantined) == (8, 8, 0)
    # a folder of such files, as for JSON Lines
    folder = tmp_path / "folder"
    folder.mkdir()
    write_tab(folder / "a.tab", [tab_line(r) for r in recs[:3]])
    write_tab(folder / "b.tab", [tab_line(r) for r in recs[3:]])
    assert readers.to_table(readers.read_any(folder)[0]).equals(table)


def bad_lines(recs: list[dict]) -> list[str]:
    """Line 3 repeats the id of line 1, line 5 has two fields."""
    lines = [tab_line(r) for r in recs]
    lines[2] = tab_line({**recs[2], "id": recs[0]["id"]})
    lines[4] = "only\ttwo"
    return lines


def test_core_checks_and_messages_on_the_driver(tabbed, tmp_path):
    tab = write_tab(tmp_path / "bad.tab", bad_lines(records()))
    with pytest.raises(readers.DuplicateIdError, match=r"bad\.tab, line 3 \(document 'd0000'\): duplicate doc id "
                       r"'d0000': first seen at .*bad\.tab, line 1, again at .*bad\.tab, line 3"):
        readers.to_table(readers.read_any(tab)[0])
    batches, rep = readers.read_any(tab, on_invalid="quarantine")
    assert readers.to_table(batches).num_rows == 6
    assert (rep.read, rep.emitted, rep.quarantined) == (8, 6, 2)
    assert dict(rep.quarantine_reasons) == {"duplicate id": 1, "malformed line": 1}


def featurize(tab_or_jsonl: Path, tax: Path, out: Path, *extra: str) -> list[str]:
    return ["featurize", "--input", str(tab_or_jsonl), "--taxonomy", str(tax), "--out", str(out), *FEAT_SET, *extra]


def test_featurize_on_the_executors_reads_it_as_the_driver_does(spark, tabbed, tmp_path, capsys):
    from sparkhc.cli import run

    tax = write_taxonomy(tmp_path / "taxonomy.tsv")
    recs = records()
    tab = write_tab(tmp_path / "docs.tab", [tab_line(r) for r in recs])
    jsonl = write_jsonl(tmp_path / "docs.jsonl", recs)
    assert run(featurize(tab, tax, tmp_path / "f_tab")) == 0
    assert run(featurize(jsonl, tax, tmp_path / "f_jsonl")) == 0
    a = pq.read_table(tmp_path / "f_tab" / "features").sort_by("doc_id")
    b = pq.read_table(tmp_path / "f_jsonl" / "features").sort_by("doc_id")
    assert a.num_rows == 8 and a.equals(b)
    # a bad record: the driver-side reader's message, named by file and line
    bad = write_tab(tmp_path / "bad.tab", bad_lines(recs))
    with pytest.raises(readers.DuplicateIdError) as driver:
        readers.to_table(readers.read_any(bad)[0])
    code, _, err = run_main(featurize(bad, tax, tmp_path / "f_bad"), capsys)
    assert code == 2 and error_line(err) == str(driver.value)
    # quarantined: the same counts and samples as the driver-side reader
    assert run(featurize(bad, tax, tmp_path / "f_q", "--on-invalid", "quarantine")) == 0
    rep = json.loads((tmp_path / "f_q" / "corpus.json").read_text())["read_report"]
    batches, want = readers.read_any(bad, on_invalid="quarantine")
    readers.to_table(batches)
    assert {k: rep[k] for k in ("read", "emitted", "quarantined", "quarantine_reasons", "quarantine_samples")} == {
        "read": want.read, "emitted": want.emitted, "quarantined": want.quarantined,
        "quarantine_reasons": dict(want.quarantine_reasons),
        "quarantine_samples": [list(s) for s in want.quarantine_samples]}
