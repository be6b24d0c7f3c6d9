"""Multi-dimensional classification data: the staged MDC JSON Lines, their schema and folds.

Layout (``../shared/data/mdc/SOURCE.md``): ``<name>.jsonl.gz`` with one record per example,
``{"id", "targets": [one value per class variable], "features": [...]}`` (``edm`` rows also carry
``"test_fold"``), ``<name>.schema.json`` (target names and value sets, feature names and types) and,
when the folds are not in the records, ``<name>.folds.tsv`` (``id<TAB>fold``).

Conventions
-----------
* Class space ``j`` is the schema's value list for target ``j`` restricted to the values that
  occur in the file, in schema order (``solar_flare1`` lists 0–4 for every target but uses
  {0,1,2}, {0,1,2,4}, {0,1}: ``K = 3, 4, 2`` as in the paper's Table 2). Targets are class indices.
* Features: nominal ones become one-hot columns over the schema's values (a missing value is an
  all-zero block); numeric ones are min–max scaled with the minimum and maximum of the *training*
  fold only (:class:`FeatureScaler`), a missing numeric value becomes the training mean, and a
  column that is constant on the training fold becomes 0. Test values may fall outside [0, 1].
"""

from __future__ import annotations

import csv
import gzip
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sparkhc.errors import DataUnavailableError, InputDataError, SchemaError

NUMERIC = "numeric"
NOMINAL = "nominal"


@dataclass(frozen=True)
class ColumnSpec:
    """One input column of an MDC data set: ``kind`` is ``numeric`` or ``nominal`` (then ``values`` is
    its domain). Not the text features' :class:`sparkhc.text.spec.FeatureSpec` (the one feature spec)."""

    name: str
    kind: str
    values: tuple[str, ...] = ()


@dataclass(frozen=True)
class MDCDataset:
    """An MDC data set before feature scaling.

    Attributes
    ----------
    name : data set name.
    ids : (n,) int64 record ids.
    numeric : (n, n_numeric) float64 raw numeric features (NaN = missing).
    nominal : (n, n_nominal) int64 value indices into ``ColumnSpec.values`` (−1 = missing).
    features : the specs, numeric ones first then nominal ones, each group in file order.
    Y : (n, q) int64 class indices.
    target_names : the q class-variable names.
    class_values : per class space, the original value of each class index.
    folds : (n,) int64 cross-validation fold of each example (its test fold).
    """

    name: str
    ids: np.ndarray
    numeric: np.ndarray
    nominal: np.ndarray
    features: tuple[ColumnSpec, ...]
    Y: np.ndarray
    target_names: tuple[str, ...]
    class_values: tuple[tuple[str, ...], ...]
    folds: np.ndarray

    @property
    def n_classes(self) -> list[int]:
        return [len(v) for v in self.class_values]

    @property
    def n_folds(self) -> int:
        return int(self.folds.max()) + 1

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    def fold_indices(self, fold: int) -> tuple[np.ndarray, np.ndarray]:
        """``(train_rows, test_rows)`` of one cross-validation fold."""
        test = self.folds == fold
        if not test.any():
            raise InputDataError(f"{self.name}: fold {fold} is empty (folds are 0..{self.n_folds - 1})")
        return np.flatnonzero(~test), np.flatnonzero(test)

    def cv_splits(self) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
        for k in range(self.n_folds):
            train, test = self.fold_indices(k)
            yield k, train, test


class FeatureScaler:
    """Min–max scaling of numeric columns (training statistics) and one-hot nominal columns."""

    def __init__(self, features: Sequence[ColumnSpec]) -> None:
        self.features = tuple(features)

    def fit(self, ds: MDCDataset, rows: np.ndarray | None = None) -> FeatureScaler:
        num = ds.numeric if rows is None else ds.numeric[rows]
        if num.shape[0] == 0:
            raise InputDataError(f"{ds.name}: cannot fit the feature scaling on zero rows")
        if num.shape[1]:
            with np.errstate(all="ignore"):
                lo = np.nanmin(num, axis=0) if num.size else np.zeros(0)
                hi = np.nanmax(num, axis=0) if num.size else np.zeros(0)
                mean = np.nanmean(num, axis=0)
            all_missing = np.isnan(lo)
            lo = np.where(all_missing, 0.0, lo)
            hi = np.where(all_missing, 0.0, hi)
            mean = np.where(all_missing, 0.0, mean)
        else:
            lo = hi = mean = np.zeros(0)
        self.min_, self.max_, self.mean_ = lo, hi, mean
        return self

    def transform(self, ds: MDCDataset, rows: np.ndarray | None = None) -> np.ndarray:
        if not hasattr(self, "min_"):
            raise InputDataError("FeatureScaler.transform called before fit")
        num = ds.numeric if rows is None else ds.numeric[rows]
        nom = ds.nominal if rows is None else ds.nominal[rows]
        span = self.max_ - self.min_
        filled = np.where(np.isnan(num), self.mean_, num)
        safe = np.where(span > 0, span, 1.0)
        scaled = np.where(span > 0, (filled - self.min_) / safe, 0.0)
        blocks = [scaled]
        nominal_specs = [f for f in self.features if f.kind == NOMINAL]
        for c, spec in enumerate(nominal_specs):
            block = np.zeros((nom.shape[0], len(spec.values)))
            present = nom[:, c] >= 0
            block[np.flatnonzero(present), nom[present, c]] = 1.0
            blocks.append(block)
        return np.hstack(blocks) if blocks else np.zeros((num.shape[0], 0))

    def feature_names(self) -> list[str]:
        names = [f.name for f in self.features if f.kind == NUMERIC]
        for f in self.features:
            if f.kind == NOMINAL:
                names.extend(f"{f.name}={v}" for v in f.values)
        return names


def resolve_mdc_dir(data_dir: str | Path) -> Path:
    """``data_dir/mdc`` when it exists (``../shared/data``), else ``data_dir`` itself."""
    d = Path(data_dir)
    if (d / "mdc").is_dir():
        return d / "mdc"
    if d.is_dir():
        return d
    raise DataUnavailableError(f"MDC data directory {d} not found (expected ../shared/data/mdc)")


def _parse_kind(name: str, raw: dict[str, Any], path: Path) -> ColumnSpec:
    kind = str(raw.get("type", ""))
    if kind.startswith(NUMERIC):
        return ColumnSpec(name, NUMERIC)
    if kind.startswith(NOMINAL):
        values = raw.get("values")
        if not isinstance(values, list) or not values:
            raise SchemaError(f"{path}: nominal feature {name!r} has no 'values' list")
        return ColumnSpec(name, NOMINAL, tuple(str(v) for v in values))
    raise SchemaError(f"{path}: feature {name!r} has unknown type {kind!r} (numeric… or nominal)")


def load_mdc(mdc_dir: str | Path, name: str) -> MDCDataset:
    """Read ``<name>.jsonl.gz`` + ``<name>.schema.json`` (+ ``<name>.folds.tsv``) from ``mdc_dir``."""
    mdc_dir = Path(mdc_dir)
    data_path = mdc_dir / f"{name}.jsonl.gz"
    schema_path = mdc_dir / f"{name}.schema.json"
    for p in (data_path, schema_path):
        if not p.is_file():
            raise DataUnavailableError(
                f"MDC data set {name!r}: {p} not found (see ../shared/data/mdc/SOURCE.md)"
            )
    schema = json.loads(schema_path.read_text(encoding="utf-8"))
    try:
        targets = schema["targets"]
        feats_raw = schema["features"]
        target_names = tuple(str(t["name"]) for t in targets)
        target_domains = [[str(v) for v in t["values"]] for t in targets]
    except (KeyError, TypeError) as e:
        raise SchemaError(f"{schema_path}: missing or malformed 'targets'/'features' ({e})") from e
    specs_in_order = [
        _parse_kind(str(f.get("name", f"f{i}")), f, schema_path) for i, f in enumerate(feats_raw)
    ]
    num_cols = [i for i, s in enumerate(specs_in_order) if s.kind == NUMERIC]
    nom_cols = [i for i, s in enumerate(specs_in_order) if s.kind == NOMINAL]
    value_index = {i: {v: k for k, v in enumerate(specs_in_order[i].values)} for i in nom_cols}
    target_index = [{v: k for k, v in enumerate(dom)} for dom in target_domains]
    q = len(target_names)
    n_feat = len(specs_in_order)

    ids: list[int] = []
    ycodes: list[list[int]] = []
    numeric: list[list[float]] = []
    nominal: list[list[int]] = []
    rec_folds: list[int | None] = []
    with gzip.open(data_path, "rt", encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            where = f"{data_path}:{lineno}"
            try:
                rec = json.loads(line)
                feats = rec["features"]
                tvals = rec["targets"]
                rid = int(rec["id"])
            except (ValueError, KeyError, TypeError) as e:
                raise InputDataError(f"{where}: malformed record ({e})") from e
            if len(feats) != n_feat or len(tvals) != q:
                raise InputDataError(
                    f"{where}: {len(feats)} features / {len(tvals)} targets; the schema has {n_feat} / {q}"
                )
            codes = []
            for j, v in enumerate(tvals):
                k = target_index[j].get(str(v))
                if k is None:
                    raise InputDataError(f"{where}: target {target_names[j]!r} value {v!r} not in the schema")
                codes.append(k)
            row_num = []
            for i in num_cols:
                v = feats[i]
                try:
                    row_num.append(np.nan if v is None else float(v))
                except (TypeError, ValueError) as e:
                    raise InputDataError(
                        f"{where}: numeric feature {specs_in_order[i].name!r} = {v!r}"
                    ) from e
            row_nom = []
            for i in nom_cols:
                v = feats[i]
                if v is None:
                    row_nom.append(-1)
                    continue
                k = value_index[i].get(str(v))
                if k is None:
                    raise InputDataError(
                        f"{where}: nominal feature {specs_in_order[i].name!r} value {v!r} not in the schema"
                    )
                row_nom.append(k)
            ids.append(rid)
            ycodes.append(codes)
            numeric.append(row_num)
            nominal.append(row_nom)
            rec_folds.append(rec.get("test_fold"))
    if not ids:
        raise InputDataError(f"{data_path}: no records")
    if len(set(ids)) != len(ids):
        raise InputDataError(f"{data_path}: duplicate ids")

    # class spaces: schema values that occur, in schema order; re-index the targets
    Y_schema = np.array(ycodes, dtype=np.int64)
    Y = np.empty_like(Y_schema)
    class_values = []
    for j in range(q):
        used = np.unique(Y_schema[:, j])
        remap = np.full(len(target_domains[j]), -1, dtype=np.int64)
        remap[used] = np.arange(used.size)
        Y[:, j] = remap[Y_schema[:, j]]
        class_values.append(tuple(target_domains[j][k] for k in used))

    folds = _read_folds(mdc_dir, name, ids, rec_folds)
    n = len(ids)
    return MDCDataset(
        name=name,
        ids=np.array(ids, dtype=np.int64),
        numeric=np.array(numeric, dtype=np.float64).reshape(n, len(num_cols)),
        nominal=np.array(nominal, dtype=np.int64).reshape(n, len(nom_cols)),
        features=tuple(specs_in_order[i] for i in num_cols) + tuple(specs_in_order[i] for i in nom_cols),
        Y=Y,
        target_names=target_names,
        class_values=tuple(class_values),
        folds=folds,
    )


def _read_folds(mdc_dir: Path, name: str, ids: list[int], rec_folds: list[int | None]) -> np.ndarray:
    if all(f is not None for f in rec_folds):
        folds = np.array(rec_folds, dtype=np.int64)
    else:
        path = mdc_dir / f"{name}.folds.tsv"
        if not path.is_file():
            raise DataUnavailableError(f"{name}: no 'test_fold' in the records and no {path}")
        by_id: dict[int, int] = {}
        with path.open(encoding="utf-8", newline="") as fh:
            for r in csv.DictReader(fh, delimiter="\t"):
                try:
                    by_id[int(r["id"])] = int(r["fold"])
                except (KeyError, TypeError, ValueError) as e:
                    raise InputDataError(f"{path}: bad row {r} ({e})") from e
        missing = [i for i in ids if i not in by_id]
        if missing:
            raise InputDataError(f"{path}: {len(missing)} ids without a fold, e.g. {missing[:5]}")
        folds = np.array([by_id[i] for i in ids], dtype=np.int64)
    if folds.min() < 0 or np.unique(folds).size != folds.max() + 1:
        raise InputDataError(
            f"{name}: folds must be 0..k-1 and all non-empty; got {sorted(set(folds.tolist()))}"
        )
    return folds


def encode_targets(columns: Sequence[Sequence[Any]]) -> tuple[np.ndarray, list[tuple[str, ...]]]:
    """Several label columns (one per class space, e.g. from featurized text) -> ``(Y, class_values)``.

    Class indices follow the sorted string values of each column.
    """
    if not columns:
        raise InputDataError("no label columns")
    n = len(columns[0])
    if any(len(c) != n for c in columns):
        raise InputDataError(f"label columns have different lengths: {[len(c) for c in columns]}")
    Y = np.empty((n, len(columns)), dtype=np.int64)
    values: list[tuple[str, ...]] = []
    for j, col in enumerate(columns):
        strs = [str(v) for v in col]
        if any(v in ("None", "nan", "") for v in strs):
            raise InputDataError(f"label column {j} has missing values")
        dom = tuple(sorted(set(strs)))
        idx = {v: k for k, v in enumerate(dom)}
        Y[:, j] = [idx[v] for v in strs]
        values.append(dom)
    return Y, values
