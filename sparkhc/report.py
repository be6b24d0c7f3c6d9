"""Evaluation reports: HTML and Markdown with metric tables and plots (``sparkhc report``).

Input: a predictions folder written by ``sparkhc predict`` (and ``evaluate``)::

    predictions/data/*.parquet   doc_id, labels (gold), pred_labels, pred_scores, ...
    predictions/_MODEL.json      model dir, model version, taxonomy fingerprint, features, scored labels
    predictions/metrics.json     (optional) the result of ``sparkhc evaluate``

Read with pyarrow on the driver (no Spark). The count tables are rebuilt with
:class:`sparkhc.metrics.MetricCounts` from the gold and predicted label sets (ancestor-closed),
which gives the metric table, the per-node TP/FP/FN behind the per-level and per-label F1, and,
from the same sets, the most confused sibling pairs: a document whose gold set holds ``c`` but
not its sibling ``c'`` while the prediction holds ``c'`` but not ``c`` counts once for
``c -> c'``.

Output folder::

    report.html   tables, plots (<img>), responsive (tables scroll inside their box, images
                  scale down), no external resources
    report.md     the same tables and plots in Markdown
    plots/*.png   per-level F1, per-label F1, precision-recall by score threshold (when the
                  predictions carry scores), branching-feature weights (models with ``bf``), the
                  reliability of the calibrated scores (``predict --top``)

With ``predict --top`` the report checks the calibrated scores: the labels shown (predicted and
suggested) kept at a score threshold, and the share of them that are correct. With ``predict
--explain`` it lists the words behind the labels of a sample of documents (the first by id).

Plots need matplotlib (``pip install matplotlib``); without it the report has the tables and a
note instead of the plots.
"""

from __future__ import annotations

import datetime as _dt
import html
import json
import logging
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import scipy.sparse as sp

from sparkhc.errors import ModelError, SchemaError
from sparkhc.metrics import METRIC_KEYS, MetricCounts, pr_curve
from sparkhc.predictions import PRED_DATA_DIR, data_location, read_prediction_meta
from sparkhc.taxonomy import ConceptDag, Taxonomy

log = logging.getLogger(__name__)

__all__ = ["ReportData", "build_report", "collect", "write_html", "write_markdown"]

METRICS_FILE = "metrics.json"
GOLD, PRED, SCORES = "labels", "pred_labels", "pred_scores"
SUGGESTIONS, CALIBRATED, EXPLANATIONS = "suggestions", "pred_calibrated", "explanations"
#: score thresholds of the calibration table
CALIBRATION_THRESHOLDS: tuple[float, ...] = (0.3, 0.5, 0.7, 0.8, 0.9, 0.95)

#: Metric groups of the summary table (keys of MetricCounts.compute).
METRIC_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Example-based", ("EBP", "EBR", "EBF")),
    ("Label-based (micro)", ("LBMiP", "LBMiR", "LBMiF")),
    ("Label-based (macro)", ("LBMaP", "LBMaR", "LBMaF")),
    ("Hierarchical", ("hP", "hR", "hF", "node_micro_F1", "node_macro_F1")),
    ("Losses (mean ± std per document)", ("hloss_uniform", "hloss_normalized", "zero_one", "symdiff")),
    ("Ranking", ("BEP",)),
)
_DESCRIPTIONS = {
    "EBP": "example-based precision", "EBR": "example-based recall", "EBF": "example-based F1",
    "LBMiP": "micro precision over scored labels", "LBMiR": "micro recall", "LBMiF": "micro F1",
    "LBMaP": "macro precision over scored labels", "LBMaR": "macro recall", "LBMaF": "macro F1",
    "hP": "hierarchical precision", "hR": "hierarchical recall", "hF": "hierarchical F1",
    "node_micro_F1": "micro F1 over all nodes", "node_macro_F1": "macro F1 over all nodes",
    "hloss_uniform": "H-loss, unit costs", "hloss_normalized": "H-loss, normalized costs",
    "zero_one": "0/1 loss (label set not exact)", "symdiff": "symmetric difference of label sets",
    "BEP": "precision-recall break-even point",
}


# ---------------------------------------------------------------------- data
@dataclass
class ReportData:
    """Everything a report shows, computed from the predictions folder."""

    predictions: Path
    meta: dict[str, Any]
    taxonomy: Taxonomy
    scored: np.ndarray  # bool mask over taxonomy nodes
    metrics: dict[str, float]
    counts: MetricCounts
    levels: list[dict[str, Any]]
    labels: list[dict[str, Any]]
    confusions: list[dict[str, Any]]
    pr: dict[str, Any] | None  # thresholds, precision, recall, n_pairs, gold
    bf: dict[str, Any] | None  # rows, buckets, shared, per-node weights
    notes: list[str] = field(default_factory=list)
    evaluation: dict[str, Any] | None = None
    calibrated: dict[str, Any] | None = None  # thresholds, precision, kept (predict --top)
    explanations: list[dict[str, Any]] | None = None  # a sample of documents' words behind labels


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise SchemaError(f"{path}: not valid JSON ({e})") from None
    return data


def _load_taxonomy(meta: dict[str, Any], features: Path | None, model_dir: Path | None, source: Path) -> Taxonomy:
    candidates = []
    if features is not None:
        candidates.append(features / "taxonomy.tsv")
    if model_dir is not None:
        candidates.append(model_dir / "taxonomy.tsv")
    for f in candidates:
        if f.is_file():
            tax = Taxonomy.from_tsv_text(f.read_text(encoding="utf-8"), source=str(f)).base()
            want = meta.get("taxonomy_fingerprint")
            if want is not None and tax.fingerprint() != want:
                raise ModelError(
                    f"{source}: the predictions use taxonomy {want} but {f} is taxonomy {tax.fingerprint()}; "
                    "pass the matching --features or --model"
                )
            return tax.concept_taxonomy()  # the predictions name concepts (a polyhierarchy's: its concept DAG)
    raise SchemaError(
        f"{source}: no taxonomy found (looked for {', '.join(str(c) for c in candidates) or 'nothing'}); "
        "pass --features (the featurize output) or --model"
    )


def _label_matrix(col: pa.ChunkedArray | pa.Array, what: str, taxonomy: Taxonomy, doc_ids: list[str]) -> sp.csr_matrix:
    """Ancestor-closed binary CSR (n_docs, n_nodes) of a list<string> column, vectorised."""
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    if col.null_count:
        row = int(np.flatnonzero(col.is_null().to_numpy(zero_copy_only=False))[0])
        raise SchemaError(f"column {what!r}: document {doc_ids[row]!r} has no labels (null); {col.null_count} such rows")
    offsets = np.asarray(col.offsets, dtype=np.int64)
    flat = col.values.slice(int(offsets[0]), int(offsets[-1] - offsets[0]))
    offsets = offsets - offsets[0]
    ids = pc.index_in(flat, value_set=pa.array(taxonomy.names, type=pa.string()))
    if ids.null_count:
        bad = int(np.flatnonzero(ids.is_null().to_numpy(zero_copy_only=False))[0])
        row = int(np.searchsorted(offsets, bad, side="right") - 1)
        raise SchemaError(
            f"column {what!r}: label {flat[bad].as_py()!r} of document {doc_ids[row]!r} is not a node of the "
            f"taxonomy {taxonomy.source} ({ids.null_count} unknown label(s))"
        )
    cols = ids.to_numpy(zero_copy_only=False).astype(np.int64)
    rows = np.repeat(np.arange(len(offsets) - 1, dtype=np.int64), np.diff(offsets))
    n = len(offsets) - 1
    m = sp.csr_matrix((np.ones(len(cols), dtype=np.float32), (rows, cols)), shape=(n, taxonomy.n_nodes))
    m = (m @ taxonomy.ancestor_matrix()).tocsr()
    m.data[:] = 1.0
    return m


def _prf(tp: int, fp: int, fn: int) -> tuple[float, float, float]:
    p = tp / (tp + fp) if tp + fp else 0.0
    r = tp / (tp + fn) if tp + fn else 0.0
    f = 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0
    return p, r, f


def _per_level(counts: MetricCounts, taxonomy: Taxonomy, real: np.ndarray) -> list[dict[str, Any]]:
    out = []
    for d in range(1, taxonomy.max_depth + 1):
        nodes = np.flatnonzero((taxonomy.depth == d) & real)
        if nodes.size == 0:
            continue
        tp, fp, fn = (int(a[nodes].sum()) for a in (counts.tp, counts.fp, counts.fn))
        p, r, f = _prf(tp, fp, fn)
        occ = [int(c) for c in nodes if counts.tp[c] + counts.fp[c] + counts.fn[c] > 0]
        macro = float(np.mean([_prf(int(counts.tp[c]), int(counts.fp[c]), int(counts.fn[c]))[2] for c in occ])) \
            if occ else 0.0
        out.append({"depth": d, "nodes": int(nodes.size), "support": tp + fn, "tp": tp, "fp": fp, "fn": fn,
                    "precision": p, "recall": r, "micro_f1": f, "macro_f1": macro})
    return out


def _tree_order(taxonomy: Taxonomy) -> list[int]:
    """Node ids depth-first (children by name): a table in this order reads like the tree."""
    order: list[int] = []
    stack = [0]
    while stack:
        c = stack.pop()
        if c:
            order.append(c)
        stack.extend(int(k) for k in reversed(taxonomy.children[c]))
    return order


def _parents_of(taxonomy: Taxonomy, c: int) -> list[int]:
    """Every parent of ``c`` (a concept DAG's concept may have several)."""
    if isinstance(taxonomy, ConceptDag):
        return [int(q) for q in taxonomy.parents[c]]
    return [int(taxonomy.parent[c])]


def _per_label(counts: MetricCounts, taxonomy: Taxonomy, real: np.ndarray, scored: np.ndarray) -> list[dict[str, Any]]:
    out = []
    for c in _tree_order(taxonomy):
        if not real[c]:
            continue
        tp, fp, fn = int(counts.tp[c]), int(counts.fp[c]), int(counts.fn[c])
        p, r, f = _prf(tp, fp, fn)
        out.append({"label": taxonomy.names[c], "depth": int(taxonomy.depth[c]),
                    "name": taxonomy.display_name(taxonomy.names[c]),
                    "parent": ", ".join(taxonomy.names[q] for q in _parents_of(taxonomy, c)), "scored": bool(scored[c]),
                    "support": tp + fn, "predicted": tp + fp, "tp": tp, "fp": fp, "fn": fn,
                    "precision": p, "recall": r, "f1": f})
    return out


def _sibling_confusions(gold: sp.csr_matrix, pred: sp.csr_matrix, taxonomy: Taxonomy, real: np.ndarray,
                        support: np.ndarray) -> list[dict[str, Any]]:
    """Counts of (gold c, predicted sibling c' instead) over documents, most frequent first."""
    g = gold.astype(bool).tocsr()
    p = pred.astype(bool).tocsr()
    missed = (g > p).tocsr()  # gold, not predicted
    wrong = (p > g).tocsr()  # predicted, not gold
    parent = taxonomy.parent
    pairs: Counter[tuple[int, int]] = Counter()
    for i in np.flatnonzero((np.diff(missed.indptr) > 0) & (np.diff(wrong.indptr) > 0)):
        fn_nodes = missed.indices[missed.indptr[i]:missed.indptr[i + 1]]
        fp_nodes = wrong.indices[wrong.indptr[i]:wrong.indptr[i + 1]]
        fn_nodes = fn_nodes[real[fn_nodes]]
        fp_nodes = fp_nodes[real[fp_nodes]]
        if fn_nodes.size == 0 or fp_nodes.size == 0:
            continue
        same = parent[fn_nodes][:, None] == parent[fp_nodes][None, :]
        for a, b in zip(*np.nonzero(same), strict=True):
            pairs[(int(fn_nodes[a]), int(fp_nodes[b]))] += 1
    rows = []
    for (c, c2), n in sorted(pairs.items(), key=lambda kv: (-kv[1], taxonomy.names[kv[0][0]], taxonomy.names[kv[0][1]])):
        rows.append({"gold": taxonomy.names[c], "predicted": taxonomy.names[c2],
                     "parent": taxonomy.names[int(parent[c])], "documents": n,
                     "share_of_gold": n / int(support[c]) if support[c] else 0.0})
    return rows


def _pr_data(table: pa.Table, taxonomy: Taxonomy, gold: sp.csr_matrix, scored: np.ndarray) -> dict[str, Any] | None:
    """Precision and recall of the predicted deepest (scored) labels when those scoring below a
    threshold are dropped. A prediction is correct when its label is in the document's gold set
    (ancestors included); recall is over the gold deepest scored labels. None without scores."""
    if SCORES not in table.column_names:
        return None
    preds = table.column(PRED).combine_chunks()
    scores = table.column(SCORES).combine_chunks()
    if preds.null_count or scores.null_count:
        return None
    po = np.asarray(preds.offsets, dtype=np.int64)
    so = np.asarray(scores.offsets, dtype=np.int64)
    if not np.array_equal(np.diff(po), np.diff(so)):
        return None
    names = preds.values.slice(int(po[0]), int(po[-1] - po[0]))
    vals = np.asarray(scores.values.slice(int(so[0]), int(so[-1] - so[0])).to_numpy(zero_copy_only=False),
                      dtype=np.float64)
    if vals.size == 0 or not np.all(np.isfinite(vals)):
        return None
    ids = np.asarray(pc.index_in(names, value_set=pa.array(taxonomy.names, type=pa.string()))
                     .to_numpy(zero_copy_only=False), dtype=np.int64)
    rows = np.repeat(np.arange(len(po) - 1, dtype=np.int64), np.diff(po - po[0]))
    keep = scored[ids]
    rows, ids, vals = rows[keep], ids[keep], vals[keep]
    g = gold.tocsr()
    correct = np.asarray(g[rows, ids]).ravel() > 0 if ids.size else np.zeros(0, dtype=bool)
    # gold deepest labels: gold members none of whose children is a member
    gc = g.tocoo()
    member = set(zip(gc.row.tolist(), gc.col.tolist(), strict=True))
    has_child = {(r, q) for r, c in member for q in _parents_of(taxonomy, c)}
    n_gold = sum(1 for r, c in member if scored[c] and (r, c) not in has_child)
    if ids.size == 0 or n_gold == 0:
        return None
    thr, prec, rec = pr_curve(vals, correct)
    rec = rec * (int(correct.sum()) / n_gold)  # pr_curve's recall is relative to the correct pairs
    return {"thresholds": thr, "precision": prec, "recall": rec, "n_pairs": int(ids.size), "gold": n_gold,
            "correct": int(correct.sum())}


def _calibrated_data(table: pa.Table, taxonomy: Taxonomy, gold: sp.csr_matrix) -> dict[str, Any] | None:
    """The calibrated scores of the labels shown (predicted ones, ``pred_calibrated``, and suggested
    ones) and whether each is correct (in the document's gold set, ancestors included): the share of
    correct labels among those scored at least ``t`` for every distinct score ``t``. None without
    ``predict --top``."""
    if SUGGESTIONS not in table.column_names or CALIBRATED not in table.column_names:
        return None
    g = gold.tocsr()
    index = {n: i for i, n in enumerate(taxonomy.names)}
    scores: list[float] = []
    correct: list[bool] = []
    for row, (labs, cal, sugg) in enumerate(zip(table.column(PRED).to_pylist(), table.column(CALIBRATED).to_pylist(),
                                                 table.column(SUGGESTIONS).to_pylist(), strict=True)):
        items = [*zip(labs or [], cal or [], strict=True), *((x["label"], x["score"]) for x in sugg or [])]
        for lab, q in items:
            scores.append(float(q))
            correct.append(bool(g[row, index[lab]]) if lab in index else False)
    if not scores:
        return None
    sc, ok = np.array(scores), np.array(correct)
    order = np.argsort(-sc, kind="stable")
    hits = np.cumsum(ok[order])
    last = np.flatnonzero(np.r_[sc[order][1:] != sc[order][:-1], True])
    return {"thresholds": sc[order][last], "precision": hits[last] / (last + 1), "kept": last + 1,
            "labels": int(sc.size), "correct": int(ok.sum()),
            "table": [{"threshold": t, "kept": int((sc >= t).sum()),
                       "precision": float(ok[sc >= t].mean()) if (sc >= t).any() else None}
                      for t in CALIBRATION_THRESHOLDS]}


def _explanation_sample(table: pa.Table, n_docs: int = 10, n_words: int = 6) -> list[dict[str, Any]] | None:
    """The words behind the predicted labels of the first ``n_docs`` documents by id (``predict
    --explain``); None without explanations."""
    if EXPLANATIONS not in table.column_names:
        return None
    ids = table.column("doc_id").to_pylist()
    ex = table.column(EXPLANATIONS).to_pylist()
    out = []
    for i in sorted(range(len(ids)), key=lambda j: ids[j])[:n_docs]:
        for e in ex[i] or []:
            words = ", ".join(f"{w} ({c:+.3f})" for w, c in zip(e["features"][:n_words], e["contributions"][:n_words],
                                                                strict=True))
            out.append({"doc_id": ids[i], "label": e["label"], "score": e["score"], "bias": e["bias"], "words": words})
    return out


def _bf_data(model_dir: Path | None) -> dict[str, Any] | None:
    if model_dir is None or not (model_dir / "state.npz").is_file():
        return None
    from sparkhc.persistence import read_npz

    try:
        with open(model_dir / "state.npz", "rb") as fh:
            arrays = read_npz(fh)
    except (OSError, ValueError) as e:
        log.warning("report: cannot read %s (%s); no branching-feature plot", model_dir / "state.npz", e)
        return None
    bf = arrays.get("bf")
    if bf is None:
        return None
    bf = np.asarray(bf, dtype=np.float64)
    mtax = Taxonomy.from_tsv_text((model_dir / "taxonomy.tsv").read_text(encoding="utf-8"),
                                  source=str(model_dir / "taxonomy.tsv"))
    R = bf.shape[1] - 1
    buckets = [str(k) for k in range(1, R + 1)] + [f">{R}"]
    internal = [int(c) for c in mtax.internal]
    return {"buckets": buckets, "shared": bf[-1].tolist(),
            "nodes": [mtax.names[c] for c in internal], "node_weights": bf[internal].tolist()}


def collect(predictions: str | Path, model_dir: str | Path | None = None,
            features: str | Path | None = None) -> ReportData:
    """Read a predictions folder and compute everything the report shows."""
    pdir = Path(predictions)
    _, meta = read_prediction_meta(pdir)
    data = Path(data_location(pdir))
    if not data.is_dir():
        raise SchemaError(f"{pdir}: no {PRED_DATA_DIR}/ folder of prediction Parquet files")
    notes: list[str] = []
    mdir = Path(model_dir) if model_dir is not None else (Path(meta["model_dir"]) if meta.get("model_dir") else None)
    if mdir is not None and not mdir.is_dir():
        notes.append(f"model directory {mdir} not found: no branching-feature weights")
        mdir = None
    fdir = Path(features) if features is not None else (Path(meta["features"]) if meta.get("features") else None)
    if fdir is not None and not fdir.is_dir():
        fdir = None
    taxonomy = _load_taxonomy(meta, fdir, mdir, pdir)

    table = pq.read_table(data)
    for c in ("doc_id", GOLD, PRED):
        if c not in table.column_names:
            raise SchemaError(f"{data}: column {c!r} is missing (columns: {table.column_names})")
    doc_ids = table.column("doc_id").to_pylist()
    gold = _label_matrix(table.column(GOLD), GOLD, taxonomy, doc_ids)
    pred = _label_matrix(table.column(PRED), PRED, taxonomy, doc_ids)

    scored_labels = meta.get("scored_labels")
    if scored_labels is None and fdir is not None and (fdir / "corpus.json").is_file():
        scored_labels = _read_json(fdir / "corpus.json").get("scored_labels")
    counts = MetricCounts(taxonomy, scored_labels)
    counts.add(gold, pred)
    metrics: dict[str, float] = counts.compute()
    evaluation = None
    if (pdir / METRICS_FILE).is_file():
        evaluation = _read_json(pdir / METRICS_FILE)
        official = evaluation.get("metrics") or {}
        for k, v in official.items():
            if k not in metrics:
                metrics[k] = v  # e.g. BEP, which needs every label's score
            elif isinstance(v, int | float) and not math.isclose(float(v), float(metrics[k]), rel_tol=1e-9,
                                                                   abs_tol=1e-12):
                notes.append(f"{METRICS_FILE} has {k} = {v}, recomputed {metrics[k]} (stale metrics.json?)")

    real = ~taxonomy.virtual.copy()
    real[0] = False
    support = counts.tp + counts.fn
    return ReportData(
        predictions=pdir, meta=meta, taxonomy=taxonomy, scored=counts.scored, metrics=metrics, counts=counts,
        levels=_per_level(counts, taxonomy, real),
        labels=_per_label(counts, taxonomy, real, counts.scored),
        confusions=_sibling_confusions(gold, pred, taxonomy, real, support),
        pr=_pr_data(table, taxonomy, gold, counts.scored),
        bf=_bf_data(mdir),
        notes=notes,
        evaluation=evaluation,
        calibrated=_calibrated_data(table, taxonomy, gold),
        explanations=_explanation_sample(table),
    )


# ---------------------------------------------------------------------- plots
def _figure(width: float, height: float) -> Any:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=100, layout="constrained")


def _save(fig: Any, path: Path) -> None:
    # no "Software" key: the same data gives the same PNG bytes
    fig.savefig(path, format="png", metadata={"Software": None})


def plot_levels(data: ReportData, path: Path) -> None:
    fig = _figure(7, 3.6)
    ax = fig.subplots()
    depths = [f"depth {row['depth']}\n({row['nodes']} labels)" for row in data.levels]
    x = np.arange(len(depths))
    ax.bar(x - 0.2, [row["micro_f1"] for row in data.levels], 0.4, label="micro F1", color="#3b6ea5")
    ax.bar(x + 0.2, [row["macro_f1"] for row in data.levels], 0.4, label="macro F1", color="#e39b3b")
    ax.set_xticks(x, depths)
    ax.set_ylim(0, 1)
    ax.set_ylabel("F1")
    ax.set_title("F1 per taxonomy level")
    ax.legend(loc="lower right")
    ax.grid(axis="y", alpha=0.3)
    _save(fig, path)


def plot_labels(data: ReportData, path: Path, max_labels: int = 40) -> str:
    rows = [r for r in data.labels if r["scored"]] or data.labels
    caption = "F1 per scored label"
    if len(rows) > max_labels:
        rows = sorted(rows, key=lambda r: -r["support"])[:max_labels]
        caption += f" ({max_labels} most frequent of {len([r for r in data.labels if r['scored']])})"
    rows = sorted(rows, key=lambda r: (r["f1"], r["label"]))
    fig = _figure(7.5, max(2.5, 0.26 * len(rows) + 1.0))
    ax = fig.subplots()
    y = np.arange(len(rows))
    ax.barh(y, [r["f1"] for r in rows], color="#3b6ea5")
    ax.set_yticks(y, [r.get("name") or r["label"] for r in rows], fontsize=8)
    ax.set_xlim(0, 1)
    ax.set_xlabel("F1")
    ax.set_title(caption)
    ax.grid(axis="x", alpha=0.3)
    for yi, r in zip(y, rows, strict=True):
        ax.text(min(r["f1"] + 0.01, 0.93), yi, f"{r['f1']:.2f}", va="center", fontsize=7)
    _save(fig, path)
    return caption


def plot_pr(data: ReportData, path: Path) -> None:
    assert data.pr is not None
    fig = _figure(6, 4.2)
    ax = fig.subplots()
    rec, prec = data.pr["recall"], data.pr["precision"]
    ax.step(rec, prec, where="post", color="#3b6ea5", label="predictions above a score threshold")
    ax.plot([rec[-1]], [prec[-1]], "o", color="#c0392b", label="all predictions (no threshold)")
    _unit_square(ax, "recall (of gold deepest labels)", "precision", "Precision-recall by prediction score",
                 "lower left")
    _save(fig, path)


def _unit_square(ax: Any, xlabel: str, ylabel: str, title: str, legend: str) -> None:
    """The axes of a plot of two shares (0 to 1), labelled, with a legend and a grid."""
    ax.set_xlim(0, 1.0)
    ax.set_ylim(0, 1.02)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(loc=legend, fontsize=8)
    ax.grid(alpha=0.3)


def plot_reliability(data: ReportData, path: Path) -> None:
    """Observed precision of the labels kept at each calibrated-score threshold against the threshold:
    on the diagonal when a threshold means the precision it says."""
    assert data.calibrated is not None
    cal = data.calibrated
    fig = _figure(6, 4.2)
    ax = fig.subplots()
    ax.plot([0, 1], [0, 1], color="#999999", lw=1, ls="--", label="threshold = precision")
    ax.step(cal["thresholds"], cal["precision"], where="post", color="#3b6ea5",
            label="labels scored >= threshold (predicted and suggested)")
    _unit_square(ax, "calibrated score threshold", "precision of the labels kept", "Reliability of the calibrated scores",
                 "upper left")
    _save(fig, path)


def plot_bf(data: ReportData, path: Path) -> None:
    assert data.bf is not None
    bf = data.bf
    buckets = bf["buckets"]
    w = np.asarray(bf["node_weights"], dtype=np.float64).reshape(len(bf["nodes"]), len(buckets))
    fig = _figure(7, 3.8)
    ax1, ax2 = fig.subplots(1, 2)
    x = np.arange(len(buckets))
    ax1.bar(x, bf["shared"], color="#3b6ea5")
    ax1.axhline(0, color="black", lw=0.8)
    ax1.set_xticks(x, buckets)
    ax1.set_xlabel("children chosen")
    ax1.set_title("shared weights", fontsize=10)
    if len(w):
        ax2.boxplot([w[:, j] for j in range(len(buckets))], positions=x, widths=0.5)
        ax2.set_xticks(x, buckets)
    ax2.axhline(0, color="black", lw=0.8)
    ax2.set_xlabel("children chosen")
    ax2.set_title(f"node-specific weights ({len(w)} internal nodes)", fontsize=10)
    fig.suptitle("Branching-feature weights")
    _save(fig, path)


def make_plots(data: ReportData, plot_dir: Path) -> list[dict[str, str]]:
    """Write the PNG plots; returns ``[{"file", "title", "caption"}]`` (relative file names)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        data.notes.append("plots skipped: matplotlib is not installed (pip install matplotlib)")
        log.warning("report: matplotlib is not installed; writing the tables without plots")
        return []
    plot_dir.mkdir(parents=True, exist_ok=True)
    plots = []
    if data.levels:
        plot_levels(data, plot_dir / "level_f1.png")
        plots.append({"file": "level_f1.png", "title": "F1 per level",
                      "caption": "Micro and macro F1 over the labels of each depth of the taxonomy."})
    if data.labels:
        caption = plot_labels(data, plot_dir / "label_f1.png")
        plots.append({"file": "label_f1.png", "title": "F1 per label", "caption": caption + "."})
    if data.pr is not None:
        plot_pr(data, plot_dir / "pr_curve.png")
        pr = data.pr
        plots.append({"file": "pr_curve.png", "title": "Precision-recall",
                      "caption": (f"Predicted deepest labels kept when their score is at least a threshold "
                                  f"({pr['n_pairs']} predictions, {pr['correct']} correct, {pr['gold']} gold "
                                  "labels); the dot is the model's own decision.")})
    else:
        data.notes.append("no precision-recall curve: the predictions carry no finite scores")
    if data.calibrated is not None:
        plot_reliability(data, plot_dir / "reliability.png")
        plots.append({"file": "reliability.png", "title": "Reliability of the calibrated scores",
                      "caption": (f"The labels shown ({data.calibrated['labels']} predicted and suggested labels, "
                                  f"{data.calibrated['correct']} correct) kept when their calibrated score is at least "
                                  "a threshold, and the share of them that are correct; the dashed line is where a "
                                  "threshold means that precision.")})
    if data.bf is not None:
        plot_bf(data, plot_dir / "bf_weights.png")
        plots.append({"file": "bf_weights.png", "title": "Branching features",
                      "caption": ("Weights of the branching features (Murawaki 2013, Sect. 4.3) by number of "
                                  "children chosen at a node: shared ones, and the spread of node-specific "
                                  "ones.")})
    return plots


# ---------------------------------------------------------------------- rendering
def _fmt(v: Any, digits: int = 4) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else ""
    if isinstance(v, int | np.integer):
        return str(int(v))
    if isinstance(v, float | np.floating):
        return f"{float(v):.{digits}f}"
    return str(v)


Table = tuple[list[str], list[list[Any]], list[bool]]  # header, rows, left-aligned columns


def _metric_table(data: ReportData) -> Table:
    rows: list[list[Any]] = []
    m = data.metrics
    for group, keys in METRIC_GROUPS:
        for k in keys:
            if k not in m:
                continue
            value = _fmt(m[k])
            if f"{k}_std" in m:
                value += f" ± {_fmt(m[f'{k}_std'])}"
            rows.append([group, k, value, _DESCRIPTIONS.get(k, "")])
    extra = [k for k in m if k not in METRIC_KEYS and not k.endswith("_std") and k != "n_docs"]
    for k in extra:
        rows.append(["Other", k, _fmt(m[k]), ""])
    return ["group", "metric", "value", "meaning"], rows, [True, True, False, True]


def _level_table(data: ReportData) -> Table:
    head = ["depth", "labels", "support", "TP", "FP", "FN", "precision", "recall", "micro F1", "macro F1"]
    rows = [[r["depth"], r["nodes"], r["support"], r["tp"], r["fp"], r["fn"], r["precision"], r["recall"],
             r["micro_f1"], r["macro_f1"]] for r in data.levels]
    return head, rows, [False] * len(head)


def _label_table(data: ReportData) -> Table:
    head = ["label", "depth", "scored", "support", "predicted", "TP", "FP", "FN", "precision", "recall", "F1"]
    rows = [[("\u00a0\u00a0" * (r["depth"] - 1)) + r["label"], r["depth"], r["scored"], r["support"],
             r["predicted"], r["tp"], r["fp"], r["fn"], r["precision"], r["recall"], r["f1"]] for r in data.labels]
    if not data.taxonomy.has_display_names:
        return head, rows, [True] + [False] * (len(head) - 1)
    # a vocabulary: the preferred label next to the concept (its URI)
    for r, row in zip(data.labels, rows, strict=True):
        row.insert(1, r["name"])
    return head[:1] + ["preferred label"] + head[1:], rows, [True, True] + [False] * (len(head) - 1)


def _confusion_table(data: ReportData, top: int) -> Table:
    head = ["gold label", "predicted instead", "parent", "documents", "share of gold"]
    rows = [[r["gold"], r["predicted"], r["parent"], r["documents"], r["share_of_gold"]]
            for r in data.confusions[:top]]
    return head, rows, [True, True, True, False, False]


def _bf_table(data: ReportData, max_rows: int = 60) -> Table | None:
    if data.bf is None or len(data.bf["nodes"]) > max_rows:
        return None
    head = ["node", *[f"k={b}" for b in data.bf["buckets"]]]
    rows: list[list[Any]] = [["(shared)", *data.bf["shared"]]]
    rows += [[n, *w] for n, w in zip(data.bf["nodes"], data.bf["node_weights"], strict=True)]
    return head, rows, [True] + [False] * len(data.bf["buckets"])


def _calibration_table(data: ReportData) -> Table | None:
    if data.calibrated is None:
        return None
    rows = [[r["threshold"], r["kept"], r["precision"]] for r in data.calibrated["table"]]
    return ["score threshold", "labels kept", "precision"], rows, [False, False, False]


def _explanation_table(data: ReportData) -> Table | None:
    if not data.explanations:
        return None
    rows = [[r["doc_id"], r["label"], r["score"], r["bias"], r["words"]] for r in data.explanations]
    return ["document", "label", "score", "bias", "words (contribution)"], rows, [True, True, False, False, True]


def _overview(data: ReportData) -> list[tuple[str, str]]:
    meta = data.meta
    sel = meta.get("selection") or {}
    sel_text = ", ".join(f"{k}={v}" for k, v in sel.items() if v is not None) or "all documents"
    tax = data.taxonomy
    return [
        ("predictions", str(data.predictions.resolve())),
        ("model", f"{meta.get('model', '?')} (version {meta.get('model_version', '?')})"),
        ("model directory", str(meta.get("model_dir", "-"))),
        ("documents", f"{data.counts.n_docs} ({sel_text})"),
        ("taxonomy", f"{tax.n_nodes - 1} labels, {len(tax.leaves)} leaves, depth {tax.max_depth}, "
                     f"fingerprint {tax.fingerprint()}"
                     + (f"; a polyhierarchy ({sum(len(p) for p in tax.parents)} parent links; labels closed over "
                        "every parent)" if isinstance(tax, ConceptDag) else "")),
        ("scored labels", f"{int(data.scored.sum())} (example- and label-based metrics)"),
        ("generated", _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")),
    ]


_CSS = """
*{box-sizing:border-box}
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0 auto;max-width:1100px;
 padding:1rem;line-height:1.45;color:#222;overflow-wrap:anywhere}
h1{font-size:1.6rem}h2{font-size:1.25rem;margin-top:2rem;border-bottom:1px solid #ddd}
.table-wrap{overflow-x:auto;max-width:100%;margin:.5rem 0 1rem}
table{border-collapse:collapse;font-size:.88rem}
th,td{padding:.25rem .55rem;border-bottom:1px solid #e3e3e3;text-align:right;white-space:nowrap;
 overflow-wrap:normal}
th{background:#f4f6f8;position:sticky;top:0}
.l{text-align:left}
dl.overview{display:grid;grid-template-columns:max-content minmax(0,1fr);gap:.2rem 1rem}
dl.overview dt{font-weight:600}dl.overview dd{margin:0;min-width:0}
figure{margin:1rem 0;max-width:100%}
img{max-width:100%;height:auto;display:block}
figcaption{font-size:.85rem;color:#555}
.note{background:#fff8e1;border-left:4px solid #f0b400;padding:.4rem .8rem}
@media (max-width:600px){body{padding:.5rem}dl.overview{grid-template-columns:minmax(0,1fr)}}
"""


def _html_table(t: Table) -> str:
    head, rows, left = t
    parts = ['<div class="table-wrap"><table><thead><tr>']
    parts += [f'<th class="{"l" if lft else ""}">{html.escape(h)}</th>' for h, lft in zip(head, left, strict=True)]
    parts.append("</tr></thead><tbody>")
    for r in rows:
        parts.append("<tr>" + "".join(
            f'<td class="{"l" if lft else ""}">{html.escape(_fmt(v))}</td>' for v, lft in zip(r, left, strict=True)
        ) + "</tr>")
    parts.append("</tbody></table></div>")
    return "".join(parts)


def _md_cell(v: Any) -> str:
    return _fmt(v).replace("|", "\\|").replace("\u00a0", "")


def _md_table(t: Table) -> str:
    head, rows, left = t
    lines = ["| " + " | ".join(head) + " |", "| " + " | ".join(":--" if lft else "--:" for lft in left) + " |"]
    lines += ["| " + " | ".join(_md_cell(v) for v in r) + " |" for r in rows]
    return "\n".join(lines)


def _sections(data: ReportData, top: int) -> list[tuple[str, str, Table | None]]:
    """(title, intro, table) of each table section, shared by HTML and Markdown."""
    out: list[tuple[str, str, Table | None]] = [
        ("Metrics", "All metrics of the evaluation (definitions: sparkhc/metrics.py and the section "
                    "'Metric conventions' of docs/architecture.md in the sparkhc repository).", _metric_table(data)),
        ("Per level", "Counts and F1 over the labels at each depth (ancestors of gold and predicted labels "
                      "included).", _level_table(data)),
        ("Per label", "Every label in tree order; support = documents with the label in their gold set.",
         _label_table(data)),
        ("Most confused sibling pairs",
         (f"Documents whose gold set has the first label but the prediction chose its sibling instead "
          f"(top {top})." if data.confusions else "No sibling confusions."),
         _confusion_table(data, top) if data.confusions else None),
    ]
    cal = _calibration_table(data)
    if cal is not None:
        out.append(("Calibrated scores", "The labels shown (predicted and suggested, predict --top) whose calibrated "
                    "score is at least a threshold, and the share of them that are correct.", cal))
    ext = _explanation_table(data)
    if ext is not None:
        out.append(("The words behind the labels", "The features that contributed most to each predicted label's "
                    "score (predict --explain), for the first documents by id; score = the contributions of every "
                    "feature plus the bias.", ext))
    bft = _bf_table(data)
    if bft is not None:
        out.append(("Branching-feature weights", "Weights by number of children chosen (k).", bft))
    return out


def write_html(data: ReportData, path: Path, plots: Sequence[dict[str, str]], plot_dir: str = "plots",
               title: str | None = None, top: int = 15) -> None:
    title = title or f"sparkhc evaluation report: {data.meta.get('model', 'model')} {data.meta.get('model_version', '')}"
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             '<meta name="viewport" content="width=device-width, initial-scale=1">',
             f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>",
             f"<h1>{html.escape(title)}</h1>", '<dl class="overview">']
    for k, v in _overview(data):
        parts.append(f"<dt>{html.escape(k)}</dt><dd>{html.escape(v)}</dd>")
    parts.append("</dl>")
    for note in data.notes:
        parts.append(f'<p class="note">{html.escape(note)}</p>')
    sections = _sections(data, top)
    parts.append(f"<h2>{html.escape(sections[0][0])}</h2><p>{html.escape(sections[0][1])}</p>")
    parts.append(_html_table(sections[0][2]) if sections[0][2] else "")
    if plots:
        parts.append("<h2>Plots</h2>")
        for p in plots:
            src = f"{plot_dir}/{p['file']}"
            parts.append(f'<figure><img src="{html.escape(src)}" alt="{html.escape(p["title"])}" loading="eager">'
                         f"<figcaption>{html.escape(p['caption'])}</figcaption></figure>")
    for name, intro, table in sections[1:]:
        parts.append(f"<h2>{html.escape(name)}</h2><p>{html.escape(intro)}</p>")
        if table is not None:
            parts.append(_html_table(table))
    parts.append("</body></html>\n")
    path.write_text("\n".join(parts), encoding="utf-8")


def write_markdown(data: ReportData, path: Path, plots: Sequence[dict[str, str]], plot_dir: str = "plots",
                   title: str | None = None, top: int = 15) -> None:
    title = title or f"sparkhc evaluation report: {data.meta.get('model', 'model')} {data.meta.get('model_version', '')}"
    lines = [f"# {title}", ""]
    lines += [f"- **{k}**: {v}" for k, v in _overview(data)]
    lines.append("")
    lines += [f"> {note}\n" for note in data.notes]
    sections = _sections(data, top)
    for i, (name, intro, table) in enumerate(sections):
        lines += [f"## {name}", "", intro, ""]
        if table is not None:
            lines += [_md_table(table), ""]
        if i == 0 and plots:
            lines += ["## Plots", ""]
            for p in plots:
                lines += [f"![{p['title']}]({plot_dir}/{p['file']})", "", f"*{p['caption']}*", ""]
    path.write_text("\n".join(lines), encoding="utf-8")


def build_report(predictions: str | Path, out: str | Path | None = None, model_dir: str | Path | None = None,
                 features: str | Path | None = None, title: str | None = None, top: int = 15,
                 plots: bool = True) -> dict[str, Any]:
    """Write ``report.html``, ``report.md`` and ``plots/*.png`` for a predictions folder.

    Parameters
    ----------
    predictions : path
        The output folder of ``sparkhc predict`` (``data/``, ``_MODEL.json``, optionally
        ``metrics.json`` from ``sparkhc evaluate``).
    out : path, optional
        Report folder (default ``<predictions>/report``).
    model_dir, features : path, optional
        Override the model directory / features folder recorded in ``_MODEL.json`` (for the
        taxonomy, the scored labels and the branching-feature weights).
    title : str, optional
    top : int
        Rows of the confused-pairs table.
    plots : bool
        Draw the PNG plots (needs matplotlib).

    Returns
    -------
    dict
        Paths of the files written, the plots, the notes and the headline metrics.
    """
    data = collect(predictions, model_dir=model_dir, features=features)
    out_dir = Path(out) if out is not None else Path(predictions) / "report"
    out_dir.mkdir(parents=True, exist_ok=True)
    plot_list = make_plots(data, out_dir / "plots") if plots else []
    html_file, md_file = out_dir / "report.html", out_dir / "report.md"
    write_html(data, html_file, plot_list, title=title, top=top)
    write_markdown(data, md_file, plot_list, title=title, top=top)
    log.info("report: wrote %s (%d plots)", html_file, len(plot_list))
    return {
        "html": str(html_file), "markdown": str(md_file),
        "plots": [str(out_dir / "plots" / p["file"]) for p in plot_list],
        "notes": data.notes,
        "documents": data.counts.n_docs,
        "metrics": {k: data.metrics[k] for k in ("EBF", "LBMiF", "LBMaF", "hF") if k in data.metrics},
    }
