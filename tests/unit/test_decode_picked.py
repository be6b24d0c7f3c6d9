"""``decode_picked`` (what ``sparkhc predict`` stores: the predicted leaf sets and their scores, block
by block, never the ``(n_docs, n_nodes)`` score matrix) against ``decode`` with the full matrix, for
FLAT, TREE (DP and LS) and the global model in both layouts, over several decode blocks."""

from __future__ import annotations

import numpy as np
import pytest

from sparkhc.models import murawaki
from sparkhc.models.murawaki import FlatPA, GlobalPA, TreePA
from sparkhc.spark.predict import decode_batch
from tests.unit.test_kernels import make_batch, random_taxonomy

V = 300

MODELS = [
    (FlatPA, {}),
    (TreePA, {"decoder": "dp"}),
    (TreePA, {"decoder": "ls"}),
    (GlobalPA, {"branching": True, "update": "cost_augmented", "bias": 0.3}),
    (GlobalPA, {"branching": True, "layout": "sparse"}),
    (GlobalPA, {"branching": True, "layout": "sparse", "average": True}),  # fused decoding, averaged weights
    (GlobalPA, {"branching": True, "average": True}),
    (GlobalPA, {}),
]


def _trained(cls, params, seed):
    """A random wide taxonomy, 90 documents, and the model after 3 epochs on them."""
    rng = np.random.default_rng(seed)
    tax = random_taxonomy(30, rng, wide=True)
    batch = make_batch(tax, 90, V, rng)
    model = cls(tax, V, **params)
    for e in range(3):
        model.partial_fit(batch, seed=1, epoch=e)
    return tax, batch, model


@pytest.mark.parametrize(("cls", "params"), MODELS, ids=lambda v: getattr(v, "__name__", str(v)))
def test_decode_picked_equals_decode(cls, params, monkeypatch):
    monkeypatch.setattr(murawaki, "DECODE_CHUNK", 16)  # several blocks, the last one short
    tax, batch, model = _trained(cls, params, 5)
    sets, scores = model.decode(batch)
    lean_sets, none = model.decode(batch, return_scores=False)
    picked_sets, picked = model.decode_picked(batch)
    assert none is None and scores is not None
    assert len(sets) == len(picked_sets) == len(lean_sets) == 90
    assert any(len(m) > 1 for m in sets)  # multi-label predictions, so the alignment is tested
    for i in range(90):
        assert np.array_equal(sets[i], picked_sets[i]) and np.array_equal(sets[i], lean_sets[i])
        assert np.array_equal(picked[i], scores[i, np.asarray(sets[i], dtype=np.int64)])
    labels, out = decode_batch(model, batch)
    for i in range(90):
        want = {tax.names[tax.real_id(int(c))]: float(scores[i, int(c)]) for c in sets[i]}
        assert dict(zip(labels[i], out[i], strict=True)) == want


@pytest.mark.parametrize(("cls", "params"), MODELS, ids=lambda v: getattr(v, "__name__", str(v)))
@pytest.mark.parametrize("threads", [2, 3])
def test_decode_on_threads_equals_one_thread(cls, params, threads, monkeypatch):
    """``decode_threads`` (the epoch selection's validation scoring): the blocks decoded on a pool
    give the same leaf sets and score matrix, bit for bit, as one thread, in document order."""
    monkeypatch.setattr(murawaki, "DECODE_CHUNK", 16)  # 6 blocks, the last one short
    _, batch, model = _trained(cls, params, 7)
    sets, scores = model.decode(batch)
    lean, _ = model.decode(batch, return_scores=False)
    model.decode_threads = threads
    t_sets, t_scores = model.decode(batch)
    t_lean, _ = model.decode(batch, return_scores=False)
    assert scores is not None and t_scores is not None and np.array_equal(scores, t_scores)
    for i in range(90):
        assert np.array_equal(sets[i], t_sets[i]) and np.array_equal(lean[i], t_lean[i])
