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
letters). The models are made by registry name (``flat_nb`` ... ``pcem``) and fitted through the product's
Spark training path for many small fits, :func:`sparkhc.spark.training.fit_subsets`: one Spark
task per (run, rate, setting, method), each calling the model's own ``fit`` on the training
documents with the labels outside the cell's labeled subset hidden (dataless: the weak labels as
node scores); about 1,300 fits per corpus. ``max_length`` (not in the paper) is an extension
chosen on a validation slice of the training part. For 20newsgroups the runner also writes the
PCEM collapse investigation (``investigation_20newsgroups.md``).

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
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from experiments import harness
from experiments.significance import VERDICT_RULE
from experiments.significance import verdict as rule
from sparkhc.batch import SparseBatch, label_matrix
from sparkhc.config import Config
from sparkhc.models import make_model
from sparkhc.models import xiao as xiao_model
from sparkhc.models.xiao import PathSpace, weak_labels
from sparkhc.spark import pipelines
from sparkhc.spark.training import SubsetFit, fit_subsets
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
#: extension at 1% (not in the paper): every document's counts scaled down to at most
#: ``max_length`` tokens (``max_length``), the value chosen per run, method and setting on a
#: validation slice carved out of the training part (never on the test part)
MAX_LENGTH_GRID: tuple[int | None, ...] = (None, 200, 500, 1000)
VALIDATION_FRACTION = 0.1
SEL_SUFFIX = " (max_length on validation)"
SELECTED_METHODS: dict[str, str] = {
    f"{m}{SEL_SUFFIX}": str(r) for m, r in TABLE_METHODS.items() if r is not None
}
#: methods of the label-rate curves (the paper's Figs. 2-3 compare PCEM with the other EMs;
#: NB, PCNB, LR and SVM are added for reference)
CURVE_METHODS = ("LR", "SVM", "NB", "PCNB", "EM", "EMMC", "TDEM", "WDEM", "PCEM")
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
    doc_ids: np.ndarray  # training documents
    labels: list[list[str]]  # gold labels of the training documents
    test_labels: list[list[str]]


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
                    w_weak, gold_test, int(x_train.shape[1]), np.asarray(tr_c.doc_ids), list(tr_c.labels),
                    list(te_c.labels))


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


def _model_spec(method: str) -> tuple[str, dict[str, Any]]:
    """(registry name, extra model parameters) of a generative method of the tables."""
    if method in ABLATION_METHODS:
        return ABLATION_METHODS[method], {"vocabulary": "all"}
    if method in SELECTED_METHODS:
        return SELECTED_METHODS[method], {}
    return str(TABLE_METHODS[method]), {}


@dataclass
class Cell:
    """One fit of the experiment: a method on the (weakly) labeled rows ``lab`` of the training
    part (``unl``: the unlabeled ones; ``s_lab``: the node scores of ``lab``), scored on
    ``target`` ("test" or "validation": the validation rows ``val`` of the training part)."""

    rep: int
    rate: float
    setting: str
    method: str
    lab: np.ndarray
    unl: np.ndarray
    s_lab: np.ndarray
    target: str = "test"
    max_length: int | None = None
    val: np.ndarray | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def meta(self) -> dict[str, Any]:
        out = {"setting": self.setting, "rate": self.rate, "rep": self.rep, "method": self.method,
               "n_labeled": int(self.lab.size), "n_unlabeled": int(self.unl.size)}
        if self.target != "test" or self.method in SELECTED_METHODS:
            out["max_length"] = self.max_length
        return out


def subset_fit(cell: Cell, space: PathSpace, vocab: int, n_rows: int, cfg: dict[str, Any], key: Any) -> SubsetFit:
    """The product fit of a generative cell (:func:`sparkhc.spark.training.fit_subsets`): the
    model by registry name, fitted by its own ``fit`` on the training batch with the labels of
    ``cell.lab`` (gold: the batch's labels; dataless: the weak node scores) and the documents
    ``cell.unl`` unlabeled; the validation rows are left out of a validation fit."""
    registry, extra = _model_spec(cell.method)
    extra = {**extra, **cell.extra}
    if cell.max_length is not None:
        extra["max_length"] = cell.max_length
    params = {"max_iter": cfg["max_iter"], "tol": cfg["tol"], "seed": cfg["seed"] + cell.rep, **extra}
    model = make_model(registry, space.taxonomy, vocab, **params)
    model._space = space  # type: ignore[attr-defined]
    rows = np.sort(np.concatenate([cell.lab, cell.unl]))
    return SubsetFit(key, model, labeled=cell.lab, rows=None if rows.size == n_rows else rows,
                     node_scores=cell.s_lab if cell.setting == "dataless" else None)


def run_cells(
    spark: Any, feats: Features, space: PathSpace, cells: list[Cell], cfg: dict[str, Any]
) -> list[dict[str, Any]]:
    """Score every cell: the generative ones fitted as Spark tasks through the product
    (:func:`~sparkhc.spark.training.fit_subsets`, one task per cell, each the model's own ``fit``),
    LR / SVM (scikit-learn, not product models) in this process."""
    train = SparseBatch(feats.x_train, feats.doc_ids, feats.labels, counts=feats.x_train)
    test = SparseBatch(feats.x_test, np.arange(feats.x_test.shape[0]).astype(str), None, counts=feats.x_test)
    leaf_path = {int(leaf): p for p, leaf in enumerate(space.path_leaf.tolist())}
    out: list[dict[str, Any]] = []
    for target, evaluate in (("test", test), ("validation", train)):
        todo = [(i, c) for i, c in enumerate(cells) if c.target == target and c.method not in ("LR", "SVM")]
        fits = [subset_fit(c, space, feats.vocab, len(train), cfg, i) for i, c in todo]
        for (_i, c), res in zip(todo, fit_subsets(spark, train, fits, evaluate=evaluate), strict=True):
            paths = np.array([leaf_path[int(d[0])] for d in res.decoded()], dtype=np.int64)
            m: Any = res.model
            out.append(_score(c, space, feats, paths, res.seconds + res.decode_seconds, m.n_iter_, m.history_))
    for c in cells:
        if c.method in ("LR", "SVM"):
            t0 = time.perf_counter()
            paths = _discriminative(c.method, feats.t_train[c.lab], c.s_lab[:, space.leaf_nodes], feats.t_test)
            out.append(_score(c, space, feats, paths, time.perf_counter() - t0, 0, []))
    return out


def _score(cell: Cell, space: PathSpace, feats: Features, paths: np.ndarray, seconds: float, n_iter: int,
           hist: list[float]) -> dict[str, Any]:
    if cell.target == "test":
        gold = feats.gold_test
    else:
        assert cell.val is not None
        paths = paths[cell.val]
        gold = sp.csr_matrix(feats.w_gold_train[cell.val])
    micro, macro = _node_f1(space.base, gold, space.path_labels(paths))
    r = {**cell.meta(), "micro": micro, "macro": macro, "seconds": seconds, "n_iter": int(n_iter),
         "loglik": [float(v) for v in hist], "split": feats.split_name, "target": cell.target,
         "n_test": int(gold.shape[0])}
    if cell.target == "test":
        r["path_counts"] = np.bincount(paths, minlength=space.n_paths).tolist()
    return r


# =============================================================================================
# one run (a train/test split and one random labeled order): the cells of all rates, settings, methods
def run_order(cfg: dict[str, Any], rep: int, n: int) -> np.ndarray:
    """The seeded random order of the training documents of run ``rep``: the labeled subsets of
    increasing rates are its prefixes (nested), the validation slice its tail."""
    return np.random.default_rng([int(cfg["seed"]), rep]).permutation(n)


def labeled_split(
    order: np.ndarray, n_l: int, s_all: np.ndarray, setting: str, exclude: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(labeled rows, unlabeled rows, node scores of the labeled rows): the first ``n_l`` of
    ``order`` are labeled, the others (but ``exclude``) unlabeled; dataless: a document with no
    weak label at any depth carries no supervision and is unlabeled."""
    lab = np.sort(order[:n_l])
    rest = order[n_l:] if exclude is None else np.setdiff1d(order[n_l:], exclude)
    unl = np.sort(rest)
    s_lab = s_all[lab]
    if setting == "dataless":
        has = s_lab.sum(axis=1) > 0
        unl = np.sort(np.concatenate([unl, lab[~has]]))
        lab, s_lab = lab[has], s_lab[has]
    return lab, unl, s_lab


def plan_rep(cfg: dict[str, Any], rep: int, space: PathSpace, feats: Features) -> list[Cell]:
    """The test cells of run ``rep`` and the validation fits of the ``max_length`` selection."""
    s_gold = space.node_scores(feats.w_gold_train)
    s_weak = space.node_scores(feats.w_weak_train)
    n = len(feats.train)
    order = run_order(cfg, rep, n)
    n_val = max(1, int(round(VALIDATION_FRACTION * n)))
    val = np.sort(order[n - n_val:])
    cells: list[Cell] = []
    for rate in cfg["rates"]:
        n_l = max(1, int(round(rate * n)))
        table = math.isclose(rate, cfg["table_rate"])
        methods = cfg["table_methods"] + cfg["ablation_methods"] if table else cfg["curve_methods"]
        for setting in SETTINGS:
            s_all = s_gold if setting == "labeled" else s_weak
            lab, unl, s_lab = labeled_split(order, n_l, s_all, setting)
            cells += [Cell(rep, rate, setting, m, lab, unl, s_lab) for m in methods]
            if not table:
                continue
            # the extension's selection: the same labeled documents, the validation slice held out
            if n_l + n_val > n:
                raise ValueError(f"rate {rate}: the labeled documents overlap the validation slice")
            v_lab, v_unl, v_s = labeled_split(order, n_l, s_all, setting, exclude=val)
            for m in cfg["selected_methods"]:
                cells += [Cell(rep, rate, setting, m, v_lab, v_unl, v_s, "validation", ml, val)
                          for ml in cfg["max_length_grid"]]
    return cells


def select_max_length(records: list[dict[str, Any]]) -> dict[tuple[int, float, str, str], int | None]:
    """Per (run, rate, setting, method): the ``max_length`` of the best validation micro-F1 (ties:
    the first of the grid, None = the paper's raw counts first)."""
    best: dict[tuple[int, float, str, str], tuple[float, int | None]] = {}
    for r in records:
        if r["target"] != "validation":
            continue
        k = (r["rep"], r["rate"], r["setting"], r["method"])
        if k not in best or r["micro"] > best[k][0]:
            best[k] = (r["micro"], r["max_length"])
    return {k: v[1] for k, v in best.items()}


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
# the PCEM collapse at 1% on 20newsgroups (issue 18): what moves it
#: PCEM variants of the investigation: name -> extra model parameters
INVESTIGATION_VARIANTS: dict[str, dict[str, Any]] = {
    "PCEM": {},
    "PCEM, smoothing 0.1": {"smoothing": 0.1},
    "PCEM, smoothing 0.01": {"smoothing": 0.01},
    "PCEM, max_length 500": {"max_length": 500},
}
EXTRA_DRAWS = 20
COLLAPSE_POINTS = 5.0


def _doc_lengths(x: sp.csr_matrix) -> np.ndarray:
    return np.asarray(x.sum(axis=1)).ravel()


def _draw_facts(space: PathSpace, x: sp.csr_matrix, s_gold: np.ndarray, lab: np.ndarray) -> dict[str, Any]:
    """Class coverage and document lengths of a labeled draw."""
    lengths = _doc_lengths(x[lab])
    per_path = space.path_scores(s_gold[lab]) > 0
    counts = per_path.sum(axis=0)
    longest = int(lab[int(np.argmax(lengths))])
    scores = space.path_scores(s_gold[lab])
    leaf = int(np.argmax(scores[int(np.argmax(lengths))]))
    # token totals N_p of the paths in PCNB's first M-step (path scores as event counts)
    tokens = scores.T @ lengths
    heavy = int(np.argmax(tokens))
    return {"n_labeled": int(lab.size), "paths_covered": int((counts > 0).sum()), "paths": int(space.n_paths),
            "min_per_path": int(counts.min()), "longest_tokens": float(lengths.max()),
            "median_tokens": float(np.median(lengths)), "longest_row": longest,
            "longest_class": space.names[int(space.path_leaf[leaf])],
            "longest_group": space.names[int(space.paths[leaf, 0])],
            "path_tokens_max_over_median": float(tokens.max() / max(float(np.median(tokens)), 1e-300)),
            "heaviest_path": space.names[int(space.path_leaf[heavy])]}


def _flat_init_pcem(space: PathSpace, x_l: sp.csr_matrix, s_l: np.ndarray, x_u: sp.csr_matrix, x_test: sp.csr_matrix,
                    vocab: int, cfg: dict[str, Any], seed: int) -> tuple[np.ndarray, int]:
    """PCEM whose first E-step is flat NB's (posteriors over the leaves = paths) instead of
    PCNB's; then PCEM's own EM. A diagnostic, in this process: the models' steps, not a product
    option. Returns the test paths and the EM iterations."""
    flat: Any = make_model("flat_nb", space.taxonomy, vocab, seed=seed)
    flat._space = space
    flat.fit_arrays(x_l, s_l)
    q, _ = flat.posteriors(x_u, flat._params())
    pc: Any = make_model("pcem", space.taxonomy, vocab, max_iter=cfg["max_iter"], tol=cfg["tol"], seed=seed)
    pc._space = space
    ev = pc.event_weights(s_l)
    st_l = pc.sufficient_statistics(x_l, ev)
    st_u = {k: v for k, v in xiao_model.sufficient_statistics(x_u, q).items()}
    params = pc.estimate(xiao_model.add_statistics(st_l, st_u))
    params, _stats, hist = pc.em_loop(params, st_l, lambda p: pc.e_step_labeled(x_l, ev, p, st_l),
                                      lambda p: pc.e_step(x_u, p))
    return pc.component_paths(x_test, params), max(len(hist) - 1, 0)


def investigate_pcem(spark: Any, cfg: dict[str, Any], space: PathSpace, feats: Features, reps: int,
                     extra_draws: int = EXTRA_DRAWS) -> dict[str, Any]:
    """The PCEM collapse at the table rate on 20newsgroups, isolated: per run, PCNB (PCEM's
    initial E-step), PCEM, flat EM; PCEM with a flat-NB initial E-step, with smaller smoothing,
    with documents scaled to 500 tokens, without the longest labeled document; the class coverage
    and document lengths of each labeled draw; the same on further draws; and the paper's random
    80/20 split of all documents instead of bydate."""
    t0 = time.perf_counter()
    rate = cfg["table_rate"]
    n = len(feats.train)
    n_l = max(1, int(round(rate * n)))
    s_gold = space.node_scores(feats.w_gold_train)
    train = SparseBatch(feats.x_train, feats.doc_ids, feats.labels, counts=feats.x_train)
    test = SparseBatch(feats.x_test, np.arange(feats.x_test.shape[0]).astype(str), None, counts=feats.x_test)

    draws: list[dict[str, Any]] = []
    cells: list[Cell] = []
    for d in range(reps + extra_draws):
        order = run_order(cfg, d if d < reps else 1000 + d, n)
        lab, unl, s_lab = labeled_split(order, n_l, s_gold, "labeled")
        facts = _draw_facts(space, feats.x_train, s_gold, lab)
        facts["draw"] = d
        facts["run"] = d < reps
        draws.append(facts)
        methods = (["PCNB", "EM"] + list(INVESTIGATION_VARIANTS)) if d < reps else ["EM", "PCEM", "PCEM, max_length 500"]
        for m in methods:
            base_m, extra = ("PCEM", INVESTIGATION_VARIANTS[m]) if m in INVESTIGATION_VARIANTS else (m, {})
            cells.append(Cell(d, rate, "labeled", base_m, lab, unl, s_lab, extra={**extra, "_name": m}))
        # without the longest labeled document (it joins the unlabeled ones)
        keep = lab != facts["longest_row"]
        for m in (["PCEM", "EM"] if d < reps else ["PCEM"]):
            cells.append(Cell(d, rate, "labeled", m, lab[keep], np.sort(np.append(unl, facts["longest_row"])),
                              s_lab[keep], extra={"_name": f"{m}, longest labeled document unlabeled"}))
    results = _run_named(spark, train, test, feats.gold_test, space, feats.vocab, cells, cfg)
    for d in range(reps):
        lab, unl, s_lab = labeled_split(run_order(cfg, d, n), n_l, s_gold, "labeled")
        x_l, x_u = feats.x_train[lab], feats.x_train[unl]
        t1 = time.perf_counter()
        paths, it = _flat_init_pcem(space, x_l, s_lab, x_u, feats.x_test, feats.vocab, cfg, cfg["seed"] + d)
        micro, macro = _node_f1(space.base, feats.gold_test, space.path_labels(paths))
        results.append({"draw": d, "name": "PCEM, flat-NB initial E-step", "micro": micro, "macro": macro,
                        "n_iter": it, "seconds": time.perf_counter() - t1, "top_share": _top_shares(space, paths)})

    # the paper's protocol: a random 80/20 split of all documents, 1% of the training part labeled
    x_all = sp.vstack([feats.x_train, feats.x_test], format="csr")
    labels_all = feats.labels + feats.test_labels
    gold_all = sp.vstack([sp.csr_matrix(feats.w_gold_train), feats.gold_test], format="csr")
    s_all = space.node_scores(gold_all.toarray())
    every = SparseBatch(x_all, np.arange(x_all.shape[0]).astype(str), labels_all, counts=x_all)
    random_runs: list[dict[str, Any]] = []
    split_cells: list[Cell] = []
    n_all = x_all.shape[0]
    n_tr = int(round(0.8 * n_all))
    for d in range(reps):
        perm = np.random.default_rng([int(cfg["seed"]), 8020, d]).permutation(n_all)
        tr, te = np.sort(perm[:n_tr]), np.sort(perm[n_tr:])
        order = tr[np.random.default_rng([int(cfg["seed"]), d]).permutation(tr.size)]
        n_l80 = max(1, int(round(rate * tr.size)))
        lab, unl, s_lab = labeled_split(order, n_l80, s_all, "labeled")
        facts = _draw_facts(space, x_all, s_all, lab)
        facts.update({"draw": d, "n_train": int(tr.size), "n_test": int(te.size)})
        random_runs.append(facts)
        for m in ("NB", "PCNB", "EM", "PCEM", "PCEM, max_length 500"):
            base_m, extra = ("PCEM", INVESTIGATION_VARIANTS[m]) if m in INVESTIGATION_VARIANTS else (m, {})
            split_cells.append(Cell(d, rate, "labeled", base_m, lab, unl, s_lab, val=te,
                                    extra={**extra, "_name": m}))
    split_results = _run_named(spark, every, every, gold_all, space, int(x_all.shape[1]), split_cells, cfg)
    return {"draws": draws, "results": results, "random_split": {"runs": random_runs, "results": split_results},
            "collapse_points": COLLAPSE_POINTS, "n_labeled": n_l, "seconds": time.perf_counter() - t0}


def _top_shares(space: PathSpace, paths: np.ndarray) -> dict[str, float]:
    """Share (%) of the documents decoded into each top-level node."""
    top = space.paths[:, 0]
    names = [space.names[int(t)] for t in top[paths]]
    u, c = np.unique(names, return_counts=True)
    return {str(k): 100.0 * float(v) / max(len(paths), 1) for k, v in zip(u, c, strict=True)}


def _run_named(spark: Any, train: SparseBatch, evaluate: SparseBatch, gold: sp.csr_matrix, space: PathSpace,
               vocab: int, cells: list[Cell], cfg: dict[str, Any],
               also: dict[str, np.ndarray] | None = None) -> list[dict[str, Any]]:
    """Fit the investigation cells through the product (``fit_subsets``), score them on ``gold``
    (rows ``cell.val`` of the evaluation batch when given, else all): micro / macro F1, the
    micro-F1 per depth and the top-level shares; ``also``: name -> rows of the evaluation batch on
    which every cell is scored once more (``micro@name``). A cell's ``extra["_name"]`` names it,
    ``extra["_draw"]`` (default ``cell.rep``) numbers its draw."""
    leaf_path = {int(leaf): p for p, leaf in enumerate(space.path_leaf.tolist())}
    named = []
    for i, c in enumerate(cells):
        extra = {k: v for k, v in c.extra.items() if not k.startswith("_")}
        named.append(subset_fit(replace(c, extra=extra), space, vocab, len(train), cfg, i))
    out = []
    for c, res in zip(cells, fit_subsets(spark, train, named, evaluate=evaluate), strict=True):
        all_paths = np.array([leaf_path[int(d[0])] for d in res.decoded()], dtype=np.int64)
        paths, g = all_paths, gold
        if c.val is not None:
            paths, g = all_paths[c.val], gold[c.val]
        pred = space.path_labels(paths)
        micro, macro = _node_f1(space.base, g, pred)
        m: Any = res.model
        r = {"draw": int(c.extra.get("_draw", c.rep)), "name": c.extra["_name"], "micro": micro, "macro": macro,
             "n_iter": int(m.n_iter_), "seconds": res.seconds, "top_share": _top_shares(space, paths),
             "depth_micro": _depth_micro(space.base, g, pred)}
        for k, rows in (also or {}).items():
            r[f"micro@{k}"] = _node_f1(space.base, gold[rows], space.path_labels(all_paths[rows]))[0]
        out.append(r)
    return out


def _depth_micro(base: Taxonomy, gold: sp.csr_matrix, pred: sp.csr_matrix) -> list[float]:
    """Micro-F1 (%) of the nodes of each depth 1 .. max depth (ancestor-closed label sets)."""
    g, p = sp.csr_matrix(gold, dtype=np.float64), sp.csr_matrix(pred, dtype=np.float64)
    out = []
    for k in range(1, base.max_depth + 1):
        cols = np.flatnonzero(np.asarray(base.depth) == k)
        gk, pk = g[:, cols], p[:, cols]
        tp = float(gk.multiply(pk).sum())
        den = float(gk.sum() + pk.sum())
        out.append(100.0 * 2.0 * tp / den if den > 0 else float("nan"))
    return out


def _gold_paths(space: PathSpace, gold: sp.csr_matrix) -> np.ndarray:
    """The path of each single-path gold label set (20newsgroups: one leaf per document)."""
    s = space.path_scores(space.node_scores(gold.toarray()))
    return np.argmax(s, axis=1)


def _res(inv: dict[str, Any], name: str, draw: int, key: str = "micro") -> float:
    for r in inv["results"]:
        if r["name"] == name and r["draw"] == draw:
            return float(r[key])
    return float("nan")


def investigation_page(name: str, cfg: dict[str, Any], summ: dict[str, Any], inv: dict[str, Any]) -> str:
    """The PCEM collapse investigation page (figures from ``inv``, conclusions computed from them)."""
    from scipy.stats import spearmanr, ttest_rel

    rate = cfg["table_rate"]
    k = int(sum(1 for d in inv["draws"] if d["run"]))
    cp = float(inv["collapse_points"])
    runs = list(range(k))
    pcem = np.array([_res(inv, "PCEM", d) for d in runs])
    em = np.array([_res(inv, "EM", d) for d in runs])
    collapsed = [d for d in runs if pcem[d] < em[d] - cp]
    others = [d for d in runs if d not in collapsed]
    variants = ["PCNB", "PCEM, flat-NB initial E-step", "PCEM, smoothing 0.1", "PCEM, smoothing 0.01",
                "PCEM, max_length 500", "PCEM, longest labeled document unlabeled",
                "EM, longest labeled document unlabeled"]
    lines = [
        f"# Why PCEM collapses in some runs: {name}, {100 * rate:g}% labeled (issue 18)",
        "",
        "```",
        _command(name),
        "```",
        "",
        f"The paper-faithful PCEM (raw counts, +1 smoothing, PCNB initialisation) of the {k} runs of "
        f"`table2_{name}.md` ({inv['n_labeled']} labeled documents each, bydate split) against flat EM. A run "
        f"*collapses* when PCEM is more than {cp:g} micro-F1 points below EM. Every fit below goes through the "
        "product (`sparkhc.spark.training.fit_subsets`), except the flat-NB initial E-step (the models' own steps "
        "in one process: not a product option).",
        "",
        "## The runs",
        "",
        "| run | paths with a labeled doc | fewest labeled docs of a path | longest labeled doc (tokens, class) | "
        "median tokens | EM | PCEM | " + " | ".join(variants) + " |",
        "| ---: | ---: | ---: | --- | ---: | ---: | ---: | " + " | ".join("---:" for _ in variants) + " |",
    ]
    for d in runs:
        f = inv["draws"][d]
        lines.append(
            f"| {d}{' (collapses)' if d in collapsed else ''} | {f['paths_covered']} / {f['paths']} | "
            f"{f['min_per_path']} | {f['longest_tokens']:,.0f} ({f['longest_class']}) | {f['median_tokens']:.0f} | "
            f"{em[d]:.2f} | {pcem[d]:.2f} | " + " | ".join(f"{_res(inv, v, d):.2f}" for v in variants) + " |"
        )
    mean_row = [f"{np.nanmean([_res(inv, v, d) for d in runs]):.2f}" for v in variants]
    lines.append(f"| mean | | | | | {em.mean():.2f} | {pcem.mean():.2f} | " + " | ".join(mean_row) + " |")
    gold = inv.get("gold_top_share", {})
    lines += ["", "Share (%) of the test documents decoded into each top-level group (gold: the test labels):", "",
              "| run | model | " + " | ".join(sorted(gold)) + " |",
              "| --- | --- | " + " | ".join("---:" for _ in gold) + " |",
              "| | gold | " + " | ".join(f"{gold[g]:.1f}" for g in sorted(gold)) + " |"]
    for d in runs:
        for v in ("PCNB", "PCEM", "EM", "PCEM, max_length 500", "PCEM, longest labeled document unlabeled"):
            sh: dict[str, float] = next((r["top_share"] for r in inv["results"] if r["name"] == v and r["draw"] == d), {})
            lines.append(f"| {d} | {v} | " + " | ".join(f"{sh.get(g, 0.0):.1f}" for g in sorted(gold)) + " |")
    lines += ["", "## What moved the result and what did not", ""]
    if not collapsed:
        lines.append(f"No run collapses (PCEM below EM by more than {cp:g} points) in these {k} runs.")
    else:
        lines.append(f"Collapsing run(s): {', '.join(map(str, collapsed))} (PCEM {', '.join(f'{pcem[d]:.2f}' for d in collapsed)} "
                     f"vs EM {', '.join(f'{em[d]:.2f}' for d in collapsed)}).")
        for d in collapsed:
            shares: dict[str, dict[str, float]] = {v: next((r["top_share"] for r in inv["results"] if r["name"] == v and r["draw"] == d), {})
                  for v in ("PCEM", "PCNB", "EM")}
            g = max(gold, key=lambda x: gold[x] - shares["PCEM"].get(x, 0.0)) if gold else "-"
            f = inv["draws"][d]
            lines.append("")
            lines.append(
                f"In run {d} PCEM decodes {shares['PCEM'].get(g, 0.0):.1f}% of the test documents into `{g}` (gold "
                f"{gold.get(g, 0.0):.1f}%); its start PCNB already {shares['PCNB'].get(g, 0.0):.1f}%, flat EM "
                f"{shares['EM'].get(g, 0.0):.1f}%. The run's longest labeled document ({f['longest_tokens']:,.0f} tokens, "
                f"median {f['median_tokens']:.0f}) is in `{f['longest_class']}`; the heaviest path in PCNB's M-step "
                f"is `{f['heaviest_path']}` with {f['path_tokens_max_over_median']:.1f} times the median path's "
                "token total (a labeled document counts on every path sharing a node with its label, so a long "
                "document inflates the totals N_p of its whole group, and every word those paths have not seen gets "
                "probability 1/(|V| + N_p)).")
        lines += ["", "Mean micro-F1 change against PCEM:", "",
                  "| factor varied | variant | change on the collapsing run(s) | change on the other runs | moved? |",
                  "| --- | --- | ---: | ---: | --- |"]
        factors = {"initial E-step": ["PCNB", "PCEM, flat-NB initial E-step"],
                   "smoothing": ["PCEM, smoothing 0.1", "PCEM, smoothing 0.01"],
                   "document length": ["PCEM, max_length 500", "PCEM, longest labeled document unlabeled"]}
        for fac, vs in factors.items():
            for v in vs:
                dc = np.mean([_res(inv, v, d) - pcem[d] for d in collapsed])
                do = np.mean([_res(inv, v, d) - pcem[d] for d in others]) if others else float("nan")
                recovered = all(_res(inv, v, d) >= em[d] - cp for d in collapsed)
                if v == "PCNB":
                    verdict = ("PCEM's start (PCNB, no EM iteration) was better: the EM iterations lower it"
                               if dc > 0 else "PCEM's start (PCNB) is already as low: the initial estimate")
                else:
                    verdict = "yes: the collapse is gone" if recovered else ("no" if abs(dc) < cp else "partly")
                lines.append(f"| {fac} | {v} | {dc:+.2f} | {do:+.2f} | {verdict} |")
    # further draws
    draws = inv["draws"]
    diff = np.array([_res(inv, "PCEM", f["draw"]) - _res(inv, "EM", f["draw"]) for f in draws])
    longest = np.array([f["longest_tokens"] for f in draws])
    cover = np.array([f["paths_covered"] for f in draws])
    fewest = np.array([f["min_per_path"] for f in draws])
    ml = np.array([_res(inv, "PCEM, max_length 500", f["draw"]) - _res(inv, "EM", f["draw"]) for f in draws])
    nolong = np.array([_res(inv, "PCEM, longest labeled document unlabeled", f["draw"]) - _res(inv, "EM", f["draw"])
                       for f in draws])
    col = diff < -cp
    lines += ["", f"## Which labeled documents were drawn: {len(draws)} draws ({k} runs + {len(draws) - k} more)", "",
              f"The same bydate split, {inv['n_labeled']} labeled documents per draw (seeded permutations). PCEM − EM "
              "in micro-F1 points:", "",
              "| draw | paths with a labeled doc | fewest per path | longest labeled doc (tokens, class) | heaviest path "
              "(its token total N_p / the median path's) | PCEM | EM | PCEM − EM | PCEM, max_length 500 − EM | "
              "PCEM, longest doc unlabeled − EM |",
              "| ---: | ---: | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for i, f in enumerate(draws):
        lines.append(f"| {f['draw']}{' (run)' if f['run'] else ''} | {f['paths_covered']} | {f['min_per_path']} | "
                     f"{f['longest_tokens']:,.0f} ({f['longest_class']}) | {f['heaviest_path']} "
                     f"({f['path_tokens_max_over_median']:.1f}x) | {_res(inv, 'PCEM', f['draw']):.2f} | "
                     f"{_res(inv, 'EM', f['draw']):.2f} | {diff[i]:+.2f}{' (collapse)' if col[i] else ''} | "
                     f"{ml[i]:+.2f} | {nolong[i]:+.2f} |")

    def rho(a: np.ndarray) -> str:
        if np.all(a == a[0]):
            return "constant"
        r = spearmanr(a, diff)
        return f"{float(r.statistic):+.2f} (p = {float(r.pvalue):.3g})"

    ratio = np.array([f["path_tokens_max_over_median"] for f in draws])
    groups_c = sorted({f["longest_group"] for f, c in zip(draws, col, strict=True) if c})
    same_group = [f for f in draws if f["longest_group"] in groups_c]
    n_same_c = sum(1 for f, c in zip(draws, col, strict=True) if c and f["longest_group"] in groups_c)
    lines += ["", f"Over the {len(draws)} draws: {int(col.sum())} collapse(s). The longest labeled document of "
              f"the collapsing draws is in the group(s) {', '.join(groups_c) or '-'}; {n_same_c} of the "
              f"{len(same_group)} draws whose longest labeled document is in these groups collapse, "
              f"{int(col.sum()) - n_same_c} of the {len(draws) - len(same_group)} others. PCEM − EM has Spearman "
              f"correlation {rho(ratio)} with the heaviest path's token total over the median path's (the length "
              f"effect through the path scores), {rho(longest)} with the longest labeled document's length, {rho(cover)} with the number of paths "
              f"that have a labeled document and {rho(fewest)} with the fewest labeled documents of a path. With "
              f"`max_length` 500: {int((ml < -cp).sum())} collapse(s), PCEM − EM {ml.mean():+.2f} on average (raw: "
              f"{diff.mean():+.2f}); with the longest labeled document moved to the unlabeled part: "
              f"{int((nolong < -cp).sum())} collapse(s), {nolong.mean():+.2f}.", ""]
    # random split
    rs = inv["random_split"]
    rr = rs["runs"]
    names = ["NB", "PCNB", "EM", "PCEM", "PCEM, max_length 500"]

    def split_res(nm: str, d: int) -> float:
        return next((float(r["micro"]) for r in rs["results"] if r["name"] == nm and r["draw"] == d), float("nan"))

    lines += ["## The paper's random 80/20 split", "",
              f"All {rr[0]['n_train'] + rr[0]['n_test']:,} documents split at random 80/20 per run "
              f"({rr[0]['n_train']:,} / {rr[0]['n_test']:,}; the paper: 15,077 / 3,769), {rr[0]['n_labeled']} labeled "
              f"({100 * rate:g}% of the training part; the paper at 1%: 151). Features: the bydate featurization (vocabulary of the "
              "bydate training part; the models use only the labeled documents' terms). Micro-F1:", "",
              "| run | paths with a labeled doc | longest labeled doc (tokens, class) | " + " | ".join(names) + " |",
              "| ---: | ---: | --- | " + " | ".join("---:" for _ in names) + " |"]
    for f in rr:
        lines.append(f"| {f['draw']} | {f['paths_covered']} | {f['longest_tokens']:,.0f} ({f['longest_class']}) | "
                     + " | ".join(f"{split_res(nm, f['draw']):.2f}" for nm in names) + " |")
    means = {nm: np.array([split_res(nm, f["draw"]) for f in rr]) for nm in names}
    lines.append("| mean | | | " + " | ".join(f"{means[nm].mean():.2f}" for nm in names) + " |")
    d8020 = means["PCEM"] - means["EM"]
    p = float(ttest_rel(means["PCEM"], means["EM"]).pvalue) if len(rr) > 1 and np.any(d8020 != 0) else float("nan")
    paper = PAPER_TABLE2[name]
    lines += ["", f"PCEM − EM on the random split: {d8020.mean():+.2f} ± {d8020.std(ddof=1) if d8020.size > 1 else 0:.2f} "
              f"(paired t-test p = {p:.3g}; the paper: {paper['PCEM'][0] - paper['EM'][0]:+.2f}); "
              f"{int((d8020 < -cp).sum())} collapse(s) in {len(rr)} runs. On bydate (Table 2 runs): "
              f"{(pcem - em).mean():+.2f}.", "",
              f"Investigation time: {inv['seconds'] / 60:.1f} min.", ""]
    return "\n".join(lines)


# =============================================================================================
# TDEM ahead of PCEM at 1% on rcv1v2_subset (issue 18): what moves the difference
#: labeled-set sizes beyond the table's 1% (prefixes of the same draw's order); 64 = 1% of the
#: paper's 6,395 RCV1 training documents
TDEM_SIZES = (37, 64, 93)
PAPER_RCV1_LABELED = 64
#: draws per fold: the Table 2 run of the fold and further seeded draws
TDEM_DRAWS_PER_FOLD = 5
#: settings changed for both PCEM and TDEM: name -> extra model parameters
TDEM_PARAM_VARIANTS: dict[str, dict[str, Any]] = {
    "smoothing 0.1": {"smoothing": 0.1},
    "smoothing 0.01": {"smoothing": 0.01},
    "1 EM iteration": {"max_iter": 1},
    "EM to convergence (tol 1e-8, at most 200 iterations)": {"max_iter": 200, "tol": 1e-8},
    "max_length 500": {"max_length": 500},
}
SINGLE_TEST = "single-path test documents"


def _single_path_rows(space: PathSpace, w_gold: np.ndarray) -> np.ndarray:
    """Rows whose gold labels form one root-to-leaf path (their deepest label is unique)."""
    on_leaf = space.node_scores(w_gold)[:, space.leaf_nodes] > 0
    return np.flatnonzero(on_leaf.sum(axis=1) == 1)


def investigate_tdem(spark: Any, cfg: dict[str, Any], space: PathSpace, feats: Features, rep: int,
                     draws: int = TDEM_DRAWS_PER_FOLD) -> dict[str, Any]:
    """One fold's part of the TDEM-vs-PCEM investigation at the table rate: per draw (the fold's
    Table 2 run, then further seeded draws) PCEM, TDEM and their NB / flat references; PCEM and
    TDEM with more labeled documents, with other smoothing, EM iterations and ``max_length``, on
    the single-path documents only (the paper's subset is single-label), in the dataless setting;
    PCEM with a flat-NB initial E-step. Every fit goes through ``fit_subsets`` but the last."""
    t0 = time.perf_counter()
    rate = cfg["table_rate"]
    n = len(feats.train)
    n_l = max(1, int(round(rate * n)))
    s_gold = space.node_scores(feats.w_gold_train)
    s_weak = space.node_scores(feats.w_weak_train)
    train = SparseBatch(feats.x_train, feats.doc_ids, feats.labels, counts=feats.x_train)
    test = SparseBatch(feats.x_test, np.arange(feats.x_test.shape[0]).astype(str), None, counts=feats.x_test)
    gold_test = feats.gold_test.toarray()
    single_tr = _single_path_rows(space, feats.w_gold_train)
    single_te = _single_path_rows(space, gold_test)
    is_single = np.zeros(n, dtype=bool)
    is_single[single_tr] = True
    facts: list[dict[str, Any]] = []
    cells: list[Cell] = []
    orders: list[tuple[int, np.ndarray]] = []
    for k in range(draws):
        g = rep * draws + k
        order = run_order(cfg, rep if k == 0 else 1000 + 100 * rep + k, n)
        orders.append((g, order))

        def add(name: str, method: str, split: tuple[np.ndarray, np.ndarray, np.ndarray], setting: str = "labeled",
                val: np.ndarray | None = None, extra: dict[str, Any] | None = None, g: int = g) -> None:
            lab, unl, s_lab = split
            cells.append(Cell(rep, rate, setting, method, lab, unl, s_lab, val=val,
                              extra={**(extra or {}), "_name": name, "_draw": g}))

        base = labeled_split(order, n_l, s_gold, "labeled")
        for m in ("PCEM", "TDEM", "EM", "PCNB", "TDNB"):
            add(m, m, base)
        for m in ("PCEM", "TDEM"):
            for size in TDEM_SIZES:
                if size < n:
                    add(f"{m}, {size} labeled", m, labeled_split(order, size, s_gold, "labeled"))
            for vn, extra in TDEM_PARAM_VARIANTS.items():
                add(f"{m}, {vn}", m, base, extra=extra)
            # the paper's subset is single-label: labeled, unlabeled and test documents of one path
            o_sp = order[is_single[order]]
            for size in (n_l, PAPER_RCV1_LABELED):
                if size < o_sp.size:
                    add(f"{m}, single-path documents, {size} labeled", m, labeled_split(o_sp, size, s_gold, "labeled"),
                        val=single_te)
            add(f"{m}, dataless", m, labeled_split(order, n_l, s_weak, "dataless"), setting="dataless")
        lab = base[0]
        on_leaf = s_gold[lab][:, space.leaf_nodes] > 0
        facts.append({"draw": g, "fold": rep, "run": k == 0, "n_labeled": int(lab.size),
                      "paths_covered": int(on_leaf.any(axis=0).sum()), "paths": int(space.n_paths),
                      "multi_path_labeled": int((on_leaf.sum(axis=1) > 1).sum())})
    results = _run_named(spark, train, test, feats.gold_test, space, feats.vocab, cells, cfg,
                         also={SINGLE_TEST: single_te})
    for g, order in orders:
        lab, unl, s_lab = labeled_split(order, n_l, s_gold, "labeled")
        t1 = time.perf_counter()
        paths, it = _flat_init_pcem(space, feats.x_train[lab], s_lab, feats.x_train[unl], feats.x_test, feats.vocab,
                                    cfg, cfg["seed"] + rep)
        pred = space.path_labels(paths)
        micro, macro = _node_f1(space.base, feats.gold_test, pred)
        results.append({"draw": g, "name": "PCEM, flat-NB initial E-step", "micro": micro, "macro": macro,
                        "n_iter": it, "seconds": time.perf_counter() - t1, "top_share": _top_shares(space, paths),
                        "depth_micro": _depth_micro(space.base, feats.gold_test, pred)})
    depth = np.asarray(space.base.depth)
    per_depth = [float(gold_test[:, depth == d].sum()) for d in range(1, space.base.max_depth + 1)]
    return {"kind": "tdem", "draws": facts, "results": results, "n_labeled": n_l, "n_train": n,
            "n_test": int(gold_test.shape[0]), "single_train": int(single_tr.size), "single_test": int(single_te.size),
            "gold_depth_labels": per_depth, "seconds": time.perf_counter() - t0}


def merge_tdem(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """The folds' parts of :func:`investigate_tdem` as one investigation."""
    out: dict[str, Any] = {"kind": "tdem", "draws": [], "results": [], "folds": []}
    for p in parts:
        out["draws"] += p["draws"]
        out["results"] += p["results"]
        out["folds"].append({k: v for k, v in p.items() if k not in ("draws", "results", "kind")})
    out["seconds"] = float(sum(f["seconds"] for f in out["folds"]))
    out["gold_depth_labels"] = np.sum([f["gold_depth_labels"] for f in out["folds"]], axis=0).tolist()
    return out


def tdem_page(name: str, cfg: dict[str, Any], summ: dict[str, Any], inv: dict[str, Any]) -> str:
    """The TDEM-vs-PCEM investigation page (figures from ``inv``, conclusions computed from them)."""
    from scipy.stats import spearmanr, ttest_1samp

    rate = cfg["table_rate"]
    draws = [f["draw"] for f in inv["draws"]]
    folds = inv["folds"]

    def res(nm: str, key: str = "micro") -> np.ndarray:
        return np.array([_res(inv, nm, d, key) for d in draws])

    def depth_res(nm: str) -> np.ndarray:
        rows = [next((r["depth_micro"] for r in inv["results"] if r["name"] == nm and r["draw"] == d), None)
                for d in draws]
        return np.array([r for r in rows if r is not None], dtype=np.float64)

    def diff_stats(a: np.ndarray, b: np.ndarray) -> tuple[float, float, float, int, int]:
        ok = np.isfinite(a) & np.isfinite(b)
        dd = a[ok] - b[ok]
        p = float(ttest_1samp(dd, 0.0).pvalue) if dd.size > 1 and np.any(dd != dd[0]) else float("nan")
        return float(dd.mean()), float(dd.std(ddof=1)) if dd.size > 1 else 0.0, p, int((dd > 0).sum()), int(dd.size)

    pc, td = res("PCEM"), res("TDEM")
    base_d = diff_stats(pc, td)
    t_lab = (summ[f"labeled|{rate:g}|PCEM"]["micro"]["mean"], summ[f"labeled|{rate:g}|TDEM"]["micro"]["mean"])
    t_dl = (summ[f"dataless|{rate:g}|PCEM"]["micro"]["mean"], summ[f"dataless|{rate:g}|TDEM"]["micro"]["mean"])
    p_lab = summ[f"labeled|{rate:g}|TDEM"]["micro"]["p_vs_PCEM"]
    p_dl = summ[f"dataless|{rate:g}|TDEM"]["micro"]["p_vs_PCEM"]
    paper = PAPER_TABLE2[name]
    n_l = int(np.mean([f["n_labeled"] for f in folds]))
    n_tr = int(np.mean([f["n_train"] for f in folds]))
    single_tr = int(np.mean([f["single_train"] for f in folds]))
    single_te = int(np.mean([f["single_test"] for f in folds]))
    n_te = int(np.mean([f["n_test"] for f in folds]))
    cover = np.array([f["paths_covered"] for f in inv["draws"]])
    n_paths = int(inv["draws"][0]["paths"])
    per_fold = len(draws) // max(len(folds), 1)
    lines = [
        f"# Why TDEM, not PCEM, is best at {100 * rate:g}% labeled on {name} (issue 18)",
        "",
        "```",
        _command(name),
        "```",
        "",
        f"The paper's finding \"PCEM is the best method\" on RCV1 (labeled micro-F1 {paper['PCEM'][0]:.2f} vs TDEM "
        f"{paper['TDEM'][0]:.2f}; dataless {paper['PCEM'][2]:.2f} vs {paper['TDEM'][2]:.2f}) does not reproduce in "
        f"`table2_{name}.md` at {100 * rate:g}% labeled: PCEM {t_lab[0]:.2f} vs TDEM {t_lab[1]:.2f} labeled "
        f"(paired t-test over the {cfg['reps']} runs p = {p_lab:.3g}), {t_dl[0]:.2f} vs {t_dl[1]:.2f} dataless "
        f"(p = {p_dl:.3g}). The paper used Song & Roth's single-label RCV1 subset "
        f"(6,395 training documents, 35 leaves, depth 3: 1% = {PAPER_RCV1_LABELED} labeled documents, about 1.8 per "
        f"leaf); here a run has {n_tr:,} training documents ({single_tr:,} of them with a single gold path), "
        f"{n_paths} paths (internal labels get a virtual `/_self` leaf; one node at depth 4), so {100 * rate:g}% = "
        f"{n_l} labeled documents, {n_l / n_paths:.2f} per path; {single_te:,} of the {n_te:,} test documents of a "
        "fold have a single path. PCEM and TDEM both decode one path per document.",
        "",
        f"Below: {len(draws)} draws of the labeled documents, {per_fold} per fold (the first of each fold is its "
        "Table 2 run), each method fitted through the product (`sparkhc.spark.training.fit_subsets`) except PCEM "
        "with a flat-NB initial E-step (the models' own steps in one process: not a product option). "
        "Significance: paired t-test of the per-draw differences over the draws.",
        "",
        "## The draws",
        "",
        "| draw | fold | paths with a labeled document (deepest label) | PCEM | TDEM | PCEM − TDEM | EM | PCNB | TDNB |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    em, pcnb, tdnb = res("EM"), res("PCNB"), res("TDNB")
    for i, f in enumerate(inv["draws"]):
        lines.append(f"| {f['draw']}{' (run)' if f['run'] else ''} | {f['fold']} | {f['paths_covered']} / "
                     f"{f['paths']} | {pc[i]:.2f} | {td[i]:.2f} | {pc[i] - td[i]:+.2f} | {em[i]:.2f} | "
                     f"{pcnb[i]:.2f} | {tdnb[i]:.2f} |")
    lines.append(f"| mean | | {cover.mean():.1f} | {pc.mean():.2f} | {td.mean():.2f} | {(pc - td).mean():+.2f} | "
                 f"{em.mean():.2f} | {pcnb.mean():.2f} | {tdnb.mean():.2f} |")
    rho = spearmanr(cover, pc - td) if np.any(cover != cover[0]) else None
    lines += ["", f"PCEM − TDEM over the {len(draws)} draws: {base_d[0]:+.2f} ± {base_d[1]:.2f} (p = {base_d[2]:.3g}); "
              f"PCEM ahead in {base_d[3]} of {base_d[4]}. Spearman correlation of PCEM − TDEM with the number of paths "
              "that have a labeled document: "
              + ("constant" if rho is None else f"{float(rho.statistic):+.2f} (p = {float(rho.pvalue):.3g})") + ".", ""]

    # ---------------------------------------------------------------- factors
    conds: list[tuple[str, str, np.ndarray, np.ndarray]] = [
        ("none (Table 2 protocol)", f"{n_l} labeled, all documents", pc, td),
        ("evaluation: single-path test documents", "the same fits, scored on the single-path test documents",
         res("PCEM", f"micro@{SINGLE_TEST}"), res("TDEM", f"micro@{SINGLE_TEST}")),
    ]
    for size in (n_l, PAPER_RCV1_LABELED):
        conds.append(("labels: single-path documents only (the paper's subset is single-label)",
                      f"labeled, unlabeled and test documents with one gold path; {size} labeled",
                      res(f"PCEM, single-path documents, {size} labeled"), res(f"TDEM, single-path documents, {size} labeled")))
    for size in TDEM_SIZES:
        note = " (the paper's count at 1%)" if size == PAPER_RCV1_LABELED else ""
        conds.append(("number of labeled documents", f"{size} labeled{note}", res(f"PCEM, {size} labeled"),
                      res(f"TDEM, {size} labeled")))
    for vn in TDEM_PARAM_VARIANTS:
        fac = ("smoothing" if vn.startswith("smoothing") else "document length" if vn.startswith("max_length")
               else "EM iterations")
        conds.append((fac, f"{vn} (both)", res(f"PCEM, {vn}"), res(f"TDEM, {vn}")))
    conds.append(("initial E-step", "PCEM with a flat-NB initial E-step (TDEM as in Table 2)",
                  res("PCEM, flat-NB initial E-step"), td))
    conds.append(("setting", "dataless (weak labels)", res("PCEM, dataless"), res("TDEM, dataless")))
    lines += ["## What moved PCEM − TDEM and what did not", "",
              "Labeled micro-F1 (%), means over the draws; \"moved?\": *yes* when PCEM is significantly ahead "
              "(p < 0.05), *reversed* when PCEM is ahead without significance, *narrowed* / *widened* when the "
              "difference changes by at least 1 point against the first row, else *no*.", "",
              "| factor varied | variant | PCEM | TDEM | PCEM − TDEM (mean ± sd) | p | PCEM ahead in | moved? |",
              "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |"]
    moved: list[str] = []
    for fac, var, a, b in conds:
        if not (np.isfinite(a).any() and np.isfinite(b).any()):
            continue
        m, sd, p, wins, k = diff_stats(a, b)
        if var == conds[0][1]:
            verdict = "(reference)"
        elif m > 0 and p < 0.05:
            verdict = "yes: PCEM ahead"
        elif m > 0:
            verdict = "reversed (not significant)"
        elif abs(m - base_d[0]) < 1.0:
            verdict = "no"
        else:
            verdict = "narrowed" if m > base_d[0] else "widened"
        if var != conds[0][1] and m > 0:
            moved.append(f"{var} ({m:+.2f}, p = {p:.3g})")
        lines.append(f"| {fac} | {var} | {np.nanmean(a):.2f} | {np.nanmean(b):.2f} | {m:+.2f} ± {sd:.2f} | {p:.3g} | "
                     f"{wins} / {k} | {verdict} |")
    it_pc, it_td = res("PCEM", "n_iter"), res("TDEM", "n_iter")
    lines += ["", f"EM iterations as in Table 2 (mean): PCEM {it_pc.mean():.1f}, TDEM {it_td.mean():.1f} (summed over "
              "its levels). The variants with PCEM ahead on average: " + ("; ".join(moved) if moved else "none") + ".", ""]

    # ---------------------------------------------------------------- per depth
    gl = np.asarray(inv["gold_depth_labels"], dtype=np.float64)
    share = 100.0 * gl / max(gl.sum(), 1.0)
    cols = [("PCEM", "PCEM"), ("TDEM", "TDEM"), ("EM", "EM"), ("PCNB", "PCNB"), ("TDNB", "TDNB"),
            (f"PCEM, {PAPER_RCV1_LABELED} labeled", f"PCEM {PAPER_RCV1_LABELED} lab."),
            (f"TDEM, {PAPER_RCV1_LABELED} labeled", f"TDEM {PAPER_RCV1_LABELED} lab."),
            ("PCEM, dataless", "PCEM dataless"), ("TDEM, dataless", "TDEM dataless")]
    dm = {nm: depth_res(nm) for nm, _ in cols}
    lines += ["## Where the difference is: micro-F1 per depth", "",
              "Micro-F1 (%) of the nodes of each depth, mean over the draws; share: the depth's part of the gold "
              "test labels (ancestor-closed), i.e. its weight in the overall micro-F1.", "",
              "| depth | share of gold labels | " + " | ".join(h for _, h in cols) + " | PCEM − TDEM |",
              "| ---: | ---: | " + " | ".join("---:" for _ in cols) + " | ---: |"]
    for d in range(gl.size):
        vals = [f"{np.nanmean(dm[nm][:, d]):.2f}" if dm[nm].size else "" for nm, _ in cols]
        dd = np.nanmean(dm["PCEM"][:, d] - dm["TDEM"][:, d]) if dm["PCEM"].size and dm["TDEM"].size else float("nan")
        lines.append(f"| {d + 1} | {share[d]:.1f} | " + " | ".join(vals) + f" | {dd:+.2f} |")
    if dm["PCEM"].size and dm["TDEM"].size:
        gap = np.nanmean(dm["PCEM"] - dm["TDEM"], axis=0)
        big = share >= 1.0
        worst = int(np.flatnonzero(big)[np.nanargmin(gap[big])])
        contrib = [share[d] / 100.0 * gap[d] for d in range(gap.size) if np.isfinite(gap[d])]
        lines += ["", f"Among the depths with at least 1% of the gold labels, PCEM's largest deficit against TDEM "
                  f"is at depth {worst + 1} ({gap[worst]:+.2f} points, {share[worst]:.1f}% of the gold labels). "
                  f"Weighted by the shares the depths add up to {sum(contrib):+.2f} points (a rough split of the "
                  "overall micro-F1 difference: "
                  + ", ".join(f"depth {d + 1} {c:+.2f}" for d, c in enumerate(contrib)) + ")."]
    lines += ["", f"Investigation time: {inv['seconds'] / 60:.1f} min.", ""]
    return "\n".join(lines)


# =============================================================================================
# driver and reports
def run_experiment(
    data_dir: str | Path,
    out_dir: str | Path,
    corpus: str,
    label_rates: Sequence[float] = DEFAULT_RATES,
    reps: int = 5,
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
        "selected_methods": list(SELECTED_METHODS),
        "max_length_grid": list(MAX_LENGTH_GRID),
        "validation_fraction": VALIDATION_FRACTION,
        "max_iter": int(max_iter),
        "tol": float(tol),
        "seed": int(seed),
        "reps": int(reps),
        "quick": bool(quick),
    }
    # featurize every round the runs use on Spark first
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
    records: list[dict[str, Any]] = []
    investigation: dict[str, Any] | None = None
    tdem_parts: list[dict[str, Any]] = []
    space = PathSpace.build(model_taxonomy(c))
    for name, feats in features.items():
        t1 = time.perf_counter()
        reps_here = [rep for rep in range(reps) if c.splits(rep)[2] == name]
        cells = [cell for rep in reps_here for cell in plan_rep(run_cfg, rep, space, feats)]
        got = run_cells(spark, feats, space, cells, run_cfg)
        # the extension: refit with the max_length chosen on validation, score on the test part
        chosen = select_max_length(got)
        test_cells = {(t.rep, t.rate, t.setting): t for t in cells if t.target == "test"}
        finals = [Cell(rep, rate, setting, method, t.lab, t.unl, t.s_lab, "test", ml)
                  for (rep, rate, setting, method), ml in sorted(chosen.items(), key=lambda kv: str(kv[0]))
                  for t in [test_cells[(rep, rate, setting)]]]
        got += run_cells(spark, feats, space, finals, run_cfg)
        records += got
        weak = _weak_quality(feats)
        for rep in reps_here:
            records.append({"method": "_run", "rep": rep, "split": name, "feature_seconds": feature_seconds[name],
                            "seconds": time.perf_counter() - t1, "vocab": feats.vocab, "n_train": len(feats.train),
                            "n_test": int(len(feats.test)), "weak_labels": weak})
        if c.name == "20newsgroups":
            investigation = investigate_pcem(spark, run_cfg, space, feats, reps, 2 if quick else EXTRA_DRAWS)
            investigation["gold_top_share"] = _top_shares(space, _gold_paths(space, feats.gold_test))
        elif c.name == "rcv1v2_subset":
            tdem_parts += [investigate_tdem(spark, run_cfg, space, feats, rep, 1 if quick else TDEM_DRAWS_PER_FOLD)
                           for rep in reps_here]
    if tdem_parts:
        investigation = merge_tdem(tdem_parts)
    wall = time.perf_counter() - t0
    return write_reports(Path(out_dir), c, run_cfg, records, wall, investigation)


def _sig_mark(p: float) -> str:
    if not np.isfinite(p):
        return ""
    return "‡" if p < 0.001 else ("†" if p < 0.05 else "")


def _scores(records: list[dict[str, Any]], setting: str, rate: float, method: str, key: str) -> np.ndarray:
    rows = sorted(
        (r for r in records if r.get("setting") == setting and math.isclose(r["rate"], rate) and r["method"] == method
         and r.get("target", "test") == "test"),
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
                cfg["table_methods"] + cfg["ablation_methods"] + cfg["selected_methods"]
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
                    ref_c = _scores(records, setting, rate, f"PCEM{SEL_SUFFIX}", key)
                    if len(v) == len(ref_c) and len(v) > 1 and np.any(v != ref_c):
                        with np.errstate(all="ignore"):
                            cell[key]["p_vs_PCEM_selected"] = float(ttest_rel(ref_c, v).pvalue)
                if method in SELECTED_METHODS:
                    rows = sorted((r for r in records if r.get("setting") == setting and r["method"] == method
                                   and math.isclose(r["rate"], rate) and r.get("target", "test") == "test"),
                                  key=lambda r: r["rep"])
                    cell["max_length"] = [r.get("max_length") for r in rows]
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


#: (finding, setting, metric, method, the method(s) it is compared with: None = the best other
#: paper-faithful method of the runs); the paper's figures are those of Table 2 (``PAPER_TABLE2``)
FINDINGS: tuple[tuple[str, str, str, str, tuple[str, ...] | None], ...] = (
    ("PCEM is the best method (semi-supervised, micro-F1)", "labeled", "micro", "PCEM", None),
    ("PCEM is the best method (semi-supervised, macro-F1)", "labeled", "macro", "PCEM", None),
    ("PCEM is the best method (dataless, micro-F1)", "dataless", "micro", "PCEM", None),
    ("PCEM is the best method (dataless, macro-F1)", "dataless", "macro", "PCEM", None),
    ("path cost-sensitive NB beats flat NB (PCNB > NB, semi-supervised micro-F1)", "labeled", "micro", "PCNB", ("NB",)),
    ("path cost-sensitive EM beats flat EM (PCEM > EM, semi-supervised micro-F1)", "labeled", "micro", "PCEM", ("EM",)),
    ("PCEM beats the hierarchical EMs (PCEM > TDEM, WDEM, semi-supervised micro-F1)", "labeled", "micro", "PCEM",
     ("TDEM", "WDEM")),
    ("unlabeled documents help (EM > NB, semi-supervised micro-F1)", "labeled", "micro", "EM", ("NB",)),
    ("unlabeled documents help (PCEM > PCNB, semi-supervised micro-F1)", "labeled", "micro", "PCEM", ("PCNB",)),
    ("PCEM beats the NBs with dataless weak labels (PCEM > PCNB, dataless micro-F1)", "dataless", "micro", "PCEM",
     ("PCNB",)),
)
_COLS = {("labeled", "micro"): 0, ("labeled", "macro"): 1, ("dataless", "micro"): 2, ("dataless", "macro"): 3}


def _verdict(paper_diff: float, d: np.ndarray) -> tuple[str, str]:
    """(significance text, verdict) of the paired differences ``d`` (ours) against the paper's sign:
    the one rule of every results page (:func:`experiments.significance.verdict`) on the two-sided
    paired t-test over the runs."""
    from scipy.stats import ttest_1samp

    p = float("nan")
    if d.size > 1 and np.any(d != 0):
        with np.errstate(all="ignore"):
            p = float(ttest_1samp(d, 0.0).pvalue)
    sig = f"paired t-test over {d.size} runs: p = {p:.3g}" if np.isfinite(p) else "-"
    return sig, rule(float(np.sign(paper_diff)), float(d.mean()), p if np.isfinite(p) else None)


def draw_scores(investigation: dict[str, Any] | None) -> dict[str, np.ndarray]:
    """Per method, the labeled micro-F1 of every draw of the TDEM-vs-PCEM investigation (the Table 2
    run of each fold and its further draws, at the table rate); empty without one."""
    if not investigation or investigation.get("kind") != "tdem":
        return {}
    draws = [f["draw"] for f in investigation["draws"]]
    names = sorted({r["name"] for r in investigation["results"]})
    out = {nm: np.array([_res(investigation, nm, d) for d in draws]) for nm in names}
    return {nm: v for nm, v in out.items() if np.all(np.isfinite(v))}


def _finding_row(text: str, paper: dict[str, tuple[float, float, float, float]], summ: dict[str, Any], rate: float,
                 setting: str, metric: str, method: str, others: Sequence[str], paper_others: Sequence[str],
                 col: int, draws: dict[str, np.ndarray] | None = None) -> str:
    """One row per compared method; a semi-supervised micro-F1 comparison of two methods the
    investigation drew (``draws``, :func:`draw_scores`) is tested over its draws, not the runs."""
    rows = []
    for o, po in zip(others, paper_others, strict=True):
        if draws and (setting, metric) == ("labeled", "micro") and method in draws and o in draws:
            mine, theirs, unit = draws[method], draws[o], " (the investigation's)"
        else:
            mine = np.array(summ[f"{setting}|{rate:g}|{method}"][metric]["runs"])
            theirs, unit = np.array(summ[f"{setting}|{rate:g}|{o}"][metric]["runs"]), ""
        d = mine - theirs
        pd = paper[method.replace(SEL_SUFFIX, "")][col] - paper[po][col]
        sig, verdict = _verdict(pd, d)
        sig = sig.replace(" runs:", f" draws{unit}:") if unit else sig
        sd = float(d.std(ddof=1)) if d.size > 1 else 0.0
        rows.append(
            f"| {text} — vs {o} | {paper[method.replace(SEL_SUFFIX, '')][col]:.2f} vs {paper[po][col]:.2f} "
            f"({pd:+.2f}) | {mine.mean():.2f} vs {theirs.mean():.2f} ({d.mean():+.2f} ± {sd:.2f}) | {sig} | "
            f"{verdict} |"
        )
    return "\n".join(rows)


def findings_table(name: str, summ: dict[str, Any], cfg: dict[str, Any],
                   investigation: dict[str, Any] | None = None) -> list[str]:
    """The findings of the paper at the Table 2 rate: paper-faithful rows, then the extension's. With
    the TDEM-vs-PCEM investigation, the semi-supervised micro-F1 comparisons of the methods it drew
    are tested over its draws (more than the runs: one test, the page's largest sample)."""
    rate = cfg["table_rate"]
    paper = PAPER_TABLE2[name]
    draws = draw_scores(investigation)
    n_draws = len(next(iter(draws.values()))) if draws else 0
    lines = ["## Findings", "",
             f"At {100 * rate:g}% labeled documents. Ours: mean over the {cfg['reps']} runs of the two methods, and the "
             "mean ± standard deviation of their per-run difference; significance: paired t-test of the per-run "
             "differences (scipy `ttest_1samp` of the differences = `ttest_rel`). " + VERDICT_RULE + " "
             + ("The paper's figures are on Song & Roth's single-label RCV1 subset, not this one: compare signs, "
                "not levels. " if name != "20newsgroups" else "")
             + "\"Best\" compares with the best other method of our runs (by mean)."
             + (f" Rows between two of {', '.join(sorted(draws))} on semi-supervised micro-F1 are tested over the "
                f"{n_draws} draws of the investigation (`investigation_{name}.md`: each fold's Table 2 run and "
                "further seeded draws of the labeled documents), the largest sample the page has; their means are "
                "over those draws (issue 55: the 5 runs gave a tie where the draws give a significant difference)."
                if draws else ""), "",
             "**Paper-faithful** (the paper's method: raw counts, +1 smoothing, NB initialisation; our splits):", "",
             "| finding | paper | ours (mean ± spread of the difference) | significance | verdict |",
             "| --- | --- | --- | --- | --- |"]
    paper_methods = [m for m in cfg["table_methods"]]
    for text, setting, metric, method, others in FINDINGS:
        col = _COLS[(setting, metric)]
        if others is None:
            rest = [m for m in paper_methods if m != method]
            best = max(rest, key=lambda m: summ[f"{setting}|{rate:g}|{m}"][metric]["mean"])
            others = (best,)
        lines.append(_finding_row(text, paper, summ, rate, setting, metric, method, others, others, col, draws))
    sel = [f"{m}{SEL_SUFFIX}" for m in paper_methods if f"{m}{SEL_SUFFIX}" in cfg["selected_methods"]]
    lines += ["", "**Extension** (`max_length` chosen on validation data, see below; compared with the paper's "
              "figures of the method without it):", "",
              "| finding | paper | ours (mean ± spread of the difference) | significance | verdict |",
              "| --- | --- | --- | --- | --- |"]
    pc = f"PCEM{SEL_SUFFIX}"
    for setting, metric in (("labeled", "micro"), ("labeled", "macro"), ("dataless", "micro")):
        col = _COLS[(setting, metric)]
        rest = [m for m in sel if m != pc]
        best = max(rest, key=lambda m: summ[f"{setting}|{rate:g}|{m}"][metric]["mean"])
        lines.append(_finding_row(f"PCEM is the best method ({setting}, {metric}-F1), all with max_length", paper,
                                  summ, rate, setting, metric, pc, (best,), (best.replace(SEL_SUFFIX, ""),), col))
    lines.append(_finding_row("PCEM > EM (semi-supervised micro-F1), both with max_length", paper, summ, rate,
                              "labeled", "micro", pc, (f"EM{SEL_SUFFIX}",), ("EM",), 0))
    lines += [""]
    return lines


def write_reports(
    out_dir: Path, corpus: Corpus, cfg: dict[str, Any], records: list[dict[str, Any]], wall: float,
    investigation: dict[str, Any] | None = None,
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
        "investigation": investigation,
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
        *findings_table(name, summ, cfg, investigation),
        "## Table 2",
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
    grid = ", ".join("raw counts" if g is None else str(g) for g in cfg["max_length_grid"])
    lines += ["", "Extension (not in the paper), same runs and labeled documents: every document's counts scaled "
              "down to at most `max_length` tokens (`max_length`, fractional counts), so that one very long labeled "
              f"document cannot dominate the token totals of a path; `max_length` chosen from {{{grid}}} per run, "
              f"method and setting by the micro-F1 on a validation slice of {100 * cfg['validation_fraction']:g}% of "
              "the training part (gold labels; held out of the labeled and unlabeled documents of the selection "
              "fits; the dataless setting uses them too, which a dataless user would not have), then refitted on the "
              "whole training part and scored on the test part once. Marks against PCEM of this block:", "",
              "| method | labeled Micro-F1 | labeled Macro-F1 | dataless Micro-F1 | dataless Macro-F1 | chosen max_length per run (labeled / dataless) |",
              "| --- | ---: | ---: | ---: | ---: | --- |"]
    pc_sel = f"PCEM{SEL_SUFFIX}"
    for m in cfg["selected_methods"]:
        row = [m]
        for s in SETTINGS:
            for k in ("micro", "macro"):
                c = summ[f"{s}|{rate:g}|{m}"][k]
                pv = float(c.get("p_vs_PCEM_selected", float("nan"))) if m != pc_sel else float("nan")
                row.append(f"{_sig_mark(pv)}{c['mean']:.2f}")
        row.append(" / ".join(",".join("raw" if v is None else str(v) for v in summ[f"{s}|{rate:g}|{m}"]["max_length"])
                              for s in SETTINGS))
        lines.append("| " + " | ".join(row) + " |")
    lines += ["", "Standard deviations over the runs (micro / macro):", "",
              "| method | labeled | dataless | seconds per fit (labeled / dataless) | EM iterations (labeled / dataless) |",
              "| --- | --- | --- | --- | --- |"]
    for m in cfg["table_methods"] + cfg["selected_methods"]:
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
    if investigation is not None:
        p = out_dir / f"investigation_{tag}.md"
        page = tdem_page if investigation.get("kind") == "tdem" else investigation_page
        harness.write_markdown(p, page(name, cfg, summ, investigation))
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
        "- Training path: every generative fit (by registry name) is a Spark task of the product's "
        "`sparkhc.spark.training.fit_subsets` (one task per run, rate, setting and method, each calling the model's "
        "own `fit` on the training documents with the labels of the others hidden; the weak labels of the dataless "
        "setting as node scores), which equals the model's serial fit bit for bit (tests/spark/test_fit_subsets.py). "
        "LR / SVM (scikit-learn baselines, not product models) are fitted in the runner's process.\n"
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
                style = "-" if "EM" in m else "--"
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
    return write_reports(Path(out_dir), c, res["config"], res["cells"] + res["runs"], float(res["wall_seconds"]),
                         res.get("investigation"))


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
            args.data_dir, args.out, c, label_rates=rates, reps=args.reps,
            max_iter=args.max_iter, tol=args.tol, seed=args.seed, quick=args.quick,
        )
        for f in files:
            print(f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
