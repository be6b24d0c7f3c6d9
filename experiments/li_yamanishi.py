"""Reproduce Li & Yamanishi (1997), Section 6, on Reuters-21578: break-even points and PR curves.

Two settings, as in the paper:

1. ``nine_commodities`` -- the documents labelled with at least one of the nine overlapping
   commodity categories (wheat, corn, oilseed, sugar, coffee, soybean, cocoa, rice, cotton); one
   word cluster per category; all nine are evaluated.
2. ``ten_largest`` -- the entire collection; one cluster per category that has a training document;
   evaluated on the ten categories with the most test documents.

Each category is tested against its complement (the training documents not in it) with the
per-word log-likelihood ratio; sweeping the threshold ``ε`` gives micro-averaged precision-recall
curves and the break-even point (:mod:`sparkhc.metrics`). Methods: FMM at γ ∈ {0, 0.4, 0.5, 0.7},
HCM at γ ∈ {0.5, 0.7, 0.9, 0.95}, WBM and COS (:mod:`sparkhc.models.li_yamanishi.classifiers`), plus ablations.

Run::

    python -m experiments.li_yamanishi --data-dir ../shared/data --out docs/results/li_yamanishi

It reads ``reuters21578/docs.jsonl.gz`` directly and writes ``bep.md``, ``pr_<setting>.png`` and
``results.json`` to ``--out``. By default everything runs in this process; with ``--spark-shards N``
(or ``run_experiment(..., spark=session)``) the category x word counting of the primary
configuration is done on Spark by the product model (:mod:`sparkhc.models.li_yamanishi`, summed over
``N`` partitions), checked equal to the local counts, and the methods are fitted from it.
"""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from experiments import harness
from sparkhc.errors import DataUnavailableError
from sparkhc.metrics import break_even_point, pr_curve
from sparkhc.models.li_yamanishi.classifiers import COS, FMM, HCM, WBM, sufficient_statistics
from sparkhc.text.tokenize import Tokenizer

log = logging.getLogger(__name__)

COMMAND = "sparkhc experiment li-yamanishi --data-dir ../shared/data --out docs/results/li_yamanishi"
MODULE_COMMAND = (
    "python -m experiments.li_yamanishi --data-dir ../shared/data --out docs/results/li_yamanishi"
)

NINE = ("wheat", "corn", "oilseed", "sugar", "coffee", "soybean", "cocoa", "rice", "cotton")
SETTINGS = ("nine_commodities", "ten_largest")
SETTING_TITLES = {
    "nine_commodities": "first data set: nine overlapping commodity categories",
    "ten_largest": "second data set: entire collection, ten categories with the most test documents",
}

#: Paper's Tables 16 and 17 (break-even points).
PAPER_BEP: dict[str, dict[str, float]] = {
    "nine_commodities": {
        "COS": 0.60,
        "WBM": 0.62,
        "HCM0.5": 0.32,
        "HCM0.7": 0.42,
        "HCM0.9": 0.54,
        "HCM0.95": 0.51,
        "FMM0": 0.66,
        "FMM0.4": 0.54,
        "FMM0.5": 0.52,
        "FMM0.7": 0.42,
    },
    "ten_largest": {
        "COS": 0.52,
        "WBM": 0.62,
        "HCM0.5": 0.47,
        "HCM0.7": 0.51,
        "HCM0.9": 0.55,
        "HCM0.95": 0.31,
        "FMM0": 0.62,
        "FMM0.4": 0.54,
        "FMM0.5": 0.67,
        "FMM0.7": 0.62,
    },
}
#: The paper's data set sizes (Tables 12 and 14).
PAPER_SIZES = {"nine_commodities": (707, 228, 10902), "ten_largest": (13625, 6188, 50301)}

#: (split, stop words) configurations; the first is the primary one (the paper's: Lewis split, no
#: stop list), the others show how much the choices matter.
CONFIGS: dict[str, tuple[str, bool]] = {
    "lewis": ("lewis", False),
    "lewis_stop": ("lewis", True),
    "modapte_stop": ("modapte", True),
}
CONFIG_TITLES = {
    "lewis": "Lewis split, no stop list (paper)",
    "lewis_stop": "Lewis split, stop words removed",
    "modapte_stop": "ModApte split, stop words removed",
}

ModelFactory = Callable[[], Any]
FMM_GAMMAS = (0.0, 0.4, 0.5, 0.7)
HCM_GAMMAS = (0.5, 0.7, 0.9, 0.95)


def main_methods() -> dict[str, ModelFactory]:
    """The paper's ten methods (Tables 16-17) with this module's defaults ("global" clusters: one
    per category), then FMM and HCM under the "binary" reading (two clusters, ``c`` and ``c̄``,
    per category)."""
    m: dict[str, ModelFactory] = {"COS": lambda: COS(), "WBM": lambda: WBM()}
    for g in HCM_GAMMAS:
        m[f"HCM{g:g}"] = partial(HCM, gamma=g)
    for g in FMM_GAMMAS:
        m[f"FMM{g:g}"] = partial(FMM, gamma=g)
    for g in HCM_GAMMAS:
        m[f"HCM{g:g} binary"] = partial(HCM, gamma=g, scheme="binary")
    for g in FMM_GAMMAS:
        m[f"FMM{g:g} binary"] = partial(FMM, gamma=g, scheme="binary")
    return m


def ablation_methods() -> dict[str, ModelFactory]:
    """Other readings of the paper's silent points (primary configuration only)."""
    m: dict[str, ModelFactory] = {"COS (plain cosine, no complement)": lambda: COS(complement=False)}
    for a in (0.5, 0.1, 0.01):
        m[f"WBM (alpha={a:g})"] = partial(WBM, alpha=a)
    for g in HCM_GAMMAS:
        m[f"HCM{g:g} (no rest cluster)"] = partial(HCM, gamma=g, rest_cluster=False)
    for s in (1, 5, 10, 20, 100, 300):
        m[f"FMM0 (EM s={s})"] = partial(FMM, gamma=0.0, n_iter=s)
    m["FMM0 (eta=0.5)"] = lambda: FMM(gamma=0.0, eta=0.5)
    m["FMM0 (eta=1.5)"] = lambda: FMM(gamma=0.0, eta=1.5)
    m["FMM0.4 (EM s=300)"] = lambda: FMM(gamma=0.4, n_iter=300)
    m["FMM0.5 (EM s=1)"] = lambda: FMM(gamma=0.5, n_iter=1)
    m["FMM0.7 (theta floor 1e-3)"] = lambda: FMM(gamma=0.7, theta_floor=1e-3)
    return m


# ---------------------------------------------------------------------------------------------
# data


def find_corpus(data_dir: str | os.PathLike[str]) -> Path:
    """``docs.jsonl.gz`` under ``data_dir`` (the shared data root or the corpus folder itself)."""
    d = Path(data_dir)
    for cand in (d / "reuters21578" / "docs.jsonl.gz", d / "docs.jsonl.gz"):
        if cand.is_file():
            return cand
    raise DataUnavailableError(
        f"Reuters-21578 not found: expected {d / 'reuters21578' / 'docs.jsonl.gz'} "
        "(pass --data-dir ../shared/data)"
    )


def load_docs(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def split_docs(
    docs: Sequence[dict[str, Any]], split: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Training and test documents of the whole collection.

    ``lewis``: LEWISSPLIT=TRAIN without the TOPICS="BYPASS" stories (13,625, the paper's Table 14
    count) and LEWISSPLIT=TEST (6,188), topics or not. ``modapte``: the ``split`` field (TOPICS="YES"
    documents only: 9,603 / 3,299).
    """
    if split == "lewis":
        train = [d for d in docs if d["lewissplit"] == "TRAIN" and d["topics_attr"] != "BYPASS"]
        test = [d for d in docs if d["lewissplit"] == "TEST"]
    elif split == "modapte":
        train = [d for d in docs if d["split"] == "train"]
        test = [d for d in docs if d["split"] == "test"]
    else:
        raise ValueError(f"unknown split {split!r}")
    return train, test


def document_text(d: dict[str, Any]) -> str:
    return f"{d.get('title') or ''}\n{d.get('text') or ''}"


@dataclass
class SettingData:
    """Count matrices and labels of one setting."""

    name: str
    X_train: sp.csr_matrix
    X_test: sp.csr_matrix
    categories: list[str]  # clusters: one per category (columns of Y_train)
    Y_train: np.ndarray
    eval_categories: list[str]
    Y_test: np.ndarray  # gold of the evaluated categories
    vocab: list[str]


def count_matrix(token_lists: Sequence[Sequence[str]], index: dict[str, int]) -> sp.csr_matrix:
    indptr = [0]
    indices: list[int] = []
    values: list[float] = []
    for toks in token_lists:
        c = Counter(index[t] for t in toks if t in index)
        indices.extend(c.keys())
        values.extend(float(v) for v in c.values())
        indptr.append(len(indices))
    X = sp.csr_matrix(
        (np.asarray(values, dtype=np.float32), np.asarray(indices, dtype=np.int32), np.asarray(indptr)),
        shape=(len(token_lists), len(index)),
    )
    X.sort_indices()
    return X


def build_setting(
    name: str, train: Sequence[dict[str, Any]], test: Sequence[dict[str, Any]], tokenizer: Tokenizer
) -> SettingData:
    if name == "nine_commodities":
        keep = set(NINE)
        train = [d for d in train if keep & set(d["labels"])]
        test = [d for d in test if keep & set(d["labels"])]
        categories = list(NINE)
        eval_categories = list(NINE)
    elif name == "ten_largest":
        categories = sorted({c for d in train for c in d["labels"]})
        test_counts = Counter(c for d in test for c in set(d["labels"]))
        eval_categories = [c for c, _ in sorted(test_counts.items(), key=lambda kv: (-kv[1], kv[0]))[:10]]
        missing = [c for c in eval_categories if c not in categories]
        if missing:
            raise ValueError(f"evaluated categories without training documents: {missing}")
    else:
        raise ValueError(f"unknown setting {name!r}")
    tok_train = [tokenizer.tokenize(document_text(d)) for d in train]
    tok_test = [tokenizer.tokenize(document_text(d)) for d in test]
    vocab = sorted({t for toks in tok_train for t in toks})
    index = {t: i for i, t in enumerate(vocab)}
    X_train, X_test = count_matrix(tok_train, index), count_matrix(tok_test, index)

    def labels(docs: Sequence[dict[str, Any]], cats: Sequence[str]) -> np.ndarray:
        pos = {c: j for j, c in enumerate(cats)}
        Y = np.zeros((len(docs), len(cats)), dtype=bool)
        for i, d in enumerate(docs):
            for c in d["labels"]:
                if c in pos:
                    Y[i, pos[c]] = True
        return Y

    return SettingData(
        name,
        X_train,
        X_test,
        categories,
        labels(train, categories),
        eval_categories,
        labels(test, eval_categories),
        vocab,
    )


# ---------------------------------------------------------------------------------------------
# evaluation


def downsample_curve(precision: np.ndarray, recall: np.ndarray, n: int = 200) -> dict[str, list[float]]:
    """At most ``n`` points of a PR curve, evenly spaced in recall (for JSON and plots)."""
    if len(recall) <= n:
        idx = np.arange(len(recall))
    else:
        grid = np.linspace(recall[0], recall[-1], n)
        idx = np.unique(np.searchsorted(recall, grid, side="left").clip(0, len(recall) - 1))
    return {
        "precision": [round(float(p), 5) for p in precision[idx]],
        "recall": [round(float(r), 5) for r in recall[idx]],
    }


def evaluate_method(
    factory: ModelFactory,
    data: SettingData,
    keep_curve: bool,
    stats: dict[str, np.ndarray] | None = None,
) -> dict[str, Any]:
    """Fit (from ``stats``, the setting's sufficient statistics, when given), score the test
    documents, break-even point and curve."""
    t0 = time.perf_counter()
    model = factory()
    if stats is None:
        model.fit(data.X_train, data.Y_train)
    else:
        model.categories = list(data.categories)
        model.fit_from_statistics(stats)
    t1 = time.perf_counter()
    cols = [data.categories.index(c) for c in data.eval_categories]
    scores = model.decision_function(data.X_test)[:, cols]
    t2 = time.perf_counter()
    out: dict[str, Any] = {
        "bep": break_even_point(scores, data.Y_test),
        "bep_per_category": {
            c: break_even_point(scores[:, j], data.Y_test[:, j]) for j, c in enumerate(data.eval_categories)
        },
        "fit_seconds": round(t1 - t0, 3),
        "score_seconds": round(t2 - t1, 3),
        "docs_without_covered_words": int(np.sum(~np.isfinite(scores).all(axis=1))),
    }
    if keep_curve:
        _, precision, recall = pr_curve(scores, data.Y_test)
        out["curve"] = downsample_curve(precision, recall)
    return out


def setting_stats(data: SettingData) -> dict[str, Any]:
    return {
        "n_train": int(data.X_train.shape[0]),
        "n_test": int(data.X_test.shape[0]),
        "vocabulary": len(data.vocab),
        "avg_words_per_train_doc": round(float(data.X_train.sum() / max(data.X_train.shape[0], 1)), 1),
        "n_cluster_categories": len(data.categories),
        "eval_categories": data.eval_categories,
        "test_positives": int(data.Y_test.sum()),
    }


# ---------------------------------------------------------------------------------------------
# counting on Spark


def spark_statistics(spark: Any, data: SettingData, shards: int = 4) -> dict[str, np.ndarray]:
    """The setting's sufficient statistics counted on Spark: the training counts as a features
    DataFrame (raw counts in ``counts``), one leaf per category under a root, summed over
    ``shards`` partitions by :func:`sparkhc.spark.ipm.train_ipm` with the ``wbm`` product model
    (every Li & Yamanishi model keeps the same statistics). Rows in ``data.categories`` order."""
    import pyarrow as pa

    from sparkhc.models import get_model_class
    from sparkhc.spark.ipm import train_ipm
    from sparkhc.taxonomy import VIRTUAL_ROOT, Taxonomy

    X = sp.csr_matrix(data.X_train)
    X.sort_indices()
    n, V = X.shape
    taxonomy = Taxonomy.from_edges([(VIRTUAL_ROOT, c) for c in data.categories], root=VIRTUAL_ROOT)
    cats = np.asarray(data.categories, dtype=object)
    offsets = pa.array(X.indptr.astype(np.int32))
    table = pa.table(
        {
            "doc_id": [f"d{i:06d}" for i in range(n)],
            "labels": pa.array([list(cats[row]) for row in data.Y_train], type=pa.list_(pa.string())),
            "indices": pa.ListArray.from_arrays(offsets, pa.array(X.indices.astype(np.int32))),
            "values": pa.ListArray.from_arrays(offsets, pa.array(X.data.astype(np.float32))),
            "counts": pa.ListArray.from_arrays(offsets, pa.array(X.data.astype(np.float32))),
        }
    )
    model = get_model_class("wbm")(taxonomy, V)
    train_ipm(spark, spark.createDataFrame(table), model, epochs=1, shards=shards, with_counts=True)
    stats = model.statistics()
    leaf_names = [taxonomy.names[int(c)] for c in taxonomy.leaves]
    order = [leaf_names.index(c) for c in data.categories]
    # the memory layout of sufficient_statistics (Fortran order): the classifiers' BLAS sums then run
    # in the same order, so the scores are bit-identical to the local path (not only to 1e-14)
    stats["category_word"] = np.asfortranarray(stats["category_word"][order])
    stats["category_docs"] = stats["category_docs"][order]
    return stats


def check_statistics(got: dict[str, np.ndarray], data: SettingData) -> None:
    """Raise unless ``got`` equals the local :func:`sufficient_statistics` exactly."""
    ref = sufficient_statistics(data.X_train, data.Y_train, data.categories)
    for k, v in ref.items():
        if not np.array_equal(got[k], v):
            raise RuntimeError(f"{data.name}: statistics {k!r} counted on Spark differ from the local counts")


# ---------------------------------------------------------------------------------------------
# reports


def _fmt(x: float | None) -> str:
    return "–" if x is None or not np.isfinite(x) else f"{x:.2f}"


def render_markdown(results: dict[str, Any]) -> str:
    lines = [
        "# Li & Yamanishi (1997) on Reuters-21578: break-even points",
        "",
        "```",
        COMMAND,
        f"# equivalently: {MODULE_COMMAND}",
        "```",
        "",
        "Generated by `experiments/li_yamanishi.py` (models in `sparkhc/models/li_yamanishi/classifiers.py`); curves in",
        "`pr_<setting>.png`, every number (and per-category break-even points) in `results.json`;",
        "discussion in `NOTES.md`. Micro-averaged break-even point of precision and recall over the",
        "evaluated categories, sweeping one threshold ε on the per-word log-likelihood ratio",
        "(COS: on cos(d, c) − cos(d, c̄)).",
        "",
        "Defaults: one word cluster per category (γ rule with f(w) = Σ_c f(w|c)); c̄ = the training",
        "documents not in c, modelled over the same clusters; FMM P(k|c) by EM from uniform weights,",
        f"{FMM().n_iter} updates, η = 1; HCM with a rest cluster and the +0.5 estimator; WBM with Laplace",
        "smoothing; documents with no covered word score −∞. Rows marked *binary* use the other reading:",
        "each category's test is a two-category problem {c, c̄} with its own two clusters. Tokens:",
        "lowercase letter-only words of ≥ 2 letters (title + body), vocabulary = training words. The",
        "paper column repeats the paper's number for the same method name.",
        "",
        "The same models are product models (`fmm`, `hcm`, `wbm`, `cos`: `sparkhc train` counts the",
        "category × word frequencies on Spark from the features' raw counts); counting on Spark gives",
        "exactly the statistics these tables were fitted from (`--spark-shards N` checks it in the run;",
        "`tests/spark/test_fmm_spark.py`).",
        "",
    ]
    sc = results.get("spark_counting")
    if sc:
        lines += [
            f"This run counted the {CONFIG_TITLES[sc['config']]} configuration on Spark "
            f"({sc['shards']} partitions): statistics identical to the local counts.",
            "",
        ]
    for setting in SETTINGS:
        lines += [f"## {setting}: {SETTING_TITLES[setting]}", ""]
        head = "| data | " + " | ".join(CONFIG_TITLES[c] for c in results["configs"]) + " | paper |"
        lines += [head, "|" + " --- |" * (len(results["configs"]) + 2)]
        stats = {c: results["configs"][c][setting]["stats"] for c in results["configs"]}
        ptr, pte, pv = PAPER_SIZES[setting]
        for key, label, size in (
            ("n_train", "training docs", ptr),
            ("n_test", "test docs", pte),
            ("vocabulary", "vocabulary", pv),
        ):
            lines.append(f"| {label} | " + " | ".join(str(stats[c][key]) for c in stats) + f" | {size} |")
        lines.append("")
        head = "| method | " + " | ".join(CONFIG_TITLES[c] for c in results["configs"]) + " | paper |"
        lines += [head, "|" + " --- |" * (len(results["configs"]) + 2)]
        for method in main_methods():
            vals = [results["configs"][c][setting]["methods"][method]["bep"] for c in results["configs"]]
            paper = PAPER_BEP[setting].get(method.removesuffix(" binary"))
            lines.append(f"| {method} | " + " | ".join(_fmt(v) for v in vals) + f" | {_fmt(paper)} |")
        lines.append("")
        abl = results["configs"]["lewis"][setting].get("ablations", {})
        if abl:
            lines += [f"Ablations ({CONFIG_TITLES['lewis']}):", "", "| variant | BEP |", "| --- | --- |"]
            lines += [f"| {k} | {_fmt(v['bep'])} |" for k, v in abl.items()]
            lines.append("")
    lines += [f"Total run time {results['seconds']:.0f} s on {results['machine']}.", ""]
    return "\n".join(lines)


def plot_curves(results: dict[str, Any], out_dir: Path, config: str = "lewis") -> list[Path]:
    """``pr_<setting>.png``: the paper's methods (left) and the binary reading (right)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:  # pragma: no cover - optional dependency
        log.warning("matplotlib is not installed: no plots (pip install matplotlib)")
        return []
    paths = []
    for setting in SETTINGS:
        fig, axes = plt.subplots(1, 2, figsize=(12, 5.6), sharey=True)
        methods = results["configs"][config][setting]["methods"]
        panels = (
            ("clusters: one per category (paper's Section 4)", lambda n: "binary" not in n),
            (
                "binary reading: clusters k_c, k_c̄ per category",
                lambda n: "binary" in n or n in ("WBM", "COS"),
            ),
        )
        for ax, (title, keep) in zip(axes, panels, strict=True):
            for name, r in methods.items():
                curve = r.get("curve")
                if not curve or not keep(name):
                    continue
                style = "-" if name.startswith("FMM") else "--" if name.startswith("HCM") else ":"
                ax.plot(
                    curve["recall"], curve["precision"], style, lw=1.3, label=f"{name} ({_fmt(r['bep'])})"
                )
            ax.plot([0, 1], [0, 1], color="0.8", lw=0.8)
            ax.set_xlim(0, 1)
            ax.set_ylim(0, 1.02)
            ax.set_xlabel("recall (micro-averaged)")
            ax.set_title(title, fontsize=9)
            ax.legend(fontsize=7, loc="lower left", title="method (break-even point)", title_fontsize=7)
        axes[0].set_ylabel("precision (micro-averaged)")
        fig.suptitle(
            f"Li & Yamanishi 1997 on Reuters-21578, {setting} ({CONFIG_TITLES[config]})", fontsize=10
        )
        fig.tight_layout()
        p = out_dir / f"pr_{setting}.png"
        harness.save_plot(fig, p, dpi=110)
        plt.close(fig)
        paths.append(p)
    return paths


# ---------------------------------------------------------------------------------------------
# driver


def run_experiment(
    data_dir: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    configs: Sequence[str] | None = None,
    ablations: bool = True,
    spark: Any = None,
    spark_shards: int = 4,
) -> dict[str, Any]:
    """Run every configuration and setting, write ``bep.md``, ``pr_<setting>.png`` and
    ``results.json`` to ``out_dir``; return the results.

    With a SparkSession ``spark`` the statistics of the first configuration's settings are counted
    on Spark (:func:`spark_statistics`, ``spark_shards`` partitions), checked equal to the local
    counts (:func:`check_statistics`) and its methods are fitted from them."""
    t_start = time.perf_counter()
    path = find_corpus(data_dir)
    docs = load_docs(path)
    log.info("read %d documents from %s", len(docs), path)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {"corpus": str(path), "configs": {}}
    cfg_list = list(configs or CONFIGS)
    for cfg in cfg_list:
        split, stop = CONFIGS[cfg]
        tokenizer = Tokenizer(stop_words=stop)
        train, test = split_docs(docs, split)
        res_cfg: dict[str, Any] = {"split": split, "stop_words": stop}
        for setting in SETTINGS:
            t0 = time.perf_counter()
            data = build_setting(setting, train, test, tokenizer)
            stats = setting_stats(data)
            log.info("%s/%s: %s (%.1f s)", cfg, setting, stats, time.perf_counter() - t0)
            counted = None
            if spark is not None and cfg == cfg_list[0]:
                t0 = time.perf_counter()
                counted = spark_statistics(spark, data, spark_shards)
                check_statistics(counted, data)
                secs = round(time.perf_counter() - t0, 1)
                log.info(
                    "%s/%s: counted on Spark (%d partitions, %.1f s): identical",
                    cfg,
                    setting,
                    spark_shards,
                    secs,
                )
                sc = results.setdefault(
                    "spark_counting", {"config": cfg, "shards": spark_shards, "seconds": {}}
                )
                sc["seconds"][setting] = secs
            methods = {}
            for name, factory in main_methods().items():
                methods[name] = evaluate_method(factory, data, keep_curve=True, stats=counted)
                log.info(
                    "%s/%s %-8s BEP %.3f (fit %.1f s)",
                    cfg,
                    setting,
                    name,
                    methods[name]["bep"],
                    methods[name]["fit_seconds"],
                )
            entry: dict[str, Any] = {"stats": stats, "methods": methods}
            if ablations and cfg == "lewis":
                entry["ablations"] = {}
                for name, factory in ablation_methods().items():
                    entry["ablations"][name] = evaluate_method(factory, data, keep_curve=False, stats=counted)
                    log.info("%s/%s %s BEP %.3f", cfg, setting, name, entry["ablations"][name]["bep"])
            res_cfg[setting] = entry
        results["configs"][cfg] = res_cfg
    results["seconds"] = round(time.perf_counter() - t_start, 1)
    results["machine"] = f"{os.cpu_count()} CPU(s), Python {sys.version.split()[0]}"
    results["paper_bep"] = PAPER_BEP
    harness.write_json(out / "results.json", results, sort_keys=False)
    if "lewis" in results["configs"]:
        harness.write_markdown(out / "bep.md", render_markdown(results))
        plot_curves(results, out)
    return results


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m experiments.li_yamanishi", description=__doc__.splitlines()[0]
    )
    ap.add_argument("--data-dir", default="../shared/data", help="shared data root (holds reuters21578/)")
    ap.add_argument("--out", default="docs/results/li_yamanishi", help="output directory")
    ap.add_argument("--configs", nargs="*", choices=list(CONFIGS), help="subset of configurations")
    ap.add_argument("--no-ablations", action="store_true", help="skip the ablation variants")
    ap.add_argument(
        "--spark-shards",
        type=int,
        default=0,
        help="count the first configuration's statistics on a local Spark session with this many "
        "partitions (0: no Spark)",
    )
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    spark = None
    if args.spark_shards > 0:
        from sparkhc.spark.session import get_session

        spark = get_session(app_name="sparkhc-li-yamanishi")
    try:
        run_experiment(
            args.data_dir,
            args.out,
            configs=args.configs,
            ablations=not args.no_ablations,
            spark=spark,
            spark_shards=max(args.spark_shards, 1),
        )
    except DataUnavailableError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    finally:
        if spark is not None:
            spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
