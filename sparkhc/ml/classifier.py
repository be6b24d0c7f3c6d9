"""``HierarchicalClassifier`` (an Estimator) and ``HierarchicalClassificationModel`` (its Model).

``fit`` trains any registered model with the training code of ``sparkhc train``
(:func:`sparkhc.spark.training.fit_model`, the model built by
:func:`sparkhc.spark.pipelines.new_model`), ``transform`` decodes on the executors with the
broadcast model (:func:`sparkhc.spark.predict.decode_batch`), and a saved model is a sparkhc model
folder (:func:`sparkhc.persistence.save_model`) that ``sparkhc predict`` reads (and ``sparkhc
reclassify``, when the model was trained on sparkhc's features, whose ``feature_spec.json`` the
folder keeps); Spark's Param metadata is kept in its ``metadata/`` sub-folder (what ``PipelineModel.load``
reads to find the class).
"""

from __future__ import annotations

import functools
import json
import logging
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

from sparkhc.batch import LABELS
from sparkhc.config import Config, TrainConfig, from_dict, load_config
from sparkhc.errors import ConfigError, InputDataError, ModelError, ParamError, SchemaError
from sparkhc.features import Selection
from sparkhc.ml._input import META_KEY, FeatureInput, check_labels_column, detect_features, training_rows
from sparkhc.ml._params import TRAIN_PARAMS, HasSparkhcColumns, HasTrainingParams, load_taxonomy
from sparkhc.ml.io import PARAMS_DIR, PARAMS_FILE, StageWriter, local_path
from sparkhc.models import get_model_class
from sparkhc.models.base import HierModel
from sparkhc.persistence import load_model, save_model, state_to_bytes
from sparkhc.taxonomy import Taxonomy

log = logging.getLogger(__name__)

#: version of the Spark Param metadata kept in a saved model's ``metadata/`` folder
ML_FORMAT_VERSION = 1


@functools.cache
def _placeholder_taxonomy() -> Taxonomy:
    """Two class spaces of two classes (a tree and a valid multi-dimensional taxonomy): what the
    model parameters are checked on when they are set, before the real taxonomy is read."""
    return Taxonomy.from_edges([("ROOT", "a"), ("ROOT", "b"), ("a", "a1"), ("a", "a2"), ("b", "b1"), ("b", "b2")],
                               source="a placeholder taxonomy")


# ---------------------------------------------------------------------------------------- estimator
class HierarchicalClassifier(Estimator, HasSparkhcColumns, HasTrainingParams, DefaultParamsReadable,
                             DefaultParamsWritable):
    """Hierarchical multi-label classifier: one estimator for every registered sparkhc model.

    Example::

        clf = HierarchicalClassifier(taxonomy="taxonomy.tsv", model="global", epochs=10,
                                     featuresCol="tfidf", labelsCol="labels")
        model = clf.fit(train_df)
        model.transform(test_df).select("doc_id", "prediction")
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__()
        self._set(**kwargs)

    def setParams(self, **kwargs: Any) -> HierarchicalClassifier:
        """Set several Params at once (checked together: e.g. ``model`` with its ``modelParams``)."""
        return self._set(**kwargs)

    def setTaxonomy(self, value: Any) -> HierarchicalClassifier:
        return self._set(taxonomy=value)

    def setModel(self, value: str) -> HierarchicalClassifier:
        return self._set(model=value)

    def setEpochs(self, value: int) -> HierarchicalClassifier:
        return self._set(epochs=value)

    def setShards(self, value: int) -> HierarchicalClassifier:
        return self._set(shards=value)

    def setSeed(self, value: int) -> HierarchicalClassifier:
        return self._set(seed=value)

    def setCalibrate(self, value: str) -> HierarchicalClassifier:
        return self._set(calibrate=value)

    def setCalibrationFolds(self, value: int) -> HierarchicalClassifier:
        return self._set(calibrationFolds=value)

    def setCalibrationDocuments(self, value: int) -> HierarchicalClassifier:
        return self._set(calibrationDocuments=value)

    def setMaxEpochs(self, value: int) -> HierarchicalClassifier:
        return self._set(maxEpochs=value)

    def setPatience(self, value: int) -> HierarchicalClassifier:
        return self._set(patience=value)

    def setValidationFolds(self, value: int) -> HierarchicalClassifier:
        return self._set(validationFolds=value)

    def setRefit(self, value: bool) -> HierarchicalClassifier:
        return self._set(refit=value)

    def setCSearch(self, value: str) -> HierarchicalClassifier:
        return self._set(cSearch=value)

    def setTimeBudget(self, value: float) -> HierarchicalClassifier:
        return self._set(timeBudget=value)

    def setC(self, value: float) -> HierarchicalClassifier:
        return self._set(C=value)

    def setModelParams(self, value: dict[str, Any]) -> HierarchicalClassifier:
        return self._set(modelParams=value)

    def setHandleInvalid(self, value: str) -> HierarchicalClassifier:
        return self._set(handleInvalid=value)

    def setScoredLabels(self, value: list[str]) -> HierarchicalClassifier:
        return self._set(scoredLabels=value)

    # -- settings --------------------------------------------------------------------------------
    def _check_together(self, names: frozenset[str]) -> None:
        """``model``, ``modelParams`` and ``C`` together: a registered model, parameters it has, in
        range (checked by the model on a placeholder taxonomy; what depends on the real taxonomy or
        data is checked by ``fit``)."""
        if not names & {"model", "modelParams", "C"}:
            return
        from sparkhc.spark.pipelines import model_params

        who = self._who()
        try:
            _, cls, cfg = self._model_config(who)
        except ParamError as e:
            if "model" in names and self.isSet(self.modelParams) and "modelParams" not in names:
                raise ParamError(f"{e} (to change the model and its modelParams at once: "
                                 "setParams(model=..., modelParams=...))") from None
            raise
        try:
            cls(_placeholder_taxonomy(), 1, **model_params(cls, cfg)).validate_params()
        except ModelError:
            pass  # about the taxonomy or the data: fit checks it on the real ones
        except ConfigError as e:
            via = "C" if self.isSet(self.C) and "'C' parameter" in str(e) else "modelParams"
            raise ParamError(f"{who}: Param {via}: {e}") from None

    def training_config(self, who: str = "HierarchicalClassifier") -> tuple[str, Any, Config]:
        """(model name, model class, Config): the CLI defaults with ``[train]`` and
        ``[model.<name>]`` set from the Params (every value checked)."""
        self.check_training_params(who)
        return self._model_config(who)

    def _model_config(self, who: str) -> tuple[str, Any, Config]:
        name = self.getOrDefault(self.model)
        try:
            cls = get_model_class(name)
        except ConfigError as e:
            raise ParamError(f"{who}: Param model: {e}") from None
        data = load_config().to_dict()
        defaults = TrainConfig()
        data["train"].update({key: type(getattr(defaults, key))(self.getOrDefault(param))
                              for param, key in TRAIN_PARAMS.items()}, checkpoint=False)
        user = dict(self.getOrDefault(self.modelParams))
        for key in ("epochs", "seed"):
            if key in user:
                raise ParamError(f"{who}: modelParams may not hold {key!r}: set the Param {key} instead")
        mp = dict(data["model"].get(name, {}))
        if self.isSet(self.C):
            if "C" in user:
                raise ParamError(f"{who}: C is set both as the Param C and in modelParams")
            if "C" not in cls.defaults:
                raise ParamError(f"{who}: Param C is set, but the model {name!r} has no parameter C")
            user["C"] = float(self.getOrDefault(self.C))
        unknown = sorted(set(user) - set(cls.defaults))
        if unknown:
            raise ParamError(f"{who}: modelParams {unknown} are not parameters of the model {name!r}; "
                             f"known: {sorted(k for k in cls.defaults if k not in ('epochs', 'seed'))}")
        mp.update(user)
        data["model"][name] = mp
        return name, cls, from_dict(data, source=f"{who} Params")

    def _checked_labels(self, df: DataFrame, taxonomy: Taxonomy, who: str) -> tuple[Column, dict[str, int], Any]:
        """The labels column (null = no label), checked against the taxonomy in one Spark job;
        with handleInvalid='drop' the labels outside the taxonomy are removed and counted. Also
        the count (``no_labels``) and an id of the documents left without a label."""
        col = self.getLabelsCol()
        lab = F.coalesce(F.col(col), F.array().cast("array<string>"))
        known = F.array(*[F.lit(n) for n in taxonomy.names[1:]])
        unknown = F.array_except(F.filter(lab, lambda x: x.isNotNull()), known)
        ids = F.col(self.getDocIdCol()).cast("string") if self.getDocIdCol() in df.columns else F.lit(None)
        row = df.agg(
            F.count(F.lit(1)).alias("n"),
            F.sum(F.size(F.filter(lab, lambda x: x.isNull())).cast("long")).alias("nulls"),
            F.sum(F.size(unknown).cast("long")).alias("bad"),
            F.sum((F.size(unknown) > 0).cast("long")).alias("bad_rows"),
            F.first(F.when(F.size(unknown) > 0, F.struct(ids.alias("id"), unknown.alias("labels"))),
                    ignorenulls=True).alias("example"),
            # no label left (none given, or every one outside the taxonomy)
            F.sum((F.size(lab) == F.size(unknown)).cast("long")).alias("empty"),
            F.first(F.when(F.size(lab) == F.size(unknown), ids), ignorenulls=True).alias("empty_example"),
        ).first()
        assert row is not None  # an aggregate has one row
        n, bad, bad_rows = int(row["n"]), int(row["bad"] or 0), int(row["bad_rows"] or 0)
        if n == 0:
            raise InputDataError(f"{who}: the DataFrame has no rows; nothing to train on")
        if row["nulls"]:
            raise InputDataError(f"{who}: labels column {col!r}: {int(row['nulls'])} null label name(s)")
        counts = {"documents": n, "dropped_labels": 0, "documents_with_dropped_labels": 0,
                  "no_labels": int(row["empty"] or 0)}
        if bad and self.getOrDefault(self.handleInvalid) == "error":
            ex = row["example"]
            raise InputDataError(
                f"{who}: labels column {col!r}: {bad_rows} document(s) have labels outside the taxonomy "
                f"{taxonomy.source}, e.g. {list(ex['labels'])} (document {ex['id']!r}); set "
                "handleInvalid='drop' to drop such labels (they are counted)"
            )
        if bad:
            log.warning("%s: dropped %d label(s) outside the taxonomy from %d document(s)", who, bad, bad_rows)
            counts.update(dropped_labels=bad, documents_with_dropped_labels=bad_rows)
            lab = F.filter(lab, lambda x: F.array_contains(known, x))
        return lab, counts, row["empty_example"]

    # -- fit -------------------------------------------------------------------------------------
    def _fit(self, dataset: DataFrame) -> HierarchicalClassificationModel:
        from sparkhc.spark.pipelines import model_params, new_model, training_metadata
        from sparkhc.spark.training import fit_model

        who = "HierarchicalClassifier"
        name, cls, cfg = self.training_config(who)
        taxonomy = load_taxonomy(self.getOrDefault(self.taxonomy), who)
        if self.isDefined(self.scoredLabels):
            bad = [n for n in self.getOrDefault(self.scoredLabels) if n not in taxonomy or n == taxonomy.root_name]
            if bad:
                raise ConfigError(f"{who}: Param scoredLabels: {bad[:10]} are not labels of the taxonomy {taxonomy.source}")
        check_labels_column(dataset, self.getLabelsCol(), who)
        inp = detect_features(dataset, self.getFeaturesCol(), self.getNumFeatures(), who)
        # the model checks its own parameters before any Spark job
        cls(taxonomy, inp.n_features, **model_params(cls, cfg)).validate_params()
        labels, counts, ex = self._checked_labels(dataset, taxonomy, who)
        if cls.requires_labels and counts["no_labels"]:  # documents without a label: skipped, counted
            if counts["no_labels"] == counts["documents"]:
                raise InputDataError(f"{who}: labels column {self.getLabelsCol()!r}: none of the {counts['documents']} "
                                     f"documents has a label (e.g. {ex!r}): nothing to train the {name!r} model on")
            log.warning("%s: %d document(s) without labels skipped, e.g. %r (the %r model needs at least one label "
                        "per document)", who, counts["no_labels"], ex, name)
            dataset = dataset.where(F.size(labels) > 0)
        doc_col = self.getDocIdCol()
        doc_id = (F.col(doc_col).cast("string") if doc_col in dataset.columns
                  else F.monotonically_increasing_id().cast("string"))
        model = new_model(name, cfg, taxonomy, inp.n_features, dataset.select(labels.alias(LABELS)), source=who)
        rows = training_rows(dataset, inp, labels, doc_id)
        result = fit_model(dataset.sparkSession, rows, model, cfg.train)
        meta: dict[str, Any] = {
            "feature_spec_fingerprint": inp.spec_fingerprint,
            "features_path": None,
            "training": {**training_metadata(result, cfg, Selection(), None), "input": inp.kind,
                         "labels": counts},
            "scored_labels": self.getOrDefault(self.scoredLabels) if self.isDefined(self.scoredLabels) else None,
        }
        out = HierarchicalClassificationModel._create(model, meta, _spec_json(dataset, inp))
        return self._copyValues(out)


def _spec_json(df: DataFrame, inp: FeatureInput) -> str | None:
    """The feature_spec.json of the features: a folder read by :func:`sparkhc.ml.read_features`, or
    the output of a :class:`SparkhcFeaturizerModel` of this driver."""
    if inp.kind != "layout":
        return None
    md = (df.schema[inp.column].metadata or {}).get(META_KEY) or {}
    path = md.get("features_path")
    if not path:
        from sparkhc.ml.featurizer import spec_of

        spec = spec_of(inp.spec_fingerprint)
        return spec.to_json() if spec is not None else None
    from sparkhc.text.spec import SPEC_FILE

    f = Path(path) / SPEC_FILE
    return f.read_text(encoding="utf-8") if f.is_file() else None


# ---------------------------------------------------------------------------------------- model
def _text_batch(text: pa.Array, ids: pa.Array, spec: Any, n_features: int, with_counts: bool) -> Any:
    """A SparseBatch of raw texts (and their document ids) weighted with the model's fitted ``spec``
    by the code of ``sparkhc predict --input`` (:func:`sparkhc.spark.featurize.raw_features_batch`)."""
    from sparkhc.batch import DOC_ID, FOLD, SPLIT, TEXT, TOKENS, SparseBatch
    from sparkhc.spark.featurize import raw_features_batch

    n = len(text)
    ids = ids.cast(pa.string())
    if ids.null_count:  # no document id column: the row numbers
        ids = pa.array([v if v is not None else str(i) for i, v in enumerate(ids.to_pylist())], type=pa.string())
    raw = pa.RecordBatch.from_arrays(
        [ids, pa.nulls(n, pa.string()), pa.nulls(n, pa.int32()),
         pa.array([[]] * n, type=pa.list_(pa.string())), text.cast(pa.string()), pa.nulls(n, pa.list_(pa.string()))],
        names=[DOC_ID, SPLIT, FOLD, LABELS, TEXT, TOKENS])
    return SparseBatch.from_arrow(raw_features_batch(raw, spec, None), n_features, with_counts=with_counts)


def _decode_fn(model_name: str, params: dict[str, Any], taxonomy: Taxonomy, n_features: int, state_bc: Any,
               column: str, with_counts: bool, with_scores: bool, spec_bc: Any = None, extras: Any = None) -> Any:
    """The decoding UDF of ``transform``: over (features, document id) structs, or with ``spec_bc`` (the
    model's fitted FeatureSpec, broadcast) over (raw text, document id) structs. With ``extras`` (a
    :class:`sparkhc.spark.predict.PredictExtras` with ``top``) a struct that also holds the suggestions."""

    def run(arrays: Iterator[pa.Array]) -> Iterator[pa.Array]:
        from sparkhc.ml._input import struct_to_batch
        from sparkhc.models import get_model_class
        from sparkhc.persistence import state_from_bytes
        from sparkhc.spark.predict import SUGGESTION_TYPE, decoded_batch, suggestion_rows

        model = get_model_class(model_name)(taxonomy, n_features, **params)
        model.set_state(state_from_bytes(state_bc.value))
        spec = spec_bc.value if spec_bc is not None else None
        for arr in arrays:
            labels: list[list[str]] = []
            scores: list[list[float]] = []
            sugg: list[list[dict[str, Any]]] = []
            if len(arr):
                if spec is not None:  # (raw text, document id)
                    text, ids = arr.flatten()
                    batch = _text_batch(text, ids, spec, n_features, with_counts)
                else:  # (features, document id): the id names the document in an error
                    feats, ids = arr.flatten()
                    batch = struct_to_batch(feats, n_features, column, with_counts, ids,
                                            "HierarchicalClassificationModel.transform",
                                            " (the model's number of features: use the feature pipeline it was "
                                            "trained with)")
                leaves, labels, scores = decoded_batch(model, batch)
                if extras is not None:
                    sugg, _ = suggestion_rows(model, batch, leaves, labels, extras)
            lab = pa.array(labels, type=pa.list_(pa.string()))
            if extras is not None:
                yield pa.StructArray.from_arrays([lab, pa.array(scores, type=pa.list_(pa.float32())),
                                                  pa.array(sugg, type=SUGGESTION_TYPE)],
                                                 names=["labels", "scores", "suggestions"])
            elif with_scores:
                yield pa.StructArray.from_arrays([lab, pa.array(scores, type=pa.list_(pa.float32()))],
                                                 names=["labels", "scores"])
            else:
                yield lab

    return run


class HierarchicalClassificationModel(Model, HasSparkhcColumns, HasTrainingParams, MLReadable, MLWritable):
    """A fitted sparkhc model: ``transform`` adds ``predictionCol`` (the predicted label set,
    array<string>: the deepest labels, internal nodes reported as ``sparkhc predict`` does) and,
    when ``scoresCol`` is set, the score of each predicted label; when ``suggestionsCol`` is set, the
    ``numSuggestions`` best labels not predicted with their calibrated scores (``sparkhc predict --top``)."""

    suggestionsCol: Param[str] = Param(
        Params._dummy(), "suggestionsCol",
        "output: the numSuggestions best labels not predicted, array<struct<label, score, margin>> with scores "
        "calibrated on the training's validation documents (predict --top; '' = none)",
        typeConverter=TypeConverters.toString)
    numSuggestions: Param[int] = Param(Params._dummy(), "numSuggestions", "suggestions per document (>= 1)",
                                       typeConverter=TypeConverters.toInt)

    def __init__(self) -> None:
        super().__init__()
        self._setDefault(suggestionsCol="", numSuggestions=5)
        self._hier: HierModel | None = None
        self._meta: dict[str, Any] = {}
        self._spec_json: str | None = None
        self._bc: Any = None

    @classmethod
    def _create(cls, hier: HierModel, meta: dict[str, Any], spec_json: str | None = None
                ) -> HierarchicalClassificationModel:
        m = cls()
        m._hier, m._meta, m._spec_json = hier, dict(meta), spec_json
        return m

    @property
    def hierModel(self) -> HierModel:
        """The fitted sparkhc model (:class:`sparkhc.models.base.HierModel`)."""
        if self._hier is None:
            raise ModelError("HierarchicalClassificationModel holds no fitted model")
        return self._hier

    @property
    def metadata(self) -> dict[str, Any]:
        """The model's metadata (what ``metadata.json`` of a saved model holds besides the format)."""
        return dict(self._meta)

    @property
    def modelTaxonomy(self) -> Taxonomy:
        """The taxonomy the model was trained on (virtual ``/_self`` leaves included)."""
        return self.hierModel.taxonomy

    def getSuggestionsCol(self) -> str:
        return str(self.getOrDefault(self.suggestionsCol))

    def getNumSuggestions(self) -> int:
        return int(self.getOrDefault(self.numSuggestions))

    def setSuggestionsCol(self, value: str) -> HierarchicalClassificationModel:
        return self._set(suggestionsCol=value)

    def setNumSuggestions(self, value: int) -> HierarchicalClassificationModel:
        return self._set(numSuggestions=value)

    def _extras(self) -> Any:
        """The suggestions ``transform`` adds (``suggestionsCol``), checked before Spark runs anything."""
        from sparkhc.spark.predict import predict_extras

        if not self.getSuggestionsCol():
            return None
        k = self.getNumSuggestions()
        if k < 1:
            raise ParamError(f"HierarchicalClassificationModel: Param numSuggestions must be >= 1, not {k}")
        return predict_extras(self.hierModel, self._meta, top=k)

    def _broadcast(self, df: DataFrame) -> Any:
        if self._bc is None:
            self._bc = df.sparkSession.sparkContext.broadcast(state_to_bytes(self.hierModel.get_state()))
        return self._bc

    def prediction_metadata(self) -> dict[str, Any]:
        """What the prediction column carries for :class:`HierarchicalEvaluator`: the taxonomy (no
        virtual leaves), the scored labels, and whether the model is multi-dimensional."""
        hm = self.hierModel
        return {META_KEY: {
            "taxonomy": hm.taxonomy.base().to_tsv(include_virtual=False),
            "scored_labels": self._meta.get("scored_labels"),
            "model": hm.name,
            "multi_dimensional": bool(type(hm).multi_dimensional),
        }}

    def _text_spec(self, dataset: DataFrame, who: str) -> Any:
        """The model's fitted FeatureSpec when ``dataset`` holds raw text (``textCol``) and no features
        (neither ``featuresCol`` nor the features layout), else None. The spec is the model's
        ``feature_spec.json``, checked as ``sparkhc predict --input`` checks it."""
        from sparkhc.batch import INDICES, VALUES
        from sparkhc.persistence import checked_feature_spec

        types = {f.name: f.dataType.simpleString() for f in dataset.schema.fields}
        text = self.getTextCol()
        if self.getFeaturesCol() in types or {INDICES, VALUES} <= set(types) or text not in types:
            return None  # features (or nothing usable: detect_features names what is missing)
        if types[text] != "string":
            raise SchemaError(f"{who}: text column {text!r} has type {types[text]}, expected string")
        if self._spec_json is None:
            raise SchemaError(
                f"{who}: the DataFrame has a text column {text!r} but no features column {self.getFeaturesCol()!r}, "
                "and the model has no feature spec to weight raw text with (it was trained on features sparkhc did "
                "not make, e.g. a pyspark.ml vector column): transform the text with the feature pipeline it was "
                "trained with")
        return checked_feature_spec(self._spec_json, self._meta, f"{who}: the model's feature_spec.json")

    def _transform(self, dataset: DataFrame) -> DataFrame:
        from pyspark.sql.functions import ArrowUDFType, arrow_udf

        who = "HierarchicalClassificationModel"
        hm = self.hierModel
        spec = self._text_spec(dataset, who)
        pred, scores_col = self.getPredictionCol(), self.getScoresCol()
        with_scores = bool(scores_col)
        if spec is not None:  # raw text, weighted with the model's own feature spec
            if spec.n_features != hm.n_features:
                raise ModelError(f"{who}: the model's feature spec has {spec.n_features} features, the model "
                                 f"{hm.n_features} (corrupt model)")
            spec_bc = dataset.sparkSession.sparkContext.broadcast(spec)
            source = F.col(self.getTextCol())
            column = self.getTextCol()
        else:
            inp = detect_features(dataset, self.getFeaturesCol(), self.getNumFeatures(), who, expected=hm.n_features)
            spec_bc, source, column = None, inp.struct(), inp.column
        extras = self._extras()
        fn = _decode_fn(hm.name, hm.params, hm.taxonomy, hm.n_features, self._broadcast(dataset), column,
                        bool(hm.needs_counts), with_scores, spec_bc, extras)
        rtype = "struct<labels: array<string>, scores: array<float>>" if with_scores else "array<string>"
        if extras is not None:
            rtype = ("struct<labels: array<string>, scores: array<float>, "
                     "suggestions: array<struct<label: string, score: double, margin: float, pref_label: string>>>")
        with warnings.catch_warnings():  # the iterator form is given explicitly (the hints are strings here)
            warnings.simplefilter("ignore", UserWarning)
            udf = arrow_udf(fn, rtype, ArrowUDFType.SCALAR_ITER)
        md = self.prediction_metadata()
        doc_col = self.getDocIdCol()
        ids = F.col(doc_col).cast("string") if doc_col in dataset.columns else F.lit(None).cast("string")
        arg = F.struct(source.alias("features"), ids.alias("doc_id"))
        if not with_scores and extras is None:
            return dataset.withColumn(pred, udf(arg).alias(pred, metadata=md))
        tmp = f"__sparkhc_{uuid.uuid4().hex[:8]}"
        out = dataset.withColumn(tmp, udf(arg)).withColumn(pred, F.col(tmp)["labels"].alias(pred, metadata=md))
        if with_scores:
            out = out.withColumn(scores_col, F.col(tmp)["scores"])
        if extras is not None:
            out = out.withColumn(self.getSuggestionsCol(), F.col(tmp)["suggestions"])
        return out.drop(tmp)

    # -- persistence -----------------------------------------------------------------------------
    def write(self) -> MLWriter:
        """A sparkhc model folder (one format) plus Spark's Param metadata in ``metadata/``."""

        def body(staging: Path) -> None:
            save_model(staging, self.hierModel, self.metadata, feature_spec_json=self._spec_json)

        return StageWriter(self, body, extra_metadata={"sparkhc_ml_format_version": ML_FORMAT_VERSION})

    @classmethod
    def read(cls) -> MLReader[HierarchicalClassificationModel]:
        return _ModelReader(cls)


class _ModelReader(MLReader[HierarchicalClassificationModel]):
    """Reads a saved model folder: one written by ``write().save()`` (Params restored) or by
    ``sparkhc train`` (default Params)."""

    def __init__(self, cls: type[HierarchicalClassificationModel]) -> None:
        super().__init__()
        self.cls = cls

    def load(self, path: str) -> HierarchicalClassificationModel:
        root = local_path(path)
        hier, meta = load_model(root)
        spec = root / "feature_spec.json"
        inst = self.cls._create(hier, meta, spec.read_text(encoding="utf-8") if spec.is_file() else None)
        pfile = root / PARAMS_DIR / PARAMS_FILE
        if pfile.is_file():
            try:
                md = json.loads(pfile.read_text(encoding="utf-8"))
            except json.JSONDecodeError as e:
                raise ModelError(f"{pfile}: corrupt Param metadata ({e})") from None
            version = md.get("sparkhc_ml_format_version")
            if not isinstance(version, int) or version > ML_FORMAT_VERSION:
                raise ModelError(f"{pfile}: Param metadata version {version!r} is newer than this sparkhc "
                                 f"understands ({ML_FORMAT_VERSION}); upgrade sparkhc to load it")
            DefaultParamsReader.getAndSetParams(inst, md)
            inst._resetUid(md["uid"])
        else:  # a model folder of `sparkhc train`: its model and training settings as Params
            tr = meta.get("training") or {}
            inst._set(model=meta["model"], numFeatures=int(meta["n_features"]),
                      epochs=int(tr.get("epochs") or 1), seed=int(tr.get("seed") or 0))
            if meta.get("scored_labels") is not None:
                inst._set(scoredLabels=list(meta["scored_labels"]))
        return inst

