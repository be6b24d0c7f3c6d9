"""The core (numpy/scipy) never imports pyspark: checked in a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: the Spark layer: the only packages of sparkhc that may import pyspark
SPARK_LAYER = ("sparkhc.spark", "sparkhc.ml")


def core_modules() -> list[str]:
    """Every module under sparkhc/ outside the Spark layer (walked, not listed)."""
    mods = []
    for f in sorted((ROOT / "sparkhc").rglob("*.py")):
        parts = list(f.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__main__":  # running it runs the program
            continue
        if parts[-1] == "__init__":
            parts = parts[:-1]
        name = ".".join(parts)
        if any(name == p or name.startswith(p + ".") for p in SPARK_LAYER):
            continue
        mods.append(name)
    return mods


CORE_MODULES = core_modules()


def test_the_walk_finds_the_core() -> None:
    assert {"sparkhc.taxonomy", "sparkhc.features", "sparkhc.models.murawaki", "sparkhc.cli"} <= set(CORE_MODULES)
    assert not [m for m in CORE_MODULES if m.startswith("sparkhc.spark")]


def test_core_does_not_import_pyspark():
    code = (
        "import sys, importlib\n"
        f"for m in {CORE_MODULES!r}:\n"
        "    importlib.import_module(m)\n"
        "bad = sorted(k for k in sys.modules if k == 'pyspark' or k.startswith('pyspark.'))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"core modules imported pyspark: {out.stdout.strip()}"


def test_cli_module_imports_without_pyspark_until_needed():
    code = "import sys, sparkhc.cli; print(any(k.startswith('pyspark') for k in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
