"""Model directories: round trip, byte-identical saves, atomicity, and the refusal cases."""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.sparse as sp

from sparkhc.batch import SparseBatch
from sparkhc.errors import ModelError
from sparkhc.models import get_model_class
from sparkhc.models.base import ModelState
from sparkhc.persistence import load_model, save_model, state_from_bytes, state_to_bytes
from sparkhc.taxonomy import Taxonomy

EDGES = [("ROOT", "A"), ("ROOT", "B"), ("A", "AA"), ("A", "AB"), ("B", "BA"), ("B", "BB")]


def _trained(tax: Taxonomy, name: str = "global", **params):
    rng = np.random.default_rng(0)
    n, v = 60, 30
    X = sp.random(n, v, density=0.2, random_state=1, format="lil", dtype=np.float32)
    leaves = ["AA", "AB", "BA", "BB"]
    labels = [[leaves[i % 4]] + ([leaves[(i + 1) % 4]] if i % 3 == 0 else []) for i in range(n)]
    for i, labs in enumerate(labels):  # a learnable signal
        for lab in labs:
            X[i, leaves.index(lab)] = 1.0
    batch = SparseBatch(X=X.tocsr(), doc_ids=np.array([f"d{i}" for i in range(n)]), labels=labels)
    m = get_model_class(name)(tax, v, **params)
    m.fit(batch, epochs=2, seed=int(rng.integers(10)))
    return m, batch


@pytest.mark.parametrize("name,params", [("global", {"branching": True}), ("tree", {"data": "all"}), ("flat", {})])
def test_round_trip_predicts_identically(tmp_path, name, params):
    tax = Taxonomy.from_edges(EDGES)
    m, batch = _trained(tax, name, **params)
    save_model(tmp_path / "m", m)
    m2, meta = load_model(tmp_path / "m", taxonomy=tax)
    assert meta["model"] == name
    assert m2.predict(batch) == m.predict(batch)
    for k, v in m.get_state().arrays.items():
        np.testing.assert_array_equal(m2.get_state().arrays[k], v)


def test_same_state_same_bytes(tmp_path):
    tax = Taxonomy.from_edges(EDGES)
    m, _ = _trained(tax)
    save_model(tmp_path / "a", m, metadata={"created": "x"})
    save_model(tmp_path / "b", m, metadata={"created": "x"})
    for f in ("state.npz", "taxonomy.tsv", "metadata.json"):
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes(), f


def test_state_bytes_round_trip_with_sparse_and_counters():
    st = ModelState({"W": np.arange(6, dtype=np.float32).reshape(2, 3),
                     "S": sp.csr_matrix(np.eye(3, dtype=np.float64))}, {"updates": 3.0}, "sum")
    back = state_from_bytes(state_to_bytes(st))
    np.testing.assert_array_equal(back.arrays["W"], st.arrays["W"])
    assert (back.arrays["S"] != st.arrays["S"]).nnz == 0
    assert back.counters == {"updates": 3.0} and back.combine == "sum"


def test_refuses_overwrite_and_other_taxonomy(tmp_path):
    tax = Taxonomy.from_edges(EDGES)
    m, _ = _trained(tax)
    save_model(tmp_path / "m", m)
    with pytest.raises(ModelError, match="already exists"):
        save_model(tmp_path / "m", m)
    save_model(tmp_path / "m", m, overwrite=True)
    other = Taxonomy.from_edges([*EDGES, ("B", "BC")])
    with pytest.raises(ModelError, match="trained on taxonomy .* but the data uses taxonomy"):
        load_model(tmp_path / "m", taxonomy=other)
    with pytest.raises(ModelError, match="trained on features"):
        save_model(tmp_path / "f", m, metadata={"feature_spec_fingerprint": "aaa"})
        load_model(tmp_path / "f", feature_spec_fingerprint="bbb")


def test_truncated_and_newer_model_dirs(tmp_path):
    tax = Taxonomy.from_edges(EDGES)
    m, _ = _trained(tax)
    d = save_model(tmp_path / "m", m)
    (d / "state.npz").write_bytes((d / "state.npz").read_bytes()[:100])
    with pytest.raises(ModelError, match="state.npz: corrupt or truncated"):
        load_model(d)
    (d / "state.npz").unlink()
    with pytest.raises(ModelError, match="truncated model directory: state.npz is missing"):
        load_model(d)
    d2 = save_model(tmp_path / "m2", m)
    meta = json.loads((d2 / "metadata.json").read_text())
    meta["format_version"] = 99
    (d2 / "metadata.json").write_text(json.dumps(meta))
    with pytest.raises(ModelError, match="newer than this sparkhc understands"):
        load_model(d2)
    (d2 / "metadata.json").unlink()
    with pytest.raises(ModelError, match="metadata.json is missing"):
        load_model(d2)
    with pytest.raises(ModelError, match="not found"):
        load_model(tmp_path / "nothing")


def test_crash_during_save_leaves_previous_version(tmp_path, monkeypatch):
    import sparkhc.persistence as P

    tax = Taxonomy.from_edges(EDGES)
    m, batch = _trained(tax)
    save_model(tmp_path / "m", m)
    before = (tmp_path / "m" / "state.npz").read_bytes()

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(P, "write_json_atomic", boom)
    with pytest.raises(OSError):
        save_model(tmp_path / "m", m, overwrite=True)
    assert (tmp_path / "m" / "state.npz").read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["m"]
