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
#: superseded sections, moved there verbatim by :func:`write_section` (or by hand), newest first
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
    except OSError:
        return "n/a"


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = "?"
    try:
        m = re.search(r"MemTotal:\s+(\d+)", Path("/proc/meminfo").read_text())
        if m:
            mem = f"{int(m.group(1)) / 2**20:.1f} GiB"
    except OSError:
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


#: the current page's length limit in lines (issue 53): a rerun never leaves it longer
PAGE_LIMIT = 400
#: the longest table cell on the current page: a figure or a short label, not a paragraph
CELL_LIMIT = 80
#: hand-written sections that stay on the current page whatever their age
PINNED = ("summary-issue29", "summary-throughput", "moved")
#: the head of the archive when a move has to create it
ARCHIVE_HEADER = (
    "# Benchmarks: history\n\n> Superseded measurements, kept verbatim for the record (newest first); the current "
    "figures are in [docs/benchmarks.md](../benchmarks.md).\n"
)
_START = re.compile(r"<!-- section:(\S+) -->")
_KIND = re.compile(r"\A<!-- section:\S+ -->\n<!-- kind: (.*?) -->\n")
_DATE = re.compile(r"^Date: (\d{4}-\d\d-\d\d)(?: (\d\d:\d\d))?", re.M)
#: the paragraph of the ``moved`` section that the writer keeps up to date
MOVED_LEAD = "Sections that were on this page, now in the archive:"


def _span(text: str, key: str, path: Path) -> tuple[int, int] | None:
    """Where section ``key`` starts and ends in ``text`` (end: after its end marker), None when absent;
    refuses half a section (one marker, or the end before the start)."""
    start, end = f"<!-- section:{key} -->", f"<!-- /section:{key} -->"
    if start in text and end in text:
        a, b = text.index(start), text.index(end) + len(end)
        if b < a:
            raise ValueError(f"{path}: section {key!r} has its end marker before its start marker")
        return a, b
    if start in text or end in text:
        raise ValueError(f"{path}: section {key!r} has only one of its markers {start} / {end}; fix the page first")
    return None


def section_keys(text: str) -> list[str]:
    """The section keys of a page, in page order."""
    return [m.group(1) for m in _START.finditer(text)]


def section_kind(block: str, key: str) -> str:
    """What a section measures: its ``<!-- kind: ... -->`` line (after the start marker), else its key.
    A section supersedes the sections of its kind."""
    m = _KIND.match(block)
    return m.group(1) if m else key


def section_date(block: str) -> str:
    """The first ``Date:`` of a section as ``YYYY-MM-DD HH:MM`` (time 00:00 when absent); "" when undated
    (a hand-written section): undated sections count as the oldest."""
    m = _DATE.search(block)
    return f"{m.group(1)} {m.group(2) or '00:00'}" if m else ""


def compact_tables(body: str, limit: int = CELL_LIMIT) -> str:
    """Keep every table cell a figure: a cell longer than ``limit`` characters becomes ``note N`` and its text
    goes to a numbered list after the table (nothing is dropped)."""
    out: list[str] = []
    notes: list[str] = []

    def flush() -> None:
        if notes:
            out.extend(["", "Notes:", *notes])
            notes.clear()

    lines = body.split("\n")
    for i, line in enumerate(lines):
        if line.startswith("|") and line.rstrip().endswith("|") and not set(line) <= set("|-: "):
            cells = [c.strip() for c in line.strip()[1:-1].split(" | ")]
            if any(len(c) > limit for c in cells):
                for j, c in enumerate(cells):
                    if len(c) > limit:
                        notes.append(f"{len(notes) + 1}. {c}")
                        cells[j] = f"note {len(notes)}"
                line = "| " + " | ".join(cells) + " |"
        out.append(line)
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if line.startswith("|") and not nxt.startswith("|"):
            flush()
    flush()
    return "\n".join(out)


def _archive_insert(archive: str, key: str, block: str) -> str:
    """``archive`` with ``block`` among its sections, newest first by their ``Date:`` (an undated block at
    the top); an older copy of the same key in the archive is replaced (git keeps it)."""
    span = _span(archive, key, ARCHIVE)
    if span is not None:
        a, b = span
        archive = archive[:a].rstrip("\n") + "\n\n" + archive[b:].lstrip("\n")
    date = section_date(block)
    at = None
    for m in _START.finditer(archive):
        k = m.group(1)
        sp = _span(archive, k, ARCHIVE)
        assert sp is not None
        if not date or section_date(archive[sp[0]:sp[1]]) and section_date(archive[sp[0]:sp[1]]) < date:
            at = m.start()
            break
    if at is None:
        return archive.rstrip("\n") + "\n\n" + block + "\n"
    return archive[:at] + block + "\n\n" + archive[at:]


def _cut(text: str, a: int, b: int) -> str:
    """``text`` without ``[a, b)`` and the blank lines around it (one blank line between what remains)."""
    head, tail = text[:a].rstrip("\n"), text[b:].lstrip("\n")
    return head + ("\n\n" + tail if tail else "\n")


def _note_moved(text: str, keys: list[str]) -> str:
    """The ``moved`` section of the current page, its list of archived sections extended by ``keys``."""
    span = _span(text, "moved", DOC)
    if span is None or not keys:
        return text
    a, b = span
    block = text[a:b]
    paras = block.split("\n\n")
    i = next((n for n, p in enumerate(paras) if p.startswith(MOVED_LEAD)), None)
    names: list[str] = re.findall(r"`([^`]+)`", paras[i]) if i is not None else []
    names += [k for k in keys if k not in names]
    words = [MOVED_LEAD, *[f"`{n}`," for n in names[:-1]], f"`{names[-1]}`."]
    lines, cur = [], ""
    for w in words:
        if cur and len(cur) + 1 + len(w) > 100:
            lines.append(cur)
            cur = w
        else:
            cur = f"{cur} {w}" if cur else w
    lines.append(cur)
    para = "\n".join(lines)
    if i is None:  # before the end marker
        last = paras[-1]
        marker = "<!-- /section:moved -->"
        paras[-1] = last[: last.index(marker)].rstrip("\n")
        paras.append(para + "\n" + marker)
    else:
        end = "\n<!-- /section:moved -->" if paras[i].endswith("<!-- /section:moved -->") else ""
        paras[i] = para + end
    return text[:a] + "\n\n".join(p for p in paras if p) + text[b:]


def write_section(key: str, title: str, body: str, doc: Path | None = None, *, kind: str | None = None,
                  archive: Path | None = None, limit: int = PAGE_LIMIT) -> list[str]:
    """Write the section ``key`` of docs/benchmarks.md, the page of current figures; return the keys it
    moved to the archive (``docs/archive/benchmarks-history.md``).

    A section is the text between ``<!-- section:KEY -->`` and ``<!-- /section:KEY -->``; a start marker
    without its end marker is refused (replacing up to the next section would silently eat it). What
    counts as current:

    - a rerun under a key on the page replaces that section where it stands;
    - a section supersedes the other sections of its ``kind`` (what it measures; the key when not
      given): the new one takes the place of the first of them and they move to the archive;
    - a new kind is appended at the end of the page;
    - the page stays within ``limit`` lines: while it is longer, the oldest section by its ``Date:``
      (undated ones first; never the :data:`PINNED` summaries, nor the one just written) moves to the
      archive.

    The archive keeps moved sections verbatim, newest first; each moved key is added to the ``moved``
    section's list, so a name this page ever had can be found from it. Table cells longer than
    :data:`CELL_LIMIT` characters become numbered notes under their table (:func:`compact_tables`)."""
    path = DOC if doc is None else doc
    arch_path = ARCHIVE if archive is None else archive
    if doc is not None and archive is None:
        arch_path = path.parent / "archive" / ARCHIVE.name
    path.parent.mkdir(parents=True, exist_ok=True)
    text = path.read_text(encoding="utf-8") if path.is_file() else HEADER
    kind = (kind or key).replace("-->", "->").replace("\n", " ")
    kind_line = f"<!-- kind: {kind} -->\n" if kind != key else ""
    block = f"<!-- section:{key} -->\n{kind_line}## {title}\n\n{compact_tables(body.rstrip())}\n<!-- /section:{key} -->"
    moved: list[tuple[str, str]] = []
    span = _span(text, key, path)
    if span is not None:
        text = text[:span[0]] + block + text[span[1]:]
    else:
        same = []
        for k in section_keys(text):
            sp = _span(text, k, path)
            assert sp is not None
            if k not in PINNED and section_kind(text[sp[0]:sp[1]], k) == kind:
                same.append(k)
        if same:
            sp = _span(text, same[0], path)
            assert sp is not None
            moved.append((same[0], text[sp[0]:sp[1]]))
            text = text[:sp[0]] + block + text[sp[1]:]
            for k in same[1:]:
                sp = _span(text, k, path)
                assert sp is not None
                moved.append((k, text[sp[0]:sp[1]]))
                text = _cut(text, *sp)
        else:
            text = text.rstrip() + "\n\n" + block + "\n"
    while text.count("\n") > limit:
        candidates = []
        for k in section_keys(text):
            sp = _span(text, k, path)
            assert sp is not None
            if k not in PINNED and k != key:
                candidates.append((section_date(text[sp[0]:sp[1]]), k, sp))
        if not candidates:
            print(f"benchmarks: {path} has {text.count(chr(10))} lines (limit {limit}) and no section left to "
                  "move to the archive; shorten the summaries", file=sys.stderr)
            break
        _, k, sp = min(candidates)
        moved.append((k, text[sp[0]:sp[1]]))
        text = _cut(text, *sp)
    if moved:
        arch = arch_path.read_text(encoding="utf-8") if arch_path.is_file() else ARCHIVE_HEADER
        for k, blk in moved:
            arch = _archive_insert(arch, k, blk)
        arch_path.parent.mkdir(parents=True, exist_ok=True)
        arch_path.write_text(arch, encoding="utf-8")
        text = _note_moved(text, [k for k, _ in moved])
        print(f"benchmarks: moved to {arch_path}: " + ", ".join(k for k, _ in moved), file=sys.stderr)
    path.write_text(text, encoding="utf-8")
    return [k for k, _ in moved]


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


def write_table_section(key: str, title: str, intro: str, columns: list[str], rows: list[str],
                        kind: str | None = None) -> None:
    """:func:`write_section` with the usual head (command, machine, date), an ``intro`` paragraph
    and one table of ``columns`` whose ``rows`` are already formatted as ``| a | b |`` lines."""
    body = "\n".join([
        f"Command: `{command()}`  ", f"Machine: {machine()}  ", f"Date: {now()}", "", intro, "",
        "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns), *rows,
    ])
    write_section(key, title, body, kind=kind)
