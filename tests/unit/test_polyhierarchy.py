"""Polyhierarchies (issue 56): the tree of paths, the concept DAG, metrics closed over every parent,
the mapping of document labels to positions and of predicted positions back to concepts. Every
expected value is worked out by hand in the comments."""

from __future__ import annotations

import json
import pickle
from fractions import Fraction

import numpy as np
import pytest

from sparkhc.batch import label_matrix
from sparkhc.corpus import readers
from sparkhc.corpus.records import UnknownLabelError
from sparkhc.errors import TaxonomyError
from sparkhc.metrics import MetricCounts
from sparkhc.polyhierarchy import expand
from sparkhc.taxonomy import ConceptDag, Taxonomy

# R -> comp, hw; comp -> ibm, mac, gfx; hw -> ibm, mac; ibm -> disk (a child of a two-position concept)
EDGES = [("R", "comp"), ("R", "hw"), ("comp", "ibm"), ("comp", "mac"), ("comp", "gfx"), ("hw", "ibm"),
         ("hw", "mac"), ("ibm", "disk")]


@pytest.fixture()
def tax() -> Taxonomy:
    return Taxonomy.from_edges(EDGES)


def test_tree_of_paths_by_hand(tax):
    # positions: comp, hw, gfx (one path each); ibm and mac under comp and under hw; disk under each ibm
    assert tax.edges() == [("R", "comp"), ("R", "hw"), ("comp", "gfx"), ("comp", "ibm@comp"), ("comp", "mac@comp"),
                           ("hw", "ibm@hw"), ("hw", "mac@hw"), ("ibm@comp", "disk@ibm@comp"),
                           ("ibm@hw", "disk@ibm@hw")]
    assert tax.concept_of == {"ibm@comp": "ibm", "ibm@hw": "ibm", "mac@comp": "mac", "mac@hw": "mac",
                              "disk@ibm@comp": "disk", "disk@ibm@hw": "disk"}
    assert tax.concept_info() == {"concepts": 6, "positions": 9}
    assert tax.is_polyhierarchy and not Taxonomy.from_edges(EDGES[:5]).is_polyhierarchy


def test_a_tree_is_unchanged():
    t = Taxonomy.from_edges([("R", "a"), ("a", "b")])
    assert t.concepts is None and t.concept_of == {} and t.concept_taxonomy() == t
    assert t.to_tsv() == "R\ta\na\tb\n"


def test_positions_limit_names_the_count():
    # R -> a1, b1; a_i and b_i both parents of a_{i+1} and b_{i+1}: level k has 2 x 2^(k-1) positions,
    # three levels 2 + 4 + 8 = 14
    edges = [("R", "a1"), ("R", "b1")]
    for i in (1, 2):
        for p in (f"a{i}", f"b{i}"):
            edges += [(p, f"a{i + 1}"), (p, f"b{i + 1}")]
    assert Taxonomy.from_edges(edges, max_positions=14).n_nodes - 1 == 14
    with pytest.raises(TaxonomyError, match=r"^t\.tsv: the polyhierarchy of 6 concepts has 14 positions \(paths from "
                                            r"the root\), above the limit of 13; raise featurize\.max_positions"):
        Taxonomy.from_edges(edges, source="t.tsv", max_positions=13)


def test_a_cycle_through_a_second_parent_is_still_a_cycle():
    with pytest.raises(TaxonomyError, match=r"cycle: b -> c -> b"):
        Taxonomy.from_edges([("R", "a"), ("a", "b"), ("b", "c"), ("c", "b")])


def test_position_name_clash_is_refused():
    with pytest.raises(TaxonomyError, match=r"the position 'x@a' of concept 'x' has the name of another concept"):
        expand({"a": ["R"], "b": ["R"], "x": ["a", "b"], "x@a": ["R"]}, "R", "t.tsv")


def test_tsv_round_trip_fingerprint_and_pickle(tax, tmp_path):
    text = tax.to_tsv()
    assert "#sparkhc:position\tibm@hw\tibm\n" in text
    back = Taxonomy.from_tsv_text(text)
    f = tmp_path / "t.tsv"
    f.write_text(text)
    assert back == tax and Taxonomy.load(f) == tax
    assert back.fingerprint() == tax.fingerprint()
    # the same tree of positions without the concepts is another taxonomy
    plain = Taxonomy.from_edges(tax.edges())
    assert plain.fingerprint() != tax.fingerprint() and plain != tax
    assert pickle.loads(pickle.dumps(tax)) == tax
    dag = tax.concept_taxonomy()
    assert pickle.loads(pickle.dumps(dag)) == dag
    # virtual leaves keep the concept layer (a model taxonomy)
    v = tax.with_self_leaves(["ibm@hw"])
    assert v.concept_name(v.id("ibm@hw/_self")) == "ibm"
    assert Taxonomy.from_tsv_text(v.to_tsv()) == v


def test_concept_dag_by_hand(tax):
    dag = tax.concept_taxonomy()
    assert isinstance(dag, ConceptDag)
    assert dag.names == ("R", "comp", "hw", "gfx", "ibm", "mac", "disk")
    par = {dag.names[c]: sorted(dag.names[q] for q in dag.parents[c]) for c in range(1, dag.n_nodes)}
    assert par == {"comp": ["R"], "hw": ["R"], "gfx": ["comp"], "ibm": ["comp", "hw"], "mac": ["comp", "hw"],
                   "disk": ["ibm"]}

    def names(ids):
        return sorted(dag.names[int(c)] for c in ids)

    # the DAG closure of disk: disk, ibm, and both parents of ibm
    assert names(dag.closure([dag.id("disk")])) == ["comp", "disk", "hw", "ibm"]
    assert names(dag.ancestors(dag.id("disk"))) == ["comp", "hw", "ibm"]
    assert names(dag.deepest(dag.closure([dag.id("disk"), dag.id("mac")]))) == ["disk", "mac"]
    assert names(np.flatnonzero(dag.is_leaf)) == ["disk", "gfx", "mac"]
    assert dag.fingerprint() == Taxonomy.from_edges([(p, c) for c, ps in par.items() for p in ps]).concept_taxonomy().fingerprint()


def test_label_names_and_aliases(tax):
    assert tax.label_names() == frozenset({"comp", "hw", "gfx"})
    assert tax.label_aliases() == {"ibm": ("ibm@comp", "ibm@hw"), "mac": ("mac@comp", "mac@hw"),
                                   "disk": ("disk@ibm@comp", "disk@ibm@hw")}


def test_reader_gives_a_document_every_position_of_its_concepts(tax, tmp_path):
    docs = tmp_path / "d.jsonl"
    docs.write_text("\n".join(json.dumps(r) for r in [
        {"id": "1", "text": "a", "labels": ["disk"]},
        {"id": "2", "text": "b", "labels": ["comp", "mac"]},
        {"id": "3", "text": "c", "labels": ["gfx"]},
    ]) + "\n")
    table = readers.to_table(readers.read_any(str(docs), taxonomy=tax)[0])
    assert table.column("labels").to_pylist() == [["disk@ibm@comp", "disk@ibm@hw"], ["comp", "mac@comp", "mac@hw"],
                                                  ["gfx"]]
    # a position's own name is not a label; an unknown one is named
    docs.write_text(json.dumps({"id": "1", "text": "a", "labels": ["ibm@hw"]}) + "\n")
    with pytest.raises(UnknownLabelError, match=r"label 'ibm@hw' is not a node of the taxonomy"):
        readers.to_table(readers.read_any(str(docs), taxonomy=tax)[0])


def test_predicted_positions_map_back_to_concepts(tax):
    # doc 1: both positions of ibm (scores 0.2, 0.7) -> ibm with 0.7; doc 2: hw and mac@comp -> hw is an
    # ancestor of mac over its second parent, so only mac is listed; doc 3: disk@ibm@hw -> disk
    labels, scores = tax.concept_predictions([["ibm@comp", "ibm@hw"], ["hw", "mac@comp"], ["disk@ibm@hw"]],
                                             [[0.2, 0.7], [0.5, 0.1], [0.3]])
    assert labels == [["ibm"], ["mac"], ["disk"]] and scores == [[0.7], [0.1], [0.3]]
    assert tax.concept_labels([["comp", "ibm@comp", "ibm@hw"], None]) == [["comp", "ibm"], None]


def test_metrics_on_the_concepts_by_hand(tax):
    dag = tax.concept_taxonomy()
    # gold {disk} closes to {disk, ibm, comp, hw}; predicted {mac} closes to {mac, comp, hw}
    # TP = comp, hw; FP = mac; FN = ibm, disk -> hP = 2/3, hR = 2/4, hF = 2*2/(3+4) = 4/7
    mc = MetricCounts(dag)
    gold, pred = label_matrix([["disk"]], dag), label_matrix([["mac"]], dag)
    mc.add(gold, pred)
    m = mc.compute()
    assert (m["hP"], m["hR"], m["hF"]) == (2 / 3, 0.5, 4 / 7)
    # H-loss: the symmetric difference is {mac, ibm, disk}; ibm and mac have no ancestor in it (comp and
    # hw agree), disk has ibm: 2 mistakes. Normalized costs: comp = hw = 1/2; comp has 3 children, hw 2:
    # mac = ibm = (1/2)/3 + (1/2)/2 = 5/12, so the loss is 5/12 + 5/12 = 5/6
    assert m["hloss_uniform"] == 2.0 and m["symdiff"] == 3.0
    assert mc.cost(dag.id("ibm")) == Fraction(5, 12) and mc.cost(dag.id("disk")) == Fraction(5, 12)
    assert m["hloss_normalized"] == float(Fraction(5, 6))
    # the same cost as the sum of the positions' costs in the tree of paths
    pos = MetricCounts(tax)
    assert pos.cost(tax.id("ibm@comp")) + pos.cost(tax.id("ibm@hw")) == Fraction(5, 12)
    # a set that is not closed over every parent is refused, naming the missing parent
    with pytest.raises(ValueError, match=r"node 'ibm' is present but its parent 'hw' is not"):
        mc.add(gold, label_matrix([["comp", "ibm"]], dag, closed=False))


def test_the_dag_code_gives_the_tree_metrics_on_a_tree():
    # a tree seen as a concept DAG (one parent each): the DAG branch of MetricCounts equals the tree one
    edges = [("R", "a"), ("R", "b"), ("a", "a1"), ("a", "a2"), ("b", "b1"), ("a1", "x"), ("a1", "y")]
    tree = Taxonomy.from_edges(edges)
    dag = ConceptDag.of(tree)
    rng = np.random.default_rng(0)
    leaves = ["x", "y", "a2", "b1", "a", "b"]
    gold = [list(rng.choice(leaves, size=rng.integers(1, 3), replace=False)) for _ in range(40)]
    pred = [list(rng.choice(leaves, size=rng.integers(0, 3), replace=False)) for _ in range(40)]
    a, b = MetricCounts(tree), MetricCounts(dag)
    a.add(label_matrix(gold, tree), label_matrix(pred, tree))
    b.add(label_matrix(gold, dag), label_matrix(pred, dag))
    assert tree.names == dag.names and a.compute() == b.compute()


def test_a_model_declares_whether_it_trains_on_a_polyhierarchy():
    from sparkhc.models import get_model_class, names

    able = {n for n in names() if get_model_class(n).supports_polyhierarchy}
    assert {"global", "flat", "tree", "h_svm", "tdnb"} <= able
    assert {"m3mdc", "mdc_br"}.isdisjoint(able)
