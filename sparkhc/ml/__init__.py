"""sparkhc as a ``pyspark.ml`` library (the Spark layer, like :mod:`sparkhc.spark`).

- :class:`HierarchicalClassifier` / :class:`HierarchicalClassificationModel`: every registered
  model as an Estimator / Model, trained by the code of ``sparkhc train``; saved models are
  sparkhc model folders.
- :class:`HierarchicalEvaluator`: the metrics of ``sparkhc evaluate`` for ``CrossValidator``.
- :func:`read_features` / :func:`write_features`: between DataFrames and features folders.

See ``docs/api.md`` for every Param.
"""

from sparkhc.ml.classifier import HierarchicalClassificationModel, HierarchicalClassifier
from sparkhc.ml.evaluator import HierarchicalEvaluator
from sparkhc.ml.io import read_features, write_features

__all__ = [
    "HierarchicalClassificationModel",
    "HierarchicalClassifier",
    "HierarchicalEvaluator",
    "read_features",
    "write_features",
]
