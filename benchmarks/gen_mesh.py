#!/usr/bin/env python
"""Generate a MeSH-sized corpus for the large-taxonomy benchmark: a taxonomy of tens of thousands
of nodes, Zipf label frequencies, 1-3 labels a document (some on internal nodes), a large vocabulary.

    python benchmarks/gen_mesh.py --docs 300000 --nodes 33000 --depth 4 --vocab 200000 --out /tmp/mesh300k
    sparkhc featurize --input /tmp/mesh300k/docs.jsonl --taxonomy /tmp/mesh300k/taxonomy.tsv \\
        --out /tmp/mesh300k/features

Writes ``<out>/docs.jsonl`` (uncompressed, so Spark splits it into blocks), ``<out>/taxonomy.tsv``
(``parent<TAB>child``, root ``ROOT``) and ``<out>/summary.json`` (the counts below, the seed and the
command). Deterministic for a given ``--seed``; generate under /tmp, never in the repository.

- **Taxonomy**: ``--depth`` levels under ``ROOT`` growing by one factor, about ``--nodes`` nodes in all
  (MeSH: about 30,000 descriptors; depth 4 or more here); every node above the last level has at
  least one child and the rest are dealt with seeded Gamma weights, so branching is uneven.
- **Labels**: every node but the root is a possible label; label frequencies follow Zipf(``--zipf``)
  over a seeded random order of the nodes, so frequent labels sit at every depth and internal nodes
  are labels too (as MeSH indexes with broad headings where nothing narrower fits). A document has 1,
  2 or 3 distinct labels (probabilities ``--labels-p``).
- **Words**: 50-150 words a document from a Zipf(1.1) background over ``--vocab`` synthetic words,
  plus topic words: each node has 20 words of its own, and a document draws 8 from each label's
  list, 4 from the label's parent's and 2 from its grandparent's, so the hierarchy is learnable
  (siblings share their parent's words) without being trivial (background words dominate).
- ``--label-noise q``: each label is written, with probability ``q``, as a random other node (the
  document's words are drawn from its true labels), so the set is not separable. The rewrites draw
  from the same random stream, so documents after the first one differ from a run without noise;
  0 gives the same output as before.
- ``split``: ``train`` (90 %) or ``test``, by a seeded draw.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gen_corpus import vocabulary  # noqa: E402

#: topic words a node owns, and how many a document draws from its label, the parent, the grandparent
TOPIC_WORDS = 20
FROM_LABEL, FROM_PARENT, FROM_GRANDPARENT = 8, 4, 2


@dataclass
class Tree:
    """The generated taxonomy: ``parent[i]`` (-1 for the root, node 0) and ``depth[i]``."""

    parent: np.ndarray
    depth: np.ndarray

    @property
    def n_nodes(self) -> int:
        return int(self.parent.shape[0])

    def name(self, i: int) -> str:
        return "ROOT" if i == 0 else f"n{i:06d}"

    def edges(self) -> list[tuple[str, str]]:
        return [(self.name(int(p)), self.name(i)) for i, p in enumerate(self.parent) if p >= 0]


def level_sizes(nodes: int, depth: int) -> list[int]:
    """Sizes of levels 1..``depth`` growing by one factor ``f`` (``f + f^2 + ... + f^depth`` about
    ``nodes - 1``), each at least the one before."""
    lo, hi = 1.0, float(nodes)
    for _ in range(100):  # bisection on f
        f = (lo + hi) / 2
        lo, hi = (f, hi) if sum(f ** k for k in range(1, depth + 1)) < nodes - 1 else (lo, f)
    sizes: list[int] = []
    for k in range(1, depth + 1):
        sizes.append(max(sizes[-1] if sizes else 1, int(round(lo ** k))))
    return sizes


def make_tree(rng: np.random.Generator, nodes: int, depth: int) -> Tree:
    """About ``nodes`` nodes (root included) in ``depth`` levels under the root: the level sizes of
    :func:`level_sizes`; every node of a level has at least one child, the rest of the next level
    is dealt to its nodes with seeded Gamma(1) weights, so branching is uneven (a few broad headings,
    many narrow ones), as in controlled vocabularies."""
    if depth < 1 or nodes < depth + 1:
        raise ValueError(f"need depth >= 1 and nodes > depth, not nodes={nodes}, depth={depth}")
    parent, level = [-1], [0]
    frontier = np.array([0])
    for d, size in enumerate(level_sizes(nodes, depth), start=1):
        w = rng.gamma(1.0, size=len(frontier))
        extra = rng.choice(len(frontier), size=size - len(frontier), p=w / w.sum())
        owners = np.sort(np.concatenate([np.arange(len(frontier)), extra]))
        start = len(parent)
        parent.extend(frontier[owners].tolist())
        level.extend([d] * size)
        frontier = np.arange(start, start + size)
    return Tree(np.asarray(parent, dtype=np.int64), np.asarray(level, dtype=np.int64))


def zipf_probabilities(n: int, s: float) -> np.ndarray:
    p = np.arange(1, n + 1, dtype=np.float64) ** -float(s)
    return p / p.sum()


def generate(out: Path, docs: int, nodes: int, depth: int, vocab: int, seed: int = 0, zipf: float = 1.0,
             labels_p: tuple[float, float, float] = (0.5, 0.35, 0.15), test_share: float = 0.1,
             label_noise: float = 0.0) -> dict:
    """Write the corpus into ``out`` (module docstring); returns the summary it also writes."""
    rng = np.random.default_rng(seed)
    tree = make_tree(rng, nodes, depth)
    n = tree.n_nodes
    words = np.array(vocabulary(rng, vocab), dtype=object)
    background = np.cumsum(zipf_probabilities(vocab, 1.1))  # sampled by inverse CDF (O(log V) a word)
    topic = rng.integers(0, vocab, size=(n, TOPIC_WORDS))
    order = rng.permutation(np.arange(1, n))  # label rank -> node: Zipf over a random order of the nodes
    label_cdf = np.cumsum(zipf_probabilities(n - 1, zipf))

    def draw(cdf: np.ndarray, size: int) -> np.ndarray:
        return np.minimum(np.searchsorted(cdf, rng.random(size) * cdf[-1], side="right"), len(cdf) - 1)
    p = np.asarray(labels_p, dtype=np.float64)
    p = p / p.sum()
    out.mkdir(parents=True, exist_ok=True)
    (out / "taxonomy.tsv").write_text("".join(f"{a}\t{b}\n" for a, b in tree.edges()), encoding="utf-8")
    freq = np.zeros(n, dtype=np.int64)
    n_test = 0
    k_labels = rng.choice(3, size=docs, p=p) + 1
    lengths = rng.integers(50, 151, size=docs)
    is_test = rng.random(docs) < test_share
    with open(out / "docs.jsonl", "w", encoding="utf-8") as fh:
        for i in range(docs):
            labs: list[int] = []
            while len(labs) < k_labels[i]:
                node = int(order[draw(label_cdf, 1)[0]])
                if node not in labs:
                    labs.append(node)
            ids = [draw(background, int(lengths[i]))]
            for lab in labs:
                freq[lab] += 1
                ids.append(rng.choice(topic[lab], size=FROM_LABEL))
                par = int(tree.parent[lab])
                if par > 0:
                    ids.append(rng.choice(topic[par], size=FROM_PARENT))
                    gp = int(tree.parent[par])
                    if gp > 0:
                        ids.append(rng.choice(topic[gp], size=FROM_GRANDPARENT))
            toks = words[rng.permutation(np.concatenate(ids))]
            if label_noise > 0:  # each label written as another node (its words stay): irreducible error
                flip = rng.random(len(labs)) < label_noise
                labs = list(dict.fromkeys(int(rng.integers(1, n)) if f else lab for lab, f in zip(labs, flip, strict=True)))
            split = "test" if is_test[i] else "train"
            n_test += int(is_test[i])
            fh.write(json.dumps({"id": f"d{i:07d}", "text": " ".join(toks), "labels": [tree.name(j) for j in labs],
                                 "split": split}) + "\n")
    internal = np.zeros(n, dtype=bool)
    internal[tree.parent[tree.parent >= 0]] = True
    used = freq > 0
    summary = {
        "docs": docs, "test_docs": n_test, "nodes": n, "depth": int(tree.depth.max()), "label_noise": label_noise,
        "nodes_per_level": np.bincount(tree.depth).tolist(), "vocabulary": vocab, "seed": seed, "zipf": zipf,
        "labels_per_doc": {str(k): int((k_labels == k).sum()) for k in (1, 2, 3)},
        "distinct_labels_used": int(used.sum()),
        "label_assignments_on_internal_nodes": int(freq[internal].sum()),
        "label_assignments": int(freq.sum()),
        "most_frequent_label_docs": int(freq.max()),
        "command": shlex.join(["python", "benchmarks/gen_mesh.py", *sys.argv[1:]]) if sys.argv[1:] else "",
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return summary


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=300_000)
    ap.add_argument("--nodes", type=int, default=33_000)
    ap.add_argument("--depth", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=200_000)
    ap.add_argument("--zipf", type=float, default=1.0, help="exponent of the label frequencies")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--label-noise", type=float, default=0.0,
                    help="share of labels written as a random other node (their words stay): a set that is not separable")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    t0 = time.perf_counter()
    s = generate(Path(a.out), a.docs, a.nodes, a.depth, a.vocab, seed=a.seed, zipf=a.zipf, label_noise=a.label_noise)
    print(json.dumps({**s, "seconds": round(time.perf_counter() - t0, 1)}, indent=2))


if __name__ == "__main__":
    main()
