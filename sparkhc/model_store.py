"""Model registry: numbered versions of saved models under one root, and a movable ``current``.

Layout of a registry root::

    ROOT/
      v0001/            a model directory (persistence format: metadata.json, state.npz,
      v0002/            taxonomy.tsv, feature_spec.json) plus model_store.json
      current.json      {"version": "v0002", "promoted_at": ..., "history": [...]}

``current.json`` is a small pointer file replaced atomically (temp file + rename), not a symlink,
so it works on any file system, including object-store mounts and Windows shares. A version is
created by copying the model into a hidden temp directory inside ``ROOT`` and renaming it to the
next free ``vNNNN``: a rename onto an existing (non-empty) version fails, so two concurrent
registrations get different numbers and a crash never leaves a half-copied version behind.

What is recorded, without duplicating ``metadata.json`` (written by
:func:`sparkhc.persistence.save_model`: model name, parameters, taxonomy fingerprints, feature
spec fingerprint, training selection and document count, package version):

``model_store.json``
    version, registration time, source directory, ``model_version`` (content hash of the
    weights, the same value the predictions' ``model_version`` column holds), the training data
    fingerprint (hash of feature spec fingerprint + training selection + document count), and the
    evaluation metrics when given.

Loading goes through :func:`sparkhc.persistence.load_model`, which refuses a newer model format
or a taxonomy other than the data's, with a message that says what to do.

Registry roots are local paths (a shared mount is fine): creating a version relies on a directory
rename that fails onto an existing version, which object stores (S3, GCS) do not offer through
``pyarrow.fs`` (no atomic rename, no conditional put), so two concurrent registrations there could
take the same number. Model folders themselves may live at any URI (:func:`weights_hash`,
:func:`sparkhc.persistence.save_model` / ``load_model``); register copies one into a local root.

Usage::

    v = register("models", "work/model", metrics="work/predictions/metrics.json")   # 'v0001'
    promote("models", v)
    model, meta, version = load("models", "current", taxonomy=data_taxonomy)
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import re
import shutil
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sparkhc import fsio
from sparkhc.errors import ModelError
from sparkhc.fsio import sha256_file
from sparkhc.persistence import load_model, read_metadata, write_json_atomic

__all__ = [
    "CURRENT",
    "CURRENT_FILE",
    "REGISTRY_FILE",
    "attach_metrics",
    "current_version",
    "list_versions",
    "load",
    "weights_hash",
    "promote",
    "register",
    "resolve",
    "show",
    "training_data_fingerprint",
]

CURRENT = "current"
CURRENT_FILE = "current.json"
REGISTRY_FILE = "model_store.json"
_VERSION_RE = re.compile(r"^v(\d{4,})$")
_MODEL_FILES = ("metadata.json", "state.npz", "taxonomy.tsv")


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _version_name(n: int) -> str:
    return f"v{n:04d}"


# ---------------------------------------------------------------------- fingerprints
def weights_hash(model_dir: str | Path) -> str:
    """Content hash of a model's weights (first 12 hex digits of the sha256 of ``state.npz``).

    ``state.npz`` is written deterministically, so retraining to the same weights gives the same
    version; it is the ``model_version`` column of predictions and reclassification output.
    """
    folder = fsio.Folder(model_dir)
    if not folder.is_file("state.npz"):
        raise ModelError(f"{folder.name}: truncated model directory: state.npz is missing")
    if folder.local is not None:
        return sha256_file(folder.local / "state.npz")[:12]
    return hashlib.sha256(folder.read_bytes("state.npz")).hexdigest()[:12]


def training_data_fingerprint(meta: Mapping[str, Any]) -> str | None:
    """Hash of what the model was trained on: feature spec fingerprint, training selection and
    document count (from ``metadata.json``); None when the metadata has none of them."""
    training = meta.get("training") or {}
    content = {
        "feature_spec_fingerprint": meta.get("feature_spec_fingerprint"),
        "selection": training.get("selection"),
        "documents": training.get("documents"),
    }
    if all(v is None for v in content.values()):
        return None
    blob = json.dumps(content, sort_keys=True, default=str).encode("utf-8")
    return hashlib.sha256(blob).hexdigest()[:16]


# ---------------------------------------------------------------------- layout helpers
def _root(root: str | Path, create: bool = False) -> Path:
    r = Path(root)
    if create:
        r.mkdir(parents=True, exist_ok=True)
    elif not r.is_dir():
        raise ModelError(f"{r}: model registry not found (register a model first: sparkhc models register)")
    return r


def _numbers(root: Path) -> list[int]:
    out = []
    for p in root.iterdir():
        m = _VERSION_RE.match(p.name)
        if m and p.is_dir():
            out.append(int(m.group(1)))
    return sorted(out)


def list_versions(root: str | Path) -> list[str]:
    """Registered versions, oldest first (``[]`` for a missing or empty root)."""
    r = Path(root)
    if not r.is_dir():
        return []
    return [_version_name(n) for n in _numbers(r)]


def _check_version(root: Path, version: str) -> Path:
    if not _VERSION_RE.match(version):
        raise ModelError(f"{version!r} is not a model version; expected 'current' or vNNNN (e.g. v0001)")
    d = root / version
    if not d.is_dir():
        known = ", ".join(list_versions(root)) or "none"
        raise ModelError(f"{root}: no model version {version} (registered: {known})")
    return d


def _read_current(root: Path) -> dict[str, Any] | None:
    f = root / CURRENT_FILE
    if not f.is_file():
        return None
    try:
        data: dict[str, Any] = json.loads(f.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ModelError(f"{f}: corrupt current pointer ({e}); fix it with sparkhc models promote") from None
    if not isinstance(data.get("version"), str):
        raise ModelError(f"{f}: no 'version' in the current pointer; fix it with sparkhc models promote")
    return data


def current_version(root: str | Path) -> str | None:
    """The version ``current`` points to, or None before the first promotion."""
    data = _read_current(_root(root))
    return None if data is None else str(data["version"])


def resolve(root: str | Path, version: str = CURRENT) -> Path:
    """The model directory of ``version`` (``"current"`` or ``vNNNN``) in the registry."""
    r = _root(root)
    if version == CURRENT:
        data = _read_current(r)
        if data is None:
            known = ", ".join(list_versions(r)) or "none"
            raise ModelError(
                f"{r}: no current model yet (registered versions: {known}); promote one with "
                "sparkhc models promote VERSION"
            )
        version = str(data["version"])
    return _check_version(r, version)


def load(root: str | Path, version: str = CURRENT, **load_kwargs: Any) -> tuple[Any, dict[str, Any], str]:
    """Load a registered model: ``(model, metadata, version name)``.

    ``load_kwargs`` go to :func:`sparkhc.persistence.load_model` (``taxonomy=``,
    ``feature_spec_fingerprint=``): a model of a newer format or of another taxonomy is refused
    with :class:`~sparkhc.errors.ModelError`.
    """
    d = resolve(root, version)
    model, meta = load_model(d, **load_kwargs)
    return model, meta, d.name


# ---------------------------------------------------------------------- registration
def _read_registry_file(d: Path) -> dict[str, Any]:
    f = d / REGISTRY_FILE
    if not f.is_file():
        return {}
    data: dict[str, Any] = json.loads(f.read_text(encoding="utf-8"))
    return data


def _metrics_payload(metrics: Mapping[str, Any] | str | Path | None) -> dict[str, Any] | None:
    """Accept ``{metric: value}``, an evaluate result ``{"metrics": {...}, ...}`` or its file."""
    if metrics is None:
        return None
    if isinstance(metrics, str | Path):
        p = Path(metrics)
        try:
            metrics = json.loads(p.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ModelError(f"{p}: metrics file not found") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ModelError(f"{p}: not a JSON metrics file ({e})") from None
    if not isinstance(metrics, Mapping):
        raise ModelError(f"metrics must be a JSON object; got {type(metrics).__name__}")
    inner = metrics.get("metrics")
    if isinstance(inner, Mapping):
        return {"values": dict(inner), **{k: v for k, v in metrics.items() if k != "metrics"}}
    return {"values": dict(metrics)}


def register(
    root: str | Path,
    model_dir: str | Path,
    metrics: Mapping[str, Any] | str | Path | None = None,
    move: bool = False,
    promote_to_current: bool = False,
    note: str | None = None,
) -> str:
    """Add a saved model directory to the registry as the next version; return its name.

    Parameters
    ----------
    root : path
        Registry root (created when missing).
    model_dir : path
        A model directory written by :func:`sparkhc.persistence.save_model` (validated: format,
        version, files). It is copied, or moved with ``move=True`` (e.g. a temp training output
        on the same file system).
    metrics : mapping or path, optional
        Evaluation metrics: ``{metric: value}``, the result of ``sparkhc evaluate`` or its
        ``metrics.json`` file.
    promote_to_current : bool
        Also point ``current`` at the new version.
    note : str, optional
        Free text kept in ``model_store.json`` (e.g. why it was trained).
    """
    src = Path(model_dir)
    meta = read_metadata(src)  # refuses non-models and newer formats before anything is copied
    for f in _MODEL_FILES:
        if not (src / f).is_file():
            raise ModelError(f"{src}: truncated model directory: {f} is missing")
    r = _root(root, create=True)
    payload = _metrics_payload(metrics)
    tmp = r / f".register.tmp-{uuid.uuid4().hex[:12]}"
    try:
        if move:
            os.replace(src, tmp)
        else:
            shutil.copytree(src, tmp)
        info = {
            "registered_at": _now(),
            "source": str(src.resolve()),
            "model_version": weights_hash(tmp),
            "model": meta.get("model"),
            "taxonomy_fingerprint": meta.get("taxonomy_fingerprint"),
            "training_data_fingerprint": training_data_fingerprint(meta),
            "metrics": payload,
            "note": note,
        }
        n = (_numbers(r) or [0])[-1] + 1
        while True:
            name = _version_name(n)
            info["version"] = name
            write_json_atomic(tmp / REGISTRY_FILE, info)
            try:
                # fails when the name was taken meanwhile (a version directory is never empty)
                os.rename(tmp, r / name)
                break
            except OSError:
                if not (r / name).exists():
                    raise
                n += 1
    except BaseException:
        if tmp.exists():
            if move and not src.exists():
                os.replace(tmp, src)
            else:
                shutil.rmtree(tmp, ignore_errors=True)
        raise
    if promote_to_current:
        promote(r, name)
    return name


def attach_metrics(root: str | Path, version: str, metrics: Mapping[str, Any] | str | Path) -> dict[str, Any]:
    """Record (or replace) the evaluation metrics of a registered version; returns them."""
    d = resolve(root, version)
    payload = _metrics_payload(metrics)
    info = _read_registry_file(d)
    info["metrics"] = payload
    info.setdefault("version", d.name)
    write_json_atomic(d / REGISTRY_FILE, info)
    return payload or {}


def promote(root: str | Path, version: str) -> dict[str, Any]:
    """Point ``current`` at ``version`` (atomically); returns the new pointer content.

    The pointer keeps a history of promotions (newest last), so a rollback is
    ``promote(root, pointer["history"][-2]["version"])``.
    """
    r = _root(root)
    d = _check_version(r, version)
    read_metadata(d)  # never point current at something that cannot be loaded
    old = _read_current(r)
    history = list(old.get("history", [])) if old else []
    entry = {"version": d.name, "promoted_at": _now(), "previous": old["version"] if old else None}
    history.append(entry)
    data = {"version": d.name, "promoted_at": entry["promoted_at"], "previous": entry["previous"],
            "history": history}
    write_json_atomic(r / CURRENT_FILE, data)
    return data


# ---------------------------------------------------------------------- inspection
def show(root: str | Path, version: str = CURRENT) -> dict[str, Any]:
    """Everything known about a version: registry record plus the model's metadata summary."""
    r = _root(root)
    d = resolve(r, version)
    meta = read_metadata(d)
    info = _read_registry_file(d)
    cur = _read_current(r)
    training = dict(meta.get("training") or {})
    training.pop("epoch_log", None)  # long; kept in metadata.json
    metrics = info.get("metrics") or None
    return {
        "version": d.name,
        "path": str(d.resolve()),
        "current": cur is not None and cur.get("version") == d.name,
        "registered_at": info.get("registered_at"),
        "source": info.get("source"),
        "note": info.get("note"),
        "model_version": info.get("model_version") or weights_hash(d),
        "model": meta.get("model"),
        "params": meta.get("params"),
        "n_features": meta.get("n_features"),
        "model_size": meta.get("model_size"),
        "format_version": meta.get("format_version"),
        "sparkhc_version": meta.get("sparkhc_version"),
        "taxonomy_fingerprint": meta.get("taxonomy_fingerprint"),
        "feature_spec_fingerprint": meta.get("feature_spec_fingerprint"),
        "training_data_fingerprint": info.get("training_data_fingerprint") or training_data_fingerprint(meta),
        "training": training,
        "metrics": metrics,
    }


_SUMMARY_METRICS = ("EBF", "LBMiF", "LBMaF", "hF")


def summary_rows(root: str | Path) -> list[dict[str, Any]]:
    """One short row per version (for ``sparkhc models list``)."""
    r = Path(root)
    if not r.is_dir():
        return []
    cur = _read_current(r)
    rows = []
    for v in list_versions(r):
        d = r / v
        info = _read_registry_file(d)
        try:
            meta = read_metadata(d)
            model, tax = meta.get("model"), meta.get("taxonomy_fingerprint")
            docs = (meta.get("training") or {}).get("documents")
        except ModelError as e:  # list the rest even if one version is unreadable
            model, tax, docs = f"<unreadable: {e}>", None, None
        values = ((info.get("metrics") or {}).get("values")) or {}
        rows.append({
            "version": v,
            "current": bool(cur and cur.get("version") == v),
            "registered_at": info.get("registered_at"),
            "model": model,
            "model_version": info.get("model_version"),
            "taxonomy_fingerprint": tax,
            "documents": docs,
            **{k: values.get(k) for k in _SUMMARY_METRICS},
        })
    return rows


def format_rows(rows: list[dict[str, Any]]) -> str:
    """An aligned text table of :func:`summary_rows`."""
    if not rows:
        return "(no registered models)"
    cols = ["", "version", "model", "model_version", "taxonomy_fingerprint", "documents", "registered_at",
            *_SUMMARY_METRICS]

    def cell(row: dict[str, Any], c: str) -> str:
        if c == "":
            return "*" if row["current"] else ""
        v = row.get(c)
        if v is None:
            return "-"
        if isinstance(v, float):
            return f"{v:.4f}"
        return str(v)

    table = [cols] + [[cell(row, c) for c in cols] for row in rows]
    widths = [max(len(t[j]) for t in table) for j in range(len(cols))]
    lines = ["  ".join(x.ljust(w) for x, w in zip(t, widths, strict=True)).rstrip() for t in table]
    return "\n".join(lines)
