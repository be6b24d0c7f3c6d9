"""Classifying raw documents with a trained model (issue 53): ``predict --input`` and ``featurize --like``
apply the model's own feature spec, in this process (small jobs, no Spark) and on Spark, with the same
predictions; ``evaluate`` scores them against their gold labels, in this process and on Spark, with the
same metrics. End to end on a slice of 20 Newsgroups (skipped when the corpus is absent)."""

from __future__ import annotations

import gzip
import json
import random

import numpy as np
import pyarrow.parquet as pq
import pytest

from sparkhc.cli import run
from sparkhc.features import read_features_local
from sparkhc.persistence import load_model
from tests.conftest import corpus_dir


def _rows(pred_dir):
    return pq.read_table(pred_dir / "data").sort_by("doc_id").to_pylist()


@pytest.fixture(scope="module")
def ng(spark, tmp_path_factory):
    """A model trained (3 epochs) on 300 training documents of 20 Newsgroups, and 120 test documents
    as raw JSON Lines: with labels (no split field) and without labels."""
    src = corpus_dir("20newsgroups")
    rnd = random.Random(53)
    train, test = [], []
    with gzip.open(src / "docs.jsonl.gz", "rt", encoding="utf-8") as fh:
        for line in fh:
            r = json.loads(line)
            (train if r["split"] == "train" else test).append(r)
    rnd.shuffle(train)
    rnd.shuffle(test)
    d = tmp_path_factory.mktemp("ng53")

    def write(name, rows, drop=()):
        with gzip.open(d / name, "wt", encoding="utf-8") as fh:
            for r in rows:
                fh.write(json.dumps({k: v for k, v in r.items() if k not in drop}) + "\n")
        return d / name

    write("train.jsonl.gz", train[:300])
    new = write("new.jsonl.gz", test[:120], drop=("split", "newsgroup"))
    unlabelled = write("unlabelled.jsonl.gz", test[:120], drop=("split", "newsgroup", "labels"))
    tax = src / "taxonomy.tsv"
    assert run(["featurize", "--input", str(d / "train.jsonl.gz"), "--taxonomy", str(tax), "--out",
                str(d / "feats")]) == 0
    assert run(["train", "--features", str(d / "feats"), "--out", str(d / "model"), "--split", "all",
                "--set", "train.epochs=3"]) == 0
    return {"dir": d, "new": new, "unlabelled": unlabelled, "model": d / "model", "taxonomy": tax,
            "test": test[:120]}


def test_predict_raw_documents_in_process_equals_spark_and_the_model(ng, capsys):
    d = ng["dir"]
    assert run(["predict", "--model", str(ng["model"]), "--input", str(ng["new"]), "--out", str(d / "p_local")]) == 0
    local = json.loads(capsys.readouterr().out)
    assert local["execution"] == "driver" and local["documents"] == 120
    assert run(["predict", "--model", str(ng["model"]), "--input", str(ng["new"]), "--out", str(d / "p_spark"),
                "--set", "predict.execution=spark"]) == 0
    assert json.loads(capsys.readouterr().out)["execution"] == "spark"
    got, spark_rows = _rows(d / "p_local"), _rows(d / "p_spark")
    assert got == spark_rows
    # the gold labels travel as given, every document once
    assert [r["doc_id"] for r in got] == sorted(r["id"] for r in ng["test"])
    gold = {r["id"]: r["labels"] for r in ng["test"]}
    assert all(r["labels"] == gold[r["doc_id"]] for r in got)
    # featurize --like makes the features the model decodes: the same predictions from them
    assert run(["featurize", "--input", str(ng["new"]), "--like", str(ng["model"]), "--out", str(d / "f_like")]) == 0
    capsys.readouterr()
    assert run(["predict", "--model", str(ng["model"]), "--features", str(d / "f_like"), "--split", "all",
                "--out", str(d / "p_like")]) == 0
    assert _rows(d / "p_like") == got
    # and the model itself, decoding those features in this process, predicts the same labels
    model, _ = load_model(ng["model"])
    batch, _ = read_features_local(d / "f_like")
    predicted = model.predict(batch)
    want = [sorted(predicted[i]) for i in np.argsort(batch.doc_ids)]
    assert [sorted(r["pred_labels"]) for r in got] == want


def test_evaluate_raw_predictions_in_process_equals_spark(ng, capsys):
    d = ng["dir"]
    pred = d / "p_eval"
    assert run(["predict", "--model", str(ng["model"]), "--input", str(ng["new"]), "--out", str(pred)]) == 0
    assert run(["evaluate", "--predictions", str(pred), "--out", str(d / "m_local.json")]) == 0
    assert run(["evaluate", "--predictions", str(pred), "--out", str(d / "m_spark.json"),
                "--set", "predict.execution=spark"]) == 0
    capsys.readouterr()
    local = json.loads((d / "m_local.json").read_text())
    spark_m = json.loads((d / "m_spark.json").read_text())
    assert local["metrics"] == spark_m["metrics"]
    assert local["metrics"]["n_docs"] == 120
    # micro-F1 by hand from the rows: ancestor-closed sets over the scored (non-root) nodes
    from sparkhc.taxonomy import Taxonomy

    tax = Taxonomy.load(ng["taxonomy"])
    tp = fp = fn = 0
    for r in _rows(pred):
        g = {n for lab in r["labels"] for n in tax.path(tax.id(lab))} - {0}
        p = {n for lab in r["pred_labels"] for n in tax.path(tax.id(lab))} - {0}
        tp, fp, fn = tp + len(g & p), fp + len(p - g), fn + len(g - p)
    assert local["metrics"]["LBMiF"] == pytest.approx(2 * tp / (2 * tp + fp + fn))


def test_predict_unlabelled_raw_documents(ng, capsys):
    d = ng["dir"]
    assert run(["predict", "--model", str(ng["model"]), "--input", str(ng["unlabelled"]), "--out",
                str(d / "p_unl")]) == 0
    capsys.readouterr()
    assert run(["predict", "--model", str(ng["model"]), "--input", str(ng["new"]), "--out", str(d / "p_lab")]) == 0
    capsys.readouterr()
    rows = _rows(d / "p_unl")
    assert len(rows) == 120 and all(not r["labels"] for r in rows)
    assert [r["pred_labels"] for r in rows] == [r["pred_labels"] for r in _rows(d / "p_lab")]
    from sparkhc.errors import SchemaError

    with pytest.raises(SchemaError, match="none of the 120 prediction rows has gold labels"):
        run(["evaluate", "--predictions", str(d / "p_unl")])


def test_a_default_training_prints_few_lines_and_names_what_it_chose(ng):
    """A default ``sparkhc train`` (epochs and C chosen on validation bands, calibration) in a fresh
    process: at most 20 non-empty lines on stderr at the default verbosity, the calibration decision
    as a sentence, and the JSON result naming the epochs, C, the calibration and the budget; -v adds
    the per-epoch lines. The metadata's epochs are the trained count."""
    import os
    import subprocess
    import sys

    from tests.conftest import ROOT

    d = ng["dir"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def train(out, *flags):
        p = subprocess.run([sys.executable, "-m", "sparkhc.cli", "train", "--features", str(d / "feats"), "--split",
                            "all", "--out", str(d / out), *flags], capture_output=True, text=True, env=env, timeout=900)
        assert p.returncode == 0, p.stderr[-3000:]
        return json.loads(p.stdout), [ln for ln in p.stderr.splitlines() if ln.strip()]

    result, lines = train("m_default")
    assert len(lines) <= 20, "\n".join(lines)
    assert not [ln for ln in lines if "{'" in ln or "epoch 1/" in ln], lines
    assert any("calibration: " in ln and ("offsets applied" in ln) for ln in lines), lines
    assert isinstance(result["epochs"], int) and result["epochs"] >= 1 and result["C"] in (0.1, 0.3, 1.0)
    assert result["calibration"] and "time_budget" not in result  # no budget by default (issue 51)
    meta = json.loads((d / "m_default" / "metadata.json").read_text())
    assert meta["params"]["epochs"] == meta["training"]["epochs"] == result["epochs"]
    _, loud = train("m_loud", "-v", "--set", "train.calibrate=off")
    assert sum("epoch 1/" in ln for ln in loud) >= 1 and len(loud) > 20


def test_ml_model_transforms_a_raw_text_column_as_predict_input(ng, spark, capsys):
    """A fitted model given a DataFrame of raw text (a ``text`` column, no features) weights it with its
    own feature_spec.json, by the code of ``predict --input``: the same labels and scores."""
    from sparkhc.errors import SchemaError
    from sparkhc.ml import HierarchicalClassificationModel

    d = ng["dir"]
    assert run(["predict", "--model", str(ng["model"]), "--input", str(ng["new"]), "--out", str(d / "p_ml"),
                "--set", "predict.execution=spark"]) == 0
    capsys.readouterr()
    want = {r["doc_id"]: r for r in _rows(d / "p_ml")}
    docs = spark.createDataFrame([(r["id"], r["text"]) for r in ng["test"]], "id string, text string")
    model = HierarchicalClassificationModel.load(str(ng["model"])).setDocIdCol("id").setScoresCol("scores")
    got = {r["id"]: r for r in model.transform(docs).collect()}
    assert sorted(got) == sorted(want) and len(got) == 120
    for doc_id, r in got.items():
        assert list(r["prediction"]) == want[doc_id]["pred_labels"], doc_id
        assert list(r["scores"]) == pytest.approx(want[doc_id]["pred_scores"], rel=1e-6), doc_id
    assert any(len(r["prediction"]) > 0 for r in got.values())
    # another text column by its Param; without document ids the rows still decode
    other = docs.withColumnRenamed("text", "body").drop("id")
    again = model.copy().setTextCol("body").setScoresCol("").transform(other).collect()
    assert sorted(tuple(r["prediction"]) for r in again) == sorted(tuple(w["pred_labels"]) for w in want.values())
    # a text column of another type is refused, naming it
    with pytest.raises(SchemaError, match="text column 'text' has type int"):
        model.transform(spark.createDataFrame([(1,)], "text int"))


def test_ml_model_without_a_feature_spec_refuses_raw_text(spark):
    """A model trained on a pyspark.ml vector column has no feature spec: raw text is refused in one
    message naming the column and the remedy."""
    from pyspark.ml.linalg import Vectors

    from sparkhc.errors import SchemaError
    from sparkhc.ml import HierarchicalClassifier

    rows = [(f"d{i}", Vectors.sparse(4, {i % 4: 1.0}), [["a1", "a2", "b1", "b2"][i % 4]]) for i in range(16)]
    df = spark.createDataFrame(rows, ["doc_id", "features", "labels"])
    pairs = [("ROOT", "a"), ("ROOT", "b"), ("a", "a1"), ("a", "a2"), ("b", "b1"), ("b", "b2")]
    model = HierarchicalClassifier(taxonomy=pairs, epochs=2, calibrate="off").fit(df)
    with pytest.raises(SchemaError, match="no feature spec to weight raw text with"):
        model.transform(spark.createDataFrame([("x", "some text")], "doc_id string, text string"))
