"""Conformance suite: every registered model name, found through the registry (no hand-kept list),
passes the same checks on a small slice of a real corpus.

- it declares a training strategy the Spark layer has a driver for;
- fitted on the slice, its predictions are valid label sets of the taxonomy (real nodes, no root,
  no duplicates; one class per class space for multi-dimensional models);
- a save/load round trip predicts identically;
- for models trained by mixing, mixing identical shard states changes nothing;
- the same seed gives the same model;
- its declared optional capabilities (``fits_open``, ``touched_arrays``, ``supports_edge_offsets``)
  match what it implements: the Spark layer reads the declarations and never probes.

The Spark check (one partition on Spark equals serial training) is in ``test_models_spark.py``.
Hierarchical models train on the first documents (by id) of RCV1-v2 (depth-4 tree, internal nodes
as labels, so /_self leaves are exercised); multi-dimensional models on Reuters-21578's topic x
place class spaces (``sparkhc/conf/mdc_reuters21578.toml``).
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from sparkhc.models import get_model_class, names
from sparkhc.models.base import TRAINING_STRATEGIES, HierModel, ModelState, StateSum
from sparkhc.persistence import load_model, save_model
from tests.conformance.slices import Slice, cases, hier_slice, mdc_slice, new_model

ALL_MODELS = names()
#: the models trained by iterative parameter mixing (the others never have their states mixed)
MIXING_MODELS = [n for n in ALL_MODELS if get_model_class(n).training == "mixing"]
#: every name with its defaults, plus the declared parameter variants (``slices.VARIANTS``)
ALL_CASES = cases(ALL_MODELS)
MIXING_CASES = cases(MIXING_MODELS)


@pytest.fixture(scope="module")
def slices() -> dict[str, Slice]:
    return {}


def _slice(name: str, cache: dict[str, Slice]) -> Slice:
    kind = "mdc" if get_model_class(name).multi_dimensional else "hier"
    if kind not in cache:
        cache[kind] = mdc_slice() if kind == "mdc" else hier_slice()
    return cache[kind]


def _fitted(name: str, cache: dict[str, Slice], params: dict | None = None) -> tuple[object, Slice]:
    data = _slice(name, cache)
    model = new_model(name, data, **(params or {}))
    model.fit(data.train, epochs=2, seed=0)
    return model, data


def _same_state(a: ModelState, b: ModelState) -> None:
    assert a.arrays.keys() == b.arrays.keys()
    for k in a.arrays:
        x, y = a.arrays[k], b.arrays[k]
        if sp.issparse(x) or sp.issparse(y):
            x, y = sp.csr_matrix(x).toarray(), sp.csr_matrix(y).toarray()
        np.testing.assert_array_equal(x, y, err_msg=k)


def test_registry_is_not_empty_and_every_name_resolves() -> None:
    assert len(ALL_MODELS) >= 20
    for name in ALL_MODELS:
        assert get_model_class(name).name == name


@pytest.mark.parametrize("name", ALL_MODELS)
def test_declares_a_training_strategy(name: str) -> None:
    cls = get_model_class(name)
    assert cls.training in TRAINING_STRATEGIES
    assert cls.combine in ("mean", "sum")


@pytest.mark.parametrize("name,params", ALL_CASES)
def test_predictions_are_valid_label_sets(name: str, params: dict, slices: dict[str, Slice]) -> None:
    model, data = _fitted(name, slices, params)
    pred = model.predict(data.test)  # type: ignore[attr-defined]
    assert len(pred) == len(data.test)
    tax = data.taxonomy
    real = {tax.names[i] for i in range(1, tax.n_nodes) if not tax.virtual[i]}
    for labs in pred:
        assert len(set(labs)) == len(labs), labs
        assert set(labs) <= real, sorted(set(labs) - real)
    if data.spaces is not None:  # one class per class space
        for labs in pred:
            assert sorted(lab.split("/", 1)[0] for lab in labs) == sorted(data.spaces), labs
    # the model learned something: some training document gets a gold label back
    train_pred = model.predict(data.train)  # type: ignore[attr-defined]
    hits = np.mean([bool(set(p) & set(g)) for p, g in zip(train_pred, data.train.labels or [], strict=True)])
    assert hits > 0, hits  # (accuracy is not the contract here: the majority baseline predicts one set for all)


@pytest.mark.parametrize("name,params", ALL_CASES)
def test_save_load_round_trip_predicts_identically(name: str, params: dict, slices: dict[str, Slice], tmp_path) -> None:
    model, data = _fitted(name, slices, params)
    save_model(tmp_path / "m", model, {"note": "conformance"})  # type: ignore[arg-type]
    loaded, meta = load_model(tmp_path / "m", taxonomy=data.taxonomy)
    assert meta["model"] == name
    assert type(loaded) is type(model)
    _same_state(model.get_state(), loaded.get_state())  # type: ignore[attr-defined]
    assert loaded.predict(data.test) == model.predict(data.test)  # type: ignore[attr-defined]


@pytest.mark.parametrize("name,params", MIXING_CASES)
def test_mixing_identical_states_changes_nothing(name: str, params: dict, slices: dict[str, Slice]) -> None:
    """The product's mixing rule (``sparkhc.spark.mixing.mix.mix``, run by both Spark mixing modes) over two
    shards that return the same state: the mean of two copies (exact in any float type), or for
    summed statistics the sum minus the one extra copy of the shared start."""
    from sparkhc.spark.mixing.mix import mix

    model, data = _fitted(name, slices, params)
    state = model.get_state()  # type: ignore[attr-defined]
    mixed, counters = mix(state, StateSum().add(state.copy()).add(state.copy()))
    assert counters["shards"] == 2
    _same_state(state, mixed)
    other = new_model(name, data, **params).set_state(mixed)
    assert other.predict(data.test) == model.predict(data.test)  # type: ignore[attr-defined]


@pytest.mark.parametrize("name,params", ALL_CASES)
def test_same_seed_gives_the_same_model(name: str, params: dict, slices: dict[str, Slice]) -> None:
    a, _ = _fitted(name, slices, params)
    b, _ = _fitted(name, slices, params)
    _same_state(a.get_state(), b.get_state())  # type: ignore[attr-defined]


@pytest.mark.parametrize("name,params", ALL_CASES)
def test_declared_capabilities_match_the_model(name: str, params: dict, slices: dict[str, Slice]) -> None:
    """``fits_open`` exactly when the class has its own ``fit_open``; ``touched_arrays`` only on
    models trained by mixing, naming feature-major arrays of the state whose rows ``touched_rows_``
    (when set after an epoch) has one flag for each; a model that accepts per-edge offsets
    implements ``shift_edges``."""
    cls = get_model_class(name)
    assert cls.fits_open == (cls.fit_open is not HierModel.fit_open)
    assert isinstance(cls.touched_arrays, tuple)
    assert not cls.touched_arrays or cls.training == "mixing"
    model, _ = _fitted(name, slices, params)
    assert isinstance(model, HierModel)
    if model.supports_edge_offsets():
        assert callable(getattr(model, "shift_edges", None))
    rows = model.touched_rows_
    if rows is not None:
        arrays = model.get_state().arrays
        named = [k for k in cls.touched_arrays if k in arrays]
        assert named, (cls.touched_arrays, sorted(arrays))
        for k in named:
            assert arrays[k].shape[0] == len(rows), k
    assert set(model.changed_rows()) == set(cls.touched_arrays)
