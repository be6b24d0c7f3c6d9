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


def model_fits(model_dir: str, features_dir: str) -> None:
    """``predict --features``: the features are of the model's taxonomy and feature spec (a model of
    another corpus is refused here, not after Spark read the data)."""
    from sparkhc.persistence import check_model_fits, read_metadata
    from sparkhc.text.spec import SPEC_FILE, FeatureSpec

    meta = read_metadata(model_dir)
    folder = fsio.Folder(features_dir)
    spec = None
    if meta.get("feature_spec_fingerprint") is not None and folder.is_file(SPEC_FILE):
        spec = FeatureSpec.from_json(folder.read_text(SPEC_FILE), source=folder.where(SPEC_FILE)).fingerprint
    taxonomy = features_taxonomy(features_dir) if "taxonomy_fingerprint" in meta else None
    check_model_fits(fsio.Folder(model_dir).name, meta, taxonomy, spec)


#: the Hadoop file system jar Spark needs for a URI scheme (none of them ships with Spark)
HADOOP_CONNECTORS = {"s3a": "hadoop-aws", "gs": "gcs-connector", "abfs": "hadoop-azure", "abfss": "hadoop-azure",
                     "wasb": "hadoop-azure", "wasbs": "hadoop-azure", "oss": "hadoop-aliyun", "cosn": "hadoop-cos"}
#: seconds the first contact with a URI location may take before the verb refuses it
URI_DEADLINE = 3.0


def _spark_jars_text() -> str:
    """Where a connector jar for a local Spark can be named: the names of pyspark's (or
    ``$SPARK_HOME``'s) jars, ``spark-defaults.conf``, ``$PYSPARK_SUBMIT_ARGS`` and the class paths."""
    import importlib.util
    import os
    from pathlib import Path

    names = []
    homes = [os.environ.get("SPARK_HOME")]
    found = importlib.util.find_spec("pyspark")
    if found is not None and found.origin:
        homes.append(str(Path(found.origin).parent))
    for home in filter(None, homes):
        jars = Path(home) / "jars"
        if jars.is_dir():
            names += [p.name for p in jars.iterdir()]
        conf = Path(os.environ.get("SPARK_CONF_DIR") or Path(home) / "conf") / "spark-defaults.conf"
        if conf.is_file():
            names.append(conf.read_text(encoding="utf-8", errors="replace"))
    names += [os.environ.get(v, "") for v in ("PYSPARK_SUBMIT_ARGS", "SPARK_CLASSPATH", "HADOOP_CLASSPATH",
                                               "CLASSPATH")]
    return "\n".join(names)


def spark_connector(location: str, flag: str, args: argparse.Namespace) -> None:
    """A URI that a local Spark reads or writes needs the scheme's Hadoop connector jar: without it
    Spark fails after its start-up with a Java stack, so it is refused here in one line. Masters other
    than local (the cluster's class path) and spark-submit (the submitted jars) are not checked."""
    import os
    from urllib.parse import urlsplit

    from sparkhc.errors import LocationError

    scheme = urlsplit(location).scheme.lower()
    jar = HADOOP_CONNECTORS.get(scheme)
    master = getattr(args, "master", None) or os.environ.get("SPARKHC_MASTER") or "local[*]"
    if jar is None or not master.startswith("local") or "PYSPARK_GATEWAY_PORT" in os.environ:
        return
    if jar not in _spark_jars_text():
        raise LocationError(f"{flag} {fsio.redact(location)}: Spark has no file system for {scheme}:// here (the "
                            f"{jar} jar and its dependencies: add them with --conf spark.jars.packages=... or to "
                            "Spark's jars); or use a local path or a file: URI; see 'Where data can live' in "
                            "docs/deployment.md")


def reachable(location: str, flag: str) -> None:
    """The first contact with a URI location (``pyarrow.fs``), bounded by :data:`URI_DEADLINE`: a
    scheme without its client or credentials fails (or hangs, as GCS without credentials does) here
    in one line naming what it needs, and Ctrl-C stays effective (the call runs in a daemon thread)."""
    import threading
    from urllib.parse import urlsplit

    from sparkhc.errors import LocationError

    scheme = urlsplit(location).scheme.lower()
    hint = fsio.CONNECTOR_HINTS.get("s3" if scheme == "s3a" else scheme) or (
        f"{scheme}:// needs a pyarrow file system for the scheme and its credentials")
    outcome: list[BaseException | None] = []

    def probe() -> None:
        try:
            fs, path = fsio.resolve(location)
            fs.get_file_info(path)
            outcome.append(None)
        except BaseException as e:  # (handed to the main thread)
            outcome.append(e)

    t = threading.Thread(target=probe, name="sparkhc-uri-probe", daemon=True)
    t.start()
    t.join(URI_DEADLINE)
    if not outcome:
        raise LocationError(f"{flag} {fsio.redact(location)}: no answer within {URI_DEADLINE:.0f} s: {hint}")
    err = outcome[0]
    if isinstance(err, LocationError):
        raise err
    if err is not None:
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise LocationError(f"{flag} {fsio.redact(location)}: {hint} ({first})") from None


#: the location flags of each verb: (attribute, flag, read or written by Spark)
LOCATION_FLAGS = {
    "featurize": (("input", "--input", True), ("out", "--out", True)),
    "train": (("features", "--features", True), ("warm_start", "--warm-start", False), ("out", "--out", True)),
    "predict": (("model", "--model", False), ("features", "--features", True), ("input", "--input", True),
                ("out", "--out", True)),
    "evaluate": (("predictions", "--predictions", True), ("features", "--features", False), ("out", "--out", False)),
}


def locations(args: argparse.Namespace) -> None:
    """Every URI location of the verb: a local Spark's connector (:func:`spark_connector`), then the
    first contact (:func:`reachable`; a Spark-only location such as ``--input`` is not probed)."""
    for attr, flag, by_spark in LOCATION_FLAGS.get(args.command, ()):
        location = getattr(args, attr, None)
        if location is None or not fsio.is_uri(str(location)):
            continue
        if by_spark:
            spark_connector(str(location), flag, args)
        if not (args.command == "featurize" and attr == "input"):
            reachable(str(location), flag)


def featurize_inputs(args: argparse.Namespace) -> None:
    """``sparkhc featurize``: the corpus name (and its files, fetched if need be), ``--input`` on the
    local file system, the taxonomy file (parsed: cycles, a polyhierarchy's positions, ...), the class-space file."""
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
        from sparkhc.config import load_config
        from sparkhc.taxonomy import Taxonomy

        # the verb's configuration (its files were checked before): the labels' language, the positions allowed
        fcfg = load_config([str(fsio.local_path(c) or c) for c in args.config], args.overrides).featurize
        # (a local path or a file: URI; another scheme is refused)
        Taxonomy.load(args.taxonomy, language=fcfg.label_language, max_positions=fcfg.max_positions)
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
    locations(args)
    output(getattr(args, "out", None))
    if verb == "featurize":
        featurize_inputs(args)
    elif verb == "train":
        features(args.features, selection(args), "training documents")
        if args.warm_start is not None:
            model(args.warm_start)
    elif verb == "predict":
        model(args.model)
        if args.top or args.explain:  # a model that cannot give them: refused before any document is read
            from sparkhc.persistence import read_metadata
            from sparkhc.spark.predict import check_extras

            meta = read_metadata(args.model)
            check_extras(str(meta["model"]), meta, args.top, args.explain, fsio.redact(args.model))
        if args.input is not None:
            from sparkhc.persistence import model_feature_spec

            model_feature_spec(args.model)
            raw_input(args.input)
        else:
            features(args.features, selection(args), "document")
            model_fits(args.model, args.features)
    elif verb == "evaluate":
        from sparkhc.predictions import evaluation_inputs

        evaluation_inputs(args.predictions, args.features)
