"""The Docker image for local mode, built and run for real with podman (docker works the same):
``docker/build.sh`` then ``docker/run.sh demo`` with the data folder mounted. Run it with::

    python -m pytest -m slow tests/jobs/test_docker.py

It needs podman (Debian: ``apt-get install podman runc``; the base image is built with
``debootstrap`` when no registry serves one) and 20 Newsgroups under ../shared/data.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time

import pytest

from tests.conftest import DATA_DIR, corpus_dir
from tests.jobs.conftest import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.timeout(5400)]


def _engine_or_skip() -> str:
    engine = os.environ.get("ENGINE") or ("podman" if shutil.which("podman") else None)
    if engine is None:
        pytest.skip("podman is not installed (Debian: apt-get install podman runc debootstrap)")
    return engine


def test_build_and_run_demo_in_the_image(tmp_path):
    engine = _engine_or_skip()
    corpus_dir("20newsgroups")
    env = {**os.environ, "ENGINE": engine}
    t0 = time.perf_counter()
    build = subprocess.run(["bash", str(ROOT / "docker" / "build.sh")], env=env, capture_output=True, text=True,
                           stdin=subprocess.DEVNULL, timeout=3600)
    t_build = time.perf_counter() - t0
    (tmp_path / "build.log").write_text(build.stdout + build.stderr)
    assert build.returncode == 0, build.stderr[-4000:]

    work = tmp_path / "work"
    t0 = time.perf_counter()
    run = subprocess.run(
        ["bash", str(ROOT / "docker" / "run.sh"), "--data", str(DATA_DIR), "--work", str(work),
         "demo", "--set", "train.epochs=2", "--set", "train.shards=2"],
        env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=3600,
    )
    t_run = time.perf_counter() - t0
    print(f"docker/build.sh {t_build:.0f} s, docker/run.sh demo {t_run:.0f} s")
    assert run.returncode == 0, run.stderr[-4000:]
    assert "sparkhc demo: 20newsgroups" in run.stdout and "hF" in run.stdout, run.stdout
    # the outputs landed in the mounted work folder, owned by the caller
    metrics = json.loads((work / "demo" / "predictions" / "metrics.json").read_text())
    assert metrics["metrics"]["n_docs"] == 7532  # the bydate test split
    assert metrics["metrics"]["LBMiF"] > 0.5
    assert (work / "demo" / "model" / "state.npz").stat().st_uid == os.getuid()
