"""Load (issue 9 item 5), slow: reclassify all of IMDB (``meka_imdb``, 120,919 documents) split
into many small date partitions, several times in one driver, and check that every run classifies
every document and that memory is stable across runs (driver RSS, JVM heap after a full GC,
Python workers' RSS).

The model is a global model trained serially (one epoch, numpy) on 20,000 training documents, saved
with its feature spec as ``sparkhc train`` would; the collection is Parquet (``doc_id``,
``tokens``) in ``SOAK_PARTITIONS`` partition folders. Runs: 1 = every partition is new, 2 and 3 =
``--all`` (reclassify everything), 4 = nothing to do (no Spark job). Figures are printed (``-s``)
and written to ``$SPARKHC_SOAK_OUT`` when set. Run:
``python -m pytest -m slow tests/reliability/test_soak.py -s``.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import scipy.sparse as sp

from tests.conftest import corpus_dir

SOAK_PARTITIONS = 60
TRAIN_DOCS = 20_000
RUNS = 3
MB = 1 << 20


def _memory(spark) -> dict[str, float]:
    import psutil

    jvm = spark.sparkContext._jvm
    jvm.java.lang.System.gc()
    rt = jvm.java.lang.Runtime.getRuntime()
    me = psutil.Process()
    # (name, rss) of each child alive through both reads: a short-lived child (a worker or a shell
    # Spark starts) may exit between the listing and the reads (psutil.NoSuchProcess)
    children: list[tuple[str, int]] = []
    for p in me.children(recursive=True):
        try:
            children.append(((p.name() or "").lower(), int(p.memory_info().rss)))
        except psutil.NoSuchProcess:
            continue
    workers = [rss for name, rss in children if "python" in name]
    java = [rss for name, rss in children if "java" in name]
    return {
        "driver_rss_mb": round(me.memory_info().rss / MB, 1),
        "jvm_heap_used_after_gc_mb": round((rt.totalMemory() - rt.freeMemory()) / MB, 1),
        "jvm_rss_mb": round(sum(java) / MB, 1),
        "python_workers": len(workers),
        "python_workers_rss_mb": round(sum(workers) / MB, 1),
    }


@pytest.mark.slow
@pytest.mark.timeout(5400)
def test_SOAK_reclassify_imdb_in_many_partitions(spark, tmp_path):
    from sparkhc.batch import SparseBatch
    from sparkhc.corpus.readers import to_table
    from sparkhc.corpus.registry import get_corpus
    from sparkhc.models.murawaki import GlobalPA
    from sparkhc.persistence import save_model
    from sparkhc.spark.reclassify import read_output, reclassify
    from sparkhc.text.spec import FeatureSpec

    root = corpus_dir("meka_imdb")
    info = get_corpus("meka_imdb")
    tax = info.load_taxonomy(root)
    batches, report = info.read(root, taxonomy=tax)
    table = to_table(batches)
    n = table.num_rows
    assert n == 120_919 and report.finished

    # ---- the model: fitted and trained serially on 20,000 training documents (folds 1-4)
    t0 = time.perf_counter()
    folds = np.asarray(table.column("fold").to_pylist())
    train_rows = np.flatnonzero(folds != 0)[:TRAIN_DOCS]
    tokens = table.column("tokens").to_pylist()
    labels = table.column("labels").to_pylist()
    spec = FeatureSpec(min_df=2, max_df=1.0, fit_on=None, weighting="log_tf_idf")
    train_tokens = [tokens[i] or [] for i in train_rows]
    spec = spec.fit_documents(train_tokens)
    offsets, idx, val, _ = spec.transform_many(train_tokens)
    X = sp.csr_matrix((val, idx, offsets), shape=(len(train_rows), spec.n_features), dtype=np.float32)
    doc_ids = table.column("doc_id").to_pylist()
    batch = SparseBatch(X, np.array([doc_ids[i] for i in train_rows]), [labels[i] for i in train_rows])
    model = GlobalPA(tax, spec.n_features).fit(batch, epochs=1, seed=0)
    mdir = save_model(tmp_path / "model", model, {"feature_spec_fingerprint": spec.fingerprint},
                      feature_spec_json=spec.to_json())
    model_seconds = time.perf_counter() - t0

    # ---- the collection: SOAK_PARTITIONS daily partitions of unlabelled documents
    coll = tmp_path / "collection"
    bounds = np.linspace(0, n, SOAK_PARTITIONS + 1).astype(int)
    raw = pa.table({"doc_id": table.column("doc_id"), "tokens": table.column("tokens")})
    for k in range(SOAK_PARTITIONS):
        d = coll / f"ingest_date=2024-{1 + k // 28:02d}-{1 + k % 28:02d}"
        d.mkdir(parents=True)
        pq.write_table(raw.slice(bounds[k], bounds[k + 1] - bounds[k]), d / "part-0.parquet")

    out = tmp_path / "out"
    runs = []
    base_mem = _memory(spark)
    for r in range(RUNS + 1):
        t = time.perf_counter()
        s = reclassify(spark, coll, out, model_dir=mdir, all_partitions=0 < r < RUNS, batch_partitions=8)
        secs = time.perf_counter() - t
        runs.append({"run": r + 1, "mode": "pending" if r in (0, RUNS) else "all", "documents": s["documents"],
                     "partitions": len(s["partitions"]["classified"]), "failures": len(s["failures"]),
                     "seconds": round(secs, 1), "docs_per_second": round(s["documents"] / secs) if secs else None,
                     **_memory(spark)})
        print(json.dumps(runs[-1]), flush=True)
    result = {"documents": n, "partitions": SOAK_PARTITIONS, "model_seconds": round(model_seconds, 1),
              "model_features": spec.n_features, "memory_before": base_mem, "runs": runs}
    if os.environ.get("SPARKHC_SOAK_OUT"):
        Path(os.environ["SPARKHC_SOAK_OUT"]).write_text(json.dumps(result, indent=2) + "\n")
    print("\nsoak:", json.dumps(result, indent=2))

    for run in runs[:RUNS]:
        assert run["documents"] == n and run["partitions"] == SOAK_PARTITIONS and run["failures"] == 0, run
    assert runs[RUNS]["documents"] == 0 and runs[RUNS]["partitions"] == 0  # nothing left to do
    t = read_output(out)
    assert t.num_rows == n and len(set(t.column("doc_id").to_pylist())) == n
    # memory is stable across the repeated full runs (2 and 3): no growth per run beyond noise
    a, b = runs[1], runs[RUNS - 1]
    assert b["driver_rss_mb"] - a["driver_rss_mb"] < 150, (a, b)
    assert b["jvm_heap_used_after_gc_mb"] - a["jvm_heap_used_after_gc_mb"] < 150, (a, b)
