"""Prediction rows with --top and --explain (sparkhc.spark.predict.predict_batches, no Spark session)
on a polyhierarchy: suggestions and explanations name concepts, never positions, and the calibrated
scores are the recorded step function of the margins, checked by enumerating every label tree."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
import scipy.sparse as sp

from sparkhc.batch import SparseBatch
from sparkhc.models.murawaki import GlobalPA
from sparkhc.spark.predict import PredictExtras, predict_batches
from sparkhc.suggestions import SuggestionCalibration
from sparkhc.taxonomy import Taxonomy
from tests.unit.test_suggestions import _tree_score, _trees

EDGES = [("R", "comp"), ("R", "hw"), ("comp", "ibm"), ("comp", "mac"), ("comp", "gfx"), ("hw", "ibm"), ("hw", "mac"),
         ("ibm", "disk")]


def test_rows_name_concepts_and_score_margins():
    tax = Taxonomy.from_edges(EDGES)
    rng = np.random.default_rng(5)
    n, v = 30, 8
    X = sp.csr_matrix(rng.random((n, v)) * (rng.random((n, v)) < 0.5))
    labels = [[["disk@ibm@comp"], ["mac@hw"], ["gfx"], ["disk@ibm@hw", "gfx"]][i % 4] for i in range(n)]
    batch = SparseBatch(X, np.array([f"d{i:02d}" for i in range(n)]), labels)
    model = GlobalPA(tax, v, epochs=2, bias=0.3, normalize="l2", dtype="float64", branching=True).fit(batch)
    cal = SuggestionCalibration(np.array([-1.0, 0.0, 1.0]), np.array([0.1, 0.5, 0.9]), 10, 40, 20)
    rb = pa.RecordBatch.from_pydict({"doc_id": batch.doc_ids.tolist(), "indices": [X[i].indices.tolist() for i in range(n)],
                                     "values": [X[i].data.tolist() for i in range(n)]})
    extras = PredictExtras(top=3, explain=2, calibration=cal, vocabulary=tuple(f"w{j}" for j in range(v)))
    rows = pa.Table.from_batches(list(predict_batches(model, "v", [rb], extras=extras))).to_pylist()
    concepts = {"comp", "hw", "ibm", "mac", "gfx", "disk"}
    S = model.edge_scores_of(batch)
    trees = _trees(tax)
    sets = [{tax.concept_name(c) for c in np.flatnonzero(t)[1:]} for t in trees]
    for i, r in enumerate(rows):
        assert {s["label"] for s in r["suggestions"]} <= concepts and set(r["pred_labels"]) <= concepts
        scores = np.array([_tree_score(tax, t, S[i], model.decode_bf(), 3) for t in trees])
        best = sets[int(np.argmax(scores))]
        assert not {s["label"] for s in r["suggestions"]} & best
        for s in r["suggestions"]:
            has = np.array([s["label"] in ts for ts in sets])
            m = scores[has].max() - scores[~has].max()
            assert s["margin"] == pytest.approx(m, abs=1e-4)
            assert s["score"] == (0.1 if m < 0.0 else 0.5)  # margins of labels not chosen are below 0
        assert all(q in (0.5, 0.9) for q in r["pred_calibrated"])  # chosen: margin >= 0
        assert [e["label"] for e in r["explanations"]] == r["pred_labels"]
        for e in r["explanations"]:
            assert len(e["features"]) <= 2 and all(f.startswith("w") for f in e["features"])


def test_a_skos_vocabularys_suggestions_carry_preferred_labels(tmp_path):
    from tests.conftest import DATA_DIR
    from tests.skos20ng import label_en, uri, write_vocabulary

    tsv = DATA_DIR / "20newsgroups" / "taxonomy.tsv"
    if not tsv.is_file():
        pytest.skip(f"20 Newsgroups taxonomy not found at {tsv}")
    tax = Taxonomy.load(write_vocabulary(tmp_path / "20ng.ttl", tsv))
    rng = np.random.default_rng(2)
    n, v = 24, 6
    X = sp.csr_matrix(rng.random((n, v)))
    leaves = [tax.names[c] for c in tax.leaves[:4]]
    batch = SparseBatch(X, np.array([f"d{i:02d}" for i in range(n)]), [[leaves[i % 4]] for i in range(n)])
    model = GlobalPA(tax, v, epochs=1, bias=0.3, normalize="l2").fit(batch)
    cal = SuggestionCalibration(np.array([0.0]), np.array([0.5]), 1, 1, 1)
    rb = pa.RecordBatch.from_pydict({"doc_id": batch.doc_ids.tolist(), "indices": [X[i].indices.tolist() for i in range(n)],
                                     "values": [X[i].data.tolist() for i in range(n)]})
    rows = pa.Table.from_batches(list(predict_batches(model, "v", [rb], extras=PredictExtras(top=3, calibration=cal))))
    for r in rows.to_pylist():
        for s in r["suggestions"]:
            name = s["label"].removeprefix(uri(""))
            assert s["label"].startswith(uri("")) and s["pref_label"] == label_en(name)
