#!/usr/bin/env python
"""Calibrated label scores (issue 56, ``predict --top``): does a threshold chosen for a precision on
validation give that precision on test?

    PYTHONPATH=$PWD python benchmarks/bench_suggestions.py --data-dir ../shared/data

Every corpus goes through the CLI as a user runs it, with the defaults: ``featurize --corpus NAME``,
``train`` on the protocol's training part (INDEX.md), ``predict --top K`` on its test part with ``K``
the number of labels (every label not predicted is a suggestion). The training fits the score
calibration on its own validation bands (``training.calibration.suggestions`` in the model's
metadata); nothing here sees a test label before the figures are taken.

What is measured. The labels shown for a test document are its predicted labels (scored by
``pred_calibrated``) and its suggestions. For a threshold ``t`` the validation precision is the one
the calibration recorded (the score of the lowest validation margin it keeps; by construction at
least ``t``); the test precision is the share of the test labels scored at least ``t`` that are
among the document's gold labels (ancestors included). rcv1v2_subset runs its 5-fold protocol (the
test figures pooled over the folds, and the spread of the per-fold precision at 0.9).

The numbers are printed and written to ``docs/benchmarks.md`` (section ``suggestions-calibration``)
with the command, the machine, the load and the date.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import ROOT, command, loadavg, machine, now, write_section  # noqa: E402

#: the page of the feature: its figures sit under its text
DOC = ROOT / "docs" / "suggestions.md"

THRESHOLDS = (0.5, 0.7, 0.8, 0.9, 0.95)
TARGET = 0.9
#: scores are steps of 0.001 (float32 in predictions written before they became float64)
EPS = 1e-6


def cli(*args: str, log: Path) -> None:
    with open(log, "w", encoding="utf-8") as err:
        subprocess.run([sys.executable, "-m", "sparkhc.cli", *args], check=True, stdout=err, stderr=err, cwd=ROOT)


def closure_of(tax_path: Path) -> dict[str, set[str]]:
    """label -> the label and its ancestors (root excluded), from the features' taxonomy."""
    from sparkhc.taxonomy import Taxonomy

    tax = Taxonomy.load(tax_path).concept_taxonomy()
    return {tax.names[c]: {tax.names[a] for a in tax.ancestors(c) if a} | {tax.names[c]}
            for c in range(1, tax.n_nodes)}


def shown_labels(pred: Path, up: dict[str, set[str]]) -> tuple[np.ndarray, np.ndarray]:
    """(scores, correct) of every label shown for the test documents: predicted and suggested."""
    scores: list[float] = []
    correct: list[bool] = []
    for r in pq.read_table(pred / "data").to_pylist():
        gold = set().union(*(up[g] for g in r["labels"] or []))
        items = [*zip(r["pred_labels"], r["pred_calibrated"], strict=True),
                 *((s["label"], s["score"]) for s in r["suggestions"])]
        for lab, sc in items:
            scores.append(sc)
            correct.append(lab in gold)
    return np.array(scores), np.array(correct)


def test_hf(pred: Path, up: dict[str, set[str]]) -> float:
    """Micro-F1 over every label, ancestors included (hF), of the test predictions."""
    tp = fp = fn = 0
    for r in pq.read_table(pred / "data", columns=["labels", "pred_labels"]).to_pylist():
        gold = set().union(*(up[g] for g in r["labels"] or []))
        got = set().union(*(up[g] for g in r["pred_labels"] or []))
        tp, fp, fn = tp + len(gold & got), fp + len(got - gold), fn + len(gold - got)
    return 2 * tp / (2 * tp + fp + fn)


def validation_hf(model: Path) -> float:
    """The same micro-F1 on the training's validation documents, as its calibration recorded it."""
    cal = json.loads((model / "metadata.json").read_text())["training"]["calibration"]
    return float(cal["validation"]["micro_on" if cal["applied"] else "micro_off"])


def validation_precision(model: Path, t: float) -> float:
    rec = json.loads((model / "metadata.json").read_text())["training"]["calibration"]["suggestions"]
    p = np.array(rec["precision"])
    ok = p[p >= t - 1e-9]
    return float(ok.min()) if ok.size else float("nan")


def _train_predict(feats: Path, model: Path, pred: Path, master: str, train_sel: list[str], test_sel: list[str],
                   n_labels: int, log: Path) -> None:
    cli("train", "--features", str(feats), "--out", str(model), "--overwrite", "--master", master, *train_sel,
        log=log.with_suffix(".train.log"))
    cli("predict", "--model", str(model), "--features", str(feats), "--out", str(pred), "--overwrite",
        "--top", str(n_labels), "--master", master, *test_sel, log=log.with_suffix(".predict.log"))


def run_corpus(name: str, data_dir: Path, work: Path, master: str, runs: list[tuple[list[str], list[str]]],
               reuse: bool = False) -> dict[str, object]:
    """Featurize, then for every (train selection, test selection) train, predict and measure."""
    feats = work / name / "features"
    if not (feats / "taxonomy.tsv").exists():
        cli("featurize", "--corpus", name, "--data-dir", str(data_dir), "--out", str(feats), "--master", master,
            log=work / f"{name}-featurize.log")
    up = closure_of(feats / "taxonomy.tsv")
    n_labels = len(up)
    pooled_s, pooled_c, per_run, val, hf = [], [], [], [], []
    seconds = 0.0
    for k, (train_sel, test_sel) in enumerate(runs):
        model, pred = work / name / f"model{k}", work / name / f"pred{k}"
        t0 = time.perf_counter()
        if not (reuse and (pred / "data").is_dir()):  # --reuse: measure an earlier run's predictions again
            _train_predict(feats, model, pred, master, train_sel, test_sel, n_labels, work / f"{name}-{k}")
        seconds += time.perf_counter() - t0
        s, c = shown_labels(pred, up)
        pooled_s.append(s)
        pooled_c.append(c)
        keep = s >= TARGET - EPS
        per_run.append(float(c[keep].mean()) if keep.any() else float("nan"))
        val.append({t: validation_precision(model, t) for t in THRESHOLDS})
        hf.append((validation_hf(model), test_hf(pred, up)))
        from sparkhc.model_store import weights_hash

        print(f"{name} run {k}: weights {weights_hash(model)}, test precision at {TARGET}: {per_run[-1]:.3f} "
              f"({int(keep.sum())} labels)", flush=True)
    s, c = np.concatenate(pooled_s), np.concatenate(pooled_c)
    rows = []
    for t in THRESHOLDS:
        keep = s >= t - EPS
        rows.append({"t": t, "validation": float(np.nanmean([v[t] for v in val])), "test": float(c[keep].mean())
                     if keep.any() else float("nan"), "kept": int(keep.sum()), "correct_total": int(c.sum())})
    return {"name": name, "rows": rows, "per_run": per_run, "labels": n_labels, "shown": int(s.size),
            "seconds": seconds, "hf": tuple(float(np.mean(x)) for x in zip(*hf, strict=True))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "data"))
    ap.add_argument("--work", default="/tmp/bench-suggestions")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--corpora", default="20newsgroups,reuters21578,rcv1v2_subset")
    ap.add_argument("--folds", type=int, default=5, help="rcv1v2_subset: how many of its 5 test folds to run")
    ap.add_argument("--no-write", action="store_true", help="print only; leave docs/suggestions.md alone")
    ap.add_argument("--reuse", action="store_true",
                    help="measure the predictions an earlier run left in --work instead of training again")
    args = ap.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    data_dir = Path(args.data_dir)
    protocols = {
        "20newsgroups": [([], ["--split", "test"])],
        "reuters21578": [([], ["--split", "test"])],
        "rcv1v2_subset": [(["--split", "all", "--exclude-fold", str(k)], ["--split", "all", "--fold", str(k)])
                          for k in range(args.folds)],
    }
    results = [run_corpus(n, data_dir, work, args.master, protocols[n], args.reuse) for n in args.corpora.split(",")]
    head = ["corpus", *(f"test precision at {t:.2f}" for t in THRESHOLDS), f"test labels at {TARGET}",
            f"precision at {TARGET} per run", f"validation precision at {TARGET}", "hF validation", "hF test"]
    lines = []
    for r in results:
        rows = r["rows"]  # type: ignore[index]
        at = next(row for row in rows if row["t"] == TARGET)  # type: ignore[union-attr]
        lines.append("| " + " | ".join([
            str(r["name"]), *(f"{row['test']:.3f}" for row in rows), f"{at['kept']:,}",  # type: ignore[index]
            ", ".join(f"{p:.3f}" for p in r["per_run"]), f"{at['validation']:.3f}",  # type: ignore[attr-defined]
            f"{r['hf'][0]:.3f}", f"{r['hf'][1]:.3f}"]) + " |")  # type: ignore[index]
    table = "\n".join(["| " + " | ".join(head) + " |", "|" + "---|" * len(head), *lines])
    print(table)
    body = "\n".join([
        f"Command: `{command()}`  ", f"Machine: {machine()}  ", f"Load average: {loadavg()}  ", f"Date: {now()}", "",
        "Each corpus is trained with the defaults on its protocol's training part and predicted with `--top` set to the "
        "number of labels; rcv1v2_subset pools its 5 test folds.",
        "A threshold keeps the test labels (predicted and suggested) whose calibrated score is at least that value.",
        "The test precision is the share of the kept labels among the document's gold labels, ancestors included.",
        "The validation column is the precision the training's calibration recorded at threshold 0.9.",
        "hF is the micro-F1 over every label, ancestors included, on the validation documents and on test.",
        *(["The predictions are those of an earlier full run of this script (the same command without --reuse), "
           "measured again."] if args.reuse else []), "",
        table,
    ])
    print(f"command: {command()}")
    if not args.no_write:
        write_section("suggestions-calibration", "Calibrated label scores: threshold 0.9 on validation, precision on "
                      "test (predict --top)", body, doc=DOC)
        print(f"wrote the section suggestions-calibration of {DOC.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
