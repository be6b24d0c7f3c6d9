"""Label-tree peers of ``benchmarks/compare.py`` (issue 51, point 4): napkinXC PLT and PECOS XR-Linear.

Both are bench-only peers, never product dependencies:

- napkinXC (``napkinxc``, the ``bench`` extra) runs in this interpreter: ``napkinxc.models.PLT``
  with ``loss="log"`` (logistic node classifiers, LIBLINEAR solver), ``liblinear_c = C``, a fixed
  ``seed`` and ``threads`` threads; everything else napkinXC's defaults (hierarchical k-means tree,
  arity 2, at most 100 labels per leaf).
- PECOS (``libpecos``) pins ``numpy<2`` and ``scipy<1.14``, so it lives in its own virtualenv and
  runs as a subprocess (``benchmarks/_pecos_worker.py``; the documents go over as ``.npz`` files)::

      python -m venv .venv-pecos && .venv-pecos/bin/pip install "numpy<2" "scipy<1.14" scikit-learn \\
          && .venv-pecos/bin/pip install --no-deps libpecos

  (``--no-deps``: PECOS's ``torch`` requirement serves its neural models, not XR-Linear.) The
  interpreter is ``$PECOS_PYTHON``, else ``.venv-pecos/bin/python`` at the repository root. XR-Linear:
  PIFA label embedding, hierarchical k-means indexer (PECOS's defaults, ``seed``), ``XLinearModel``
  with per-node SVM costs ``Cp = Cn = C`` (LIBLINEAR's C), ``threads`` threads; prediction with
  PECOS's defaults (beam 10, top 10 labels, its post-processor's scores in [0, 1]).

Protocol (:func:`run_napkinxc`, :func:`run_pecos`; the same for both): the validation slice is
the one sparkhc's epoch selection holds out of the training part
(``sparkhc.spark.hashing.validation_ids(doc_ids, 0.1, seed, 0)``). For each C of the grid the peer
is trained on the rest of the training part and scores the slice; C and the prediction rule
(:func:`threshold_decode`: every label scoring at least ``t``, else the best-scoring one, for ``t``
in 0.05, 0.10, ..., 0.95) are chosen together by the LB micro-F1 of the slice
(:func:`choose_rule`; ties: the smaller C, then the smaller ``t``), as the tuned LIBLINEAR row
chooses its C. The peer is then trained with the chosen C on the whole training part and the rule
is applied to its test scores. Train seconds: every fit of the grid, the slice's scoring and the
final fit (test scoring excluded). No test label is read.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

ROOT = Path(__file__).resolve().parents[1]
PECOS_WORKER = Path(__file__).resolve().parent / "_pecos_worker.py"
PECOS_INSTALL = ('python -m venv .venv-pecos && .venv-pecos/bin/pip install "numpy<2" "scipy<1.14" scikit-learn '
                 "&& .venv-pecos/bin/pip install --no-deps libpecos")
THRESHOLDS = tuple(round(0.05 * i, 2) for i in range(1, 20))  # 0.05 .. 0.95
# C grids: a first run on the development corpora with (1, 4, 16) / (1, 4) chose the largest C on the
# validation slices of most folds (napkinXC on all 7 parts, PECOS on 6), so one larger value was added
NAPKIN_C = (1.0, 4.0, 16.0, 64.0)
PECOS_C = (1.0, 4.0, 16.0)
VAL_FRACTION = 0.1


class PecosUnavailable(RuntimeError):
    """The PECOS interpreter is missing (one line naming the install command)."""


# ----------------------------------------------------------------------------- environment
def master_threads(master: str) -> int:
    """The cores of a Spark master URL: ``local[N]`` -> N, ``local[*]`` -> the machine's cores,
    ``local`` -> 1; any other master (a cluster) -> the machine's cores."""
    m = re.fullmatch(r"local(?:\[(\d+|\*)(?:,\s*\d+)?\])?", master.strip())
    if m is None or m.group(1) == "*":
        return os.cpu_count() or 1
    return int(m.group(1)) if m.group(1) else 1


def pecos_python() -> Path:
    """The PECOS virtualenv's interpreter: ``$PECOS_PYTHON`` or ``<repo>/.venv-pecos/bin/python``."""
    env = os.environ.get("PECOS_PYTHON")
    return Path(env) if env else ROOT / ".venv-pecos" / "bin" / "python"


def pecos_available() -> bool:
    return pecos_python().is_file()


def napkinxc_available() -> bool:
    try:
        import napkinxc.models  # noqa: F401
    except ImportError:
        return False
    return True


# ----------------------------------------------------------------------------- the prediction rule (pure numpy)
def threshold_decode(S: sp.csr_matrix, t: float) -> sp.csr_matrix:
    """Boolean CSR of the labels kept from the scores ``S`` (only stored entries are candidates):
    every label with score ``>= t``, and in a row where none reaches ``t`` the best-scoring stored
    label (ties: the smallest column); a row without any stored score keeps nothing."""
    S = sp.csr_matrix(S)
    S.sort_indices()
    keep = S.data >= t
    for i in range(S.shape[0]):
        a, b = S.indptr[i], S.indptr[i + 1]
        if b > a and not keep[a:b].any():
            keep[a + int(np.argmax(S.data[a:b]))] = True
    rows = np.repeat(np.arange(S.shape[0]), np.diff(S.indptr))[keep]
    return sp.csr_matrix((np.ones(rows.size, dtype=bool), (rows, S.indices[keep])), shape=S.shape)


def micro_f1(Y: sp.spmatrix, P: sp.spmatrix) -> float:
    """LB micro-F1 of the boolean label matrices ``P`` against ``Y`` (2 TP / (|Y| + |P|))."""
    Y, P = sp.csr_matrix(Y, dtype=bool), sp.csr_matrix(P, dtype=bool)
    den = float(Y.nnz + P.nnz)
    return 2.0 * float(Y.multiply(P).nnz) / den if den else 0.0


def choose_rule(scores: dict[float, sp.csr_matrix], Y: sp.spmatrix,
                thresholds: Sequence[float] = THRESHOLDS) -> tuple[float, float, float, dict[float, float]]:
    """``(C, t, F1, best F1 per C)``: the C and threshold whose :func:`threshold_decode` of the
    held-out ``scores[C]`` has the largest LB micro-F1 against ``Y``; ties go to the smaller C, then
    the smaller threshold."""
    best: tuple[float, float, float] | None = None
    per_c: dict[float, float] = {}
    for C in sorted(scores):
        for t in thresholds:
            f = micro_f1(Y, threshold_decode(scores[C], float(t)))
            per_c[C] = max(per_c.get(C, 0.0), f)
            if best is None or f > best[2]:
                best = (float(C), float(t), f)
    if best is None:
        raise ValueError("choose_rule: no C and no threshold to choose from")
    return best[0], best[1], best[2], per_c


def validation_slice(doc_ids: Sequence[str] | np.ndarray, seed: int,
                     fraction: float = VAL_FRACTION) -> tuple[np.ndarray, np.ndarray]:
    """``(fit, val)`` positions among the training documents ``doc_ids``: ``val`` the documents
    sparkhc's epoch selection holds out (band 0 of ``validation_ids``), ``fit`` the others."""
    from sparkhc.spark.hashing import validation_ids

    held = validation_ids(np.asarray(doc_ids, dtype=object), fraction, seed, 0)
    if held.all() or not held.any():
        raise ValueError(f"validation slice of {len(held)} training documents is {int(held.sum())} documents: "
                         "nothing to fit or nothing to choose on")
    return np.flatnonzero(~held), np.flatnonzero(held)


def _select_and_refit(fit_scores: Any, refit: Any, Y: sp.csr_matrix, tr: np.ndarray, te: np.ndarray,
                      doc_ids: Sequence[str], seed: int, grid: Sequence[float],
                      thresholds: Sequence[float]) -> tuple[sp.csr_matrix, float, dict[str, Any]]:
    """The shared protocol: ``fit_scores(fit rows, val rows, grid) -> ({C: val scores}, seconds)``
    and ``refit(train rows, test rows, C) -> (test scores, train seconds, test seconds)`` on rows of
    the whole matrices; the test part's rule output, the train seconds and what was chosen."""
    fit, val = validation_slice([doc_ids[int(i)] for i in tr], seed)
    sval, secs_sel = fit_scores(tr[fit], tr[val], grid)
    C, t, f1, per_c = choose_rule(sval, Y[tr[val]], thresholds)
    Ste, secs_fit, secs_te = refit(tr, te, C)
    info = {"C": C, "threshold": t, "val_micro_f1": f1, "val_micro_f1_per_C": per_c, "n_fit": int(fit.size),
            "n_val": int(val.size), "selection_seconds": secs_sel, "final_train_seconds": secs_fit,
            "test_seconds": secs_te}
    return threshold_decode(Ste, t), secs_sel + secs_fit, info


# ----------------------------------------------------------------------------- napkinXC
def _label_lists(Y: sp.csr_matrix, rows: np.ndarray) -> list[list[int]]:
    Yr = sp.csr_matrix(Y[rows])
    return [Yr.indices[Yr.indptr[i]:Yr.indptr[i + 1]].tolist() for i in range(Yr.shape[0])]


def _napkin_scores(model: Any, X: sp.csr_matrix, L: int, floor: float) -> sp.csr_matrix:
    """CSR of PLT's probabilities: every label with probability >= ``floor`` plus each row's top label."""
    rows, cols, vals = [], [], []
    for i, (above, top) in enumerate(zip(model.predict_proba(X, threshold=floor), model.predict_proba(X, top_k=1),
                                         strict=True)):
        seen = {int(j): float(p) for j, p in above}
        for j, p in top:
            seen.setdefault(int(j), float(p))
        for j, p in seen.items():
            rows.append(i)
            cols.append(j)
            vals.append(p)
    return sp.csr_matrix((vals, (rows, cols)), shape=(X.shape[0], L))


def run_napkinxc(X: sp.csr_matrix, Y: sp.csr_matrix, tr: np.ndarray, te: np.ndarray, doc_ids: Sequence[str],
                 seed: int, threads: int, grid: Sequence[float] = NAPKIN_C,
                 thresholds: Sequence[float] = THRESHOLDS) -> tuple[sp.csr_matrix, float, dict[str, Any]]:
    """napkinXC PLT under the module's protocol: boolean CSR predictions of the ``te`` rows, train
    seconds (selection included) and what was chosen. ``Y`` is read on the ``tr`` rows only."""
    from napkinxc.models import PLT

    X = sp.csr_matrix(X, dtype=np.float64)
    Y = sp.csr_matrix(Y, dtype=bool)
    L = Y.shape[1]
    floor = float(min(thresholds))

    def fit_predict(a: np.ndarray, b: np.ndarray, C: float) -> tuple[sp.csr_matrix, float, float]:
        with tempfile.TemporaryDirectory(prefix="napkinxc-") as tmp:
            model = PLT(tmp, loss="log", liblinear_c=float(C), seed=int(seed), threads=int(threads))
            t0 = time.perf_counter()
            model.fit(X[a], _label_lists(Y, a))
            secs = time.perf_counter() - t0
            t0 = time.perf_counter()
            S = _napkin_scores(model, X[b], L, floor)
            return S, secs, time.perf_counter() - t0

    def fit_scores(a: np.ndarray, b: np.ndarray, grid: Sequence[float]) -> tuple[dict[float, sp.csr_matrix], float]:
        out, secs = {}, 0.0
        for C in grid:
            S, s1, s2 = fit_predict(a, b, C)
            out[float(C)], secs = S, secs + s1 + s2
        return out, secs

    P, secs, info = _select_and_refit(fit_scores, lambda a, b, C: fit_predict(a, b, C), Y, tr, te, doc_ids, seed,
                                      grid, thresholds)
    from importlib.metadata import version

    info["version"] = version("napkinxc")
    info["threads"] = int(threads)
    return P, secs, info


# ----------------------------------------------------------------------------- PECOS
def check_pecos() -> Path:
    py = pecos_python()
    if not py.is_file():
        raise PecosUnavailable(f"PECOS interpreter not found at {py} (set PECOS_PYTHON, or install it at the "
                               f"repository root: {PECOS_INSTALL})")
    return py


def put_csr(out: dict[str, Any], key: str, M: sp.spmatrix) -> None:
    """Store the CSR arrays of ``M`` in ``out`` as ``KEY_data`` / ``_indices`` / ``_indptr`` / ``_shape``
    (the .npz exchange with ``_pecos_worker.py``, which imports this module in the PECOS interpreter)."""
    M = sp.csr_matrix(M)
    out[f"{key}_data"], out[f"{key}_indices"] = M.data, M.indices
    out[f"{key}_indptr"], out[f"{key}_shape"] = M.indptr, np.asarray(M.shape, dtype=np.int64)


def get_csr(z: Any, key: str) -> sp.csr_matrix:
    """The CSR matrix :func:`put_csr` stored under ``key`` (of an ``np.load`` archive)."""
    shape = tuple(int(x) for x in z[f"{key}_shape"])
    return sp.csr_matrix((z[f"{key}_data"], z[f"{key}_indices"], z[f"{key}_indptr"]), shape=shape)


def pecos_worker(X: sp.csr_matrix, Y: sp.csr_matrix, fits: list[dict[str, Any]], threads: int,
                 seed: int) -> tuple[list[sp.csr_matrix], dict[str, Any]]:
    """Run ``_pecos_worker.py`` in the PECOS interpreter on ``fits`` (rows of ``X`` / ``Y``); the
    predicted score matrices (one per fit) and the worker's meta (seconds, versions)."""
    py = check_pecos()
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS="1", PYTHONNOUSERSITE="1")
    env.pop("PYTHONPATH", None)
    with tempfile.TemporaryDirectory(prefix="pecos-") as tmp:
        jp, op, lp = Path(tmp) / "job.npz", Path(tmp) / "out.npz", Path(tmp) / "worker.log"
        arrays: dict[str, Any] = {"job": np.asarray(json.dumps({"fits": fits, "threads": int(threads),
                                                                "seed": int(seed)}))}
        put_csr(arrays, "X", sp.csr_matrix(X, dtype=np.float32))
        put_csr(arrays, "Y", sp.csr_matrix(Y, dtype=np.float32))
        np.savez(jp, **arrays)
        with open(lp, "wb") as errf:
            rc = subprocess.run([str(py), str(PECOS_WORKER), str(jp), str(op)], stdout=errf, stderr=errf, env=env,
                                cwd=tmp).returncode
        text = lp.read_text(encoding="utf-8", errors="replace")
        if rc != 0 or not op.is_file():
            tail = [ln for ln in text.splitlines() if ln.strip()][-15:]
            raise RuntimeError(f"PECOS worker failed (exit {rc}):\n" + "\n".join(tail))
        with np.load(op, allow_pickle=False) as z:
            meta = json.loads(str(z["meta"]))
            mats = [get_csr(z, f"S{i}") for i in range(len(fits))]
    return mats, meta


def run_pecos(X: sp.csr_matrix, Y: sp.csr_matrix, tr: np.ndarray, te: np.ndarray, doc_ids: Sequence[str],
              seed: int, threads: int, grid: Sequence[float] = PECOS_C,
              thresholds: Sequence[float] = THRESHOLDS) -> tuple[sp.csr_matrix, float, dict[str, Any]]:
    """PECOS XR-Linear under the module's protocol (two worker runs: the grid on the fit / slice
    rows, then the chosen C on the whole training part). Only the ``tr`` rows of ``Y`` leave this
    process (the other rows are sent empty)."""
    check_pecos()
    rows = np.concatenate([tr, te])
    Xj = sp.csr_matrix(X[rows])
    Yj = sp.vstack([sp.csr_matrix(Y[tr], dtype=np.float32),
                    sp.csr_matrix((te.size, Y.shape[1]), dtype=np.float32)]).tocsr()
    pos = {int(r): i for i, r in enumerate(tr.tolist())}  # training rows -> rows of the job
    meta: dict[str, Any] = {}

    def fit_scores(a: np.ndarray, b: np.ndarray, grid: Sequence[float]) -> tuple[dict[float, sp.csr_matrix], float]:
        ja, jb = [pos[int(i)] for i in a], [pos[int(i)] for i in b]
        mats, m = pecos_worker(Xj, Yj, [{"train": ja, "predict": jb, "C": float(C)} for C in grid], threads, seed)
        meta["grid"] = m
        return ({float(C): S for C, S in zip(grid, mats, strict=True)},
                sum(f["train_seconds"] + f["predict_seconds"] for f in m["fits"]))

    def refit(a: np.ndarray, b: np.ndarray, C: float) -> tuple[sp.csr_matrix, float, float]:
        ja = [pos[int(i)] for i in a]
        jb = list(range(tr.size, tr.size + te.size))
        mats, m = pecos_worker(Xj, Yj, [{"train": ja, "predict": jb, "C": float(C)}], threads, seed)
        meta["final"] = m
        return mats[0], m["fits"][0]["train_seconds"], m["fits"][0]["predict_seconds"]

    P, secs, info = _select_and_refit(fit_scores, refit, Y, tr, te, doc_ids, seed, grid, thresholds)
    info["version"] = meta["final"].get("pecos")
    info["threads"] = int(threads)
    return P, secs, info


if __name__ == "__main__":  # python benchmarks/peer_xmc.py: are the peers there?
    print(f"napkinXC: {'importable' if napkinxc_available() else 'missing (pip install napkinxc)'}")
    try:
        print(f"PECOS interpreter: {check_pecos()}")
    except PecosUnavailable as e:
        sys.exit(str(e))
