#!/usr/bin/env python
"""M3MDC on real numeric MDC data: ten-fold cross-validation of M3MDC at the paper's defaults
(λ1 = 0.1, λ2 = 0.001, the model's solver defaults) against LIBLINEAR binary relevance, per fold:
seconds, W-step sub-problem passes, sub-problems that stopped at their pass cap, Hamming Score and
Exact Match (issue 33, point 5).

    python benchmarks/bench_mdc_real.py --data-dir ../shared/data --driver-folds 10

Data: yeast and scene of ``meka_multilabel_numeric`` read as MDC (one binary class space per label:
class 0 = label absent, 1 = present; 10 seeded folds, fold = rank mod 10 of a seeded shuffle, as
``folds.tsv`` files are made), edm and solar_flare1 of ``mdc`` with their own folds. Features as the
experiments scale them (:class:`sparkhc.models.jia_zhang.data.FeatureScaler`: min-max on the
training fold). Paths: the experiments' (``M3MDC.fit`` with the serial pair solver, as
``experiments/m3mdc.py``) on every fold, and the product's driver path
(``sparkhc.spark.mdc.fit_mdc_driver`` on an ``m3mdc`` model, as ``sparkhc train`` runs small inputs;
``--driver-folds`` folds, one thread). BR: scikit-learn ``LinearSVC`` (LIBLINEAR) per class space,
with its defaults and with M3MDC's loss and λ1 (``C = 10``, hinge), on the same folds.

Before the work of issue 33, point 5 on the W step (2026-12-05 11:54 UTC, load 2.4-6.7, one driver
fold): yeast 839.4 s on the experiments' path = 137.8x / 17.4x BR, 1,005,225 passes, 2 of 5,880
sub-problems capped; scene 83.6 s = 20.1x / 5.4x, 65,018 passes. What changed
(``sparkhc.models.jia_zhang.solver``, module docstring): the face step of the DCD sub-problems is a
projected Newton step (its direction followed past the first bound, on the box), solved through the
``d × d`` matrix when the face is wider than the features (yeast's rare labels: ~1,400 free
multipliers within 1e-4 of the margin, 4,000-13,000 passes a sub-problem before), taken every 16
passes up to 8 times; the passes and products on the centred rows run compiled on a dense copy kept
per block; the optimal bias is found by selection. No tolerance was loosened: every fit is
certified to the same relative duality gap (1e-6); on fold 0 the objective is within 4.9e-7 (yeast)
and 6.0e-7 (scene) of a tight reference (``gap_tol = 1e-8``, ``tol = 1e-6``; above it), and the
test folds' mean Hamming Score and Exact Match are those of before.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))  # experiments/ of this checkout
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import scipy.sparse as sp  # noqa: E402
from _common import command, loadavg, machine, now, write_section  # noqa: E402

LAMBDA1, LAMBDA2 = 0.1, 0.001  # the paper's defaults (experiments/m3mdc.py)
FOLD_SEED = 0


def load_multilabel_as_mdc(data_dir: Path, name: str, k: int = 10, seed: int = FOLD_SEED) -> Any:
    """A ``meka_multilabel_numeric`` set as an :class:`MDCDataset`: one binary class space per label."""
    from sparkhc.models.jia_zhang.data import NUMERIC, ColumnSpec, MDCDataset

    folder = data_dir / "meka_multilabel_numeric"
    schema = json.loads((folder / f"{name}.schema.json").read_text(encoding="utf-8"))
    with gzip.open(folder / f"{name}.jsonl.gz", "rt", encoding="utf-8") as fh:
        recs = [json.loads(line) for line in fh if line.strip()]
    labels = [str(v) for v in schema["labels"]]
    X = np.array([r["x"] for r in recs], dtype=np.float64)
    Y = np.array([[int(lab in r["labels"]) for lab in labels] for r in recs], dtype=np.int64)
    perm = np.random.default_rng(seed).permutation(len(recs))
    folds = np.empty(len(recs), dtype=np.int64)
    folds[perm] = np.arange(len(recs)) % k
    names = [str(f) for f in schema.get("features", [])] or [f"x{i}" for i in range(X.shape[1])]
    return MDCDataset(name, np.array([int(r["id"]) for r in recs], dtype=np.int64), X,
                      np.zeros((len(recs), 0), dtype=np.int64), tuple(ColumnSpec(n, NUMERIC) for n in names), Y,
                      tuple(labels), tuple(("absent", "present") for _ in labels), folds)


def load(data_dir: Path, name: str) -> Any:
    from sparkhc.models.jia_zhang.data import load_mdc

    if name in ("yeast", "scene"):
        return load_multilabel_as_mdc(data_dir, name)
    return load_mdc(data_dir / "mdc", name)


def caps_of(history: list[dict[str, Any]]) -> tuple[int, int, int]:
    """(sub-problem passes or SMO iterations, sub-problems solved, sub-problems at their cap)."""
    return (sum(int(h["smo_iterations"]) for h in history), sum(int(h["sub_problems"]) for h in history),
            sum(int(h["capped_sub_problems"]) for h in history))


def fit_experiments(X_tr: np.ndarray, Y_tr: np.ndarray, n_classes: list[int]) -> tuple[Any, float]:
    from sparkhc.models.jia_zhang.solver import M3MDC

    t0 = time.perf_counter()
    m = M3MDC(lambda1=LAMBDA1, lambda2=LAMBDA2).fit(X_tr, Y_tr, n_classes)
    return m, time.perf_counter() - t0


def fit_driver(X_tr: np.ndarray, Y_tr: np.ndarray, n_classes: list[int]) -> tuple[Any, float, dict[str, Any]]:
    """The product's driver path: an ``m3mdc`` model on an MDC taxonomy, ``fit_mdc_driver``."""
    from sparkhc.batch import SparseBatch
    from sparkhc.models import make_model
    from sparkhc.spark.mdc import fit_mdc_driver
    from sparkhc.taxonomy import Taxonomy

    edges = [("ROOT", f"v{j:02d}") for j in range(len(n_classes))]
    edges += [(f"v{j:02d}", f"v{j:02d}/{c}") for j, k in enumerate(n_classes) for c in range(k)]
    tax = Taxonomy.from_edges(edges, root="ROOT")
    model = make_model("m3mdc", tax, X_tr.shape[1], lambda1=LAMBDA1, lambda2=LAMBDA2)
    labels = [[f"v{j:02d}/{c}" for j, c in enumerate(row)] for row in Y_tr.tolist()]
    rows = SparseBatch(sp.csr_matrix(X_tr), np.array([f"d{i:06d}" for i in range(len(labels))]), labels)
    t0 = time.perf_counter()
    res = fit_mdc_driver(rows, model, threads=1)
    return model, time.perf_counter() - t0, res


def fit_br(X_tr: np.ndarray, Y_tr: np.ndarray, X_te: np.ndarray, **kw: Any) -> tuple[np.ndarray, float]:
    from sklearn.svm import LinearSVC

    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # LIBLINEAR's own cap (1,000 iterations) at C = 10: its figure as it is
        fitted = [LinearSVC(random_state=0, **kw).fit(X_tr, Y_tr[:, j]) if np.unique(Y_tr[:, j]).size > 1
                  else int(Y_tr[0, j]) for j in range(Y_tr.shape[1])]
    sec = time.perf_counter() - t0
    pred = np.column_stack([f.predict(X_te) if not isinstance(f, int) else np.full(X_te.shape[0], f)
                            for f in fitted])
    return pred, sec


def run(ds: Any, driver_folds: int, n_folds: int | None) -> dict[str, Any]:
    from experiments.m3mdc import scaled_splits
    from sparkhc.models.jia_zhang.solver import M3MDCConvergenceWarning, mdc_metrics

    folds = []
    for k, tr, te, X_tr, X_te in scaled_splits(ds, n_folds):  # the experiments' folds and scaling
        Y_tr, Y_te = ds.Y[tr], ds.Y[te]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", M3MDCConvergenceWarning)
            m, sec = fit_experiments(X_tr, Y_tr, ds.n_classes)
        passes, solves, capped = caps_of(m.history_)
        h = m.history_[-1]
        rec: dict[str, Any] = {
            "fold": k, "n_train": int(tr.size), "m3mdc_seconds": sec, "w_solver": m.w_solver_,
            "alternations": m.n_iter_, "passes": passes, "sub_problems": solves, "capped": capped,
            "warnings": len(caught), "rel_gap": h["duality_gap"] / max(abs(h["objective_after_w"]), 1.0),
            "objective": h["objective_after_c"], "m3mdc": mdc_metrics(Y_te, m.predict(X_te)),
        }
        if k < driver_folds:
            dm, dsec, res = fit_driver(X_tr, Y_tr, ds.n_classes)
            rec.update(driver_seconds=dsec, driver_capped=res.get("capped_sub_problems"),
                       driver_objective=dm.history_[-1]["objective_after_c"],
                       driver_same_predictions=bool(np.array_equal(dm._estimator.predict(X_te), m.predict(X_te))))
        for key, kw in (("br_default", {}), ("br_c10_hinge", {"C": 1 / LAMBDA1, "loss": "hinge"})):
            pred, bsec = fit_br(X_tr, Y_tr, X_te, **kw)
            rec[key] = {"seconds": bsec, **mdc_metrics(Y_te, pred)}
        folds.append(rec)
        print(f"{ds.name} fold {k}: M3MDC {sec:.1f} s ({m.w_solver_}, {m.n_iter_} alternations, {passes} passes, "
              f"{capped}/{solves} capped, rel gap {rec['rel_gap']:.1e}, HS {rec['m3mdc']['hamming_score']:.4f}); "
              + (f"driver {rec['driver_seconds']:.1f} s; " if "driver_seconds" in rec else "")
              + f"BR {rec['br_default']['seconds']:.2f} s / {rec['br_c10_hinge']['seconds']:.2f} s; load {loadavg()}",
              flush=True)
    return {"name": ds.name, "n": len(ds), "d": int(len(ds.features)), "n_classes": ds.n_classes, "folds": folds}


def row(r: dict[str, Any]) -> str:
    f = r["folds"]
    sec = sum(x["m3mdc_seconds"] for x in f)
    b0 = sum(x["br_default"]["seconds"] for x in f)
    b1 = sum(x["br_c10_hinge"]["seconds"] for x in f)
    drv = [x for x in f if "driver_seconds" in x]
    d_sec = sum(x["driver_seconds"] for x in drv)
    d_b0 = sum(x["br_default"]["seconds"] for x in drv)
    d_b1 = sum(x["br_c10_hinge"]["seconds"] for x in drv)
    drv_s = (f"{d_sec:.1f} s on {len(drv)} fold(s) = {d_sec / d_b0:.1f}x / {d_sec / d_b1:.1f}x BR on them "
             f"(same predictions: {all(x['driver_same_predictions'] for x in drv)}, "
             f"capped {sum(x['driver_capped'] or 0 for x in drv)})" if drv else "not run")

    def mean(key: str, metric: str) -> str:
        return f"{np.mean([x[key][metric] for x in f]):.4f}"

    return (f"| {r['name']} ({r['n']:,} × {r['d']}, K = {','.join(map(str, r['n_classes']))}) | {len(f)} | "
            f"{f[0]['w_solver']} | {sec:.1f} | {drv_s} | {b0:.1f} / {b1:.1f} | {sec / b0:.1f}x / {sec / b1:.1f}x | "
            f"{sum(x['passes'] for x in f):,} | {sum(x['capped'] for x in f)} of {sum(x['sub_problems'] for x in f):,} | "
            f"{max(x['rel_gap'] for x in f):.1e} | {mean('m3mdc', 'hamming_score')} / {mean('m3mdc', 'exact_match')} | "
            f"{mean('br_default', 'hamming_score')} / {mean('br_c10_hinge', 'hamming_score')} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", default="../shared/data")
    ap.add_argument("--datasets", nargs="+", default=["yeast", "scene", "edm", "solar_flare1"])
    ap.add_argument("--folds", type=int, default=None, help="only the first folds (default: all 10)")
    ap.add_argument("--driver-folds", type=int, default=1, help="folds also fitted through fit_mdc_driver")
    ap.add_argument("--json", default=None, help="also write every number here")
    ap.add_argument("--no-write", action="store_true", help="print only; do not write docs/benchmarks.md")
    a = ap.parse_args()
    loads = [loadavg()]
    results = []
    for name in a.datasets:
        results.append(run(load(Path(a.data_dir), name), a.driver_folds, a.folds))
        loads.append(loadavg())
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=1, default=float), encoding="utf-8")
    table = ("| data set | folds | W-step solver | M3MDC s (experiments' path, all folds) | M3MDC s (driver path) | "
             "BR s: LinearSVC() / LinearSVC(C=10, hinge) | M3MDC / BR | sub-problem passes | capped sub-problems | "
             "largest final relative gap | M3MDC HS / EM | BR HS (default / C=10) |\n"
             "|---|---|---|---|---|---|---|---|---|---|---|---|\n" + "\n".join(row(r) for r in results))
    body = (f"Command: `{command()}`  \nMachine: {machine()}  \nDate: {now()}  \n"
            f"Load average (1, 5, 15 min) at the start and after each data set: {' -> '.join(loads)}\n\n"
            + __doc__.split("\n\n", 2)[2].strip() + "\n\n" + table + "\n")
    print(body)
    if not a.no_write:
        write_section("mdc-real", "M3MDC on real numeric MDC data (mdc-real)", body)


if __name__ == "__main__":
    main()
