#!/usr/bin/env python
"""Peers side by side on the same features, same machine, same run: sparkhc DP-GT-BF (IPM on
Spark), LIBLINEAR one-vs-rest (scikit-learn LinearSVC, one process, no Spark), Spark MLlib binary
relevance (one LogisticRegression per label on the same Parquet features), Vowpal Wabbit
(multilabel one-against-all) and HiClass (local classifier per parent node with LinearSVC;
5.x is single-path only, so only on single-label data).

    python benchmarks/bench_peers.py --features 20newsgroups=/tmp/bench/feat_20newsgroups \\
        --features reuters21578=/tmp/bench/feat_reuters21578 --peers sparkhc,liblinear,mllib,vw,hiclass

Training and prediction seconds, hF and label-based micro-F1 on the test split. Label space: the
leaves of the model taxonomy (virtual ``/_self`` leaves for internal deepest labels), predictions
of every peer closed upward for hF. Where a peer would take too long (``--max-labels``,
``--mllib-labels``) it is trained on a random sample of labels and its time extrapolated linearly
to all labels; such rows are marked "sampled" and carry no accuracy. The Spark session start-up is
excluded from the Spark rows and reported separately.
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
import scipy.sparse as sp  # noqa: E402
from _common import MemorySampler, command, loadavg, machine, now, write_section  # noqa: E402


def closure_matrix(tax, leaf_cols: np.ndarray) -> sp.csr_matrix:
    """(n_leaf_cols, n_nodes) 0/1: the ancestors-or-self (root excluded) of every leaf column."""
    A = tax.ancestor_matrix().tocsr()[leaf_cols].astype(np.float32)
    A = A.tolil()
    A[:, 0] = 0
    return A.tocsr()


def scores(tax, leaf_cols: np.ndarray, Y: np.ndarray, P: np.ndarray) -> tuple[float, float]:
    """hF (over tree(m)) and label-based micro-F1 (over the leaf columns) of 0/1 matrices."""
    A = closure_matrix(tax, leaf_cols)
    T = (sp.csr_matrix(Y.astype(np.float32)) @ A) > 0
    Q = (sp.csr_matrix(P.astype(np.float32)) @ A) > 0
    inter = T.multiply(Q).sum()
    hp = inter / max(Q.sum(), 1)
    hr = inter / max(T.sum(), 1)
    hf = 2 * hp * hr / max(hp + hr, 1e-12)
    tp = float((Y & P).sum())
    mf = 2 * tp / max(float(Y.sum() + P.sum()), 1)
    return float(hf), float(mf)


def load(path: str):
    from sparkhc.features import features_taxonomy, model_taxonomy, read_features_local

    tax = features_taxonomy(path)
    batch, spec = read_features_local(path, with_counts=False)
    split = batch.extra["split"]
    tr, te = np.flatnonzero(split == "train"), np.flatnonzero(split == "test")
    if te.size == 0 and "fold" in batch.extra:  # cross-validation corpora: fold 0 is the test part
        fold = batch.extra["fold"]
        tr, te = np.flatnonzero(fold != 0), np.flatnonzero(fold == 0)
    # /_self leaves for internal deepest labels of the training documents (as sparkhc train does)
    mtax = model_taxonomy(tax, [batch.labels[int(i)] for i in tr])
    sets = batch.leaf_sets(mtax)
    leaf_cols = np.flatnonzero(mtax.is_leaf)
    col_of = np.full(mtax.n_nodes, -1)
    col_of[leaf_cols] = np.arange(leaf_cols.size)
    Y = np.zeros((len(batch), leaf_cols.size), dtype=bool)
    for i, m in enumerate(sets):
        Y[i, col_of[np.asarray(m, dtype=np.int64)]] = True
    return batch, spec, mtax, leaf_cols, Y, tr, te


def run_liblinear(X, Y, tr, te, max_labels, rng, C=1.0, threads=1):
    """One LinearSVC per label (``threads``: fitted that many at a time; LIBLINEAR releases the GIL)."""
    from concurrent.futures import ThreadPoolExecutor

    from sklearn.svm import LinearSVC

    from sparkhc.decoding import flat_select

    L = Y.shape[1]
    cols = np.arange(L) if L <= max_labels else np.sort(rng.choice(L, max_labels, replace=False))
    S = np.full((te.size, L), -1e9)
    Xtr, Xte = X[tr], X[te]

    def fit(j):
        y = Y[tr, j]
        return LinearSVC(C=C).fit(Xtr, y) if y.any() and not y.all() else bool(y.all())

    t0 = time.perf_counter()
    with ThreadPoolExecutor(max(1, int(threads))) as ex:
        fitted = list(ex.map(fit, cols))
    t_fit = time.perf_counter() - t0
    for j, clf in zip(cols, fitted, strict=True):
        S[:, j] = clf.decision_function(Xte) if not isinstance(clf, bool) else (1.0 if clf else -1e9)
    t_pred = time.perf_counter() - t0 - t_fit
    f = L / cols.size
    # decoded like FLAT and the experiment's SVM row: every positive label, else the best one
    P = flat_select(S)
    return t_fit * f, t_pred * f, (P if cols.size == L else None), cols.size < L


def run_vw(X, Y, tr, te, passes=5):
    import vowpalwabbit

    L = Y.shape[1]
    ws = vowpalwabbit.Workspace(f"--multilabel_oaa {L} --quiet --loss_function logistic --passes 1 -b 20")

    def line(i, with_label):
        a, b = X.indptr[i], X.indptr[i + 1]
        feats = " ".join(f"{k}:{v:.6g}" for k, v in zip(X.indices[a:b], X.data[a:b], strict=True))
        lab = ",".join(str(j) for j in np.flatnonzero(Y[i])) if with_label else ""
        return f"{lab} | {feats}"

    tr_lines = [line(i, True) for i in tr]
    te_lines = [line(i, False) for i in te]
    t0 = time.perf_counter()
    for _ in range(passes):
        for s in tr_lines:
            ws.learn(s)
    t1 = time.perf_counter()
    P = np.zeros((te.size, L), dtype=bool)
    for r, s in enumerate(te_lines):
        pred = ws.predict(s)
        if pred:
            P[r, list(pred)] = True
    t2 = time.perf_counter()
    ws.finish()
    return t1 - t0, t2 - t1, P


def run_hiclass(X, Y, tr, te, mtax, leaf_cols):
    from hiclass import LocalClassifierPerParentNode
    from sklearn.svm import LinearSVC

    if (Y[tr].sum(axis=1) != 1).any():
        return None
    names = mtax.names

    def path(c):
        out = []
        while c > 0:
            out.append(names[c])
            c = mtax.parent[c]
        return out[::-1]

    leaf_paths = [path(int(c)) for c in leaf_cols]
    depth = max(len(p) for p in leaf_paths)
    pad = [p + [""] * (depth - len(p)) for p in leaf_paths]
    ytr = np.array([pad[int(np.flatnonzero(Y[i])[0])] for i in tr])
    clf = LocalClassifierPerParentNode(local_classifier=LinearSVC(C=1.0), n_jobs=1)
    t0 = time.perf_counter()
    clf.fit(X[tr], ytr)
    t1 = time.perf_counter()
    pred = clf.predict(X[te])
    t2 = time.perf_counter()
    key = {tuple(p): j for j, p in enumerate(pad)}
    P = np.zeros((te.size, Y.shape[1]), dtype=bool)
    for r, row in enumerate(pred):
        j = key.get(tuple(str(x) for x in row))
        if j is not None:
            P[r, j] = True
    return t1 - t0, t2 - t1, P


def spark_session(master):
    from sparkhc.spark.session import get_session

    t0 = time.perf_counter()
    spark = get_session("bench-peers", master=master, extra_conf={"spark.driver.memory": "6g",
                                                                  "spark.driver.maxResultSize": "0"})
    spark.range(1).count()
    return spark, time.perf_counter() - t0


def run_sparkhc(spark, path, mtax, spec, batch, leaf_cols, te, epochs, shards, workdir, cv=False):
    """``sparkhc train`` as the CLI runs it (the product's default global model, DP-GT-BF-CA:
    features directory -> saved model directory), timed from the call to the saved model; then
    the saved model decodes the test split in one process."""
    from sparkhc.config import load_config
    from sparkhc.persistence import load_model
    from sparkhc.spark.pipelines import train

    cfg = load_config(overrides=[f"train.epochs={epochs}", f"train.shards={shards}", "train.checkpoint=false"])
    out = Path(workdir) / f"model-{Path(path).name}"
    t0 = time.perf_counter()
    sel = {"split": None, "exclude_fold": 0} if cv else {"split": "train"}
    train(spark, cfg, path, out, overwrite=True, **sel)
    t1 = time.perf_counter()
    model, _ = load_model(out)
    t1b = time.perf_counter()
    sets, _ = model.decode(batch.subset(te), return_scores=False)
    t2 = time.perf_counter()
    col_of = np.full(mtax.n_nodes, -1)
    col_of[leaf_cols] = np.arange(leaf_cols.size)
    P = np.zeros((te.size, leaf_cols.size), dtype=bool)
    names = model.taxonomy.names
    for r, m in enumerate(sets):
        P[r, col_of[[mtax.id(names[int(c)]) for c in m]]] = True
    return t1 - t0, t2 - t1b, P


def run_mllib(spark, path, Y_cols_ids, n_sample, rng, mtax, leaf_cols):
    from pyspark.ml.classification import LogisticRegression
    from pyspark.ml.linalg import SparseVector, VectorUDT
    from pyspark.sql import functions as F

    from sparkhc.features import Selection
    from sparkhc.spark.io import read_features
    from sparkhc.spark.pipelines import select_rows

    df, spec = read_features(spark, path)
    V = spec.n_features
    to_vec = F.udf(lambda i, v: SparseVector(V, i, v), VectorUDT())
    tr = select_rows(df, Selection("train")).select(to_vec("indices", "values").alias("features"), "labels").cache()
    tr.count()
    L = leaf_cols.size
    cols = np.sort(rng.choice(L, min(n_sample, L), replace=False))
    names = [mtax.names[int(leaf_cols[j])] for j in cols]
    te = select_rows(df, Selection("test")).select("doc_id", to_vec("indices", "values").alias("features")).cache()
    te.count()
    t0 = time.perf_counter()
    models = []
    for nm in names:
        base = nm[: -len("/_self")] if nm.endswith("/_self") else nm
        d = tr.withColumn("label", F.array_contains("labels", base).cast("double"))
        models.append(LogisticRegression(maxIter=100, regParam=0.0).fit(d))
    secs = time.perf_counter() - t0
    P = None
    pred_secs = float("nan")
    if cols.size == L:
        # every label trained: decode like FLAT (every label with p > 0.5, else the most probable)
        from pyspark.ml.functions import vector_to_array

        from sparkhc.decoding import flat_select

        t1 = time.perf_counter()
        doc_ids = [r["doc_id"] for r in te.select("doc_id").collect()]
        S = np.zeros((len(doc_ids), L))
        for j, m in enumerate(models):
            rows = m.transform(te).select("doc_id", vector_to_array("probability")[1].alias("p")).collect()
            pos = {r["doc_id"]: r["p"] for r in rows}
            S[:, j] = [pos[d] - 0.5 for d in doc_ids]
        pred_secs = time.perf_counter() - t1
        P = flat_select(S)
        P = (doc_ids, P)
    tr.unpersist()
    te.unpersist()
    return secs * L / cols.size, cols.size, L, P, pred_secs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--features", action="append", default=[], help="NAME=DIR (repeatable)")
    ap.add_argument("--peers", default="sparkhc,liblinear,mllib,vw,hiclass")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--shards", type=int, default=2)
    ap.add_argument("--max-labels", type=int, default=400, help="LIBLINEAR: sample labels above this")
    ap.add_argument("--mllib-labels", type=int, default=4, help="MLlib: labels trained (time extrapolated)")
    ap.add_argument("--mllib-on", default="", help="comma-separated data names for MLlib (default: all)")
    ap.add_argument("--section", default="peers")
    ap.add_argument("--workdir", default="/tmp/bench/peers-work", help="sparkhc models are written here")
    a = ap.parse_args()
    Path(a.workdir).mkdir(parents=True, exist_ok=True)
    peers = a.peers.split(",")
    rng = np.random.default_rng(0)
    rows, notes = [], []
    spark = None
    if "sparkhc" in peers or "mllib" in peers:
        spark, start = spark_session(a.master)
        notes.append(f"Spark session start-up ({a.master}): {start:.1f} s (load {loadavg()}), excluded from the rows")

    def row(dname, peer, fit, pred, P, sampled, ctx):
        batch, mtax, leaf_cols, Y, te = ctx
        if P is not None and not sampled:
            hf, mf = scores(mtax, leaf_cols, Y[te], P)
            acc = f"{hf:.4f} | {mf:.4f}"
        else:
            acc = "n/a | n/a"
        mark = " (sampled labels, extrapolated)" if sampled else ""
        rows.append(f"| {dname} | {peer}{mark} | {fit:.1f} | {pred:.1f} | {acc} | {loadavg()} |")
        print(rows[-1], flush=True)

    with MemorySampler() as mem:
        for item in a.features:
            dname, path = item.split("=", 1)
            batch, spec, mtax, leaf_cols, Y, tr, te = load(path)
            X = batch.X.astype(np.float32).tocsr()
            ctx = (batch, mtax, leaf_cols, Y, te)
            print(f"[{dname}] {tr.size} train / {te.size} test docs, {leaf_cols.size} leaf labels, "
                  f"{spec.n_features} features", flush=True)
            for peer in peers:
                try:
                    if peer == "sparkhc":
                        # twice: the first training of a session pays the JVM's and the Python
                        # workers' warm-up (imports, JIT cache loading); a service retraining
                        # in a live session sees the second figure
                        for when in ("first in session", "again, same session"):
                            f, p, P = run_sparkhc(spark, path, mtax, spec, batch, leaf_cols, te, a.epochs, a.shards,
                                                  a.workdir, cv=not (batch.extra["split"] == "test").any())
                            row(dname, f"sparkhc DP-GT-BF-CA (sparkhc train) {a.master}, {a.epochs} epochs, "
                                f"{a.shards} shards, {when}", f, p, P, False, ctx)
                    elif peer == "liblinear":
                        f, p, P, smp = run_liblinear(X, Y, tr, te, a.max_labels, rng)
                        row(dname, "LIBLINEAR OvR (LinearSVC C=1, 1 process)", f, p, P, smp, ctx)
                    elif peer == "mllib" and a.mllib_on and dname not in a.mllib_on.split(","):
                        continue
                    elif peer == "mllib":
                        f, k, L, DP, p = run_mllib(spark, path, None, a.mllib_labels, rng, mtax, leaf_cols)
                        P = None
                        if DP is not None:  # rows in the test order of ``batch``
                            where = {d: i for i, d in enumerate(DP[0])}
                            P = DP[1][[where[d] for d in batch.doc_ids[te]]]
                        row(dname, f"MLlib BR LogisticRegression {a.master} ({k} of {L} labels)", f, p,
                            P, k < L, ctx)
                    elif peer == "vw":
                        f, p, P = run_vw(X, Y, tr, te)
                        row(dname, "Vowpal Wabbit --multilabel_oaa (5 passes, Python API)", f, p, P, False, ctx)
                    elif peer == "hiclass":
                        r = run_hiclass(X, Y, tr, te, mtax, leaf_cols)
                        if r is None:
                            notes.append(f"{dname}: HiClass 5.x skipped (multi-label data; 5.x is single-path)")
                            print(notes[-1])
                            continue
                        f, p, P = r
                        row(dname, "HiClass LCPPN + LinearSVC", f, p, P, False, ctx)
                except Exception as e:  # a peer failing must not lose the other rows
                    notes.append(f"{dname} {peer}: failed: {type(e).__name__}: {str(e)[:300]}")
                    print(notes[-1], flush=True)
    notes.append(mem.summary())
    if spark is not None:
        spark.stop()
    body = (
        f"Command: `{command()}`  \nMachine: {machine()}  \nDate: {now()}\n\n"
        "Train/predict seconds on the train/test splits of the same features; hF over tree(m) and "
        "label-based micro-F1 over the leaf labels of the test split.\n\n"
        "| data | system | train s | predict s | hF | LB micro-F1 | load avg |\n|---|---|---|---|---|---|---|\n"
        + "\n".join(rows) + "\n\n" + "\n".join(f"- {n}" for n in notes)
    )
    write_section(a.section, f"Peers ({a.section})", body)


if __name__ == "__main__":
    main()
