#!/usr/bin/env python
"""Bytes the jobs mode of iterative parameter mixing ships per epoch, before and after the base
state travels as row-sparse deltas (:class:`sparkhc.spark.mixing.jobs.BaseChain`), on 20 Newsgroups.

    python benchmarks/bench_mixing_bytes.py --features /tmp/bench/feat_20newsgroups

(the features folder is made with ``sparkhc featurize --corpus 20newsgroups`` when it is missing).
One Spark session, the training split, the default global model (DP-GT-BF-CA), ``--epochs``
epochs over ``--shards`` shards, seed 0, twice:

- before: every epoch broadcasts the full base state (``run_epoch`` without a chain, what the
  jobs mode did before): the broadcast is ``state_to_bytes`` of the state;
- after: ``train_ipm(mixing="jobs")``: the full state once, then each epoch's mixed change as a
  value patch (``deltas.encode_values``).

Out = the bytes broadcast for the epoch (each executor fetches them once); back = the partitions'
results (row-sparse deltas in both runs). The two final states must be bit-identical.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import command, loadavg, machine, now, write_section  # noqa: E402

NOTE = (
    "\n\nThe 20 Newsgroups state is small (4.6 MB) and an epoch changes a fifth to a half of its entries, so a "
    "patch is half to all of the state; the 4x bound restarts the chain about every sixth epoch. Each "
    "executor fetches each broadcast once. The results (back) are unchanged: float64 differences, which the "
    "driver sums; shipping float32 values there too (the driver would subtract its base, exactly) would cut them "
    "by a third (not done)."
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--features", default="/tmp/bench/feat_20newsgroups")
    ap.add_argument("--data-dir", default="../shared/data")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--shards", type=int, default=2)
    ap.add_argument("--section", default="mixing-bytes")
    a = ap.parse_args()

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import functions as F

    from sparkhc.config import load_config
    from sparkhc.models import get_model_class
    from sparkhc.persistence import state_to_bytes
    from sparkhc.spark import pipelines
    from sparkhc.spark.io import read_features
    from sparkhc.spark.mixing.jobs import run_epoch, shard_features
    from sparkhc.spark.mixing.train import train_ipm
    from sparkhc.spark.session import get_session
    from sparkhc.taxonomy import Taxonomy

    spark = get_session(app_name="bench-mixing-bytes", master=a.master)
    feats = Path(a.features)
    if not feats.is_dir():
        pipelines.featurize(spark, load_config(), feats, corpus="20newsgroups", data_dir=a.data_dir)
    df, spec = read_features(spark, feats)
    df = df.where(F.col("split") == "train").cache()
    n_docs = df.count()
    tax = Taxonomy.load(feats / "taxonomy.tsv")

    def model():  # type: ignore[no-untyped-def]
        m = get_model_class("global")(tax, spec.n_features, branching=True, update="cost_augmented", bias=0.3)
        m.set_state(m.init_state())
        return m

    load0 = loadavg()
    before = model()
    shards_df = shard_features(df, a.shards).cache()
    full, back_before = [], []
    for e in range(a.epochs):
        full.append(len(state_to_bytes(before.get_state())))
        mixed, counters = run_epoch(spark, shards_df, before, seed=0, epoch=e)
        back_before.append(int(counters["result_bytes"]))
        assert int(counters["broadcast_bytes"]) == full[-1]
        before.set_state(mixed)
    shards_df.unpersist()
    log: list[dict] = []
    after = train_ipm(spark, df, model(), epochs=a.epochs, shards=a.shards, seed=0, mixing="jobs", progress=log.append)
    load1 = loadavg()

    def digest(m) -> str:  # type: ignore[no-untyped-def]
        return hashlib.sha256(state_to_bytes(m.get_state())).hexdigest()[:16]

    same = digest(before) == digest(after)
    rows = []
    for e in range(a.epochs):
        out = log[e]["broadcast_bytes"]
        rows.append(f"| {e + 1} | {full[e]:,} | {back_before[e]:,} | {out:,} | {log[e]['result_bytes']:,} | "
                    f"{out / full[e]:.3f} | {log[e]['updates']:,} |")
    tot_b, tot_a = sum(full), sum(x["broadcast_bytes"] for x in log)
    rows.append(f"| all | {tot_b:,} | {sum(back_before):,} | {tot_a:,} | {sum(x['result_bytes'] for x in log):,} | "
                f"{tot_a / tot_b:.3f} | |")
    body = (
        f"Command: `{command()}`  \nMachine: {machine()}  \nDate: {now()}  \n"
        f"Load average at the start and at the end: {load0} -> {load1}\n\n"
        f"20 Newsgroups training split ({n_docs} documents, {spec.n_features} features), model global "
        f"(branching, cost-augmented, bias 0.3), {a.epochs} epochs, {a.shards} shards, seed 0, jobs mode, master "
        f"{a.master}. Out: bytes broadcast for the epoch (before: the full state every epoch; after: `BaseChain`, the "
        f"full state once, then the epoch's mixed change as a patch of the changed entries with their float32 "
        f"values, 8 bytes an entry; a full state again when the patches since the last one would pass 4x its size); "
        f"back: the partitions' results (row-sparse float64 deltas, 12 bytes an entry, in both runs). Final states "
        f"{'bit-identical' if same else 'NOT identical'} "
        f"(sha256 {digest(before)} / {digest(after)}).\n\n"
        "| epoch | out before | back before | out after | back after | out after / before | updates |\n"
        "|---|---|---|---|---|---|---|\n" + "\n".join(rows) + NOTE
    )
    print(body)
    write_section(a.section, f"Bytes shipped per epoch by the jobs mode of mixing ({a.section})", body)
    if not same:
        raise SystemExit("the delta-broadcast run differs from the full-broadcast run")


if __name__ == "__main__":
    main()
