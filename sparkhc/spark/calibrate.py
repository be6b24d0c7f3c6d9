"""Cross-fitted per-edge offsets on Spark (``train.calibrate``; the method: :mod:`sparkhc.calibration`).

The scored folds come from one of two places:

- ``train.calibrate = "auto"`` (the default) with an epoch selection: the selection's validation
  bands (:func:`sparkhc.spark.mixing.selection.validation_split`), each band's model retrained to
  the chosen epoch; fewer than three bands are cut into hash parts. When the offsets pay on those
  bands (the nested one-standard-error rule of :func:`sparkhc.calibration.cross_fit`), more bands of
  the same split are scored until they hold ``train.calibration_documents`` documents, and the
  offsets are fitted again on all of them.
- ``"on"`` with a fixed number of epochs: ``train.calibration_folds`` seeded inner folds cut by a
  hash of the id (:func:`fold_column`), one training on the other folds each.

Every fold's model is a fresh copy (same class, taxonomy and parameters) trained by
:func:`sparkhc.spark.mixing.train.train_ipm` (same epochs, shards, seed and mixing as the real
training) and scores the fold's documents on the driver (one fold's rows are collected).
:func:`sparkhc.calibration.cross_fit` turns the out-of-fold scores into offsets;
:func:`sparkhc.spark.training.fit_model` adds them to the model trained on every document. Only the
DataFrame given (the training documents) is read; with the rows read in the driver (small inputs,
``train.execution``) the folds train in this process.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from sparkhc import calibration
from sparkhc.batch import DOC_ID, SparseBatch
from sparkhc.decoding import tree_index
from sparkhc.epochs import bands_holding
from sparkhc.errors import ModelError
from sparkhc.models.base import HierModel, ModelState
from sparkhc.spark.hashing import spark_hash, spark_hash_int, validation_ids
from sparkhc.spark.mixing.settings import MixingSettings
from sparkhc.spark.plan import sorted_by_id
from sparkhc.spark.session import SessionLike, usable_cpus

log = logging.getLogger(__name__)


def fold_column(k: int, seed: int) -> F.Column:
    """The inner fold (0..k-1) of a document: ``pmod(hash(doc_id, seed + 29), k)``, the same on
    every run (another salt than the validation slice of ``select_epochs``)."""
    return F.expr(f"pmod(hash({DOC_ID}, {int(seed) + 29}), {int(k)})")


def fold_ids(doc_ids: Any, k: int, seed: int) -> np.ndarray:
    """:func:`fold_column` computed in the driver: ``pmod(hash(doc_id, seed + 29), k)`` per id."""
    return np.mod(spark_hash_int(int(seed) + 29, spark_hash(doc_ids)).astype(np.int64), int(k))


def supports(model: HierModel) -> bool:
    """Whether ``model`` can carry per-edge offsets (the global model with a bias feature)."""
    return model.supports_edge_offsets()


def not_applicable(model: HierModel, strategy: str, warm_start: bool) -> str:
    """Why per-edge offsets cannot be fitted for this training ("" when they can): ``train.calibrate
    = "auto"`` (the default) skips such a training and records the reason, ``"on"`` raises it."""
    if warm_start:
        return "train.calibrate fits offsets for a training from scratch; not with --warm-start"
    if strategy != "mixing":
        return (f"train.calibrate applies to models trained by parameter mixing (the global model), "
                f"not to {model.name!r} (trained by {strategy!r})")
    if not supports(model):
        return (f"per-edge offsets need the global model with a bias feature (model.global.bias > 0); "
                f"the model is {model.name!r} with bias {model.params.get('bias')!r}")
    return ""


#: the fewest calibration folds :func:`sparkhc.calibration.cross_fit` is given (validation bands
#: of the epoch selection are cut into parts by :func:`fold_ids` when there are fewer)
LEAST_FOLDS = 3


def cross_fit_offsets(
    spark: SessionLike,
    features: DataFrame | None,
    model: HierModel,
    settings: MixingSettings,
    *,
    mode: str = "auto",
    folds: int = 4,
    rows: SparseBatch | None = None,
    bands: tuple[int, float] | None = None,
    documents: int = 0,
    band_states: Sequence[ModelState] = (),
) -> calibration.Calibration:
    """The offsets of :func:`sparkhc.calibration.cross_fit` for ``model`` (not trained or changed
    here) from out-of-fold scores of ``features`` (the training documents), each fold's model
    trained with ``settings`` (the real training's mixing; ``settings.epochs`` the number of epochs).

    The scored folds are either ``folds`` inner folds cut by :func:`fold_ids` (one training each),
    or, with ``bands = (k, fraction)``, the ``k`` validation bands the epoch selection held out
    (:func:`sparkhc.spark.hashing.validation_ids`, :func:`sparkhc.spark.mixing.selection.validation_split`: the
    same documents and the same trainings, ``settings.epochs`` being the chosen count, so each band's model
    is the selection's at that epoch). Fewer than :data:`LEAST_FOLDS` bands are cut into parts by
    :func:`fold_ids` (each part still scored out of sample). With ``rows`` (the same documents read
    in the driver) the trainings run in this process (:func:`sparkhc.spark.mixing.driver.train_on_driver`,
    bit-identical to the Spark path), and ``features`` is not used.

    ``documents`` (``train.calibration_documents``; with ``bands``): when the offsets fitted on the
    selection's bands are applied (they pay on this data), more bands of the same split are scored,
    one training each, until they hold ``documents`` documents (at most every band: full
    cross-validation, as SCut fits its thresholds), and the offsets are fitted again, with the same
    nested rule, on all of them: the per-edge line searches of rare labels then see more of their
    documents. Where nothing is applied on the selection's bands nothing more is trained.

    ``band_states`` (with ``bands``): the states of the first bands' models at the chosen epoch kept
    by the selection (``select_epochs(band_states=...)``); those bands are scored with them, not
    trained again (the same models, bit for bit)."""
    from sparkhc.models import get_model_class
    from sparkhc.spark.mixing.selection import validation_split
    from sparkhc.spark.mixing.train import train_ipm

    if not supports(model):
        raise ModelError(
            f"train.calibrate = {mode!r}: per-edge offsets need the global model with a bias feature "
            f"(model.global.bias > 0); the model is {model.name!r} with bias {model.params.get('bias')!r}")
    if bands is None and int(folds) < 3:
        raise ModelError(f"train.calibration_folds must be >= 3, not {folds}")
    tax = model.taxonomy
    seed, with_counts = int(settings.seed), settings.with_counts
    n = int(folds) if bands is None else int(bands[0])
    # the driver path builds no Spark column: no session need be running
    fold = fold_column(n, seed) if rows is None and bands is None else None
    of = fold_ids(rows.doc_ids, n, seed) if rows is not None and bands is None else None
    scores: list[calibration.FoldScores] = []
    ids: list[np.ndarray] = []

    def score(f: int, of_n: int) -> None:
        """Train without fold/band ``f`` and score it (an empty band beyond the selection's is skipped)."""
        fit_rows: SparseBatch | None = None
        fit_df: DataFrame | None = None
        if rows is not None:
            held = (validation_ids(rows.doc_ids, bands[1], seed, f) if bands is not None
                    else np.asarray(of) == f)
            val = sorted_by_id(rows.subset(np.flatnonzero(held)))
            fit_rows = rows.subset(np.flatnonzero(~held))
        else:
            assert features is not None
            if bands is not None:
                fit_df, val_df = validation_split(features, bands[1], seed, f)
            else:
                assert fold is not None
                fit_df, val_df = features.where(fold != f), features.where(fold == f)
            val = SparseBatch.from_arrow(val_df.sort(DOC_ID).toArrow(), model.n_features, with_counts=with_counts,
                                         source=f"calibration fold {f}")
        if len(val) == 0 and f >= n:
            return  # a band of a tiny training part that no document hashed into: nothing to score
        if len(val) == 0:
            raise ModelError(f"train.calibrate: inner fold {f} of {n} holds no training document; "
                             "use fewer train.calibration_folds")
        fresh = get_model_class(model.name)(tax, model.n_features, **model.params)
        if bands is not None and f < len(band_states):
            fresh.set_state(band_states[f])  # the selection's own model at the chosen epoch
        else:
            train_ipm(spark, fit_df, fresh, settings, rows=fit_rows)
        scores.append(calibration.fold_scores(fresh, val))
        ids.append(val.doc_ids)
        log.debug("calibrate: %s %d/%d scored (%d documents)", "inner fold" if bands is None else "validation band",
                 f + 1, of_n, len(val))

    def fit() -> calibration.Calibration:
        folds = scores
        if len(folds) < LEAST_FOLDS:
            m = -(-LEAST_FOLDS // len(folds))
            folds = calibration.split_folds(folds, [fold_ids(i, m, seed) for i in ids])
        R = int(model.params.get("R", 3))
        out = calibration.cross_fit(tree_index(tax), folds, calibration.scored_columns(tax), R, mode=mode,
                                    threads=usable_cpus())  # fitted in the driver while no training runs
        out.source = "calibration folds" if bands is None else "validation bands"
        out.bands = len(scores) if bands is not None else 0
        out.suggestions = suggestion_record(tax, folds, out, R)
        return out

    for f in range(n):
        score(f, n)
    result = fit()
    held = sum(len(i) for i in ids)
    more = 0 if bands is None or not (result.applied or mode == "on") else more_bands(
        n, held, int(documents), bands[1])
    fits = int(calibration.MAX_SCORES // max(1, tax.n_edges) // max(1.0, held / n))  # bands within the score budget
    more = max(0, min(more, fits - n))
    if more:
        log.info("calibrate: offsets pay on %d validation band(s); %d more band(s) scored to fit them on %d "
                 "documents or more (train.calibration_documents)", n, more, int(documents))
        for f in range(n, n + more):
            score(f, n + more)
        result = fit()
    log.info("%s", calibration_sentence(result))
    log.debug("calibrate: %s", result.summary())
    return result


def suggestion_record(tax: Any, folds: Sequence[calibration.FoldScores], result: calibration.Calibration,
                      R: int) -> dict[str, Any]:
    """The suggestions' calibration (:func:`sparkhc.suggestions.fit_on_folds`) on the folds the offsets
    were fitted on, each decoded with the offsets fitted without it (:attr:`Calibration.fold_offsets`,
    fold ``i`` in group ``i mod g`` as :func:`sparkhc.calibration.cross_fit` deals them) when offsets are
    applied; a record of why not when the taxonomy is too large for suggestions."""
    from sparkhc import suggestions

    n_docs = sum(len(f.S) for f in folds)
    why = suggestions.too_large(tax.n_edges)
    if not why and n_docs * float(tax.n_edges) ** 2 > calibration.MAX_EDGE_FIT_CELLS:
        why = (f"{n_docs:,} validation documents x {tax.n_edges:,}^2 edges exceed "
               f"sparkhc.calibration.MAX_EDGE_FIT_CELLS = {calibration.MAX_EDGE_FIT_CELLS:.2g} DP cells")
    if why:
        return {"skipped": why}
    g = result.fold_offsets.shape[0]
    offsets = [result.fold_offsets[i % g] if result.applied else np.zeros(tax.n_edges) for i in range(len(folds))]
    return suggestions.fit_on_folds(tax, folds, offsets, R).to_dict()


def calibration_sentence(result: Any) -> str:
    """The calibration decision in one sentence (the record itself: ``Calibration.summary``)."""
    v = result.validation
    if not {"macro_off", "macro_on", "micro_off", "micro_on", "gain"} <= set(v):
        return f"calibration: {'offsets applied' if result.applied else 'no offsets applied'}"
    n, se = int(v.get("documents", 0)), float(v.get("fold_gain_se", 0.0))
    scores = (f"macro-F1 {v['macro_off']:.3f} -> {v['macro_on']:.3f}, micro-F1 {v['micro_off']:.3f} -> "
              f"{v['micro_on']:.3f} on {n} validation documents (gain {v['gain']:+.4f}, standard error {se:.4f})")
    if result.applied:
        return f"calibration: {result.kind or 'score'} offsets applied: {scores}"
    return f"calibration: no offsets applied: the best would change {scores}: no gain beyond the noise"


def more_bands(n: int, held: int, documents: int, fraction: float) -> int:
    """How many validation bands to score after the first ``n`` (holding ``held`` documents) so
    that the bands hold ``documents`` documents in all, at most every band of ``fraction`` (0 when
    ``documents`` is 0 or already held): :func:`sparkhc.epochs.bands_holding`, the rule of the
    selection's own inner folds, with the bands' measured size."""
    if documents <= 0 or held >= documents or n <= 0:
        return 0
    return max(0, bands_holding(documents, held / n, fraction) - n)
