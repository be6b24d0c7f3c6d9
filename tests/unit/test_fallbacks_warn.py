"""A fallback says so, once, in a warning (issue 54): the numpy reference when the compiled
kernels cannot be imported (before, a broken or missing numba made every training several times
slower silently), the public path when scipy's private CSR kernel is unusable, and a temporary
folder the cleanup could not remove."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROBE = ("import warnings; warnings.simplefilter('always'); {setup}"
         "import sparkhc.kernels as k; import sparkhc.decoding, sparkhc.models.murawaki; "
         "print('enabled', k.ENABLED, k.HAVE_NUMBA)")


def _run(setup: str, tmp_path: Path, switched_off: bool = False) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    env.pop("SPARKHC_KERNELS", None)
    if switched_off:
        env["SPARKHC_KERNELS"] = "0"
    return subprocess.run([sys.executable, "-c", PROBE.format(setup=setup)], capture_output=True, text=True,
                          env=env, timeout=60, check=True)


def test_numba_not_installed_warns(tmp_path: Path) -> None:
    out = _run("import sys; sys.modules['numba'] = None; ", tmp_path)
    assert "enabled False False" in out.stdout
    # once, though the decoders and the models import the kernels too
    assert out.stderr.count("RuntimeWarning: sparkhc: the compiled kernels are off: numba is not installed") == 1
    assert "sparkhc[fast]" in out.stderr


def test_a_broken_numba_warns_with_its_error(tmp_path: Path) -> None:
    (tmp_path / "numba.py").write_text("raise ImportError('Numba needs NumPy 2.3 or less')\n", encoding="utf-8")
    out = _run("", tmp_path)
    assert "enabled False False" in out.stdout
    assert "numba failed to import (ImportError: Numba needs NumPy 2.3 or less)" in out.stderr


@pytest.mark.parametrize("setup", ["import sys; sys.modules['numba'] = None; ", ""])
def test_kernels_switched_off_do_not_warn(tmp_path: Path, setup: str) -> None:
    out = _run(setup, tmp_path, switched_off=True)
    assert "enabled False" in out.stdout
    assert "compiled kernels are off" not in out.stderr


def test_an_unusable_scipy_kernel_warns_and_the_scores_are_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    import numpy as np
    from scipy.sparse import _sparsetools

    from sparkhc import decoding

    def broken(*args: object) -> None:
        raise TypeError("csr_matvecs() takes 7 arguments")

    monkeypatch.setattr(_sparsetools, "csr_matvecs", broken)
    with pytest.warns(RuntimeWarning, match=r"csr_matvecs kernel is not usable here \(TypeError: csr_matvecs"):
        assert decoding._probe_matvecs() is None
    monkeypatch.setattr(decoding, "_MATVECS", None)
    W = np.arange(12, dtype=np.float32).reshape(4, 3)
    got = decoding.row_scores(W, np.array([1, 3], np.int32), np.array([2.0, 1.0], np.float32))
    assert np.array_equal(got, 2 * W[1] + W[3])


def test_a_folder_the_cleanup_cannot_remove_is_a_warning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    from sparkhc import fsio

    folder = tmp_path / "tmp-out"
    folder.mkdir()
    out = fsio.OutputFs(str(folder))

    def refuse(path: object) -> None:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(shutil, "rmtree", refuse)
    with pytest.warns(RuntimeWarning, match="could not remove the temporary folder .*tmp-out.*PermissionError"):
        out.rmtree()
    monkeypatch.undo()
    out.rmtree()
    assert not folder.exists()
    out.rmtree()  # already gone: nothing to say
