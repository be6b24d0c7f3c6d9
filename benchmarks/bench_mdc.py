#!/usr/bin/env python
"""M3MDC at scale: a synthetic multi-dimensional set of 100,000 rows x 7 class variables trained
through the product path (``fit_model``, the ``batch`` strategy of ``sparkhc train``) in
``local[2]``, with wall time and peak memory; and one fold of a ~9,000-row set of the same
generator against LIBLINEAR binary relevance (scikit-learn ``LinearSVC``) on the same rows.

    python benchmarks/bench_mdc.py --rows 100000 --small-rows 9000 --master 'local[2]'

The generator: rows of ``--nnz`` (Poisson) non-zero features out of ``--features`` (Zipf-like
column frequencies, exponential values, L2-normalised rows: tf-idf-like text); every class
variable ``j`` with ``K_j`` classes (7 variables, K = 2, 3, 3, 4, 2, 3, 5: 27 one-vs-one pairs)
is the argmax of ``Z A_j`` plus Gaussian noise, ``Z = X R`` a 12-dimensional projection shared by
all variables (so the variables are correlated, as M3MDC assumes). Seeded: the same rows on every run.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import scipy.sparse as sp  # noqa: E402
from _common import MemorySampler, command, loadavg, machine, now, write_section  # noqa: E402

N_CLASSES = (2, 3, 3, 4, 2, 3, 5)
LAMBDA1 = 0.1  # the model's default (C = 1 / λ1 = 10 in LIBLINEAR's terms)
REF_GAP = 1e-8  # the tight reference's W-step gap (relative)


def final_objective(history: list[dict]) -> tuple[float, float]:  # type: ignore[type-arg]
    """The fitted objective (after the last C step) and the last W step's relative duality gap."""
    h = history[-1]
    return float(h["objective_after_c"]), float(h["duality_gap"]) / max(abs(float(h["objective_after_w"])), 1.0)


def make_mdc(n: int, d: int = 5000, nnz: int = 40, rank: int = 12, noise: float = 0.5,
             seed: int = 0) -> tuple[sp.csr_matrix, np.ndarray]:
    """``(X, Y)``: CSR float32 features and ``(n, 7)`` class indices (module docstring)."""
    rng = np.random.default_rng(seed)
    k = rng.poisson(nnz, n).clip(5, d)
    p = 1.0 / np.arange(1, d + 1) ** 0.8
    p /= p.sum()
    indptr = np.concatenate([[0], np.cumsum(k)])
    cols = rng.choice(d, size=int(indptr[-1]), p=p)
    vals = rng.exponential(1.0, size=cols.size)
    X = sp.csr_matrix((vals, cols, indptr), shape=(n, d))
    X.sum_duplicates()
    X = sp.csr_matrix(sp.diags(1.0 / np.sqrt(np.asarray(X.multiply(X).sum(1)).ravel())) @ X)
    rng2 = np.random.default_rng(seed + 1)  # the labelling model does not depend on n
    R = rng2.standard_normal((d, rank)) * np.sqrt(d / 50)
    A = [rng2.standard_normal((rank, K)) for K in N_CLASSES]
    Z = np.asarray(X @ R)
    Y = np.empty((n, len(N_CLASSES)), dtype=np.int64)
    for j, K in enumerate(N_CLASSES):
        Y[:, j] = np.argmax(Z @ A[j] + noise * Z.std() * rng.standard_normal((n, K)), axis=1)
    X.sort_indices()
    return X.astype(np.float32), Y


def taxonomy_edges() -> list[tuple[str, str]]:
    edges = []
    for j, K in enumerate(N_CLASSES):
        edges.append(("ROOT", f"v{j}"))
        edges += [(f"v{j}", f"v{j}/{c}") for c in range(K)]
    return edges


def labels_of(Y: np.ndarray) -> list[list[str]]:
    return [[f"v{j}/{c}" for j, c in enumerate(row)] for row in Y.tolist()]


def write_parquet(path: Path, X: sp.csr_matrix, Y: np.ndarray, ids: np.ndarray) -> None:
    """The features layout's columns that training reads (doc_id, labels, indices, values)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    offsets = pa.array(X.indptr.astype(np.int32))
    table = pa.table({
        "doc_id": pa.array([f"d{i:07d}" for i in ids]),
        "labels": pa.array(labels_of(Y), type=pa.list_(pa.string())),
        "indices": pa.ListArray.from_arrays(offsets, pa.array(X.indices.astype(np.int32))),
        "values": pa.ListArray.from_arrays(offsets, pa.array(X.data.astype(np.float32))),
    })
    pq.write_table(table, path / "part-0.parquet", row_group_size=20_000)


class Rounds:
    """Seconds per kind of W-step round (wraps SparkPairSolver.run, ThreadPairSolver.run and
    class_counts) and the Spark jobs they ran (one per round on Spark, none in the driver)."""

    def __init__(self) -> None:
        from sparkhc.models.jia_zhang import solver
        from sparkhc.spark import mdc

        self.seconds: dict[str, float] = {}
        self.jobs: dict[str, int] = {}
        self._mdc, self._solver = mdc, solver
        self._run, self._counts = mdc.SparkPairSolver.run, mdc.class_counts
        self._trun = solver.ThreadPairSolver.run

    def _timed(self, name: str, spark_job: bool, f, *args):  # type: ignore[no-untyped-def]
        t = time.perf_counter()
        try:
            return f(*args)
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - t
            self.jobs[name] = self.jobs.get(name, 0) + int(spark_job)
            self.calls[name] = self.calls.get(name, 0) + 1

    def __enter__(self) -> Rounds:
        run, counts, trun = self._run, self._counts, self._trun
        self.calls: dict[str, int] = {}
        self._mdc.SparkPairSolver.run = lambda solver, order: self._timed(  # type: ignore[method-assign,assignment]
            type(order).__name__, True, run, solver, order)
        self._solver.ThreadPairSolver.run = lambda solver, order: self._timed(  # type: ignore[method-assign,assignment]
            type(order).__name__, False, trun, solver, order)
        self._mdc.class_counts = lambda *a: self._timed("class counts", True, counts, *a)
        return self

    def __exit__(self, *exc: object) -> None:
        self._mdc.SparkPairSolver.run = self._run  # type: ignore[method-assign]
        self._solver.ThreadPairSolver.run = self._trun  # type: ignore[method-assign]
        self._mdc.class_counts = self._counts

    def summary(self, total: float) -> str:
        parts = [f"{k} {v:.1f} s ({self.calls[k]} rounds, {self.jobs[k]} Spark jobs)" if k != "class counts"
                 else f"{k} {v:.1f} s (1 Spark job)" for k, v in self.seconds.items()]
        rest = total - sum(self.seconds.values())
        return ", ".join(parts) + f", the rest (reading the rows, blocks, driver: line search, gap, C step) {rest:.1f} s"


def read_small(spark, path: Path, d: int, execution: str):  # type: ignore[no-untyped-def]
    """The rows read in the driver when ``train.execution`` lets the training run there
    (``sparkhc.spark.plan.read_rows``' rule: ``auto`` = a local master and at most
    ``AUTO_MAX_INPUT_BYTES`` of Parquet; ``spark`` never), else None. bench_mdc writes bare Parquet
    (no featurize folder), so the rule is applied here to the same numbers and the rows read with
    pyarrow (``SparseBatch.from_arrow``, as ``read_features_local`` does)."""
    import pyarrow.parquet as pq

    from sparkhc.batch import SparseBatch
    from sparkhc.spark.plan import AUTO_MAX_INPUT_BYTES
    from sparkhc.spark.session import is_local_master

    size = sum(f.stat().st_size for f in path.glob("*.parquet"))
    if execution == "spark" or not (is_local_master(spark) and size <= AUTO_MAX_INPUT_BYTES):
        return None, size
    return SparseBatch.from_arrow(pq.read_table(path), d), size


def train(spark, path: Path, d: int, execution: str = "auto"):  # type: ignore[no-untyped-def]
    """The product path (``fit_model``) with ``train.execution = execution``; seconds from reading
    the rows to the fitted model. Returns the model, the result, the seconds, the profile and the
    execution used ("driver": no Spark job; "spark")."""
    from sparkhc.config import TrainConfig
    from sparkhc.models import make_model
    from sparkhc.spark.training import fit_model
    from sparkhc.taxonomy import Taxonomy

    tax = Taxonomy.from_edges(taxonomy_edges(), root="ROOT")
    model = make_model("m3mdc", tax, d)
    with Rounds() as rounds:
        t0 = time.perf_counter()
        rows, size = read_small(spark, path, d, execution)
        df = spark.read.parquet(str(path)) if rows is None else None
        res = fit_model(spark, df, model, TrainConfig(model="m3mdc", execution=execution), rows=rows)
        sec = time.perf_counter() - t0
    used = "driver" if rows is not None else "spark"
    prof = (f"execution {used} (train.execution = {execution}, {size / 2**20:.1f} MiB of Parquet), "
            + rounds.summary(sec))
    return model, res, sec, prof, used


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--small-rows", type=int, default=9000)
    ap.add_argument("--features", type=int, default=5000)
    ap.add_argument("--nnz", type=int, default=40)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--driver-memory", default="6g")
    ap.add_argument("--skip-large", action="store_true")
    ap.add_argument("--no-write", action="store_true", help="print only; do not write docs/benchmarks.md")
    a = ap.parse_args()

    from sklearn.svm import LinearSVC

    from sparkhc.batch import SparseBatch
    from sparkhc.models.jia_zhang.solver import mdc_metrics
    from sparkhc.spark.session import get_session

    loads = [loadavg()]
    t_session = time.perf_counter()
    spark = get_session("bench-mdc", master=a.master, extra_conf={
        "spark.driver.memory": a.driver_memory, "spark.driver.maxResultSize": "0",
        "spark.executorEnv.OPENBLAS_NUM_THREADS": "1"})
    spark.range(1).count()
    t_session = time.perf_counter() - t_session
    lines: list[str] = []
    rows: list[str] = []
    with tempfile.TemporaryDirectory(prefix="bench_mdc_") as tmp:
        # -- one fold of the ~9,000-row set: M3MDC (product path) against LIBLINEAR BR -------------
        X, Y = make_mdc(a.small_rows, a.features, a.nnz, seed=1)
        perm = np.random.default_rng(2).permutation(a.small_rows)
        n_test = a.small_rows // 10
        te, tr = np.sort(perm[:n_test]), np.sort(perm[n_test:])
        small = Path(tmp) / "small"
        small.mkdir()
        write_parquet(small, X[tr], Y[tr], tr)
        with MemorySampler() as mem_small:
            model, res, sec_m3, prof_small, used_small = train(spark, small, a.features)
        loads.append(loadavg())
        with MemorySampler() as mem_small_spark:  # the Spark path on the same rows, for comparison
            model_spark, _, sec_m3_spark, prof_small_spark, _ = train(spark, small, a.features, "spark")
        same = all(np.array_equal(v, model_spark.get_state().arrays[k]) for k, v in model.get_state().arrays.items())
        Xte = X[te]
        pred = model.predict_targets(SparseBatch(Xte, np.array([f"d{i:07d}" for i in te]), labels_of(Y[te])))
        hs_m3 = mdc_metrics(Y[te], pred)["hamming_score"]
        loads.append(loadavg())
        X64 = sp.csr_matrix(X[tr], dtype=np.float64)
        br = {}
        for name, kw in (("LinearSVC() defaults (C=1, squared hinge)", {}),
                         ("LinearSVC(C=10, loss='hinge'): M3MDC's loss and λ1", {"C": 1 / LAMBDA1, "loss": "hinge"})):
            t0 = time.perf_counter()
            fitted = [LinearSVC(random_state=0, **kw).fit(X64, Y[tr, j]) for j in range(Y.shape[1])]
            sec = time.perf_counter() - t0
            pred_br = np.column_stack([f.predict(Xte) for f in fitted])
            br[name] = (sec, mdc_metrics(Y[te], pred_br)["hamming_score"])
        loads.append(loadavg())
        # the same objective: a tight reference on the same rows (in this process, not timed against
        # anything): every W step to a relative duality gap of REF_GAP, no adaptive schedule
        from sparkhc.models.jia_zhang.solver import M3MDC

        t0 = time.perf_counter()
        ref = M3MDC(gap_schedule="fixed", gap_tol=REF_GAP).fit(X64, Y[tr], list(N_CLASSES))
        sec_ref = time.perf_counter() - t0
        loads.append(loadavg())
        f_fast, g_fast = final_objective(model.history_)
        f_ref, g_ref = final_objective(ref.history_)
        est = model._estimator
        alts = len(model.history_)
        sweeps = sum(h["inner_sweeps"] for h in model.history_)
        lines.append(
            f"**One fold of {a.small_rows:,} rows** ({tr.size:,} training, {te.size:,} test rows; {a.features:,} features, "
            f"{X.nnz / X.shape[0]:.1f} non-zeros per row; {est.pairs_.shape[0]} one-vs-one pairs): M3MDC "
            f"{alts} alternations, {sweeps} W-step sweeps in all, last duality gap {model.history_[-1]['duality_gap']:.2e}, "
            f"sub-problem solver {est.w_solver_!r}; where the seconds went: {prof_small}; {mem_small.summary()}. "
            f"The same fit forced onto Spark (`train.execution = spark`): {sec_m3_spark:.1f} s, {prof_small_spark}; "
            f"{mem_small_spark.summary()}; its model {'equals' if same else 'DIFFERS FROM'} the {used_small} path's "
            f"bit for bit (W, b, C).")
        targets = ", ".join(f"{h['gap_target']:.0e}" for h in model.history_)
        lines.append(
            f"**The same objective** (9,000-row fold, training rows): M3MDC as benchmarked (adaptive gap schedule, "
            f"`fit_model`) ends at {f_fast:.10g} (alternations' W-step gap targets "
            f"{targets}; final relative duality gap {g_fast:.2e}); "
            f"the tight reference (`M3MDC(gap_schedule='fixed', gap_tol={REF_GAP:g})`, serial, {len(ref.history_)} "
            f"alternations, {sec_ref:.0f} s) at {f_ref:.10g} (final relative gap {g_ref:.2e}): relative difference "
            f"{(f_fast - f_ref) / abs(f_ref):+.2e} ({'within' if abs(f_fast - f_ref) <= 1e-4 * abs(f_ref) else 'NOT within'} 1e-4).")
        rows.append(f"| M3MDC ({est.w_solver_}), {tr.size:,} rows, fit_model in {a.master}, train.execution = auto: "
                    f"**{used_small}** | {sec_m3:.1f} | {hs_m3:.4f} | | |")
        rows.append(f"| M3MDC ({est.w_solver_}), {tr.size:,} rows, fit_model in {a.master}, train.execution = spark: "
                    f"**spark** | {sec_m3_spark:.1f} | | {sec_m3_spark / sec_m3:.1f}x the auto row | |")
        worst = 0.0
        for name, (sec, hs) in br.items():
            ratio = sec_m3 / sec
            worst = max(worst, ratio)
            rows.append(f"| LIBLINEAR BR, {name}, one process | {sec:.1f} | {hs:.4f} | {ratio:.1f}x | "
                        f"{'yes' if ratio <= 10 else 'no'} (<= 10x) |")
        print("\n".join(lines + rows), flush=True)
        # -- 100,000 rows -------------------------------------------------------------------------
        if not a.skip_large:
            X, Y = make_mdc(a.rows, a.features, a.nnz, seed=3)
            large = Path(tmp) / "large"
            large.mkdir()
            write_parquet(large, X, Y, np.arange(a.rows))
            del X
            loads.append(loadavg())
            with MemorySampler() as mem:
                model, res, sec, prof_large, used_large = train(spark, large, a.features)
            loads.append(loadavg())
            peak = mem.peak["all"] / 2**30
            hist = model.history_
            rows.append(f"| M3MDC ({model._estimator.w_solver_}), {a.rows:,} rows x 7 class variables, fit_model in {a.master}, "
                        f"train.execution = auto: **{used_large}** | {sec:.1f} | | "
                        f"{'yes' if sec < 600 else 'no'} (< 600 s) | {'yes' if peak < 8 else 'no'} (< 8 GiB: {peak:.2f}) |")
            lines.append(
                f"**{a.rows:,} rows**: {len(hist)} alternations ({', '.join(str(h['inner_sweeps']) for h in hist)} sweeps), "
                f"last duality gap {hist[-1]['duality_gap']:.2e} (objective {hist[-1]['objective_after_c']:.6g}); "
                f"where the seconds went: {prof_large}; {mem.summary()}.")
    spark.stop()
    table = "| run | seconds | Hamming score (test) | time | memory |\n|---|---|---|---|---|\n" + "\n".join(rows)
    body = (
        f"Command: `{command()}`  \nMachine: {machine()}  \nDate: {now()}  \n"
        f"Load average at the start, after the small M3MDC fit (auto), after it on Spark, after LIBLINEAR, after the tight reference, "
        f"before and after the large fit: "
        f"{' -> '.join(loads)}\n\n"
        f"Synthetic MDC data from `benchmarks/bench_mdc.py` (tf-idf-like sparse rows, 7 correlated class variables with "
        f"K = {', '.join(map(str, N_CLASSES))}). M3MDC with the model defaults (λ1 = 0.1, λ2 = 0.001, `w_solver` auto: dual "
        f"coordinate descent above 2,000 rows; `gap_schedule` auto: with DCD the first W step to a relative duality gap "
        f"of 1e-3, the next ones to a tenth of the previous alternation's relative decrease, and the last one certified "
        f"to 1e-6: the alternation ends when a W step at 1e-6 cannot lower the objective by more than that gap, or "
        f"‖ΔW‖/‖W‖ < 1e-4 after a W step at 1e-6) through `sparkhc.spark.training.fit_model` (the path of `sparkhc train`), "
        f"with `train.execution` as `sparkhc train` uses it: `auto` (the default) trains in the driver process when the "
        f"master is local and the Parquet is at most 64 MiB (the rows read with pyarrow, the Spark path's pair groups and "
        f"blocks, each round's pairs in as many threads as the master has task slots, no Spark job: "
        f"`sparkhc.spark.mdc.fit_mdc_driver`, the same model bit for bit), else, and with `spark`, on Spark (rows read "
        f"from Parquet and never collected on the driver, the pair blocks in a cached RDD, two Spark jobs per W-step "
        f"sweep: SolveOrder = the sub-problems, ApplyOrder = the step and the evaluation, their reports returned "
        f"through an accumulator); each row says which execution it used; seconds from reading the rows to the fitted "
        f"model, Spark session start "
        f"({t_session:.1f} s) apart. LIBLINEAR BR: one `LinearSVC` per class variable (one-vs-rest inside, "
        f"regularised bias) on the same training rows, in this process.\n\n"
        + "\n\n".join(lines) + "\n\n" + table + "\n"
    )
    print(body)
    if not a.no_write:
        write_section("mdc", "M3MDC without an n x n Gram matrix (mdc)", body)


if __name__ == "__main__":
    main()
