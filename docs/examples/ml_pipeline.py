#!/usr/bin/env python
"""sparkhc as a pyspark.ml library, end to end on 20 Newsgroups (run it as written):

    python docs/examples/ml_pipeline.py --data-dir ../shared/data --out work/ml-example

1. raw postings (JSON Lines) -> a DataFrame;
2. a Pipeline: RegexTokenizer -> StopWordsRemover -> CountVectorizer -> IDF -> HierarchicalClassifier;
3. tuned with Spark's CrossValidator + HierarchicalEvaluator on the *training* split only;
4. the chosen Pipeline refitted on the training split and saved (its last stage is a sparkhc model
   folder: ``sparkhc predict`` reads it too, on features written by ``sparkhc.ml.write_features``);
5. batch prediction: the saved Pipeline loaded again, the test split decoded and written as
   Parquet, and scored with HierarchicalEvaluator.

``--sample K`` keeps about one posting in K (a quick run: the test of this example uses it).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> dict[str, float]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", default="../shared/data")
    ap.add_argument("--out", default="work/ml-example")
    ap.add_argument("--sample", type=int, default=1, help="keep about one posting in SAMPLE (1 = all)")
    ap.add_argument("--folds", type=int, default=3)
    ap.add_argument("--master", default="local[2]")
    a = ap.parse_args(argv)

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.ml import Pipeline, PipelineModel
    from pyspark.ml.feature import IDF, CountVectorizer, RegexTokenizer, StopWordsRemover
    from pyspark.ml.tuning import ParamGridBuilder
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    # sparkhc.ml.CrossValidator: Spark's, with avgMetrics as Python floats
    from sparkhc.ml import CrossValidator, HierarchicalClassifier, HierarchicalEvaluator

    spark = SparkSession.builder.master(a.master).appName("sparkhc-ml-example").getOrCreate()
    corpus = Path(a.data_dir) / "20newsgroups"
    out = Path(a.out)

    # 1. raw documents: id, split, labels (ancestor-closed label names), text
    docs = spark.read.json(str(corpus / "docs.jsonl.gz")).select(
        F.col("id").alias("doc_id"), "split", "labels", "text")
    if a.sample > 1:  # a deterministic sample mixing every newsgroup
        docs = docs.where(F.crc32(F.col("doc_id")) % a.sample == 0)
    docs = docs.cache()  # read the compressed file once
    train, test = docs.where(F.col("split") == "train"), docs.where(F.col("split") == "test")

    # 2. the Pipeline
    clf = HierarchicalClassifier(taxonomy=str(corpus / "taxonomy.tsv"), featuresCol="tfidf", model="global",
                                 epochs=2, shards=2)
    pipeline = Pipeline(stages=[
        RegexTokenizer(inputCol="text", outputCol="tokens", pattern="[^a-z]+", minTokenLength=2),
        StopWordsRemover(inputCol="tokens", outputCol="words"),
        CountVectorizer(inputCol="words", outputCol="tf", minDF=2.0),
        IDF(inputCol="tf", outputCol="tfidf"),
        clf,
    ])

    # 3. tuning on the training split (the test split is not given to the CrossValidator)
    grid = ParamGridBuilder().addGrid(clf.C, [0.1, 1.0]).addGrid(clf.epochs, [1, 2]).build()
    cv = CrossValidator(estimator=pipeline, estimatorParamMaps=grid, evaluator=HierarchicalEvaluator(metricName="hF"),
                        numFolds=a.folds, seed=0)
    tuned = cv.fit(train)
    best = max(range(len(grid)), key=lambda i: tuned.avgMetrics[i])
    chosen = {p.name: v for p, v in grid[best].items()}
    print("validation hF per candidate:",
          [({p.name: v for p, v in m.items()}, round(s, 4)) for m, s in zip(grid, tuned.avgMetrics, strict=True)])
    print("chosen:", chosen)

    # 4. the chosen Pipeline (refitted on the whole training split by CrossValidator), saved
    best_model = tuned.bestModel
    assert isinstance(best_model, PipelineModel)
    best_model.write().overwrite().save(str(out / "pipeline"))

    # 5. batch prediction with the saved Pipeline
    loaded = PipelineModel.load(str(out / "pipeline"))
    predictions = loaded.transform(test)
    predictions.select("doc_id", "labels", "prediction").write.mode("overwrite").parquet(str(out / "predictions"))
    evaluator = HierarchicalEvaluator()
    result = {name: evaluator.setMetricName(name).evaluate(predictions) for name in ("hF", "microF1", "macroF1")}
    summary = {"chosen": chosen, "test": result, "train_documents": train.count(), "test_documents": test.count()}
    (out / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    print(json.dumps(summary, indent=2, sort_keys=True))
    return result


if __name__ == "__main__":
    main()
