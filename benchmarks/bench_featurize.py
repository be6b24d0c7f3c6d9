#!/usr/bin/env python
"""Featurize throughput (documents/s) of ``sparkhc featurize`` and of Spark MLlib's text pipeline
(RegexTokenizer + StopWordsRemover + CountVectorizer + IDF, fitted and written to Parquet) on the
same documents, side by side in one run.

    python benchmarks/bench_featurize.py --corpus 20newsgroups --corpus meka_imdb \\
        --data-dir ../shared/data --out-root /tmp/bench --master 'local[2]'

    # scale: generated corpora (benchmarks/gen_corpus.py), spark-submit with a 1 GB driver
    python benchmarks/bench_featurize.py --scale /tmp/gen100k --scale /tmp/gen2m --section featurize-scale

Each system runs in a child process of its own (Spark start-up included in "wall", excluded in
"featurize s": for sparkhc the ``seconds`` of ``_SUMMARY.json``, which covers reading the raw
documents on the executors, checking, tokenizing, fitting, writing; for MLlib the same span: read,
fit both estimators, transform, write). Peak memory is the largest process of the child's tree
(``/usr/bin/time -v``: the JVM, which is the driver in local mode).

MLlib's pipeline gets the documents the way sparkhc reads them: the corpus's text fields joined with
a newline (``tokens`` joined with a space), the tokenizer pattern of sparkhc's default rules
(``(?U)\\b[^\\W\\d_]{2,}\\b`` after lowercasing), English stop words removed only when sparkhc removes
them (not by default: the remover then has an empty list), CountVectorizer and IDF fitted on the
training split (all documents for corpora without one).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import ROOT, command, loadavg, machine, now, write_section  # noqa: E402

MLLIB_PATTERN = r"(?U)\b[^\W\d_]{2,}\b"


def mllib_child(docs: str, text_fields: list[str], tokens_field: str | None, split: bool, out: str) -> None:
    """The MLlib pipeline in this process (``--mllib-child``); prints one JSON line."""
    from pyspark.ml import Pipeline
    from pyspark.ml.feature import IDF, CountVectorizer, RegexTokenizer, StopWordsRemover
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    spark = SparkSession.builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    t0 = time.perf_counter()
    df = spark.read.json(docs)
    parts = [F.col(f) for f in text_fields if f in df.columns]
    if tokens_field and tokens_field in df.columns:
        parts.append(F.array_join(F.col(tokens_field), " "))
    text = F.concat_ws("\n", *parts) if parts else F.lit("")
    ident = F.col("id") if "id" in df.columns else F.col("doc_id")
    docs_df = df.select(ident.cast("string").alias("doc_id"), text.alias("text"),
                        (F.col("split") if split and "split" in df.columns else F.lit(None)).alias("split"))
    pipe = Pipeline(stages=[
        RegexTokenizer(inputCol="text", outputCol="tokens", pattern=MLLIB_PATTERN, gaps=False, toLowercase=True),
        StopWordsRemover(inputCol="tokens", outputCol="terms", stopWords=[]),
        CountVectorizer(inputCol="terms", outputCol="tf", minDF=1.0),
        IDF(inputCol="tf", outputCol="features"),
    ])
    fit_df = docs_df.where(F.col("split") == "train") if split and "split" in df.columns else docs_df
    model = pipe.fit(fit_df)
    model.transform(docs_df).select("doc_id", "features").write.mode("overwrite").parquet(out)
    secs = time.perf_counter() - t0
    n = spark.read.parquet(out).count()
    print(json.dumps({"n": n, "seconds": secs, "vocabulary": len(model.stages[2].vocabulary)}))


def run_child(cmd: list[str], env: dict[str, str]) -> tuple[subprocess.CompletedProcess[str], float, str]:
    l0 = loadavg()
    t0 = time.perf_counter()
    p = subprocess.run(["/usr/bin/time", "-v", *cmd], capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    rss = next((ln.split(":")[1].strip() for ln in p.stderr.splitlines() if "Maximum resident" in ln), "0")
    if p.returncode != 0:
        print(p.stderr[-3000:], file=sys.stderr)
    return p, wall, f"{int(rss) / 2**20:.2f} GiB | {l0} -> {loadavg()}"


def corpus_inputs(corpus: str, data_dir: str) -> tuple[str, list[str], str | None, bool]:
    from sparkhc.corpus import registry

    info = registry.get_corpus(corpus)
    root = registry.find_corpus(corpus, data_dir=data_dir)
    docs = str(info.corpus_dir(root) / info.docs_file)
    return docs, list(info.text_fields), info.tokens_field, bool(info.splits)


def verdicts(secs: dict[str, dict[str, float]]) -> str:
    """Issue 19's target per data set: sparkhc featurizes the input file at least as fast as MLlib's
    pipeline in the same run (seconds for the same file; docs/s differ where sparkhc applies a
    protocol that keeps fewer documents, as on Reuters-21578)."""
    lines = [f"- {name}: {'met' if t['sparkhc'] <= t['mllib'] else 'NOT met'} (sparkhc {t['sparkhc']:.1f} s, "
             f"MLlib {t['mllib']:.1f} s for the same input file)"
             for name, t in secs.items() if "sparkhc" in t and "mllib" in t]
    return ("\n\nTarget (issue 19): featurize at least as fast as MLlib's pipeline in the same run.\n\n"
            + "\n".join(lines)) if lines else ""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", action="append", default=[])
    ap.add_argument("--scale", action="append", default=[], metavar="DIR",
                    help="a generated corpus folder (docs.jsonl, taxonomy.tsv): spark-submit with --driver-memory")
    ap.add_argument("--driver-memory", default="1g")
    ap.add_argument("--data-dir", default="../shared/data")
    ap.add_argument("--out-root", default="/tmp/bench")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--no-mllib", action="store_true")
    ap.add_argument("--section", default="featurize")
    ap.add_argument("--mllib-child", nargs=5, metavar=("DOCS", "TEXT_FIELDS", "TOKENS", "SPLIT", "OUT"),
                    help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.mllib_child:
        docs, fields, tokens, split, out = a.mllib_child
        mllib_child(docs, [f for f in fields.split(",") if f], tokens or None, split == "1", out)
        return
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYSPARK_PYTHON": sys.executable}
    rows = []
    secs: dict[str, dict[str, float]] = {}  # data -> system -> featurize s of the same input file
    submit = ["spark-submit", "--master", a.master, "--driver-memory", a.driver_memory,
              "--conf", "spark.ui.enabled=false"]
    jobs: list[tuple[str, list[str], list[str], Path]] = []
    for corpus in a.corpus if not a.scale else []:
        out = Path(a.out_root) / f"feat_{corpus}"
        docs, fields, tokens, split = corpus_inputs(corpus, a.data_dir)
        spk = [sys.executable, "-m", "sparkhc.cli", "featurize", "--corpus", corpus, "--data-dir", a.data_dir,
               "--out", str(out), "--overwrite", "--master", a.master]
        ml = [*submit, str(Path(__file__).resolve()), "--mllib-child", docs, ",".join(fields), tokens or "",
              "1" if split else "0", str(Path(a.out_root) / f"mllib_{corpus}")]
        jobs.append((corpus, spk, ml, out))
    for d in a.scale:
        name = Path(d).name
        out = Path(a.out_root) / f"feat_{name}"
        spk = [*submit, str(ROOT / "jobs" / "featurize.py"), "--input", str(Path(d) / "docs.jsonl"),
               "--taxonomy", str(Path(d) / "taxonomy.tsv"), "--out", str(out), "--overwrite"]
        ml = [*submit, str(Path(__file__).resolve()), "--mllib-child", str(Path(d) / "docs.jsonl"), "text", "", "1",
              str(Path(a.out_root) / f"mllib_{name}")]
        jobs.append((name, spk, ml, out))
    for name, spk, ml, out in jobs:
        p, wall, mem = run_child(spk, env)
        if p.returncode != 0:
            rows.append(f"| {name} | sparkhc featurize | failed (exit {p.returncode}) | | | {wall:.1f} | {mem} |")
        else:
            summ = json.loads((out / "_SUMMARY.json").read_text())
            n, s = summ["n_documents"], summ["seconds"]
            rows.append(f"| {name} | sparkhc featurize | {n} | {s:.1f} | {n / s:.0f} | {wall:.1f} | {mem} |")
            secs.setdefault(name, {})["sparkhc"] = s
            print(rows[-1], summ.get("timings"), flush=True)
        if a.no_mllib:
            continue
        p, wall, mem = run_child(ml, env)
        if p.returncode != 0:
            rows.append(f"| {name} | MLlib RegexTokenizer+StopWordsRemover+CountVectorizer+IDF | failed (exit "
                        f"{p.returncode}) | | | {wall:.1f} | {mem} |")
        else:
            res = json.loads(p.stdout.strip().splitlines()[-1])
            rows.append(f"| {name} | MLlib RegexTokenizer+StopWordsRemover+CountVectorizer+IDF | {res['n']} | "
                        f"{res['seconds']:.1f} | {res['n'] / res['seconds']:.0f} | {wall:.1f} | {mem} |")
            secs.setdefault(name, {})["mllib"] = res["seconds"]
        print(rows[-1], flush=True)
    corpora = ""
    if a.scale:
        sizes = ", ".join(f"{Path(d).name}: {(Path(d) / 'docs.jsonl').stat().st_size / 1e9:.2f} GB" for d in a.scale)
        made = []
        for d in a.scale:  # benchmarks/gen_mesh.py records its command and counts in summary.json
            info = Path(d) / "summary.json"
            if info.is_file():
                s = json.loads(info.read_text(encoding="utf-8"))
                made.append(f"{Path(d).name}: `{s['command']}` ({s['nodes']:,} taxonomy nodes, depth {s['depth']}, "
                            f"{s['distinct_labels_used']:,} labels used, {s['vocabulary']:,}-word vocabulary)")
        corpora = ("Corpora generated by `python benchmarks/gen_corpus.py --docs N --out DIR` (uncompressed JSON "
                   f"Lines, 200 leaf labels) unless named here{': ' + '; '.join(made) if made else ''}; {sizes}; "
                   f"spark-submit --driver-memory {a.driver_memory}.\n\n")
    body = (
        f"Command: `{command()}`  \nMachine: {machine()}  \nDate: {now()}\n\n"
        "featurize s: from reading the raw documents to the written Parquet (Spark start-up excluded); wall: the "
        "whole child process. Peak RSS: the largest process of the child (the JVM, driver and executor in local "
        "mode). docs/s counts the documents each system writes: MLlib's pipeline takes every record of the file, "
        "sparkhc applies the corpus protocol (Reuters-21578: it reads all 21,578 stories and keeps the 10,789 "
        "ModApte ones).\n\n" + corpora
        + "| data | system | documents | featurize s | docs/s | wall s | peak RSS | load avg (start -> end) |\n"
        "|---|---|---|---|---|---|---|---|\n" + "\n".join(rows) + verdicts(secs)
    )
    write_section(a.section, f"Featurize throughput ({a.section})", body)


if __name__ == "__main__":
    main()
