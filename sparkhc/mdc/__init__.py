"""Multi-dimensional classification: M3MDC (Jia & Zhang, AAAI 2020), the BR baseline, MDC data.

Core modules, numpy/scipy only: ``m3mdc`` (the solvers), ``data`` (the MDC JSON Lines data sets),
``spaces`` (class spaces declared from label fields of text documents, and the MDC taxonomy),
``experiment`` (the paper's Table 3). The Spark parallel solve of the pairwise sub-problems and the
``sparkhc train`` driver are in :mod:`sparkhc.spark.mdc`; the registered models ``m3mdc`` and
``mdc_br`` in :mod:`sparkhc.models.mdc`.
"""

from sparkhc.mdc.data import FeatureScaler, MDCDataset, encode_targets, load_mdc, resolve_mdc_dir
from sparkhc.mdc.m3mdc import M3MDC, BinaryRelevanceSVM, SerialPairSolver, mdc_metrics, update_c

__all__ = [
    "M3MDC",
    "BinaryRelevanceSVM",
    "FeatureScaler",
    "MDCDataset",
    "SerialPairSolver",
    "encode_targets",
    "load_mdc",
    "mdc_metrics",
    "resolve_mdc_dir",
    "update_c",
]
