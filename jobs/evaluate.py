#!/usr/bin/env python3
"""spark-submit entry point: metrics of predictions against their gold labels (metrics JSON).

Same flags as ``sparkhc evaluate`` (``sparkhc evaluate --help``), same pipeline
(:func:`sparkhc.spark.pipelines.evaluate`)::

    spark-submit --properties-file conf/spark-defaults.local.conf \\
        jobs/evaluate.py --predictions work/20ng/pred

On a cluster add ``--py-files dist/sparkhc-pyfiles.zip`` (``python scripts/build_pyfiles.py``);
docs/deployment.md has the exact lines. The submitted master wins over ``--master``.
Exit status: 0 ok, 2 for a user error (bad input, configuration or model), 1 otherwise.
"""

from __future__ import annotations

import sys

VERB = "evaluate"


def main(argv: list[str] | None = None) -> None:
    """Run ``sparkhc evaluate`` with ``argv`` (default: the job's arguments); exits with its status."""
    from sparkhc.cli import main as cli_main

    cli_main([VERB, *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    main()
