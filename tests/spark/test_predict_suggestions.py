"""predict --top and --explain through the real entry points (issue 56): the CLI in the driver and on
Spark, reclassify and the pyspark.ml model, on a tiny corpus trained by the CLI. The margins are
checked against an enumeration of every label tree, the scores against the model's recorded
calibration, the contributions against the decoder's edge scores."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sparkhc.batch import SparseBatch
from sparkhc.cli import run
from sparkhc.errors import ModelError
from sparkhc.persistence import load_model
from tests.unit.test_model_store import tiny_docs, tiny_taxonomy
from tests.unit.test_suggestions import _tree_score, _trees

TRAIN = ["--set", "train.epochs=3", "--set", "model.global.C=0.3"]


@pytest.fixture(scope="module")
def corpus(spark, tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("suggest")
    docs = tiny_docs(260, seed=7)
    rng = np.random.default_rng(0)
    with open(base / "docs.jsonl", "w", encoding="utf-8") as f:
        for i, d in enumerate(docs):
            if i % 9 == 0:  # a second topic's words: documents with two labels, and ambiguous ones
                other = [k for k in ("football", "physics", "biology", "tennis") if k != d["labels"][0]]
                extra = str(rng.choice(other))
                d["text"] += " " + " ".join(tiny_docs(1, 100 + i)[0]["text"].split()[:2])
                d["labels"] = [d["labels"][0], extra] if i % 2 else d["labels"]
            f.write(json.dumps({**d, "split": "train" if i < 220 else "test"}) + "\n")
    (base / "taxonomy.tsv").write_text(tiny_taxonomy().to_tsv())
    feats, model = base / "features", base / "model"
    assert run(["featurize", "--input", str(base / "docs.jsonl"), "--taxonomy", str(base / "taxonomy.tsv"),
                "--out", str(feats), "--set", "featurize.min_df=1", "--set", "featurize.max_df=1.0"]) == 0
    assert run(["train", "--features", str(feats), "--out", str(model), "--set", "train.calibrate=on", *TRAIN]) == 0
    return {"base": base, "features": feats, "model": model}


def _predict(corpus: dict[str, Path], name: str, *extra: str) -> list[dict]:
    out = corpus["base"] / name
    assert run(["predict", "--model", str(corpus["model"]), "--features", str(corpus["features"]), "--out", str(out),
                "--top", "2", "--explain", "50", *extra]) == 0
    return sorted(pq.read_table(out / "data").to_pylist(), key=lambda r: r["doc_id"])


def _step(rec: dict, m: float) -> float:
    """The recorded margin -> precision step function, read by hand."""
    j = max(i for i, x in enumerate([-np.inf, *rec["margins"][1:]]) if m >= x)
    return rec["precision"][j]


def test_cli_top_and_explain_in_the_driver(corpus):
    rows = _predict(corpus, "pred")
    model, meta = load_model(corpus["model"])
    rec = meta["training"]["calibration"]["suggestions"]
    assert rec["documents"] == 220 and rec["labels"] > 220
    tax = model.taxonomy
    table = pq.read_table(corpus["features"] / "features").to_pylist()
    feats = {r["doc_id"]: r for r in table}
    vocab = json.loads((corpus["model"] / "feature_spec.json").read_text())["vocabulary"]
    trees = _trees(tax)
    names = [{tax.concept_name(c) for c in np.flatnonzero(t)[1:]} for t in trees]
    assert len(rows) == 40
    for r in rows:
        f = feats[r["doc_id"]]
        import scipy.sparse as sp

        X = sp.csr_matrix((f["values"], f["indices"], [0, len(f["indices"])]), shape=(1, model.n_features))
        S = model.edge_scores_of(SparseBatch(X, np.array([r["doc_id"]]), [f["labels"]]))[0]
        scores = np.array([_tree_score(tax, t, S, model.decode_bf(), 3) for t in trees])
        best = names[int(np.argmax(scores))]
        # the predicted labels are the best tree's deepest ones; the suggestions the best others
        assert set(r["pred_labels"]) <= best
        margin = {}
        for c in {n for ns in names for n in ns}:
            has = np.array([c in ns for ns in names])
            margin[c] = scores[has].max() - scores[~has].max()
        others = sorted((margin[c] for c in margin if c not in best), reverse=True)
        assert not {s["label"] for s in r["suggestions"]} & best
        # the best two others (a tie, e.g. a parent and its only likely child, in either order)
        assert [margin[s["label"]] for s in r["suggestions"]] == pytest.approx(others[:2], abs=1e-4)
        for s in r["suggestions"]:
            assert s["margin"] == pytest.approx(margin[s["label"]], abs=1e-4)
            assert s["score"] == pytest.approx(_step(rec, margin[s["label"]]), abs=1e-6)
        for lab, q in zip(r["pred_labels"], r["pred_calibrated"], strict=True):
            assert q == pytest.approx(_step(rec, margin[lab]), abs=1e-6)
        # every feature's contribution (50 > the words of a document) plus the bias is the score
        assert [e["label"] for e in r["explanations"]] == r["pred_labels"]
        for e, score in zip(r["explanations"], r["pred_scores"], strict=True):
            assert sum(e["contributions"]) + e["bias"] == pytest.approx(score, abs=1e-5)
            assert e["score"] == pytest.approx(score, abs=1e-5)
            assert set(e["features"]) == {vocab[i] for i in f["indices"]}
            assert e["contributions"] == sorted(e["contributions"], reverse=True)


def test_spark_path_gives_the_driver_rows(corpus):
    driver = _predict(corpus, "pred-driver")
    spark_rows = _predict(corpus, "pred-spark", "--set", "predict.execution=spark")
    assert [r["doc_id"] for r in spark_rows] == [r["doc_id"] for r in driver]
    for a, b in zip(driver, spark_rows, strict=True):
        assert [s["label"] for s in a["suggestions"]] == [s["label"] for s in b["suggestions"]]
        assert [s["score"] for s in a["suggestions"]] == [s["score"] for s in b["suggestions"]]
        assert a["pred_calibrated"] == b["pred_calibrated"]
        assert [e["features"] for e in a["explanations"]] == [e["features"] for e in b["explanations"]]


def test_a_model_without_calibration_is_refused_in_one_line(corpus):
    plain = corpus["base"] / "model-plain"
    assert run(["train", "--features", str(corpus["features"]), "--out", str(plain), "--set", "train.calibrate=off",
                *TRAIN]) == 0
    with pytest.raises(ModelError, match=r"^predict --top: model .* has no calibrated suggestion scores") as e:
        run(["predict", "--model", str(plain), "--features", str(corpus["features"]), "--out",
             str(corpus["base"] / "p"), "--top", "1"])
    assert "\n" not in str(e.value)
    # --explain needs no calibration
    assert run(["predict", "--model", str(plain), "--features", str(corpus["features"]), "--out",
                str(corpus["base"] / "p2"), "--explain", "1"]) == 0


def test_reclassify_and_the_ml_model_add_the_same_suggestions(spark, corpus):
    from sparkhc.ml import HierarchicalClassificationModel
    from sparkhc.spark.reclassify import read_output, reclassify

    rows = {r["doc_id"]: r for r in _predict(corpus, "pred-ref")}
    docs = [json.loads(line) for line in (corpus["base"] / "docs.jsonl").read_text().splitlines()]
    test = [d for d in docs if d["split"] == "test"]
    day = corpus["base"] / "collection" / "ingest_date=2024-01-01"
    day.mkdir(parents=True)
    pq.write_table(pa.table({"doc_id": [d["doc_id"] for d in test], "text": [d["text"] for d in test]}),
                   day / "part-0.parquet")
    out = corpus["base"] / "reclassified"
    reclassify(spark, corpus["base"] / "collection", out, model_dir=corpus["model"], top=2, explain=3)
    t = read_output(out).to_pylist()
    assert len(t) == len(test)
    for r in t:
        ref = rows[r["doc_id"]]
        assert [s["label"] for s in r["suggestions"]] == [s["label"] for s in ref["suggestions"]]
        assert r["pred_calibrated"] == ref["pred_calibrated"]
        assert [e["features"] for e in r["explanations"]] == [e["features"][:3] for e in ref["explanations"]]
    # the same output without --top/--explain reuses the recorded options; another value is refused
    with pytest.raises(Exception, match="--top 2"):
        reclassify(spark, corpus["base"] / "collection", out, model_dir=corpus["model"], top=3)

    m = HierarchicalClassificationModel.load(str(corpus["model"])).setSuggestionsCol("suggested").setNumSuggestions(2)
    df = spark.createDataFrame([(d["doc_id"], d["text"]) for d in test], "doc_id string, text string")
    got = {r["doc_id"]: r for r in m.transform(df).collect()}
    for doc_id, ref in rows.items():
        assert [s["label"] for s in got[doc_id]["suggested"]] == [s["label"] for s in ref["suggestions"]]
        assert [s["score"] for s in got[doc_id]["suggested"]] == pytest.approx([s["score"] for s in ref["suggestions"]])


def test_a_model_that_cannot_explain_is_refused_before_spark(corpus, tmp_path, capsys):
    from sparkhc.cli import main

    flat = corpus["base"] / "model-majority"
    assert run(["train", "--features", str(corpus["features"]), "--out", str(flat), "--model", "majority"]) == 0
    with pytest.raises(SystemExit) as e:
        main(["predict", "--model", str(flat), "--features", str(corpus["features"]), "--out", str(tmp_path / "p"),
              "--explain", "2", "--set", "predict.execution=spark"])
    assert e.value.code == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("sparkhc: error:")]
    assert len(err) == 1 and "has no per-feature contributions" in err[0] and "flat, tree and global" in err[0]
