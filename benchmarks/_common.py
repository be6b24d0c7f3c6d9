"""Helpers shared by the benchmark scripts: machine description, load, memory sampling and the
``docs/benchmarks.md`` section writer. Not part of the product."""

from __future__ import annotations

import datetime as _dt
import os
import platform
import re
import shlex
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "benchmarks.md"
#: superseded sections, moved there verbatim by hand (newest first); never written by the scripts
ARCHIVE = ROOT / "docs" / "archive" / "benchmarks-history.md"
#: the head of docs/benchmarks.md when a script has to create the page
HEADER = (
    "# Benchmarks\n\nThe current measurements; superseded ones are kept in `docs/archive/benchmarks-history.md`. "
    "Written by the scripts in `benchmarks/` (not tests). Every section gives the exact command, "
    "the machine, the load average next to the figures, and the date. The machine is a shared 2-core box: "
    "figures taken at a load average of 10-30 are slower than on an idle machine, by up to the load / 2.\n"
)


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:  # pragma: no cover
        return "n/a"


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:  # pragma: no cover
        pass
    mem = "?"
    try:
        m = re.search(r"MemTotal:\s+(\d+)", Path("/proc/meminfo").read_text())
        if m:
            mem = f"{int(m.group(1)) / 2**20:.1f} GiB"
    except OSError:  # pragma: no cover
        pass
    try:
        import numba

        nb = f", numba {numba.__version__}"
    except Exception:
        nb = ", numba absent"
    import numpy
    import scipy

    return (
        f"nproc {os.cpu_count()}, {mem} RAM, {cpu}; Python {platform.python_version()}, numpy {numpy.__version__}, "
        f"scipy {scipy.__version__}{nb}; shared with other jobs (see the load averages)"
    )


def command() -> str:
    return "python " + " ".join(shlex.quote(a) for a in [os.path.relpath(sys.argv[0], ROOT), *sys.argv[1:]])


def now() -> str:
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


class MemorySampler:
    """Peak RSS of this process (the driver), of the JVM and of the Python workers (Spark's
    ``pyspark.daemon`` children), sampled every ``interval`` s with psutil.

    A benchmark that cannot measure says so: without psutil the sampler refuses to start (install
    the ``bench`` extra: ``pip install -e ".[bench]"``), and a sample that fails stops the sampler
    and makes :meth:`summary` raise with the reason, instead of reporting zeros."""

    def __init__(self, interval: float = 0.25) -> None:
        try:
            import psutil  # noqa: F401
        except ImportError:
            raise SystemExit("benchmarks: memory cannot be measured without psutil; "
                             'install the bench extra: pip install -e ".[bench]"') from None
        self.error: str | None = None
        self.interval = interval
        self.peak = {"driver_python": 0, "jvm": 0, "workers_total": 0, "worker_max": 0, "all": 0, "all_pss": 0}
        self._n = 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> MemorySampler:
        self._t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._t.join()

    def _sample(self) -> None:
        import psutil

        me = psutil.Process()
        drv = me.memory_info().rss
        jvm = 0
        workers = []
        # PSS (shared pages divided among the processes sharing them: the forked Python workers
        # share the daemon's pages, which RSS counts once per worker), every 8th sample (slower)
        pss_now = self._n % 8 == 0
        self._n += 1
        pss = _pss(me) if pss_now else 0
        for ch in me.children(recursive=True):
            try:
                cmd = " ".join(ch.cmdline())
                rss = ch.memory_info().rss
                if pss_now:
                    pss += _pss(ch)
            except Exception:
                continue
            if "java" in cmd:
                jvm += rss
            elif "python" in cmd:
                workers.append(rss)
        p = self.peak
        p["driver_python"] = max(p["driver_python"], drv)
        p["jvm"] = max(p["jvm"], jvm)
        p["workers_total"] = max(p["workers_total"], sum(workers))
        p["worker_max"] = max(p["worker_max"], max(workers, default=0))
        p["all"] = max(p["all"], drv + jvm + sum(workers))
        p["all_pss"] = max(p["all_pss"], pss)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._sample()
            except Exception as e:  # a sampler that cannot sample must not report zeros
                self.error = f"{type(e).__name__}: {e}"
                return
            time.sleep(self.interval)

    def summary(self) -> str:
        if self.error is not None:
            raise RuntimeError(f"memory sampling failed ({self.error}); no memory figure")
        if self._n == 0:
            raise RuntimeError("memory sampling took no sample; no memory figure")
        g = {k: v / 2**30 for k, v in self.peak.items()}
        return (
            f"peak RSS: driver Python {g['driver_python']:.2f} GiB, JVM {g['jvm']:.2f} GiB, "
            f"Python workers {g['workers_total']:.2f} GiB (largest {g['worker_max']:.2f}), all {g['all']:.2f} GiB "
            f"(sum of RSS); all by PSS {g['all_pss']:.2f} GiB"
        )


def run_cli(argv: list[str], interval: float = 0.5, cwd: Path | None = None,
            log: Path | None = None) -> tuple[float, MemorySampler, str]:
    """Run one child process (a ``sparkhc`` CLI command) sampled by :class:`MemorySampler`: its wall
    seconds, the sampler (peaks of the whole process tree) and its stdout. A failed command stops the
    benchmark with the last lines of its stderr. ``log``: the child's stderr (its log lines) is also
    written there, whatever the outcome."""
    import subprocess

    t0 = time.perf_counter()
    with MemorySampler(interval=interval) as mem:
        p = subprocess.run(argv, capture_output=True, text=True, cwd=cwd or ROOT)
    wall = time.perf_counter() - t0
    if log is not None:
        Path(log).write_text(p.stderr, encoding="utf-8")
    if p.returncode != 0:
        print("\n".join(p.stderr.strip().splitlines()[-8:]), file=sys.stderr)
        raise SystemExit(f"{' '.join(argv[2:4])} exited {p.returncode}")
    mem.summary()  # raises when sampling failed
    return wall, mem, p.stdout


def _pss(proc: Any) -> int:
    try:
        return int(proc.memory_full_info().pss)
    except Exception:
        return int(proc.memory_info().rss)


def write_section(key: str, title: str, body: str, doc: Path | None = None) -> None:
    """Replace (or append) the section ``key`` of docs/benchmarks.md, the page of current figures.

    A section is the text between ``<!-- section:KEY -->`` and ``<!-- /section:KEY -->``. A rerun
    under a key already on the page replaces that section where it stands; a new key is appended at
    the end of the page. Superseded sections are moved by hand, verbatim, to
    ``docs/archive/benchmarks-history.md`` (:data:`ARCHIVE`), which this never reads or writes: a
    rerun under an archived key appends a new section to the current page. A start marker without
    its end marker is refused (replacing up to the next section would silently eat it)."""
    path = DOC if doc is None else doc
    path.parent.mkdir(parents=True, exist_ok=True)
    text = path.read_text(encoding="utf-8") if path.is_file() else HEADER
    start, end = f"<!-- section:{key} -->", f"<!-- /section:{key} -->"
    block = f"{start}\n## {title}\n\n{body.rstrip()}\n{end}"
    if start in text and end in text:
        a = text.index(start)
        b = text.index(end) + len(end)
        if b < a:
            raise ValueError(f"{path}: section {key!r} has its end marker before its start marker")
        text = text[:a] + block + text[b:]
    elif start in text or end in text:
        raise ValueError(f"{path}: section {key!r} has only one of its markers {start} / {end}; fix the page first")
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    path.write_text(text, encoding="utf-8")


def explore_gt() -> Any:
    """``benchmarks/explore_gt.py`` as a module (registered as ``explore_gt``: the in-process IPM
    simulation and the validation-selection helpers the accuracy scripts share)."""
    import importlib.util

    if "explore_gt" in sys.modules:
        return sys.modules["explore_gt"]
    spec = importlib.util.spec_from_file_location("explore_gt", Path(__file__).with_name("explore_gt.py"))
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["explore_gt"] = mod
    spec.loader.exec_module(mod)
    return mod


def write_table_section(key: str, title: str, intro: str, columns: list[str], rows: list[str]) -> None:
    """:func:`write_section` with the usual head (command, machine, date), an ``intro`` paragraph
    and one table of ``columns`` whose ``rows`` are already formatted as ``| a | b |`` lines."""
    body = "\n".join([
        f"Command: `{command()}`  ", f"Machine: {machine()}  ", f"Date: {now()}", "", intro, "",
        "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns), *rows,
    ])
    write_section(key, title, body)
