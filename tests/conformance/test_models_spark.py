"""Conformance on Spark, for every registered model name: training through the product's Spark
path (:func:`sparkhc.spark.training.fit_model`, whatever strategy the model declares) with one shard
equals serial training on the same documents in ``doc_id`` order."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import scipy.sparse as sp

from sparkhc.config import TrainConfig
from sparkhc.models import get_model_class, names
from tests.conformance.slices import Slice, cases, hier_slice, mdc_slice, new_model

EPOCHS = 2


@pytest.fixture(scope="module")
def slices() -> dict[str, Slice]:
    return {}


@pytest.mark.parametrize("name,params", cases(names()))
def test_one_partition_on_spark_equals_serial_training(spark, name: str, params: dict, slices: dict[str, Slice]) -> None:
    from sparkhc.spark.training import DRIVERS, fit_model

    cls = get_model_class(name)
    kind = "mdc" if cls.multi_dimensional else "hier"
    if kind not in slices:
        slices[kind] = mdc_slice() if kind == "mdc" else hier_slice()
    data = slices[kind]
    df = spark.createDataFrame(data.features_table()).repartition(1)
    model = new_model(name, data, **params)
    cfg = TrainConfig(model=name, epochs=EPOCHS, shards=1, seed=0, checkpoint=False)
    result = fit_model(spark, df, model, cfg)
    assert result.strategy in DRIVERS
    assert result.documents == len(data.train) or result.strategy in ("node_parallel",)

    order = np.argsort(np.asarray([str(d) for d in data.train.doc_ids]), kind="stable")
    serial = new_model(name, data, **params)
    serial.fit(dataclasses.replace(data.train.subset(order)), epochs=1 if cls.single_pass else EPOCHS, seed=0)
    a, b = model.get_state().arrays, serial.get_state().arrays
    assert a.keys() == b.keys()
    for k in a:
        x, y = a[k], b[k]
        if sp.issparse(x) or sp.issparse(y):
            x, y = sp.csr_matrix(x).toarray(), sp.csr_matrix(y).toarray()
        if result.strategy in ("em", "batch"):
            # sums of per-partition statistics / solver sweeps in another order: equal to rounding
            np.testing.assert_allclose(x, y, rtol=1e-9, atol=1e-12, err_msg=k)
        else:
            np.testing.assert_array_equal(x, y, err_msg=k)
    assert model.predict(data.test) == serial.predict(data.test)
