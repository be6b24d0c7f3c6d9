"""Reproduce the layout of Table 1 of Cesa-Bianchi, Gentile, Tironi, Zaniboni (2004).

Rows PERC, H-PERC, H-RLS, AH-BAY, SVM, H-SVM (:mod:`sparkhc.models.cesa_bianchi`); columns the
0/1 loss, the uniform and normalised H-loss and the symmetric-difference loss, means per test
document (:class:`sparkhc.metrics.MetricCounts`), with standard deviations over folds. The
incremental learners (PERC, H-PERC, H-RLS, AH-BAY) see the training documents once, in doc_id
order (``shuffle=False``, one epoch), as in the paper. The flat PERC and SVM are evaluated as the
paper does, node by node without decoding; the variant rows *PERC (rule 4)* and *SVM (rule 4)*
decode the same models with rule (4). Each page opens with a findings table (the paper's claims,
our means, a paired t-test over the folds, or over the test documents when there are fewer than 3
folds, and a verdict).

Corpora (the corpus registry's protocols, :mod:`sparkhc.corpus.registry`):

* ``rcv1v2_subset``: 2,316 RCV1-v2 documents, 103 topics (4 roots: CCAT, ECAT, GCAT, MCAT),
  labels ancestor-closed with partial paths; 5-fold cross-validation with ``folds.tsv`` (train on
  4 folds, test on 1). The paper used the first 100k RCV1 documents, train/test on adjacent groups.
* ``reuters21578``: ModApte ``apte_mod`` documents (7,770 train / 3,019 test), labels the 90
  ApteMod topics under their groups of ``taxonomy_topics.tsv`` (the registry prunes the taxonomy
  to those topics and groups, so the forest's roots are the groups); one split, so the table shows
  the standard deviation over test documents instead.
* ``ohsumed23``: the staged OHSUMED data, 7,400 single-label abstracts of the first 20,000 1991
  documents, 23 MeSH disease categories ``C01`` .. ``C23`` under one root (a flat forest of 23
  roots), the INDEX protocol's train / test split (3,357 / 4,043); one split, as Reuters. The paper
  used another part of OHSUMED (the "Quality of Health Care" subtree N05.715, 94 nodes, depth 4,
  multi-label, 55,503 documents, 5 random 40,000 / 15,503 splits), which is not staged; on a flat
  forest every node is eligible for every example and rule (4) keeps every decision, so H-PERC,
  H-SVM and the rule-(4) rows equal PERC and SVM by construction, and the findings comparing them
  are marked *not testable* (AH-BAY = H-RLS too: a leaf's H-BAYES decision is ``w_i.x >= 0``).

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

Writes ``table1_<corpus>.md`` and ``results_<corpus>.json`` to ``--out``, and (not with ``--quick``)
``README.md``, generated from every ``results_<corpus>.json`` in ``--out``.
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
from experiments.significance import CONTRADICTED, REPRODUCED, VERDICT_RULE, combine, untested
from experiments.significance import verdict as rule
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

CORPORA = ("rcv1v2_subset", "reuters21578", "ohsumed23")
COMMAND = "sparkhc experiment cesa-bianchi --corpus {corpus} --data-dir ../shared/data --out docs/results/cesa_bianchi"
MODULE_COMMAND = (
    "python -m experiments.cesa_bianchi --corpus {corpus} --data-dir ../shared/data --out docs/results/cesa_bianchi"
)

#: the paper's rows, evaluated as the paper does: PERC and SVM node by node, ignoring the taxonomy
#: (their predictions need not be ancestor-closed); the others decoded with rule (4) / H-BAYES
ROWS = ("PERC", "H-PERC", "H-RLS", "AH-BAY", "SVM", "H-SVM")
#: not in the paper: the flat models' predictions G-truncated by rule (4), and H-PERC updating on
#: the node's own mistake
EXTRA_ROWS = ("PERC (rule 4)", "SVM (rule 4)", "H-PERC (node rule)")
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
#: The paper's Table 1 (OHSUMED subtree N05.715, 94 nodes; mean and std over 5 random splits).
PAPER_OHSUMED: dict[str, tuple[tuple[float, float], ...]] = {
    "PERC": ((0.899, 0.024), (1.938, 0.219), (0.058, 0.005), (2.639, 0.226)),
    "H-PERC": ((0.846, 0.024), (1.560, 0.155), (0.057, 0.005), (2.528, 0.251)),
    "H-RLS": ((0.769, 0.004), (1.200, 0.007), (0.045, 0.000), (1.957, 0.011)),
    "AH-BAY": ((0.819, 0.004), (1.197, 0.006), (0.047, 0.000), (2.029, 0.009)),
    "SVM": ((0.784, 0.003), (1.206, 0.003), (0.044, 0.000), (1.872, 0.005)),
    "H-SVM": ((0.759, 0.002), (1.170, 0.005), (0.044, 0.000), (1.910, 0.007)),
}
#: the paper's table a corpus is compared with: (data set name, its Table 1 rows)
PAPER_TABLES: dict[str, tuple[str, dict[str, tuple[tuple[float, float], ...]]]] = {
    "rcv1v2_subset": ("RCV1", PAPER_RCV1),
    "reuters21578": ("RCV1", PAPER_RCV1),
    "ohsumed23": ("OHSUMED", PAPER_OHSUMED),
}


# ============================================================================ data
#: trained model (a table row) -> (registered model, model parameters)
ROW_MODELS: dict[str, tuple[str, dict[str, Any]]] = {
    "PERC": ("perc", {}),
    "H-PERC": ("h_perc", {"mistake": "decoded"}),
    "H-PERC (node rule)": ("h_perc", {"mistake": "node"}),
    "H-RLS": ("h_rls", {}),
    "SVM": ("svm", {}),
    "H-SVM": ("h_svm", {}),
}


#: trained model -> the table rows evaluated from it: (row, decoding); "flat": every node's own
#: decision g_i(x) (the paper's PERC / SVM), "rule4": G-truncated by rule (4), "hbayes": H-BAYES
#: decoding of the H-RLS state (AH-BAY)
ROW_EVALS: dict[str, tuple[tuple[str, str], ...]] = {
    "PERC": (("PERC", "flat"), ("PERC (rule 4)", "rule4")),
    "H-PERC": (("H-PERC", "rule4"),),
    "H-PERC (node rule)": (("H-PERC (node rule)", "rule4"),),
    "H-RLS": (("H-RLS", "rule4"), ("AH-BAY", "hbayes")),
    "SVM": (("SVM", "flat"), ("SVM (rule 4)", "rule4")),
    "H-SVM": (("H-SVM", "rule4"),),
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
        name = (f"fold{sel_test['fold']}" if sel_test.get("fold") is not None
                else "modapte" if corpus == "reuters21578" else "train-test")
        splits.append(Split(name, feats, sel_train, sel_test, int(summary["n_features"])))
    tax = features_taxonomy(splits[0].features)
    meta = {"documents": info.n_docs, "protocol": info.protocol}
    return tax, splits, meta


# ============================================================================ one split
def _evaluate(tax: Taxonomy, model: CesaModel, test: SparseBatch,
              decoding: str) -> tuple[dict[str, float], dict[str, np.ndarray], float]:
    """Losses of ``model`` on ``test`` (means, document standard deviations, mean predicted and
    gold set sizes), the per-document losses (for paired tests) and the prediction seconds."""
    t0 = time.perf_counter()
    if decoding == "flat":
        pred = model.predict_nodes(test)
    else:
        pred, _ = model.predict_multilabel(test)
    seconds = time.perf_counter() - t0
    closed = decoding != "flat"
    gold = test.label_matrix(tax)
    P = sp.csr_matrix(pred.astype(np.float32))
    mc = MetricCounts(tax)
    mc.add(gold, P, pred_closed=closed)
    m = mc.compute()
    docs = mc.document_losses(gold, P, pred_closed=closed)
    keys = [k for k, _ in LOSSES]
    out = {k: float(m[k]) for k in keys} | {f"{k}_std_docs": float(m[f"{k}_std"]) for k in keys}
    out["pred_nodes"] = float(pred[:, 1:].sum(axis=1).mean()) if len(pred) else 0.0
    out["gold_nodes"] = float(sp.csr_matrix(gold)[:, 1:].getnnz(axis=1).mean()) if len(pred) else 0.0
    return out, docs, seconds


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
    doc_losses: dict[str, dict[str, np.ndarray]] = {}
    for name in ROW_MODELS:
        model, meta = _train_row(spark, cfg, split, name, work / split.name)
        fit_s = meta["train_seconds"]
        training = meta.get("training", {})
        how = ("spark node-parallel" if training.get("node_parallel")
               else f"spark parameter mixing, {training.get('shards')} shard(s)")
        for row_name, decoding in ROW_EVALS[name]:
            evaluated: CesaModel = model
            if decoding == "hbayes":  # AH-BAY: the trained H-RLS state, H-BAYES decoding
                evaluated = ApproxHBayes(model.taxonomy, model.n_features).set_state(model.get_state())
            losses, docs, pred_s = _evaluate(tax, evaluated, test, decoding)
            doc_losses[row_name] = docs
            row: dict[str, Any] = {**losses, "fit_seconds": round(fit_s, 2), "predict_seconds": round(pred_s, 2),
                                   "trained": how, "decoding": DECODINGS[decoding]}
            if row_name == name:
                row["counters"] = dict(meta.get("counters") or {})
            else:
                row["note"] = f"the model trained for row {name!r}, decoded differently"
            res["rows"][row_name] = row
            _log_row(split.name, row_name, losses, fit_s)
        if isinstance(model, HRLS):
            row = res["rows"][name]
            stored = model.get_state().arrays["n_stored"]
            elig = eligible_matrix(tax, train.label_matrix(tax))
            row["stored_total"] = int(stored.sum())
            row["eligible_total"] = int(elig.sum())
            row["stored_per_node"] = model.stored_per_node()
            log.info("%s %-8s fit %.1fs stored %d of %d eligible", split.name, name, fit_s, row["stored_total"],
                     row["eligible_total"])
    res["_doc_losses"] = doc_losses  # in memory only (paired tests over documents); not written
    return res


DECODINGS = {
    "flat": "none: every node's own decision g_i(x), not ancestor-closed (the paper's flat evaluation)",
    "rule4": "rule (4): G-truncation of g",
    "hbayes": "H-BAYES rule on p_i = (1 + w_i.x) / 2, normalised costs",
}


def _log_row(split: str, name: str, losses: dict[str, float], fit_s: float) -> None:
    log.info("%s %-18s 0/1 %.3f uH %.3f nH %.4f sym %.3f (fit %.1fs)", split, name, losses["zero_one"],
             losses["hloss_uniform"], losses["hloss_normalized"], losses["symdiff"], fit_s)


# ============================================================================ driver
# ============================================================================ findings
#: the paper's findings on RCV1 (Sect. 5 and Table 1): (finding, the paper's words, kind, A, B).
#: kind "best": A has the lowest loss of the six models; "better": A's loss is below B's;
#: "not_worse": A is not significantly worse than B; "close": A within CLOSE of B (relative)
FINDINGS: tuple[tuple[str, str, str, str, str | None], ...] = (
    ("H-SVM is the best model", "H-SVM performs best", "best", "H-SVM", None),
    ("H-SVM beats the flat SVM", "Table 1: H-SVM below SVM on every loss", "better", "H-SVM", "SVM"),
    ("H-RLS (one epoch) is not worse than SVM", "with a single epoch of training H-RLS does not perform worse than SVM",
     "not_worse", "H-RLS", "SVM"),
    ("H-RLS comes close to H-SVM", "H-RLS ... comes reasonably close to H-SVM (Table 1: within 3.4-4.4 %)", "close",
     "H-RLS", "H-SVM"),
    ("AH-BAY is worse than H-RLS", "on RCV1 it never outperforms H-RLS", "better", "H-RLS", "AH-BAY"),
    ("AH-BAY beats PERC", "though it always does better than PERC and H-PERC", "better", "AH-BAY", "PERC"),
    ("AH-BAY beats H-PERC", "though it always does better than PERC and H-PERC", "better", "AH-BAY", "H-PERC"),
)
#: "close": the relative loss gap allowed, the paper's largest H-RLS vs H-SVM gap on RCV1 (4.4 %) rounded up
CLOSE = 0.05
#: significance level of the verdicts
ALPHA = 0.05
SHORT = {"zero_one": "0/1", "hloss_uniform": "uH", "hloss_normalized": "nH", "symdiff": "Δ"}


def paired_t_test(a: np.ndarray, b: np.ndarray) -> tuple[float, float, float]:
    """Two-sided paired t-test of ``a - b``: ``(mean difference, standard error, p)``. Identical
    pairs give p = 1; a constant nonzero difference p = 0."""
    from scipy import stats

    d = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    n = d.size
    if n < 2:
        raise ValueError("a paired test needs at least two pairs")
    mean = float(d.mean())
    se = float(d.std(ddof=1)) / np.sqrt(n)
    if se == 0.0:
        return mean, 0.0, 1.0 if mean == 0.0 else 0.0
    t = mean / se
    return mean, se, float(2.0 * stats.t.sf(abs(t), n - 1))


def _paired_units(splits: list[dict[str, Any]]) -> tuple[str, Any]:
    """The unit of the paired test: the folds when there are at least 3, else the test documents
    (of every split, concatenated). Returns its name and a getter ``(row, loss) -> values``."""
    if len(splits) >= 3:
        def per_fold(row: str, key: str) -> np.ndarray:
            return np.array([s["rows"][row][key] for s in splits])

        return f"paired t-test over the {len(splits)} folds (two-sided)", per_fold

    def per_doc(row: str, key: str) -> np.ndarray:
        return np.concatenate([s["_doc_losses"][row][key] for s in splits])

    n = sum(s["test_docs"] for s in splits)
    return f"paired t-test over the {n} test documents (two-sided)", per_doc


def compute_findings(splits: list[dict[str, Any]], summary: dict[str, dict[str, Any]],
                     corpus: str = "rcv1v2_subset") -> dict[str, Any]:
    """Each finding of :data:`FINDINGS` checked on every loss: the two models' mean losses, the
    mean difference with its spread (standard deviation over folds, or standard error over
    documents), the paired test's p and whether the paper's direction holds; then a verdict by the
    one rule of every results page (:func:`experiments.significance.verdict` per loss, combined over
    the four by :func:`experiments.significance.combine`; "close" claims are untested gap sizes), or
    *not testable* when the two models lose the same on every test document and loss (e.g. H-SVM
    and SVM on a flat taxonomy). The paper's figures are those of ``corpus``'s paper table."""
    test, values = _paired_units(splits)
    paper_name, paper_table = PAPER_TABLES[corpus]
    docs = [s.get("_doc_losses") for s in splits]

    def same(a: str, b: str) -> bool:
        """A and B have the same losses on every test document (known only with document losses)."""
        return all(d is not None for d in docs) and all(
            np.array_equal(d[a][key], d[b][key]) for d in docs for key, _ in LOSSES)  # type: ignore[index]
    by_folds = len(splits) >= 3
    rows = []
    for finding, paper, kind, a, b in FINDINGS:
        losses = {}
        for key, _ in LOSSES:
            s = {r: summary[r][key] for r in ROWS}
            # "best": one test against the next best of the other rows, an identical twin included (on a
            # flat forest H-SVM's twin SVM loses exactly as H-SVM does: a tie, so H-SVM is not best alone)
            rivals = [r for r in ROWS if r != a]
            other = b if b is not None else min(rivals, key=lambda r: s[r])
            diff, se, p = paired_t_test(values(a, key), values(other, key))
            spread = se * np.sqrt(len(splits)) if by_folds else se  # folds: the sd of the differences
            if kind == "best":
                holds = s[a] <= min(s[r] for r in rivals)
            elif kind == "better":
                holds = s[a] < s[other]
            elif kind == "not_worse":
                holds = not (s[a] > s[other] and p < ALPHA)
            else:  # close
                holds = abs(s[a] - s[other]) <= CLOSE * s[other]
            # the one verdict rule (experiments.significance.verdict) on this loss: lower is better,
            # so A's advantage is -diff; "not worse" fails only on a significant loss; "close" is a
            # size of gap no test applies to
            if kind in ("best", "better"):
                part = rule(1.0, -diff, p)
            elif kind == "not_worse":
                part = CONTRADICTED if not holds else REPRODUCED
            else:
                part = untested(int(holds))
            paper_vals = {r: paper_table[r][[k for k, _ in LOSSES].index(key)][0] for r in (a, other)}
            losses[key] = {"a": s[a], "b": s[other], "b_row": other, "diff": diff, "spread": spread, "p": p,
                           "holds": bool(holds), "verdict": part, "paper_a": paper_vals[a], "paper_b": paper_vals[other]}
        n_hold = sum(v["holds"] for v in losses.values())
        verdict = (untested(n_hold, len(LOSSES)) if kind == "close"
                   else combine([v["verdict"] for v in losses.values()]))
        if b is not None and same(a, b):  # a claim about two rows that lose the same: no test applies
            verdict = "not testable (identical losses on every document)"
        rows.append({"finding": finding, "paper": paper, "kind": kind, "a": a, "b": b, "losses": losses,
                     "verdict": verdict})
    return {"test": test, "spread": "sd over folds" if by_folds else "s.e. over documents", "alpha": ALPHA,
            "close": CLOSE, "rows": rows, "paper_data": paper_name}


def render_findings(findings: dict[str, Any]) -> list[str]:
    """The findings table (Markdown lines)."""
    lines = [
        f"| finding | paper ({findings.get('paper_data', 'RCV1')}, Table 1) | ours: A vs B (A − B ± " + findings["spread"] + ") | significance: "
        + findings["test"] + " | reproduced? |",
        "| --- | --- | --- | --- | --- |",
    ]
    for f in findings["rows"]:
        paper, ours, sig = [], [], []
        for key, _ in LOSSES:
            v = f["losses"][key]
            d = 4 if key == "hloss_normalized" else 3
            vs = f"{f['a']} vs {v['b_row']}" if f["b"] is None else ""
            paper.append(f"{SHORT[key]} {v['paper_a']:.3f} vs {v['paper_b']:.3f}")
            ours.append(f"{SHORT[key]} {v['a']:.{d}f} vs {v['b']:.{d}f} ({v['diff']:+.{d}f} ± {v['spread']:.{d}f})"
                        + (f" {vs}" if vs else "") + ("" if v["holds"] else " ✗"))
            sig.append(f"{SHORT[key]} p = {v['p']:.2g}")
        ab = f"{f['a']} vs {f['b']}" if f["b"] else f"{f['a']} vs the next best"
        lines.append(f"| {f['finding']} ({ab}) | “{f['paper']}”<br>" + "<br>".join(paper) + " | "
                     + "<br>".join(ours) + " | " + "<br>".join(sig) + f" | **{f['verdict']}** |")
    lines += [
        "",
        VERDICT_RULE + " Here per loss (paired t-test), combined over the four (✗ marks a loss where the "
        "paper's direction does not hold); *not testable* when the two "
        "models have the same losses on every test document. \"Best\": lowest mean loss of "
        f"the six paper rows (tested against the next best, an identical twin included: on a flat forest H-SVM "
        "against SVM is a tie; issue 55 re-judged it, the twin used to be skipped); \"not worse\": A is not "
        "worse with p < "
        f"{findings['alpha']}; \"close\": |A − B| ≤ {100 * findings['close']:.0f} % of B (the paper's "
        "largest H-RLS vs H-SVM gap on RCV1 is 4.4 %). The paper names no significance test; p-values are "
        "of the paired t-test named in the header. Only the paper-faithful rows enter (PERC and SVM "
        "evaluated node by node, without rule (4), as the paper does).",
    ]
    return lines


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
        entry["pred_nodes"] = float(np.mean([s["rows"][name]["pred_nodes"] for s in splits]))
        out[name] = entry
    return out


def _ordering_checks(summary: dict[str, dict[str, Any]]) -> list[str]:
    """The paper rows ranked best first, per loss."""
    lines = []
    for key, title in LOSSES:
        order = sorted(ROWS, key=lambda r: summary[r][key])
        lines.append(f"- {title}: " + " < ".join(f"{r} {summary[r][key]:.4g}" for r in order))
    return lines


def _cell(entry: dict[str, Any], key: str) -> str:
    sd = entry.get(f"{key}_std_folds")
    if sd is None:
        sd = entry.get(f"{key}_std_docs")
    digits = 4 if key == "hloss_normalized" else 3
    return f"{entry[key]:.{digits}f} ({sd:.{digits}f})" if sd is not None else f"{entry[key]:.{digits}f}"


def _loss_table(summary: dict[str, dict[str, Any]], rows: Sequence[str]) -> list[str]:
    lines = [
        "| model | " + " | ".join(t for _, t in LOSSES) + " | nodes predicted per doc | fit s |",
        "| --- | " + " | ".join("---" for _ in LOSSES) + " | --- | --- |",
    ]
    for name in rows:
        e = summary[name]
        lines.append(f"| {name} | " + " | ".join(_cell(e, k) for k, _ in LOSSES)
                     + f" | {e.get('pred_nodes', float('nan')):.2f} | {e['fit_seconds']:.1f} |")
    return lines


def render_markdown(results: dict[str, Any]) -> str:
    corpus = results["corpus"]
    summary = results["summary"]
    multi = len(results["splits"]) > 1
    sd_what = "standard deviation over the folds (ddof = 1)" if multi else "standard deviation over the test documents"
    gold_nodes = float(np.mean([s["rows"]["H-SVM"].get("gold_nodes", np.nan) for s in results["splits"]]))
    lines = [
        f"# Cesa-Bianchi et al. (2004), Table 1 layout: {corpus}",
        "",
        "```",
        COMMAND.format(corpus=corpus),
        "# equivalently, without the CLI:",
        MODULE_COMMAND.format(corpus=corpus),
        "```",
        "",
        "## Findings",
        "",
        *CORPUS_NOTES.get(corpus, []),
        *render_findings(results["findings"]),
        "",
        "## Table 1 rows, as the paper runs them",
        "",
        f"Protocol: {results['info']['protocol']}. Taxonomy: {results['taxonomy']}. "
        f"Features: {results['features']}. Training: {results.get('training', 'serial')}.",
        "Incremental learners (PERC, H-PERC, H-RLS, AH-BAY): one epoch, doc_id order, no shuffling. "
        "SVMs: hinge-loss linear SVM per node, C = 1, the bias regularised as a constant feature 1 "
        "(`sparkhc.linear`, dual coordinate descent as LIBLINEAR; the paper used libSVM, whose bias "
        "is not regularised). PERC and SVM are evaluated as in the paper, node by node without "
        "decoding (a predicted node may lack its parent; the H-loss charges a node only when all its "
        "ancestors are right); the others are decoded with rule (4) (AH-BAY: the H-BAYES rule). "
        f"Losses are means per test document; in parentheses the {sd_what}. "
        f"Gold nodes per document: {gold_nodes:.2f}.",
        "",
        *_loss_table(summary, ROWS),
        "",
        "## Variants not in the paper",
        "",
        "- *PERC (rule 4)*, *SVM (rule 4)*: the same trained flat models, predictions G-truncated by "
        "rule (4) (a node is predicted only under a predicted parent), as the hierarchical models are.",
        "- *H-PERC (node rule)*: H-PERC updating an eligible node when its own classifier is wrong "
        "(`g_i(x) != y_i`) instead of when the hierarchical prediction is wrong (`ŷ_i != y_i`, the "
        "paper's wording and the H-PERC row). It makes node trainings independent.",
        "",
        *_loss_table(summary, EXTRA_ROWS),
    ]
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
            + " for H-SVM.",
        ]
    lines += [
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
        "## Ordering of the paper rows (computed)",
        "",
        *_ordering_checks(summary),
        "",
        *_paper_numbers(corpus),
        "",
    ]
    lines += [
        "",
        f"Run time {results['seconds']:.0f} s on {results['machine']}. "
        f"Per-split numbers, counters and per-node stored counts: `results_{corpus}.json`.",
        "",
    ]
    return "\n".join(lines)


#: a paragraph opening a corpus's page (Markdown lines)
CORPUS_NOTES: dict[str, list[str]] = {
    "ohsumed23": [
        "Not the paper's OHSUMED data: the paper used the subtree N05.715 (94 nodes, depth 4, multi-label, "
        "55,503 documents, 5 random 40,000 / 15,503 splits), which is not staged; here the staged single-label "
        "`ohsumed23` (23 MeSH disease categories directly under the root, the INDEX train / test split "
        "3,357 / 4,043, one split). On a flat forest every node is eligible for every example and rule (4) "
        "keeps every decision, so H-PERC = PERC and H-SVM = SVM by construction, and AH-BAY = H-RLS (for a "
        "leaf the H-BAYES rule predicts p_i >= 1/2, i.e. w_i.x >= 0): the findings that compare them are "
        "*not testable* here. The paper column shows the paper's OHSUMED figures.",
        "",
    ],
}

PAPER_DATA = {
    "RCV1": "first 100k RCV1 documents, 101 nodes, other features",
    "OHSUMED": "the OHSUMED subtree N05.715, 94 nodes, depth 4, multi-label, 55,503 documents, other features",
}


def _paper_numbers(corpus: str) -> list[str]:
    """The paper's Table 1 block of the data set ``corpus`` is compared with (Markdown lines)."""
    name, table = PAPER_TABLES[corpus]
    lines = [f"## The paper's {name} numbers ({PAPER_DATA[name]})", "",
             "| model | " + " | ".join(t for _, t in LOSSES) + " |",
             "| --- | " + " | ".join("---" for _ in LOSSES) + " |"]
    for row in ROWS:
        lines.append(f"| {row} | " + " | ".join(f"{m:.3f} ({s:.3f})" for m, s in table[row]) + " |")
    return lines


README_NOTES = """\
## How the runs differ from the paper

- **Corpora.** The paper used the first 100,000 RCV1 documents (101 topics; 5 pairs of adjacent
  chronological groups of 20,000, train on one, test on the next) and an OHSUMED subtree. Here:
  the 2,316-document RCV1-v2 subset (103 topics, 5-fold cross-validation with `folds.tsv`) and
  Reuters-21578 ModApte (90 topics under the 6 groups of `taxonomy_topics.tsv`, one split), so
  absolute values are not comparable with the paper's; the comparisons between models are.
- **OHSUMED.** The paper's OHSUMED data (the subtree "Quality of Health Care", N05.715: 94 nodes,
  depth 4, partial and multiple paths, 55,503 documents, 5 random 40,000 / 15,503 splits) is not
  staged. `ohsumed23` is what is: 7,400 single-label abstracts (the first 20,000 1991 documents),
  23 MeSH disease categories C01-C23 directly under the root, the INDEX split 3,357 / 4,043. On
  that flat forest every node is a root, so every node is eligible for every example and rule (4)
  keeps every decision: H-PERC = PERC, H-SVM = SVM and the rule-(4) rows equal the flat ones by
  construction, and AH-BAY = H-RLS (a leaf's H-BAYES decision is p_i >= 1/2, i.e. w_i.x >= 0); the
  uniform H-loss equals the Δ-loss, the normalised one is Δ / 23. What it tests is the rest: H-RLS
  vs SVM, AH-BAY vs PERC, and the SVMs vs the incremental learners, on a second corpus; the
  findings that compare a model with its twin are *not testable* there.
- **Features.** The product's `sparkhc featurize` defaults (`log(1 + tf) * idf`, smooth idf, terms in
  >= 2 and <= 50 % of the training documents, English stop words dropped, rows L2-normalised as in
  the paper), fitted on each training part only; the paper used XRCE's RCV1 vectorisation.
- **SVMs.** The paper used libSVM (linear kernel, C = 1, unregularised bias). Here every node is the
  hinge-loss linear SVM with C = 1 and the bias regularised as a constant feature 1, the problem
  LIBLINEAR and scikit-learn's `LinearSVC(loss="hinge")` solve, by the product's own dual coordinate
  descent (`sparkhc/linear.py`, projected-gradient tolerance 1e-4; `tests/unit/test_linear.py`
  checks it against `LinearSVC` on RCV1 documents: same objective to 1e-4, same predictions).
- **Flat baselines.** As in the paper, PERC and SVM train every node on every example and are
  evaluated node by node, "disregarding all taxonomical information": a predicted node may lack its
  parent, and the H-loss charges node i only when all its ancestors are right
  (`MetricCounts(..., pred_closed=False)`). The rows *PERC (rule 4)* and *SVM (rule 4)* show the
  same models G-truncated by rule (4).

## Implementation choices where the paper is silent or garbled

- **H-BAYES recursion**: `H_i = c_i (p_i (1 - y_i) + (1 - p_i) y_i) + p_i y_i Σ_k H_k`. The extracted
  text (and ALGORITHMS.md) shows `+ Σ_k H_k` without `p_i y_i`; that version differs from the
  brute-force minimum of the expected H-loss on some random forests of depth 3 and more, the
  version with the factor matches it on every case (`test_hbayes_rule_equals_brute_force_minimum`).
- **H-RLS**: targets ±1; `t` = examples seen since the model was created (1-based); `N_i = 0` always
  stores (threshold +∞); `g_i = [w_i·x >= 0]` with the current instance in the inverse; dual
  prediction `w_i·x = kᵀM⁻¹y / (1 + xᵀx - kᵀM⁻¹k)` with `M = I + SᵀS`, `k = Sᵀx`, `M⁻¹` extended by a
  block inverse per stored instance, O(N_i²).
- **H-PERC**: `g_i = [w_i·x >= 0]` (an untrained node says 1); the mistake rule is the paper's
  `ŷ_i != y_i` at eligible nodes with `ŷ` the rule-(4) prediction (`mistake="decoded"`); the update is
  checked weight by weight on a hand-worked example (`test_hperc_updates_by_hand`).
- **SVMs**: `g_i = [w_i·x + b_i > 0]`; a node whose training examples are all of one class (or none)
  is the constant `w = 0`, `b = ±1`.
- **AH-BAY** decodes the trained H-RLS state (training does not depend on the costs) with the
  normalised costs.
- **Order**: the incremental learners see the training documents once, in doc_id order (the order
  of the product's training drivers), without shuffling.

## Training on Spark

Every row is trained by registry name through `sparkhc.spark.pipelines.train` (`fit_model`). All
models except H-PERC with the paper's mistake rule train node `i` from the documents where `i` is
eligible and from the gold bit `y_i` only, so they train node-parallel
(`sparkhc/spark/node_parallel.py`: one Spark task per group of nodes, equal to serial training,
`tests/spark/test_node_parallel.py`); H-PERC trains by parameter mixing with one shard (= serial).
"""


def write_readme(out_dir: str | os.PathLike[str]) -> Path | None:
    """``README.md`` of the results folder, generated from every ``results_<corpus>.json`` there:
    each corpus's findings and paper rows, then notes without numbers. None when there is no
    results file."""
    out = Path(out_dir)
    found = {c: json.loads((out / f"results_{c}.json").read_text(encoding="utf-8"))
             for c in CORPORA if (out / f"results_{c}.json").is_file()}
    docs = {c: d for c, d in found.items() if "findings" in d}
    old = sorted(set(found) - set(docs))  # written by an older runner: listed, not shown
    if not docs:
        return None
    lines = [
        "# Cesa-Bianchi, Gentile, Tironi, Zaniboni (2004): Table 1 on our corpora",
        "",
        "Generated from the results files of this folder (every number below is theirs); regenerate with",
        "",
        "```",
        *(COMMAND.format(corpus=c) for c in CORPORA),
        "```",
        "",
        "| corpus | page | data | generated |",
        "| --- | --- | --- | --- |",
    ]
    for c, doc in docs.items():
        g = doc.get("generated", {})
        lines.append(f"| {c} | [table1_{c}.md](table1_{c}.md) | [results_{c}.json](results_{c}.json) | "
                     f"commit `{str(g.get('git_commit', '?'))[:12]}`, {g.get('date', '?')} |")
    for c in old:
        lines.append(f"| {c} | results written by an older runner (no findings): regenerate | | |")
    for c, doc in docs.items():
        multi = len(doc["splits"]) > 1
        lines += [
            "",
            f"## {c}: findings",
            "",
            *render_findings(doc["findings"]),
            "",
            f"Paper rows on {c} (means per test document; in parentheses the standard deviation over "
            + ("the folds" if multi else "the test documents") + "):",
            "",
            *_loss_table(doc["summary"], ROWS),
        ]
    lines += ["", README_NOTES]
    return harness.write_markdown(out / "README.md", "\n".join(lines))


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
    summary = _summary(split_results)
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
        "summary": summary,
        "findings": compute_findings(split_results, summary, corpus),
        "splits": [{k: v for k, v in r.items() if k != "_doc_losses"} for r in split_results],
        "paper": {"data": PAPER_TABLES[corpus][0],
                  "table1": {k: [list(x) for x in v] for k, v in PAPER_TABLES[corpus][1].items()}},
    }
    results["seconds"] = round(time.perf_counter() - t_start, 1)
    results["machine"] = f"{os.cpu_count()} CPU(s), {platform.machine()}, Python {sys.version.split()[0]}"
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    suffix = "_quick" if quick else ""
    harness.write_json(out / f"results_{corpus}{suffix}.json", results)
    harness.write_markdown(out / f"table1_{corpus}{suffix}.md", render_markdown(results))
    if not quick:
        write_readme(out)
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
        if not args.quick:
            write_readme(args.out)
        return 0
    try:
        run_experiment(args.data_dir, args.out, args.corpus, quick=args.quick)
    except (DataUnavailableError, InputDataError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
