#!/usr/bin/env python
"""Decoding throughput (documents/s) of exact DP, with and without branching features, next to the
X.W limit measured in the same run, for the synthetic JSTPlus-scale model (or any features folder).

    python benchmarks/bench_decode.py --features /tmp/bench/jst01 --docs 20000

The model weights are random but shaped and scaled like a trained DP-GT-BF model (W float32
``(V, n_edges)``, a fraction of nonzero rows; negative branching weights growing with k), so the
DP visits realistic label-set sizes. Timed in one process, one thread (OPENBLAS_NUM_THREADS=1):

* X.W: ``X[block] @ W`` over 2,048-row blocks (scipy CSR x dense, float32) -- the floor every
  decoder pays;
* decode: ``GlobalPA.decode`` (X.W + DP + leaf sets) with the compiled kernels and, for reference,
  the numpy DP (``SPARKHC_KERNELS=0`` path) on a subset.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from _common import command, loadavg, machine, now, write_section  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--features", required=True)
    ap.add_argument("--docs", type=int, default=20000, help="documents decoded (first N rows)")
    ap.add_argument("--numpy-docs", type=int, default=2048, help="documents for the numpy-DP reference")
    ap.add_argument("--section", default="decode")
    a = ap.parse_args()
    from sparkhc import kernels
    from sparkhc.batch import SparseBatch
    from sparkhc.features import features_taxonomy, read_features_local
    from sparkhc.models.base import ModelState
    from sparkhc.models.murawaki import GlobalPA

    tax = features_taxonomy(a.features)
    batch, spec = read_features_local(a.features, with_counts=False)
    X = batch.X[: a.docs].astype(np.float32)
    sub = SparseBatch(X, batch.doc_ids[: a.docs])
    rng = np.random.default_rng(1)
    V, E = spec.n_features, tax.n_nodes - 1
    W = np.zeros((V, E), dtype=np.float32)
    rows = rng.random(V) < 0.6
    for a0 in range(0, V, 4096):  # float32 blocks: no float64 temporary of the size of W
        blk = np.zeros((min(V, a0 + 4096) - a0, E), dtype=np.float32)
        r = rows[a0 : a0 + 4096]
        blk[r] = rng.standard_normal((int(r.sum()), E), dtype=np.float32) * np.float32(0.05)
        blk -= np.float32(0.01)  # most edges score negative, as in a trained model
        W[a0 : a0 + 4096] = blk
    res = []
    # X.W limit
    t0 = time.perf_counter()
    for b in range(0, X.shape[0], 2048):
        X[b : b + 2048] @ W
    xw = time.perf_counter() - t0
    lx = loadavg()
    res.append(f"| X.W (scipy, float32) | {X.shape[0]} | {xw:.2f} | {X.shape[0] / xw:.0f} | 1.00 | {lx} |")
    print(res[-1], flush=True)
    for bf_on in (False, True):
        model = GlobalPA(tax, V, branching=bf_on)
        arrays = {"W": W}
        if bf_on:
            bf = np.zeros((tax.n_nodes + 1, 4), dtype=np.float32)
            bf[:, :] = -0.05 * np.arange(1, 5, dtype=np.float32)
            arrays["bf"] = bf
        model.set_state(ModelState(arrays, {}, "mean"))
        model.decode(SparseBatch(X[:64], sub.doc_ids[:64]), return_scores=False)  # JIT warm-up
        for label, on, n in (("kernel", True, X.shape[0]), ("numpy DP", False, min(a.numpy_docs, X.shape[0]))):
            kernels.ENABLED = on and kernels.HAVE_NUMBA
            part = SparseBatch(X[:n], sub.doc_ids[:n])
            t0 = time.perf_counter()
            sets, _ = model.decode(part, return_scores=False)
            secs = time.perf_counter() - t0
            ld = loadavg()
            mean_k = np.mean([len(s) for s in sets])
            name = f"DP{'-BF' if bf_on else ''} decode ({label})"
            res.append(f"| {name} | {n} | {secs:.2f} | {n / secs:.0f} | {(n / secs) / (X.shape[0] / xw):.2f} | {ld} |")
            print(res[-1], f"mean labels {mean_k:.2f}", flush=True)
        kernels.ENABLED = kernels.HAVE_NUMBA
    body = (
        f"Command: `{command()}`  \nMachine: {machine()}  \nDate: {now()}\n\n"
        f"Model: {V} features x {E} edges (float32, {W.nbytes / 2**30:.2f} GiB), branching R = 3. One process, "
        "one thread. The ratio is decode docs/s over X.W docs/s of the same run (target: >= 0.5).\n\n"
        "| what | docs | seconds | docs/s | ratio to X.W | load avg |\n|---|---|---|---|---|---|\n" + "\n".join(res)
    )
    write_section(a.section, f"Decoding throughput ({a.section})", body)


if __name__ == "__main__":
    main()
