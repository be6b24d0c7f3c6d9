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

VERB = "featurize"


def main(argv: list[str] | None = None) -> None:
    """Run ``sparkhc featurize`` with ``argv`` (default: the job's arguments); exits with its status."""
    from sparkhc.cli import main as cli_main

    cli_main([VERB, *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    main()
