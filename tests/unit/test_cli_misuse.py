"""CLI misuse: misspelled model sections, --version, help text of every flag, and sparkhc report
refusing to replace an existing report without --overwrite. No SparkSession is started."""

from __future__ import annotations

import argparse
import re
from importlib.metadata import version

import pytest

from sparkhc.cli import build_parser, main
from sparkhc.config import load_config
from sparkhc.errors import ConfigError
from sparkhc.models import names


def _run(argv, capsys):
    """``sparkhc ARGV`` in process: (exit status, stdout, stderr)."""
    with pytest.raises(SystemExit) as e:
        main(argv)
    out, err = capsys.readouterr()
    return e.value.code, out, err


# ---------------------------------------------------------------- unknown [model.X] sections
def test_unknown_model_section_from_set_is_refused():
    with pytest.raises(ConfigError) as e:
        load_config(None, ["model.globl.C=0.1"])
    msg = str(e.value)
    assert msg.startswith("--set model.globl.C=0.1: unknown model section [model.globl] (did you mean 'global'?); "
                          "valid model names: ")
    assert msg.endswith(", ".join(names())) and "global" in names()


def test_unknown_model_section_from_a_toml_file_is_refused(tmp_path):
    f = tmp_path / "cfg.toml"
    f.write_text("[train]\nmodel = \"tree\"\n[model.treee]\nC = 2.0\n")
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(f))}: unknown model section \[model\.treee\] \(did you mean 'tree'\?\); "
                                          r"valid model names: .*\btree\b"):
        load_config([f])
    # also as an inline table on the command line
    with pytest.raises(ConfigError, match=r"^--set model\.nosuchmodel=\{C=1\}: unknown model section "
                                          r"\[model\.nosuchmodel\]; valid model names: "):
        load_config(None, ["model.nosuchmodel={C=1}"])


def test_known_model_sections_still_load(tmp_path):
    f = tmp_path / "cfg.toml"
    f.write_text("[model.flat]\nC = 2.0\n")
    cfg = load_config([f], ["model.global.C=0.5", "model.global.pa=II", "model.tree.data=sib"])
    assert cfg.model_params("flat")["C"] == 2.0 and cfg.model_params("global")["C"] == 0.5
    assert cfg.model_params("global")["pa"] == "II" and cfg.model_params("tree")["data"] == "sib"


# ---------------------------------------------------------------- unknown keys in a known [model.X]
GLOBAL_KEYS = ("C, R, average, bias, branching, dtype, init, init_C, layout, margin, margin_rare, normalize, pa, passes, "
               "solver, update")


def test_unknown_model_key_from_set_is_refused_with_the_valid_keys():
    with pytest.raises(ConfigError) as e:
        load_config(None, ["model.global.Cc=0.5"])
    assert str(e.value) == (f"--set model.global.Cc=0.5: unknown key 'Cc' in [model.global] (did you mean 'C'?); "
                            f"valid keys: {GLOBAL_KEYS}")
    with pytest.raises(ConfigError, match=r"unknown key 'c' in \[model\.global\] \(did you mean 'C'\?\)"):
        load_config(None, ["model.global.c=1.0"])  # a case slip gets its hint too
    # a key of another model: refused too (the tree model has no branching features)
    with pytest.raises(ConfigError, match=r"^--set model\.tree\.branching=true: unknown key 'branching' in "
                                          r"\[model\.tree\]; valid keys: C, bias, data, decoder, dtype, normalize$"):
        load_config(None, ["model.tree.branching=true"])


def test_unknown_model_key_from_a_toml_file_is_refused(tmp_path):
    f = tmp_path / "cfg.toml"
    f.write_text("[model.global]\nmargn = 0.5\n")
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(f))}: unknown key 'margn' in \[model\.global\] "
                                          rf"\(did you mean 'margin'\?\); valid keys: {re.escape(GLOBAL_KEYS)}$"):
        load_config([f])
    # a model whose section defaults.toml does not have (its class is asked)
    g = tmp_path / "perc.toml"
    g.write_text("[model.perc]\nnosuch = 1\n")
    with pytest.raises(ConfigError, match=r"unknown key 'nosuch' in \[model\.perc\]; valid keys: "):
        load_config([g])


def test_epochs_and_seed_in_a_model_section_point_to_train():
    for key in ("epochs", "seed"):
        with pytest.raises(ConfigError, match=rf"^--set model\.global\.{key}=3: model\.global\.{key} is not a model "
                                              rf"setting: set train\.{key} instead"):
            load_config(None, [f"model.global.{key}=3"])


@pytest.mark.parametrize("how", ["set", "config"])
def test_unknown_model_key_through_the_cli_exits_2_with_one_line(tmp_path, capsys, how):
    f = tmp_path / "cfg.toml"
    f.write_text("[model.global]\nCc = 0.5\n")
    flags = ["--set", "model.global.Cc=0.5"] if how == "set" else ["--config", str(f)]
    code, out, err = _run(["train", "--features", str(tmp_path / "f"), "--out", str(tmp_path / "m"), *flags], capsys)
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("sparkhc: error: ") and "unknown key 'Cc' in [model.global] (did you mean 'C'?)" in lines[0]
    assert lines[0].endswith(f"valid keys: {GLOBAL_KEYS}")
    assert not (tmp_path / "m").exists()


@pytest.mark.parametrize("item", ["train.epoch=3", "featurize.min_dff=2", "predict.partition=2"])
def test_unknown_key_of_the_other_sections_through_the_cli_exits_2_with_one_line(tmp_path, capsys, item):
    code, out, err = _run(["train", "--features", str(tmp_path / "f"), "--out", str(tmp_path / "m"), "--set", item],
                          capsys)
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and f"unknown key '{item.split('.')[1].split('=')[0]}'; known keys: " in lines[0]


def test_unknown_model_section_through_the_cli_exits_2_with_one_line(tmp_path, capsys):
    code, out, err = _run(["train", "--features", str(tmp_path / "f"), "--out", str(tmp_path / "m"),
                           "--set", "model.globl.C=0.1"], capsys)
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("sparkhc: error: --set model.globl.C=0.1: unknown model section [model.globl]")
    assert "valid model names: " in lines[0] and ", global, " in lines[0]
    assert not (tmp_path / "m").exists()


# ---------------------------------------------------------------- --version
def test_version_flag_prints_the_package_version(capsys):
    code, out, err = _run(["--version"], capsys)
    assert code == 0 and err == ""
    assert out == f"sparkhc {version('sparkhc')}\n"


# ---------------------------------------------------------------- help text of every flag
def _actions(parser: argparse.ArgumentParser, prefix: str):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _actions(sub, f"{prefix} {name}")
        elif not isinstance(action, argparse._HelpAction):
            yield prefix, action


def test_every_option_of_every_subcommand_has_help():
    found = list(_actions(build_parser(), "sparkhc"))
    commands = {where for where, _ in found}
    assert {"sparkhc train", "sparkhc predict", "sparkhc evaluate", "sparkhc report", "sparkhc models register"} <= commands
    missing = [f"{where} {'/'.join(a.option_strings) or a.dest}" for where, a in found
               if not (a.help and a.help.strip())]
    assert missing == []


# ---------------------------------------------------------------- report --overwrite
@pytest.fixture
def no_report_work(monkeypatch):
    """sparkhc.report.build_report replaced: records its calls instead of reading predictions."""
    import sparkhc.report

    calls: list[dict] = []

    def fake(predictions, **kw):
        calls.append({"predictions": predictions, **kw})
        return {"html": "report.html"}

    monkeypatch.setattr(sparkhc.report, "build_report", fake)
    return calls


def test_report_refuses_an_existing_report_without_overwrite(tmp_path, capsys, no_report_work):
    preds = tmp_path / "pred"
    (preds / "report").mkdir(parents=True)
    (preds / "report" / "report.html").write_text("<p>previous</p>")
    # the default output folder, PREDICTIONS/report
    code, out, err = _run(["report", "--predictions", str(preds)], capsys)
    assert code == 2 and out == ""
    assert err == f"sparkhc: error: {preds / 'report'} already exists; pass --overwrite to replace it\n"
    # an explicit --out
    other = tmp_path / "r"
    other.mkdir()
    code, _, err = _run(["report", "--predictions", str(preds), "--out", str(other)], capsys)
    assert code == 2 and err.count("\n") == 1 and "--overwrite" in err and str(other) in err
    assert no_report_work == []  # refused before any work
    assert (preds / "report" / "report.html").read_text() == "<p>previous</p>"


def test_report_with_overwrite_or_a_new_folder_runs(tmp_path, capsys, no_report_work):
    preds = tmp_path / "pred"
    (preds / "report").mkdir(parents=True)
    code, _, err = _run(["report", "--predictions", str(preds), "--overwrite"], capsys)
    assert code == 0 and err == ""
    code, _, err = _run(["report", "--predictions", str(preds), "--out", str(tmp_path / "new")], capsys)
    assert code == 0 and err == ""
    assert [c["out"] for c in no_report_work] == [None, str(tmp_path / "new")]


# ---------------------------------------------------------------- existing outputs, before any work
@pytest.fixture
def no_pipeline_work(monkeypatch, no_spark):
    """:func:`no_spark` and the input checks (:mod:`sparkhc.cli.preflight`) replaced by recorders: a
    refused output must reach none of them (no input read, no Spark started)."""
    import sparkhc.cli.preflight

    monkeypatch.setattr(sparkhc.cli.preflight, "run", lambda *a, **k: no_spark.append("preflight"))
    return no_spark


@pytest.mark.parametrize("argv", [
    ["featurize", "--corpus", "20newsgroups", "--out", "{out}"],
    ["featurize", "--input", "docs.jsonl", "--taxonomy", "tax.tsv", "--out", "file://{out}"],
    ["train", "--features", "feats", "--out", "{out}"],
    ["predict", "--model", "m", "--features", "feats", "--out", "{out}"],
])
def test_writing_verbs_refuse_an_existing_output_before_any_work(tmp_path, capsys, no_pipeline_work, argv):
    out = tmp_path / "existing"
    out.mkdir()
    (out / "keep.txt").write_text("previous")
    code, stdout, err = _run([a.format(out=out) for a in argv], capsys)
    assert code == 2 and stdout == ""
    shown = argv[argv.index("--out") + 1].format(out=out)
    assert err == f"sparkhc: error: {shown} already exists; pass --overwrite to replace it\n"
    assert no_pipeline_work == []  # neither the input read nor Spark started
    assert (out / "keep.txt").read_text() == "previous"
    # with --overwrite the verb goes on to its work
    code, _, _ = _run([*[a.format(out=out) for a in argv], "--overwrite"], capsys)
    assert code == 0 and no_pipeline_work == ["preflight", "session", argv[0]]


# ---------------------------------------------------------------- master and URI schemes
@pytest.mark.parametrize("verb", [
    ["featurize", "--corpus", "20newsgroups", "--out", "{tmp}/f"],
    ["train", "--features", "feats", "--out", "{tmp}/m"],
    ["predict", "--model", "m", "--features", "feats", "--out", "{tmp}/p"],
])
def test_a_bad_master_is_one_line_before_spark_starts(tmp_path, capsys, no_pipeline_work, verb):
    code, out, err = _run([*[a.format(tmp=tmp_path) for a in verb], "--master", "nonsense"], capsys)
    assert code == 2 and out == ""
    assert err == ("sparkhc: error: --master 'nonsense' is not a Spark master URL: use local, local[N], local[*], "
                   "spark://HOST:PORT, yarn or k8s://https://HOST:PORT\n")
    assert no_pipeline_work == []


def test_valid_master_urls_pass_the_check(monkeypatch):
    from sparkhc.cli._common import check_master

    for m in ("local", "local[2]", "local[*]", "local[4,2]", "local-cluster[2,1,1024]", "spark://h:7077",
              "spark://a:7077,b:7077", "yarn", "k8s://https://h:443", None):
        check_master(m)
    for m in ("nonsense", "local[0]", "local[]", "spark:/h", ""):
        with pytest.raises(ConfigError, match="is not a Spark master URL"):
            check_master(m)


def test_a_scheme_without_its_connector_is_named(tmp_path):
    """hdfs:// without libhdfs/the Hadoop client here: one line naming what it needs, a LocationError
    (a SparkhcError, so the CLI exits 2, and a ValueError as before)."""
    from sparkhc import fsio
    from sparkhc.errors import LocationError, SparkhcError

    with pytest.raises(LocationError) as e:
        fsio.resolve("hdfs://namenode:8020/x/features")
    msg = str(e.value)
    assert msg.startswith("hdfs://namenode:8020/x/features: hdfs:// needs the Hadoop client and a configured "
                          "cluster") and "\n" not in msg
    assert isinstance(e.value, SparkhcError) and isinstance(e.value, ValueError)


# ---------------------------------------------------------------- inputs checked before Spark starts
def _features_folder(root, splits_folds, taxonomy="ROOT\tA\nROOT\tB\n"):
    """A features folder as featurize lays it out, with one part file holding the split and fold
    of each document (what the checks before Spark read: the layout, the taxonomy, those columns)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from sparkhc.features import FEATURES_ARROW_SCHEMA

    n = len(splits_folds)
    cols = {"doc_id": [f"d{i}" for i in range(n)], "split": [s for s, _ in splits_folds],
            "fold": [f for _, f in splits_folds], "labels": [["A"]] * n, "label_ids": [[1]] * n,
            "indices": [[0]] * n, "values": [[1.0]] * n, "counts": [[1.0]] * n}
    (root / "features").mkdir(parents=True)
    pq.write_table(pa.table(cols, schema=FEATURES_ARROW_SCHEMA), root / "features" / "part-00000.parquet")
    (root / "feature_spec.json").write_text("{}")
    (root / "taxonomy.tsv").write_text(taxonomy)
    return root


def _one_line_before_spark(code, out, err, calls):
    assert code == 2 and out == "", (code, out, err)
    assert err.startswith("sparkhc: error: ") and err.count("\n") == 1, err
    assert calls == []  # no SparkSession, no pipeline
    return err[len("sparkhc: error: "):].rstrip("\n")


def test_featurize_taxonomy_and_input_errors_come_before_spark(tmp_path, capsys, no_spark):
    docs = tmp_path / "docs.jsonl"
    docs.write_text('{"id": "a", "text": "x", "labels": ["A"]}\n')
    (tmp_path / "cyc.tsv").write_text("ROOT\tA\nA\tB\nB\tC\nC\tA\n")
    (tmp_path / "tax.tsv").write_text("ROOT\tA\n")
    base = ["featurize", "--out", str(tmp_path / "f")]
    msg = _one_line_before_spark(*_run([*base, "--input", str(docs), "--taxonomy", str(tmp_path / "cyc.tsv")],
                                       capsys), no_spark)
    assert msg == f"{tmp_path / 'cyc.tsv'}, lines 2, 3, 4: cycle: A -> B -> C -> A (node 'A' also has the parent 'ROOT', line 1)"
    msg = _one_line_before_spark(*_run([*base, "--input", str(docs), "--taxonomy", str(tmp_path / "nope.tsv")],
                                       capsys), no_spark)
    assert msg == f"{tmp_path / 'nope.tsv'}: taxonomy file not found"
    msg = _one_line_before_spark(*_run([*base, "--input", str(tmp_path / "nope.jsonl"), "--taxonomy",
                                        str(tmp_path / "tax.tsv")], capsys), no_spark)
    assert msg == f"{tmp_path / 'nope.jsonl'}: input not found"
    msg = _one_line_before_spark(*_run([*base, "--input", f"file://{tmp_path / 'nope.jsonl'}", "--taxonomy",
                                        str(tmp_path / "tax.tsv")], capsys), no_spark)
    assert msg == f"{tmp_path / 'nope.jsonl'}: input not found"
    msg = _one_line_before_spark(*_run([*base, "--input", str(docs)], capsys), no_spark)
    assert msg == "--taxonomy (or --class-spaces) is required with --input"
    msg = _one_line_before_spark(*_run([*base, "--input", str(docs), "--class-spaces", str(tmp_path / "cs.toml")],
                                       capsys), no_spark)
    assert msg == f"{tmp_path / 'cs.toml'}: class-space file not found"
    msg = _one_line_before_spark(*_run([*base, "--corpus", "20newsgroup"], capsys), no_spark)
    assert msg.startswith("unknown corpus '20newsgroup'; known corpora: ") and "20newsgroups" in msg
    # good inputs go on to the session and the pipeline
    code, _, err = _run([*base, "--input", str(docs), "--taxonomy", str(tmp_path / "tax.tsv")], capsys)
    assert code == 0 and no_spark == ["session", "featurize"], err


def test_missing_features_model_and_predictions_come_before_spark(tmp_path, capsys, no_spark):
    msg = _one_line_before_spark(*_run(["train", "--features", str(tmp_path / "nope"), "--out",
                                        str(tmp_path / "m")], capsys), no_spark)
    assert msg == f"{tmp_path / 'nope'}: features directory not found (expected the out_dir of featurize)"
    feats = _features_folder(tmp_path / "feats", [("train", None), ("test", None)])
    msg = _one_line_before_spark(*_run(["predict", "--model", str(tmp_path / "nope"), "--features", str(feats),
                                        "--out", str(tmp_path / "p")], capsys), no_spark)
    assert msg == f"{tmp_path / 'nope'}: model directory not found"
    msg = _one_line_before_spark(*_run(["evaluate", "--predictions", str(tmp_path / "nope")], capsys), no_spark)
    assert msg == f"{tmp_path / 'nope'}: not a predictions folder (_MODEL.json missing)"
    # a URI scheme without its connector: named before Spark starts (it used to be after)
    msg = _one_line_before_spark(*_run(["train", "--features", "hdfs://namenode:8020/x/features", "--out",
                                        str(tmp_path / "m")], capsys), no_spark)
    assert msg.startswith("hdfs://namenode:8020/x/features: hdfs:// needs the Hadoop client and a configured cluster")
    # an output at such a URI too (the driver writes its small files there through pyarrow)
    msg = _one_line_before_spark(*_run(["predict", "--model", str(tmp_path / "nope"), "--features", str(feats),
                                        "--out", "hdfs://namenode:8020/x/pred"], capsys), no_spark)
    assert msg.startswith("hdfs://namenode:8020/x/pred: hdfs:// needs the Hadoop client and a configured cluster")


@pytest.mark.parametrize("verb,flags,what", [
    ("train", ["--split", "trian"], "training documents"),
    ("train", ["--split", "all", "--fold", "7"], "training documents"),
    ("predict", ["--split", "tset"], "document"),
    ("predict", ["--split", "test", "--fold", "3"], "document"),
])
def test_split_and_fold_typos_come_before_spark(tmp_path, capsys, no_spark, verb, flags, what):
    feats = _features_folder(tmp_path / "feats", [("train", 0), ("train", 1), ("test", 0), ("test", None)])
    argv = [verb, "--features", str(feats), "--out", str(tmp_path / "out"), *flags]
    if verb == "predict":
        from sparkhc.persistence import FORMAT, FORMAT_VERSION

        (tmp_path / "m").mkdir()
        (tmp_path / "m" / "metadata.json").write_text(f'{{"format": "{FORMAT}", "format_version": {FORMAT_VERSION}}}')
        argv += ["--model", str(tmp_path / "m")]
    msg = _one_line_before_spark(*_run(argv, capsys), no_spark)
    split = flags[1] if flags[1] != "all" else None
    fold = int(flags[3]) if len(flags) > 2 else None
    assert msg == (f"{feats}: no {what}: the selection (split {split!r}, fold {fold!r}, exclude_fold None) matches "
                   "no document; the features hold 4 document(s) with split(s) 'test', 'train' and fold(s) 0, 1 "
                   "(choose with --split NAME|all, --fold K, --exclude-fold K)")
    # a selection the features hold goes on to the session and the pipeline
    code, _, err = _run([a for a in argv if a not in flags] + ["--split", "train", "--fold", "1"], capsys)
    assert code == 0 and no_spark == (["session", verb]), err


def test_a_verb_says_it_starts_spark(tmp_path, capsys, caplog, no_spark, monkeypatch):
    """predict and evaluate get a session started on first use (small jobs run in the process,
    issue 53): the verb announces nothing, the session announces its start-up (seconds) when it
    starts."""
    import logging

    monkeypatch.delenv("SPARKHC_MASTER", raising=False)
    caplog.set_level(logging.INFO, logger="sparkhc")
    feats = _features_folder(tmp_path / "feats", [("test", None)])
    from sparkhc.persistence import FORMAT, FORMAT_VERSION

    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "metadata.json").write_text(f'{{"format": "{FORMAT}", "format_version": {FORMAT_VERSION}}}')
    code, _, err = _run(["predict", "--model", str(tmp_path / "m"), "--features", str(feats), "--out",
                         str(tmp_path / "p"), "--master", "local[2]"], capsys)
    assert code == 0, err
    assert no_spark == ["session", "predict"]
    assert [r.getMessage() for r in caplog.records if r.name == "sparkhc"] == []
    from sparkhc.spark.session import DeferredSession

    assert DeferredSession(lambda: "a session", "local[2]").get() == "a session"
    assert caplog.records[-1].getMessage() == "starting the Spark session (master local[2])"
