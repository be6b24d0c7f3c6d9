#!/usr/bin/env python3
"""spark-submit entry point: decode documents with a saved model into predictions Parquet.

The documents are raw (``--input``: JSON Lines, Parquet or a directory per label; the model's own
feature spec is applied on the executors) or a features folder (``--features``).

Same flags as ``sparkhc predict`` (``sparkhc predict --help``), same pipeline
(:func:`sparkhc.spark.pipelines.predict`)::

    spark-submit --properties-file conf/spark-defaults.local.conf \\
        jobs/predict.py --model work/20ng/model --input new-docs.jsonl.gz --out work/20ng/pred-new

On a cluster add ``--py-files dist/sparkhc-pyfiles.zip`` (``python scripts/build_pyfiles.py``);
docs/deployment.md has the exact lines. The submitted master wins over ``--master``.
Exit status: 0 ok, 2 for a user error (bad input, configuration or model), 1 otherwise.
"""

from __future__ import annotations

import sys

VERB = "predict"


def main(argv: list[str] | None = None) -> None:
    """Run ``sparkhc predict`` with ``argv`` (default: the job's arguments); exits with its status."""
    from sparkhc.cli import main as cli_main

    cli_main([VERB, *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    main()
