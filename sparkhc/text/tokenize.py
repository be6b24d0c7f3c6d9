"""A deterministic tokenizer for bag-of-words features.

Rules (the same on the driver and on every executor, no locale or hash-seed dependence):

1. Lowercase with :meth:`str.lower` (Unicode-aware; no other normalisation).
2. Keep the tokens matched by ``token_pattern`` (Python :mod:`re`, Unicode). The default,
   :data:`DEFAULT_TOKEN_PATTERN` = ``\\b[^\\W\\d_]{2,}\\b``, keeps runs of two or more Unicode
   letters standing as whole words: ``"Hello, wörld!"`` gives ``hello``, ``wörld``; digits,
   underscores and letter/digit mixtures (``"abc123"``) give nothing; ``"don't"`` gives ``don``
   (the ``t`` is too short).
3. Optionally drop English stop words (:data:`ENGLISH_STOP_WORDS`, the 318-word Glasgow IR list
   also used by scikit-learn), compared after lowercasing.

Pre-tokenized input (the ``tokens`` column, e.g. RCV1) goes through the same filters: each token is
lowercased and kept iff the *whole* token matches ``token_pattern`` and is not a stop word. Tokens
are never split further, so ``"u.s."`` is dropped rather than becoming ``"u"``, ``"s"``.

Examples
--------
>>> Tokenizer().tokenize("The quick brown fox, 2 times!")
['the', 'quick', 'brown', 'fox', 'times']
>>> Tokenizer(stop_words=True).tokenize("The quick brown fox, 2 times!")
['quick', 'brown', 'fox', 'times']
>>> Tokenizer().tokenize_tokens(["New", "York", "1996", "u.s."])
['new', 'york']
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

#: Letters-only words of length >= 2 (Unicode letters: ``[^\W\d_]`` is "word char minus digits and
#: underscore").
DEFAULT_TOKEN_PATTERN = r"\b[^\W\d_]{2,}\b"
#: The default pattern on ASCII text: there ``\w`` is ``[a-zA-Z0-9_]`` in Unicode mode too, so
#: ``[^\W\d_]`` is ``[a-zA-Z]`` (``[a-z]`` after lowercasing) and the matches are the same; the
#: ASCII-only engine is about twice as fast (most documents of English corpora are ASCII).
_DEFAULT_ASCII = re.compile(r"\b[a-z]{2,}\b", re.ASCII)
#: Distinct pre-tokenized tokens whose filtered form a Tokenizer remembers (then it starts over).
_SEEN_MAX = 1 << 20

#: The Glasgow Information Retrieval Group stop list as shipped by scikit-learn
#: (``sklearn.feature_extraction.text.ENGLISH_STOP_WORDS``), 318 words.
ENGLISH_STOP_WORDS: frozenset[str] = frozenset(
    """
    a about above across after afterwards again against all almost alone along already also although
    always am among amongst amoungst amount an and another any anyhow anyone anything anyway anywhere
    are around as at back be became because become becomes becoming been before beforehand behind being
    below beside besides between beyond bill both bottom but by call can cannot cant co con could
    couldnt cry de describe detail do done down due during each eg eight either eleven else elsewhere
    empty enough etc even ever every everyone everything everywhere except few fifteen fifty fill find
    fire first five for former formerly forty found four from front full further get give go had has
    hasnt have he hence her here hereafter hereby herein hereupon hers herself him himself his how
    however hundred i ie if in inc indeed interest into is it its itself keep last latter latterly least
    less ltd made many may me meanwhile might mill mine more moreover most mostly move much must my
    myself name namely neither never nevertheless next nine no nobody none noone nor not nothing now
    nowhere of off often on once one only onto or other others otherwise our ours ourselves out over own
    part per perhaps please put rather re same see seem seemed seeming seems serious several she should
    show side since sincere six sixty so some somehow someone something sometime sometimes somewhere
    still such system take ten than that the their them themselves then thence there thereafter thereby
    therefore therein thereupon these they thick thin third this those though three through throughout
    thru thus to together too top toward towards twelve twenty two un under until up upon us very via
    was we well were what whatever when whence whenever where whereafter whereas whereby wherein
    whereupon wherever whether which while whither who whoever whole whom whose why will with within
    without would yet you your yours yourself yourselves
    """.split()
)


@dataclass(frozen=True)
class Tokenizer:
    """Lowercase, match ``token_pattern``, optionally drop English stop words.

    Parameters
    ----------
    token_pattern : str
        Python regular expression selecting tokens (see the module docstring).
    stop_words : bool
        Drop the words of :data:`ENGLISH_STOP_WORDS`.

    The instance is immutable and picklable (the compiled pattern is rebuilt on unpickling).
    """

    token_pattern: str = DEFAULT_TOKEN_PATTERN
    stop_words: bool = False
    _regex: re.Pattern[str] = field(init=False, repr=False, compare=False)
    _ascii: re.Pattern[str] | None = field(init=False, repr=False, compare=False)
    _seen: dict[str, str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        try:
            regex = re.compile(self.token_pattern)
        except re.error as e:
            raise ValueError(
                f"The 'token_pattern' parameter of Tokenizer must be a valid regular expression. "
                f"Got {self.token_pattern!r} instead ({e})."
            ) from None
        if regex.groups:
            # re.findall returns groups instead of whole matches when the pattern has groups
            raise ValueError(
                "The 'token_pattern' parameter of Tokenizer must not contain capturing groups "
                f"(use (?:...)). Got {self.token_pattern!r} instead."
            )
        object.__setattr__(self, "_regex", regex)
        object.__setattr__(self, "_ascii", _DEFAULT_ASCII if self.token_pattern == DEFAULT_TOKEN_PATTERN else None)
        object.__setattr__(self, "_seen", {})

    def __getstate__(self) -> dict[str, object]:
        return {"token_pattern": self.token_pattern, "stop_words": self.stop_words}

    def __setstate__(self, state: dict[str, object]) -> None:
        object.__setattr__(self, "token_pattern", state["token_pattern"])
        object.__setattr__(self, "stop_words", state["stop_words"])
        self.__post_init__()

    def tokenize(self, text: str | None) -> list[str]:
        """Tokens of a raw text, in order (``None`` or ``""`` give ``[]``)."""
        if not text:
            return []
        low = text.lower()
        regex = self._ascii if self._ascii is not None and low.isascii() else self._regex
        toks = regex.findall(low)
        if self.stop_words:
            return [t for t in toks if t not in ENGLISH_STOP_WORDS]
        return toks

    def tokenize_tokens(self, tokens: Iterable[str | None] | None) -> list[str]:
        """Filter pre-tokenized input: lowercase, keep whole-pattern matches, drop stop words."""
        if tokens is None:
            return []
        return list(filter(None, self.token_forms(tokens)))

    def token_forms(self, tokens: Iterable[str | None]) -> list[str]:
        """The form :meth:`tokenize_tokens` keeps of each pre-tokenized token, ``""`` when it drops it."""
        # each distinct token is filtered once (a vocabulary repeats): token -> kept form or ""
        seen = self._seen
        if len(seen) > _SEEN_MAX:
            seen.clear()
        if not isinstance(tokens, list | tuple):
            tokens = list(tokens)
        try:
            return list(map(seen.__getitem__, tokens))
        except KeyError:
            for t in tokens:
                if t not in seen:
                    seen[t] = self._filter_token(t) if t else ""  # type: ignore[index]
            return list(map(seen.__getitem__, tokens))

    def _filter_token(self, t: str) -> str:
        t = t.lower()
        if self._regex.fullmatch(t) is None or (self.stop_words and t in ENGLISH_STOP_WORDS):
            return ""
        return t

    def tokenize_document(self, text: str | None, tokens: Sequence[str | None] | None) -> list[str]:
        """Tokens of one raw document: ``tokens`` when not null (it wins), else ``text``."""
        if tokens is not None:
            return self.tokenize_tokens(tokens)
        return self.tokenize(text)


def tokenize(text: str | None, token_pattern: str = DEFAULT_TOKEN_PATTERN, stop_words: bool = False) -> list[str]:
    """Shortcut for ``Tokenizer(token_pattern, stop_words).tokenize(text)``."""
    return Tokenizer(token_pattern, stop_words).tokenize(text)
