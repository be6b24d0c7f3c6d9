"""The verbs that run several steps (demo, tune, experiment, reclassify) share one SparkSession:
``sparkhc.spark.session.created`` counts the sessions a process creates (a test hook)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from tests.conftest import DATA_DIR, ROOT, corpus_dir


def test_the_counter_counts_creations_not_lookups(spark):
    from sparkhc.spark import session

    before = session.created
    assert session.get_session(app_name="another-name") is spark  # the active session, not a new one
    assert session.created == before


@pytest.mark.slow
def test_demo_featurize_train_predict_evaluate_in_one_session(tmp_path):
    """``sparkhc demo`` in a fresh process (quick 20 Newsgroups slice): four steps, one session."""
    corpus_dir("20newsgroups")
    script = textwrap.dedent(f"""
        import sys
        from experiments import quick
        from sparkhc.cli import run
        from sparkhc.spark import session
        data = quick.stage("20newsgroups", {str(DATA_DIR)!r}, {str(tmp_path / "data")!r})
        code = run(["demo", "--workdir", {str(tmp_path / "demo")!r}, "--data-dir", str(data),
                    "--master", "local[2]", "--set", "train.epochs=2"])
        print("SESSIONS", session.created, code)
    """)
    res = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "SESSIONS 1 0" in res.stdout, res.stdout[-2000:]
    assert (tmp_path / "demo" / "predictions" / "metrics.json").is_file()


@pytest.mark.slow
def test_tune_experiment_reclassify_never_stop_or_replace_the_session(spark, tmp_path, monkeypatch):
    """Run with spark=None (as the CLI does), each verb gets the process's session once and never
    stops it (a stop would make its next step start a second one)."""
    from sparkhc.cli import build_parser, dispatch
    from sparkhc.spark import session
    from tests.spark._ml_data import newsgroups_features

    corpus_dir("reuters21578")
    got = []
    real = session.get_session

    def recording(*a, **k):
        got.append(real(*a, **k))
        return got[-1]

    def no_stop(self):
        raise AssertionError("a verb stopped the session")

    monkeypatch.setattr(session, "get_session", recording)
    monkeypatch.setattr(type(spark), "stop", no_stop)
    before = session.created
    (tmp_path / "ng").mkdir()
    feats = newsgroups_features(spark, tmp_path / "ng" / "features", 120, 40)
    grid = tmp_path / "grid.toml"
    grid.write_text('epochs = [1, 2]\n\n[params]\nshards = 2\n')
    runs = [
        ["tune", "--features", str(feats), "--out", str(tmp_path / "tuned"), "--grid", str(grid), "--folds", "2"],
        ["experiment", "li-yamanishi", "--quick", "--data-dir", str(DATA_DIR), "--out", str(tmp_path / "ly")],
    ]
    for argv in runs:
        n = len(got)
        assert dispatch(build_parser().parse_args(argv)) == 0
        assert len(got) - n <= 1, argv
    coll = tmp_path / "coll" / "day=2024-01-01"
    coll.mkdir(parents=True)
    (coll / "part.jsonl").write_text('{"doc_id": "a", "text": "space shuttle launch orbit"}\n'
                                     '{"doc_id": "b", "text": "hockey game goal season"}\n')
    n = len(got)
    assert dispatch(build_parser().parse_args(["reclassify", "--input", str(tmp_path / "coll"), "--out",
                                               str(tmp_path / "pred"), "--model", str(tmp_path / "tuned"),
                                               "--partition-column", "day"])) == 0
    assert len(got) - n == 1
    assert all(s is spark for s in got) and session.created == before
