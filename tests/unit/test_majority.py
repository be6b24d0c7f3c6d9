"""The majority baseline (the worked example of adding a model, docs/architecture.md): expected
values counted by hand."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from sparkhc.batch import SparseBatch
from sparkhc.errors import ConfigError
from sparkhc.models import get_model_class
from sparkhc.models.base import combine_states
from sparkhc.models.majority import Majority
from sparkhc.taxonomy import Taxonomy

ROOT = Path(__file__).resolve().parents[2]
TAX = Taxonomy.from_edges([("ROOT", "A"), ("A", "a1"), ("A", "a2"), ("ROOT", "B")])


def _batch(labels: list[list[str]]) -> SparseBatch:
    n = len(labels)
    return SparseBatch(X=sp.csr_matrix((n, 3), dtype=np.float32), doc_ids=np.array([f"d{i}" for i in range(n)]),
                       labels=labels)


def test_predicts_the_leaves_half_the_documents_hold() -> None:
    # a1 in 3 of 4 documents (0.75), a2 and B in 1 (0.25): {a1}
    m = Majority(TAX, 3).fit(_batch([["a1"], ["a1", "B"], ["a2"], ["A", "a1"]]))
    assert m.predict(_batch([[], []])) == [["a1"], ["a1"]]
    np.testing.assert_array_equal(m.get_state().arrays["leaf_docs"][[TAX.id("a1"), TAX.id("a2"), TAX.id("B")]],
                                  [3, 1, 1])
    # two leaves at exactly one half: both
    assert sorted(Majority(TAX, 3).fit(_batch([["a1"], ["B"]])).predict(_batch([[]]))[0]) == ["B", "a1"]
    # no leaf reaches min_share: the most frequent one
    m = Majority(TAX, 3, min_share=0.9).fit(_batch([["a1"], ["a1", "B"], ["a2"]]))
    assert m.predict(_batch([[]])) == [["a1"]]


def test_summed_shards_equal_one_pass_and_epochs_do_not_recount() -> None:
    docs = [["a1"], ["a1", "B"], ["a2"], ["A", "a1"], ["B"]]
    one = Majority(TAX, 3).fit(_batch(docs))
    s1, s2 = Majority(TAX, 3).fit(_batch(docs[:2])), Majority(TAX, 3).fit(_batch(docs[2:]))
    mixed = combine_states([s1.get_state(), s2.get_state()])
    np.testing.assert_array_equal(mixed.arrays["leaf_docs"], one.get_state().arrays["leaf_docs"])
    assert Majority.single_pass and Majority.training == "mixing"


def test_registered_without_a_registry_edit_and_validated() -> None:
    assert get_model_class("majority") is Majority
    with pytest.raises(ConfigError, match="min_share"):
        Majority(TAX, 3, min_share=0).fit(_batch([["a1"]]))


def test_the_architecture_page_shows_this_module_verbatim() -> None:
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    m = re.search(r"<!-- majority.py -->\n```python\n(.*?)```\n", page, re.S)
    assert m, "docs/architecture.md: the worked example block (<!-- majority.py -->) is missing"
    assert m.group(1) == (ROOT / "sparkhc" / "models" / "majority.py").read_text(encoding="utf-8")
