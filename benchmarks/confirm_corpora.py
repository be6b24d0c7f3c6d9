#!/usr/bin/env python
"""Build the confirmation corpora of issue 29 from the staged data, reproducibly (seeded), as raw
JSON Lines plus a taxonomy for ``sparkhc featurize --input``:

    python benchmarks/confirm_corpora.py --data-dir ../shared/data --out /tmp/acc/raw
    sparkhc featurize --input /tmp/acc/raw/meka25k/docs.jsonl.gz --taxonomy /tmp/acc/raw/meka25k/taxonomy.tsv --on-empty keep \\
        --out /tmp/acc/meka25k/features
    sparkhc featurize --input /tmp/acc/raw/20ng_prefix2k/docs.jsonl.gz \\
        --taxonomy /tmp/acc/raw/20ng_prefix2k/taxonomy.tsv --out /tmp/acc/20ng_prefix2k/features

- ``meka25k``: 25,000 documents of ``meka_imdb`` drawn without replacement (numpy seed 0), each with
  its ``fold`` of ``folds.tsv`` (fold 0 = the test fold of the corpus protocol), 28 flat genres
  under one root; documents without a genre are left out (the corpus has 24, counted in the output).
- ``20ng_prefix2k``: 20 Newsgroups under its depth-5 name-prefix tree (``taxonomy_name_prefix.tsv``;
  the labels are the newsgroup and its prefixes, so internal nodes are labels), 2,000 training
  documents drawn without replacement (numpy seed 0) from the bydate training split and the whole
  bydate test split.

Nothing here is chosen on any score: the samples are fixed before any model sees them.
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path

import numpy as np


def _write(out: Path, records: list[dict], taxonomy_lines: list[str]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with gzip.open(out / "docs.jsonl.gz", "wt", encoding="utf-8") as fh:
        for r in records:
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")
    (out / "taxonomy.tsv").write_text("".join(f"{line}\n" for line in taxonomy_lines), encoding="utf-8")


def meka25k(data: Path, out: Path, n: int = 25_000, seed: int = 0) -> str:
    folds = {}
    for line in (data / "meka_imdb" / "folds.tsv").read_text().splitlines()[1:]:
        i, f = line.split("\t")
        folds[i] = int(f)
    with gzip.open(data / "meka_imdb" / "docs.jsonl.gz", "rt", encoding="utf-8") as fh:
        docs = [json.loads(line) for line in fh]
    pick = np.sort(np.random.default_rng(seed).choice(len(docs), size=n, replace=False))
    records, skipped, genres = [], 0, set()
    for k in pick:
        d = docs[int(k)]
        if not d["labels"]:
            skipped += 1
            continue
        genres.update(d["labels"])
        records.append({"id": f"m{d['id']}", "fold": folds[str(d["id"])], "labels": d["labels"],
                        "tokens": d["tokens"]})
    _write(out, records, [f"ROOT\t{g}" for g in sorted(genres)])
    return f"meka25k: {len(records)} documents ({skipped} without a genre left out), {len(genres)} genres"


def prefix2k(data: Path, out: Path, n_train: int = 2_000, seed: int = 0) -> str:
    tax_lines = (data / "20newsgroups" / "taxonomy_name_prefix.tsv").read_text().splitlines()
    parent = dict(reversed(line.split("\t")) for line in tax_lines if line.strip())
    with gzip.open(data / "20newsgroups" / "docs.jsonl.gz", "rt", encoding="utf-8") as fh:
        docs = [json.loads(line) for line in fh]
    train = [i for i, d in enumerate(docs) if d["split"] == "train"]
    keep = set(np.random.default_rng(seed).choice(len(train), size=n_train, replace=False).tolist())
    records = []
    for j, i in enumerate(train):
        if j in keep:
            records.append(docs[i])
    records += [d for d in docs if d["split"] == "test"]
    out_records = []
    for d in records:
        node, labels = d["newsgroup"], []
        while node != "ROOT":
            labels.append(node)
            node = parent[node]
        out_records.append({"id": d["id"], "split": d["split"], "labels": labels[::-1], "text": d["text"]})
    _write(out, out_records, tax_lines)
    return f"20ng_prefix2k: {n_train} training and {len(out_records) - n_train} test documents, {len(parent)} nodes"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", default="../shared/data")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    data, out = Path(args.data_dir), Path(args.out)
    print(meka25k(data, out / "meka25k"))
    print(prefix2k(data, out / "20ng_prefix2k"))


if __name__ == "__main__":
    main()
