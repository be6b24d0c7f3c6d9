"""Text to features (core, no pyspark): the tokenizer and :class:`FeatureSpec`."""

from sparkhc.text.spec import SPEC_FILE, FeatureSpec, hash_index, smooth_idf
from sparkhc.text.tokenize import DEFAULT_TOKEN_PATTERN, ENGLISH_STOP_WORDS, Tokenizer, tokenize

__all__ = [
    "DEFAULT_TOKEN_PATTERN",
    "ENGLISH_STOP_WORDS",
    "SPEC_FILE",
    "FeatureSpec",
    "Tokenizer",
    "hash_index",
    "smooth_idf",
    "tokenize",
]
