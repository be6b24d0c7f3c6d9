"""Issue 16, point 4: the reader options of featurize (``on_empty``, ``on_invalid``,
``unknown_labels``, ``require_labels``) are reachable from the CLI and the configuration, and the errors say how.

A small made-up JSON Lines corpus (the tiny corpus of ``tests.reliability``) with one bad record
appended; every outcome is counted in the read report of ``corpus.json``."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from sparkhc.cli import run
from tests.reliability import error_line, run_main, tiny_records, write_jsonl, write_taxonomy

FEAT_SET = ["--set", "featurize.min_df=1", "--set", "featurize.partitions=1"]


def featurize_args(docs: Path, tax: Path, out: Path, *extra: str) -> list[str]:
    return ["featurize", "--input", str(docs), "--taxonomy", str(tax), "--out", str(out), *FEAT_SET, *extra]


def read_report(out: Path) -> dict:
    return json.loads((out / "corpus.json").read_text())["read_report"]


def doc_ids(out: Path) -> list[str]:
    return sorted(pq.read_table(out / "features", columns=["doc_id"]).column("doc_id").to_pylist())


@pytest.fixture()
def corpus(tmp_path):
    tax = write_taxonomy(tmp_path / "taxonomy.tsv")
    good = tiny_records(6)
    return tmp_path, tax, good


def test_on_empty_flag_and_configuration_key(spark, corpus, capsys):
    tmp, tax, good = corpus
    docs = write_jsonl(tmp / "docs.jsonl", [*good, {"id": "e1", "text": "  ", "labels": ["tennis"], "split": "train"}])
    # default: an error that names the flag and the configuration key
    code, _, err = run_main(featurize_args(docs, tax, tmp / "f0"), capsys)
    msg = error_line(err)
    assert code == 2 and "document 'e1' is empty" in msg
    assert "--on-empty keep|quarantine" in msg and "featurize.on_empty" in msg
    assert not (tmp / "f0").exists()
    # the flag: set aside and counted
    assert run(featurize_args(docs, tax, tmp / "f1", "--on-empty", "quarantine")) == 0
    rep = read_report(tmp / "f1")
    assert (rep["read"], rep["emitted"], rep["quarantined"]) == (7, 6, 1)
    assert "e1" not in doc_ids(tmp / "f1")
    # the configuration key (a TOML file or --set): kept
    conf = tmp / "read.toml"
    conf.write_text('[featurize]\non_empty = "keep"\n')
    assert run(featurize_args(docs, tax, tmp / "f2", "--config", str(conf))) == 0
    rep = read_report(tmp / "f2")
    assert (rep["read"], rep["emitted"], rep["quarantined"], rep["empty_kept"]) == (7, 7, 0, 1)
    assert "e1" in doc_ids(tmp / "f2")
    # the flag wins over the key
    assert run(featurize_args(docs, tax, tmp / "f3", "--config", str(conf), "--on-empty", "quarantine")) == 0
    assert read_report(tmp / "f3")["quarantined"] == 1


def test_on_invalid_and_unknown_labels_flags_and_keys(spark, corpus, capsys):
    tmp, tax, good = corpus
    docs = write_jsonl(tmp / "docs.jsonl", [*good, '{"id": "m1", "text": "goal"',  # line 7: malformed
                                            {"id": "u1", "text": "goal", "labels": ["cricket"], "split": "train"}])
    code, _, err = run_main(featurize_args(docs, tax, tmp / "f0"), capsys)
    msg = error_line(err)
    assert code == 2 and "docs.jsonl, line 7: malformed JSON" in msg
    assert "--on-invalid quarantine" in msg and "featurize.on_invalid" in msg
    # malformed line set aside; the unknown label is then the error, naming its flag and key
    code, _, err = run_main(featurize_args(docs, tax, tmp / "f1", "--on-invalid", "quarantine"), capsys)
    msg = error_line(err)
    assert code == 2 and "label 'cricket' is not a node of the taxonomy" in msg
    assert "--unknown-labels drop|quarantine" in msg and "featurize.unknown_labels" in msg
    assert run(featurize_args(docs, tax, tmp / "f2", "--set", "featurize.on_invalid=quarantine",
                              "--set", "featurize.unknown_labels=quarantine")) == 0
    rep = read_report(tmp / "f2")
    assert (rep["read"], rep["emitted"], rep["quarantined"]) == (8, 6, 2)
    assert rep["quarantine_reasons"] == {"malformed JSON": 1, "unknown label": 1}
    assert run(featurize_args(docs, tax, tmp / "f3", "--on-invalid", "quarantine", "--unknown-labels", "drop")) == 0
    rep = read_report(tmp / "f3")
    assert (rep["read"], rep["emitted"], rep["quarantined"], rep["labels_dropped"]) == (8, 7, 1, 1)


def test_unlabelled_documents_flag_and_key(spark, corpus, capsys):
    tmp, tax, good = corpus
    new = {"id": "n1", "text": "goal match", "split": "test"}  # a document to predict: no labels
    docs = write_jsonl(tmp / "docs.jsonl", [*good, new])
    code, _, err = run_main(featurize_args(docs, tax, tmp / "f0"), capsys)
    msg = error_line(err)
    assert code == 2 and "line 7 (document 'n1'): missing labels field 'labels'" in msg
    assert "--allow-unlabelled" in msg and "featurize.require_labels" in msg
    for out, extra in ((tmp / "f1", ["--allow-unlabelled"]), (tmp / "f2", ["--set", "featurize.require_labels=false"])):
        assert run(featurize_args(docs, tax, out, *extra)) == 0
        rep = read_report(out)
        assert (rep["read"], rep["emitted"], rep["no_labels"]) == (7, 7, 1)
        t = pq.read_table(out / "features", columns=["doc_id", "labels"]).to_pylist()
        assert {"doc_id": "n1", "labels": []} in t


def test_reader_keys_are_validated():
    from sparkhc.config import load_config
    from sparkhc.errors import ConfigError

    cfg = load_config()
    assert (cfg.featurize.on_empty, cfg.featurize.on_invalid, cfg.featurize.unknown_labels) == ("", "error", "error")
    with pytest.raises(ConfigError, match="'on_empty' must be '', 'error', 'keep' or 'quarantine'"):
        load_config(overrides=["featurize.on_empty=skip"])
    with pytest.raises(ConfigError, match="'on_invalid' must be 'error' or 'quarantine'"):
        load_config(overrides=["featurize.on_invalid=drop"])
