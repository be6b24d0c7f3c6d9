"""Paired significance tests for the paper comparisons (no test labels in any selection: they
compare two systems' scores on the same evaluated documents or folds).

* :func:`sign_test`: the two-sided exact sign test over paired per-item scores (ties dropped).
* :func:`approximate_randomization`: the paired approximate randomization test (Noreen 1989) of a
  statistic computed from summed per-document counts (micro-averaged F, e.g. hF): each document's
  two outputs are swapped between the systems at random; exact (every assignment enumerated) when
  ``2 ** n_docs <= shuffles``.
* :func:`paired_t_over_folds`: the two-sided paired t-test over cross-validation folds.

:func:`per_document_counts` turns ancestor-closed gold / predicted label matrices into the
per-document quantities these tests need; the runner checks that their means agree with
:class:`sparkhc.metrics.MetricCounts` (so the per-document values and the reported metrics are
the same numbers).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse as sp


def per_document_counts(gold: Any, pred: Any, scored: np.ndarray, real: np.ndarray) -> np.ndarray:
    """``(n_docs, 4)`` float array: example-based F over the ``scored`` labels (Murawaki 2013,
    EBF; 1 when both sets are empty) and the hierarchical TP, FP, FN over the ``real`` nodes
    (their sums give hP / hR / hF). ``gold`` and ``pred`` are binary (n_docs, n_nodes) matrices of
    ancestor-closed sets."""
    G = sp.csr_matrix(gold, dtype=np.float64)
    P = sp.csr_matrix(pred, dtype=np.float64)
    inter = G.multiply(P).tocsc()
    G, P = G.tocsc(), P.tocsc()

    def rowsum(M: sp.csc_matrix, mask: np.ndarray) -> np.ndarray:
        return np.asarray(M[:, np.flatnonzero(mask)].sum(axis=1)).ravel()

    i, p, g = rowsum(inter, scored), rowsum(P, scored), rowsum(G, scored)
    den = p + g
    ebf = np.where(den > 0, 2 * i / np.where(den > 0, den, 1), 1.0)
    tp, npred, ngold = rowsum(inter, real), rowsum(P, real), rowsum(G, real)
    return np.stack([ebf, tp, npred - tp, ngold - tp], axis=1)


def micro_f(counts: np.ndarray) -> np.ndarray:
    """Micro F from summed (..., 3) TP, FP, FN counts: 2TP / (2TP + FP + FN), 0 when empty."""
    c = np.asarray(counts, dtype=np.float64)
    tp, fp, fn = c[..., 0], c[..., 1], c[..., 2]
    den = 2 * tp + fp + fn
    return np.where(den > 0, 2 * tp / np.where(den > 0, den, 1), 0.0)


def sign_test(a: np.ndarray, b: np.ndarray) -> dict[str, Any]:
    """Two-sided exact sign test of paired scores ``a`` vs ``b`` (ties dropped): under the null a
    win of ``a`` is as likely as a loss, so the wins are Binomial(wins + losses, 1/2)."""
    from scipy.stats import binomtest

    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"sign test: paired arrays of different shapes {a.shape} and {b.shape}")
    wins, losses = int(np.sum(a > b)), int(np.sum(a < b))
    n = wins + losses
    p = float(binomtest(wins, n, 0.5, alternative="two-sided").pvalue) if n else 1.0
    return {"test": "sign test (two-sided, exact, ties dropped)", "wins": wins, "losses": losses,
            "ties": int(a.size - n), "p": p}


def approximate_randomization(
    a: np.ndarray,
    b: np.ndarray,
    stat: Callable[[np.ndarray], np.ndarray] = micro_f,
    shuffles: int = 9999,
    seed: int = 0,
    chunk: int = 256,
) -> dict[str, Any]:
    """Paired approximate randomization test of ``stat(sum of a's rows) - stat(sum of b's rows)``.

    ``a`` and ``b``: (n_docs, k) per-document counts of the two systems on the same documents;
    ``stat`` maps summed counts (..., k) to the statistic. Each shuffle swaps every document's
    pair with probability 1/2; ``p = (1 + #{|d| >= |d_obs|}) / (shuffles + 1)``. When
    ``2 ** n_docs <= shuffles`` every assignment is enumerated and ``p`` is the exact permutation
    p-value ``#{|d| >= |d_obs|} / 2 ** n_docs``.
    """
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 2:
        raise ValueError(f"randomization test: paired (n_docs, k) arrays expected, got {a.shape} and {b.shape}")
    n = a.shape[0]
    sa, sb = a.sum(axis=0), b.sum(axis=0)
    d_obs = float(stat(sa) - stat(sb))
    delta = b - a  # swapping document i moves delta[i] from b's sum into a's (and back)
    tol = 1e-12 * max(1.0, abs(d_obs))
    exact = n < 63 and 2 ** n <= shuffles
    total = 2 ** n if exact else shuffles
    rng = np.random.default_rng(seed)
    hits = 0
    for start in range(0, total, chunk):
        m = min(chunk, total - start)
        if exact:
            codes = np.arange(start, start + m, dtype=np.int64)
            swap = ((codes[:, None] >> np.arange(n, dtype=np.int64)[None, :]) & 1).astype(np.float64)
        else:
            swap = rng.integers(0, 2, size=(m, n)).astype(np.float64)
        moved = swap @ delta
        d = stat(sa + moved) - stat(sb - moved)
        hits += int(np.sum(np.abs(d) >= abs(d_obs) - tol))
    p = hits / total if exact else (1 + hits) / (shuffles + 1)
    return {"test": "approximate randomization (paired, two-sided)" + (", exact" if exact else f", {shuffles} shuffles"),
            "difference": d_obs, "p": float(p)}


def paired_t_over_folds(a: list[float] | np.ndarray, b: list[float] | np.ndarray) -> dict[str, Any]:
    """Two-sided paired t-test of per-fold scores (``nan`` with fewer than two folds or when every
    fold has the same difference)."""
    from scipy.stats import ttest_rel

    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.size < 2:
        return {"test": "paired t-test over folds", "folds": int(a.size), "t": math.nan, "p": math.nan}
    d = a - b
    if np.allclose(d, d[0]):
        return {"test": "paired t-test over folds", "folds": int(a.size), "t": math.nan, "p": math.nan}
    res = ttest_rel(a, b)
    return {"test": "paired t-test over folds", "folds": int(a.size), "t": float(res.statistic),
            "p": float(res.pvalue)}


# ------------------------------------------------------------------------------ the verdict rule
#: significance level of every findings table's verdicts
ALPHA = 0.05
#: the verdicts of a tested claim (:func:`verdict`)
REPRODUCED, TIE, CONTRADICTED = "reproduced", "tie", "contradicted"
#: the verdicts of a claim no test applies to (a model size, a figure's shape: :func:`untested`)
HOLDS, HOLDS_IN_PART, DOES_NOT_HOLD = "holds (untested)", "holds in part (untested)", "does not hold (untested)"


#: the rule as every findings table states it
VERDICT_RULE = (
    "Verdicts, one rule on every results page (`experiments.significance.verdict`): a claim a paired test "
    "applies to is **reproduced** when our difference goes the paper's way with p < 0.05, a **tie** when "
    "p >= 0.05 whatever its sign, **contradicted** when it goes the other way with p < 0.05 (a claim of "
    "parity: reproduced when p >= 0.05); a claim of several parts combines them (mixed when they differ). "
    "A claim no test applies to (a model size, a count of measures, a figure's shape) holds, holds in "
    "part or does not hold, marked *untested*."
)


def verdict(paper_sign: float, ours: float, p_two_sided: float | None, alpha: float = ALPHA) -> str:
    """The one verdict rule of every results page, for a claim "A better than / level with / worse
    than B" (``paper_sign`` > 0 / == 0 / < 0) given our mean difference ``ours`` (A - B, oriented so
    that positive is better for A) and the two-sided p of a paired test of it:

    * a directional claim: **reproduced** = our difference goes the paper's way with p < alpha;
      **tie** = p >= alpha whatever the sign of our difference (also when no test could be run);
      **contradicted** = the opposite way with p < alpha;
    * a claim of parity (``paper_sign == 0``): **reproduced** when p >= alpha (no significant
      difference), **contradicted** otherwise.
    """
    significant = p_two_sided is not None and math.isfinite(p_two_sided) and p_two_sided < alpha
    if paper_sign == 0:
        return CONTRADICTED if significant else REPRODUCED
    if not significant or ours == 0:
        return TIE
    return REPRODUCED if (ours > 0) == (paper_sign > 0) else CONTRADICTED


def combine(verdicts: list[str]) -> str:
    """One verdict from the verdicts of a claim's parts (several measures or losses), by the written
    rule (:data:`VERDICT_RULE`: "mixed when they differ"): the parts' verdict when they all agree
    (reproduced, tie or contradicted), else "mixed (r reproduced, t tie, c contradicted)"."""
    if not verdicts:
        raise ValueError("combine: a claim needs at least one part")
    r, t, c = (sum(v == k for v in verdicts) for k in (REPRODUCED, TIE, CONTRADICTED))
    if r + t + c != len(verdicts):
        raise ValueError(f"combine: not a tested verdict in {verdicts!r}")
    if len(set(verdicts)) == 1:
        return verdicts[0]
    return f"mixed ({r} reproduced, {t} tie, {c} contradicted)"


def untested(parts_holding: int, parts: int = 1) -> str:
    """The verdict of a descriptive claim no significance test applies to (a size ratio, a count of
    measures, the shape of a figure): whether it holds in all, some or none of its ``parts``; the
    label says it is untested, so it is never read as a reproduction."""
    if parts_holding >= parts:
        return HOLDS
    return HOLDS_IN_PART if parts_holding > 0 else DOES_NOT_HOLD
