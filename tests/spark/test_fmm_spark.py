"""Li & Yamanishi models on Spark: the counting (category x word frequencies summed over the
partitions of the features' raw counts) equals the single-process statistics exactly, and
``predict_df`` gives the local scores."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from sparkhc.batch import SparseBatch
from sparkhc.models import get_model_class
from sparkhc.taxonomy import Taxonomy

EDGES = [("ROOT", "A"), ("ROOT", "B"), ("A", "A1"), ("A", "A2"), ("B", "B1"), ("B", "B2"), ("B", "B3")]
V = 30



def _table(n: int = 90, seed: int = 5) -> tuple[Taxonomy, pa.Table]:
    """A features table (doc_id, labels, indices, values, counts, split, fold) with raw counts."""
    rng = np.random.default_rng(seed)
    tax = Taxonomy.from_edges(EDGES)
    leaves = [tax.names[c] for c in tax.leaves if tax.names[c] != "B3"]  # B3: no training document
    rows = []
    for i in range(n):
        labs = sorted(set(rng.choice(leaves, size=int(rng.integers(1, 3))).tolist())) if i % 9 else []
        words = set(rng.choice(V - 1, size=7, replace=False).tolist())  # word V-1 never occurs
        for lab in labs:
            words.add(leaves.index(lab) * 4)
        idx = np.array(sorted(words), dtype=np.int32)
        cnt = rng.integers(1, 6, size=len(idx)).astype(np.float32)
        val = np.log1p(cnt)
        val /= np.linalg.norm(val)
        rows.append((f"d{i:04d}", labs, idx.tolist(), val.tolist(), cnt.tolist()))
    table = pa.table(
        {
            "doc_id": [r[0] for r in rows],
            "labels": pa.array([r[1] for r in rows], type=pa.list_(pa.string())),
            "indices": pa.array([r[2] for r in rows], type=pa.list_(pa.int32())),
            "values": pa.array([r[3] for r in rows], type=pa.list_(pa.float32())),
            "counts": pa.array([r[4] for r in rows], type=pa.list_(pa.float32())),
            "split": ["train"] * n,
            "fold": pa.array([i % 5 for i in range(n)], type=pa.int32()),
        }
    )
    return tax, table


def _stats_equal(a, b) -> None:
    sa, sb = a.statistics(), b.statistics()
    assert set(sa) == set(sb)
    for k in sa:
        np.testing.assert_array_equal(sa[k], sb[k], err_msg=k)


def test_counting_on_three_shards_equals_local_and_predict_df_gives_local_scores(spark):
    from sparkhc.spark.mixing.train import train_ipm

    tax, table = _table()
    df = spark.createDataFrame(table.to_pandas())
    model = get_model_class("fmm")(tax, V, gamma=0.4)
    train_ipm(spark, df, model, epochs=1, shards=3, seed=1, with_counts=True)
    assert model.get_state().counters["examples"] == table.num_rows
    local = get_model_class("fmm")(tax, V, gamma=0.4).fit(SparseBatch.from_arrow(table, V, with_counts=True))
    _stats_equal(model, local)  # exactly: the counts are integers

    from sparkhc.spark.predict import predict_df

    rows = predict_df(df.repartition(2), model, "v-test").collect()
    got = {r["doc_id"]: (list(r["pred_labels"]), list(r["pred_scores"])) for r in rows}
    assert len(got) == table.num_rows
    batch = SparseBatch.from_arrow(table, V, with_counts=True)
    sets, scores = local.decode(batch)
    S = local.decision_function(batch.counts)
    _, _, nodes = local.fitted()
    assert scores is not None
    np.testing.assert_array_equal(scores[:, nodes], S)
    for i, doc in enumerate(batch.doc_ids):
        labels, sc = got[doc]
        order = np.sort(sets[i])
        assert labels == [tax.names[int(c)] for c in order]
        # pred_scores are float32: the local decision_function of the predicted leaves, cast
        np.testing.assert_array_equal(np.asarray(sc, dtype=np.float32), scores[i, order].astype(np.float32))


def test_warm_start_and_extra_epochs_on_several_shards_count_each_document_once(spark):
    from sparkhc.spark.mixing.train import train_ipm

    tax, table = _table(80, 6)
    ids = np.array(table.column("doc_id").to_pylist())
    old, new = table.filter(pa.array(ids < "d0050")), table.filter(pa.array(ids >= "d0050"))
    model = get_model_class("wbm")(tax, V)
    train_ipm(spark, spark.createDataFrame(old.to_pandas()), model, epochs=1, shards=3, with_counts=True)
    # refresh with the new documents, three shards, and two epochs (the second changes nothing)
    train_ipm(
        spark,
        spark.createDataFrame(new.to_pandas()),
        model,
        epochs=2,
        shards=3,
        with_counts=True,
        warm_start=True,
    )
    local = get_model_class("wbm")(tax, V).fit(SparseBatch.from_arrow(table, V, with_counts=True))
    _stats_equal(model, local)


def test_li_yamanishi_experiment_counts_on_spark_like_locally(spark):
    """``experiments.li_yamanishi.spark_statistics``: categories in the setting's (unsorted) order."""
    import scipy.sparse as sp

    from experiments.li_yamanishi import SettingData, check_statistics, spark_statistics

    rng = np.random.default_rng(3)
    X = sp.csr_matrix(rng.poisson(0.5, size=(40, 15)).astype(np.float32))
    cats = ["wheat", "corn", "cocoa"]
    Y = rng.random((40, 3)) < 0.4
    Y[:, 2] |= ~Y.any(axis=1) & (np.arange(40) % 2 == 0)  # some documents stay without a category
    data = SettingData("toy", X, X[:5], cats, Y, cats, Y[:5], [f"w{i}" for i in range(15)])
    stats = spark_statistics(spark, data, shards=3)
    check_statistics(stats, data)  # raises unless exactly equal
    assert stats["category_docs"].tolist() == Y.sum(axis=0).astype(float).tolist()
