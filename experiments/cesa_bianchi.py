"""Reproduce the layout of Table 1 of Cesa-Bianchi, Gentile, Tironi, Zaniboni (2004).

Rows PERC, H-PERC, H-RLS, AH-BAY, SVM, H-SVM (:mod:`sparkhc.models.cesa_bianchi`); columns the
0/1 loss, the uniform and normalised H-loss and the symmetric-difference loss, means per test
document (:class:`sparkhc.metrics.MetricCounts`), with standard deviations over folds. The
incremental learners (PERC, H-PERC, H-RLS, AH-BAY) see the training documents once, in corpus
order (``shuffle=False``, one epoch), as in the paper.

Corpora (``../shared/data/INDEX.md`` protocols):

* ``rcv1v2_subset``: 2,316 RCV1-v2 documents, 103 topics (4 roots: CCAT, ECAT, GCAT, MCAT),
  labels ancestor-closed with partial paths; 5-fold cross-validation with ``folds.tsv`` (train on
  4 folds, test on 1). The paper used the first 100k RCV1 documents, train/test on adjacent groups.
* ``reuters21578``: ModApte ``apte_mod`` documents (7,770 train / 3,019 test), labels the 90
  ApteMod topics under their groups of ``taxonomy_topics.tsv`` (the taxonomy is pruned to those
  topics and groups, so the forest's roots are the groups); one split, so the table shows the
  standard deviation over test documents instead.

Features: the project's :class:`~sparkhc.text.spec.FeatureSpec` with the ``[featurize]`` defaults
of ``sparkhc/conf/defaults.toml`` (the Spark featurize job's tokenizer and weighting: vocabulary
mode, ``log(1 + tf) * idf`` with smooth idf, terms in >= 2 and <= 50 % of the training documents,
English stop words dropped, rows L2-normalised as in the paper), fitted on the training part of
each split only (:func:`feature_params`). RCV1 uses the corpus ``tokens`` (filtered by the
tokenizer like pre-tokenised input in featurize); Reuters uses ``title + "\\n" + text``, the text
the corpus reader gives featurize.

Training: serial ``partial_fit`` in corpus order by default. With ``--spark`` the models whose node
learners are independent (PERC, H-PERC node rule, H-RLS/AH-BAY, SVM, H-SVM) are trained with
:func:`sparkhc.spark.node_parallel.train_node_parallel` on a local SparkSession instead (same
models exactly; the documents get order-preserving ids so the global order is the corpus order).

Run::

    python -m experiments.cesa_bianchi --corpus rcv1v2_subset --data-dir ../shared/data --out docs/results/cesa_bianchi
    python -m experiments.cesa_bianchi --corpus reuters21578 --data-dir ../shared/data --out docs/results/cesa_bianchi
    python -m experiments.cesa_bianchi --corpus rcv1v2_subset --quick --spark --out /tmp/cesa   # Spark check

Writes ``table1_<corpus>.md`` and ``results_<corpus>.json`` to ``--out``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import os
import platform
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from experiments import harness
from sparkhc.batch import SparseBatch
from sparkhc.errors import DataUnavailableError, InputDataError
from sparkhc.metrics import MetricCounts
from sparkhc.models.cesa_bianchi import (
    HRLS,
    HSVM,
    SVM,
    ApproxHBayes,
    CesaModel,
    HPerc,
    Perc,
    eligible_matrix,
)
from sparkhc.taxonomy import Taxonomy
from sparkhc.text.spec import FeatureSpec

log = logging.getLogger(__name__)

CORPORA = ("rcv1v2_subset", "reuters21578")
COMMAND = "sparkhc experiment cesa-bianchi --corpus {corpus} --data-dir ../shared/data --out docs/results/cesa_bianchi"
MODULE_COMMAND = (
    "python -m experiments.cesa_bianchi --corpus {corpus} --data-dir ../shared/data --out docs/results/cesa_bianchi"
)

ROWS = ("PERC", "H-PERC", "H-RLS", "AH-BAY", "SVM", "H-SVM")
EXTRA_ROWS = ("H-PERC (node rule)",)
LOSSES = (
    ("zero_one", "0/1-loss"),
    ("hloss_uniform", "unif. H-loss"),
    ("hloss_normalized", "norm. H-loss"),
    ("symdiff", "Δ-loss"),
)

#: The paper's Table 1 (RCV1, first 100k documents; mean and std over 5 train/test pairs).
PAPER_RCV1: dict[str, tuple[tuple[float, float], ...]] = {
    "PERC": ((0.702, 0.045), (1.196, 0.127), (0.100, 0.029), (1.695, 0.182)),
    "H-PERC": ((0.655, 0.040), (1.224, 0.114), (0.099, 0.028), (1.861, 0.172)),
    "H-RLS": ((0.456, 0.010), (0.743, 0.026), (0.057, 0.001), (1.086, 0.036)),
    "AH-BAY": ((0.550, 0.010), (0.815, 0.028), (0.090, 0.001), (1.465, 0.040)),
    "SVM": ((0.482, 0.009), (0.790, 0.023), (0.057, 0.001), (1.173, 0.051)),
    "H-SVM": ((0.440, 0.008), (0.712, 0.021), (0.055, 0.001), (1.050, 0.027)),
}


# ============================================================================ data
@dataclass
class Split:
    """One train/test split with its features."""

    name: str
    train: SparseBatch
    test: SparseBatch
    n_features: int


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        raise DataUnavailableError(f"{path} not found: stage the corpus under --data-dir (see ../shared/data/INDEX.md)")
    out = []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for no, line in enumerate(f, start=1):
            if line.strip():
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise InputDataError(f"{path}, line {no}: not JSON ({e})") from None
    return out


def feature_params() -> dict[str, Any]:
    """FeatureSpec parameters from the ``[featurize]`` defaults (as ``sparkhc featurize`` maps
    them), fitted here on explicit token lists, so ``fit_on`` is None."""
    from sparkhc.config import load_config

    fc = load_config().featurize
    params: dict[str, Any] = {
        "mode": fc.mode, "weighting": fc.weighting, "l2_normalize": fc.l2_normalize,
        "stop_words": fc.stop_words, "fit_on": None,
    }
    if fc.mode == "vocab":
        params.update(min_df=fc.min_df, max_df=fc.max_df)
    else:
        params.update(hash_bits=fc.hash_bits)
    if fc.token_pattern:
        params["token_pattern"] = fc.token_pattern
    return params


def featurize_split(
    train_tokens: Sequence[Sequence[str]], test_tokens: Sequence[Sequence[str]]
) -> tuple[sp.csr_matrix, sp.csr_matrix, FeatureSpec]:
    """Fit the project's FeatureSpec on the training token lists; transform both parts."""
    spec = FeatureSpec.from_params(feature_params()).fit_documents(train_tokens)

    def csr(tokens: Sequence[Sequence[str]]) -> sp.csr_matrix:
        offsets, idx, val, _ = spec.transform_many(list(tokens))
        return sp.csr_matrix((val, idx, offsets), shape=(len(tokens), spec.n_features))

    return csr(train_tokens), csr(test_tokens), spec


def _batch(X: sp.csr_matrix, ids: Sequence[str], labels: list[list[str]]) -> SparseBatch:
    return SparseBatch(X=sp.csr_matrix(X, dtype=np.float32), doc_ids=np.asarray(ids, dtype=str), labels=labels)


def load_rcv1(data_dir: Path, quick: bool = False) -> tuple[Taxonomy, list[Split], dict[str, Any]]:
    d = data_dir / "rcv1v2_subset"
    tax = Taxonomy.from_tsv(d / "taxonomy.tsv", root="Root")
    docs = _read_jsonl(d / "docs.jsonl.gz")
    folds: dict[str, int] = {}
    folds_path = d / "folds.tsv"
    if not folds_path.is_file():
        raise DataUnavailableError(f"{folds_path} not found")
    for no, line in enumerate(folds_path.read_text(encoding="utf-8").splitlines(), start=1):
        if no == 1 or not line.strip():
            continue
        doc_id, fold = line.split("\t")
        folds[doc_id] = int(fold)
    missing = [doc["id"] for doc in docs if doc["id"] not in folds]
    if missing:
        raise InputDataError(f"{folds_path}: {len(missing)} document(s) have no fold, e.g. {missing[:3]}")
    fold_of = np.array([folds[doc["id"]] for doc in docs])
    tokenizer = FeatureSpec.from_params(feature_params()).tokenizer
    tokens = [tokenizer.tokenize_document(None, doc["tokens"]) for doc in docs]
    splits = []
    for k in sorted(set(fold_of.tolist()))[: 1 if quick else None]:
        tr = np.flatnonzero(fold_of != k)
        te = np.flatnonzero(fold_of == k)
        Xtr, Xte, _ = featurize_split([tokens[i] for i in tr], [tokens[i] for i in te])
        splits.append(
            Split(
                f"fold{k}",
                _batch(Xtr, [docs[i]["id"] for i in tr], [list(docs[i]["labels"]) for i in tr]),
                _batch(Xte, [docs[i]["id"] for i in te], [list(docs[i]["labels"]) for i in te]),
                int(Xtr.shape[1]),
            )
        )
    info = {
        "documents": len(docs),
        "protocol": "5-fold cross-validation (folds.tsv): train on 4 folds in corpus order, test on 1",
    }
    return tax, splits, info


def load_reuters(data_dir: Path, quick: bool = False) -> tuple[Taxonomy, list[Split], dict[str, Any]]:
    d = data_dir / "reuters21578"
    docs = [doc for doc in _read_jsonl(d / "docs.jsonl.gz") if doc.get("split") in ("train", "test")]
    in_train = {lab for doc in docs if doc["split"] == "train" for lab in doc["labels"]}
    in_test = {lab for doc in docs if doc["split"] == "test" for lab in doc["labels"]}
    cats = in_train & in_test  # the ApteMod categories
    apte = [doc for doc in docs if doc.get("apte_mod")]
    for doc in apte:
        if not set(doc["labels"]) & cats:
            raise InputDataError(f"reuters21578 document {doc['id']}: apte_mod but none of the {len(cats)} categories")
    full = Taxonomy.from_tsv(d / "taxonomy_topics.tsv", root="ROOT")
    edges = []
    for c in sorted(cats):
        g = full.names[int(full.parent[full.id(c)])]
        edges.append((g, c))
    groups = sorted({g for g, _ in edges})
    tax = Taxonomy.from_edges([(full.root_name, g) for g in groups] + edges, root=full.root_name, source=str(d / "taxonomy_topics.tsv") + " (ApteMod topics)")
    train = sorted((doc for doc in apte if doc["split"] == "train"), key=lambda doc: int(doc["id"]))
    test = sorted((doc for doc in apte if doc["split"] == "test"), key=lambda doc: int(doc["id"]))
    if quick:
        train = train[:2000]

    def text(doc: dict[str, Any]) -> str | None:
        # as the corpus reader builds it for featurize (text_fields title, text joined by "\n")
        parts = [doc[f] for f in ("title", "text") if doc.get(f)]
        return "\n".join(parts) if parts else None

    def labels(doc: dict[str, Any]) -> list[str]:
        return [lab for lab in doc["labels"] if lab in cats]

    tokenizer = FeatureSpec.from_params(feature_params()).tokenizer
    Xtr, Xte, _ = featurize_split(
        [tokenizer.tokenize_document(text(doc), None) for doc in train],
        [tokenizer.tokenize_document(text(doc), None) for doc in test],
    )
    split = Split(
        "modapte",
        _batch(Xtr, [str(doc["id"]) for doc in train], [labels(doc) for doc in train]),
        _batch(Xte, [str(doc["id"]) for doc in test], [labels(doc) for doc in test]),
        int(Xtr.shape[1]),
    )
    info = {
        "documents": len(train) + len(test),
        "categories": len(cats),
        "groups": groups,
        "protocol": "ModApte apte_mod documents: train (NEWID order) / test, one split",
    }
    return tax, [split], info


LOADERS: dict[str, Callable[[Path, bool], tuple[Taxonomy, list[Split], dict[str, Any]]]] = {
    "rcv1v2_subset": load_rcv1,
    "reuters21578": load_reuters,
}


# ============================================================================ one split
def _evaluate(tax: Taxonomy, model: CesaModel, test: SparseBatch) -> tuple[dict[str, float], float]:
    t0 = time.perf_counter()
    pred, _ = model.predict_multilabel(test)
    seconds = time.perf_counter() - t0
    mc = MetricCounts(tax)
    mc.add(test.label_matrix(tax), sp.csr_matrix(pred.astype(np.float32)))
    m = mc.compute()
    keys = [k for k, _ in LOSSES]
    return {k: float(m[k]) for k in keys} | {f"{k}_std_docs": float(m[f"{k}_std"]) for k in keys}, seconds


def spark_features(spark: Any, batch: SparseBatch) -> Any:
    """The training batch as a Spark DataFrame in the features layout (doc_id, labels, indices,
    values). ``doc_id`` is ``<position>:<id>`` with a zero-padded position, so the global order of
    node-parallel training (sorted by doc_id) is the batch order that serial training uses."""
    import pyarrow as pa

    X = sp.csr_matrix(batch.X, dtype=np.float32)
    X.sort_indices()
    offsets = pa.array(X.indptr.astype(np.int32))
    width = len(str(max(len(batch) - 1, 0)))
    table = pa.table({
        "doc_id": pa.array([f"{i:0{width}d}:{d}" for i, d in enumerate(batch.doc_ids)], pa.string()),
        "labels": pa.array(batch.labels, pa.list_(pa.string())),
        "indices": pa.ListArray.from_arrays(offsets, pa.array(X.indices.astype(np.int32))),
        "values": pa.ListArray.from_arrays(offsets, pa.array(X.data.astype(np.float32))),
    })
    return spark.createDataFrame(table)


def _train(model: CesaModel, train: SparseBatch, seed: int, spark: Any, train_df: Any) -> tuple[dict[str, Any], str]:
    """Train ``model`` for one epoch from scratch: serially, or node-parallel on Spark."""
    model.validate_params()
    if spark is not None and model.node_parallel():
        from sparkhc.spark.node_parallel import train_node_parallel

        info: dict[str, Any] = {}
        train_node_parallel(spark, train_df, model, epochs=1, seed=seed, progress=info.update)
        return dict(info.get("counters", {})), "spark node-parallel"
    model.state_ = model.init_state()
    return model.partial_fit(train, seed=seed, epoch=0), "serial"


def run_split(tax: Taxonomy, split: Split, seed: int = 0, spark: Any = None) -> dict[str, Any]:
    """Train every model on ``split.train`` and evaluate on ``split.test``; with ``spark`` the
    node-independent models are trained node-parallel on Spark."""
    n_feat = split.n_features
    train_df = spark_features(spark, split.train).cache() if spark is not None else None
    res: dict[str, Any] = {
        "train_docs": len(split.train),
        "test_docs": len(split.test),
        "features": n_feat,
        "rows": {},
    }
    factories: list[tuple[str, Callable[[], CesaModel]]] = [
        ("PERC", lambda: Perc(tax, n_feat)),
        ("H-PERC", lambda: HPerc(tax, n_feat, mistake="decoded")),
        ("H-PERC (node rule)", lambda: HPerc(tax, n_feat, mistake="node")),
        ("H-RLS", lambda: HRLS(tax, n_feat)),
        ("SVM", lambda: SVM(tax, n_feat)),
        ("H-SVM", lambda: HSVM(tax, n_feat)),
    ]
    for name, make in factories:
        model = make()
        t0 = time.perf_counter()
        counters, how = _train(model, split.train, seed, spark, train_df)
        fit_s = time.perf_counter() - t0
        losses, pred_s = _evaluate(tax, model, split.test)
        row = {**losses, "fit_seconds": round(fit_s, 2), "predict_seconds": round(pred_s, 2), "counters": counters,
               "trained": how}
        if isinstance(model, HRLS):
            stored = model.get_state().arrays["n_stored"]
            elig = eligible_matrix(tax, split.train.label_matrix(tax))
            per_node = model.stored_per_node()
            row["stored_total"] = int(stored.sum())
            row["eligible_total"] = int(elig.sum())
            row["stored_per_node"] = per_node
            res["rows"][name] = row
            log.info("%s %-8s fit %.1fs stored %d of %d eligible", split.name, name, fit_s, row["stored_total"],
                     row["eligible_total"])
            _log_row(split.name, name, losses, fit_s)
            ah = ApproxHBayes(tax, n_feat).set_state(model.get_state())
            losses, pred_s = _evaluate(tax, ah, split.test)
            res["rows"]["AH-BAY"] = {
                **losses,
                "fit_seconds": round(fit_s, 2),
                "predict_seconds": round(pred_s, 2),
                "note": "same trained state as H-RLS; H-BAYES decoding with normalised costs",
                "trained": how,
            }
            _log_row(split.name, "AH-BAY", losses, fit_s)
        else:
            res["rows"][name] = row
            _log_row(split.name, name, losses, fit_s)
    if train_df is not None:
        train_df.unpersist()
    return res


def _log_row(split: str, name: str, losses: dict[str, float], fit_s: float) -> None:
    log.info("%s %-18s 0/1 %.3f uH %.3f nH %.4f sym %.3f (fit %.1fs)", split, name, losses["zero_one"],
             losses["hloss_uniform"], losses["hloss_normalized"], losses["symdiff"], fit_s)


# ============================================================================ driver
def _summary(splits: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for name in (*ROWS, *EXTRA_ROWS):
        entry: dict[str, Any] = {}
        for key, _ in LOSSES:
            vals = np.array([s["rows"][name][key] for s in splits])
            entry[key] = float(vals.mean())
            entry[f"{key}_std_folds"] = float(vals.std(ddof=1)) if len(vals) > 1 else None
            entry[f"{key}_std_docs"] = (
                float(splits[0]["rows"][name][f"{key}_std_docs"]) if len(splits) == 1 else None
            )
        entry["fit_seconds"] = float(np.mean([s["rows"][name]["fit_seconds"] for s in splits]))
        out[name] = entry
    return out


def _ordering_checks(summary: dict[str, dict[str, Any]]) -> list[str]:
    lines = []
    for key, title in LOSSES:
        order = sorted(ROWS, key=lambda r: summary[r][key])
        lines.append(f"- {title}: " + " < ".join(f"{r} {summary[r][key]:.4g}" for r in order))
    lines.append("")
    for key, title in LOSSES:
        s = {r: summary[r][key] for r in ROWS}
        hsvm_best = min(s, key=lambda r: s[r]) == "H-SVM"
        incr = ("PERC", "H-PERC", "H-RLS", "AH-BAY")
        hrls_best_incr = min(incr, key=lambda r: s[r]) == "H-RLS"
        gap = (s["H-RLS"] - s["H-SVM"]) / s["H-SVM"] if s["H-SVM"] else float("nan")
        lines.append(
            f"- {title}: H-SVM best: {'yes' if hsvm_best else 'no'}; H-RLS best incremental: "
            f"{'yes' if hrls_best_incr else 'no'}; H-RLS vs H-SVM: {100 * gap:+.1f}%; "
            f"AH-BAY worse than H-RLS: {'yes' if s['AH-BAY'] > s['H-RLS'] else 'no'}; "
            f"H-RLS vs SVM: {'better or equal' if s['H-RLS'] <= s['SVM'] else 'worse'}"
        )
    return lines


def _cell(entry: dict[str, Any], key: str) -> str:
    sd = entry.get(f"{key}_std_folds")
    if sd is None:
        sd = entry.get(f"{key}_std_docs")
    digits = 4 if key == "hloss_normalized" else 3
    return f"{entry[key]:.{digits}f} ({sd:.{digits}f})" if sd is not None else f"{entry[key]:.{digits}f}"


def render_markdown(results: dict[str, Any]) -> str:
    corpus = results["corpus"]
    summary = results["summary"]
    multi = len(results["splits"]) > 1
    sd_what = "standard deviation over the folds (ddof = 1)" if multi else "standard deviation over the test documents"
    lines = [
        f"# Cesa-Bianchi et al. (2004), Table 1 layout: {corpus}",
        "",
        "```",
        COMMAND.format(corpus=corpus),
        "# equivalently, without the CLI:",
        MODULE_COMMAND.format(corpus=corpus),
        "```",
        "",
        f"Protocol: {results['info']['protocol']}. Taxonomy: {results['taxonomy']}. "
        f"Features: {results['features']}. Training: {results.get('training', 'serial')}.",
        f"Incremental learners (PERC, H-PERC, H-RLS, AH-BAY): one epoch, corpus order, no shuffling. "
        f"SVMs: scikit-learn LinearSVC (liblinear, hinge loss, C = 1, regularised bias) per node. "
        f"Losses are means per test document; in parentheses the {sd_what}.",
        "",
        "| model | " + " | ".join(t for _, t in LOSSES) + " | fit s |",
        "| --- | " + " | ".join("---" for _ in LOSSES) + " | --- |",
    ]
    for name in (*ROWS, *EXTRA_ROWS):
        e = summary[name]
        label = f"*{name}*" if name in EXTRA_ROWS else name
        lines.append(f"| {label} | " + " | ".join(_cell(e, k) for k, _ in LOSSES) + f" | {e['fit_seconds']:.1f} |")
    if not multi:
        n = results["splits"][0]["test_docs"]
        lines += [
            "",
            f"One split: the standard error of a mean is the document standard deviation / sqrt({n}), "
            "e.g. "
            + ", ".join(
                f"{t} ±{summary['H-SVM'][k + '_std_docs'] / np.sqrt(n):.{4 if k == 'hloss_normalized' else 3}f}"
                for k, t in LOSSES
            )
            + " for H-SVM; differences smaller than about twice that are not resolved by this test set.",
        ]
    lines += [
        "",
        "*H-PERC (node rule)* is not in the paper: H-PERC updating an eligible node when its own "
        "classifier is wrong (`g_i(x) != y_i`) instead of when the hierarchical prediction is wrong "
        "(`ŷ_i != y_i`, the paper's wording and the H-PERC row). It makes node trainings independent.",
        "",
        "## H-RLS stored instances (selective sampling, threshold sqrt(5 ln t / N_i))",
        "",
        "| split | stored | eligible (node, example) pairs | stored share | largest N_i |",
        "| --- | --- | --- | --- | --- |",
    ]
    for s in results["splits"]:
        r = s["rows"]["H-RLS"]
        top = sorted(r["stored_per_node"].items(), key=lambda kv: -kv[1])[:3]
        lines.append(
            f"| {s['name']} | {r['stored_total']} | {r['eligible_total']} | "
            f"{r['stored_total'] / max(r['eligible_total'], 1):.2f} | "
            + ", ".join(f"{k} {v}" for k, v in top)
            + " |"
        )
    lines += [
        "",
        "## Ordering compared with the paper (computed)",
        "",
        "Paper (RCV1 and OHSUMED): H-SVM best; H-RLS after one epoch close behind, not worse than "
        "SVM (except OHSUMED, normalised H-loss); AH-BAY worse than H-RLS on RCV1, better than "
        "PERC and H-PERC. Here, ranked best first:",
        "",
        *_ordering_checks(summary),
        "",
        "## The paper's RCV1 numbers (first 100k RCV1 documents, 101 nodes, other features)",
        "",
        "| model | " + " | ".join(t for _, t in LOSSES) + " |",
        "| --- | " + " | ".join("---" for _ in LOSSES) + " |",
    ]
    for name in ROWS:
        lines.append(f"| {name} | " + " | ".join(f"{m:.3f} ({s:.3f})" for m, s in PAPER_RCV1[name]) + " |")
    lines += [
        "",
        f"Run time {results['seconds']:.0f} s on {results['machine']}. "
        f"Per-split numbers, counters and per-node stored counts: `results_{corpus}.json`.",
        "",
    ]
    return "\n".join(lines)


def run_experiment(
    data_dir: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    corpus: str,
    *,
    quick: bool = False,
    seed: int = 0,
    spark: Any = None,
) -> dict[str, Any]:
    """Run Table 1 on ``corpus``; write ``table1_<corpus>.md`` and ``results_<corpus>.json`` to
    ``out_dir`` and return the results. ``quick``: one fold (RCV1) or 2,000 training documents
    (Reuters), for a smoke run. ``spark``: a SparkSession to train the node-independent models
    node-parallel (:func:`sparkhc.spark.node_parallel.train_node_parallel`)."""
    if corpus not in LOADERS:
        raise InputDataError(f"unknown corpus {corpus!r} for the cesa-bianchi experiment; choose from {CORPORA}")
    t_start = time.perf_counter()
    tax, splits, info = LOADERS[corpus](Path(data_dir), quick)
    log.info("%s: %s, %d split(s)", corpus, tax, len(splits))
    split_results = []
    for split in splits:
        r = run_split(tax, split, seed=seed, spark=spark)
        r["name"] = split.name
        split_results.append(r)
    results: dict[str, Any] = {
        "corpus": corpus,
        "quick": quick,
        "info": info,
        "taxonomy": f"{tax.n_nodes - 1} nodes, {len(tax.children[0])} roots, depth {tax.max_depth} "
        f"(fingerprint {tax.fingerprint()})",
        "features": "the project's FeatureSpec ([featurize] defaults: "
        + ", ".join(f"{k} {v}" for k, v in feature_params().items() if k != "fit_on")
        + ") fitted on each training part; "
        + ", ".join(f"{s.name} {s.n_features}" for s in splits) + " features",
        "training": "node-parallel on Spark for the node-independent models (--spark)" if spark is not None
        else "serial",
        "summary": _summary(split_results),
        "splits": split_results,
        "paper_rcv1": {k: [list(x) for x in v] for k, v in PAPER_RCV1.items()},
    }
    results["seconds"] = round(time.perf_counter() - t_start, 1)
    results["machine"] = f"{os.cpu_count()} CPU(s), {platform.machine()}, Python {sys.version.split()[0]}"
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    suffix = "_quick" if quick else ""
    harness.write_json(out / f"results_{corpus}{suffix}.json", results)
    harness.write_markdown(out / f"table1_{corpus}{suffix}.md", render_markdown(results))
    return results


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m experiments.cesa_bianchi", description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", required=True, choices=CORPORA)
    ap.add_argument("--data-dir", default="../shared/data", help="shared data root")
    ap.add_argument("--out", default="docs/results/cesa_bianchi", help="output directory")
    ap.add_argument("--quick", action="store_true", help="one fold / 2,000 training documents")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--spark", action="store_true",
                    help="train PERC, H-PERC (node rule), H-RLS/AH-BAY, SVM, H-SVM node-parallel on a local "
                    "SparkSession ($SPARKHC_MASTER or local[2]); the tables are the same")
    ap.add_argument("--render-only", action="store_true",
                    help="rewrite table1_<corpus>.md from an existing results_<corpus>.json (no training)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    if args.render_only:
        suffix = "_quick" if args.quick else ""
        src = Path(args.out) / f"results_{args.corpus}{suffix}.json"
        if not src.is_file():
            print(f"error: {src} not found; run the experiment first", file=sys.stderr)
            return 2
        results = json.loads(src.read_text(encoding="utf-8"))
        harness.write_markdown(Path(args.out) / f"table1_{args.corpus}{suffix}.md", render_markdown(results))
        return 0
    spark = None
    if args.spark:
        from sparkhc.spark.session import get_session

        spark = get_session("sparkhc-cesa-bianchi", master=os.environ.get("SPARKHC_MASTER", "local[2]"))
    try:
        run_experiment(args.data_dir, args.out, args.corpus, quick=args.quick, seed=args.seed, spark=spark)
    except (DataUnavailableError, InputDataError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    finally:
        if spark is not None:
            spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
