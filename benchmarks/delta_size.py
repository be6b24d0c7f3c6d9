#!/usr/bin/env python
"""How large one shard's IPM delta is: the entries of ``W`` one shard-local epoch of the default
global model (DP-GT-BF-CA) changes, from the initial state, on every other training document
(the shard of a 2-shard split), and the bytes of the delta as float64 CSR next to the same rows
dense in float32.

    python benchmarks/delta_size.py /tmp/bench/jst_full

Prints the figures (no section in docs/benchmarks.md: it explains the mixing's memory there).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from sparkhc.features import read_features_local
from sparkhc.models import get_model_class
from sparkhc.spark import deltas
from sparkhc.taxonomy import Taxonomy


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("features")
    a = ap.parse_args()
    batch, spec = read_features_local(a.features)
    half = batch.subset(np.arange(0, len(batch), 2))
    tax = Taxonomy.load(f"{a.features}/taxonomy.tsv")
    m = get_model_class("global")(tax, spec.n_features, branching=True, update="cost_augmented", bias=0.3)
    m.set_state(m.init_state())
    base = {k: v.copy() for k, v in m.get_state().arrays.items()}
    t = time.perf_counter()
    counters = m.partial_fit(half, seed=1, epoch=0)
    secs = time.perf_counter() - t
    d = deltas.encode(m.get_state(), base, {"W": m.touched_rows_})
    assert d is not None
    W = d.arrays["W"]
    rows = int(np.count_nonzero(np.diff(W.indptr)))
    print(f"{len(half)} documents, epoch {secs:.1f} s, {int(counters['updates'])} updates")
    print(f"changed entries {W.nnz:,} in {rows:,} rows x {W.shape[1]:,} columns "
          f"({W.nnz / max(1, rows * W.shape[1]):.1%} of those rows)")
    print(f"delta as float64 CSR {W.data.nbytes + W.indices.nbytes + W.indptr.nbytes:,} bytes; "
          f"the same rows dense float32 {rows * W.shape[1] * 4:,} bytes")


if __name__ == "__main__":
    main()
