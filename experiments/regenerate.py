"""Regenerate every table, JSON and plot under ``docs/results/`` with one command.

::

    sparkhc experiment all --data-dir ../shared/data                 # every results page (slow)
    python -m experiments.regenerate --data-dir ../shared/data       # the same
    python -m experiments.regenerate --data-dir ../shared/data --only xiao
    sparkhc experiment all --quick --data-dir ../shared/data --out /tmp/quick   # smoke run, seconds
    # regenerate into a scratch folder and compare with the committed files (stamps and timings ignored)
    python -m experiments.regenerate --data-dir ../shared/data --only xiao --out /tmp/regen --check
    # several experiments (exact names, space- or comma-separated); check the files of each
    python -m experiments.regenerate --data-dir ../shared/data --only murawaki murawaki-curve --out /tmp/regen --check
    # code changed and the pages are not regenerated in this submission: mark them stale (one line each)
    python -m experiments.regenerate --mark-stale murawaki murawaki-curve --why "the DP decoder's tie rule changed"

Each job is one ``sparkhc experiment NAME [--corpus C]`` run (:data:`JOBS`, in this order) on one
local SparkSession; every file it writes is stamped by :mod:`experiments.harness` with the command,
the git commit and the date. ``--quick`` runs every job on the tiny staged slices
(:mod:`experiments.quick`) into ``--out`` (never into ``docs/results``). The wall time of each job
is printed and returned.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import re
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sparkhc.config import Config

log = logging.getLogger(__name__)

#: (experiment, --corpus) in run order; together they write every file under docs/results/
JOBS: tuple[tuple[str, str | None], ...] = (
    ("murawaki", "rcv1v2_subset"),
    ("murawaki", "reuters21578"),
    ("murawaki", "20newsgroups"),
    ("murawaki-curve", "rcv1v2_subset"),
    ("murawaki-curve", "reuters21578"),
    ("murawaki-curve", "20newsgroups"),
    ("cesa-bianchi", "rcv1v2_subset"),
    ("cesa-bianchi", "reuters21578"),
    ("cesa-bianchi", "ohsumed23"),
    ("li-yamanishi", None),
    ("m3mdc", None),
    ("m3mdc", "reuters21578"),
    ("xiao", "20newsgroups"),
    ("xiao", "rcv1v2_subset"),
)


def regenerate(data_dir: str | None, out_root: str | None, cfg: Config, *, quick: bool = False,
               master: str | None = None, spark: Any = None, only: Sequence[str] | None = None) -> dict[str, float]:
    """Run :data:`JOBS` (``only``: those experiments); outputs go to ``<out_root>/<results folder>``
    (default ``docs/results``; with ``quick`` a scratch folder). Returns seconds per job."""
    import experiments

    if isinstance(only, str):
        only = [only]
    if quick and out_root is None:
        out_root = str(Path(tempfile.gettempdir()) / "sparkhc-experiment-quick")
    seconds: dict[str, float] = {}
    for name, corpus in JOBS:
        if only and name not in only:
            continue
        folder = Path(experiments.DEFAULT_OUT[name]).name
        out = str(Path(out_root) / folder) if out_root is not None else None
        label = name + (f" --corpus {corpus}" if corpus else "")
        t0 = time.perf_counter()
        log.info("regenerate: %s", label)
        experiments.run(name, corpus, data_dir, out, cfg, quick=quick, master=master, spark=spark)
        seconds[label] = round(time.perf_counter() - t0, 1)
        print(f"{label}: {seconds[label]:.1f} s", flush=True)
    return seconds


#: a table column or JSON key that holds a wall time (ignored by :func:`compare_trees`)
TIMING = re.compile(r"(?:\b|_)seconds?\b|\((?:s|sec|min)\)|\bfit s\b|\btime\b|\bwall\b|^s$", re.IGNORECASE)
#: a wall time inside a sentence ("... Wall time 87.1 s (local mode ..."), masked by :func:`compare_trees`
INLINE_TIMING = re.compile(r"\b((?:wall|job|run|investigation) time) [0-9][0-9.,]* ?(?:s|min|seconds|minutes)\b"
                           r"|(; |, |\(wall )[0-9][0-9.,]* s\)", re.IGNORECASE)
#: a heading of a section that holds wall times only ("## Timing"), skipped by :func:`compare_trees`
TIMING_HEADING = re.compile(r"^#+ (Timings?|Wall times?)\b", re.IGNORECASE)
#: a stamp inside a sentence or a table cell ("commit `1d682b78a888`, 2026-12-01T17:19:41Z")
INLINE_STAMP = re.compile(r"commit `[0-9a-f]{7,40}`(?:,| on) \d{4}-\d\d-\d\dT[0-9:]+Z")
#: JSON floats this close (relative) are equal: a few ulps of a long sum, whose last bits follow the BLAS
#: kernel's summation order (a log-likelihood -2021542.3261672987 vs ...985); a real change moves far more digits
FLOAT_RTOL = 1e-12
@dataclass(frozen=True)
class CpuTolerance:
    """How :func:`compare_file` compares a results folder whose numbers depend on the CPU's
    floating-point kernels (:data:`CPU_SENSITIVE`): ``json`` (a pattern of a JSON value's path, its
    absolute tolerance or None for "not compared"; the first match applies), ``numbers`` (the absolute
    tolerance of the numbers inside Markdown lines and JSON strings; 0: exact), ``trace_columns``
    (Markdown table columns whose header matches are not compared, as timing columns are) and
    ``trace_sections`` (Markdown sections whose heading matches are skipped, as a timing section is).
    Plots of such a folder are not compared pixel by pixel: the numbers behind them are."""

    json: tuple[tuple[re.Pattern[str], float | None], ...] = ()
    numbers: float = 0.0
    trace_columns: re.Pattern[str] | None = None
    trace_sections: re.Pattern[str] | None = None


#: results folders whose numbers depend on the CPU's floating-point kernels (the same code on an
#: Intel Xeon and on an AMD EPYC, 2026-12-05; murawaki and cesa_bianchi are bit-identical). Li & Yamanishi's EM fits and threshold sweeps on small
#: categories: a method's BEP moves by at most 0.0007, one category's by 0.04, a precision-recall
#: curve anywhere; its Markdown tables (rounded) are equal. M3MDC's alternating solver: the W-step
#: traces (objectives from the 8th digit, duality gaps, sweeps, alternations, converged folds) move,
#: and a metric of one sensitivity-grid cell by 0.001.
CPU_SENSITIVE: dict[str, CpuTolerance] = {
    "li_yamanishi": CpuTolerance(json=((re.compile(r"/bep$"), 0.005), (re.compile(r"/bep_per_category/"), 0.05),
                                       (re.compile(r"/curve/"), None))),
    "m3mdc": CpuTolerance(
        json=((re.compile(r"/history\b|/n_iter$|converged|duality_gap|/full_fit/[CR]\b|alternations"), None),
              (re.compile(r"."), 0.002)),
        numbers=0.002,
        trace_columns=re.compile(r"converged|gap|objective|‖|relative|sweeps|previous W kept|alternations",
                                 re.IGNORECASE),
        trace_sections=re.compile(r"^#+ (Convergence\b|.*M3MDC on the whole data set)")),
    # Xiao et al.'s EM on rcv1v2_subset (1% / 2% labelled): a single run's micro-F1 moves by up to
    # 2.4 points (on its single-path test documents) and a table mean by 0.03; its traces
    # (log-likelihoods, path counts) anywhere
    "xiao": CpuTolerance(
        json=((re.compile(r"/loglik|/path_counts|/n_iter$|/top_share|/depth_micro"), None),
              (re.compile(r"^/cells\[|^/investigation/results\[|/runs\["), 3.0),
              (re.compile(r"."), 0.05)),
        numbers=0.05),
}
#: a Markdown line that is a stamp, a stale mark (:mod:`experiments.pages`) or a timing sentence (ignored by
#: :func:`compare_trees`)
TIMING_LINE = re.compile(r"^(Generated by |Stale: |Wall time|Investigation time|Run time|Job time|Total [0-9.]+ s\b)")


def _json_key_is_timing(key: str) -> bool:
    return key in ("generated", "machine") or any(t in key.lower() for t in ("seconds", "wall", "time"))


def _strip_json(doc: Any) -> Any:
    """``doc`` without its stamp and timing fields (recursively)."""
    if isinstance(doc, dict):
        return {k: _strip_json(v) for k, v in doc.items() if not _json_key_is_timing(str(k))}
    if isinstance(doc, list):
        return [_strip_json(v) for v in doc]
    return doc


def _strip_markdown(text: str, cpu: CpuTolerance | None = None) -> list[str]:
    """The lines of a page without stamp and timing lines, and with the cells of timing columns
    of its tables (a header cell matching :data:`TIMING`) blanked; with ``cpu`` its trace columns
    and sections too."""
    skip_cols = TIMING if cpu is None or cpu.trace_columns is None else re.compile(
        f"{TIMING.pattern}|{cpu.trace_columns.pattern}", re.IGNORECASE)
    out: list[str] = []
    timing_cols: set[int] = set()
    in_timing_section = False
    lines = text.splitlines()
    if lines and lines[0].startswith("Stale: "):  # a stale mark and the blank line after it
        lines = lines[2:] if len(lines) > 1 and not lines[1].strip() else lines[1:]
    for line in lines:
        if line.startswith("#"):  # a section headed "Timing" (wall times only) is skipped to the next heading
            in_timing_section = bool(TIMING_HEADING.match(line)) or bool(
                cpu is not None and cpu.trace_sections is not None and cpu.trace_sections.match(line))
        if in_timing_section or TIMING_LINE.match(line):
            continue
        line = INLINE_STAMP.sub("commit ...", INLINE_TIMING.sub(lambda m: (m.group(1) + " ..." if m.group(1) else m.group(2) + "..."), line))
        if line.startswith("|"):
            cells = line.strip().strip("|").split("|")
            if not timing_cols and not set("".join(cells).strip()) <= set("-: "):
                if not out or not out[-1].startswith("|"):  # a header row
                    timing_cols = {i for i, c in enumerate(cells) if skip_cols.search(c.strip())}
            cells = ["" if i in timing_cols else c.strip() for i, c in enumerate(cells)]
            out.append("|" + "|".join(cells) + "|")
        else:
            timing_cols = set()
            out.append(line)
    return out


#: a number inside a text (a Markdown line, a JSON string): sign, digits, decimals, exponent
NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?")


def same_text(a: str, b: str, tol: float) -> bool:
    """``a`` equals ``b`` but for numbers that differ by at most ``tol`` (absolute)."""
    if a == b:
        return True
    if tol <= 0 or NUMBER.sub("#", a) != NUMBER.sub("#", b):
        return False
    return all(abs(float(x) - float(y)) <= tol + 1e-12 for x, y in zip(NUMBER.findall(a), NUMBER.findall(b),
                                                                          strict=True))


def _json_diff(a: Any, b: Any, path: str = "", cpu: CpuTolerance | None = None) -> list[str]:
    """Differences of two JSON documents; with ``cpu`` a number whose path matches a pattern of
    its ``json`` is compared within that absolute tolerance (None: not compared, nor the length of
    its list), and strings up to numbers within ``cpu.numbers``."""
    rule = False if cpu is None else next((tol for pattern, tol in cpu.json if pattern.search(path)), False)
    if rule is None:
        return []
    if isinstance(a, dict) and isinstance(b, dict):
        out = [f"{path}/{k}: only in {'new' if k in a else 'committed'}" for k in sorted(set(a) ^ set(b), key=str)]
        for k in sorted(set(a) & set(b), key=str):
            out += _json_diff(a[k], b[k], f"{path}/{k}", cpu)
        return out
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{path}: {len(a)} vs {len(b)} items"]
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in _json_diff(x, y, f"{path}[{i}]", cpu)]
    if isinstance(a, float) and isinstance(b, float) and (
            (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=FLOAT_RTOL, abs_tol=rule or 0.0)):
        return []  # NaN = NaN; the last bits of a long float sum may follow the machine's summation order
    if cpu is not None and isinstance(a, str) and isinstance(b, str) and same_text(a, b, cpu.numbers):
        return []
    return [] if a == b else [f"{path}: {a!r} vs {b!r}"[:200]]


def compare_file(new: Path, committed: Path) -> list[str]:
    """Differences between a regenerated file and the committed one (empty: the same up to stamps
    and timings). Markdown: line by line after :func:`_strip_markdown`; JSON: value by value after
    :func:`_strip_json` (in a :data:`CPU_SENSITIVE` folder within its tolerances); PNG: pixel by
    pixel (the stamp is metadata; not in a CPU-sensitive folder); other files byte by byte."""
    if not committed.is_file():
        return ["not in the committed results"]
    cpu = CPU_SENSITIVE.get(committed.parent.name)
    if new.suffix == ".md":
        a = _strip_markdown(new.read_text(encoding="utf-8"), cpu)
        b = _strip_markdown(committed.read_text(encoding="utf-8"), cpu)
        if cpu is not None and len(a) == len(b) and all(same_text(x, y, cpu.numbers) for x, y in zip(a, b,
                                                                                                      strict=True)):
            return []
        import difflib

        diff = difflib.unified_diff(b, a, "committed", "new", n=0, lineterm="")
        return [d[:300] for d in diff if d[:1] in "+-" and not d.startswith(("+++", "---"))]
    if new.suffix == ".json":
        return _json_diff(_strip_json(json.loads(new.read_text(encoding="utf-8"))),
                          _strip_json(json.loads(committed.read_text(encoding="utf-8"))), cpu=cpu)
    if new.suffix == ".png" and cpu is not None:
        return []  # plots of CPU-sensitive numbers (CPU_SENSITIVE): the numbers behind them are compared
    if new.suffix == ".png":
        import matplotlib.image as mpimg
        import numpy as np

        x, y = mpimg.imread(new), mpimg.imread(committed)
        if x.shape != y.shape:
            return [f"image size {x.shape} vs {y.shape}"]
        return [] if np.array_equal(x, y) else [f"{int(np.sum(np.any(x != y, axis=-1)))} pixels differ"]
    return [] if new.read_bytes() == committed.read_bytes() else ["bytes differ"]


def compare_trees(out_root: Path, committed_root: Path, folders: Sequence[str],
                  names: Sequence[str] | None = None) -> dict[str, list[str]]:
    """Every file of ``out_root/<folder>`` against ``committed_root/<folder>``: path -> differences.
    With ``names`` (experiments) only the files their jobs write (:func:`experiments.pages.jobs_of`),
    and a committed file of theirs that was not regenerated is a difference too."""
    from experiments.pages import jobs_of

    def selected(folder: str, f: Path) -> bool:
        if not f.is_file() or names is None:
            return f.is_file()
        try:
            return any(j[0] in names for j in jobs_of(f"{folder}/{f.name}"))
        except KeyError:  # a file no job is known to write: compared, so that it is seen
            return True

    report: dict[str, list[str]] = {}
    for folder in folders:
        for f in sorted((out_root / folder).glob("*")):
            if selected(folder, f):
                report[f"{folder}/{f.name}"] = compare_file(f, committed_root / folder / f.name)
        if names is not None:
            for f in sorted((committed_root / folder).glob("*")):
                if selected(folder, f) and f"{folder}/{f.name}" not in report:
                    report[f"{folder}/{f.name}"] = ["not regenerated"]
    return report


def print_check(report: dict[str, list[str]], limit: int = 8) -> int:
    """Print the comparison; returns the number of files that differ."""
    bad = 0
    for name, diffs in report.items():
        print(f"{'same' if not diffs else 'DIFFERS'}: {name}" + (f" ({len(diffs)} difference(s))" if diffs else ""))
        for d in diffs[:limit]:
            print(f"    {d}")
        bad += bool(diffs)
    print(f"{len(report) - bad} of {len(report)} file(s) the same up to stamps and timings")
    return bad


def experiment_names(values: Sequence[str] | None) -> list[str] | None:
    """The experiments named by ``--only`` / ``--check`` / ``--mark-stale`` values (each a name or a
    comma-separated list), matched exactly against :data:`experiments.NAMES`; None for none given."""
    import experiments

    if not values:
        return None
    names = [n for v in values for n in v.split(",") if n]
    unknown = [n for n in names if n not in experiments.NAMES]
    if unknown:
        raise ValueError(f"unknown experiment(s) {', '.join(map(repr, unknown))}; known: {', '.join(experiments.NAMES)}")
    return list(dict.fromkeys(names))


def main(argv: Sequence[str] | None = None) -> int:
    from sparkhc.config import load_config

    ap = argparse.ArgumentParser(prog="python -m experiments.regenerate", description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", default="../shared/data")
    ap.add_argument("--out", default=None, help="root of the results folders (default docs/results)")
    ap.add_argument("--quick", action="store_true", help="tiny staged slices, into --out (default a scratch folder)")
    ap.add_argument("--only", nargs="+", action="extend", default=None, metavar="NAME",
                    help="only these experiments (exact names, space- or comma-separated, repeatable)")
    ap.add_argument("--master", default=None, help="Spark master (default $SPARKHC_MASTER or local[*])")
    ap.add_argument("--set", action="append", default=[], dest="overrides", metavar="KEY=VALUE")
    ap.add_argument("--check", nargs="*", action="extend", default=None, metavar="NAME",
                    help="after regenerating into --out, compare the files of these experiments (default: those "
                         "of --only, else all) with the committed docs/results (stamps and timings ignored); "
                         "exit 1 when some differ")
    ap.add_argument("--check-only", action="store_true", help="compare --out with docs/results without running")
    ap.add_argument("--committed", default=None, help="the results root to compare with (default docs/results)")
    ap.add_argument("--mark-stale", nargs="+", action="extend", default=None, metavar="NAME",
                    help="write a stale mark (first line 'Stale: WHY ...') on every Markdown page of these "
                         "experiments, without running anything")
    ap.add_argument("--why", default=None, help="with --mark-stale: the one-line reason (what changed)")
    args = ap.parse_args(argv)
    try:
        only = experiment_names(args.only)
        check = experiment_names(args.check)
        stale = experiment_names(args.mark_stale)
    except ValueError as e:
        ap.error(str(e))
    if stale is not None:
        from experiments.pages import mark_stale

        if not args.why:
            ap.error("--mark-stale needs --why \"what changed\"")
        results = Path(args.committed) if args.committed else None
        for p in mark_stale(stale, args.why, **({"results": results} if results else {})):
            print(f"marked stale: {p}")
        return 0
    checking = args.check is not None or args.check_only
    if checking and args.out is None:
        ap.error("--check needs --out (a scratch folder: the committed docs/results are the reference)")
    if only and check and set(check) - set(only) and not args.check_only:
        ap.error(f"--check {' '.join(check)}: not regenerated by --only {' '.join(only)}")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        datefmt="%H:%M:%S")
    if not args.check_only:
        regenerate(args.data_dir, args.out, load_config([], args.overrides), quick=args.quick, master=args.master,
                   only=only)
    if checking:
        import experiments

        names = check or only or list(experiments.NAMES)
        folders = sorted({Path(experiments.DEFAULT_OUT[n]).name for n in names})
        committed = Path(args.committed) if args.committed else Path(__file__).resolve().parents[1] / "docs" / "results"
        return 1 if print_check(compare_trees(Path(args.out), committed, folders, names)) else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
