"""The findings of the Cesa-Bianchi runner: the paired t-test by hand, verdicts on made-up folds."""

from __future__ import annotations

import math

import numpy as np
import pytest

from experiments.cesa_bianchi import LOSSES, ROWS, _summary, compute_findings, paired_t_test


def test_paired_t_test_by_hand() -> None:
    # differences 1, 2, 3: mean 2, sd 1, s.e. 1/sqrt(3), t = 2 sqrt(3) with 2 degrees of freedom;
    # Student's t with 2 df has P(T > t) = (1 - t / sqrt(t^2 + 2)) / 2, so p = 1 - t / sqrt(14)
    mean, se, p = paired_t_test(np.array([3.0, 5.0, 7.0]), np.array([2.0, 3.0, 4.0]))
    assert mean == pytest.approx(2.0)
    assert se == pytest.approx(1 / math.sqrt(3))
    assert p == pytest.approx(1 - 2 * math.sqrt(3) / math.sqrt(14), rel=1e-10)
    assert paired_t_test(np.ones(4), np.ones(4)) == (0.0, 0.0, 1.0)
    assert paired_t_test(np.full(4, 2.0), np.ones(4))[2] == 0.0
    with pytest.raises(ValueError):
        paired_t_test(np.ones(1), np.zeros(1))


def _fold(values: dict[str, float]) -> dict:
    extra = {"PERC (rule 4)": 9.0, "SVM (rule 4)": 9.0, "H-PERC (node rule)": 9.0}
    rows = {}
    for r, v in {**values, **extra}.items():
        rows[r] = {k: v for k, _ in LOSSES} | {f"{k}_std_docs": 0.0 for k, _ in LOSSES}
        rows[r] |= {"fit_seconds": 1.0, "pred_nodes": 1.0}
    return {"rows": rows, "test_docs": 10}


def test_verdicts_on_made_up_folds() -> None:
    # five folds; every loss equal to the row's value plus a fold offset. H-SVM best everywhere,
    # H-RLS 2 % above H-SVM (close), below SVM; AH-BAY above H-RLS but below PERC and H-PERC.
    base = {"H-SVM": 0.50, "H-RLS": 0.51, "SVM": 0.60, "AH-BAY": 0.55, "PERC": 0.70, "H-PERC": 0.71}
    rng = np.random.default_rng(0)
    splits = []
    for _ in range(5):
        noise = {r: float(rng.normal(0, 0.001)) for r in base}
        splits.append(_fold({r: v + 0.01 * len(splits) + noise[r] for r, v in base.items()}))
    f = compute_findings(splits, _summary(splits))
    assert f["test"] == "paired t-test over the 5 folds (two-sided)"
    verdicts = {row["finding"]: row["verdict"] for row in f["rows"]}
    assert set(verdicts.values()) == {"reproduced"}
    best = f["rows"][0]
    assert best["losses"]["zero_one"]["b_row"] == "H-RLS"  # tested against the next best
    assert best["losses"]["zero_one"]["p"] < 0.01

    # now H-RLS is far worse than SVM on every loss: "not worse" and "close" fail
    worse = [_fold({**{r: s["rows"][r]["zero_one"] for r in ROWS}, "H-RLS": 0.70 + 0.001 * i})
             for i, s in enumerate(splits)]
    verdicts = {row["finding"]: row["verdict"] for row in compute_findings(worse, _summary(worse))["rows"]}
    assert verdicts["H-RLS (one epoch) is not worse than SVM"] == "not reproduced"
    assert verdicts["H-RLS comes close to H-SVM"] == "not reproduced"
    assert verdicts["AH-BAY is worse than H-RLS"] == "not reproduced"
    assert verdicts["H-SVM is the best model"] == "reproduced"
