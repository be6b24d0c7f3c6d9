"""The pipelines behind the CLI verbs and the spark-submit jobs (one implementation each)."""

from __future__ import annotations

import json
import logging
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from sparkhc import fsio
from sparkhc.batch import DOC_ID, FOLD, LABELS, SPLIT, SparseBatch
from sparkhc.config import Config, model_params
from sparkhc.epochs import TimeBudget
from sparkhc.errors import ConfigError, InputDataError, ModelError, SchemaError, SparkhcError
from sparkhc.features import (
    CORPUS_FILE,
    TAXONOMY_FILE,
    Selection,
    check_featurize_sources,
    empty_selection_message,
    features_corpus_info,
    features_taxonomy,
    model_taxonomy,
    scored_mask,
    selected_count,
    selection_groups,
)
from sparkhc.fsio import OutputFs
from sparkhc.model_store import weights_hash
from sparkhc.models import get_model_class
from sparkhc.models.base import HierModel
from sparkhc.persistence import json_text, load_model, read_metadata, save_model
from sparkhc.predictions import (
    PRED_DATA_DIR,
    PRED_META_FILE,
    data_location,
    evaluation_inputs,
    prediction_meta,
)
from sparkhc.spark.mixing.engine import RUN_FIGURES
from sparkhc.spark.session import SessionLike
from sparkhc.spark.training import TrainingResult, fit_model
from sparkhc.taxonomy import Taxonomy

log = logging.getLogger(__name__)



# ---------------------------------------------------------------------- helpers
def select_rows(df: DataFrame, selection: Selection) -> DataFrame:
    """The rows of ``df`` that ``selection`` selects (:class:`sparkhc.features.Selection`)."""
    if selection.split is not None:
        df = df.where(F.col(SPLIT) == selection.split)
    if selection.fold is not None:
        df = df.where(F.col(FOLD) == int(selection.fold))
    if selection.exclude_fold is not None:
        df = df.where(F.col(FOLD).isNull() | (F.col(FOLD) != int(selection.exclude_fold)))
    return df


def label_combinations(df: DataFrame) -> list[list[str]]:
    """The distinct (sorted) label lists of the documents, in sorted order (empty when there are
    no documents)."""
    rows = df.select(F.array_sort(F.col(LABELS)).alias("l")).distinct().collect()
    return [list(t) for t in sorted({tuple(r[0] or ()) for r in rows})]  # a null list is the empty one


def _exists(location: str | Path) -> bool:
    """Whether a file or folder is at ``location`` (a local path or a URI)."""
    local = fsio.local_path(location)
    return local.exists() if local is not None else fsio.Folder(location).is_dir()


def _default_checkpoints(out: str | Path) -> Path:
    """Where a training to ``out`` keeps its epoch checkpoints (local files): next to a local
    ``out``; for a URI in the driver's temp folder, under a name derived from the URI, so that a
    rerun on the same driver resumes."""
    local = fsio.local_path(out)
    if local is not None:
        return local.parent / f".{local.name}.checkpoints"
    import hashlib
    import tempfile

    key = hashlib.sha256(str(out).rstrip("/").encode("utf-8")).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"sparkhc-{key}.checkpoints"


# ---------------------------------------------------------------------- featurize
def featurize(
    spark: SparkSession,
    cfg: Config,
    out: str | Path,
    corpus: str | None = None,
    input_path: str | None = None,
    taxonomy_path: str | None = None,
    data_dir: str | None = None,
    cache_dir: str | None = None,
    unknown_labels: str | None = None,
    overwrite: bool = False,
    fit_exclude_fold: int | None = None,
    class_spaces: str | Path | None = None,
    on_empty: str | None = None,
    on_invalid: str | None = None,
    require_labels: bool | None = None,
    like: str | Path | None = None,
) -> dict[str, Any]:
    """Read a corpus, tokenize and weight it on Spark, write the features folder atomically.

    With ``like`` (a model directory) the documents are weighted with that model's fitted feature
    spec (nothing is fitted: the features are the ones the model decodes) and labelled with its
    taxonomy unless a taxonomy is given (which must then be the model's).

    The vocabulary and idf are fitted on the training split, or, for cross-validated corpora,
    on every fold but ``fit_exclude_fold`` (the test fold of the round).

    With ``class_spaces`` (a class-space file, :mod:`sparkhc.class_spaces`) the labels are one class
    per MDC class space, derived from the records' label fields; the kept classes are fitted on the
    same documents as the vocabulary, the MDC taxonomy replaces the corpus's, every document set
    aside is counted in the read report, and ``corpus.json`` records the fitted class spaces.

    ``unknown_labels``, ``on_empty``, ``on_invalid``, ``require_labels`` (``--input`` only) (None:
    the ``[featurize]`` keys of ``cfg``) are the reader options of
    :func:`sparkhc.corpus.readers.read_jsonl`.
    """
    from sparkhc.spark.featurize import featurize as featurize_df

    t0 = time.perf_counter()
    fcfg = cfg.featurize
    read_opts = _read_options(fcfg, unknown_labels, on_invalid, on_empty)
    spaces = None
    if class_spaces is not None:
        from sparkhc.class_spaces import ClassSpaces

        spaces = ClassSpaces.load(class_spaces)
    params = _weighting_params(fcfg, fit_exclude_fold)
    fitted, like_tax = _like_model(like, spaces, fit_exclude_fold)
    if fitted is not None:
        params = {**fitted.params(), "fit_on": None}
    check_featurize_sources(corpus, input_path, taxonomy_path or (str(like) if like is not None else None), spaces)
    spark_read = _spark_jsonl_source(spark, corpus, input_path, spaces is not None, data_dir, cache_dir)
    if spark_read is not None:
        from sparkhc.spark.progress import stage_progress

        with stage_progress(spark, "featurize: reading the documents") as progress:
            return _featurize_on_executors(spark, cfg, out, spark_read, params, read_opts, taxonomy_path,
                                           require_labels, overwrite, t0, spaces, fit_exclude_fold, fitted=fitted,
                                           like_tax=like_tax, progress=progress)
    if input_path is not None and corpus is None and not (
            fcfg.require_labels if require_labels is None else require_labels):
        read_opts["require_labels"] = False
    table, report, taxonomy, fit_on, corpus_meta = _read_on_driver(
        corpus, input_path, data_dir, cache_dir, read_opts, spaces,
        load_taxonomy(taxonomy_path, fcfg) if corpus is None and taxonomy_path is not None else like_tax)
    if spaces is not None:
        table, taxonomy = _apply_class_spaces(spaces, table, report, fit_on, fit_exclude_fold, corpus_meta)
    assert taxonomy is not None
    _check_like(like_tax, taxonomy)
    report_dict = report.to_dict()
    log.info("read %s", report.summary())
    params["fit_on"] = list(fit_on) if fit_on else None
    raw_df = spark.createDataFrame(table)
    extra_files = _featurize_extra_files(taxonomy, corpus_meta, report_dict)
    summary = featurize_df(
        spark, raw_df, out, fitted if fitted is not None else params, taxonomy=taxonomy, num_partitions=fcfg.partitions,
        overwrite=overwrite, extra_files=extra_files,
    )
    summary["read_report"] = report_dict
    _name_unlabelled(spark, out, summary, int(report_dict.get("no_labels", 0)))
    summary["total_seconds"] = round(time.perf_counter() - t0, 2)
    return summary


def _read_options(fcfg: Any, unknown_labels: str | None, on_invalid: str | None, on_empty: str | None
                  ) -> dict[str, Any]:
    """The reader options: the arguments, else the ``[featurize]`` keys (``on_empty`` unset: the
    corpus's default, an error for ``--input``)."""
    read_opts: dict[str, Any] = {"unknown_labels": unknown_labels or fcfg.unknown_labels,
                                 "on_invalid": on_invalid or fcfg.on_invalid}
    if on_empty or fcfg.on_empty:
        read_opts["on_empty"] = on_empty or fcfg.on_empty
    return read_opts


def _weighting_params(fc: Any, fit_exclude_fold: int | None) -> dict[str, Any]:
    """The feature spec's parameters from the ``[featurize]`` keys."""
    params: dict[str, Any] = {
        "mode": fc.mode, "weighting": fc.weighting, "l2_normalize": fc.l2_normalize,
        "stop_words": fc.stop_words,
        "fit_exclude_folds": [int(fit_exclude_fold)] if fit_exclude_fold is not None else None,
    }
    if fc.mode == "vocab":
        params.update(min_df=fc.min_df, max_df=fc.max_df)
    else:
        params.update(hash_bits=fc.hash_bits)
    if fc.token_pattern:
        params["token_pattern"] = fc.token_pattern
    return params


def _read_on_driver(corpus: str | None, input_path: str | None, data_dir: str | None, cache_dir: str | None,
                    read_opts: dict[str, Any], spaces: Any, taxonomy: Taxonomy | None
                    ) -> tuple[pa.Table, Any, Taxonomy | None, Any, dict[str, Any]]:
    """``(table, report, taxonomy, fit_on, corpus_meta)`` of a registered corpus or of ``--input``
    (``taxonomy``: the given one), read by the driver's readers."""
    from sparkhc.corpus import readers, registry

    derive = spaces.candidate_labels if spaces is not None else None
    if corpus is not None:
        info = registry.get_corpus(corpus)
        root = registry.find_corpus(corpus, data_dir=data_dir, cache_dir=cache_dir)
        taxonomy = info.load_taxonomy(root) if spaces is None else None
        batches, report = info.read(root, taxonomy=taxonomy, labels_from=derive, **read_opts)
        table = readers.to_table(batches)
        scored = info.scored_labels(taxonomy, table) if taxonomy is not None else None
        fit_on: Any = ("train",) if info.splits else None
        return table, report, taxonomy, fit_on, {"corpus": info.name, "protocol": info.protocol, "scored_labels": scored}
    assert input_path is not None
    batches, report = readers.read_any(input_path, taxonomy=taxonomy, labels_from=derive, **read_opts)
    table = readers.to_table(batches)
    fit_on = ("train",) if "train" in set(table.column(SPLIT).to_pylist()) else None
    return table, report, taxonomy, fit_on, {"corpus": str(input_path), "protocol": None, "scored_labels": None}


def _apply_class_spaces(spaces: Any, table: pa.Table, report: Any, fit_on: Any, fit_exclude_fold: int | None,
                        corpus_meta: dict[str, Any]) -> tuple[pa.Table, Taxonomy]:
    """The class spaces fitted on the fitting documents and applied to every record (the records
    set aside counted in ``report``); the MDC taxonomy they declare."""
    import pyarrow.compute as pc

    fit_rows = np.ones(table.num_rows, dtype=bool)
    if fit_on:
        fit_rows &= np.asarray(pc.fill_null(pc.is_in(table.column(SPLIT), value_set=pa.array(list(fit_on))),
                                            False).to_numpy(zero_copy_only=False), dtype=bool)
    if fit_exclude_fold is not None:
        fit_rows &= np.asarray(pc.fill_null(pc.not_equal(table.column(FOLD), int(fit_exclude_fold)),
                                            True).to_numpy(zero_copy_only=False), dtype=bool)
    spaces_fitted = spaces.fit(table.column(LABELS).to_pylist(), fit_rows)
    table = spaces_fitted.apply_table(table, report)
    return table, _declare_class_spaces(spaces_fitted, corpus_meta)


def load_taxonomy(path: str | Path, fcfg: Any) -> Taxonomy:
    """``--taxonomy``: a TSV, RCV1 or SKOS file with the ``[featurize]`` settings of ``fcfg`` (the
    labels' language, the positions a polyhierarchy may have)."""
    return Taxonomy.load(path, language=fcfg.label_language, max_positions=fcfg.max_positions)


def _like_model(like: str | Path | None, spaces: Any, fit_exclude_fold: int | None) -> tuple[Any, Taxonomy | None]:
    """``featurize --like MODEL``: the model's fitted feature spec and its taxonomy (None, None without)."""
    if like is None:
        return None, None
    from sparkhc.persistence import model_feature_spec, read_model_taxonomy

    if spaces is not None or fit_exclude_fold is not None:
        raise ConfigError("--like uses the model's fitted features: it excludes --class-spaces and "
                          "--fit-exclude-fold")
    spec = model_feature_spec(like)
    return spec, read_model_taxonomy(fsio.Folder(like), read_metadata(like)).base()


def _check_like(like_tax: Taxonomy | None, taxonomy: Taxonomy) -> None:
    """The documents' taxonomy must be the ``--like`` model's (else its predictions would be refused)."""
    if like_tax is not None and taxonomy.fingerprint() != like_tax.fingerprint():
        raise ModelError(f"--like: the model was trained on taxonomy {like_tax.fingerprint()} but the "
                         f"documents use taxonomy {taxonomy.fingerprint()} ({taxonomy.source}); featurize with the "
                         "model's taxonomy (leave out --taxonomy)")


#: how many ids of documents without labels featurize and train name
UNLABELLED_SAMPLE = 5


def _name_unlabelled(spark: SparkSession, out: str | Path, summary: dict[str, Any], count: int) -> None:
    """Documents written without labels (``no_labels`` of the read report) are named in a warning
    and in the summary (a sample of ids), with what ``sparkhc train`` does with them."""
    if count <= 0:
        return
    from sparkhc.spark.io import read_features

    df, _ = read_features(spark, str(out))
    ids = [r[0] for r in df.where(F.size(F.coalesce(F.col(LABELS), F.array())) == 0)
           .select(DOC_ID).orderBy(DOC_ID).limit(UNLABELLED_SAMPLE).collect()]
    summary["no_labels_sample"] = ids
    log.warning("featurize: %d document(s) have no labels, e.g. %s; `sparkhc train` skips them (a document to "
                "predict needs none; give labels to train on it)", count, ", ".join(map(repr, ids)))


def _declare_class_spaces(fitted: Any, corpus_meta: dict[str, Any]) -> Taxonomy:
    """The MDC taxonomy of fitted class spaces, recorded in ``corpus_meta`` (and logged)."""
    taxonomy = fitted.taxonomy()
    corpus_meta["class_spaces"] = fitted.to_dict()
    # the classes are scored; the class-space nodes (always right) are not
    corpus_meta["scored_labels"] = [taxonomy.names[int(c)] for c in taxonomy.leaves]
    names = fitted.spec.names
    log.info("class spaces %s fitted on %d documents: %s", names, fitted.n_fit,
             "; ".join(f"{n}: {len(c)} classes" for n, c in zip(names, fitted.classes, strict=True)))
    return taxonomy


def _featurize_extra_files(taxonomy: Taxonomy, corpus_meta: dict[str, Any], report_dict: dict[str, Any]
                           ) -> dict[str, str | bytes]:
    return {
        TAXONOMY_FILE: taxonomy.to_tsv(),
        CORPUS_FILE: json.dumps({**corpus_meta, "read_report": report_dict, "taxonomy_fingerprint":
                                 taxonomy.fingerprint(), **_concepts_meta(taxonomy)},
                                indent=2, sort_keys=True, default=str) + "\n",
    }


def _concepts_meta(taxonomy: Taxonomy) -> dict[str, Any]:
    """``corpus.json``'s record of a vocabulary or polyhierarchy (concepts, positions, deprecated
    concepts skipped, label language), also logged; nothing for a plain tree."""
    info = taxonomy.concept_info()
    if not info:
        return {}
    if "positions" in info:
        log.info("featurize: taxonomy %s: %d concepts at %d positions (the tree of paths the models train on)",
                 taxonomy.source, info["concepts"], info["positions"])
    if info.get("vocabulary"):
        log.info("featurize: vocabulary %s: %d deprecated concept(s) skipped; labels in %r", taxonomy.source,
                 info.get("deprecated_concepts", 0), info.get("label_language"))
    return {"taxonomy_concepts": info}


def _spark_jsonl_source(spark: SparkSession, corpus: str | None, input_path: str | None, class_spaces: bool,
                        data_dir: str | None, cache_dir: str | None) -> tuple[str, Any] | None:
    """What Spark's executors read: ("corpus", (info, root)) for a JSON Lines corpus; for ``--input`` (a
    local path, a ``file:`` or Hadoop URI), chosen as :func:`sparkhc.corpus.readers.read_any` does:
    ("parquet", (files, input, folder or None)) for a Parquet file or a folder with Parquet files (recursively),
    ("input", (files, input)) for JSON Lines files or a folder of them, ("labeldirs", input) for any other
    folder (one sub-folder per label); with ``class_spaces`` JSON Lines only; ("lyrl", (info, root)) for the
    LYRL2004 token files of a corpus. None: the driver-side readers (their error for --class-spaces with
    LYRL2004 token files)."""
    from sparkhc.corpus import registry
    from sparkhc.spark.sources import input_source

    if corpus is not None:
        info = registry.get_corpus(corpus)
        if info.reader != "jsonl":  # LYRL2004 token files (with --class-spaces: the driver's error)
            return None if class_spaces else ("lyrl", (info, registry.find_corpus(corpus, data_dir=data_dir,
                                                                                    cache_dir=cache_dir)))
        return "corpus", (info, registry.find_corpus(corpus, data_dir=data_dir, cache_dir=cache_dir))
    assert input_path is not None
    if class_spaces:  # labels derived from record fields: JSON Lines only, every file of a folder (as read_any)
        return "input", (_class_space_files(spark, str(input_path)), input_path)
    return input_source(spark, str(input_path))


def _class_space_files(spark: SparkSession, input_path: str) -> list[str]:
    """The JSON Lines files of ``--input`` with ``--class-spaces`` (a file, or every file of a folder, each
    a JSON Lines file), as :func:`sparkhc.corpus.readers.read_any` takes them with ``labels_from``."""
    from sparkhc.corpus import readers
    from sparkhc.spark import hfs

    if hfs.has_scheme(input_path):
        uri = hfs.qualify(spark, input_path)
        files = (hfs.list_files(spark, uri) if hfs.is_dir(spark, uri) else [uri]) if hfs.exists(spark, uri) else []
        names = files
    else:
        p = Path(input_path)
        local = [p] if p.is_file() else sorted(q for q in p.iterdir() if q.is_file()) if p.is_dir() else []
        files, names = [str(q) for q in local], [q.name for q in local]
    if not files or not all(str(n).rsplit("/", 1)[-1].endswith(readers.JSONL_SUFFIXES) for n in names):
        raise InputDataError(
            f"{Path(input_path) if not hfs.has_scheme(input_path) else input_path}: labels derived from record "
            f"fields (--class-spaces) need JSON Lines input ({', '.join(readers.JSONL_SUFFIXES)} files)"
        )
    return files


def _fit_class_spaces(tc: Any, spaces: Any, fit_on: Any, fit_exclude_fold: int | None, spark: SparkSession
                      ) -> tuple[Any, DataFrame]:
    """``--class-spaces`` on Spark: the kept classes fitted from the candidate labels of the training
    documents (counts aggregated on the executors), every document relabelled there, the ones without a
    kept class in some space withdrawn from ``tc.report`` (by reason, in the order the driver-side
    :meth:`~sparkhc.class_spaces.FittedClassSpaces.apply_table` counts them). Returns the
    fitted spaces and the relabelled documents (persisted)."""
    import functools

    from pyspark import StorageLevel

    from sparkhc.spark.featurize import TOKENIZED_SCHEMA
    from sparkhc.spark.sources import (
        EMIT,
        POS_BLOCK,
        POS_FILE,
        POS_LINE,
        RELABELED_SCHEMA,
        WHY,
        relabel_partition,
    )

    docs = tc._parsed.where(F.col(EMIT))
    cond = F.lit(True)
    if fit_on:
        cond = cond & F.coalesce(F.col(SPLIT).isin(list(fit_on)), F.lit(False))
    if fit_exclude_fold is not None:
        cond = cond & F.coalesce(F.col(FOLD) != int(fit_exclude_fold), F.lit(True))
    n_fit = sum(k for (sp, fo), k in tc.groups.items()
                if (not fit_on or sp in fit_on) and (fit_exclude_fold is None or fo is None or fo != fit_exclude_fold))
    rows = (docs.where(cond).select(F.posexplode(LABELS).alias("j", "label"))
            .groupBy("j", "label").count().collect())
    counts: list[dict[str, int]] = [{} for _ in spaces.names]
    for r in rows:
        j = int(r["j"])
        counts[j][r["label"][len(spaces.names[j]) + 1:]] = int(r["count"])
    fitted = spaces.fit_counts(counts, n_fit)
    bc = spark.sparkContext.broadcast(fitted)
    cols = [f.name for f in TOKENIZED_SCHEMA.fields] + [POS_FILE, POS_BLOCK, POS_LINE]
    relabeled = docs.select(*cols).mapInArrow(functools.partial(relabel_partition, fitted_bc=bc), RELABELED_SCHEMA)
    relabeled = relabeled.persist(StorageLevel.MEMORY_AND_DISK)
    why = (relabeled.where(F.col(WHY).isNotNull()).groupBy(WHY)
           .agg(F.count(F.lit(1)).alias("n"), F.min(F.struct(POS_FILE, POS_BLOCK, POS_LINE)).alias("first")).collect())
    rep = tc.report
    for r in sorted(why, key=lambda r: tuple(r["first"])):
        n = int(r["n"])
        rep.emitted -= n
        rep.excluded += n
        rep.excluded_reasons[r[WHY]] += n
    return fitted, relabeled.where(F.col(WHY).isNull()).select(*[f.name for f in TOKENIZED_SCHEMA.fields])


def _featurize_on_executors(spark: SparkSession, cfg: Config, out: str | Path, source: tuple[str, Any],
                            params: dict[str, Any], read_opts: dict[str, Any], taxonomy_path: str | None,
                            require_labels: bool | None, overwrite: bool, t0: float, spaces: Any = None,
                            fit_exclude_fold: int | None = None, fitted: Any = None,
                            like_tax: Taxonomy | None = None, progress: Any = None) -> dict[str, Any]:
    """featurize with the documents read, checked and tokenized by Spark's executors
    (:mod:`sparkhc.spark.sources`): the driver holds the vocabulary, taxonomy and counts (with ``spaces``,
    the class spaces fitted from counts aggregated on the executors). ``progress``: the
    :class:`~sparkhc.spark.progress.StageProgress` of the block, told when the read is over."""
    from sparkhc.spark.featurize import featurize_tokens
    from sparkhc.spark.sources import (
        JsonlOptions,
        apte_mod_categories,
        read_input_tokens,
        read_jsonl_tokens,
        read_lyrl2004_tokens,
    )
    from sparkhc.text.spec import FeatureSpec

    kind, what = source
    tok_spec = FeatureSpec.from_params({**params, "fit_on": None})
    opts = {"unknown_labels": read_opts["unknown_labels"], "on_invalid": read_opts["on_invalid"]}
    derive = spaces.candidate_labels if spaces is not None else None
    taxonomy: Taxonomy | None
    if kind == "corpus":
        info, root = what
        # a flat taxonomy is made of the labels found in the documents: collected by the read itself
        flat = info.taxonomy_file is None and spaces is None
        taxonomy = None if flat or spaces is not None else info.load_taxonomy(root)
        docs, jopts = info.jsonl_options(root, taxonomy, labels_from=derive,
                                         categories=lambda d: apte_mod_categories(spark, d))
        source_name = jopts.pop("source")
        opts["on_empty"] = read_opts.get("on_empty") or info.on_empty
        tc = read_jsonl_tokens(spark, [str(docs)], tok_spec, JsonlOptions(**jopts, **opts, collect_labels=flat,
                                                                          labels_from=derive), source=source_name)
        if flat:
            taxonomy = info.flat_taxonomy(tc.labels)
        fit_on: Any = ("train",) if info.splits else None
        corpus_meta = {"corpus": info.name, "protocol": info.protocol,
                       "scored_labels": info.scored_labels(taxonomy) if taxonomy is not None else None}
    elif kind == "lyrl":
        info, root = what
        taxonomy = info.load_taxonomy(root)
        token_files, qrels = info.lyrl_files(root)
        opts["on_empty"] = read_opts.get("on_empty") or info.on_empty
        tc = read_lyrl2004_tokens(spark, [str(p) for p in token_files], str(qrels), tok_spec,
                                  JsonlOptions(taxonomy=taxonomy, **opts),
                                  source=f"{info.name} ({info.corpus_dir(root)})")
        fit_on = ("train",) if info.splits else None
        corpus_meta = {"corpus": info.name, "protocol": info.protocol, "scored_labels": info.scored_labels(taxonomy)}
    elif spaces is not None:
        taxonomy = None
        opts["on_empty"] = read_opts.get("on_empty", "error")
        if not (cfg.featurize.require_labels if require_labels is None else require_labels):
            opts["require_labels"] = False
        files, input_path = what
        tc = read_jsonl_tokens(spark, files, tok_spec, JsonlOptions(**opts, labels_from=derive))
        fit_on = ("train",) if "train" in tc.splits else None
        corpus_meta = {"corpus": str(input_path), "protocol": None, "scored_labels": None}
    else:
        taxonomy = load_taxonomy(taxonomy_path, cfg.featurize) if taxonomy_path is not None else like_tax
        assert taxonomy is not None
        opts["on_empty"] = read_opts.get("on_empty", "error")
        if kind != "labeldirs" and not (cfg.featurize.require_labels if require_labels is None else require_labels):
            opts["require_labels"] = False  # (the directories are the labels)
        tc, input_path = read_input_tokens(spark, source, tok_spec, JsonlOptions(taxonomy=taxonomy, **opts))
        fit_on = ("train",) if "train" in tc.splits else None
        corpus_meta = {"corpus": str(input_path), "protocol": None, "scored_labels": None}
    tokens, relabeled = tc.tokens, None
    counts: Any = (tc.groups, tc.no_tokens)
    try:
        if spaces is not None:
            spaces_fitted, relabeled = _fit_class_spaces(tc, spaces, fit_on, fit_exclude_fold, spark)
            tokens, counts = relabeled, None  # (documents withdrawn: counted again)
            taxonomy = _declare_class_spaces(spaces_fitted, corpus_meta)
        assert taxonomy is not None
        _check_like(like_tax, taxonomy)
        report_dict = tc.report.to_dict()
        log.info("read %s", tc.report.summary())
        params["fit_on"] = list(fit_on) if fit_on else None
        spec = fitted if fitted is not None else FeatureSpec.from_params(params)
        read_s = round(time.perf_counter() - t0, 3)
        if progress is not None:
            progress.what, progress.total = "featurize: weighting and writing the features", tc.report.emitted
        summary = featurize_tokens(
            spark, tokens, out, spec, taxonomy=taxonomy, num_partitions=cfg.featurize.partitions,
            overwrite=overwrite, extra_files=_featurize_extra_files(taxonomy, corpus_meta, report_dict), t0=t0,
            timings={"read_and_tokenize": read_s}, checked=True, counts=counts,
        )
    finally:
        if relabeled is not None:
            relabeled.unpersist()
        tc.release()
    summary["read_report"] = report_dict
    _name_unlabelled(spark, out, summary, int(report_dict.get("no_labels", 0)))
    summary["total_seconds"] = round(time.perf_counter() - t0, 2)
    return summary


# ---------------------------------------------------------------------- train
def train(
    spark: SessionLike,
    cfg: Config,
    features: str | Path,
    out: str | Path,
    model_name: str | None = None,
    overwrite: bool = False,
    checkpoint_dir: str | Path | None = None,
    split: str | None = "train",
    fold: int | None = None,
    exclude_fold: int | None = None,
    fault_hook: Any = None,
    warm_start: str | Path | None = None,
) -> dict[str, Any]:
    """Train a registered model on the selected documents of a features folder, the way the model
    declares (:func:`sparkhc.spark.training.fit_model`), and save it atomically.

    With ``warm_start`` (a model directory) training continues from that model's state on the
    selected documents: the incremental learners are refreshed with new documents without
    retraining from scratch (one shard and ``train.epochs = 1`` give exactly the model trained
    incrementally on old then new documents).

    ``spark`` may be a :class:`~sparkhc.spark.session.DeferredSession` (the CLI's): a training in the
    driver (``train.execution``) then never starts Spark.
    """
    from sparkhc.spark.plan import plan_training
    from sparkhc.spark.session import startup_seconds

    t0 = time.perf_counter()
    # train.time_budget counts from the start of the job (reading the rows included)
    budget = TimeBudget(cfg.train.time_budget) if cfg.train.time_budget > 0 else None
    if _exists(out) and not overwrite:
        raise ModelError(f"{fsio.redact(out)} already exists; pass --overwrite to replace it")
    selection = Selection(split, fold, exclude_fold)
    name = _model_name(cfg, model_name, warm_start)
    data = _TrainingRows.read(spark, cfg, features, selection, name)
    skipped = data.skip_unlabelled(name)
    model = data.model(name, cfg, warm_start)
    plan = plan_training(spark, model, cfg.train, rows=data.rows, warm_start=warm_start is not None)
    ckpt = checkpoint_dir
    if ckpt is None and cfg.train.checkpoint:
        ckpt = _default_checkpoints(out)
    from sparkhc.progress import epoch_progress

    spec = data.spec
    with epoch_progress(log) as progress:  # the epochs done and the time left, every few seconds
        result = fit_model(
            spark, data.on_spark()[1] if plan.spark_needed else None, model, cfg.train, checkpoint_dir=ckpt,
            warm_start=warm_start is not None,
            checkpoint_key={"features": spec.fingerprint, "selection": [split, fold, exclude_fold],
                            "warm_start": str(warm_start) if warm_start is not None else None},
            fault_hook=fault_hook, rows=data.rows if plan.place == "driver" else None, plan=plan, budget=budget,
            progress=progress.final_epoch if progress is not None else None,
        )
    if "epochs" in model.params and result.epochs:  # the record says what was trained, not the fallback
        model.params["epochs"] = int(result.epochs)
    outcome = training_outcome(result, model)
    log.info("train: %s", outcome_sentence(outcome))
    meta = {
        "feature_spec_fingerprint": spec.fingerprint,
        "features_path": fsio.absolute(features),
        "training": {**training_metadata(result, cfg, selection, warm_start), "skipped_unlabelled": skipped},
        "scored_labels": features_corpus_info(features).get("scored_labels"),
    }
    save_model(out, model, meta, feature_spec_json=spec.to_json(), overwrite=overwrite)
    if ckpt is not None and Path(ckpt).exists() and checkpoint_dir is None:
        import shutil

        shutil.rmtree(ckpt, ignore_errors=True)
    meta_out = read_metadata(out)
    return {"model": fsio.redact(out), "name": name, "weights_hash": weights_hash(out), "model_size": meta_out["model_size"],
            "documents": result.documents, "seconds": round(time.perf_counter() - t0, 2), **outcome,
            # a deferred session started inside this training (the Spark path of the CLI): its start-up, in "seconds"
            "session_start_seconds": round(startup_seconds(spark), 2)}


def _model_name(cfg: Config, model_name: str | None, warm_start: str | Path | None) -> str:
    """The model to train: ``model_name``, else ``train.model``; a warm start's own (a different
    ``model_name`` refused)."""
    name = model_name or cfg.train.model
    if warm_start is not None:
        name = read_metadata(warm_start)["model"]
        if model_name is not None and model_name != name:
            raise ModelError(f"--warm-start model {warm_start} is a {name!r} model, not {model_name!r}")
    return name


class _TrainingRows:
    """The selected training documents: read in the driver (small inputs, ``train.execution``) or
    on Spark, where the frames are made only when needed."""

    def __init__(self, spark: SessionLike, features: str | Path, selection: Selection) -> None:
        self.spark, self.features, self.selection = spark, features, selection
        self.rows: SparseBatch | None = None
        self._frames: list[DataFrame] = []  # (all rows, selected rows) on Spark
        self._spec: Any = None
        self.combos: list[list[str]] = []

    @classmethod
    def read(cls, spark: SessionLike, cfg: Config, features: str | Path, selection: Selection,
             name: str) -> _TrainingRows:
        from sparkhc.spark.plan import label_combinations_of, read_rows

        data = cls(spark, features, selection)
        read = read_rows(spark, cfg.train, features, selection, get_model_class(name).needs_counts)
        if read is None:
            data.on_spark()
        else:
            data.rows, data._spec = read
            if len(data.rows) == 0:
                raise selection_error(data.on_spark()[0], features, selection, "training documents")
        data.combos = (label_combinations_of(data.rows) if data.rows is not None
                       else label_combinations(data.on_spark()[1]))
        return data

    @property
    def spec(self) -> Any:
        return self._spec

    def on_spark(self) -> tuple[DataFrame, DataFrame]:
        """(all rows, selected rows) as Spark frames, read on first use."""
        if not self._frames:
            from sparkhc.spark.io import read_features  # pandas: only with Spark
            from sparkhc.spark.session import active

            df_all, spec = read_features(active(self.spark), str(self.features))
            self._frames.extend([df_all, select_rows(df_all, self.selection)])
            if self._spec is None:
                self._spec = spec
        return self._frames[0], self._frames[1]

    def skip_unlabelled(self, name: str) -> int:
        """Documents without labels, skipped (named in a warning) for a model that needs a label;
        refused when no document has one. Returns how many were skipped."""
        if not (get_model_class(name).requires_labels and [] in self.combos):
            return 0
        if self.rows is not None:
            empty = np.array([not labs for labs in (self.rows.labels or [])], dtype=bool)
            skipped, sample = int(empty.sum()), sorted(map(str, self.rows.doc_ids[empty]))[:UNLABELLED_SAMPLE]
            self.rows = self.rows.subset(np.flatnonzero(~empty))
        else:
            no_label = F.size(F.coalesce(F.col(LABELS), F.array())) == 0
            bad = self.on_spark()[1].where(no_label)
            skipped = int(bad.count())
            sample = [r[0] for r in bad.select(DOC_ID).orderBy(DOC_ID).limit(UNLABELLED_SAMPLE).collect()]
            self._frames[1] = self._frames[1].where(~no_label)
        self.combos = [c for c in self.combos if c]
        if not self.combos:
            raise InputDataError(f"{self.features}: none of the {skipped} training documents of the selection "
                                 f"({self.selection.describe()}) has a label, e.g. {', '.join(map(repr, sample))}: "
                                 f"nothing to train the {name!r} model on")
        log.warning("train: %d training document(s) without labels skipped, e.g. %s (the %r model needs at least "
                    "one label per document)", skipped, ", ".join(map(repr, sample)), name)
        return skipped

    def model(self, name: str, cfg: Config, warm_start: str | Path | None) -> HierModel:
        """The model to train: the warm start's, or a new one on the features' taxonomy."""
        taxonomy = features_taxonomy(self.features)
        if warm_start is not None:
            model, _ = load_model(warm_start, taxonomy=taxonomy, feature_spec_fingerprint=self.spec.fingerprint)
            if self.rows is None and self.on_spark()[1].isEmpty():
                raise selection_error(self.on_spark()[0], self.features, self.selection, "training documents")
            return model
        try:
            return new_model(name, cfg, taxonomy, self.spec.n_features, None, source=str(self.features),
                             selection=self.selection, combos=self.combos)
        except EmptySelectionError:
            raise selection_error(self.on_spark()[0], self.features, self.selection, "training documents") from None


def training_outcome(result: TrainingResult, model: HierModel) -> dict[str, Any]:
    """What a training decided, for people (the JSON result of ``sparkhc train``): the epochs trained
    and how they were chosen, C, the calibration and anything ``train.time_budget`` cut."""
    sel = result.epoch_selection or {}
    out: dict[str, Any] = {"epochs": result.epochs,
                           "epochs_chosen_on": (f"{sel.get('folds', 1)} validation band(s) of "
                                                f"{sel.get('validation_documents')} documents" if sel else None)}
    if "C" in model.params:
        out["C"] = model.params["C"]
    cal = result.calibration or {}
    out["calibration"] = ("offsets applied" if cal.get("applied") else
                          "no offsets (no gain beyond the noise)" if cal.get("validation") else
                          cal.get("skipped") or cal.get("reason") or ("off" if not cal else "not applied"))
    budget = sel.get("time_budget") or {}
    cuts = [what for what, key in (("the epoch selection", "cut_selection"),
                                   ("the calibration's extra bands", "calibration_documents_skipped"),
                                   ("the final training", "refit_skipped")) if budget.get(key)]
    if budget:
        out["time_budget"] = {"seconds": budget.get("seconds"), "cut": cuts}
    return out


def outcome_sentence(outcome: dict[str, Any]) -> str:
    """:func:`training_outcome` in one line."""
    how = f" (chosen on {outcome['epochs_chosen_on']})" if outcome.get("epochs_chosen_on") else ""
    c = f", C = {outcome['C']:g}" if isinstance(outcome.get("C"), int | float) else ""
    budget = outcome.get("time_budget")
    cut = (f"; train.time_budget cut {', '.join(budget['cut'])}" if budget and budget["cut"] else "")
    return f"{outcome['epochs']} epochs{how}{c}; calibration: {outcome['calibration']}{cut}"


def selection_error(df: DataFrame, source: str | Path, selection: Selection, what: str) -> InputDataError:
    """The error for a selection that matches no row of ``df``: it names the splits and folds
    present, so the user can choose ``--split`` / ``--fold`` / ``--exclude-fold`` (one Spark job)."""
    present = df.groupBy(SPLIT, FOLD).count().collect()
    groups = {(r[SPLIT], r[FOLD]): int(r["count"]) for r in present}
    return InputDataError(empty_selection_message(source, selection, what, groups))


class EmptySelectionError(InputDataError):
    """The training rows are empty (:func:`selection_error` says what the features hold)."""


def new_model(name: str, cfg: Config, taxonomy: Taxonomy, n_features: int, df: DataFrame | None,
              source: str = "the training data", selection: Selection | None = None,
              params: dict[str, Any] | None = None, combos: list[list[str]] | None = None) -> HierModel:
    """A fresh model ``name`` for the training rows ``df``: the model taxonomy gets virtual
    ``/_self`` leaves for internal deepest labels (one Spark job over the distinct label sets, which
    also proves the selection is not empty; ``combos``: those label sets, computed elsewhere), and
    the parameters come from ``[model.<name>]`` (or ``params``) with ``epochs`` and ``seed`` taken
    from ``[train]`` (their one source)."""
    cls = get_model_class(name)
    if taxonomy.is_polyhierarchy and not cls.supports_polyhierarchy:
        from sparkhc.models import names

        able = [n for n in names() if get_model_class(n).supports_polyhierarchy]
        raise ConfigError(f"model {name!r} cannot train on a polyhierarchy (the taxonomy {taxonomy.source} gives some "
                          f"concepts several parents); models that can: {', '.join(able)}")
    if combos is None:
        assert df is not None
        combos = label_combinations(df)
    if not combos:
        raise EmptySelectionError(f"{source}: no training documents: the selection "
                                  f"({(selection or Selection()).describe()}) matches no document")
    mtax = model_taxonomy(taxonomy, combos, self_leaves=cfg.train.self_leaves and not cls.native_partial_paths)
    if mtax is not taxonomy:
        log.info("virtual /_self leaves for %d internal labels", int(mtax.virtual.sum()))
    return cls(mtax, n_features, **model_params(cls, cfg, params))


def training_metadata(result: TrainingResult, cfg: Config, selection: Selection,
                      warm_start: str | Path | None) -> dict[str, Any]:
    """The ``training`` record of a saved model's metadata (no wall-clock times: the same data,
    configuration and seed give byte-identical files)."""
    return {
        "selection": selection.to_dict(),
        "documents": result.documents,
        "epochs": result.epochs,
        "shards": result.shards,
        "epoch_selection": result.epoch_selection,
        "calibration": result.calibration,
        "node_parallel": result.strategy == "node_parallel",
        "seed": cfg.train.seed,
        "epoch_log": [{k: v for k, v in e.items() if k not in RUN_FIGURES} for e in result.epoch_log],
        "warm_start": fsio.absolute(warm_start) if warm_start is not None else None,
        "plan": result.plan.record() if result.plan is not None else None,
    }


# ---------------------------------------------------------------------- predict
def predict(
    spark: SessionLike,
    cfg: Config,
    model_dir: str | Path,
    features: str | Path | None,
    out: str | Path,
    overwrite: bool = False,
    split: str | None = "test",
    fold: int | None = None,
    exclude_fold: int | None = None,
    input_path: str | Path | None = None,
    read_options: dict[str, Any] | None = None,
    top: int = 0,
    explain: int = 0,
) -> dict[str, Any]:
    """Decode the selected documents and write predictions Parquet atomically.

    ``top``: the ``top`` best labels not predicted per document, with calibrated scores (a
    ``suggestions`` column); ``explain``: the ``explain`` largest feature contributions of every
    predicted label (an ``explanations`` column) (:mod:`sparkhc.spark.predict`).

    The documents are a features folder (``features``, made with the model's feature spec) or raw
    documents (``input_path``: any format ``featurize --input`` reads; the model's own
    ``feature_spec.json`` is applied to them, gold labels are optional and checked against the
    model's taxonomy; ``read_options``: the reader options ``unknown_labels``, ``on_empty``,
    ``on_invalid``). Small local inputs on a local master are decoded in this process without
    starting Spark (``predict.execution``, :mod:`sparkhc.spark.smalljobs`); ``spark`` may be a
    :class:`~sparkhc.spark.session.DeferredSession`."""
    from sparkhc.spark import smalljobs

    t0 = time.perf_counter()
    target = OutputFs(out)
    if target.exists() and not overwrite:
        raise SparkhcError(f"{fsio.redact(out)} already exists; pass --overwrite to replace it")
    if (features is None) == (input_path is None):
        raise ConfigError("predict: give either features or raw documents (input_path), not both or neither")
    selection = Selection(split, fold, exclude_fold)
    source = str(features if features is not None else input_path)
    where, why = smalljobs.place(spark, cfg.predict.execution, source,
                                 "features folder" if features is not None else "input")
    log.info("predict: reading %s %s and model %s (%s)", "features" if features is not None else "raw documents",
             fsio.redact(source), fsio.redact(model_dir), "in this process" if where == "driver" else "on Spark")
    log.debug("predict: %s", why)
    src = _PredictSource.read(spark, where, model_dir, features, input_path, read_options)
    from sparkhc.spark.predict import predict_extras

    model, meta = src.model, src.meta
    extras = predict_extras(model, meta, top, explain, src.spec.vocabulary if src.spec is not None else None,
                            fsio.redact(str(model_dir)))
    version = weights_hash(model_dir)
    if src.groups is not None and selected_count(src.groups, selection) == 0:
        raise InputDataError(empty_selection_message(source, selection, "document", src.groups))
    tmp = target.sibling(f".tmp-{uuid.uuid4().hex[:12]}")
    try:
        if src.table is not None:
            n = _decode_in_process(tmp, src.table, selection, model, version, meta, extras)
        else:
            assert src.df is not None
            n = _decode_on_spark(spark, cfg, tmp, src, selection, version, extras, source)
        if n == 0:
            raise InputDataError(f"{fsio.redact(source)}: no document to predict")
        for name, text in src.extra_files.items():
            tmp.write_bytes(tmp.child(name), text.encode("utf-8"))
        tmp.write_bytes(tmp.child(PRED_META_FILE), json_text(prediction_meta(
            model_dir=model_dir, model_version=version, model_meta=meta, features=features, input_path=input_path,
            selection={"split": split, "fold": fold, "exclude_fold": exclude_fold}, documents=n,
            seconds=time.perf_counter() - t0)).encode("utf-8"))
        if target.exists() and not overwrite:
            raise SparkhcError(f"{fsio.redact(out)} appeared while predicting; not replaced")
        tmp.publish(target)
    except BaseException:
        tmp.rmtree()
        raise
    finally:
        if src.release is not None:
            src.release()
    secs = round(time.perf_counter() - t0, 2)
    log.info("predict: wrote %d predictions to %s (%.1f s)", n, fsio.redact(out), secs)
    return {"predictions": fsio.redact(out), "documents": n, "model_version": version, "seconds": secs,
            "execution": "driver" if where == "driver" else "spark"}


@dataclass
class _PredictSource:
    """What ``predict`` decodes: the model and the documents, a table in this process or a frame on
    Spark (``release``: frees what reading raw documents on Spark holds)."""

    model: HierModel
    meta: dict[str, Any]
    spec: Any
    table: pa.Table | None = None
    df: DataFrame | None = None
    groups: Any = None
    release: Any = None
    extra_files: dict[str, str] = field(default_factory=dict)

    @classmethod
    def read(cls, spark: SessionLike, where: str, model_dir: str | Path, features: str | Path | None,
             input_path: str | Path | None, read_options: dict[str, Any] | None) -> _PredictSource:
        """Raw documents (``input_path``: the model's feature spec applied, the gold labels checked
        against its taxonomy) or a features folder (made with the model's spec)."""
        from sparkhc.persistence import model_feature_spec
        from sparkhc.spark import smalljobs
        from sparkhc.spark.session import active

        if input_path is None:
            taxonomy = features_taxonomy(features)  # type: ignore[arg-type]
            table, df = None, None
            if where == "driver":
                table, spec = smalljobs.read_features_table(features)  # type: ignore[arg-type]
            else:
                from sparkhc.spark.io import read_features

                df, spec = read_features(active(spark), str(features))
            model, meta = load_model(model_dir, taxonomy=taxonomy, feature_spec_fingerprint=spec.fingerprint)
            # (the split and fold columns only)
            return cls(model, meta, spec, table, df, selection_groups(features))  # type: ignore[arg-type]
        model, meta = load_model(model_dir)
        spec = model_feature_spec(model_dir)
        taxonomy = model.taxonomy.base()
        src = cls(model, meta, spec, extra_files={TAXONOMY_FILE: taxonomy.to_tsv()})  # the gold's, for evaluate
        opts = {k: v for k, v in (read_options or {}).items() if v is not None}
        if where == "driver":
            src.table, report = smalljobs.raw_features_table(input_path, spec, taxonomy, {**opts, "require_labels": False})
            src.groups = smalljobs.groups_of(src.table)
        else:
            src.df, report, src.release = _raw_features_df(active(spark), str(input_path), spec, taxonomy, opts)
        log.info("predict: read %s", report.summary())
        return src


def _decode_in_process(tmp: OutputFs, table: pa.Table, selection: Selection, model: HierModel, version: str,
                       meta: dict[str, Any], extras: Any) -> int:
    """The selected rows of ``table`` decoded here, written as one Parquet part; their count."""
    from sparkhc.spark import smalljobs
    from sparkhc.spark.predict import pred_schema, predict_batches

    rows = smalljobs.select_table(table, selection)
    log.info("predict: decoding %d documents (%s) with the %s model %s in this process ...", rows.num_rows,
             selection.describe(), meta["model"], version)
    preds = pa.Table.from_batches(list(predict_batches(model, version, smalljobs.batches_of(rows),
                                                       model.needs_counts, extras)),
                                  schema=pred_schema(extras))
    tmp.makedirs()
    local = fsio.local_path(tmp.child_uri(PRED_DATA_DIR))
    assert local is not None
    local.mkdir(parents=True)
    pq.write_table(preds, local / smalljobs.LOCAL_PART)
    return int(preds.num_rows)


def _decode_on_spark(spark: SessionLike, cfg: Config, tmp: OutputFs, src: _PredictSource, selection: Selection,
                     version: str, extras: Any, source: str) -> int:
    """The selected rows of ``src.df`` decoded on the executors into ``tmp``; their count (none
    selected: refused, naming the selection)."""
    from sparkhc.spark.predict import predict_df
    from sparkhc.spark.progress import stage_progress
    from sparkhc.spark.session import active

    assert src.df is not None
    log.info("predict: decoding the documents (%s) with the %s model %s on Spark ...", selection.describe(),
             src.meta["model"], version)
    df = select_rows(src.df, selection)
    if cfg.predict.partitions:
        df = df.repartition(cfg.predict.partitions)
    tmp.makedirs()
    total = selected_count(src.groups, selection) if src.groups is not None else None
    with stage_progress(active(spark), "predict: decoding", total=total or None):
        predict_df(df, src.model, version, extras).write.mode("overwrite").parquet(tmp.child_uri(PRED_DATA_DIR))
    n = int(active(spark).read.parquet(tmp.child_uri(PRED_DATA_DIR)).count())
    if n == 0:  # (no extra Spark job on the normal path; the temporary folder is removed)
        raise selection_error(src.df, source, selection, "document")
    return n


def _raw_features_df(spark: SparkSession, input_path: str, spec: Any, taxonomy: Taxonomy, opts: dict[str, Any]
                     ) -> tuple[DataFrame, Any, Any]:
    """Raw documents read, checked and tokenized by the executors (as ``featurize --input`` reads them),
    weighted with the fitted ``spec``: (features DataFrame, read report, a release function)."""
    import functools

    from sparkhc.spark.featurize import features_from_terms_partition
    from sparkhc.spark.schemas import FEATURES_SCHEMA
    from sparkhc.spark.sources import JsonlOptions, input_source, read_input_tokens

    source = input_source(spark, input_path)
    jopts = JsonlOptions(taxonomy=taxonomy, on_empty=opts.get("on_empty", "error"),
                         unknown_labels=opts.get("unknown_labels", "error"), on_invalid=opts.get("on_invalid", "error"),
                         require_labels=source[0] == "labeldirs")
    tc, _ = read_input_tokens(spark, source, spec.unfitted(), jopts)
    sc = spark.sparkContext
    spec_bc, tax_bc = sc.broadcast(spec), sc.broadcast(taxonomy)
    fn = functools.partial(features_from_terms_partition, spec_bc=spec_bc, taxonomy_bc=tax_bc)

    def release() -> None:
        tc.release()
        spec_bc.unpersist()
        tax_bc.unpersist()

    return tc.tokens.mapInArrow(fn, FEATURES_SCHEMA), tc.report, release


# ---------------------------------------------------------------------- evaluate
def evaluate(
    spark: SessionLike,
    predictions: str | Path,
    features: str | Path | None = None,
    out: str | Path | None = None,
    execution: str = "auto",
) -> tuple[dict[str, Any], str]:
    """Aggregate the metric count tables (on Spark, or in this process for small local predictions:
    ``execution``, :mod:`sparkhc.spark.smalljobs`); write metrics JSON; return it and a table."""
    from sparkhc.metrics import format_table
    from sparkhc.spark import smalljobs
    from sparkhc.spark.evaluate import metric_counts
    from sparkhc.spark.predict import PRED_LABELS
    from sparkhc.spark.session import active

    t0 = time.perf_counter()
    folder, pmeta, feats, taxonomy = evaluation_inputs(predictions, features)
    against = f"the features {fsio.redact(feats)}" if feats is not None else "the gold labels of the raw documents"
    log.info("evaluate: reading predictions %s (the %s model %s) against %s", folder.name,
             pmeta["model"], pmeta["model_version"], against)
    scored = pmeta.get("scored_labels")
    if scored is None and feats is not None:
        scored = features_corpus_info(feats).get("scored_labels")
    multi_dimensional = get_model_class(pmeta["model"]).multi_dimensional
    where, why = smalljobs.place(spark, execution, predictions, "predictions folder")
    if multi_dimensional:
        where = "spark"
    log.debug("evaluate: %s", why)
    table: pa.Table | None = None
    if where == "driver":
        table = smalljobs.read_predictions_table(predictions)
        labels = table.column(LABELS)
        n, missing = table.num_rows, labels.null_count
        empty = int(sum(1 for x in labels.to_pylist() if x is not None and len(x) == 0))
    else:
        from sparkhc.spark.progress import stage_progress

        df = active(spark).read.parquet(data_location(predictions))
        with stage_progress(active(spark), "evaluate: reading the predictions"):
            row = df.agg(F.count(F.lit(1)).alias("n"), F.sum(F.col(LABELS).isNull().cast("long")).alias("null"),
                         F.sum((F.size(F.col(LABELS)) == 0).cast("long")).alias("empty")).first()
        assert row is not None  # an aggregate always has one row
        n, missing, empty = int(row["n"]), int(row["null"] or 0), int(row["empty"] or 0)
    if n == 0:
        raise SchemaError(f"{folder.name}: no prediction rows; nothing to evaluate")
    if missing:
        raise SchemaError(f"{folder.name}: {missing} prediction rows have no gold labels; cannot evaluate")
    if empty == n:
        raise SchemaError(f"{folder.name}: none of the {n} prediction rows has gold labels; cannot evaluate "
                          "(predictions of unlabelled documents?)")
    if empty:
        log.warning("%s: %d of %d documents have no gold labels (evaluated as empty label sets)", folder.name,
                    empty, n)
    mask = scored_mask(taxonomy, scored)
    if table is not None:
        log.info("evaluate: counting the metrics of %d documents in this process ...", n)
        counts = metric_counts(taxonomy, mask, LABELS, PRED_LABELS, None, smalljobs.batches_of(table))
    else:
        from sparkhc.spark.evaluate import aggregate_metrics
        from sparkhc.spark.progress import stage_progress

        log.info("evaluate: aggregating the metric counts of %d documents on Spark ...", n)
        with stage_progress(active(spark), "evaluate: counting", total=n):
            counts = aggregate_metrics(df, taxonomy, scored=mask, gold_col=LABELS, pred_col=PRED_LABELS)
    metrics = counts.compute()
    class_spaces = None
    if multi_dimensional:
        # multi-dimensional models: Hamming Score, Exact Match, Sub-Exact Match, accuracy per space
        from sparkhc.class_spaces import MDCLayout
        from sparkhc.spark.mdc import aggregate_mdc_labels

        layout = MDCLayout.from_taxonomy(taxonomy)
        metrics.update(aggregate_mdc_labels(df, layout, LABELS, PRED_LABELS).compute())
        class_spaces = list(layout.names)
    result = {"metrics": metrics, "model_version": pmeta["model_version"], "model": pmeta["model"],
              "predictions": folder.name, "selection": pmeta["selection"],
              "decode_seconds": pmeta.get("seconds")}
    if class_spaces is not None:
        result["class_spaces"] = class_spaces  # accuracy_<j> is the accuracy of class_spaces[j]
    result["documents_without_gold_labels"] = empty
    target = str(out) if out is not None else fsio.child(predictions, "metrics.json")
    fs, path = fsio.resolve(target)
    if fsio.is_local(fs):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    text = json_text(result).encode("utf-8")
    fsio.write_atomic(fs, path, lambda fh: fh.write(text))
    log.info("evaluate: wrote %s (%.1f s)", fsio.redact(target), time.perf_counter() - t0)
    return result, format_table(metrics)


# ---------------------------------------------------------------------- demo
def demo(
    spark: SparkSession,
    cfg: Config,
    workdir: str | Path,
    corpus: str = "20newsgroups",
    data_dir: str | None = None,
    cache_dir: str | None = None,
    model_name: str | None = None,
) -> str:
    """featurize -> train -> predict -> evaluate on a corpus with a train/test split."""
    work = Path(workdir)
    work.mkdir(parents=True, exist_ok=True)
    feats, model_dir, preds = work / "features", work / "model", work / "predictions"
    t0 = time.perf_counter()
    s = featurize(spark, cfg, feats, corpus=corpus, data_dir=data_dir, cache_dir=cache_dir, overwrite=True)
    log.info("featurized %s documents", s.get("n_documents"))
    info = train(spark, cfg, feats, model_dir, model_name=model_name, overwrite=True, split="train")
    log.info("trained %s in %.1f s", info["name"], info["seconds"])
    p = predict(spark, cfg, model_dir, feats, preds, overwrite=True, split="test")
    result, table = evaluate(spark, preds)
    secs = time.perf_counter() - t0
    head = (f"sparkhc demo: {corpus}, model {info['name']} ({info['model_size']} weights), "
            f"{p['documents']} test documents, {secs:.0f} s end to end\n")
    return head + table
