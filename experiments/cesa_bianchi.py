"""Reproduce the layout of Table 1 of Cesa-Bianchi, Gentile, Tironi, Zaniboni (2004).

Rows PERC, H-PERC, H-RLS, AH-BAY, SVM, H-SVM (:mod:`sparkhc.models.cesa_bianchi`); columns the
0/1 loss, the uniform and normalised H-loss and the symmetric-difference loss, means per test
document (:class:`sparkhc.metrics.MetricCounts`), with standard deviations over folds. The
incremental learners (PERC, H-PERC, H-RLS, AH-BAY) see the training documents once, in corpus
order (``shuffle=False``, one epoch), as in the paper.

Corpora (the corpus registry's protocols, :mod:`sparkhc.corpus.registry`):

* ``rcv1v2_subset``: 2,316 RCV1-v2 documents, 103 topics (4 roots: CCAT, ECAT, GCAT, MCAT),
  labels ancestor-closed with partial paths; 5-fold cross-validation with ``folds.tsv`` (train on
  4 folds, test on 1). The paper used the first 100k RCV1 documents, train/test on adjacent groups.
* ``reuters21578``: ModApte ``apte_mod`` documents (7,770 train / 3,019 test), labels the 90
  ApteMod topics under their groups of ``taxonomy_topics.tsv`` (the registry prunes the taxonomy
  to those topics and groups, so the forest's roots are the groups); one split, so the table shows
  the standard deviation over test documents instead.

Everything runs on the product's data path, as ``sparkhc featurize`` / ``sparkhc train`` do: per
round the corpus is read by the registry's reader and featurized on Spark
(:func:`sparkhc.spark.pipelines.featurize`, the ``[featurize]`` defaults: vocabulary mode,
``log(1 + tf) * idf`` with smooth idf, terms in >= 2 and <= 50 % of the training documents, English
stop words dropped, rows L2-normalised as in the paper; vocabulary and idf fitted on the training
part); every row's model is trained by registry name (``perc``, ``h_perc``, ``h_rls``, ``svm``,
``h_svm``) through :func:`sparkhc.spark.pipelines.train`, i.e. the product's
:func:`~sparkhc.spark.training.fit_model`: one epoch (``train.epochs = 1``), node-parallel where the
node learners are independent (exact: equal to serial training), H-PERC (the paper's rule, not
node-independent) by parameter mixing with one shard (= serial). Both see the training documents
in ``doc_id`` order (the order of the product's training drivers). AH-BAY decodes the trained H-RLS
state with the H-BAYES rule. Test documents are decoded in this process
(``predict_multilabel``) and scored with :class:`sparkhc.metrics.MetricCounts`.

Run::

    python -m experiments.cesa_bianchi --corpus rcv1v2_subset --data-dir ../shared/data --out docs/results/cesa_bianchi
    python -m experiments.cesa_bianchi --corpus reuters21578 --data-dir ../shared/data --out docs/results/cesa_bianchi
    sparkhc experiment cesa-bianchi --corpus rcv1v2_subset --quick --data-dir ../shared/data --out /tmp/cesa

Writes ``table1_<corpus>.md`` and ``results_<corpus>.json`` to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from experiments import harness
from sparkhc.batch import SparseBatch
from sparkhc.config import Config
from sparkhc.errors import DataUnavailableError, InputDataError
from sparkhc.features import features_taxonomy
from sparkhc.metrics import MetricCounts
from sparkhc.models.cesa_bianchi import HRLS, ApproxHBayes, CesaModel, eligible_matrix
from sparkhc.persistence import load_model
from sparkhc.spark import pipelines
from sparkhc.taxonomy import Taxonomy

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
#: table row -> (registered model, model parameters)
ROW_MODELS: dict[str, tuple[str, dict[str, Any]]] = {
    "PERC": ("perc", {}),
    "H-PERC": ("h_perc", {"mistake": "decoded"}),
    "H-PERC (node rule)": ("h_perc", {"mistake": "node"}),
    "H-RLS": ("h_rls", {}),
    "SVM": ("svm", {}),
    "H-SVM": ("h_svm", {}),
}


@dataclass
class Split:
    """One evaluation round: its features folder and row selections."""

    name: str
    features: Path
    train_sel: dict[str, Any]
    test_sel: dict[str, Any]
    n_features: int


def experiment_config(cfg: Config | None = None) -> Config:
    """The configuration of the runs: ``cfg`` (default: the packaged defaults) with one epoch and
    one shard (the paper's single sequential pass; node-parallel models do not use shards)."""
    from sparkhc.config import load_config

    cfg = cfg or load_config()
    return replace(cfg, train=replace(cfg.train, epochs=1, shards=1))


def featurize_rounds(spark: Any, cfg: Config, corpus: str, data_dir: Path, work: Path,
                     quick: bool = False) -> tuple[Taxonomy, list[Split], dict[str, Any]]:
    """Featurize every evaluation round of ``corpus`` (``quick``: the first) on Spark."""
    from sparkhc.corpus import registry

    info = registry.get_corpus(corpus)
    splits = []
    for r, rnd in enumerate(info.rounds()[: 1 if quick else None]):
        sel_train, sel_test = harness.round_selections(rnd)
        feats = work / f"round{r}" / "features"
        summary = pipelines.featurize(spark, cfg, feats, corpus=corpus, data_dir=str(data_dir), overwrite=True,
                                      fit_exclude_fold=sel_test.get("fold"))
        name = f"fold{sel_test['fold']}" if sel_test.get("fold") is not None else "modapte"
        splits.append(Split(name, feats, sel_train, sel_test, int(summary["n_features"])))
    tax = features_taxonomy(splits[0].features)
    meta = {"documents": info.n_docs, "protocol": info.protocol}
    return tax, splits, meta


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


def _train_row(spark: Any, cfg: Config, split: Split, row: str, work: Path) -> tuple[CesaModel, dict[str, Any]]:
    """Train the model of table row ``row`` through the product's training pipeline; return it
    loaded back from its saved version, with its metadata and the training wall time."""
    name, params = ROW_MODELS[row]
    syscfg = replace(cfg, model={**cfg.model, name: {**cfg.model_params(name), **params}})
    mdir = work / f"model-{row.replace(' ', '_').replace('(', '').replace(')', '')}"
    info = pipelines.train(spark, syscfg, split.features, mdir, model_name=name, overwrite=True, **split.train_sel)
    model, meta = load_model(mdir)
    assert isinstance(model, CesaModel)
    meta["train_seconds"] = float(info["seconds"])
    return model, meta


def run_split(spark: Any, cfg: Config, tax: Taxonomy, split: Split, work: Path) -> dict[str, Any]:
    """Train every row's model on ``split``'s training part and evaluate it on its test part."""
    train = harness.local_split(split.features, split.train_sel)
    test = harness.local_split(split.features, split.test_sel)
    res: dict[str, Any] = {
        "train_docs": len(train),
        "test_docs": len(test),
        "features": split.n_features,
        "rows": {},
    }
    for name in ROW_MODELS:
        model, meta = _train_row(spark, cfg, split, name, work / split.name)
        fit_s = meta["train_seconds"]
        training = meta.get("training", {})
        how = ("spark node-parallel" if training.get("node_parallel")
               else f"spark parameter mixing, {training.get('shards')} shard(s)")
        losses, pred_s = _evaluate(tax, model, test)
        row = {**losses, "fit_seconds": round(fit_s, 2), "predict_seconds": round(pred_s, 2),
               "counters": dict(meta.get("counters") or {}), "trained": how}
        res["rows"][name] = row
        _log_row(split.name, name, losses, fit_s)
        if isinstance(model, HRLS):
            stored = model.get_state().arrays["n_stored"]
            elig = eligible_matrix(tax, train.label_matrix(tax))
            row["stored_total"] = int(stored.sum())
            row["eligible_total"] = int(elig.sum())
            row["stored_per_node"] = model.stored_per_node()
            log.info("%s %-8s fit %.1fs stored %d of %d eligible", split.name, name, fit_s, row["stored_total"],
                     row["eligible_total"])
            ah = ApproxHBayes(model.taxonomy, model.n_features).set_state(model.get_state())
            losses, pred_s = _evaluate(tax, ah, test)
            res["rows"]["AH-BAY"] = {
                **losses,
                "fit_seconds": round(fit_s, 2),
                "predict_seconds": round(pred_s, 2),
                "note": "same trained state as H-RLS; H-BAYES decoding with normalised costs",
                "trained": how,
            }
            _log_row(split.name, "AH-BAY", losses, fit_s)
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
        f"Incremental learners (PERC, H-PERC, H-RLS, AH-BAY): one epoch, doc_id order, no shuffling. "
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
    spark: Any = None,
    cfg: Config | None = None,
    work: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """Run Table 1 on ``corpus``; write ``table1_<corpus>.md`` and ``results_<corpus>.json`` to
    ``out_dir`` and return the results. ``quick``: the first round only, files suffixed
    ``_quick`` (the quick runs of ``sparkhc experiment --quick`` read a staged slice of the
    corpus). ``spark``: the session (default: ``local[2]``); ``work``: scratch folder for the
    features and models (default: a temporary folder, removed afterwards)."""
    if corpus not in CORPORA:
        raise InputDataError(f"unknown corpus {corpus!r} for the cesa-bianchi experiment; choose from {CORPORA}")
    if spark is None:
        from sparkhc.spark.session import get_session

        spark = get_session("sparkhc-experiment-cesa-bianchi", master=os.environ.get("SPARKHC_MASTER", "local[2]"))
    cfg = experiment_config(cfg)
    t_start = time.perf_counter()
    scratch = Path(work) if work is not None else Path(tempfile.mkdtemp(prefix="sparkhc-cesa-"))
    try:
        tax, splits, info = featurize_rounds(spark, cfg, corpus, Path(data_dir), scratch, quick)
        log.info("%s: %s, %d split(s)", corpus, tax, len(splits))
        split_results = []
        for split in splits:
            r = run_split(spark, cfg, tax, split, scratch)
            r["name"] = split.name
            split_results.append(r)
    finally:
        if work is None:
            shutil.rmtree(scratch, ignore_errors=True)
    fc = cfg.featurize
    results: dict[str, Any] = {
        "corpus": corpus,
        "quick": quick,
        "info": info,
        "taxonomy": f"{tax.n_nodes - 1} nodes, {len(tax.children[0])} roots, depth {tax.max_depth} "
        f"(fingerprint {tax.fingerprint()})",
        "features": f"the product's Spark featurize ([featurize] mode {fc.mode}, weighting {fc.weighting}, "
        f"min_df {fc.min_df}, max_df {fc.max_df}, stop words {fc.stop_words}, L2 {fc.l2_normalize}) fitted on "
        "each training part; " + ", ".join(f"{s.name} {s.n_features}" for s in splits) + " features",
        "training": "sparkhc.spark.pipelines.train by registry name (fit_model): one epoch, node-parallel "
        "where the node learners are independent, H-PERC by parameter mixing with 1 shard; doc_id order",
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
    ap.add_argument("--quick", action="store_true", help="the first round only (files suffixed _quick)")
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
    try:
        run_experiment(args.data_dir, args.out, args.corpus, quick=args.quick)
    except (DataUnavailableError, InputDataError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
