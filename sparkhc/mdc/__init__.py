"""Multi-dimensional classification: M3MDC (Jia & Zhang, AAAI 2020), the BR baseline, MDC data.

Core modules import numpy/scipy only; ``sparkhc.mdc.spark_solve`` (the Spark parallel solve of the
pairwise sub-problems) is the one module here that imports pyspark, and is not imported by this
package.
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
