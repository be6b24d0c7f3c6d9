"""Corpora: readers of raw documents (Arrow batches of :data:`RAW_SCHEMA`), the registry of named
corpora with their evaluation protocols, and the checksum-verified fetcher.

>>> from sparkhc.corpus import get_corpus, find_corpus, to_table
>>> info = get_corpus("20newsgroups")                      # doctest: +SKIP
>>> path = find_corpus("20newsgroups", data_dir="../shared/data")   # doctest: +SKIP
>>> batches, report = info.read(path)                      # doctest: +SKIP
>>> table = to_table(batches); print(report.summary())     # doctest: +SKIP
"""

from sparkhc.corpus.fetch import ChecksumError, cache_root, download
from sparkhc.corpus.readers import (
    RAW_SCHEMA,
    TEXT,
    TOKENS,
    DuplicateIdError,
    EmptyDocumentError,
    FoldTable,
    ReadReport,
    UnknownLabelError,
    open_maybe_gzip,
    read_any,
    read_folds,
    read_jsonl,
    read_label_dirs,
    read_lyrl2004,
    read_parquet,
    read_qrels,
    to_table,
    validate_raw_schema,
    write_jsonl_gz,
)
from sparkhc.corpus.registry import (
    REUTERS_APTEMOD_90,
    CorpusInfo,
    Download,
    EvalRound,
    FileSpec,
    UnknownCorpusError,
    all_corpora,
    apte_mod_categories,
    convert_20newsgroups_bydate,
    corpus_names,
    fetch,
    find_corpus,
    get_corpus,
    register,
)
from sparkhc.fsio import sha256_file

__all__ = [
    "RAW_SCHEMA",
    "REUTERS_APTEMOD_90",
    "TEXT",
    "TOKENS",
    "ChecksumError",
    "CorpusInfo",
    "Download",
    "DuplicateIdError",
    "EmptyDocumentError",
    "EvalRound",
    "FileSpec",
    "FoldTable",
    "ReadReport",
    "UnknownCorpusError",
    "UnknownLabelError",
    "all_corpora",
    "apte_mod_categories",
    "cache_root",
    "convert_20newsgroups_bydate",
    "corpus_names",
    "download",
    "fetch",
    "find_corpus",
    "get_corpus",
    "open_maybe_gzip",
    "read_any",
    "read_folds",
    "read_jsonl",
    "read_label_dirs",
    "read_lyrl2004",
    "read_parquet",
    "read_qrels",
    "register",
    "sha256_file",
    "to_table",
    "validate_raw_schema",
    "write_jsonl_gz",
]
