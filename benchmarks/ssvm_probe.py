#!/usr/bin/env python
"""Probe (not product), issue 17 on 20 Newsgroups: does a regularized structured objective close the
default's gap to LIBLINEAR on validation data? A structural SVM over single-path label sets,
features ``phi(x) (x) edges`` of the model taxonomy (or of the taxonomy flattened to its leaves),
Hamming loss over the edges, trained by block-coordinate Frank-Wolfe (Lacoste-Julien, Jaggi,
Schmidt & Pletscher 2013, Alg. 4; loss-augmented decoding by enumerating the leaf paths) for
``--epochs`` passes, next to scikit-learn's Crammer-Singer multi-class SVM (an exact dual solver)
and one-vs-rest LinearSVC, all on the same documents.

    python benchmarks/ssvm_probe.py --features /tmp/acc/20newsgroups/features --C 1,10 --epochs 20

Validation data only: the training part less the product's seeded 10% validation slice
(:func:`sparkhc.spark.hashing.validation_ids`, seed 0), accuracy on the slice; the test split is not
read. Single-label corpora only. ``w_i = phi_i (x) c_i / (lambda n)`` stays rank one for every
example, so only ``c_i`` (n x n_edges) is stored; ``lambda = 1 / (C n)``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import loadavg, write_table_section  # noqa: E402


def bcfw(Xf, yf, Xv, yv, P, C, epochs, seed=0):
    """Accuracy on (Xv, yv) after ``epochs`` BCFW passes: (last iterate, mean of the epoch-end iterates)."""
    n, d = Xf.shape
    L = P @ P.T
    D = np.diag(L)[:, None] + np.diag(L)[None, :] - 2 * L  # Hamming loss between the paths
    phi2 = np.asarray(Xf.multiply(Xf).sum(axis=1)).ravel()
    lam = 1.0 / (C * n)
    W = np.zeros((d, P.shape[1]))
    Wbar = np.zeros_like(W)
    Ci = np.zeros((n, P.shape[1]))
    li = np.zeros(n)
    rng = np.random.default_rng(seed)
    for ep in range(epochs):
        for i in rng.permutation(n):
            a, b = Xf.indptr[i], Xf.indptr[i + 1]
            idx, val = Xf.indices[a:b], Xf.data[a:b]
            s = val @ W[idx]
            ystar = int(np.argmax(D[yf[i]] + P @ s))  # loss-augmented decoding
            cs = P[yf[i]] - P[ystar]
            ls = D[yf[i], ystar] / n
            dc = Ci[i] - cs
            den = phi2[i] * (dc @ dc) / (lam * n * n)
            g = 0.0 if den <= 0 else min(1.0, max(0.0, ((s @ dc) / n - (li[i] - ls)) / den))
            if g > 0:
                newc = (1 - g) * Ci[i] + g * cs
                W[idx] += np.outer(val, (newc - Ci[i]) / (lam * n))
                Ci[i] = newc
                li[i] = (1 - g) * li[i] + g * ls
        Wbar = (Wbar * ep + W) / (ep + 1)
    return tuple(100 * float((np.argmax((Xv @ w) @ P.T, axis=1) == yv).mean()) for w in (W, Wbar))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--features", required=True)
    ap.add_argument("--C", default="1,10")
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--section", default="ssvm-probe")
    a = ap.parse_args()
    from sklearn.svm import LinearSVC

    from sparkhc.features import Selection, features_taxonomy, model_taxonomy, read_features_local
    from sparkhc.spark.hashing import validation_ids
    from sparkhc.taxonomy import Taxonomy

    batch, _ = read_features_local(a.features, with_counts=False)
    tr = Selection("train").subset(batch)
    held = validation_ids(tr.doc_ids, 0.1, 0)
    fit, val = tr.subset(np.flatnonzero(~held)), tr.subset(np.flatnonzero(held))
    tree = model_taxonomy(features_taxonomy(a.features), [list(x) for x in fit.labels or []])
    deepest = [tree.names[c] for c in tree.leaves]
    flat = Taxonomy.from_edges([("ROOT", x) for x in sorted(deepest)], root="ROOT")

    def target(b):
        out = []
        for labs in b.labels or []:
            deep = [x for x in labs if x in set(deepest)]
            if len(deep) != 1:
                raise SystemExit("ssvm_probe: single-label corpora only")
            out.append(deep[0])
        return np.array(out)

    yf_names, yv_names = target(fit), target(val)
    Xf = sp.hstack([sp.csr_matrix(fit.X, dtype=np.float64), np.ones((len(fit), 1))]).tocsr()
    Xv = sp.hstack([sp.csr_matrix(val.X, dtype=np.float64), np.ones((len(val), 1))]).tocsr()
    rows = []
    Cs = [float(c) for c in a.C.split(",")]
    for tname, tax in (("model taxonomy", tree), ("flattened to its leaves", flat)):
        leaves = np.flatnonzero(tax.is_leaf)
        P = tax.ancestor_matrix().toarray()[:, 1:].astype(np.float64)[leaves]
        pos = {tax.names[c]: j for j, c in enumerate(leaves)}
        yf = np.array([pos[x] for x in yf_names])
        yv = np.array([pos[x] for x in yv_names])
        for C in Cs:
            t0 = time.perf_counter()
            last, avg = bcfw(Xf, yf, Xv, yv, P, C, a.epochs)
            row = [f"structural SVM, BCFW, {tname}", f"C={C}", f"{a.epochs}", f"{last:.2f}", f"{avg:.2f}",
                   f"{time.perf_counter() - t0:.1f}", loadavg()]
            print(" | ".join(row), flush=True)
            rows.append("| " + " | ".join(row) + " |")
    for name, kw in (("Crammer-Singer multi-class SVM (scikit-learn LinearSVC)", {"multi_class": "crammer_singer"}),
                     ("one-vs-rest LinearSVC (argmax)", {})):
        for C in Cs:
            t0 = time.perf_counter()
            acc = 100 * float((LinearSVC(C=C, **kw).fit(fit.X, yf_names).predict(val.X) == yv_names).mean())
            row = [name, f"C={C}", "-", f"{acc:.2f}", "-", f"{time.perf_counter() - t0:.1f}", loadavg()]
            print(" | ".join(row), flush=True)
            rows.append("| " + " | ".join(row) + " |")
    write_table_section(
        a.section, f"A structural SVM on validation data ({a.section})",
        f"Validation accuracy (percent) on the product's seeded 10% slice of the training part ({len(fit)} fit / "
        f"{len(val)} validation documents; the test split is not read). BCFW: last iterate and the mean of the "
        "epoch-end iterates; lambda = 1 / (C n), Hamming loss over the edges (2 per wrong leaf when flattened).",
        ["system", "regularization", "epochs", "accuracy", "accuracy, averaged", "train s", "load avg"], rows)


if __name__ == "__main__":
    main()
