"""sparkhc as a ``pyspark.ml`` library (the Spark layer, like :mod:`sparkhc.spark`).

- :class:`HierarchicalClassifier` / :class:`HierarchicalClassificationModel`: every registered
  model as an Estimator / Model, trained by the code of ``sparkhc train``; saved models are
  sparkhc model folders.
- :class:`HierarchicalEvaluator`: the metrics of ``sparkhc evaluate`` for ``CrossValidator``.
- :class:`SparkhcFeaturizer` / :class:`SparkhcFeaturizerModel`: ``sparkhc featurize``'s tokenizer and
  weighting as a Pipeline stage (output: sparkhc's features layout).
- :func:`read_features` / :func:`write_features`: between DataFrames and features folders.
- :class:`CrossValidator`: Spark's, with its metrics as Python floats.

See ``docs/api.md`` for every Param.
"""

from sparkhc.ml.classifier import HierarchicalClassificationModel, HierarchicalClassifier
from sparkhc.ml.evaluator import HierarchicalEvaluator
from sparkhc.ml.featurizer import SparkhcFeaturizer, SparkhcFeaturizerModel
from sparkhc.ml.io import read_features, write_features
from sparkhc.ml.tuning import CrossValidator

__all__ = [
    "CrossValidator",
    "HierarchicalClassificationModel",
    "HierarchicalClassifier",
    "HierarchicalEvaluator",
    "SparkhcFeaturizer",
    "SparkhcFeaturizerModel",
    "read_features",
    "write_features",
]
