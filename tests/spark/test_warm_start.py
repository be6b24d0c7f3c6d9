"""Warm start: a model trained on old documents and refreshed with new ones through
``sparkhc train --warm-start`` equals one trained incrementally on all of them in the same order."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from sparkhc.cli import run
from sparkhc.persistence import load_model

TAXONOMY = "ROOT\tsport\nROOT\tpolitics\nsport\tfootball\nsport\ttennis\npolitics\telections\npolitics\ttaxes\n"
WORDS = {
    "football": "goal striker league match penalty stadium",
    "tennis": "serve racket wimbledon set match court",
    "elections": "vote ballot candidate poll campaign party",
    "taxes": "tax budget income revenue treasury party",
}


def _corpus(tmp_path):
    rng = np.random.default_rng(4)
    leaves = list(WORDS)
    docs = []
    for i in range(80):
        labs = [leaves[i % 4]] + ([leaves[(i + 2) % 4]] if i % 5 == 0 else [])
        words = " ".join(" ".join(rng.permutation(WORDS[lab].split())[:4]) for lab in labs)
        # the first 40 ids are the "old" documents, the rest arrive later
        docs.append({"id": f"doc{i:03d}", "text": words, "labels": labs, "split": "old" if i < 40 else "new"})
    path = tmp_path / "docs.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        for d in docs:
            fh.write(json.dumps(d) + "\n")
    tax = tmp_path / "taxonomy.tsv"
    tax.write_text(TAXONOMY)
    return path, tax


@pytest.mark.parametrize("model", ["h_perc", "h_rls"])
def test_warm_start_equals_incremental_training(spark, tmp_path, model):
    docs, tax = _corpus(tmp_path)
    feats = tmp_path / "features"
    assert run(["featurize", "--input", str(docs), "--taxonomy", str(tax), "--out", str(feats),
                "--set", "featurize.min_df=1", "--set", "featurize.max_df=1.0",
                "--set", "featurize.partitions=1"]) == 0
    one = ["--set", "train.epochs=1", "--set", "train.shards=1", "--set", "train.self_leaves=false"]
    assert run(["train", "--features", str(feats), "--out", str(tmp_path / "old"), "--model", model,
                "--split", "old", *one]) == 0
    assert run(["train", "--features", str(feats), "--out", str(tmp_path / "refreshed"), "--split", "new",
                "--warm-start", str(tmp_path / "old"), *one]) == 0
    assert run(["train", "--features", str(feats), "--out", str(tmp_path / "all"), "--model", model,
                "--split", "all", *one]) == 0
    refreshed, meta = load_model(tmp_path / "refreshed")
    full, _ = load_model(tmp_path / "all")
    assert meta["training"]["warm_start"].endswith("old")
    a, b = refreshed.get_state().arrays, full.get_state().arrays
    assert a.keys() == b.keys()
    for k in a:
        if hasattr(a[k], "toarray"):
            np.testing.assert_array_equal(a[k].toarray(), b[k].toarray(), err_msg=k)
        else:
            np.testing.assert_array_equal(a[k], b[k], err_msg=k)
