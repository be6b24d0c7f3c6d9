#!/usr/bin/env python3
"""Package sparkhc for spark-submit on a cluster.

``--py-files`` (default)::

    python scripts/build_pyfiles.py                 # -> dist/sparkhc-pyfiles.zip
    spark-submit --py-files dist/sparkhc-pyfiles.zip jobs/train.py ...

The zip holds the ``sparkhc`` package only (its Python modules and ``conf/defaults.toml``),
byte-identical for identical sources (sorted entries, fixed timestamps). Its dependencies are
not in it: numpy, scipy, pyarrow and pandas (and pyspark's own py4j) must be installed in the
Python that the driver and every worker run (``spark.pyspark.python``), e.g. with
``pip install --no-index --find-links dist/wheelhouse numpy scipy pyarrow pandas`` from the
wheelhouse that ``scripts/build_wheelhouse.sh`` builds.

``--archives`` (optional): a packed virtual environment with the package and its dependencies
(needs the ``venv-pack`` package, fetched from PyPI into the venv when missing)::

    python scripts/build_pyfiles.py --venv-pack dist/sparkhc-venv.tar.gz [--wheelhouse dist/wheelhouse]
    spark-submit --archives dist/sparkhc-venv.tar.gz#environment \\
        --conf spark.pyspark.python=./environment/bin/python jobs/train.py ...

venv-pack does not copy the interpreter itself: every node needs the same Python (version and
path) as the machine that built the archive.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "sparkhc"
SKIP_SUFFIXES = (".pyc", ".pyo", ".swp", "~")
FIXED_TIME = (1980, 1, 1, 0, 0, 0)


def package_files(root: Path = ROOT) -> list[Path]:
    """The files of the package that go into the zip, sorted (no caches, no editor leftovers)."""
    return [
        p for p in sorted((root / PACKAGE).rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts and not p.name.endswith(SKIP_SUFFIXES)
    ]


def build_zip(out: Path, root: Path = ROOT) -> Path:
    """Write the ``--py-files`` zip atomically; return its path."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for f in package_files(root):
            info = zipfile.ZipInfo(f.relative_to(root).as_posix(), date_time=FIXED_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, f.read_bytes())
    os.replace(tmp, out)
    return out


def build_venv_pack(out: Path, wheelhouse: Path | None, python: str = sys.executable) -> Path:
    """Create a fresh venv with sparkhc and its dependencies and pack it with venv-pack."""
    out = out.resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="sparkhc-venv-") as tmp:
        venv = Path(tmp) / "venv"
        subprocess.run([python, "-m", "venv", str(venv)], check=True)
        vpy = str(venv / "bin" / "python")
        pip = [vpy, "-m", "pip", "install", "--quiet"]
        if wheelhouse is not None:
            subprocess.run([*pip, "--no-index", "--find-links", str(wheelhouse), PACKAGE], check=True)
        else:
            subprocess.run([*pip, str(ROOT)], check=True)
        subprocess.run([*pip, "venv-pack"], check=True)
        if out.exists():
            out.unlink()
        subprocess.run([vpy, "-m", "venv_pack", "--prefix", str(venv), "--output", str(out)], check=True,
                       stdout=subprocess.DEVNULL)  # its progress bar
        out.chmod(0o644)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "dist" / "sparkhc-pyfiles.zip",
                    help="the --py-files zip (default dist/sparkhc-pyfiles.zip)")
    ap.add_argument("--venv-pack", type=Path, default=None, metavar="TAR_GZ",
                    help="also build a packed virtual environment for --archives")
    ap.add_argument("--wheelhouse", type=Path, default=None,
                    help="install the packed venv offline from this wheelhouse (scripts/build_wheelhouse.sh)")
    args = ap.parse_args(argv)
    print(build_zip(args.out))
    if args.venv_pack is not None:
        print(build_venv_pack(args.venv_pack, args.wheelhouse))
    return 0


if __name__ == "__main__":
    sys.exit(main())
