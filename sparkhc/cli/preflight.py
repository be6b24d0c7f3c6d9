"""Checks a verb makes in the driver before its SparkSession starts (issue 31).

A misspelled input, a taxonomy with a cycle, a ``--split`` or ``--fold`` the features do not hold,
a URI scheme without its connector: each is found here by reading small files (the taxonomy, a
model's ``metadata.json``, a predictions folder's ``_MODEL.json``, the layout of a features folder
and its split and fold columns), so the user gets the one-line error (exit 2) in a second instead
of after the JVM came up. Each check is the function the pipeline itself calls, so the message is
the pipeline's. No pyspark here.
"""

from __future__ import annotations

import argparse
from typing import Any

from sparkhc import fsio
from sparkhc.errors import InputDataError
from sparkhc.features import (
    Selection,
    check_featurize_sources,
    empty_selection_message,
    features_taxonomy,
    layout_parts,
    selected_count,
    selection_groups,
)


def features(location: str, selection: Selection | None = None, what: str = "document") -> None:
    """The features folder: its layout and taxonomy (URI schemes resolved: a scheme without its
    connector is named here) and, with ``selection``, that the selection matches a document."""
    layout_parts(fsio.Folder(location))
    features_taxonomy(location)
    if selection is None:
        return
    groups = selection_groups(location)
    if selected_count(groups, selection) == 0:
        raise InputDataError(empty_selection_message(location, selection, what, groups))


def model(location: str) -> None:
    """A model directory: present, with a ``metadata.json`` this version reads."""
    from sparkhc.persistence import read_metadata

    read_metadata(location)


def featurize_inputs(args: argparse.Namespace) -> None:
    """``sparkhc featurize``: the corpus name (and its files, fetched if need be), ``--input`` on the
    local file system, the taxonomy file (parsed: cycles, two parents, ...), the class-space file."""
    check_featurize_sources(args.corpus, args.input, args.taxonomy or args.like, args.class_spaces)
    if args.like is not None:
        from sparkhc.persistence import model_feature_spec

        model_feature_spec(args.like)
    if args.corpus is not None:
        from sparkhc.corpus import registry

        registry.find_corpus(args.corpus, data_dir=args.data_dir, cache_dir=args.cache_dir)
        return
    raw_input(args.input)
    if args.taxonomy is not None:
        from sparkhc.taxonomy import Taxonomy

        Taxonomy.load(args.taxonomy)  # (a local path or a file: URI; another scheme is refused)
    if args.class_spaces is not None:
        from sparkhc.class_spaces import ClassSpaces

        ClassSpaces.load(args.class_spaces)


def raw_input(location: str) -> None:
    """Raw documents (``featurize --input``, ``predict --input``) on the local file system: present,
    of a supported format (named when not) and holding at least one record."""
    local = fsio.local_path(location)
    if local is None:
        return
    if not local.exists():
        raise InputDataError(f"{local}: input not found")
    from sparkhc.corpus import formats

    try:
        fmt, files = formats.detect_local(local)
    except InputDataError:
        if local.is_file():  # the formats a user can give (not the corpus-only ones)
            raise formats.unknown_input(local, notes=False) from None
        raise
    if fmt.folder:
        return
    if not any(_has_records(p, fmt.name) for p in files):
        what = f"{local}" if local.is_file() else f"{local}: its {len(files)} {fmt.name} file(s)"
        raise InputDataError(f"{what}: no documents (an empty file); nothing to read")


def _has_records(path: Any, fmt: str) -> bool:
    """Whether a file of raw documents holds a record: more than blank lines (JSON Lines, gzipped or
    not), rows (Parquet); another format: any byte."""
    from pathlib import Path

    p = Path(path)
    if p.stat().st_size == 0:
        return False
    if fmt == "parquet":
        import pyarrow.parquet as pq

        with pq.ParquetFile(p) as f:
            return bool(f.metadata.num_rows)
    if fmt == "jsonl":
        from sparkhc.corpus.records import open_maybe_gzip

        try:
            with open_maybe_gzip(p) as fh:
                return any(line.strip() for line in fh)
        except (OSError, EOFError):  # a corrupt file: the reader names it
            return True
    return True


def selection_of(args: argparse.Namespace) -> dict[str, Any]:
    """``split`` / ``fold`` / ``exclude_fold`` of ``--split`` (``all``: every split) / ``--fold`` /
    ``--exclude-fold``, as the pipelines take them."""
    split = None if args.split in (None, "all") else args.split
    return {"split": split, "fold": args.fold, "exclude_fold": args.exclude_fold}


def selection(args: argparse.Namespace) -> Selection:
    """The selection of ``--split`` / ``--fold`` / ``--exclude-fold``."""
    return Selection(**selection_of(args))


def output(location: str | None) -> None:
    """An output at a URI: its scheme resolved (the driver writes there through ``pyarrow.fs``), so a
    scheme without its connector is named before any work; local outputs are :func:`refuse_existing`'s."""
    if location is not None and fsio.is_uri(location):
        fsio.resolve(location)


def run(args: argparse.Namespace) -> None:
    """The checks of the verb of ``args`` (``args.command``), before its session starts."""
    verb = args.command
    output(getattr(args, "out", None))
    if verb == "featurize":
        featurize_inputs(args)
    elif verb == "train":
        features(args.features, selection(args), "training documents")
        if args.warm_start is not None:
            model(args.warm_start)
    elif verb == "predict":
        model(args.model)
        if args.input is not None:
            from sparkhc.persistence import model_feature_spec

            model_feature_spec(args.model)
            raw_input(args.input)
        else:
            features(args.features, selection(args), "document")
    elif verb == "evaluate":
        from sparkhc.predictions import evaluation_inputs

        evaluation_inputs(args.predictions, args.features)
