"""The report's calibrated-score table, reliability plot and words behind the labels (predict --top,
--explain; issue 56) on a hand-made predictions folder, checked by hand."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sparkhc.report import build_report, collect
from sparkhc.spark.predict import SUGGESTION_TYPE
from tests.unit.test_report import make_predictions

# per document (tests.unit.test_report.DOCS order): calibrated scores of the predicted labels and the
# suggestions (label, score)
CALIBRATED = {
    "d1": ([0.95], [("tennis", 0.3)]),  # football right; tennis wrong
    "d2": ([0.8], [("football", 0.9)]),  # tennis wrong; football right
    "d3": ([0.9], [("sports", 0.2)]),  # tennis right; (an ancestor is never suggested; here: counted right)
    "d4": ([0.5], [("physics", 0.7)]),  # biology wrong; physics right
    "d5": ([0.6], []),  # football wrong
    "d6": ([0.99], [("physics", 0.5)]),  # football right; physics right
}


@pytest.fixture()
def preds(tmp_path):
    p = make_predictions(tmp_path, None)
    files = sorted((p / "data").glob("*.parquet"))
    t = pa.concat_tables([pq.read_table(f) for f in files])
    for f in files:
        f.unlink()
    ids = t.column("doc_id").to_pylist()
    sugg = pa.array([[{"label": lab, "score": q, "margin": -1.0, "pref_label": None} for lab, q in CALIBRATED[i][1]]
                     for i in ids], SUGGESTION_TYPE)
    t = t.append_column("suggestions", sugg).append_column(
        "pred_calibrated", pa.array([CALIBRATED[i][0] for i in ids], pa.list_(pa.float64())))
    expl = [[{"label": lab, "score": 1.5, "bias": 0.25, "features": ["goal", "pitch"], "contributions": [1.0, 0.25]}
             for lab in labs] for labs in t.column("pred_labels").to_pylist()]
    t = t.append_column("explanations", pa.array(expl))
    pq.write_table(t, p / "data" / "part-00000.parquet")
    return p


def test_calibrated_scores_and_words_by_hand(preds, tmp_path):
    data = collect(preds)
    cal = data.calibrated
    assert cal is not None and cal["labels"] == 11 and cal["correct"] == 7
    table = {r["threshold"]: (r["kept"], r["precision"]) for r in cal["table"]}
    # >= 0.9: 0.99 R, 0.95 R, 0.9 (d2 football) R, 0.9 (d3 tennis) R -> 4 of 4
    assert table[0.9] == (4, 1.0)
    # >= 0.7: also 0.8 (d2 tennis) W, 0.7 (d4 physics) R -> 5 of 6
    assert table[0.7][0] == 6 and table[0.7][1] == pytest.approx(5 / 6)
    # >= 0.5: also 0.6 W, 0.5 (d4 biology) W, 0.5 (d6 physics) R -> 6 of 9
    assert table[0.5][0] == 9 and table[0.5][1] == pytest.approx(6 / 9)
    assert data.explanations is not None and data.explanations[0] == {
        "doc_id": "d1", "label": "football", "score": 1.5, "bias": 0.25, "words": "goal (+1.000), pitch (+0.250)"}
    out = build_report(preds, out=tmp_path / "report")
    html = (tmp_path / "report" / "report.html").read_text()
    assert "Calibrated scores" in html and "The words behind the labels" in html and "goal (+1.000)" in html
    assert any(p.endswith("reliability.png") for p in out["plots"]) or "matplotlib" in " ".join(out["notes"])
