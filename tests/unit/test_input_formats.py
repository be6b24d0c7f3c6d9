"""The format registry of the raw-document readers (issue 30, point 4): the built-in formats in their
detection order, and a new format found as one module of ``sparkhc/corpus/formats/`` (the worked
example of docs/architecture.md; its Spark side: tests/spark/test_input_format_example.py)."""

from __future__ import annotations

import sys

import pytest

from sparkhc.corpus import formats, readers
from sparkhc.errors import InputDataError
from tests.spark.test_input_format_example import doc_example


def test_builtin_formats_in_detection_order():
    assert [f.name for f in formats.all_formats()] == ["parquet", "jsonl", "labeldirs", "lyrl2004"]
    assert [f.name for f in formats.file_formats()] == ["parquet", "jsonl"]
    assert formats.folder_format() is formats.get("labeldirs")
    assert formats.get("jsonl").suffixes == readers.JSONL_SUFFIXES
    # the message read_any always gave
    assert str(formats.unknown_input("x.txt")) == (
        "x.txt: unknown input format; expected .parquet, .jsonl(.gz) or a directory (one sub-directory per "
        "label); LYRL2004 token files are read with read_lyrl2004 and a qrels file")
    with pytest.raises(ValueError, match="unknown input format 'nope'"):
        formats.get("nope")


def test_a_module_in_the_package_is_a_format(tmp_path, monkeypatch):
    """One module with a FORMAT in the package: registered when the package looks (as on import)."""
    (tmp_path / "tabbed.py").write_text(doc_example(), encoding="utf-8")
    monkeypatch.setattr(formats, "__path__", [*formats.__path__, str(tmp_path)])
    try:
        formats._discover()
        fmt = formats.get("tabbed")
        assert type(fmt).__module__ == "sparkhc.corpus.formats.base" and fmt.unit == "line"
        docs = tmp_path / "docs.tab"
        docs.write_text("a\tx,y\tone two\n\nb\t\tthree\n", encoding="utf-8")
        with pytest.raises(InputDataError, match=r"docs\.tab, line 3 \(document 'b'\): no labels"):
            readers.to_table(readers.read_any(docs)[0])
        batches, report = readers.read_any(docs, require_labels=False)
        table = readers.to_table(batches)
        assert table.column("doc_id").to_pylist() == ["a", "b"]
        assert table.column("labels").to_pylist() == [["x", "y"], []]
        assert (report.read, report.emitted, report.no_labels, report.files) == (2, 2, 1, [str(docs)])
    finally:
        formats.unregister("tabbed")
        sys.modules.pop("sparkhc.corpus.formats.tabbed", None)
    assert "tabbed" not in [f.name for f in formats.all_formats()]
