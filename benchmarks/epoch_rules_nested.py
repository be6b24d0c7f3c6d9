"""Does the epoch selection's choice hold on documents it did not choose on? (issue 17)

Nested validation inside each training part only: the default global model is trained on 70% of the
training documents (2 shards, the in-process IPM simulation of ``explore_gt.py``), and after every
epoch scored (hF + LB macro-F1) on three disjoint 10% slices: A1, A2 and B. A rule (selection slice
A1 or A1+A2, patience, optional 3-epoch moving average of the curve) picks an epoch from its slice
with :class:`sparkhc.epochs.EarlyStopping`; the table reports slice B's score at that epoch, the
score the rule's choice would get on new documents, and the same for fixed epoch counts. No test
document is read.

    python benchmarks/epoch_rules_nested.py --features-root /tmp/acc --max-epochs 60 --cache /tmp/es \\
        --section epoch-selection-nested
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import command, explore_gt, loadavg, machine, now, write_section  # noqa: E402

explore = explore_gt()

ROUNDS = {"rcv1v2_subset": [("fold", f, 0) for f in range(5)],
          "reuters21578": [("split", "test", s) for s in range(3)],
          "20newsgroups": [("split", "test", s) for s in range(3)]}
VARIANT = "branching=True,update='cost_augmented',bias=0.3,margin_rare=0.25"


def curves(features_root: str, corpus: str, max_epochs: int, cache: Path | None) -> list[dict[str, Any]]:
    from sparkhc.batch import label_matrix
    from sparkhc.metrics import MetricCounts

    f = cache / f"nested_{corpus}.json" if cache is not None else None
    if f is not None and f.exists():
        return list(json.loads(f.read_text()))
    out = []
    for kind, val, seed in ROUNDS[corpus]:
        rnd = explore.load_round(f"{features_root}/{corpus}/features", val if kind == "fold" else None,
                                 val if kind == "split" else None)  # the test part is never scored here
        n = len(rnd.train)
        perm = np.random.default_rng([seed, 99]).permutation(n)
        k = n // 10
        a1, a2, b, fit = perm[:k], perm[k:2 * k], perm[2 * k:3 * k], perm[3 * k:]
        sets = {"A1": rnd.train.subset(np.sort(a1)), "A12": rnd.train.subset(np.sort(np.r_[a1, a2])),
                "B": rnd.train.subset(np.sort(b))}
        fb = rnd.train.subset(np.sort(fit))
        cur: dict[str, list[dict[str, float]]] = {s: [] for s in sets}

        def rec(e: int, m: Any, _sets: dict = sets, _cur: dict = cur, _r: Any = rnd) -> None:
            for s, batch in _sets.items():
                c = MetricCounts(_r.tax, _r.mask)
                c.add(label_matrix(batch.labels or [], _r.tax), label_matrix(m.predict(batch), _r.tax))
                r = c.compute()
                _cur[s].append({"hF": r["hF"], "LBMaF": r["LBMaF"]})

        explore.train(fb, explore.model_taxonomy(rnd.tax, fb), rnd.n_features, explore.parse_variant(VARIANT),
                      max_epochs, 2, seed, on_epoch=rec)
        out.append({"round": [kind, val, seed], "curves": cur})
        print(f"{corpus} {kind} {val} seed {seed}: done", flush=True)
    if f is not None:
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(json.dumps(out))
    return out


def score(r: dict[str, float]) -> float:
    return float(r["hF"] + r["LBMaF"])


def pick(v: list[float], patience: int, window: int) -> int:
    """The epochs :class:`sparkhc.epochs.EarlyStopping` picks on ``v`` (trailing mean of ``window``;
    a flat wait of ``patience`` epochs, the rules this study compares: the growing wait of the
    product since 5fd5291 is chosen in ``epoch_rules.py``'s growth table)."""
    from sparkhc.epochs import EarlyStopping

    es = EarlyStopping(patience, window=window, growth=0.0)
    for x in v:
        if es.add(x):
            break
    return es.best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--features-root", required=True)
    ap.add_argument("--max-epochs", type=int, default=60)
    ap.add_argument("--cache", default="")
    ap.add_argument("--section", default="epoch-selection-nested")
    a = ap.parse_args()
    cache = Path(a.cache) if a.cache else None
    data = {c: curves(a.features_root, c, a.max_epochs, cache) for c in ROUNDS}
    lines = ["| rule | " + " | ".join(data) + " | mean | epochs chosen per round |", "|---|---|---|---|---|---|"]
    for sl, sl_name in (("A1", "10% slice"), ("A12", "20% slice")):
        for p in (5, 10, 20):
            for w in (1, 3):
                res, chs = [], []
                for rs in data.values():
                    es = [pick([score(r) for r in rd["curves"][sl]], p, w) for rd in rs]
                    res.append(100 * float(np.mean([score(rd["curves"]["B"][e - 1]) for rd, e in zip(rs, es, strict=True)])))
                    chs.append(",".join(map(str, es)))
                name = f"{sl_name}, patience {p}" + (", 3-epoch mean" if w > 1 else "")
                if (sl, p, w) == ("A1", 10, 3):
                    name = f"**{name} (the product's)**"
                lines.append(f"| {name} | " + " | ".join(f"{x:.2f}" for x in res) + f" | {np.mean(res):.2f} | "
                             + "; ".join(chs) + " |")
    for fixed in (10, 20, 30):
        res = [100 * float(np.mean([score(rd["curves"]["B"][fixed - 1]) for rd in rs])) for rs in data.values()]
        lines.append(f"| fixed {fixed} epochs | " + " | ".join(f"{x:.2f}" for x in res) + f" | {np.mean(res):.2f} | - |")
    body = "\n".join([
        f"Command: `{command()}`  ", f"Machine: {machine()}  ", f"Date: {now()}; load average at the end {loadavg()}", "",
        "Slice B's hF + LB macro-F1 (sum of two percentages, so up to 200) at the epoch each rule picks on its "
        "selection slice; mean over rcv1v2_subset's 5 training parts (seed 0) and over seeds 0-2 of the other two "
        "(the shard split and the slices); every slice is carved out of the training part, the test part is not read.",
        "", *lines])
    print(body)
    write_section(a.section, "Epoch selection on documents it did not choose on (epoch-selection-nested, issue 17)",
                  body)


if __name__ == "__main__":
    main()
