"""SKOS vocabularies as taxonomies (issue 56): what is read (broader/narrower reconciled, top
concepts, deprecated concepts, notations, labels in a language), the three syntaxes, and the
one-line refusals. The 20 Newsgroups vocabulary (tests/skos20ng.py) is the real taxonomy with
second parents added; its expected counts are worked out in that module's notes."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from sparkhc.errors import TaxonomyError
from sparkhc.taxonomy import Taxonomy
from tests.conftest import DATA_DIR
from tests.skos20ng import HARDWARE, SCHEME, label_de, parents_by_hand, read_tree, uri, write_vocabulary

pytest.importorskip("rdflib", reason="SKOS needs rdflib (a dependency of sparkhc)")

PREFIX = ("@prefix skos: <http://www.w3.org/2004/02/skos/core#> .\n@prefix owl: <http://www.w3.org/2002/07/owl#> .\n"
          "@prefix ex: <http://ex.org/> .\n")
SMALL = PREFIX + """
ex:s a skos:ConceptScheme .
ex:a a skos:Concept ; skos:topConceptOf ex:s ; skos:prefLabel "A"@en , "Aa"@fi ; skos:notation "1" .
ex:b a skos:Concept ; skos:prefLabel "B"@en-GB ; skos:notation "2" .
ex:x a skos:Concept ; skos:broader ex:a ; skos:prefLabel "X" .
ex:b skos:narrower ex:x .
ex:old a skos:Concept ; owl:deprecated true ; skos:broader ex:a .
"""
# the same vocabulary in N-Triples and RDF/XML
NT = """<http://ex.org/s> <http://www.w3.org/1999/02/22-rdf-syntax-ns#type> <http://www.w3.org/2004/02/skos/core#ConceptScheme> .
<http://ex.org/a> <http://www.w3.org/1999/02/22-rdf-syntax-ns#type> <http://www.w3.org/2004/02/skos/core#Concept> .
<http://ex.org/a> <http://www.w3.org/2004/02/skos/core#topConceptOf> <http://ex.org/s> .
<http://ex.org/a> <http://www.w3.org/2004/02/skos/core#prefLabel> "A"@en .
<http://ex.org/a> <http://www.w3.org/2004/02/skos/core#prefLabel> "Aa"@fi .
<http://ex.org/a> <http://www.w3.org/2004/02/skos/core#notation> "1" .
<http://ex.org/b> <http://www.w3.org/1999/02/22-rdf-syntax-ns#type> <http://www.w3.org/2004/02/skos/core#Concept> .
<http://ex.org/b> <http://www.w3.org/2004/02/skos/core#prefLabel> "B"@en-GB .
<http://ex.org/b> <http://www.w3.org/2004/02/skos/core#notation> "2" .
<http://ex.org/x> <http://www.w3.org/1999/02/22-rdf-syntax-ns#type> <http://www.w3.org/2004/02/skos/core#Concept> .
<http://ex.org/x> <http://www.w3.org/2004/02/skos/core#broader> <http://ex.org/a> .
<http://ex.org/x> <http://www.w3.org/2004/02/skos/core#prefLabel> "X" .
<http://ex.org/b> <http://www.w3.org/2004/02/skos/core#narrower> <http://ex.org/x> .
<http://ex.org/old> <http://www.w3.org/1999/02/22-rdf-syntax-ns#type> <http://www.w3.org/2004/02/skos/core#Concept> .
<http://ex.org/old> <http://www.w3.org/2002/07/owl#deprecated> "true"^^<http://www.w3.org/2001/XMLSchema#boolean> .
<http://ex.org/old> <http://www.w3.org/2004/02/skos/core#broader> <http://ex.org/a> .
"""
RDFXML = """<?xml version="1.0" encoding="utf-8"?>
<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns:skos="http://www.w3.org/2004/02/skos/core#"
         xmlns:owl="http://www.w3.org/2002/07/owl#">
  <skos:ConceptScheme rdf:about="http://ex.org/s"/>
  <skos:Concept rdf:about="http://ex.org/a">
    <skos:topConceptOf rdf:resource="http://ex.org/s"/>
    <skos:prefLabel xml:lang="en">A</skos:prefLabel><skos:prefLabel xml:lang="fi">Aa</skos:prefLabel>
    <skos:notation>1</skos:notation>
  </skos:Concept>
  <skos:Concept rdf:about="http://ex.org/b">
    <skos:prefLabel xml:lang="en-GB">B</skos:prefLabel><skos:notation>2</skos:notation>
    <skos:narrower rdf:resource="http://ex.org/x"/>
  </skos:Concept>
  <skos:Concept rdf:about="http://ex.org/x">
    <skos:broader rdf:resource="http://ex.org/a"/><skos:prefLabel>X</skos:prefLabel>
  </skos:Concept>
  <skos:Concept rdf:about="http://ex.org/old">
    <owl:deprecated rdf:datatype="http://www.w3.org/2001/XMLSchema#boolean">true</owl:deprecated>
    <skos:broader rdf:resource="http://ex.org/a"/>
  </skos:Concept>
</rdf:RDF>
"""


def _write(tmp_path: Path, text: str, name: str = "v.ttl") -> Path:
    f = tmp_path / name
    f.write_text(text, encoding="utf-8")
    return f


def test_small_vocabulary_by_hand(tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="sparkhc.vocab"):
        t = Taxonomy.load(_write(tmp_path, SMALL))
    # a is a top concept, b has no broader concept (under the root too); x has broader a (skos:broader)
    # and b (skos:narrower): two positions; the deprecated concept is skipped
    assert t.root_name == "http://ex.org/s"
    assert t.edges() == [("http://ex.org/s", "http://ex.org/a"), ("http://ex.org/s", "http://ex.org/b"),
                         ("http://ex.org/a", "http://ex.org/x@http://ex.org/a"),
                         ("http://ex.org/b", "http://ex.org/x@http://ex.org/b")]
    assert t.concept_info() == {"concepts": 3, "positions": 4, "vocabulary": "skos", "label_language": "en",
                                "deprecated_concepts": 1, "preferred_labels": 3}
    # en: exact tag for a, the primary language for b (en-GB), the untagged label for x
    assert [t.display_name("http://ex.org/" + c) for c in "abx"] == ["A", "B", "X"]
    # notations are label aliases; a concept URI with two positions stands for both
    assert t.label_aliases()["1"] == ("http://ex.org/a",)
    assert t.label_aliases()["http://ex.org/x"] == ("http://ex.org/x@http://ex.org/a", "http://ex.org/x@http://ex.org/b")
    assert "1 deprecated concept(s) skipped (owl:deprecated)" in caplog.text


def test_label_language_and_fallback(tmp_path):
    t = Taxonomy.load(_write(tmp_path, SMALL), language="fi")
    # fi: a has its Finnish label; b has none in fi and none untagged -> its only label; x -> untagged
    assert [t.display_name("http://ex.org/" + c) for c in "abx"] == ["Aa", "B", "X"]


@pytest.mark.parametrize("name,text", [("v.nt", NT), ("v.rdf", RDFXML), ("noext", SMALL), ("noext2", RDFXML)])
def test_other_syntaxes_give_the_same_taxonomy(tmp_path, name, text):
    ttl = Taxonomy.load(_write(tmp_path, SMALL))
    other = Taxonomy.load(_write(tmp_path, text, name))
    assert other == ttl and other.concepts is not None
    assert other.concepts.labels == ttl.concepts.labels and other.concepts.aliases == ttl.concepts.aliases


@pytest.mark.parametrize("text,pattern", [
    (PREFIX + "ex:a a skos:Concept ; skos:broader ex:zz .\n",
     r"^.*v\.ttl: concept http://ex\.org/a: skos:broader http://ex\.org/zz is not a skos:Concept of the file "
     r"\(a dangling link\)$"),
    (PREFIX + "ex:a a skos:Concept ; skos:broader ex:b .\nex:b a skos:Concept ; skos:broader ex:a .\n",
     r"^.*v\.ttl: concept http://ex\.org/[ab]: cycle of skos:broader links: http://ex\.org/(a|b) -> "
     r"http://ex\.org/(a|b) -> http://ex\.org/\1$"),
    (PREFIX + "ex:a a skos:Concept ; skos:broader ex:a .\n",
     r"^.*v\.ttl: concept http://ex\.org/a: cycle: it is its own skos:broader concept$"),
    (PREFIX + "ex:a a skos:Concept ; skos:broader .\n", r"^.*v\.ttl: not valid Turtle: .+$"),
    (PREFIX + "ex:a a skos:Concept ; skos:notation \"1\" .\nex:b a skos:Concept ; skos:notation \"1\" .\n",
     r"^.*v\.ttl: skos:notation '1' names two concepts, http://ex\.org/a and http://ex\.org/b$"),
    (PREFIX + "ex:a a ex:Thing .\n", r"^.*v\.ttl: no skos:Concept in the file"),
])
def test_bad_vocabularies_give_one_line_naming_file_and_concept(tmp_path, text, pattern):
    with pytest.raises(TaxonomyError, match=pattern) as e:
        Taxonomy.load(_write(tmp_path, text))
    assert "\n" not in str(e.value)


def test_malformed_rdf_xml_names_the_file(tmp_path):
    with pytest.raises(TaxonomyError, match=r"v\.rdf: not valid RDF/XML: ") as e:
        Taxonomy.load(_write(tmp_path, RDFXML.replace("</rdf:RDF>", ""), "v.rdf"))
    assert "\n" not in str(e.value)


def test_a_tsv_is_still_a_tsv(tmp_path):
    t = Taxonomy.load(_write(tmp_path, "ROOT\t<a>\n<a>\tb\n", "t.txt"))
    assert t.names == ("ROOT", "<a>", "b") and t.concepts is None


@pytest.fixture(scope="module")
def ng_vocab(tmp_path_factory) -> tuple[Path, Path]:
    tsv = DATA_DIR / "20newsgroups" / "taxonomy.tsv"
    if not tsv.is_file():
        pytest.skip(f"20 Newsgroups taxonomy not found at {tsv}")
    return write_vocabulary(tmp_path_factory.mktemp("skos") / "20ng.ttl", tsv), tsv


def test_20ng_polyhierarchy_by_hand(ng_vocab):
    path, tsv = ng_vocab
    t = Taxonomy.load(path)
    assert t.root_name == SCHEME
    # 26 concepts of the tree + hardware = 27; each hardware newsgroup has 2 positions: 29
    assert t.concept_info() == {"concepts": 27, "positions": 29, "vocabulary": "skos", "label_language": "en",
                                "deprecated_concepts": 1, "preferred_labels": 27}
    for h in HARDWARE:
        assert t.label_aliases()[h] == (f"{uri(h)}@{uri('computer')}", f"{uri(h)}@{uri('hardware')}")
    # the concept DAG's parents are those the module notes give
    dag = t.concept_taxonomy()
    want = {uri(c): {SCHEME if p == "ROOT" else uri(p) for p in ps} for c, ps in parents_by_hand(read_tree(tsv)).items()}
    got = {dag.names[c]: {dag.names[int(q)] for q in dag.parents[c]} for c in range(1, dag.n_nodes)}
    assert got == want
    # the closure of a hardware newsgroup: itself, computer and hardware
    ibm = dag.id(uri(HARDWARE[0]))
    assert {dag.names[int(c)] for c in dag.closure([ibm])} == {uri(HARDWARE[0]), uri("computer"), uri("hardware")}
    de = Taxonomy.load(path, language="de")
    assert de.display_name(uri("hardware")) == label_de("hardware") == "Rechnertechnik"
    assert de.fingerprint() == t.fingerprint()  # labels are not part of the taxonomy's identity
