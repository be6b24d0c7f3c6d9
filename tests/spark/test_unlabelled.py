"""Documents without labels (issue 29, point 6): featurize names them, train skips them with a
warning and records the count, the pyspark.ml estimator does the same; never a failure after
featurize accepted them, never a Java stack trace from fit."""

from __future__ import annotations

import json
import logging

import pytest
from pyspark.ml.linalg import Vectors

from sparkhc.cli import main, run
from sparkhc.errors import InputDataError
from sparkhc.ml import HierarchicalClassifier
from tests.spark.test_ml_errors import LEAVES, PAIRS, _rows, _schema

WORDS = {"a1": "apple apricot", "a2": "avocado almond", "b1": "banana berry", "b2": "beet bean"}


def _corpus(tmp_path, empty_ids):
    recs = []
    for i in range(40):
        lab = LEAVES[i % 4]
        labels = [] if f"d{i:02d}" in empty_ids else [lab]
        recs.append({"id": f"d{i:02d}", "text": f"{WORDS[lab]} common words {i}", "labels": labels,
                     "split": "train" if i < 32 else "test"})
    src = tmp_path / "docs.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")
    tax = tmp_path / "tax.tsv"
    tax.write_text("".join(f"{p}\t{c}\n" for p, c in PAIRS), encoding="utf-8")
    return src, tax


def test_featurize_names_and_train_skips_documents_without_labels(tmp_path, caplog, capsys):
    src, tax = _corpus(tmp_path, {"d03", "d07", "d33"})
    feats = tmp_path / "features"
    with caplog.at_level(logging.WARNING):
        assert run(["featurize", "--input", str(src), "--taxonomy", str(tax), "--out", str(feats)]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["read_report"]["no_labels"] == 3
    assert summary["no_labels_sample"] == ["d03", "d07", "d33"]
    assert any("3 document(s) have no labels" in r.getMessage() and "'d03'" in r.getMessage() for r in caplog.records)
    caplog.clear()
    model = tmp_path / "model"
    with caplog.at_level(logging.WARNING):
        assert run(["train", "--features", str(feats), "--out", str(model), "--set", "train.epochs=3"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["documents"] == 30  # 32 training documents less the two without labels
    meta = json.loads((model / "metadata.json").read_text())
    assert meta["training"]["skipped_unlabelled"] == 2
    assert any("2 training document(s) without labels skipped" in r.getMessage() and "'d03', 'd07'" in r.getMessage()
               for r in caplog.records)


def test_train_refuses_a_selection_where_no_document_has_a_label(tmp_path, capsys):
    src, tax = _corpus(tmp_path, {f"d{i:02d}" for i in range(32)})
    feats = tmp_path / "features"
    assert run(["featurize", "--input", str(src), "--taxonomy", str(tax), "--out", str(feats)]) == 0
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        main(["train", "--features", str(feats), "--out", str(tmp_path / "m"), "--set", "train.epochs=2"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "none of the 32 training documents" in err and "'d00'" in err and "Traceback" not in err


def test_fit_skips_rows_without_labels_and_refuses_when_none_has_one(spark, caplog):
    rows = _rows()
    rows[5] = ("d5", [], Vectors.sparse(4, [1], [1.0]))
    df = spark.createDataFrame(rows, _schema())
    with caplog.at_level(logging.WARNING):
        model = HierarchicalClassifier(taxonomy=PAIRS, epochs=2, shards=1).fit(df)
    assert model.metadata["training"]["labels"]["no_labels"] == 1
    assert any("1 document(s) without labels skipped" in r.getMessage() and "'d5'" in r.getMessage()
               for r in caplog.records)
    empty = spark.createDataFrame([(f"d{i}", [], Vectors.sparse(4, [i % 4], [1.0])) for i in range(4)], _schema())
    with pytest.raises(InputDataError, match="none of the 4 documents has a label"):
        HierarchicalClassifier(taxonomy=PAIRS, epochs=2, shards=1).fit(empty)
