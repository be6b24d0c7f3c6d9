#!/usr/bin/env python
"""An epoch, a scoring pass and decoding of the same global model, one thread, the same documents
(issue 33, point 2: "an epoch within 3x one scoring pass of the same model; decoding at least 0.5x
that pass").

    python benchmarks/bench_mesh_passes.py --model /tmp/mesh/model_bench --features /tmp/mesh/features \\
        --docs 20000 --section mesh-passes

The model is a saved one (e.g. the one epoch of ``train-mesh300k-sparse``), so its weights have the
size and pattern a real training gives. On a seeded sample of ``--docs`` training documents, in this
process and one thread, each timed on its own:

- **scoring pass** (the physical limit): the edge scores ``X W`` of every document, the product
  every training step and every decoding starts from (:func:`sparkhc.kernels.csr_scores` for the
  sparse layout, the dense product otherwise), in blocks of ``DECODE_CHUNK`` documents;
- **epoch**: one more training epoch of the model on the sample (``GlobalPA.partial_fit``: per
  document the scores, the exact DP of the cost-augmented scores, the PA step; the sample's support
  joins the stored entries first, as in every epoch of the sparse layout);
- **decoding**: ``GlobalPA.decode`` without scores, what ``sparkhc predict`` runs in each task
  (the sparse layout: :func:`sparkhc.kernels.csr_decode`, the scores and the exact DP fused per
  document, the selected leaves found by a walk over the picked children).

Documents per second of each and the ratios epoch / scoring and decoding / scoring (in throughput):
those of each pass's fastest run, and the median (and range) of the ratios within each repeat (the
passes of one repeat run within a minute of each other, so a change in the machine's speed between
repeats, about a fifth within half an hour here, moves both terms of that repeat's ratio alike).
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import numpy as np  # noqa: E402
from _common import command, loadavg, machine, now, write_section  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--features", required=True)
    ap.add_argument("--docs", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=3, help="time each pass this many times, keep the fastest")
    ap.add_argument("--threads", type=int, default=1,
                    help="also time decoding with decode_threads = N (the epoch selection's validation scoring)")
    ap.add_argument("--section", default="")
    a = ap.parse_args()

    import scipy.sparse as sp

    from sparkhc.features import read_features_local
    from sparkhc.models.murawaki import DECODE_CHUNK, _edge_scores
    from sparkhc.persistence import load_model

    load0 = loadavg()
    model, _meta = load_model(a.model)
    batch, _ = read_features_local(a.features, with_counts=False)
    tr = np.flatnonzero(batch.extra["split"] == "train")
    rng = np.random.default_rng(a.seed)
    sample = batch.subset(np.sort(rng.choice(tr, size=min(a.docs, tr.size), replace=False)))
    n = len(sample)
    W = model.get_state().arrays["W"]
    layout = "sparse (CSR)" if sp.issparse(W) else "dense"
    nw = W.nnz if sp.issparse(W) else W.size
    model.decode(sample.subset(np.arange(min(64, n))), return_scores=False)  # compile the kernels

    X = model._prepare(sample)  # the model's own input: scaled rows with the bias column
    positive = float((_edge_scores(X[:DECODE_CHUNK], W) > 0).sum(axis=1).mean())  # the DP's work grows with it
    before = copy.deepcopy(model.get_state())
    per: dict[str, list[float]] = {"score": [], "decode": [], "threads": [], "epoch": []}  # each repeat's times
    out: dict[str, float] = {}
    for _ in range(a.repeat):
        t0 = time.perf_counter()
        for s in range(0, n, DECODE_CHUNK):
            _edge_scores(X[s:s + DECODE_CHUNK], W)
        per["score"].append(time.perf_counter() - t0)

        t0 = time.perf_counter()
        model.decode(sample, return_scores=False)
        per["decode"].append(time.perf_counter() - t0)
        if a.threads > 1:
            model.decode_threads = a.threads
            t0 = time.perf_counter()
            model.decode(sample, return_scores=False)
            per["threads"].append(time.perf_counter() - t0)
            model.decode_threads = 1

        model.set_state(copy.deepcopy(before))
        t0 = time.perf_counter()
        out = model.partial_fit(sample, seed=a.seed, epoch=2)
        per["epoch"].append(time.perf_counter() - t0)
        model.set_state(copy.deepcopy(before))
        W = model.get_state().arrays["W"]
    load1 = loadavg()
    # the fastest of each: the machine's other work only slows a pass down
    t_score, t_decode, t_epoch = min(per["score"]), min(per["decode"]), min(per["epoch"])
    t_threads = min(per["threads"], default=float("inf"))

    def rate(t: float) -> str:
        return f"{n / t:,.0f} docs/s ({t:.1f} s)"

    def within(num: str, den: str) -> str:
        """The median and range of ``num / den`` over the repeats (each repeat's own times)."""
        r = np.array(per[num]) / np.array(per[den])
        return f"median {np.median(r):.2f}x ({r.min():.2f}-{r.max():.2f}) within each of {r.size} repeats"

    lines = [
        f"| scoring pass (`X W`, blocks of {DECODE_CHUNK}) | {rate(t_score)} | 1 |",
        f"| training epoch (`partial_fit`: scores, cost-augmented DP, PA steps) | {rate(t_epoch)} | "
        f"epoch = {t_epoch / t_score:.2f}x the pass's time; {within('epoch', 'score')} |",
        f"| decoding (`decode`: scores + exact DP{', fused per document' if layout.startswith('sparse') else ''}) "
        f"| {rate(t_decode)} | "
        f"{t_score / t_decode:.2f}x the pass's throughput; {within('score', 'decode')} |",
    ]
    if a.threads > 1:
        lines.append(f"| decoding on {a.threads} threads (`decode_threads`: the epoch selection's validation scoring, "
                     f"blocks of {DECODE_CHUNK} on a thread pool) | {rate(t_threads)} | {t_score / t_threads:.2f}x the "
                     f"pass's throughput ({within('score', 'threads')}); {t_decode / t_threads:.2f}x one thread's decoding |")
    print("\n".join(lines))
    print(f"updates {out.get('updates')} of {n}")
    if a.section:
        body = (
            f"Command: `{command()}`  \nMachine: {machine()}  \nDate: {now()}; load average {load0} at the start, "
            f"{load1} at the end\n\n"
            f"Model `{a.model}`: {layout} weights, {nw:,} stored, {W.shape[0]:,} rows x {W.shape[1]:,} edges. "
            f"Sample: {n:,} training documents (seed {a.seed}), one thread (but the last row), each pass timed on its own, the "
            f"fastest of {a.repeat} runs (the epoch from the same saved state each time; the ratios of the fastest runs, "
            "then the median of each repeat's own) "
            f"(the epoch updated {int(out.get('updates', 0)):,} of them). Edges scoring above zero: "
            f"{positive:,.0f} a document on average (of {W.shape[1]:,}; with branching features the DP "
            "sums the positive offers beyond a node's top R + 1 in a second pass only where the option "
            "'more than R children' can win).\n\n"
            "| pass | throughput | against the scoring pass |\n|---|---|---|\n" + "\n".join(lines) + "\n"
        )
        write_section(a.section, "An epoch and decoding against one scoring pass (MeSH-sized model)", body)


if __name__ == "__main__":
    main()
