"""Named corpora: their files and checksums, taxonomy, evaluation protocol, and where to get them.

Each entry is a :class:`CorpusInfo`. The files are those staged in ``../shared/data/<name>/``
(sha256 from each folder's SOURCE.md); the evaluation protocols are those of
``../shared/data/INDEX.md``, so every figure computed with :meth:`CorpusInfo.read` and
:meth:`CorpusInfo.rounds` is comparable.

>>> info = get_corpus("20newsgroups")
>>> info.splits, info.n_folds
(('train', 'test'), None)
>>> [r.name for r in get_corpus("rcv1v2_subset").rounds()][:2]
['fold 0', 'fold 1']

:func:`find_corpus` looks for a corpus in a data directory, then in the cache, then downloads it
(only ``20newsgroups`` can be rebuilt from its original public archive; for the others the
error message says which files to put where).
"""

from __future__ import annotations

import functools
import gzip
import json
import logging
import os
import shutil
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sparkhc.batch import FOLD, SPLIT
from sparkhc.corpus.fetch import Opener, cache_root, download, is_offline
from sparkhc.corpus.readers import (
    DEFAULT_BATCH_SIZE,
    Batches,
    OnEmpty,
    OnInvalid,
    ReadReport,
    UnknownLabels,
    natural_key,
    read_folds,
    read_jsonl,
    read_lyrl2004,
    write_jsonl_gz,
)
from sparkhc.errors import DataUnavailableError, InputDataError
from sparkhc.fsio import replace_dir, sha256_file
from sparkhc.taxonomy import Taxonomy

logger = logging.getLogger(__name__)


class UnknownCorpusError(DataUnavailableError):
    """The corpus name is not in the registry (the message lists the known names)."""


# ---------------------------------------------------------------------------------------- types
@dataclass(frozen=True)
class FileSpec:
    """A file of a staged corpus.

    ``sha256`` is ``None`` when no checksum is published (then it is not verified);
    ``alternatives`` are accepted names for the same content (e.g. without ``.gz``).
    """

    name: str
    sha256: str | None
    size: int | None = None
    required: bool = True
    alternatives: tuple[str, ...] = ()

    def find(self, directory: Path) -> Path | None:
        for n in (self.name, *self.alternatives):
            p = directory / n
            if p.is_file():
                return p
        return None


@dataclass(frozen=True)
class Download:
    """An original public archive: tried URL by URL, verified against ``sha256``."""

    filename: str
    urls: tuple[str, ...]
    sha256: str | None
    size: int | None = None


@dataclass(frozen=True)
class EvalRound:
    """One train/test round of an evaluation protocol.

    Documents are selected by split name (``train_splits`` / ``test_splits``) or, for
    cross-validation, by fold (``train_folds`` / ``test_folds``).
    """

    name: str
    train_splits: tuple[str, ...] = ()
    test_splits: tuple[str, ...] = ()
    train_folds: tuple[int, ...] = ()
    test_folds: tuple[int, ...] = ()

    def _mask(self, table: pa.Table | pa.RecordBatch, splits: tuple[str, ...], folds: tuple[int, ...]) -> np.ndarray:
        if splits:
            col, values = table.column(SPLIT), pa.array(splits, type=pa.string())
        else:
            col, values = table.column(FOLD), pa.array(folds, type=pa.int32())
        hit = pc.fill_null(pc.is_in(col, value_set=values), False)
        return np.asarray(hit.to_numpy(zero_copy_only=False), dtype=bool)

    def train_mask(self, table: pa.Table | pa.RecordBatch) -> np.ndarray:
        """Boolean mask of the training rows of a raw-documents table or batch."""
        return self._mask(table, self.train_splits, self.train_folds)

    def test_mask(self, table: pa.Table | pa.RecordBatch) -> np.ndarray:
        """Boolean mask of the test rows of a raw-documents table or batch."""
        return self._mask(table, self.test_splits, self.test_folds)

    def sql_filters(self) -> tuple[str, str]:
        """``(train, test)`` SQL predicates on the ``split`` / ``fold`` columns (for Spark)."""

        def pred(splits: tuple[str, ...], folds: tuple[int, ...]) -> str:
            if splits:
                return f"{SPLIT} IN ({', '.join(repr(s) for s in splits)})"
            return f"{FOLD} IN ({', '.join(str(int(f)) for f in folds)})"

        return pred(self.train_splits, self.train_folds), pred(self.test_splits, self.test_folds)


Converter = Callable[[Mapping[str, Path], Path], Mapping[str, Any]]


@dataclass(frozen=True)
class CorpusInfo:
    """A registered corpus.

    Attributes
    ----------
    name, title : str
    files : tuple of FileSpec
        The staged files (``../shared/data/<name>/``) with their sha256 from SOURCE.md.
    root : str
        The taxonomy's root name (``ROOT``, or ``Root`` for RCV1 as in its source).
    taxonomy_file : str or None
        ``parent<TAB>child`` file (or RCV1 hierarchy format); ``None``: a flat taxonomy
        ``root -> each label`` is built from the labels found in the documents.
    reader : {"jsonl", "lyrl2004"}
    docs_file : str
        The documents file for the ``jsonl`` reader.
    text_fields, tokens_field, split_field :
        How documents map to the raw schema (see :func:`sparkhc.corpus.readers.read_jsonl`).
    folds_file : str or None
        ``folds.tsv`` (``id<TAB>fold``) giving the ``fold`` column.
    splits : tuple of str
        The protocol's splits (e.g. ``("train", "test")``), empty for fold protocols.
    n_folds : int or None
        Number of folds of a fold protocol.
    test_folds : tuple of int or None
        Fixed test folds (``meka_imdb``: fold 0); ``None`` with ``n_folds``: k-fold CV.
    scored : {"leaves", "all", "aptemod"}
        Labels scored by the protocol: the taxonomy's leaves, all its nodes, or the 90 ApteMod
        topics.
    selection : {"apte_mod", "lewis", "topics_modapte"} or None
        A protocol document selection (:data:`SELECTIONS`): Reuters ModApte keeps ``apte_mod``
        documents; ``lewis`` the Lewis split's TRAIN stories but TOPICS="BYPASS" and its TEST
        stories; ``topics_modapte`` the ModApte train / test stories (TOPICS="YES").
    split_values : tuple of (str, str)
        Raw values of :attr:`split_field` -> protocol split names (e.g. Lewis ``TRAIN`` -> ``train``);
        empty: the values are the split names.
    folder : str or None
        The staged folder when it is another corpus's (a second protocol over the same files);
        ``None``: :attr:`name`.
    on_empty : str
        Default handling of empty documents (``meka_imdb`` has 24 documents without any
        vocabulary word; the protocol keeps them).
    n_docs : int
        Documents in the protocol (for messages and sanity checks).
    split_counts : tuple of (str, int)
    hierarchical : bool
    homepage : tuple of str
        Pages of the original public corpus.
    downloads : tuple of Download
        Original archives that :attr:`converter` turns into the staged layout.
    converter : callable or None
        ``converter({filename: path}, out_dir) -> summary``.
    protocol : str
        The evaluation protocol in words (from INDEX.md).
    notes : str
        How to obtain the corpus when it cannot be downloaded automatically.
    """

    name: str
    title: str
    files: tuple[FileSpec, ...]
    root: str
    taxonomy_file: str | None
    reader: Literal["jsonl", "lyrl2004"] = "jsonl"
    docs_file: str = "docs.jsonl.gz"
    text_fields: tuple[str, ...] = ("text",)
    tokens_field: str | None = "tokens"
    split_field: str | None = "split"
    folds_file: str | None = None
    splits: tuple[str, ...] = ()
    n_folds: int | None = None
    test_folds: tuple[int, ...] | None = None
    scored: Literal["leaves", "all", "aptemod"] = "leaves"
    selection: Literal["apte_mod", "lewis", "topics_modapte"] | None = None
    split_values: tuple[tuple[str, str], ...] = ()
    folder: str | None = None
    on_empty: OnEmpty = "error"
    n_docs: int | None = None
    split_counts: tuple[tuple[str, int], ...] = ()
    hierarchical: bool = True
    homepage: tuple[str, ...] = ()
    downloads: tuple[Download, ...] = ()
    converter: Converter | None = field(default=None, compare=False, repr=False)
    protocol: str = ""
    notes: str = ""

    @property
    def description(self) -> str:
        """One line for listings: title and protocol."""
        return f"{self.title}; protocol: {self.protocol}" if self.protocol else self.title

    # ------------------------------------------------------------------ files
    def required_files(self) -> list[FileSpec]:
        return [f for f in self.files if f.required]

    def has_files(self, directory: str | Path) -> bool:
        """True when ``directory`` holds every required file."""
        d = Path(directory)
        return d.is_dir() and all(f.find(d) is not None for f in self.required_files())

    def missing_files(self, directory: str | Path) -> list[str]:
        d = Path(directory)
        return [f.name for f in self.required_files() if f.find(d) is None]

    @property
    def folder_name(self) -> str:
        """The staged folder's name (``data_dir/<folder_name>``)."""
        return self.folder or self.name

    def corpus_dir(self, data_dir: str | Path) -> Path:
        """The directory holding this corpus: ``data_dir/<folder_name>`` or ``data_dir`` itself."""
        d = Path(data_dir)
        for cand in (d / self.folder_name, d):
            if self.has_files(cand):
                return cand
        raise DataUnavailableError(self.missing_message([d / self.folder_name]))

    def _path(self, directory: Path, name: str) -> Path:
        spec = next((f for f in self.files if f.name == name), None)
        p = spec.find(directory) if spec is not None else (directory / name if (directory / name).is_file() else None)
        if p is None:
            raise DataUnavailableError(self.missing_message([directory]))
        return p

    def verify(self, data_dir: str | Path) -> dict[str, str]:
        """Check the sha256 of every present file that has a published checksum.

        Returns ``{file: sha256}``; raises :class:`~sparkhc.corpus.fetch.ChecksumError` on a mismatch.
        """
        from sparkhc.corpus.fetch import ChecksumError

        d = self.corpus_dir(data_dir)
        out = {}
        for f in self.files:
            p = f.find(d)
            if p is None:
                continue
            got = sha256_file(p)
            out[p.name] = got
            if f.sha256 is not None and p.name == f.name and got != f.sha256:
                raise ChecksumError(
                    f"{p}: sha256 {got} differs from the published {f.sha256} (a different or damaged copy)"
                )
        return out

    @property
    def can_download(self) -> bool:
        return bool(self.downloads) and self.converter is not None and all(d.sha256 for d in self.downloads)

    def download_note(self) -> str:
        if not self.downloads:
            return "no automatic download for this corpus"
        if self.converter is None:
            return "the original archive cannot be converted automatically"
        return "no published checksum for the original files, so they are not downloaded automatically"

    def missing_message(self, looked: Sequence[Path], target: Path | None = None, reason: str | None = None) -> str:
        """The "put ... into ..." message of :class:`DataUnavailableError`."""
        if target is None:
            target = looked[-1] if looked else Path(self.name)

        def state(p: Path) -> str:
            if not p.is_dir():
                return "absent"
            return "missing: " + ", ".join(self.missing_files(p))

        files = [f"{f.name} (sha256 {f.sha256})" if f.sha256 else f.name for f in self.required_files()]
        put = files[0] if len(files) == 1 else ", ".join(files[:-1]) + " and " + files[-1]
        msg = f"corpus {self.name!r} is not available"
        if looked:
            msg += ": looked in " + ", ".join(f"{p} ({state(p)})" for p in looked)
        if reason:
            msg += f"; {reason}"
        msg += (
            f". Put {put} into {target}/, or put them into <DIR>/{self.name}/ and pass --data-dir <DIR>"
            " (or set SPARKHC_DATA_DIR)."
        )
        if self.downloads:
            msg += " Original: " + "; ".join(f"{d.filename} from {d.urls[0]}" for d in self.downloads) + "."
        if self.notes:
            msg += " " + self.notes
        return msg

    # ------------------------------------------------------------------ labels
    def load_taxonomy(self, data_dir: str | Path, protocol: bool = True) -> Taxonomy:
        """The corpus taxonomy.

        With ``protocol`` (default) Reuters' taxonomy is restricted to the 90 ApteMod topics and
        their group nodes; corpora without a taxonomy file get a flat one (root -> each label
        found in the documents).
        """
        d = self.corpus_dir(data_dir)
        if self.taxonomy_file is None:
            return self.flat_taxonomy(_label_set(self._path(d, self.docs_file)))
        tax = Taxonomy.load(self._path(d, self.taxonomy_file), root=self.root)
        if tax.root_name != self.root:
            raise InputDataError(f"{tax.source}: root is {tax.root_name!r}, expected {self.root!r}")
        if protocol and self.scored == "aptemod":
            keep = set(REUTERS_APTEMOD_90)
            missing = sorted(keep - set(tax.names))
            if missing:
                raise InputDataError(f"{tax.source}: ApteMod topics {missing[:5]} are not in the taxonomy")
            for lab in REUTERS_APTEMOD_90:
                keep.update(tax.names[a] for a in tax.ancestors(tax.id(lab)))
            edges = [(p, c) for p, c in tax.edges() if c in keep]
            tax = Taxonomy.from_edges(edges, root=self.root, source=f"{tax.source} (90 ApteMod topics)")
        return tax

    def flat_taxonomy(self, labels: Iterable[str]) -> Taxonomy:
        """The taxonomy of a corpus without a taxonomy file: the root -> each of ``labels`` (the labels
        found in the documents: :meth:`load_taxonomy` scans them on the driver, ``sparkhc featurize``
        collects them on Spark's executors)."""
        return Taxonomy.from_edges([(self.root, lab) for lab in sorted(set(labels))], root=self.root,
                                   source=f"{self.name} (flat, from the labels of {self.docs_file})")

    def scored_labels(self, taxonomy: Taxonomy, table: pa.Table | None = None) -> list[str]:
        """The labels the protocol scores, in taxonomy id order (virtual leaves excluded).

        They depend on the protocol and the taxonomy only, so labels that no document carries are
        scored too (RCV1: 5 of the 103 topics are absent from the subset); ``table`` is accepted
        for callers that have the documents at hand and is not used.
        """
        real = [c for c in range(1, taxonomy.n_nodes) if not taxonomy.virtual[c]]
        if self.scored == "all":
            return [taxonomy.names[c] for c in real]
        if self.scored == "aptemod":
            keep = set(REUTERS_APTEMOD_90)
            out = [taxonomy.names[c] for c in real if taxonomy.names[c] in keep]
            if len(out) != len(keep):
                raise InputDataError(f"{taxonomy.source}: lacks ApteMod topics {sorted(keep - set(out))[:5]}")
            return out
        base = taxonomy.base()
        return [base.names[int(c)] for c in base.leaves if c != 0]

    # ------------------------------------------------------------------ protocol
    def rounds(self) -> list[EvalRound]:
        """The evaluation rounds: one train/test round, or one round per test fold."""
        if self.splits:
            return [EvalRound("train/test", train_splits=(self.splits[0],), test_splits=tuple(self.splits[1:]))]
        if self.n_folds is None:
            return []
        folds = tuple(range(self.n_folds))
        if self.test_folds is not None:
            test = self.test_folds
            return [EvalRound(f"test fold{'s' if len(test) > 1 else ''} {', '.join(map(str, test))}",
                              train_folds=tuple(f for f in folds if f not in test), test_folds=test)]
        return [EvalRound(f"fold {k}", train_folds=tuple(f for f in folds if f != k), test_folds=(k,))
                for k in folds]

    # ------------------------------------------------------------------ reading
    def read(
        self,
        data_dir: str | Path,
        *,
        taxonomy: Taxonomy | None = None,
        protocol: bool = True,
        unknown_labels: UnknownLabels = "error",
        on_empty: OnEmpty | None = None,
        on_invalid: OnInvalid = "error",
        batch_size: int = DEFAULT_BATCH_SIZE,
        labels_from: Callable[[Mapping[str, Any]], list[str] | str] | None = None,
    ) -> tuple[Batches, ReadReport]:
        """Read the corpus as raw-document batches, applying its evaluation protocol.

        Parameters
        ----------
        data_dir : path
            The corpus directory or its parent (e.g. ``../shared/data``).
        taxonomy : Taxonomy, optional
            Labels are checked against it (default :meth:`load_taxonomy`).
        protocol : bool
            Apply the protocol's document selection and label restriction (Reuters ModApte:
            ``apte_mod`` documents, the 90 ApteMod topics; counted in the report as
            ``excluded`` / ``labels_restricted``). With ``False`` every document is read with
            its original labels.
        unknown_labels, on_empty, on_invalid, batch_size :
            See :func:`sparkhc.corpus.readers.read_jsonl`; ``on_empty`` defaults to the
            corpus's :attr:`on_empty`.
        labels_from : callable, optional
            Labels derived from each record's fields (``--class-spaces``; see
            :func:`~sparkhc.corpus.readers.read_jsonl`). The protocol's document selection and split
            still apply; its label restriction and taxonomy do not (the derived labels are not
            topic codes), so ``taxonomy`` is ignored.
        """
        d = self.corpus_dir(data_dir)
        if labels_from is not None and self.reader != "jsonl":
            raise InputDataError(f"corpus {self.name!r}: derived labels (--class-spaces) need a JSON Lines corpus")
        tax = None if labels_from is not None else (
            taxonomy if taxonomy is not None else self.load_taxonomy(d, protocol=protocol))
        empty = on_empty if on_empty is not None else self.on_empty
        if self.reader == "lyrl2004":
            token_files, qrels_path = self.lyrl_files(d)
            batches, report = read_lyrl2004(
                token_files, qrels_path, taxonomy=tax,
                unknown_labels=unknown_labels, on_empty=empty, on_invalid=on_invalid, batch_size=batch_size,
            )
            report.source = f"{self.name} ({d})"
            return batches, report
        docs, options = self.jsonl_options(d, tax, protocol=protocol, labels_from=labels_from)
        batches, report = read_jsonl(
            docs, **options, unknown_labels=unknown_labels, labels_from=labels_from, on_empty=empty,
            on_invalid=on_invalid, batch_size=batch_size,
        )
        return batches, report

    def lyrl_files(self, data_dir: str | Path) -> tuple[list[Path], Path]:
        """The token files (in the registry's order) and the qrels file of a LYRL2004 corpus; one source
        for :meth:`read` and the Spark reader (:func:`sparkhc.spark.sources.read_lyrl2004_tokens`)."""
        d = self.corpus_dir(data_dir)
        found = [f.find(d) for f in self.files if f.name.startswith("lyrl2004_tokens")]
        return [p for p in found if p is not None], self._path(d, "rcv1-v2.topics.qrels.gz")

    def jsonl_options(
        self,
        data_dir: str | Path,
        taxonomy: Taxonomy | None,
        *,
        protocol: bool = True,
        labels_from: Callable[[Mapping[str, Any]], list[str] | str] | None = None,
        categories: Callable[[Path], frozenset[str]] | None = None,
    ) -> tuple[Path, dict[str, Any]]:
        """The documents file of a JSON Lines corpus and the :func:`~sparkhc.corpus.readers.read_jsonl`
        options of its protocol (fields, taxonomy, folds, selection, allowed labels, source); the
        reader options (``unknown_labels``, ``on_empty``, ...) are the caller's. One source for
        :meth:`read` and the Spark reader (:mod:`sparkhc.spark.sources`). ``categories``: how the
        ApteMod categories are computed from the documents file (default :func:`apte_mod_categories`,
        a scan in this process; Spark's executors: :func:`sparkhc.spark.sources.apte_mod_categories`)."""
        d = self.corpus_dir(data_dir)
        docs = self._path(d, self.docs_file)
        folds = read_folds(self._path(d, self.folds_file)) if self.folds_file else None
        select: Callable[[Mapping[str, Any]], str | None] | None = None
        allowed = None
        if protocol and self.selection == "apte_mod":
            cats = (categories or apte_mod_categories)(docs)
            if len(cats) != 90 or cats != frozenset(REUTERS_APTEMOD_90):
                raise InputDataError(
                    f"{docs}: the ApteMod categories (topics in both ModApte train and test among apte_mod "
                    f"documents) number {len(cats)}, expected the 90 of the protocol; is this the staged "
                    "Reuters-21578 file?"
                )
            select = _select_apte_mod
            allowed = cats if labels_from is None else None
        elif protocol and self.selection is not None:
            select = SELECTIONS[self.selection]
        return docs, {
            "text_fields": self.text_fields, "tokens_field": self.tokens_field, "split_field": self.split_field,
            "split_values": dict(self.split_values) or None,
            "fold_field": None, "taxonomy": taxonomy, "allowed_labels": allowed, "folds": folds,
            "select": select, "source": f"{self.name} ({docs})",
        }


def _select_apte_mod(obj: Mapping[str, Any]) -> str | None:
    flag = obj.get("apte_mod")
    if flag is True:
        return None
    if flag is False:
        return f"not ApteMod (split {obj.get('split')})"
    return "no boolean apte_mod flag"


def _select_lewis(obj: Mapping[str, Any]) -> str | None:
    lewis = obj.get("lewissplit")
    if lewis == "TEST" or (lewis == "TRAIN" and obj.get("topics_attr") != "BYPASS"):
        return None
    return f"not in the Lewis split (LEWISSPLIT {lewis}, TOPICS {obj.get('topics_attr')})"


def _select_topics_modapte(obj: Mapping[str, Any]) -> str | None:
    split = obj.get("split")
    return None if split in ("train", "test") else f"not in the ModApte split (split {split})"


#: protocol document selections (``CorpusInfo.selection``) -> the reader's ``select``
SELECTIONS: dict[str, Callable[[Mapping[str, Any]], str | None]] = {
    "apte_mod": _select_apte_mod,
    "lewis": _select_lewis,
    "topics_modapte": _select_topics_modapte,
}


@functools.lru_cache(maxsize=16)
def _scan_cached(path: str, mtime_ns: int, size: int, what: str) -> frozenset[str]:
    train: set[str] = set()
    test: set[str] = set()
    everything: set[str] = set()
    with gzip.open(path, "rt", encoding="utf-8") if _is_gzip(path) else open(path, encoding="utf-8") as f:
        for no, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
                labels = obj.get("labels") or []
            except (json.JSONDecodeError, AttributeError):
                raise InputDataError(f"{path}, line {no}: malformed record") from None
            if what == "all":
                everything.update(labels)
            elif obj.get("apte_mod") is True:
                (train if obj.get("split") == "train" else test if obj.get("split") == "test" else set()).update(labels)
    return frozenset(everything if what == "all" else train & test)


def _is_gzip(path: str) -> bool:
    with open(path, "rb") as f:
        return f.read(2) == b"\x1f\x8b"


def _scan(path: Path, what: str) -> frozenset[str]:
    st = path.stat()
    return _scan_cached(str(path), st.st_mtime_ns, st.st_size, what)


def _label_set(docs: Path) -> list[str]:
    return sorted(_scan(docs, "all"))


def apte_mod_categories(docs: str | Path) -> frozenset[str]:
    """The ApteMod categories computed from a Reuters-21578 ``docs.jsonl.gz``: topics that occur
    in both the ModApte train and test split among ``apte_mod`` documents (90 on the staged copy)."""
    return _scan(Path(docs), "aptemod")


# ---------------------------------------------------------------------------------------- 20NG
#: ``taxonomy.tsv`` of ``20newsgroups`` (Song & Roth 2014 names; byte-identical to the staged file).
TWENTY_NG_TAXONOMY_TSV = """\
ROOT\tcomputer
ROOT\tautos.sports
ROOT\tscience
ROOT\tpolitics
ROOT\treligion
ROOT\tsales
computer\tcomp.graphics
computer\tcomp.os.ms-windows.misc
computer\tcomp.sys.ibm.pc.hardware
computer\tcomp.sys.mac.hardware
computer\tcomp.windows.x
autos.sports\trec.autos
autos.sports\trec.motorcycles
autos.sports\trec.sport.baseball
autos.sports\trec.sport.hockey
science\tsci.crypt
science\tsci.electronics
science\tsci.med
science\tsci.space
politics\ttalk.politics.guns
politics\ttalk.politics.mideast
politics\ttalk.politics.misc
religion\talt.atheism
religion\tsoc.religion.christian
religion\ttalk.religion.misc
sales\tmisc.forsale
"""

_BYDATE_SPLITS = {"20news-bydate-train": "train", "20news-bydate-test": "test"}


def convert_20newsgroups_bydate(files: Mapping[str, Path], out_dir: Path) -> dict[str, Any]:
    """Convert J. Rennie's ``20news-bydate.tar.gz`` into ``docs.jsonl.gz`` + ``taxonomy.tsv``.

    Walks the archive (``20news-bydate-{train,test}/<newsgroup>/<file>``), decodes each posting as
    latin-1 (no other change) and writes ``{"id": "<split>/<group>/<file>", "split", "newsgroup",
    "labels": [<top group>, <newsgroup>], "text"}`` ordered train then test, groups alphabetically,
    files numerically; gzip with mtime 0. On the original archive this reproduces the staged
    ``docs.jsonl.gz`` byte for byte. Any other member (or an unknown newsgroup) is an error naming it.
    """
    tar_path = files["20news-bydate.tar.gz"]
    tax = Taxonomy.from_tsv_text(TWENTY_NG_TAXONOMY_TSV, root="ROOT", source="20newsgroups taxonomy")
    leaves = {tax.names[int(c)] for c in tax.leaves}
    order = {"train": 0, "test": 1}
    entries: list[tuple[tuple[Any, ...], str, str, str, bytes]] = []
    seen: set[str] = set()
    try:
        tf = tarfile.open(tar_path, "r:*")
    except (tarfile.TarError, OSError) as e:
        raise InputDataError(f"{tar_path}: not a readable tar archive: {e}") from None
    with tf:
        for m in tf:
            parts = [p for p in PurePosixPath(m.name).parts if p not in (".", "")]
            if m.isdir():
                if len(parts) > 2 or (parts and parts[0] not in _BYDATE_SPLITS):
                    raise InputDataError(f"{tar_path}: unexpected directory {m.name!r}")
                continue
            if not m.isfile() or len(parts) != 3 or parts[0] not in _BYDATE_SPLITS:
                raise InputDataError(
                    f"{tar_path}: unexpected member {m.name!r}; expected 20news-bydate-{{train,test}}/<newsgroup>/<file>"
                )
            top, group, fname = parts
            if group not in leaves:
                raise InputDataError(f"{tar_path}: member {m.name!r}: {group!r} is not one of the 20 newsgroups")
            split = _BYDATE_SPLITS[top]
            doc_id = f"{split}/{group}/{fname}"
            if doc_id in seen:
                raise InputDataError(f"{tar_path}: member {m.name!r} appears twice")
            seen.add(doc_id)
            fh = tf.extractfile(m)
            if fh is None:
                raise InputDataError(f"{tar_path}: cannot read member {m.name!r}")
            entries.append(((order[split], group, natural_key(fname)), split, group, fname, fh.read()))
    if not entries:
        raise InputDataError(f"{tar_path}: no postings found")
    entries.sort(key=lambda e: e[0])

    def records() -> Iterator[dict[str, Any]]:
        for _key, split, group, fname, data in entries:
            path = tax.path(tax.id(group))
            yield {
                "id": f"{split}/{group}/{fname}",
                "split": split,
                "newsgroup": group,
                "labels": [tax.names[c] for c in path],
                "text": data.decode("latin-1"),
            }

    out_dir.mkdir(parents=True, exist_ok=True)
    n = write_jsonl_gz(records(), out_dir / "docs.jsonl.gz")
    (out_dir / "taxonomy.tsv").write_bytes(TWENTY_NG_TAXONOMY_TSV.encode("utf-8"))
    counts = {s: sum(1 for e in entries if e[1] == s) for s in order}
    return {"docs": n, **counts}


# ---------------------------------------------------------------------------------------- entries
#: The 90 ApteMod topics (in both ModApte train and test among apte_mod documents); checked
#: against the data by :meth:`CorpusInfo.read`.
REUTERS_APTEMOD_90: tuple[str, ...] = (
    "acq", "alum", "barley", "bop", "carcass", "castor-oil", "cocoa", "coconut", "coconut-oil", "coffee",
    "copper", "copra-cake", "corn", "cotton", "cotton-oil", "cpi", "cpu", "crude", "dfl", "dlr", "dmk",
    "earn", "fuel", "gas", "gnp", "gold", "grain", "groundnut", "groundnut-oil", "heat", "hog", "housing",
    "income", "instal-debt", "interest", "ipi", "iron-steel", "jet", "jobs", "l-cattle", "lead", "lei",
    "lin-oil", "livestock", "lumber", "meal-feed", "money-fx", "money-supply", "naphtha", "nat-gas",
    "nickel", "nkr", "nzdlr", "oat", "oilseed", "orange", "palladium", "palm-oil", "palmkernel",
    "pet-chem", "platinum", "potato", "propane", "rand", "rape-oil", "rapeseed", "reserves", "retail",
    "rice", "rubber", "rye", "ship", "silver", "sorghum", "soy-meal", "soy-oil", "soybean",
    "strategic-metal", "sugar", "sun-meal", "sun-oil", "sunseed", "tea", "tin", "trade", "veg-oil",
    "wheat", "wpi", "yen", "zinc",
)

_LYRL = "https://jmlr.org/papers/volume5/lewis04a/"
_LYRL_OLD = "http://www.ai.mit.edu/projects/jmlr/papers/volume5/lewis04a/"


def _lyrl_urls(path: str) -> tuple[str, ...]:
    return (_LYRL + path, _LYRL_OLD + path)


_REGISTRY: dict[str, CorpusInfo] = {}


def register(info: CorpusInfo) -> CorpusInfo:
    """Add an entry (a name can be registered once)."""
    if info.name in _REGISTRY:
        raise ValueError(f"corpus {info.name!r} is already registered")
    _REGISTRY[info.name] = info
    return info


register(CorpusInfo(
    name="20newsgroups",
    title="20 Newsgroups (bydate), raw postings, 2-level hierarchy (Song & Roth 2014)",
    files=(
        FileSpec("docs.jsonl.gz", "1bf45a491691ba2b3ac1543b17777f81f1c3a0b21374e83773aeb22d14d0f1ea", 13757531),
        FileSpec("taxonomy.tsv", "a5311efbbce063597bceeecbb9f54fe062bda6ad156a1b3b29c87fcb29cea97e", 606),
        FileSpec("taxonomy_name_prefix.tsv", "ec9419d3a5a8408c3f5294f4e3984a61329dfb1201a0e9f19a5420952c02263c",
                 801, required=False),
        FileSpec("label_descriptions_song_roth2014.tsv",
                 "65e30d6100360557f095c5896edda926e7ccd2d2582aa14afc915f70f7d9a750", 1812, required=False),
    ),
    root="ROOT",
    taxonomy_file="taxonomy.tsv",
    splits=("train", "test"),
    scored="leaves",
    n_docs=18846,
    split_counts=(("train", 11314), ("test", 7532)),
    homepage=("http://qwone.com/~jason/20Newsgroups/",),
    downloads=(Download(
        "20news-bydate.tar.gz",
        ("http://qwone.com/~jason/20Newsgroups/20news-bydate.tar.gz",
         "https://people.csail.mit.edu/jrennie/20Newsgroups/20news-bydate.tar.gz",
         "https://ndownloader.figshare.com/files/5975967"),
        # the archive scikit-learn's fetch_20newsgroups verifies
        "8f1b2514ca22a5ade8fbb9cfa5727df95fa587f4c87b786e15c759fa66d95610",
    ),),
    converter=convert_20newsgroups_bydate,
    protocol="bydate split train / test (11,314 / 7,532); scored: the 20 leaves (+ 6 groups for "
             "hierarchical measures)",
))

register(CorpusInfo(
    name="reuters21578",
    title="Reuters-21578 Distribution 1.0, ModApte / ApteMod (90 topics)",
    files=(
        FileSpec("docs.jsonl.gz", "87c9c7cea964c3b0913f0121e58d60af9fbf25511c14ac89873eef64760eedbd", 7486996),
        FileSpec("taxonomy_topics.tsv", "b1819f0349ce18a588c14664b6fc835500b10fcb48061739e1418142c3abe688", 2546),
        FileSpec("cat-descriptions_120396.txt", "70ae663742b7f94217c9dc8b2741a07c339fd272460f17523aed683b5ad7ee1f",
                 28194, required=False),
        FileSpec("README_lewis_original.txt", "eb669045dd883c56cb5a96da1848c3380bc6371894c5663709a46776e3262a96",
                 36388, required=False),
    ),
    root="ROOT",
    taxonomy_file="taxonomy_topics.tsv",
    text_fields=("title", "text"),
    tokens_field=None,
    splits=("train", "test"),
    scored="aptemod",
    selection="apte_mod",
    n_docs=10789,
    split_counts=(("train", 7770), ("test", 3019)),
    homepage=("https://kdd.ics.uci.edu/databases/reuters21578/reuters21578.html",
              "http://www.daviddlewis.com/resources/testcollections/reuters21578/"),
    downloads=(Download(
        "reuters21578.tar.gz",
        ("https://kdd.ics.uci.edu/databases/reuters21578/reuters21578.tar.gz",
         "https://archive.ics.uci.edu/ml/machine-learning-databases/reuters21578-mld/reuters21578.tar.gz"),
        None,
    ),),
    protocol="ModApte: apte_mod documents, split train / test (7,770 / 3,019); labels restricted to the 90 "
             "ApteMod topics (in both ModApte train and test), taxonomy_topics.tsv restricted to them and "
             "their groups",
    notes="No converter from the SGML archive is bundled: use the staged copy (../shared/data/reuters21578, "
          "built from the 22 reut2-0NN.sgm files; see its SOURCE.md for the field definitions).",
))

# Li & Yamanishi (1997) use the whole collection with the Lewis split, and a ModApte variant over
# every TOPICS="YES" story (all topics, not only the 90 ApteMod ones): the same staged files.
register(CorpusInfo(
    name="reuters21578_lewis",
    title="Reuters-21578, Lewis split (LEWISSPLIT), every topic",
    files=(
        FileSpec("docs.jsonl.gz", "87c9c7cea964c3b0913f0121e58d60af9fbf25511c14ac89873eef64760eedbd", 7486996),
        FileSpec("taxonomy_topics.tsv", "b1819f0349ce18a588c14664b6fc835500b10fcb48061739e1418142c3abe688", 2546),
    ),
    root="ROOT",
    taxonomy_file="taxonomy_topics.tsv",
    text_fields=("title", "text"),
    tokens_field=None,
    split_field="lewissplit",
    split_values=(("TRAIN", "train"), ("TEST", "test")),
    splits=("train", "test"),
    selection="lewis",
    on_empty="keep",
    n_docs=19813,
    split_counts=(("train", 13625), ("test", 6188)),
    folder="reuters21578",
    protocol="Lewis split: LEWISSPLIT=TRAIN stories without TOPICS=\"BYPASS\" (13,625) / LEWISSPLIT=TEST "
             "(6,188), topics or not (Li & Yamanishi 1997, Table 14); every topic is a label",
    notes="The staged reuters21578 folder (see that entry).",
))

register(CorpusInfo(
    name="reuters21578_topics",
    title="Reuters-21578, ModApte split over every TOPICS=\"YES\" story, every topic",
    files=(
        FileSpec("docs.jsonl.gz", "87c9c7cea964c3b0913f0121e58d60af9fbf25511c14ac89873eef64760eedbd", 7486996),
        FileSpec("taxonomy_topics.tsv", "b1819f0349ce18a588c14664b6fc835500b10fcb48061739e1418142c3abe688", 2546),
    ),
    root="ROOT",
    taxonomy_file="taxonomy_topics.tsv",
    text_fields=("title", "text"),
    tokens_field=None,
    splits=("train", "test"),
    selection="topics_modapte",
    on_empty="keep",
    n_docs=12902,
    split_counts=(("train", 9603), ("test", 3299)),
    folder="reuters21578",
    protocol="ModApte split train / test (9,603 / 3,299) over every TOPICS=\"YES\" story, with or without "
             "a topic; every topic is a label",
    notes="The staged reuters21578 folder (see that entry).",
))

register(CorpusInfo(
    name="rcv1v2_subset",
    title="RCV1-v2, 2,316-document NeuralClassifier dev subset (tokens), 103-topic hierarchy",
    files=(
        FileSpec("docs.jsonl.gz", "ce0d9ba6dc57fcfb3a3f4dd0fe55715cbbee368d688a6de624f27b2a3c5f077d", 916732),
        FileSpec("taxonomy.tsv", "af43c4563185efbda8b24ef59364efa9000d0d3866cd76794f74fd353f66914f", 960),
        # not in SOURCE.md's table: checksum of the staged copy
        FileSpec("folds.tsv", "72617c2738006154d92175490257a95c2a3c6b90051d5abd6d95ec2f1da50799"),
        FileSpec("labels.tsv", "447bb6d5bfb8fa99a3603e5beccfe7a228e66c5b44bed182f5c355190b5d2784", 2255,
                 required=False),
    ),
    root="Root",
    taxonomy_file="taxonomy.tsv",
    text_fields=(),
    split_field=None,
    folds_file="folds.tsv",
    n_folds=5,
    scored="all",
    n_docs=2316,
    homepage=("https://github.com/Tencent/NeuralNLP-NeuralClassifier", _LYRL + "lyrl2004_rcv1v2_README.htm"),
    protocol="5-fold cross-validation with folds.tsv (train on 4 folds, test on 1; report mean and spread); "
             "scored: all 103 topics, ancestor-closed",
    notes="This subset has no public download of its own (it is NeuralClassifier's data/rcv1_dev.json, "
          "converted; see SOURCE.md); the full corpus is the 'rcv1v2' entry.",
))

register(CorpusInfo(
    name="ohsumed23",
    title="OHSUMED single-label subset, 23 MeSH disease categories",
    files=(
        FileSpec("docs.jsonl.gz", "0cd536fa0afb12b80da5fdfef19ec544e6cc5a59b2abc1499ef8e36773a9bddd", 3223593),
        FileSpec("taxonomy.tsv", "7a002b9a8c6eaaf6a38ae795359eaa949fa65e5304503e7cf87f50984ea912ec", 207),
    ),
    root="ROOT",
    taxonomy_file="taxonomy.tsv",
    text_fields=("text",),  # text already starts with the title
    tokens_field=None,
    splits=("train", "test"),
    scored="leaves",
    n_docs=7400,
    split_counts=(("train", 3357), ("test", 4043)),
    hierarchical=False,
    homepage=("https://github.com/yao8839836/text_gcn",),
    protocol="split train / test (3,357 / 4,043); 23 flat categories",
    notes="No automatic download: use the staged copy (from text_gcn's data/ohsumed_single_23; see SOURCE.md).",
))

register(CorpusInfo(
    name="meka_imdb",
    title="IMDB genres (MEKA), binary bag of words, 28 flat labels",
    files=(
        FileSpec("docs.jsonl.gz", "3228db846ca8e5275f4a3d97e149ec4a188fdc7292ac63e4f45486ec0376aec5", 5659753),
        # not in SOURCE.md's table: checksum of the staged copy
        FileSpec("folds.tsv", "e3703a6fb20e74540c503cd0b2df2b34009f109ab43c6f28d3d6e8ed4056c8bc"),
    ),
    root="ROOT",
    taxonomy_file=None,
    text_fields=(),
    split_field=None,
    folds_file="folds.tsv",
    n_folds=5,
    test_folds=(0,),
    scored="leaves",
    on_empty="keep",
    n_docs=120919,
    hierarchical=False,
    homepage=("https://github.com/Waikato/meka",),
    protocol="folds.tsv: fold 0 = test, folds 1-4 = train; 28 flat genres (tokens are the present words of "
             "a 1,001-word binary vocabulary; 24 documents have none and are kept)",
    notes="No automatic download: use the staged copy (converted from MEKA's src/main/data/Imdb.arff.bz2; "
          "see SOURCE.md).",
))

register(CorpusInfo(
    name="rcv1v2",
    title="RCV1-v2 full, LYRL2004 token files + topic qrels (Lewis et al., JMLR 2004)",
    files=(
        FileSpec("lyrl2004_tokens_train.dat.gz", None, alternatives=("lyrl2004_tokens_train.dat",)),
        *(FileSpec(f"lyrl2004_tokens_test_pt{i}.dat.gz", None, alternatives=(f"lyrl2004_tokens_test_pt{i}.dat",))
          for i in range(4)),
        FileSpec("rcv1-v2.topics.qrels.gz", None, alternatives=("rcv1-v2.topics.qrels",)),
        FileSpec("rcv1.topics.hier.orig", None),
    ),
    root="Root",
    taxonomy_file="rcv1.topics.hier.orig",
    reader="lyrl2004",
    splits=("train", "test"),
    scored="all",
    n_docs=804414,
    split_counts=(("train", 23149), ("test", 781265)),
    homepage=(_LYRL + "lyrl2004_rcv1v2_README.htm",),
    downloads=(
        Download("lyrl2004_tokens_train.dat.gz", _lyrl_urls("a12-token-files/lyrl2004_tokens_train.dat.gz"), None),
        *(Download(f"lyrl2004_tokens_test_pt{i}.dat.gz",
                   _lyrl_urls(f"a12-token-files/lyrl2004_tokens_test_pt{i}.dat.gz"), None) for i in range(4)),
        Download("rcv1-v2.topics.qrels.gz", _lyrl_urls("a08-topic-qrels/rcv1-v2.topics.qrels.gz"), None),
        Download("rcv1.topics.hier.orig", _lyrl_urls("a02-orig-topics-hierarchy/rcv1.topics.hier.orig"), None),
    ),
    protocol="LYRL2004 split: train 23,149 / test 781,265; scored: all 103 topics, ancestor-closed",
    notes="Not staged here. Download the files above by hand (RCV1 needs the Reuters/NIST research "
          "agreement, https://trec.nist.gov/data/reuters/reuters.html); gzipped or not.",
))


# ---------------------------------------------------------------------------------------- lookup
def corpus_names() -> list[str]:
    """The registered corpus names."""
    return sorted(_REGISTRY)


def all_corpora() -> list[CorpusInfo]:
    """The registered corpora, by name."""
    return [_REGISTRY[n] for n in corpus_names()]


def get_corpus(name: str) -> CorpusInfo:
    """The registry entry ``name``; an unknown name raises an error listing the known ones."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise UnknownCorpusError(
            f"unknown corpus {name!r}; known corpora: {', '.join(corpus_names())}"
        ) from None


def fetch(
    corpus: str | CorpusInfo,
    cache_dir: str | Path | None = None,
    *,
    force: bool = False,
    opener: Opener | None = None,
    timeout: float = 60.0,
) -> Path:
    """Download a registered corpus's original archive and convert it into ``<cache>/<name>``.

    Parameters
    ----------
    corpus : str or CorpusInfo
        A registry name (see :func:`sparkhc.corpus.registry.corpus_names`) or an entry.
    cache_dir : path, optional
        See :func:`cache_root`.
    force : bool
        Download and convert again even when the corpus is already in the cache.
    opener : callable, optional
        ``opener(url, timeout=...)`` returning a binary file-like object (default
        :func:`urllib.request.urlopen`).

    Returns
    -------
    Path
        The corpus directory (``<cache>/<name>``).

    Raises
    ------
    DataUnavailableError
        Offline, no automatic download for this corpus (the message says which files to put
        where), or every URL failed. :class:`ChecksumError` when a download has the wrong sha256.
    """
    info = get_corpus(corpus) if isinstance(corpus, str) else corpus
    root = cache_root(cache_dir)
    try:
        return _fetch_into(info, root, force=force, opener=opener, timeout=timeout)
    except DataUnavailableError as e:
        raise type(e)(info.missing_message([], root / info.name, str(e))) from None


def find_corpus(
    name: str,
    data_dir: str | Path | None = None,
    cache_dir: str | Path | None = None,
    *,
    download: bool = True,
    verify: bool = False,
    opener: Opener | None = None,
) -> Path:
    """Locate a corpus directory, downloading it into the cache when possible.

    Looks in ``data_dir/<name>`` (or ``data_dir`` itself; ``data_dir`` defaults to
    ``$SPARKHC_DATA_DIR``), then in ``<cache>/<name>`` (see
    :func:`sparkhc.corpus.fetch.cache_root`), then downloads and converts the original archive
    with checksum verification (:func:`fetch`) unless ``download`` is false
    or ``$SPARKHC_OFFLINE`` is set. With ``verify`` the sha256 of the files found is checked.

    Raises
    ------
    DataUnavailableError
        Saying exactly which files (with sha256) to put where.
    """
    info = get_corpus(name)
    if data_dir is None and os.environ.get("SPARKHC_DATA_DIR"):
        data_dir = os.environ["SPARKHC_DATA_DIR"]
    looked: list[Path] = []
    if data_dir is not None:
        d = Path(data_dir).expanduser()
        for cand in (d / info.folder_name, d):
            if info.has_files(cand):
                if verify:
                    info.verify(cand)
                return cand
        looked.append(d / info.folder_name)
    cache = cache_root(cache_dir) / info.folder_name
    if info.has_files(cache):
        if verify:
            info.verify(cache)
        return cache
    looked.append(cache)
    if not download:
        reason = "downloading was not allowed"
    elif is_offline():
        reason = "offline (SPARKHC_OFFLINE is set)"
    elif not info.can_download:
        reason = info.download_note()
    else:
        try:
            return _fetch_into(info, cache.parent, force=False, opener=opener, timeout=60.0)
        except DataUnavailableError as e:
            logger.warning("%s: download failed: %s", name, e)
            raise type(e)(info.missing_message(looked, cache, f"download failed: {e}")) from None
    raise DataUnavailableError(info.missing_message(looked, cache, reason))


def _fetch_into(info: CorpusInfo, root: Path, *, force: bool, opener: Opener | None, timeout: float) -> Path:
    """:func:`fetch` without the "put ... into ..." wrapping of its errors."""
    out = root / info.name
    if not force and info.has_files(out):
        return out
    if not info.can_download:
        raise DataUnavailableError(info.download_note())
    if is_offline():
        raise DataUnavailableError("offline (SPARKHC_OFFLINE is set)")
    downloaded: dict[str, Path] = {}
    for d in info.downloads:
        dest = root / "downloads" / d.filename
        if dest.is_file() and d.sha256 is not None and sha256_file(dest) == d.sha256:
            logger.info("using cached %s", dest)
        else:
            download(d.urls, dest, d.sha256, size=d.size, timeout=timeout, opener=opener)
        downloaded[d.filename] = dest
    assert info.converter is not None  # can_download checked it
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{info.name}.", suffix=".tmp", dir=root))
    try:
        summary = info.converter(downloaded, tmp)
        manifest: dict[str, Any] = {
            "corpus": info.name,
            "converted_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "sources": [{"file": d.filename, "urls": list(d.urls), "sha256": d.sha256} for d in info.downloads],
            "summary": summary,
            "files": {},
        }
        missing = [f.name for f in info.required_files() if not (tmp / f.name).is_file()]
        if missing:
            raise DataUnavailableError(f"{info.name}: the converter did not write {missing} (a bug)")
        for f in info.files:
            p = tmp / f.name
            if not p.is_file():
                continue
            got = sha256_file(p)
            same = f.sha256 is not None and got == f.sha256
            manifest["files"][f.name] = {"sha256": got, "identical_to_staged_copy": same}
            if f.sha256 is not None and not same:
                logger.warning(
                    "%s: converted %s has sha256 %s, not the staged copy's %s (content may still be "
                    "equivalent; see %s)", info.name, f.name, got, f.sha256, "FETCHED.json",
                )
        (tmp / "FETCHED.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        if out.exists():
            if not force and info.has_files(out):
                shutil.rmtree(tmp)  # another process finished first
                return out
        replace_dir(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    logger.info("%s: converted into %s (%s)", info.name, out, summary)
    return out
