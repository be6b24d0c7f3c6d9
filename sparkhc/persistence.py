"""The model directory format and the one serializer of model state.

A saved model is a directory::

    metadata.json      format, format_version, model name, params, fingerprints, counters, ...
    state.npz          the ModelState arrays (dense arrays, and CSR as name__data/indices/indptr)
    taxonomy.tsv       the model's taxonomy, virtual /_self leaves included
    feature_spec.json  (optional) the feature spec the model was trained on

No pickle anywhere: ``state.npz`` is written with ``allow_pickle=False`` and a fixed zip timestamp,
so the same state gives byte-identical files. Saves are atomic (temp directory, then rename) and
refuse to overwrite unless asked. ``state_to_bytes``/``state_from_bytes`` are the same format in
memory and are what Spark partitions send back during parameter mixing.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import uuid
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import pyarrow.fs as pafs
import scipy.sparse as sp

from sparkhc import fsio
from sparkhc.errors import ModelError
from sparkhc.models.base import HierModel, ModelState
from sparkhc.taxonomy import Taxonomy

FORMAT = "sparkhc-model"
FORMAT_VERSION = 1
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)
_CSR_PARTS = ("data", "indices", "indptr", "shape")


def __version__() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("sparkhc")
    except PackageNotFoundError:  # running from a source tree
        return "0+unknown"


# ---------------------------------------------------------------------- state <-> bytes
def _flatten(arrays: dict[str, Any]) -> dict[str, np.ndarray]:
    flat: dict[str, np.ndarray] = {}
    for name, v in sorted(arrays.items()):
        if "__" in name:
            raise ValueError(f"array name {name!r} may not contain '__'")
        if sp.issparse(v):
            m = sp.csr_matrix(v)
            flat[f"{name}__data"] = m.data
            flat[f"{name}__indices"] = m.indices
            flat[f"{name}__indptr"] = m.indptr
            flat[f"{name}__shape"] = np.asarray(m.shape, dtype=np.int64)
        else:
            flat[name] = np.asarray(v)
    return flat


def _unflatten(flat: dict[str, np.ndarray]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    csr: dict[str, dict[str, np.ndarray]] = {}
    for key, v in flat.items():
        base, sep, part = key.partition("__")
        if sep and part in _CSR_PARTS:
            csr.setdefault(base, {})[part] = v
        else:
            out[key] = v
    for base, parts in csr.items():
        out[base] = sp.csr_matrix(
            (parts["data"], parts["indices"], parts["indptr"]), shape=tuple(int(s) for s in parts["shape"])
        )
    return out


def write_npz(fh: Any, arrays: dict[str, Any]) -> None:
    """Write arrays as .npz (readable by ``np.load``) deterministically, without pickle."""
    with zipfile.ZipFile(fh, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
        for name, arr in _flatten(arrays).items():
            if arr.dtype.hasobject:
                raise ValueError(f"array {name!r} has dtype object; not saved (no pickle)")
            arr = np.ascontiguousarray(arr)
            info = zipfile.ZipInfo(name + ".npy", date_time=_ZIP_TIME)
            info.external_attr = 0o644 << 16
            # streamed (no in-memory copy of a large array); the same bytes as ``writestr``
            with zf.open(info, "w", force_zip64=arr.nbytes > (1 << 30)) as out:
                np.lib.format.write_array(out, arr, allow_pickle=False)


def read_npz(fh: Any) -> dict[str, Any]:
    with np.load(fh, allow_pickle=False) as z:
        return _unflatten({k: z[k] for k in z.files})


def state_to_bytes(state: ModelState) -> bytes:
    """Serialize a ModelState (arrays + counters + combine rule) to bytes."""
    buf = io.BytesIO()
    write_state(buf, state)
    return buf.getvalue()


def write_state(fh: Any, state: ModelState) -> None:
    """Write the bytes of :func:`state_to_bytes` to a binary file object (streamed)."""
    meta = {"counters": state.counters, "combine": state.combine}
    arrays = dict(state.arrays)
    arrays["_meta"] = np.frombuffer(json.dumps(meta, sort_keys=True).encode("utf-8"), dtype=np.uint8)
    write_npz(fh, arrays)


def state_from_bytes(data: bytes) -> ModelState:
    return read_state(io.BytesIO(data))


def read_state(fh: Any) -> ModelState:
    """Read what :func:`write_state` wrote (a binary file object or path; one copy of each array)."""
    arrays = read_npz(fh)
    meta = json.loads(bytes(arrays.pop("_meta")).decode("utf-8"))
    return ModelState(arrays, meta["counters"], meta["combine"])


# ---------------------------------------------------------------------- atomic directories
@contextmanager
def atomic_dir(path: str | Path, overwrite: bool = False) -> Iterator[Path]:
    """Yield a temp directory next to ``path``; on success it replaces ``path`` by rename.

    A crash (exception) removes the temp directory and leaves any previous ``path`` intact.
    """
    path = Path(path)
    if path.exists() and not overwrite:
        raise ModelError(f"{path} already exists; pass overwrite=True (--overwrite) to replace it")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.tmp-{uuid.uuid4().hex[:12]}"
    tmp.mkdir()
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    replace_dir(tmp, path)


def replace_dir(src: Path, dst: Path) -> None:
    """Move directory ``src`` to ``dst``, replacing an existing ``dst`` with two renames (the one
    directory swap; if the second rename fails the old ``dst`` is put back)."""
    if not dst.exists():
        os.replace(src, dst)
        return
    old = dst.parent / f".{dst.name}.old-{uuid.uuid4().hex[:12]}"
    os.replace(dst, old)
    try:
        os.replace(src, dst)
    except BaseException:
        os.replace(old, dst)
        raise
    shutil.rmtree(old, ignore_errors=True)


def sha256_file(path: str | Path) -> str:
    """Hex sha256 of a file, read in 1 MiB chunks (the one file-hashing helper)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def write_file_atomic(path: str | Path, write: Callable[[BinaryIO], Any]) -> None:
    """``write(fh)`` into a temp file next to ``path``, then rename it over ``path``; a failure
    leaves no partial file (:func:`sparkhc.fsio.write_atomic` on the local file system)."""
    fsio.write_atomic(pafs.LocalFileSystem(), str(Path(path).absolute()), write)


def write_state_atomic(path: str | Path, state: ModelState) -> None:
    """:func:`write_state` to ``path`` atomically (streamed: no in-memory copy of the arrays)."""
    write_file_atomic(path, lambda fh: write_state(fh, state))


def json_text(obj: Any) -> str:
    """The JSON text of every metadata/record file (sorted keys, indented, numpy values as plain)."""
    return json.dumps(obj, indent=2, sort_keys=True, default=_json_default) + "\n"


def write_json_atomic(path: str | Path, obj: Any) -> None:
    text = json_text(obj)
    write_file_atomic(path, lambda fh: fh.write(text.encode("utf-8")))


def _json_default(o: Any) -> Any:
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serializable: {type(o).__name__}")


# ---------------------------------------------------------------------- models
def save_model(
    path: str | Path,
    model: HierModel,
    metadata: dict[str, Any] | None = None,
    feature_spec_json: str | None = None,
    overwrite: bool = False,
) -> Path:
    """Save a fitted model to a directory (atomically)."""
    state = model.get_state()
    meta = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "model": model.name,
        "params": model.params,
        "n_features": model.n_features,
        "taxonomy_fingerprint": model.taxonomy.fingerprint(),
        "taxonomy_fingerprint_with_virtual": model.taxonomy.fingerprint(include_virtual=True),
        "sparkhc_version": __version__(),
        "counters": state.counters,
        "combine": state.combine,
        "model_size": model.model_size(),
    }
    meta.update(metadata or {})
    path = Path(path)
    with atomic_dir(path, overwrite=overwrite) as tmp:
        with open(tmp / "state.npz", "wb") as fh:
            write_npz(fh, state.arrays)
        model.taxonomy.to_tsv(tmp / "taxonomy.tsv")
        if feature_spec_json is not None:
            (tmp / "feature_spec.json").write_text(feature_spec_json, encoding="utf-8")
        write_json_atomic(tmp / "metadata.json", meta)
    return path


def read_metadata(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    mfile = path / "metadata.json"
    if not path.is_dir():
        raise ModelError(f"{path}: model directory not found")
    if not mfile.is_file():
        raise ModelError(f"{path}: not a model directory or truncated: metadata.json is missing")
    try:
        meta: dict[str, Any] = json.loads(mfile.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ModelError(f"{mfile}: corrupt metadata ({e})") from None
    if meta.get("format") != FORMAT:
        raise ModelError(f"{mfile}: not a sparkhc model (format {meta.get('format')!r})")
    version = meta.get("format_version")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise ModelError(
            f"{mfile}: model format version {version!r} is newer than this sparkhc understands "
            f"({FORMAT_VERSION}); upgrade sparkhc to load it"
        )
    return meta


def load_model(
    path: str | Path,
    taxonomy: Taxonomy | None = None,
    feature_spec_fingerprint: str | None = None,
) -> tuple[HierModel, dict[str, Any]]:
    """Load a model directory; refuse a taxonomy or feature spec other than the model's."""
    from sparkhc.models import get_model_class

    path = Path(path)
    meta = read_metadata(path)
    for f in ("state.npz", "taxonomy.tsv"):
        if not (path / f).is_file():
            raise ModelError(f"{path}: truncated model directory: {f} is missing")
    tax = Taxonomy.from_tsv_text((path / "taxonomy.tsv").read_text(encoding="utf-8"), source=str(path / "taxonomy.tsv"))
    if tax.fingerprint(include_virtual=True) != meta.get("taxonomy_fingerprint_with_virtual"):
        raise ModelError(f"{path}: taxonomy.tsv does not match metadata.json (corrupt model directory)")
    if taxonomy is not None and taxonomy.fingerprint() != meta["taxonomy_fingerprint"]:
        raise ModelError(
            f"{path}: the model was trained on taxonomy {meta['taxonomy_fingerprint']} but the data uses "
            f"taxonomy {taxonomy.fingerprint()} ({taxonomy.source}); retrain the model or use the "
            "matching taxonomy"
        )
    if (
        feature_spec_fingerprint is not None
        and meta.get("feature_spec_fingerprint") is not None
        and meta["feature_spec_fingerprint"] != feature_spec_fingerprint
    ):
        raise ModelError(
            f"{path}: the model was trained on features {meta['feature_spec_fingerprint']} but the data "
            f"has features {feature_spec_fingerprint}; featurize with the model's feature_spec.json"
        )
    cls = get_model_class(meta["model"])
    model: HierModel = cls(tax, meta["n_features"], **meta["params"])
    try:
        with open(path / "state.npz", "rb") as fh:
            arrays = read_npz(fh)
    except (zipfile.BadZipFile, ValueError, OSError) as e:
        raise ModelError(f"{path / 'state.npz'}: corrupt or truncated ({e})") from None
    model.set_state(ModelState(arrays, dict(meta.get("counters", {})), meta.get("combine", cls.combine)))
    return model, meta
