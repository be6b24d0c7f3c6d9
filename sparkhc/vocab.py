"""SKOS vocabularies as taxonomies: ``--taxonomy vocab.ttl`` (Turtle, RDF/XML or N-Triples).

Libraries, archives and agencies keep their subject vocabularies in SKOS (YSO, GND, STW, EuroVoc,
MeSH's RDF). :func:`read_skos` reads one with rdflib into what
:meth:`sparkhc.taxonomy.Taxonomy.from_edges` builds a taxonomy from:

* the concepts are the resources typed ``skos:Concept``, named by their URIs;
* the hierarchy is ``skos:broader`` and ``skos:narrower``, in either direction or both: a link
  given both ways is one link, and a concept may have several broader concepts (a polyhierarchy:
  :mod:`sparkhc.polyhierarchy`);
* the top concepts (``skos:topConceptOf``, ``skos:hasTopConcept``) and the concepts without a
  broader concept are the children of the root, named by the concept scheme's URI when the file has
  exactly one scheme (else ``_ROOT_``);
* a deprecated concept (``owl:deprecated true``) is skipped with its links, and counted;
* ``skos:notation`` values are other names a document's label may take;
* ``skos:prefLabel`` in the chosen language (``featurize.label_language``; else the same primary
  language, a label without a language, then any, in a fixed order) is what reports and predictions
  show.

A file rdflib cannot parse, a broader or narrower link to a resource that is not a concept of the
file, a cycle, or a notation of two concepts is refused in one line naming the file and the concept.
rdflib is imported here only, when a SKOS file is read.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path

from sparkhc.errors import TaxonomyError
from sparkhc.polyhierarchy import DEFAULT_LABEL_LANGUAGE, ConceptLayer

log = logging.getLogger(__name__)

#: file name endings -> rdflib parser names
RDF_SUFFIXES: dict[str, str] = {
    ".ttl": "turtle", ".turtle": "turtle", ".n3": "turtle",
    ".nt": "nt", ".ntriples": "nt",
    ".rdf": "xml", ".owl": "xml", ".xml": "xml", ".skos": "xml",
}
_FORMAT_NAMES = {"turtle": "Turtle", "nt": "N-Triples", "xml": "RDF/XML"}
_NT_LINE = re.compile(r"^\s*(<[^>\s]*>|_:\S+)\s+<[^>\s]*>\s+")
_VIRTUAL_ROOT = "_ROOT_"  # as sparkhc.taxonomy.VIRTUAL_ROOT (that module imports this one)
SKOS_NS = "http://www.w3.org/2004/02/skos/core#"
OWL_DEPRECATED = "http://www.w3.org/2002/07/owl#deprecated"


@dataclass(frozen=True)
class Vocabulary:
    """A SKOS file read: the ``(parent, child)`` edges (concept URIs; the root for top concepts), the
    root's name and the :class:`~sparkhc.polyhierarchy.ConceptLayer` (labels, notations, deprecated)."""

    edges: list[tuple[str, str]]
    root: str
    layer: ConceptLayer
    concepts: int


def rdf_format(path: Path, text: str) -> str | None:
    """The rdflib parser of a taxonomy file, from its name ending or, for another name, its first
    lines (Turtle ``@prefix``, RDF/XML, N-Triples); None for a TSV or RCV1 file."""
    fmt = RDF_SUFFIXES.get(path.suffix.lower())
    if fmt is not None:
        return fmt
    for line in text.splitlines()[:50]:
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        if "\t" in line and not s.startswith("<"):
            return None
        low = s.lower()
        if low.startswith(("@prefix", "@base", "prefix ", "base ")):
            return "turtle"
        if low.startswith(("<?xml", "<rdf:rdf")):
            return "xml"
        if _NT_LINE.match(s):
            return "nt"
        return None
    return None


def _one_line(text: object, limit: int = 240) -> str:
    s = " ".join(str(text).split())
    return s if len(s) <= limit else s[: limit - 3] + "..."


def _is_true(value: object) -> bool:
    py = getattr(value, "toPython", lambda: value)()
    return py is True or str(value).strip().lower() in ("true", "1")


def _pick_label(labels: list[tuple[str, str]], language: str) -> str | None:
    """The label of ``(language tag, text)`` pairs in ``language``: its exact tag, else the same
    primary language, else one without a tag, else the first by tag and text."""
    if not labels:
        return None
    want = language.lower()
    ordered = sorted(labels)
    for test in (lambda t: t == want, lambda t: t.split("-")[0] == want.split("-")[0] and want != "",
                 lambda t: t == "", lambda t: True):
        for tag, text in ordered:
            if test(tag.lower()):
                return text
    return None


def read_skos(path: str | Path, fmt: str, language: str = DEFAULT_LABEL_LANGUAGE, text: str | None = None) -> Vocabulary:
    """Read a SKOS vocabulary (``fmt``: an rdflib parser name, see :func:`rdf_format`).

    Parameters
    ----------
    path : str or Path
        The file (named in every message).
    fmt : {"turtle", "nt", "xml"}
        Its syntax.
    language : str
        The language of the labels shown (``skos:prefLabel``); see the module notes for the fallback.
    text : str, optional
        The file's text when already read.
    """
    path = Path(path)
    try:
        import rdflib
        from rdflib.namespace import RDF
    except ImportError:
        raise TaxonomyError(f"{path}: reading a SKOS vocabulary needs rdflib (pip install rdflib)") from None
    skos = rdflib.Namespace(SKOS_NS)
    graph = rdflib.Graph()
    data = text if text is not None else path.read_text(encoding="utf-8")
    try:
        graph.parse(data=data, format=fmt, publicID=path.resolve().as_uri())
    except Exception as e:  # rdflib raises many types (BadSyntax, SAXParseException, ParserError, ...)
        raise TaxonomyError(f"{path}: not valid {_FORMAT_NAMES.get(fmt, fmt)}: {_one_line(e)}") from None

    typed = {s for s in graph.subjects(RDF.type, skos.Concept)}
    if not typed:
        raise TaxonomyError(f"{path}: no skos:Concept in the file (a SKOS vocabulary types its concepts "
                            "skos:Concept)")
    deprecated = {c for c in typed if any(_is_true(v) for v in graph.objects(c, rdflib.URIRef(OWL_DEPRECATED)))}
    live = typed - deprecated
    schemes = sorted(str(s) for s in graph.subjects(RDF.type, skos.ConceptScheme))
    root = schemes[0] if len(schemes) == 1 else _VIRTUAL_ROOT
    if root in {str(c) for c in live}:
        raise TaxonomyError(f"{path}: the concept scheme {root} is also a skos:Concept")

    def name(node: object) -> str:
        return str(node)

    links: set[tuple[str, str]] = set()  # (broader, narrower)
    to_deprecated = 0
    for prop, down in ((skos.broader, False), (skos.narrower, True)):
        for s, o in graph.subject_objects(prop):
            if s in deprecated or (s not in typed and o in deprecated):
                continue
            if s not in typed:
                raise TaxonomyError(f"{path}: {name(s)} has skos:{'narrower' if down else 'broader'} {name(o)} but "
                                    "is not a skos:Concept of the file")
            if o not in typed:
                raise TaxonomyError(f"{path}: concept {name(s)}: skos:{'narrower' if down else 'broader'} {name(o)} "
                                    "is not a skos:Concept of the file (a dangling link)")
            if o in deprecated:
                to_deprecated += 1
                continue
            if s == o:
                raise TaxonomyError(f"{path}: concept {name(s)}: cycle: it is its own skos:broader concept")
            links.add((name(o), name(s)) if not down else (name(s), name(o)))
    tops: set[str] = set()
    for c, _ in graph.subject_objects(skos.topConceptOf):
        if c in live:
            tops.add(name(c))
    for _, c in graph.subject_objects(skos.hasTopConcept):
        if c in live:
            tops.add(name(c))
    live_names = sorted(name(c) for c in live)
    parents: dict[str, list[str]] = {c: [] for c in live_names}
    for broader, narrower in sorted(links):
        parents[narrower].append(broader)
    _check_acyclic(parents, path)
    edges = sorted(links)
    edges += [(root, c) for c in live_names if c in tops or not parents[c]]

    labels: dict[str, str] = {}
    aliases: dict[str, str] = {}
    for c in sorted(live, key=str):
        pref = [(getattr(o, "language", None) or "", str(o)) for o in graph.objects(c, skos.prefLabel)]
        label = _pick_label(pref, language)
        if label is not None and label.strip():
            labels[name(c)] = label
        for note in sorted(str(o) for o in graph.objects(c, skos.notation)):
            other = aliases.get(note)
            if other is not None and other != name(c):
                raise TaxonomyError(f"{path}: skos:notation {note!r} names two concepts, {other} and {name(c)}")
            aliases[note] = name(c)
    if deprecated:
        log.info("%s: %d deprecated concept(s) skipped (owl:deprecated)%s", path, len(deprecated),
                 f"; {to_deprecated} broader/narrower link(s) to them ignored" if to_deprecated else "")
    no_label = len(live) - len(labels)
    log.info("%s: SKOS vocabulary: %d concepts, %d broader links, %d top concepts, labels in %r%s", path,
             len(live_names), len(links), sum(1 for c in live_names if c in tops or not parents[c]), language,
             f" ({no_label} concept(s) without skos:prefLabel are shown by their URI)" if no_label else "")
    layer = ConceptLayer(labels=labels, aliases=aliases, deprecated=len(deprecated), vocabulary="skos",
                         language=language)
    return Vocabulary(edges=edges, root=root, layer=layer, concepts=len(live_names))


def _check_acyclic(parents: dict[str, list[str]], path: Path) -> None:
    """Refuse a cycle of broader links in one line naming its concepts (an iterative depth-first search)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for start in parents:
        if state.get(start):
            continue
        stack: list[tuple[str, int]] = [(start, 0)]
        trail: list[str] = []
        while stack:
            node, i = stack.pop()
            if i == 0:
                state[node] = 1
                trail.append(node)
            ps = parents.get(node, [])
            if i < len(ps):
                stack.append((node, i + 1))
                q = ps[i]
                if state.get(q) == 1:
                    cyc = trail[trail.index(q):] + [q]
                    raise TaxonomyError(f"{path}: concept {q}: cycle of skos:broader links: {' -> '.join(cyc)}")
                if not state.get(q):
                    stack.append((q, 0))
            else:
                state[node] = 2
                trail.pop()
