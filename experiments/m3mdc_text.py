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
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
from pyspark.sql import SparkSession

from experiments import harness
from sparkhc.config import Config
from sparkhc.features import CORPUS_FILE
from sparkhc.spark import pipelines

log = logging.getLogger(__name__)

CORPUS = "reuters21578"
SPEC_NAME = "mdc_reuters21578.toml"
COMMAND = "sparkhc experiment m3mdc --corpus reuters21578 --data-dir ../shared/data --master 'local[2]'"
SYSTEMS = {"M3MDC": "m3mdc", "BR": "mdc_br"}
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
        for label, name in SYSTEMS.items():
            mdir, pdir = work / name / "model", work / name / "predictions"
            t1 = time.perf_counter()
            info = pipelines.train(spark, cfg, feats, mdir, model_name=name, overwrite=True, split="train")
            train_seconds = time.perf_counter() - t1
            meta = json.loads((mdir / "metadata.json").read_text(encoding="utf-8"))
            pipelines.predict(spark, cfg, mdir, feats, pdir, overwrite=True, split="test")
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
        ids = sorted(preds["M3MDC"])
        differ = sum(preds["M3MDC"][d] != preds["BR"][d] for d in ids)
        doc = {
            "command": COMMAND,
            "corpus": CORPUS,
            "class_space_file": f"sparkhc/conf/{SPEC_NAME}",
            "class_space_spec": spec_text,
            "class_spaces": corpus["class_spaces"],
            "read_report": {k: corpus["read_report"][k] for k in ("read", "emitted", "excluded", "excluded_reasons",
                                                                  "quarantined")},
            "documents_per_split": summary.get("documents_per_split"),
            "n_features": summary.get("n_features"),
            "featurize": {k: getattr(cfg.featurize, k) for k in ("mode", "weighting", "min_df", "max_df",
                                                                  "stop_words", "l2_normalize")},
            "featurize_seconds": round(featurize_seconds, 1),
            "systems": systems,
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
        "## Results (ModApte test split)",
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
            f"| {label} | " + " | ".join(f"{m[k]:.4f}" for k in METRICS) + " | "
            + " | ".join(f"{m[f'accuracy_{j}']:.4f}" for j in range(len(spaces)))
            + f" | {r['train_seconds']:.0f} | {alt_s} |"
        )
    p = s["M3MDC"]["params"]
    diff = ", ".join(f"{LABELS[k]} {s['M3MDC']['metrics'][k] - s['BR']['metrics'][k]:+.4f}" for k in METRICS)
    lines += [
        "",
        f"M3MDC − BR: {diff}. {doc['test_documents']} test documents; M3MDC and BR predict a different "
        f"(topic, place) pair for {doc['test_documents_predicted_differently']} of them. M3MDC: λ1 = {p['lambda1']}, λ2 = {p['lambda2']}, "
        f"C₀ = I/m, stop when ‖W_t − W_(t−1)‖_F / ‖W_t‖_F < {p['tol']} (at most {p['max_iter']} alternations), each "
        f"W step solved to a relative duality gap of {p['gap_tol']}. BR: independent one-vs-one linear SVMs per "
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
        f"{s['M3MDC']['train_seconds']:.0f} s, BR training {s['BR']['train_seconds']:.0f} s); Python {doc['python']}, "
        f"numpy {doc['numpy']}.",
        "",
    ]
    return "\n".join(lines)
