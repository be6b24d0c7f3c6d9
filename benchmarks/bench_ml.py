#!/usr/bin/env python
"""Training time of the pyspark.ml estimator against ``sparkhc train`` on the same 20 Newsgroups
features, and of a vector-column input against sparkhc's Parquet features layout.

    python benchmarks/bench_ml.py --features /tmp/bench/feat_20newsgroups --master 'local[2]'

(the features folder is made with ``sparkhc featurize --corpus 20newsgroups`` when it is missing).
One Spark session; an untimed warm-up training first (the session's first jobs pay one-off
costs, see section profile-train of docs/archive/benchmarks-history.md); then ``--repeats``
rounds of the three trainings in turn, each with the same settings (``--epochs``, ``--shards``,
seed 0, no checkpoints), each including the save of the model folder:

- ``sparkhc train``: :func:`sparkhc.spark.pipelines.train` (what the CLI verb runs);
- estimator, layout: ``HierarchicalClassifier.fit`` on ``sparkhc.ml.read_features`` (split train)
  + ``write().save()``;
- estimator, vectors: the same on a Parquet copy of the training documents whose features are a
  ``pyspark.ml.linalg`` SparseVector column (written once before timing).

The three saved ``state.npz`` files are compared (they must be byte-identical). Targets: estimator
within 1.2x of ``sparkhc train``; vectors within 1.5x of the layout.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import command, loadavg, machine, now, write_section  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--features", default="/tmp/bench/feat_20newsgroups")
    ap.add_argument("--data-dir", default="../shared/data")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--shards", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--section", default="ml")
    a = ap.parse_args()

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.ml.linalg import SparseVector, VectorUDT
    from pyspark.sql import functions as F

    from sparkhc.config import load_config
    from sparkhc.ml import HierarchicalClassifier, read_features
    from sparkhc.spark import pipelines
    from sparkhc.spark.session import get_session

    spark = get_session(app_name="bench-ml", master=a.master)
    sets = [f"train.epochs={a.epochs}", f"train.shards={a.shards}", "train.checkpoint=false"]
    cfg = load_config(overrides=sets)
    feats = Path(a.features)
    if not feats.is_dir():
        pipelines.featurize(spark, load_config(), feats, corpus="20newsgroups", data_dir=a.data_dir)
    work = Path(tempfile.mkdtemp(prefix="bench_ml_"))
    layout = read_features(spark, feats).where(F.col("split") == "train")
    n_features = layout.schema["indices"].metadata["sparkhc"]["n_features"]
    to_vec = F.udf(lambda i, v: SparseVector(n_features, list(i), [float(x) for x in v]), VectorUDT())
    vec_path = work / "vectors"
    layout.select("doc_id", "labels", to_vec("indices", "values").alias("features")).write.parquet(str(vec_path))
    vectors = spark.read.parquet(str(vec_path))
    n_docs = vectors.count()
    clf = HierarchicalClassifier(taxonomy=str(feats / "taxonomy.tsv"), epochs=a.epochs, shards=a.shards, seed=0,
                                 numFeatures=n_features)

    def cli(out: Path) -> None:
        pipelines.train(spark, cfg, feats, out, split="train", overwrite=True)

    def est(df):  # type: ignore[no-untyped-def]
        def run(out: Path) -> None:
            clf.fit(df).write().overwrite().save(str(out))
        return run

    runs = {"sparkhc train (pipelines.train)": cli, "estimator, features layout": est(layout),
            "estimator, vector column": est(vectors)}
    HierarchicalClassifier(taxonomy=str(feats / "taxonomy.tsv"), epochs=1, shards=a.shards).fit(layout)  # warm-up
    times: dict[str, list[float]] = {k: [] for k in runs}
    loads = [loadavg()]
    for r in range(a.repeats):
        for i, (name, fn) in enumerate(runs.items()):
            t0 = time.perf_counter()
            fn(work / f"m{i}")
            times[name].append(time.perf_counter() - t0)
            print(f"round {r} {name}: {times[name][-1]:.2f} s (load {loadavg()})", flush=True)
        loads.append(loadavg())
    same = len({(work / f"m{i}" / "state.npz").read_bytes() for i in range(len(runs))}) == 1
    med = {k: statistics.median(v) for k, v in times.items()}
    names = list(runs)
    r_est = med[names[1]] / med[names[0]]
    r_vec = med[names[2]] / med[names[1]]
    rows = [
        f"| {names[0]} | {med[names[0]]:.2f} | {', '.join(f'{t:.2f}' for t in times[names[0]])} | 1.00 | | |",
        f"| {names[1]} | {med[names[1]]:.2f} | {', '.join(f'{t:.2f}' for t in times[names[1]])} | {r_est:.2f} x "
        f"sparkhc train | <= 1.2 | {'yes' if r_est <= 1.2 else 'no'} |",
        f"| {names[2]} | {med[names[2]]:.2f} | {', '.join(f'{t:.2f}' for t in times[names[2]])} | {r_vec:.2f} x "
        f"layout | <= 1.5 | {'yes' if r_vec <= 1.5 else 'no'} |",
    ]
    body = (
        f"Command: `{command()}`  \nMachine: {machine()}  \nDate: {now()}  \n"
        f"Load average at the start of each round and at the end: {' -> '.join(loads)}\n\n"
        f"20 Newsgroups training split ({n_docs} documents, {n_features} features), model global, {a.epochs} epochs, "
        f"{a.shards} shards, seed 0, no checkpoints, master {a.master}; each time includes saving the model folder. "
        f"Median of {a.repeats} rounds after an untimed warm-up training. The three models' state.npz are "
        f"{'byte-identical' if same else 'NOT identical'}.\n\n"
        "| path | median s | runs (s) | ratio | target | met? |\n|---|---|---|---|---|---|\n" + "\n".join(rows)
    )
    print(body)
    write_section(a.section, f"pyspark.ml estimator against sparkhc train ({a.section})", body)


if __name__ == "__main__":
    main()
