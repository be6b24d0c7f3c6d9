"""Multi-dimensional classification of text end to end through the CLI (issue 8):
``featurize --class-spaces`` -> ``train --model m3mdc`` -> ``predict`` -> ``evaluate``.

The hand-made corpus below is separable by its class words, and the test documents are written so
that their predictions are known in advance (some carry the words of a wrong class on purpose):
the expected MDC metrics are worked out by hand in the comments and recomputed with numpy from the
predictions Parquet.
"""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from sparkhc.cli import run
from tests.conftest import DATA_DIR, corpus_dir

GENRE = {"sport": "goal match", "politics": "vote senate", "tech": "chip software", "arts": "paint gallery"}
MOOD = {"happy": "smile joy", "sad": "tears grief"}
FILLER = ["report", "today", "city", "week", "people", "update"]

SPACES = """
[[class_space]]
name = "genre"
field = "genre"
top_k = 3                 # sport, politics, tech; arts (2 training documents) becomes "other"

[[class_space]]
name = "mood"
field = "moods"
multiple = "exclude"
"""

# (id, genre, moods, words): the words decide the prediction, the fields are the gold labels
TEST_DOCS = [
    ("te1", "sport", ["happy"], "goal match smile"),       # both right
    ("te2", "politics", ["sad"], "vote senate tears"),     # both right
    ("te3", "tech", ["happy"], "chip software joy"),       # both right
    ("te4", "sport", ["sad"], "goal match grief"),         # both right
    ("te5", "politics", ["sad"], "vote senate smile"),     # mood wrong (predicted happy)
    ("te6", "sport", ["happy"], "chip software tears"),    # both wrong (predicted tech / sad)
    ("te7", "science", ["happy"], "paint gallery joy"),    # unseen genre -> other; predicted other: right
]
# by hand: correct spaces per document 2,2,2,2,1,0,2 -> Hamming Score 11/14, Exact Match 5/7,
# Sub-Exact Match 6/7; genre accuracy 6/7, mood accuracy 5/7
EXPECTED = {"hamming_score": 11 / 14, "exact_match": 5 / 7, "sub_exact_match": 6 / 7}


def _write_corpus(path: Path) -> None:
    recs = []
    k = 0
    for g in ("sport", "politics", "tech"):
        for m in ("happy", "sad"):
            for r in range(3):
                filler = " ".join(FILLER[(k + j) % len(FILLER)] for j in range(2))
                recs.append({"id": f"tr{k:02d}", "split": "train", "genre": g, "moods": [m],
                             "text": f"{GENRE[g]} {MOOD[m]} {filler}" if r else f"{MOOD[m]} {GENRE[g]}"})
                k += 1
    recs.append({"id": "tr90", "split": "train", "genre": "arts", "moods": ["happy"], "text": "paint gallery joy week"})
    recs.append({"id": "tr91", "split": "train", "genre": "arts", "moods": ["sad"], "text": "paint gallery tears city"})
    # set aside by the class spaces (counted): two moods; no genre
    recs.append({"id": "tr92", "split": "train", "genre": "tech", "moods": ["happy", "sad"], "text": "chip smile tears"})
    recs.append({"id": "tr93", "split": "train", "moods": ["sad"], "text": "grief report"})
    for doc_id, g, ms, words in TEST_DOCS:
        recs.append({"id": doc_id, "split": "test", "genre": g, "moods": ms, "text": words})
    with gzip.open(path, "wt") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in recs)


@pytest.fixture(scope="module")
def mdc_run(spark, tmp_path_factory):
    work = tmp_path_factory.mktemp("mdc_text")
    _write_corpus(work / "docs.jsonl.gz")
    (work / "spaces.toml").write_text(SPACES)
    feats, model, pred = work / "features", work / "model", work / "pred"
    small = ["--set", "featurize.min_df=1", "--set", "featurize.max_df=1.0", "--set", "featurize.partitions=2"]
    assert run(["featurize", "--input", str(work / "docs.jsonl.gz"), "--class-spaces", str(work / "spaces.toml"),
                "--out", str(feats), *small]) == 0
    assert run(["train", "--features", str(feats), "--model", "m3mdc", "--out", str(model)]) == 0
    assert run(["predict", "--model", str(model), "--features", str(feats), "--out", str(pred)]) == 0
    assert run(["evaluate", "--predictions", str(pred)]) == 0
    return work


def test_featurize_declares_class_spaces_and_counts_exclusions(mdc_run):
    feats = mdc_run / "features"
    tax = (feats / "taxonomy.tsv").read_text().splitlines()
    assert sorted(tax) == sorted([
        "ROOT\tgenre", "ROOT\tmood", "genre\tgenre/other", "genre\tgenre/politics", "genre\tgenre/sport",
        "genre\tgenre/tech", "mood\tmood/happy", "mood\tmood/sad",
    ])
    info = json.loads((feats / "corpus.json").read_text())
    rr = info["read_report"]
    assert (rr["read"], rr["emitted"], rr["excluded"]) == (29, 27, 2)
    assert rr["excluded_reasons"] == {"class space 'mood': several values": 1, "class space 'genre': no value": 1}
    genre = info["class_spaces"]["class_spaces"][0]
    assert genre["classes"] == ["other", "politics", "sport", "tech"]
    assert genre["training_counts"] == {"politics": 6, "sport": 6, "tech": 6, "arts": 2}  # training split only
    rows = pq.read_table(feats / "features", columns=["doc_id", "labels"]).to_pylist()
    labels = {r["doc_id"]: sorted(r["labels"]) for r in rows}
    assert labels["te7"] == ["genre/other", "mood/happy"] and labels["tr90"] == ["genre/other", "mood/happy"]
    assert Counter(len(v) for v in labels.values()) == {2: 27}


def test_mdc_metrics_equal_the_hand_computed_ones(mdc_run):
    pred = mdc_run / "pred"
    rows = {r["doc_id"]: r for r in pq.read_table(pred / "data").to_pylist()}
    assert sorted(rows) == [d for d, *_ in TEST_DOCS]
    # the designed predictions
    assert sorted(rows["te5"]["pred_labels"]) == ["genre/politics", "mood/happy"]
    assert sorted(rows["te6"]["pred_labels"]) == ["genre/tech", "mood/sad"]
    assert sorted(rows["te7"]["pred_labels"]) == ["genre/other", "mood/happy"]
    # numpy from the Parquet rows: per space, is the predicted class the gold one
    right = np.array([[any(p.startswith(f"{s}/") and p in r["labels"] for p in r["pred_labels"])
                       for s in ("genre", "mood")] for r in rows.values()])
    result = json.loads((pred / "metrics.json").read_text())
    m = result["metrics"]
    assert result["class_spaces"] == ["genre", "mood"]
    for key, value in EXPECTED.items():
        assert m[key] == pytest.approx(value, abs=1e-12)
    assert m["hamming_score"] == pytest.approx(right.mean(), abs=1e-12)
    assert m["exact_match"] == pytest.approx(right.all(axis=1).mean(), abs=1e-12)
    assert m["sub_exact_match"] == pytest.approx((right.sum(axis=1) >= 1).mean(), abs=1e-12)
    assert (m["accuracy_0"], m["accuracy_1"]) == (pytest.approx(6 / 7), pytest.approx(5 / 7))
    # one predicted and one gold leaf per space: label-based micro-F1 over the scored classes = Hamming Score
    assert m["LBMiF"] == pytest.approx(11 / 14, abs=1e-12)


def test_saved_model_predicts_like_the_spark_run(mdc_run):
    from sparkhc.features import read_features_local
    from sparkhc.persistence import load_model

    model, meta = load_model(mdc_run / "model")
    assert meta["model"] == "m3mdc" and meta["training"]["documents"] == 20
    assert meta["training"]["epoch_log"][0]["epoch"] == 1
    batch, _ = read_features_local(mdc_run / "features")
    test = batch.subset(np.flatnonzero(batch.extra["split"] == "test"))
    local = dict(zip(test.doc_ids.tolist(), model.predict(test), strict=True))
    spark_rows = pq.read_table(mdc_run / "pred" / "data").to_pylist()
    assert {r["doc_id"]: r["pred_labels"] for r in spark_rows} == local


def test_br_baseline_and_refusals(mdc_run, tmp_path):
    from sparkhc.errors import ModelError

    br = tmp_path / "br"
    assert run(["train", "--features", str(mdc_run / "features"), "--model", "mdc_br", "--out", str(br)]) == 0
    assert json.loads((br / "metadata.json").read_text())["model"] == "mdc_br"
    with pytest.raises(ModelError, match="--warm-start"):
        run(["train", "--features", str(mdc_run / "features"), "--model", "m3mdc", "--out", str(tmp_path / "w"),
             "--warm-start", str(mdc_run / "model")])


@pytest.mark.parametrize("name", ["m3mdc", "mdc_br"])
def test_auto_trains_mdc_in_the_driver_with_the_spark_paths_weights(spark, mdc_run, tmp_path, name):
    """``train.execution = auto`` on a local master, a deferred session whose factory fails: the MDC
    model is trained in the driver (no session), and its weights hash is the Spark path's."""
    from sparkhc.config import load_config
    from sparkhc.spark import pipelines, session
    from sparkhc.spark.session import DeferredSession

    def never():
        raise AssertionError("the Spark session was started")

    before = session.created
    d = DeferredSession(never, "local[2]")
    drv = pipelines.train(d, load_config(overrides=["train.execution=auto"]), mdc_run / "features", tmp_path / "d",
                          model_name=name)
    assert not d.started and session.created == before and drv["session_start_seconds"] == 0.0
    spk = pipelines.train(spark, load_config(overrides=["train.execution=spark"]), mdc_run / "features",
                          tmp_path / "s", model_name=name)
    assert drv["weights_hash"] == spk["weights_hash"] and drv["documents"] == spk["documents"] == 20

    def log(p):
        return [{k: v for k, v in r.items() if k != "seconds"}
                for r in json.loads((p / "metadata.json").read_text())["training"]["epoch_log"]]

    assert log(tmp_path / "d") == log(tmp_path / "s")


def test_cli_mdc_training_never_starts_spark(mdc_run, tmp_path):
    """``sparkhc train --model m3mdc`` in a fresh process with ``train.execution=auto``: no
    SparkSession, no JVM (as tests/spark/test_small.py checks for the global model)."""
    import subprocess
    import sys
    import textwrap

    from tests.conftest import ROOT

    script = textwrap.dedent(f"""
        from pyspark import SparkContext
        from sparkhc.cli import run
        from sparkhc.spark import session
        code = run(["train", "--features", {str(mdc_run / "features")!r}, "--out", {str(tmp_path / "m")!r},
                    "--model", "m3mdc", "--master", "local[2]", "--set", "train.execution=auto"])
        print("RESULT", code, session.created, SparkContext._gateway is None)
    """)
    res = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "RESULT 0 0 True" in res.stdout, res.stdout[-2000:]
    assert (tmp_path / "m" / "state.npz").is_file()


# ----------------------------------------------------------------------------------------------
# the real corpus
# ----------------------------------------------------------------------------------------------


def _reuters_counts(path: Path) -> dict[str, int]:
    """Independent count of the topic x place selection, straight from the JSON Lines."""
    out: Counter[str] = Counter()
    with gzip.open(path, "rt") as fh:
        for line in fh:
            r = json.loads(line)
            if not r["apte_mod"]:
                continue
            if len(set(r["labels"])) != 1:
                out["topic several"] += 1
            elif len(set(r["places"])) == 0:
                out["place none"] += 1
            elif len(set(r["places"])) > 1:
                out["place several"] += 1
            else:
                out[r["split"]] += 1
    return dict(out)


@pytest.mark.slow
def test_reuters_topic_place_end_to_end(spark, tmp_path):
    """Featurize Reuters-21578 into topic x place (the packaged class-space file), train M3MDC and BR
    on the ModApte training split, evaluate on test (about 2 minutes on 2 cores)."""
    root = corpus_dir("reuters21578")
    spec = Path(__file__).resolve().parents[2] / "sparkhc" / "conf" / "mdc_reuters21578.toml"
    feats = tmp_path / "features"
    assert run(["featurize", "--corpus", "reuters21578", "--data-dir", str(DATA_DIR), "--class-spaces", str(spec),
                "--out", str(feats)]) == 0
    expected = _reuters_counts(root / "docs.jsonl.gz")
    summary = json.loads((feats / "corpus.json").read_text())
    rr = summary["read_report"]["excluded_reasons"]
    assert rr["class space 'topic': several values"] == expected["topic several"]
    assert rr["class space 'place': no value"] == expected["place none"]
    assert rr["class space 'place': several values"] == expected["place several"]
    table = pq.read_table(feats / "features", columns=["split"])
    assert Counter(table.column("split").to_pylist()) == {"train": expected["train"], "test": expected["test"]}
    scores = {}
    for name in ("m3mdc", "mdc_br"):
        assert run(["train", "--features", str(feats), "--model", name, "--out", str(tmp_path / name)]) == 0
        assert run(["predict", "--model", str(tmp_path / name), "--features", str(feats),
                    "--out", str(tmp_path / f"{name}-pred")]) == 0
        assert run(["evaluate", "--predictions", str(tmp_path / f"{name}-pred")]) == 0
        scores[name] = json.loads((tmp_path / f"{name}-pred" / "metrics.json").read_text())["metrics"]
    # far above predicting the majority classes (usa: 69 %, earn: 49 % of the training documents)
    for m in scores.values():
        assert m["hamming_score"] > 0.9 and m["exact_match"] > 0.85
    assert abs(scores["m3mdc"]["hamming_score"] - scores["mdc_br"]["hamming_score"]) < 0.02
