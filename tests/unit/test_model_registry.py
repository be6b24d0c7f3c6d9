"""The model registry finds every family's declared names without a hand-kept list, also when the
package is imported from a zip (spark-submit --py-files), and refuses a name declared twice."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from sparkhc.errors import ConfigError
from sparkhc.models import declared_models, discover, get_model_class, names

ROOT = Path(__file__).resolve().parents[2]


def test_every_declared_name_resolves_to_its_class() -> None:
    assert {"global", "h_svm", "pcem", "fmm", "m3mdc", "majority"} <= set(names())
    for n in names():
        assert get_model_class(n).name == n


def test_discovery_reads_the_literal_without_importing(tmp_path: Path) -> None:
    (tmp_path / "fam.py").write_text('raise RuntimeError("not imported")\nMODELS = {"x": "X", "y": "Y"}\n')
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text('MODELS: dict[str, str] = {"z": "Z"}\n')
    (tmp_path / "_private.py").write_text('MODELS = {"hidden": "H"}\n')
    assert discover(tmp_path, "p") == {"x": "p.fam:X", "y": "p.fam:Y", "z": "p.pkg:Z"}
    (tmp_path / "other.py").write_text('MODELS = {"x": "X2"}\n')
    with pytest.raises(ConfigError, match="'x' is declared by p.fam:X and p.other:X2"):
        discover(tmp_path, "p")
    (tmp_path / "bad.py").write_text('MODELS = {"a": CLASS}\n')
    with pytest.raises(ConfigError, match="literal dict"):
        declared_models(tmp_path / "bad.py", "p.bad")


def test_discovery_inside_a_zip(tmp_path: Path) -> None:
    z = tmp_path / "pyfiles.zip"
    with zipfile.ZipFile(z, "w") as zf:
        for f in (ROOT / "sparkhc").rglob("*.py"):
            zf.write(f, str(f.relative_to(ROOT)))
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import sparkhc.models as m; "
            "assert m.__file__.startswith(sys.argv[1]), m.__file__; print(','.join(m.names()))")
    out = subprocess.run([sys.executable, "-c", code, str(z)], capture_output=True, text=True, check=True,
                         cwd=tmp_path)
    assert out.stdout.strip().split(",") == names()
