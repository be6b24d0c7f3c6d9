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
GLOBAL_KEYS = "C, R, average, bias, branching, dtype, margin, margin_rare, normalize, pa, update"


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
def no_pipeline_work(monkeypatch):
    """Every pipeline verb and the session replaced by a recorder: a refused output must reach none
    of them (no input read, no Spark started)."""
    import sparkhc.spark.pipelines as pipelines
    import sparkhc.spark.session
    import sparkhc.spark.small

    calls: list[str] = []
    for name in ("featurize", "train", "predict"):
        monkeypatch.setattr(pipelines, name, lambda *a, _n=name, **k: calls.append(_n) or {})
    monkeypatch.setattr(sparkhc.spark.session, "get_session", lambda *a, **k: calls.append("session"))
    monkeypatch.setattr(sparkhc.spark.small, "deferred_session", lambda *a, **k: calls.append("session"))
    return calls


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
    assert code == 0 and no_pipeline_work == ["session", argv[0]]


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
