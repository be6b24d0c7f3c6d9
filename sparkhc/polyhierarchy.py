"""Polyhierarchies: concepts with several parents, expanded into the tree of their paths.

A taxonomy file may give a concept several parents (a parent/child TSV with a child on two lines, a
SKOS vocabulary with several ``skos:broader``). The models train and decode on trees, so such a
taxonomy is expanded into its *tree of paths*: each path from the root to a concept is one
*position*, as MeSH tree numbers are. A concept with one path keeps its name as its position's
name; a concept with several paths gets one position per path, named ``concept@parent-position``
(``ibm@comp`` and ``ibm@hardware``). A document labelled with a concept carries every position of
it, and a concept is predicted when any of its positions is (:class:`sparkhc.taxonomy.Taxonomy`
maps both ways; :class:`sparkhc.taxonomy.ConceptDag` closes label sets over every parent for
evaluation).

A :class:`ConceptLayer` is what a taxonomy of positions knows of the concepts behind them: the
concept of each position whose name is not its concept, the labels shown for the concepts
(``skos:prefLabel`` in a chosen language), the other names documents may use for a concept
(``skos:notation``) and how many deprecated concepts the vocabulary skipped. It travels in
``taxonomy.tsv`` as ``#sparkhc:`` comment lines (:func:`layer_lines`), so a features folder or a
model folder holds it, and an older reader still sees the tree of positions.

This module knows nothing of :class:`~sparkhc.taxonomy.Taxonomy` (which imports it): it works on
names and parent lists.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sparkhc.defaults import section
from sparkhc.errors import TaxonomyError

#: joins a concept's name and its parent position's name into the name of one of its positions
POSITION_SEP = "@"
#: the prefix of the ``taxonomy.tsv`` lines that hold a :class:`ConceptLayer`
DIRECTIVE = "#sparkhc:"
#: the default of ``featurize.max_positions``: a polyhierarchy that expands to more positions is refused
DEFAULT_MAX_POSITIONS: int = section("featurize")["max_positions"]
#: the default of ``featurize.label_language``: the language of the labels shown (``skos:prefLabel``)
DEFAULT_LABEL_LANGUAGE: str = section("featurize")["label_language"]


@dataclass(frozen=True)
class ConceptLayer:
    """The concepts behind a taxonomy's positions.

    Attributes
    ----------
    concept_of : mapping of str to str
        Position name -> concept name, for the positions whose name is not their concept's (the
        positions of a concept with several paths). Empty for a tree.
    labels : mapping of str to str
        Concept name -> the label reports and predictions show (``skos:prefLabel``).
    aliases : mapping of str to str
        Another name a document may give a concept (``skos:notation``) -> the concept name.
    deprecated : int
        Concepts of the vocabulary skipped as deprecated (``owl:deprecated true``).
    vocabulary : str
        The file format the concepts were read from (``"skos"``; empty for a TSV).
    language : str
        The language of :attr:`labels` (the setting ``featurize.label_language``).
    """

    concept_of: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    aliases: Mapping[str, str] = field(default_factory=dict)
    deprecated: int = 0
    vocabulary: str = ""
    language: str = ""

    def is_empty(self) -> bool:
        return not (self.concept_of or self.labels or self.aliases or self.deprecated or self.vocabulary)

    def merged(self, other: ConceptLayer) -> ConceptLayer:
        """This layer with ``other``'s entries added (``other`` wins on a clash)."""
        return ConceptLayer(
            concept_of={**self.concept_of, **other.concept_of}, labels={**self.labels, **other.labels},
            aliases={**self.aliases, **other.aliases}, deprecated=other.deprecated or self.deprecated,
            vocabulary=other.vocabulary or self.vocabulary, language=other.language or self.language)


# ------------------------------------------------------------------------------ the tree of paths
def count_positions(parents: Mapping[str, Sequence[str]], root: str) -> tuple[dict[str, int], list[str]]:
    """The number of paths from ``root`` to each concept (its positions) and the concepts in a
    topological order (parents first). ``parents``: concept -> its parents (``root`` among them for a
    top concept); every concept must reach the root without a cycle (checked by the caller)."""
    kids: dict[str, list[str]] = {}
    for c, ps in parents.items():
        for p in ps:
            kids.setdefault(p, []).append(c)
    waiting = {c: len(ps) for c, ps in parents.items()}
    npos: dict[str, int] = {root: 1}
    order: list[str] = []
    stack = [root]
    while stack:
        p = stack.pop()
        for c in sorted(kids.get(p, ()), reverse=True):
            waiting[c] -= 1
            if waiting[c] == 0:
                npos[c] = sum(npos[q] for q in parents[c])
                order.append(c)
                stack.append(c)
    return npos, order


def expand(
    parents: Mapping[str, Sequence[str]],
    root: str,
    source: str,
    max_positions: int | None = DEFAULT_MAX_POSITIONS,
) -> tuple[list[tuple[str, str]], dict[str, str]]:
    """The tree of paths of a polyhierarchy: its ``(parent position, position)`` edges and the
    concept of each position whose name is not the concept's.

    Parameters
    ----------
    parents : mapping of str to sequence of str
        Concept -> its parents (each once; ``root`` for a top concept). Acyclic, every concept
        reaching the root.
    root : str
        The root's name (never a label; one position).
    source : str
        The file, for the messages.
    max_positions : int, optional
        Refuse (in one line naming the count) a polyhierarchy with more positions than this (None:
        no limit).

    Examples
    --------
    >>> edges, concept_of = expand({"a": ["R"], "b": ["R"], "x": ["a", "b"]}, "R", "t.tsv")
    >>> edges
    [('R', 'a'), ('R', 'b'), ('a', 'x@a'), ('b', 'x@b')]
    >>> concept_of
    {'x@a': 'x', 'x@b': 'x'}
    """
    npos, order = count_positions(parents, root)
    total = sum(npos[c] for c in order)
    if max_positions is not None and total > max_positions:
        raise TaxonomyError(
            f"{source}: the polyhierarchy of {len(order)} concepts has {total} positions (paths from the root), "
            f"above the limit of {max_positions}; raise featurize.max_positions (--set featurize.max_positions=N) "
            "if the models may grow that large"
        )
    where: dict[str, list[str]] = {root: [root]}  # concept -> the names of its positions
    edges: list[tuple[str, str]] = []
    concept_of: dict[str, str] = {}
    for c in order:
        names: list[str] = []
        for p in parents[c]:
            for pp in where[p]:
                name = c if npos[c] == 1 else f"{c}{POSITION_SEP}{pp}"
                edges.append((pp, name))
                names.append(name)
                if name != c:
                    concept_of[name] = c
        where[c] = names
    clash = sorted(set(concept_of) & set(parents))
    if clash:
        raise TaxonomyError(
            f"{source}: the position {clash[0]!r} of concept {concept_of[clash[0]]!r} has the name of another "
            f"concept; rename that concept (the names of positions join a concept and its parent with "
            f"{POSITION_SEP!r})"
        )
    return edges, concept_of


def hloss_costs(parents: Sequence[Any], n_children: Any, order: Sequence[int]) -> list[tuple[int, int]]:
    """The normalized H-loss cost of each node of a DAG as a fraction ``(numerator, denominator)``:
    1 for the root (node 0), and ``sum over parents q of cost(q) / n_children(q)`` below. On a tree it
    is Cesa-Bianchi et al.'s (2004, Sect. 5) ``c_parent / |children(parent)|``; on a DAG it is the
    sum of the costs of the concept's positions in the tree of paths, so the costs of concepts none
    of which is an ancestor of another sum to at most 1. ``order``: the nodes, parents first."""
    from fractions import Fraction

    cost = [Fraction(0)] * len(parents)
    cost[0] = Fraction(1)
    for c in order:
        if c == 0:
            continue
        cost[c] = sum((cost[q] / max(int(n_children[q]), 1) for q in parents[c]), Fraction(0))
    return [(f.numerator, f.denominator) for f in cost]


# ------------------------------------------------------------------------------ taxonomy.tsv lines
def _clean(text: str) -> str:
    """A label on one line of a TSV (tabs and line breaks become spaces)."""
    return " ".join(str(text).replace("\t", " ").splitlines()).strip()


def layer_lines(layer: ConceptLayer, names: Sequence[str] | None = None) -> list[str]:
    """The ``#sparkhc:`` lines of ``taxonomy.tsv`` that hold ``layer`` (``names``: the positions kept,
    e.g. without virtual leaves; None: all), sorted so that the same layer gives the same text."""
    out: list[str] = []
    info = {"vocabulary": layer.vocabulary, "language": layer.language, "deprecated": layer.deprecated}
    if any(info.values()):
        out.append(f"{DIRECTIVE}vocabulary\t{json.dumps(info, sort_keys=True)}")
    keep = None if names is None else set(names)
    out += [f"{DIRECTIVE}position\t{p}\t{c}" for p, c in sorted(layer.concept_of.items()) if keep is None or p in keep]
    out += [f"{DIRECTIVE}label\t{c}\t{_clean(t)}" for c, t in sorted(layer.labels.items()) if _clean(t)]
    out += [f"{DIRECTIVE}alias\t{a}\t{c}" for a, c in sorted(layer.aliases.items())]
    return out


def parse_directive(line: str, layer: dict[str, dict[str, str]], info: dict[str, object], where: str) -> None:
    """Add one ``#sparkhc:`` line of ``taxonomy.tsv`` (``where``: file and line) to the dicts of a layer
    being read (``layer``: ``concept_of``, ``labels``, ``aliases``; ``info``: the vocabulary line)."""
    kind, _, rest = line[len(DIRECTIVE):].partition("\t")
    parts = rest.split("\t")
    if kind == "vocabulary":
        try:
            data = json.loads(rest)
        except json.JSONDecodeError:
            raise TaxonomyError(f"{where}: {DIRECTIVE}vocabulary must be followed by a JSON object") from None
        if not isinstance(data, dict):
            raise TaxonomyError(f"{where}: {DIRECTIVE}vocabulary must be followed by a JSON object")
        info.update(data)
        return
    target = {"position": "concept_of", "label": "labels", "alias": "aliases"}.get(kind)
    if target is None or len(parts) != 2 or not parts[0]:
        raise TaxonomyError(f"{where}: expected '{DIRECTIVE}position|label|alias<TAB>name<TAB>value', got "
                            f"{line[:80]!r}")
    layer[target][parts[0]] = parts[1]


def layer_from(layer: Mapping[str, Mapping[str, str]], info: Mapping[str, object]) -> ConceptLayer:
    """The :class:`ConceptLayer` of the dicts :func:`parse_directive` filled."""
    dep = info.get("deprecated", 0)
    return ConceptLayer(concept_of=dict(layer.get("concept_of", {})), labels=dict(layer.get("labels", {})),
                        aliases=dict(layer.get("aliases", {})), deprecated=int(dep) if isinstance(dep, int | float) else 0,
                        vocabulary=str(info.get("vocabulary") or ""), language=str(info.get("language") or ""))
