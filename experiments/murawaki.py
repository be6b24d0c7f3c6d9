"""Murawaki 2013's comparison on a real corpus, through the product's own pipelines.

For every evaluation round of the corpus protocol (one train/test split, or one round per
cross-validation fold) the corpus is featurized on Spark (vocabulary and idf from the training
part), then each system is trained through ``pipelines.train`` (iterative parameter mixing over
the given number of shards; one shard = serial training on all the training data), decoded and
evaluated with :class:`sparkhc.metrics.MetricCounts`.

Two blocks of rows:

* **paper-faithful** (the paper's settings, Sect. 5): FLAT and the TREE edge classifiers trained
  on all the training data (one shard), LS-ALL, LS-SIB, DP-ALL, DP-SIB; DP-GT and DP-GT-BF with
  Alg. 5 (prediction-based updates, no bias) mixed over 10 shards, R = 3.
* **sparkhc** (run configuration and extensions, fixed before these runs; none is chosen here):
  the same systems at the run's shard count (``train.shards = 0``: the task slots), DP-GT-BF-CA
  (cost-augmented updates with one per-edge Hamming margin and a bias feature, at this page's
  pinned C = 1 and 10 epochs), ``sparkhc defaults`` (the product's shipped configuration, what
  ``sparkhc train`` gives: C and the epochs chosen on validation bands of the training part,
  label-frequency-aware margins, calibration) and a one-vs-rest LinearSVC (LIBLINEAR, C = 1)
  reference row.

Besides the paper's Table 1 the page has: the findings table (paper claim, ours, significance,
verdict), paired significance tests (:mod:`experiments.significance`), Table 2 (scores on the
training data), Figure 2 (weights and mean absolute edge score per taxonomy level), Figure 3 (the
learned branching weights) and the investigation of the model size under branching features
(update rule x branching x shards 1 / auto / 10, and the paper's raw term-frequency features).
Statistics of a model are computed here from its saved state, never inside the model.
"""

from __future__ import annotations

import json
import logging
import math
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from pyspark.sql import SparkSession

from experiments import harness
from experiments.significance import (
    VERDICT_RULE,
    approximate_randomization,
    combine,
    micro_f,
    paired_t_over_folds,
    per_document_counts,
    sign_test,
    untested,
    verdict,
)
from sparkhc.config import Config
from sparkhc.features import (
    features_corpus_info,
    features_taxonomy,
    model_taxonomy,
    scored_mask,
)
from sparkhc.metrics import MetricCounts, format_table
from sparkhc.persistence import load_model, read_metadata, write_json_atomic
from sparkhc.spark import pipelines

log = logging.getLogger(__name__)

PAPER_GT: dict[str, Any] = {"update": "prediction", "bias": 0.0}
# pinned: one Hamming margin for every edge (margin_rare 0), the model these pages were made with; the
# label-frequency-aware margins that became the default later (model.global.margin_rare) are not in them
CA_GT: dict[str, Any] = {"update": "cost_augmented", "margin": 1.0, "bias": 0.3, "margin_rare": 0.0}
# the investigation's cost-augmented rule without the bias feature (one change at a time)
CA_NOBIAS: dict[str, Any] = {"update": "cost_augmented", "margin": 1.0, "bias": 0.0, "margin_rare": 0.0}
AUTO = 0  # the run's shard count (train.shards; 0 = the task slots)
PAPER_SHARDS = 10  # Sect. 5: "we evenly split the training data into 10 shards"
PAPER_EPOCHS = 10  # Sect. 5: 10 epochs (train.epochs = 0, the validation choice, is sparkhc's default, not the paper's)
PAPER_C = 1.0  # the global model's C of these pages (model.global.C = 0.3, a validation choice, is sparkhc's default since)
#: Table 2's claim is about the other systems overfitting: it holds only where DP-GT-BF itself fits the
#: training data (training hF at least this), not where the gap is DP-GT-BF underfitting
FITS = 0.95
# the paper's document features: frequency-valued content words, not normalized (Sect. 5)
TF_FEATURES: dict[str, Any] = {"weighting": "tf", "l2_normalize": False}


@dataclass(frozen=True)
class Spec:
    """A trained-and-decoded system: registered model, its parameters (``decoder`` is a decode-time
    choice), the shard count (``AUTO``: the run's) and the features (``default`` or ``tf``)."""

    model: str
    params: dict[str, Any] = field(default_factory=dict)
    shards: int = AUTO
    features: str = "default"
    #: True: the product's current defaults (the run's configuration as given: epochs and C chosen on
    #: validation, calibration), nothing of this page pinned
    product: bool = False


# name -> spec; the paper's Table 1 systems with the paper's settings
PAPER: dict[str, Spec] = {
    "FLAT": Spec("flat", {}, 1),
    "LS-ALL": Spec("tree", {"data": "all", "decoder": "ls"}, 1),
    "LS-SIB": Spec("tree", {"data": "sib", "decoder": "ls"}, 1),
    "DP-ALL": Spec("tree", {"data": "all", "decoder": "dp"}, 1),
    "DP-SIB": Spec("tree", {"data": "sib", "decoder": "dp"}, 1),
    "DP-GT": Spec("global", {"branching": False, **PAPER_GT}, PAPER_SHARDS),
    "DP-GT-BF": Spec("global", {"branching": True, **PAPER_GT}, PAPER_SHARDS),
}
DEFAULTS_ROW = "sparkhc defaults"
# sparkhc's rows: the run's shard count ("auto" is replaced by the number in the names) and extensions
EXT: dict[str, Spec] = {
    **{f"{name} (auto shards)": replace(spec, shards=AUTO) for name, spec in PAPER.items()},
    # cost-augmented updates with one per-edge Hamming margin and a bias feature (GlobalPA
    # ``update="cost_augmented"``) at this page's pinned C = 1 and 10 epochs: the extension as these
    # pages first measured it, not the product's current defaults (the next row)
    "DP-GT-BF-CA": Spec("global", {"branching": True, **CA_GT}, AUTO),
    # what a user gets: `sparkhc train` with the shipped configuration (C and the epochs chosen on
    # validation bands of the training part, label-frequency-aware margins, calibration)
    DEFAULTS_ROW: Spec("global", {}, AUTO, product=True),
    "DP-GT-BF-CA (10 shards)": Spec("global", {"branching": True, **CA_GT}, PAPER_SHARDS),
}
SVM_ROW = "SVM (LIBLINEAR 1-vs-rest)"
TABLE_KEYS = ["EBP", "EBR", "EBF", "LBMiP", "LBMiR", "LBMiF", "LBMaP", "LBMaR", "LBMaF", "hP", "hR", "hF"]
F_KEYS = ["EBF", "LBMiF", "LBMaF", "hF"]
FIGURE2 = ["DP-ALL", "DP-SIB", "DP-GT", "DP-GT-BF"]  # the paper's Figure 2 shows DP-ALL, DP-SIB, DP-GT-BF
# (system, baseline) pairs tested for significance
PAIRS = [
    ("DP-GT-BF", "FLAT"), ("DP-GT-BF", "DP-ALL"), ("DP-GT-BF", "DP-GT"), ("DP-GT-BF", "LS-ALL"),
    ("DP-GT-BF", "LS-SIB"), ("DP-GT-BF", "DP-SIB"), ("DP-ALL", "LS-ALL"),
    ("FLAT", "LS-ALL"), ("LS-ALL", "LS-SIB"), ("DP-ALL", "DP-SIB"),
    ("DP-GT-BF (auto shards)", "DP-GT (auto shards)"), ("DP-ALL (auto shards)", "DP-ALL"),
    ("FLAT (auto shards)", "FLAT"), ("DP-GT-BF-CA", "DP-GT-BF"), ("DP-GT-BF-CA", "DP-ALL"),
    ("DP-GT-BF-CA", SVM_ROW), (DEFAULTS_ROW, "DP-GT-BF"), (DEFAULTS_ROW, "DP-GT-BF-CA"), (DEFAULTS_ROW, SVM_ROW),
]


def investigation_grid() -> dict[str, Spec]:
    """Why BF changes the model size: update rule x branching x shards (1, the run's, the paper's
    10) on the default features, and the paper's rule on the paper's raw term frequencies."""
    grid: dict[str, Spec] = {}
    for upd, params in (("prediction", PAPER_GT), ("cost-augmented", CA_NOBIAS)):
        for bf in (False, True):
            for shards in (1, AUTO, PAPER_SHARDS):
                grid[_grid_name(upd, bf, shards, "default")] = Spec("global", {"branching": bf, **params}, shards)
    for bf in (False, True):
        for shards in (1, PAPER_SHARDS):
            grid[_grid_name("prediction", bf, shards, "tf")] = Spec("global", {"branching": bf, **PAPER_GT}, shards, "tf")
    return grid


def _grid_name(update: str, bf: bool, shards: int, features: str) -> str:
    s = "auto" if shards == AUTO else str(shards)
    return f"{update}, {'BF' if bf else 'no BF'}, {s} shards, {features}"


def _train_key(spec: Spec, shards: int) -> str:
    """Systems with the same key share one trained model (LS/DP over the same edge classifiers,
    the auto-shard row when the run's shard count is the paper's, the grid and the table)."""
    params = {k: v for k, v in sorted(spec.params.items()) if k != "decoder"}
    tag = "defaults" if spec.product else "-".join(f"{k}={v}" for k, v in params.items())
    return f"{spec.model}-{tag}-s{shards}-{spec.features}".replace(" ", "")


def _display(name: str, shards: int) -> str:
    return name.replace("(auto shards)", f"({shards} shards)").replace(", auto shards", f", {shards} shards")


def run(
    spark: SparkSession,
    cfg: Config,
    corpus: str,
    data_dir: str | None,
    out: str | Path,
    work: str | Path | None = None,
    systems: list[str] | None = None,
    rounds: list[int] | None = None,
    svm: bool = True,
    quick: bool = False,
    investigate: bool = True,
) -> dict[str, Any]:
    """Run the comparison; write ``<out>/<corpus>.md``, ``.json`` and the figures (``quick``: a
    smoke run on one round, files ``<corpus>_quick.*``)."""
    from sparkhc.corpus import registry
    from sparkhc.spark.mixing.settings import resolve_shards

    S = resolve_shards(spark, cfg.train.shards)
    product_cfg = replace(cfg, train=replace(cfg.train, shards=S))  # the defaults row: as given
    # the paper's fixed 10 epochs where the configuration leaves them to validation (train.epochs = 0),
    # and its mixing (Alg. 6: each shard's steps capped by C, train.step_scale = "one")
    cfg = replace(cfg, train=replace(cfg.train, shards=S, epochs=cfg.train.epochs or PAPER_EPOCHS, step_scale="one"))
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(work) if work is not None else out / f".work-{corpus}"
    tag = f"{corpus}_quick" if quick else corpus
    info = registry.get_corpus(corpus)
    eval_rounds = info.rounds()
    chosen = rounds if rounds is not None else list(range(len(eval_rounds)))

    # the rows: names with the run's shard count; a row identical to an earlier one is dropped
    table: dict[str, tuple[Spec, str]] = {}
    seen: set[tuple[str, str]] = set()
    for name, spec in {**PAPER, **EXT}.items():
        if systems is not None and name not in systems:
            continue
        shards = S if spec.shards == AUTO else spec.shards
        ident = (_train_key(spec, shards), str(spec.params.get("decoder")))
        if ident in seen:
            continue
        seen.add(ident)
        table[_display(name, S)] = (spec, "paper" if name in PAPER else "sparkhc")
    grid = {_display(n, S): s for n, s in investigation_grid().items()} if investigate else {}

    per_round: list[dict[str, dict[str, float]]] = []
    train_rounds: list[dict[str, dict[str, float]]] = []
    model_rounds: list[dict[str, dict[str, Any]]] = []
    impact_rounds: list[dict[str, dict[str, float]]] = []
    perdoc: dict[str, list[np.ndarray]] = {}
    bf_model: Path | None = None
    t_all = time.perf_counter()
    for r in chosen:
        rnd = eval_rounds[r]
        sel_train, sel_test = harness.round_selections(rnd)
        rdir = work / f"round{r}"
        feats = {"default": rdir / "features"}
        log.info("round %d/%d: featurize %s", r + 1, len(eval_rounds), corpus)
        pipelines.featurize(spark, cfg, feats["default"], corpus=corpus, data_dir=data_dir, overwrite=True,
                            fit_exclude_fold=sel_test.get("fold"))
        if any(s.features == "tf" for s in grid.values()):
            feats["tf"] = rdir / "features-tf"
            tf_cfg = replace(cfg, featurize=replace(cfg.featurize, **TF_FEATURES))
            pipelines.featurize(spark, tf_cfg, feats["tf"], corpus=corpus, data_dir=data_dir, overwrite=True,
                                fit_exclude_fold=sel_test.get("fold"))
        splits = {k: (harness.local_split(f, sel_train), harness.local_split(f, sel_test)) for k, f in feats.items()}
        tax = features_taxonomy(feats["default"])
        scored = scored_mask(tax, features_corpus_info(feats["default"]).get("scored_labels"))
        trained: dict[str, tuple[Path, float]] = {}
        models: dict[str, dict[str, Any]] = {}

        results: dict[str, dict[str, float]] = {}
        train_scores: dict[str, dict[str, float]] = {}
        impact: dict[str, dict[str, float]] = {}
        for name, (spec, _block) in table.items():
            key, mdir, secs = _train_once(spark, product_cfg if spec.product else cfg, spec, feats, rdir, sel_train, trained)
            model = _loaded(spec, mdir)
            train_b, test_b = splits[spec.features]
            results[name], counts = _evaluate(model, tax, scored, test_b, secs)
            perdoc.setdefault(name, []).append(counts)
            train_scores[name], _ = _evaluate(model, tax, scored, train_b, secs)
            if key not in models:
                models[key] = model_record(model, mdir)
            if name in FIGURE2:
                impact[name] = edge_impact(model, test_b)
            if name == "DP-GT-BF":
                bf_model = mdir
            log.info("round %d %s: %s", r, name, {k: round(v, 4) for k, v in results[name].items() if k in F_KEYS})
        grid_rows: dict[str, dict[str, Any]] = {}
        for name, spec in grid.items():
            key, mdir, secs = _train_once(spark, product_cfg if spec.product else cfg, spec, feats, rdir, sel_train, trained)
            model = _loaded(spec, mdir)
            train_b, test_b = splits[spec.features]
            test_m, _ = _evaluate(model, tax, scored, test_b, secs)
            train_m, _ = _evaluate(model, tax, scored, train_b, secs)
            if key not in models:
                models[key] = model_record(model, mdir)
            grid_rows[name] = {"key": key, "test": {k: test_m[k] for k in F_KEYS},
                               "train": {k: train_m[k] for k in F_KEYS}}
        if svm:
            results[SVM_ROW], counts = _svm_row(feats["default"], sel_train, sel_test, tax, scored)
            perdoc.setdefault(SVM_ROW, []).append(counts)
        per_round.append(results)
        train_rounds.append(train_scores)
        model_rounds.append({"models": models, "keys": {n: _train_key(s, S if s.shards == AUTO else s.shards)
                                                        for n, (s, _) in table.items()}, "grid": grid_rows})
        impact_rounds.append(impact)
        write_json_atomic(out / f"{tag}.partial.json", {"rounds": per_round})

    blocks = {name: block for name, (_, block) in table.items()}
    if svm:
        blocks[SVM_ROW] = "sparkhc"
    doc: dict[str, Any] = {
        "corpus": corpus,
        "quick": quick,
        "protocol": info.protocol,
        "rounds": chosen,
        "epochs": cfg.train.epochs,
        "shards": S,
        "featurize": cfg.to_dict()["featurize"],
        "blocks": blocks,
        "per_round": per_round,
        "summary": _summarize(per_round),
        "train_per_round": train_rounds,
        "train_summary": _summarize(train_rounds),
        "models_per_round": model_rounds,
        "impact_per_round": impact_rounds,
        "levels": _level_summary(model_rounds, impact_rounds),
        "grid": _grid_summary(model_rounds, list(grid)),
        "significance": _significance(perdoc, per_round, S),
    }
    bf = _bf_table(bf_model) if bf_model is not None else None
    if bf is not None:
        doc["bf_weights"] = bf["levels"]
    doc["findings"] = findings(doc)
    doc["seconds"] = round(time.perf_counter() - t_all, 1)
    harness.write_json(out / f"{tag}.json", doc, indent=2, sort_keys=True, default=str)
    partial = out / f"{tag}.partial.json"
    if partial.exists():
        partial.unlink()
    harness.write_markdown(out / f"{tag}.md", _markdown(doc, tag))
    if bf is not None:
        harness.write_markdown(out / f"{tag}_bf_weights.md", bf["markdown"])
        _bf_plot(bf, out / f"{tag}_bf_weights.png", corpus)
    _figure2_plot(doc, out / f"{tag}_figure2.png")
    if grid:
        _grid_plot(doc, out / f"{tag}_bf_size.png")
    return doc


def _loaded(spec: Spec, mdir: Path) -> Any:
    model, _ = load_model(mdir)
    model.params.update(spec.params)  # the decoder is a decode-time choice
    return model


def _train_once(spark: SparkSession, cfg: Config, spec: Spec, feats: dict[str, Path], rdir: Path,
                sel_train: dict[str, Any], trained: dict[str, tuple[Path, float]]) -> tuple[str, Path, float]:
    """Train ``spec`` through ``pipelines.train`` unless a model with its key is in ``trained``;
    returns (key, model folder, training seconds)."""
    shards = cfg.train.shards if spec.shards == AUTO else spec.shards
    key = _train_key(spec, shards)
    if key not in trained:
        mdir = rdir / f"model-{key}"
        pinned = {"C": PAPER_C} if spec.model == "global" and not spec.product else {}
        syscfg = replace(cfg, model={**cfg.model, spec.model: {**cfg.model_params(spec.model), **pinned, **spec.params}},
                         train=replace(cfg.train, shards=shards))
        t0 = time.perf_counter()
        pipelines.train(spark, syscfg, feats[spec.features], mdir, model_name=spec.model, overwrite=True, **sel_train)
        trained[key] = (mdir, time.perf_counter() - t0)
        log.info("%s %s trained in %.1f s", rdir.name, key, trained[key][1])
    return (key, *trained[key])


# ------------------------------------------------------------------------------ evaluation
def _evaluate(model: Any, tax: Any, scored: np.ndarray, batch: Any, train_seconds: float
              ) -> tuple[dict[str, float], np.ndarray]:
    """Decode ``batch`` in one process (timed); every metric and the per-document counts."""
    t0 = time.perf_counter()
    pred = model.predict(batch)
    secs = time.perf_counter() - t0
    m, counts = _metrics(tax, scored, batch.labels or [], pred)
    m["model_size"] = float(model.model_size())
    m["decode_seconds"] = secs
    m["train_seconds"] = float(train_seconds)
    return m, counts


def _metrics(tax: Any, scored: np.ndarray, gold: list[list[str]], pred: list[list[str]]
             ) -> tuple[dict[str, float], np.ndarray]:
    """Every metric (MetricCounts) and the per-document EBF / hierarchical TP, FP, FN of the same
    label matrices, checked against the metrics (one definition of the numbers)."""
    from sparkhc.batch import label_matrix

    G, P = label_matrix(gold, tax), label_matrix(pred, tax)
    counts = MetricCounts(tax, scored)
    counts.add(G, P)
    m = {k: float(v) for k, v in counts.compute().items()}
    real = ~tax.virtual.copy()
    real[0] = False
    per_doc = per_document_counts(G, P, scored, real)
    if len(gold) and (abs(float(per_doc[:, 0].mean()) - m["EBF"]) > 1e-9
                      or abs(float(micro_f(per_doc[:, 1:].sum(axis=0))) - m["hF"]) > 1e-9):
        raise AssertionError("per-document counts disagree with MetricCounts (EBF / hF)")
    return m, per_doc


def _svm_row(feats: Path, sel_train: dict[str, Any], sel_test: dict[str, Any], tax: Any, scored: np.ndarray
             ) -> tuple[dict[str, float], np.ndarray]:
    """One-vs-rest LinearSVC (LIBLINEAR, C = 1) over the leaves (virtual /_self leaves for
    labels that stop at an internal node), decoded like FLAT: every positive leaf, else the best."""
    from sklearn.svm import LinearSVC

    from sparkhc.decoding import flat_select

    train = harness.local_split(feats, sel_train)
    test = harness.local_split(feats, sel_test)
    mtax = model_taxonomy(tax, train.labels or [])
    gold_sets = train.leaf_sets(mtax)
    leaves = [int(c) for c in mtax.leaves]
    t0 = time.perf_counter()
    scores = np.full((len(test), len(leaves)), -1e9, dtype=np.float64)
    for j, leaf in enumerate(leaves):
        y = np.array([leaf in set(m.tolist()) for m in gold_sets])
        if y.all() or not y.any():
            continue
        clf = LinearSVC(C=1.0, loss="squared_hinge", dual=True, max_iter=2000)
        clf.fit(train.X, y)
        scores[:, j] = clf.decision_function(test.X)
    secs = time.perf_counter() - t0
    chosen = flat_select(scores)
    pred = [mtax.to_labels([leaves[j] for j in np.flatnonzero(row)]) for row in chosen]
    m, counts = _metrics(tax, scored, test.labels or [], pred)
    m["train_seconds"] = secs
    return m, counts


def _summarize(per_round: list[dict[str, dict[str, float]]]) -> dict[str, dict[str, list[float]]]:
    out: dict[str, dict[str, list[float]]] = {}
    for system in per_round[0]:
        out[system] = {}
        for k in per_round[0][system]:
            vals = np.array([r[system][k] for r in per_round], dtype=float)
            out[system][k] = [float(vals.mean()), float(vals.std(ddof=1)) if len(vals) > 1 else 0.0]
    return out


# ------------------------------------------------------------------------------ model statistics
def weight_levels(model: Any, tol: float = 1e-7) -> dict[str, Any]:
    """Non-trivial weights (``|w| > tol``, the paper's size) of a FLAT / TREE / GT model, per
    classifier and per taxonomy level of the classifier's node (the child of the edge; a FLAT
    column's leaf), from the weights the model predicts with.

    Returns ``per_column`` (count per column of ``W``), ``nodes`` (the node of each column),
    ``levels`` ({depth: [columns, weights]}), ``bias`` (weights in the bias row, included in the
    levels), ``bf`` (branching weights) and ``other`` (the rest of :meth:`model_size`)."""
    arrays = model.averaged_arrays() if hasattr(model, "averaged_arrays") else model.get_state().arrays
    W = np.asarray(arrays["W"])
    tax = model.taxonomy
    nz = np.abs(W) > tol
    per_column = nz.sum(axis=0).astype(np.int64)
    if model.name == "flat" and W.shape[1] == len(tax.leaves):
        nodes = np.asarray(tax.leaves, dtype=np.int64)  # FLAT: column j is leaf taxonomy.leaves[j]
    elif model.name != "flat" and W.shape[1] == tax.n_edges:
        nodes = np.arange(1, tax.n_nodes, dtype=np.int64)  # column c - 1: the edge into node c
    else:
        raise ValueError(f"model {model.name!r}: W has {W.shape[1]} columns; expected the {tax.n_edges} edges "
                         f"or the {len(tax.leaves)} leaves of its taxonomy")
    depth = np.asarray(tax.depth)[nodes]
    levels = {int(d): [int((depth == d).sum()), int(per_column[depth == d].sum())] for d in np.unique(depth)}
    bias = int(nz[model.n_features:].sum()) if W.shape[0] > model.n_features else 0
    bf = int(np.count_nonzero(np.abs(np.asarray(arrays["bf"])) > tol)) if "bf" in arrays else 0
    return {"per_column": per_column.tolist(), "nodes": nodes.tolist(), "levels": levels, "bias": bias, "bf": bf,
            "other": int(model.model_size(tol)) - int(per_column.sum()) - bf}


def edge_impact(model: Any, batch: Any) -> dict[str, float]:
    """Figure 2 (d-f): the mean absolute score of each edge over the documents of ``batch``,
    averaged over the edges of each level of the child node ({depth: mean})."""
    _, scores = model.decode(batch, return_scores=True)
    tax = model.taxonomy
    S = np.abs(np.asarray(scores, dtype=np.float64)[:, 1:])  # column c: the edge into node c
    per_edge = S.mean(axis=0) if len(S) else np.zeros(tax.n_edges)
    depth = np.asarray(tax.depth)[1:]
    return {str(int(d)): float(per_edge[depth == d].mean()) for d in np.unique(depth)}


def model_record(model: Any, mdir: Path) -> dict[str, Any]:
    """What the page reports of a trained model: size, weights per level, training mistakes
    (the ``updates`` counter of every epoch, from the saved metadata)."""
    meta = read_metadata(mdir)
    wl = weight_levels(model)
    return {"size": int(model.model_size()), "levels": wl["levels"], "bias": wl["bias"], "bf": wl["bf"],
            "other": wl["other"], "edge_nodes": [str(model.taxonomy.names[i]) for i in wl["nodes"]],
            "edge_depth": np.asarray(model.taxonomy.depth)[wl["nodes"]].tolist(), "edge_weights": wl["per_column"],
            "updates": [float(e.get("updates", math.nan)) for e in meta.get("training", {}).get("epoch_log", [])]}


def _level_summary(model_rounds: list[dict[str, Any]], impact_rounds: list[dict[str, dict[str, float]]]
                   ) -> dict[str, dict[str, Any]]:
    """Per system of the table: mean over rounds of the weights per edge at each level, and of the
    mean absolute edge score (``impact``); ``edges``: each edge's depth and its non-trivial weights
    (mean over the rounds whose model has the edge: a round's model taxonomy holds the labels of its
    training part), the data of the Figure 2 (a-c) test."""
    out: dict[str, dict[str, Any]] = {}
    for name in model_rounds[0]["keys"]:
        size: dict[str, list[float]] = {}
        recs = [mr["models"][mr["keys"][name]] for mr in model_rounds]
        for rec in recs:
            for d, (cols, w) in rec["levels"].items():
                size.setdefault(str(d), []).append(w / cols)
        out[name] = {"weights_per_edge": {d: float(np.mean(v)) for d, v in size.items()}}
        if all("edge_nodes" in rec for rec in recs):
            depth: dict[str, int] = {}
            weights: dict[str, list[float]] = {}
            for rec in recs:
                for node, d, w in zip(rec["edge_nodes"], rec["edge_depth"], rec["edge_weights"], strict=True):
                    depth[node] = int(d)
                    weights.setdefault(node, []).append(float(w))
            out[name]["edges"] = {"nodes": list(depth), "depth": list(depth.values()),
                                  "weights": [float(np.mean(weights[n])) for n in depth]}
        if all(name in ir for ir in impact_rounds):
            imp: dict[str, list[float]] = {}
            for ir in impact_rounds:
                for d, v in ir[name].items():
                    imp.setdefault(d, []).append(v)
            out[name]["impact"] = {d: float(np.mean(v)) for d, v in imp.items()}
    return out


def _grid_summary(model_rounds: list[dict[str, Any]], names: list[str]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for name in names:
        recs = [mr["models"][mr["grid"][name]["key"]] for mr in model_rounds]
        rows = [mr["grid"][name] for mr in model_rounds]
        levels: dict[str, list[float]] = {}
        for rec in recs:
            for d, (_cols, w) in rec["levels"].items():
                levels.setdefault(str(d), []).append(w)
        out[name] = {
            "size": _ms([rec["size"] for rec in recs]),
            "levels": {d: float(np.mean(v)) for d, v in levels.items()},
            "bf": float(np.mean([rec["bf"] for rec in recs])),
            "updates_total": _ms([float(np.sum(rec["updates"])) for rec in recs]),
            "updates_last": _ms([float(rec["updates"][-1]) if rec["updates"] else math.nan for rec in recs]),
            "updates": np.mean([rec["updates"] for rec in recs], axis=0).tolist(),
            "test": {k: _ms([r["test"][k] for r in rows]) for k in F_KEYS},
            "train": {k: _ms([r["train"][k] for r in rows]) for k in F_KEYS},
        }
    return out


def _ms(vals: list[float]) -> list[float]:
    a = np.asarray(vals, dtype=float)
    return [float(a.mean()), float(a.std(ddof=1)) if a.size > 1 else 0.0]


# ------------------------------------------------------------------------------ significance
def _significance(perdoc: dict[str, list[np.ndarray]], per_round: list[dict[str, dict[str, float]]],
                  shards: int) -> list[dict[str, Any]]:
    """For every pair of :data:`PAIRS` present: the sign test on per-document EBF and the
    approximate randomization test on hF, both over all evaluated documents (every document is
    tested once: the test folds are disjoint), and the paired t-test over folds (hF, EBF)."""
    out = []
    for a0, b0 in PAIRS:
        a, b = _display(a0, shards), _display(b0, shards)
        if a not in perdoc or b not in perdoc or a == b:
            continue
        A, B = np.concatenate(perdoc[a]), np.concatenate(perdoc[b])
        out.append({
            "system": a, "baseline": b,
            "EBF_difference": float(A[:, 0].mean() - B[:, 0].mean()),
            "sign_EBF": sign_test(A[:, 0], B[:, 0]),
            "ar_hF": approximate_randomization(A[:, 1:], B[:, 1:], micro_f, shuffles=9999, seed=0),
            "t_hF": paired_t_over_folds([r[a]["hF"] for r in per_round], [r[b]["hF"] for r in per_round]),
            "t_EBF": paired_t_over_folds([r[a]["EBF"] for r in per_round], [r[b]["EBF"] for r in per_round]),
        })
    return out


def _sig(doc: dict[str, Any], a: str, b: str) -> dict[str, Any] | None:
    for s in doc["significance"]:
        if s["system"] == a and s["baseline"] == b:
            return s
    return None


def _p(p: float) -> str:
    if p is None or not math.isfinite(p):
        return "—"
    return f"{p:.1e}" if p < 1e-3 else f"{p:.3f}"


def _sig_cell(s: dict[str, Any] | None) -> str:
    if s is None:
        return "—"
    cell = f"sign test EBF p = {_p(s['sign_EBF']['p'])}; AR hF p = {_p(s['ar_hF']['p'])}"
    if s["t_hF"]["folds"] > 1:
        cell += f"; t-test over folds hF p = {_p(s['t_hF']['p'])}"
    return cell


# ------------------------------------------------------------------------------ findings
def _parts(s: dict[str, Any] | None, dh: float, de: float | None = None, sign: int = 1) -> list[str]:
    """The verdicts of the parts of :func:`_tested` (hF; with ``de`` EBF too)."""
    if s is None:
        return [verdict(sign, dh, None)]
    return [verdict(sign, dh, s["ar_hF"]["p"])] + ([] if de is None else [verdict(sign, de, s["sign_EBF"]["p"])])


def _tested(s: dict[str, Any] | None, dh: float, de: float | None = None, sign: int = 1) -> str:
    """The verdict of a claim tested on this pair (:func:`experiments.significance.verdict`): on hF
    by the approximate randomization test, and, with ``de``, on EBF by the sign test too (both parts
    combined). ``dh`` / ``de``: the differences oriented the claim's way; ``sign`` 0: a claim of parity."""
    return combine(_parts(s, dh, de, sign))


def _mean(doc: dict[str, Any], system: str, key: str, part: str = "summary") -> float:
    return float(doc[part][system][key][0])


def _diff(doc: dict[str, Any], a: str, b: str, key: str) -> tuple[float, float]:
    """Mean and sample std over rounds of ``a - b`` on metric ``key``."""
    d = np.array([r[a][key] - r[b][key] for r in doc["per_round"]], dtype=float)
    return float(d.mean()), float(d.std(ddof=1)) if d.size > 1 else 0.0


def _pm(mean: float, std: float, n: int, scale: float = 100.0, digits: int = 2, sign: bool = True) -> str:
    fmt = f"{{:{'+' if sign else ''}.{digits}f}}"
    s = fmt.format(scale * mean)
    return s + (f" ± {scale * std:.{digits}f}" if n > 1 else "")


def findings(doc: dict[str, Any]) -> list[dict[str, str]]:
    """The findings table: the paper's claims (Sect. 5-6, Tables 1-2, Figures 2-3) against this
    run, each with its significance and a verdict by the one rule of every results page
    (:func:`experiments.significance.verdict`: a tested claim is reproduced / a tie / contradicted by
    the approximate randomization test on hF, and the sign test on EBF where the claim names it, at
    p < 0.05; a claim no test applies to, a size or a figure's shape, holds / holds in part / does not
    hold, marked untested). Paper-faithful rows compare the paper-faithful systems; sparkhc rows the
    run configuration and extensions."""
    S = int(doc["shards"])
    n = len(doc["per_round"])
    summ = doc["summary"]
    rows: list[dict[str, str]] = []

    def add(block: str, finding: str, paper: str, ours: str, sig: str, v: str) -> None:
        rows.append({"block": block, "finding": finding, "paper": paper, "ours": ours, "significance": sig,
                     "verdict": v})

    paper = [s for s in PAPER if s in summ]
    if {"DP-GT-BF", "FLAT", "DP-ALL", "DP-GT"} <= set(paper):
        best = {k: max(paper, key=lambda s, k=k: float(summ[s][k][0])) for k in TABLE_KEYS}  # type: ignore[misc]
        wins = {s: sum(1 for v in best.values() if v == s) for s in paper}
        top = max(wins, key=lambda s: wins[s])
        # one test of the claim: DP-GT-BF against the best of the other paper systems on hF
        runner = max((s for s in paper if s != "DP-GT-BF"), key=lambda s: float(summ[s]["hF"][0]))
        s = _sig(doc, "DP-GT-BF", runner)
        dh, sh = _diff(doc, "DP-GT-BF", runner, "hF")
        add("paper", "DP-GT-BF performs best", "best in 5 of the 12 measures (the most of any system)",
            f"DP-GT-BF − {runner} (the best other system on hF) hF {_pm(dh, sh, n)}; DP-GT-BF best in "
            f"{wins.get('DP-GT-BF', 0)} of 12 measures, most: {top} ({wins[top]})",
            _sig_cell(s), _tested(s, dh))
        for base in ("FLAT", "DP-ALL", "DP-GT"):
            s = _sig(doc, "DP-GT-BF", base)
            dh, sh = _diff(doc, "DP-GT-BF", base, "hF")
            de, se = _diff(doc, "DP-GT-BF", base, "EBF")
            add("paper", f"DP-GT-BF significantly better than {base}", "p < 0.01",
                f"ΔhF {_pm(dh, sh, n)}, ΔEBF {_pm(de, se, n)}", _sig_cell(s), _tested(s, dh, de))
        better = [k for k in F_KEYS if summ["DP-GT-BF"][k][0] > summ["DP-GT"][k][0]]
        s = _sig(doc, "DP-GT-BF", "DP-GT")
        add("paper", "Branching features consistently improve the F measures (DP-GT-BF vs DP-GT)",
            "all F measures up", f"{len(better)} of 4 up ({', '.join(better) or 'none'})", _sig_cell(s),
            _tested(s, _diff(doc, "DP-GT-BF", "DP-GT", "hF")[0], _diff(doc, "DP-GT-BF", "DP-GT", "EBF")[0]))
    if {"FLAT", "LS-ALL"} <= set(paper):
        k = sum(1 for m in TABLE_KEYS if summ["FLAT"][m][0] > summ["LS-ALL"][m][0])
        add("paper", "Top-down local search is generally outperformed by FLAT (FLAT vs LS-ALL)",
            "FLAT ahead in most measures", f"FLAT ahead in {k} of 12", _sig_cell(_sig(doc, "FLAT", "LS-ALL")),
            _tested(_sig(doc, "FLAT", "LS-ALL"), _diff(doc, "FLAT", "LS-ALL", "hF")[0]))
    if {"DP-ALL", "LS-ALL"} <= set(paper):
        k = sum(1 for m in TABLE_KEYS if summ["DP-ALL"][m][0] > summ["LS-ALL"][m][0])
        add("paper", "DP-ALL outperforms LS-ALL", "in 11 of 12 measures", f"in {k} of 12",
            _sig_cell(_sig(doc, "DP-ALL", "LS-ALL")),
            _tested(_sig(doc, "DP-ALL", "LS-ALL"), _diff(doc, "DP-ALL", "LS-ALL", "hF")[0]))
    if {"DP-SIB", "LS-ALL", "LS-SIB"} <= set(paper):
        others = [s for s in paper if s != "DP-SIB"]
        low = [m for m in ("EBF", "hF") if summ["DP-SIB"][m][0] < min(summ[s][m][0] for s in others)]
        gap = summ["DP-SIB"]["hF"][0] - np.mean([summ[s]["hF"][0] for s in others])
        dls, sls = _diff(doc, "LS-ALL", "LS-SIB", "hF")
        add("paper", "DP-SIB performs extremely poorly, while LS-ALL and LS-SIB perform similarly",
            "DP-SIB far below the rest; LS-ALL ≈ LS-SIB",
            f"DP-SIB the lowest on {' and '.join(low) if low else 'neither EBF nor hF'} (hF {100 * gap:+.2f} vs "
            f"the mean of the others); LS-ALL − LS-SIB hF {_pm(dls, sls, n)}",
            _sig_cell(_sig(doc, "DP-ALL", "DP-SIB")) + "; LS-ALL vs LS-SIB: " + _sig_cell(_sig(doc, "LS-ALL", "LS-SIB")),
            combine(_parts(_sig(doc, "DP-ALL", "DP-SIB"), _diff(doc, "DP-ALL", "DP-SIB", "hF")[0])
                    + _parts(_sig(doc, "LS-ALL", "LS-SIB"), dls, sign=0)))
    if {"DP-ALL", "DP-GT-BF"} <= set(paper):
        dh, sh = _diff(doc, "DP-ALL", "DP-GT-BF", "hF")
        s = _sig(doc, "DP-GT-BF", "DP-ALL")
        add("paper", "DP-ALL is competitive with DP-GT-BF (but below it)", "close, DP-GT-BF ahead",
            f"DP-ALL − DP-GT-BF hF {_pm(dh, sh, n)}", _sig_cell(s), _tested(s, -dh))
    if {"DP-ALL", "DP-GT", "DP-GT-BF"} <= set(paper):
        ra = summ["DP-GT"]["model_size"][0] / summ["DP-ALL"]["model_size"][0]
        rb = summ["DP-GT-BF"]["model_size"][0] / summ["DP-ALL"]["model_size"][0]
        add("paper", "Global training gives much smaller models than DP-ALL", "GT models much smaller",
            f"size / DP-ALL: DP-GT {ra:.2f}, DP-GT-BF {rb:.2f}", "—",
            untested(2 if max(ra, rb) < 0.8 else (1 if min(ra, rb) < 1 else 0), 2))
        rbf = summ["DP-GT-BF"]["model_size"][0] / summ["DP-GT"]["model_size"][0]
        add("paper", "Branching features make the model smaller (DP-GT-BF vs DP-GT)", "smaller",
            f"size DP-GT-BF / DP-GT {rbf:.2f} ({summ['DP-GT-BF']['model_size'][0]:,.0f} vs "
            f"{summ['DP-GT']['model_size'][0]:,.0f})", "—", untested(int(rbf < 1)))
    if {"DP-GT-BF", "FLAT"} <= set(paper):
        r = summ["DP-GT-BF"]["model_size"][0] / summ["FLAT"]["model_size"][0]
        add("paper", "DP-GT-BF is smaller than FLAT", "16 % smaller", f"{100 * (r - 1):+.0f} %", "—",
            untested(int(r < 1)))
    tr = doc.get("train_summary", {})
    if {"FLAT", "DP-ALL", "DP-GT-BF"} <= set(tr):
        # "much higher": at least one point on both hF and EBF, for each of FLAT and DP-ALL; and the
        # claim is about the others fitting the training data, so DP-GT-BF must fit it itself
        # (training hF >= FITS): a gap made by DP-GT-BF underfitting is not the paper's overfitting
        gaps = {s: min(tr[s][k][0] - tr["DP-GT-BF"][k][0] for k in ("hF", "EBF")) for s in ("FLAT", "DP-ALL")}
        fits = tr["DP-GT-BF"]["hF"][0] >= FITS
        add("paper", "Table 2: FLAT and DP-ALL score much higher on the training data than DP-GT-BF (overfitting)",
            "both much higher", "training hF FLAT {:.2f}, DP-ALL {:.2f}, DP-GT-BF {:.2f}".format(
                *(100 * tr[s]["hF"][0] for s in ("FLAT", "DP-ALL", "DP-GT-BF")))
            + ("" if fits else f" (DP-GT-BF underfits: training hF below {100 * FITS:.0f})"), "—",
            untested(sum(g >= 0.01 for g in gaps.values()) if fits else min(1, sum(g >= 0.01 for g in gaps.values())), 2))
    lv = doc.get("levels", {})
    if {"DP-ALL", "DP-GT-BF"} <= set(lv):
        trend = {s: _depth_trend(lv[s]) for s in ("DP-ALL", "DP-GT-BF")}
        add("paper", "Figure 2 (a-c): the higher the level (nearer the root), the more non-trivial weights per edge",
            "DP-ALL and DP-GT-BF alike, decreasing with depth",
            "per-edge weights by depth: " + "; ".join(
                f"{s} " + " / ".join(f"{v:,.0f}" for _, v in sorted(lv[s]['weights_per_edge'].items(),
                                                                      key=lambda kv: int(kv[0])))
                + f" (Spearman ρ {t['rho']:+.2f} over {t['edges']} edges)" for s, t in trend.items()),
            "; ".join(f"{s}: Spearman p = {_p(t['p'])}" for s, t in trend.items()),
            combine([verdict(1, -t["rho"], t["p"]) for t in trend.values()]))
    if {"DP-SIB", "DP-GT-BF"} <= set(lv):
        sib, gt = lv["DP-SIB"]["weights_per_edge"], lv["DP-GT-BF"]["weights_per_edge"]
        ds = sorted(int(d) for d in sib if d in gt)
        top = gt[str(ds[0])] < sib[str(ds[0])]
        below = [d for d in ds[1:] if gt[str(d)] > sib[str(d)]]
        add("paper", "Figure 2: against DP-SIB, DP-GT-BF has more compact top-level edges and larger ones below",
            "compact at depth 1, larger below",
            f"depth 1: DP-GT-BF {gt[str(ds[0])]:,.0f} vs DP-SIB {sib[str(ds[0])]:,.0f} weights per edge; larger "
            f"below at {len(below)} of {len(ds) - 1} depths", "—",
            untested(int(top) + (2 if len(below) == len(ds) - 1 else int(bool(below))), 3))
    if all(s in lv and "impact" in lv[s] for s in ("DP-ALL", "DP-GT-BF")):
        ratio = {s: _top_over_bottom(lv[s]["impact"]) for s in FIGURE2 if s in lv and "impact" in lv[s]}
        smallest = min(ratio, key=lambda s: ratio[s])
        add("paper", "Figure 2 (d-f): higher-level edges have larger impact, least so in DP-GT-BF",
            "impact falls with depth; flattest in DP-GT-BF",
            "mean absolute edge score, depth 1 / deepest depth: " + ", ".join(f"{s} {v:.2f}" for s, v in ratio.items()), "—",
            untested(int(all(v > 1 for v in ratio.values())) + int(smallest == "DP-GT-BF"), 2))
    if "bf_weights" in doc:
        mean_rows = {k: v for k, v in doc["bf_weights"].items() if k.startswith("depth")}
        neg = all(x < 0 for v in mean_rows.values() for x in v)
        mono = sum(1 for v in mean_rows.values() if all(v[i] >= v[i + 1] for i in range(len(v) - 1)))
        add("paper", "Figure 3: branching weights (mean over parents) all negative, penalty growing with k",
            "all negative, monotone", f"all negative: {'yes' if neg else 'no'}; monotone in {mono} of "
            f"{len(mean_rows)} depths (see _bf_weights.md)", "—",
            untested(int(neg) + int(mono == len(mean_rows)), 2))

    # sparkhc: run configuration and extensions
    for base in ("FLAT", "DP-ALL"):
        a = _display(f"{base} (auto shards)", S)
        if a in summ and base in summ:
            dh, sh = _diff(doc, a, base, "hF")
            add("sparkhc", f"{base} mixed over {S} shards instead of trained on all data", "— (paper: all data)",
                f"ΔhF {_pm(dh, sh, n)}", _sig_cell(_sig(doc, a, base)), "—")
    a, b = _display("DP-GT-BF (auto shards)", S), _display("DP-GT (auto shards)", S)
    if a in summ and b in summ:
        dh, sh = _diff(doc, a, b, "hF")
        r = summ[a]["model_size"][0] / summ[b]["model_size"][0]
        add("sparkhc", f"Branching features at {S} shards", "better and smaller",
            f"ΔhF {_pm(dh, sh, n)}; size ratio {r:.2f}", _sig_cell(_sig(doc, a, b)), "—")
    for a, base in (("DP-GT-BF-CA", "DP-GT-BF"), ("DP-GT-BF-CA", "DP-ALL"), ("DP-GT-BF-CA", SVM_ROW),
                    (DEFAULTS_ROW, "DP-GT-BF"), (DEFAULTS_ROW, "DP-GT-BF-CA"), (DEFAULTS_ROW, SVM_ROW)):
        if a in summ and base in summ:
            dh, sh = _diff(doc, a, base, "hF")
            what = ("DP-GT-BF-CA (C = 1, 10 epochs, one margin)" if a == "DP-GT-BF-CA"
                    else "sparkhc defaults (C and epochs chosen on validation, calibration)")
            add("sparkhc", f"{what}, {S} shards, vs {base}", "—",
                f"ΔhF {_pm(dh, sh, n)}", _sig_cell(_sig(doc, a, base)), "—")
    return rows


def _depth_trend(level: dict[str, Any]) -> dict[str, Any]:
    """Spearman's rank correlation of an edge's depth with its non-trivial weights over the edges of
    a model (``level["edges"]``, mean over rounds) and its two-sided p: the test of "the deeper the
    edge, the fewer its weights" (a negative ρ); ρ and p are NaN with fewer than three edges or one depth."""
    from scipy.stats import spearmanr

    edges = level.get("edges", {"depth": [], "weights": []})  # no per-edge data (an older results file)
    depth, weights = np.asarray(edges["depth"]), np.asarray(edges["weights"])
    if depth.size < 3 or np.unique(depth).size < 2 or np.unique(weights).size < 2:
        return {"rho": math.nan, "p": math.nan, "edges": int(depth.size)}
    res = spearmanr(depth, weights)
    return {"rho": float(res.statistic), "p": float(res.pvalue), "edges": int(depth.size)}


def _top_over_bottom(d: dict[str, float]) -> float:
    vals = [v for _, v in sorted(d.items(), key=lambda kv: int(kv[0]))]
    return float(vals[0] / vals[-1]) if vals and vals[-1] > 0 else math.nan


# ------------------------------------------------------------------------------ page
def _metric_table(summary: dict[str, Any], names: list[str], cols: list[str]) -> list[str]:
    lines = ["| system | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for system in names:
        vals = summary[system]
        cells = []
        for k in cols:
            if k not in vals:
                cells.append("—")
                continue
            mean, std = vals[k]
            if k in TABLE_KEYS:
                cells.append(f"{100 * mean:.2f}" + (f" ± {100 * std:.2f}" if std else ""))
            elif k == "model_size":
                cells.append(f"{mean:,.0f}")
            else:
                cells.append(f"{mean:.2f}")
        lines.append(f"| {system} | " + " | ".join(cells) + " |")
    return lines


def _markdown(doc: dict[str, Any], tag: str) -> str:
    corpus, S, n = doc["corpus"], doc["shards"], len(doc["per_round"])
    spread = "mean ± sample std over the folds" if n > 1 else "one split, no spread"
    lines = [
        f"# Murawaki 2013 comparison on {corpus}",
        "",
        "Command:",
        "",
        "```",
        f"sparkhc experiment murawaki --corpus {corpus} --data-dir ../shared/data",
        "```",
        "",
        f"Protocol: {doc['protocol']}; rounds {doc['rounds']}; {doc['epochs']} epochs; features "
        f"{doc['featurize']}. Wall time {doc['seconds']} s (local mode, {S} task slots). Values in %; "
        f"{spread}.",
        "",
        "Paper-faithful rows use the paper's settings (Sect. 5): FLAT and the TREE edge classifiers "
        "trained on all the training data (one shard), DP-GT / DP-GT-BF trained by Alg. 5 "
        "(prediction-based updates, cost 1 − example F, no bias) mixed over 10 shards, R = 3. "
        f"sparkhc rows: the same systems mixed over the run's {S} shards (`train.shards = 0`, the task "
        "slots) and sparkhc's extensions: DP-GT-BF-CA (cost-augmented updates, margin 1, one margin for "
        "every edge, bias 0.3, at this page's pinned C = 1 and 10 epochs; not the product's current "
        "defaults. Its settings were first chosen on test scores and later re-derived on validation data "
        "carved out of the training parts, which picked the same: docs/benchmarks.md \"The default model "
        "re-derived on validation data\"); **sparkhc defaults**, the product's shipped configuration "
        "(what `sparkhc train` gives: C and the epochs chosen on validation bands of the training part, "
        "label-frequency-aware margins, calibration; nothing chosen on these test scores); and "
        "LIBLINEAR one-vs-rest.",
        "",
        "## Findings",
        "",
        "Significance: the extracted text of the paper reports p < 0.01 without naming its test; with one "
        "train/test split its test was necessarily over documents. Here: the two-sided exact **sign test** "
        "over documents on per-document example-based F (ties dropped), the paired **approximate "
        "randomization** test over documents on hF (9,999 shuffles, seed 0; every document of every "
        "test fold once)" + (", and the two-sided **paired t-test over the folds** on hF" if n > 1 else "")
        + " (`experiments/significance.py`).",
        "",
        VERDICT_RULE,
        "",
        "Re-judged in issue 55: \"DP-GT-BF performs best\" is one test, DP-GT-BF against the best other "
        "paper system on hF (approximate randomization), where any single best measure used to give *holds in "
        "part*; Figure 2 (a-c) is Spearman's rank correlation of each edge's depth with its non-trivial "
        "weights, where the first depth above the last used to be enough; a claim whose parts differ is "
        "*mixed* (a tie and a contradiction used to give *contradicted*).",
        "",
        "| | finding | paper | ours | significance | verdict |",
        "|---|---|---|---|---|---|",
    ]
    for f in doc["findings"]:
        lines.append(f"| {f['block']} | {f['finding']} | {f['paper']} | {f['ours']} | {f['significance']} | "
                     f"{f['verdict']} |")
    lines += ["", _headline(doc), ""]

    cols = TABLE_KEYS + ["model_size", "decode_seconds", "train_seconds"]
    paper = [s for s, b in doc["blocks"].items() if b == "paper"]
    ext = [s for s, b in doc["blocks"].items() if b == "sparkhc"]
    lines += ["## Table 1: test scores", "", "Paper-faithful:", ""]
    lines += _metric_table(doc["summary"], paper, cols)
    lines += ["", f"sparkhc ({S} shards, extensions):", ""]
    lines += _metric_table(doc["summary"], ext, cols)
    lines += ["", "model_size = number of weights with |w| > 1e-7 (W, bias row and branching weights); "
              "decode_seconds = single-process decoding of the test part; train_seconds = Spark training wall "
              "time (SVM: scikit-learn).", ""]

    lines += ["## Significance tests", "",
              "| system | baseline | ΔEBF | sign test on EBF (wins / losses / ties, p) | ΔhF, AR p |"
              + (" t-test over folds, hF p | t-test over folds, EBF p |" if n > 1 else ""),
              "|---|---|---|---|---|" + ("---|---|" if n > 1 else "")]
    for s in doc["significance"]:
        st, ar = s["sign_EBF"], s["ar_hF"]
        row = (f"| {s['system']} | {s['baseline']} | {100 * s['EBF_difference']:+.2f} | {st['wins']} / "
               f"{st['losses']} / {st['ties']}, p = {_p(st['p'])} | {100 * ar['difference']:+.2f}, p = {_p(ar['p'])} |")
        if n > 1:
            row += f" {_p(s['t_hF']['p'])} | {_p(s['t_EBF']['p'])} |"
        lines.append(row)
    lines += ["", "ΔhF of the AR test is over the pooled documents of all test folds (micro over the pool).", ""]

    tr = doc["train_summary"]
    names = paper + [s for s in ext if s in tr]
    lines += ["## Table 2: scores on the training data", "",
              "The same models decoded on the documents they were trained on (the paper's Table 2).", ""]
    lines += _metric_table(tr, [s for s in names if s in tr], TABLE_KEYS)
    lines += ["", "Generalization gap (training − test), F measures:", "",
              "| system | " + " | ".join(F_KEYS) + " |", "|---" * (len(F_KEYS) + 1) + "|"]
    for s in names:
        if s in tr and s in doc["summary"]:
            lines.append(f"| {s} | " + " | ".join(
                f"{100 * (tr[s][k][0] - doc['summary'][s][k][0]):+.2f}" for k in F_KEYS) + " |")
    lines += [""]

    lv = doc["levels"]
    depths = sorted({int(d) for v in lv.values() for d in v["weights_per_edge"]})
    lines += ["## Figure 2: edge size and impact per level", "",
              f"![Figure 2]({tag}_figure2.png)", "",
              "Size: mean number of non-trivial weights (|w| > 1e-7, bias row included) per edge classifier, "
              "edges grouped by the depth of the child node (FLAT: per leaf classifier, by the leaf's depth). "
              "Impact: the mean absolute edge score over the test documents, averaged over the edges of the "
              "level (the paper's Figure 2 d-f). Means over rounds.", "",
              "| system | " + " | ".join(f"size d{d}" for d in depths) + " | "
              + " | ".join(f"impact d{d}" for d in depths) + " |",
              "|---" * (2 * len(depths) + 1) + "|"]
    for s in names:
        if s not in lv:
            continue
        w, imp = lv[s]["weights_per_edge"], lv[s].get("impact", {})
        lines.append(f"| {s} | " + " | ".join(f"{w[str(d)]:,.0f}" if str(d) in w else "—" for d in depths) + " | "
                     + " | ".join(f"{imp[str(d)]:.3f}" if str(d) in imp else "—" for d in depths) + " |")
    lines += [""]
    if doc["grid"]:
        lines += _investigation(doc, tag)
    if "bf_weights" in doc:
        lines += ["## Figure 3: branching weights", "",
                  f"The learned branching weights of the paper-faithful DP-GT-BF (last round): "
                  f"`{tag}_bf_weights.md`, `{tag}_bf_weights.png`.", ""]
    return "\n".join(lines) + "\n"


def _headline(doc: dict[str, Any]) -> str:
    """The paper's headline ("DP-GT-BF performs best, DP-ALL is competitive with it; branching
    features improve F and shrink the model") in one plain paragraph, from the numbers."""
    summ = doc["summary"]
    if not {"DP-GT-BF", "DP-ALL", "DP-GT", "FLAT"} <= set(summ):
        return ""
    n = len(doc["per_round"])
    paper = [s for s, b in doc["blocks"].items() if b == "paper"]
    best_hf = max(paper, key=lambda s: float(summ[s]["hF"][0]))
    best_ebf = max(paper, key=lambda s: float(summ[s]["EBF"][0]))
    dh, sh = _diff(doc, "DP-GT-BF", "DP-ALL", "hF")
    s = _sig(doc, "DP-GT-BF", "DP-ALL")
    p = s["ar_hF"]["p"] if s else math.nan
    judged = {f["finding"]: f["verdict"] for f in doc.get("findings", findings(doc))}
    verdict = (f"is judged by its findings: \"DP-GT-BF performs best\" {judged.get('DP-GT-BF performs best', '—')}, "
               f"\"DP-ALL is competitive with DP-GT-BF (but below it)\" "
               f"{judged.get('DP-ALL is competitive with DP-GT-BF (but below it)', '—')}")
    r = summ["DP-GT-BF"]["model_size"][0] / summ["DP-GT"]["model_size"][0]
    txt = (f"**What holds here.** The headline \"DP-GT-BF performs best, DP-ALL is competitive with it\" {verdict} "
           f"(DP-GT-BF − DP-ALL hF {_pm(dh, sh, n)} points, AR p = {_p(p)}; the best paper-faithful hF is "
           f"{best_hf}'s, the best EBF {best_ebf}'s). With the paper's update rule branching features "
           f"{'shrink' if r < 1 else 'grow'} the model (DP-GT-BF / DP-GT size {r:.2f} at 10 shards)")
    g = doc.get("grid", {})
    S = doc["shards"]
    ca = [(k, g.get(f"cost-augmented, BF, {k} shards, default"), g.get(f"cost-augmented, no BF, {k} shards, default"))
          for k in sorted({1, int(S), PAPER_SHARDS})]
    ratios = [f"{a['size'][0] / b['size'][0]:.2f} at {k}" for k, a, b in ca if a is not None and b is not None]
    txt += (f"; under cost-augmented updates the ratio is {' / '.join(ratios)} shards (investigation below)."
            if ratios else ".")
    if "DP-GT-BF-CA" in summ:
        d2, s2 = _diff(doc, "DP-GT-BF-CA", "DP-ALL", "hF")
        s3 = _sig(doc, "DP-GT-BF-CA", "DP-ALL")
        txt += (f" DP-GT-BF-CA (C = 1, 10 epochs) − DP-ALL hF = {_pm(d2, s2, n)} points"
                + (f" (AR p = {_p(s3['ar_hF']['p'])})." if s3 else "."))
    return txt


def _investigation(doc: dict[str, Any], tag: str) -> list[str]:
    g = doc["grid"]
    n = len(doc["per_round"])
    depths = sorted({int(d) for v in g.values() for d in v["levels"]})
    lines = ["## Investigation: why branching features change the model size", "",
             f"![sizes]({tag}_bf_size.png)", "",
             "Varied one at a time on the same folds: the update rule (Alg. 5's prediction-based update, "
             "or cost-augmented with margin 1 and no bias), branching features on/off, the number of shards "
             "(1 = serial training on all data; the run's; the paper's 10), and the document features "
             "(sparkhc's l2-normalized log-tf-idf, or the paper's kind: raw term frequencies, not "
             "normalized). Sizes are weights with |w| > 1e-7 (mean over rounds), per depth of the edge's "
             "child node; 'mistakes' is the number of training examples updated (Alg. 5 updates whenever "
             "the decoded set differs from the gold one), summed over the 10 epochs and in the last epoch.",
             "",
             "| update, BF, shards, features | size | "
             + " | ".join(f"weights d{d}" for d in depths)
             + " | BF weights | mistakes (all epochs) | mistakes (last epoch) | test hF | train hF |",
             "|---" * (len(depths) + 8) + "|"]
    for name, v in g.items():
        lines.append(
            f"| {name} | {v['size'][0]:,.0f} | "
            + " | ".join(f"{v['levels'][str(d)]:,.0f}" if str(d) in v["levels"] else "—" for d in depths)
            + f" | {v['bf']:.0f} | {v['updates_total'][0]:,.0f} | {v['updates_last'][0]:,.0f} | "
            f"{_pm(v['test']['hF'][0], v['test']['hF'][1], n, sign=False)} | "
            f"{_pm(v['train']['hF'][0], v['train']['hF'][1], n, sign=False)} |")
    lines += ["", "BF / no-BF ratios (size, mistakes over all epochs, mistakes in the last epoch):", "",
              "| update, shards, features | size ratio | mistakes ratio | last-epoch mistakes ratio | "
              "ΔhF test (BF − no BF) |", "|---|---|---|---|---|"]
    for name, v in g.items():
        if ", BF," not in name:
            continue
        other = g.get(name.replace(", BF,", ", no BF,"))
        if other is None:
            continue
        label = name.replace(", BF,", ",")
        lines.append(f"| {label} | {v['size'][0] / other['size'][0]:.2f} | "
                     f"{v['updates_total'][0] / max(other['updates_total'][0], 1):.2f} | "
                     f"{v['updates_last'][0] / max(other['updates_last'][0], 1):.2f} | "
                     f"{100 * (v['test']['hF'][0] - other['test']['hF'][0]):+.2f} |")
    lines += ["", _investigation_text(doc), ""]
    return lines


def _investigation_text(doc: dict[str, Any]) -> str:
    """What moved the size and what did not, stated from the grid's numbers."""
    g = doc["grid"]
    S = doc["shards"]
    shard_list = sorted({1, int(S), PAPER_SHARDS})

    def row(upd: str, bf: bool, shards: int, feats: str) -> dict[str, Any] | None:
        return g.get(f"{upd}, {'BF' if bf else 'no BF'}, {shards} shards, {feats}")

    def ratio(upd: str, shards: int, feats: str, what: str) -> float:
        a, b = row(upd, True, shards, feats), row(upd, False, shards, feats)
        if a is None or b is None:
            return math.nan
        return float(a[what][0] / max(b[what][0], 1.0))

    def verb(xs: list[float]) -> str:
        xs = [x for x in xs if math.isfinite(x)]
        if xs and all(x > 1 for x in xs):
            return "grow"
        if xs and all(x < 1 for x in xs):
            return "shrink"
        return "grow or shrink"

    def fmt(xs: list[float]) -> str:
        return " / ".join(f"{x:.2f}" for x in xs)

    out = ["**What was varied, what moved the size, what did not.**", ""]
    for upd in ("prediction", "cost-augmented"):
        sr = [ratio(upd, s, "default", "size") for s in shard_list]
        mr = [ratio(upd, s, "default", "updates_total") for s in shard_list]
        out.append(f"- Update rule = {upd} (default features): branching features {verb(sr)} the model; "
                   f"BF / no-BF size {fmt(sr)} and training mistakes {fmt(mr)} at {fmt([float(x) for x in shard_list]).replace('.00', '')} shards.")
    grow = []
    for upd in ("prediction", "cost-augmented"):
        for bf in (False, True):
            a, b = row(upd, bf, PAPER_SHARDS, "default"), row(upd, bf, 1, "default")
            if a is not None and b is not None:
                grow.append(a["size"][0] / b["size"][0])
    if grow:
        out.append(f"- Shards: 10 shards against 1 multiply the size by {min(grow):.2f}–{max(grow):.2f} over the four "
                   "(update, BF) settings: averaging the shard models adds their supports, and each shard "
                   "sees a tenth of the data per mixing round, so more examples are still wrong when they "
                   "are visited."
                   + (" The shard count scales the size; it does not decide the sign of the BF effect."
                      if all(verb([ratio(u, s, "default", "size") for s in shard_list]) != "grow or shrink"
                             for u in ("prediction", "cost-augmented"))
                      else " The sign of the BF effect changes with the shard count here."))
    tf = [ratio("prediction", s, "tf", "size") for s in (1, PAPER_SHARDS)]
    df = [ratio("prediction", s, "default", "size") for s in (1, PAPER_SHARDS)]
    scale = None
    if all(math.isfinite(x) for x in tf + df):
        scale = all(t < d for t, d in zip(tf, df, strict=True))
        out.append(f"- Features: with the paper's kind of features (raw term frequencies, not normalized) the "
                   f"BF / no-BF size ratio under prediction updates is {fmt(tf)} at 1 / 10 shards, against "
                   f"{fmt(df)} with sparkhc's l2-normalized log-tf-idf: "
                   + ("the growth is smaller with unnormalized features." if scale
                      else "the feature scale does not reduce the growth."))
    last = []
    for s in shard_list:
        a, b = row("prediction", True, s, "default"), row("prediction", False, s, "default")
        if a is not None and b is not None:
            last.append(f"{s} shards: {b['updates_last'][0]:,.0f} without BF, {a['updates_last'][0]:,.0f} with")
    if last:
        out.append("- Convergence: training mistakes in the 10th epoch under prediction updates (default "
                   "features): " + "; ".join(last) + ".")
    rows = [v for k, v in g.items() if k.endswith(", default")]
    if len(rows) > 2:
        r = float(np.corrcoef([v["size"][0] for v in rows], [v["updates_total"][0] for v in rows])[0, 1])
        out.append(f"- Across the {len(rows)} default-feature runs, the size and the number of training mistakes "
                   f"correlate with Pearson r = {r:.2f}.")
    pred = [ratio("prediction", s, "default", "size") for s in shard_list]
    pred_m = [ratio("prediction", s, "default", "updates_total") for s in shard_list]
    ca = [ratio("cost-augmented", s, "default", "size") for s in shard_list]
    ca_m = [ratio("cost-augmented", s, "default", "updates_total") for s in shard_list]
    out += ["", "A weight of edge e becomes non-trivial only when an update touches e with a document that has "
            "that feature. An update of Alg. 5 touches the edges in the symmetric difference of the gold tree "
            "and the decoded one, so the size grows with the number of updated examples and with the edges "
            "each update touches; the training counters record only the former."]
    if verb(pred) == "grow" and all(x > 1 for x in pred_m if math.isfinite(x)):
        out[-1] += (" Under Alg. 5's prediction-based updates the growth under branching features follows the "
                    "mistakes: training ends the 10 epochs with far more remaining mistakes with branching "
                    "features than without them (Convergence, above), and every remaining mistake adds its "
                    "document's features to the edges it touches, epoch after epoch.")
    if verb(ca) == "shrink" and all(x >= 0.95 for x in ca_m if math.isfinite(x)):
        out[-1] += (" Under cost-augmented updates branching features leave the number of updated examples "
                    "about the same and still shrink the model, so their updates touch fewer edges: the "
                    "branching penalty keeps the cost-augmented decoding from adding extra children (an "
                    "inference; edges per update are not counted).")
    if scale:
        out[-1] += (" The branching weights are indicator features of value 1 beside document vectors of norm 1 "
                    "here (the paper's raw frequencies of ~120 content words per document have norms above 10), "
                    "so one update moves a shared cardinality weight as much as a whole document's score and "
                    "changes the decoded cardinality of examples already fitted; with unnormalized features that "
                    "effect is smaller, as measured above.")
    return "\n".join(out)


# ------------------------------------------------------------------------------ plots
def _plt() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log.warning("matplotlib not installed: no plots")
        return None
    return plt


def _figure2_plot(doc: dict[str, Any], path: Path) -> None:
    plt = _plt()
    lv = doc["levels"]
    names = [s for s in FIGURE2 if s in lv]
    if plt is None or not names:
        return
    fig, axes = plt.subplots(2, len(names), figsize=(3.2 * len(names), 5.5), squeeze=False)
    for j, s in enumerate(names):
        w = sorted(((int(d), v) for d, v in lv[s]["weights_per_edge"].items()))
        axes[0][j].bar([d for d, _ in w], [v for _, v in w], color="tab:blue")
        axes[0][j].set_title(f"({'abcd'[j]}) {s}", fontsize=9)
        axes[0][j].set_xlabel("depth of child node")
        imp = sorted(((int(d), v) for d, v in lv[s].get("impact", {}).items()))
        axes[1][j].bar([d for d, _ in imp], [v for _, v in imp], color="tab:orange")
        axes[1][j].set_title(f"({'efgh'[j]}) {s}", fontsize=9)
        axes[1][j].set_xlabel("depth of child node")
    axes[0][0].set_ylabel("non-trivial weights per edge")
    axes[1][0].set_ylabel("mean |edge score|, test docs")
    fig.suptitle(f"Murawaki 2013 Figure 2 on {doc['corpus']} (paper-faithful models)", fontsize=10)
    fig.tight_layout()
    harness.save_plot(fig, path, dpi=100)
    plt.close(fig)


def _grid_plot(doc: dict[str, Any], path: Path) -> None:
    plt = _plt()
    g = doc["grid"]
    if plt is None or not g:
        return
    S = doc["shards"]
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2))
    series = [("prediction", "default"), ("cost-augmented", "default"), ("prediction", "tf")]
    for upd, feats in series:
        for bf, ls in (("no BF", "--"), ("BF", "-")):
            xs, ys = [], []
            for s in (1, S, PAPER_SHARDS):
                v = g.get(f"{upd}, {bf}, {s} shards, {feats}")
                if v is not None and s not in xs:
                    xs.append(s)
                    ys.append(v["size"][0])
            if xs:
                axes[0].plot(xs, ys, ls, marker="o", label=f"{upd}, {bf}, {feats}")
                mx = [g[f"{upd}, {bf}, {s} shards, {feats}"]["updates_total"][0] for s in xs]
                axes[1].plot(xs, mx, ls, marker="o", label=f"{upd}, {bf}, {feats}")
    for ax, yl in ((axes[0], "model size (weights)"), (axes[1], "training mistakes, 10 epochs")):
        ax.set_xscale("log")
        ax.set_xticks([1, S, PAPER_SHARDS], [str(x) for x in (1, S, PAPER_SHARDS)])
        ax.set_xlabel("shards")
        ax.set_ylabel(yl)
    axes[0].legend(fontsize=7)
    for name, v in g.items():
        if name.startswith("prediction") and name.endswith("default"):
            ls = "-" if ", BF," in name else "--"
            axes[2].plot(range(1, len(v["updates"]) + 1), v["updates"], ls, label=name.replace(", default", ""))
    axes[2].set_xlabel("epoch")
    axes[2].set_ylabel("mistakes per epoch (prediction updates)")
    axes[2].legend(fontsize=7)
    fig.suptitle(f"Model size under branching features, {doc['corpus']}", fontsize=10)
    fig.tight_layout()
    harness.save_plot(fig, path, dpi=100)
    plt.close(fig)


def _bf_table(model_dir: Path) -> dict[str, Any] | None:
    if not (model_dir / "state.npz").exists():
        return None
    model, _ = load_model(model_dir)
    bf = model.get_state().arrays.get("bf")
    if bf is None:
        return None
    tax = model.taxonomy
    rows: dict[int, list[np.ndarray]] = {}
    # rows of bf: one per node id (leaves unused), then the shared row (decoding.bf_shape)
    for c in tax.internal:
        rows.setdefault(int(tax.depth[c]), []).append(np.asarray(bf[int(c)], dtype=float))
    levels = {f"depth {d} (mean of {len(v)} nodes)": np.mean(v, axis=0) for d, v in sorted(rows.items())}
    levels["shared"] = np.asarray(bf[tax.n_nodes], dtype=float)
    heads = ["k=1", "k=2", "k=3", "k>3"]
    md = ["| weights | " + " | ".join(heads) + " |", "|---" * 5 + "|"]
    for name, v in levels.items():
        md.append(f"| {name} | " + " | ".join(f"{x:+.4f}" for x in v) + " |")
    return {"levels": {k: v.tolist() for k, v in levels.items()}, "markdown": "\n".join(md) + "\n"}


def _bf_plot(bf: dict[str, Any], path: Path, corpus: str) -> None:
    plt = _plt()
    if plt is None:
        return
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, v in bf["levels"].items():
        ax.plot([1, 2, 3, 4], v, marker="o", label=name)
    ax.set_xticks([1, 2, 3, 4], ["1", "2", "3", ">3"])
    ax.set_xlabel("number of selected children k")
    ax.set_ylabel("learned branching weight")
    ax.axhline(0, color="grey", lw=0.5)
    ax.set_title(f"Branching-feature weights, DP-GT-BF (10 shards), {corpus}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    harness.save_plot(fig, path, dpi=100)
    plt.close(fig)


def print_table(doc: dict[str, Any]) -> str:
    return format_table({s: {k: v[0] for k, v in vals.items()} for s, vals in doc["summary"].items()})


def dump(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, sort_keys=True, default=str)
