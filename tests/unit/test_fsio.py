"""Files at a URI (sparkhc.fsio) and model folders on an S3-compatible store (moto's server on
loopback): the same bytes as a local save, the refusal cases, and nothing left by a failed save."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.fs as pafs
import pytest

from sparkhc import fsio
from sparkhc.errors import ModelError
from sparkhc.persistence import load_model, read_metadata, save_model
from sparkhc.taxonomy import Taxonomy
from tests.unit.test_persistence import EDGES, _trained


def test_resolve_plain_paths_and_file_uris(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    fs, p = fsio.resolve("rel/x")
    assert isinstance(fs, pafs.LocalFileSystem) and p == str(tmp_path / "rel" / "x")
    assert fsio.resolve(f"file://{tmp_path}/y")[1] == str(tmp_path / "y")
    assert not fsio.is_uri("file:///a") and not fsio.is_uri("/a") and fsio.is_uri("s3://b/a")
    assert fsio.redact("s3://KEY:SECRET@bucket/p?region=x") == "s3://***@bucket/p?region=x"
    assert fsio.redact("/plain/path") == "/plain/path"
    with pytest.raises(ValueError, match="nosuchscheme"):
        fsio.resolve("nosuchscheme://x/y")


def test_write_atomic_leaves_nothing_on_failure(tmp_path):
    fs, root = fsio.resolve(tmp_path)

    def boom(fh):
        fh.write(b"partial")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        fsio.write_atomic(fs, f"{root}/f.bin", boom)
    assert list(tmp_path.iterdir()) == []
    fsio.write_atomic(fs, f"{root}/f.bin", lambda fh: fh.write(b"whole"))
    assert (tmp_path / "f.bin").read_bytes() == b"whole" and fsio.listdir(fs, root) == ["f.bin"]


def _s3(s3_server) -> pafs.S3FileSystem:
    return pafs.S3FileSystem(access_key="testing", secret_key="testing", endpoint_override=s3_server["endpoint"],
                             scheme="http", region="us-east-1")


def _keys(fs: pafs.FileSystem, prefix: str) -> list[str]:
    return sorted(i.path for i in fs.get_file_info(pafs.FileSelector(prefix, recursive=True, allow_not_found=True))
                  if i.type == pafs.FileType.File)


def test_write_atomic_on_s3(s3_server):
    s3_server["make_bucket"]("atomic")
    fs, root = fsio.resolve(s3_server["uri"]("atomic", "p"))

    def boom(fh):
        fh.write(b"partial")
        raise RuntimeError("lost connection")

    with pytest.raises(RuntimeError):
        fsio.write_atomic(fs, f"{root}/f.bin", boom)
    assert _keys(_s3(s3_server), "atomic/p") == []
    fsio.write_atomic(fs, f"{root}/f.bin", lambda fh: fh.write(b"whole"))
    assert fsio.read_bytes(fs, f"{root}/f.bin") == b"whole"
    fsio.delete_tree(fs, root)
    assert _keys(_s3(s3_server), "atomic/p") == []


def test_model_folder_on_s3_has_the_bytes_of_a_local_save(s3_server, tmp_path):
    s3_server["make_bucket"]("models")
    uri = s3_server["uri"]("models", "team/m1")
    tax = Taxonomy.from_edges(EDGES)
    m, batch = _trained(tax, "global", branching=True)
    spec = json.dumps({"fingerprint": "abc"})
    save_model(tmp_path / "m", m, {"note": 1}, feature_spec_json=spec)
    save_model(uri, m, {"note": 1}, feature_spec_json=spec)
    s3 = _s3(s3_server)
    keys = _keys(s3, "models/team/m1")
    assert [k.rsplit("/", 1)[1] for k in keys] == sorted(p.name for p in (tmp_path / "m").iterdir())
    for k in keys:
        with s3.open_input_stream(k) as fh:
            assert fh.read() == (tmp_path / "m" / k.rsplit("/", 1)[1]).read_bytes(), k
    m2, meta = load_model(uri, taxonomy=tax)
    assert meta == read_metadata(tmp_path / "m") == read_metadata(uri)
    for k, v in m.get_state().arrays.items():
        np.testing.assert_array_equal(m2.get_state().arrays[k], v, err_msg=k)
    assert m2.predict(batch) == m.predict(batch)
    # refusals, overwrite, and a failed save that leaves nothing
    with pytest.raises(ModelError, match="already exists"):
        save_model(uri, m)
    with pytest.raises(ModelError, match="model directory not found") as e:
        read_metadata(s3_server["uri"]("models", "team/none"))
    assert "testing:testing" not in str(e.value)  # no credentials in messages
    save_model(uri, m, {"note": 2}, overwrite=True)  # without feature_spec.json: the old one goes
    assert read_metadata(uri)["note"] == 2
    assert [k.rsplit("/", 1)[1] for k in _keys(s3, "models/team/m1")] == ["metadata.json", "state.npz",
                                                                          "taxonomy.tsv"]
    bad = s3_server["uri"]("models", "team/bad")

    with pytest.raises(AttributeError):  # fails at the third file, after two were uploaded
        save_model(bad, m, feature_spec_json=123)  # type: ignore[arg-type]
    assert _keys(s3, "models/team/bad") == []


def test_truncated_model_folder_on_s3(s3_server, tmp_path):
    s3_server["make_bucket"]("trunc")
    uri = s3_server["uri"]("trunc", "m")
    tax = Taxonomy.from_edges(EDGES)
    m, _ = _trained(tax)
    save_model(uri, m)
    _s3(s3_server).delete_file("trunc/m/state.npz")
    with pytest.raises(ModelError, match="state.npz is missing"):
        load_model(uri)
    _s3(s3_server).delete_file("trunc/m/metadata.json")
    with pytest.raises(ModelError, match="metadata.json is missing"):
        read_metadata(uri)
    assert Path(str(tmp_path)).is_dir()


def test_s3_endpoint_and_credentials_from_the_standard_environment(s3_server, monkeypatch):
    """AWS_ENDPOINT_URL (which pyarrow's S3 client ignores by itself) and the AWS_* credentials
    reach a plain s3://bucket/prefix URI."""
    s3_server["make_bucket"]("envb")
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://{s3_server['endpoint']}")
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    fs, root = fsio.resolve("s3://envb/p")
    assert root == "envb/p"
    fsio.write_atomic(fs, f"{root}/f", lambda fh: fh.write(b"via env"))
    assert _keys(_s3(s3_server), "envb") == ["envb/p/f"]
