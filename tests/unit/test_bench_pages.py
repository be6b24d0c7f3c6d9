"""docs/benchmarks.md (current figures) and docs/archive/benchmarks-history.md (superseded ones):
the section writer of ``benchmarks/_common.py`` keeps working on the page, both pages are well
formed, and every section another file names can be found from the current page."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "benchmarks.md"
ARCHIVE = ROOT / "docs" / "archive" / "benchmarks-history.md"
START = re.compile(r"<!-- section:(\S+) -->")


def _common():
    spec = importlib.util.spec_from_file_location("bench_common_pages", ROOT / "benchmarks" / "_common.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _sections(text: str) -> dict[str, str]:
    """key -> the section's text, checking that every start marker has one end marker after it."""
    out: dict[str, str] = {}
    for m in START.finditer(text):
        key = m.group(1)
        assert key not in out, f"section {key!r} twice"
        end = f"<!-- /section:{key} -->"
        assert text.count(end) == 1 and text.index(end) > m.start(), f"section {key!r}: no single end marker after it"
        out[key] = text[m.start():text.index(end) + len(end)]
    assert len(re.findall(r"<!-- /section:", text)) == len(out), "an end marker without its start marker"
    return out


# --- the writer --------------------------------------------------------------------------------


def test_rerun_replaces_its_section_in_place(tmp_path: Path) -> None:
    common = _common()
    page = tmp_path / "benchmarks.md"
    common.write_section("a", "A (a)", "first", doc=page)
    common.write_section("b", "B (b)", "second", doc=page)
    common.write_section("a", "A (a)", "first, rerun", doc=page)
    text = page.read_text(encoding="utf-8")
    assert text.startswith(common.HEADER)
    secs = _sections(text)
    assert list(secs) == ["a", "b"]  # replaced where it stood, not moved to the end
    assert "first, rerun" in secs["a"] and "first\n" not in secs["a"] and "second" in secs["b"]


def test_new_key_is_appended_at_the_end(tmp_path: Path) -> None:
    common = _common()
    page = tmp_path / "benchmarks.md"
    page.write_text("# Benchmarks\n\nintro\n\n<!-- section:x -->\n## X\n\nx\n<!-- /section:x -->\n", encoding="utf-8")
    common.write_section("y", "Y (y)", "body y", doc=page)
    text = page.read_text(encoding="utf-8")
    assert text.startswith("# Benchmarks\n\nintro\n") and list(_sections(text)) == ["x", "y"]
    assert text.endswith("<!-- section:y -->\n## Y (y)\n\nbody y\n<!-- /section:y -->\n")


def test_half_a_section_is_refused(tmp_path: Path) -> None:
    common = _common()
    page = tmp_path / "benchmarks.md"
    before = "# B\n\n<!-- section:x -->\n## X\n\nno end marker\n\n<!-- section:y -->\n## Y\n\ny\n<!-- /section:y -->\n"
    page.write_text(before, encoding="utf-8")
    with pytest.raises(ValueError, match="only one of its markers"):
        common.write_section("x", "X", "new", doc=page)
    assert page.read_text(encoding="utf-8") == before


def test_the_writer_targets_the_current_page_not_the_archive() -> None:
    common = _common()
    assert common.DOC == PAGE and common.ARCHIVE == ARCHIVE and common.DOC != common.ARCHIVE


def test_archived_key_rerun_appends_to_the_current_page(tmp_path: Path) -> None:
    """A section moved to the archive, measured again: the new figures go to the current page;
    the archive keeps the old ones untouched."""
    common = _common()
    page, archive = tmp_path / "benchmarks.md", tmp_path / "archive" / "benchmarks-history.md"
    archive.parent.mkdir()
    old = "# Benchmarks: history\n\n<!-- section:f -->\n## F (f)\n\nold\n<!-- /section:f -->\n"
    archive.write_text(old, encoding="utf-8")
    page.write_text("# Benchmarks\n", encoding="utf-8")
    common.write_section("f", "F (f)", "new", doc=page)
    assert "new" in _sections(page.read_text(encoding="utf-8"))["f"]
    assert archive.read_text(encoding="utf-8") == old


# --- the pages as they are ---------------------------------------------------------------------


def test_both_pages_are_well_formed() -> None:
    current = _sections(PAGE.read_text(encoding="utf-8"))
    history = _sections(ARCHIVE.read_text(encoding="utf-8"))
    assert "summary-issue29" in current and "summary-throughput" in current
    assert history, "the archive holds the superseded sections"


def test_the_archive_says_what_it_is_and_is_newest_first() -> None:
    text = ARCHIVE.read_text(encoding="utf-8")
    first = text.split("\n\n")[1]
    assert first.startswith(">") and "superseded" in first.lower() and "for the record" in first
    dates = [m.group(1) for m in re.finditer(r"^Date: (20\d\d-\d\d-\d\d \d\d:\d\d)", text, re.M)]
    assert len(dates) > 10 and dates == sorted(dates, reverse=True)


#: names other files use to point into docs/benchmarks.md (README.md, docs/api.md,
#: sparkhc/epochs.py, sparkhc/conf/defaults.toml, experiments/murawaki.py, docs/results/...)
LINKED = [
    "summary-issue29", "smalljobs-20ng", "epoch-selection", "epoch-selection-nested", "mixing-shards-default",
    "rare-margins", "mdc", "Accuracy against the number of shards",
    "The default model re-derived on validation data", "peers-weighting",
]

#: files whose mentions of docs/benchmarks.md are checked
SOURCES = ["README.md", "docs/*.md", "docs/results/**/*.md", "sparkhc/**/*.py", "sparkhc/conf/*.toml", "conf/*.toml",
           "experiments/*.py"]


@pytest.mark.parametrize("name", LINKED)
def test_linked_names_are_found_on_the_current_page(name: str) -> None:
    assert name in PAGE.read_text(encoding="utf-8")


def test_every_section_named_next_to_the_page_is_found_on_it() -> None:
    """A quoted or back-quoted name on a line that mentions docs/benchmarks.md (or the line after
    it), when it is a section name or title of either page, is on the current page (the section
    itself, or a pointer to the archive)."""
    page = PAGE.read_text(encoding="utf-8")
    history = ARCHIVE.read_text(encoding="utf-8")
    both = page + history
    known = set(START.findall(both)) | {t.strip() for t in re.findall(r"^#{2,3} (.+?)(?: \(|$)", both, re.M)}
    missing = []
    for pattern in SOURCES:
        for path in ROOT.glob(pattern):
            lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
            for i, line in enumerate(lines):
                if "docs/benchmarks.md" not in line:
                    continue
                near = " ".join(lines[i:i + 2])
                names = re.findall(r'["`]([^"`]{2,80})["`]', near) + re.findall(r"section[s]? ([a-z0-9_-]+)", near)
                for name in names:
                    name = name.strip().strip(".,")
                    if name not in known or name in page:
                        continue
                    if "archive/benchmarks-history.md" in near and name in history:
                        continue  # the reference names the archive itself
                    missing.append(f"{path.relative_to(ROOT)}:{i + 1}: {name!r}")
    assert not missing, missing


def test_rerun_on_a_copy_of_the_real_page(tmp_path: Path) -> None:
    """On the pages as they are: a rerun of a current section (the page's last) changes that section
    only, where it stands; a rerun under an archived name (featurize) is appended at the end, and the
    page stays within its limit."""
    common = _common()
    page, archive = tmp_path / "benchmarks.md", tmp_path / "archive" / "benchmarks-history.md"
    archive.parent.mkdir()
    page.write_text(PAGE.read_text(encoding="utf-8"), encoding="utf-8")
    archive.write_text(ARCHIVE.read_text(encoding="utf-8"), encoding="utf-8")
    before = _sections(page.read_text(encoding="utf-8"))
    # a measured section on the page now (the last one: the page's content changes with every run)
    key = [k for k in before if k not in ("summary-issue29", "summary-throughput", "moved")][-1]
    assert common.write_section(key, f"A rerun ({key})", "rerun", doc=page) == []
    after = _sections(page.read_text(encoding="utf-8"))
    assert list(after) == list(before)
    assert {k for k in before if before[k] != after[k]} == {key} and "rerun" in after[key]
    assert "featurize" not in before and "featurize" in _sections(archive.read_text(encoding="utf-8"))
    common.write_section("featurize", "Featurize throughput (featurize)", "new run", doc=page)
    text = page.read_text(encoding="utf-8")
    again = _sections(text)
    assert list(again)[-1] == "featurize" and "new run" in again["featurize"]
    assert text.count("\n") <= common.PAGE_LIMIT


# --- the rules of what is current (issue 53) ----------------------------------------------------


def _page(tmp_path: Path, *sections: tuple[str, str]) -> tuple[Path, Path]:
    """A page with the pinned sections and ``sections`` (key, date), and an empty archive."""
    page, archive = tmp_path / "benchmarks.md", tmp_path / "archive" / "benchmarks-history.md"
    archive.parent.mkdir()
    archive.write_text("# Benchmarks: history\n\n> Superseded measurements, kept verbatim for the record.\n",
                       encoding="utf-8")
    parts = ["# Benchmarks\n",
             "<!-- section:summary-issue29 -->\n## S1\n\ntext\n<!-- /section:summary-issue29 -->",
             "<!-- section:summary-throughput -->\n## S2\n\ntext\n<!-- /section:summary-throughput -->",
             "<!-- section:moved -->\n## Moved to the archive\n\nIntro.\n<!-- /section:moved -->"]
    for key, date in sections:
        parts.append(f"<!-- section:{key} -->\n## {key}\n\nDate: {date} UTC\n\nbody of {key}\n<!-- /section:{key} -->")
    page.write_text("\n\n".join(parts) + "\n", encoding="utf-8")
    return page, archive


def test_a_section_supersedes_its_kind_and_the_old_one_moves_to_the_archive(tmp_path: Path) -> None:
    common = _common()
    page, archive = _page(tmp_path, ("x", "2026-12-01 10:00"))
    common.write_section("dev-a", "Comparison (dev-a)", "Date: 2026-12-02 10:00 UTC\n\nold figures", doc=page,
                         kind="compare sparkhc on 20newsgroups")
    common.write_section("y", "Y", "Date: 2026-12-03 10:00 UTC\n\ny", doc=page)
    moved = common.write_section("dev-b", "Comparison (dev-b)", "Date: 2026-12-04 10:00 UTC\n\nnew figures",
                                 doc=page, kind="compare sparkhc on 20newsgroups")
    assert moved == ["dev-a"]
    text = page.read_text(encoding="utf-8")
    secs = _sections(text)
    # the new section stands where the one it superseded stood, before y
    assert list(secs) == ["summary-issue29", "summary-throughput", "moved", "x", "dev-b", "y"]
    assert "<!-- kind: compare sparkhc on 20newsgroups -->" in secs["dev-b"]
    hist = _sections(archive.read_text(encoding="utf-8"))
    assert list(hist) == ["dev-a"] and "old figures" in hist["dev-a"]
    assert "`dev-a`" in secs["moved"]  # the name can be found from the current page
    # another kind is not superseded
    common.write_section("dev-c", "C", "Date: 2026-12-05 10:00 UTC\n\nc", doc=page, kind="compare peers on 20newsgroups")
    assert "dev-b" in _sections(page.read_text(encoding="utf-8"))


def test_the_page_keeps_its_line_limit_by_archiving_the_oldest(tmp_path: Path) -> None:
    """Over the limit, the oldest dated sections go first (undated before any dated one); the pinned
    summaries and the section just written stay; the archive stays newest first."""
    common = _common()
    page, archive = _page(tmp_path, ("new", "2026-12-07 10:00"), ("old", "2026-11-01 10:00"),
                          ("mid", "2026-12-01 10:00"))
    undated = "<!-- section:notes -->\n## Notes\n\nby hand\n<!-- /section:notes -->\n"
    page.write_text(page.read_text(encoding="utf-8") + "\n" + undated, encoding="utf-8")
    limit = page.read_text(encoding="utf-8").count("\n") + 2
    body = "Date: 2026-12-08 10:00 UTC\n\n" + "\n".join(f"line {i}" for i in range(12))
    moved = common.write_section("big", "Big", body, doc=page, limit=limit)
    assert moved == ["notes", "old", "mid"]
    text = page.read_text(encoding="utf-8")
    assert text.count("\n") <= limit
    assert list(_sections(text)) == ["summary-issue29", "summary-throughput", "moved", "new", "big"]
    hist = archive.read_text(encoding="utf-8")
    assert list(_sections(hist)) == ["notes", "mid", "old"]
    assert all(f"`{k}`" in _sections(text)["moved"] for k in moved)
    # nothing left to move but the pinned sections and the new one: written anyway, with a warning
    common.write_section("huge", "Huge", "\n".join(["x"] * 50), doc=page, limit=10)
    assert "huge" in _sections(page.read_text(encoding="utf-8"))


def test_an_archived_key_moved_again_replaces_its_older_copy(tmp_path: Path) -> None:
    common = _common()
    page, archive = _page(tmp_path)
    common.write_section("a", "A", "Date: 2026-12-01 10:00 UTC\n\nfirst", doc=page, kind="k")
    common.write_section("b", "B", "Date: 2026-12-02 10:00 UTC\n\nsecond", doc=page, kind="k")
    common.write_section("a", "A", "Date: 2026-12-03 10:00 UTC\n\nthird", doc=page, kind="k")
    hist = _sections(archive.read_text(encoding="utf-8"))
    # a's first copy was archived by b; a's rerun superseded b; the archive is newest first
    assert list(hist) == ["b", "a"] and "first" in hist["a"]
    common.write_section("b", "B", "Date: 2026-12-04 10:00 UTC\n\nfourth", doc=page, kind="k")
    hist = _sections(archive.read_text(encoding="utf-8"))
    assert list(hist) == ["a", "b"] and "third" in hist["a"] and "second" in hist["b"]
    moved = _sections(page.read_text(encoding="utf-8"))["moved"]
    assert moved.count("`a`") == 1 and moved.count("`b`") == 1


def test_long_table_cells_become_notes() -> None:
    common = _common()
    long = "fold 0: 46 epochs (validation stopped after 66); offsets applied (validation gain +1.27)"
    body = f"intro\n\n| system | hF | chosen |\n|---|---|---|\n| sparkhc | 78.5 | {long} |\n| peer | 77.0 | - |\n\nafter"
    out = common.compact_tables(body)
    assert "| sparkhc | 78.5 | note 1 |" in out and "| peer | 77.0 | - |" in out
    assert f"Notes:\n1. {long}" in out and out.endswith("after")
    assert common.compact_tables(out) == out  # a second pass changes nothing
    assert common.compact_tables("| a | b |\n|---|---|\n| 1 | 2 |") == "| a | b |\n|---|---|\n| 1 | 2 |"


# --- the current page, as it is (issue 53) ------------------------------------------------------


def test_the_current_page_is_at_most_400_lines() -> None:
    n = PAGE.read_text(encoding="utf-8").count("\n")
    assert n <= 400, f"docs/benchmarks.md has {n} lines; move superseded sections to {ARCHIVE.name}"


def test_every_table_cell_on_the_current_page_is_a_figure() -> None:
    common = _common()
    long = []
    for i, line in enumerate(PAGE.read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith("|"):
            long += [f"{i}: {c.strip()[:60]}..." for c in line.strip()[1:-1].split(" | ")
                     if len(c.strip()) > common.CELL_LIMIT]
    assert not long, long


def test_the_summaries_open_the_page() -> None:
    assert list(_sections(PAGE.read_text(encoding="utf-8")))[:3] == ["summary-issue29", "summary-throughput", "moved"]


def test_run_cli_keeps_the_childs_log_and_the_timeline_picks_the_training_lines(tmp_path: Path) -> None:
    """``run_cli(log=...)`` writes the child's stderr (its log lines) to the file, and
    ``bench_mesh_train.timeline`` keeps only the lines about epochs, the selection, the barrier
    stages and the calibration, in order."""
    import sys

    pytest.importorskip("psutil")
    common = _common()
    lines = ["10:00:01 INFO sparkhc.spark.mixing.engine: epoch 1/2: 10 examples in 2 shards, 3 updates, 1.0 s",
             "10:00:02 WARN org.apache.spark.Something: unrelated",
             "10:00:03 INFO sparkhc.spark.mixing.selection: select_epochs: epoch 1, validation hF 0.5",
             "10:00:04 INFO sparkhc.spark.training: train.calibrate = auto: skipped: too large"]
    code = "import sys; print('{\"ok\": 1}'); sys.stderr.write(" + repr("\n".join(lines) + "\n") + ")"
    log = tmp_path / "child.log"
    wall, _mem, out = common.run_cli([sys.executable, "-c", code], interval=0.05, log=log)
    assert wall > 0 and out.strip() == '{"ok": 1}' and log.read_text(encoding="utf-8") == "\n".join(lines) + "\n"
    spec = importlib.util.spec_from_file_location("bench_mesh_train_pages", ROOT / "benchmarks" / "bench_mesh_train.py")
    assert spec is not None and spec.loader is not None
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    block = mod.timeline(log.read_text(encoding="utf-8"), log)
    kept = block.split("```\n")[1].splitlines()
    assert kept == [lines[0], lines[2], lines[3]] and str(log) in block
    assert mod.timeline(lines[1], log) == ""
