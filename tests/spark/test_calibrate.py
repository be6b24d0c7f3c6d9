"""train.calibrate on Spark (sparkhc.spark.calibrate through fit_model): with one shard the inner
models, the cross-fitted offsets and the final model equal the serial computation on the same inner
folds; only the training documents given are read."""

from __future__ import annotations

import dataclasses

import numpy as np
import pyarrow as pa
import pytest

from sparkhc import calibration
from sparkhc.batch import SparseBatch
from sparkhc.config import TrainConfig
from sparkhc.decoding import tree_index
from sparkhc.errors import ModelError
from tests.spark.test_ipm import V, _data, _model

PARAMS = {"branching": True, "update": "cost_augmented", "bias": 0.3}


def _serial(batch: SparseBatch, tax, epochs: int, seed: int):
    m = _model(tax, "global", **PARAMS)
    for e in range(epochs):
        m.partial_fit(batch, seed=seed, epoch=e)
    return m


@pytest.mark.parametrize("path", ["spark", "driver"])
@pytest.mark.parametrize("mode", ["on"])
def test_one_shard_calibration_equals_serial(spark, mode, path):
    """On Spark, and in the driver on the same rows (the inner folds cut by fold_ids, trained by
    train_on_driver, no Spark DataFrame given): the offsets and weights of the serial reference."""
    from sparkhc.spark.calibrate import fold_column, fold_ids, suggestion_record
    from sparkhc.spark.training import fit_model

    tax, table = _data(n=160, seed=4)
    df = spark.createDataFrame(table.to_pandas())
    train = dataclasses.replace(TrainConfig(), epochs=3, shards=1, seed=5, calibrate=mode, calibration_folds=3,
                                checkpoint=False)
    model = _model(tax, "global", **PARAMS)
    if path == "driver":
        rows = SparseBatch.from_arrow(table, V)
        result = fit_model(spark, None, model, train, rows=rows)
        np.testing.assert_array_equal(
            fold_ids(rows.doc_ids, 3, 5),
            [r["f"] for r in df.select(fold_column(3, 5).alias("f")).collect()])  # the driver's folds are Spark's
    else:
        result = fit_model(spark, df, model, train)
    # serial reference on the same inner folds (the fold of every document as Spark computes it)
    folds = {r["doc_id"]: r["f"] for r in df.select("doc_id", fold_column(3, 5).alias("f")).collect()}
    ids = np.array(table.column("doc_id").to_pylist())
    f_of = np.array([folds[i] for i in ids])
    assert sorted(set(f_of.tolist())) == [0, 1, 2]

    def part(mask: np.ndarray) -> SparseBatch:
        return SparseBatch.from_arrow(table.take(pa.array(np.flatnonzero(mask))).sort_by("doc_id"), V)

    scores = [calibration.fold_scores(_serial(part(f_of != f), tax, 3, 5), part(f_of == f)) for f in range(3)]
    ref = calibration.cross_fit(tree_index(tax), scores, calibration.scored_columns(tax), 3, mode=mode)
    ref.source = "calibration folds"
    ref.suggestions = suggestion_record(tax, scores, ref, 3)  # the label scores' calibration, on the same folds
    assert result.calibration == ref.summary()
    expect = _serial(part(np.ones(len(ids), bool)), tax, 3, 5)
    if ref.applied:
        expect.shift_edges(ref.offsets)
    for k, v in expect.get_state().arrays.items():
        np.testing.assert_array_equal(model.get_state().arrays[k], v, err_msg=k)
    assert mode == "auto" or ref.applied


def test_calibrate_needs_the_global_model_with_a_bias(spark):
    from sparkhc.spark.training import fit_model

    tax, table = _data(n=40)
    df = spark.createDataFrame(table.to_pandas())
    train = dataclasses.replace(TrainConfig(), epochs=1, shards=1, calibrate="on", checkpoint=False)
    with pytest.raises(ModelError, match="bias"):
        fit_model(spark, df, _model(tax, "global", branching=True), train)
    with pytest.raises(ModelError, match="the model is 'tree'"):  # trains by mixing, but has no edge offsets
        fit_model(spark, df, _model(tax, "tree"), train)
    # "auto" (the default) skips such models and records why; the model equals one trained with "off"
    auto = dataclasses.replace(train, calibrate="auto")
    for name, params in (("global", {"branching": True}), ("tree", {})):
        m_auto, m_off = _model(tax, name, **params), _model(tax, name, **params)
        res = fit_model(spark, df, m_auto, auto)
        fit_model(spark, df, m_off, dataclasses.replace(train, calibrate="off"))
        assert res.calibration is not None and res.calibration["applied"] is False
        assert "skipped" in res.calibration
        for k, v in m_off.get_state().arrays.items():
            np.testing.assert_array_equal(m_auto.get_state().arrays[k], v, err_msg=f"{name} {k}")


@pytest.mark.parametrize("path", ["spark", "driver"])
@pytest.mark.parametrize("folds,documents", [(1, 0), (3, 0), (3, 5000), (2, 100)])
def test_auto_fits_offsets_on_the_epoch_selections_validation_bands(spark, path, folds, documents):
    """With the default epoch selection, ``calibrate = "auto"`` scores the selection's validation
    bands with each band's model at the chosen epoch (retrained serially here: the reference), cuts
    fewer than 3 bands into hash parts, and applies the offsets only by the one-SE rule; when they
    are applied and ``calibration_documents`` asks for more documents than the bands hold, more
    bands are scored (at most all 5 of fraction 0.2) and the offsets fitted again on all of them;
    the final model is the serial training on every document plus those offsets."""
    from sparkhc.spark.calibrate import fold_ids, suggestion_record
    from sparkhc.spark.hashing import validation_ids
    from sparkhc.spark.training import fit_model

    tax, table = _data(n=200, seed=6)
    df = spark.createDataFrame(table.to_pandas())
    train = dataclasses.replace(TrainConfig(), epochs=0, max_epochs=6, patience=2, shards=1, seed=5,
                                calibrate="auto", validation_folds=folds, validation_fraction=0.2,
                                checkpoint=False, calibration_documents=documents)
    model = _model(tax, "global", **PARAMS)
    rows = SparseBatch.from_arrow(table, V)
    result = (fit_model(spark, None, model, train, rows=rows) if path == "driver"
              else fit_model(spark, df, model, train))
    sel = result.epoch_selection
    assert sel is not None and sel["folds"] == folds
    e = int(sel["epochs"])
    ids = np.array(table.column("doc_id").to_pylist())

    def part(mask: np.ndarray) -> SparseBatch:
        return SparseBatch.from_arrow(table.take(pa.array(np.flatnonzero(mask))).sort_by("doc_id"), V)

    def reference(bands: int) -> calibration.Calibration:
        scores, parts = [], []
        for b in range(bands):
            held = validation_ids(ids, 0.2, 5, b)
            scores.append(calibration.fold_scores(_serial(part(~held), tax, e, 5), part(held)))
            parts.append(fold_ids(np.sort(ids[held]), -(-3 // bands), 5))  # fewer than 3: cut into parts
        if bands < 3:
            scores = calibration.split_folds(scores, parts)
            assert len(scores) >= 3
        out = calibration.cross_fit(tree_index(tax), scores, calibration.scored_columns(tax), 3, mode="auto")
        out.source, out.bands = "validation bands", bands
        out.suggestions = suggestion_record(tax, scores, out, 3)
        return out

    ref = reference(folds)
    held = sum(int(validation_ids(ids, 0.2, 5, b).sum()) for b in range(folds))
    if ref.applied and documents > held:  # 40 documents a band: 5000 asks for all 5, 100 for 3
        ref = reference(5 if documents == 5000 else 3)
    # these data: the offsets pay on 3 bands (so 5000 scores all 5), not on 1 or 2
    assert ref.bands == {(3, 5000): 5}.get((folds, documents), folds)
    assert result.calibration == ref.summary()
    v = ref.validation
    assert ref.applied == (v["gain"] > 1e-12 and v["fold_gain_mean"] > v["fold_gain_se"])
    expect = _serial(part(np.ones(len(ids), bool)), tax, e, 5)
    if ref.applied:
        expect.shift_edges(ref.offsets)
    for k, val in expect.get_state().arrays.items():
        np.testing.assert_array_equal(model.get_state().arrays[k], val, err_msg=k)


def test_more_bands_skip_a_band_no_document_hashed_into(spark):
    """A tiny training part: the extension asks for every band of 5 %, some of which hold no
    document; those are skipped (not an error: the selection's own band was not empty), and the
    offsets are fitted on the bands that hold documents."""
    from sparkhc.spark.calibrate import cross_fit_offsets
    from sparkhc.spark.hashing import validation_ids
    from sparkhc.spark.mixing.settings import MixingSettings

    tax, table = _data(n=40, seed=2)
    rows = SparseBatch.from_arrow(table, V)
    ids = np.array(table.column("doc_id").to_pylist())
    held = [int(validation_ids(ids, 0.05, 5, b).sum()) for b in range(20)]
    assert held[0] >= 3 and 0 in held  # these data: band 0 holds documents, two bands none
    model = _model(tax, "global", **PARAMS)
    result = cross_fit_offsets(spark, None, model, MixingSettings(2, shards=1, seed=5), mode="on", rows=rows,
                               bands=(1, 0.05), documents=5000)
    assert result.bands == sum(1 for h in held if h)


def test_more_bands_arithmetic():
    from sparkhc.spark.calibrate import more_bands

    assert more_bands(1, 1131, 5000, 0.1) == 4  # 20NG-sized band: 5 bands hold 5,655
    assert more_bands(1, 2000, 5000, 0.1) == 2
    assert more_bands(7, 1036, 5000, 0.1) == 3  # every band of a small training part
    assert more_bands(1, 6000, 5000, 0.1) == 0  # a large band already holds them
    assert more_bands(2, 400, 0, 0.1) == 0  # 0: only the selection's bands
    assert more_bands(1, 100, 5000, 0.25) == 3  # at most the 4 bands of 25 %


def test_auto_with_fixed_epochs_skips_and_says_why(spark):
    from sparkhc.spark.training import fit_model

    tax, table = _data(n=60)
    df = spark.createDataFrame(table.to_pandas())
    train = dataclasses.replace(TrainConfig(), epochs=2, shards=1, calibrate="auto", checkpoint=False)
    m_auto, m_off = _model(tax, "global", **PARAMS), _model(tax, "global", **PARAMS)
    res = fit_model(spark, df, m_auto, train)
    fit_model(spark, df, m_off, dataclasses.replace(train, calibrate="off"))
    assert res.calibration is not None and res.calibration["applied"] is False
    assert "train.calibrate = on" in res.calibration["skipped"]
    for k, v in m_off.get_state().arrays.items():
        np.testing.assert_array_equal(m_auto.get_state().arrays[k], v, err_msg=k)


@pytest.mark.parametrize("path", ["spark", "driver"])
def test_a_calibration_too_large_is_skipped_by_auto_and_refused_by_on(spark, path, monkeypatch):
    """Scores of more documents x edges than sparkhc.calibration.MAX_SCORES (a MeSH-sized taxonomy):
    ``auto`` records why and trains exactly what ``off`` trains (no band scored), ``on`` refuses
    naming the setting, before any band is scored."""
    from sparkhc.spark.training import fit_model

    monkeypatch.setattr(calibration, "MAX_SCORES", 10)
    tax, table = _data(n=200, seed=6)
    df = spark.createDataFrame(table.to_pandas())
    rows = SparseBatch.from_arrow(table, V)
    train = dataclasses.replace(TrainConfig(), epochs=0, max_epochs=4, patience=2, shards=1, seed=5,
                                validation_folds=1, validation_fraction=0.2, checkpoint=False)

    def fit(calibrate: str):
        model = _model(tax, "global", **PARAMS)
        t = dataclasses.replace(train, calibrate=calibrate)
        res = fit_model(spark, None, model, t, rows=rows) if path == "driver" else fit_model(spark, df, model, t)
        return model, res

    m_auto, res = fit("auto")
    assert res.calibration is not None and res.calibration["applied"] is False
    assert "MAX_SCORES" in res.calibration["skipped"]
    m_off, _ = fit("off")
    for k, v in m_off.get_state().arrays.items():
        np.testing.assert_array_equal(m_auto.get_state().arrays[k], v, err_msg=k)
    with pytest.raises(ModelError, match="train.calibrate = 'on'.*MAX_SCORES"):
        fit("on")
