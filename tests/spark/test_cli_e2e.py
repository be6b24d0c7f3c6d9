"""End to end through the CLI on real corpora: featurize -> train -> predict -> evaluate."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from sparkhc.cli import run
from tests.conftest import DATA_DIR, corpus_dir

FEATURE_COLUMNS = ["doc_id", "split", "fold", "labels", "label_ids", "indices", "values", "counts"]


def _digests(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted((folder / "features").glob("*.parquet"))}


@pytest.fixture(scope="module")
def rcv1_features(spark, tmp_path_factory):
    corpus_dir("rcv1v2_subset")
    out = tmp_path_factory.mktemp("rcv1") / "features"
    assert run(["featurize", "--corpus", "rcv1v2_subset", "--data-dir", str(DATA_DIR), "--out", str(out),
                "--set", "featurize.partitions=2"]) == 0
    return out


def test_featurize_schema_counts_and_rerun_identical(spark, rcv1_features, tmp_path):
    table = pq.read_table(rcv1_features / "features")
    assert table.num_rows == 2316
    assert table.schema.names == FEATURE_COLUMNS
    assert sorted(set(table.column("fold").to_pylist())) == [0, 1, 2, 3, 4]
    again = tmp_path / "again"
    assert run(["featurize", "--corpus", "rcv1v2_subset", "--data-dir", str(DATA_DIR), "--out", str(again),
                "--set", "featurize.partitions=2"]) == 0
    assert _digests(again) == _digests(rcv1_features)
    assert (again / "feature_spec.json").read_bytes() == (rcv1_features / "feature_spec.json").read_bytes()
    assert (again / "taxonomy.tsv").read_text().count("\n") == 103


def test_train_predict_evaluate_and_reload(spark, rcv1_features, tmp_path):
    model = tmp_path / "model"
    common = ["--set", "train.epochs=2", "--set", "train.shards=2"]
    assert run(["train", "--features", str(rcv1_features), "--out", str(model), "--split", "all",
                "--exclude-fold", "0", *common]) == 0
    meta = json.loads((model / "metadata.json").read_text())
    assert meta["model"] == "global" and meta["training"]["documents"] == 2316 - _fold_size(rcv1_features, 0)
    # RCV1 labels stop at internal nodes: the model has virtual /_self leaves
    assert "/_self" in (model / "taxonomy.tsv").read_text()
    pred = tmp_path / "pred"
    assert run(["predict", "--model", str(model), "--features", str(rcv1_features), "--out", str(pred),
                "--split", "all", "--fold", "0"]) == 0
    rows = pq.read_table(pred / "data")
    assert rows.num_rows == _fold_size(rcv1_features, 0)
    assert all(len(p) >= 1 for p in rows.column("pred_labels").to_pylist())
    assert not any(lab.endswith("/_self") for p in rows.column("pred_labels").to_pylist() for lab in p)
    assert run(["evaluate", "--predictions", str(pred)]) == 0
    metrics = json.loads((pred / "metrics.json").read_text())["metrics"]
    # a trained model is far above chance on RCV1 (3.2 labels per document among 103)
    assert metrics["hF"] > 0.5 and metrics["EBF"] > 0.4
    # the same model loaded again predicts the same labels
    pred2 = tmp_path / "pred2"
    assert run(["predict", "--model", str(model), "--features", str(rcv1_features), "--out", str(pred2),
                "--split", "all", "--fold", "0"]) == 0
    a = sorted(zip(rows.column("doc_id").to_pylist(), rows.column("pred_labels").to_pylist(), strict=True))
    b2 = pq.read_table(pred2 / "data")
    b = sorted(zip(b2.column("doc_id").to_pylist(), b2.column("pred_labels").to_pylist(), strict=True))
    assert a == b
    # refusing to overwrite without the flag is a user error (exit 2 through main)
    with pytest.raises(Exception, match="already exists"):
        run(["predict", "--model", str(model), "--features", str(rcv1_features), "--out", str(pred)])


def test_model_refuses_features_of_another_taxonomy(spark, rcv1_features, tmp_path):
    from sparkhc.errors import ModelError

    model = tmp_path / "model"
    assert run(["train", "--features", str(rcv1_features), "--out", str(model), "--split", "all",
                "--set", "train.epochs=1", "--set", "train.shards=1", "--model", "flat"]) == 0
    other = tmp_path / "other_features"
    import shutil

    shutil.copytree(rcv1_features, other)
    tsv = (other / "taxonomy.tsv").read_text().splitlines()
    (other / "taxonomy.tsv").write_text("\n".join(tsv[:-1]) + "\n")  # drop one topic
    with pytest.raises(ModelError, match="trained on taxonomy"):
        run(["predict", "--model", str(model), "--features", str(other), "--out", str(tmp_path / "p"), "--split", "all"])


def test_predict_selecting_no_document_is_a_user_error(spark, rcv1_features, tmp_path, capsys):
    """RCV1 documents carry folds but no split: predict's default selection (split 'test') is empty.
    That is an error (exit 2) naming the splits and folds present, and nothing is written."""
    from sparkhc.cli import main

    model = tmp_path / "model"
    assert run(["train", "--features", str(rcv1_features), "--out", str(model), "--split", "all",
                "--set", "train.epochs=1", "--set", "train.shards=1", "--model", "flat"]) == 0
    capsys.readouterr()
    pred = tmp_path / "pred"
    with pytest.raises(SystemExit) as e:
        main(["predict", "--model", str(model), "--features", str(rcv1_features), "--out", str(pred)])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "split 'test'" in err and "matches no document" in err
    assert "2316 document(s) with split(s) none and fold(s) 0, 1, 2, 3, 4" in err
    assert not pred.exists()
    with pytest.raises(SystemExit) as e:  # a fold that does not exist
        main(["predict", "--model", str(model), "--features", str(rcv1_features), "--out", str(pred),
              "--split", "all", "--fold", "7"])
    assert e.value.code == 2 and "fold 7" in capsys.readouterr().err and not pred.exists()


def test_featurize_fit_exclude_fold(spark, rcv1_features, tmp_path):
    """--fit-exclude-fold 0 fits vocabulary and idf on folds 1-4 only: checked against document
    frequencies counted by brute force over the raw documents of folds 1-4."""
    from collections import Counter

    from sparkhc.corpus import readers, registry
    from sparkhc.text.spec import FeatureSpec

    out = tmp_path / "features_cv0"
    assert run(["featurize", "--corpus", "rcv1v2_subset", "--data-dir", str(DATA_DIR), "--out", str(out),
                "--fit-exclude-fold", "0", "--set", "featurize.partitions=2"]) == 0
    spec = FeatureSpec.load(out / "feature_spec.json")
    every = FeatureSpec.load(rcv1_features / "feature_spec.json")
    assert spec.fit_exclude_folds == (0,) and every.fit_exclude_folds is None
    assert every.n_fit_docs == 2316 and spec.n_fit_docs == 2316 - _fold_size(rcv1_features, 0)

    info = registry.get_corpus("rcv1v2_subset")
    batches, _ = info.read(registry.find_corpus("rcv1v2_subset", data_dir=str(DATA_DIR)))
    raw = readers.to_table(batches).to_pylist()
    df: Counter[str] = Counter()
    n = 0
    for doc in raw:
        if doc["fold"] != 0:
            n += 1
            df.update(set(spec.tokenize_document(doc["text"], doc["tokens"])))
    assert n == spec.n_fit_docs
    expect = sorted((t, d) for t, d in df.items() if 2 <= d <= 0.5 * n)  # min_df 2, max_df 0.5 (defaults)
    assert list(spec.vocabulary or ()) == [t for t, _ in expect]
    assert list(spec.df or ()) == [d for _, d in expect]
    assert spec.vocabulary != every.vocabulary  # the fold-0 documents changed the fit
    # the fold-0 documents are still featurized (with the folds-1-4 vocabulary)
    assert pq.read_table(out / "features").num_rows == 2316


def _fold_size(features: Path, k: int) -> int:
    folds = pq.read_table(features / "features", columns=["fold"]).column("fold").to_pylist()
    return sum(1 for f in folds if f == k)


@pytest.mark.slow
@pytest.mark.parametrize("corpus,rows", [("20newsgroups", 18846), ("reuters21578", 10789)])
def test_featurize_real_corpora_rerun_identical(spark, tmp_path, corpus, rows):
    corpus_dir(corpus)
    a, b = tmp_path / "a", tmp_path / "b"
    for out in (a, b):
        assert run(["featurize", "--corpus", corpus, "--data-dir", str(DATA_DIR), "--out", str(out)]) == 0
    assert pq.read_table(a / "features").num_rows == rows
    assert pq.read_table(a / "features").schema.names == FEATURE_COLUMNS
    assert _digests(a) == _digests(b)


@pytest.mark.slow
def test_featurize_rerun_in_a_new_process_is_byte_identical(tmp_path):
    """Two featurize runs in separate processes (separate JVMs) give the same bytes."""
    import subprocess
    import sys

    corpus_dir("rcv1v2_subset")
    outs = [tmp_path / "p1", tmp_path / "p2"]
    for out in outs:
        subprocess.run([sys.executable, "-m", "sparkhc.cli", "featurize", "--corpus", "rcv1v2_subset",
                        "--data-dir", str(DATA_DIR), "--out", str(out), "--master", "local[2]"],
                       check=True, capture_output=True, timeout=900)
    assert _digests(outs[0]) == _digests(outs[1])


@pytest.mark.slow
def test_file_uris_end_to_end_give_what_plain_paths_give(spark, rcv1_features, tmp_path):
    """featurize -> train -> predict -> evaluate with every location a ``file:`` URI (both spellings):
    the same feature files, model weights, predictions and metrics as the plain-path run."""
    from sparkhc.model_store import weights_hash

    uri = tmp_path.as_uri()  # file:///...
    hadoop = "file:" + tmp_path.as_posix()  # file:/... (Hadoop's spelling)
    assert run(["featurize", "--corpus", "rcv1v2_subset", "--data-dir", str(DATA_DIR), "--out", f"{uri}/features",
                "--set", "featurize.partitions=2"]) == 0
    assert _digests(tmp_path / "features") == _digests(rcv1_features)
    common = ["--split", "all", "--exclude-fold", "0", "--set", "train.epochs=1", "--set", "train.shards=2"]
    assert run(["train", "--features", str(rcv1_features), "--out", str(tmp_path / "plain_model"), *common]) == 0
    assert run(["train", "--features", f"{hadoop}/features", "--out", f"{uri}/model", *common]) == 0
    assert weights_hash(tmp_path / "model") == weights_hash(tmp_path / "plain_model")
    assert json.loads((tmp_path / "model" / "metadata.json").read_text())["features_path"] == str(
        (tmp_path / "features").resolve())
    sel = ["--split", "all", "--fold", "0"]
    assert run(["predict", "--model", str(tmp_path / "plain_model"), "--features", str(rcv1_features),
                "--out", str(tmp_path / "plain_pred"), *sel]) == 0
    assert run(["predict", "--model", f"{hadoop}/model", "--features", f"{uri}/features", "--out", f"{uri}/pred",
                *sel]) == 0

    def rows(d: Path) -> list:
        t = pq.read_table(d / "data")
        return sorted(zip(t.column("doc_id").to_pylist(), t.column("pred_labels").to_pylist(), strict=True))

    assert rows(tmp_path / "pred") == rows(tmp_path / "plain_pred")
    assert not list(tmp_path.glob("*.tmp-*"))  # the temporary folders are gone
    assert run(["evaluate", "--predictions", str(tmp_path / "plain_pred")]) == 0
    assert run(["evaluate", "--predictions", f"{uri}/pred", "--out", f"{hadoop}/metrics.json"]) == 0
    got = json.loads((tmp_path / "metrics.json").read_text())
    want = json.loads((tmp_path / "plain_pred" / "metrics.json").read_text())
    assert got["metrics"] == want["metrics"] and got["metrics"]["hF"] > 0.5
    with pytest.raises(Exception, match="already exists"):
        run(["predict", "--model", f"{uri}/model", "--features", f"{uri}/features", "--out", f"{uri}/pred"])
