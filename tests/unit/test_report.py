"""Evaluation report (sparkhc.report) on a hand-made predictions folder: per-level and per-label
counts, sibling confusions and the precision-recall points are checked against values worked out
by hand (comments), and the HTML/Markdown files reference the plots that were written."""

from __future__ import annotations

import json
import re
from fractions import Fraction
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sparkhc.errors import ModelError, SchemaError
from sparkhc.report import build_report, collect
from tests.unit.test_model_store import tiny_taxonomy, train_tiny_model

# gold, predicted deepest labels, score of each prediction
DOCS = [
    ("d1", ["football"], ["football"], [0.9]),
    ("d2", ["football"], ["tennis"], [0.8]),  # sibling confusion football -> tennis
    ("d3", ["tennis"], ["tennis"], [0.7]),
    ("d4", ["physics"], ["biology"], [0.2]),  # physics -> biology
    ("d5", ["biology"], ["football"], [0.5]),  # science -> sports (siblings under ROOT)
    ("d6", ["football", "physics"], ["football"], [0.6]),  # physics missed, no sibling predicted
]
LEAVES = ["biology", "football", "physics", "tennis"]


def make_predictions(root: Path, model_dir: Path | None, scores: bool = True) -> Path:
    tax = tiny_taxonomy()
    feats = root / "features"
    feats.mkdir(parents=True)
    tax.to_tsv(feats / "taxonomy.tsv")
    preds = root / "predictions"
    (preds / "data").mkdir(parents=True)
    cols = {
        "doc_id": [d[0] for d in DOCS],
        "pred_labels": [d[2] for d in DOCS],
        "pred_scores": pa.array([d[3] if scores else [float("nan")] * len(d[2]) for d in DOCS],
                                pa.list_(pa.float32())),
        "labels": [d[1] for d in DOCS],
        "split": ["test"] * len(DOCS),
    }
    # two files, as Spark would write them
    t = pa.table(cols)
    pq.write_table(t.slice(0, 3), preds / "data" / "part-00000.parquet")
    pq.write_table(t.slice(3), preds / "data" / "part-00001.parquet")
    (preds / "_MODEL.json").write_text(json.dumps({
        "model_dir": str(model_dir) if model_dir else None, "model_version": "abc123", "model": "global",
        "taxonomy_fingerprint": tax.fingerprint(), "features": str(feats),
        "selection": {"split": "test", "fold": None, "exclude_fold": None}, "documents": len(DOCS),
        "scored_labels": LEAVES,
    }))
    return preds


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return train_tiny_model(tmp_path_factory.mktemp("m") / "model", epochs=2)


def test_counts_levels_labels_confusions_pr_by_hand(tmp_path, model_dir):
    data = collect(make_predictions(tmp_path, model_dir))
    by = {r["label"]: r for r in data.labels}
    # football: gold d1 d2 d6, predicted d1 d5 d6 -> TP 2 (d1 d6), FP 1 (d5), FN 1 (d2)
    assert (by["football"]["tp"], by["football"]["fp"], by["football"]["fn"]) == (2, 1, 1)
    assert by["football"]["f1"] == pytest.approx(2 / 3)
    assert (by["tennis"]["tp"], by["tennis"]["fp"], by["tennis"]["fn"]) == (1, 1, 0)
    assert (by["physics"]["tp"], by["physics"]["fp"], by["physics"]["fn"]) == (0, 0, 2)
    assert (by["biology"]["tp"], by["biology"]["fp"], by["biology"]["fn"]) == (0, 1, 1)
    # sports: gold d1 d2 d3 d6, predicted d1 d2 d3 d5 d6; science: gold d4 d5 d6, predicted d4
    assert (by["sports"]["tp"], by["sports"]["fp"], by["sports"]["fn"]) == (4, 1, 0)
    assert (by["science"]["tp"], by["science"]["fp"], by["science"]["fn"]) == (1, 0, 2)
    assert by["sports"]["scored"] is False and by["football"]["scored"] is True
    # tree order: each group followed by its children (alphabetical)
    assert [r["label"] for r in data.labels] == ["science", "biology", "physics", "sports", "football", "tennis"]
    lv = {r["depth"]: r for r in data.levels}
    # depth 1: TP 5, FP 1, FN 2 -> micro F1 10/13; macro (8/9 + 1/2) / 2 = 25/36
    assert (lv[1]["tp"], lv[1]["fp"], lv[1]["fn"]) == (5, 1, 2)
    assert lv[1]["micro_f1"] == pytest.approx(10 / 13)
    assert lv[1]["macro_f1"] == pytest.approx(25 / 36)
    # depth 2: TP 3, FP 3, FN 4 -> 6/13; macro (2/3 + 2/3 + 0 + 0) / 4 = 1/3
    assert (lv[2]["tp"], lv[2]["fp"], lv[2]["fn"]) == (3, 3, 4)
    assert lv[2]["micro_f1"] == pytest.approx(6 / 13)
    assert lv[2]["macro_f1"] == pytest.approx(1 / 3)
    pairs = [(r["gold"], r["predicted"], r["parent"], r["documents"]) for r in data.confusions]
    assert pairs == [("football", "tennis", "sports", 1), ("physics", "biology", "science", 1),
                     ("science", "sports", "ROOT", 1)]
    assert data.confusions[0]["share_of_gold"] == pytest.approx(1 / 3)  # football has support 3
    # PR points, highest score first: 0.9 ok, 0.8 wrong, 0.7 ok, 0.6 ok, 0.5 wrong, 0.2 wrong;
    # 7 gold deepest labels (d6 has two)
    pr = data.pr
    assert pr is not None and pr["gold"] == 7 and pr["n_pairs"] == 6 and pr["correct"] == 3
    want_p = [Fraction(1), Fraction(1, 2), Fraction(2, 3), Fraction(3, 4), Fraction(3, 5), Fraction(1, 2)]
    want_r = [Fraction(1, 7), Fraction(1, 7), Fraction(2, 7), Fraction(3, 7), Fraction(3, 7), Fraction(3, 7)]
    np.testing.assert_allclose(pr["precision"], [float(x) for x in want_p])
    np.testing.assert_allclose(pr["recall"], [float(x) for x in want_r])
    np.testing.assert_allclose(pr["thresholds"], [0.9, 0.8, 0.7, 0.6, 0.5, 0.2], rtol=1e-6)
    # EB metrics over the scored leaves: EBF per doc 1, 0, 1, 0, 0, 2/3 -> (8/3) / 6 = 4/9
    assert data.metrics["EBF"] == pytest.approx(4 / 9)
    assert data.bf is not None and data.bf["buckets"] == ["1", "2", "3", ">3"]


def test_build_report_writes_html_markdown_and_plots(tmp_path, model_dir):
    preds = make_predictions(tmp_path, model_dir)
    (preds / "metrics.json").write_text(json.dumps({"metrics": {"BEP": 0.5}}))
    res = build_report(preds, out=tmp_path / "report")
    html = Path(res["html"]).read_text()
    md = Path(res["markdown"]).read_text()
    names = sorted(Path(p).name for p in res["plots"])
    assert names == ["bf_weights.png", "label_f1.png", "level_f1.png", "pr_curve.png"]
    for p in res["plots"]:
        assert Path(p).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    srcs = re.findall(r'<img src="([^"]+)"', html)
    assert sorted(srcs) == sorted(f"plots/{n}" for n in names)
    for s in srcs:
        assert (tmp_path / "report" / s).is_file()
    assert sorted(re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md)) == sorted(srcs)
    # responsive layout: tables scroll in their box, images scale
    assert ".table-wrap{overflow-x:auto" in html and "img{max-width:100%" in html
    assert html.count('<div class="table-wrap"><table>') >= 4
    for heading in ("Metrics", "Per level", "Per label", "Most confused sibling pairs", "Branching-feature weights"):
        assert f"<h2>{heading}</h2>" in html and f"## {heading}" in md
    assert "BEP" in html  # taken from metrics.json (needs every label's score)
    assert "| football | tennis | sports | 1 | 0.3333 |" in md
    # every file the report cites (a *.md or *.py path) is in the repository
    repo = Path(__file__).resolve().parents[2]
    cited = set(re.findall(r"[\w./-]+\.(?:md|py)\b", md))
    assert cited and all((repo / c).is_file() for c in cited), sorted(c for c in cited if not (repo / c).is_file())
    # no scores -> no PR plot, a note instead; no model -> no bf plot
    preds2 = make_predictions(tmp_path / "b", None, scores=False)
    res2 = build_report(preds2)
    assert sorted(Path(p).name for p in res2["plots"]) == ["label_f1.png", "level_f1.png"]
    assert any("no precision-recall curve" in n for n in res2["notes"])
    assert (preds2 / "report" / "report.html").is_file()


def test_report_errors(tmp_path, model_dir):
    with pytest.raises(SchemaError, match="not a predictions folder"):
        collect(tmp_path)
    preds = make_predictions(tmp_path, model_dir)
    meta = json.loads((preds / "_MODEL.json").read_text())
    (preds / "_MODEL.json").write_text(json.dumps({**meta, "taxonomy_fingerprint": "0000"}))
    with pytest.raises(ModelError, match="predictions use taxonomy 0000"):
        collect(preds)
    (preds / "_MODEL.json").write_text(json.dumps(meta))
    t = pq.read_table(preds / "data" / "part-00000.parquet")
    t = t.set_column(t.schema.get_field_index("pred_labels"), "pred_labels",
                     pa.array([["football"], ["hockey"], ["tennis"]]))
    pq.write_table(t, preds / "data" / "part-00000.parquet")
    with pytest.raises(SchemaError, match="label 'hockey' of document 'd2' is not a node"):
        collect(preds)


def test_report_cli(tmp_path, model_dir, capsys):
    from sparkhc.cli import dispatch as run
    from tests.unit.test_model_store import parse

    preds = make_predictions(tmp_path, model_dir)
    assert run(parse(["report", "--predictions", str(preds), "--out", str(tmp_path / "r"), "--no-plots",
                      "--title", "Tiny <report>"])) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["plots"] == [] and res["documents"] == 6
    html = (tmp_path / "r" / "report.html").read_text()
    assert "<title>Tiny &lt;report&gt;</title>" in html and "<img" not in html


def test_sibling_confusions_counts_every_pair():
    from sparkhc.batch import label_matrix
    from sparkhc.report import _sibling_confusions

    tax = tiny_taxonomy()
    # d1: gold stops at 'sports' (1 missed node), prediction 'physics' (2 wrong nodes): sports -> science
    # d2: gold football, prediction tennis + biology: football -> tennis, sports -> science? no: sports is
    #     predicted (tennis's parent), so only football -> tennis; science is wrong but has no missed sibling
    gold = label_matrix([["sports"], ["football"]], tax)
    pred = label_matrix([["physics"], ["tennis", "biology"]], tax)
    real = ~tax.virtual.copy()
    real[0] = False
    support = np.asarray(gold.sum(axis=0)).ravel()
    rows = _sibling_confusions(gold, pred, tax, real, support)
    assert [(r["gold"], r["predicted"], r["documents"]) for r in rows] == [
        ("football", "tennis", 1), ("sports", "science", 1)]
    assert rows[1]["share_of_gold"] == 0.5  # sports is in both gold sets
