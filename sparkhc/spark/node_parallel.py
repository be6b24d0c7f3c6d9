"""Node-parallel training on Spark for learners whose nodes are independent given the gold labels.

The Cesa-Bianchi learners H-SVM, SVM, H-RLS (and AH-BAY, which has H-RLS's weights), flat PERC
and H-PERC with ``mistake="node"`` train node ``i`` only from the examples where ``i`` is
eligible (a root of the forest or its parent gold-positive; every example for the flat models)
and from the gold bit ``y_i``: no node looks at another node's weights. So instead of mixing
parameters (:mod:`sparkhc.spark.mixing`, which is approximate for these models), each node is
trained once, in its own task, on exactly the examples serial training would give it::

    label sets --groupBy--> eligible examples per node --> nodes assigned to tasks (LPT)
    features --orderBy(doc_id)--mapInArrow: route each document to every node where it is
             eligible, tagged (partition, position); plus one count row per task and partition
             --repartition by task--sortWithinPartitions(node, partition, position)
             --mapInArrow: per node, global rank = documents in earlier partitions + position;
               the node learner runs over its examples in global order--> per-node payload
             --collect--> the driver assembles the model state (CesaModel.assemble_state)

The ranks come from the same execution of the sort as the examples (the count rows travel with
the data), so they are consistent even though Spark samples the sort's range bounds anew on every
execution; nothing is cached or checkpointed.

**Global order.** Serial training (``fit``/``partial_fit`` on a batch, or :func:`~sparkhc.spark.mixing.train.train_ipm` with one
shard) processes documents in the batch order; the product's batches are sorted by ``doc_id``
(:func:`sparkhc.spark.mixing.jobs.shard_features`), so the global order here is ``doc_id`` ascending (Spark's
string order, i.e. Unicode code point order), and the example clock that H-RLS's sampling threshold
uses is ``t = t0 + epoch * n + position + 1``. With ``shuffle=True`` each epoch's positions are the
inverse of :func:`~sparkhc.models.base.shuffled_order` ``(n, seed, epoch)``, as in ``fit``. The
result equals ``model.fit(batch sorted by doc_id, epochs, seed)`` exactly (same arrays): the node
tasks run the models' own per-node arithmetic (:meth:`~sparkhc.models.cesa_bianchi.CesaModel.fit_node`),
which is the code ``partial_fit`` runs for that node.

**Balance.** Nodes are assigned to ``n_tasks`` tasks by longest-processing-time first on their
eligible-example counts (from the label sets only, one small aggregation), and each task gets a
partition key that Spark's hash partitioning maps to its own partition. A node's examples must fit
in one Python worker (a root of the forest sees every document): the memory bound of this design.
Flat models route every example to every node (``n_nodes`` copies of the data in the shuffle).

Use::

    from sparkhc.spark.node_parallel import train_node_parallel

    model = get_model_class("h_rls")(taxonomy, spec.n_features)
    if model.node_parallel():
        train_node_parallel(spark, features_df, model)     # features_df: doc_id, labels, indices, values
"""

from __future__ import annotations

import heapq
import logging
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import scipy.sparse as sp
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from sparkhc.batch import DOC_ID, INDICES, LABELS, VALUES, SparseBatch, _flat_list, label_matrix
from sparkhc.errors import ConfigError
from sparkhc.models.base import HierModel, ModelState, shuffled_order
from sparkhc.models.cesa_bianchi import CesaModel
from sparkhc.persistence import state_from_bytes, state_to_bytes
from sparkhc.spark.hashing import spark_hash_long

log = logging.getLogger(__name__)

_KEY = "_key"  # partition key of a node's task
#: at most this many (node, example) pairs per routed Arrow batch (flat models copy each example
#: to every node)
_MAX_PAIRS = 20_000


# ============================================================================ which models
# ============================================================================ one node
def _positions(rank: np.ndarray, n: int, shuffle: bool, seed: int, epoch: int) -> np.ndarray:
    """Position of each example (global rank ``rank``) in epoch ``epoch``'s processing order."""
    if not shuffle:
        return rank
    perm = shuffled_order(n, seed, epoch)
    inv = np.empty(n, dtype=np.int64)
    inv[perm] = np.arange(n, dtype=np.int64)
    return inv[rank]


def train_node(
    model: CesaModel,
    node: int,
    X: sp.csr_matrix,
    y: np.ndarray,
    rank: np.ndarray,
    n: int,
    epochs: int,
    seed: int = 0,
    t0: int = 0,
    init: Mapping[str, np.ndarray] | None = None,
) -> tuple[dict[str, np.ndarray], dict[str, float]]:
    """Train node ``node`` on its eligible examples (rows of ``X`` in any order, with their global
    ranks ``rank`` among the ``n`` training documents) as ``epochs`` serial epochs would.

    Returns the node's payload and summed counters. A batch learner (``model.incremental`` False,
    the SVMs) is trained once, as the last of ``epochs`` ``partial_fit`` calls would leave it.
    """
    rank = np.asarray(rank, dtype=np.int64)
    y = np.asarray(y, dtype=bool)
    X = sp.csr_matrix(X)
    payload: dict[str, np.ndarray] | None = dict(init) if init is not None else None
    counters: dict[str, float] = {}
    if not model.incremental:
        order = np.argsort(rank, kind="stable")
        t = t0 + (epochs - 1) * n + rank[order] + 1
        payload, c = model.fit_node(node, X[order], y[order], t, seed=seed, epoch=epochs - 1, init=None)
        return payload, dict(c)
    shuffle = bool(model.params.get("shuffle", False))
    for e in range(epochs):
        pos = _positions(rank, n, shuffle, seed, e)
        order = np.argsort(pos, kind="stable")
        t = t0 + e * n + pos[order] + 1
        payload, c = model.fit_node(node, X[order], y[order], t, seed=seed, epoch=e, init=payload)
        for k, v in c.items():
            counters[k] = counters.get(k, 0.0) + float(v)
    if payload is None:  # epochs == 0 cannot happen (validated), keep the type checker content
        raise ValueError("epochs must be >= 1")
    return payload, counters


def _clock(model: CesaModel) -> int:
    """The model's example clock before training (H-RLS's ``t``; 0 for the others)."""
    arrays = model.get_state().arrays
    return int(arrays["t"][0]) if "t" in arrays else 0


def _check_model(model: HierModel, epochs: int | None) -> int:
    if not model.node_parallel():
        raise ConfigError(
            f"model {model.name!r} has no node-parallel training: its node learners are not independent "
            "given the gold labels (HierModel.node_parallel)"
        )
    model.validate_params()
    e = int(epochs if epochs is not None else model.params.get("epochs", 1))
    if e < 1:
        raise ConfigError(f"epochs must be >= 1; got {e}")
    return e


def _finish(
    model: CesaModel,
    payloads: dict[int, dict[str, np.ndarray]],
    counters: dict[str, float],
    n: int,
    epochs: int,
    seed: int,
    t0: int,
    inits: Callable[[int], Mapping[str, np.ndarray] | None],
) -> None:
    """Fill in the nodes that no example reached (trained on nothing), then assemble the state."""
    empty = sp.csr_matrix((0, model.n_features), dtype=np.float32)
    none = np.zeros(0, dtype=np.int64)
    for i in range(1, model.taxonomy.n_nodes):
        if i not in payloads:
            payloads[i], c = train_node(model, i, empty, none.astype(bool), none, n, epochs, seed, t0, inits(i))
            for k, v in c.items():
                counters[k] = counters.get(k, 0.0) + v
    model.assemble_state(payloads, n * epochs, counters)


def fit_nodes_local(
    model: CesaModel,
    batch: SparseBatch,
    epochs: int | None = None,
    seed: int = 0,
    warm_start: bool = False,
) -> CesaModel:
    """The node-parallel decomposition without Spark (a reference and a test aid): the batch order
    is the global order, each node is trained by :func:`train_node`. Equals ``model.fit(batch)``."""
    epochs = _check_model(model, epochs)
    if not warm_start or model.state_ is None:
        model.set_state(model.init_state())
    t0 = _clock(model)
    X = sp.csr_matrix(batch.X)
    gold = batch.label_matrix(model.taxonomy).toarray().astype(bool)
    elig = model.node_eligibility(gold)
    n = X.shape[0]
    rank = np.arange(n, dtype=np.int64)
    payloads: dict[int, dict[str, np.ndarray]] = {}
    counters: dict[str, float] = {}
    for i in range(1, model.taxonomy.n_nodes):
        rows = np.flatnonzero(elig[:, i])
        if rows.size == 0:
            continue
        payloads[i], c = train_node(model, i, X[rows], gold[rows, i], rank[rows], n, epochs, seed, t0,
                                    model.node_init(i))
        for k, v in c.items():
            counters[k] = counters.get(k, 0.0) + v
    _finish(model, payloads, counters, n, epochs, seed, t0, model.node_init)
    return model


# ============================================================================ Spark plumbing
def assign_tasks(costs: Mapping[int, float], n_tasks: int) -> dict[int, int]:
    """Longest processing time first: node -> task in ``range(n_tasks)``, deterministic."""
    heap = [(0.0, k) for k in range(n_tasks)]
    out: dict[int, int] = {}
    for node in sorted(costs, key=lambda i: (-costs[i], i)):
        load, k = heapq.heappop(heap)
        out[node] = k
        heapq.heappush(heap, (load + max(float(costs[node]), 1.0), k))
    return out


def partition_keys(n_tasks: int) -> list[int]:
    """For each task ``k``, the smallest bigint key that ``repartition(n_tasks, key)`` sends to
    partition ``k``, so that every task gets a partition of its own."""
    found: dict[int, int] = {}
    start, step = 0, max(64, 4 * int(n_tasks))
    while len(found) < n_tasks:
        vals = np.arange(start, start + step, dtype=np.int64)
        for v, part in zip(vals.tolist(), np.mod(spark_hash_long(vals).astype(np.int64), n_tasks).tolist(), strict=True):
            found.setdefault(int(part), int(v))
        start += step
    return [found[k] for k in range(n_tasks)]


def _label_set_counts(df: DataFrame) -> tuple[list[list[str]], np.ndarray]:
    """Distinct label sets and their document counts (one small aggregation)."""
    combos = df.groupBy(F.array_sort(F.col(LABELS)).alias("l")).count().collect()
    return [list(r["l"] or []) for r in combos], np.array([int(r["count"]) for r in combos], dtype=np.int64)


def _make_model(name: str, params: Mapping[str, Any], taxonomy: Any, n_features: int) -> CesaModel:
    from sparkhc.models import get_model_class

    model = get_model_class(name)(taxonomy, n_features, **dict(params))
    if not isinstance(model, CesaModel):
        raise ConfigError(f"model {name!r} is not a Cesa-Bianchi learner")
    return model


_ROUTED_SCHEMA = pa.schema([
    (_KEY, pa.int64()),
    ("node", pa.int32()),
    ("part", pa.int32()),
    ("pos", pa.int64()),
    ("y", pa.bool_()),
    (INDICES, pa.list_(pa.int32())),
    (VALUES, pa.list_(pa.float32())),
])
_ROUTED_DDL = f"{_KEY} long, node int, part int, pos long, y boolean, {INDICES} array<int>, {VALUES} array<float>"
_RESULT_SCHEMA = pa.schema([("node", pa.int32()), ("rows", pa.int64()), ("docs", pa.int64()),
                            ("parts", pa.int32()), ("state", pa.binary())])
_RESULT_DDL = "node int, rows long, docs long, parts int, state binary"
_COUNT_NODE = -1  # routed rows with this node carry a partition's document count in "pos"


def make_route_fn(
    name: str,
    params: Mapping[str, Any],
    taxonomy: Any,
    n_features: int,
    node_keys: np.ndarray,
    task_keys: list[int],
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """mapInArrow function over the documents sorted by doc_id: each document -> one row per node
    where it is eligible, tagged with (partition, position in the partition); at the end one count
    row per task, so that every task can turn (partition, position) into the global rank."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        part = ctx.partitionId() if ctx is not None else 0
        model = _make_model(name, params, taxonomy, n_features)
        seen = 0
        for b in batches:
            if b.num_rows == 0:
                continue
            labels = [x or [] for x in b.column(LABELS).to_pylist()]
            gold = label_matrix(labels, taxonomy, doc_ids=b.column(DOC_ID).to_pylist()).toarray().astype(bool)
            rows, nodes = np.nonzero(model.node_eligibility(gold))
            ind_col, val_col = b.column(INDICES), b.column(VALUES)
            for s in range(0, rows.size, _MAX_PAIRS):
                r, nd = rows[s : s + _MAX_PAIRS], nodes[s : s + _MAX_PAIRS]
                take = pa.array(r, pa.int64())
                yield pa.RecordBatch.from_arrays(
                    [
                        pa.array(node_keys[nd], pa.int64()),
                        pa.array(nd.astype(np.int32), pa.int32()),
                        pa.array(np.full(r.size, part, dtype=np.int32), pa.int32()),
                        pa.array(seen + r, pa.int64()),
                        pa.array(gold[r, nd], pa.bool_()),
                        ind_col.take(take).cast(_ROUTED_SCHEMA.field(INDICES).type),
                        val_col.take(take).cast(_ROUTED_SCHEMA.field(VALUES).type),
                    ],
                    schema=_ROUTED_SCHEMA,
                )
            seen += b.num_rows
        k = len(task_keys)
        yield pa.RecordBatch.from_arrays(
            [
                pa.array(task_keys, pa.int64()),
                pa.array([_COUNT_NODE] * k, pa.int32()),
                pa.array([part] * k, pa.int32()),
                pa.array([seen] * k, pa.int64()),
                pa.array([False] * k, pa.bool_()),
                pa.array([[]] * k, _ROUTED_SCHEMA.field(INDICES).type),
                pa.array([[]] * k, _ROUTED_SCHEMA.field(VALUES).type),
            ],
            schema=_ROUTED_SCHEMA,
        )

    return run


_STATE_CACHE: dict[str, CesaModel] = {}


def make_train_fn(
    name: str,
    params: Mapping[str, Any],
    taxonomy: Any,
    n_features: int,
    epochs: int,
    seed: int,
    t0: int,
    state_bc: Any = None,
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """mapInArrow function over one task's routed rows sorted by (node, part, pos): the count rows
    first, then each node's examples in global order; trains the nodes one after the other (one
    node's examples in memory at a time) and yields one payload row per node."""
    token = uuid.uuid4().hex  # identifies this training's broadcast state in a reused worker

    def model_and_init(node: int) -> tuple[CesaModel, Mapping[str, np.ndarray] | None]:
        if state_bc is None:
            return _make_model(name, params, taxonomy, n_features), None
        model = _STATE_CACHE.get(token)
        if model is None:  # warm start: deserialise the broadcast state once per worker
            _STATE_CACHE.clear()
            model = _make_model(name, params, taxonomy, n_features)
            model.set_state(state_from_bytes(state_bc.value))
            _STATE_CACHE[token] = model
        return model, model.node_init(node)

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        per_part: dict[int, int] = {}
        offsets: dict[int, int] | None = None
        n = 0
        node: int | None = None
        pieces: list[pa.RecordBatch] = []

        def train(node: int, pieces: list[pa.RecordBatch]) -> pa.RecordBatch:
            table = pa.Table.from_batches(pieces)
            ioff, indices = _flat_list(table.column(INDICES))
            voff, values = _flat_list(table.column(VALUES))
            if not np.array_equal(ioff, voff):
                raise ValueError(f"node {node}: indices and values lists differ in length")
            X = sp.csr_matrix(
                (values.astype(np.float32, copy=False), indices.astype(np.int32, copy=False), ioff),
                shape=(table.num_rows, n_features),
            )
            assert offsets is not None
            parts = table.column("part").to_numpy()
            base = np.array([offsets[int(p)] for p in parts], dtype=np.int64) if parts.size else parts
            rank = base + table.column("pos").to_numpy().astype(np.int64)
            y = np.asarray(table.column("y").to_numpy(zero_copy_only=False), dtype=bool)
            model, init = model_and_init(node)
            payload, counters = train_node(model, node, X, y, rank, n, epochs, seed, t0, init)
            blob = state_to_bytes(ModelState(payload, counters))
            return pa.RecordBatch.from_arrays(
                [pa.array([node], pa.int32()), pa.array([table.num_rows], pa.int64()), pa.array([n], pa.int64()),
                 pa.array([len(per_part)], pa.int32()), pa.array([blob], pa.binary())],
                schema=_RESULT_SCHEMA,
            )

        for b in batches:
            if b.num_rows == 0:
                continue
            nodes = b.column("node").to_numpy()
            cuts = [0, *(np.flatnonzero(np.diff(nodes)) + 1).tolist(), b.num_rows]
            for s, e in zip(cuts[:-1], cuts[1:], strict=True):
                nd = int(nodes[s])
                if nd == _COUNT_NODE:
                    for p, c in zip(b.column("part").to_numpy()[s:e], b.column("pos").to_numpy()[s:e], strict=True):
                        per_part[int(p)] = int(c)
                    continue
                if offsets is None:  # every count row sorts before the first node's rows
                    offsets, acc = {}, 0
                    for p in sorted(per_part):
                        offsets[p] = acc
                        acc += per_part[p]
                    n = acc
                if nd != node:
                    if pieces:
                        yield train(node, pieces)  # type: ignore[arg-type]
                    node, pieces = nd, []
                pieces.append(b.slice(s, e - s))
        if pieces and node is not None:
            yield train(node, pieces)

    return run


def train_node_parallel(
    spark: SparkSession,
    features_df: DataFrame,
    model: HierModel,
    n_tasks: int | None = None,
    *,
    epochs: int | None = None,
    seed: int = 0,
    warm_start: bool = False,
    progress: Callable[[dict[str, Any]], None] | None = None,
) -> HierModel:
    """Train every node of ``model`` in parallel on Spark; equals serial training exactly.

    Parameters
    ----------
    spark : SparkSession
    features_df : DataFrame
        The features layout (at least ``doc_id``, ``labels``, ``indices``, ``values``); ``doc_id``
        unique (featurize guarantees it). The global order is ``doc_id`` ascending.
    model : CesaModel
        A model whose ``node_parallel()`` is true; its taxonomy has no virtual leaves.
    n_tasks : int, optional
        Tasks (partitions) the nodes are spread over; default ``min(nodes with examples,
        4 x defaultParallelism)``.
    epochs : int, optional
        Default ``model.params["epochs"]`` (as ``model.fit``).
    seed : int
        As ``model.fit(batch, seed=seed)`` (the shuffle order, liblinear's seed).
    warm_start : bool
        Continue from the model's current state (refreshing with new documents; the H-RLS clock
        continues), like ``partial_fit``.
    progress : callable, optional
        Receives one dict (documents, nodes, tasks, routed pairs, counters, seconds).

    Returns
    -------
    The same ``model``, with its new state.

    Spark work: one aggregation of the label sets (eligible counts per node for the task
    assignment), then one job: sort by doc_id, route (mapInArrow), shuffle by task, sort by
    (node, rank), train (mapInArrow), collect the per-node payloads.
    """
    t_start = time.perf_counter()
    epochs = _check_model(model, epochs)
    if not isinstance(model, CesaModel):  # _check_model guarantees it; narrows the type
        raise ConfigError(f"model {model.name!r} is not a Cesa-Bianchi learner")
    if not warm_start or model.state_ is None:
        model.set_state(model.init_state())
    t0 = _clock(model)
    df = features_df.select(DOC_ID, LABELS, INDICES, VALUES)

    label_sets, weights = _label_set_counts(df)
    n = int(weights.sum())
    if n == 0:
        raise ValueError("no training documents")
    gold = label_matrix(label_sets, model.taxonomy).toarray().astype(bool)
    elig_counts = np.asarray(weights @ model.node_eligibility(gold), dtype=np.int64)
    busy = {i: float(elig_counts[i]) for i in range(1, model.taxonomy.n_nodes) if elig_counts[i] > 0}
    if n_tasks is None:
        n_tasks = min(max(len(busy), 1), 4 * max(spark.sparkContext.defaultParallelism, 1))
    n_tasks = max(1, int(n_tasks))
    assignment = assign_tasks(busy, n_tasks)
    keys = partition_keys(n_tasks)
    node_keys = np.zeros(model.taxonomy.n_nodes, dtype=np.int64)
    for i, k in assignment.items():
        node_keys[i] = keys[k]

    bc = spark.sparkContext.broadcast(state_to_bytes(model.get_state())) if warm_start else None
    try:
        route = make_route_fn(model.name, model.params, model.taxonomy, model.n_features, node_keys, keys)
        train = make_train_fn(model.name, model.params, model.taxonomy, model.n_features, epochs, seed, t0, bc)
        results = (
            df.orderBy(DOC_ID)
            .mapInArrow(route, _ROUTED_DDL)
            .repartition(n_tasks, _KEY)
            .sortWithinPartitions("node", "part", "pos")
            .mapInArrow(train, _RESULT_DDL)
            .collect()
        )
    finally:
        if bc is not None:
            bc.unpersist()
    payloads: dict[int, dict[str, np.ndarray]] = {}
    counters: dict[str, float] = {}
    routed = 0
    sort_parts = max((int(r["parts"]) for r in results), default=0)
    for r in results:
        node = int(r["node"])
        if node in payloads:
            raise RuntimeError(f"node {node} was trained twice")
        if int(r["docs"]) != n:
            raise RuntimeError(f"node {node} was trained with {int(r['docs'])} documents in the global order, "
                               f"expected {n} (is doc_id unique?)")
        st = state_from_bytes(bytes(r["state"]))
        payloads[node] = st.arrays
        routed += int(r["rows"])
        for key, v in st.counters.items():
            counters[key] = counters.get(key, 0.0) + float(v)
    _finish(model, payloads, counters, n, epochs, seed, t0, model.node_init if warm_start else (lambda i: None))
    info = {
        "documents": n,
        "epochs": epochs,
        "nodes": len(busy),
        "tasks": n_tasks,
        "routed_pairs": routed,
        "sort_partitions": sort_parts,
        "counters": {"examples": float(n * epochs), **counters},
        "seconds": round(time.perf_counter() - t_start, 3),
    }
    log.info("node-parallel %s: %d documents x %d epoch(s), %d nodes in %d tasks, %d routed pairs, %.2f s",
             model.name, n, epochs, len(busy), n_tasks, routed, info["seconds"])
    if progress is not None:
        progress(info)
    return model
