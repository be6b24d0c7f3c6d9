"""Tokenizer and FeatureSpec, with expected values worked out by hand."""

from __future__ import annotations

import json
import math
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sparkhc.errors import ConfigError, ModelError, NotFittedError
from sparkhc.text import ENGLISH_STOP_WORDS, FeatureSpec, Tokenizer, hash_index, tokenize

ROOT = Path(__file__).resolve().parents[2]


# ------------------------------------------------------------------ tokenizer
def test_default_pattern_letters_only_min_length_two():
    text = "Hello, World! It's 2024; e-mail foo_bar x y über-cool ABC123 naïve"
    # it's -> it (s too short); e-mail -> mail; foo_bar and ABC123 are not letter-only words
    assert tokenize(text) == ["hello", "world", "it", "mail", "über", "cool", "naïve"]


def test_empty_and_none_text():
    assert tokenize(None) == []
    assert tokenize("") == []
    assert tokenize("1 2 3 !!! a") == []


def test_stop_words():
    assert Tokenizer(stop_words=True).tokenize("The cat and THE hat") == ["cat", "hat"]
    assert len(ENGLISH_STOP_WORDS) == 318
    assert {"the", "and", "yourselves"} <= ENGLISH_STOP_WORDS


def test_pre_tokenized_same_filters_whole_token_match():
    tok = Tokenizer(stop_words=True)
    assert tok.tokenize_tokens(["New", "YORK", "1996", "u.s.", "", None, "the", "a", "Ölpreis"]) == [
        "new",
        "york",
        "ölpreis",
    ]
    assert tok.tokenize_tokens(None) == []


def test_tokens_column_wins_over_text():
    tok = Tokenizer()
    assert tok.tokenize_document("ignored text", ["Kept"]) == ["kept"]
    assert tok.tokenize_document("used text", None) == ["used", "text"]
    assert tok.tokenize_document("text", []) == []


def test_custom_pattern():
    assert tokenize("R2D2 and C3PO, x", token_pattern=r"\b\w+\b") == ["r2d2", "and", "c3po", "x"]


def test_bad_patterns():
    with pytest.raises(ValueError, match="token_pattern"):
        Tokenizer(token_pattern="([a-z]+")
    with pytest.raises(ValueError, match="capturing groups"):
        Tokenizer(token_pattern=r"(\w)\w+")
    with pytest.raises(ConfigError, match="'token_pattern' parameter of FeatureSpec"):
        FeatureSpec(token_pattern="([")


def test_tokenizer_pickles():
    tok = pickle.loads(pickle.dumps(Tokenizer(r"\b\w{3,}\b", True)))
    assert tok == Tokenizer(r"\b\w{3,}\b", True)
    assert tok.tokenize("the cats of 1999") == ["cats", "1999"]


# ------------------------------------------------------------------ FeatureSpec fitting
# Fit documents: d1 = a b a, d2 = b c.  N = 2, df: a=1, b=2, c=1.
FIT_DOCS = [["a", "b", "a"], ["b", "c"]]


def fitted(**params):
    return FeatureSpec(fit_on=None, **params).fit_documents(FIT_DOCS)


def test_fit_vocabulary_sorted_with_df():
    spec = fitted()
    assert spec.vocabulary == ("a", "b", "c")
    assert spec.df == (1, 2, 1)
    assert spec.n_fit_docs == 2
    assert spec.n_features == 3


def test_min_df_max_df():
    docs = [["a", "b"], ["a", "c"], ["a", "d", "c"]]  # df: a=3 b=1 c=2 d=1, N=3
    spec = FeatureSpec(fit_on=None, min_df=2).fit_documents(docs)
    assert spec.vocabulary == ("a", "c")
    spec = FeatureSpec(fit_on=None, min_df=2, max_df=0.9).fit_documents(docs)  # 3 > 0.9 * 3
    assert spec.vocabulary == ("c",)
    assert spec.df == (2,)


def test_fit_document_filter():
    spec = FeatureSpec(fit_on=["train", "dev"], fit_exclude_folds=[3])
    assert spec.fit_on == ("dev", "train")
    assert spec.is_fit_document("train", None)
    assert spec.is_fit_document("dev", 1)
    assert not spec.is_fit_document("dev", 3)
    assert not spec.is_fit_document("test", 1)
    assert not spec.is_fit_document(None, 1)
    everything = FeatureSpec(fit_on=None)
    assert everything.is_fit_document(None, None)


# ------------------------------------------------------------------ transform by hand
DOC = ["b", "a", "a", "zzz"]  # counts: a=2, b=1; zzz is out of vocabulary


def test_transform_tf_counts():
    idx, val, cnt = fitted(weighting="tf", l2_normalize=False).transform_tokens(DOC)
    assert idx.dtype == np.int32 and val.dtype == np.float32 and cnt.dtype == np.float32
    assert idx.tolist() == [0, 1]
    assert val.tolist() == [2.0, 1.0]
    assert cnt.tolist() == [2.0, 1.0]


def test_transform_tf_l2():
    idx, val, cnt = fitted(weighting="tf", l2_normalize=True).transform_tokens(DOC)
    np.testing.assert_allclose(val, [2 / math.sqrt(5), 1 / math.sqrt(5)], rtol=1e-6)
    assert cnt.tolist() == [2.0, 1.0]


def test_transform_log_tf():
    _, val, _ = fitted(weighting="log_tf", l2_normalize=False).transform_tokens(DOC)
    np.testing.assert_allclose(val, [math.log(3), math.log(2)], rtol=1e-6)


def test_transform_log_tf_idf_smoothed():
    spec = fitted(weighting="log_tf_idf", l2_normalize=False)
    # idf = ln((1 + N) / (1 + df)) + 1 with N = 2: a (df 1) -> ln(1.5) + 1; b (df 2) -> 1.0
    np.testing.assert_allclose(spec.idf, [math.log(1.5) + 1, 1.0, math.log(1.5) + 1])
    _, val, _ = spec.transform_tokens(DOC)
    a = math.log(3) * (1 + math.log(1.5))  # 1.5440...
    b = math.log(2) * 1.0
    np.testing.assert_allclose(val, [a, b], rtol=1e-6)
    _, val2, _ = fitted(weighting="log_tf_idf", l2_normalize=True).transform_tokens(DOC)
    np.testing.assert_allclose(val2, np.array([a, b]) / math.hypot(a, b), rtol=1e-6)
    assert abs(float(np.linalg.norm(val2.astype(np.float64))) - 1.0) < 1e-6


def test_transform_empty_and_oov_documents():
    spec = fitted()
    for doc in ([], ["zzz", "yyy"]):
        idx, val, cnt = spec.transform_tokens(doc)
        assert idx.size == val.size == cnt.size == 0
        assert idx.dtype == np.int32


def test_transform_many_matches_single():
    spec = fitted()
    docs = [DOC, [], ["c", "c", "b"], ["zzz"], ["a"]]
    offsets, idx, val, cnt = spec.transform_many(docs)
    assert offsets.tolist() == [0, 2, 2, 4, 4, 5]
    for i, d in enumerate(docs):
        i1, v1, c1 = spec.transform_tokens(d)
        sl = slice(offsets[i], offsets[i + 1])
        assert idx[sl].tolist() == i1.tolist()
        assert val[sl].tolist() == v1.tolist()
        assert cnt[sl].tolist() == c1.tolist()


def test_unfitted_vocab_spec_cannot_transform():
    with pytest.raises(NotFittedError):
        FeatureSpec().transform_tokens(["a"])
    with pytest.raises(NotFittedError):
        FeatureSpec(mode="hashing").transform_tokens(["a"])  # log_tf_idf needs df


# ------------------------------------------------------------------ hashing
def test_hash_index_is_crc32():
    # CRC-32 of b"hello" is the well-known 0x3610A686
    assert hash_index("hello", 2**32) == 0x3610A686
    assert hash_index("hello", 16) == 0x6


def test_hashing_transform_no_fit_needed_and_collisions_add():
    spec = FeatureSpec(mode="hashing", hash_bits=1, weighting="tf", l2_normalize=False)
    idx, val, cnt = spec.transform_tokens(["x", "y", "z", "x"])
    assert float(cnt.sum()) == 4.0
    assert idx.tolist() == sorted(set(idx.tolist()))
    assert spec.n_features == 2


def test_hashing_independent_of_python_hash_seed():
    code = (
        "from sparkhc.text import FeatureSpec;"
        "s = FeatureSpec(mode='hashing', hash_bits=10, weighting='tf', l2_normalize=False);"
        "print(s.transform_tokens(['alpha', 'beta', 'gamma', 'alpha'])[0].tolist())"
    )
    outs = set()
    for seed in ("1", "2"):
        res = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
            env={"PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT)},
        )
        outs.add(res.stdout.strip())
    expected = sorted({hash_index(t, 1024) for t in ("alpha", "beta", "gamma")})
    assert outs == {str(expected)}


def test_hashing_fit_df():
    spec = FeatureSpec(mode="hashing", hash_bits=4, fit_on=None).fit_documents([["hello", "hello"], ["hello"]])
    assert spec.df is not None and len(spec.df) == 16
    assert spec.df[6] == 2 and sum(spec.df) == 2


# ------------------------------------------------------------------ params, json
def test_param_validation_messages():
    with pytest.raises(ConfigError, match=r"The 'weighting' parameter of FeatureSpec must be one of"):
        FeatureSpec(weighting="bm25")
    with pytest.raises(ConfigError, match="'max_df'"):
        FeatureSpec(max_df=1.5)
    with pytest.raises(ConfigError, match="'min_df'"):
        FeatureSpec(min_df=0)
    with pytest.raises(ConfigError, match="'hash_bits'"):
        FeatureSpec(mode="hashing", hash_bits=40)
    with pytest.raises(ConfigError, match="mode='vocab' only"):
        FeatureSpec(mode="hashing", min_df=2)
    with pytest.raises(ConfigError, match="unknown FeatureSpec parameter"):
        FeatureSpec.from_params({"weigthing": "tf"})


def test_from_params_accepts_toml_style_values():
    spec = FeatureSpec.from_params({"fit_on": ["train"], "max_df": 1, "mode": "vocab"})
    assert spec.fit_on == ("train",) and spec.max_df == 1.0
    assert FeatureSpec.from_params(spec.params()) == spec


def test_json_round_trip_and_fingerprint(tmp_path):
    spec = FeatureSpec(fit_on=["train"], min_df=1, weighting="log_tf_idf").fit_documents(FIT_DOCS)
    text = spec.to_json()
    assert text == spec.to_json()  # deterministic
    back = FeatureSpec.from_json(text)
    assert back == spec
    assert back.fingerprint == spec.fingerprint
    np.testing.assert_array_equal(back.idf, spec.idf)
    content = json.loads(text)
    assert content["vocabulary"] == ["a", "b", "c"] and content["df"] == [1, 2, 1]
    assert content["fingerprint"] == spec.fingerprint
    path = spec.save(tmp_path)
    assert path.name == "feature_spec.json"
    assert FeatureSpec.load(tmp_path) == spec
    # a different fit gives a different fingerprint
    assert FeatureSpec(fit_on=None).fit_documents([["a"]]).fingerprint != spec.fingerprint


def test_json_tampering_detected(tmp_path):
    spec = fitted()
    content = json.loads(spec.to_json())
    content["df"] = [1, 1, 1]
    with pytest.raises(ModelError, match="fingerprint mismatch"):
        FeatureSpec.from_json(json.dumps(content), source="x.json")
    with pytest.raises(ModelError, match="not valid JSON"):
        FeatureSpec.from_json(spec.to_json()[:50])
    with pytest.raises(ModelError, match="not found"):
        FeatureSpec.load(tmp_path / "nothing")


def test_spec_pickles_without_caches():
    spec = fitted()
    spec.transform_tokens(["a"])  # fills the caches
    back = pickle.loads(pickle.dumps(spec))
    assert back == spec
    assert back.transform_tokens(DOC)[0].tolist() == [0, 1]


def test_text_package_does_not_import_pyspark():
    code = "import sys, sparkhc.text; print('pyspark' in sys.modules)"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert res.stdout.strip() == "False"


def test_ascii_fast_path_matches_the_unicode_pattern():
    """The default pattern runs an ASCII-only regex on ASCII text: same tokens as the pattern itself
    (Python's re in Unicode mode, the reference) on random ASCII strings full of digit, underscore
    and punctuation boundaries, and on text that becomes ASCII only when lowercased (Kelvin sign)."""
    import random
    import re

    from sparkhc.text.tokenize import DEFAULT_TOKEN_PATTERN, Tokenizer

    ref = re.compile(DEFAULT_TOKEN_PATTERN)
    tok = Tokenizer()
    rng = random.Random(0)
    alphabet = "abcXYZ019_ -.'\n\t" + "é"
    for _ in range(2000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        assert tok.tokenize(text) == ref.findall(text.lower()), text
    assert tok.tokenize("\u212aing abc1 de_f gh") == ref.findall("\u212aing abc1 de_f gh".lower()) == ["king", "gh"]
