"""``benchmarks/gen_mesh.py`` (issue 33, point 2): the MeSH-sized generator gives the taxonomy and
label structure it promises, deterministically, in a form ``sparkhc featurize --input`` reads."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from sparkhc.taxonomy import Taxonomy

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def gen():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    spec = importlib.util.spec_from_file_location("gen_mesh_bench", ROOT / "benchmarks" / "gen_mesh.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["gen_mesh_bench"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_level_sizes_grow_by_one_factor_to_the_node_count(gen):
    sizes = gen.level_sizes(33_000, 4)
    assert sizes == sorted(sizes) and len(sizes) == 4
    assert abs(1 + sum(sizes) - 33_000) <= 10
    # f = 13.2: 13, 175, 2308, 30503 (f + f^2 + f^3 + f^4 = 32999)
    assert sizes[0] == 13 and sizes[-1] > 30_000


def test_tree_every_node_above_the_leaves_has_a_child_and_branching_is_uneven(gen):
    tree = gen.make_tree(np.random.default_rng(1), 3000, 4)
    assert tree.n_nodes == 1 + sum(gen.level_sizes(3000, 4))
    assert int(tree.depth.max()) == 4 and tree.parent[0] == -1
    children = np.bincount(tree.parent[1:], minlength=tree.n_nodes)
    above = tree.depth < 4
    assert (children[above] >= 1).all() and (children[~above] == 0).all()
    assert (tree.depth[1:] == tree.depth[tree.parent[1:]] + 1).all()
    inner = children[(tree.depth == 2)]
    assert inner.max() >= 3 * np.median(inner)  # a few broad headings


def test_corpus_labels_zipf_internal_nodes_and_determinism(gen, tmp_path):
    a = gen.generate(tmp_path / "a", docs=600, nodes=400, depth=4, vocab=2000, seed=3)
    gen.generate(tmp_path / "b", docs=600, nodes=400, depth=4, vocab=2000, seed=3)
    assert (tmp_path / "a" / "docs.jsonl").read_bytes() == (tmp_path / "b" / "docs.jsonl").read_bytes()
    tax = Taxonomy.load(tmp_path / "a" / "taxonomy.tsv")
    assert tax.n_nodes == a["nodes"] and a["depth"] == 4
    docs = [json.loads(line) for line in (tmp_path / "a" / "docs.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(docs) == 600 and len({d["id"] for d in docs}) == 600
    counts: dict[str, int] = {}
    for d in docs:
        assert 1 <= len(d["labels"]) <= 3 and len(set(d["labels"])) == len(d["labels"])
        assert all(lab in tax.names for lab in d["labels"]) and "ROOT" not in d["labels"]
        assert d["split"] in ("train", "test") and len(d["text"].split()) >= 50
        for lab in d["labels"]:
            counts[lab] = counts.get(lab, 0) + 1
    freq = sorted(counts.values(), reverse=True)
    assert freq[0] >= 10 * np.median(freq)  # Zipf: a head of frequent labels, a long tail
    leaves = set(np.asarray(tax.names)[tax.leaves].tolist())
    assert a["label_assignments_on_internal_nodes"] == sum(c for lab, c in counts.items() if lab not in leaves) > 0
    assert a["labels_per_doc"]["1"] > a["labels_per_doc"]["2"] > a["labels_per_doc"]["3"] > 0


def test_label_noise_rewrites_labels_not_words(gen, tmp_path):
    """``label_noise = 0`` writes what the generator wrote before (the same records as a run without
    it); ``q > 0`` keeps the ids and splits, and the first document (drawn before any rewrite: its
    words come from its true labels) has the same text; about ``q`` of the labels of the whole corpus
    are rewritten, so the corpus's labels no longer follow the true labels' Zipf order."""
    def records(out, **kw):
        gen.generate(out, 3000, 60, 3, 2000, seed=4, **kw)
        return [json.loads(line) for line in (out / "docs.jsonl").read_text(encoding="utf-8").splitlines()]

    base = records(tmp_path / "a")
    assert records(tmp_path / "b", label_noise=0.0) == base
    noisy = records(tmp_path / "c", label_noise=0.3)
    assert [(r["id"], r["split"]) for r in noisy] == [(r["id"], r["split"]) for r in base]
    assert noisy[0]["text"] == base[0]["text"]
    assert sum(a["labels"] != b["labels"] for a, b in zip(noisy, base, strict=True)) > len(base) // 4
    every = records(tmp_path / "d", label_noise=1.0)  # every label random: near-uniform label frequencies
    counts = np.unique([lab for r in every for lab in r["labels"]], return_counts=True)[1]
    base_counts = np.unique([lab for r in base for lab in r["labels"]], return_counts=True)[1]
    assert counts.max() < base_counts.max() / 3
    assert json.loads((tmp_path / "c" / "summary.json").read_text(encoding="utf-8"))["label_noise"] == 0.3
