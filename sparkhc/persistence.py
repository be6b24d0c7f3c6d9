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

import io
import json
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
from sparkhc.fsio import replace_dir
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
    """Save a fitted model to a directory (atomically), a local path or a URI
    (:func:`sparkhc.fsio.resolve`; see :func:`_save_remote` for what "atomic" means there). For a
    URI the returned Path is only its string form: use the ``path`` given."""
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
    if fsio.is_uri(path):
        files: list[tuple[str, Callable[[BinaryIO], Any]]] = [
            ("state.npz", lambda fh: write_npz(fh, state.arrays)),
            ("taxonomy.tsv", lambda fh: fh.write(model.taxonomy.to_tsv().encode("utf-8"))),
        ]
        if feature_spec_json is not None:
            files.append(("feature_spec.json", lambda fh: fh.write(feature_spec_json.encode("utf-8"))))
        files.append(("metadata.json", lambda fh: fh.write(json_text(meta).encode("utf-8"))))
        _save_remote(str(path), files, overwrite)
        return Path(str(path))
    path = fsio.local_path(path) or Path(path)  # a file: URI is its local path
    with atomic_dir(path, overwrite=overwrite) as tmp:
        with open(tmp / "state.npz", "wb") as fh:
            write_npz(fh, state.arrays)
        model.taxonomy.to_tsv(tmp / "taxonomy.tsv")
        if feature_spec_json is not None:
            (tmp / "feature_spec.json").write_text(feature_spec_json, encoding="utf-8")
        write_json_atomic(tmp / "metadata.json", meta)
    return path


def _save_remote(uri: str, files: list[tuple[str, Callable[[BinaryIO], Any]]], overwrite: bool) -> None:
    """Write a model folder at a URI, ``metadata.json`` (the last of ``files``) last: a reader,
    which needs ``metadata.json`` first (:func:`read_metadata`), finds either the complete model or
    no model. Object stores have no directory rename, so an overwrite first removes the old
    ``metadata.json`` (the old model stops being a model), then the rest of the old folder, then
    writes the new one: a failure during an overwrite leaves no model (the local path's rename
    keeps the old one), and a reader in the middle of loading the old model may fail. Every file
    is made in a local temp file first (the same bytes as a local save: ``state.npz`` is written
    to a seekable file), then uploaded with :func:`sparkhc.fsio.write_atomic`."""
    import tempfile

    fs, root = fsio.resolve(uri)
    where = fsio.redact(uri)
    if fsio.listdir(fs, root):
        if not overwrite:
            raise ModelError(f"{where} already exists; pass overwrite=True (--overwrite) to replace it")
        _delete_file(fs, root + "/metadata.json")  # first: the old folder stops being a model
        fsio.delete_tree(fs, root)
    fs.create_dir(root, recursive=True)
    try:
        for name, write in files:
            with tempfile.TemporaryFile() as tmp:
                write(tmp)
                tmp.seek(0)
                fsio.write_atomic(fs, f"{root}/{name}", _copier(tmp))
    except BaseException:
        fsio.delete_tree(fs, root)
        raise


def _copier(src: BinaryIO) -> Callable[[BinaryIO], None]:
    def copy(out: BinaryIO) -> None:
        shutil.copyfileobj(src, out, 8 << 20)

    return copy


def _delete_file(fs: Any, path: str) -> None:
    try:
        fs.delete_file(path)
    except FileNotFoundError:
        pass





def read_metadata(path: str | Path) -> dict[str, Any]:
    folder = fsio.Folder(path)
    mfile = folder.where("metadata.json")
    if not folder.is_dir():
        raise ModelError(f"{folder.name}: model directory not found")
    if not folder.is_file("metadata.json"):
        raise ModelError(f"{folder.name}: not a model directory or truncated: metadata.json is missing")
    try:
        meta: dict[str, Any] = json.loads(folder.read_text("metadata.json"))
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


def read_model_taxonomy(folder: fsio.Folder, meta: dict[str, Any]) -> Taxonomy:
    """The model taxonomy (with its virtual ``/_self`` leaves) of a model folder, checked against its
    metadata (``.base()`` is the taxonomy of the documents)."""
    if not folder.is_file("taxonomy.tsv"):
        raise ModelError(f"{folder.name}: truncated model directory: taxonomy.tsv is missing")
    tax = Taxonomy.from_tsv_text(folder.read_text("taxonomy.tsv"), source=folder.where("taxonomy.tsv"))
    if tax.fingerprint(include_virtual=True) != meta.get("taxonomy_fingerprint_with_virtual"):
        raise ModelError(f"{folder.name}: taxonomy.tsv does not match metadata.json (corrupt model directory)")
    return tax


def model_feature_spec(path: str | Path) -> Any:
    """The fitted :class:`~sparkhc.text.spec.FeatureSpec` a model was trained on (its
    ``feature_spec.json``), checked against the model's metadata: what ``predict --input`` and
    ``featurize --like`` apply to raw documents."""
    from sparkhc.text.spec import SPEC_FILE

    meta = read_metadata(path)
    folder = fsio.Folder(path)
    if not folder.is_file(SPEC_FILE):
        raise ModelError(f"{folder.name}: the model has no {SPEC_FILE} (it was trained on features sparkhc did not "
                         "make, e.g. a pyspark.ml vector column): featurize the documents as for its training and "
                         "pass --features")
    return checked_feature_spec(folder.read_text(SPEC_FILE), meta, folder.where(SPEC_FILE))


def checked_feature_spec(text: str, meta: dict[str, Any], where: str) -> Any:
    """The fitted FeatureSpec of a model's ``feature_spec.json`` text (found at ``where``), checked
    against the model's metadata ``meta``: the spec :func:`model_feature_spec` gives, also for a
    model held in memory (``sparkhc.ml``)."""
    from sparkhc.text.spec import FeatureSpec

    spec = FeatureSpec.from_json(text, source=where)
    want = meta.get("feature_spec_fingerprint")
    if want is not None and spec.fingerprint != want:
        raise ModelError(f"{where}: features {spec.fingerprint}, but metadata.json says the model "
                         f"was trained on {want} (corrupt model directory)")
    return spec


def check_model_fits(path: str, meta: dict[str, Any], taxonomy: Taxonomy | None,
                     feature_spec_fingerprint: str | None) -> None:
    """Refuse data of another taxonomy or feature spec than the model's (``meta``: its metadata)."""
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
            f"has features {feature_spec_fingerprint}; featurize with --like MODEL (the model's feature_spec.json) "
            "or predict the raw documents with --input"
        )


def load_model(
    path: str | Path,
    taxonomy: Taxonomy | None = None,
    feature_spec_fingerprint: str | None = None,
) -> tuple[HierModel, dict[str, Any]]:
    """Load a model directory (a local path or a URI); refuse a taxonomy or feature spec other
    than the model's."""
    from sparkhc.models import get_model_class

    meta = read_metadata(path)
    folder = fsio.Folder(path)
    path = folder.name  # the messages below: no credentials of a URI
    if not folder.is_file("state.npz"):
        raise ModelError(f"{path}: truncated model directory: state.npz is missing")
    tax = read_model_taxonomy(folder, meta)
    check_model_fits(path, meta, taxonomy, feature_spec_fingerprint)
    cls = get_model_class(meta["model"])
    model: HierModel = cls(tax, meta["n_features"], **meta["params"])
    try:
        with folder.open("state.npz") as fh:
            arrays = read_npz(fh)
    except (zipfile.BadZipFile, ValueError, OSError) as e:
        raise ModelError(f"{folder.where('state.npz')}: corrupt or truncated ({e})") from None
    model.set_state(ModelState(arrays, dict(meta.get("counters", {})), meta.get("combine", cls.combine)))
    return model, meta
