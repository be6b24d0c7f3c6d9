#!/usr/bin/env python
"""Seeded synthetic corpus at the scale of Murawaki's JSTPlus data set, in the features layout.

Paper figures (JSTPlus): 455,311 documents, 3,209 leaf labels, 4,030 edges, depth 5 (some edges
skip levels: leaves hang from depth 1-4 nodes), 1.85 labels per document, about 120 distinct words
per document, a 100,000-word vocabulary.

Writes ``OUT/features/part-NNNNN.parquet`` (doc_id, split, fold, labels, label_ids, indices,
values, counts; :data:`sparkhc.spark.schemas.FEATURES_ARROW_SCHEMA`), ``OUT/feature_spec.json``
(a fitted vocab-mode FeatureSpec, log-tf-idf, L2-normalised), ``OUT/taxonomy.tsv`` and
``OUT/_SUMMARY.json``, so ``sparkhc train --features OUT`` / ``sparkhc predict`` run on it.

Model of a document: labels = 1 + Poisson(0.85) leaves (Zipf-popular; a second label is a
sibling-subtree leaf half of the time); words = a Zipf background over the vocabulary plus about
40% tokens drawn from the topic words of the nodes of tree(m) (every node has 20 topic words), so
the hierarchy is learnable. 10% of the documents are ``split = test``; ``fold`` = 0..9.

    python benchmarks/synthetic_jstplus.py --out /tmp/jst --scale 0.1          # 45,531 documents
    python benchmarks/synthetic_jstplus.py --out /tmp/jst_full                   # paper scale
    # scaling series: --scale (documents), --label-scale (edges), --vocab-scale (vocabulary)
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from sparkhc.spark.schemas import FEATURES_ARROW_SCHEMA
from sparkhc.taxonomy import Taxonomy
from sparkhc.text.spec import FeatureSpec

N_DOCS = 455_311
N_LEAVES = 3_209
N_EDGES = 4_030
VOCAB = 100_000
WORDS_PER_DOC = 120
LABELS_PER_DOC = 1.85
INTERNAL_BY_DEPTH = (12, 70, 240, 499)  # non-root internal nodes at depth 1..4: 821 in all
TOPIC_WORDS = 20
ROWS_PER_FILE = 25_000


def make_taxonomy(rng: np.random.Generator, label_scale: float = 1.0) -> tuple[Taxonomy, list[str], list[int]]:
    """Depth-5 tree: ``sum(INTERNAL_BY_DEPTH)`` internal nodes, ``N_LEAVES`` leaves (scaled)."""
    per_depth = [max(1, round(k * label_scale)) for k in INTERNAL_BY_DEPTH]
    n_leaves = max(1, round(N_LEAVES * label_scale))
    edges: list[tuple[str, str]] = []
    levels: list[list[str]] = [["ROOT"]]
    for d, k in enumerate(per_depth, start=1):
        names = [f"C{d}_{i}" for i in range(k)]
        prev = levels[-1]
        # every previous-level node gets at least one child when possible, the rest at random
        parents = list(prev[: min(len(prev), k)]) + [prev[int(j)] for j in rng.integers(0, len(prev), max(0, k - len(prev)))]
        rng.shuffle(parents)
        edges += list(zip(parents, names, strict=True))
        levels.append(names)
    has_child = {p for p, _ in edges}
    internal = [n for lv in levels[1:] for n in lv]
    childless = [n for n in internal if n not in has_child]
    leaves = [f"L{i}" for i in range(n_leaves)]
    hosts = list(childless)
    rest = n_leaves - len(hosts)
    deep = levels[-1]
    shallow = [n for lv in levels[2:-1] for n in lv]  # depth 2-3: edges that skip levels
    n_shallow = int(0.08 * rest)
    hosts += [deep[int(j)] for j in rng.integers(0, len(deep), rest - n_shallow)]
    hosts += [shallow[int(j)] for j in rng.integers(0, len(shallow), n_shallow)]
    edges += list(zip(hosts, leaves, strict=True))
    tax = Taxonomy.from_edges(edges, source="synthetic_jstplus")
    return tax, leaves, [tax.id(x) for x in leaves]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--scale", type=float, default=1.0, help="fraction of the 455,311 documents")
    ap.add_argument("--label-scale", type=float, default=1.0, help="multiplies internal nodes and leaves")
    ap.add_argument("--vocab-scale", type=float, default=1.0, help="multiplies the 100,000-word vocabulary")
    ap.add_argument("--seed", type=int, default=20130101)
    ap.add_argument("--overwrite", action="store_true")
    a = ap.parse_args()
    t0 = time.perf_counter()
    out = Path(a.out)
    if out.exists():
        if not a.overwrite:
            raise SystemExit(f"{out} exists (--overwrite to replace)")
        shutil.rmtree(out)
    rng = np.random.default_rng(a.seed)
    tax, leaves, leaf_ids = make_taxonomy(rng, a.label_scale)
    n_docs = max(10, round(N_DOCS * a.scale))
    V = max(1000, round(VOCAB * a.vocab_scale))
    n_nodes = tax.n_nodes
    parent = np.asarray(tax.parent, dtype=np.int64)
    depth = np.asarray(tax.depth, dtype=np.int64)
    leaf_arr = np.asarray(leaf_ids, dtype=np.int64)
    # ancestors of each leaf (root excluded), padded with -1
    max_d = int(depth.max())
    anc = np.full((len(leaf_arr), max_d), -1, dtype=np.int64)
    cur = leaf_arr.copy()
    for j in range(max_d):
        ok = cur > 0
        anc[ok, j] = cur[ok]
        cur = np.where(ok, parent[np.maximum(cur, 0)], 0)
    n_anc = (anc >= 0).sum(axis=1)
    # Zipf popularity of leaves and words
    lp = 1.0 / np.arange(1, len(leaf_arr) + 1) ** 0.9
    lp = rng.permutation(lp / lp.sum())
    lcdf = np.cumsum(lp)
    wp = 1.0 / np.arange(1, V + 1) ** 1.05
    wcdf = np.cumsum(wp / wp.sum())
    topic = rng.integers(V // 50, V, size=(n_nodes, TOPIC_WORDS))  # mid/low-frequency topic words
    parent_of_leaf = parent[leaf_arr]
    sib_start = {}
    order = np.argsort(parent_of_leaf, kind="stable")
    for _pos, i in enumerate(order):
        sib_start.setdefault(int(parent_of_leaf[i]), []).append(int(i))
    sibs = {k: np.asarray(v) for k, v in sib_start.items()}
    feat = out / "features"
    feat.mkdir(parents=True)
    df = np.zeros(V, dtype=np.int64)
    chunks = []
    n_files = math.ceil(n_docs / ROWS_PER_FILE)
    for f in range(n_files):
        lo, hi = f * ROWS_PER_FILE, min(n_docs, (f + 1) * ROWS_PER_FILE)
        n = hi - lo
        k = np.minimum(1 + rng.poisson(LABELS_PER_DOC - 1.0, n), 6)
        first = np.minimum(np.searchsorted(lcdf, rng.random(n)), len(leaf_arr) - 1)
        labs = [[int(first[i])] for i in range(n)]
        for i in np.flatnonzero(k > 1):
            s = labs[i]
            while len(s) < k[i]:
                if rng.random() < 0.5:
                    grp = sibs[int(parent_of_leaf[s[0]])]
                    c = int(grp[rng.integers(0, grp.size)])
                else:
                    c = int(min(np.searchsorted(lcdf, rng.random()), len(leaf_arr) - 1))
                if c not in s:
                    s.append(c)
                elif len(sibs[int(parent_of_leaf[s[0]])]) <= len(s):
                    s.append(int(rng.integers(0, len(leaf_arr))))
                    s = labs[i] = sorted(set(s))
        lab_sizes = np.array([len(s) for s in labs])
        flat_l = np.concatenate([np.asarray(s) for s in labs])
        # tokens: ~158 draws -> ~120 distinct words
        n_tok = rng.poisson(158, n)
        n_topic = (0.4 * n_tok).astype(np.int64)
        n_bg = n_tok - n_topic
        bg_doc = np.repeat(np.arange(n), n_bg)
        bg_w = np.minimum(np.searchsorted(wcdf, rng.random(bg_doc.size)), V - 1)
        # topic tokens: a random label of the doc, a random ancestor of it, a random topic word
        tp_doc = np.repeat(np.arange(n), n_topic)
        lab_ptr = np.concatenate([[0], np.cumsum(lab_sizes)])
        which = lab_ptr[tp_doc] + (rng.random(tp_doc.size) * lab_sizes[tp_doc]).astype(np.int64)
        leaf_i = flat_l[which]
        a_j = (rng.random(tp_doc.size) * n_anc[leaf_i]).astype(np.int64)
        node = anc[leaf_i, a_j]
        tp_w = topic[node, rng.integers(0, TOPIC_WORDS, tp_doc.size)]
        key = np.concatenate([bg_doc * V + bg_w, tp_doc * V + tp_w])
        uk, cnt = np.unique(key, return_counts=True)
        doc, w = np.divmod(uk, V)
        np.add.at(df, w, 1)
        ptr = np.concatenate([[0], np.cumsum(np.bincount(doc, minlength=n))])
        chunks.append((lo, n, labs, doc, w.astype(np.int32), cnt.astype(np.float32), ptr))
    idf = np.log((1.0 + n_docs) / (1.0 + df)) + 1.0
    leaf_names = np.asarray(leaves)
    for f, (lo, n, labs, doc, w, cnt, ptr) in enumerate(chunks):
        val = (np.log1p(cnt) * idf[w]).astype(np.float64)
        norms = np.sqrt(np.bincount(doc, weights=val * val, minlength=n))
        val = (val / norms[doc]).astype(np.float32)
        ids = np.arange(lo, lo + n)
        h = (ids * 2654435761) % 100
        table = pa.table(
            {
                "doc_id": pa.array([f"d{i:07d}" for i in ids], pa.string()),
                "split": pa.array(np.where(h < 10, "test", "train").tolist(), pa.string()),
                "fold": pa.array((ids % 10).astype(np.int32), pa.int32()),
                "labels": pa.array([leaf_names[s].tolist() for s in labs], FEATURES_ARROW_SCHEMA.field("labels").type),
                "label_ids": pa.array(
                    [sorted(int(leaf_ids[j]) for j in s) for s in labs], FEATURES_ARROW_SCHEMA.field("label_ids").type
                ),
                "indices": pa.ListArray.from_arrays(pa.array(ptr.astype(np.int32)), pa.array(w, pa.int32())),
                "values": pa.ListArray.from_arrays(pa.array(ptr.astype(np.int32)), pa.array(val, pa.float32())),
                "counts": pa.ListArray.from_arrays(pa.array(ptr.astype(np.int32)), pa.array(cnt, pa.float32())),
            }
        ).cast(FEATURES_ARROW_SCHEMA)
        pq.write_table(table, feat / f"part-{f:05d}.parquet")
    vocab = tuple(f"w{i:06d}" for i in range(V))
    spec = FeatureSpec(
        mode="vocab", weighting="log_tf_idf", l2_normalize=True, fit_on=None,
        vocabulary=vocab, df=tuple(int(x) for x in df), n_fit_docs=n_docs,
    )
    spec.save(out)
    tax.to_tsv(out / "taxonomy.tsv")
    nnz = sum(int(c[3].size) for c in chunks)
    n_labels = sum(sum(len(s) for s in c[2]) for c in chunks)
    summary = {
        "generator": "benchmarks/synthetic_jstplus.py",
        "seed": a.seed,
        "scale": a.scale,
        "label_scale": a.label_scale,
        "vocab_scale": a.vocab_scale,
        "n_documents": n_docs,
        "n_features": V,
        "n_leaves": len(leaves),
        "n_edges": tax.n_nodes - 1,
        "depth": max_d,
        "labels_per_document": round(n_labels / n_docs, 3),
        "distinct_words_per_document": round(nnz / n_docs, 1),
        "num_partitions": n_files,
        "seconds": round(time.perf_counter() - t0, 1),
    }
    (out / "_SUMMARY.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
