"""sparkhc: hierarchical multi-label text classification on Apache Spark.

``sparkhc.__version__`` is the installed distribution's version (read on first use, so importing
the package stays cheap in the Spark workers).
"""

from __future__ import annotations


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("sparkhc")
    except PackageNotFoundError:  # imported from a source tree or a --py-files zip without metadata
        return "0+unknown"


def __getattr__(name: str) -> str:
    if name == "__version__":
        return _version()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
