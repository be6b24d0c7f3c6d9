"""Iterative parameter mixing: one partition equals serial training; several partitions equal the
mean of the shard results computed locally; checkpoints resume."""

from __future__ import annotations

import json
import math

import numpy as np
import pyarrow as pa
import pytest

from sparkhc.batch import SparseBatch
from sparkhc.models import get_model_class
from sparkhc.models.base import combine_states
from sparkhc.taxonomy import Taxonomy

FIG1 = [("ROOT", "A"), ("ROOT", "B"), ("A", "AA"), ("A", "AB"), ("B", "BA"), ("B", "BB"), ("B", "BC")]
V = 40


def _data(n: int = 120, seed: int = 3, v: int = V) -> tuple[Taxonomy, pa.Table]:
    rng = np.random.default_rng(seed)
    tax = Taxonomy.from_edges(FIG1)
    leaves = [tax.names[c] for c in tax.leaves]
    rows = []
    for i in range(n):
        labs = sorted(set(rng.choice(leaves, size=rng.integers(1, 3), replace=True).tolist()))
        # label-dependent words so the problem is learnable
        words = set(rng.choice(v, size=6, replace=False).tolist())
        for lab in labs:
            words.add(leaves.index(lab) * 3)
        idx = np.array(sorted(words), dtype=np.int32)
        val = rng.random(len(idx)).astype(np.float32) + 0.1
        val /= np.linalg.norm(val)
        rows.append((f"d{i:04d}", labs, idx.tolist(), val.tolist()))
    table = pa.table(
        {
            "doc_id": [r[0] for r in rows],
            "labels": [r[1] for r in rows],
            "indices": pa.array([r[2] for r in rows], type=pa.list_(pa.int32())),
            "values": pa.array([r[3] for r in rows], type=pa.list_(pa.float32())),
            "split": ["train"] * n,
            "fold": pa.array([i % 5 for i in range(n)], type=pa.int32()),
        }
    )
    return tax, table


def _model(tax: Taxonomy, name: str = "global", v: int = V, **params):
    m = get_model_class(name)(tax, v, **params)
    m.set_state(m.init_state())
    return m


@pytest.mark.parametrize("mixing", ["barrier", "jobs"])
@pytest.mark.parametrize("name,params", [("global", {"branching": True}), ("tree", {"data": "sib"}), ("flat", {}),
                                         ("global", {"branching": True, "average": True})])
def test_one_partition_equals_serial(spark, name, params, mixing):
    from sparkhc.spark.mixing.train import train_ipm

    tax, table = _data()
    df = spark.createDataFrame(table.to_pandas())
    m_spark = train_ipm(spark, df, _model(tax, name, **params), epochs=3, shards=1, seed=7, mixing=mixing)
    # serial reference: the shard is sorted by doc id; shard 0's seed is the base seed
    batch = SparseBatch.from_arrow(table.sort_by("doc_id"), V)
    m_serial = _model(tax, name, **params)
    for e in range(3):
        m_serial.partial_fit(batch, seed=7, epoch=e)
    for k, v in m_serial.get_state().arrays.items():
        np.testing.assert_array_equal(m_spark.get_state().arrays[k], v, err_msg=k)
    assert m_spark.get_state().arrays.keys() == m_serial.get_state().arrays.keys()


@pytest.mark.parametrize("params", [{"branching": True}, {"branching": True, "average": True}])
def test_several_partitions_equal_mean_of_local_shards(spark, params):
    from sparkhc.spark.mixing.jobs import run_epoch, shard_features

    tax, table = _data()
    df = spark.createDataFrame(table.to_pandas())
    shards_df = shard_features(df, 3)
    # what each partition holds, in order
    parts = shards_df.rdd.glom().map(lambda rows: [r["doc_id"] for r in rows]).collect()
    assert sum(len(p) for p in parts) == table.num_rows and all(p == sorted(p) for p in parts)
    start = _model(tax, "global", **params)
    # one warm-up epoch so the epoch starts from non-zero weights
    full = SparseBatch.from_arrow(table, V)
    start.partial_fit(full, seed=1, epoch=0)
    w0 = start.get_state().copy()
    mixed, counters = run_epoch(spark, shards_df, start, seed=11, epoch=1)
    local_states = []
    ids = np.array(table.column("doc_id").to_pylist())
    for shard, doc_ids in enumerate(parts):
        if not doc_ids:
            continue
        rows = np.flatnonzero(np.isin(ids, doc_ids))
        sub = SparseBatch.from_arrow(table.take(pa.array(rows)).sort_by("doc_id"), V)
        m = _model(tax, "global", **params)
        m.set_state(w0.copy())
        c = m.partial_fit(sub, seed=11 + 1000003 * shard, epoch=1)
        st = m.get_state()
        st.counters = c
        local_states.append(st)
    ref = combine_states(local_states)
    for k, v in ref.arrays.items():
        np.testing.assert_allclose(mixed.arrays[k], v, rtol=0, atol=1e-7, err_msg=k)
    assert counters["examples"] == table.num_rows
    assert counters["shards"] == len([p for p in parts if p])


def test_checkpoint_resume_gives_same_model(spark, tmp_path):
    from sparkhc.spark.mixing.train import train_ipm

    tax, table = _data(80)
    df = spark.createDataFrame(table.to_pandas())
    ref = train_ipm(spark, df, _model(tax), epochs=3, shards=2, seed=5)
    ckpt = tmp_path / "ckpt"

    class Boom(RuntimeError):
        pass

    def stop_after_two(info):
        if info["epoch"] == 2:
            raise Boom()

    with pytest.raises(Boom):
        train_ipm(spark, df, _model(tax), epochs=3, shards=2, seed=5, checkpoint_dir=ckpt, progress=stop_after_two)
    # the progress hook runs before the checkpoint of epoch 2: resume from epoch 1's
    resumed = train_ipm(spark, df, _model(tax), epochs=3, shards=2, seed=5, checkpoint_dir=ckpt)
    for k, v in ref.get_state().arrays.items():
        np.testing.assert_array_equal(resumed.get_state().arrays[k], v, err_msg=k)


@pytest.mark.parametrize("mixing", ["jobs", "barrier"])
def test_checkpoint_of_a_longer_run_is_not_resumed(spark, tmp_path, mixing):
    """A checkpoint left by a longer run of the same configuration (5 epochs, stopped) holds more
    epochs than a 3-epoch rerun asks for: the rerun starts from scratch (it used to return the
    longer run's state unchanged) and equals a fresh 3-epoch training, on the driver's resume and
    on the barrier tasks' alike."""
    from sparkhc.spark.mixing.train import train_ipm

    tax, table = _data(80)
    df = spark.createDataFrame(table.to_pandas())
    ref = train_ipm(spark, df, _model(tax), epochs=3, shards=2, seed=5, mixing=mixing)
    ckpt = tmp_path / "ckpt"

    class Boom(RuntimeError):
        pass

    def stop_late(info):
        if info["epoch"] == 5:
            raise Boom()

    with pytest.raises(Boom):
        train_ipm(spark, df, _model(tax), epochs=6, shards=2, seed=5, checkpoint_dir=ckpt, progress=stop_late,
                  mixing=mixing)
    assert json.loads((ckpt / "latest" / "checkpoint.json").read_text())["epoch"] >= 3
    again = train_ipm(spark, df, _model(tax), epochs=3, shards=2, seed=5, checkpoint_dir=ckpt, mixing=mixing)
    for k, v in ref.get_state().arrays.items():
        np.testing.assert_array_equal(again.get_state().arrays[k], v, err_msg=k)


def test_mixing_is_a_no_op_on_identical_states():
    tax, table = _data(20)
    m = _model(tax, "global", branching=True)
    m.partial_fit(SparseBatch.from_arrow(table, V), seed=0, epoch=0)
    st = m.get_state()
    mixed = combine_states([st.copy(), st.copy(), st.copy()])
    for k, v in st.arrays.items():
        np.testing.assert_array_equal(mixed.arrays[k], v)


@pytest.mark.parametrize("shards,average", [(2, False), (5, False), (5, True)])
def test_barrier_mixing_equals_one_job_per_epoch(spark, shards, average, tmp_path):
    """Every epoch in one barrier stage (5 shards on the 2 task slots of local[2]: tasks run
    several shards each) gives the mixture of one Spark job per epoch, whose epochs the test
    above checks against shard results computed locally; counters and epoch records agree."""
    from sparkhc.spark.mixing.engine import RUN_FIGURES
    from sparkhc.spark.mixing.train import mixing_mode, train_ipm

    tax, table = _data()
    df = spark.createDataFrame(table.to_pandas())
    params = {"branching": True, "update": "cost_augmented", "bias": 0.3, "average": average}
    logs: dict[str, list] = {"jobs": [], "barrier": []}
    out = {}
    for mode in ("jobs", "barrier"):
        m = _model(tax, "global", **params)
        assert mixing_mode(spark, mode, m) == mode
        out[mode] = train_ipm(spark, df, m, epochs=3, shards=shards, seed=4, mixing=mode,
                              progress=logs[mode].append, exchange_dir=tmp_path / "x")
    for k, v in out["jobs"].get_state().arrays.items():
        np.testing.assert_allclose(out["barrier"].get_state().arrays[k], v, rtol=0, atol=1e-6, err_msg=k)
    strip = [[{k: v for k, v in e.items() if k not in (*RUN_FIGURES, "mean_loss")} for e in logs[m]] for m in logs]
    assert strip[0] == strip[1] and len(strip[0]) == 3 and strip[0][0]["shards"] == shards
    assert logs["jobs"][0]["mean_loss"] == pytest.approx(logs["barrier"][0]["mean_loss"], rel=1e-9)
    assert list((tmp_path / "x").iterdir()) == []  # the exchange files are removed


def test_auto_mixing_falls_back_to_jobs_for_summed_states(spark):
    from sparkhc.spark.mixing.train import mixing_mode

    tax, _ = _data(10)
    assert mixing_mode(spark, "auto", _model(tax, "global")) == "barrier"  # local mode
    fmm = get_model_class("fmm")(tax, V)
    fmm.set_state(fmm.init_state())
    assert mixing_mode(spark, "auto", fmm) == "jobs"


def test_label_combinations_and_self_leaves(spark):
    """The distinct sorted label lists (order within a list, duplicates, an empty and a null list
    counted once, several partitions), and the internal labels that are some document's deepest
    label (the /_self leaves): expected values written out by hand."""
    from sparkhc.features import self_leaf_labels
    from sparkhc.spark.pipelines import label_combinations

    rows = [("d1", ["BB", "AA"]), ("d2", ["AA", "BB"]), ("d3", ["B"]), ("d4", []), ("d5", None),
            ("d6", ["A", "AB"]), ("d7", ["BB", "AA"]), ("d8", ["B", "A"])]
    df = spark.createDataFrame(rows, "doc_id string, labels array<string>").repartition(3)
    got = label_combinations(df)
    assert got == [[], ["A", "AB"], ["A", "B"], ["AA", "BB"], ["B"]]
    tax = Taxonomy.from_edges(FIG1)
    # B alone stops at an internal node; {A, AB}: AB is deeper; {A, B}: both internal and deepest
    assert self_leaf_labels(got, tax) == ["A", "B"]
    assert label_combinations(df.limit(0)) == []


def test_auto_shards_are_the_task_slots(spark):
    from sparkhc.spark.mixing.settings import resolve_shards

    assert resolve_shards(spark, 0) == spark.sparkContext.defaultParallelism == 2  # local[2]
    assert resolve_shards(spark, 7) == 7
    with pytest.raises(ValueError):
        resolve_shards(spark, -1)


def _serial_curves(tax, fit, val, params, epochs, seed):
    """hF and LB macro-F1 on ``val`` after every epoch of serial training on ``fit`` (computed here)."""
    from sparkhc.batch import label_matrix
    from sparkhc.metrics import MetricCounts

    m = _model(tax, "global", **params)
    hf, maf = [], []
    for e in range(epochs):
        m.partial_fit(fit, seed=seed, epoch=e)
        counts = MetricCounts(tax)
        counts.add(label_matrix(val.labels, tax), label_matrix(m.predict(val), tax))
        r = counts.compute()
        hf.append(r["hF"])
        maf.append(r["LBMaF"])
    return hf, maf


@pytest.mark.parametrize("mixing", ["jobs", "barrier", "driver"])
def test_select_epochs_scores_every_epoch_on_the_held_out_training_documents(spark, mixing, tmp_path):
    """The curves equal hF and macro-F1 computed locally, after every epoch, on the held-out
    documents of a model trained serially (one shard) on the others; the choice is the first
    maximum of hF + macro-F1; the held-out documents are a seeded share of the documents given (the
    training part), the same every run, and the same in the driver (rows read there) as on Spark."""
    from sparkhc.spark.hashing import validation_ids
    from sparkhc.spark.mixing.selection import select_epochs, validation_split
    from sparkhc.spark.mixing.settings import MixingSettings

    tax, table = _data(n=160, seed=5)
    df = spark.createDataFrame(table.to_pandas())
    params = {"branching": True, "update": "cost_augmented", "bias": 0.3}
    rows = SparseBatch.from_arrow(table, V) if mixing == "driver" else None
    got = select_epochs(spark, None if rows is not None else df, _model(tax, "global", **params),
                        MixingSettings(5, shards=1, seed=2, mixing="auto" if rows is not None else mixing,
                                       exchange_dir=tmp_path / "x"), fraction=0.25, rows=rows)
    fit_df, val_df = validation_split(df, 0.25, seed=2)
    val_ids = sorted(r["doc_id"] for r in val_df.select("doc_id").collect())
    fit_ids = sorted(r["doc_id"] for r in fit_df.select("doc_id").collect())
    assert sorted(val_ids + fit_ids) == sorted(table.column("doc_id").to_pylist())
    assert 0.1 < len(val_ids) / table.num_rows < 0.4 and got["validation_documents"] == len(val_ids)
    assert val_ids == sorted(r["doc_id"] for r in validation_split(df, 0.25, seed=2)[1].select("doc_id").collect())
    assert val_ids != sorted(r["doc_id"] for r in validation_split(df, 0.25, seed=3)[1].select("doc_id").collect())
    ids = np.array(table.column("doc_id").to_pylist())
    assert sorted(ids[validation_ids(ids, 0.25, 2)].tolist()) == val_ids  # the driver's slice is Spark's
    fit = SparseBatch.from_arrow(table.take(pa.array(np.flatnonzero(np.isin(ids, fit_ids)))).sort_by("doc_id"), V)
    val = SparseBatch.from_arrow(table.take(pa.array(np.flatnonzero(np.isin(ids, val_ids)))).sort_by("doc_id"), V)
    hf, maf = _serial_curves(tax, fit, val, params, 5, seed=2)
    assert got["validation_hF"] == pytest.approx(hf, abs=1e-12)
    assert got["validation_macro_F1"] == pytest.approx(maf, abs=1e-12)
    score = [a + b for a, b in zip(hf, maf, strict=True)]
    assert got["validation_score"] == pytest.approx(score, abs=1e-12)
    smoothed = [float(np.mean(score[max(0, e - 2): e + 1])) for e in range(5)]  # trailing mean of 3 epochs
    assert got["smoothed_score"] == pytest.approx(smoothed, abs=1e-12) and got["window"] == 3
    assert got["epochs"] == int(np.argmax(got["smoothed_score"])) + 1
    assert got["fraction"] == 0.25 and got["criterion"] == "hF+LBMaF" and got["epochs_run"] == 5


@pytest.mark.parametrize("mixing", ["jobs", "barrier", "driver"])
def test_select_epochs_stops_after_patience_epochs_without_a_better_score(spark, mixing, tmp_path):
    """With patience p the validation curve is the full curve's prefix that ends max(p, ceil(0.5 x
    best)) epochs after its running best (computed from the full curve here), and the choice is that
    prefix's first best."""
    from sparkhc.spark.mixing.selection import select_epochs
    from sparkhc.spark.mixing.settings import MixingSettings

    tax, table = _data(n=160, seed=5)
    df = spark.createDataFrame(table.to_pandas())
    params = {"branching": True, "update": "cost_augmented", "bias": 0.3}
    rows = SparseBatch.from_arrow(table, V) if mixing == "driver" else None

    def run(patience):
        return select_epochs(spark, None if rows is not None else df, _model(tax, "global", **params),
                             MixingSettings(12, shards=2, seed=4, mixing="auto" if rows is not None else mixing,
                                            exchange_dir=tmp_path / "x"), fraction=0.25, patience=patience, rows=rows)

    full = run(0)["smoothed_score"]  # the trailing means the rule compares
    assert len(full) == 12
    for p in (1, 2, 3):
        best, stop = 0, len(full)
        for e in range(len(full)):
            if full[e] > full[best]:
                best = e
            if e - best >= max(p, math.ceil(0.5 * (best + 1))):
                stop = e + 1
                break
        got = run(p)
        assert got["smoothed_score"] == full[:stop] and got["epochs_run"] == stop
        assert got["epochs"] == int(np.argmax(full[:stop])) + 1 and got["patience"] == p
        wait = max(p, math.ceil(0.5 * got["epochs"]))
        assert got["stopped_early"] == (stop < len(full) or len(full) - got["epochs"] >= wait)
        assert got["patience_growth"] == 0.5


@pytest.mark.parametrize("mixing", ["jobs", "barrier", "driver"])
@pytest.mark.parametrize("average", [False, True])
def test_select_epochs_keeps_the_chosen_epochs_model(spark, mixing, average, tmp_path):
    """With one band, the state the selection keeps (band_states) is, array for array, the model a
    training of the chosen number of epochs on the band's other documents gives: what the
    calibration scores the band with instead of training it again. Stopped early (patience 2,
    barrier stages of 2 epochs) so the kept epoch is not the last one run."""
    from sparkhc.spark.hashing import validation_ids
    from sparkhc.spark.mixing.selection import select_epochs
    from sparkhc.spark.mixing.settings import MixingSettings
    from sparkhc.spark.mixing.train import train_ipm

    tax, table = _data(n=160, seed=5)
    df = spark.createDataFrame(table.to_pandas())
    params = {"branching": True, "update": "cost_augmented", "bias": 0.3, "average": average}
    rows = SparseBatch.from_arrow(table, V) if mixing == "driver" else None
    settings = MixingSettings(12, shards=2, seed=4, mixing="auto" if rows is not None else mixing,
                              exchange_dir=tmp_path / "x")
    kept: list = []
    got = select_epochs(spark, None if rows is not None else df, _model(tax, "global", **params), settings,
                        fraction=0.25, patience=2, rows=rows, band_states=kept)
    assert len(kept) == 1 and got["epochs"] < got["epochs_run"]
    ids = np.array(table.column("doc_id").to_pylist())
    fit = SparseBatch.from_arrow(table, V).subset(np.flatnonzero(~validation_ids(ids, 0.25, 4)))
    ref = train_ipm(spark, None, _model(tax, "global", **params),
                    MixingSettings(got["epochs"], shards=2, seed=4), rows=fit).get_state()
    assert sorted(kept[0].arrays) == sorted(ref.arrays)
    for k, v in ref.arrays.items():
        np.testing.assert_array_equal(np.asarray(kept[0].arrays[k]), np.asarray(v), err_msg=k)
    more: list = []  # two bands: no state is known without more training
    select_epochs(spark, None if rows is not None else df, _model(tax, "global", **params), settings,
                  fraction=0.25, patience=2, rows=rows, folds=2, band_states=more)
    assert more == []


def test_select_epochs_says_when_the_cap_cut_the_curve(spark, caplog):
    """A selection that reaches ``train.max_epochs`` before its stopping rule ends it says so (a
    warning naming the setting; ``reached_max_epochs`` in the record); one stopped by its rule, or
    run with patience 0 (every epoch to the cap, as asked), does not."""
    from sparkhc.spark.mixing.selection import select_epochs
    from sparkhc.spark.mixing.settings import MixingSettings

    tax, table = _data(n=160, seed=5)
    rows = SparseBatch.from_arrow(table, V)

    def run(cap: int, patience: int) -> dict:
        caplog.clear()
        with caplog.at_level("WARNING", logger="sparkhc.spark.mixing.selection"):
            return select_epochs(spark, None, _model(tax, "global", branching=True), MixingSettings(cap, shards=2, seed=4),
                                 fraction=0.25, patience=patience, rows=rows)

    cut = run(3, 10)  # 3 epochs, a wait of 10: the cap ends it
    assert cut["reached_max_epochs"] and cut["epochs_run"] == 3 and not cut["stopped_early"]
    assert "raise train.max_epochs" in caplog.text and "max_epochs = 3" in caplog.text
    free = run(40, 1)
    assert free["stopped_early"] and not free["reached_max_epochs"] and "max_epochs" not in caplog.text
    every = run(3, 0)
    assert not every["reached_max_epochs"] and "max_epochs" not in caplog.text


def test_select_epochs_logs_the_epochs_ahead(spark, caplog):
    """Each scored epoch's line says the best so far and the fewest epochs the selection still runs
    (:meth:`EarlyStopping.least_more`): patience 10 and a cap of 12, so after epoch 1 (best 1, wait 10)
    at least 10 more, and never past the cap; two bands: the first band's lines count the second
    band's training; the stopping epoch's line says why instead."""
    import re

    from sparkhc.spark.mixing.selection import select_epochs
    from sparkhc.spark.mixing.settings import MixingSettings

    tax, table = _data(n=160, seed=5)
    rows = SparseBatch.from_arrow(table, V)
    with caplog.at_level("DEBUG", logger="sparkhc.spark.mixing.selection"):
        out = select_epochs(spark, None, _model(tax, "global", branching=True), MixingSettings(12, shards=2, seed=4),
                            fraction=0.25, patience=10, rows=rows, folds=2)
    lines = [r.getMessage() for r in caplog.records if "validation hF" in r.getMessage()]
    first = [x for x in lines if "fold 1/2" in x]
    assert re.search(r"fold 1/2, epoch 1, .*; best 1, at least 10 more epochs \(~\d+ s at [0-9.]+ s an epoch\), "
                     r"then 1 more validation training$", first[0]), first[0]
    for x in lines:  # never more than the cap allows
        m = re.search(r"epoch (\d+), .*at least (\d+) more", x)
        if m:
            assert int(m.group(1)) + int(m.group(2)) <= 12, x
    second = [x for x in lines if "fold 2/2" in x]
    assert "then" not in second[0] and out["epochs_run"] <= 12


@pytest.mark.parametrize("grid,default,mixing", [((0.001, 1.0), 0.001, "driver"), ((0.3, 0.0003), 0.3, "driver"),
                                                 ((0.001, 1.0), 0.001, "barrier")])
def test_select_epochs_searches_c_on_one_band_with_the_jackknife(spark, grid, default, mixing, tmp_path):
    """``C = "auto"`` with ``train.c_search = always`` on one band: the grid is searched there, and
    another C than the default is taken only when its gain exceeds the jackknife's standard error
    over the band's documents. A default of C = 0.001 learns far too slowly (the other C wins
    beyond the noise); a default of 0.3 against 0.0003 stays. The state kept for the calibration
    and ``refit = false`` is the chosen candidate's: equal, array for array, to an independent
    training of that C for the chosen epochs on the band's other documents."""
    from sparkhc.spark.hashing import validation_ids
    from sparkhc.spark.mixing.selection import select_epochs
    from sparkhc.spark.mixing.settings import MixingSettings
    from sparkhc.spark.mixing.train import train_ipm

    tax, table = _data(n=160, seed=5)
    rows = SparseBatch.from_arrow(table, V)
    params = {"branching": True, "update": "cost_augmented", "bias": 0.3}
    kept: list = []
    on_spark = mixing != "driver"  # the Spark path: the rows as a DataFrame, barrier mixing
    settings = MixingSettings(12, shards=2, seed=4, mixing=mixing if on_spark else "auto", exchange_dir=tmp_path / "x")
    got = select_epochs(spark, spark.createDataFrame(table.to_pandas()) if on_spark else None,
                        _model(tax, "global", **params), settings, fraction=0.25, patience=2,
                        rows=None if on_spark else rows, c_grid=grid, c_default=default, band_states=kept)
    assert got["C_grid"] == list(grid) and got["C_gain_se"] == "jackknife over the band's documents"
    other = grid[1] if grid[0] == default else grid[0]
    if default == 0.001:
        assert got["C"] == other
        assert got["C_gain"][0] > got["C_gain"][1] > 0  # beyond the noise, and the noise is measured
    else:
        assert got["C"] == default
        assert got["C_gain"] is None or got["C_gain"][0] <= got["C_gain"][1]
    assert len(kept) == 1
    ids = np.array(table.column("doc_id").to_pylist())
    fit = rows.subset(np.flatnonzero(~validation_ids(ids, 0.25, 4)))
    ref = train_ipm(spark, None, _model(tax, "global", **{**params, "C": got["C"]}),
                    MixingSettings(got["epochs"], shards=2, seed=4), rows=fit).get_state()
    for k, v in ref.arrays.items():
        np.testing.assert_array_equal(np.asarray(kept[0].arrays[k]), np.asarray(v), err_msg=k)


@pytest.mark.parametrize("average", [False, True])
def test_jobs_mode_delta_broadcasts_equal_full_broadcasts(spark, average):
    """The jobs mode ships each epoch's base as a row-sparse delta of the previous one
    (BaseChain): the weights are bit-identical to broadcasting the full state every epoch (what
    run_epoch does without a chain), and after the first epoch the broadcast is smaller (5,000
    features, 6 words per document: an epoch changes a few hundred rows of W)."""
    from sparkhc.persistence import state_to_bytes
    from sparkhc.spark.mixing.jobs import run_epoch, shard_features
    from sparkhc.spark.mixing.train import train_ipm

    tax, table = _data(v=5000)
    df = spark.createDataFrame(table.to_pandas())
    params = {"branching": True, "update": "cost_augmented", "bias": 0.3, "average": average, "v": 5000}
    log: list[dict] = []
    chained = train_ipm(spark, df, _model(tax, "global", **params), epochs=4, shards=3, seed=2, mixing="jobs",
                        progress=log.append)
    ref = _model(tax, "global", **params)
    shards_df = shard_features(df, 3)
    full_sizes = []
    for e in range(4):
        full_sizes.append(len(state_to_bytes(ref.get_state())))
        mixed, _ = run_epoch(spark, shards_df, ref, seed=2, epoch=e)
        ref.set_state(mixed)
    for k, v in ref.get_state().arrays.items():
        np.testing.assert_array_equal(chained.get_state().arrays[k], v, err_msg=k)
    assert chained.get_state().counters == ref.get_state().counters
    assert "broadcast_bytes" not in chained.get_state().counters
    sent = [e["broadcast_bytes"] for e in log]
    assert sent[0] == full_sizes[0]
    assert all(0 < s < full_sizes[i] for i, s in enumerate(sent[1:], 1)), (sent, full_sizes)
    assert all(e["result_bytes"] > 0 for e in log)


class _FakeBroadcast:
    def __init__(self, value: bytes) -> None:
        self.value = value

    def unpersist(self) -> None:
        self.value = None


class _FakeContext:
    def broadcast(self, value: bytes) -> _FakeBroadcast:
        return _FakeBroadcast(value)


def test_task_base_rebuilds_the_chain_with_or_without_the_worker_cache():
    """A worker that built epoch e's base applies only the new patch; a fresh worker applies the
    whole chain; both give the driver's state bit for bit; a chain whose patches would pass
    max_patches times the state restarts from a full state."""
    from sparkhc.spark.mixing import jobs

    tax, table = _data(60, v=5000)
    batch = SparseBatch.from_arrow(table, 5000)
    m = _model(tax, "global", v=5000, branching=True, average=True)
    chain = jobs.BaseChain(_FakeContext())
    chain.start(m.get_state())
    states = [m.get_state().copy()]
    for e in range(3):
        m.partial_fit(batch.subset(np.arange(e, len(batch), 3)), seed=e, epoch=e)
        chain.advance(states[-1], m.get_state())
        states.append(m.get_state().copy())
        assert len(chain.links) == e + 2  # still patches: each is far smaller than the state
    jobs._BASE_CACHE.clear()
    for n in range(1, 5):  # a worker that follows the epochs: the cache advances one link at a time
        got = jobs._task_base(chain.token, chain.links[:n])
        for k, v in states[n - 1].arrays.items():
            np.testing.assert_array_equal(got.arrays[k], v, err_msg=f"{k} after {n} links")
    jobs._BASE_CACHE.clear()  # a fresh worker: full state plus every delta
    fresh = jobs._task_base(chain.token, chain.links)
    for k, v in states[-1].arrays.items():
        np.testing.assert_array_equal(fresh.arrays[k], v, err_msg=k)
    assert fresh.counters == states[-1].counters
    chain.max_patches = 0.0  # the patches would pass the bound: the next epoch restarts from a full state
    token = chain.token
    m.partial_fit(batch, seed=9, epoch=3)
    chain.advance(states[-1], m.get_state())
    assert len(chain.links) == 1 and chain.token != token
    again = jobs._task_base(chain.token, chain.links)
    for k, v in m.get_state().arrays.items():
        np.testing.assert_array_equal(again.arrays[k], v, err_msg=k)
    jobs._BASE_CACHE.clear()


def test_barrier_stages_of_stop_chunk_epochs_stop_after_the_callback_asks(spark, tmp_path):
    """Barrier mixing with ``stop_chunk=3`` and a callback that asks to stop after epoch 4 runs two
    stages (epochs 1-3, 4-6) and no more: 6 epoch records, the states of epochs 1-4 scored equal to
    those of one 12-epoch stage, and the model holds the 6-epoch state of a single stage. A stage
    reports every epoch it trained (``progress``) before the first of its states is scored (the
    epoch selection's log paces its outlook by the epochs trained)."""
    from sparkhc.spark.mixing.train import train_ipm

    tax, table = _data(n=120, seed=7)
    df = spark.createDataFrame(table.to_pandas())
    params = {"branching": True, "update": "cost_augmented", "bias": 0.3}
    full: list = []
    train_ipm(spark, df, _model(tax, "global", **params), epochs=12, shards=2, seed=1, mixing="barrier",
              exchange_dir=tmp_path / "a", on_epoch_state=lambda e, s: full.append(s.copy()))
    six = _model(tax, "global", **params)
    train_ipm(spark, df, six, epochs=6, shards=2, seed=1, mixing="barrier", exchange_dir=tmp_path / "b")
    seen, records, events = [], [], []
    m = _model(tax, "global", **params)

    def cb(e, s):
        seen.append(s.copy())
        events.append("scored")
        return e == 3  # stop after epoch 4

    def progress(info):
        records.append(info)
        events.append("trained")

    train_ipm(spark, df, m, epochs=12, shards=2, seed=1, mixing="barrier", exchange_dir=tmp_path / "c",
              on_epoch_state=cb, stop_chunk=3, progress=progress)
    assert len(seen) == 4 and len(records) == 6
    assert events == ["trained"] * 3 + ["scored"] * 3 + ["trained"] * 3 + ["scored"]
    for got, want in zip(seen, full, strict=False):
        assert all(np.array_equal(got.arrays[k], want.arrays[k]) for k in want.arrays)
    assert all(np.array_equal(m.get_state().arrays[k], six.get_state().arrays[k]) for k in six.get_state().arrays)


@pytest.mark.parametrize("mixing", ["jobs", "driver"])
def test_select_epochs_pools_inner_folds_and_chooses_c(spark, mixing, tmp_path):
    """Two inner folds (disjoint hash bands of the training part) and a grid of two C values: each
    (C, fold) curve equals serial training on the other documents scored on the band; a fold stops
    after its own wait (patience 2, growth 0.5) and then keeps contributing its last epoch's counts;
    the pooled curve is hF + macro-F1 of the summed count tables; the choice is the (C, epochs) of
    the highest 3-epoch trailing mean, the earlier C on ties; driver and Spark paths agree."""
    import copy

    from sparkhc.batch import label_matrix
    from sparkhc.metrics import MetricCounts
    from sparkhc.spark.hashing import validation_ids
    from sparkhc.spark.mixing.selection import select_epochs, validation_split
    from sparkhc.spark.mixing.settings import MixingSettings

    tax, table = _data(n=200, seed=7)
    df = spark.createDataFrame(table.to_pandas())
    params = {"branching": True, "update": "cost_augmented", "bias": 0.3, "C": 0.3}
    rows = SparseBatch.from_arrow(table, V) if mixing == "driver" else None
    got = select_epochs(spark, None if rows is not None else df, _model(tax, "global", **params),
                        MixingSettings(8, shards=1, seed=1, mixing="auto" if rows is not None else mixing,
                                       exchange_dir=tmp_path / "x"), fraction=0.2, patience=2, rows=rows, folds=2,
                        c_grid=(0.05, 1.0))
    ids = np.array(table.column("doc_id").to_pylist())
    bands = [validation_ids(ids, 0.2, 1, band=b) for b in (0, 1)]
    assert not (bands[0] & bands[1]).any() and bands[0].any() and bands[1].any()
    spark_band1 = sorted(r["doc_id"] for r in validation_split(df, 0.2, 1, band=1)[1].select("doc_id").collect())
    assert sorted(ids[bands[1]].tolist()) == spark_band1
    assert got["validation_documents"] == int(bands[0].sum() + bands[1].sum()) and got["folds"] == 2

    def take(mask):
        return SparseBatch.from_arrow(table.take(pa.array(np.flatnonzero(mask))).sort_by("doc_id"), V)

    pooled_scores, best = [], None
    for c in (0.05, 1.0):
        per_fold = []
        for held in bands:
            fit, val = take(~held), take(held)
            m = _model(tax, "global", **{**params, "C": c})
            counts, full = [], []
            for e in range(8):
                m.partial_fit(fit, seed=1, epoch=e)
                mc = MetricCounts(tax)
                mc.add(label_matrix(val.labels, tax), label_matrix(m.predict(val), tax))
                counts.append(mc)
                r = mc.compute()
                full.append(r["hF"] + r["LBMaF"])
            # the fold's own stop: trailing mean of 3, wait max(2, ceil(0.5 best))
            sm = [float(np.mean(full[max(0, e - 2): e + 1])) for e in range(8)]
            b, stop = 0, 8
            for e in range(8):
                if sm[e] > sm[b]:
                    b = e
                if e - b >= max(2, math.ceil(0.5 * (b + 1))):
                    stop = e + 1
                    break
            per_fold.append(counts[:stop])
        length = max(len(f) for f in per_fold)
        curve = []
        for t in range(length):
            tot = None
            for f in per_fold:
                mc = copy.deepcopy(f[min(t, len(f) - 1)])
                tot = mc if tot is None else tot.merge(mc)
            r = tot.compute()
            curve.append(r["hF"] + r["LBMaF"])
        pooled_scores.append(curve)
        sm = [float(np.mean(curve[max(0, e - 2): e + 1])) for e in range(len(curve))]
        ep = int(np.argmax(sm)) + 1
        if best is None or sm[ep - 1] > best[2]:
            best = (c, ep, sm[ep - 1])
    assert got["C"] == best[0] and got["epochs"] == best[1]
    assert got["C_scores"] == pytest.approx([max(float(np.mean(s[max(0, e - 2): e + 1])) for e in range(len(s)))
                                             for s in pooled_scores], abs=1e-12)
    assert got["validation_score"] == pytest.approx(pooled_scores[(0.05, 1.0).index(best[0])], abs=1e-12)


@pytest.mark.parametrize("mixing", ["driver", "barrier", "jobs"])
@pytest.mark.parametrize("name,params", [("global", {"branching": True}), ("tree", {"data": "sib"})])
def test_step_scale_shards_caps_each_shard_by_c_times_shards(spark, mixing, name, params):
    """``step_scale = "shards"`` (CoCoA+'s adding): every engine trains K shards with each shard's
    steps capped by C x K, so its weights are those of ``step_scale = "one"`` with C x K (the
    shards' scratch models are the only place the factor enters); the mixed model is not the
    plain one's, and one shard is serial training either way."""
    from sparkhc.spark.mixing.train import train_ipm

    tax, table = _data()
    df = spark.createDataFrame(table.to_pandas())
    batch = SparseBatch.from_arrow(table.sort_by("doc_id"), V)

    def train(C: float, scale: str, shards: int):
        m = _model(tax, name, C=C, **params)
        if mixing == "driver":
            return train_ipm(spark, None, m, epochs=3, shards=shards, seed=5, rows=batch, step_scale=scale)
        return train_ipm(spark, df, m, epochs=3, shards=shards, seed=5, mixing=mixing, step_scale=scale)

    added = train(0.125, "shards", 3).get_state().arrays  # C x 3 = 0.375 exactly in binary
    scaled_c = train(0.375, "one", 3).get_state().arrays
    plain = train(0.125, "one", 3).get_state().arrays
    for k, v in scaled_c.items():
        np.testing.assert_array_equal(added[k], v, err_msg=k)
    assert not np.array_equal(added["W"], plain["W"])
    one = train(0.125, "shards", 1).get_state().arrays
    for k, v in train(0.125, "one", 1).get_state().arrays.items():
        np.testing.assert_array_equal(one[k], v, err_msg=k)


def test_step_scale_of_two_disjoint_documents_by_hand():
    """Two shards of one document each, on disjoint features: after one epoch from zero weights
    each document's step is ``min(2C, l / ||Delta||^2) / 2`` (the mean of the two shards, each
    capped by C x 2) instead of ``min(C, l / ||Delta||^2) / 2`` (each capped by C)."""
    from sparkhc.spark.hashing import shard_ids
    from sparkhc.spark.mixing.driver import train_on_driver
    from sparkhc.spark.mixing.settings import MixingSettings

    tax = Taxonomy.from_edges([("ROOT", "A"), ("ROOT", "B")])
    ids = np.array(["x", "y"])
    of = shard_ids(ids, 2)
    if of[0] == of[1]:  # the hash puts both in one shard: take two ids that it separates
        ids = np.array(["x", "z"])
        of = shard_ids(ids, 2)
    assert of[0] != of[1]
    X = np.array([[2.0, 0.0], [0.0, 3.0]], dtype=np.float64)  # unnormalized: ||x||^2 = 4 and 9
    import scipy.sparse as sp

    batch = SparseBatch(sp.csr_matrix(X), ids, [["A"], ["B"]])
    for scale, C in (("shards", 0.05), ("one", 0.05), ("shards", 10.0)):
        m = get_model_class("global")(tax, 2, C=C, update="cost_augmented", margin=1.0, dtype="float64")
        m.set_state(m.init_state())
        train_on_driver(m, batch, MixingSettings(1, shards=2, seed=0, step_scale=scale))
        W = m.get_state().arrays["W"]
        # zero weights: the cost-augmented DP takes the wrong edge (margin +1 off gold, -1 on it: the
        # empty set scores 0, the other leaf +1), so Delta = +x on the gold edge, -x on the other; the
        # loss is 0 - 0 + 1 * 2 = 2 and ||Delta||^2 = 2 ||x||^2
        for row, n2 in ((0, 4.0), (1, 9.0)):
            cap = C * (2 if scale == "shards" else 1)
            tau = min(cap, 2.0 / (2 * n2)) / 2
            x = X[row, row]
            gold, other = (0, 1) if row == 0 else (1, 0)
            assert W[row, gold] == pytest.approx(tau * x) and W[row, other] == pytest.approx(-tau * x)
