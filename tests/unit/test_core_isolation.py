"""The core (numpy/scipy) never imports pyspark: checked in a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys

CORE_MODULES = [
    "sparkhc.taxonomy",
    "sparkhc.batch",
    "sparkhc.errors",
    "sparkhc.config",
    "sparkhc.persistence",
    "sparkhc.models",
    "sparkhc.models.base",
    "sparkhc.models.murawaki",
    "sparkhc.decoding",
    "sparkhc.metrics",
    "sparkhc.text.spec",
    "sparkhc.text.tokenize",
    "sparkhc.corpus.readers",
    "sparkhc.corpus.registry",
    "sparkhc.registry",
    "sparkhc.report",
    "sparkhc.cli_production",
    "sparkhc.models.cesa_bianchi",
    "sparkhc.models.fmm",
    "sparkhc.mdc.m3mdc",
    "sparkhc.mdc.spaces",
    "sparkhc.models.mdc",
]


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
