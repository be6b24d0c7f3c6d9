#!/usr/bin/env python
"""Confirmation corpora of the small kind (issue 51, point 5): small training parts with many rare
labels, built reproducibly (seeded) from the staged public data and featurized by the product's own
path (``sparkhc featurize --input ... --taxonomy ...``)::

    python benchmarks/small_corpora.py --data-dir ../shared/data --out /tmp/small
    python benchmarks/compare.py --features reuters_small=/tmp/small/reuters_small/features \\
        --features rcv1_small=/tmp/small/rcv1_small/features --features imdb_small=/tmp/small/imdb_small/features

Each corpus is written as raw JSON Lines plus a taxonomy under ``OUT/raw/NAME`` and featurized into
``OUT/NAME/features``: a features folder with a ``split`` of ``train`` / ``test`` (one split, the
form ``compare.py --features NAME=DIR`` takes; the vocabulary and idf are fitted on the training
part only, as ``sparkhc featurize`` does for split corpora). Every scored label is a taxonomy node
(``corpus.json`` names no scored subset: every node but the root is scored, group nodes included).

Samples: ``numpy.random.default_rng(seed)`` (``--seed``, default 0) draws without replacement from
the candidate documents in the order of the staged ``docs.jsonl.gz``; the sampled documents keep
that order. Labels: a label is kept when at least one sampled training document has it (Reuters:
and at least one test document, the ApteMod rule); the others are removed from every document and
from the taxonomy, and a document left without any label is left out (counted in the output).

- ``reuters_small``: Reuters-21578, 1,500 training documents drawn from the ApteMod training
  documents (``apte_mod`` true, ``split`` train: 7,770); test part = every ApteMod test document
  (3,019). Grouping: the six groups of the staged ``taxonomy_topics.tsv`` (subject_misc,
  economic_indicator, currency, corporate, commodity, energy) over the topic codes: two levels,
  a group being a label of every document with one of its topics. With seed 0: 72 topics and 6
  groups kept, 7 test documents left out. Text: title and body joined by a
  newline (as the registered corpus reads them).
- ``rcv1_small``: rcv1v2_subset, 1,500 training documents drawn from folds 1-4 of ``folds.tsv``;
  test part = fold 0 (464 documents). The official topic tree (``taxonomy.tsv``, depth 4), labels
  ancestor-closed as staged; tokens as staged. With seed 0: 95 of the 103 topics kept.
- ``imdb_small``: meka_imdb, 2,000 training documents drawn from folds 1-4 of ``folds.tsv`` and
  then 2,000 test documents drawn from fold 0 (the same generator, in that order); documents
  without a genre are not candidates. The 28 genres flat under one root; binary bag-of-words tokens
  as staged; documents without any vocabulary word are kept (``--on-empty keep``, as the corpus's
  protocol does).

Nothing here is chosen on any score: the samples and rules are fixed before any model sees them.
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

N_TRAIN = {"reuters_small": 1500, "rcv1_small": 1500, "imdb_small": 2000}
N_TEST_IMDB = 2000


def _docs(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _folds(path: Path) -> dict[str, int]:
    lines = path.read_text(encoding="utf-8").splitlines()[1:]
    return {a: int(b) for a, b in (line.split("\t") for line in lines if line.strip())}


def draw(candidates: list[int], n: int, rng: np.random.Generator, what: str) -> list[int]:
    """``n`` of ``candidates`` without replacement, kept in their given order."""
    if n > len(candidates):
        raise SystemExit(f"small_corpora: {what}: {n} documents wanted, only {len(candidates)} candidates")
    pick = rng.choice(len(candidates), size=n, replace=False)
    return [candidates[int(i)] for i in np.sort(pick)]


def restrict(train: list[dict[str, Any]], test: list[dict[str, Any]], edges: list[tuple[str, str]], root: str,
             need_test: bool = False) -> tuple[list[dict[str, Any]], list[tuple[str, str]], dict[str, int]]:
    """The module's label rule: labels of at least one training record (and, with ``need_test``, of
    at least one test record) are kept, with their ancestors in ``edges``; the other labels are
    removed from the records and the taxonomy; records left without a label are dropped. The kept
    records (training first) with ``split`` set, the kept edges and counts."""
    parent = {c: p for p, c in edges}

    def closure(labels: Iterable[str]) -> set[str]:
        out: set[str] = set()
        for x in labels:
            while x != root and x not in out:
                out.add(x)
                x = parent[x]
        return out

    keep = set().union(*(closure(r["labels"]) for r in train))
    if need_test:
        keep &= set().union(*(closure(r["labels"]) for r in test))
        keep = closure(keep)
    out, dropped = [], {"train": 0, "test": 0}
    for split, recs in (("train", train), ("test", test)):
        for r in recs:
            labels = [x for x in r["labels"] if x in keep]
            if not labels:
                dropped[split] += 1
                continue
            out.append({**r, "labels": labels, "split": split})
    kept_edges = [(p, c) for p, c in edges if c in keep]
    counts = {"train": sum(r["split"] == "train" for r in out), "test": sum(r["split"] == "test" for r in out),
              "dropped_train": dropped["train"], "dropped_test": dropped["test"], "labels": len(keep)}
    return out, kept_edges, counts


def _edges(path: Path) -> list[tuple[str, str]]:
    return [(a, b) for a, b in (line.split("\t")[:2] for line in path.read_text(encoding="utf-8").splitlines()
                                if line.strip())]


def reuters_small(data: Path, seed: int) -> tuple[list[dict[str, Any]], list[tuple[str, str]], dict[str, int]]:
    docs = _docs(data / "reuters21578" / "docs.jsonl.gz")
    rng = np.random.default_rng(seed)
    cand = [i for i, d in enumerate(docs) if d.get("apte_mod") and d["split"] == "train"]
    train = [docs[i] for i in draw(cand, N_TRAIN["reuters_small"], rng, "reuters21578 ApteMod train")]
    test = [d for d in docs if d.get("apte_mod") and d["split"] == "test"]

    def rec(d: dict[str, Any]) -> dict[str, Any]:
        text = "\n".join(x for x in (d.get("title"), d.get("text")) if isinstance(x, str) and x.strip())
        return {"id": f"r{d['id']}", "labels": list(d["labels"]), "text": text}

    return restrict([rec(d) for d in train], [rec(d) for d in test],
                    _edges(data / "reuters21578" / "taxonomy_topics.tsv"), "ROOT", need_test=True)


def _folded(data: Path, corpus: str, n_train: int, n_test: int | None, seed: int, root: str,
            edges: Callable[[list[dict[str, Any]]], list[tuple[str, str]]], prefix: str = "",
            ) -> tuple[list[dict[str, Any]], list[tuple[str, str]], dict[str, int]]:
    docs = _docs(data / corpus / "docs.jsonl.gz")
    fold = _folds(data / corpus / "folds.tsv")
    rng = np.random.default_rng(seed)
    ok = [i for i, d in enumerate(docs) if d["labels"]]
    train = draw([i for i in ok if fold[str(docs[i]["id"])] != 0], n_train, rng, f"{corpus} folds 1-4")
    test_c = [i for i in ok if fold[str(docs[i]["id"])] == 0]
    test = test_c if n_test is None else draw(test_c, n_test, rng, f"{corpus} fold 0")

    def rec(d: dict[str, Any]) -> dict[str, Any]:
        return {"id": f"{prefix}{d['id']}", "labels": list(d["labels"]), "tokens": d["tokens"]}

    tr, te = [rec(docs[i]) for i in train], [rec(docs[i]) for i in test]
    return restrict(tr, te, edges(tr + te), root)


def rcv1_small(data: Path, seed: int) -> tuple[list[dict[str, Any]], list[tuple[str, str]], dict[str, int]]:
    tree = _edges(data / "rcv1v2_subset" / "taxonomy.tsv")
    return _folded(data, "rcv1v2_subset", N_TRAIN["rcv1_small"], None, seed, "Root", lambda _: tree)


def imdb_small(data: Path, seed: int) -> tuple[list[dict[str, Any]], list[tuple[str, str]], dict[str, int]]:
    def flat(recs: list[dict[str, Any]]) -> list[tuple[str, str]]:
        return [("ROOT", g) for g in sorted({x for r in recs for x in r["labels"]})]

    return _folded(data, "meka_imdb", N_TRAIN["imdb_small"], N_TEST_IMDB, seed, "ROOT", flat, prefix="m")


BUILDERS = {"reuters_small": reuters_small, "rcv1_small": rcv1_small, "imdb_small": imdb_small}


def write_raw(out: Path, records: list[dict[str, Any]], edges: list[tuple[str, str]]) -> tuple[Path, Path]:
    out.mkdir(parents=True, exist_ok=True)
    docs, tax = out / "docs.jsonl.gz", out / "taxonomy.tsv"
    with gzip.open(docs, "wt", encoding="utf-8") as fh:
        for r in records:
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")
    tax.write_text("".join(f"{p}\t{c}\n" for p, c in edges), encoding="utf-8")
    return docs, tax


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", default="../shared/data")
    ap.add_argument("--out", default="/tmp/small")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--master", default="local[2]", help="featurize's Spark master")
    ap.add_argument("--only", default=",".join(BUILDERS), help=f"comma-separated among {','.join(BUILDERS)}")
    ap.add_argument("--no-featurize", action="store_true", help="write the raw JSON Lines and taxonomies only")
    a = ap.parse_args()
    data, out = Path(a.data_dir), Path(a.out)
    for name in a.only.split(","):
        if name not in BUILDERS:
            raise SystemExit(f"small_corpora: unknown corpus {name!r} (known: {', '.join(BUILDERS)})")
        records, edges, counts = BUILDERS[name](data, a.seed)
        docs, tax = write_raw(out / "raw" / name, records, edges)
        print(f"{name}: {counts['train']} train / {counts['test']} test documents, {counts['labels']} labels "
              f"({counts['dropped_train']} training / {counts['dropped_test']} test documents left without a kept "
              f"label, left out); seed {a.seed}", flush=True)
        if a.no_featurize:
            continue
        cmd = [sys.executable, "-m", "sparkhc.cli", "featurize", "--input", str(docs), "--taxonomy", str(tax),
               "--out", str(out / name / "features"), "--overwrite", "--on-empty", "keep", "--master", a.master]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        print(f"  features: {out / name / 'features'}", flush=True)


if __name__ == "__main__":
    main()
