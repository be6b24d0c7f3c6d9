"""A features folder (the output of ``sparkhc featurize``), read without Spark.

One home for what every entry point needs to know about a features folder: its layout and file
names, the Arrow schema of its part files (checked on read), its taxonomy, its corpus info and
scored labels, which rows a training or prediction selects, and the model taxonomy (virtual
``/_self`` leaves for label sets that stop at an internal node). The Spark layer
(:mod:`sparkhc.spark.io`) reads the same folder as a DataFrame with the same checks.

Layout::

    <out>/features/part-NNNNN.parquet   one row per document (columns: sparkhc.batch)
    <out>/feature_spec.json             the fitted featurizer (sparkhc.text.spec)
    <out>/taxonomy.tsv                  the taxonomy (parent<TAB>child)
    <out>/corpus.json                   corpus name, protocol, scored labels, read report
    <out>/_SUMMARY.json                 documents per split, files with sha256, ...
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from sparkhc import fsio
from sparkhc.batch import COUNTS, DOC_ID, FOLD, INDICES, LABEL_IDS, LABELS, SPLIT, VALUES, SparseBatch
from sparkhc.errors import InputDataError, SchemaError
from sparkhc.taxonomy import Taxonomy
from sparkhc.text.spec import SPEC_FILE, FeatureSpec

FEATURES_DIR = "features"
SUMMARY_FILE = "_SUMMARY.json"
TAXONOMY_FILE = "taxonomy.tsv"
CORPUS_FILE = "corpus.json"
DEFAULT_EXTRA = (SPLIT, FOLD)

FEATURES_ARROW_SCHEMA = pa.schema(
    [
        pa.field(DOC_ID, pa.string(), nullable=False),
        pa.field(SPLIT, pa.string()),
        pa.field(FOLD, pa.int32()),
        pa.field(LABELS, pa.list_(pa.field("element", pa.string(), nullable=False)), nullable=False),
        pa.field(LABEL_IDS, pa.list_(pa.field("element", pa.int32(), nullable=False))),
        pa.field(INDICES, pa.list_(pa.field("element", pa.int32(), nullable=False)), nullable=False),
        pa.field(VALUES, pa.list_(pa.field("element", pa.float32(), nullable=False)), nullable=False),
        pa.field(COUNTS, pa.list_(pa.field("element", pa.float32(), nullable=False)), nullable=False),
    ]
)


# ------------------------------------------------------------------------------ schema checks
def arrow_type_name(t: pa.DataType) -> str:
    """``array<float>``-style name of an Arrow type (for error messages)."""
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return f"array<{arrow_type_name(t.value_type)}>"
    names = {
        pa.string(): "string",
        pa.large_string(): "string",
        pa.int32(): "int",
        pa.int64(): "bigint",
        pa.float32(): "float",
        pa.float64(): "double",
    }
    return names.get(t, str(t))


def _same_arrow_type(got: pa.DataType, want: pa.DataType) -> bool:
    if pa.types.is_list(want):
        return (pa.types.is_list(got) or pa.types.is_large_list(got)) and _same_arrow_type(
            got.value_type, want.value_type
        )
    if pa.types.is_string(want):
        return bool(pa.types.is_string(got) or pa.types.is_large_string(got))
    return bool(got == want)


def check_arrow_features_schema(schema: pa.Schema, source: str) -> None:
    """Raise :class:`SchemaError` naming ``source`` and the column when ``schema`` (e.g. a Parquet
    footer) is not the features layout (extra columns are allowed and ignored)."""
    names = set(schema.names)
    for f in FEATURES_ARROW_SCHEMA:
        if f.name not in names:
            raise SchemaError(
                f"{source}: column {f.name!r} is missing (columns: {sorted(names)}); expected the features "
                "layout written by sparkhc featurize"
            )
        got = schema.field(f.name).type
        if not _same_arrow_type(got, f.type):
            raise SchemaError(
                f"{source}: column {f.name!r} has type {arrow_type_name(got)}, expected "
                f"{arrow_type_name(f.type)}"
            )


# ------------------------------------------------------------------------------ the folder
def features_layout(path: str | os.PathLike[str]) -> tuple[Path, Path, list[Path]]:
    """(out_dir, features dir, part files) of a local featurize output directory, checked."""
    root = Path(path)
    names = layout_parts(fsio.Folder(root))
    feat = root / FEATURES_DIR
    return root, feat, [feat / n for n in names]


def layout_parts(folder: fsio.Folder) -> list[str]:
    """The part file names of the featurize output directory ``folder`` (a local path or a URI),
    sorted, after checking its layout."""
    if not folder.is_dir():
        raise InputDataError(f"{folder.name}: features directory not found (expected the out_dir of featurize)")
    feat = folder.where(FEATURES_DIR)
    names = folder.listdir(FEATURES_DIR)
    if not names and not (folder.local is not None and (folder.local / FEATURES_DIR).is_dir()):
        raise SchemaError(f"{folder.name}: no {FEATURES_DIR}/ subdirectory; expected the out_dir of featurize")
    parts = sorted(n for n in names if n.endswith(".parquet") and not n.startswith(("_", ".")))
    if not parts:
        raise SchemaError(f"{feat}: no Parquet part files")
    if not folder.is_file(SPEC_FILE):
        raise SchemaError(f"{folder.name}: {SPEC_FILE} is missing; expected the out_dir of featurize")
    return parts


def check_footers(parts: Sequence[Path | str], filesystem: Any = None) -> None:
    """Check the footer of every part file against the features layout (``filesystem``: the
    :mod:`pyarrow.fs` file system of ``parts``, None for local paths)."""
    for p in parts:
        try:
            schema = pq.read_schema(p, filesystem=filesystem)
        except (OSError, pa.ArrowInvalid) as e:
            raise SchemaError(f"{p}: not a readable Parquet file ({e})") from None
        check_arrow_features_schema(schema, str(p))


def read_summary(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The ``_SUMMARY.json`` of a featurize output directory (documents per split, taxonomy
    fingerprint, files with sha256, ...)."""
    p = Path(path) / SUMMARY_FILE
    if not p.is_file():
        raise SchemaError(f"{p}: not found; expected the out_dir of featurize")
    out: dict[str, Any] = json.loads(p.read_text(encoding="utf-8"))
    return out


def _read_part(part: str | os.PathLike[str]) -> pa.Table:
    """One part file, read as one file (``pq.read_table`` would import and set up the dataset
    machinery, a large share of a small training's first read; the same table)."""
    with pq.ParquetFile(part) as f:
        return f.read()


def read_features_local(
    path: str | os.PathLike[str],
    with_counts: bool = True,
    extra_columns: Sequence[str] = DEFAULT_EXTRA,
) -> tuple[SparseBatch, FeatureSpec]:
    """Read all part files in one process with pyarrow (tests, baselines, experiments): one
    SparseBatch in file order (files sorted by name, rows as stored), and the FeatureSpec. Same
    validation as the Spark reader."""
    root, _, parts = features_layout(path)
    check_footers(parts)
    spec = FeatureSpec.load(root)
    tables = [_read_part(p) for p in parts]
    table = pa.concat_tables(tables, promote_options="permissive")
    batch = SparseBatch.from_arrow(
        table, spec.n_features, with_counts=with_counts, extra_columns=extra_columns, source=str(root)
    )
    return batch, spec


def features_taxonomy(features: str | Path) -> Taxonomy:
    """The taxonomy of a features folder (a local path or a URI, :class:`sparkhc.fsio.Folder`)."""
    folder = fsio.Folder(features)
    if not folder.is_file(TAXONOMY_FILE):
        raise SchemaError(f"{folder.name}: no {TAXONOMY_FILE} in the features folder (featurize with a taxonomy)")
    if folder.local is not None:
        return Taxonomy.load(folder.local / TAXONOMY_FILE)
    return Taxonomy.from_tsv_text(folder.read_text(TAXONOMY_FILE), source=folder.where(TAXONOMY_FILE))


def features_corpus_info(features: str | Path) -> dict[str, Any]:
    """The ``corpus.json`` of a features folder (empty when there is none)."""
    folder = fsio.Folder(features)
    if not folder.is_file(CORPUS_FILE):
        return {}
    info: dict[str, Any] = json.loads(folder.read_text(CORPUS_FILE))
    return info


def scored_mask(taxonomy: Taxonomy, scored_labels: Iterable[str] | None) -> np.ndarray:
    """Boolean node mask of the labels scored by example- and label-based metrics (every real
    node but the root when ``scored_labels`` is None)."""
    if scored_labels is None:
        mask = ~taxonomy.virtual.copy()
        mask[0] = False
        return mask
    mask = np.zeros(taxonomy.n_nodes, dtype=bool)
    for name in scored_labels:
        mask[taxonomy.id(name)] = True
    return mask


def check_featurize_sources(corpus: str | None, input_path: str | None, taxonomy_path: str | None,
                            class_spaces: object | None) -> None:
    """The combination of featurize's sources: a corpus, or ``--input`` with ``--taxonomy`` or
    ``--class-spaces`` (not both)."""
    if corpus is None and (input_path is None or (taxonomy_path is None and class_spaces is None)):
        raise InputDataError("--taxonomy (or --class-spaces) is required with --input")
    if corpus is None and taxonomy_path is not None and class_spaces is not None:
        raise InputDataError("--taxonomy and --class-spaces exclude each other (the class spaces define the "
                             "taxonomy)")


# ------------------------------------------------------------------------------ row selection
@dataclass(frozen=True)
class Selection:
    """Which documents a step reads: a split and/or a fold, or every fold but one (training in
    cross-validation). ``None`` fields do not filter."""

    split: str | None = None
    fold: int | None = None
    exclude_fold: int | None = None

    def mask(self, split: np.ndarray | None, fold: np.ndarray | None) -> np.ndarray:
        """Boolean mask over documents with these ``split`` and ``fold`` columns (as read by
        :func:`read_features_local`; a null fold never equals a fold and is never excluded)."""
        n = len(split) if split is not None else len(fold) if fold is not None else 0
        m = np.ones(n, dtype=bool)
        if self.split is not None:
            if split is None:
                raise SchemaError("selection by split, but the documents have no split column")
            m &= np.asarray([s == self.split for s in split], dtype=bool)
        if self.fold is not None or self.exclude_fold is not None:
            if fold is None:
                raise SchemaError("selection by fold, but the documents have no fold column")
            f = _fold_values(fold)
            if self.fold is not None:
                m &= f == int(self.fold)
            if self.exclude_fold is not None:
                m &= f != int(self.exclude_fold)
        return m

    def subset(self, batch: SparseBatch) -> SparseBatch:
        """The selected documents of a batch read with the split and fold columns."""
        return batch.subset(np.flatnonzero(self.mask(batch.extra.get(SPLIT), batch.extra.get(FOLD))))

    def to_dict(self) -> dict[str, Any]:
        return {"split": self.split, "fold": self.fold, "exclude_fold": self.exclude_fold}

    def describe(self) -> str:
        return f"split {self.split!r}, fold {self.fold!r}, exclude_fold {self.exclude_fold!r}"


def _fold_values(fold: np.ndarray) -> np.ndarray:
    """Folds as int64 with -2**62 for a null (never equal to a real fold)."""
    arr = np.asarray(fold)
    if arr.dtype.kind in "iu":
        return arr.astype(np.int64)
    null = np.int64(-(2**62))
    return np.asarray([null if v is None or (isinstance(v, float) and np.isnan(v)) else int(v) for v in arr],
                      dtype=np.int64)


def selection_groups(features: str | Path) -> dict[tuple[str | None, int | None], int]:
    """Documents per ``(split, fold)`` of a features folder (a local path or a URI), from the split
    and fold columns of its part files only (pyarrow, no Spark; the layout is checked first)."""
    folder = fsio.Folder(features)
    counts: dict[tuple[str | None, int | None], int] = {}
    for name in layout_parts(folder):
        try:
            with folder.open(f"{FEATURES_DIR}/{name}") as fh:
                table = pq.read_table(fh, columns=[SPLIT, FOLD], use_threads=False)
        except (OSError, pa.ArrowInvalid) as e:
            raise SchemaError(f"{folder.where(FEATURES_DIR)}/{name}: not a readable Parquet file ({e})") from None
        # counted in Python: Arrow's group_by starts a thread pool that can abort the interpreter at exit
        for key, n in Counter(zip(table.column(SPLIT).to_pylist(), table.column(FOLD).to_pylist(),
                                  strict=True)).items():
            counts[key] = counts.get(key, 0) + n
    return counts


def selected_count(groups: Mapping[tuple[str | None, int | None], int], selection: Selection) -> int:
    """How many documents of ``groups`` (:func:`selection_groups`) ``selection`` selects."""
    keys = list(groups)
    if not keys:
        return 0
    mask = selection.mask(np.asarray([k[0] for k in keys], dtype=object), np.asarray([k[1] for k in keys], dtype=object))
    return sum(groups[k] for k, m in zip(keys, mask, strict=True) if m)


def empty_selection_message(source: str | Path, selection: Selection, what: str,
                            groups: Mapping[tuple[str | None, int | None], int]) -> str:
    """The error for a selection that matches no document of ``source``: it names the splits and
    folds present (``groups``: documents per ``(split, fold)``), so the user can choose ``--split`` /
    ``--fold`` / ``--exclude-fold`` (``source`` shown without credentials)."""
    splits = sorted({s for s, _ in groups}, key=lambda x: (x is not None, x or ""))
    folds = sorted({f for _, f in groups if f is not None})
    n_all = sum(groups.values())
    return (
        f"{fsio.redact(source)}: no {what}: the selection ({selection.describe()}) matches no document; the features hold "
        f"{n_all} document(s) with split(s) {', '.join('none' if x is None else repr(x) for x in splits) or 'none'} "
        f"and fold(s) {', '.join(map(str, folds)) or 'none'} (choose with --split NAME|all, --fold K, "
        "--exclude-fold K)"
    )


# ------------------------------------------------------------------------------ model taxonomy
def self_leaf_labels(label_sets: Iterable[Sequence[str] | None], taxonomy: Taxonomy) -> list[str]:
    """Internal nodes that are the deepest label of some training document: they get virtual
    ``/_self`` leaves (sorted names)."""
    is_leaf = taxonomy.is_leaf
    found: set[str] = set()
    for labs in label_sets:
        ids = [taxonomy.id(x) for x in (labs or [])]
        for c in taxonomy.deepest(taxonomy.closure(ids)):
            if not is_leaf[c]:
                found.add(taxonomy.names[c])
    return sorted(found)


def model_taxonomy(taxonomy: Taxonomy, label_sets: Iterable[Sequence[str] | None],
                   self_leaves: bool = True) -> Taxonomy:
    """The taxonomy a model is trained on: ``taxonomy`` plus a virtual ``/_self`` leaf under each
    internal node that is the deepest label of some training document (none when ``self_leaves``
    is False, for models that model partial paths natively)."""
    if not self_leaves:
        return taxonomy
    selfs = self_leaf_labels(label_sets, taxonomy)
    return taxonomy.with_self_leaves(selfs) if selfs else taxonomy
