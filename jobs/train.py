#!/usr/bin/env python3
"""spark-submit entry point: train a model on featurized documents (iterative parameter mixing).

Same flags as ``sparkhc train`` (``sparkhc train --help``), same pipeline
(:func:`sparkhc.spark.pipelines.train`)::

    spark-submit --properties-file conf/spark-defaults.local.conf \\
        jobs/train.py --features work/20ng/features --out work/20ng/model

trains what ``sparkhc train`` trains (the defaults); ``--config conf/models/global-bf.toml
--config conf/local.toml`` opts in to another model and fixed settings.

On a cluster add ``--py-files dist/sparkhc-pyfiles.zip`` (``python scripts/build_pyfiles.py``);
docs/deployment.md has the exact lines. The submitted master wins over ``--master``.
Exit status: 0 ok, 2 for a user error (bad input, configuration or model), 1 otherwise.
"""

from __future__ import annotations

import sys

VERB = "train"


def main(argv: list[str] | None = None) -> None:
    """Run ``sparkhc train`` with ``argv`` (default: the job's arguments); exits with its status."""
    from sparkhc.cli import main as cli_main

    cli_main([VERB, *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    main()
