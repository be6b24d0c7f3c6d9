"""The training plan's state sizing (sparkhc.spark.plan.driver_reason): a sparse-layout state counts
the bytes of its CSR arrays, not 0 (hand-counted sizes)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from sparkhc.config import TrainConfig
from sparkhc.models import make_model
from sparkhc.spark import plan
from sparkhc.taxonomy import Taxonomy


def test_csr_bytes_are_counted():
    m = sp.csr_matrix(np.eye(3, dtype=np.float32))  # 3 float32 + 3 int32 indices + 4 int32 indptr
    assert plan._nbytes(m) == 3 * 4 + 3 * 4 + 4 * 4
    assert plan._nbytes(np.zeros(4)) == 32


def test_a_sparse_state_over_the_limit_trains_on_spark(monkeypatch):
    tax = Taxonomy.from_edges([("ROOT", "a"), ("ROOT", "b"), ("a", "a1")], root="ROOT")
    model = make_model("global", tax, 1000, layout="sparse")
    train = TrainConfig(model="global")
    assert plan.driver_reason(model, "mixing", train) == ""
    monkeypatch.setattr(plan, "AUTO_MAX_STATE_BYTES", 1000)  # the CSR indptr alone holds 1001 int32
    assert "MiB" in plan.driver_reason(model, "mixing", train)
