"""Edge models solved in batch: the starting point of the global model (``model.global.init = "edges"``).

Every edge ``p -> c`` of the taxonomy gets a binary linear SVM with the squared hinge (L2 loss,
LIBLINEAR's default solver, no separate bias: the model's bias feature is a column of ``X``):

    min_w  1/2 ||w||^2 + C sum_{i in S(p)} max(0, 1 - y_i w.x_i)^2

over the documents ``S(p)`` whose gold tree holds the parent ``p`` (every document for an edge of the
root), ``y_i = +1`` when it also holds ``c``, else ``-1`` (the conditional data of a top-down tree
classifier: the DP adds ``p -> c`` to a label tree only where ``p`` is in it). Its column of ``W``
is that ``w``. With edge scores of about ``+1`` on the edges of the gold tree and ``-1`` off it, the
exact DP decodes the tree of the positive edges, and the cost-augmented PA passes that follow (whose
Hamming margin is 1 per edge, the SVMs' margin) start from a model that already satisfies most of
their constraints.

Solver: the product's dual coordinate descent (:func:`sparkhc.dcd.solve_dcd`, LIBLINEAR's ``-s 1``
without a bias term: seeded random order, shrinking), stopped when the projected gradient's spread
over a pass is at most ``tol`` (LIBLINEAR's rule and its default for the dual solvers, 0.1) or after
``max_passes`` passes (counted and reported: ``capped``). The result is a function of the data, the
settings and the seed: no clock and no thread timing enters it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from sparkhc.dcd import solve_dcd

__all__ = ["EdgeProblems", "edge_problems", "solve_edges", "DEFAULT_TOL", "DEFAULT_MAX_PASSES"]

#: LIBLINEAR's stopping tolerance of its dual solvers (``-e 0.1``)
DEFAULT_TOL = 0.1
#: passes over an edge's documents at most (a capped edge is counted in the result)
DEFAULT_MAX_PASSES = 1000


@dataclass
class EdgeProblems:
    """The binary problems of the edges in CSR-like arrays: edge ``e`` (node ``e + 1``) has the
    documents ``docs[ptr[e]:ptr[e + 1]]`` (ascending) with labels ``y`` (+1 / -1) there."""

    ptr: np.ndarray
    docs: np.ndarray
    y: np.ndarray


def edge_problems(nodes: np.ndarray, nodes_ptr: np.ndarray, parent: np.ndarray, n_children: np.ndarray,
                  first_child: np.ndarray) -> EdgeProblems:
    """The documents and labels of every edge's problem from the gold trees (``nodes[nodes_ptr[i]:
    nodes_ptr[i + 1]]``: document ``i``'s gold tree as node ids, root excluded) and the taxonomy's
    arrays (node 0 the root; the children of ``p`` are ``first_child[p] + range(n_children[p])``)."""
    n_docs = len(nodes_ptr) - 1
    n_nodes = len(parent)
    doc_of = np.repeat(np.arange(n_docs, dtype=np.int64), np.diff(nodes_ptr))
    # (document, parent) pairs: the root for every document, and every internal node of its gold tree
    p_doc = np.concatenate([np.arange(n_docs, dtype=np.int64), doc_of])
    p_node = np.concatenate([np.zeros(n_docs, dtype=np.int64), nodes.astype(np.int64)])
    keep = n_children[p_node] > 0
    p_doc, p_node = p_doc[keep], p_node[keep]
    reps = n_children[p_node]
    c_doc = np.repeat(p_doc, reps)
    starts = np.repeat(first_child[p_node], reps)
    offs = np.arange(int(reps.sum()), dtype=np.int64) - np.repeat(np.cumsum(reps) - reps, reps)
    c_node = starts + offs
    gold_keys = doc_of * n_nodes + nodes.astype(np.int64)
    gold_keys.sort()
    keys = c_doc * n_nodes + c_node
    pos = np.searchsorted(gold_keys, keys)
    pos[pos >= len(gold_keys)] = 0
    y = np.where((len(gold_keys) > 0) & (gold_keys[pos] == keys), 1.0, -1.0) if len(keys) else np.zeros(0)
    order = np.lexsort((c_doc, c_node))
    edge = c_node[order] - 1
    ptr = np.zeros(n_nodes, dtype=np.int64)
    np.add.at(ptr, edge + 1, 1)
    return EdgeProblems(np.cumsum(ptr), c_doc[order], y[order].astype(np.float64))


@dataclass
class EdgeSolution:
    """What :func:`solve_edges` did: passes and final projected-gradient spread per edge, and how
    many edges reached ``max_passes`` before ``tol``."""

    passes: np.ndarray
    gap: np.ndarray
    capped: int

    def counters(self) -> dict[str, float]:
        solved = self.passes > 0
        return {
            "init_edges": float(solved.sum()),
            "init_passes": float(self.passes.sum()),
            "init_max_passes": float(self.passes.max()) if solved.any() else 0.0,
            "init_capped": float(self.capped),
            "init_max_gap": float(self.gap[solved].max()) if solved.any() else 0.0,
        }


def solve_edges(X: sp.csr_matrix, problems: EdgeProblems, W: np.ndarray, C: float, *, tol: float = DEFAULT_TOL,
                max_passes: int = DEFAULT_MAX_PASSES, seed: int = 0) -> EdgeSolution:
    """Solve every edge's problem (:func:`edge_problems`) on the rows of ``X`` (CSR, the model's
    prepared features) and write the solutions into the columns of ``W`` (dense, ``features x
    edges``; columns of edges with no document are left as they are, the others overwritten)."""
    if not sp.isspmatrix_csr(X):
        raise TypeError("solve_edges: X must be a CSR matrix")
    if W.ndim != 2 or W.shape[0] != X.shape[1] or W.shape[1] != len(problems.ptr) - 1:
        raise ValueError(f"solve_edges: W of shape {W.shape} for {X.shape[1]} features and "
                         f"{len(problems.ptr) - 1} edges")
    n_edges = len(problems.ptr) - 1
    passes = np.zeros(n_edges, dtype=np.int64)
    gap = np.zeros(n_edges, dtype=np.float64)
    capped = 0
    for e in range(n_edges):
        a, b = int(problems.ptr[e]), int(problems.ptr[e + 1])
        if a == b:
            continue
        r = solve_dcd(X[problems.docs[a:b]], problems.y[a:b], float(C), loss="l2", bias=0.0, tol=float(tol),
                      max_passes=int(max_passes), stop="absolute", seed=int(seed) * 1000003 + e)
        W[:, e] = r.w
        passes[e], gap[e] = r.passes, r.gap
        capped += int(r.capped)
    return EdgeSolution(passes, gap, capped)
