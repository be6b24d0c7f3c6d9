#!/usr/bin/env python
"""One comparison command (issue 17, point 4): sparkhc against tuned peers on the same features, the
same folds/splits, in one process tree.

    python benchmarks/compare.py --features rcv1v2_subset=/tmp/peers/rcv1v2_subset \\
        --features reuters21578=/tmp/peers/reuters21578 --features 20newsgroups=/tmp/peers/20newsgroups

Rows (every choice is made on data carved out of the training part of the fold/split; the test part
is read once, to score):

- ``sparkhc defaults``: ``sparkhc train`` with the shipped configuration (no per-corpus setting).
- ``sparkhc tuned``: ``sparkhc tune`` (``sparkhc.ml.tuning.tune``: Spark's CrossValidator over a
  small grid, ``--sparkhc-grid``, on the training documents only; chosen by validation hF), refit on
  all training documents.
- ``LIBLINEAR C=1``: one-vs-rest LinearSVC (scikit-learn's LIBLINEAR) per scored label, C = 1.
- ``LIBLINEAR tuned C``: C chosen by inner k-fold CV on the training part (criterion: LB micro-F1
  of the out-of-fold predictions), refit on the whole training part.
- ``+ SCut`` / ``+ SCutFBR.1``: the same models with a threshold per label fitted on the out-of-fold
  scores of the chosen C (Yang 2001; Lewis et al. 2004, JMLR 5, Sect. 5): SCut takes the threshold
  that maximises the label's F1 on those scores; SCutFBR.1 replaces it by the score of the
  top-ranked held-out document when that best F1 is below ``fbr``.
- ``MLlib BR``: one ``pyspark.ml`` LogisticRegression per scored label, its ``regParam`` chosen by
  MLlib's own CrossValidator (default evaluator: areaUnderROC) on the training part.
- ``HiClass``: local classifier per parent node with LinearSVC (C = 1), single-label data only.
- ``Annif Omikuji Parabel`` / ``Annif Omikuji Bonsai`` (rows ``annif_parabel``, ``annif_bonsai``;
  ``benchmarks/peer_annif.py``): Annif 1.4 (``annif[omikuji]``, in its own virtualenv, run as a
  subprocess; a bench-only peer) on the documents' raw texts (read from the corpus's
  ``docs.jsonl.gz`` under ``--data-dir``; token-only corpora: the tokens joined with spaces),
  analyzer ``snowball(english)``, the same label space as the one-vs-rest peers (gold closed upward).
  Parabel = Annif's Omikuji defaults; Bonsai = Annif's documented Bonsai settings
  (``cluster_balanced=False, cluster_k=100, max_depth=3``). ``limit`` and ``threshold`` are chosen as
  ``annif optimize`` does (limits 1..15, thresholds 0.00..0.95 by 0.05, document-averaged F1) on a
  seeded 10 % validation slice of the training part (Annif trained on the other 90 %), then Annif is
  retrained on the whole training part; a test document keeps at most ``limit`` suggestions scoring at
  least ``threshold``, none when none passes (Annif's rule, no FLAT fallback). Install:
  ``python -m venv .venv-annif && .venv-annif/bin/pip install 'annif[omikuji]==1.4.*'`` (or set
  ``ANNIF_PYTHON``); ``NLTK_DATA`` defaults to ``../shared/peers/nltk_data`` (NLTK's ``punkt_tab``).
  The default ``--rows`` include them when that interpreter exists (otherwise a note says they were
  skipped).
- ``napkinXC PLT`` / ``PECOS XR-Linear`` (rows ``napkinxc``, ``pecos``; ``benchmarks/peer_xmc.py``):
  label-tree peers on the same TF-IDF features and label space as the one-vs-rest peers, with
  ``--peer-threads`` threads (default: the cores of ``--master``, 2 for ``local[2]``). napkinXC 0.7
  (the ``bench`` extra) runs in this process: PLT, logistic loss. PECOS 1.2 (``libpecos``) runs in
  its own virtualenv as a subprocess (``$PECOS_PYTHON``, else ``.venv-pecos/bin/python``; install:
  ``peer_xmc.PECOS_INSTALL``): PIFA embedding, hierarchical k-means, XR-Linear. Their C
  (napkinXC's ``liblinear_c`` in 1, 4, 16, 64; PECOS's ``Cp = Cn`` in 1, 4, 16) and their prediction rule
  (scores of at least a threshold in 0.05..0.95, else the top label) are chosen together by LB
  micro-F1 on sparkhc's own validation slice of the training part
  (``sparkhc.spark.hashing.validation_ids(doc_ids, 0.1, seed, 0)``), then the peer is refit on the
  whole training part. The default ``--rows`` include each when it is installed (otherwise a note
  says it was skipped).

Label space of the one-vs-rest peers: the scored labels of the corpus (``corpus.json``), gold
ancestor-closed; a document gets every label with a positive decision, else the best one (FLAT
decoding). All predictions are scored by ``sparkhc.metrics.evaluate`` (ancestors implied, the
corpus's scored labels): the definitions of ``sparkhc evaluate``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import peer_xmc  # noqa: E402
import scipy.sparse as sp  # noqa: E402
from _common import MemorySampler, command, loadavg, machine, now, write_section  # noqa: E402

DEFAULT_ROWS = "sparkhc,sparkhc_tuned,liblinear,mllib,hiclass"
ANNIF_ROWS = {"annif_parabel": "parabel", "annif_bonsai": "bonsai"}
XMC_ROWS = ("napkinxc", "pecos")
METRICS = (("LBMiF", "LB micro-F1"), ("LBMaF", "LB macro-F1"), ("EBF", "example F1"), ("hF", "hF"))
C_GRID = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0)
REG_GRID = (1e-4, 1e-3, 1e-2, 1e-1)


# ----------------------------------------------------------------------------- data
@dataclass
class Data:
    name: str
    path: str
    batch: Any  # SparseBatch
    taxonomy: Any  # Taxonomy of the features folder
    scored: np.ndarray  # node mask of the scored labels
    label_names: list[str]  # the scored labels (one-vs-rest columns)
    X: sp.csr_matrix
    Y: sp.csr_matrix  # (n_docs, n_labels) bool, gold closed upward (sparse: MeSH-sized taxonomies)
    cv: bool  # folds (True) or one train/test split


@dataclass
class Split:
    """One train/test partition: ``sel`` is the training selection as ``sparkhc train`` takes it."""

    name: str
    tr: np.ndarray
    te: np.ndarray
    sel: dict[str, Any]
    seed: int


def load(name: str, path: str) -> Data:
    from sparkhc.batch import label_matrix
    from sparkhc.features import features_corpus_info, features_taxonomy, read_features_local, scored_mask

    tax = features_taxonomy(path)
    batch, _ = read_features_local(path, with_counts=False)
    scored = scored_mask(tax, features_corpus_info(path).get("scored_labels"))
    ids = np.flatnonzero(scored)
    if batch.labels is None:
        raise SystemExit(f"compare: {path}: the documents have no labels")
    Y = (label_matrix(batch.labels, tax, closed=True, doc_ids=batch.doc_ids).tocsc()[:, ids] > 0).tocsr()
    cv = not bool((batch.extra["split"] == "test").any())
    return Data(name, path, batch, tax, scored, [tax.names[int(i)] for i in ids],
                batch.X.astype(np.float64).tocsr(), Y, cv)


def splits(d: Data, n_folds: int | None, seeds: list[int]) -> list[Split]:
    """The corpus protocol: every fold of ``fold`` (cross-validation corpora; the first ``n_folds``)
    with seed 0, or the train/test split once per seed."""
    if d.cv:
        fold = np.asarray(d.batch.extra["fold"], dtype=np.int64)
        folds = sorted(set(fold.tolist()))[: n_folds or None]
        return [Split(f"fold {f}", np.flatnonzero(fold != f), np.flatnonzero(fold == f),
                      {"split": None, "exclude_fold": int(f)}, seeds[0]) for f in folds]
    split = d.batch.extra["split"]
    tr, te = np.flatnonzero(split == "train"), np.flatnonzero(split == "test")
    return [Split(f"seed {s}", tr, te, {"split": "train"}, s) for s in seeds]


def score(d: Data, te: np.ndarray, pred: list[list[str]]) -> dict[str, float]:
    """The four metrics of predicted label names on the test documents ``te``
    (``sparkhc.metrics.evaluate``: the definitions of ``sparkhc evaluate``)."""
    from sparkhc.metrics import evaluate

    m = evaluate([d.batch.labels[int(i)] for i in te], pred, d.taxonomy, scored=d.scored)
    return {k: float(m[k]) for k, _ in METRICS}


def names_of(d: Data, P: np.ndarray | sp.spmatrix) -> list[list[str]]:
    """The label names of each row of a boolean (n, labels) matrix, dense or sparse."""
    P = sp.csr_matrix(P, dtype=bool)
    P.eliminate_zeros()
    P.sort_indices()
    return [[d.label_names[int(j)] for j in P.indices[P.indptr[i]:P.indptr[i + 1]]] for i in range(P.shape[0])]


# ----------------------------------------------------------------------------- LIBLINEAR
def ovr_scores(Xtr: sp.csr_matrix, Ytr: np.ndarray, Xte: sp.csr_matrix, C: float, seed: int = 0) -> np.ndarray:
    """Decision values (n_te, L) of one LinearSVC per column of ``Ytr``; a column with one class
    in training gets a constant score (+1 all positive, -1 all negative)."""
    from sklearn.svm import LinearSVC

    S = np.empty((Xte.shape[0], Ytr.shape[1]))
    for j in range(Ytr.shape[1]):
        y = Ytr[:, j]
        if y.all() or not y.any():
            S[:, j] = 1.0 if y.all() else -1.0
            continue
        clf = LinearSVC(C=C, random_state=seed).fit(Xtr, y)
        S[:, j] = clf.decision_function(Xte)
    return S


def inner_folds(n: int, k: int, seed: int) -> np.ndarray:
    """Fold of each of ``n`` training documents: a seeded shuffle, fold = rank mod k (as folds.tsv)."""
    rank = np.empty(n, dtype=np.int64)
    rank[np.random.default_rng(seed).permutation(n)] = np.arange(n)
    return rank % k


def flat_decode(S: np.ndarray, thr: np.ndarray | float = 0.0) -> np.ndarray:
    """Every label with ``S >= thr`` (``S > 0`` at the default 0), else the label with the largest
    ``S - thr`` (FLAT decoding: each document gets at least one label)."""
    from sparkhc.decoding import flat_select

    if np.isscalar(thr) and thr == 0.0:
        return flat_select(S)
    M = S - np.asarray(thr)[None, :]
    P = M >= 0
    none = ~P.any(axis=1)
    if none.any():
        P[np.flatnonzero(none), np.argmax(M[none], axis=1)] = True
    return P


def scut_threshold(s: np.ndarray, y: np.ndarray, fbr: float | None = None) -> tuple[float, float]:
    """SCut (Yang 2001) for one label: the threshold maximising F1 of ``s >= thr`` against ``y``
    over the held-out scores ``s``, and that F1. Candidates: above every score (no positive), and
    each distinct score; ties of F1 go to the higher threshold (fewer positives). The threshold
    returned lies midway between the chosen score and the next lower distinct score (-inf when the
    chosen score is the lowest: every document positive). With ``fbr`` (SCutFBR.1, Lewis et al.
    2004): when the best F1 is below ``fbr`` the threshold is the top score instead (rank 1:
    only documents scoring at least as high as the best held-out document are positive). A label
    whose best F1 is 0 (e.g. no held-out positive) gets +inf under both: it is never predicted."""
    s = np.asarray(s, dtype=np.float64)
    y = np.asarray(y, dtype=bool)
    vals = np.unique(s)[::-1]  # distinct scores, descending
    pos = y.sum()
    order = np.argsort(-s, kind="stable")
    ss, yy = s[order], y[order]
    # documents with score >= vals[i]: counts up to the last occurrence of vals[i]
    ends = np.searchsorted(-ss, -vals, side="right")
    ctp = np.concatenate([[0], np.cumsum(yy)])
    tp = ctp[ends].astype(np.float64)
    npred = ends.astype(np.float64)
    f1 = np.where(npred + pos > 0, 2 * tp / np.maximum(npred + pos, 1), 0.0)
    best_f1 = 0.0  # the "no positive" candidate
    best = -1
    for i, f in enumerate(f1):
        if f > best_f1:
            best_f1, best = float(f), i
    if best < 0:  # no held-out positive (or none ranked anywhere useful): never predicted
        return float("inf"), best_f1
    if fbr is not None and best_f1 < fbr:
        return float(vals[0]), best_f1
    if best == vals.size - 1:
        return float("-inf"), best_f1
    return float((vals[best] + vals[best + 1]) / 2), best_f1


def scut_thresholds(S: np.ndarray, Y: np.ndarray, fbr: float | None = None) -> np.ndarray:
    """One SCut (or SCutFBR.1 with ``fbr``) threshold per column."""
    return np.array([scut_threshold(S[:, j], Y[:, j], fbr)[0] for j in range(S.shape[1])])


@dataclass
class TunedLinear:
    """What the tuned LIBLINEAR path selected on the training part only."""

    C: float
    cv_micro_f1: dict[float, float]
    scut: np.ndarray
    scutfbr: np.ndarray
    fbr: float
    extra: dict[str, Any] = field(default_factory=dict)


def tune_liblinear(X: sp.csr_matrix, Y: np.ndarray, grid: tuple[float, ...], k: int, seed: int,
                   fbr: float) -> TunedLinear:
    """C by inner ``k``-fold CV on (X, Y) (the training part), then SCut and SCutFBR.1 thresholds
    per label on the out-of-fold scores of the chosen C. Reads nothing but its arguments."""
    fold = inner_folds(X.shape[0], k, seed)
    oof: dict[float, np.ndarray] = {}
    cvf: dict[float, float] = {}
    for C in grid:
        S = np.empty(Y.shape)
        for f in range(k):
            a, b = np.flatnonzero(fold != f), np.flatnonzero(fold == f)
            S[b] = ovr_scores(X[a], Y[a], X[b], C, seed)
        oof[C] = S
        cvf[C] = peer_xmc.micro_f1(Y, flat_decode(S))
    best = max(grid, key=lambda c: (cvf[c], -c))  # ties: the smaller C
    S = oof[best]
    return TunedLinear(best, cvf, scut_thresholds(S, Y), scut_thresholds(S, Y, fbr), fbr)


def run_liblinear(X: sp.csr_matrix, Y: np.ndarray, tr: np.ndarray, te: np.ndarray, seed: int,
                  grid: tuple[float, ...] = C_GRID, k: int = 3, fbr: float = 0.1,
                  tuned: bool = True) -> tuple[dict[str, tuple[np.ndarray, float]], TunedLinear | None]:
    """Predictions on ``te`` (bool matrices) and training seconds of the LIBLINEAR rows; the gold
    labels of ``te`` are never read (only ``Y[tr]``)."""
    Xtr, Ytr, Xte = X[tr], Y[tr], X[te]
    out: dict[str, tuple[np.ndarray, float]] = {}
    t0 = time.perf_counter()
    S1 = ovr_scores(Xtr, Ytr, Xte, 1.0, seed)
    secs1 = time.perf_counter() - t0
    out["LIBLINEAR OvR C=1"] = (flat_decode(S1), secs1)
    if not tuned:
        return out, None
    t0 = time.perf_counter()
    sel = tune_liblinear(Xtr, Ytr, grid, k, seed, fbr)
    S = S1 if sel.C == 1.0 else ovr_scores(Xtr, Ytr, Xte, sel.C, seed)
    secs = time.perf_counter() - t0 + (secs1 if sel.C == 1.0 else 0.0)
    out["LIBLINEAR OvR, C by inner CV"] = (flat_decode(S), secs)
    out["LIBLINEAR OvR, C by inner CV + SCut"] = (flat_decode(S, sel.scut), secs)
    out[f"LIBLINEAR OvR, C by inner CV + SCutFBR.1 (fbr={fbr})"] = (flat_decode(S, sel.scutfbr), secs)
    return out, sel


# ----------------------------------------------------------------------------- HiClass
def run_hiclass(d: Data, tr: np.ndarray, te: np.ndarray) -> tuple[list[list[str]], float] | None:
    """HiClass LCPPN + LinearSVC (C = 1) on single-label data (None otherwise): trained on the path
    of each training document's one deepest label."""
    from hiclass import LocalClassifierPerParentNode
    from sklearn.svm import LinearSVC

    tax = d.taxonomy
    deepest = []
    for i in tr:
        ids = tax.deepest(tax.closure([tax.id(x) for x in d.batch.labels[int(i)]]))
        if len(ids) != 1:
            return None
        deepest.append(int(ids[0]))

    def path(c: int) -> list[str]:
        out = []
        while c > 0:
            out.append(tax.names[c])
            c = int(tax.parent[c])
        return out[::-1]

    depth = max(len(path(c)) for c in deepest)
    ytr = np.array([path(c) + [""] * (depth - len(path(c))) for c in deepest])
    clf = LocalClassifierPerParentNode(local_classifier=LinearSVC(C=1.0), n_jobs=1)
    t0 = time.perf_counter()
    clf.fit(d.X[tr], ytr)
    secs = time.perf_counter() - t0
    pred = clf.predict(d.X[te])
    out = []
    for row in pred:
        names = [str(x) for x in row if str(x) and str(x) in tax]
        out.append(names[-1:])
    return out, secs


# ----------------------------------------------------------------------------- MLlib
def run_mllib(spark: Any, d: Data, tr: np.ndarray, te: np.ndarray, seed: int, cv_labels: int,
              grid: tuple[float, ...] = REG_GRID, folds: int = 3) -> tuple[np.ndarray, float, dict[str, Any]]:
    """MLlib binary relevance: one LogisticRegression per scored label; ``regParam`` chosen by
    CrossValidator(numFolds=``folds``, BinaryClassificationEvaluator) on the training part, per label
    for the ``cv_labels`` most frequent training labels (all when ``cv_labels`` >= L); every other
    label uses the most often chosen value (ties: the larger). Scores the test part with the
    fitted coefficients (probability > 0.5 is margin > 0)."""
    from pyspark.ml.classification import LogisticRegression
    from pyspark.ml.evaluation import BinaryClassificationEvaluator
    from pyspark.ml.linalg import SparseVector
    from pyspark.ml.tuning import CrossValidator, ParamGridBuilder

    Xtr, Ytr = d.X[tr], d.Y[tr].toarray()
    V, L = d.X.shape[1], Ytr.shape[1]
    rows = []
    for i in range(Xtr.shape[0]):
        a, b = Xtr.indptr[i], Xtr.indptr[i + 1]
        rows.append((SparseVector(V, Xtr.indices[a:b].tolist(), Xtr.data[a:b].tolist()),
                     Ytr[i].astype(np.float64).tolist()))
    base = spark.createDataFrame(rows, ["features", "y"]).cache()
    base.count()
    t0 = time.perf_counter()
    freq = Ytr.sum(axis=0)
    cv_cols = [int(j) for j in np.argsort(-freq, kind="stable")[: min(cv_labels, L)] if 0 < freq[j] < Ytr.shape[0]]
    chosen: dict[int, float] = {}
    W = np.zeros((V, L))
    b = np.zeros(L)
    from pyspark.sql import functions as F

    def data(j: int) -> Any:
        return base.select("features", F.col("y")[j].alias("label"))

    for j in cv_cols:
        lr = LogisticRegression(maxIter=100)
        cvm = CrossValidator(estimator=lr, estimatorParamMaps=ParamGridBuilder().addGrid(lr.regParam, list(grid)).build(),
                             evaluator=BinaryClassificationEvaluator(), numFolds=folds, seed=seed).fit(data(j))
        chosen[j] = float(grid[int(np.argmax(cvm.avgMetrics))])
        m: Any = cvm.bestModel
        W[:, j] = m.coefficients.toArray()
        b[j] = m.intercept
    vals, counts = np.unique(list(chosen.values()) or [grid[-1]], return_counts=True)
    common = float(vals[np.flatnonzero(counts == counts.max())[-1]])
    for j in range(L):
        if j in chosen:
            continue
        if freq[j] == 0 or freq[j] == Ytr.shape[0]:
            b[j] = 1e3 if freq[j] else -1e3
            continue
        m = LogisticRegression(maxIter=100, regParam=common).fit(data(j))
        W[:, j] = m.coefficients.toArray()
        b[j] = m.intercept
    secs = time.perf_counter() - t0
    base.unpersist()
    S = np.asarray(d.X[te] @ W) + b
    info = {"cv_labels": len(cv_cols), "labels": L, "chosen": sorted(chosen.values()), "common": common}
    return flat_decode(S), secs, info


# ----------------------------------------------------------------------------- sparkhc
def run_sparkhc(spark: Any, d: Data, s: Split, workdir: Path, grid: dict[str, Any] | None,
                sets: list[str] | None = None) -> tuple[list[list[str]], float, dict[str, Any]]:
    """``sparkhc train`` with the defaults (``grid`` None) or ``sparkhc tune`` over ``grid`` on the
    training selection of ``s``; the saved model then predicts the test documents in this process.
    ``sets``: ``section.key=value`` overrides of the configuration (``--set``, as the CLI's), the
    same for every corpus."""
    from sparkhc.config import load_config
    from sparkhc.persistence import load_model
    from sparkhc.spark.mixing.settings import resolve_shards
    from sparkhc.spark.pipelines import train

    workdir.mkdir(parents=True, exist_ok=True)
    out = workdir / f"{d.name}-{'tuned' if grid else 'defaults'}-{s.name.replace(' ', '')}"
    info: dict[str, Any] = {}
    cfg = load_config(overrides=[*(sets or []), f"train.seed={s.seed}"])
    t0 = time.perf_counter()
    if grid is None:
        train(spark, cfg, d.path, out, overwrite=True, **s.sel)
    else:
        from sparkhc.ml.tuning import tune

        # every Param outside the grid as the CLI defaults give it (shards 0 = the task slots)
        params = {"shards": resolve_shards(spark, cfg.train.shards), "epochs": cfg.train.epochs, "seed": s.seed}
        r = tune(spark, d.path, out, grid, model=cfg.train.model, metric="hF", num_folds=2, seed=s.seed,
                 params={k: v for k, v in params.items() if k not in grid}, overwrite=True, **s.sel)
        info = {"chosen": r["chosen_params"], "validation_hF": round(r["validation"], 4)}
    secs = time.perf_counter() - t0
    model, meta = load_model(out)
    cal = (meta.get("training") or {}).get("calibration")
    if grid is None and cal:  # train.calibrate = auto: applied or not, by its validation gain
        gain = (cal.get("validation") or {}).get("gain")
        info = {"calibration": ("offsets applied" if cal.get("applied") else "offsets not applied")
                + (f" (validation gain {100 * gain:+.2f})" if gain is not None else f" ({cal.get('skipped', '')})")}
    sel = (meta.get("training") or {}).get("epoch_selection")
    if grid is None and sel:  # train.epochs = 0 (the default): the epochs chosen on the validation slice
        info["epochs"] = f"{sel['epochs']} epochs (validation stopped after {sel.get('epochs_run', sel['epochs'])})"
    if model.needs_counts:
        raise SystemExit(f"compare: the default model {model.name!r} needs term counts; not read here")
    return model.predict(d.batch.subset(s.te)), secs, info


# ----------------------------------------------------------------------------- table
def fmt(vals: list[float], pct: bool = True) -> str:
    a = np.asarray(vals, dtype=np.float64) * (100 if pct else 1)
    if a.size == 1:
        return f"{a[0]:.1f}" if pct else f"{a[0]:.0f}"
    return f"{a.mean():.1f} ± {a.std(ddof=1):.1f}" if pct else f"{a.mean():.0f} ± {a.std(ddof=1):.0f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--features", action="append", default=[], help="NAME=DIR (repeatable)")
    ap.add_argument("--rows", default=None,
                    help=f"comma-separated rows among {DEFAULT_ROWS},{','.join(ANNIF_ROWS)},{','.join(XMC_ROWS)} (default: "
                    f"{DEFAULT_ROWS}, plus the Annif, napkinXC and PECOS rows when they are installed)")
    ap.add_argument("--data-dir", default="../shared/data",
                    help="Annif rows: the staged corpora (the raw texts of the features' documents)")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--peer-threads", type=int, default=0,
                    help="napkinXC / PECOS rows: threads (default 0 = the cores of --master, as sparkhc uses)")
    ap.add_argument("--folds", type=int, default=0, help="cross-validation corpora: the first N folds (0 = all)")
    ap.add_argument("--seeds", default="0", help="single-split corpora: comma-separated seeds (spread over seeds)")
    ap.add_argument("--inner-folds", type=int, default=3, help="LIBLINEAR: inner CV folds for C and thresholds")
    ap.add_argument("--fbr", type=float, default=0.1, help="SCutFBR.1 fbr (Lewis et al. 2004)")
    ap.add_argument("--sparkhc-grid", default="C=0.1,1.0;epochs=10,20", help="sparkhc tune grid: PARAM=v1,v2[;PARAM=...]")
    ap.add_argument("--mllib-cv-labels", type=int, default=3,
                    help="MLlib: labels whose regParam is chosen by their own CrossValidator (most frequent first; "
                    "the other labels take the value chosen most often)")
    ap.add_argument("--mllib-parts", type=int, default=1,
                    help="MLlib: run on the first N folds/seeds only (its per-label Spark jobs are slow)")
    ap.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE", dest="sets",
                    help="sparkhc rows: a configuration override as `sparkhc train --set` takes it (repeatable; the "
                    "same for every corpus); the rows are then labelled with them")
    ap.add_argument("--no-warm-up", action="store_true",
                    help="sparkhc rows: skip the untimed warm-up training (a large corpus, where one training "
                    "takes many minutes and the warm-up's seconds of compilation are a small share)")
    ap.add_argument("--section", default="compare")
    ap.add_argument("--workdir", default="/tmp/bench/compare-work", help="sparkhc models are written here")
    a = ap.parse_args()
    work = Path(a.workdir)
    work.mkdir(parents=True, exist_ok=True)
    notes: list[str] = []

    peer_threads = a.peer_threads or peer_xmc.master_threads(a.master)
    if a.rows is None:
        import peer_annif

        wanted = DEFAULT_ROWS.split(",")
        if peer_annif.available():
            wanted += list(ANNIF_ROWS)
        else:
            notes.append(f"Annif rows skipped: {peer_annif.annif_python()} not found ({peer_annif.INSTALL})")
            print(notes[-1], flush=True)
        wanted += list(XMC_ROWS)
    else:
        wanted = a.rows.split(",")
    if "napkinxc" in wanted and not peer_xmc.napkinxc_available():
        wanted.remove("napkinxc")
        notes.append('napkinXC row skipped: napkinxc is not installed (pip install -e ".[bench]")')
        print(notes[-1], flush=True)
    if "pecos" in wanted and not peer_xmc.pecos_available():
        wanted.remove("pecos")
        notes.append(f"PECOS row skipped: {peer_xmc.pecos_python()} not found ({peer_xmc.PECOS_INSTALL})")
        print(notes[-1], flush=True)
    data_dir = Path(a.data_dir)
    if not data_dir.is_dir() and not data_dir.is_absolute() and (Path(__file__).resolve().parents[1] / data_dir).is_dir():
        data_dir = Path(__file__).resolve().parents[1] / data_dir
    seeds = [int(x) for x in a.seeds.split(",")]
    grid: dict[str, Any] = {}
    for part in a.sparkhc_grid.split(";"):
        k, v = part.split("=", 1)
        grid[k.strip()] = [float(x) if "." in x else int(x) for x in v.split(",")]
    spark = None
    if {"sparkhc", "sparkhc_tuned", "mllib"} & set(wanted):
        from sparkhc.spark.session import get_session

        t0 = time.perf_counter()
        spark = get_session("compare", master=a.master, extra_conf={"spark.driver.memory": "6g",
                                                                    "spark.driver.maxResultSize": "0"})
        spark.range(1).count()
        notes.append(f"Spark session start-up ({a.master}): {time.perf_counter() - t0:.1f} s, excluded from the rows")
    tables: list[str] = []
    with MemorySampler() as mem:
        for item in a.features:
            dname, path = item.split("=", 1)
            d = load(dname, path)
            parts = splits(d, a.folds or None, seeds)
            spread = (f"mean ± sd over {len(parts)} folds" if d.cv else
                      f"mean ± sd over seeds {a.seeds}" if len(parts) > 1 else f"seed {a.seeds}")
            print(f"[{dname}] {d.X.shape[0]} docs, {len(d.label_names)} scored labels, {d.X.shape[1]} features; "
                  f"{', '.join(p.name for p in parts)}", flush=True)
            res: dict[str, dict[str, list[float]]] = {}
            chosen: dict[str, list[str]] = {}
            texts: list[str] | None = None  # raw texts (Annif rows), read once per corpus

            def add(row: str, m: dict[str, float], secs: float, what: str = "",
                    res: dict[str, dict[str, list[float]]] = res, chosen: dict[str, list[str]] = chosen) -> None:
                new: dict[str, list[float]] = {k: [] for k, _ in METRICS}
                r = res.setdefault(row, new | {"secs": []})
                for k, _ in METRICS:
                    r[k].append(m[k])
                r["secs"].append(secs)
                if what:
                    chosen.setdefault(row, []).append(what)
                print(f"  {row}: " + ", ".join(f"{k} {m[k]:.4f}" for k, _ in METRICS) + f", {secs:.1f} s "
                      f"{what} (load {loadavg()})", flush=True)

            if spark is not None and {"sparkhc", "sparkhc_tuned"} & set(wanted) and not a.no_warm_up:
                # the first training of a process pays Numba compilation and the Python workers'
                # start-up: one untimed training first, so that every timed row sees a warm session
                _, warm, _ = run_sparkhc(spark, d, parts[0], work / "warm-up", None, a.sets)
                notes.append(f"{dname}: one untimed warm-up training (sparkhc defaults, {parts[0].name}) before the "
                             f"rows: {warm:.1f} s (Numba compilation, Python worker start-up)")
                print(notes[-1], flush=True)
            for s in parts:
                print(f" {s.name}: {s.tr.size} train / {s.te.size} test", flush=True)
                for row in wanted:
                    try:
                        if row in ("sparkhc", "sparkhc_tuned"):
                            assert spark is not None
                            pred, secs, info = run_sparkhc(spark, d, s, work, grid if row == "sparkhc_tuned" else None,
                                                           a.sets)
                            label = "sparkhc defaults" if row == "sparkhc" else "sparkhc tuned (sparkhc tune)"
                            if a.sets:
                                label += " with " + ", ".join(f"`{x}`" for x in a.sets)
                            add(label, score(d, s.te, pred), secs,
                                f"{s.name}: {info['chosen']} (val hF {info['validation_hF']})" if "chosen" in info
                                else f"{s.name}: " + "; ".join(info[k] for k in ("epochs", "calibration") if k in info)
                                if info else "")
                        elif row == "liblinear":
                            outs, sel = run_liblinear(d.X, d.Y.toarray(), s.tr, s.te, s.seed, k=a.inner_folds, fbr=a.fbr)
                            for lab, (P, secs) in outs.items():
                                add(lab, score(d, s.te, names_of(d, P)), secs,
                                    f"{s.name}: C={sel.C}" if sel is not None and "inner CV" in lab else "")
                        elif row == "mllib":
                            assert spark is not None
                            if parts.index(s) >= a.mllib_parts:
                                continue
                            P, secs, info = run_mllib(spark, d, s.tr, s.te, s.seed, a.mllib_cv_labels)
                            add("MLlib BR LogisticRegression, regParam by CrossValidator", score(d, s.te, names_of(d, P)),
                                secs, f"{s.name}: regParam chosen {info['chosen']} on {info['cv_labels']}/{info['labels']}"
                                f" labels, others {info['common']}")
                        elif row == "hiclass":
                            hc = run_hiclass(d, s.tr, s.te)
                            if hc is None:
                                if s is parts[0]:
                                    notes.append(f"{dname}: HiClass skipped (multi-label data; HiClass 5.x is single-path)")
                                continue
                            add("HiClass LCPPN + LinearSVC C=1", score(d, s.te, hc[0]), hc[1])
                        elif row in ANNIF_ROWS:
                            import peer_annif

                            if texts is None:
                                texts = peer_annif.doc_texts(d.path, d.batch.doc_ids, data_dir)
                            pred, info = peer_annif.run_annif(
                                [texts[int(i)] for i in s.tr], [sorted(d.Y[int(i)].indices.tolist()) for i in s.tr],
                                [texts[int(i)] for i in s.te], d.label_names, ANNIF_ROWS[row], s.seed)
                            add(f"Annif {info['annif']} Omikuji {peer_annif.VARIANTS[ANNIF_ROWS[row]]}, limit/threshold "
                                "on a validation slice", score(d, s.te, pred), info["train_seconds"],
                                f"{s.name}: limit {info['limit']}, threshold {info['threshold']:.2f} (val doc F1 "
                                f"{info['val_f1']:.3f}; final fit {info['final_train_seconds']:.1f} s, test "
                                f"suggestions {info['test_seconds']:.1f} s)")
                        elif row in XMC_ROWS:
                            run_xmc = peer_xmc.run_napkinxc if row == "napkinxc" else peer_xmc.run_pecos
                            Pb, secs, info = run_xmc(d.X, d.Y, s.tr, s.te, d.batch.doc_ids, s.seed, peer_threads)
                            label = ("napkinXC PLT (log loss)" if row == "napkinxc" else "PECOS XR-Linear")
                            add(f"{label}, {peer_threads} threads, C and threshold on the validation slice",
                                score(d, s.te, names_of(d, Pb)), secs,
                                f"{s.name}: C={info['C']:g}, threshold {info['threshold']:.2f} (val micro-F1 "
                                f"{info['val_micro_f1']:.3f}; final fit {info['final_train_seconds']:.1f} s, test "
                                f"{info['test_seconds']:.1f} s)")
                    except Exception as e:  # one row failing must not lose the others
                        notes.append(f"{dname} {s.name} {row}: failed: {type(e).__name__}: {str(e)[:300]}")
                        print(notes[-1], flush=True)
            lines = [f"### {dname} ({spread}; {parts[0].tr.size} train / {parts[0].te.size} test docs in the first "
                     f"part, {len(d.label_names)} scored labels)\n",
                     "| system | " + " | ".join(t for _, t in METRICS) + " | train s | chosen on training data |",
                     "|---|" + "---|" * (len(METRICS) + 2)]
            for row, r in res.items():
                ch = "; ".join(chosen.get(row, [])) or "-"
                lines.append(f"| {row} | " + " | ".join(fmt(r[k]) for k, _ in METRICS)
                             + f" | {fmt(r['secs'], pct=False)} | {ch} |")
            tables.append("\n".join(lines))
            print(tables[-1], flush=True)
    notes.append(mem.summary())
    if spark is not None:
        spark.stop()
    body = (
        f"Command: `{command()}`  \nMachine: {machine()}  \nDate: {now()}; load average at the end {loadavg()}\n\n"
        "Metrics in percent on the test fold/split (`sparkhc.metrics.evaluate`, the definitions of `sparkhc "
        "evaluate`, over the corpus's scored labels); mean ± sample sd over the folds (cross-validation corpora) or "
        "over the seeds (single-split corpora: the seed of sparkhc training and tuning, of LIBLINEAR's inner folds "
        "and of MLlib's CrossValidator; the split is fixed). Train seconds: fitting including all selection on "
        "training data (inner CV, CrossValidator, tune), excluding prediction. Every choice in the last column was "
        f"made on the training part only. LIBLINEAR C grid {list(C_GRID)} ({a.inner_folds}-fold inner CV, "
        f"criterion LB micro-F1 of the out-of-fold FLAT predictions); SCut/SCutFBR.1 thresholds from the same "
        f"out-of-fold scores (fbr {a.fbr}, fixed: not tuned); LIBLINEAR train seconds include scoring the test part "
        f"(a small share). MLlib: regParam grid {list(REG_GRID)}, 3-fold CrossValidator (areaUnderROC, "
        f"maxIter 100) per label for the {a.mllib_cv_labels} most frequent training labels, every other label "
        f"trained with the value chosen most often; all labels trained, so its accuracy is that of a complete "
        f"model; run on the first {a.mllib_parts} fold(s)/seed(s) only (one Spark job per L-BFGS iteration "
        f"makes each fit take seconds). sparkhc tune grid {grid} (2-fold CrossValidator on the training documents, "
        "validation hF; the other Params as the CLI defaults give them: shards = the task slots), the chosen "
        "candidate refit on all training documents (included in its seconds). One-vs-rest peers: one binary model "
        "per scored label (gold closed upward), a document gets every label with a positive decision (or reaching "
        "its SCut threshold), else the best one; predictions are closed upward for the hierarchical measures. "
        "Rows with nothing seeded (LIBLINEAR C=1, HiClass) have sd 0 over seeds."
        + (" Annif rows (`benchmarks/peer_annif.py`): Omikuji Parabel (Annif's defaults) / Bonsai "
           "(cluster_balanced=False, cluster_k=100, max_depth=3), analyzer snowball(english), on the raw texts; "
           "limit (1-15) and threshold (0.00-0.95) chosen as `annif optimize` does (document-averaged F1) on a "
           "seeded 10 % validation slice of the training part, then retrained on the whole training part; "
           "train seconds = both trainings + the slice's suggestions (the Annif subprocess start-up and the "
           "test suggestions excluded); a test document keeps at most limit suggestions scoring at least "
           "threshold (possibly none)." if set(ANNIF_ROWS) & set(wanted) else "")
        + (f" napkinXC / PECOS rows (`benchmarks/peer_xmc.py`): {peer_threads} threads each (`--peer-threads`; "
           f"sparkhc's master `{a.master}` has {peer_xmc.master_threads(a.master)} cores); C (napkinXC "
           f"`liblinear_c` {list(peer_xmc.NAPKIN_C)}, PECOS `Cp = Cn` {list(peer_xmc.PECOS_C)}) and a score "
           f"threshold ({peer_xmc.THRESHOLDS[0]:.2f}..{peer_xmc.THRESHOLDS[-1]:.2f} by 0.05; a document with no "
           "label reaching it keeps its top label) chosen together by LB micro-F1 on sparkhc's validation slice "
           "of the training part (`validation_ids(doc_ids, 0.1, seed, 0)`, the documents its epoch selection "
           "holds out), then refit on the whole training part; train seconds = the grid's fits, the slice's "
           "scoring and the final fit (test scoring excluded; PECOS's subprocess start-up and the .npz "
           "exchange excluded). LIBLINEAR (scikit-learn's LinearSVC), HiClass and Annif run one-threaded. "
           "Comparison sections written before issue 51 timed one-threaded peers against two-threaded sparkhc "
           "(`local[2]`)." if set(XMC_ROWS) & set(wanted) else "")
        + "\n\n" + "\n\n".join(tables) + "\n\n" + "\n".join(f"- {n}" for n in notes)
    )
    # what the section measures: a later run of the same rows, corpora, seeds and settings supersedes it
    kind = (f"compare.py rows {','.join(sorted(wanted))} on {','.join(sorted(f.split('=', 1)[0] for f in a.features))}"
            f"; folds {a.folds}; seeds {a.seeds}" + "".join(f"; --set {s}" for s in sorted(a.sets)))
    write_section(a.section, f"Comparison with tuned peers ({a.section})", body, kind=kind)


if __name__ == "__main__":
    main()
