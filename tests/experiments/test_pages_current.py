"""Issue 55: every results page knows its code (the import trace of its runner) and is either
current (no commit after its stamp touches that code) or marked stale in one line."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

from experiments import pages
from experiments.regenerate import main as regenerate_main


def test_committed_pages_are_current_or_marked_stale() -> None:
    """The CI check: a page whose code changed after its stamp must be regenerated, or marked with
    ``python -m experiments.regenerate --mark-stale NAME --why "..."``, in the same submission."""
    why = pages.git_unavailable()
    if why:
        pytest.skip(f"cannot date the results pages: {why}")
    assert pages.check() == []


def test_every_results_file_has_a_job_or_is_hand_written() -> None:
    for p in sorted(pages.RESULTS.rglob("*")):
        if p.is_file():
            rel = p.relative_to(pages.RESULTS).as_posix()
            jobs = pages.jobs_of(rel)
            assert all(j in pages.RUNNERS for j in jobs), rel
            assert bool(jobs) == (rel not in pages.HAND_WRITTEN), rel
    assert pages.jobs_of("murawaki/reuters21578_learning_curve.md") == (("murawaki-curve", "reuters21578"),)
    assert pages.jobs_of("murawaki/reuters21578_bf_size.png") == (("murawaki", "reuters21578"),)
    assert pages.jobs_of("m3mdc/reuters21578.json") == (("m3mdc", "reuters21578"),)
    assert pages.jobs_of("m3mdc/table3.md") == (("m3mdc", None),)
    assert len(pages.jobs_of("cesa_bianchi/README.md")) == 3
    with pytest.raises(KeyError, match="no job writes it"):
        pages.jobs_of("murawaki/new_page.md")


def test_runner_traces_follow_the_real_imports() -> None:
    """Hand-read from the sources: murawaki_curve imports experiments.murawaki (top level), which
    imports sparkhc.spark.pipelines; li_yamanishi does not import the Murawaki runner; the
    dispatch in experiments/__init__ (lazy imports of every runner) does not pull the other runners
    into a page's code; the model registry's names bring the model modules in."""
    curve = pages.dependencies("experiments.murawaki_curve")
    assert {"experiments/murawaki_curve.py", "experiments/murawaki.py", "experiments/significance.py",
            "experiments/harness.py", "experiments/__init__.py", "sparkhc/spark/pipelines.py",
            "sparkhc/models/murawaki.py", "sparkhc/conf/defaults.toml"} <= set(curve)
    ly = pages.dependencies("experiments.li_yamanishi")
    assert "experiments/li_yamanishi.py" in ly and "sparkhc/models/li_yamanishi/classifiers.py" in ly
    assert not {"experiments/murawaki.py", "experiments/xiao.py", "experiments/regenerate.py",
                "experiments/pages.py"} & set(ly)
    assert "sparkhc/conf/mdc_reuters21578.toml" in pages.dependencies("experiments.m3mdc_text")


def _tiny_repo(root: Path) -> None:
    """A package with a lazy import, a TYPE_CHECKING import and a package whose function imports."""
    files = {
        "experiments/__init__.py": "def run():\n    from experiments import other\n",
        "experiments/li_yamanishi.py": ("from typing import TYPE_CHECKING\nfrom experiments import helper\n"
                                        "if TYPE_CHECKING:\n    from sparkhc import typed\n"
                                        "def f():\n    import sparkhc.lazy\n"),
        "experiments/helper.py": "from sparkhc.pkg import thing\n",
        "experiments/other.py": "",
        "sparkhc/__init__.py": "",
        "sparkhc/typed.py": "",
        "sparkhc/lazy.py": "",
        "sparkhc/unused.py": "",
        "sparkhc/pkg/__init__.py": "import sparkhc.pkg.base\ndef g():\n    import sparkhc.unused\n",
        "sparkhc/pkg/base.py": "",
        "sparkhc/pkg/thing.py": "",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")


def test_trace_on_a_tiny_package(tmp_path: Path) -> None:
    _tiny_repo(tmp_path)
    got = pages.dependencies("experiments.li_yamanishi", tmp_path)
    # helper's ``from sparkhc.pkg import thing`` imports the submodule and runs sparkhc/pkg/__init__'s
    # top level (which imports base); neither other.py (a lazy import of experiments/__init__), nor
    # unused.py (inside a function of sparkhc.pkg), nor typed.py (TYPE_CHECKING) is the page's code
    assert got == ("experiments/__init__.py", "experiments/helper.py", "experiments/li_yamanishi.py",
                   "sparkhc/__init__.py", "sparkhc/lazy.py", "sparkhc/pkg/__init__.py", "sparkhc/pkg/base.py",
                   "sparkhc/pkg/thing.py")


def _png_with_description(text: str) -> bytes:
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    ihdr = struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"tEXt", b"Description\0" + text.encode("latin-1"))
            + chunk(b"IDAT", zlib.compress(b"\0\0")) + chunk(b"IEND", b""))


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_stale_check_regenerate_or_mark(tmp_path: Path) -> None:
    """A page stamped at commit A: current while later commits leave its code alone; a commit to
    its code makes it fail the check; ``--mark-stale`` (one line on the page) makes it pass, as
    does a page regenerated at the new commit."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=tmp_path,
                              check=True, capture_output=True, text=True).stdout.strip()

    _tiny_repo(tmp_path)
    git("init", "-q")
    git("add", ".")
    git("commit", "-qm", "code")
    a = git("rev-parse", "HEAD")
    res = tmp_path / "docs" / "results" / "li_yamanishi"
    res.mkdir(parents=True)
    stamp = f"Generated by `sparkhc experiment li-yamanishi` at commit `{a[:12]}` on 2026-12-07T00:00:00Z."
    (res / "bep.md").write_text(f"# BEP\n\n| a |\n\n{stamp}\n", encoding="utf-8")
    (res / "results.json").write_text(json.dumps({"x": 1, "generated": {"git_commit": a}}), encoding="utf-8")
    (res / "pr.png").write_bytes(_png_with_description(stamp))
    (tmp_path / "NOTES.md").write_text("not code\n")
    (tmp_path / "sparkhc" / "unused.py").write_text("x = 1\n")  # not the page's code
    git("add", ".")
    git("commit", "-qm", "pages, notes")
    results = tmp_path / "docs" / "results"
    assert pages.git_unavailable(tmp_path) is None
    assert [p.stamp for p in pages.pages(results, tmp_path)] == [a[:12], a[:12], a]  # bep.md, pr.png, results.json
    assert pages.check(results, tmp_path) == []

    (tmp_path / "sparkhc" / "lazy.py").write_text("y = 2\n")  # the page's code (a lazy import)
    git("commit", "-qam", "change the lazy module")
    bad = pages.check(results, tmp_path)
    assert len(bad) == 3 and all("change the lazy module" in b and "--mark-stale li-yamanishi" in b for b in bad)

    assert regenerate_main(["--mark-stale", "li-yamanishi", "--why", "lazy.py changed", "--committed",
                            str(results)]) == 0
    text = (res / "bep.md").read_text(encoding="utf-8")
    assert text.startswith("Stale: lazy.py changed (marked at commit `") and text.endswith(stamp + "\n")
    assert pages.check(results, tmp_path) == []
    pages.mark_stale(["li-yamanishi"], "again", results, tmp_path)  # a new mark replaces the old one
    assert (res / "bep.md").read_text(encoding="utf-8").count("Stale:") == 1
    with pytest.raises(ValueError, match="unknown experiment"):
        pages.mark_stale(["li"], "x", results, tmp_path)

    b = git("rev-parse", "HEAD")  # regenerated at the new commit: current without a mark
    (res / "bep.md").write_text(f"# BEP\n\n{stamp.replace(a[:12], b[:12])}\n", encoding="utf-8")
    (res / "results.json").write_text(json.dumps({"generated": {"git_commit": b}}), encoding="utf-8")
    (res / "pr.png").write_bytes(_png_with_description(stamp.replace(a[:12], b[:12])))
    assert pages.check(results, tmp_path) == []
    (res / "pr.png").write_bytes(_png_with_description(stamp))  # one file left behind: it alone fails
    assert [b_.split(" ")[0] for b_ in pages.check(results, tmp_path)] == ["docs/results/li_yamanishi/pr.png"]


def test_unstamped_or_unknown_stamp_fails(tmp_path: Path) -> None:
    if pages.git_unavailable():
        pytest.skip(f"no history: {pages.git_unavailable()}")
    res = tmp_path / "li_yamanishi"
    res.mkdir()
    (res / "bep.md").write_text("# no stamp\n", encoding="utf-8")
    (res / "results.json").write_text(json.dumps({"generated": {"git_commit": "0" * 40}}), encoding="utf-8")
    bad = pages.check(tmp_path)
    assert bad == ["docs/results/li_yamanishi/bep.md: no stamp with a commit (regenerate it)",
                   f"docs/results/li_yamanishi/results.json: its stamp's commit {'0' * 40} is not in this history"]


def test_shallow_or_missing_git_is_reported(tmp_path: Path) -> None:
    if shutil.which("git") is None:
        assert pages.git_unavailable(tmp_path) == "git is not installed"
        return
    assert pages.git_unavailable(tmp_path) is not None  # not a repository (tmp is outside any)
