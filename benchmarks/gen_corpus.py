#!/usr/bin/env python
"""Generate a large JSON Lines corpus of short documents for the featurize scale benchmark.

    python benchmarks/gen_corpus.py --docs 2000000 --out /tmp/gen2m    # about 1 GB, 200 leaf labels

Writes ``<out>/docs.jsonl`` (uncompressed, so Spark splits it into blocks) and ``<out>/taxonomy.tsv``
(``ROOT`` -> 20 groups ``g00``..``g19`` -> 10 leaves each, ``g00.l0``..). Each document has an id
``d0000000``, 40-90 words drawn from a Zipf-like distribution over a 30,000-word synthetic
vocabulary (letters only, 3-9 letters), one leaf label whose own 200 "topic words" are mixed in, and
``split`` train (80 %) / test. Deterministic for a given ``--seed``; generate under /tmp, never in
the repository.
"""

from __future__ import annotations

import argparse
import string
import time
from pathlib import Path

import numpy as np


def vocabulary(rng: np.random.Generator, n: int) -> list[str]:
    letters = np.array(list(string.ascii_lowercase))
    words: set[str] = set()
    out: list[str] = []
    while len(out) < n:
        k = int(rng.integers(3, 10))
        w = "".join(letters[rng.integers(0, 26, size=k)])
        if w not in words:
            words.add(w)
            out.append(w)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=2_000_000)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--vocab", type=int, default=30_000)
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(a.seed)
    vocab = np.array(vocabulary(rng, a.vocab), dtype=object)
    lens = np.array([len(w) for w in vocab], dtype=np.int64)
    groups, per = 20, 10
    leaves = [f"g{g:02d}.l{j}" for g in range(groups) for j in range(per)]
    (out / "taxonomy.tsv").write_text(
        "".join(f"ROOT\tg{g:02d}\n" for g in range(groups))
        + "".join(f"g{g:02d}\tg{g:02d}.l{j}\n" for g in range(groups) for j in range(per)),
        encoding="utf-8",
    )
    # word ranks ~ Zipf(1.1) truncated to the vocabulary; every label has 200 topic words of its own
    ranks = np.arange(1, a.vocab + 1, dtype=np.float64)
    p = ranks ** -1.1
    p /= p.sum()
    topic = rng.integers(0, a.vocab, size=(len(leaves), 200))
    t0 = time.perf_counter()
    chunk = 50_000
    tmp = out / "docs.jsonl.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        for start in range(0, a.docs, chunk):
            n = min(chunk, a.docs - start)
            lengths = rng.integers(40, 91, size=n)
            labels = rng.integers(0, len(leaves), size=n)
            words = rng.choice(a.vocab, size=int(lengths.sum()), p=p)
            is_topic = rng.random(words.size) < 0.2
            offsets = np.concatenate([[0], np.cumsum(lengths)])
            doc_of = np.repeat(np.arange(n), lengths)
            words[is_topic] = topic[labels[doc_of[is_topic]], rng.integers(0, 200, size=int(is_topic.sum()))]
            split = rng.random(n) < 0.8
            # one join for the chunk, then slices per document (the words are letters only: no JSON escaping)
            toks = vocab[words]
            big = " ".join(toks)
            ends = np.cumsum(lens[words] + 1)
            starts = np.concatenate([[0], ends[:-1]])
            lines = []
            for i in range(n):
                text = big[starts[offsets[i]]:ends[offsets[i + 1] - 1] - 1]
                lines.append(f'{{"id":"d{start + i:07d}","text":"{text}","labels":["{leaves[labels[i]]}"],'
                             f'"split":"{"train" if split[i] else "test"}"}}')
            f.write("\n".join(lines) + "\n")
    tmp.replace(out / "docs.jsonl")
    size = (out / "docs.jsonl").stat().st_size
    print(f"wrote {a.docs} documents, {size / 1e9:.2f} GB, to {out / 'docs.jsonl'} in {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
