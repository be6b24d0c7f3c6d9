"""The stamp's ``+dirty`` marks changed code, not the results a run has already written."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from experiments import harness


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_written_results_do_not_make_the_stamp_dirty(tmp_path, monkeypatch):
    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    (tmp_path / "docs" / "results").mkdir(parents=True)
    (tmp_path / "docs" / "results" / "page.md").write_text("old\n")
    (tmp_path / "code.py").write_text("x = 1\n")
    git("init", "-q")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c")
    monkeypatch.setattr(harness, "ROOT", tmp_path)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True, text=True,
                          check=True).stdout.strip()
    assert harness.git_commit() == head
    (tmp_path / "docs" / "results" / "page.md").write_text("new\n")  # a page this run wrote
    assert harness.git_commit() == head
    (tmp_path / "code.py").write_text("x = 2\n")  # changed code
    assert harness.git_commit() == head + "+dirty"
