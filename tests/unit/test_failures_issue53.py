"""The catalogue of issue 53's failures: each is one ``sparkhc: error:`` line, exit 2, found before a
SparkSession starts (an empty input, a 0-byte file, an unsupported format naming the supported ones, a
model of another feature spec or taxonomy, a URI scheme without its connector or with a client that
does not answer); and Ctrl-C stops a running training (exit 130)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sparkhc.errors import LocationError
from sparkhc.features import FEATURES_ARROW_SCHEMA
from sparkhc.persistence import save_model
from sparkhc.taxonomy import Taxonomy
from sparkhc.text.spec import FeatureSpec
from tests.unit.test_cli_misuse import _features_folder, _one_line_before_spark, _run
from tests.unit.test_persistence import _trained

ROOT = Path(__file__).resolve().parents[2]
TAX = "ROOT\tA\nROOT\tB\nA\tAA\nA\tAB\nB\tBA\nB\tBB\n"
SUPPORTED = "expected .parquet, .jsonl(.gz) or a directory (one sub-directory per label)"


@pytest.fixture
def model(tmp_path):
    """A saved model (taxonomy TAX) whose metadata names a feature spec."""
    tax = tmp_path / "tax.tsv"
    tax.write_text(TAX)
    spec = FeatureSpec.from_params({"mode": "hashing", "hash_bits": 5, "weighting": "tf"})
    m, _ = _trained(Taxonomy.load(tax))
    save_model(tmp_path / "model", m, {"feature_spec_fingerprint": spec.fingerprint}, feature_spec_json=spec.to_json())
    return tmp_path / "model"


@pytest.mark.parametrize("content", [b"", b"\n  \n\n"], ids=["0-byte", "blank-lines"])
@pytest.mark.parametrize("verb", ["featurize", "predict"])
def test_an_empty_input_file(tmp_path, capsys, no_spark, model, verb, content):
    docs = tmp_path / "docs.jsonl"
    docs.write_bytes(content)
    argv = (["featurize", "--input", str(docs), "--taxonomy", str(tmp_path / "tax.tsv")] if verb == "featurize"
            else ["predict", "--model", str(model), "--input", str(docs)])
    msg = _one_line_before_spark(*_run([*argv, "--out", str(tmp_path / "o")], capsys), no_spark)
    assert msg == f"{docs}: no documents (an empty file); nothing to read"


def test_an_empty_gzipped_file_and_a_folder_of_empty_files(tmp_path, capsys, no_spark, model):
    import gzip

    folder = tmp_path / "in"
    folder.mkdir()
    with gzip.open(folder / "a.jsonl.gz", "wb"):
        pass
    (folder / "b.jsonl").write_bytes(b"")
    msg = _one_line_before_spark(*_run(["predict", "--model", str(model), "--input", str(folder), "--out",
                                        str(tmp_path / "o")], capsys), no_spark)
    assert msg == f"{folder}: its 2 jsonl file(s): no documents (an empty file); nothing to read"


@pytest.mark.parametrize("verb", ["featurize", "predict"])
def test_an_unsupported_format_names_the_supported_ones(tmp_path, capsys, no_spark, model, verb):
    docs = tmp_path / "docs.csv"
    docs.write_text("id,text,labels\n1,hello,AA\n")
    argv = (["featurize", "--input", str(docs), "--taxonomy", str(tmp_path / "tax.tsv")] if verb == "featurize"
            else ["predict", "--model", str(model), "--input", str(docs)])
    msg = _one_line_before_spark(*_run([*argv, "--out", str(tmp_path / "o")], capsys), no_spark)
    assert msg == f"{docs}: unknown input format; {SUPPORTED}"  # no internal function named


def test_a_model_of_another_feature_spec_or_taxonomy(tmp_path, capsys, no_spark, model):
    feats = _features_folder(tmp_path / "feats", [("test", None)], taxonomy=TAX)
    other = FeatureSpec.from_params({"mode": "hashing", "hash_bits": 6, "weighting": "tf"})
    (feats / "feature_spec.json").write_text(other.to_json())
    mine = json.loads((model / "metadata.json").read_text())["feature_spec_fingerprint"]
    msg = _one_line_before_spark(*_run(["predict", "--model", str(model), "--features", str(feats), "--out",
                                        str(tmp_path / "p")], capsys), no_spark)
    assert msg == (f"{model}: the model was trained on features {mine} but the data has features {other.fingerprint}; "
                   "featurize with --like MODEL (the model's feature_spec.json) or predict the raw documents with --input")
    feats2 = _features_folder(tmp_path / "feats2", [("test", None)], taxonomy="ROOT\tX\nROOT\tY\n")
    (feats2 / "feature_spec.json").write_text(other.to_json())
    msg = _one_line_before_spark(*_run(["predict", "--model", str(model), "--features", str(feats2), "--out",
                                        str(tmp_path / "p")], capsys), no_spark)
    assert msg.startswith(f"{model}: the model was trained on taxonomy ") and "retrain the model or use the" in msg


@pytest.mark.parametrize("argv,flag,scheme,jar", [
    (["train", "--features", "gs://bkt/feats", "--out", "{tmp}/m"], "--features", "gs", "gcs-connector"),
    (["evaluate", "--predictions", "gs://bkt/p"], "--predictions", "gs", "gcs-connector"),
    (["featurize", "--input", "abfss://c@acct.dfs.core.windows.net/d.jsonl", "--taxonomy", "{tmp}/tax.tsv", "--out",
      "{tmp}/f"], "--input", "abfss", "hadoop-azure"),
    (["predict", "--model", "{tmp}/model", "--input", "wasbs://c@acct.blob.core.windows.net/d.jsonl", "--out",
      "{tmp}/p"], "--input", "wasbs", "hadoop-azure"),
])
def test_a_uri_scheme_without_a_spark_connector(tmp_path, capsys, no_spark, model, monkeypatch, argv, flag, scheme,
                                                jar):
    monkeypatch.delenv("SPARKHC_MASTER", raising=False)
    from sparkhc.cli import preflight

    if jar in preflight._spark_jars_text():
        pytest.skip(f"this Spark has the {jar} jar")
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    msg = _one_line_before_spark(*_run(argv, capsys), no_spark)
    assert msg.startswith(f"{flag} ") and f"Spark has no file system for {scheme}:// here (the {jar} jar" in msg
    assert "acct.dfs" not in msg or "c@" not in msg  # credentials part redacted


def test_a_uri_client_that_does_not_answer_is_refused_at_the_deadline(tmp_path, capsys, no_spark, monkeypatch):
    """GCS without credentials waits on the metadata server: the first contact runs in a daemon thread
    and the verb refuses the location at :data:`URI_DEADLINE` (here shortened; the client stays hung)."""
    from sparkhc import fsio
    from sparkhc.cli import preflight

    monkeypatch.setattr(preflight, "URI_DEADLINE", 0.2)
    real = fsio.resolve
    monkeypatch.setattr(fsio, "resolve", lambda loc: time.sleep(3600) if str(loc).startswith("gs:") else real(loc))
    msg = _one_line_before_spark(*_run(["predict", "--model", "gs://bkt/model", "--input", str(tmp_path / "d.jsonl"),
                                        "--out", str(tmp_path / "p")], capsys), no_spark)
    assert msg == ("--model gs://bkt/model: no answer within 0 s: gs:// needs pyarrow's GCS file system and Google "
                   "credentials; see docs/deployment.md")


def test_a_uri_client_error_is_one_line(monkeypatch):
    from sparkhc import fsio
    from sparkhc.cli import preflight

    def fail(loc):
        raise OSError("Failed to get token from DefaultAzureCredential.\nSee the logger for details")

    monkeypatch.setattr(fsio, "resolve", fail)
    with pytest.raises(LocationError) as e:
        preflight.reachable("abfs://c@acct.dfs.core.windows.net/m", "--model")
    assert str(e.value) == ("--model abfs://***@acct.dfs.core.windows.net/m: abfs:// needs a pyarrow file system for "
                            "the scheme and its credentials (Failed to get token from DefaultAzureCredential.)")


def _big_features(root: Path, n: int = 6000, bits: int = 12) -> Path:
    """A features folder large enough that a default training (epoch selection) runs for seconds."""
    rng = np.random.default_rng(53)
    leaves = ["AA", "AB", "BA", "BB"]
    y = rng.integers(0, 4, n)
    indices = [sorted(set(rng.integers(4, 2**bits, 30).tolist()) | {int(c)}) for c in y]
    cols = {"doc_id": [f"d{i:05d}" for i in range(n)], "split": ["train"] * n, "fold": [None] * n,
            "labels": [[leaves[c][0], leaves[c]] for c in y], "label_ids": [[1]] * n, "indices": indices,
            "values": [[float(v) for v in rng.random(len(ix))] for ix in indices],
            "counts": [[1.0] * len(ix) for ix in indices]}
    (root / "features").mkdir(parents=True)
    pq.write_table(pa.table(cols, schema=FEATURES_ARROW_SCHEMA), root / "features" / "part-00000.parquet")
    (root / "feature_spec.json").write_text(
        FeatureSpec.from_params({"mode": "hashing", "hash_bits": bits, "weighting": "tf"}).to_json())
    (root / "taxonomy.tsv").write_text(TAX)
    return root


@pytest.mark.slow
def test_ctrl_c_stops_a_running_training(tmp_path):
    feats = _big_features(tmp_path / "feats")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.Popen([sys.executable, "-m", "sparkhc.cli", "train", "--features", str(feats), "--out",
                          str(tmp_path / "m")], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert p.stderr is not None
    for line in p.stderr:  # the training has started
        if "select_epochs" in line or "epoch " in line:
            break
    p.send_signal(signal.SIGINT)
    code = p.wait(60)
    err = p.stderr.read()
    assert code == 130 and not (tmp_path / "m").exists()
    assert err.strip().splitlines()[-1] == "sparkhc: interrupted", err[-2000:]


def test_log_lines_go_to_spark_submits_stderr(monkeypatch):
    """Under spark-submit (``PYSPARK_GATEWAY_PORT``) the log lines are printed by spark-submit's JVM on
    its stderr, not on the Python driver's stderr that spark-submit relays on stdout."""
    import logging

    import sparkhc.cli._common
    from sparkhc.cli._common import SubmitStderrHandler

    printed: list[str] = []
    monkeypatch.setattr(sparkhc.cli._common, "print_error_line", printed.append)
    handler = SubmitStderrHandler()
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    log = logging.getLogger("sparkhc.test53")
    log.addHandler(handler)
    try:
        log.warning("train: %d epochs", 7)
    finally:
        log.removeHandler(handler)
    assert printed == ["WARNING sparkhc.test53: train: 7 epochs"]
