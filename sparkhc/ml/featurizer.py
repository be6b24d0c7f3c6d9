"""``SparkhcFeaturizer``: sparkhc's tokenizer and weighting as a Pipeline stage.

``fit`` tokenizes the documents and fits the vocabulary and idf with the code of ``sparkhc
featurize`` (:func:`sparkhc.spark.featurize.tokenize_partition`, :func:`~sparkhc.spark.featurize.fit_spec`)
on every row it is given (a Pipeline fits on the training rows). ``transform`` adds sparkhc's
features layout (``indices``, ``values``, ``counts``; the ``indices`` column carries the number
of features), which :class:`HierarchicalClassifier` reads when it finds no vector column. The
FeatureSpec (``feature_spec.json``) is the one ``sparkhc featurize`` writes for the same
documents and settings.
"""

from __future__ import annotations

import functools
import json
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.ml import Estimator, Model
from pyspark.ml.param import Param, Params, TypeConverters
from pyspark.ml.util import (
    DefaultParamsReadable,
    DefaultParamsReader,
    DefaultParamsWritable,
    MLReadable,
    MLReader,
    MLWritable,
    MLWriter,
)
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from sparkhc.batch import COUNTS, DOC_ID, FOLD, INDICES, LABELS, SPLIT, TEXT, TOKENS, VALUES
from sparkhc.config import FeaturizeConfig
from sparkhc.errors import ConfigError, InputDataError, ModelError, ParamError, SchemaError
from sparkhc.ml._input import META_KEY
from sparkhc.ml._params import CheckedParams
from sparkhc.text.spec import SPEC_FILE, FeatureSpec

#: FeatureSpecs of the featurizer models of this driver, by fingerprint (the last few): a
#: HierarchicalClassifier fitted on their output saves the spec in its model folder
_SPECS: dict[str, FeatureSpec] = {}
_MAX_SPECS = 16


def _remember(spec: FeatureSpec) -> None:
    _SPECS[spec.fingerprint] = spec
    while len(_SPECS) > _MAX_SPECS:
        del _SPECS[next(iter(_SPECS))]


def spec_of(fingerprint: str | None) -> FeatureSpec | None:
    """The FeatureSpec of a featurizer model of this driver with this fingerprint, if any."""
    return _SPECS.get(fingerprint) if fingerprint else None


_OUT = f"struct<{INDICES}: array<int>, {VALUES}: array<float>, {COUNTS}: array<float>>"


class _FeaturizerParams(CheckedParams):
    inputCol: Param[str] = Param(Params._dummy(), "inputCol", "document text, string",
                                 typeConverter=TypeConverters.toString)
    tokensCol: Param[str] = Param(Params._dummy(), "tokensCol", "pre-tokenized documents, array<string> "
                                  "('' = none; used where the text is null, as sparkhc featurize does)",
                                  typeConverter=TypeConverters.toString)
    mode: Param[str] = Param(Params._dummy(), "mode", "vocab | hashing (featurize.mode)",
                             typeConverter=TypeConverters.toString)
    weighting: Param[str] = Param(Params._dummy(), "weighting", "tf | log_tf | log_tf_idf (featurize.weighting)",
                                  typeConverter=TypeConverters.toString)
    minDF: Param[int] = Param(Params._dummy(), "minDF", "vocab: minimum document count of a term (featurize.min_df)",
                              typeConverter=TypeConverters.toInt)
    maxDF: Param[float] = Param(Params._dummy(), "maxDF", "vocab: maximum document fraction of a term, (0, 1] "
                                "(featurize.max_df)", typeConverter=TypeConverters.toFloat)
    stopWords: Param[bool] = Param(Params._dummy(), "stopWords", "drop English stop words (featurize.stop_words)",
                                   typeConverter=TypeConverters.toBoolean)
    l2Normalize: Param[bool] = Param(Params._dummy(), "l2Normalize", "L2-normalise (featurize.l2_normalize)",
                                     typeConverter=TypeConverters.toBoolean)
    hashBits: Param[int] = Param(Params._dummy(), "hashBits", "hashing: 2^hashBits features (featurize.hash_bits)",
                                 typeConverter=TypeConverters.toInt)
    tokenPattern: Param[str] = Param(Params._dummy(), "tokenPattern", "token regular expression ('' = sparkhc's "
                                     "default, featurize.token_pattern)", typeConverter=TypeConverters.toString)

    def __init__(self) -> None:
        super().__init__()
        fc = FeaturizeConfig()  # the defaults of sparkhc featurize (sparkhc/conf/defaults.toml)
        self._setDefault(inputCol=TEXT, tokensCol="", mode=fc.mode, weighting=fc.weighting, minDF=fc.min_df,
                         maxDF=fc.max_df, stopWords=fc.stop_words, l2Normalize=fc.l2_normalize,
                         hashBits=fc.hash_bits, tokenPattern=fc.token_pattern)

    def getInputCol(self) -> str:
        return self.getOrDefault(self.inputCol)

    def getTokensCol(self) -> str:
        return self.getOrDefault(self.tokensCol)

    def getMode(self) -> str:
        return self.getOrDefault(self.mode)

    def getWeighting(self) -> str:
        return self.getOrDefault(self.weighting)

    def getMinDF(self) -> int:
        return self.getOrDefault(self.minDF)

    def getMaxDF(self) -> float:
        return self.getOrDefault(self.maxDF)

    def getStopWords(self) -> bool:
        return self.getOrDefault(self.stopWords)

    def getL2Normalize(self) -> bool:
        return self.getOrDefault(self.l2Normalize)

    def getHashBits(self) -> int:
        return self.getOrDefault(self.hashBits)

    def getTokenPattern(self) -> str:
        return self.getOrDefault(self.tokenPattern)

    def setInputCol(self, value: str) -> Any:
        return self._set(inputCol=value)

    def setTokensCol(self, value: str) -> Any:
        return self._set(tokensCol=value)

    #: Param -> the FeatureSpec parameter it sets (``[featurize]`` key)
    SPEC_PARAMS = {"mode": "mode", "weighting": "weighting", "minDF": "min_df", "maxDF": "max_df",
                   "stopWords": "stop_words", "l2Normalize": "l2_normalize", "hashBits": "hash_bits",
                   "tokenPattern": "token_pattern"}

    def _check_value(self, name: str) -> None:
        super()._check_value(name)
        if name in self.SPEC_PARAMS:
            self.check_spec()

    def check_spec(self) -> None:
        """The FeatureSpec of the Params is valid (else a ParamError naming the Param)."""
        try:
            FeatureSpec.from_params(self.spec_params())
        except ConfigError as e:
            names = [p for p, key in self.SPEC_PARAMS.items() if f"'{key}'" in str(e)]
            raise ParamError(f"{self._who()}: Param {' / '.join(names) or 'of the FeatureSpec'}: {e}") from None

    def spec_params(self) -> dict[str, Any]:
        """The FeatureSpec parameters, as ``sparkhc featurize`` builds them from ``[featurize]``
        (fitted on every row given to ``fit``)."""
        g = self.getOrDefault
        p: dict[str, Any] = {"mode": g(self.mode), "weighting": g(self.weighting), "l2_normalize": g(self.l2Normalize),
                             "stop_words": g(self.stopWords), "fit_on": None, "fit_exclude_folds": None}
        if p["mode"] == "vocab":
            p.update(min_df=g(self.minDF), max_df=g(self.maxDF))
        else:
            p.update(hash_bits=g(self.hashBits))
        if g(self.tokenPattern):
            p["token_pattern"] = g(self.tokenPattern)
        return p

    def text_columns(self, df: DataFrame, who: str) -> tuple[Column, Column]:
        """The text and tokens columns of ``df`` (checked; a missing one is null)."""
        text, tokens = self.getOrDefault(self.inputCol), self.getOrDefault(self.tokensCol)
        types = {f.name: f.dataType.simpleString() for f in df.schema.fields}
        if text not in types and not tokens:
            raise SchemaError(f"{who}: input column {text!r} is missing (columns: {df.columns})")
        if text in types and types[text] != "string":
            raise SchemaError(f"{who}: input column {text!r} has type {types[text]}, expected string")
        if tokens and types.get(tokens) != "array<string>":
            raise SchemaError(f"{who}: tokens column {tokens!r} has type {types.get(tokens, 'missing')}, expected "
                              "array<string>")
        return ((F.col(text) if text in types else F.lit(None).cast("string")).alias(TEXT),
                (F.col(tokens) if tokens else F.lit(None).cast("array<string>")).alias(TOKENS))

    def raw_documents(self, df: DataFrame, who: str) -> DataFrame:
        """The text (and tokens) of ``df`` as sparkhc's raw-documents columns."""
        text, tokens = self.text_columns(df, who)
        return df.select(
            F.lit("").alias(DOC_ID), F.lit(None).cast("string").alias(SPLIT), F.lit(None).cast("int").alias(FOLD),
            F.array().cast("array<string>").alias(LABELS), text, tokens,
        )


class SparkhcFeaturizer(Estimator, _FeaturizerParams, DefaultParamsReadable, DefaultParamsWritable):
    """sparkhc's tokenizer, vocabulary and weighting (``sparkhc featurize``) as an Estimator."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__()
        self._set(**kwargs)

    def setParams(self, **kwargs: Any) -> SparkhcFeaturizer:
        return self._set(**kwargs)

    def setMode(self, value: str) -> SparkhcFeaturizer:
        return self._set(mode=value)

    def setWeighting(self, value: str) -> SparkhcFeaturizer:
        return self._set(weighting=value)

    def setMinDF(self, value: int) -> SparkhcFeaturizer:
        return self._set(minDF=value)

    def setMaxDF(self, value: float) -> SparkhcFeaturizer:
        return self._set(maxDF=value)

    def setStopWords(self, value: bool) -> SparkhcFeaturizer:
        return self._set(stopWords=value)

    def setL2Normalize(self, value: bool) -> SparkhcFeaturizer:
        return self._set(l2Normalize=value)

    def setHashBits(self, value: int) -> SparkhcFeaturizer:
        return self._set(hashBits=value)

    def setTokenPattern(self, value: str) -> SparkhcFeaturizer:
        return self._set(tokenPattern=value)

    def _fit(self, dataset: DataFrame) -> SparkhcFeaturizerModel:
        from sparkhc.spark.featurize import TOKENIZED_SCHEMA, fit_spec, tokenize_partition

        who = "SparkhcFeaturizer"
        try:
            spec = FeatureSpec.from_params(self.spec_params())
        except ConfigError as e:
            raise ConfigError(f"{who}: {e}") from None
        raw = self.raw_documents(dataset, who)
        sc = dataset.sparkSession.sparkContext
        bc = sc.broadcast(spec)
        try:
            tokens = raw.mapInArrow(functools.partial(tokenize_partition, spec_bc=bc), TOKENIZED_SCHEMA)
            try:
                fitted = fit_spec(tokens, spec)
            except InputDataError:
                raise InputDataError(f"{who}: the DataFrame has no rows; nothing to fit") from None
        finally:
            bc.unpersist()
        return self._copyValues(SparkhcFeaturizerModel._create(fitted))


def _features_fn(spec_bc: Any) -> Any:
    def run(arrays: Iterator[pa.Array]) -> Iterator[pa.Array]:
        from sparkhc.spark.featurize import _tokens_of

        spec = spec_bc.value
        for arr in arrays:
            text, tokens = arr.flatten()
            batch = pa.RecordBatch.from_arrays([text, tokens], names=[TEXT, TOKENS])
            offsets, idx, val, cnt = spec.transform_many(_tokens_of(batch, spec))
            off = pa.array(offsets, type=pa.int32())
            yield pa.StructArray.from_arrays(
                [pa.ListArray.from_arrays(off, pa.array(idx, type=pa.int32())),
                 pa.ListArray.from_arrays(off, pa.array(val, type=pa.float32())),
                 pa.ListArray.from_arrays(off, pa.array(cnt, type=pa.float32()))],
                names=[INDICES, VALUES, COUNTS])

    return run


class SparkhcFeaturizerModel(Model, _FeaturizerParams, MLReadable, MLWritable):
    """A fitted :class:`SparkhcFeaturizer`: adds ``indices``, ``values`` and ``counts``."""

    def __init__(self) -> None:
        super().__init__()
        self._spec: FeatureSpec | None = None

    @classmethod
    def _create(cls, spec: FeatureSpec) -> SparkhcFeaturizerModel:
        m = cls()
        m._spec = spec
        _remember(spec)
        return m

    @property
    def spec(self) -> FeatureSpec:
        """The fitted :class:`~sparkhc.text.spec.FeatureSpec` (what ``feature_spec.json`` holds)."""
        if self._spec is None:
            raise ModelError("SparkhcFeaturizerModel holds no fitted FeatureSpec")
        return self._spec

    def _transform(self, dataset: DataFrame) -> DataFrame:
        from pyspark.sql.functions import ArrowUDFType, arrow_udf

        who = "SparkhcFeaturizerModel"
        text, tokens = self.text_columns(dataset, who)
        spec = self.spec
        bc = dataset.sparkSession.sparkContext.broadcast(spec)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            udf = arrow_udf(_features_fn(bc), _OUT, ArrowUDFType.SCALAR_ITER)
        tmp = f"__sparkhc_{uuid.uuid4().hex[:8]}"
        md = {META_KEY: {"n_features": spec.n_features, "feature_spec_fingerprint": spec.fingerprint}}
        out = dataset.withColumn(tmp, udf(F.struct(text, tokens)))
        return (out.withColumn(INDICES, F.col(tmp)[INDICES].alias(INDICES, metadata=md))
                .withColumn(VALUES, F.col(tmp)[VALUES]).withColumn(COUNTS, F.col(tmp)[COUNTS]).drop(tmp))

    def write(self) -> MLWriter:
        from sparkhc.ml.io import StageWriter

        def body(staging: Path) -> None:
            staging.mkdir(parents=True)
            self.spec.save(staging / SPEC_FILE)

        return StageWriter(self, body)

    @classmethod
    def read(cls) -> MLReader[SparkhcFeaturizerModel]:
        return _FeaturizerReader(cls)


class _FeaturizerReader(MLReader[SparkhcFeaturizerModel]):
    def __init__(self, cls: type[SparkhcFeaturizerModel]) -> None:
        super().__init__()
        self.cls = cls

    def load(self, path: str) -> SparkhcFeaturizerModel:
        from sparkhc.ml.io import PARAMS_DIR, PARAMS_FILE, local_path

        root = local_path(path)
        inst = self.cls._create(FeatureSpec.load(root))
        md = json.loads((root / PARAMS_DIR / PARAMS_FILE).read_text(encoding="utf-8"))
        DefaultParamsReader.getAndSetParams(inst, md)
        inst._resetUid(md["uid"])
        return inst
