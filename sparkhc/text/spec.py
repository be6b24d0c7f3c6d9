"""FeatureSpec: how a token list becomes a sparse feature vector, and the fitted vocabulary/idf.

A spec holds parameters (set by the user) and fitted state (vocabulary and document frequencies
learned from the *fit* documents). Both are saved together in one JSON file,
``feature_spec.json`` (:meth:`FeatureSpec.save`): parameters, ``n_fit_docs``, the vocabulary
(list of terms, the feature index is the position, terms sorted by Unicode code point) and the
document frequency of every feature, plus a ``fingerprint``. One file keeps the save atomic and the
fingerprint covering everything; idf is recomputed from ``df`` on load.

Feature index
    ``vocab`` mode: position of the term in the sorted vocabulary; out-of-vocabulary tokens are
    ignored. ``hashing`` mode: ``zlib.crc32(term.encode("utf-8")) mod 2**hash_bits`` (CRC-32 is
    stable across processes and machines, unlike Python's salted ``hash()``; Spark's ``crc32``
    gives the same value). Colliding terms add their counts.

Weighting (``c`` = raw count of the feature in the document)
    ``tf``: ``c``; ``log_tf``: ``log(1 + c)``; ``log_tf_idf``: ``log(1 + c) * idf`` with the
    smoothed idf ``idf = ln((1 + N) / (1 + df)) + 1`` (as scikit-learn's ``smooth_idf=True``),
    where ``N`` is the number of fit documents and ``df`` the number of fit documents containing
    the feature. The smoothing keeps idf finite and positive for features never seen in the fit
    documents (hashing buckets) and for terms occurring in every document. With ``l2_normalize``
    the weighted vector is divided by its Euclidean norm (empty vectors stay empty). Weights are
    computed in float64 and stored as float32.

Fit documents
    Vocabulary, ``df`` and ``N`` come only from documents whose ``split`` is in ``fit_on``
    (``None``: every split, including null) and whose ``fold`` is not in ``fit_exclude_folds``
    (``None``: no fold excluded; a null fold is never excluded). ``min_df`` (a count) and
    ``max_df`` (a fraction of ``N``) prune the vocabulary: a term is kept iff
    ``min_df <= df <= max_df * N``. They apply to ``vocab`` mode only.

Example
-------
>>> spec = FeatureSpec(weighting="tf", l2_normalize=False, fit_on=None)
>>> spec = spec.fit_documents([["b", "a"], ["a", "c", "a"]])
>>> spec.vocabulary
('a', 'b', 'c')
>>> idx, val, cnt = spec.transform_tokens(["c", "a", "c", "zzz"])
>>> idx.tolist(), val.tolist(), cnt.tolist()
([0, 2], [1.0, 2.0], [1.0, 2.0])
"""

from __future__ import annotations

import hashlib
import json
import os
import zlib
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import numpy as np

from sparkhc.errors import ConfigError, ModelError, NotFittedError
from sparkhc.text.tokenize import DEFAULT_TOKEN_PATTERN, Tokenizer

SPEC_FILE = "feature_spec.json"
FORMAT = "sparkhc-feature-spec"
FORMAT_VERSION = 1

MODES = ("vocab", "hashing")
WEIGHTINGS = ("tf", "log_tf", "log_tf_idf")

#: Parameter names (what ``from_params`` / TOML accept); the fitted state is separate.
PARAM_NAMES = (
    "mode",
    "hash_bits",
    "weighting",
    "l2_normalize",
    "min_df",
    "max_df",
    "stop_words",
    "token_pattern",
    "fit_on",
    "fit_exclude_folds",
)


def _bad(name: str, expected: str, got: object) -> ConfigError:
    return ConfigError(f"The {name!r} parameter of FeatureSpec must be {expected}. Got {got!r} instead.")


def hash_index(term: str, n_features: int) -> int:
    """Bucket of ``term`` in hashing mode: CRC-32 of its UTF-8 bytes modulo ``n_features``."""
    return zlib.crc32(term.encode("utf-8")) % n_features


def smooth_idf(df: np.ndarray, n_docs: int) -> np.ndarray:
    """``ln((1 + N) / (1 + df)) + 1`` in float64 (see the module docstring)."""
    df = np.asarray(df, dtype=np.float64)
    return np.log((1.0 + n_docs) / (1.0 + df)) + 1.0


@dataclass(frozen=True)
class FeatureSpec:
    """Parameters and fitted state of the bag-of-words features.

    Parameters
    ----------
    mode : {"vocab", "hashing"}
        A learned vocabulary, or the hashing trick with ``2**hash_bits`` features.
    hash_bits : int
        ``k`` in ``n_features = 2**k`` for hashing mode (1..30).
    weighting : {"tf", "log_tf", "log_tf_idf"}
    l2_normalize : bool
    min_df : int
        Minimum document frequency (count) of a vocabulary term.
    max_df : float
        Maximum document frequency as a fraction of the fit documents, in (0, 1].
    stop_words : bool
        Drop English stop words (:data:`sparkhc.text.tokenize.ENGLISH_STOP_WORDS`).
    token_pattern : str
        Regular expression of a token (:data:`sparkhc.text.tokenize.DEFAULT_TOKEN_PATTERN`).
    fit_on : tuple of str or None
        Splits whose documents fit the vocabulary and idf; ``None`` = all documents.
    fit_exclude_folds : tuple of int or None
        Folds whose documents never fit (cross-validation test folds).

    Fitted attributes
    -----------------
    vocabulary : tuple of str or None
        Sorted terms (vocab mode); feature index = position.
    df : tuple of int or None
        Document frequency of every feature among the fit documents.
    n_fit_docs : int or None
        ``N``, the number of fit documents.
    """

    mode: str = "vocab"
    hash_bits: int = 18
    weighting: str = "log_tf_idf"
    l2_normalize: bool = True
    min_df: int = 1
    max_df: float = 1.0
    stop_words: bool = False
    token_pattern: str = DEFAULT_TOKEN_PATTERN
    fit_on: tuple[str, ...] | None = ("train",)
    fit_exclude_folds: tuple[int, ...] | None = None
    vocabulary: tuple[str, ...] | None = field(default=None, repr=False)
    df: tuple[int, ...] | None = field(default=None, repr=False)
    n_fit_docs: int | None = None
    # caches rebuilt lazily (never pickled, never compared)
    _cache: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    # ------------------------------------------------------------------ validation
    def __post_init__(self) -> None:
        set_ = object.__setattr__
        if self.mode not in MODES:
            raise _bad("mode", f"one of {MODES}", self.mode)
        if self.weighting not in WEIGHTINGS:
            raise _bad("weighting", f"one of {WEIGHTINGS}", self.weighting)
        if isinstance(self.hash_bits, bool) or not isinstance(self.hash_bits, int) or not 1 <= self.hash_bits <= 30:
            raise _bad("hash_bits", "an int in [1, 30]", self.hash_bits)
        if not isinstance(self.l2_normalize, bool):
            raise _bad("l2_normalize", "a bool", self.l2_normalize)
        if not isinstance(self.stop_words, bool):
            raise _bad("stop_words", "a bool", self.stop_words)
        if isinstance(self.min_df, bool) or not isinstance(self.min_df, int) or self.min_df < 1:
            raise _bad("min_df", "an int >= 1 (a document count)", self.min_df)
        if (
            isinstance(self.max_df, bool)
            or not isinstance(self.max_df, int | float)
            or not 0.0 < float(self.max_df) <= 1.0
        ):
            raise _bad("max_df", "a float in (0, 1] (a fraction of the fit documents)", self.max_df)
        set_(self, "max_df", float(self.max_df))
        if self.mode == "hashing" and (self.min_df != 1 or self.max_df != 1.0):
            raise ConfigError(
                "The 'min_df' and 'max_df' parameters of FeatureSpec apply to mode='vocab' only. "
                f"Got min_df={self.min_df!r}, max_df={self.max_df!r} with mode='hashing' instead."
            )
        if not isinstance(self.token_pattern, str):
            raise _bad("token_pattern", "a regular expression string", self.token_pattern)
        try:
            Tokenizer(self.token_pattern, self.stop_words)
        except ValueError as e:
            raise ConfigError(str(e).replace("of Tokenizer", "of FeatureSpec")) from None
        fit_on = self.fit_on
        if isinstance(fit_on, str):
            fit_on = (fit_on,)
        if fit_on is not None:
            if not isinstance(fit_on, Iterable) or not all(isinstance(s, str) for s in fit_on):
                raise _bad("fit_on", "a list of split names or None (all documents)", self.fit_on)
            fit_on = tuple(sorted(set(fit_on)))
            if not fit_on:
                raise _bad("fit_on", "a non-empty list of split names or None (all documents)", self.fit_on)
        set_(self, "fit_on", fit_on)
        folds = self.fit_exclude_folds
        if folds is not None:
            if isinstance(folds, int) and not isinstance(folds, bool):
                folds = (folds,)
            if not isinstance(folds, Iterable) or not all(
                isinstance(f, int) and not isinstance(f, bool) for f in folds
            ):
                raise _bad("fit_exclude_folds", "a list of fold numbers or None", self.fit_exclude_folds)
            folds = tuple(sorted(set(folds)))
        set_(self, "fit_exclude_folds", folds)
        # fitted state
        if self.vocabulary is not None:
            set_(self, "vocabulary", tuple(self.vocabulary))
            if self.mode != "vocab":
                raise ModelError("a hashing FeatureSpec has no vocabulary")
            if list(self.vocabulary) != sorted(set(self.vocabulary)):
                raise ModelError("FeatureSpec vocabulary must be sorted and without duplicates")
        if self.df is not None:
            set_(self, "df", tuple(int(x) for x in self.df))
            if self.n_fit_docs is None:
                raise ModelError("FeatureSpec has df but no n_fit_docs")
            if self.mode == "vocab" and (self.vocabulary is None or len(self.df) != len(self.vocabulary)):
                raise ModelError("FeatureSpec df and vocabulary have different lengths")
            if self.mode == "hashing" and len(self.df) != 2**self.hash_bits:
                raise ModelError(f"FeatureSpec df has {len(self.df)} entries, expected 2**{self.hash_bits}")
        elif self.vocabulary is not None:
            raise ModelError("FeatureSpec has a vocabulary but no df")

    @classmethod
    def from_params(cls, params: Mapping[str, Any] | FeatureSpec | None = None, **overrides: Any) -> FeatureSpec:
        """An unfitted spec from a mapping (e.g. a TOML table); unknown keys raise ConfigError."""
        if isinstance(params, FeatureSpec):
            base = params.params()
        else:
            base = dict(params or {})
        base.update(overrides)
        unknown = sorted(set(base) - set(PARAM_NAMES))
        if unknown:
            raise ConfigError(
                f"unknown FeatureSpec parameter(s) {unknown}; known parameters: {list(PARAM_NAMES)}"
            )
        return cls(**base)

    def params(self) -> dict[str, Any]:
        """The parameters (no fitted state) as JSON-compatible values."""
        out: dict[str, Any] = {}
        for name in PARAM_NAMES:
            v = getattr(self, name)
            out[name] = list(v) if isinstance(v, tuple) else v
        return out

    def unfitted(self) -> FeatureSpec:
        return FeatureSpec.from_params(self.params())

    # ------------------------------------------------------------------ derived views
    @property
    def is_fitted(self) -> bool:
        return self.df is not None

    @property
    def needs_fit(self) -> bool:
        """Whether transform needs fitted state (a vocabulary or idf)."""
        return self.mode == "vocab" or self.weighting == "log_tf_idf"

    @property
    def n_features(self) -> int:
        if self.mode == "hashing":
            return 2**self.hash_bits
        if self.vocabulary is None:
            raise NotFittedError("this vocab-mode FeatureSpec is not fitted: n_features is unknown")
        return len(self.vocabulary)

    @property
    def tokenizer(self) -> Tokenizer:
        tok = self._cache.get("tokenizer")
        if tok is None:
            tok = self._cache["tokenizer"] = Tokenizer(self.token_pattern, self.stop_words)
        return tok

    @property
    def idf(self) -> np.ndarray | None:
        """Smoothed idf per feature (float64), or None before fitting."""
        if self.df is None or self.n_fit_docs is None:
            return None
        idf = self._cache.get("idf")
        if idf is None:
            idf = self._cache["idf"] = smooth_idf(np.asarray(self.df, dtype=np.float64), self.n_fit_docs)
        return idf

    def _term_index(self) -> dict[str, int]:
        index = self._cache.get("index")
        if index is None:
            if self.vocabulary is None:
                raise NotFittedError("this vocab-mode FeatureSpec is not fitted (no vocabulary)")
            index = self._cache["index"] = {t: i for i, t in enumerate(self.vocabulary)}
        return index

    def is_fit_document(self, split: str | None, fold: int | None) -> bool:
        """Whether a document with this split and fold fits the vocabulary and idf."""
        if self.fit_on is not None and split not in self.fit_on:
            return False
        return not (self.fit_exclude_folds is not None and fold is not None and fold in self.fit_exclude_folds)

    # ------------------------------------------------------------------ fitting
    def fitted(
        self,
        n_fit_docs: int,
        terms: Sequence[str] | None = None,
        df: Sequence[int] | np.ndarray | None = None,
    ) -> FeatureSpec:
        """A copy with fitted state.

        ``vocab`` mode: ``terms`` and their ``df`` (any order); ``min_df``/``max_df`` are applied
        here (idempotent, so a caller may have pruned already) and the terms sorted. ``hashing``
        mode: ``df`` of length ``n_features`` (``terms`` unused).
        """
        if n_fit_docs < 0:
            raise ValueError("n_fit_docs must be >= 0")
        if self.mode == "hashing":
            if df is None:
                df = np.zeros(2**self.hash_bits, dtype=np.int64)
            dfa = np.asarray(df, dtype=np.int64)
            return replace(self, vocabulary=None, df=tuple(dfa.tolist()), n_fit_docs=int(n_fit_docs))
        if terms is None or df is None or len(terms) != len(df):
            raise ValueError("vocab mode needs terms and df of the same length")
        max_count = self.max_df * n_fit_docs
        kept = sorted(
            (t, int(d)) for t, d in zip(terms, df, strict=True) if self.min_df <= int(d) <= max_count
        )
        return replace(
            self,
            vocabulary=tuple(t for t, _ in kept),
            df=tuple(d for _, d in kept),
            n_fit_docs=int(n_fit_docs),
        )

    def fit_documents(self, token_lists: Iterable[Sequence[str]]) -> FeatureSpec:
        """Fit on the driver from already tokenized fit documents (tests, small baselines)."""
        n = 0
        if self.mode == "hashing":
            dfa = np.zeros(2**self.hash_bits, dtype=np.int64)
            for toks in token_lists:
                n += 1
                idx = {hash_index(t, len(dfa)) for t in toks}
                dfa[list(idx)] += 1
            return self.fitted(n, df=dfa)
        dfc: Counter[str] = Counter()
        for toks in token_lists:
            n += 1
            dfc.update(set(toks))
        return self.fitted(n, terms=list(dfc), df=list(dfc.values()))

    # ------------------------------------------------------------------ transform
    def tokenize_document(self, text: str | None, tokens: Sequence[str | None] | None = None) -> list[str]:
        """Tokens of a raw document (``tokens`` wins over ``text`` when not null)."""
        return self.tokenizer.tokenize_document(text, tokens)

    def transform_tokens(self, tokens: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Features of one tokenized document.

        Returns
        -------
        indices : ndarray int32, sorted ascending, unique
        values : ndarray float32, weighted (and L2-normalised when set)
        counts : ndarray float32, raw counts at the same positions
        """
        offsets, idx, val, cnt = self.transform_many([tokens])
        return idx, val, cnt

    def transform_many(
        self, token_lists: Iterable[Sequence[str]]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Features of many tokenized documents as CSR pieces.

        Returns ``(offsets int32 (n_docs + 1), indices int32, values float32, counts float32)``;
        row ``i`` is ``indices[offsets[i]:offsets[i + 1]]``. Weighting and normalisation are
        vectorised over the whole block.
        """
        lists = token_lists if isinstance(token_lists, list) else list(token_lists)
        lengths = np.fromiter((len(t) for t in lists), dtype=np.int64, count=len(lists))
        flat = [t for toks in lists for t in toks]
        return self.transform_bags(lengths, flat, np.ones(len(flat), dtype=np.int64))

    def term_ids(self, terms: Sequence[str]) -> np.ndarray:
        """The feature of each term (vocabulary mode: -1 for a term outside the vocabulary)."""
        if self.mode == "hashing":
            n_features = self.n_features
            # one CRC per distinct term of the block, not per token
            buckets = {t: zlib.crc32(t.encode("utf-8")) % n_features for t in set(terms)}
            return np.fromiter((buckets[t] for t in terms), dtype=np.int64, count=len(terms))
        get = self._term_index().get
        return np.fromiter((get(t, -1) for t in terms), dtype=np.int64, count=len(terms))

    def transform_bags(
        self,
        lengths: np.ndarray | Sequence[int],
        terms: Sequence[str] | None,
        term_counts: np.ndarray | Sequence[int],
        ids: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Like :meth:`transform_many` for bags of words: document ``i`` has the next
        ``lengths[i]`` entries of ``terms`` with their counts (a term may repeat; counts add).
        ``ids``: the terms' :meth:`term_ids` when the caller has them (then ``terms`` is not read)."""
        if self.needs_fit and not self.is_fitted:
            raise NotFittedError(
                f"FeatureSpec(mode={self.mode!r}, weighting={self.weighting!r}) must be fitted "
                "before transform (it needs a vocabulary or idf)"
            )
        n_features = self.n_features
        lengths = np.asarray(lengths, dtype=np.int64)
        n_docs = len(lengths)
        if ids is None:
            assert terms is not None
            ids = self.term_ids(terms)
        rows = np.repeat(np.arange(n_docs, dtype=np.int64), lengths)
        keep = ids >= 0
        # (row, feature) keys: np.unique sorts by row, then by feature; equal keys add their counts
        keys, inverse = np.unique(rows[keep] * n_features + ids[keep], return_inverse=True)
        counts: np.ndarray = np.bincount(
            inverse.ravel(), weights=np.asarray(term_counts, dtype=np.float64)[keep], minlength=len(keys)
        )
        doc = keys // n_features
        indices = (keys - doc * n_features).astype(np.int32)
        offsets = np.zeros(n_docs + 1, dtype=np.int64)
        np.cumsum(np.bincount(doc, minlength=n_docs), out=offsets[1:])
        lengths_out = np.diff(offsets)
        w: np.ndarray
        if self.weighting == "tf":
            w = counts.copy()
        else:
            w = np.log1p(counts)
            if self.weighting == "log_tf_idf":
                idf = self.idf
                if idf is None:  # guarded by needs_fit above
                    raise NotFittedError("FeatureSpec has no idf")
                w *= idf[indices]
        if self.l2_normalize and w.size:
            # bincount adds each document's squares sequentially in index order: the norm (and so
            # the stored bytes) does not depend on which other documents share the block
            row_of = np.repeat(np.arange(n_docs), lengths_out)
            norms = np.sqrt(np.bincount(row_of, weights=w * w, minlength=n_docs))
            w = w / norms[row_of]
        return (
            offsets.astype(np.int32),
            indices,
            w.astype(np.float32),
            counts.astype(np.float32),
        )

    # ------------------------------------------------------------------ persistence
    def _content(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "version": FORMAT_VERSION,
            "params": self.params(),
            "n_fit_docs": self.n_fit_docs,
            "n_features": self.n_features if (self.mode == "hashing" or self.vocabulary is not None) else None,
            "vocabulary": None if self.vocabulary is None else list(self.vocabulary),
            "df": None if self.df is None else list(self.df),
        }

    @staticmethod
    def _digest(content: Mapping[str, Any]) -> str:
        canon = json.dumps(content, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(canon.encode("utf-8")).hexdigest()[:16]

    @property
    def fingerprint(self) -> str:
        """sha256 (hex, first 16 chars) of the canonical JSON of parameters and fitted state."""
        fp = self._cache.get("fingerprint")
        if fp is None:
            fp = self._cache["fingerprint"] = self._digest(self._content())
        return str(fp)

    def to_json(self) -> str:
        """Deterministic JSON text (same spec, same bytes)."""
        content = self._content()
        content["fingerprint"] = self._digest(content)
        # one key per line, but the long lists on one line each (readable and compact)
        lines = ["{"]
        keys = sorted(content)
        for i, k in enumerate(keys):
            sep = "," if i < len(keys) - 1 else ""
            v = json.dumps(content[k], sort_keys=True, ensure_ascii=False, separators=(",", ":"))
            lines.append(f"  {json.dumps(k)}: {v}{sep}")
        lines.append("}")
        return "\n".join(lines) + "\n"

    @classmethod
    def from_json(cls, text: str, source: str = "<json>") -> FeatureSpec:
        """Parse :meth:`to_json` output; checks the format, version and fingerprint."""
        try:
            content = json.loads(text)
        except json.JSONDecodeError as e:
            raise ModelError(f"{source}: not valid JSON ({e}); the feature spec is truncated or corrupt") from None
        if not isinstance(content, dict) or content.get("format") != FORMAT:
            raise ModelError(f"{source}: not a sparkhc feature spec (expected format {FORMAT!r})")
        version = content.get("version")
        if not isinstance(version, int) or version > FORMAT_VERSION:
            raise ModelError(
                f"{source}: feature spec version {version!r} is newer than this sparkhc supports ({FORMAT_VERSION})"
            )
        stored = content.pop("fingerprint", None)
        try:
            spec = cls.from_params(content["params"])._with_content(content)
        except KeyError as e:
            raise ModelError(f"{source}: key {e.args[0]!r} is missing") from None
        except (ConfigError, ModelError, ValueError, TypeError) as e:
            raise ModelError(f"{source}: {e}") from None
        if stored is not None and stored != spec.fingerprint:
            raise ModelError(
                f"{source}: fingerprint mismatch (stored {stored}, content {spec.fingerprint}); "
                "the file was edited or is corrupt"
            )
        return spec

    def _with_content(self, content: Mapping[str, Any]) -> FeatureSpec:
        if content.get("df") is None:
            return self
        return replace(
            self,
            vocabulary=None if content.get("vocabulary") is None else tuple(content["vocabulary"]),
            df=tuple(content["df"]),
            n_fit_docs=int(content["n_fit_docs"]),
        )

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write ``feature_spec.json`` into directory ``path`` (or to ``path`` if it ends in .json),
        atomically (temp file + rename). Returns the file written."""
        p = Path(path)
        if p.suffix != ".json":
            p = p / SPEC_FILE
        tmp = p.with_name(f".{p.name}.tmp-{os.getpid()}")
        tmp.write_text(self.to_json(), encoding="utf-8")
        os.replace(tmp, p)
        return p

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> FeatureSpec:
        """Read a spec from a ``.json`` file or a directory holding ``feature_spec.json``."""
        p = Path(path)
        if p.is_dir():
            p = p / SPEC_FILE
        if not p.is_file():
            raise ModelError(f"{p}: feature spec not found (expected {SPEC_FILE} written by featurize)")
        return cls.from_json(p.read_text(encoding="utf-8"), source=str(p))

    # ------------------------------------------------------------------ pickling
    def __getstate__(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "_cache"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        for k, v in state.items():
            object.__setattr__(self, k, v)
        object.__setattr__(self, "_cache", {})

    def describe(self) -> dict[str, Any]:
        """Short JSON-compatible summary (parameters, sizes, fingerprint)."""
        out = self.params()
        out["n_features"] = self.n_features if (self.mode == "hashing" or self.is_fitted) else None
        out["n_fit_docs"] = self.n_fit_docs
        out["fingerprint"] = self.fingerprint
        return out
