#!/usr/bin/env python
"""PECOS XR-Linear worker for ``benchmarks/peer_xmc.py``: runs INSIDE the PECOS virtualenv (``libpecos``,
never imported by the main interpreter, whose numpy / scipy it cannot share), one process per job.

    <pecos-venv>/bin/python benchmarks/_pecos_worker.py JOB.npz OUT.npz

``JOB.npz``: the CSR arrays of ``X`` (``X_data``, ``X_indices``, ``X_indptr``, ``X_shape``: every
document of the job, TF-IDF rows) and of ``Y`` (``Y_*``: the gold label rows of the same documents;
the rows of documents that are never trained on are empty), and ``job``: a JSON string
``{"fits": [{"train": [row, ...], "predict": [row, ...], "C": c}, ...], "threads": t, "seed": s}``.

Each fit: PIFA label embedding of the ``train`` rows (``LabelEmbeddingFactory.create(Y, X,
method="pifa")``), hierarchical k-means indexer (``Indexer.gen``, PECOS's defaults but ``seed`` and
``threads``), ``XLinearModel.train`` with ``Cp = Cn = C`` and ``threads``, then ``predict`` of the
``predict`` rows with PECOS's default ``only_topk`` / ``beam_size`` (10 / 10) and post-processor.
``OUT.npz``: per fit ``i`` the CSR arrays ``S{i}_*`` of the predicted scores (rows = the ``predict``
rows in their order, columns = labels) and ``meta``: a JSON string with each fit's ``train_seconds``
(embedding + indexer + training), ``predict_seconds`` and the versions. The CSR arrays are
written and read by ``peer_xmc.put_csr`` / ``get_csr`` (that module needs only numpy and scipy at
import, so this interpreter imports it too).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _annif_worker import _version  # noqa: E402 (standard library only at import)
from peer_xmc import get_csr, put_csr  # noqa: E402 (numpy / scipy only at import: fine in the PECOS interpreter)


def run(z: Any) -> dict[str, Any]:
    t0 = time.perf_counter()
    from pecos.xmc import Indexer, LabelEmbeddingFactory
    from pecos.xmc.xlinear.model import XLinearModel

    import_secs = time.perf_counter() - t0
    job = json.loads(str(z["job"]))
    X = get_csr(z, "X").astype(np.float32)
    Y = get_csr(z, "Y").astype(np.float32)
    threads, seed = int(job["threads"]), int(job["seed"])
    out: dict[str, Any] = {}
    meta: dict[str, Any] = {"fits": [], "import_seconds": import_secs, "pecos": _version("libpecos"),
                            "numpy": np.__version__}
    for i, fit in enumerate(job["fits"]):
        tr = np.asarray(fit["train"], dtype=np.int64)
        pr = np.asarray(fit["predict"], dtype=np.int64)
        C = float(fit["C"])
        Xtr, Ytr = X[tr], Y[tr]
        t0 = time.perf_counter()
        emb = LabelEmbeddingFactory.create(Ytr, Xtr, method="pifa")
        chain = Indexer.gen(emb, indexer_type="hierarchicalkmeans", seed=seed, threads=threads)
        model = XLinearModel.train(Xtr, Ytr, C=chain, Cp=C, Cn=C, threads=threads)
        train_secs = time.perf_counter() - t0
        t0 = time.perf_counter()
        S = model.predict(X[pr], threads=threads)
        pred_secs = time.perf_counter() - t0
        put_csr(out, f"S{i}", S)
        meta["fits"].append({"C": C, "n_train": int(tr.size), "train_seconds": train_secs,
                             "predict_seconds": pred_secs})
        print(f"_pecos_worker: fit {i + 1}/{len(job['fits'])}: C={C}, {tr.size} train docs {train_secs:.1f} s, "
              f"{pr.size} predicted {pred_secs:.1f} s", file=sys.stderr, flush=True)
    out["meta"] = np.asarray(json.dumps(meta))
    return out


def main(argv: list[str]) -> None:
    if len(argv) != 2:
        raise SystemExit("usage: _pecos_worker.py JOB.npz OUT.npz")
    with np.load(argv[0], allow_pickle=False) as z:
        out = run(z)
    np.savez(argv[1], **out)


if __name__ == "__main__":
    main(sys.argv[1:])
