"""M3MDC vs BR on featurized text: Reuters-21578 with the class spaces topic × place (issue 8).

Everything runs through the product's own pipelines, as a user would with the CLI::

    sparkhc featurize --corpus reuters21578 --data-dir ../shared/data \\
        --class-spaces sparkhc/conf/mdc_reuters21578.toml --out WORK/features
    sparkhc train --features WORK/features --model m3mdc --out WORK/m3mdc/model      (and mdc_br)
    sparkhc predict --model WORK/m3mdc/model --features WORK/features --out WORK/m3mdc/pred
    sparkhc evaluate --predictions WORK/m3mdc/pred

on the corpus's ModApte protocol (train on the ``train`` split, evaluate on ``test``). The table
(``reuters21578.md``) and every number (``reuters21578.json``) go to ``out_dir``.
"""

from __future__ import annotations

import json
import logging
import platform
import tempfile
import time
from dataclasses import replace
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
from pyspark.sql import SparkSession

from experiments import harness
from experiments import mdc_baselines as mb
from experiments.m3mdc import row_name, wilcoxon_test
from experiments.significance import VERDICT_RULE
from experiments.significance import verdict as rule
from sparkhc.class_spaces import MDCLayout
from sparkhc.config import Config
from sparkhc.features import CORPUS_FILE, features_taxonomy
from sparkhc.models.jia_zhang.solver import mdc_metrics
from sparkhc.spark import pipelines

log = logging.getLogger(__name__)

CORPUS = "reuters21578"
SPEC_NAME = "mdc_reuters21578.toml"
COMMAND = "sparkhc experiment m3mdc --corpus reuters21578 --data-dir ../shared/data --master 'local[2]'"
#: product systems trained through the pipelines: label -> (model, parameter overrides)
SYSTEMS: dict[str, tuple[str, dict[str, Any]]] = {
    "M3MDC": ("m3mdc", {}),
    "BR": ("mdc_br", {}),
    "BR_C1": ("mdc_br", {"lambda1": 1.0}),
}
#: the paper's LIBSVM baselines (experiments/mdc_baselines.py), fitted in process on the same features
BASELINES = ("BR_LIBSVM", "ECC", "ECP", "ESC")
BASELINE_SEED = 0
DESCRIPTIONS = {
    "M3MDC": "product `m3mdc`, its configured λ1, λ2 (the paper's defaults 0.1, 0.001)",
    "BR": "product `mdc_br`, λ1 = 0.1 (C = 10, M3MDC's λ1; not the paper's setting)",
    "BR_C1": "product `mdc_br`, λ1 = 1 (= LIBSVM's default C = 1, the paper's BR)",
    "BR_LIBSVM": "LIBSVM (scikit-learn SVC, linear kernel, C = 1) per class space, in process",
    "ECC": "10 classifier chains (random orders), 67 % samples, majority vote, LIBSVM C = 1, in process",
    "ECP": "10 class powersets, 67 % samples, majority vote, LIBSVM C = 1, in process",
    "ESC": "10 super-class classifiers (partition chosen on an internal validation third), 67 % samples, majority "
           "vote, LIBSVM C = 1, in process",
}
METRICS = ("hamming_score", "exact_match", "sub_exact_match")
LABELS = {"hamming_score": "Hamming Score", "exact_match": "Exact Match", "sub_exact_match": "Sub-Exact Match"}


def _pred_targets(pred_dir: Path) -> dict[str, tuple[str, ...]]:
    table = pq.read_table(pred_dir / "data", columns=["doc_id", "pred_labels"])
    return {d: tuple(sorted(p)) for d, p in zip(table.column(0).to_pylist(), table.column(1).to_pylist(), strict=True)}


def run(spark: SparkSession, cfg: Config, data_dir: str | Path, out_dir: str | Path,
        work_dir: str | Path | None = None) -> dict[str, Any]:
    """Featurize Reuters-21578 into topic × place, train/predict/evaluate M3MDC and BR, write the table."""
    t0 = time.perf_counter()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tmp = None
    if work_dir is None:
        tmp = tempfile.TemporaryDirectory(prefix="sparkhc-mdc-text-")
        work_dir = tmp.name
    work = Path(work_dir)
    try:
        with resources.as_file(resources.files("sparkhc") / "conf" / SPEC_NAME) as spec:
            spec_text = spec.read_text(encoding="utf-8")
            feats = work / "features"
            t1 = time.perf_counter()
            summary = pipelines.featurize(spark, cfg, feats, corpus=CORPUS, data_dir=str(data_dir), overwrite=True,
                                          class_spaces=spec)
            featurize_seconds = time.perf_counter() - t1
        corpus = json.loads((feats / CORPUS_FILE).read_text(encoding="utf-8"))
        systems: dict[str, Any] = {}
        preds: dict[str, dict[str, tuple[str, ...]]] = {}
        for label, (name, overrides) in SYSTEMS.items():
            mdir, pdir = work / label / "model", work / label / "predictions"
            scfg = cfg
            if overrides:
                scfg = replace(cfg, model={**cfg.model, name: {**cfg.model_params(name), **overrides}})
            t1 = time.perf_counter()
            info = pipelines.train(spark, scfg, feats, mdir, model_name=name, overwrite=True, split="train")
            train_seconds = time.perf_counter() - t1
            meta = json.loads((mdir / "metadata.json").read_text(encoding="utf-8"))
            pipelines.predict(spark, scfg, mdir, feats, pdir, overwrite=True, split="test")
            result, _ = pipelines.evaluate(spark, pdir)
            preds[label] = _pred_targets(pdir)
            systems[label] = {
                "model": name,
                "params": meta["params"],
                "metrics": result["metrics"],
                "class_spaces": result["class_spaces"],
                "train_documents": info["documents"],
                "train_seconds": round(train_seconds, 1),
                "counters": meta["counters"],
                "epoch_log": meta["training"]["epoch_log"],
            }
            log.info("%s: %s", label, {k: round(result["metrics"][k], 4) for k in METRICS})
        baselines, per_doc = run_baselines(feats)
        # per-document results of the product systems, in the order of the baseline's test documents
        layout = MDCLayout.from_taxonomy(features_taxonomy(feats))
        for label in SYSTEMS:
            pred_sets = [list(preds[label][d]) for d in per_doc["doc_ids"]]
            per_doc["pred"][label] = layout.targets(pred_sets, per_doc["doc_ids"])
        for label in SYSTEMS:  # the per-document view must agree with the product's evaluation
            got = mdc_metrics(per_doc["gold"], per_doc["pred"][label])
            for k in METRICS:
                if abs(got[k] - systems[label]["metrics"][k]) > 1e-9:
                    raise RuntimeError(f"{label}: {k} from the prediction files {got[k]} differs from "
                                       f"sparkhc evaluate's {systems[label]['metrics'][k]}")
        tests = document_tests(per_doc)
        ids = sorted(preds["M3MDC"])
        differ = sum(preds["M3MDC"][d] != preds["BR"][d] for d in ids)
        doc = {
            "command": COMMAND,
            "corpus": CORPUS,
            "class_space_file": f"sparkhc/conf/{SPEC_NAME}",
            "class_space_spec": spec_text,
            # the spec's path inside the package, not this checkout's absolute path (a rerun elsewhere compares equal)
            "class_spaces": {**corpus["class_spaces"], "source": f"sparkhc/conf/{SPEC_NAME}"},
            "read_report": {k: corpus["read_report"][k] for k in ("read", "emitted", "excluded", "excluded_reasons",
                                                                  "quarantined")},
            "documents_per_split": summary.get("documents_per_split"),
            "n_features": summary.get("n_features"),
            "featurize": {k: getattr(cfg.featurize, k) for k in ("mode", "weighting", "min_df", "max_df",
                                                                  "stop_words", "l2_normalize")},
            "featurize_seconds": round(featurize_seconds, 1),
            "systems": systems,
            "baselines": baselines,
            "paired_tests": tests,
            "descriptions": DESCRIPTIONS,
            "test_documents": len(ids),
            "test_documents_predicted_differently": differ,
            "seconds": round(time.perf_counter() - t0, 1),
            "python": platform.python_version(),
            "numpy": np.__version__,
        }
    finally:
        if tmp is not None:
            tmp.cleanup()
    harness.write_json(out / f"{CORPUS}.json", doc)
    harness.write_markdown(out / f"{CORPUS}.md", table(doc))
    return doc


def run_baselines(feats: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The paper's LIBSVM baselines (:mod:`experiments.mdc_baselines`) on the featurized training
    split, scored on the test split: metrics per system, and per-document gold / predictions."""
    layout = MDCLayout.from_taxonomy(features_taxonomy(feats))
    sel = {"fold": None, "exclude_fold": None}
    train = harness.local_split(feats, {"split": "train", **sel})
    test = harness.local_split(feats, {"split": "test", **sel})
    Y_tr = layout.targets(train.labels, train.doc_ids)
    Y_te = layout.targets(test.labels, test.doc_ids)
    out: dict[str, Any] = {}
    per_doc: dict[str, Any] = {"doc_ids": [str(d) for d in test.doc_ids], "gold": Y_te, "pred": {}}
    for label in BASELINES:
        model: Any = mb.BinaryRelevance() if label == "BR_LIBSVM" else mb.Ensemble(label, seed=BASELINE_SEED)
        t1 = time.perf_counter()
        model.fit(train.X, Y_tr, layout.n_classes)
        secs = time.perf_counter() - t1
        pred = model.predict(test.X)
        per_doc["pred"][label] = pred
        metrics = mdc_metrics(Y_te, pred)
        metrics.update({f"accuracy_{j}": float(np.mean(pred[:, j] == Y_te[:, j])) for j in range(Y_te.shape[1])})
        out[label] = {"metrics": metrics, "train_seconds": round(secs, 1),
                      "members": model.describe() if isinstance(model, mb.Ensemble) else None}
        log.info("%s: %s (%.0f s)", label, {k: round(metrics[k], 4) for k in METRICS}, secs)
    return out, per_doc


def document_tests(per_doc: dict[str, Any]) -> dict[str, Any]:
    """M3MDC against every other system over the test documents: Wilcoxon signed-rank on the
    per-document Hamming score, exact McNemar (binomial on the discordant documents) on exact match."""
    from scipy.stats import binomtest

    gold = per_doc["gold"]
    m3 = per_doc["pred"]["M3MDC"]
    out: dict[str, Any] = {}
    for label, pred in per_doc["pred"].items():
        if label == "M3MDC":
            continue
        hs_m3, hs_o = (m3 == gold).mean(axis=1), (pred == gold).mean(axis=1)
        em_m3, em_o = (m3 == gold).all(axis=1), (pred == gold).all(axis=1)
        b, c = int(np.sum(em_m3 & ~em_o)), int(np.sum(~em_m3 & em_o))
        mcnemar = {"m3mdc_only": b, "other_only": c,
                   "p_two_sided": float(binomtest(b, b + c, 0.5).pvalue) if b + c else 1.0,
                   "p_greater": float(binomtest(b, b + c, 0.5, alternative="greater").pvalue) if b + c else 1.0}
        out[label] = {"hamming_wilcoxon": wilcoxon_test(hs_m3, hs_o), "exact_match_mcnemar": mcnemar}
    return out


def findings(doc: dict[str, Any]) -> list[str]:
    """The findings table (the paper's claims, restated for this data set, which it does not use)."""
    s = {**doc["systems"], **doc["baselines"]}
    t = doc["paired_tests"]
    rows = ["| finding | paper (Table 3 / 4) | ours (ModApte test) | significance (paired over test documents) | "
            "verdict |", "| --- | --- | --- | --- | --- |"]
    claims = (("BR_C1", "hamming_score", "win vs BR, p = 1.95e-3"), ("ECC", "hamming_score", "win vs ECC, p = 9.77e-3"),
              ("ECP", "hamming_score", "win vs ECP, p = 1.95e-3"), ("ESC", "hamming_score", "win vs ESC, p = 3.91e-3"),
              ("BR_C1", "exact_match", "win vs BR, p = 7.81e-3"), ("ECP", "exact_match", "tie vs ECP, p = 0.432"))
    for other, metric, paper in claims:
        ours = s["M3MDC"]["metrics"][metric] - s[other]["metrics"][metric]
        if metric == "hamming_score":
            w = t[other]["hamming_wilcoxon"]
            p1, p2 = w["p_greater"], w["p_two_sided"]
            sig = f"Wilcoxon signed-rank on per-document Hamming score: one-sided p = {p1:.3g}, two-sided p = {p2:.3g}"
        else:
            mc = t[other]["exact_match_mcnemar"]
            p1, p2 = mc["p_greater"], mc["p_two_sided"]
            sig = (f"exact McNemar: {mc['m3mdc_only']} documents only M3MDC gets right, {mc['other_only']} only "
                   f"{other}; one-sided p = {p1:.3g}, two-sided p = {p2:.3g}")
        verdict = rule(0.0 if paper.startswith("tie") else 1.0, ours, p2)
        rows.append(f"| M3MDC {'level with' if paper.startswith('tie') else 'better than'} {other} in "
                    f"{LABELS[metric]} | {paper} (over 10 data sets) | {s['M3MDC']['metrics'][metric]:.4f} vs "
                    f"{s[other]['metrics'][metric]:.4f} ({ours:+.4f}) | {sig} | {verdict} |")
    return rows


def table(doc: dict[str, Any]) -> str:
    """The Markdown report of :func:`run`."""
    s = doc["systems"]
    spaces = s["M3MDC"]["class_spaces"]
    lines = [
        "# M3MDC vs BR on featurized text: Reuters-21578, class spaces topic × place",
        "",
        "Produced by (from the repository root; the machine had 2 cores):",
        "",
        "```",
        doc["command"],
        "```",
        "",
        "which runs `sparkhc featurize --corpus reuters21578 --class-spaces "
        f"{doc['class_space_file']}`, then `sparkhc train` / `predict` / `evaluate` for `m3mdc` and `mdc_br`.",
        "",
        "## Findings",
        "",
        "The paper does not use this data set; its claims about BR, ECC, ECP and ESC (Tables 3 and 4, Wilcoxon "
        "over its 10 data sets) are restated here for Reuters topic × place. One train / test split (ModApte), "
        "so the significance tests are paired over the test documents. Paper-faithful rows: M3MDC at the "
        "paper's defaults against the baselines at LIBSVM's default C = 1; nothing was chosen on the test split. "
        + VERDICT_RULE,
        "",
        *findings(doc),
        "",
        "## Results (ModApte test split)",
        "",
        "Rows: " + "; ".join(f"**{row_name(k)}**: {v}" for k, v in doc["descriptions"].items()) + ".",
        "",
        "| Method | " + " | ".join(LABELS[m] for m in METRICS) + " | "
        + " | ".join(f"accuracy {n}" for n in spaces) + " | train (s) | alternations |",
        "| --- | " + " | ".join("---" for _ in range(len(METRICS) + len(spaces) + 2)) + " |",
    ]
    for label in SYSTEMS:
        r = s[label]
        m = r["metrics"]
        alt = r["counters"].get("alternations")
        conv = r["counters"].get("converged")
        alt_s = "—" if alt is None else f"{int(alt)}{'' if conv else ' (not converged)'}"
        lines.append(
            f"| {row_name(label)} | " + " | ".join(f"{m[k]:.4f}" for k in METRICS) + " | "
            + " | ".join(f"{m[f'accuracy_{j}']:.4f}" for j in range(len(spaces)))
            + f" | {r['train_seconds']:.0f} | {alt_s} |"
        )
    for label, r in doc["baselines"].items():
        m = r["metrics"]
        lines.append(
            f"| {label} | " + " | ".join(f"{m[k]:.4f}" for k in METRICS) + " | "
            + " | ".join(f"{m[f'accuracy_{j}']:.4f}" for j in range(len(spaces)))
            + f" | {r['train_seconds']:.0f} | — |"
        )
    esc = doc["baselines"].get("ESC", {}).get("members") or {}
    lines += [
        "",
        "ESC members' chosen partitions of (topic, place): "
        + ", ".join(str(p) for p in esc.get("partitions", [])) + " ([[0, 1]]: one powerset; [[0], [1]]: BR).",
        "",
        "Paired tests of M3MDC against each system over the test documents:",
        "",
        "| vs | Hamming: wins / losses (documents) | Wilcoxon p two-sided | p one-sided (M3MDC better) "
        "| Exact Match: only M3MDC / only other | McNemar p two-sided | p one-sided |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for label, t in doc["paired_tests"].items():
        w, mc = t["hamming_wilcoxon"], t["exact_match_mcnemar"]
        lines.append(f"| {row_name(label)} | {w['wins']} / {w['losses']} | {w['p_two_sided']:.3g} | {w['p_greater']:.3g} | "
                     f"{mc['m3mdc_only']} / {mc['other_only']} | {mc['p_two_sided']:.3g} | {mc['p_greater']:.3g} |")
    p = s["M3MDC"]["params"]
    diff = ", ".join(f"{LABELS[k]} {s['M3MDC']['metrics'][k] - s['BR']['metrics'][k]:+.4f}" for k in METRICS)
    lines += [
        "",
        f"M3MDC − BR_C10: {diff}. {doc['test_documents']} test documents; M3MDC and BR_C10 predict a different "
        f"(topic, place) pair for {doc['test_documents_predicted_differently']} of them. M3MDC: λ1 = {p['lambda1']}, λ2 = {p['lambda2']}, "
        f"C₀ = I/m, stop when ‖W_t − W_(t−1)‖_F / ‖W_t‖_F < {p['tol']} (at most {p['max_iter']} alternations), each "
        f"W step solved to a relative duality gap of {p['gap_tol']}. BR_C10: independent one-vs-one linear SVMs per "
        f"class space, same solver, λ1 = {s['BR']['params']['lambda1']} (λ2 = 0). Training: {s['M3MDC']['train_documents']} "
        "documents; the pairwise SVM sub-problems of every sweep run as Spark tasks.",
        "",
        "## Class spaces",
        "",
        f"From `{doc['class_space_file']}`:",
        "",
        "```toml",
        doc["class_space_spec"].strip(),
        "```",
        "",
        f"Kept classes, fitted on the {doc['class_spaces']['fitted_on_documents']} training documents (training counts):",
        "",
    ]
    for cs in doc["class_spaces"]["class_spaces"]:
        counts = cs["training_counts"]
        kept = [c for c in cs["classes"] if c != cs["other"]]
        other = sum(n for v, n in counts.items() if v not in kept)
        parts = [f"{c} {counts.get(c, 0)}" for c in sorted(kept, key=lambda c: -counts.get(c, 0))]
        if cs["other"] in cs["classes"]:
            parts.append(f"{cs['other']} {other} ({len(counts) - len(kept)} values)")
        lines.append(f"- {cs['name']} (field `{cs['field']}`): " + ", ".join(parts))
    rr = doc["read_report"]
    lines += [
        "",
        "## Documents",
        "",
        f"Read {rr['read']} records; kept {rr['emitted']} ({', '.join(f'{k} {v}' for k, v in sorted(doc['documents_per_split'].items()))}); "
        f"excluded {rr['excluded']}, quarantined {rr['quarantined']}. Excluded by reason (a document is counted under "
        "the first rule that excludes it: the corpus protocol first, then the class spaces in file order):",
        "",
        "| reason | documents |",
        "| --- | --- |",
    ]
    for reason, n in sorted(rr["excluded_reasons"].items(), key=lambda kv: -kv[1]):
        lines.append(f"| {reason} | {n} |")
    f = doc["featurize"]
    lines += [
        "",
        f"Features: {doc['n_features']} terms (vocabulary fitted on the training split; {f['weighting']}, min_df "
        f"{f['min_df']}, max_df {f['max_df']}, stop words {f['stop_words']}, L2 {f['l2_normalize']}), sparse CSR "
        "end to end.",
        "",
        "## M3MDC convergence",
        "",
        "| t | objective after C step | ‖W_t − W_(t−1)‖_F | W-step sweeps | W-step duality gap |",
        "| --- | --- | --- | --- | --- |",
    ]
    for e in s["M3MDC"]["epoch_log"]:
        lines.append(f"| {e['epoch']} | {e['objective']:.6f} | {e['delta_w']:.3e} | {e['sweeps']} | {e['duality_gap']:.1e} |")
    lines += [
        "",
        f"Total {doc['seconds']:.0f} s (featurize {doc['featurize_seconds']:.0f} s, M3MDC training "
        f"{s['M3MDC']['train_seconds']:.0f} s, BR_C10 training {s['BR']['train_seconds']:.0f} s); Python {doc['python']}, "
        f"numpy {doc['numpy']}.",
        "",
    ]
    return "\n".join(lines)
