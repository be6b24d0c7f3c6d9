"""Reproduce Xiao, Liu, Song (WWW 2019) Table 2 and the label-rate curves (Figs. 2-3).

Semi-supervised ("labeled") and dataless settings on 20newsgroups (bydate train/test) and
rcv1v2_subset (5-fold cross-validation: run ``r`` tests on fold ``r``), 5 runs each with seeded
random labeled / unlabeled splits of the training part; micro- and macro-F1 over all real
non-root nodes (``sparkhc.metrics.MetricCounts``: ``node_micro_F1`` / ``node_macro_F1``).

Data and features come from the product: the corpus is read by the registry's reader and
featurized on Spark (:func:`sparkhc.spark.pipelines.featurize`) per train/test round, twice with
the vocabulary fitted on the training part: raw term counts for the generative models
(``weighting="tf"``, no L2, English stop words dropped, no document-frequency cut-off) and the
product's default weighting (``log(1 + tf) * idf``, L2) of the same vocabulary for LR / SVM and
for the dataless similarities; both with the product tokenizer (lower-cased runs of >= 2 Unicode
letters). The models are made by registry name (``flat_nb`` ... ``pcem``) and fitted in this
process on the (weakly) labeled and unlabeled documents of each cell (``fit_arrays``): the
semi-supervised and dataless protocols draw their own labeled subsets, about a thousand fits per
corpus, which the product's ``sparkhc train`` (gold labels of the features) does not express.

Usage::

    sparkhc experiment xiao --corpus 20newsgroups --data-dir ../shared/data --out docs/results/xiao
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from experiments import harness
from sparkhc.batch import label_matrix
from sparkhc.config import Config
from sparkhc.models import make_model
from sparkhc.models.xiao import PathSpace, weak_labels
from sparkhc.spark import pipelines
from sparkhc.taxonomy import Taxonomy

log = logging.getLogger(__name__)

CORPORA = ("20newsgroups", "rcv1v2_subset")
#: Table 2 rows (paper order) -> model registry name (None: discriminative, scikit-learn)
TABLE_METHODS: dict[str, str | None] = {
    "LR": None,
    "SVM": None,
    "NB": "flat_nb",
    "NBMC": "nbmc",
    "TDNB": "tdnb",
    "WDNB": "wdnb",
    "PCNB": "pcnb",
    "EM": "flat_em",
    "EMMC": "emmc",
    "TDEM": "tdem",
    "WDEM": "wdem",
    "PCEM": "pcem",
}
#: ablation at 1% (Table 2 rate): the same models with the full training vocabulary instead of
#: the terms of the labeled documents (``vocabulary="all"``)
ABLATION_METHODS: dict[str, str] = {
    "NB (all terms)": "flat_nb",
    "PCNB (all terms)": "pcnb",
    "EM (all terms)": "flat_em",
    "PCEM (all terms)": "pcem",
}
#: variant at 1% (and on the curve for EM / PCEM): every document scaled to at most this many
#: tokens (``max_length``; not in the paper, see README.md)
MAX_LENGTH = 500
CAP_SUFFIX = f" (≤{MAX_LENGTH} tokens)"
CAPPED_METHODS: dict[str, str] = {
    f"{m}{CAP_SUFFIX}": str(r) for m, r in TABLE_METHODS.items() if r is not None
}
#: methods of the label-rate curves (the paper's Figs. 2-3 compare PCEM with the other EMs;
#: NB, PCNB, LR and SVM and two length-capped variants are added for reference)
CURVE_METHODS = (
    "LR", "SVM", "NB", "PCNB", "EM", "EMMC", "TDEM", "WDEM", "PCEM", f"EM{CAP_SUFFIX}", f"PCEM{CAP_SUFFIX}",
)  # fmt: skip
DEFAULT_RATES = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 0.9)
TABLE_RATE = 0.01
SETTINGS = ("labeled", "dataless")

# Xiao et al. 2019, Table 2 (micro, macro) at 1% labels, for the comparison column
PAPER_TABLE2: dict[str, dict[str, tuple[float, float, float, float]]] = {
    "20newsgroups": {
        "LR": (52.02, 42.41, 44.16, 31.51), "SVM": (48.33, 39.73, 41.70, 30.24),
        "NB": (53.39, 39.94, 47.29, 30.67), "NBMC": (46.99, 38.02, 43.24, 28.82),
        "TDNB": (55.50, 42.16, 48.06, 31.02), "WDNB": (53.66, 41.53, 47.19, 31.02),
        "PCNB": (58.33, 48.04, 52.14, 38.50), "EM": (63.21, 49.30, 55.13, 37.40),
        "EMMC": (66.56, 52.95, 59.50, 41.56), "TDEM": (62.14, 46.89, 55.62, 37.14),
        "WDEM": (62.71, 48.85, 47.19, 31.02), "PCEM": (70.73, 60.02, 63.54, 48.56),
    },
    "rcv1v2_subset": {
        "LR": (69.59, 24.43, 33.54, 9.00), "SVM": (68.78, 23.97, 34.15, 9.72),
        "NB": (70.68, 24.48, 33.29, 8.39), "NBMC": (69.84, 23.52, 28.91, 6.91),
        "TDNB": (70.37, 24.65, 33.67, 8.40), "WDNB": (70.89, 25.04, 34.24, 9.38),
        "PCNB": (73.63, 29.95, 37.06, 12.47), "EM": (75.38, 28.32, 38.05, 10.76),
        "EMMC": (74.86, 28.04, 32.79, 10.42), "TDEM": (74.48, 26.88, 40.76, 10.91),
        "WDEM": (76.35, 28.66, 34.24, 9.38), "PCEM": (77.83, 33.49, 40.96, 14.96),
    },
}  # fmt: skip


# =============================================================================================
# data
@dataclass
class Corpus:
    """One registered corpus (:mod:`sparkhc.corpus.registry`) and its evaluation rounds."""

    name: str
    data_dir: Path
    taxonomy: Taxonomy
    descriptions: dict[str, str]
    rounds: list[tuple[dict[str, Any], dict[str, Any], str]]
    meta: dict[str, Any] = field(default_factory=dict)

    def splits(self, rep: int) -> tuple[dict[str, Any], dict[str, Any], str]:
        """(train selection, test selection, name) of run ``rep``: the one split, or fold ``rep % k``."""
        return self.rounds[rep % len(self.rounds)]

    @property
    def fixed_split(self) -> bool:
        return len(self.rounds) == 1


#: the label-description file of each corpus (registered with the corpus)
DESCRIPTIONS = {"20newsgroups": "label_descriptions_song_roth2014.tsv", "rcv1v2_subset": "labels.tsv"}


def _read_tsv(path: Path, header: bool) -> list[list[str]]:
    lines = path.read_text(encoding="utf-8").splitlines()
    rows = [ln.split("\t") for ln in lines if ln.strip()]
    return rows[1:] if header else rows


def load_corpus(data_dir: str | Path, corpus: str) -> Corpus:
    """20newsgroups or rcv1v2_subset from the corpus registry: taxonomy, label descriptions, rounds."""
    from sparkhc.corpus import registry

    if corpus not in CORPORA:
        raise ValueError(f"unknown corpus {corpus!r}; known: {', '.join(CORPORA)}")
    info = registry.get_corpus(corpus)
    root = info.corpus_dir(data_dir)
    desc_file = root / DESCRIPTIONS[corpus]
    desc = {r[0]: r[1] for r in _read_tsv(desc_file, header=True)}
    rounds = []
    for rnd in info.rounds():
        tr, te = harness.round_selections(rnd)
        rounds.append((tr, te, "bydate" if te.get("split") else f"fold{te['fold']}"))
    return Corpus(corpus, root, info.load_taxonomy(root), desc, rounds, meta={"descriptions": DESCRIPTIONS[corpus]})


def node_description(tax: Taxonomy, desc: dict[str, str], c: int) -> str:
    """**(choice)** The text of node ``c`` for the dataless similarity: its own description plus
    the descriptions of all its descendants (the 20NG top nodes have only a name; RCV1 codes
    have short titles)."""
    a = tax.ancestor_matrix()
    col = a[:, c].toarray().ravel() > 0
    parts = [desc.get(tax.names[c], tax.names[c])]
    parts += [desc.get(tax.names[k], tax.names[k]) for k in np.flatnonzero(col) if k != c]
    return " ".join(parts).replace("/", " ")


# =============================================================================================
# features of one run
@dataclass
class Features:
    split_name: str
    train: np.ndarray
    test: np.ndarray
    x_train: sp.csr_matrix  # raw counts
    x_test: sp.csr_matrix
    t_train: sp.csr_matrix  # tf-idf, L2
    t_test: sp.csr_matrix
    w_gold_train: np.ndarray  # (n_train, base nodes) ancestor-closed gold
    w_weak_train: np.ndarray  # (n_train, base nodes) dataless weak labels
    gold_test: sp.csr_matrix
    vocab: int


def feature_configs(cfg: Config) -> tuple[Config, Config]:
    """The two ``[featurize]`` settings of a round: raw counts, and the product's default
    weighting over the same vocabulary (every term of the training part: no cut-off)."""
    base = replace(cfg.featurize, min_df=1, max_df=1.0, stop_words=True, mode="vocab")
    counts = replace(cfg, featurize=replace(base, weighting="tf", l2_normalize=False))
    tfidf = replace(cfg, featurize=replace(base, weighting="log_tf_idf", l2_normalize=True))
    return counts, tfidf


def _sorted_by_id(batch: Any) -> Any:
    return batch.subset(np.argsort(np.asarray(batch.doc_ids, dtype=str), kind="stable"))


def build_features(spark: Any, cfg: Config, corpus: Corpus, rep: int, work: Path) -> Features:
    """Featurize run ``rep``'s round on Spark (counts and tf-idf), read it back in this process
    (documents in ``doc_id`` order), and derive the gold and dataless weak node labels."""
    from sparkhc.text.spec import FeatureSpec

    sel_train, sel_test, name = corpus.splits(rep)
    parts: dict[str, tuple[Any, Any, FeatureSpec]] = {}
    for kind, kcfg in zip(("counts", "tfidf"), feature_configs(cfg), strict=True):
        feats = work / name / kind
        pipelines.featurize(spark, kcfg, feats, corpus=corpus.name, data_dir=str(corpus.data_dir), overwrite=True,
                            fit_exclude_fold=sel_test.get("fold"))
        parts[kind] = (_sorted_by_id(harness.local_split(feats, sel_train)),
                       _sorted_by_id(harness.local_split(feats, sel_test)), FeatureSpec.load(feats))
    tr_c, te_c, spec_c = parts["counts"]
    tr_t, te_t, spec_t = parts["tfidf"]
    if spec_c.vocabulary != spec_t.vocabulary or list(tr_c.doc_ids) != list(tr_t.doc_ids):
        raise RuntimeError(f"{corpus.name} {name}: the counts and tf-idf features differ in vocabulary or documents")
    x_train, x_test = sp.csr_matrix(tr_c.X, dtype=np.float64), sp.csr_matrix(te_c.X, dtype=np.float64)
    t_train, t_test = sp.csr_matrix(tr_t.X, dtype=np.float64), sp.csr_matrix(te_t.X, dtype=np.float64)
    base = corpus.taxonomy
    texts = [node_description(base, corpus.descriptions, c) for c in range(1, base.n_nodes)]
    off, idx, val, _ = spec_t.transform_many([spec_t.tokenize_document(t, None) for t in texts])
    t_desc = sp.csr_matrix((val, idx, off), shape=(len(texts), spec_t.n_features), dtype=np.float64)
    sim = np.zeros((len(tr_t), base.n_nodes))
    sim[:, 1:] = np.asarray((t_train @ t_desc.T).todense())
    w_weak = weak_labels(sim, base)
    w_gold = label_matrix(list(tr_c.labels), base, closed=True).toarray()
    gold_test = label_matrix(list(te_c.labels), base, closed=True)
    return Features(name, np.arange(len(tr_c)), np.arange(len(te_c)), x_train, x_test, t_train, t_test, w_gold,
                    w_weak, gold_test, int(x_train.shape[1]))


def model_taxonomy(corpus: Corpus) -> Taxonomy:
    """**(choice)** rcv1v2_subset has partial-path labels (an internal node can be the deepest
    label: 564 of 3,350 deepest labels), so every internal node gets a virtual ``/_self`` leaf
    (103 paths; label-independent, so the same in both settings). 20NG labels always end in a
    leaf: its tree is used as is (20 paths)."""
    if corpus.name == "rcv1v2_subset":
        return corpus.taxonomy.with_self_leaves()
    return corpus.taxonomy


# =============================================================================================
# one cell: fit a method on a labeled subset, score on the test part
def _node_f1(base: Taxonomy, gold: sp.csr_matrix, pred: sp.csr_matrix) -> tuple[float, float]:
    from sparkhc.metrics import MetricCounts

    mc = MetricCounts(base)
    mc.add(gold, pred)
    m = mc.compute()
    return 100.0 * float(m["node_micro_F1"]), 100.0 * float(m["node_macro_F1"])


def _discriminative(method: str, t_l: sp.csr_matrix, s_leaf: np.ndarray, t_test: sp.csr_matrix) -> np.ndarray:
    """LR / SVM (LIBLINEAR dual solvers, one-vs-rest, C = 1, no bias term as in LIBLINEAR's
    default ``-B -1``) over the padded leaves (= paths): a document with several gold leaves is
    repeated once per leaf; returns the predicted path."""
    import warnings

    from sklearn.linear_model import LogisticRegression
    from sklearn.multiclass import OneVsRestClassifier
    from sklearn.svm import LinearSVC

    rows, cols = np.nonzero(s_leaf > 0)
    classes = np.unique(cols)
    if classes.size == 1:
        return np.full(t_test.shape[0], int(classes[0]))
    x = t_l[rows]
    warnings.filterwarnings("ignore", message="The number of unique classes", category=UserWarning)
    if method == "LR":
        clf: Any = OneVsRestClassifier(
            LogisticRegression(solver="liblinear", dual=True, C=1.0, fit_intercept=False, max_iter=1000, random_state=0)
        )
    else:
        clf = LinearSVC(dual=True, C=1.0, fit_intercept=False, max_iter=5000, random_state=0)
    clf.fit(x, cols)
    return np.asarray(clf.predict(t_test), dtype=np.int64)


def run_cell(
    method: str,
    space: PathSpace,
    feats: Features,
    lab: np.ndarray,
    unl: np.ndarray,
    s_nodes: np.ndarray,
    max_iter: int,
    tol: float,
    seed: int,
) -> dict[str, Any]:
    """Fit ``method`` on the (weakly) labeled training docs ``lab`` (node scores ``s_nodes``) and
    the unlabeled ones ``unl``; return the test micro / macro F1 (%) and timings."""
    t0 = time.perf_counter()
    n_iter = 0
    hist: list[float] = []
    if method in ("LR", "SVM"):
        s_leaf = s_nodes[:, space.leaf_nodes]
        paths = _discriminative(method, feats.t_train[lab], s_leaf, feats.t_test)
    else:
        extra: dict[str, Any] = {}
        if method in ABLATION_METHODS:
            registry = ABLATION_METHODS[method]
            extra["vocabulary"] = "all"
        elif method in CAPPED_METHODS:
            registry = CAPPED_METHODS[method]
            extra["max_length"] = MAX_LENGTH
        else:
            registry = str(TABLE_METHODS[method])
        model = make_model(registry, space.taxonomy, feats.vocab, max_iter=max_iter, tol=tol, seed=seed, **extra)
        model._space = space
        model.fit_arrays(feats.x_train[lab], s_nodes, feats.x_train[unl] if unl.size else None)
        paths = model.predict_paths(feats.x_test)
        n_iter = model.n_iter_
        hist = model.history_
    pred = space.path_labels(paths)
    micro, macro = _node_f1(space.base, feats.gold_test, pred)
    return {
        "method": method,
        "micro": micro,
        "macro": macro,
        "seconds": time.perf_counter() - t0,
        "n_iter": n_iter,
        "loglik": [float(v) for v in hist],
    }


# =============================================================================================
# one run (a train/test split and one random labeled order), all rates, settings, methods
_CTX: dict[str, Any] = {}


def _run_rep(rep: int) -> list[dict[str, Any]]:
    corpus: Corpus = _CTX["corpus"]
    cfg: dict[str, Any] = _CTX["cfg"]
    t0 = time.perf_counter()
    feats = _CTX["features"][corpus.splits(rep)[2]]
    t_feat = _CTX["feature_seconds"][feats.split_name]
    space = PathSpace.build(model_taxonomy(corpus))
    s_gold = space.node_scores(feats.w_gold_train)
    s_weak = space.node_scores(feats.w_weak_train)
    n = len(feats.train)
    # one seeded random order per run: the labeled subsets of increasing rates are nested
    order = np.random.default_rng([int(cfg["seed"]), rep]).permutation(n)
    out: list[dict[str, Any]] = []
    for rate in cfg["rates"]:
        n_l = max(1, int(round(rate * n)))
        methods = (
            cfg["table_methods"] + cfg["ablation_methods"] + cfg["capped_methods"]
            if math.isclose(rate, cfg["table_rate"])
            else cfg["curve_methods"]
        )
        for setting in SETTINGS:
            lab = np.sort(order[:n_l])
            unl = np.sort(order[n_l:])
            s_all = s_gold if setting == "labeled" else s_weak
            s_lab = s_all[lab]
            if setting == "dataless":
                # a document with no weak label at any depth carries no supervision: unlabeled
                has = s_lab.sum(axis=1) > 0
                unl = np.sort(np.concatenate([unl, lab[~has]]))
                lab, s_lab = lab[has], s_lab[has]
            for method in methods:
                r = run_cell(method, space, feats, lab, unl, s_lab, cfg["max_iter"], cfg["tol"], cfg["seed"] + rep)
                r.update(
                    {"setting": setting, "rate": rate, "rep": rep, "split": feats.split_name, "n_labeled": int(lab.size),
                     "n_unlabeled": int(unl.size), "n_test": int(len(feats.test))}
                )
                out.append(r)
                log.info(
                    "%s rep %d %-8s rate %5.3f %-5s micro %.2f macro %.2f (%d it, %.1fs)",
                    corpus.name, rep, setting, rate, method, r["micro"], r["macro"], r["n_iter"], r["seconds"],
                )
    weak = _weak_quality(feats)
    out.append({"method": "_run", "rep": rep, "split": feats.split_name, "feature_seconds": t_feat,
                "seconds": time.perf_counter() - t0, "vocab": feats.vocab, "n_train": n,
                "n_test": int(len(feats.test)), "weak_labels": weak})
    return out


def _weak_quality(feats: Features) -> dict[str, float]:
    """Quality of the dataless weak node labels on the training part (vs the gold labels)."""
    w, g = feats.w_weak_train > 0, feats.w_gold_train > 0
    tp = float(np.sum(w & g))
    return {
        "precision": 100.0 * tp / max(float(w.sum()), 1.0),
        "recall": 100.0 * tp / max(float(g.sum()), 1.0),
        "docs_without_weak_label": 100.0 * float(np.mean(w.sum(axis=1) == 0)),
    }


# =============================================================================================
# driver and reports
def run_experiment(
    data_dir: str | Path,
    out_dir: str | Path,
    corpus: str,
    label_rates: Sequence[float] = DEFAULT_RATES,
    reps: int = 5,
    jobs: int = 2,
    max_iter: int = 30,
    tol: float = 1e-4,
    seed: int = 0,
    quick: bool = False,
    spark: Any = None,
    cfg: Config | None = None,
    work: str | Path | None = None,
) -> list[Path]:
    """Run every setting / rate / method / run and write the reports; returns the written files.

    Parameters
    ----------
    label_rates : fractions of the training part that are labeled; the Table 2 columns use 1%
        (always run); the curve uses all of them.
    reps : runs per cell (5 in the paper); rcv1v2_subset run ``r`` tests on fold ``r % 5``.
    jobs : worker processes (one run per task).
    quick : a smoke run: 2 runs, rates 10% (the table) and 50%, 10 EM iterations; files get a
        ``_quick`` suffix.
    spark, cfg : the session (default ``local[2]``) and configuration (default: the packaged one)
        of the featurization; ``work``: its scratch folder (default: temporary, removed).
    """
    if quick:
        label_rates, reps, max_iter = (0.1, 0.5), 2, 10
    # quick runs read a slice of a few hundred documents: 1% would leave no (weakly) labeled one
    table_rate = 0.1 if quick else TABLE_RATE
    rates = sorted({float(r) for r in label_rates} | {table_rate})
    t0 = time.perf_counter()
    c = load_corpus(data_dir, corpus)
    if spark is None:
        from sparkhc.spark.session import get_session

        spark = get_session("sparkhc-experiment-xiao", master=os.environ.get("SPARKHC_MASTER", "local[2]"))
    if cfg is None:
        from sparkhc.config import load_config

        cfg = load_config()
    run_cfg = {
        "rates": rates,
        "table_rate": table_rate,
        "table_methods": list(TABLE_METHODS),
        "curve_methods": list(CURVE_METHODS),
        "ablation_methods": list(ABLATION_METHODS),
        "capped_methods": list(CAPPED_METHODS),
        "max_length": MAX_LENGTH,
        "max_iter": int(max_iter),
        "tol": float(tol),
        "seed": int(seed),
        "reps": int(reps),
        "quick": bool(quick),
    }
    # featurize every round the runs use on Spark first (the worker processes inherit the features)
    features: dict[str, Features] = {}
    feature_seconds: dict[str, float] = {}
    scratch = Path(work) if work is not None else Path(tempfile.mkdtemp(prefix="sparkhc-xiao-"))
    try:
        for rep in range(reps):
            name = c.splits(rep)[2]
            if name not in features:
                t1 = time.perf_counter()
                features[name] = build_features(spark, cfg, c, rep, scratch)
                feature_seconds[name] = time.perf_counter() - t1
    finally:
        if work is None:
            shutil.rmtree(scratch, ignore_errors=True)
    _CTX.clear()
    _CTX.update({"corpus": c, "cfg": run_cfg, "features": features, "feature_seconds": feature_seconds})
    records: list[dict[str, Any]] = []
    if jobs > 1 and reps > 1:
        import multiprocessing as mp

        with ProcessPoolExecutor(max_workers=min(jobs, reps), mp_context=mp.get_context("fork")) as ex:
            for rs in ex.map(_run_rep, range(reps)):
                records.extend(rs)
    else:
        for rep in range(reps):
            records.extend(_run_rep(rep))
    wall = time.perf_counter() - t0
    _CTX.clear()
    return write_reports(Path(out_dir), c, run_cfg, records, wall)


def _sig_mark(p: float) -> str:
    if not np.isfinite(p):
        return ""
    return "‡" if p < 0.001 else ("†" if p < 0.05 else "")


def _scores(records: list[dict[str, Any]], setting: str, rate: float, method: str, key: str) -> np.ndarray:
    rows = sorted(
        (r for r in records if r.get("setting") == setting and math.isclose(r["rate"], rate) and r["method"] == method),
        key=lambda r: r["rep"],
    )
    return np.array([r[key] for r in rows], dtype=np.float64)


def summarize(records: list[dict[str, Any]], cfg: dict[str, Any]) -> dict[str, Any]:
    """Means, standard deviations and paired t-tests against PCEM, per setting / rate / method."""
    from scipy.stats import ttest_rel

    out: dict[str, Any] = {}
    for setting in SETTINGS:
        for rate in cfg["rates"]:
            methods = (
                cfg["table_methods"] + cfg["ablation_methods"] + cfg["capped_methods"]
                if math.isclose(rate, cfg["table_rate"])
                else cfg["curve_methods"]
            )
            for method in methods:
                cell: dict[str, Any] = {}
                for key in ("micro", "macro"):
                    v = _scores(records, setting, rate, method, key)
                    ref = _scores(records, setting, rate, "PCEM", key)
                    p = float("nan")
                    if method != "PCEM" and len(v) == len(ref) and len(v) > 1 and np.any(v != ref):
                        with np.errstate(all="ignore"):
                            p = float(ttest_rel(ref, v).pvalue)
                    cell[key] = {"mean": float(v.mean()) if v.size else float("nan"),
                                 "std": float(v.std(ddof=1)) if v.size > 1 else 0.0,
                                 "runs": v.tolist(), "p_vs_PCEM": p}
                    ref_c = _scores(records, setting, rate, f"PCEM{CAP_SUFFIX}", key)
                    if len(v) == len(ref_c) and len(v) > 1 and np.any(v != ref_c):
                        with np.errstate(all="ignore"):
                            cell[key]["p_vs_PCEM_capped"] = float(ttest_rel(ref_c, v).pvalue)
                secs = _scores(records, setting, rate, method, "seconds")
                its = _scores(records, setting, rate, method, "n_iter")
                cell["seconds"] = float(secs.mean()) if secs.size else 0.0
                cell["iterations"] = float(its.mean()) if its.size else 0.0
                out[f"{setting}|{rate:g}|{method}"] = cell
    return out


def _command(corpus: str) -> str:
    return f"sparkhc experiment xiao --corpus {corpus} --data-dir ../shared/data --out docs/results/xiao"


def _module_command(corpus: str, cfg: dict[str, Any]) -> str:
    rates = ",".join(f"{100 * r:g}" for r in cfg["rates"])
    return (
        f"python -m experiments.xiao --corpus {corpus} --data-dir ../shared/data --out docs/results/xiao "
        f"--label-rates {rates} --reps {cfg['reps']} --max-iter {cfg['max_iter']} --tol {cfg['tol']:g}"
    )


def _protocol(corpus: Corpus, runs: list[dict[str, Any]]) -> str:
    r0 = runs[0]
    if corpus.fixed_split:
        split = f"bydate split: train {r0['n_train']:,} / test {r0['n_test']:,} documents (the paper: a random 80/20 split, 15,077 / 3,769)"
    else:
        split = (f"5-fold cross-validation with folds.tsv: run r trains on the other 4 folds (~{r0['n_train']:,} documents) "
                 f"and tests on fold r (~{r0['n_test']:,}); the paper used Song & Roth's single-label RCV1 subset "
                 "(6,395 / 1,733 documents, 35 leaves, depth 3)")
    vocab = ", ".join(f"{r['vocab']:,}" for r in runs)
    weak = np.mean([[r["weak_labels"]["precision"], r["weak_labels"]["recall"], r["weak_labels"]["docs_without_weak_label"]] for r in runs], axis=0)
    return (
        f"- Protocol: {split}; {len(runs)} runs, each a seeded random labeled / unlabeled split of the training "
        f"part; mean over the runs. Significance against PCEM: paired t-test over the {len(runs)} runs "
        "(† p < 0.05, ‡ p < 0.001).\n"
        "- Features: the product's Spark featurize, vocabulary fitted on the training part of each run: raw "
        "term counts (`weighting=\"tf\"`, no L2; the product tokenizer: lower-cased runs of >= 2 Unicode letters, "
        f"English stop words removed, no document-frequency cut-off); vocabulary {vocab} terms. LR / SVM and the "
        "dataless similarities: the product's default weighting (log(1 + tf) * smooth idf, L2) of the same "
        "vocabulary.\n"
        "- Metric: micro / macro F1 (%) over all real non-root nodes of the taxonomy, ancestor-closed sets "
        "(dummy and virtual nodes removed), sparkhc.metrics node_micro_F1 / node_macro_F1.\n"
        f"- Dataless weak labels ({corpus.meta['descriptions']}): per depth, the node whose description "
        "(its own text plus its descendants') has the highest tf-idf cosine with the document; no label at a "
        f"depth where no description shares a word. On the training part, weak node labels have precision "
        f"{weak[0]:.1f}% and recall {weak[1]:.1f}% against the gold labels; {weak[2]:.1f}% of the documents get none.\n"
    )


def write_reports(
    out_dir: Path, corpus: Corpus, cfg: dict[str, Any], records: list[dict[str, Any]], wall: float
) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    name = corpus.name
    runs = sorted((r for r in records if r["method"] == "_run"), key=lambda r: r["rep"])
    cells = [r for r in records if r["method"] != "_run"]
    summ = summarize(cells, cfg)
    written: list[Path] = []

    # ---------------------------------------------------------------- results json
    res = {
        "corpus": name,
        "command": _command(name),
        "module_command": _module_command(name, cfg),
        "config": cfg,
        "wall_seconds": wall,
        "runs": runs,
        "summary": summ,
        "cells": cells,
    }
    # a smoke run (--quick) never overwrites the committed reports
    tag = f"{name}_quick" if cfg.get("quick") else name
    p = out_dir / f"results_{tag}.json"
    harness.write_json(p, res, sort_keys=True, default=float)
    written.append(p)

    # ---------------------------------------------------------------- table 2
    rate = cfg["table_rate"]
    n_lab = {s: _scores(cells, s, rate, "PCEM", "n_labeled") for s in SETTINGS}
    lines = [
        f"# Xiao et al. 2019, Table 2 layout: {name}, {100 * rate:g}% labeled",
        "",
        "```",
        _command(name),
        f"# equivalently: {_module_command(name, cfg)}",
        "```",
        "",
        f"F1 (%) over all nodes, mean of {cfg['reps']} runs; {n_lab['labeled'].mean():.0f} labeled training "
        f"documents per run (dataless: {n_lab['dataless'].mean():.0f} weakly labeled documents with at least one "
        "weak label), the rest of the training part unlabeled. † / ‡: significantly different from PCEM "
        "(paired t-test over the runs, p < 0.05 / p < 0.001). Best per column in bold.",
        "",
        "| method | labeled Micro-F1 | labeled Macro-F1 | dataless Micro-F1 | dataless Macro-F1 |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    best = {}
    for s in SETTINGS:
        for k in ("micro", "macro"):
            best[(s, k)] = max(summ[f"{s}|{rate:g}|{m}"][k]["mean"] for m in cfg["table_methods"])
    for m in cfg["table_methods"]:
        row = [m]
        for s in SETTINGS:
            for k in ("micro", "macro"):
                c = summ[f"{s}|{rate:g}|{m}"][k]
                txt = f"{_sig_mark(c['p_vs_PCEM'])}{c['mean']:.2f}"
                if math.isclose(c["mean"], best[(s, k)]):
                    txt = f"**{txt}**"
                row.append(txt)
        lines.append("| " + " | ".join(row) + " |")
    paper = PAPER_TABLE2[name]
    lines += [
        "",
        f"The paper's Table 2 ({'20NG' if name == '20newsgroups' else 'RCV1, a different subset'}), same layout, "
        "for comparison:",
        "",
        "| method | labeled Micro-F1 | labeled Macro-F1 | dataless Micro-F1 | dataless Macro-F1 |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for m in cfg["table_methods"]:
        lines.append("| " + " | ".join([m] + [f"{v:.2f}" for v in paper[m]]) + " |")
    lines += ["", "Ablation, same runs: the generative models with the full training vocabulary instead of the "
              "terms of the (weakly) labeled documents (`vocabulary=\"all\"`; the default `\"labeled\"` follows "
              "the authors' released code):", "",
              "| method | labeled Micro-F1 | labeled Macro-F1 | dataless Micro-F1 | dataless Macro-F1 |",
              "| --- | ---: | ---: | ---: | ---: |"]
    for m in cfg["ablation_methods"]:
        row = [m]
        for s in SETTINGS:
            for k in ("micro", "macro"):
                c = summ[f"{s}|{rate:g}|{m}"][k]
                row.append(f"{_sig_mark(c['p_vs_PCEM'])}{c['mean']:.2f}")
        lines.append("| " + " | ".join(row) + " |")
    lines += ["", f"Variant, same runs (not in the paper): every document's counts scaled down to at most "
              f"{cfg['max_length']} tokens (`max_length={cfg['max_length']}`), so that one very long labeled "
              "document cannot dominate the token totals of a path (see README.md); marks against PCEM of this "
              "block:", "",
              "| method | labeled Micro-F1 | labeled Macro-F1 | dataless Micro-F1 | dataless Macro-F1 |",
              "| --- | ---: | ---: | ---: | ---: |"]
    pc_cap = f"PCEM{CAP_SUFFIX}"
    for m in cfg["capped_methods"]:
        row = [m]
        for s in SETTINGS:
            for k in ("micro", "macro"):
                c = summ[f"{s}|{rate:g}|{m}"][k]
                pv = float(c.get("p_vs_PCEM_capped", float("nan"))) if m != pc_cap else float("nan")
                row.append(f"{_sig_mark(pv)}{c['mean']:.2f}")
        lines.append("| " + " | ".join(row) + " |")
    lines += ["", "Standard deviations over the runs (micro / macro):", "",
              "| method | labeled | dataless | seconds per fit (labeled / dataless) | EM iterations (labeled / dataless) |",
              "| --- | --- | --- | --- | --- |"]
    for m in cfg["table_methods"] + cfg["capped_methods"]:
        a, b = summ[f"labeled|{rate:g}|{m}"], summ[f"dataless|{rate:g}|{m}"]
        lines.append(
            f"| {m} | {a['micro']['std']:.2f} / {a['macro']['std']:.2f} | {b['micro']['std']:.2f} / {b['macro']['std']:.2f} "
            f"| {a['seconds']:.2f} / {b['seconds']:.2f} | {a['iterations']:.1f} / {b['iterations']:.1f} |"
        )
    lines += ["", "## Setup", "", _protocol(corpus, runs), _model_notes(cfg),
              f"Wall time of the whole command (all rates, both settings, {cfg['reps']} runs): {wall / 60:.1f} min.", ""]
    p = out_dir / f"table2_{tag}.md"
    harness.write_markdown(p, "\n".join(lines))
    written.append(p)

    # ---------------------------------------------------------------- curve
    lines = [
        f"# Xiao et al. 2019, label-rate curves (Figs. 2-3 layout): {name}",
        "",
        "```",
        _command(name),
        f"# equivalently: {_module_command(name, cfg)}",
        "```",
        "",
        f"Micro-F1 / Macro-F1 (%) over all nodes, mean of {cfg['reps']} runs; the labeled subsets of increasing "
        "rates are nested within a run. Plot: "
        f"`curve_{tag}.png`.",
        "",
    ]
    curve_methods = [m for m in cfg["curve_methods"]]
    for s in SETTINGS:
        lines += [f"## {s}", "", "| label rate | n labeled | " + " | ".join(curve_methods) + " |",
                  "| ---: | ---: | " + " | ".join("---:" for _ in curve_methods) + " |"]
        for r in cfg["rates"]:
            nl = _scores(cells, s, r, "PCEM", "n_labeled")
            row = [f"{100 * r:g}%", f"{nl.mean():.0f}"]
            for m in curve_methods:
                c = summ.get(f"{s}|{r:g}|{m}")
                row.append("" if c is None else f"{c['micro']['mean']:.2f} / {c['macro']['mean']:.2f}")
            lines.append("| " + " | ".join(row) + " |")
        lines.append("")
    p = out_dir / f"curve_{tag}.md"
    harness.write_markdown(p, "\n".join(lines))
    written.append(p)
    png = out_dir / f"curve_{tag}.png"
    if _plot(png, name, cfg, summ, curve_methods):
        written.append(png)
    return written


def _model_notes(cfg: dict[str, Any]) -> str:
    return (
        f"- EM: initialised with the corresponding NB on the (weakly) labeled documents; stop when the relative "
        f"change of the log likelihood is below {cfg['tol']:g} or after {cfg['max_iter']} M-steps. "
        "NBMC/EMMC: 2 latent components per leaf (Nigam et al.), seeded random start. TDEM: level by level from "
        "the root with unlabeled documents routed by the levels above. WDNB/WDEM: one NB per depth, win-driven "
        "path decoding (weights 1), hard E-step as in the authors' code. See README.md for every choice.\n"
        "- LR / SVM: scikit-learn LogisticRegression (liblinear dual, one-vs-rest) / LinearSVC (dual), C = 1, "
        "on the tf-idf features (log(1 + tf) * idf, L2) of the same labeled documents, flat over the (padded) leaves; the predicted leaf and its "
        "ancestors are the labels. Dataless: trained on the weak leaf labels.\n"
    )


def _plot(path: Path, name: str, cfg: dict[str, Any], summ: dict[str, Any], methods: list[str]) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log.warning("matplotlib is not installed: %s not written (pip install matplotlib)", path)
        return False
    fig, axes = plt.subplots(2, 2, figsize=(11, 8), sharex=True)
    rates = cfg["rates"]
    cmap = plt.get_cmap("tab20")
    colors = {m: cmap(i % 20) for i, m in enumerate(methods)}
    for col, s in enumerate(SETTINGS):
        for row, k in enumerate(("micro", "macro")):
            ax = axes[row][col]
            for m in methods:
                ys = [summ.get(f"{s}|{r:g}|{m}", {}).get(k, {}).get("mean", np.nan) for r in rates]
                style = ":" if m.endswith(CAP_SUFFIX) else ("-" if "EM" in m else "--")
                lw = 2.5 if m == "PCEM" else 1.2
                ax.plot([100 * r for r in rates], ys, style, marker="o", ms=3, lw=lw, label=m, color=colors[m])
            ax.set_xscale("log")
            ax.set_xticks([100 * r for r in rates])
            ax.set_xticklabels([f"{100 * r:g}" for r in rates])
            ax.minorticks_off()
            ax.set_title(f"{name}, {s}: {k}-F1")
            ax.set_ylabel(f"{k.capitalize()}-F1 (%)")
            ax.grid(True, alpha=0.3)
            if row == 1:
                ax.set_xlabel("label rate (%)")
    axes[0][0].legend(fontsize=8, ncol=2)
    fig.tight_layout()
    harness.save_plot(fig, path, dpi=110)
    plt.close(fig)
    return True


# =============================================================================================
def rewrite_reports(data_dir: str | Path, out_dir: str | Path, corpus: str) -> list[Path]:
    """Regenerate the Markdown tables and the plot from ``results_<corpus>.json`` (no training)."""
    res = json.loads((Path(out_dir) / f"results_{corpus}.json").read_text(encoding="utf-8"))
    c = load_corpus(data_dir, corpus)
    return write_reports(Path(out_dir), c, res["config"], res["cells"] + res["runs"], float(res["wall_seconds"]))


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m experiments.xiao",
        description="Xiao et al. 2019 Table 2 and label-rate curves (semi-supervised and dataless).",
    )
    p.add_argument("--corpus", action="append", choices=[*CORPORA, "all"], required=True,
                   help="corpus (repeatable, or 'all')")
    p.add_argument("--data-dir", default=os.environ.get("SPARKHC_DATA_DIR", "../shared/data"))
    p.add_argument("--out", default="docs/results/xiao")
    p.add_argument("--label-rates", default=",".join(f"{100 * r:g}" for r in DEFAULT_RATES),
                   help="label rates in percent, comma-separated (1%% is always run: Table 2)")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--jobs", type=int, default=2, help="worker processes (one run each)")
    p.add_argument("--max-iter", type=int, default=30)
    p.add_argument("--tol", type=float, default=1e-4)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true", help="smoke run: 2 runs, rates 10%% and 50%%")
    p.add_argument("--report-only", action="store_true",
                   help="only rewrite the tables and plot from results_<corpus>.json")
    p.add_argument("-v", "--verbose", action="count", default=0)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose > 1 else (logging.INFO if args.verbose else logging.WARNING),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    corpora = list(CORPORA) if "all" in args.corpus else list(dict.fromkeys(args.corpus))
    rates = [float(x) / 100.0 for x in str(args.label_rates).split(",") if x.strip()]
    for c in corpora:
        if args.report_only:
            for f in rewrite_reports(args.data_dir, args.out, c):
                print(f)
            continue
        files = run_experiment(
            args.data_dir, args.out, c, label_rates=rates, reps=args.reps, jobs=args.jobs,
            max_iter=args.max_iter, tol=args.tol, seed=args.seed, quick=args.quick,
        )
        for f in files:
            print(f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
