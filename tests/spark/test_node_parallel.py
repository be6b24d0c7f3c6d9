"""Node-parallel training (sparkhc.spark.node_parallel) equals serial training exactly.

A small random forest with partial paths (documents may stop at internal nodes), documents given
to Spark in a scrambled order over several partitions with ids whose string order differs from
their numeric order: the serial reference is ``model.fit`` on the batch sorted by doc_id.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
import scipy.sparse as sp

from sparkhc.batch import SparseBatch
from sparkhc.errors import ConfigError
from sparkhc.models import get_model_class
from sparkhc.models.cesa_bianchi import HRLS, HPerc
from sparkhc.spark.node_parallel import (
    assign_tasks,
    fit_nodes_local,
    partition_keys,
    spark_hash_long,
    train_node_parallel,
)
from sparkhc.taxonomy import Taxonomy

EDGES = [
    ("R", "a"), ("R", "b"), ("R", "c"),
    ("a", "a1"), ("a", "a2"), ("a1", "a11"), ("a1", "a12"),
    ("b", "b1"), ("b", "b2"), ("b1", "b11"), ("b1", "b12"),
]
N_DOCS, N_FEAT = 90, 30


def _data(seed: int = 0, n: int = N_DOCS, prefix: str = "doc") -> tuple[Taxonomy, SparseBatch]:
    tax = Taxonomy.from_edges(EDGES, root="R")
    rng = np.random.default_rng(seed)
    names = list(tax.names[1:])
    # features correlated with the labels, so the learners make and fix mistakes
    proto = rng.standard_normal((tax.n_nodes, N_FEAT))
    rows, labels = [], []
    for _ in range(n):
        labs = [str(x) for x in rng.choice(names, size=int(rng.integers(1, 3)), replace=False)]
        labels.append(labs)
        x = rng.standard_normal(N_FEAT) * 0.5 + sum(proto[tax.id(lab)] for lab in labs)
        x[rng.random(N_FEAT) < 0.5] = 0.0
        rows.append(x / max(np.linalg.norm(x), 1e-9))
    X = sp.csr_matrix(np.array(rows), dtype=np.float32)
    ids = np.array([f"{prefix}{i}" for i in range(n)])  # "doc10" < "doc2": string order != numeric
    return tax, SparseBatch(X=X, doc_ids=ids, labels=labels)


def _frame(spark, batch: SparseBatch):
    """The batch as a features DataFrame, rows scrambled over 3 partitions."""
    perm = np.random.default_rng(7).permutation(len(batch))
    b = batch.subset(perm)
    X = sp.csr_matrix(b.X)
    off = pa.array(X.indptr.astype(np.int32))
    table = pa.table({
        "doc_id": pa.array(b.doc_ids.tolist(), pa.string()),
        "labels": pa.array(b.labels, pa.list_(pa.string())),
        "indices": pa.ListArray.from_arrays(off, pa.array(X.indices.astype(np.int32))),
        "values": pa.ListArray.from_arrays(off, pa.array(X.data.astype(np.float32))),
    })
    return spark.createDataFrame(table).repartition(3)


def _sorted(batch: SparseBatch) -> SparseBatch:
    return batch.subset(np.argsort(batch.doc_ids, kind="stable"))


def _assert_same(a, b) -> None:
    sa, sb = a.get_state(), b.get_state()
    assert sa.arrays.keys() == sb.arrays.keys()
    for k in sa.arrays:
        assert sa.arrays[k].dtype == sb.arrays[k].dtype, k
        np.testing.assert_array_equal(sa.arrays[k], sb.arrays[k], err_msg=k)
    assert sa.counters == sb.counters


CASES = [
    ("perc", {}),
    ("h_perc", {"mistake": "node"}),
    ("h_rls", {}),
    ("ah_bay", {"costs": "uniform"}),
    ("svm", {}),
    ("h_svm", {}),
]


@pytest.fixture(scope="module")
def data(spark):
    # keep the sort's 4 range partitions (AQE would merge them for so few rows): the ranks then
    # cross partition boundaries
    key = "spark.sql.adaptive.coalescePartitions.enabled"
    before = spark.conf.get(key)
    spark.conf.set(key, "false")
    tax, batch = _data()
    df = _frame(spark, batch).cache()
    yield tax, batch, df
    df.unpersist()
    spark.conf.set(key, before)


@pytest.mark.parametrize(("name", "params"), CASES, ids=[c[0] for c in CASES])
def test_node_parallel_equals_serial(spark, data, name, params) -> None:
    tax, batch, df = data
    cls = get_model_class(name)
    serial = cls(tax, N_FEAT, **params).fit(_sorted(batch), seed=5)
    info: dict = {}
    n_tasks = None if name == "h_rls" else 3  # h_rls: the default
    par = train_node_parallel(spark, df, cls(tax, N_FEAT, **params), n_tasks=n_tasks, seed=5, progress=info.update)
    _assert_same(serial, par)
    assert info["documents"] == N_DOCS and info["sort_partitions"] > 1
    assert info["routed_pairs"] == int(cls(tax, N_FEAT, **params).node_eligibility(
        batch.label_matrix(tax)).sum())
    np.testing.assert_array_equal(serial.predict_multilabel(batch)[0], par.predict_multilabel(batch)[0])
    if name == "h_rls":
        st = par.get_state()
        assert int(st.arrays["t"][0]) == N_DOCS
        assert st.arrays["n_stored"][0] == 0 and st.arrays["n_stored"][1:].sum() > 0


def test_shuffled_epochs_and_warm_start(spark, data) -> None:
    tax, batch, df = data
    params = {"mistake": "node", "shuffle": True, "epochs": 2}
    serial = HPerc(tax, N_FEAT, **params).fit(_sorted(batch), seed=11)
    par = train_node_parallel(spark, df, HPerc(tax, N_FEAT, **params), n_tasks=2, seed=11)
    _assert_same(serial, par)
    # warm start: a model trained on the old documents, refreshed on Spark with new ones, equals
    # one pass over old then new (the H-RLS clock continues from the saved state)
    _, new = _data(seed=1, n=40, prefix="new")
    ref = HRLS(tax, N_FEAT)
    ref.fit(_sorted(batch))
    ref.partial_fit(_sorted(new))
    model = HRLS(tax, N_FEAT).fit(_sorted(batch))
    train_node_parallel(spark, _frame(spark, new), model, n_tasks=2, warm_start=True)
    _assert_same(ref, model)
    assert int(model.get_state().arrays["t"][0]) == N_DOCS + 40


def test_local_decomposition_and_support(spark) -> None:
    tax, batch = _data(seed=3, n=50)
    for name, params in CASES:
        cls = get_model_class(name)
        _assert_same(cls(tax, N_FEAT, **params).fit(batch), fit_nodes_local(cls(tax, N_FEAT, **params), batch))
    # the models declare it (HierModel.node_parallel): no side registry
    from sparkhc.models import make_model, names
    from sparkhc.models.base import HierModel

    # (a class that does not override node_parallel() never trains node-parallel)
    parallel = {n for n in names() if get_model_class(n).node_parallel is not HierModel.node_parallel
                and make_model(n, tax, N_FEAT).node_parallel()}
    assert parallel == {"h_svm", "svm", "h_rls", "ah_bay", "perc"}
    assert make_model("h_perc", tax, N_FEAT, mistake="node").training_strategy() == "node_parallel"
    assert make_model("h_perc", tax, N_FEAT, mistake="node").training_strategy(node_parallel=False) == "mixing"
    assert make_model("global", tax, N_FEAT).training_strategy() == "mixing"
    assert not HPerc(tax, N_FEAT).node_parallel()
    with pytest.raises(ConfigError, match="node-parallel"):
        train_node_parallel(spark, _frame(spark, batch), HPerc(tax, N_FEAT, mistake="decoded"))
    # LPT balance: the biggest node alone, the rest spread
    assert assign_tasks({1: 100.0, 2: 60.0, 3: 50.0, 4: 10.0}, 2) == {1: 0, 2: 1, 3: 1, 4: 0}
    # the task keys land in distinct partitions: Python's hash equals Spark's, as hash partitioning uses it
    vals = [0, 1, -1, 7, 2**31, -(2**40) + 3, 123456789012]
    got = spark.createDataFrame([(v,) for v in vals], "v long").selectExpr("v", "hash(v) AS h").collect()
    assert {int(r["v"]): int(r["h"]) for r in got} == {v: int(spark_hash_long([v])[0]) for v in vals}
    assert dict(zip(vals, spark_hash_long(vals).tolist(), strict=True)) == {int(r["v"]): int(r["h"]) for r in got}
    keys = partition_keys(5)
    parts = (spark.createDataFrame([(k,) for k in keys], "k long").repartition(5, "k")
             .selectExpr("k", "spark_partition_id() AS p").collect())
    assert {int(r["k"]): int(r["p"]) for r in parts} == {k: i for i, k in enumerate(keys)}
