"""Sparse IPM deltas (sparkhc.spark.deltas): mixing by deltas equals mixing full states."""

from __future__ import annotations

import numpy as np
import pytest

from sparkhc.models.base import ModelState, combine_states
from sparkhc.persistence import state_from_bytes, state_to_bytes
from sparkhc.spark.deltas import DeltaSum, encode, npz_view, supports


def base_state(rng, dtype=np.float32):
    W = np.zeros((50, 7), dtype=dtype)
    W[rng.integers(0, 50, 20), rng.integers(0, 7, 20)] = rng.normal(size=20)
    bf = rng.normal(size=(9, 4)).astype(dtype)
    return ModelState({"W": W, "bf": bf, "v": rng.normal(size=5).astype(dtype)}, {"examples": 1.0}, "mean")


def shard_state(base, rng, k):
    arrays = {k2: v.copy() for k2, v in base.arrays.items()}
    rows = rng.choice(50, size=6, replace=False)
    touched = np.zeros(50, bool)
    touched[rows] = True
    for r in rows:
        cols = rng.choice(7, size=2, replace=False)
        arrays["W"][r, cols] += rng.normal(size=2).astype(arrays["W"].dtype)
    arrays["bf"][rng.integers(0, 9), rng.integers(0, 4)] -= 0.25
    arrays["v"][k % 5] += 1.0
    return ModelState(arrays, {"examples": 10.0 + k, "updates": float(k)}, "mean"), touched


def test_npz_view_is_the_array_without_copy():
    rng = np.random.default_rng(0)
    st = base_state(rng)
    data = state_to_bytes(st)
    for name, arr in st.arrays.items():
        v = npz_view(data, name)
        np.testing.assert_array_equal(v, arr)
        assert not v.flags.writeable and not v.flags.owndata


@pytest.mark.parametrize("n_shards", [1, 2, 3, 5])
@pytest.mark.parametrize("use_hint", [False, True])
def test_delta_mixing_equals_mean_of_states(n_shards, use_hint):
    rng = np.random.default_rng(n_shards)
    base = base_state(rng)
    data = state_to_bytes(base)
    shards = [shard_state(base, rng, k) for k in range(n_shards)]
    acc = DeltaSum()
    for st, touched in shards:
        d = encode(st, data, {"W": touched} if use_hint else None)
        assert d is not None
        # only the changed entries travel
        assert d.arrays["W"].nnz <= 12
        acc = acc.add(state_from_bytes(state_to_bytes(d)))  # through bytes, as on Spark
    # an empty partner and a split merge are harmless (treeAggregate)
    acc = DeltaSum().merge(acc).merge(DeltaSum())
    mixed = acc.apply(base)
    ref = combine_states([s for s, _ in shards])
    for name in base.arrays:
        assert mixed.arrays[name].dtype == base.arrays[name].dtype
        if n_shards == 1:
            np.testing.assert_array_equal(mixed.arrays[name], ref.arrays[name])
        else:
            np.testing.assert_allclose(mixed.arrays[name], ref.arrays[name], rtol=1e-6, atol=1e-7)
    assert mixed.counters == ref.counters
    # the base is untouched
    np.testing.assert_array_equal(base.arrays["W"], npz_view(data, "W"))


def test_merge_is_associative():
    rng = np.random.default_rng(9)
    base = base_state(rng, np.float64)
    data = state_to_bytes(base)
    ds = [DeltaSum().add(encode(shard_state(base, rng, k)[0], data)) for k in range(3)]
    a = ds[0].merge(ds[1]).merge(ds[2]).apply(base)
    b = ds[2].merge(ds[0].merge(ds[1])).apply(base)
    for name in base.arrays:
        np.testing.assert_allclose(a.arrays[name], b.arrays[name], rtol=1e-15, atol=0)


def test_unsupported_states_fall_back():
    import scipy.sparse as sp

    st = ModelState({"W": sp.csc_matrix(np.eye(3))}, {}, "mean")
    assert not supports(st)
    assert encode(st, state_to_bytes(st)) is None
    assert not supports(ModelState({"W": np.zeros(3)}, {}, "sum"))


@pytest.mark.parametrize("max_parts", [1, 8])
def test_blockwise_mixing_is_exactly_the_entrywise_formula(max_parts, monkeypatch):
    """Each changed entry is float64(base) + (d_1 + ... + d_S) / S cast back (the formula of the
    module docstring), whether the parts are summed by blocks of rows (tiny blocks here, so
    that blocks split the changed rows) or first collapsed into their sparse sum."""
    import sparkhc.spark.deltas as mod

    monkeypatch.setattr(mod, "_block_rows", lambda n_cols: 3)
    rng = np.random.default_rng(11)
    base = base_state(rng)
    data = state_to_bytes(base)
    shards = [shard_state(base, rng, k)[0] for k in range(4)]
    enc = [encode(s, data) for s in shards]
    for s, d in zip(shards, enc, strict=True):  # encode = the dense difference, made sparse
        for name, v in s.arrays.items():
            ref = v.astype(np.float64).reshape(d.arrays[name].shape) - base.arrays[name].reshape(d.arrays[name].shape)
            np.testing.assert_array_equal(d.arrays[name].toarray(), ref)
    acc = DeltaSum(max_parts=max_parts)
    for d in enc:
        acc = acc.add(d)
    assert len(acc.parts) == (1 if max_parts == 1 else 4) and acc.n == 4
    mixed = acc.apply(base)
    for name, b in base.arrays.items():
        total = sum(d.arrays[name].toarray() for d in enc)
        expect = (b.astype(np.float64).reshape(total.shape) + total * (1.0 / 4)).astype(b.dtype).reshape(b.shape)
        np.testing.assert_array_equal(mixed.arrays[name], expect, err_msg=name)


def test_value_patches_rebuild_the_state_by_assignment_zeros_included():
    """encode_values/apply_values (the jobs mode's broadcast of the mixed state): the changed
    entries with their new values, explicit zeros kept, through the bytes of state_to_bytes."""
    import numpy as np

    from sparkhc.models.base import ModelState
    from sparkhc.persistence import state_from_bytes, state_to_bytes
    from sparkhc.spark import deltas

    rng = np.random.default_rng(5)
    base = {"W": rng.standard_normal((50, 7)).astype(np.float32), "b": rng.standard_normal(7).astype(np.float32)}
    new = {k: v.copy() for k, v in base.items()}
    new["W"][[3, 17, 40], [0, 6, 2]] = [0.0, 1e-30, -5.5]  # a value set to exactly zero is a change
    new["W"][45] = 0.0
    new["b"][4] = 2.0
    patch = deltas.encode_values(ModelState(new, {"examples": 3.0}), base)
    assert patch is not None
    assert patch.arrays["W"].nnz == 3 + int(np.count_nonzero(base["W"][45])) and patch.arrays["b"].nnz == 1
    assert patch.arrays["W"].dtype == np.float32
    target = ModelState({k: v.copy() for k, v in base.items()}, {}, "mean")
    out = deltas.apply_values(target, state_from_bytes(state_to_bytes(patch)))
    for k, v in new.items():
        assert out.arrays[k].tobytes() == v.tobytes(), k
    assert out.counters == {"examples": 3.0} and out.arrays["W"] is target.arrays["W"]


def _bits(state):
    return {k: (v.toarray() if hasattr(v, "toarray") else np.asarray(v)).tobytes() for k, v in state.arrays.items()}


@pytest.mark.skipif(not __import__("sparkhc.kernels", fromlist=["HAVE_NUMBA"]).HAVE_NUMBA, reason="numba not installed")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("use_hint", [False, True])
@pytest.mark.parametrize("block", [3, 10**6])
def test_compiled_deltas_equal_the_numpy_path_bit_for_bit(dtype, use_hint, block, monkeypatch):
    """The compiled encode and apply (sparkhc.kernels.delta_encode / delta_apply) give the same
    CSR entries, in the same order, and the same mixed bits as the numpy path: base entries of
    -0.0 and large magnitudes, NaN deltas, rows with no change inside a touched hint, blocks that
    split the changed rows, 1-D arrays."""
    import sparkhc.kernels as kernels
    import sparkhc.spark.deltas as mod

    monkeypatch.setattr(mod, "_block_rows", lambda n_cols: block)
    rng = np.random.default_rng(21)
    base = base_state(rng, dtype)
    base.arrays["W"][0, :] = -0.0
    base.arrays["W"][1, 2] = 3e7
    base.arrays["big"] = (rng.normal(size=(40, 13)) * 10.0 ** rng.integers(-8, 8, size=(40, 13))).astype(dtype)
    data = state_to_bytes(base)
    shards = []
    for k in range(3):
        st, touched = shard_state(base, rng, k)
        st.arrays["big"] = base.arrays["big"].copy()
        st.arrays["big"][rng.integers(0, 40, 30), rng.integers(0, 13, 30)] *= rng.normal(size=30).astype(dtype)
        st.arrays["W"][0, k] = 1.5  # a change in the row of -0.0 entries
        touched[0] = touched[1] = touched[2] = True  # row 2: touched, maybe unchanged
        if k == 1:
            st.arrays["v"][0] = np.nan
        shards.append((st, touched))
    out = {}
    for enabled in (False, True):
        monkeypatch.setattr(kernels, "ENABLED", enabled)
        enc = [encode(st, data, {"W": t} if use_hint else None) for st, t in shards]
        acc = DeltaSum()
        for d in enc:
            acc = acc.add(state_from_bytes(state_to_bytes(d)))
        mixed = acc.apply(ModelState({k: v.copy() for k, v in base.arrays.items()}, {}, "mean"), inplace=True)
        out[enabled] = ([(d.arrays[n].indptr.tolist(), d.arrays[n].indices.tolist(), d.arrays[n].data.tobytes())
                         for d in enc for n in sorted(d.arrays)], _bits(mixed))
    assert out[True][0] == out[False][0]
    assert out[True][1] == out[False][1]
    assert np.isnan(state_from_bytes(data).arrays["v"]).sum() == 0  # the base bytes are untouched


@pytest.mark.parametrize("n_shards", [1, 2, 3])
@pytest.mark.parametrize("use_hint", [False, True])
def test_sparse_layout_states_mix_by_deltas(n_shards, use_hint):
    """GlobalPA(layout="sparse"): CSR W / Wa whose entries differ between shards mix by deltas (the
    entries that changed or appeared) to the mean of the states, exactly for one shard."""
    import scipy.sparse as sp

    from sparkhc.models.murawaki import GlobalPA
    from tests.unit.test_kernels import make_batch, random_taxonomy

    rng = np.random.default_rng(n_shards)
    tax = random_taxonomy(30, rng)
    batch = make_batch(tax, 120, 300, rng)
    params = {"layout": "sparse", "average": True, "branching": True, "bias": 0.3}
    m = GlobalPA(tax, 300, **params)
    m.partial_fit(batch.subset(np.arange(40)), seed=1, epoch=0)
    base = m.get_state()
    data = state_to_bytes(base)
    assert supports(base)
    shards, acc = [], DeltaSum()
    for k in range(n_shards):
        w = GlobalPA(tax, 300, **params)
        w.set_state(base.copy())
        w.partial_fit(batch.subset(np.arange(40 + k * 25, 65 + k * 25)), seed=k, epoch=1)
        d = encode(w.get_state(), data if k % 2 else base.arrays, w.changed_rows() if use_hint else None)
        assert d is not None and d.arrays["W"].nnz < w.get_state().arrays["W"].nnz
        shards.append(w.get_state())
        acc = acc.add(state_from_bytes(state_to_bytes(d)))
    mixed = acc.apply(base)
    ref = combine_states(shards)
    for name, arr in ref.arrays.items():
        assert sp.issparse(mixed.arrays[name]) == sp.issparse(arr) == (name in ("W", "Wa"))
        assert mixed.arrays[name].dtype == arr.dtype
        got, want = (a.toarray() if sp.issparse(a) else a for a in (mixed.arrays[name], arr))
        if n_shards == 1:
            np.testing.assert_array_equal(got, want)
        else:
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    assert base.arrays["W"].nnz == m.get_state().arrays["W"].nnz  # the base is untouched
