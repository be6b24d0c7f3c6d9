"""Model registry (sparkhc.model_store): versions, the movable ``current`` pointer, metadata, and the
refusals (newer format, other taxonomy) seen through the registry. No Spark: the tiny models are
trained serially with numpy. The helpers here are also used by tests/spark/test_reclassify.py."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from sparkhc import model_store
from sparkhc.batch import SparseBatch
from sparkhc.errors import ModelError
from sparkhc.models.murawaki import GlobalPA
from sparkhc.persistence import load_model, save_model
from sparkhc.taxonomy import Taxonomy
from sparkhc.text.spec import FeatureSpec

# ----------------------------------------------------------------------------- tiny fixtures
VOCAB = {
    "football": ["goal", "striker", "pitch", "referee", "penalty"],
    "tennis": ["racket", "serve", "wimbledon", "volley", "deuce"],
    "physics": ["quantum", "particle", "photon", "relativity", "boson"],
    "biology": ["cell", "gene", "protein", "enzyme", "mitosis"],
}
COMMON = ["the", "report", "today", "people", "new"]


def tiny_taxonomy() -> Taxonomy:
    return Taxonomy.from_edges(
        [("ROOT", "sports"), ("ROOT", "science"), ("sports", "football"), ("sports", "tennis"),
         ("science", "physics"), ("science", "biology")],
        root="ROOT",
        source="tiny.tsv",
    )


def tiny_docs(n: int, seed: int, prefix: str = "d") -> list[dict]:
    """Documents of one leaf each: a few words of the leaf's vocabulary plus common words."""
    rng = np.random.default_rng(seed)
    leaves = sorted(VOCAB)
    docs = []
    for i in range(n):
        leaf = leaves[int(rng.integers(len(leaves)))]
        words = list(rng.choice(VOCAB[leaf], size=4)) + list(rng.choice(COMMON, size=2))
        docs.append({"doc_id": f"{prefix}{i:04d}", "text": " ".join(words), "labels": [leaf]})
    return docs


def train_tiny_model(out: Path, epochs: int = 3, C: float = 1.0, n_docs: int = 60, seed: int = 0,
                     taxonomy: Taxonomy | None = None) -> Path:
    """Fit a vocabulary on tiny_docs, train GlobalPA serially, save it with its feature spec."""
    tax = taxonomy or tiny_taxonomy()
    docs = tiny_docs(n_docs, seed)
    spec = FeatureSpec(min_df=1, max_df=1.0, fit_on=None, weighting="log_tf_idf")
    tokens = [spec.tokenize_document(d["text"]) for d in docs]
    spec = spec.fit_documents(tokens)
    offsets, idx, val, _ = spec.transform_many(tokens)
    X = sp.csr_matrix((val, idx, offsets), shape=(len(docs), spec.n_features), dtype=np.float32)
    batch = SparseBatch(X, np.array([d["doc_id"] for d in docs]), [d["labels"] for d in docs])
    model = GlobalPA(tax, spec.n_features, C=C, branching=True).fit(batch, epochs=epochs, seed=0)
    meta = {
        "feature_spec_fingerprint": spec.fingerprint,
        "training": {"selection": {"split": None, "fold": None, "exclude_fold": None}, "documents": len(docs),
                     "epochs": epochs},
    }
    save_model(out, model, meta, feature_spec_json=spec.to_json(), overwrite=True)
    return out


# ----------------------------------------------------------------------------- tests
@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("tiny_models")
    return {"a": train_tiny_model(d / "a", epochs=2), "b": train_tiny_model(d / "b", epochs=4, C=0.5)}


def test_register_list_promote_resolve(tmp_path, models):
    root = tmp_path / "registry"
    assert model_store.list_versions(root) == []
    v1 = model_store.register(root, models["a"])
    v2 = model_store.register(root, models["b"], metrics={"EBF": 0.75, "hF": 0.8})
    assert (v1, v2) == ("v0001", "v0002")
    assert model_store.list_versions(root) == ["v0001", "v0002"]
    assert models["a"].is_dir(), "register copies by default"
    with pytest.raises(ModelError, match="no current model yet"):
        model_store.resolve(root, "current")
    model_store.promote(root, v1)
    assert model_store.resolve(root, "current") == root / "v0001"
    assert model_store.resolve(root) == root / "v0001"
    pointer = model_store.promote(root, v2)
    assert model_store.current_version(root) == "v0002"
    assert [h["version"] for h in pointer["history"]] == ["v0001", "v0002"]
    assert pointer["previous"] == "v0001"
    # the pointer is a plain JSON file, not a symlink
    cur = root / model_store.CURRENT_FILE
    assert cur.is_file() and not cur.is_symlink()
    assert json.loads(cur.read_text())["version"] == "v0002"
    # no temp files left behind
    assert sorted(p.name for p in root.iterdir()) == ["current.json", "v0001", "v0002"]
    rows = model_store.summary_rows(root)
    assert [r["current"] for r in rows] == [False, True]
    assert rows[1]["EBF"] == 0.75
    text = model_store.format_rows(rows)
    assert "v0002" in text.splitlines()[2] and text.splitlines()[2].startswith("*")


def test_show_records_fingerprints_params_metrics_and_version(tmp_path, models):
    root = tmp_path / "registry"
    metrics_file = tmp_path / "metrics.json"
    metrics_file.write_text(json.dumps({"metrics": {"EBF": 0.5, "n_docs": 10}, "model": "global"}))
    v = model_store.register(root, models["a"], metrics=metrics_file, promote_to_current=True, note="first")
    info = model_store.show(root, v)
    meta = json.loads((models["a"] / "metadata.json").read_text())
    assert info["version"] == "v0001" and info["current"] is True and info["note"] == "first"
    assert info["model"] == "global"
    assert info["params"] == meta["params"] and info["params"]["branching"] is True
    assert info["taxonomy_fingerprint"] == tiny_taxonomy().fingerprint()
    assert info["feature_spec_fingerprint"] == meta["feature_spec_fingerprint"]
    assert info["training"]["documents"] == 60
    assert info["training"]["selection"] == {"split": None, "fold": None, "exclude_fold": None}
    assert info["sparkhc_version"] == meta["sparkhc_version"]
    assert info["metrics"]["values"] == {"EBF": 0.5, "n_docs": 10}
    assert info["metrics"]["model"] == "global"
    # the model version is the content hash of the weights (independent check with hashlib)
    import hashlib

    assert info["model_version"] == hashlib.sha256((models["a"] / "state.npz").read_bytes()).hexdigest()[:12]
    # the training data fingerprint changes with the training selection, not with the weights
    fp = info["training_data_fingerprint"]
    assert isinstance(fp, str) and len(fp) == 16
    other = dict(meta, training={**meta["training"], "documents": 61})
    assert model_store.training_data_fingerprint(other) != fp
    same = dict(meta, params={"C": 123})
    assert model_store.training_data_fingerprint(same) == fp
    # model_store.json does not copy metadata.json's parameters (no duplication)
    reg = json.loads((root / v / model_store.REGISTRY_FILE).read_text())
    assert "params" not in reg
    # metrics attached later
    model_store.attach_metrics(root, v, {"EBF": 0.9})
    assert model_store.show(root, "current")["metrics"]["values"] == {"EBF": 0.9}


def test_load_through_registry_refuses_other_taxonomy_and_newer_format(tmp_path, models):
    root = tmp_path / "registry"
    v = model_store.register(root, models["a"], promote_to_current=True)
    model, meta, name = model_store.load(root, "current", taxonomy=tiny_taxonomy())
    assert name == v and model.name == "global"
    other = Taxonomy.from_edges([("ROOT", "sports"), ("ROOT", "arts")], root="ROOT", source="other.tsv")
    with pytest.raises(ModelError, match="trained on taxonomy .* but the data uses taxonomy .*other.tsv"):
        model_store.load(root, "current", taxonomy=other)
    # a model saved by a future sparkhc: format_version 99
    mfile = root / v / "metadata.json"
    meta = json.loads(mfile.read_text())
    meta["format_version"] = 99
    mfile.write_text(json.dumps(meta))
    with pytest.raises(ModelError, match="format version 99 is newer than this sparkhc"):
        model_store.load(root, "current")
    with pytest.raises(ModelError, match="newer than this sparkhc"):
        model_store.promote(root, v)


def test_register_refuses_non_models_and_bad_versions(tmp_path, models):
    root = tmp_path / "registry"
    (tmp_path / "junk").mkdir()
    with pytest.raises(ModelError, match="metadata.json is missing"):
        model_store.register(root, tmp_path / "junk")
    with pytest.raises(ModelError, match="not found"):
        model_store.register(root, tmp_path / "nope")
    model_store.register(root, models["a"])
    with pytest.raises(ModelError, match=r"no model version v0007 \(registered: v0001\)"):
        model_store.promote(root, "v0007")
    with pytest.raises(ModelError, match="not a model version"):
        model_store.resolve(root, "latest")
    with pytest.raises(ModelError, match="model registry not found"):
        model_store.resolve(tmp_path / "missing", "current")
    (root / model_store.CURRENT_FILE).write_text("{not json")
    with pytest.raises(ModelError, match="corrupt current pointer"):
        model_store.current_version(root)


def test_register_move_and_concurrent_registrations_get_distinct_versions(tmp_path, models):
    root = tmp_path / "registry"
    src = tmp_path / "to_move"
    import shutil

    shutil.copytree(models["a"], src)
    assert model_store.register(root, src, move=True) == "v0001"
    assert not src.exists()
    names: list[str] = []
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            names.append(model_store.register(root, models["b"]))
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert sorted(names) == ["v0002", "v0003", "v0004", "v0005"]
    assert model_store.list_versions(root) == ["v0001", "v0002", "v0003", "v0004", "v0005"]
    for v in model_store.list_versions(root):
        load_model(root / v)  # every version is complete
    assert not [p for p in root.iterdir() if p.name.startswith(".")]


# ----------------------------------------------------------------------------- CLI
def parse(argv: list[str]):
    from sparkhc.cli import build_parser

    return build_parser().parse_args(argv)


def test_models_cli(tmp_path, models, capsys, monkeypatch):
    from sparkhc.cli import dispatch as run

    root = tmp_path / "reg"
    assert run(parse(["models", "register", str(models["a"]), "--root", str(root), "--note", "n"])) == 0
    assert capsys.readouterr().out.strip() == "v0001"
    monkeypatch.setenv("SPARKHC_MODELS", str(root))
    assert run(parse(["models", "register", str(models["b"]), "--promote"])) == 0
    assert capsys.readouterr().out.strip() == "v0002"
    assert run(parse(["models", "promote", "v0001"])) == 0
    assert capsys.readouterr().out.strip() == "current -> v0001 (was v0002)"
    assert run(parse(["models", "list"])) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].startswith("*") and "v0001" in lines[1] and "v0002" in lines[2]
    assert run(parse(["models", "list", "--json"])) == 0
    assert [r["version"] for r in json.loads(capsys.readouterr().out)] == ["v0001", "v0002"]
    assert run(parse(["models", "show"])) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["version"] == "v0001" and shown["current"] is True and shown["note"] == "n"
    assert run(parse(["models", "show", "v0002"])) == 0
    assert json.loads(capsys.readouterr().out)["current"] is False
    assert run(parse(["models"])) == 0  # the model names, as before
    assert "global" in capsys.readouterr().out.split()
    assert run(parse(["models", "algorithms"])) == 0
    assert "global" in capsys.readouterr().out.split()
    with pytest.raises(ModelError, match="no model version v0009"):
        run(parse(["models", "promote", "v0009"]))
    monkeypatch.delenv("SPARKHC_MODELS")
    from sparkhc.errors import SparkhcError

    with pytest.raises(SparkhcError, match="pass --root ROOT or set \\$SPARKHC_MODELS"):
        run(parse(["models", "list"]))
