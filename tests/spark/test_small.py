"""Small trainings in the driver process (train.execution, sparkhc.spark.plan): Spark's own hash,
the automatic choice, the forced settings, and bit-identical weights to the Spark path on a real
slice (rcv1v2_subset, featurized by the CLI)."""

from __future__ import annotations

import logging
import random

import numpy as np
import pytest
from pyspark.sql import functions as F

from sparkhc.cli import run
from sparkhc.config import load_config
from sparkhc.features import Selection
from sparkhc.spark import pipelines, plan
from sparkhc.spark.hashing import shard_ids, spark_hash, spark_hash_int, validation_ids
from sparkhc.spark.plan import label_combinations_of, plan_training, read_rows
from sparkhc.spark.session import DeferredSession, deferred_session, is_local_master, task_slots
from tests.conftest import DATA_DIR, corpus_dir


def test_spark_hash_equals_spark_sql_hash(spark):
    rnd = random.Random(3)
    alphabet = [chr(c) for c in (*range(32, 127), 0xE9, 0x65E5, 0x672C, 0x1F600, 0x80, 0x7FF, 0x800)]
    ids = ["", "a", "ab", "abc", "abcd", "abcde", "é", "日本", "20newsgroups/sci.med/58045"]
    ids += ["".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 23))) for _ in range(500)]
    rows = spark.createDataFrame([(s,) for s in ids], "s string").select(
        "s", F.hash("s").alias("h"), F.expr("pmod(hash(s), 7)").alias("p")).collect()
    got = spark_hash([r["s"] for r in rows])
    assert [int(v) for v in got] == [r["h"] for r in rows]
    assert [int(v) for v in shard_ids([r["s"] for r in rows], 7)] == [r["p"] for r in rows]


def test_validation_ids_equal_spark_sql(spark):
    """The driver's validation slice is the Spark path's: ``hash(doc_id, seed + 17)`` (Murmur3 of
    the int literal seeded by the string's hash) and the cut, for several seeds and fractions."""
    rnd = random.Random(5)
    ids = ["", "a", "é", "d0001"] + ["".join(rnd.choice("abcxyz0123/._é日") for _ in range(rnd.randint(1, 30)))
                                     for _ in range(400)]
    df = spark.createDataFrame([(s,) for s in ids], "s string")
    for seed in (0, 2, 41, 100000):
        h = [r["h"] for r in df.select(F.expr(f"hash(s, {seed + 17})").alias("h")).collect()]
        assert [int(v) for v in spark_hash_int(seed + 17, spark_hash(ids))] == h
        for fraction in (0.1, 0.25):
            cut = int(round(fraction * 10000))
            want = [r["v"] for r in df.select(F.expr(f"pmod(hash(s, {seed + 17}), 10000) < {cut}").alias("v")).collect()]
            assert validation_ids(ids, fraction, seed).tolist() == want




@pytest.fixture(scope="module")
def rcv1(spark, tmp_path_factory):
    """rcv1v2_subset featurized by the CLI into 3 part files (2,316 documents in 5 folds)."""
    corpus_dir("rcv1v2_subset")
    out = tmp_path_factory.mktemp("rcv1small") / "features"
    assert run(["featurize", "--corpus", "rcv1v2_subset", "--data-dir", str(DATA_DIR), "--out", str(out),
                "--set", "featurize.partitions=3"]) == 0
    return out


def _train(spark, features, out, execution, *extra, model=None, exclude_fold=0):
    cfg = load_config(overrides=[f"train.execution={execution}", "train.epochs=3", *extra])
    group = f"smalljobs-{out.name}"
    spark.sparkContext.setJobGroup(group, "test_small")  # the jobs of this training (this thread)
    info = pipelines.train(spark, cfg, features, out, model_name=model, split=None, exclude_fold=exclude_fold)
    jobs = spark.sparkContext.statusTracker().getJobIdsForGroup(group)
    return info, len(jobs)


@pytest.mark.slow
@pytest.mark.parametrize("model,shards", [("global", 2), ("global", 3), ("tree", 2), ("nbmc", 2)])
def test_driver_execution_gives_the_spark_paths_weights(spark, rcv1, tmp_path, model, shards):
    """Trained in the driver (no Spark job at all) or on Spark (barrier mixing; nbmc: collected
    and fitted on the driver): the same weights hash, the same epoch records."""
    drv, drv_jobs = _train(spark, rcv1, tmp_path / "driver", "driver", f"train.shards={shards}", model=model)
    spk, spk_jobs = _train(spark, rcv1, tmp_path / "spark", "spark", f"train.shards={shards}", model=model)
    assert drv["weights_hash"] == spk["weights_hash"]
    assert drv["documents"] == spk["documents"] == 1852  # the four training folds of round 0
    assert drv_jobs == 0 and spk_jobs > 0
    import json

    def log(p):
        return json.loads((p / "metadata.json").read_text())["training"]["epoch_log"]

    assert log(tmp_path / "driver") == log(tmp_path / "spark")


def test_automatic_choice(spark, rcv1, monkeypatch):
    sel = Selection(None, None, 0)
    auto = load_config(overrides=["train.execution=auto"]).train
    assert spark.sparkContext.master.startswith("local")
    read = read_rows(spark, auto, rcv1, sel, with_counts=False)
    assert read is not None and len(read[0]) == 1852
    # Spark when asked, when the mixing is "jobs" (another summation order), for a URI
    assert read_rows(spark, load_config(overrides=["train.execution=spark"]).train, rcv1, sel, False) is None
    assert read_rows(spark, load_config(overrides=["train.mixing=jobs"]).train, rcv1, sel, False) is None
    assert read_rows(spark, auto, f"hdfs://nn/{rcv1}", sel, False) is None
    # above the size limit: Spark with auto, the driver when forced
    monkeypatch.setattr(plan, "AUTO_MAX_INPUT_BYTES", 1000)
    assert read_rows(spark, auto, rcv1, sel, False) is None
    forced = load_config(overrides=["train.execution=driver"]).train
    assert read_rows(spark, forced, rcv1, sel, False) is not None


def test_which_models_train_in_the_driver(spark, rcv1, monkeypatch):
    from sparkhc.features import features_taxonomy, model_taxonomy
    from sparkhc.models import get_model_class

    auto = load_config(overrides=["train.execution=auto"]).train
    rows, spec = read_rows(spark, auto, rcv1, Selection(None, None, 0), False)
    tax = model_taxonomy(features_taxonomy(rcv1), label_combinations_of(rows))
    forced = load_config(overrides=["train.execution=driver"]).train

    def make(name):
        return get_model_class(name)(tax, spec.n_features)

    def place(name, train):  # the one decision: where the model trains on rows read in the driver
        return plan_training(DeferredSession(lambda: spark, "local[2]"), make(name), train, rows=rows)

    assert place("global", auto).place == "driver" and place("flat", auto).place == "driver"
    assert (place("global", auto).engine, place("global", auto).shards) == ("driver", 2)
    assert place("nbmc", auto).place == "driver"  # fitted on the driver anyway
    h = place("h_svm", forced)  # node-parallel: one task per node on Spark
    assert (h.place, h.strategy, h.engine) == ("spark", "node_parallel", None) and "node_parallel" in h.reason
    monkeypatch.setattr(plan, "AUTO_MAX_STATE_BYTES", 1000)
    big = place("global", auto)
    assert (big.place, big.engine) == ("spark", "barrier") and "MiB" in big.reason
    assert place("global", forced).place == "driver"
    jobs = load_config(overrides=["train.mixing=jobs", "train.shards=3"]).train
    p = plan_training(spark, make("global"), jobs)  # rows on Spark
    assert (p.place, p.engine, p.shards) == ("spark", "jobs", 3)
    assert p.line().startswith("plan: global trains by mixing on Spark, jobs engine, 3 shard(s)")


def test_label_combinations_equal_the_spark_job(spark, rcv1):
    from sparkhc.spark.io import read_features

    rows, _ = read_rows(spark, load_config(overrides=["train.execution=auto"]).train, rcv1, Selection(None, None, 0), False)
    df, _ = read_features(spark, str(rcv1))
    expected = pipelines.label_combinations(pipelines.select_rows(df, Selection(None, None, 0)))
    assert label_combinations_of(rows) == expected
    assert len(expected) > 100  # rcv1v2_subset: many distinct label sets


def test_auto_trains_in_the_driver_and_spark_setting_on_spark(spark, rcv1, tmp_path):
    _, jobs = _train(spark, rcv1, tmp_path / "auto", "auto", "train.epochs=1")
    assert jobs == 0
    _, jobs = _train(spark, rcv1, tmp_path / "spk", "spark", "train.epochs=1")
    assert jobs > 0


def test_empty_selection_names_what_the_features_hold(spark, rcv1, tmp_path):
    from sparkhc.errors import InputDataError

    with pytest.raises(InputDataError, match="matches no document"):
        pipelines.train(spark, load_config(), rcv1, tmp_path / "m", split="train")


# ----------------------------------------------------------------------------- the choice before Spark starts
def _never() -> None:
    raise AssertionError("the Spark session was started")


def test_deferred_session_knows_master_and_task_slots_without_starting():
    import os

    slots = {"local[3]": 3, "local": 1, "local[2, 4]": 2, "local[*]": len(os.sched_getaffinity(0))}
    for master, n in slots.items():
        d = DeferredSession(_never, master)
        assert task_slots(d) == n and is_local_master(d) and not d.started, master
    for master in ("spark://h:7077", "yarn", "k8s://https://h:6443", "local-cluster[2,1,1024]"):
        assert not is_local_master(DeferredSession(_never, master)), master


def test_deferred_session_is_the_active_one_when_a_session_runs(spark):
    assert deferred_session("sparkhc-train", None) is spark


def test_driver_training_starts_no_session_and_equals_spark(spark, rcv1, tmp_path):
    """``auto`` on a local master with a small input: trained without starting Spark (the
    factory would fail), shards from ``local[2]`` without a JVM, the Spark path's weights."""
    from sparkhc.spark import session

    before = session.created
    d = DeferredSession(_never, "local[2]")
    cfg = load_config(overrides=["train.execution=auto", "train.epochs=2", "train.shards=0"])
    drv = pipelines.train(d, cfg, rcv1, tmp_path / "d", split=None, exclude_fold=0)
    assert not d.started and session.created == before and drv["session_start_seconds"] == 0.0
    spk = pipelines.train(spark, load_config(overrides=["train.execution=spark", "train.epochs=2", "train.shards=0"]),
                          rcv1, tmp_path / "s", split=None, exclude_fold=0)
    assert drv["weights_hash"] == spk["weights_hash"]


def test_auto_starts_spark_for_a_cluster_master_or_a_large_input(spark, rcv1, tmp_path, monkeypatch):
    auto = load_config(overrides=["train.execution=auto", "train.epochs=1"])
    cluster = DeferredSession(lambda: spark, "spark://nowhere:7077")
    assert read_rows(cluster, auto.train, rcv1, Selection(None, None, 0), False) is None
    assert not cluster.started  # the choice itself never starts it
    info = pipelines.train(cluster, auto, rcv1, tmp_path / "c", split=None, exclude_fold=0)
    assert cluster.started and info["session_start_seconds"] >= 0.0
    monkeypatch.setattr(plan, "AUTO_MAX_INPUT_BYTES", 1000)
    large = DeferredSession(lambda: spark, "local[2]")
    pipelines.train(large, auto, rcv1, tmp_path / "l", split=None, exclude_fold=0)
    assert large.started


@pytest.mark.parametrize("calibrate", ["off", "on"])
def test_cli_driver_training_never_starts_spark(rcv1, tmp_path, calibrate):
    """``sparkhc train`` in a fresh process with ``train.execution=auto``: no SparkSession, no JVM,
    also with ``train.calibrate`` (its inner folds train in the driver too)."""
    import subprocess
    import sys
    import textwrap

    from tests.conftest import ROOT

    script = textwrap.dedent(f"""
        from pyspark import SparkContext
        from sparkhc.cli import run
        from sparkhc.spark import session
        code = run(["train", "--features", {str(rcv1)!r}, "--out", {str(tmp_path / "m")!r}, "--master", "local[2]",
                    "--split", "all", "--exclude-fold", "0", "--set", "train.execution=auto", "--set", "train.epochs=1",
                    "--set", "train.calibrate={calibrate}"])
        print("RESULT", code, session.created, SparkContext._gateway is None)
    """)
    res = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "RESULT 0 0 True" in res.stdout, res.stdout[-2000:]
    assert (tmp_path / "m" / "state.npz").is_file()


def _epoch_selection(model_dir, timings=True):
    """The saved model's ``training.epoch_selection``; ``timings=False``: its ``time_budget`` (the
    default budget records one in every selection) keeps only the budget and whether it cut the
    selection, not the seconds measured, which differ between any two runs."""
    import json

    sel = json.loads((model_dir / "metadata.json").read_text())["training"]["epoch_selection"]
    if not timings and "time_budget" in sel:
        sel["time_budget"] = {k: sel["time_budget"][k] for k in ("seconds", "cut_selection")}
    return sel


def test_default_epoch_selection_in_the_driver_equals_spark(spark, rcv1, tmp_path):
    """``train.epochs = 0`` (the default): the validation bands (2 here), curves and choice of C and
    epochs made in the driver (no Spark job) equal the Spark path's, and so do the final weights."""
    sets = ["train.epochs=0", "train.max_epochs=8", "train.patience=3", "train.shards=2", "train.validation_folds=2"]
    cfg = {e: load_config(overrides=[f"train.execution={e}", *sets]) for e in ("driver", "spark")}
    got = {}
    for e, c in cfg.items():
        group = f"select-{e}"
        spark.sparkContext.setJobGroup(group, "test_small")
        info = pipelines.train(spark, c, rcv1, tmp_path / e, split=None, exclude_fold=0)
        got[e] = (info["weights_hash"], _epoch_selection(tmp_path / e, timings=False),
                  len(spark.sparkContext.statusTracker().getJobIdsForGroup(group)))
    assert got["driver"][0] == got["spark"][0] and got["driver"][1] == got["spark"][1]
    sel = got["driver"][1]
    assert 1 <= sel["epochs"] <= sel["epochs_run"] <= 8 and sel["patience"] == 3 and sel["folds"] == 2
    assert sel["validation_documents"] > 100 and len(sel["validation_score"]) == sel["epochs_run"]
    assert got["driver"][2] == 0 and got["spark"][2] > 0


def test_epoch_selection_reads_no_test_labels(spark, rcv1, tmp_path):
    """Every test-fold label poisoned (each test document given another test document's labels)
    leaves the selected epochs, the validation curve and the weights unchanged."""
    import shutil

    import pyarrow as pa
    import pyarrow.parquet as pq

    poisoned = tmp_path / "poisoned"
    shutil.copytree(rcv1, poisoned)
    changed = 0
    for f in sorted((poisoned / "features").glob("part-*.parquet")):
        t = pq.read_table(f)
        test = np.flatnonzero(np.asarray(t.column("fold").to_pylist()) == 0)
        if test.size < 2:
            continue
        order = np.arange(t.num_rows)
        order[test] = np.roll(test, 1)  # a test row takes the labels of another test row
        cols = {n: t.column(n) for n in t.column_names}
        for n in ("labels", "label_ids"):
            cols[n] = t.column(n).take(pa.array(order))
        changed += int(sum(a != b for a, b in zip(t.column("labels").to_pylist(),
                                                  cols["labels"].to_pylist(), strict=True)))
        pq.write_table(pa.table(cols, schema=t.schema), f)
    assert changed > 300  # most of fold 0's 464 documents now carry wrong labels
    out = {}
    for name, feats in (("clean", rcv1), ("poisoned", poisoned)):
        cfg = load_config(overrides=["train.max_epochs=6", "train.patience=2", "train.validation_folds=2"])
        info = pipelines.train(spark, cfg, feats, tmp_path / f"model-{name}", split=None, exclude_fold=0)
        out[name] = (info["weights_hash"], _epoch_selection(tmp_path / f"model-{name}", timings=False))
    assert out["clean"] == out["poisoned"]


def test_c_auto_is_chosen_on_inner_folds_and_recorded(spark, rcv1, tmp_path):
    """``model.global.C = "auto"`` (the default): on a small training part (1,852 documents: 6
    inner folds of 10% hold out >= 1000) C is chosen from the grid with the epochs; the saved model
    carries the chosen number, its metadata the pooled scores of each C, and training with that C
    and those epochs fixed gives the same weights. One band (train.validation_folds = 1, as a large
    training part gets) keeps the grid's middle value without searching."""
    from sparkhc.epochs import AUTO_C_GRID
    from sparkhc.persistence import load_model

    # calibrate off: the score offsets of calibrate = auto (tests/spark/test_calibrate.py) would be
    # added to the auto model only, not to the one with C and the epochs fixed
    sets = ["train.execution=driver", "train.max_epochs=8", "train.patience=2", "train.shards=2",
            "train.calibrate=off"]
    info = pipelines.train(spark, load_config(overrides=sets), rcv1, tmp_path / "auto", split=None, exclude_fold=0)
    sel = _epoch_selection(tmp_path / "auto")
    assert sel["folds"] == 6 and sel["C_grid"] == list(AUTO_C_GRID) and len(sel["C_scores"]) == 3
    best = AUTO_C_GRID[int(np.argmax(sel["C_scores"]))]
    if best == 0.3:
        assert sel["C"] == 0.3 and sel["C_gain"] is None
    else:  # another C only when it beats 0.3 by more than the standard error over the folds
        mean, se = sel["C_gain"]
        assert sel["C"] == (best if mean > se else 0.3) and sel["C_default"] == 0.3
    model, _ = load_model(tmp_path / "auto")
    assert model.params["C"] == sel["C"]
    fixed = pipelines.train(spark, load_config(overrides=[*sets, f"model.global.C={sel['C']}",
                                                          f"train.epochs={sel['epochs']}"]),
                            rcv1, tmp_path / "fixed", split=None, exclude_fold=0)
    assert fixed["weights_hash"] == info["weights_hash"]
    one = pipelines.train(spark, load_config(overrides=[*sets, "train.validation_folds=1"]), rcv1, tmp_path / "one",
                          split=None, exclude_fold=0)
    mid = pipelines.train(spark, load_config(overrides=[*sets, "train.validation_folds=1", "model.global.C=0.3"]),
                          rcv1, tmp_path / "mid", split=None, exclude_fold=0)
    assert one["weights_hash"] == mid["weights_hash"] and "C" not in _epoch_selection(tmp_path / "one")
    assert "train.c_search = always" in _epoch_selection(tmp_path / "one")["C_search_skipped"]
    # train.c_search = always: the grid on the one band, the jackknife's standard error over its documents
    srch = pipelines.train(spark, load_config(overrides=[*sets, "train.validation_folds=1", "train.c_search=always"]),
                           rcv1, tmp_path / "srch", split=None, exclude_fold=0)
    sel1 = _epoch_selection(tmp_path / "srch")
    assert sel1["folds"] == 1 and sel1["C_grid"] == list(AUTO_C_GRID) and "C_search_skipped" not in sel1
    assert sel1["C_gain_se"] == "jackknife over the band's documents"
    best1 = AUTO_C_GRID[int(np.argmax(sel1["C_scores"]))]
    assert sel1["C"] == (0.3 if best1 == 0.3 or sel1["C_gain"][0] <= sel1["C_gain"][1] else best1)
    again = pipelines.train(spark, load_config(overrides=[*sets, f"model.global.C={sel1['C']}",
                                                          f"train.epochs={sel1['epochs']}"]),
                            rcv1, tmp_path / "again", split=None, exclude_fold=0)
    assert again["weights_hash"] == srch["weights_hash"]


@pytest.mark.parametrize("execution", ["driver", "spark"])
def test_refit_false_ships_the_selections_model(spark, rcv1, tmp_path, execution):
    """``train.refit = false`` with one validation band: the saved model is, array for array, a
    training of the chosen number of epochs on the training part less the band (computed here
    independently with the driver engine), no second training runs, and the metadata says so
    (documents = the training part less the band; ``epoch_selection.refit`` false)."""
    from sparkhc.features import Selection, read_features_local
    from sparkhc.persistence import load_model
    from sparkhc.spark.hashing import validation_ids
    from sparkhc.spark.mixing.settings import MixingSettings
    from sparkhc.spark.mixing.train import train_ipm

    sets = [f"train.execution={execution}", "train.epochs=0", "train.max_epochs=8", "train.patience=2",
            "train.shards=2", "train.validation_folds=1", "train.calibrate=off", "model.global.C=0.3"]
    cfg = load_config(overrides=[*sets, "train.refit=false"])
    info = pipelines.train(spark, cfg, rcv1, tmp_path / "m", split=None, exclude_fold=0)
    sel = _epoch_selection(tmp_path / "m")
    assert sel["refit"] is False and sel["folds"] == 1
    batch = read_features_local(str(rcv1), with_counts=False)[0]
    part = Selection(exclude_fold=0).subset(batch)
    fit = part.subset(np.flatnonzero(~validation_ids(part.doc_ids, 0.1, 0)))
    assert info["documents"] == len(fit) == len(part) - sel["validation_documents"]
    got, _ = load_model(tmp_path / "m")
    ref = type(got)(got.taxonomy, got.n_features, **got.params)  # as the selection builds its model
    train_ipm(spark, None, ref, MixingSettings.from_train(cfg.train, int(sel["epochs"])), rows=fit)
    for k, v in ref.get_state().arrays.items():
        np.testing.assert_array_equal(np.asarray(got.get_state().arrays[k]), np.asarray(v), err_msg=k)
    refit = pipelines.train(spark, load_config(overrides=sets), rcv1, tmp_path / "r", split=None, exclude_fold=0)
    assert refit["documents"] == len(part) and refit["weights_hash"] != info["weights_hash"]


def _ten_seconds_an_epoch(monkeypatch):
    """The budget's clock: 10 s for every selection epoch trained and scored, nothing else."""
    import sparkhc.epochs as ep

    clock = {"t": 0.0}
    monkeypatch.setattr(ep, "_monotonic", lambda: clock["t"])
    done = ep.TimeBudget.epoch_done

    def epoch_done(self):
        clock["t"] += 10.0
        done(self)

    monkeypatch.setattr(ep.TimeBudget, "epoch_done", epoch_done)


@pytest.mark.parametrize("execution,mixing", [("driver", "auto"), ("spark", "barrier"), ("spark", "jobs")])
def test_time_budget_ends_the_selection_and_keeps_the_band_model(spark, rcv1, tmp_path, monkeypatch, caplog,
                                                                 execution, mixing):
    """``train.time_budget``: on a clock where a selection epoch costs 10 s and nothing else costs
    anything, a budget of 55 s ends the selection after 5 epochs (driver engine: epoch 6 does not
    fit in the 5 s left; barrier mixing: a first stage of one epoch, then 4 in the 45 s left, then
    none; the jobs engine asks after every epoch, as the driver), the final training (> 5 s) does
    not fit, so the band's model is the model: the weights a
    selection capped at 5 epochs with ``train.refit = false`` gives. A budget that ends nothing gives
    the weights of no budget, and the default has none; a fixed number of
    epochs is trained in full whatever the budget, and the log says the budget does not apply."""
    _ten_seconds_an_epoch(monkeypatch)
    sets = [f"train.execution={execution}", f"train.mixing={mixing}", "train.max_epochs=8", "train.patience=0",
            "train.shards=2", "train.validation_folds=1", "train.calibrate=off", "model.global.C=0.3"]
    cut = pipelines.train(spark, load_config(overrides=[*sets, "train.time_budget=55"]), rcv1, tmp_path / "cut",
                          split=None, exclude_fold=0)
    sel = _epoch_selection(tmp_path / "cut")
    tb = sel["time_budget"]
    assert sel["epochs_run"] == 5 and tb["cut_selection"] and sel["refit"] is False and "refit_skipped" in tb
    assert tb["selection_epoch_seconds"] == 10.0
    assert tb["stages"] == ([[1, 10.0], [4, 40.0]] if mixing == "barrier" else [])
    capped = pipelines.train(spark, load_config(overrides=[*sets, "train.max_epochs=5", "train.refit=false"]), rcv1,
                             tmp_path / "capped", split=None, exclude_fold=0)
    assert cut["weights_hash"] == capped["weights_hash"]
    monkeypatch.undo()
    free = pipelines.train(spark, load_config(overrides=[*sets, "train.time_budget=100000"]), rcv1, tmp_path / "free",
                           split=None, exclude_fold=0)
    plain = pipelines.train(spark, load_config(overrides=[*sets, "train.time_budget=0"]), rcv1, tmp_path / "plain",
                            split=None, exclude_fold=0)
    assert free["weights_hash"] == plain["weights_hash"] != cut["weights_hash"]
    assert not _epoch_selection(tmp_path / "free")["time_budget"]["cut_selection"]
    assert "time_budget" not in _epoch_selection(tmp_path / "plain")
    # the default has no budget (no clock decides anything): the weights of time_budget = 0
    default = pipelines.train(spark, load_config(overrides=sets), rcv1, tmp_path / "default", split=None,
                              exclude_fold=0)
    assert default["weights_hash"] == plain["weights_hash"]
    assert "time_budget" not in _epoch_selection(tmp_path / "default")
    # a fixed number of epochs is trained in full whatever the budget (a millisecond: overrun by
    # the first epoch), and the log says the budget does not apply
    with caplog.at_level(logging.INFO, logger="sparkhc.spark.training"):
        fixed = pipelines.train(spark, load_config(overrides=[*sets, "train.epochs=3", "train.time_budget=0.001"]),
                                rcv1, tmp_path / "fixed", split=None, exclude_fold=0)
    assert "train.time_budget = 0.001 s bounds an epoch selection" in caplog.text
    assert "a fixed 3 epochs here, in full: the budget does not apply" in caplog.text
    unbudgeted = pipelines.train(spark, load_config(overrides=[*sets, "train.epochs=3", "train.time_budget=0"]), rcv1,
                                 tmp_path / "fixed0", split=None, exclude_fold=0)
    assert fixed["weights_hash"] == unbudgeted["weights_hash"]


def test_time_budget_with_several_bands_leaves_room_for_the_final_training(spark, rcv1, tmp_path, monkeypatch):
    """Two validation bands (their models are not kept): each band stops where its next epoch, the
    later band's training as long and the final training would not fit (hand-computed in
    tests/unit/test_time_budget.py: budget 120 s, 10 s an epoch: 3 and 4 epochs), and the final
    training on every document runs."""
    _ten_seconds_an_epoch(monkeypatch)
    sets = ["train.execution=driver", "train.max_epochs=8", "train.patience=0", "train.shards=2",
            "train.validation_folds=2", "train.calibrate=off", "model.global.C=0.3", "train.time_budget=120"]
    info = pipelines.train(spark, load_config(overrides=sets), rcv1, tmp_path / "m", split=None, exclude_fold=0)
    sel = _epoch_selection(tmp_path / "m")
    assert sel["fold_epochs_run"] == [3, 4] and sel["time_budget"]["cut_selection"]
    assert "refit_skipped" not in sel["time_budget"] and sel.get("refit") is None
    assert info["documents"] == 1852 and sel["epochs"] <= 4


def test_time_budget_never_decides_c_by_starving_a_candidate(spark, rcv1, tmp_path, monkeypatch):
    """A C search under a budget: 10 s an epoch, 160 s, one band, no stopping rule. Each candidate
    leaves room for the later ones as long as itself, so (hand-computed in
    tests/unit/test_time_budget.py's terms) C = 0.1 runs 5 epochs (a 6th would need 10 + 2 x 60 s
    of the 110 s left), C = 0.3 runs 5 (10 + 70 s of 60 s) and C = 1, last, 6. The candidates are
    compared on the 5 epochs all of them ran, and the record says so."""
    from sparkhc.epochs import AUTO_C_GRID, choose

    _ten_seconds_an_epoch(monkeypatch)
    sets = ["train.execution=driver", "train.max_epochs=8", "train.patience=0", "train.shards=2",
            "train.validation_folds=1", "train.c_search=always", "train.calibrate=off", "train.time_budget=160"]
    pipelines.train(spark, load_config(overrides=sets), rcv1, tmp_path / "m", split=None, exclude_fold=0)
    sel = _epoch_selection(tmp_path / "m")
    assert [len(c) for c in sel["C_curves"]] == [5, 5, 6] and sel["C_compared_epochs"] == 5
    assert sel["time_budget"]["cut_selection"]
    best = AUTO_C_GRID[choose([c[:5] for c in sel["C_curves"]])[0]]
    gain = sel["C_gain"]
    assert sel["C"] == (0.3 if best == 0.3 or gain[0] <= gain[1] else best)
    if sel["C"] == 1.0:
        assert sel["epochs"] == choose([sel["C_curves"][2]])[1]


def test_time_budget_skips_the_calibration_bands_that_do_not_fit(spark, rcv1, tmp_path, monkeypatch):
    """With one band of ~185 documents, ``train.calibration_documents = 5000`` would score 9 more
    bands (one training of the chosen epochs each, 10 s an epoch here) when the offsets pay: with
    15 s left that cannot fit, so the offsets are judged on the selection's band only, and the
    metadata says so."""
    _ten_seconds_an_epoch(monkeypatch)
    sets = ["train.execution=driver", "train.max_epochs=4", "train.patience=0", "train.shards=2",
            "train.validation_folds=1", "train.calibrate=auto", "model.global.C=0.3", "train.time_budget=55"]
    pipelines.train(spark, load_config(overrides=sets), rcv1, tmp_path / "m", split=None, exclude_fold=0)
    tb = _epoch_selection(tmp_path / "m")["time_budget"]
    assert tb["calibration_documents_skipped"].startswith("9 more validation band(s)") and not tb["cut_selection"]
    assert tb["elapsed_before_final_training"] == 40.0


def test_default_training_depends_on_no_clock(spark, rcv1, tmp_path, monkeypatch):
    """The default has no time budget (``train.time_budget = 0``): a training with an epoch
    selection, every other setting default but a small cap, gives byte-identical weights on a quiet
    machine and on a "slow" one: every read of the budget's clock 10 minutes later than the last,
    and two busy processes hogging both CPUs while it trains."""
    import subprocess
    import sys

    import sparkhc.epochs as ep

    sets = ["train.max_epochs=6", "train.patience=2", "model.global.C=0.3", "train.calibrate=off"]
    quiet = pipelines.train(spark, load_config(overrides=sets), rcv1, tmp_path / "quiet", split=None, exclude_fold=0)
    clock = {"t": 0.0}

    def slow() -> float:
        clock["t"] += 600.0
        return clock["t"]

    monkeypatch.setattr(ep, "_monotonic", slow)
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        busy = pipelines.train(spark, load_config(overrides=sets), rcv1, tmp_path / "busy", split=None,
                               exclude_fold=0)
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    assert busy["weights_hash"] == quiet["weights_hash"]
    assert "time_budget" not in _epoch_selection(tmp_path / "busy")
