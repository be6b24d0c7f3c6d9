#!/usr/bin/env python
"""Annif worker for ``benchmarks/peer_annif.py``: runs INSIDE the Annif virtualenv (``annif[omikuji]``,
never imported by the main interpreter), one process per job.

    <annif-venv>/bin/python benchmarks/_annif_worker.py JOB.json OUT.json

``JOB.json``::

    {"labels": [name, ...],                 # the subject vocabulary (index = subject)
     "docs": [text, ...],                   # every document of the job
     "gold": {"<doc index>": [label index, ...], ...},   # training documents only
     "fits": [{"train": [doc index, ...], "suggest": [doc index, ...]}, ...],
     "variant": "parabel" | "bonsai", "k": 20, "jobs": 1,
     "analyzer": "snowball(english)", "language": "en"}

Each fit sets up a fresh Annif project (backend ``omikuji``; Parabel = Annif's Omikuji defaults;
Bonsai = the Annif documentation's Bonsai settings ``cluster_balanced=False, cluster_k=100,
max_depth=3``) in a temporary data directory, trains it on the ``train`` documents through Annif's
Python API (the code path of ``annif train``) and writes the top ``k`` suggestions of each ``suggest``
document (Annif's ``suggest`` with ``limit=k, threshold=0``). ``OUT.json``::

    {"fits": [{"suggestions": [[[label index, score], ...] per suggest document, best first],
               "train_seconds": s, "suggest_seconds": s, "n_train": n}, ...],
     "annif": version, "omikuji": version, "import_seconds": s}

Subjects get URIs ``http://example.org/label/<index>``; suggestions are mapped back to the label
index. ``NLTK_DATA`` must point at NLTK's ``punkt_tab`` tables (Annif's analyzers tokenise with NLTK);
the caller sets it.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

URI = "http://example.org/label/{}"
VARIANTS: dict[str, dict[str, Any]] = {
    "parabel": {},  # Annif's omikuji defaults (Parabel-like: balanced 2-means, max_depth 20)
    "bonsai": {"cluster_balanced": "False", "cluster_k": "100", "max_depth": "3"},
}


def clean(text: str) -> str:
    """One line of text (Annif's corpora are line based; the analyzer only sees words)."""
    return " ".join(text.split())


def run(job: dict[str, Any]) -> dict[str, Any]:
    t0 = time.perf_counter()
    import annif
    import annif.corpus
    import annif.registry
    import annif.vocab
    from annif.corpus import Document, DocumentList, SubjectSet

    import_secs = time.perf_counter() - t0
    labels: list[str] = job["labels"]
    docs: list[str] = [clean(t) for t in job["docs"]]
    gold: dict[int, list[int]] = {int(k): [int(x) for x in v] for k, v in job.get("gold", {}).items()}
    variant = job.get("variant", "parabel")
    if variant not in VARIANTS:
        raise SystemExit(f"_annif_worker: unknown variant {variant!r} (known: {', '.join(VARIANTS)})")
    k = int(job.get("k", 20))
    jobs = int(job.get("jobs", 1))
    language = job.get("language", "en")
    analyzer = job.get("analyzer", "snowball(english)")
    out: dict[str, Any] = {"fits": [], "annif": _version("annif"), "omikuji": _version("omikuji"),
                           "import_seconds": import_secs}
    for n, fit in enumerate(job["fits"]):
        with tempfile.TemporaryDirectory(prefix="annif-job-") as tmp:
            root = Path(tmp)
            vocab_tsv = root / "subjects.tsv"
            vocab_tsv.write_text("".join(f"<{URI.format(i)}>\t{clean(name) or i}\n" for i, name in enumerate(labels)),
                                 encoding="utf-8")
            params = {"limit": str(k), **VARIANTS[variant]}
            cfg = root / "projects.cfg"
            cfg.write_text(
                f"[p{n}]\nname=p{n}\nlanguage={language}\nbackend=omikuji\nanalyzer={analyzer}\nvocab=labels\n"
                + "".join(f"{key}={val}\n" for key, val in params.items()), encoding="utf-8")
            app = annif.create_flask_app("annif.default_config.Config")
            app.config["PROJECTS_CONFIG_PATH"] = str(cfg)
            app.config["DATADIR"] = str(root / "data")
            with app.app_context():
                annif.registry.initialize_projects(app)
                project = annif.registry.get_project(f"p{n}")
                project.vocab.load_vocabulary(annif.vocab.VocabFileTSV(str(vocab_tsv), language), force=True)
                subjects = project.subjects
                sid = [subjects.by_uri(URI.format(i)) for i in range(len(labels))]
                back = {s: i for i, s in enumerate(sid)}
                train_docs = [Document(text=docs[i], subject_set=SubjectSet([sid[j] for j in gold.get(i, [])]))
                              for i in fit["train"]]
                t0 = time.perf_counter()
                project.train(DocumentList(train_docs), jobs=jobs)
                train_secs = time.perf_counter() - t0
                t0 = time.perf_counter()
                project.initialize()
                rows: list[list[list[Any]]] = []
                todo = [int(i) for i in fit["suggest"]]
                for a in range(0, len(todo), 256):
                    batch = project.suggest([Document(text=docs[i]) for i in todo[a:a + 256]])
                    for res in batch.filter(limit=k, threshold=0.0):
                        sug = sorted(((back[int(s.subject_id)], float(s.score)) for s in res),
                                     key=lambda x: (-x[1], x[0]))
                        rows.append([[i, sc] for i, sc in sug])
                suggest_secs = time.perf_counter() - t0
        out["fits"].append({"suggestions": rows, "train_seconds": train_secs, "suggest_seconds": suggest_secs,
                            "n_train": len(train_docs)})
        print(f"_annif_worker: fit {n + 1}/{len(job['fits'])} ({variant}): {len(train_docs)} train docs "
              f"{train_secs:.1f} s, {len(todo)} suggested {suggest_secs:.1f} s", file=sys.stderr, flush=True)
    return out


def _version(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return "?"


def main(argv: list[str]) -> None:
    if len(argv) != 2:
        raise SystemExit("usage: _annif_worker.py JOB.json OUT.json")
    os.environ.setdefault("RAYON_NUM_THREADS", "1")
    job = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    res = run(job)
    Path(argv[1]).write_text(json.dumps(res), encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1:])
