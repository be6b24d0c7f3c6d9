"""Barrier mixing through an exchange folder on an S3-compatible object store (moto's server on
loopback): the same weights, bit for bit, as through a local directory, and nothing left behind."""

from __future__ import annotations

import hashlib

import numpy as np
import pyarrow.fs as pafs

from sparkhc.persistence import state_to_bytes
from tests.spark.test_ipm import _data, _model


def _digest(model) -> str:
    return hashlib.sha256(state_to_bytes(model.get_state())).hexdigest()


def test_barrier_mixing_through_s3_equals_local_directory(spark, s3_server, tmp_path):
    from sparkhc.spark.mixing.train import mixing_mode, train_ipm

    s3_server["make_bucket"]("exchange")
    uri = s3_server["uri"]("exchange", "runs/ipm")
    tax, table = _data()
    df = spark.createDataFrame(table.to_pandas())
    params = {"branching": True, "update": "cost_augmented", "bias": 0.3, "average": True}
    logs: dict[str, list] = {"local": [], "s3": []}
    local = train_ipm(spark, df, _model(tax, "global", **params), epochs=3, shards=3, seed=4, mixing="barrier",
                      exchange_dir=tmp_path / "x", progress=logs["local"].append)
    m = _model(tax, "global", **params)
    assert mixing_mode(spark, "auto", m, uri) == "barrier"
    endpoint = s3_server["endpoint"]

    def in_bucket(shard: int, epoch: int) -> None:  # runs in the barrier tasks: the files are in S3
        fs = pafs.S3FileSystem(access_key="testing", secret_key="testing", endpoint_override=endpoint,
                               scheme="http", region="us-east-1")
        names = [i.path for i in fs.get_file_info(pafs.FileSelector("exchange/runs/ipm", recursive=True))]
        assert any(n.endswith("/state-00000.npz") for n in names), names
        assert any("/shard-" in n for n in names), names

    remote = train_ipm(spark, df, m, epochs=3, shards=3, seed=4, mixing="auto", exchange_dir=uri,
                       progress=logs["s3"].append, fault_hook=in_bucket)
    a, b = local.get_state(), remote.get_state()
    assert a.arrays.keys() == b.arrays.keys()
    for k, v in a.arrays.items():
        np.testing.assert_array_equal(b.arrays[k], v, err_msg=k)
        assert b.arrays[k].dtype == v.dtype
    assert a.counters == b.counters
    assert _digest(local) == _digest(remote)
    strip = [[{k: v for k, v in e.items() if k != "seconds"} for e in logs[n]] for n in logs]
    assert strip[0] == strip[1] and len(strip[0]) == 3
    # the run's folder is gone from the bucket (the prefix itself is the user's)
    fs = pafs.S3FileSystem(access_key="testing", secret_key="testing", endpoint_override=s3_server["endpoint"],
                           scheme="http", region="us-east-1")
    left = [i.path for i in fs.get_file_info(pafs.FileSelector("exchange/runs/ipm", recursive=True,
                                                               allow_not_found=True))]
    assert left == []
