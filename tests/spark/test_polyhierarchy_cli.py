"""A SKOS polyhierarchy end to end through the CLI (issue 56): featurize, train, predict, evaluate,
report on 20 Newsgroups documents with the hand-made vocabulary of tests/skos20ng.py (the real
taxonomy with a second parent, ``hardware``, for the two hardware newsgroups).

Expected values come from the vocabulary's construction (27 concepts, 29 positions, 1 deprecated)
and, for the scores, from a closure over every parent computed here from the vocabulary's parent
lists (not from sparkhc's code)."""

from __future__ import annotations

import gzip
import json
from fractions import Fraction

import pyarrow.parquet as pq
import pytest

from sparkhc.cli import run
from sparkhc.errors import ConfigError
from tests.conftest import DATA_DIR
from tests.skos20ng import HARDWARE, NS, label_en, parents_by_hand, read_tree, uri, write_vocabulary

pytest.importorskip("rdflib", reason="SKOS needs rdflib (a dependency of sparkhc)")

GROUPS = ("comp.sys.ibm.pc.hardware", "comp.sys.mac.hardware", "comp.graphics", "rec.autos", "sci.med")
PER_SPLIT = {"train": 40, "test": 20}


@pytest.fixture(scope="module")
def ng(spark, tmp_path_factory):
    d = DATA_DIR / "20newsgroups"
    if not (d / "docs.jsonl.gz").is_file():
        pytest.skip(f"20 Newsgroups not found at {d}")
    work = tmp_path_factory.mktemp("poly")
    vocab = write_vocabulary(work / "vocab.ttl", d / "taxonomy.tsv")
    seen: dict[tuple[str, str], int] = {}
    rows = []
    with gzip.open(d / "docs.jsonl.gz", "rt", encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            key = (r["newsgroup"], r["split"])
            if r["newsgroup"] not in GROUPS or seen.get(key, 0) >= PER_SPLIT[r["split"]]:
                continue
            seen[key] = seen.get(key, 0) + 1
            # training documents keep their newsgroup name (a skos:notation), test documents give the URI
            label = r["newsgroup"] if r["split"] == "train" else uri(r["newsgroup"])
            rows.append({"id": r["id"], "split": r["split"], "labels": [label], "text": r["text"]})
    docs = work / "docs.jsonl"
    docs.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    test_docs = work / "test.jsonl"
    test_docs.write_text("".join(json.dumps(r) + "\n" for r in rows if r["split"] == "test"), encoding="utf-8")
    return {"work": work, "vocab": vocab, "docs": docs, "test": test_docs, "tree": read_tree(d / "taxonomy.tsv")}


def _closure(names: list[str], parents: dict[str, set[str]]) -> set[str]:
    out: set[str] = set()
    todo = list(names)
    while todo:
        c = todo.pop()
        if c == "ROOT" or c in out:
            continue
        out.add(c)
        todo.extend(parents[c])
    return out


def test_skos_polyhierarchy_end_to_end(spark, ng, tmp_path):
    feats, model, pred = tmp_path / "f", tmp_path / "m", tmp_path / "p"
    assert run(["featurize", "--input", str(ng["docs"]), "--taxonomy", str(ng["vocab"]), "--out", str(feats),
                "--set", "featurize.partitions=1"]) == 0
    corpus = json.loads((feats / "corpus.json").read_text())
    assert corpus["taxonomy_concepts"] == {"concepts": 27, "positions": 29, "vocabulary": "skos", "label_language": "en",
                                           "deprecated_concepts": 1, "preferred_labels": 27}
    summary = json.loads((feats / "_SUMMARY.json").read_text())
    assert summary["taxonomy"]["positions"] == 29 and summary["taxonomy"]["concepts"] == 27
    table = pq.read_table(feats / "features").to_pylist()
    by_group = {r["doc_id"].split("/")[1]: r["labels"] for r in table}
    # a hardware newsgroup (given by its notation) carries both of its positions; another one its one node
    ibm = HARDWARE[0]
    assert by_group[ibm] == [f"{uri(ibm)}@{uri('computer')}", f"{uri(ibm)}@{uri('hardware')}"]
    assert by_group["rec.autos"] == [uri("rec.autos")]

    assert run(["train", "--features", str(feats), "--out", str(model), "--set", "train.epochs=5"]) == 0
    assert "#sparkhc:position" in (model / "taxonomy.tsv").read_text()
    assert run(["predict", "--model", str(model), "--features", str(feats), "--out", str(pred)]) == 0
    rows = pq.read_table(pred / "data").to_pylist()
    assert len(rows) == 5 * PER_SPLIT["test"]
    concepts = {uri(c) for _, c in ng["tree"]} | {uri("hardware")}
    for r in rows:
        assert set(r["pred_labels"]) <= concepts  # concepts, never positions
        assert r["pred_pref_labels"] == [label_en(x[len(NS):]) for x in r["pred_labels"]]
        assert len(r["pred_scores"]) == len(r["pred_labels"])
        assert r["labels"] == [uri(r["doc_id"].split("/")[1])]  # the gold labels as concepts again
    # the model learned something: most test documents get their newsgroup
    hits = sum(r["labels"][0] in r["pred_labels"] for r in rows)
    assert hits >= 0.6 * len(rows)

    assert run(["evaluate", "--predictions", str(pred)]) == 0
    metrics = json.loads((pred / "metrics.json").read_text())["metrics"]
    # hP, hR, hF and the example-based F over sets closed over every parent, computed here
    parents = parents_by_hand(ng["tree"])
    tp = n_pred = n_gold = 0
    ebf = Fraction(0)
    for r in rows:
        g = _closure([x[len(NS):] for x in r["labels"]], parents)
        p = _closure([x[len(NS):] for x in r["pred_labels"]], parents)
        tp, n_pred, n_gold = tp + len(g & p), n_pred + len(p), n_gold + len(g)
        ebf += Fraction(2 * len(g & p), len(g) + len(p))
    assert metrics["hP"] == pytest.approx(tp / n_pred, abs=1e-12)
    assert metrics["hR"] == pytest.approx(tp / n_gold, abs=1e-12)
    assert metrics["hF"] == pytest.approx(2 * tp / (n_pred + n_gold), abs=1e-12)
    assert metrics["EBF"] == pytest.approx(float(ebf / len(rows)), abs=1e-12)
    assert metrics["n_docs"] == len(rows)

    out = tmp_path / "report"
    assert run(["report", "--predictions", str(pred), "--out", str(out)]) == 0
    md = (out / "report.md").read_text()
    assert "a polyhierarchy" in md and "| label | preferred label | depth |" in md
    assert "Hardware" in md and f"{uri(ibm)}" in md

    # raw documents through the model's taxonomy: their URIs map to the positions and back
    pred_raw = tmp_path / "p_raw"
    assert run(["predict", "--model", str(model), "--input", str(ng["test"]), "--out", str(pred_raw)]) == 0
    raw = {r["doc_id"]: (r["labels"], r["pred_labels"]) for r in pq.read_table(pred_raw / "data").to_pylist()}
    assert raw == {r["doc_id"]: (r["labels"], r["pred_labels"]) for r in rows}
    assert run(["evaluate", "--predictions", str(pred_raw)]) == 0
    assert json.loads((pred_raw / "metrics.json").read_text())["metrics"]["hF"] == metrics["hF"]


def test_a_model_that_cannot_train_on_a_polyhierarchy_is_refused_in_one_line(spark, ng, tmp_path):
    feats = tmp_path / "f"
    assert run(["featurize", "--input", str(ng["docs"]), "--taxonomy", str(ng["vocab"]), "--out", str(feats),
                "--set", "featurize.partitions=1", "--set", "featurize.label_language=de"]) == 0
    # the labels shown are the German ones
    assert f"#sparkhc:label\t{uri('hardware')}\tRechnertechnik" in (feats / "taxonomy.tsv").read_text()
    assert json.loads((feats / "corpus.json").read_text())["taxonomy_concepts"]["label_language"] == "de"
    with pytest.raises(ConfigError, match=r"^model 'm3mdc' cannot train on a polyhierarchy \(the taxonomy .* gives some "
                                          r"concepts several parents\); models that can: ah_bay, cos, .*global") as e:
        run(["train", "--features", str(feats), "--out", str(tmp_path / "m"), "--set", "train.model=m3mdc"])
    assert "\n" not in str(e.value) and "m3mdc" not in str(e.value).split("models that can:")[1]


def test_positions_above_the_limit_are_refused_before_spark(ng, tmp_path):
    with pytest.raises(Exception, match=r"vocab\.ttl: the polyhierarchy of 27 concepts has 29 positions \(paths from "
                                        r"the root\), above the limit of 28"):
        run(["featurize", "--input", str(ng["docs"]), "--taxonomy", str(ng["vocab"]), "--out", str(tmp_path / "f"),
             "--set", "featurize.max_positions=28"])
    assert not (tmp_path / "f").exists()
