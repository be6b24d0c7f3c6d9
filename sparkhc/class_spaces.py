"""Class spaces of multi-dimensional classification, declared from label fields of raw documents.

Text documents often carry several label fields (Reuters-21578: ``labels`` = topics, ``places``,
``orgs``, ``people``, ``exchanges``). A *class-space file* (TOML) turns some of them into MDC class
spaces, each document getting exactly one class per space::

    [[class_space]]
    name = "topic"        # the class space (letters, digits, "_", "-", "."; no "/")
    field = "labels"      # the record field with the document's values: a list of strings, a string or null
    multiple = "exclude"  # several distinct values: "exclude" the document, or keep the "first" listed
    missing = ""          # no value: "" excludes the document, else the class it gets (e.g. "none")
    top_k = 8             # keep the k values most frequent among the training documents (0 = all)
    other = "other"       # class of every other value; "" excludes documents with such a value

``sparkhc featurize --class-spaces FILE`` applies it in two steps, and every document it sets aside
is counted in the read report by reason (never dropped silently):

1. per record (:meth:`ClassSpaces.candidate_labels`), after the corpus's own protocol selection:
   the value of each space by the ``multiple`` / ``missing`` rules, or the exclusion reason of the
   first space that has none (``class space 'place': no value``, ``... : several values``);
2. on the documents read (:meth:`ClassSpaces.fit` then :meth:`FittedClassSpaces.apply_table`): the
   kept classes of each space are fitted on the *training* documents only (the same documents the
   vocabulary is fitted on): the ``top_k`` most frequent values, ties broken by name; any other
   value becomes the ``other`` class or excludes its document (``... : value outside the kept
   classes``).

The documents' labels become ``"<space>/<class>"``, the leaves of the generated MDC taxonomy
``ROOT → <space> → "<space>/<class>"`` (:meth:`FittedClassSpaces.taxonomy`). The hierarchical
label metrics, the predictions and the model registry then work unchanged; :class:`MDCLayout`
reads the class spaces back from such a taxonomy (root children = class spaces, their children =
the classes, in the taxonomy's order: sorted by name) and converts label sets to and from the
``(n, q)`` class-index arrays of :mod:`sparkhc.models.jia_zhang.solver`.
"""

from __future__ import annotations

import re
import tomllib
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from sparkhc.errors import ConfigError, InputDataError, ModelError
from sparkhc.taxonomy import Taxonomy

if TYPE_CHECKING:
    import pyarrow as pa

    from sparkhc.corpus.readers import ReadReport

ROOT = "ROOT"
SEP = "/"
_NAME = re.compile(r"^[A-Za-z0-9_.\-]+$")
_KEYS = ("name", "field", "multiple", "missing", "top_k", "other")


@dataclass(frozen=True)
class ClassSpace:
    """One class space read from a label field (see the module docstring for the keys)."""

    name: str
    field: str
    multiple: str = "exclude"
    missing: str = ""
    top_k: int = 0
    other: str = "other"

    def value(self, obj: Mapping[str, Any]) -> str | None:
        """The document's raw class in this space, or ``None`` (the caller names the reason).

        Raises ``ValueError`` for a field of the wrong type (a malformed record).
        """
        raw = obj.get(self.field)
        if raw is None:
            values: list[str] = []
        elif isinstance(raw, str):
            values = [raw] if raw else []
        elif isinstance(raw, list) and all(isinstance(v, str) for v in raw):
            values = list(dict.fromkeys(v for v in raw if v))
        else:
            raise ValueError(
                f"field {self.field!r} (class space {self.name!r}) must be a list of strings, a string or "
                f"null; got {type(raw).__name__}"
            )
        if not values:
            return self.missing or None
        if len(values) > 1 and self.multiple == "exclude":
            return None
        return values[0]

    def reason(self, obj: Mapping[str, Any]) -> str:
        raw = obj.get(self.field)
        n = len(set(raw)) if isinstance(raw, list) else (1 if raw else 0)
        return f"class space {self.name!r}: {'no value' if n == 0 else 'several values'}"


@dataclass(frozen=True)
class ClassSpaces:
    """The class spaces of a class-space file, in file order."""

    spaces: tuple[ClassSpace, ...]
    source: str = "<class spaces>"

    @classmethod
    def load(cls, path: str | Path) -> ClassSpaces:
        p = Path(path)
        try:
            data = tomllib.loads(p.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError(f"{p}: class-space file not found") from None
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"{p}: invalid TOML: {e}") from None
        return cls.from_dict(data, source=str(p))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str = "<dict>") -> ClassSpaces:
        unknown = sorted(set(data) - {"class_space"})
        if unknown:
            raise ConfigError(f"{source}: unknown key(s) {unknown}; expected [[class_space]] tables")
        tables = data.get("class_space")
        if not isinstance(tables, list) or not tables or not all(isinstance(t, dict) for t in tables):
            raise ConfigError(f"{source}: expected one or more [[class_space]] tables")
        spaces = []
        for k, t in enumerate(tables, start=1):
            where = f"{source}: class_space {k}"
            bad = sorted(set(t) - set(_KEYS))
            if bad:
                raise ConfigError(f"{where}: unknown key(s) {bad}; known keys: {', '.join(_KEYS)}")
            for key in ("name", "field"):
                if not isinstance(t.get(key), str) or not t[key]:
                    raise ConfigError(f"{where}: key {key!r} must be a non-empty string, got {t.get(key)!r}")
            space = ClassSpace(
                name=t["name"],
                field=t["field"],
                multiple=t.get("multiple", "exclude"),
                missing=t.get("missing", ""),
                top_k=t.get("top_k", 0),
                other=t.get("other", "other"),
            )
            if not _NAME.match(space.name) or space.name == ROOT:
                raise ConfigError(
                    f"{where}: name {space.name!r} must use letters, digits, '_', '-', '.' only and differ "
                    f"from {ROOT!r}"
                )
            if space.multiple not in ("exclude", "first"):
                raise ConfigError(f"{where}: key 'multiple' must be 'exclude' or 'first', got {space.multiple!r}")
            for key in ("missing", "other"):
                if not isinstance(getattr(space, key), str):
                    raise ConfigError(f"{where}: key {key!r} must be a string, got {getattr(space, key)!r}")
            if not isinstance(space.top_k, int) or isinstance(space.top_k, bool) or space.top_k < 0:
                raise ConfigError(f"{where}: key 'top_k' must be an int >= 0, got {space.top_k!r}")
            spaces.append(space)
        names = [s.name for s in spaces]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ConfigError(f"{source}: class space name(s) {dup} used twice")
        return cls(tuple(spaces), source)

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.spaces]

    def candidate_labels(self, obj: Mapping[str, Any]) -> list[str] | str:
        """Step 1: one ``"<space>/<value>"`` label per space, or the reason to exclude the record."""
        out = []
        for s in self.spaces:
            v = s.value(obj)
            if v is None:
                return s.reason(obj)
            out.append(f"{s.name}{SEP}{v}")
        return out

    def fit(self, labels: Sequence[Sequence[str]], fit_rows: np.ndarray | None = None) -> FittedClassSpaces:
        """Step 2: the kept classes of every space from the candidate labels of the training rows."""
        rows = range(len(labels)) if fit_rows is None else np.flatnonzero(fit_rows)
        counts = [Counter[str]() for _ in self.spaces]
        n_fit = 0
        for i in rows:
            n_fit += 1
            for j, v in enumerate(_split(labels[int(i)], self.names)):
                counts[j][v] += 1
        return self.fit_counts(counts, n_fit)

    def fit_counts(self, counts: Sequence[Mapping[str, int]], n_fit: int) -> FittedClassSpaces:
        """Step 2 from the counts of every space's values among the ``n_fit`` training rows (one
        mapping per space, any order): what :meth:`fit` does after counting, also for counts
        aggregated on Spark (``sparkhc featurize --class-spaces``)."""
        kept: list[tuple[str, ...]] = []
        for s, c in zip(self.spaces, counts, strict=True):
            ranked = sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))
            top = [v for v, _ in (ranked[: s.top_k] if s.top_k else ranked)]
            classes = set(top)
            if s.other and s.other in c:
                raise ConfigError(
                    f"{self.source}: class space {s.name!r}: the 'other' class {s.other!r} is also a value of "
                    f"field {s.field!r}; choose another name"
                )
            if s.other and len(top) < len(ranked):
                classes.add(s.other)
            if not classes:
                raise InputDataError(
                    f"{self.source}: class space {s.name!r} has no value in the {n_fit} training documents"
                )
            kept.append(tuple(sorted(classes)))
        return FittedClassSpaces(
            self,
            tuple(kept),
            tuple({v: int(n) for v, n in sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))} for c in counts),
            n_fit,
        )


def _split(labels: Sequence[str], names: Sequence[str]) -> list[str]:
    """The values of candidate labels ``["<space>/<value>", ...]`` in space order."""
    if len(labels) != len(names):
        raise InputDataError(f"expected one label per class space {list(names)}, got {list(labels)}")
    out = []
    for lab, name in zip(labels, names, strict=True):
        head, sep, value = lab.partition(SEP)
        if head != name or not sep:
            raise InputDataError(f"label {lab!r} is not a label of class space {name!r}")
        out.append(value)
    return out


@dataclass(frozen=True)
class FittedClassSpaces:
    """Class spaces with their kept classes (sorted by name), fitted on training documents."""

    spec: ClassSpaces
    classes: tuple[tuple[str, ...], ...]
    train_counts: tuple[dict[str, int], ...]
    n_fit: int

    def map_labels(self, labels: Sequence[str]) -> list[str] | str:
        """Final labels of a document from its candidate labels, or the reason to exclude it."""
        out = []
        for s, kept, v in zip(self.spec.spaces, self.classes, _split(labels, self.spec.names), strict=True):
            if v not in kept:
                if not (s.other and s.other in kept):
                    return f"class space {s.name!r}: value outside the kept classes"
                v = s.other
            out.append(f"{s.name}{SEP}{v}")
        return out

    def apply_table(self, table: pa.Table, report: ReadReport | None = None) -> pa.Table:
        """Relabel a raw-documents table; rows without a class in some space are removed and counted
        in ``report`` (``excluded``, by reason)."""
        import pyarrow as pa

        from sparkhc.batch import LABELS

        col = table.column(LABELS).to_pylist()
        keep = np.ones(len(col), dtype=bool)
        new: list[list[str]] = []
        for i, labs in enumerate(col):
            mapped = self.map_labels(labs or [])
            if isinstance(mapped, str):
                keep[i] = False
                if report is not None:
                    report.withdraw(mapped)
            else:
                new.append(mapped)
        table = table.filter(pa.array(keep))
        idx = table.schema.get_field_index(LABELS)
        return table.set_column(idx, table.schema.field(LABELS), pa.array(new, type=table.schema.field(LABELS).type))

    def taxonomy(self) -> Taxonomy:
        edges = [(ROOT, s.name) for s in self.spec.spaces]
        edges += [(s.name, f"{s.name}{SEP}{c}") for s, kept in zip(self.spec.spaces, self.classes, strict=True)
                  for c in kept]
        return Taxonomy.from_edges(edges, root=ROOT, source=f"class spaces of {self.spec.source}")

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable record (written to the features folder's ``corpus.json``)."""
        return {
            "source": self.spec.source,
            "fitted_on_documents": self.n_fit,
            "class_spaces": [
                {
                    "name": s.name,
                    "field": s.field,
                    "multiple": s.multiple,
                    "missing": s.missing,
                    "top_k": s.top_k,
                    "other": s.other,
                    "classes": list(kept),
                    "training_counts": counts,
                }
                for s, kept, counts in zip(self.spec.spaces, self.classes, self.train_counts, strict=True)
            ],
        }


# ---------------------------------------------------------------------------------------------
# reading the class spaces back from a taxonomy
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MDCLayout:
    """The class spaces of an MDC taxonomy: ``ROOT → space → class leaves``.

    Attributes
    ----------
    names : the q class-space names (root children, taxonomy order).
    leaves : per space the node ids of its classes (class index = position).
    """

    taxonomy: Taxonomy
    names: tuple[str, ...]
    leaves: tuple[np.ndarray, ...]
    _space_of: np.ndarray = field(repr=False)
    _class_of: np.ndarray = field(repr=False)

    @classmethod
    def from_taxonomy(cls, taxonomy: Taxonomy) -> MDCLayout:
        tax = taxonomy
        spaces = [int(c) for c in tax.children[0]]
        if not spaces:
            raise ModelError(f"taxonomy {tax.source} has no class space (the root has no child)")
        space_of = np.full(tax.n_nodes, -1, dtype=np.int64)
        class_of = np.full(tax.n_nodes, -1, dtype=np.int64)
        leaves = []
        for j, s in enumerate(spaces):
            kids = np.asarray(tax.children[s], dtype=np.int64)
            bad = [int(c) for c in kids if not tax.is_leaf[c]] if kids.size else [s]
            if bad:
                raise ModelError(
                    f"taxonomy {tax.source} is not a multi-dimensional (class-space) taxonomy: node "
                    f"{tax.names[bad[0]]!r} {'has children' if kids.size else 'has no class'}; expected root -> "
                    "class spaces -> classes, e.g. from `sparkhc featurize --class-spaces FILE`"
                )
            space_of[kids] = j
            class_of[kids] = np.arange(kids.size)
            leaves.append(kids)
        return cls(tax, tuple(tax.names[s] for s in spaces), tuple(leaves), space_of, class_of)

    @property
    def n_classes(self) -> list[int]:
        return [int(v.size) for v in self.leaves]

    def class_names(self, j: int) -> list[str]:
        return [self.taxonomy.names[int(c)] for c in self.leaves[j]]

    def targets(self, label_sets: Iterable[Sequence[str]], doc_ids: Sequence[Any] | np.ndarray | None = None) -> np.ndarray:
        """``(n, q)`` class indices of documents labelled with exactly one class per space."""
        tax = self.taxonomy
        rows = []
        for i, labs in enumerate(label_sets):
            y = np.full(len(self.names), -1, dtype=np.int64)
            who = f"document {doc_ids[i]!r}" if doc_ids is not None else f"row {i}"
            for lab in labs:
                c = tax.id(lab) if lab in tax else -1
                j = int(self._space_of[c]) if c >= 0 else -1
                if j < 0:
                    raise InputDataError(
                        f"{who}: label {lab!r} is not a class of the class spaces {list(self.names)} of "
                        f"taxonomy {tax.source}"
                    )
                if y[j] >= 0:
                    raise InputDataError(f"{who}: several labels in class space {self.names[j]!r}: {list(labs)}")
                y[j] = self._class_of[c]
            if (y < 0).any():
                j = int(np.flatnonzero(y < 0)[0])
                raise InputDataError(
                    f"{who}: no label in class space {self.names[j]!r} (a multi-dimensional model needs exactly "
                    "one label per class space; featurize with --class-spaces)"
                )
            rows.append(y)
        return np.array(rows, dtype=np.int64).reshape(-1, len(self.names))

    def leaf_sets(self, Y: np.ndarray) -> list[np.ndarray]:
        """The taxonomy leaf ids of ``(n, q)`` class indices (one leaf per space, space order)."""
        Y = np.asarray(Y, dtype=np.int64)
        ids = np.column_stack([self.leaves[j][Y[:, j]] for j in range(len(self.names))])
        return [row.astype(np.int32) for row in ids]
