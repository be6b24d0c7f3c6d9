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


def test_one_uri_test_for_spark_and_pyarrow_paths():
    from sparkhc.spark import hfs

    assert hfs.has_scheme is fsio.has_scheme and hfs.local_path is fsio.local_path
    for uri in ("hdfs://nn:8020/x", "s3a://b/k", "s3://b/k", "gs://b/k"):
        assert fsio.has_scheme(uri) and fsio.is_uri(uri) and fsio.local_path(uri) is None, uri
    for local, path in (("file:/x/y", "/x/y"), ("file:///x/y", "/x/y"), ("FILE:///x%20y", "/x y"),
                        ("/x/y", "/x/y"), ("rel/x", "rel/x"), ("C:\\x", "C:\\x")):
        assert not fsio.is_uri(local) and fsio.local_path(local) == Path(path), local
    assert fsio.has_scheme("file:/x") and not fsio.has_scheme("/x") and not fsio.has_scheme("C:\\x")
    assert fsio.child("/a/b", "c") == "/a/b/c" and fsio.child("file:///a/b", "c") == "/a/b/c"
    assert fsio.child("s3://k:s@bk/p/?endpoint_override=h:1", "m.json") == "s3://k:s@bk/p/m.json?endpoint_override=h:1"
    assert fsio.resolve("s3a://bk/p?region=us-east-1")[1] == fsio.resolve("s3://bk/p?region=us-east-1")[1] == "bk/p"


def test_features_folder_and_weights_hash_on_s3(s3_server, tmp_path):
    """The driver's reads of a features folder (layout, footers, spec, taxonomy, corpus.json) and a
    model's weights hash through pyarrow.fs give what they give on the local copy."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from sparkhc.features import (
        CORPUS_FILE,
        FEATURES_DIR,
        TAXONOMY_FILE,
        check_footers,
        features_corpus_info,
        features_taxonomy,
        layout_parts,
    )
    from sparkhc.model_store import weights_hash
    from sparkhc.spark.schemas import FEATURES_ARROW_SCHEMA
    from sparkhc.text.spec import SPEC_FILE, FeatureSpec

    local = tmp_path / "feats"
    (local / FEATURES_DIR).mkdir(parents=True)
    pq.write_table(FEATURES_ARROW_SCHEMA.empty_table(), local / FEATURES_DIR / "part-00000.parquet")
    tax = Taxonomy.from_edges(EDGES)
    (local / TAXONOMY_FILE).write_text(tax.to_tsv())
    (local / CORPUS_FILE).write_text(json.dumps({"scored_labels": ["a"]}))
    (local / SPEC_FILE).write_text(FeatureSpec(fit_on=None).to_json())
    s3_server["make_bucket"]("feats")
    s3, _ = fsio.resolve(s3_server["uri"]("feats"))  # one PutObject per file (allow_delayed_open)
    for f in sorted(p for p in local.rglob("*") if p.is_file()):
        with s3.open_output_stream(f"feats/f1/{f.relative_to(local).as_posix()}") as out:
            out.write(f.read_bytes())
    uri = s3_server["uri"]("feats", "f1")
    assert features_taxonomy(uri).fingerprint() == tax.fingerprint() == features_taxonomy(local).fingerprint()
    assert features_corpus_info(uri) == {"scored_labels": ["a"]} == features_corpus_info(local)
    assert features_corpus_info(s3_server["uri"]("feats", "none")) == {}
    folder = fsio.Folder(uri)
    assert layout_parts(folder) == ["part-00000.parquet"] == layout_parts(fsio.Folder(local))
    check_footers([f"{folder.root}/{FEATURES_DIR}/part-00000.parquet"], filesystem=folder.fs)
    # a part file that is not the features layout is named
    with s3.open_output_stream("feats/f2/features/part-00000.parquet") as out:
        buf = pa.BufferOutputStream()
        pq.write_table(pa.table({"x": [1]}), buf)
        out.write(buf.getvalue().to_pybytes())
    bad = fsio.Folder(s3_server["uri"]("feats", "f2"))
    with pytest.raises(Exception, match="part-00000.parquet"):
        check_footers([f"{bad.root}/{FEATURES_DIR}/part-00000.parquet"], filesystem=bad.fs)
    # a model saved at a URI has the weights hash of the local save (the sha256 of state.npz)
    m, _ = _trained(tax, "global", branching=True)
    save_model(tmp_path / "m", m)
    s3_server["make_bucket"]("hashes")
    save_model(s3_server["uri"]("hashes", "m"), m)
    import hashlib

    want = hashlib.sha256((tmp_path / "m" / "state.npz").read_bytes()).hexdigest()[:12]
    assert weights_hash(s3_server["uri"]("hashes", "m")) == want == weights_hash(tmp_path / "m")
