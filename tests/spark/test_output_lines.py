"""A default training prints a screenful (issue 53): on the whole 20 Newsgroups corpus, `sparkhc train`
with every default writes at most 20 non-empty lines on stderr at the default verbosity, its progress
lines at most one every few seconds. Two fresh CLI processes (featurize, then train), as a user runs
them; skipped when the corpus is absent."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import subprocess
import sys

import pytest

from tests.conftest import DATA_DIR, ROOT, corpus_dir

#: the most non-empty stderr lines of a default training (issue 53)
MAX_LINES = 20


def _cli(*argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    env.pop("SPARKHC_SPARK_LOGS", None)
    return subprocess.run([sys.executable, "-m", "sparkhc.cli", *argv], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=1800)


def _stamps(lines: list[str]) -> list[dt.datetime]:
    return [dt.datetime.strptime(m.group(1), "%H:%M:%S") for ln in lines if (m := re.match(r"(\d\d:\d\d:\d\d) ", ln))]


@pytest.mark.slow
def test_a_default_training_of_20_newsgroups_prints_at_most_20_lines(tmp_path):
    corpus_dir("20newsgroups")
    feats, model = tmp_path / "features", tmp_path / "model"
    f = _cli("featurize", "--corpus", "20newsgroups", "--data-dir", str(DATA_DIR), "--out", str(feats),
             "--master", "local[2]")
    assert f.returncode == 0, f.stderr[-2000:]
    t = _cli("train", "--features", str(feats), "--out", str(model), "--master", "local[2]")
    assert t.returncode == 0, t.stderr[-2000:]
    lines = [ln for ln in t.stderr.splitlines() if ln.strip()]
    assert len(lines) <= MAX_LINES, "\n".join(lines)
    result = json.loads(t.stdout)
    assert result["documents"] == 11314 and result["epochs"] >= 1
    # the progress lines (if the training took long enough to have any): at most one every ~5 s
    progress = [ln for ln in lines if " so far)" in ln or " so far," in ln]
    stamps = _stamps(progress)
    assert all((b - a).total_seconds() >= 4 for a, b in zip(stamps, stamps[1:], strict=False)), progress
    # featurize's output stays a screenful too
    assert len([ln for ln in f.stderr.splitlines() if ln.strip()]) <= MAX_LINES, f.stderr
