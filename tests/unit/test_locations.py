"""Where data can live (issue 31): one statement, the same in README.md, docs/deployment.md and
docs/api.md, and its claims that can be tested here: file: URIs where local paths are taken, other
schemes refused in one line where only local paths are taken, S3 through pyarrow on a local moto
server. No SparkSession is started."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.unit.test_cli_misuse import _features_folder, _one_line_before_spark, _run

ROOT = Path(__file__).resolve().parents[2]
BEGIN = "<!-- locations: the same text in README.md, docs/deployment.md and docs/api.md (tests/unit/test_locations.py) -->"
END = "<!-- locations: end -->"


def _statement(doc: str) -> str:
    text = (ROOT / doc).read_text(encoding="utf-8")
    assert text.count(BEGIN) == 1 and text.count(END) == 1, doc
    return text[text.index(BEGIN):text.index(END)]


def test_one_statement_of_locations_in_readme_deployment_and_api():
    texts = {doc: _statement(doc) for doc in ("README.md", "docs/deployment.md", "docs/api.md")}
    assert len(set(texts.values())) == 1, "the three copies differ"
    text = texts["README.md"]
    for claim in ("`file:` URI", "`hdfs://…`, `s3a://…`", "`reclassify`", "`sparkhc.ml`", "before Spark starts"):
        assert claim in text
    # the tests it names exist
    for path, name in re.findall(r"`(tests/[\w/]+\.py)(?:::(\w+))?`", text):
        src = (ROOT / path).read_text(encoding="utf-8")
        assert not name or f"def {name}(" in src, (path, name)
    # no other page says the opposite any more
    assert "`s3a://` URLs are not supported" not in (ROOT / "README.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("argv,flag", [
    (["reclassify", "--input", "s3a://bucket/collection", "--out", "{tmp}/o", "--model", "{tmp}/m"], "--input"),
    (["reclassify", "--input", "{tmp}/c", "--out", "hdfs://nn:8020/preds", "--model", "{tmp}/m"], "--out"),
    (["report", "--predictions", "s3://bucket/pred"], "--predictions"),
    (["models", "list", "--root", "gs://bucket/models"], "--root"),
    (["train", "--features", "{tmp}/f", "--out", "{tmp}/m", "--config", "s3://bucket/c.toml"], "--config"),
    (["train", "--features", "{tmp}/f", "--out", "{tmp}/m", "--checkpoint-dir", "s3://b/ck"], "--checkpoint-dir"),
])
def test_local_only_flags_refuse_other_schemes_in_one_line(tmp_path, capsys, argv, flag):
    code, out, err = _run([a.format(tmp=tmp_path) for a in argv], capsys)
    assert code == 2 and out == ""
    value = argv[argv.index(flag) + 1]
    assert err == (f"sparkhc: error: {flag} {value}: sparkhc {argv[0]} takes local paths or file: URIs only (a shared "
                   "mount on a cluster); see 'Where data can live' in docs/deployment.md\n")


def test_taxonomy_is_a_local_path_or_a_file_uri(tmp_path):
    from sparkhc.errors import LocationError
    from sparkhc.taxonomy import Taxonomy

    (tmp_path / "t.tsv").write_text("ROOT\tA\nA\tB\n")
    assert Taxonomy.load((tmp_path / "t.tsv").as_uri()).names == Taxonomy.load(tmp_path / "t.tsv").names
    assert Taxonomy.load(f"file:{tmp_path}/t.tsv").n_nodes == 3
    with pytest.raises(LocationError, match=r"^s3://b/t\.tsv: taxonomy files are read on the driver from a local path"):
        Taxonomy.load("s3://b/t.tsv")


def test_file_uris_for_the_local_only_flags(tmp_path, capsys, monkeypatch):
    """reclassify, report, models and --config take file: URIs as the local paths they name."""
    import sparkhc.report

    seen = {}
    monkeypatch.setattr(sparkhc.report, "build_report", lambda p, **k: seen.update(p=p, **k) or {})
    code, _, err = _run(["report", "--predictions", (tmp_path / "pred").as_uri(), "--out", f"file:{tmp_path}/r"], capsys)
    assert code == 0, err
    assert seen["p"] == str(tmp_path / "pred") and seen["out"] == str(tmp_path / "r")
    code, out, err = _run(["models", "list", "--root", (tmp_path / "reg").as_uri()], capsys)
    assert code == 0, err
    (tmp_path / "c.toml").write_text("[train]\nepochs = 3\n")
    from sparkhc.cli import build_parser
    from sparkhc.cli._common import config

    args = build_parser().parse_args(["train", "--features", "f", "--out", "m", "--config", (tmp_path / "c.toml").as_uri()])
    assert config(args).train.epochs == 3


def test_features_and_model_on_s3_are_checked_before_spark(tmp_path, capsys, s3_server, no_spark):
    """predict with its model and features in an S3 bucket (pyarrow's client, moto on loopback): the
    model's metadata and the features' layout, taxonomy and split column are read there, and a
    --split typo is one line before Spark starts, the URI's credentials redacted."""
    import logging

    import pyarrow.fs as pafs

    from sparkhc import fsio
    from sparkhc.persistence import read_metadata, save_model
    from sparkhc.taxonomy import Taxonomy
    from tests.unit.test_persistence import _trained

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # the moto server's request log
    s3_server["make_bucket"]("loc")
    feats = _features_folder(tmp_path / "feats", [("train", None), ("test", None)],
                             taxonomy="ROOT\tA\nROOT\tB\nA\tAA\nA\tAB\nB\tBA\nB\tBB\n")
    s3, root = fsio.resolve(s3_server["uri"]("loc", "work"))
    pafs.copy_files(str(feats), f"{root}/features", source_filesystem=pafs.LocalFileSystem(), destination_filesystem=s3)
    model_uri = s3_server["uri"]("loc", "work/model")
    save_model(model_uri, _trained(Taxonomy.load(feats / "taxonomy.tsv"))[0], {})
    assert read_metadata(model_uri)["format_version"] >= 1
    feats_uri = s3_server["uri"]("loc", "work/features")
    msg = _one_line_before_spark(*_run(["predict", "--model", model_uri, "--features", feats_uri, "--out",
                                        str(tmp_path / "p"), "--split", "tset"], capsys), no_spark)
    assert msg.startswith(f"{fsio.redact(feats_uri)}: no document: the selection (split 'tset'")
    assert "testing:testing" not in msg and "split(s) 'test', 'train'" in msg
    code, _, err = _run(["predict", "--model", model_uri, "--features", feats_uri, "--out", str(tmp_path / "p")], capsys)
    assert code == 0 and no_spark == ["session", "predict"], err


def test_scheduling_doc_report_line_runs_again(tmp_path, capsys, monkeypatch):
    """The report line of docs/scheduling.md, run twice as written (a rerun of the monthly steps):
    the second run replaces the report instead of stopping at the existing folder."""
    import shlex

    import sparkhc.report

    line = next(ln for ln in (ROOT / "docs" / "scheduling.md").read_text(encoding="utf-8").splitlines()
                if ln.startswith("sparkhc report "))
    argv = shlex.split(line.split("#", 1)[0])[1:]
    argv = [a.replace("work/", f"{tmp_path}/work/") for a in argv]

    def fake(predictions, out=None, **kw):
        Path(out or Path(predictions) / "report").mkdir(parents=True, exist_ok=True)
        return {}

    monkeypatch.setattr(sparkhc.report, "build_report", fake)
    for _ in range(2):
        code, _, err = _run(argv, capsys)
        assert code == 0, err


def test_docs_say_plainly_that_conf_cluster_toml_is_opt_in():
    """Every page whose commands pass conf/cluster.toml says, in the same words, that it is opt-in and
    what it pins, with the values the file holds."""
    import tomllib

    cluster = tomllib.loads((ROOT / "conf" / "cluster.toml").read_text(encoding="utf-8"))
    assert (ROOT / "conf" / "cluster.toml").read_text(encoding="utf-8").startswith("# Opt-in fixed settings")
    sentence = (f"`--config conf/cluster.toml` is opt-in: it pins `train.epochs = {cluster['train']['epochs']}` and "
                f"`train.shards = {cluster['train']['shards']}` (and {cluster['featurize']['partitions']} feature and "
                f"prediction partitions) instead of the defaults `sparkhc train` uses")
    assert cluster["predict"]["partitions"] == cluster["featurize"]["partitions"]
    for doc in ("README.md", "docs/deployment.md"):
        text = " ".join((ROOT / doc).read_text(encoding="utf-8").split())
        assert "--config conf/cluster.toml" in text and sentence in text, doc
