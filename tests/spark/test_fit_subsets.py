"""``fit_subsets`` (many independent small fits as Spark tasks) equals the serial fits.

On a real slice (the first 280 RCV1-v2 documents, the conformance suite's): every Xiao et al.
model fitted through ``sparkhc.spark.training.fit_subsets`` on a labeled subset (gold labels,
the others unlabeled), on weak node scores (dataless), and on a row subset, gives exactly the
state, log-likelihood history, iterations and decoded test documents of the serial
``fit_arrays(counts[lab], node_scores, counts[unl])`` call the Xiao runner made in one process
before (the same code on the same arrays: bit-identical, asserted with ``==``).
"""

from __future__ import annotations

import numpy as np
import pytest

from sparkhc.batch import SparseBatch
from sparkhc.spark.training import SubsetFit, fit_subsets, subset_batch
from tests.conformance.slices import hier_slice, new_model

NAMES = ["pcnb", "pcem", "flat_nb", "flat_em", "tdnb", "tdem", "wdnb", "wdem", "nbmc", "emmc"]


@pytest.fixture(scope="module")
def real():
    return hier_slice()


def _serial(model, x, lab, s_lab, unl):
    """The pre-Spark runner's call: ``fit_arrays`` on the labeled rows' counts and node scores and
    the unlabeled rows' counts."""
    return model.fit_arrays(x[lab], s_lab, x[unl] if unl.size else None)


def _cases(real, name):
    """(key, labeled rows, node scores or None, rows or None, unlabeled rows) of three fits."""
    n = len(real.train)
    rng = np.random.default_rng(7)
    order = rng.permutation(n)
    m = new_model(name, real)
    space = m.space  # type: ignore[attr-defined]
    gold = m.node_scores_from_labels(real.train.labels)  # type: ignore[attr-defined]
    lab = np.sort(order[:40])
    unl = np.sort(order[40:])
    # weak labels: one random node per depth for 100 documents (no ancestor closure), as padded node scores
    base = space.base
    w = np.zeros((n, base.n_nodes))
    for i in order[:100]:
        for depth in (1, 2):
            w[i, int(rng.choice(np.flatnonzero(np.asarray(base.depth) == depth)))] = 1.0
    weak = space.node_scores(w)
    has = weak[lab].sum(axis=1) > 0
    rows = np.sort(order[:150])
    sub_lab, sub_unl = np.sort(order[:30]), np.sort(order[30:150])
    return space, [
        ("labeled", lab, None, None, gold[lab], lab, unl),
        ("dataless", lab, weak[lab], None, weak[lab][has], lab[has], np.sort(np.concatenate([unl, lab[~has]]))),
        ("rows", sub_lab, None, rows, gold[sub_lab], sub_lab, sub_unl),
    ]


@pytest.mark.parametrize("name", NAMES)
def test_fit_subsets_equals_serial_fit(spark, real, name):
    space, cases = _cases(real, name)
    x = real.train.counts
    fits = [SubsetFit(key, new_model(name, real), labeled=lab, rows=rows, node_scores=ns)
            for key, lab, ns, rows, *_ in cases]
    out = fit_subsets(spark, real.train, fits, evaluate=real.test, keep_state=True)
    assert [r.key for r in out] == ["labeled", "dataless", "rows"]
    for (key, _lab, _ns, _rows, s_ser, lab_ser, unl_ser), res in zip(cases, out, strict=True):
        serial = _serial(new_model(name, real), x, lab_ser, s_ser, unl_ser)
        got = res.model
        assert got.history_ == serial.history_, key
        assert got.n_iter_ == serial.n_iter_, key
        st, st_ser = got.get_state(), serial.get_state()
        assert set(st.arrays) == set(st_ser.arrays)
        for k, v in st_ser.arrays.items():
            np.testing.assert_array_equal(st.arrays[k], v, err_msg=f"{name} {key} {k}")
        paths = serial.predict_paths(real.test.counts)
        assert [int(d[0]) for d in res.decoded()] == space.path_leaf[paths].tolist(), key
        assert res.seconds >= 0 and res.decode_seconds >= 0


def test_subset_batch_hides_labels_and_sets_node_scores(real):
    """By hand: 5 documents, labeled rows 1 and 3, node scores given for them."""
    b = real.train.subset(np.arange(5))
    m = new_model("pcem", real)
    k = m.space.n_nodes  # type: ignore[attr-defined]
    ns = np.arange(2 * k, dtype=np.float64).reshape(2, k) + 1
    sub = subset_batch(b, SubsetFit("x", m, labeled=np.array([1, 3]), node_scores=ns))
    assert sub.labels == [[], b.labels[1], [], b.labels[3], []]
    np.testing.assert_array_equal(sub.extra["node_scores"][[1, 3]], ns)
    assert not sub.extra["node_scores"][[0, 2, 4]].any()
    rows = subset_batch(b, SubsetFit("y", m, labeled=np.array([3]), rows=np.array([0, 3, 4])))
    assert list(rows.doc_ids) == [b.doc_ids[0], b.doc_ids[3], b.doc_ids[4]]
    assert rows.labels == [[], b.labels[3], []]
    with pytest.raises(ValueError, match="labeled rows outside"):
        subset_batch(b, SubsetFit("z", m, labeled=np.array([1]), rows=np.array([0, 3])))
    with pytest.raises(ValueError, match="node-score rows"):
        subset_batch(b, SubsetFit("w", m, labeled=np.array([1, 3]), node_scores=ns[:1]))


def test_fit_subsets_without_state_keeps_history(spark, real):
    """The default drops the fitted state (large: components x vocabulary), not the fit record."""
    m = new_model("pcem", real)
    (res,) = fit_subsets(spark, real.train, [SubsetFit(0, m, labeled=np.arange(50))])
    assert res.model.get_state().arrays == {} and res.model.history_ and res.offsets is None
    with pytest.raises(ValueError, match="had no evaluation batch"):
        res.decoded()
    assert isinstance(real.train, SparseBatch)
