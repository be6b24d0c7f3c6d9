"""Taxonomy misuse: a cycle entered from the tree is reported as a cycle (not as two parents), with
the lines of its edges; a duplicated edge line is used once, with a warning naming its lines."""

from __future__ import annotations

import logging

import pytest

from sparkhc.errors import TaxonomyError
from sparkhc.taxonomy import Taxonomy


def _write(tmp_path, text, name="t.tsv"):
    f = tmp_path / name
    f.write_text(text)
    return f


def test_cycle_entered_from_the_tree_is_reported_as_a_cycle(tmp_path):
    f = _write(tmp_path, "ROOT\tA\nA\tB\nB\tC\nC\tA\n")
    with pytest.raises(TaxonomyError) as e:
        Taxonomy.load(f)
    msg = str(e.value)
    assert msg == f"{f}, lines 2, 3, 4: cycle: A -> B -> C -> A (node 'A' also has the parent 'ROOT', line 1)"
    assert "two parents" not in msg and "DAG" not in msg


def test_cycle_listed_before_the_edge_from_the_tree(tmp_path):
    # the conflict is found on the root's edge (line 5): still the cycle, with its own lines
    f = _write(tmp_path, "# cycle first\nA\tB\nB\tA\n\nROOT\tA\n")
    with pytest.raises(TaxonomyError, match=r"t\.tsv, lines 2, 3: cycle: A -> B -> A \(node 'A' also has the "
                                            r"parent 'ROOT', line 5\)$"):
        Taxonomy.load(f)


def test_cycle_in_memory_names_the_edges():
    with pytest.raises(TaxonomyError, match=r"^<memory>, edges 2, 3: cycle: A -> B -> A \(node 'A' also has "
                                            r"the parent 'R', edge 1\)$"):
        Taxonomy.from_edges([("R", "A"), ("A", "B"), ("B", "A")])


def test_rcv1_cycle_below_the_declared_root(tmp_path):
    f = _write(tmp_path, "parent: None child: Root child-description: r\n"
                         "parent: Root child: A child-description: a\n"
                         "parent: A child: B child-description: b\n"
                         "parent: B child: A child-description: a again\n", "h.orig")
    with pytest.raises(TaxonomyError, match=r"h\.orig, lines 3, 4: cycle: A -> B -> A \(node 'A' also has the "
                                            r"parent 'Root', line 2\)"):
        Taxonomy.load(f)


def test_node_with_two_parents_and_no_cycle_is_a_polyhierarchy(tmp_path):
    # X has two parents and no cycle: no longer refused; the tree of its paths (issue 56)
    f = _write(tmp_path, "ROOT\tA\nROOT\tB\nA\tX\nB\tX\n")
    t = Taxonomy.load(f)
    assert t.names == ("ROOT", "A", "B", "X@A", "X@B")
    assert t.concept_of == {"X@A": "X", "X@B": "X"}


def test_duplicate_edge_is_used_once_with_a_warning(tmp_path, caplog):
    f = _write(tmp_path, "ROOT\tA\nA\tB\nROOT\tA\n# again\nA\tB\nA\tB\nROOT\tC\n")
    with caplog.at_level(logging.WARNING, logger="sparkhc.taxonomy"):
        t = Taxonomy.load(f)
    assert t == Taxonomy.from_edges([("ROOT", "A"), ("A", "B"), ("ROOT", "C")])
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    msg = warnings[0].getMessage()
    assert msg == (f"{f}: 2 duplicate edge(s), each used once: 'ROOT' -> 'A' (lines 1, 3); "
                   "'A' -> 'B' (lines 2, 5, 6)")


def test_no_warning_without_duplicates(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="sparkhc.taxonomy"):
        Taxonomy.load(_write(tmp_path, "ROOT\tA\nA\tB\n"))
    assert not caplog.records
