#!/usr/bin/env python3
"""spark-submit entry point of ``sparkhc reclassify`` (scheduled batch reclassification).

Classifies the partitions of a date-partitioned document collection that the current model
(or ``--model DIR``) has not classified yet; see ``docs/scheduling.md``. Same flags as
``sparkhc reclassify``::

    spark-submit --properties-file conf/spark-defaults.local.conf jobs/reclassify.py \\
        --input work/collection --out work/reclassified --models work/models

On a cluster add ``--py-files dist/sparkhc-pyfiles.zip`` (``python scripts/build_pyfiles.py``)
as docs/deployment.md shows for the other jobs.

The run summary is printed on stdout and kept in ``OUT/_runs/<run_id>.json``; under spark-submit
stdout also carries the driver's log lines, so schedulers should pass ``--summary-json PATH`` and
read that file (docs/examples/airflow_reclassify_dag.py does).

Exit status: 0 ok, 3 when a partition failed (see ``OUT/_runs/<run_id>.json``), 2 for a user error (one
``sparkhc: error:`` line on spark-submit's stderr), 143 after SIGTERM (once the summary is written), 1 on a crash.
"""

from __future__ import annotations

import sys

from sparkhc.cli.reclassify import reclassify_main

if __name__ == "__main__":
    sys.exit(reclassify_main(sys.argv[1:]))
