"""The words behind a label (``predict --explain N``, issue 56).

A linear model's score of a node is a sum over the document's features: ``s_c = sum_f x_f W[f, c]``
plus the bias feature's term (:meth:`sparkhc.models.base.HierModel.feature_contributions`). The
explanation of a predicted label lists the ``N`` features with the largest contributions
``x_f W[f, c]`` (descending; ties: the lower feature index first), named by the featurize vocabulary
when the model has one (``#index`` otherwise), and the bias term apart. The contributions of every
feature plus the bias sum to the score the decoder used for that label's edge.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["Explanation", "explain", "feature_name"]


@dataclass(frozen=True)
class Explanation:
    """The ``features`` (names) with the largest ``contributions`` to one label's score, and the
    ``bias`` term (0 without a bias feature); ``score`` is the sum of every contribution and the bias."""

    features: list[str]
    contributions: list[float]
    bias: float
    score: float


def feature_name(index: int, vocabulary: Sequence[str] | None) -> str:
    """A feature's vocabulary term, or ``#index`` (hashed features, or no vocabulary)."""
    if vocabulary is not None and 0 <= index < len(vocabulary):
        return vocabulary[index]
    return f"#{index}"


def explain(features: np.ndarray, contributions: np.ndarray, n: int, n_features: int,
            vocabulary: Sequence[str] | None = None) -> Explanation:
    """The :class:`Explanation` of one label from its contributions (``features[j]`` contributes
    ``contributions[j]``; index ``n_features`` is the bias feature)."""
    f = np.asarray(features, dtype=np.int64)
    c = np.asarray(contributions, dtype=np.float64)
    is_bias = f == n_features
    bias = float(c[is_bias].sum())
    f, c = f[~is_bias], c[~is_bias]
    order = np.lexsort((f, -c))[: max(0, int(n))]
    return Explanation([feature_name(int(f[j]), vocabulary) for j in order], [float(c[j]) for j in order], bias,
                       float(c.sum()) + bias)
