"""Label taxonomies: an immutable rooted tree with array views for fast decoding.

Node ids are assigned in level order (breadth first from the root, children sorted by name), so
``range(n_nodes)`` is a top-down order and its reverse a bottom-up order. The root has id 0 and is
never a label. Every other node ``c`` owns exactly one edge ``parent(c) -> c``; the edge id of node
``c`` is ``c - 1``, so weight matrices indexed by edge have ``n_nodes - 1`` rows.

Virtual ``/_self`` leaves (ALGORITHMS.md, Notation) let leaf-only models learn label sets that stop
at an internal node (RCV1): an internal node ``c`` gets a child ``c/_self``; a label set whose
deepest label is ``c`` is learned as the leaf ``c/_self`` and mapped back to ``c`` on output.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from sparkhc.errors import TaxonomyError
from sparkhc.polyhierarchy import (
    DEFAULT_LABEL_LANGUAGE,
    DEFAULT_MAX_POSITIONS,
    DIRECTIVE,
    ConceptLayer,
    expand,
    layer_from,
    layer_lines,
    parse_directive,
)

if TYPE_CHECKING:  # imported where it is used: the Python workers that read documents need no scipy
    import scipy.sparse as sp

SELF_SUFFIX = "/_self"
VIRTUAL_ROOT = "_ROOT_"

log = logging.getLogger(__name__)

_RCV1_LINE = re.compile(r"^\s*parent:\s*(\S+)\s+child:\s*(\S+)(?:\s+child-description:.*)?$")


class Taxonomy:
    """A rooted tree of labels.

    Build one with :meth:`from_edges`, :meth:`from_tsv`, :meth:`from_rcv1_hier` or :meth:`load`.

    Attributes
    ----------
    names : tuple of str
        Node name by id; ``names[0]`` is the root.
    parent : ndarray of int32
        Parent id by node id; ``-1`` for the root.
    depth : ndarray of int32
        Depth by node id; the root has depth 0.
    children : tuple of ndarray
        Child ids by node id, sorted by name.
    virtual : ndarray of bool
        True for the ``/_self`` leaves added by :meth:`with_self_leaves`.
    """

    __slots__ = (
        "names",
        "parent",
        "depth",
        "children",
        "virtual",
        "_index",
        "_anc",
        "_leaves",
        "_is_leaf",
        "_source",
        "_concepts",
        "_label_names",
        "_label_aliases",
        "_concept_tax",
    )

    def __init__(
        self,
        names: Sequence[str],
        parent: Sequence[int] | np.ndarray,
        virtual: Sequence[bool] | np.ndarray | None = None,
        source: str = "<memory>",
        concepts: ConceptLayer | None = None,
    ) -> None:
        # Internal constructor: callers use from_edges. Arrays must already be in level order.
        self.names: tuple[str, ...] = tuple(names)
        self.parent = np.asarray(parent, dtype=np.int32)
        n = len(self.names)
        self.virtual = (
            np.zeros(n, dtype=bool) if virtual is None else np.asarray(virtual, dtype=bool)
        )
        depth = np.zeros(n, dtype=np.int32)
        kids: list[list[int]] = [[] for _ in range(n)]
        for c in range(1, n):
            p = int(self.parent[c])
            depth[c] = depth[p] + 1
            kids[p].append(c)
        self.depth = depth
        self.children = tuple(np.asarray(k, dtype=np.int32) for k in kids)
        self._index = {name: i for i, name in enumerate(self.names)}
        self._anc: sp.csr_matrix | None = None
        self._leaves: np.ndarray | None = None
        self._is_leaf: np.ndarray | None = None
        self._source = source
        self._concepts = None if concepts is None or concepts.is_empty() else concepts
        self._label_names: frozenset[str] | None = None
        self._label_aliases: dict[str, tuple[str, ...]] | None = None
        self._concept_tax: Taxonomy | None = None

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_edges(
        cls,
        edges: Iterable[tuple[str, str]],
        root: str | None = None,
        source: str = "<memory>",
        lines: Sequence[int] | None = None,
        max_positions: int | None = DEFAULT_MAX_POSITIONS,
        layer: ConceptLayer | None = None,
    ) -> Taxonomy:
        """Build a taxonomy from ``(parent, child)`` pairs.

        Parameters
        ----------
        edges : iterable of (str, str)
            The edges. An identical edge given more than once is used once, with a warning naming
            its lines; anything else is checked: a cycle is reported as the cycle with the lines of
            its edges. A node with several parents makes a polyhierarchy: the taxonomy is then its
            tree of paths (:mod:`sparkhc.polyhierarchy`), with the concepts of its positions.
        root : str, optional
            The root's name. When given, every parent must be the root or some node's child
            (else "unknown parent"). When omitted, the nodes that are never a child are the
            roots; several roots (a forest) are put under a virtual root ``_ROOT_``.
        source : str
            File name used in error messages.
        lines : sequence of int, optional
            Line number of each edge, for error messages.
        max_positions : int, optional
            A polyhierarchy with more positions than this is refused in one line (None: no limit).
        layer : ConceptLayer, optional
            What is known of the concepts (labels, aliases: a SKOS vocabulary); the concepts of the
            positions of a polyhierarchy are added to it.
        """
        edge_list = list(edges)
        if not edge_list:
            raise TaxonomyError(f"{source}: the taxonomy is empty (no parent/child edges)")
        parent_of, more_parents = _parents(edge_list, source, lines)
        root_name = _root_of(parent_of, edge_list, root, source, lines)
        names, par = _breadth_first(parent_of, root_name, source)
        if not more_parents:
            return cls(names, par, source=source, concepts=layer)
        # a polyhierarchy: the tree of its paths (every cycle was reported above)
        all_parents = {c: [p, *more_parents.get(c, ())] for c, p in parent_of.items()}
        pos_edges, concept_of = expand(all_parents, root_name, source, max_positions)
        found = ConceptLayer(concept_of=concept_of)
        tax = cls._from_trusted(root_name, pos_edges, source, layer.merged(found) if layer is not None else found)
        log.info("%s: a polyhierarchy: %d of %d concepts have several parents; %d positions (paths from the root)",
                 source, len(more_parents), len(parent_of), tax.n_nodes - 1)
        return tax

    @classmethod
    def from_tsv(cls, path: str | Path, root: str | None = None,
                 max_positions: int | None = DEFAULT_MAX_POSITIONS) -> Taxonomy:
        """Read ``parent<TAB>child`` lines (blank lines and ``#`` comments are skipped; the
        ``#sparkhc:`` lines that :meth:`to_tsv` writes restore the concept layer). A child on several
        lines with different parents makes a polyhierarchy (see :meth:`from_edges`)."""
        path = Path(path)
        edges: list[tuple[str, str]] = []
        lines: list[int] = []
        text = _read_text(path)
        found: dict[str, dict[str, str]] = {"concept_of": {}, "labels": {}, "aliases": {}}
        info: dict[str, object] = {}
        for no, line in enumerate(text.splitlines(), start=1):
            if line.startswith(DIRECTIVE):
                parse_directive(line.rstrip("\r\n"), found, info, f"{path}, line {no}")
                continue
            s = line.strip()
            if not s or s.startswith("#"):
                continue
            parts = line.rstrip("\r\n").split("\t")
            if len(parts) != 2:
                raise TaxonomyError(
                    f"{path}, line {no}: expected 'parent<TAB>child', got {len(parts)} "
                    f"tab-separated field(s): {line[:80]!r}"
                )
            edges.append((parts[0].strip(), parts[1].strip()))
            lines.append(no)
        layer = layer_from(found, info)
        return cls.from_edges(edges, root=root, source=str(path), lines=lines, max_positions=max_positions,
                              layer=None if layer.is_empty() else layer)

    @classmethod
    def from_rcv1_hier(cls, path: str | Path) -> Taxonomy:
        """Read the RCV1 hierarchy format (``parent: X child: Y child-description: ...``).

        The line whose parent is ``None`` names the root.
        """
        path = Path(path)
        edges: list[tuple[str, str]] = []
        lines: list[int] = []
        root: str | None = None
        for no, line in enumerate(_read_text(path).splitlines(), start=1):
            if not line.strip():
                continue
            m = _RCV1_LINE.match(line)
            if m is None:
                raise TaxonomyError(
                    f"{path}, line {no}: expected 'parent: X child: Y child-description: ...', "
                    f"got {line[:80]!r}"
                )
            p, c = m.group(1), m.group(2)
            if p == "None":
                root = c
                continue
            edges.append((p, c))
            lines.append(no)
        return cls.from_edges(edges, root=root, source=str(path), lines=lines)

    @classmethod
    def load(cls, path: str | Path, root: str | None = None, *, language: str = DEFAULT_LABEL_LANGUAGE,
             max_positions: int | None = DEFAULT_MAX_POSITIONS) -> Taxonomy:
        """Read a taxonomy file (a local path or a ``file:`` URI): a SKOS vocabulary (Turtle, RDF/XML,
        N-Triples: :mod:`sparkhc.vocab`, labels shown in ``language``), the RCV1 format (detected from
        its first non-blank line) or ``parent<TAB>child`` lines. A polyhierarchy becomes the tree of
        its paths; one of more than ``max_positions`` positions is refused."""
        from sparkhc import fsio, vocab

        local = fsio.local_path(path)
        if local is None:
            from sparkhc.errors import LocationError

            raise LocationError(f"{fsio.redact(path)}: taxonomy files are read on the driver from a local path or a "
                                "file: URI; copy it to the driver")
        path = local
        text = _read_text(path)
        rdf = vocab.rdf_format(path, text)
        if rdf is not None:
            v = vocab.read_skos(path, rdf, language=language, text=text)
            return cls.from_edges(v.edges, root=v.root, source=str(path), max_positions=max_positions,
                                  layer=v.layer)
        first = next((ln for ln in text.splitlines() if ln.strip()), "")
        if first.lstrip().startswith("parent:"):
            return cls.from_rcv1_hier(path)
        return cls.from_tsv(path, root=root, max_positions=max_positions)

    # ------------------------------------------------------------------ basic views
    @property
    def n_nodes(self) -> int:
        return len(self.names)

    @property
    def n_edges(self) -> int:
        return len(self.names) - 1

    @property
    def root_name(self) -> str:
        return self.names[0]

    @property
    def source(self) -> str:
        return self._source

    def __len__(self) -> int:
        return len(self.names)

    def __repr__(self) -> str:
        return (
            f"Taxonomy(root={self.root_name!r}, nodes={self.n_nodes - 1}, leaves={len(self.leaves)}, "
            f"depth={self.max_depth}, virtual={int(self.virtual.sum())})"
        )

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Taxonomy)
            and self.names == other.names
            and bool(np.array_equal(self.parent, other.parent))
            and bool(np.array_equal(self.virtual, other.virtual))
            and dict(self.concept_of) == dict(other.concept_of)
        )

    def __hash__(self) -> int:
        return hash(self.fingerprint(include_virtual=True))

    def __getstate__(self) -> dict[str, object]:
        return {"names": self.names, "parent": self.parent, "virtual": self.virtual, "source": self._source,
                "concepts": self._concepts}

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__init__(state["names"], state["parent"], state["virtual"], str(state["source"]),  # type: ignore[misc,arg-type]
                      state.get("concepts"))

    @property
    def max_depth(self) -> int:
        return int(self.depth.max())

    @property
    def is_leaf(self) -> np.ndarray:
        """Per node: it has no children (computed once, read-only: :meth:`to_leaf_set` asks for every
        distinct label list, and computing it per call was slow on a MeSH-sized tree)."""
        if self._is_leaf is None:
            a = np.array([len(k) == 0 for k in self.children], dtype=bool)
            a.setflags(write=False)
            self._is_leaf = a
        return self._is_leaf

    @property
    def leaves(self) -> np.ndarray:
        """Leaf ids in id order (the root is never a leaf unless the tree is a lone root)."""
        if self._leaves is None:
            self._leaves = np.flatnonzero(self.is_leaf).astype(np.int32)
        return self._leaves

    @property
    def internal(self) -> np.ndarray:
        """Ids of nodes with children (the root included)."""
        return np.flatnonzero(~self.is_leaf).astype(np.int32)

    def id(self, name: str) -> int:
        """Node id of ``name``; raises :class:`TaxonomyError` naming the label when unknown."""
        try:
            return self._index[name]
        except KeyError:
            raise TaxonomyError(f"unknown label {name!r}: not a node of the taxonomy {self._source}") from None

    def __contains__(self, name: object) -> bool:
        return name in self._index

    def ids(self, names: Iterable[str]) -> np.ndarray:
        return np.array([self.id(n) for n in names], dtype=np.int32)

    def level_order(self) -> np.ndarray:
        return np.arange(self.n_nodes, dtype=np.int32)

    def path(self, c: int) -> list[int]:
        """Node ids from depth 1 down to ``c`` (the edges of path(c), root excluded)."""
        out = []
        while c > 0:
            out.append(c)
            c = int(self.parent[c])
        return out[::-1]

    def ancestors(self, c: int) -> list[int]:
        """Proper ancestors of ``c``, root excluded, nearest first."""
        return self.path(c)[:-1][::-1]

    def leaves_under(self, c: int) -> np.ndarray:
        """Leaf descendants of ``c`` (``c`` itself when it is a leaf)."""
        a = self.ancestor_matrix()
        col = a[:, c].toarray().ravel() > 0 if c > 0 else np.ones(self.n_nodes, dtype=bool)
        return np.flatnonzero(col & self.is_leaf).astype(np.int32)

    def ancestor_matrix(self) -> sp.csr_matrix:
        """CSR ``A`` with ``A[c, a] = 1`` iff ``a`` is on path(c) (``a`` = c included, root excluded).

        For a binary doc-by-node matrix ``Y``, ``(Y @ A) > 0`` is the ancestor closure (tree(m)).
        """
        if self._anc is None:
            import scipy.sparse as sp

            rows: list[int] = []
            cols: list[int] = []
            for c in range(1, self.n_nodes):
                for a in self.path(c):
                    rows.append(c)
                    cols.append(a)
            self._anc = sp.csr_matrix(
                (np.ones(len(rows), dtype=np.float32), (rows, cols)), shape=(self.n_nodes, self.n_nodes)
            )
        return self._anc

    def closure(self, nodes: Iterable[int]) -> np.ndarray:
        """tree(m): sorted ids of ``nodes`` and all their ancestors, root excluded."""
        out: set[int] = set()
        for c in nodes:
            c = int(c)
            while c > 0 and c not in out:
                out.add(c)
                c = int(self.parent[c])
        return np.array(sorted(out), dtype=np.int32)

    def deepest(self, nodes: Iterable[int]) -> np.ndarray:
        """The nodes of an ancestor-closed set that have no descendant in the set."""
        s = set(int(c) for c in nodes)
        s.discard(0)
        has_desc = {int(self.parent[c]) for c in s}
        return np.array(sorted(c for c in s if c not in has_desc), dtype=np.int32)

    # ------------------------------------------------------------------ virtual leaves
    def with_self_leaves(self, nodes: Iterable[int | str] | None = None) -> Taxonomy:
        """A new taxonomy where each given internal node (default: every internal non-root node)
        gets a virtual leaf child ``name + '/_self'``."""
        if self.virtual.any():
            raise TaxonomyError("this taxonomy already has virtual /_self leaves")
        if nodes is None:
            targets = [int(c) for c in self.internal if c != 0]
        else:
            targets = sorted({self.id(n) if isinstance(n, str) else int(n) for n in nodes})
        is_leaf = self.is_leaf
        edges = [(self.names[int(self.parent[c])], self.names[c]) for c in range(1, self.n_nodes)]
        extra = []
        for c in targets:
            if c == 0 or is_leaf[c]:
                continue
            extra.append((self.names[c], self.names[c] + SELF_SUFFIX))
        base = Taxonomy._from_trusted(self.root_name, edges + extra, self._source)
        virtual = np.array([n.endswith(SELF_SUFFIX) for n in base.names], dtype=bool)
        return Taxonomy(base.names, base.parent, virtual, source=self._source, concepts=self._concepts)

    @classmethod
    def _from_trusted(cls, root: str, edges: list[tuple[str, str]], source: str,
                      concepts: ConceptLayer | None = None) -> Taxonomy:
        names, par = _bfs(root, edges)
        return cls(names, par, source=source, concepts=concepts)

    def base(self) -> Taxonomy:
        """This taxonomy without its virtual leaves."""
        if not self.virtual.any():
            return self
        edges = [
            (self.names[int(self.parent[c])], self.names[c])
            for c in range(1, self.n_nodes)
            if not self.virtual[c]
        ]
        return Taxonomy._from_trusted(self.root_name, edges, self._source, self._concepts)

    def real_id(self, c: int) -> int:
        """The node a virtual leaf stands for (its parent); other nodes map to themselves."""
        return int(self.parent[c]) if self.virtual[c] else int(c)

    def to_leaf_set(self, labels: Iterable[str]) -> np.ndarray:
        """Map a label set (any nodes of the base tree, ancestors implied) to the leaf set ``m`` of
        this taxonomy: leaves stay, an internal node with no descendant label becomes its
        ``/_self`` leaf. Raises when such a node has no virtual leaf here."""
        ids = [self.id(n) for n in labels]
        closed = self.closure(ids)
        out = []
        is_leaf = self.is_leaf
        for c in self.deepest(closed):
            if is_leaf[c]:
                out.append(int(c))
            else:
                v = self._index.get(self.names[c] + SELF_SUFFIX)
                if v is None:
                    raise TaxonomyError(
                        f"label {self.names[c]!r} is an internal node used as a deepest label, but the "
                        "model's taxonomy has no virtual leaf for it (train with self leaves)"
                    )
                out.append(v)
        return np.array(sorted(out), dtype=np.int32)

    def to_labels(self, leaf_ids: Iterable[int]) -> list[str]:
        """Map a predicted leaf set back to real label names (virtual leaves -> their parent),
        deepest labels only, sorted by id."""
        real = sorted({self.real_id(int(c)) for c in leaf_ids})
        return [self.names[c] for c in real]

    # ------------------------------------------------------------------ identity / io
    def edges(self, include_virtual: bool = True) -> list[tuple[str, str]]:
        return [
            (self.names[int(self.parent[c])], self.names[c])
            for c in range(1, self.n_nodes)
            if include_virtual or not self.virtual[c]
        ]

    def fingerprint(self, include_virtual: bool = False) -> str:
        """sha256 (hex, first 16 chars) of the sorted edge list (and, for a polyhierarchy, of the
        concepts of its positions); stable across file order. Labels and aliases are not part of it."""
        lines = sorted(f"{p}\t{c}" for p, c in self.edges(include_virtual))
        lines += sorted(f"position\t{p}\t{c}" for p, c in self.concept_of.items())
        h = hashlib.sha256(("root\t" + self.root_name + "\n" + "\n".join(lines)).encode("utf-8"))
        return h.hexdigest()[:16]

    def to_tsv(self, path: str | Path | None = None, include_virtual: bool = True) -> str:
        """``parent<TAB>child`` lines, then the ``#sparkhc:`` lines of the concept layer (a
        polyhierarchy's positions, a vocabulary's labels and aliases: :func:`sparkhc.polyhierarchy.layer_lines`)."""
        text = "".join(f"{p}\t{c}\n" for p, c in self.edges(include_virtual))
        if self._concepts is not None:
            text += "".join(line + "\n" for line in layer_lines(self._concepts, self.names))
        if path is not None:
            Path(path).write_text(text, encoding="utf-8")
        return text

    @classmethod
    def from_tsv_text(cls, text: str, root: str | None = None, source: str = "<text>",
                      max_positions: int | None = DEFAULT_MAX_POSITIONS) -> Taxonomy:
        """Parse TSV text (as written by :meth:`to_tsv`), restoring virtual leaves and the concept layer."""
        edges = []
        lines = []
        found: dict[str, dict[str, str]] = {"concept_of": {}, "labels": {}, "aliases": {}}
        info: dict[str, object] = {}
        for no, line in enumerate(text.splitlines(), start=1):
            if line.startswith(DIRECTIVE):
                parse_directive(line, found, info, f"{source}, line {no}")
                continue
            if not line.strip() or line.startswith("#"):
                continue
            parts = line.split("\t")
            if len(parts) != 2:
                raise TaxonomyError(f"{source}, line {no}: expected 'parent<TAB>child'")
            edges.append((parts[0], parts[1]))
            lines.append(no)
        real = [(p, c) for p, c in edges if not c.endswith(SELF_SUFFIX)]
        layer = layer_from(found, info)
        base = cls.from_edges(real, root=root, source=source, lines=[ln for (e, ln) in zip(edges, lines, strict=True) if not e[1].endswith(SELF_SUFFIX)],
                              max_positions=max_positions, layer=None if layer.is_empty() else layer)
        selfs = [p for p, c in edges if c.endswith(SELF_SUFFIX)]
        return base.with_self_leaves(selfs) if selfs else base

    def describe(self) -> dict[str, object]:
        return {
            "root": self.root_name,
            "nodes": self.n_nodes - 1,
            "leaves": int(len(self.leaves)),
            "virtual_leaves": int(self.virtual.sum()),
            "depth": self.max_depth,
            "fingerprint": self.fingerprint(),
            **self.concept_info(),
        }

    # ------------------------------------------------------------------ concepts (polyhierarchies, vocabularies)
    @property
    def concepts(self) -> ConceptLayer | None:
        """What is known of the concepts behind the nodes (None: each node is its own concept and
        has no other label): :class:`sparkhc.polyhierarchy.ConceptLayer`."""
        return self._concepts

    @property
    def concept_of(self) -> dict[str, str]:
        """Position name -> concept name, for the positions whose name is not their concept's
        (empty unless this is the tree of paths of a polyhierarchy)."""
        return dict(self._concepts.concept_of) if self._concepts is not None else {}

    @property
    def is_polyhierarchy(self) -> bool:
        """Some concept has several positions (several parents in the taxonomy file)."""
        return self._concepts is not None and bool(self._concepts.concept_of)

    def concept_name(self, c: int) -> str:
        """The concept of node ``c`` (a virtual leaf: its parent's)."""
        name = self.names[self.real_id(int(c))]
        return self._concepts.concept_of.get(name, name) if self._concepts is not None else name

    def concept_info(self) -> dict[str, object]:
        """What the features' metadata records of the concepts: for a polyhierarchy its concepts and
        positions, for a vocabulary its format, label language and deprecated concepts skipped
        (empty for a plain tree)."""
        layer = self._concepts
        if layer is None:
            return {}
        out: dict[str, object] = {}
        if layer.concept_of:
            real = [c for c in range(1, self.n_nodes) if not self.virtual[c]]
            out["concepts"] = len({self.concept_name(c) for c in real})
            out["positions"] = len(real)
        if layer.vocabulary:
            out.update(vocabulary=layer.vocabulary, label_language=layer.language,
                       deprecated_concepts=layer.deprecated, preferred_labels=len(layer.labels))
        return out

    def label_names(self) -> frozenset[str]:
        """The names a document label may take as they are: the real nodes that are their own
        concept (not the root, a virtual leaf, or a position named ``concept@parent``)."""
        if self._label_names is None:
            cof = self._concepts.concept_of if self._concepts is not None else {}
            self._label_names = frozenset(
                name for i, name in enumerate(self.names) if i != 0 and not self.virtual[i] and name not in cof)
        return self._label_names

    def label_aliases(self) -> dict[str, tuple[str, ...]]:
        """The other names a document label may take -> the node names it stands for: a concept of a
        polyhierarchy -> each of its positions; an alias (``skos:notation``) -> its concept's
        positions. Empty for a plain tree."""
        if self._label_aliases is None:
            out: dict[str, tuple[str, ...]] = {}
            layer = self._concepts
            if layer is not None:
                positions: dict[str, list[str]] = {}
                for c in range(1, self.n_nodes):
                    if not self.virtual[c]:
                        positions.setdefault(self.concept_name(c), []).append(self.names[c])
                for concept, names in positions.items():
                    if names != [concept]:
                        out[concept] = tuple(names)
                names_ok = self.label_names()
                for alias, concept in layer.aliases.items():
                    if alias not in names_ok and alias not in out and concept in positions:
                        out[alias] = tuple(positions[concept])
            self._label_aliases = out
        return self._label_aliases

    def concept_taxonomy(self) -> Taxonomy:
        """The taxonomy of the concepts, on which evaluation counts: this taxonomy (without virtual
        leaves) for a tree; for a polyhierarchy its :class:`ConceptDag` (label sets closed over
        every parent)."""
        if self._concept_tax is None:
            self._concept_tax = ConceptDag.of(self.base()) if self.is_polyhierarchy else self.base()
        return self._concept_tax

    def display_name(self, name: str) -> str:
        """The label shown for a concept (its ``skos:prefLabel`` in the chosen language), else its name."""
        if self._concepts is None:
            return name
        return self._concepts.labels.get(name, name)

    @property
    def has_display_names(self) -> bool:
        return self._concepts is not None and bool(self._concepts.labels)

    def concept_predictions(self, labels: Sequence[Sequence[str]], scores: Sequence[Sequence[float]]
                            ) -> tuple[list[list[str]], list[list[float]]]:
        """Predicted node names (and their aligned scores) of documents as the concepts users see: for
        a polyhierarchy a concept is predicted when any of its positions is, with the highest score of
        its positions, and a concept that is an ancestor (over any parent) of another predicted one is
        left out, as the ancestors of a tree's deepest labels are; concepts in concept-taxonomy id
        order. A tree's labels are returned as they are."""
        if not self.is_polyhierarchy:
            return [list(x) for x in labels], [list(x) for x in scores]
        dag = self.concept_taxonomy()
        cof = self._concepts.concept_of if self._concepts is not None else {}
        out_l: list[list[str]] = []
        out_s: list[list[float]] = []
        for labs, scs in zip(labels, scores, strict=True):
            best: dict[int, float] = {}
            for name, sc in zip(labs, scs, strict=True):
                c = dag.id(cof.get(name, name))
                best[c] = max(best.get(c, -np.inf), float(sc))
            keep = dag.deepest(dag.closure(best))
            kept = [int(c) for c in keep if int(c) in best]
            out_l.append([dag.names[c] for c in kept])
            out_s.append([best[c] for c in kept])
        return out_l, out_s

    def concept_labels(self, label_lists: Sequence[Sequence[str] | None]) -> list[list[str] | None]:
        """Node names (a features folder's gold labels: positions) as the concepts they stand for, each
        once, in their order (None stays None). A tree's labels are returned as they are."""
        if not self.is_polyhierarchy:
            return [None if x is None else list(x) for x in label_lists]
        cof = self._concepts.concept_of if self._concepts is not None else {}
        return [None if x is None else list(dict.fromkeys(cof.get(n, n) for n in x)) for x in label_lists]

    def display_names(self, label_lists: Sequence[Sequence[str]]) -> list[list[str]] | None:
        """The labels shown for concept names (:meth:`display_name`), or None when the taxonomy has no
        display labels (a TSV)."""
        if not self.has_display_names:
            return None
        return [[self.display_name(n) for n in labs] for labs in label_lists]


class ConceptDag(Taxonomy):
    """The concepts of a polyhierarchy, on which evaluation counts (models never see it).

    A concept may have several parents (:attr:`parents`). :attr:`parent` holds its *primary*
    parent, the parent of its shallowest position in the tree of paths, so the tree views (depth,
    children, the order of a report's tables) are those of that spanning tree. What depends on the
    hierarchy uses every parent: :meth:`ancestor_matrix` and :meth:`closure` (a label set closed over
    every parent, the DAG closure), :meth:`ancestors`, :meth:`deepest`, :attr:`is_leaf`,
    :meth:`edges` and the fingerprint, and :class:`sparkhc.metrics.MetricCounts` (H-loss over every
    ancestor). Build it from the tree of paths with :meth:`Taxonomy.concept_taxonomy`.

    Examples
    --------
    >>> tax = Taxonomy.from_edges([("R", "a"), ("R", "b"), ("a", "x"), ("b", "x")])
    >>> dag = tax.concept_taxonomy()
    >>> [dag.names[c] for c in dag.closure([dag.id("x")])]
    ['a', 'b', 'x']
    """

    __slots__ = ("parents", "_topo", "_dag_leaf")

    def __init__(
        self,
        names: Sequence[str],
        parent: Sequence[int] | np.ndarray,
        parents: Sequence[Sequence[int] | np.ndarray],
        source: str = "<memory>",
        concepts: ConceptLayer | None = None,
    ) -> None:
        super().__init__(names, parent, None, source, concepts)
        #: every parent of each concept, by id, sorted (empty for the root)
        self.parents: tuple[np.ndarray, ...] = tuple(np.asarray(p, dtype=np.int32) for p in parents)
        self._topo: np.ndarray | None = None
        self._dag_leaf: np.ndarray | None = None

    @classmethod
    def of(cls, tax: Taxonomy) -> ConceptDag:
        """The concepts of the tree of paths ``tax`` (its virtual leaves ignored): a concept's
        parents are the concepts of its positions' parents."""
        root = tax.root_name
        parents: dict[str, list[str]] = {}
        for c in range(1, tax.n_nodes):  # level order: a concept's shallowest position first
            if tax.virtual[c]:
                continue
            p = int(tax.parent[c])
            ps = parents.setdefault(tax.concept_name(c), [])
            q = tax.concept_name(p) if p > 0 else root
            if q not in ps:
                ps.append(q)
        tree = Taxonomy._from_trusted(root, [(ps[0], c) for c, ps in parents.items()], tax.source)
        index = {n: i for i, n in enumerate(tree.names)}
        all_parents = [np.zeros(0, np.int32)] + [np.array(sorted(index[q] for q in parents[n]), np.int32)
                                                 for n in tree.names[1:]]
        layer = tax.concepts
        if layer is not None:
            layer = ConceptLayer(labels=layer.labels, aliases=layer.aliases, deprecated=layer.deprecated,
                                 vocabulary=layer.vocabulary, language=layer.language)
        return cls(tree.names, tree.parent, all_parents, tax.source, layer)

    def __repr__(self) -> str:
        return (f"ConceptDag(root={self.root_name!r}, concepts={self.n_nodes - 1}, "
                f"edges={sum(len(p) for p in self.parents)}, depth={self.max_depth})")

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, ConceptDag) and super().__eq__(other)
                and all(np.array_equal(a, b) for a, b in zip(self.parents, other.parents, strict=True)))

    def __hash__(self) -> int:
        return hash(self.fingerprint(include_virtual=True))

    def __getstate__(self) -> dict[str, object]:
        return {**super().__getstate__(), "parents": self.parents}

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__init__(state["names"], state["parent"], state["parents"], str(state["source"]),  # type: ignore[misc,arg-type]
                      state.get("concepts"))

    def topological_order(self) -> np.ndarray:
        """Node ids, every parent before its children (the root first)."""
        if self._topo is None:
            n = self.n_nodes
            waiting = np.array([len(p) for p in self.parents], dtype=np.int64)
            kids: list[list[int]] = [[] for _ in range(n)]
            for c in range(1, n):
                for q in self.parents[c]:
                    kids[int(q)].append(c)
            order = [0]
            head = 0
            while head < len(order):
                for c in kids[order[head]]:
                    waiting[c] -= 1
                    if waiting[c] == 0:
                        order.append(c)
                head += 1
            self._topo = np.asarray(order, dtype=np.int32)
        return self._topo

    @property
    def is_leaf(self) -> np.ndarray:
        """Per concept: no concept has it as a parent."""
        if self._dag_leaf is None:
            a = np.ones(self.n_nodes, dtype=bool)
            for ps in self.parents:
                a[ps] = False
            if self.n_nodes > 1:
                a[0] = False
            a.setflags(write=False)
            self._dag_leaf = a
        return self._dag_leaf

    def n_children(self) -> np.ndarray:
        """The number of children of each concept (over every parent link)."""
        out = np.zeros(self.n_nodes, dtype=np.int64)
        for ps in self.parents:
            out[ps] += 1
        return out

    def ancestor_matrix(self) -> sp.csr_matrix:
        """CSR ``A`` with ``A[c, a] = 1`` iff ``a`` is ``c`` or an ancestor of ``c`` over any parent
        (root excluded): ``(Y @ A) > 0`` is the DAG closure of a label matrix ``Y``."""
        if self._anc is None:
            import scipy.sparse as sp

            rows: list[np.ndarray] = [np.zeros(0, np.int64)] * self.n_nodes
            for c in self.topological_order().tolist():
                if c == 0:
                    continue
                parts = [rows[int(q)] for q in self.parents[c] if q > 0]
                rows[c] = np.unique(np.concatenate([*parts, np.array([c], np.int64)]))
            lengths = np.array([len(r) for r in rows], dtype=np.int64)
            cols = np.concatenate(rows) if lengths.sum() else np.zeros(0, np.int64)
            indptr = np.concatenate([[0], np.cumsum(lengths)])
            self._anc = sp.csr_matrix((np.ones(len(cols), dtype=np.float32), cols, indptr),
                                      shape=(self.n_nodes, self.n_nodes))
        return self._anc

    def ancestors(self, c: int) -> list[int]:
        """Proper ancestors of ``c`` over every parent, root excluded, by id."""
        a = self.ancestor_matrix()
        return [int(x) for x in a.indices[a.indptr[c]:a.indptr[c + 1]] if x != c]

    def closure(self, nodes: Iterable[int]) -> np.ndarray:
        """The DAG closure: sorted ids of ``nodes`` and all their ancestors over every parent, root excluded."""
        a = self.ancestor_matrix()
        ids = [int(c) for c in nodes if int(c) > 0]
        if not ids:
            return np.zeros(0, dtype=np.int32)
        return np.unique(np.concatenate([a.indices[a.indptr[c]:a.indptr[c + 1]] for c in ids])).astype(np.int32)

    def deepest(self, nodes: Iterable[int]) -> np.ndarray:
        """The concepts of a closed set none of whose children (over any parent) is in the set."""
        s = {int(c) for c in nodes}
        s.discard(0)
        has_desc = {int(q) for c in s for q in self.parents[c]}
        return np.array(sorted(c for c in s if c not in has_desc), dtype=np.int32)

    def edges(self, include_virtual: bool = True) -> list[tuple[str, str]]:
        """Every ``(parent, child)`` link of the concepts."""
        return [(self.names[int(q)], self.names[c]) for c in range(1, self.n_nodes) for q in self.parents[c]]

    def with_self_leaves(self, nodes: Iterable[int | str] | None = None) -> Taxonomy:
        raise TaxonomyError("a concept DAG has no virtual leaves: models train on its tree of paths")


def _numbered(indices: Sequence[int], lines: Sequence[int] | None) -> str:
    """``line 3`` / ``lines 2, 3, 4`` (``edge``/``edges`` when there are no line numbers)."""
    nums = [lines[i] if lines else i + 1 for i in indices]
    unit = "line" if lines else "edge"
    return f"{unit}{'s' if len(nums) > 1 else ''} {', '.join(map(str, nums))}"


def _cycle_through(edge_list: Sequence[tuple[str, str]], start: str) -> tuple[list[str], list[int]] | None:
    """The shortest cycle ``start -> ... -> start`` along the edges (parent to child), as its node
    names and the indices of its edges (first occurrence of each edge), or None."""
    kids: dict[str, list[tuple[str, int]]] = {}
    seen_edges: set[tuple[str, str]] = set()
    for i, (p, c) in enumerate(edge_list):
        if (p, c) not in seen_edges:
            seen_edges.add((p, c))
            kids.setdefault(p, []).append((c, i))
    back: dict[str, tuple[str, int]] = {}  # node -> (its predecessor on the search, the edge index)
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for child, i in kids.get(node, ()):
            if child == start:
                nodes, at = [start], [i]
                while node != start:
                    nodes.append(node)
                    node, j = back[node]
                    at.append(j)
                nodes.append(start)
                return nodes[::-1], at[::-1]
            if child not in back:
                back[child] = (node, i)
                queue.append(child)
    return None


def _not_sorted(parent_of: dict[str, str], more_parents: dict[str, list[str]]) -> set[str]:
    """The nodes a topological sort (Kahn's) of the parent links cannot order: those on a cycle and
    below one (empty for an acyclic graph)."""
    kids: dict[str, list[str]] = {}
    waiting: dict[str, int] = {}
    for c, p in parent_of.items():
        for q in (p, *more_parents.get(c, ())):
            kids.setdefault(q, []).append(c)
        waiting[c] = 1 + len(more_parents.get(c, ()))
    ready = [q for q in kids if q not in parent_of]
    while ready:
        q = ready.pop()
        for c in kids.get(q, ()):
            waiting[c] -= 1
            if waiting[c] == 0:
                ready.append(c)
    return {c for c, w in waiting.items() if w > 0}


def _find_cycle(parent_of: dict[str, str], start: str) -> list[str]:
    seen: dict[str, int] = {}
    chain: list[str] = []
    node: str | None = start
    while node is not None and node not in seen:
        seen[node] = len(chain)
        chain.append(node)
        node = parent_of.get(node)
    if node is None:
        return chain
    cyc = chain[seen[node]:] + [node]
    return cyc[::-1]


def _read_text(path: Path) -> str:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise TaxonomyError(f"{path}: taxonomy file not found") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise TaxonomyError(f"{path}: not UTF-8 at byte {e.start}") from None


def _where(source: str, lines: Sequence[int] | None) -> Callable[[int], str]:
    """The place of edge ``i`` in error messages: its line, else its number."""
    return (lambda i: f"{source}, line {lines[i]}") if lines else (lambda i: f"{source}, edge {i + 1}")


def _parents(edge_list: list[tuple[str, str]], source: str,
             lines: Sequence[int] | None) -> tuple[dict[str, str], dict[str, list[str]]]:
    """``(parent_of, more_parents)``: each child's first parent and its later ones (a
    polyhierarchy). Names are checked; an identical edge given again is used once (a warning names
    its lines); a cycle through a node with several parents is reported with the lines of its edges."""
    where = _where(source, lines)
    parent_of: dict[str, str] = {}
    more_parents: dict[str, list[str]] = {}  # child -> its parents after the first (a polyhierarchy)
    later: list[tuple[str, str, int]] = []  # (child, another parent, edge index) of those edges
    first_seen: dict[tuple[str, str], int] = {}  # edge -> its first line/edge number
    first_edge: dict[str, int] = {}  # child -> index of the edge that gave its parent
    repeated: dict[tuple[str, str], list[int]] = {}  # duplicated edge -> its line/edge numbers
    for i, (p, c) in enumerate(edge_list):
        for name in (p, c):
            if not name:
                raise TaxonomyError(f"{where(i)}: empty node name")
            if name.endswith(SELF_SUFFIX):
                raise TaxonomyError(f"{where(i)}: node name {name!r} ends with the reserved suffix {SELF_SUFFIX!r}")
        if p == c:
            raise TaxonomyError(f"{where(i)}: cycle: node {c!r} is its own parent")
        if (p, c) in first_seen:
            repeated.setdefault((p, c), [first_seen[(p, c)]]).append(lines[i] if lines else i + 1)
            continue
        first_seen[(p, c)] = lines[i] if lines else i + 1
        if c in parent_of:
            more_parents.setdefault(c, []).append(p)
            later.append((c, p, i))
            continue
        parent_of[c] = p
        first_edge[c] = i
    if later:
        # a cycle through a node with several parents: named with the lines of its edges (one search per
        # such node that is not ordered by a topological sort, so a large acyclic polyhierarchy costs one sort)
        stuck = _not_sorted(parent_of, more_parents)
        for c, p, i in later:
            cycle = _cycle_through(edge_list, c) if c in stuck else None
            if cycle is not None:
                nodes, at = cycle
                others = [(q, j) for q, j in ((parent_of[c], first_edge[c]), (p, i)) if q != nodes[-2]]
                also = (f" (node {c!r} also has the parent {others[0][0]!r}, "
                        f"{_numbered([others[0][1]], lines)})" if others else "")
                raise TaxonomyError(f"{source}, {_numbered(at, lines)}: cycle: {' -> '.join(nodes)}{also}")
    if repeated:
        unit = "line" if lines else "edge"
        shown = [f"{p!r} -> {c!r} ({unit}s {', '.join(map(str, at))})" for (p, c), at in list(repeated.items())[:10]]
        more = f"; and {len(repeated) - 10} more" if len(repeated) > 10 else ""
        log.warning("%s: %d duplicate edge(s), each used once: %s%s", source, len(repeated), "; ".join(shown), more)
    return parent_of, more_parents


def _root_of(parent_of: dict[str, str], edge_list: list[tuple[str, str]], root: str | None, source: str,
             lines: Sequence[int] | None) -> str:
    """The root's name: ``root`` (every other top node refused as an unknown parent), the one top
    node, or :data:`VIRTUAL_ROOT` over several (added to ``parent_of``)."""
    parents = {p for p, _ in edge_list}
    tops = sorted(p for p in parents if p not in parent_of)
    if root is not None:
        if root in parent_of:
            raise TaxonomyError(f"{source}: the root {root!r} has a parent ({parent_of[root]!r})")
        unknown = [p for p in tops if p != root]
        if unknown:
            i = next(i for i, (p, _) in enumerate(edge_list) if p == unknown[0])
            raise TaxonomyError(f"{_where(source, lines)(i)}: unknown parent {unknown[0]!r}: it is neither the root "
                                f"{root!r} nor the child of any node")
        tops = [root]
    if not tops:
        # every node has a parent: there is a cycle through all of them
        cyc = _find_cycle(parent_of, next(iter(parent_of)))
        raise TaxonomyError(f"{source}: cycle: {' -> '.join(cyc)} (no root)")
    if len(tops) == 1:
        return tops[0]
    if VIRTUAL_ROOT in parent_of or VIRTUAL_ROOT in parents:
        raise TaxonomyError(f"{source}: node name {VIRTUAL_ROOT!r} is reserved")
    for t in tops:
        parent_of[t] = VIRTUAL_ROOT
    return VIRTUAL_ROOT


def _breadth_first(parent_of: dict[str, str], root_name: str, source: str) -> tuple[list[str], list[int]]:
    """``(names, parent index)`` in breadth-first order from the root, children sorted; a node not
    reached lies on a cycle, reported."""
    names, par = _bfs(root_name, ((p, c) for c, p in parent_of.items()))
    if len(names) != len(parent_of) + 1:
        reached = set(names)
        stray = sorted(c for c in parent_of if c not in reached)
        cyc = _find_cycle(parent_of, stray[0])
        raise TaxonomyError(f"{source}: cycle: {' -> '.join(cyc)} ({len(stray)} node(s) not reachable from the "
                            f"root {root_name!r})")
    return names, par


def _bfs(root: str, edges: Iterable[tuple[str, str]]) -> tuple[list[str], list[int]]:
    """``(names, parent index)`` breadth-first from ``root`` over ``(parent, child)`` pairs, each
    node's children in sorted order; nodes not reached from the root are left out."""
    kids: dict[str, list[str]] = {}
    for p, c in edges:
        kids.setdefault(p, []).append(c)
    names = [root]
    par = [-1]
    head = 0
    while head < len(names):
        for c in sorted(kids.get(names[head], ())):
            names.append(c)
            par.append(head)
        head += 1
    return names, par
