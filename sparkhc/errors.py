"""Exceptions raised by sparkhc.

Every error that a user can cause (bad input, bad configuration, mismatched model) is a
:class:`SparkhcError`; the CLI turns it into a one-line message and exit status 2.
"""

from __future__ import annotations


class SparkhcError(Exception):
    """Base class of errors caused by the user's input or configuration."""


class TaxonomyError(SparkhcError):
    """The taxonomy file is malformed: cycle, two parents, unknown node, empty."""


class InputDataError(SparkhcError):
    """A corpus record or file is malformed (the message names file and record)."""


class SchemaError(SparkhcError):
    """A Parquet or table input does not have the documented schema."""


class ConfigError(SparkhcError):
    """A configuration key is unknown or has a wrong type or value."""


class ParamError(ConfigError, ValueError):
    """A ``pyspark.ml`` Param (or a model parameter given through one) has an invalid value.

    Also a :class:`ValueError`, as MLlib raises for a bad Param value, so code written for MLlib
    stages catches it; a :class:`ConfigError` for the CLI's one-line exit 2."""


class LocationError(SparkhcError, ValueError):
    """A path or URI that no file system here can open (a scheme without its connector, a
    malformed URI); also a :class:`ValueError`, as before it had a class of its own."""


class ModelError(SparkhcError):
    """A saved model is missing, truncated, of a newer format, or does not match the data."""


class NotFittedError(SparkhcError):
    """A model was used before it was fitted."""


class DataUnavailableError(SparkhcError):
    """A corpus is not on disk and cannot be downloaded (the message says what to put where)."""


class Terminated(BaseException):
    """A termination signal (SIGTERM) arrived: the run stops where it is. A ``BaseException``, as
    :class:`KeyboardInterrupt`, so no ``except Exception`` swallows it; ``summary`` is set by a
    run that wrote what it had done before it re-raises."""

    def __init__(self, signum: int, name: str = "SIGTERM") -> None:
        super().__init__(f"{name} received")
        self.signum = signum
        self.name = name
        self.summary: dict[str, object] | None = None
