"""Taxonomy: loading, structure, virtual leaves, fingerprint, and the error cases."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from sparkhc.errors import TaxonomyError
from sparkhc.taxonomy import SELF_SUFFIX, VIRTUAL_ROOT, Taxonomy
from tests.conftest import corpus_dir

FIG1 = [("ROOT", "A"), ("ROOT", "B"), ("A", "AA"), ("A", "AB"), ("B", "BA"), ("B", "BB")]


def test_figure1_structure():
    t = Taxonomy.from_edges(FIG1)
    assert t.names == ("ROOT", "A", "B", "AA", "AB", "BA", "BB")  # level order, children by name
    assert t.parent.tolist() == [-1, 0, 0, 1, 1, 2, 2]
    assert t.depth.tolist() == [0, 1, 1, 2, 2, 2, 2]
    assert [t.names[c] for c in t.leaves] == ["AA", "AB", "BA", "BB"]
    assert t.path(t.id("AB")) == [t.id("A"), t.id("AB")]
    assert t.ancestors(t.id("AB")) == [t.id("A")]
    assert [t.names[c] for c in t.leaves_under(t.id("B"))] == ["BA", "BB"]
    assert [t.names[c] for c in t.closure([t.id("AB"), t.id("BA")])] == ["A", "B", "AB", "BA"]
    assert [t.names[c] for c in t.deepest(t.closure([t.id("AB"), t.id("B")]))] == ["B", "AB"]
    # ancestor matrix row of AB: A and AB
    a = t.ancestor_matrix().toarray()
    assert a[t.id("AB")].tolist() == [0, 1, 0, 0, 1, 0, 0]
    assert a[0].sum() == 0
    assert t.max_depth == 2 and t.n_edges == 6


def test_fingerprint_stable_under_file_order(tmp_path):
    f1 = tmp_path / "a.tsv"
    f2 = tmp_path / "b.tsv"
    f1.write_text("".join(f"{p}\t{c}\n" for p, c in FIG1))
    f2.write_text("# comment\n\n" + "".join(f"{p}\t{c}\n" for p, c in reversed(FIG1)))
    t1, t2 = Taxonomy.load(f1), Taxonomy.load(f2)
    assert t1 == t2 and t1.fingerprint() == t2.fingerprint()
    t3 = Taxonomy.from_edges([*FIG1, ("B", "BC")])
    assert t3.fingerprint() != t1.fingerprint()


def test_rcv1_tree(tmp_path):
    d = corpus_dir("rcv1v2_subset")
    t = Taxonomy.load(d / "taxonomy.tsv")
    assert t.root_name == "Root"
    assert t.n_nodes - 1 == 103
    assert t.max_depth == 4
    assert len(t.leaves) == 82
    assert [t.names[c] for c in t.children[0]] == ["CCAT", "ECAT", "GCAT", "MCAT"]
    assert [t.names[c] for c in t.path(t.id("C1511"))] == ["CCAT", "C15", "C151", "C1511"]
    # the same tree in the RCV1 hierarchy format
    lines = ["parent: None       child: Root       child-description: Root"]
    for p, c in t.edges():
        lines.append(f"parent: {p}   child: {c}   child-description: SOME DESCRIPTION")
    f = tmp_path / "rcv1.topics.hier.orig"
    f.write_text("\n".join(lines) + "\n")
    t2 = Taxonomy.load(f)
    assert t2 == t and t2.fingerprint() == t.fingerprint()


def test_self_leaves_partial_paths():
    t = Taxonomy.from_edges(FIG1).with_self_leaves()
    assert set(n for n in t.names if n.endswith(SELF_SUFFIX)) == {"A/_self", "B/_self"}
    assert t.virtual.sum() == 2
    # a label set that stops at A (plus the leaf BA) becomes {A/_self, BA}
    m = t.to_leaf_set(["A", "BA"])
    assert sorted(t.names[c] for c in m) == ["A/_self", "BA"]
    # ancestors listed or not, the same leaf set
    assert t.to_leaf_set(["B", "BA", "A"]).tolist() == m.tolist()
    # and back: virtual leaves map to their parent
    assert t.to_labels(m) == ["A", "BA"]
    # the real fingerprint ignores virtual leaves; the base tree comes back
    base = Taxonomy.from_edges(FIG1)
    assert t.fingerprint() == base.fingerprint()
    assert t.fingerprint(include_virtual=True) != base.fingerprint(include_virtual=True)
    assert t.base() == base
    # round trip through TSV text and pickle keeps the virtual leaves
    assert Taxonomy.from_tsv_text(t.to_tsv()) == t
    assert pickle.loads(pickle.dumps(t)) == t


def test_partial_path_without_self_leaf_is_an_error():
    t = Taxonomy.from_edges(FIG1)
    with pytest.raises(TaxonomyError, match="'A'.*internal node"):
        t.to_leaf_set(["A"])


def test_forest_gets_virtual_root():
    t = Taxonomy.from_edges([("X", "X1"), ("Y", "Y1"), ("Y", "Y2")])
    assert t.root_name == VIRTUAL_ROOT
    assert [t.names[c] for c in t.children[0]] == ["X", "Y"]


def _write(tmp_path, text, name="tax.tsv"):
    f = tmp_path / name
    f.write_text(text)
    return f


def test_error_cycle(tmp_path):
    f = _write(tmp_path, "ROOT\tA\nB\tC\nC\tD\nD\tB\n")
    with pytest.raises(TaxonomyError, match=r"cycle: B -> D -> C -> B|cycle: .*->.*not reachable") as e:
        Taxonomy.load(f)
    assert str(f) in str(e.value)


def test_error_self_loop(tmp_path):
    with pytest.raises(TaxonomyError, match=r"line 2: cycle: node 'A' is its own parent"):
        Taxonomy.load(_write(tmp_path, "ROOT\tA\nA\tA\n"))


def test_two_parents_make_a_polyhierarchy(tmp_path):
    # (before issue 56: refused as a DAG) X under A and B: one position per path, named concept@parent
    t = Taxonomy.load(_write(tmp_path, "ROOT\tA\nA\tX\nB\tX\nROOT\tB\n"))
    assert t.edges() == [("ROOT", "A"), ("ROOT", "B"), ("A", "X@A"), ("B", "X@B")]
    assert t.is_polyhierarchy and t.concept_name(t.id("X@B")) == "X"


def test_error_unknown_parent(tmp_path):
    f = _write(tmp_path, "ROOT\tA\nAx\tAA\n")
    with pytest.raises(TaxonomyError, match=r"line 2: unknown parent 'Ax'"):
        Taxonomy.load(f, root="ROOT")
    rc = _write(tmp_path, "parent: None child: Root child-description: R\nparent: Root child: A child-description: a\nparent: Q child: B child-description: b\n", "h.orig")
    with pytest.raises(TaxonomyError, match=r"line 3: unknown parent 'Q'"):
        Taxonomy.load(rc)


def test_error_empty_file(tmp_path):
    with pytest.raises(TaxonomyError, match="empty"):
        Taxonomy.load(_write(tmp_path, "\n# nothing\n"))


def test_error_bad_line_and_missing_file(tmp_path):
    with pytest.raises(TaxonomyError, match=r"line 2: expected 'parent<TAB>child'"):
        Taxonomy.load(_write(tmp_path, "ROOT\tA\nA B\n"))
    with pytest.raises(TaxonomyError, match="not found"):
        Taxonomy.load(tmp_path / "nope.tsv")
    with pytest.raises(TaxonomyError, match="reserved suffix"):
        Taxonomy.load(_write(tmp_path, "ROOT\tA/_self\n"))


def test_unknown_label_named():
    t = Taxonomy.from_edges(FIG1)
    with pytest.raises(TaxonomyError, match="unknown label 'ZZ'"):
        t.id("ZZ")


def test_real_taxonomies_load(data_dir):
    n = Taxonomy.load(data_dir / "20newsgroups" / "taxonomy.tsv")
    assert (n.n_nodes - 1, len(n.leaves), n.max_depth) == (26, 20, 2)
    r = Taxonomy.load(data_dir / "reuters21578" / "taxonomy_topics.tsv")
    assert (len(r.leaves), r.max_depth) == (135, 2)
    np.testing.assert_array_equal(r.depth[r.leaves], 2)


def test_leaf_matrix_equals_the_label_matrix_of_the_predicted_names():
    """sparkhc.batch.leaf_matrix (the epoch selection's scoring) = label_matrix of the names
    HierModel.predict gives (Taxonomy.to_labels), virtual leaves and empty sets included."""
    from sparkhc.batch import label_matrix, leaf_matrix

    t = Taxonomy.from_edges(FIG1).with_self_leaves(["A", "B"])
    ids = {n: t.id(n) for n in t.names}
    sets = [[ids["AA"]], [ids["A/_self"]], [ids["A/_self"], ids["BB"]], [], [ids["B/_self"], ids["BA"], ids["AB"]]]
    got = leaf_matrix([np.array(m, dtype=np.int32) for m in sets], t)
    want = label_matrix([t.to_labels(m) for m in sets], t)
    assert (got != want).nnz == 0 and got.shape == want.shape == (5, t.n_nodes)
    assert sorted(t.names[c] for c in got[2].indices) == ["A", "B", "BB"]
    assert leaf_matrix([], t).shape == (0, t.n_nodes)
