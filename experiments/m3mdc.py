"""The M3MDC experiment: ten-fold cross-validation of M3MDC and BR (Jia & Zhang 2020, Table 3).

``run_experiment`` writes to ``out_dir``: ``table3.md`` (the paper's Table 3 layout with the
command that produced it, Wilcoxon signed-rank tests, convergence tables, timings and the paper's
numbers for comparison), ``correlation_<data set>.png`` (the class-pair correlation matrix
``R_ij = C_ij / sqrt(C_ii C_jj)`` of M3MDC fitted on the whole data set, the paper's Figure 2),
``convergence_<data set>.png`` (``‖W_t − W_{t−1}‖_F`` per alternation, the paper's Figure 3) and
``results.json`` with every number. Run it with
``python -m experiments.m3mdc --data-dir ../shared/data --out docs/results/m3mdc``.
"""

from __future__ import annotations

import argparse
import logging
import math
import platform
import sys
import time
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import scipy
import scipy.stats

from experiments import harness
from experiments import mdc_baselines as mb
from experiments.significance import VERDICT_RULE, untested, verdict
from sparkhc.models.jia_zhang.data import FeatureScaler, MDCDataset, load_mdc, resolve_mdc_dir
from sparkhc.models.jia_zhang.solver import M3MDC, BinaryRelevanceSVM, PairSolver, mdc_metrics

logger = logging.getLogger(__name__)

COMMAND = "sparkhc experiment m3mdc --data-dir ../shared/data --out docs/results/m3mdc"
MODULE_COMMAND = "python -m experiments.m3mdc --data-dir ../shared/data --out docs/results/m3mdc"
METRICS = ("hamming_score", "exact_match", "sub_exact_match")
METRIC_LABELS = {
    "hamming_score": "Hamming Score",
    "exact_match": "Exact Match",
    "sub_exact_match": "Sub-Exact Match",
}
DISPLAY = {"edm": "Edm", "solar_flare1": "Flare1"}
LAMBDA1 = 0.1
LAMBDA2 = 0.001
BR_LIBSVM_DEFAULT_LAMBDA1 = 1.0  # LIBSVM's default C = 1 <=> lambda1 = 1/C = 1
#: every method of the tables, in row order, with its description
METHODS: dict[str, str] = {
    "M3MDC": f"M3MDC, λ1 = {LAMBDA1}, λ2 = {LAMBDA2} (the paper's defaults), product solver",
    "BR_C1": "BR, product one-vs-one SVMs, λ1 = 1 (= LIBSVM's default C = 1, the paper's BR)",
    "BR_LIBSVM": "BR, LIBSVM (scikit-learn SVC, linear kernel, C = 1), one-vs-one per class space",
    "ECC": "ECC: 10 classifier chains (random order), 67 % samples, majority vote, LIBSVM C = 1",
    "ECP": "ECP: 10 class powersets, 67 % samples, majority vote, LIBSVM C = 1",
    "ESC": "ESC: 10 super-class classifiers (partition chosen on an internal validation third), 67 % samples, "
           "majority vote, LIBSVM C = 1",
    "BR": f"BR, product one-vs-one SVMs, λ1 = {LAMBDA1} (= C = 10, M3MDC's λ1; not the paper's setting)",
}
PAPER_METHODS = ("M3MDC", "BR", "ECC", "ECP", "ESC")
#: a row's name on the pages where its results key would hide a setting (the key stays in results.json):
#: "BR" is BR at M3MDC's λ1 = 0.1 (C = 10), not the paper's BR (C = 1)
ROW_NAMES = {"BR": "BR_C10"}


def row_name(method: str) -> str:
    """The name of our row ``method`` on the pages (:data:`ROW_NAMES`)."""
    return ROW_NAMES.get(method, method)
#: the paper's Figure 1 grid: λ1, λ2 in {10, 1, 0.1, 0.01, 0.001, 0.0001}
GRID = (10.0, 1.0, 0.1, 0.01, 0.001, 0.0001)
QUICK_GRID = (0.1,)
#: W-step cap for the sensitivity grid only (the tables use the solver's default): at λ1 ≤ 1e-3
#: (C ≥ 1000) the dual coordinate descent needs up to 20,000 passes per pair and one fit takes
#: minutes; the grid records the duality gap each cell reached
GRID_DCD_MAX_PASSES = 300

# Jia & Zhang (AAAI 2020), Table 3: (mean, std) per data set, metric and method.
PAPER: dict[str, dict[str, dict[str, tuple[float, float]]]] = {
    "edm": {
        "M3MDC": {
            "hamming_score": (0.728, 0.083),
            "exact_match": (0.501, 0.139),
            "sub_exact_match": (0.955, 0.053),
        },
        "BR": {
            "hamming_score": (0.689, 0.070),
            "exact_match": (0.442, 0.125),
            "sub_exact_match": (0.935, 0.061),
        },
        "ECC": {"hamming_score": (0.695, 0.065), "exact_match": (0.454, 0.123), "sub_exact_match": (0.935, 0.069)},
        "ECP": {"hamming_score": (0.721, 0.082), "exact_match": (0.559, 0.136), "sub_exact_match": (0.883, 0.074)},
        "ESC": {"hamming_score": (0.701, 0.079), "exact_match": (0.513, 0.122), "sub_exact_match": (0.890, 0.076)},
    },
    "solar_flare1": {
        "M3MDC": {
            "hamming_score": (0.923, 0.033),
            "exact_match": (0.821, 0.073),
            "sub_exact_match": (0.951, 0.036),
        },
        "BR": {
            "hamming_score": (0.922, 0.034),
            "exact_match": (0.821, 0.073),
            "sub_exact_match": (0.947, 0.039),
        },
        "ECC": {"hamming_score": (0.922, 0.034), "exact_match": (0.817, 0.078), "sub_exact_match": (0.951, 0.036)},
        "ECP": {"hamming_score": (0.921, 0.036), "exact_match": (0.817, 0.078), "sub_exact_match": (0.947, 0.039)},
        "ESC": {"hamming_score": (0.923, 0.033), "exact_match": (0.821, 0.073), "sub_exact_match": (0.951, 0.036)},
    },
}


def _mean_std(values: Sequence[float]) -> dict[str, float]:
    a = np.asarray(values, dtype=np.float64)
    return {"mean": float(a.mean()), "std": float(a.std(ddof=1)) if a.size > 1 else 0.0}


def wilcoxon_test(x: Sequence[float], y: Sequence[float]) -> dict[str, Any]:
    """Two-sided and one-sided (x > y) Wilcoxon signed-rank tests; zero differences dropped."""
    d = np.asarray(x, dtype=np.float64) - np.asarray(y, dtype=np.float64)
    nonzero = int(np.sum(np.abs(d) > 1e-12))
    out: dict[str, Any] = {
        "n": int(d.size),
        "n_nonzero": nonzero,
        "wins": int(np.sum(d > 1e-12)),
        "losses": int(np.sum(d < -1e-12)),
    }
    if nonzero == 0:
        out.update(statistic=None, p_two_sided=1.0, p_greater=1.0, note="all differences are zero")
        return out
    dz = np.where(np.abs(d) > 1e-12, d, 0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        two = scipy.stats.wilcoxon(dz, zero_method="wilcox", alternative="two-sided")
        greater = scipy.stats.wilcoxon(dz, zero_method="wilcox", alternative="greater")
    out.update(statistic=float(two.statistic), p_two_sided=float(two.pvalue), p_greater=float(greater.pvalue))
    return out


def _fit_predict(
    model: Any, X_tr: np.ndarray, Y_tr: np.ndarray, X_te: np.ndarray, n_classes: list[int]
) -> tuple[np.ndarray, float]:
    t0 = time.perf_counter()
    model.fit(X_tr, Y_tr, n_classes)
    return model.predict(X_te), time.perf_counter() - t0


def _pair_labels(ds: MDCDataset, pairs: np.ndarray) -> list[str]:
    return [f"{ds.target_names[j]}:{ds.class_values[j][a]}v{ds.class_values[j][b]}" for j, a, b in pairs]


def _correlation(C: np.ndarray) -> np.ndarray:
    dg = np.sqrt(np.clip(np.diag(C), 0.0, None))
    denom = np.outer(dg, dg)
    with np.errstate(divide="ignore", invalid="ignore"):
        R = np.where(denom > 0, C / np.where(denom > 0, denom, 1.0), 0.0)
    return np.asarray(R)


def _fit_baselines(X_tr: np.ndarray, Y_tr: np.ndarray, X_te: np.ndarray, n_classes: list[int],
                   seed: int) -> dict[str, Any]:
    """The paper's LIBSVM baselines (BR, ECC, ECP, ESC; :mod:`experiments.mdc_baselines`) on one
    split: predictions, fit seconds and the ensembles' chain orders / partitions."""
    out: dict[str, Any] = {}
    models: dict[str, Any] = {"BR_LIBSVM": mb.BinaryRelevance()}
    models.update({kind: mb.Ensemble(kind, seed=seed) for kind in mb.KINDS})
    for name, model in models.items():
        pred, sec = _fit_predict(model, X_tr, Y_tr, X_te, n_classes)
        out[name] = {"pred": pred, "fit_seconds": sec,
                     "members": model.describe() if isinstance(model, mb.Ensemble) else None}
    return out


def scaled_splits(ds: MDCDataset, n_folds: int | None = None) -> Iterator[tuple[int, np.ndarray, np.ndarray,
                                                                               np.ndarray, np.ndarray]]:
    """``(fold, train rows, test rows, X_tr, X_te)`` of every cross-validation fold (``n_folds``: the
    first ones only), the features scaled on the training rows (:class:`FeatureScaler`)."""
    for k, tr, te in ds.cv_splits():
        if n_folds is not None and k >= n_folds:
            break
        scaler = FeatureScaler(ds.features).fit(ds, tr)
        yield k, tr, te, scaler.transform(ds, tr), scaler.transform(ds, te)


def run_dataset(ds: MDCDataset, solver: PairSolver | None = None, n_folds: int | None = None) -> dict[str, Any]:
    """Cross-validate M3MDC, BR (λ1 = 0.1 and 1) and the paper's LIBSVM baselines (BR, ECC, ECP,
    ESC; ensembles seeded with the fold number) (``n_folds``: the first folds only, for a smoke
    run); fit M3MDC on all data for C."""
    folds: list[dict[str, Any]] = []
    for k, tr, te, X_tr, X_te in scaled_splits(ds, n_folds):
        Y_tr, Y_te = ds.Y[tr], ds.Y[te]
        m3 = M3MDC(lambda1=LAMBDA1, lambda2=LAMBDA2, solver=solver)
        pred_m3, sec_m3 = _fit_predict(m3, X_tr, Y_tr, X_te, ds.n_classes)
        br = BinaryRelevanceSVM(lambda1=LAMBDA1, solver=solver)
        pred_br, sec_br = _fit_predict(br, X_tr, Y_tr, X_te, ds.n_classes)
        br1 = BinaryRelevanceSVM(lambda1=BR_LIBSVM_DEFAULT_LAMBDA1, solver=solver)
        pred_br1, sec_br1 = _fit_predict(br1, X_tr, Y_tr, X_te, ds.n_classes)
        fold: dict[str, Any] = {
            "fold": k,
            "n_train": int(tr.size),
            "n_test": int(te.size),
            "M3MDC": {
                "metrics": mdc_metrics(Y_te, pred_m3),
                "fit_seconds": sec_m3,
                "n_iter": m3.n_iter_,
                "converged": m3.converged_,
                "history": m3.history_,
            },
            "BR": {"metrics": mdc_metrics(Y_te, pred_br), "fit_seconds": sec_br},
            "BR_C1": {"metrics": mdc_metrics(Y_te, pred_br1), "fit_seconds": sec_br1},
        }
        for name, r in _fit_baselines(X_tr, Y_tr, X_te, ds.n_classes, seed=k).items():
            fold[name] = {"metrics": mdc_metrics(Y_te, r["pred"]), "fit_seconds": r["fit_seconds"]}
            if r["members"] is not None:
                fold[name]["members"] = r["members"]
        folds.append(fold)
        logger.info(
            "%s fold %d: HS %s (%.1fs, %d alternations)",
            ds.name,
            k,
            " ".join(f"{m} {fold[m]['metrics']['hamming_score']:.4f}" for m in METHODS),
            sec_m3,
            m3.n_iter_,
        )
    summary = {
        method: {metric: _mean_std([f[method]["metrics"][metric] for f in folds]) for metric in METRICS}
        for method in METHODS
    }
    per_fold_tests = {
        other: {
            metric: wilcoxon_test(
                [f["M3MDC"]["metrics"][metric] for f in folds], [f[other]["metrics"][metric] for f in folds]
            )
            for metric in METRICS
        }
        for other in METHODS if other != "M3MDC"
    }
    # the learned class-pair covariance (Figure 2) from one fit on the whole data set
    scaler = FeatureScaler(ds.features).fit(ds)
    X_all = scaler.transform(ds)
    t0 = time.perf_counter()
    full = M3MDC(lambda1=LAMBDA1, lambda2=LAMBDA2, solver=solver).fit(X_all, ds.Y, ds.n_classes)
    full_seconds = time.perf_counter() - t0
    return {
        "name": ds.name,
        "n_examples": len(ds),
        "n_features_raw": len(ds.features),
        "n_features_encoded": int(X_all.shape[1]),
        "class_spaces": [
            {"name": n, "values": list(v)} for n, v in zip(ds.target_names, ds.class_values, strict=True)
        ],
        "n_pairs": int(full.pairs_.shape[0]),
        "fold_sizes": [int(np.sum(ds.folds == k)) for k in range(ds.n_folds)],
        "folds": folds,
        "summary": summary,
        "wilcoxon_over_folds": per_fold_tests,
        "full_fit": {
            "pairs": _pair_labels(ds, full.pairs_),
            "C": full.C_.tolist(),
            "R": _correlation(full.C_).tolist(),
            "history": full.history_,
            "n_iter": full.n_iter_,
            "converged": full.converged_,
            "fit_seconds": full_seconds,
        },
    }


def _fmt(ms: dict[str, float]) -> str:
    return f"{ms['mean']:.3f} ± {ms['std']:.3f}"


def _fmt_p(p: float | None) -> str:
    return "n/a" if p is None or (isinstance(p, float) and math.isnan(p)) else f"{p:.3g}"


def _plot_correlation(res: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    R = np.asarray(res["full_fit"]["R"])
    labels = res["full_fit"]["pairs"]
    m = R.shape[0]
    fig, ax = plt.subplots(figsize=(1.0 + 0.55 * m + 2.0, 0.55 * m + 2.0))
    im = ax.imshow(R, cmap="jet", vmin=-1.0, vmax=1.0)
    ax.set_xticks(range(m), labels, rotation=90, fontsize=7)
    ax.set_yticks(range(m), labels, fontsize=7)
    for i in range(m):
        for j in range(m):
            ax.text(j, i, f"{R[i, j]:.2f}", ha="center", va="center", fontsize=6, color="black")
    fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    ax.set_title(
        f"M3MDC correlation matrix R = C_ij / sqrt(C_ii C_jj): {DISPLAY.get(res['name'], res['name'])}",
        fontsize=8,
    )
    fig.tight_layout()
    harness.save_plot(fig, path, dpi=120)
    plt.close(fig)


def _plot_convergence(res: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.0, 3.5))
    for f in res["folds"]:
        h = f["M3MDC"]["history"]
        ax.semilogy([r["iteration"] for r in h], [max(r["delta_w"], 1e-16) for r in h], color="0.7", lw=0.8)
    h = res["full_fit"]["history"]
    ax.semilogy(
        [r["iteration"] for r in h],
        [max(r["delta_w"], 1e-16) for r in h],
        "o-",
        color="C3",
        label="whole data set",
    )
    ax.plot([], [], color="0.7", lw=0.8, label="CV training folds")
    ax.set_xlabel("alternation t")
    ax.set_ylabel("||W_t - W_(t-1)||_F")
    ax.set_title(f"M3MDC convergence: {DISPLAY.get(res['name'], res['name'])}", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    harness.save_plot(fig, path, dpi=120)
    plt.close(fig)


def _grid_cell(task: tuple[Any, ...]) -> dict[str, Any]:
    """One cell × fold of the sensitivity grid: M3MDC at (λ1, λ2) in process (serial pair solver,
    W step capped at :data:`GRID_DCD_MAX_PASSES` passes); runs in a Spark task."""
    l1, l2, k, X_tr, Y_tr, X_te, Y_te, n_classes = task
    logging.getLogger("sparkhc.models.jia_zhang.solver").setLevel(logging.ERROR)
    t0 = time.perf_counter()
    m = M3MDC(lambda1=l1, lambda2=l2, dcd_max_passes=GRID_DCD_MAX_PASSES)
    m.fit(X_tr, Y_tr, n_classes)
    return {
        "lambda1": l1,
        "lambda2": l2,
        "fold": k,
        "metrics": mdc_metrics(Y_te, m.predict(X_te)),
        "converged": bool(m.converged_),
        "n_iter": int(m.n_iter_),
        "max_duality_gap": float(max((h["duality_gap"] for h in m.history_), default=0.0)),
        "seconds": time.perf_counter() - t0,
    }


def lambda_grid(ds: MDCDataset, spark: Any = None, grid: Sequence[float] = GRID,
                n_folds: int | None = None) -> dict[str, Any]:
    """The paper's Figure 1: M3MDC's cross-validated metrics over λ1 × λ2 in ``grid`` (same folds
    and scaling as the tables). The (cell, fold) fits run as Spark tasks when ``spark`` is given."""
    tasks = []
    for k, tr, te, X_tr, X_te in scaled_splits(ds, n_folds):
        for l1 in grid:
            for l2 in grid:
                tasks.append((l1, l2, k, X_tr, ds.Y[tr], X_te, ds.Y[te], list(ds.n_classes)))
    t0 = time.perf_counter()
    if spark is not None:
        cells = spark.sparkContext.parallelize(tasks, len(tasks)).map(_grid_cell).collect()
    else:
        cells = [_grid_cell(t) for t in tasks]
    table = []
    for l1 in grid:
        for l2 in grid:
            rows = [c for c in cells if c["lambda1"] == l1 and c["lambda2"] == l2]
            table.append({
                "lambda1": l1,
                "lambda2": l2,
                **{m: _mean_std([r["metrics"][m] for r in rows]) for m in METRICS},
                "folds": len(rows),
                "converged_folds": sum(r["converged"] for r in rows),
                "max_duality_gap": max(r["max_duality_gap"] for r in rows),
                "seconds": sum(r["seconds"] for r in rows),
            })
    return {"grid": list(grid), "dcd_max_passes": GRID_DCD_MAX_PASSES, "cells": table,
            "wall_seconds": time.perf_counter() - t0, "backend": "Spark tasks" if spark is not None else "serial"}


def _plot_grid(ds_results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [n for n in ds_results if "lambda_grid" in ds_results[n]]
    fig, axes = plt.subplots(len(names), len(METRICS), figsize=(4.2 * len(METRICS), 3.6 * len(names)),
                             squeeze=False)
    for r, name in enumerate(names):
        g = ds_results[name]["lambda_grid"]
        grid = g["grid"]
        for c, metric in enumerate(METRICS):
            ax = axes[r][c]
            M = np.array([[next(x[metric]["mean"] for x in g["cells"] if x["lambda1"] == l1 and x["lambda2"] == l2)
                           for l2 in grid] for l1 in grid])
            im = ax.imshow(M, cmap="viridis", aspect="auto")
            for i in range(len(grid)):
                for j in range(len(grid)):
                    ax.text(j, i, f"{M[i, j]:.3f}", ha="center", va="center", fontsize=6,
                            color="white" if M[i, j] < (M.min() + M.max()) / 2 else "black")
            ax.set_xticks(range(len(grid)), [f"{v:g}" for v in grid], fontsize=7)
            ax.set_yticks(range(len(grid)), [f"{v:g}" for v in grid], fontsize=7)
            ax.set_xlabel("λ2", fontsize=8)
            ax.set_ylabel("λ1", fontsize=8)
            ax.set_title(f"{DISPLAY.get(name, name)}: {METRIC_LABELS[metric]}", fontsize=9)
            fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    fig.suptitle("M3MDC sensitivity to λ1, λ2 (10-fold CV means; paper Figure 1 layout as heat maps)", fontsize=10)
    fig.tight_layout()
    harness.save_plot(fig, path, dpi=110)
    plt.close(fig)


def _verdict(paper_diff: float, ours: float, p_greater: float | None, p_two_sided: float | None) -> str:
    """The verdict on a paper claim "A better than / level with / worse than B" from our mean
    difference ``ours`` (A - B) and the two-sided Wilcoxon p over folds: the one rule of every
    results page (:func:`experiments.significance.verdict`); ``p_greater`` is shown, not used."""
    del p_greater
    return verdict(float(np.sign(paper_diff)), ours, p_two_sided)


def findings(results: dict[str, Any]) -> list[dict[str, str]]:
    """The findings table's rows (the paper's claims about Edm / Flare1 and its defaults)."""
    rows: list[dict[str, str]] = []
    ds_res = results["datasets"]
    for name, res in ds_res.items():
        if name not in PAPER:
            continue
        s, w = res["summary"], res["wilcoxon_over_folds"]
        d = DISPLAY.get(name, name)
        for other, label in (("BR_C1", "BR (C = 1)"), ("ECC", "ECC"), ("ECP", "ECP"), ("ESC", "ESC")):
            paper_key = "BR" if other.startswith("BR") else other
            for metric in METRICS:
                if metric != "hamming_score" and not (other == "BR_C1" or other == "ECP"):
                    continue
                pd = PAPER[name]["M3MDC"][metric][0] - PAPER[name][paper_key][metric][0]
                ours = s["M3MDC"][metric]["mean"] - s[other][metric]["mean"]
                t = w[other][metric]
                claim = "better than" if pd > 0 else ("level with" if pd == 0 else "worse than")
                verdict = _verdict(pd, ours, t["p_greater"], t["p_two_sided"])
                rows.append({
                    "finding": f"{d}: M3MDC {claim} {label} in {METRIC_LABELS[metric]}",
                    "paper": f"{PAPER[name]['M3MDC'][metric][0]:.3f} vs {PAPER[name][paper_key][metric][0]:.3f} "
                             f"({pd:+.3f})",
                    "ours": f"{_fmt(s['M3MDC'][metric])} vs {_fmt(s[other][metric])} ({ours:+.3f})",
                    "significance": f"Wilcoxon signed-rank over {t['n']} folds: one-sided p = {_fmt_p(t['p_greater'])}, "
                                    f"two-sided p = {_fmt_p(t['p_two_sided'])} ({t['wins']} wins / {t['losses']} losses)",
                    "verdict": verdict,
                })
    for name, res in ds_res.items():
        g = res.get("lambda_grid")
        if not g:
            continue
        best = max(g["cells"], key=lambda c: c["hamming_score"]["mean"])
        default = next((c for c in g["cells"] if c["lambda1"] == LAMBDA1 and c["lambda2"] == LAMBDA2), None)
        if default is None:
            continue
        at01 = [c for c in g["cells"] if c["lambda1"] == LAMBDA1 and c["lambda2"] <= 1.0]
        spread = max(c["hamming_score"]["mean"] for c in at01) - min(c["hamming_score"]["mean"] for c in at01)
        gap = best["hamming_score"]["mean"] - default["hamming_score"]["mean"]
        rows.append({
            "finding": f"{DISPLAY.get(name, name)}: λ1 = 0.1 with λ2 ≤ 1 is (near) best; default λ1 = 0.1, λ2 = 0.001",
            "paper": "Figure 1 (Music, Song): relatively better at λ1 = 0.1, λ2 ≤ 1",
            "ours": f"default HS {_fmt(default['hamming_score'])}; grid best HS {best['hamming_score']['mean']:.3f} at "
                    f"λ1 = {best['lambda1']:g}, λ2 = {best['lambda2']:g} (default {gap:.3f} below); HS spread over "
                    f"λ2 ≤ 1 at λ1 = 0.1: {spread:.3f}",
            "significance": "none (a sensitivity plot; the best cell is read off the test folds, so it is no selection)",
            "verdict": untested(2 if gap <= 0.01 else (1 if gap <= 0.03 else 0), 2),
        })
    return rows


def _gain_sentence(gain_c1: float, gain_c10: float) -> str:
    """What the two M3MDC - BR differences in Hamming Score say about where the gain comes from."""
    if gain_c1 <= 0:
        return "there is no paper-faithful gain to explain (M3MDC is not above BR at C = 1)."
    if gain_c10 <= 0:
        return "the whole paper-faithful gain is the regularisation strength: at equal C, BR is level or ahead."
    if gain_c10 < 0.5 * gain_c1:
        return "most of the paper-faithful gain is the regularisation strength, not the coupling of the class spaces."
    return "the gain does not come from the C difference alone."


def _what_holds(results: dict[str, Any]) -> list[str]:
    """Plain statements read off the numbers of this run."""
    out = ["## What holds", ""]
    for name, res in results["datasets"].items():
        s, w = res["summary"], res["wilcoxon_over_folds"]
        d = DISPLAY.get(name, name)
        for metric in METRICS:
            order = sorted(METHODS, key=lambda m: -s[m][metric]["mean"])
            rank = order.index("M3MDC") + 1
            sig = [o for o in METHODS if o != "M3MDC" and w[o][metric]["p_greater"] is not None
                   and w[o][metric]["p_greater"] < 0.05]
            out.append(
                f"- {d}, {METRIC_LABELS[metric]}: M3MDC ranks {rank} of {len(METHODS)} "
                f"(best: {row_name(order[0])} {s[order[0]][metric]['mean']:.3f}); significantly better (one-sided "
                f"Wilcoxon over folds, p < 0.05) than {', '.join(map(row_name, sig)) if sig else 'none'}."
            )
        gain_c1 = s["M3MDC"]["hamming_score"]["mean"] - s["BR_C1"]["hamming_score"]["mean"]
        gain_c10 = s["M3MDC"]["hamming_score"]["mean"] - s["BR"]["hamming_score"]["mean"]
        out.append(
            f"- {d}: M3MDC − BR in Hamming Score is {gain_c1:+.3f} against BR at the paper's C = 1 and "
            f"{gain_c10:+.3f} against BR at M3MDC's own λ1 = 0.1 (C = 10): "
            + _gain_sentence(gain_c1, gain_c10)
        )
    out.append("")
    return out


def _findings_table(rows: list[dict[str, str]]) -> list[str]:
    out = ["| finding | paper | ours (mean ± std over folds) | significance | verdict |",
           "| --- | --- | --- | --- | --- |"]
    out += [f"| {r['finding']} | {r['paper']} | {r['ours']} | {r['significance']} | {r['verdict']} |" for r in rows]
    return out


def _table3(results: dict[str, Any]) -> str:
    ds_res = results["datasets"]
    rows = findings(results)
    lines = [
        "# M3MDC vs BR, ECC, ECP, ESC: Jia & Zhang (AAAI 2020) Table 3 layout",
        "",
        "Produced by:",
        "",
        "```",
        COMMAND,
        "```",
        "",
        f"(the same as `{MODULE_COMMAND}`, run from the repository root).",
        "",
        "## Findings",
        "",
        "Paper-faithful comparisons: M3MDC at the paper's λ1 = 0.1, λ2 = 0.001 against the baselines at the "
        "paper's settings (LIBSVM linear kernel with its default C = 1; ensembles of 10 members on 67 % samples, "
        "majority vote). The paper's test is the Wilcoxon signed-rank test over its 10 data sets per metric; "
        "with two data sets here it is applied over the 10 folds of each data set (one-sided: M3MDC better). "
        + VERDICT_RULE + " "
        "No extension (tuned setting) is used in these rows; nothing here was chosen on test folds.",
        "",
        *_findings_table(rows),
        "",
        "In words: see *What holds* below the tables.",
        "",
        "## Protocol",
        "",
        f"Ten-fold cross-validation with the staged folds; mean ± standard deviation (ddof = 1) over the "
        f"10 test folds. M3MDC: λ1 = {LAMBDA1}, λ2 = {LAMBDA2}, C₀ = I/m, stop when "
        "‖W_t − W_{t−1}‖_F / ‖W_t‖_F < 1e-4 or after 20 alternations. Numeric features min–max "
        "scaled with training-fold statistics, nominal features one-hot (the same inputs for every method). "
        "Methods (rows):",
        "",
    ]
    lines += [f"- **{row_name(m)}**: {d}" for m, d in METHODS.items()]
    lines += [
        "",
        "The ensembles (`experiments/mdc_baselines.py`) follow the paper's description; where it is silent: "
        "majority vote per class space (ties to the lowest class index), chains trained on the true values "
        "of the earlier class spaces, ESC's partition chosen among all partitions of the class spaces (2 for "
        "Edm, 5 for Flare1, instead of Read et al.'s simulated annealing) by exact match on an internal "
        "validation third of the member's sample, no pruning of rare combinations. Ensemble random "
        "numbers are seeded with the fold number.",
        "",
        "## Table 3 (this implementation)",
        "",
        "| Data set | Method | " + " | ".join(METRIC_LABELS[m] for m in METRICS) + " |",
        "| --- | --- | " + " | ".join("---" for _ in METRICS) + " |",
    ]
    for name, res in ds_res.items():
        s = res["summary"]
        for method in METHODS:
            cells = []
            for metric in METRICS:
                best = max(s[m][metric]["mean"] for m in METHODS)
                text = _fmt(s[method][metric])
                cells.append(f"**{text}**" if s[method][metric]["mean"] >= best - 1e-12 else text)
            lines.append(f"| {DISPLAY.get(name, name)} | {row_name(method)} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Bold: the best mean in its data set and column.",
        "",
        "## The paper's Table 3 (same data sets)",
        "",
        "| Data set | Method | " + " | ".join(METRIC_LABELS[m] for m in METRICS) + " |",
        "| --- | --- | " + " | ".join("---" for _ in METRICS) + " |",
    ]
    for name in (n for n in ds_res if n in PAPER):
        for method in PAPER_METHODS:
            cells = [f"{PAPER[name][method][m][0]:.3f} ± {PAPER[name][method][m][1]:.3f}" for m in METRICS]
            lines.append(f"| {DISPLAY.get(name, name)} | {method} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "The paper's BR is LIBSVM with its default C = 1: compare it with our BR_C1 and BR_LIBSVM rows.",
        "",
        "## Wilcoxon signed-rank tests, M3MDC vs each method, over the 10 folds",
        "",
        "scipy.stats.wilcoxon, zero differences dropped; one-sided alternative: M3MDC better.",
        "",
        "| Data set | vs | Metric | non-zero / folds | wins / losses | p two-sided | p one-sided |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, res in ds_res.items():
        for other, tests in res["wilcoxon_over_folds"].items():
            for metric in METRICS:
                t = tests[metric]
                lines.append(
                    f"| {DISPLAY.get(name, name)} | {row_name(other)} | {METRIC_LABELS[metric]} | {t['n_nonzero']} / {t['n']} | "
                    f"{t['wins']} / {t['losses']} | {_fmt_p(t['p_two_sided'])} | {_fmt_p(t['p_greater'])} |"
                )
    w = results["wilcoxon"]
    lines += [
        "",
        "Over data sets × metrics (pairs of fold means, M3MDC vs BR_C1): "
        f"n = {w['pooled']['n']} pairs, {w['pooled']['n_nonzero']} non-zero, M3MDC better in {w['pooled']['wins']}, "
        f"worse in {w['pooled']['losses']}; two-sided p = {_fmt_p(w['pooled']['p_two_sided'])}, one-sided "
        f"p = {_fmt_p(w['pooled']['p_greater'])} (with n ≤ 6 the smallest attainable two-sided p is 0.031; the "
        "paper pooled 10 data sets per metric).",
        "",
    ]
    lines += _what_holds(results)
    grids = {n: r["lambda_grid"] for n, r in ds_res.items() if "lambda_grid" in r}
    if grids:
        g0 = next(iter(grids.values()))
        lines += [
            "## Sensitivity to λ1, λ2 (the paper's Figure 1)",
            "",
            f"Plot: `sensitivity_lambda.png`. M3MDC over λ1 × λ2 ∈ {{{', '.join(f'{v:g}' for v in g0['grid'])}}}², "
            "the same 10 folds and scaling as the tables; each (cell, fold) fit is one Spark task running the "
            f"serial pair solver, with the W step capped at {g0['dcd_max_passes']} passes per pair (the tables use "
            "the product default of 20,000; at λ1 ≤ 0.001 one uncapped fit takes minutes), so the cells report "
            "the largest W-step duality gap they ended with. The paper shows Music and Song, which are not "
            "staged here; this grid is on Edm and Flare1. It is a sensitivity analysis on the test folds, not a "
            "selection: the tables use the paper's defaults.",
            "",
        ]
        for name, g in grids.items():
            lines += [
                f"### {DISPLAY.get(name, name)} (wall {g['wall_seconds']:.0f} s)",
                "",
                "| λ1 | λ2 | " + " | ".join(METRIC_LABELS[m] for m in METRICS)
                + " | converged folds | max W-step gap |",
                "| --- | --- | " + " | ".join("---" for _ in METRICS) + " | --- | --- |",
            ]
            for c in g["cells"]:
                mark = " (default)" if c["lambda1"] == LAMBDA1 and c["lambda2"] == LAMBDA2 else ""
                lines.append(
                    f"| {c['lambda1']:g} | {c['lambda2']:g}{mark} | " + " | ".join(_fmt(c[m]) for m in METRICS)
                    + f" | {c['converged_folds']} / {c['folds']} | {c['max_duality_gap']:.1e} |"
                )
            lines.append("")
    lines += ["## Convergence (‖W_t − W_{t−1}‖_F per alternation; W_0 = 0)", ""]
    for name, res in ds_res.items():
        ff = res["full_fit"]
        lines += [
            f"### {DISPLAY.get(name, name)}: M3MDC on the whole data set "
            f"({ff['n_iter']} alternations, converged: {ff['converged']}, {ff['fit_seconds']:.1f} s)",
            "",
            "| t | objective after W step | objective after C step | ‖W_t − W_{t−1}‖_F | relative | W-step sweeps "
            "| W-step duality gap | previous W kept |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for h in ff["history"]:
            lines.append(
                f"| {h['iteration']} | {h['objective_after_w']:.8f} | {h['objective_after_c']:.8f} | "
                f"{h['delta_w']:.3e} | {h['rel_delta_w']:.3e} | {h['inner_sweeps']} | {h['duality_gap']:.1e} | "
                f"{'yes' if h['kept_previous_w'] else 'no'} |"
            )
        iters = [f["M3MDC"]["n_iter"] for f in res["folds"]]
        kept = sum(h["kept_previous_w"] for f in res["folds"] for h in f["M3MDC"]["history"])
        lines += [
            "",
            f"Cross-validation folds: {min(iters)}–{max(iters)} alternations (median {np.median(iters):g}), "
            f"all converged: {all(f['M3MDC']['converged'] for f in res['folds'])}; alternations whose W step "
            f"could not lower the objective beyond its duality gap (previous W kept, ‖ΔW‖ = 0): {kept}. "
            f"Plot: `convergence_{name}.png`; correlation matrix: `correlation_{name}.png`.",
            "",
        ]
    lines += [
        "## Timing",
        "",
        "Fit seconds per fold (mean over folds; wall time on the shared machine, not a benchmark):",
        "",
        "| Data set | " + " | ".join(map(row_name, METHODS)) + " | total (s) |",
        "| --- | " + " | ".join("---" for _ in METHODS) + " | --- |",
    ]
    for name, res in ds_res.items():
        secs = [np.mean([f[m]["fit_seconds"] for f in res["folds"]]) for m in METHODS]
        lines.append(f"| {DISPLAY.get(name, name)} | " + " | ".join(f"{x:.2f}" for x in secs)
                     + f" | {res['seconds']:.1f} |")
    lines += [
        "",
        f"Total {results['seconds']:.1f} s ({results['backend']} pairwise solver; Python {results['python']}, "
        f"numpy {results['numpy']}, scipy {results['scipy']}).",
        "",
        "## Data",
        "",
    ]
    for name, res in ds_res.items():
        ks = ", ".join(f"{c['name']} {{{','.join(c['values'])}}}" for c in res["class_spaces"])
        lines.append(
            f"- {DISPLAY.get(name, name)} (`{name}`): {res['n_examples']} examples, {res['n_features_raw']} features "
            f"({res['n_features_encoded']} after one-hot), class spaces {ks}, m = {res['n_pairs']} pairs, "
            f"fold sizes {res['fold_sizes']}."
        )
    lines += [
        "",
        "Sources in `../shared/data/mdc/SOURCE.md`. The paper's Flare1 copy may encode values differently "
        "from the MEKA/UCI solar_flare1 used here; Edm is the PALM-lab file with its own folds.",
        "",
    ]
    return "\n".join(lines)


def run_experiment(
    data_dir: str | Path,
    out_dir: str | Path,
    datasets: Sequence[str] = ("edm", "solar_flare1"),
    spark: Any = None,
    folds: int | None = None,
    grid: Sequence[float] | None = GRID,
) -> dict[str, Any]:
    """Run the cross-validation on ``datasets`` and write table, plots and ``results.json``
    (``folds``: the first folds only, a smoke run; ``grid``: the λ1 × λ2 values of the
    sensitivity study, ``None`` for none).

    ``data_dir`` is ``../shared/data`` (or its ``mdc`` folder). With a SparkSession ``spark`` the
    pairwise sub-problems run on Spark (same results as the serial solver). Returns the results.
    """
    t0 = time.perf_counter()
    mdc_dir = resolve_mdc_dir(data_dir)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    solver: PairSolver | None = None
    backend = "serial"
    if spark is not None:
        from sparkhc.spark.mdc import SparkPairSolver

        solver = SparkPairSolver(spark)
        backend = "Spark"
    ds_results: dict[str, Any] = {}
    for name in datasets:
        t1 = time.perf_counter()
        ds = load_mdc(mdc_dir, name)
        res = run_dataset(ds, solver, folds)
        res["seconds"] = time.perf_counter() - t1
        ds_results[name] = res
        _plot_correlation(res, out / f"correlation_{name}.png")
        _plot_convergence(res, out / f"convergence_{name}.png")
        if grid:
            res["lambda_grid"] = lambda_grid(ds, spark, grid, folds)
            res["seconds"] = time.perf_counter() - t1
    if grid:
        _plot_grid(ds_results, out / "sensitivity_lambda.png")
    m3 = [ds_results[n]["summary"]["M3MDC"][m]["mean"] for n in ds_results for m in METRICS]
    br = [ds_results[n]["summary"]["BR_C1"][m]["mean"] for n in ds_results for m in METRICS]
    results: dict[str, Any] = {
        "command": COMMAND,
        "module_command": MODULE_COMMAND,
        "settings": {
            "lambda1": LAMBDA1,
            "lambda2": LAMBDA2,
            "tol": 1e-4,
            "max_iter": 20,
            "ridge": 1e-8,
            "br_libsvm_default_lambda1": BR_LIBSVM_DEFAULT_LAMBDA1,
            "ensembles": {"members": mb.N_MEMBERS, "sample_fraction": mb.SAMPLE_FRACTION, "C": mb.LIBSVM_DEFAULT_C,
                          "esc_validation_fraction": mb.ESC_VALIDATION_FRACTION, "seed": "fold number"},
            "methods": METHODS,
        },
        "datasets": ds_results,
        "wilcoxon": {
            "pooled": wilcoxon_test(m3, br),
            "pooled_pairs": [{"dataset": n, "metric": m} for n in ds_results for m in METRICS],
            "pooled_against": "BR_C1",
        },
        "paper": {n: PAPER[n] for n in ds_results if n in PAPER},
        "backend": backend,
        "folds_run": folds,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
    }
    results["seconds"] = time.perf_counter() - t0
    harness.write_markdown(out / "table3.md", _table3(results))
    harness.write_json(out / "results.json", results, default=_json_default)
    return results


def _json_default(o: Any) -> Any:
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m experiments.m3mdc", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--data-dir", required=True, help="../shared/data (or its mdc folder)")
    parser.add_argument("--out", required=True, help="output directory, e.g. docs/results/m3mdc")
    parser.add_argument("--datasets", nargs="+", default=["edm", "solar_flare1"])
    parser.add_argument(
        "--spark-master", default=None, help="run the pairwise solves on Spark (e.g. local[2])"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("sparkhc.models.jia_zhang.solver").setLevel(logging.WARNING)
    spark = None
    if args.spark_master:
        from sparkhc.spark.mdc import get_session

        spark = get_session(args.spark_master)
    try:
        res = run_experiment(args.data_dir, args.out, tuple(args.datasets), spark)
    finally:
        if spark is not None:
            spark.stop()
    for name, r in res["datasets"].items():
        s = r["summary"]
        for m in METRICS:
            print(f"{name} {m}: " + ", ".join(f"{k} {_fmt(s[k][m])}" for k in METHODS))
    print(f"wrote {args.out} in {res['seconds']:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
