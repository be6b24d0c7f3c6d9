"""Annif (Omikuji Parabel / Bonsai) as a peer of ``benchmarks/compare.py``.

Annif (``annif[omikuji]``, PyPI) is a bench-only peer, never a product dependency: it lives in its own
virtualenv so that its numpy / scikit-learn pins cannot disturb the main environment, and runs in a
subprocess (``benchmarks/_annif_worker.py``)::

    python -m venv .venv-annif && .venv-annif/bin/pip install 'annif[omikuji]==1.4.*'

The interpreter is ``$ANNIF_PYTHON`` (default ``.venv-annif/bin/python`` at the repository root).
Annif's analyzers tokenise with NLTK, whose ``punkt_tab`` tables cannot be downloaded here: ``NLTK_DATA``
defaults to ``../shared/peers/nltk_data`` next to the repository (an ``NLTK_DATA`` already set wins).

Protocol of :func:`run_annif` (the same documents, folds and scorer as every compare row): a seeded
10 % validation slice is carved out of the TRAINING part only; Annif is trained on the rest and
suggests for the slice; ``limit`` and ``threshold`` are chosen on the slice as ``annif optimize``
does (limits 1..15, thresholds 0.00, 0.05, ..., 0.95, criterion document-averaged F1, ties to the
later pair of Annif's loop order); Annif is then retrained on the whole training part, and the test
documents keep at most ``limit`` suggestions scoring at least ``threshold`` (none when none passes,
as Annif does). The test documents' labels are never passed to Annif or read here.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
WORKER = Path(__file__).resolve().parent / "_annif_worker.py"
INSTALL = "python -m venv .venv-annif && .venv-annif/bin/pip install 'annif[omikuji]==1.4.*'"
VARIANTS = {"parabel": "Parabel", "bonsai": "Bonsai"}
# annif optimize's grid (annif.cli FILTER_BATCH_MAX_LIMIT = 15; cli_util.generate_filter_params)
LIMITS = tuple(range(1, 16))
THRESHOLDS = tuple(i * 0.05 for i in range(20))
TOP_K = 20  # suggestions written per document (>= the largest limit)
VAL_FRACTION = 0.1


class AnnifUnavailable(RuntimeError):
    """The Annif interpreter is missing (one line naming the install command)."""


# ----------------------------------------------------------------------------- environment
def annif_python() -> Path:
    """The Annif virtualenv's interpreter: ``$ANNIF_PYTHON`` or ``<repo>/.venv-annif/bin/python``."""
    env = os.environ.get("ANNIF_PYTHON")
    return Path(env) if env else ROOT / ".venv-annif" / "bin" / "python"


def available() -> bool:
    return annif_python().is_file()


def check_available() -> Path:
    py = annif_python()
    if not py.is_file():
        raise AnnifUnavailable(f"Annif interpreter not found at {py} (set ANNIF_PYTHON, or install it at the "
                               f"repository root: {INSTALL})")
    return py


def nltk_data() -> str:
    return os.environ.get("NLTK_DATA") or str(ROOT.parent / "shared" / "peers" / "nltk_data")


# ----------------------------------------------------------------------------- limit / threshold (pure numpy)
def suggestion_arrays(suggestions: Sequence[Sequence[Sequence[Any]]], k: int) -> tuple[np.ndarray, np.ndarray]:
    """``(scores, ids)`` of shape (n, k) from per-document ``[(label index, score), ...]`` lists (best
    first, as the worker writes them); missing slots have score 0 and id -1."""
    n = len(suggestions)
    scores = np.zeros((n, k))
    ids = np.full((n, k), -1, dtype=np.int64)
    for i, row in enumerate(suggestions):
        for r, (j, s) in enumerate(row[:k]):
            ids[i, r], scores[i, r] = int(j), float(s)
    return scores, ids


def keep_mask(scores: np.ndarray, limit: int, threshold: float) -> np.ndarray:
    """Annif's filter on rank-ordered suggestions (``scores`` (n, k), best first per row): at most
    ``limit`` suggestions with score >= ``threshold``; a score of 0 is no suggestion (as Annif's
    evaluation: ``y_pred > 0``)."""
    scores = np.asarray(scores, dtype=np.float64)
    rank = np.arange(scores.shape[1])[None, :]
    return (rank < limit) & (scores >= threshold) & (scores > 0)


def doc_f1(kept: np.ndarray, hits: np.ndarray, n_gold: np.ndarray) -> float:
    """Document-averaged F1 (scikit-learn ``f1_score(average="samples")``, as ``annif optimize``):
    per document 2 TP / (|gold| + |predicted|), 0 when both are empty; mean over documents."""
    tp = (kept & hits).sum(axis=1).astype(np.float64)
    den = kept.sum(axis=1) + np.asarray(n_gold, dtype=np.float64)
    f = np.divide(2 * tp, den, out=np.zeros_like(tp), where=den > 0)
    return float(f.mean()) if f.size else 0.0


def choose_limit_threshold(scores: np.ndarray, hits: np.ndarray, n_gold: np.ndarray,
                           limits: Sequence[int] = LIMITS,
                           thresholds: Sequence[float] = THRESHOLDS) -> tuple[int, float, float]:
    """``(limit, threshold, F1)`` maximising :func:`doc_f1` on held-out documents, over the grid of
    ``annif optimize`` in its order (limit outer, threshold inner) with its tie rule (``>=``: the
    last pair reaching the best F1 wins). ``scores`` (n, k) best first per row, ``hits`` (n, k) whether
    each suggestion is a gold label of its document, ``n_gold`` (n,) gold labels per document
    (including those not suggested)."""
    hits = np.asarray(hits, dtype=bool)
    best_f1, best = 0.0, (int(limits[0]), float(thresholds[0]))
    for lim in limits:
        for thr in thresholds:
            f = doc_f1(keep_mask(scores, int(lim), float(thr)), hits, n_gold)
            if f >= best_f1:
                best_f1, best = f, (int(lim), float(thr))
    return best[0], best[1], best_f1


def validation_slice(n: int, seed: int, fraction: float = VAL_FRACTION) -> tuple[np.ndarray, np.ndarray]:
    """``(fit, val)`` positions of ``n`` training documents: a seeded shuffle, ``val`` its first
    ``round(fraction * n)`` (at least 1 when n >= 2), both sorted."""
    m = min(max(int(round(fraction * n)), 1 if n >= 2 else 0), n)
    perm = np.random.default_rng(seed).permutation(n)
    return np.sort(perm[m:]), np.sort(perm[:m])


# ----------------------------------------------------------------------------- worker
def run_worker(job: dict[str, Any], log: Path | None = None) -> dict[str, Any]:
    """Run ``_annif_worker.py`` on ``job`` in the Annif interpreter; its output as a dict."""
    py = check_available()
    env = dict(os.environ, NLTK_DATA=nltk_data(), RAYON_NUM_THREADS=str(job.get("jobs", 1)),
               OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", PYTHONNOUSERSITE="1")
    env.pop("PYTHONPATH", None)
    with tempfile.TemporaryDirectory(prefix="annif-") as tmp:
        jp, op, lp = Path(tmp) / "job.json", Path(tmp) / "out.json", Path(tmp) / "worker.log"
        jp.write_text(json.dumps(job), encoding="utf-8")
        with open(lp, "wb") as errf:
            rc = subprocess.run([str(py), str(WORKER), str(jp), str(op)], stdout=errf, stderr=errf, env=env,
                                cwd=tmp).returncode
        text = lp.read_text(encoding="utf-8", errors="replace")
        if log is not None:
            log.write_text(text, encoding="utf-8")
        if rc != 0 or not op.is_file():
            tail = [ln for ln in text.replace("\r", "\n").splitlines() if ln.strip()][-15:]
            raise RuntimeError(f"Annif worker failed (exit {rc}):\n" + "\n".join(tail))
        out: dict[str, Any] = json.loads(op.read_text(encoding="utf-8"))
    return out


def run_annif(texts_train: Sequence[str], labels_train: Sequence[Sequence[int]], texts_test: Sequence[str],
              label_names: Sequence[str], variant: str, seed: int, *, k: int = TOP_K,
              val_fraction: float = VAL_FRACTION, jobs: int = 1,
              analyzer: str = "snowball(english)") -> tuple[list[list[str]], dict[str, Any]]:
    """Predicted label names of the test documents and what was chosen / timed.

    ``labels_train``: per training document the indices (into ``label_names``) of its gold labels.
    A seeded ``val_fraction`` slice of the training documents chooses ``limit`` and ``threshold``
    (:func:`choose_limit_threshold`) for a model trained on the other training documents; the model
    trained on every training document then suggests for the test documents. ``info``:
    ``limit``, ``threshold``, ``val_f1``, ``train_seconds`` (both trainings plus the slice's
    suggestions: all selection on training data, no test prediction), ``test_seconds``,
    ``wall_seconds`` (the subprocess, Python start-up and imports included), versions.
    """
    if variant not in VARIANTS:
        raise ValueError(f"unknown Annif variant {variant!r} (known: {', '.join(VARIANTS)})")
    if len(texts_train) != len(labels_train):
        raise ValueError("texts_train and labels_train differ in length")
    L = len(label_names)
    k = min(k, L)
    n_tr = len(texts_train)
    fit, val = validation_slice(n_tr, seed, val_fraction)
    docs = [*texts_train, *texts_test]
    test = list(range(n_tr, n_tr + len(texts_test)))
    job = {
        "labels": list(label_names), "docs": docs,
        "gold": {str(i): sorted({int(j) for j in labels_train[i]}) for i in range(n_tr)},  # training docs only
        "fits": [{"train": fit.tolist(), "suggest": val.tolist()},
                 {"train": list(range(n_tr)), "suggest": test}],
        "variant": variant, "k": k, "jobs": jobs, "analyzer": analyzer, "language": "en",
    }
    t0 = time.perf_counter()
    out = run_worker(job)
    wall = time.perf_counter() - t0
    f_val, f_all = out["fits"]
    # selection on the validation slice (training documents only)
    S, ids = suggestion_arrays(f_val["suggestions"], k)
    gold = [set(int(j) for j in labels_train[int(i)]) for i in val]
    hits = np.array([[int(j) in g for j in row] for row, g in zip(ids, gold, strict=True)], dtype=bool).reshape(S.shape)
    n_gold = np.array([len(g) for g in gold])
    limits = [x for x in LIMITS if x <= k]
    limit, threshold, val_f1 = choose_limit_threshold(S, hits, n_gold, limits)
    # the test documents: Annif's filter with the chosen pair
    St, idt = suggestion_arrays(f_all["suggestions"], k)
    keep = keep_mask(St, limit, threshold)
    pred = [[label_names[int(j)] for j in idt[i][keep[i]]] for i in range(len(texts_test))]
    info = {
        "variant": variant, "limit": limit, "threshold": round(threshold, 2), "val_f1": val_f1,
        "n_fit": int(fit.size), "n_val": int(val.size),
        "train_seconds": f_val["train_seconds"] + f_val["suggest_seconds"] + f_all["train_seconds"],
        "final_train_seconds": f_all["train_seconds"], "test_seconds": f_all["suggest_seconds"],
        "wall_seconds": wall, "annif": out.get("annif"), "omikuji": out.get("omikuji"),
    }
    return pred, info


# ----------------------------------------------------------------------------- texts of a features folder
def _read_docs(path: Path, text_fields: Sequence[str], tokens_field: str | None,
               wanted: set[str]) -> dict[str, str]:
    found: dict[str, str] = {}
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            obj = json.loads(line)
            did = obj.get("doc_id", obj.get("id"))
            if did is None or str(did) not in wanted:
                continue
            parts = [obj[x] for x in text_fields if isinstance(obj.get(x), str) and obj[x].strip()]
            if parts:
                text = "\n".join(parts)
            elif tokens_field and isinstance(obj.get(tokens_field), list):
                text = " ".join(str(t) for t in obj[tokens_field])
            else:
                text = ""
            found[str(did)] = text
    return found


def doc_texts(features: str | Path, doc_ids: Sequence[str], data_dir: str | Path) -> list[str]:
    """The raw text of each document of a features folder (``doc_ids`` order), from its corpus's
    documents file under ``data_dir``: the registered corpus named in ``corpus.json`` (its text fields
    joined with a newline, as ``sparkhc featurize`` reads them; token-only corpora such as
    rcv1v2_subset and meka_imdb: the tokens joined with spaces), or the ``--input`` file it records."""
    from sparkhc.corpus.registry import get_corpus
    from sparkhc.features import features_corpus_info

    name = features_corpus_info(features).get("corpus")
    if not name:
        raise ValueError(f"{features}: no corpus.json naming the corpus; the document texts cannot be found")
    wanted = {str(x) for x in doc_ids}
    if Path(str(name)).is_file():
        found = _read_docs(Path(str(name)), ("text",), "tokens", wanted)
    else:
        info = get_corpus(str(name))
        if info.reader != "jsonl":
            raise ValueError(f"corpus {name!r}: reader {info.reader!r} is not supported for texts")
        path = info.corpus_dir(data_dir) / info.docs_file
        if not path.is_file():
            alt = path.with_suffix("") if path.suffix == ".gz" else None
            path = alt if alt is not None and alt.is_file() else path
        found = _read_docs(path, info.text_fields, info.tokens_field, wanted)
    missing = [x for x in doc_ids if str(x) not in found]
    if missing:
        raise ValueError(f"{len(missing)} documents of {features} not found in corpus {name!r} under {data_dir} "
                         f"(first: {missing[0]!r})")
    return [found[str(x)] for x in doc_ids]


if __name__ == "__main__":  # python benchmarks/peer_annif.py: is the Annif interpreter there?
    try:
        print(f"Annif interpreter: {check_available()}")
    except AnnifUnavailable as e:
        sys.exit(str(e))
