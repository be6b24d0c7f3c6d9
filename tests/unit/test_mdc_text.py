"""MDC from featurized text: class spaces from label fields, the MDC taxonomy, sparse M3MDC, and the
registered ``m3mdc`` / ``mdc_br`` models (no Spark).

Expected values are written out by hand from the fixtures below, or computed here with plain numpy
(dense matrices, explicit loops) rather than by the code under test.
"""

from __future__ import annotations

import gzip
import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import scipy.sparse as sp

from sparkhc.batch import SparseBatch
from sparkhc.class_spaces import ClassSpaces, MDCLayout
from sparkhc.corpus.readers import RAW_SCHEMA, ReadReport, read_any, read_jsonl, to_table
from sparkhc.errors import ConfigError, InputDataError, ModelError
from sparkhc.models import get_model_class
from sparkhc.models.jia_zhang import solver as m3
from sparkhc.models.jia_zhang.solver import M3MDC, BinaryRelevanceSVM
from sparkhc.persistence import load_model, read_npz, save_model
from sparkhc.taxonomy import Taxonomy
from tests.conftest import corpus_dir

SPEC = {
    "class_space": [
        {"name": "topic", "field": "labels", "top_k": 2},
        {"name": "place", "field": "places", "multiple": "first", "missing": "none", "top_k": 1, "other": ""},
    ]
}


def test_class_space_rules_per_record():
    cs = ClassSpaces.from_dict(SPEC)
    assert cs.candidate_labels({"labels": ["a"], "places": ["x", "y"]}) == ["topic/a", "place/x"]  # first place
    assert cs.candidate_labels({"labels": ["a", "a"], "places": []}) == ["topic/a", "place/none"]  # dup, missing
    assert cs.candidate_labels({"labels": "a", "places": None}) == ["topic/a", "place/none"]  # a plain string
    assert cs.candidate_labels({"labels": ["a", "b"], "places": ["x"]}) == "class space 'topic': several values"
    assert cs.candidate_labels({"labels": [], "places": ["x"]}) == "class space 'topic': no value"
    assert cs.candidate_labels({"places": ["x"]}) == "class space 'topic': no value"
    with pytest.raises(ValueError, match="'labels'.*list of strings"):
        cs.candidate_labels({"labels": [1], "places": ["x"]})


@pytest.mark.parametrize(
    "bad,match",
    [
        ({"class_space": []}, "one or more"),
        ({"space": [{"name": "t", "field": "f"}]}, "unknown key"),
        ({"class_space": [{"name": "t"}]}, "'field'"),
        ({"class_space": [{"name": "t/x", "field": "f"}]}, "letters"),
        ({"class_space": [{"name": "ROOT", "field": "f"}]}, "ROOT"),
        ({"class_space": [{"name": "t", "field": "f", "multiple": "all"}]}, "'multiple'"),
        ({"class_space": [{"name": "t", "field": "f", "top_k": -1}]}, "'top_k'"),
        ({"class_space": [{"name": "t", "field": "f", "colour": 1}]}, "unknown key"),
        ({"class_space": [{"name": "t", "field": "f"}, {"name": "t", "field": "g"}]}, "used twice"),
    ],
)
def test_class_space_file_errors(bad, match):
    with pytest.raises(ConfigError, match=match):
        ClassSpaces.from_dict(bad, source="spaces.toml")


def _raw_table(labels):
    n = len(labels)
    return pa.Table.from_pydict(
        {"doc_id": [f"d{i}" for i in range(n)], "text": ["x"] * n, "tokens": [None] * n, "labels": labels,
         "split": ["train"] * 6 + ["test"] * (n - 6), "fold": [None] * n},
        schema=RAW_SCHEMA,
    )


def test_kept_classes_are_fitted_on_training_rows_and_every_exclusion_is_counted():
    cs = ClassSpaces.from_dict(SPEC)
    cand = [
        # training rows: topic a a a b b c (top 2: a, b; c -> other); place x x x y y x (top 1: x, other="")
        ["topic/a", "place/x"], ["topic/a", "place/x"], ["topic/a", "place/x"],
        ["topic/b", "place/y"], ["topic/b", "place/y"], ["topic/c", "place/x"],
        # test rows: an unseen topic d -> other; place y is not kept and there is no other class
        ["topic/d", "place/x"], ["topic/b", "place/y"], ["topic/c", "place/x"],
    ]
    fit_rows = np.array([True] * 6 + [False] * 3)
    fitted = cs.fit(cand, fit_rows)
    assert fitted.classes == (("a", "b", "other"), ("x",))
    assert fitted.train_counts == ({"a": 3, "b": 2, "c": 1}, {"x": 4, "y": 2})
    assert fitted.n_fit == 6
    report = ReadReport(source="t", read=9, emitted=9)
    out = fitted.apply_table(_raw_table(cand), report)
    assert out.column("doc_id").to_pylist() == ["d0", "d1", "d2", "d5", "d6", "d8"]
    assert out.column("labels").to_pylist() == [
        ["topic/a", "place/x"], ["topic/a", "place/x"], ["topic/a", "place/x"],
        ["topic/other", "place/x"], ["topic/other", "place/x"], ["topic/other", "place/x"],
    ]
    assert report.emitted == 6 and report.excluded == 3
    assert dict(report.excluded_reasons) == {"class space 'place': value outside the kept classes": 3}
    report.finish()  # read == emitted + quarantined + excluded still holds
    tax = fitted.taxonomy()
    assert sorted(tax.edges()) == sorted([
        ("ROOT", "topic"), ("ROOT", "place"), ("topic", "topic/a"), ("topic", "topic/b"),
        ("topic", "topic/other"), ("place", "place/x"),
    ])
    # the 'other' class must not collide with a real value
    with pytest.raises(ConfigError, match="'other' class"):
        cs.fit([["topic/other", "place/x"], ["topic/a", "place/x"], ["topic/b", "place/x"]])
    # ties at the cut are broken by name: b and c both once, top 2 after a -> a, b
    tie = cs.fit([["topic/a", "place/x"], ["topic/a", "place/x"], ["topic/c", "place/x"], ["topic/b", "place/x"]])
    assert tie.classes[0] == ("a", "b", "other")


def test_reader_derives_labels_and_counts_exclusions(tmp_path):
    path = tmp_path / "docs.jsonl.gz"
    recs = [
        {"id": 1, "text": "one", "split": "train", "labels": ["a"], "places": ["x"]},
        {"id": 2, "text": "two", "split": "train", "labels": ["a", "b"], "places": ["x"]},
        {"id": 3, "text": "three", "split": "test", "labels": ["b"], "places": []},
        {"id": 4, "text": "four", "split": "test", "labels": ["b"], "places": 7},
    ]
    with gzip.open(path, "wt") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in recs)
    cs = ClassSpaces.from_dict(SPEC)
    batches, report = read_jsonl(path, labels_from=cs.candidate_labels, on_invalid="quarantine")
    table = to_table(batches)
    assert table.column("labels").to_pylist() == [["topic/a", "place/x"], ["topic/b", "place/none"]]
    assert report.read == 4 and report.emitted == 2 and report.excluded == 1 and report.quarantined == 1
    assert dict(report.excluded_reasons) == {"class space 'topic': several values": 1}
    assert dict(report.quarantine_reasons) == {"wrong type": 1}
    with pytest.raises(InputDataError, match="'places'"):
        to_table(read_jsonl(path, labels_from=cs.candidate_labels)[0])
    pq.write_table(table, tmp_path / "docs.parquet")
    with pytest.raises(InputDataError, match="JSON Lines"):
        read_any(tmp_path / "docs.parquet", labels_from=cs.candidate_labels)


# ----------------------------------------------------------------------------------------------
# the MDC taxonomy
# ----------------------------------------------------------------------------------------------


def _mdc_taxonomy() -> Taxonomy:
    return Taxonomy.from_edges(
        [("ROOT", "genre"), ("ROOT", "mood"), ("genre", "genre/sport"), ("genre", "genre/politics"),
         ("genre", "genre/tech"), ("mood", "mood/happy"), ("mood", "mood/sad")],
        root="ROOT",
    )


def test_layout_reads_class_spaces_from_the_taxonomy():
    lay = MDCLayout.from_taxonomy(_mdc_taxonomy())
    assert lay.names == ("genre", "mood")  # children sorted by name
    assert lay.n_classes == [3, 2]
    assert lay.class_names(0) == ["genre/politics", "genre/sport", "genre/tech"]
    Y = lay.targets([["mood/sad", "genre/tech"], ["genre/politics", "mood/happy"]])
    assert Y.tolist() == [[2, 1], [0, 0]]
    names = [[lay.taxonomy.names[c] for c in row] for row in lay.leaf_sets(Y)]
    assert names == [["genre/tech", "mood/sad"], ["genre/politics", "mood/happy"]]
    with pytest.raises(InputDataError, match="'doc7'.*no label in class space 'mood'"):
        lay.targets([["genre/tech"]], doc_ids=["doc7"])
    with pytest.raises(InputDataError, match="several labels in class space 'genre'"):
        lay.targets([["genre/tech", "genre/sport", "mood/sad"]])
    with pytest.raises(InputDataError, match="'genre'.*not a class"):
        lay.targets([["genre", "mood/sad"]])
    deep = Taxonomy.from_edges([("ROOT", "a"), ("a", "b"), ("b", "c")], root="ROOT")
    with pytest.raises(ModelError, match="not a multi-dimensional"):
        MDCLayout.from_taxonomy(deep)


# ----------------------------------------------------------------------------------------------
# sparse features
# ----------------------------------------------------------------------------------------------


def _sparse_problem(seed=0, n=70, d=40, density=0.15):
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=density, format="csr", random_state=seed, data_rvs=rng.random)
    Xd = X.toarray()
    Y = np.column_stack([
        np.digitize(Xd[:, :5].sum(1) - Xd[:, 5:10].sum(1), [-0.2, 0.2]),
        (Xd[:, 10:20].sum(1) > np.median(Xd[:, 10:20].sum(1))).astype(int),
    ]).astype(np.int64)
    return X, Y


def test_sparse_input_is_not_densified_and_gives_the_dense_solution():
    X, Y = _sparse_problem()
    sparse_fit = M3MDC(max_iter=3, tol=0.0).fit(X, Y)
    dense_fit = M3MDC(max_iter=3, tol=0.0).fit(X.toarray(), Y)
    np.testing.assert_allclose(sparse_fit.W_, dense_fit.W_, atol=1e-7)
    np.testing.assert_allclose(sparse_fit.b_, dense_fit.b_, atol=1e-7)
    np.testing.assert_array_equal(sparse_fit.predict(X), dense_fit.predict(X.toarray()))
    data = m3.PairData.build(X, [np.arange(5)], [np.ones(5)])
    assert sp.issparse(data.X)
    # the shared Gram matrix equals X Xᵀ and is not pickled (a broadcast ships X only)
    import pickle

    np.testing.assert_allclose(data.gram, X.toarray() @ X.toarray().T, atol=1e-12)
    assert "_gram" not in pickle.loads(pickle.dumps(data)).__dict__


def test_compiled_smo_equals_the_numpy_reference(monkeypatch):
    from sparkhc import kernels

    if not kernels.HAVE_NUMBA:
        pytest.skip("numba is not installed (pip install sparkhc[fast])")
    rng = np.random.default_rng(5)
    Z = rng.normal(size=(60, 8))
    K = Z @ Z.T
    rows = np.arange(3, 60, 2)
    y = np.where(Z[rows, 0] + 0.5 * rng.normal(size=rows.size) > 0, 1.0, -1.0)
    p = 1.0 - 0.1 * rng.normal(size=rows.size)
    monkeypatch.setattr(kernels, "ENABLED", True)
    a1, it1, ok1 = m3.smo(K, y, p, 0.5, None, 1e-10, 100_000, rows=rows)
    monkeypatch.setattr(kernels, "ENABLED", False)
    a2, it2, ok2 = m3.smo(K, y, p, 0.5, None, 1e-10, 100_000, rows=rows)
    assert ok1 and ok2 and it1 == it2
    np.testing.assert_allclose(a1, a2, atol=1e-12)
    # the dual optimum satisfies the KKT conditions of the SVM with scale 0.5 (checked with numpy)
    Q = np.outer(y, y) * K[np.ix_(rows, rows)] / 0.5
    grad = Q @ a1 - p
    assert abs(a1 @ y) < 1e-9
    free = (a1 > 1e-9) & (a1 < 1 - 1e-9)
    b = -np.mean(y[free] * grad[free]) if free.any() else 0.0
    assert np.all(grad[a1 < 1e-9] + y[a1 < 1e-9] * b >= -1e-7)
    assert np.all(grad[a1 > 1 - 1e-9] + y[a1 > 1 - 1e-9] * b <= 1e-7)


# ----------------------------------------------------------------------------------------------
# the registered models
# ----------------------------------------------------------------------------------------------

GENRE_WORDS = {"sport": [0, 1], "politics": [2, 3], "tech": [4, 5]}
MOOD_WORDS = {"happy": [6, 7], "sad": [8, 9]}


def _batch(rows, with_labels=True):
    """rows: (genre, mood) pairs; the features are the class words (plus a shared word 10), L2-normalised."""
    X = np.zeros((len(rows), 11), dtype=np.float32)
    for i, (g, m) in enumerate(rows):
        X[i, GENRE_WORDS[g][i % 2]] = 1.0
        X[i, MOOD_WORDS[m][(i // 2) % 2]] = 1.0
        X[i, 10] = 0.5
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    labels = [[f"genre/{g}", f"mood/{m}"] for g, m in rows] if with_labels else None
    return SparseBatch(sp.csr_matrix(X), np.array([f"d{i:02d}" for i in range(len(rows))]), labels)


TRAIN_ROWS = [(g, m) for g in GENRE_WORDS for m in MOOD_WORDS for _ in range(3)]


def test_registered_models_fit_predict_and_round_trip(tmp_path):
    tax = _mdc_taxonomy()
    train = _batch(TRAIN_ROWS)
    assert get_model_class("m3mdc").name == "m3mdc" and get_model_class("mdc_br").name == "mdc_br"
    for name in ("m3mdc", "mdc_br"):
        model = get_model_class(name)(tax, 11).fit(train)
        # separable by the class words: every training document right, one leaf per space
        assert model.predict(train) == [sorted(x, key=lambda lab: tax.id(lab)) for x in train.labels]
        leaf_sets, scores = model.decode(train)
        assert all(len(s) == 2 for s in leaf_sets)
        assert scores is not None and scores.shape == (len(train), tax.n_nodes)
        path = save_model(tmp_path / name, model)
        assert sorted(p.name for p in path.iterdir()) == ["metadata.json", "state.npz", "taxonomy.tsv"]
        with open(path / "state.npz", "rb") as fh:
            arrays = read_npz(fh)  # allow_pickle=False
        assert {"W", "b", "pairs", "n_classes", "active"} <= set(arrays)
        loaded, meta = load_model(path, taxonomy=tax)
        assert meta["model"] == name
        leaf2, scores2 = loaded.decode(train)
        assert [s.tolist() for s in leaf2] == [s.tolist() for s in leaf_sets]
        np.testing.assert_array_equal(scores2, scores)
        np.testing.assert_array_equal(loaded.get_state().arrays["W"], model.get_state().arrays["W"])


def test_model_equals_the_estimator_on_the_same_data():
    tax = _mdc_taxonomy()
    train = _batch(TRAIN_ROWS)
    model = get_model_class("m3mdc")(tax, 11, max_iter=4, tol=0.0).fit(train)
    # class indices follow the taxonomy order: genre (politics, sport, tech), mood (happy, sad)
    order = {"politics": 0, "sport": 1, "tech": 2, "happy": 0, "sad": 1}
    Y = np.array([[order[g], order[m]] for g, m in TRAIN_ROWS])
    ref = M3MDC(max_iter=4, tol=0.0).fit(train.X.toarray().astype(np.float64), Y)
    np.testing.assert_allclose(model.get_state().arrays["W"], ref.W_, atol=1e-8)
    np.testing.assert_allclose(model.get_state().arrays["C"], ref.C_, atol=1e-8)
    br = get_model_class("mdc_br")(tax, 11).fit(train)
    ref_br = BinaryRelevanceSVM().fit(train.X.toarray().astype(np.float64), Y)
    np.testing.assert_allclose(br.get_state().arrays["W"], ref_br.W_, atol=1e-8)
    assert model.get_state().counters["alternations"] == 4.0


def test_model_errors():
    tax = _mdc_taxonomy()
    with pytest.raises(ConfigError, match="'lambda2' parameter of M3MDC"):
        get_model_class("m3mdc")(tax, 11, lambda2=-1.0).fit(_batch(TRAIN_ROWS))
    with pytest.raises(ConfigError, match="unknown parameter"):
        get_model_class("mdc_br")(tax, 11, lambda2=0.1)
    with pytest.raises(ModelError, match="not a multi-dimensional"):
        get_model_class("m3mdc")(Taxonomy.from_edges([("ROOT", "a"), ("a", "b"), ("b", "c")], root="ROOT"), 3)
    bad = SparseBatch(sp.csr_matrix(np.eye(2, 11, dtype=np.float32)), np.array(["x1", "x2"]),
                      [["genre/tech", "mood/sad"], ["genre/tech"]])
    with pytest.raises(InputDataError, match="'x2'.*no label in class space 'mood'"):
        get_model_class("m3mdc")(tax, 11).fit(bad)
    with pytest.raises(ModelError, match="one batch"):
        get_model_class("m3mdc")(tax, 11).partial_fit(bad)


# ----------------------------------------------------------------------------------------------
# the real corpus (no Spark: the reader and the class spaces; a few seconds)
# ----------------------------------------------------------------------------------------------


def test_reuters_topic_place_selection_matches_an_independent_count():
    from collections import Counter
    from pathlib import Path

    from sparkhc.corpus import get_corpus

    root = corpus_dir("reuters21578")
    expected: Counter[str] = Counter()
    topics: Counter[str] = Counter()
    places: Counter[str] = Counter()
    with gzip.open(root / "docs.jsonl.gz", "rt") as fh:
        for line in fh:
            r = json.loads(line)
            if not r["apte_mod"]:
                expected["not ApteMod"] += 1
            elif len(set(r["labels"])) != 1:
                expected["class space 'topic': several values"] += 1
            elif not r["places"]:
                expected["class space 'place': no value"] += 1
            elif len(set(r["places"])) > 1:
                expected["class space 'place': several values"] += 1
            else:
                expected[r["split"]] += 1
                if r["split"] == "train":
                    topics[r["labels"][0]] += 1
                    places[r["places"][0]] += 1
    spec = ClassSpaces.load(Path(__file__).resolve().parents[2] / "sparkhc" / "conf" / "mdc_reuters21578.toml")
    batches, report = get_corpus("reuters21578").read(root, labels_from=spec.candidate_labels)
    table = to_table(batches)
    fitted = spec.fit(table.column("labels").to_pylist(), np.asarray(table.column("split").to_pylist()) == "train")
    table = fitted.apply_table(table, report)
    reasons = dict(report.excluded_reasons)
    assert sum(n for k, n in reasons.items() if k.startswith("not ApteMod")) == expected["not ApteMod"]
    for key in ("class space 'topic': several values", "class space 'place': no value",
                "class space 'place': several values"):
        assert reasons[key] == expected[key]
    assert Counter(table.column("split").to_pylist()) == {"train": expected["train"], "test": expected["test"]}
    assert report.read == 21578 and report.emitted == table.num_rows
    # the 5 most frequent training values, and "other"
    assert fitted.classes[0] == tuple(sorted([t for t, _ in topics.most_common(5)] + ["other"]))
    assert fitted.classes[1] == tuple(sorted([p for p, _ in sorted(places.items(), key=lambda kv: (-kv[1], kv[0]))[:5]]
                                             + ["other"]))


def test_w_step_gap_is_certified_on_a_stiff_problem():
    # more pairs (3 spaces x 6 pairs = 18) than features (3): C nearly singular, strongly coupled pairs,
    # where the momentum of the W step matters; the duality gap it reports must stay a true (>= 0) gap
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 3))
    Y = np.column_stack([np.digitize(X @ rng.normal(size=3) + 0.3 * rng.normal(size=120), [-1, 0, 1])
                         for _ in range(3)])
    model = M3MDC(max_iter=3, tol=0.0).fit(X, Y)
    objectives = [v for h in model.history_ for v in (h["objective_after_w"], h["objective_after_c"])]
    assert all(b <= a + 1e-9 * abs(a) for a, b in zip(objectives, objectives[1:], strict=False))
    for h in model.history_:
        assert -1e-9 <= h["duality_gap"] <= 1e-6 * h["objective_after_w"]
