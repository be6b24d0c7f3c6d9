"""Tiny staged slices of the real corpora for ``sparkhc experiment NAME --quick``.

A quick run reads the same files through the same readers as a full run, only fewer documents:
:func:`stage` writes a copy of ``../shared/data/<corpus>/`` into a scratch folder with a few
hundred documents chosen deterministically (file order), the other files (taxonomy, folds,
descriptions) copied or restricted to those documents. The slice keeps what the protocols need:

* ``rcv1v2_subset``: the first :data:`RCV1_DOCS` documents (every fold is represented) and their
  rows of ``folds.tsv``;
* ``20newsgroups``: up to :data:`PER_KEY` documents per (leaf label, split);
* ``reuters21578``: up to :data:`PER_KEY` documents per (topic, ModApte split) among the
  ``apte_mod`` documents (the registry checks that all 90 ApteMod topics occur in train and test)
  and per (topic, Lewis split) among all stories (Li & Yamanishi), plus every story of the nine
  commodity topics up to the same cap;
* ``ohsumed23``: up to :data:`PER_KEY` documents per (category, split);
* ``mdc``: Edm and Flare1 are small already; they are copied (the quick run uses fewer folds).
"""

from __future__ import annotations

import gzip
import json
import shutil
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from sparkhc.corpus.readers import write_jsonl_gz
from sparkhc.errors import DataUnavailableError

RCV1_DOCS = 250
PER_KEY = 4

Keys = Callable[[dict[str, Any]], list[tuple[str, str]]]


def _records(path: Path) -> Iterator[dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


def _cover(path: Path, keys: Keys, per_key: int) -> list[dict[str, Any]]:
    """The records (file order) that bring some key below ``per_key`` occurrences."""
    seen: Counter[tuple[str, str]] = Counter()
    out = []
    for rec in _records(path):
        ks = keys(rec)
        if any(seen[k] < per_key for k in ks):
            out.append(rec)
            seen.update(ks)
    return out


def _copy_others(src: Path, dst: Path, skip: set[str]) -> None:
    for f in sorted(src.iterdir()):
        if f.is_file() and f.name not in skip:
            shutil.copyfile(f, dst / f.name)


def _reuters_keys(rec: dict[str, Any]) -> list[tuple[str, str]]:
    labels = rec.get("labels") or []
    keys = [(f"lewis:{rec.get('lewissplit')}", lab) for lab in labels]
    if rec.get("apte_mod"):
        keys += [(f"modapte:{rec.get('split')}", lab) for lab in labels]
    return keys


def _20ng_keys(rec: dict[str, Any]) -> list[tuple[str, str]]:
    return [(str(rec.get("split")), lab) for lab in rec.get("labels") or []]


def stage(corpus: str, data_dir: str | Path, dest: str | Path) -> Path:
    """Write the quick slice of ``corpus`` (a registry name, or ``mdc``) from ``data_dir`` into
    ``dest/<corpus>``; returns ``dest`` (the ``--data-dir`` of the quick run)."""
    src = Path(data_dir) / corpus
    if not src.is_dir():
        raise DataUnavailableError(f"{src}: corpus folder not found; a quick run slices the staged corpora "
                                   "(pass --data-dir ../shared/data)")
    out = Path(dest) / corpus
    if out.is_dir():
        return Path(dest)
    tmp = Path(dest) / f".{corpus}.staging"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    if corpus == "mdc":
        _copy_others(src, tmp, skip=set())
    elif corpus == "rcv1v2_subset":
        docs = []
        for rec in _records(src / "docs.jsonl.gz"):
            docs.append(rec)
            if len(docs) == RCV1_DOCS:
                break
        ids = {d["id"] for d in docs}
        write_jsonl_gz(docs, tmp / "docs.jsonl.gz")
        lines = (src / "folds.tsv").read_text(encoding="utf-8").splitlines()
        kept = [lines[0]] + [ln for ln in lines[1:] if ln.split("\t", 1)[0] in ids]
        (tmp / "folds.tsv").write_text("\n".join(kept) + "\n", encoding="utf-8")
        _copy_others(src, tmp, skip={"docs.jsonl.gz", "folds.tsv"})
    elif corpus in ("20newsgroups", "reuters21578", "ohsumed23"):
        # 20newsgroups and ohsumed23: one label per document, a train / test split
        keys = _reuters_keys if corpus == "reuters21578" else _20ng_keys
        write_jsonl_gz(_cover(src / "docs.jsonl.gz", keys, PER_KEY), tmp / "docs.jsonl.gz")
        _copy_others(src, tmp, skip={"docs.jsonl.gz"})
    else:
        raise DataUnavailableError(f"no quick slice is defined for corpus {corpus!r}")
    tmp.rename(out)
    return Path(dest)
