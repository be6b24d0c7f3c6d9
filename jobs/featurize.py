#!/usr/bin/env python3
"""spark-submit entry point: tokenize a corpus into sparse Parquet features.

Same flags as ``sparkhc featurize`` (``sparkhc featurize --help``), same pipeline
(:func:`sparkhc.spark.pipelines.featurize`)::

    spark-submit --properties-file conf/spark-defaults.local.conf \\
        jobs/featurize.py --corpus 20newsgroups --data-dir data --out work/20ng/features

On a cluster add ``--py-files dist/sparkhc-pyfiles.zip`` (``python scripts/build_pyfiles.py``);
docs/deployment.md has the exact lines. The submitted master wins over ``--master``.
Exit status: 0 ok, 2 for a user error (bad input, configuration or model), 1 otherwise.
"""

from __future__ import annotations

import sys
from pathlib import Path

VERB = "featurize"


def _defaults_readable() -> None:
    """Under ``--py-files`` the package is imported from a zip, where ``sparkhc/conf/defaults.toml``
    is not a file on disk: extract it once so that the configuration loads. A no-op when the
    package is installed (or when sparkhc.config reads it through importlib.resources)."""
    import tempfile
    from importlib import resources

    from sparkhc import config

    default = config.DEFAULT_CONF
    if not isinstance(default, Path) or default.is_file():
        return
    text = resources.files("sparkhc").joinpath("conf/defaults.toml").read_text(encoding="utf-8")
    extracted = Path(tempfile.mkdtemp(prefix="sparkhc-conf-")) / "defaults.toml"
    extracted.write_text(text, encoding="utf-8")
    config.DEFAULT_CONF = extracted


def main(argv: list[str] | None = None) -> None:
    """Run ``sparkhc featurize`` with ``argv`` (default: the job's arguments); exits with its status."""
    from sparkhc.cli import main as cli_main

    _defaults_readable()
    cli_main([VERB, *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    main()
