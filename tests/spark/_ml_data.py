"""Small real slices for the sparkhc.ml tests (20 Newsgroups, bydate split)."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path
from typing import Any

from tests.conftest import corpus_dir


def newsgroups_records(n_train: int, n_test: int, seed: int = 0) -> list[dict[str, Any]]:
    """``n_train`` training and ``n_test`` test postings of 20 Newsgroups (a seeded sample)."""
    root = corpus_dir("20newsgroups")
    with gzip.open(root / "docs.jsonl.gz", "rt", encoding="utf-8") as fh:
        recs = [json.loads(line) for line in fh]
    random.Random(seed).shuffle(recs)
    train = [r for r in recs if r["split"] == "train"][:n_train]
    test = [r for r in recs if r["split"] == "test"][:n_test]
    return [{"id": r["id"], "split": r["split"], "labels": r["labels"], "text": r["text"]} for r in train + test]


def newsgroups_taxonomy() -> Path:
    return corpus_dir("20newsgroups") / "taxonomy.tsv"


def newsgroups_df(spark: Any, n_train: int, n_test: int, seed: int = 0) -> Any:
    """The slice as a DataFrame: doc_id, split, labels (array<string>), text."""
    rows = [(r["id"], r["split"], r["labels"], r["text"]) for r in newsgroups_records(n_train, n_test, seed)]
    return spark.createDataFrame(rows, "doc_id string, split string, labels array<string>, text string")


def newsgroups_features(spark: Any, out: Path, n_train: int, n_test: int, seed: int = 0) -> Path:
    """The slice featurized by ``sparkhc featurize --input`` (the CLI's own features folder)."""
    from sparkhc.cli import run

    src = out.parent / f"{out.name}.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in newsgroups_records(n_train, n_test, seed)), encoding="utf-8")
    assert run(["featurize", "--input", str(src), "--taxonomy", str(newsgroups_taxonomy()), "--out", str(out),
                "--set", "featurize.partitions=2"]) == 0
    return out
