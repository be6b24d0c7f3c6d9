"""Helpers for the spark-submit, cluster and Docker tests: a tiny corpus, spark-submit runs, a
standalone cluster on loopback."""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
JOBS_DIR = ROOT / "jobs"
CONF_DIR = ROOT / "conf"
WHEELHOUSE = ROOT / "dist" / "wheelhouse"

# root -> A, B; A -> A1, A2; B -> B1, B2. Each leaf has two cue words.
TAXONOMY = [("root", "A"), ("root", "B"), ("A", "A1"), ("A", "A2"), ("B", "B1"), ("B", "B2")]
CUES = {"A1": ["apple", "apricot"], "A2": ["avocado", "almond"], "B1": ["banana", "blueberry"],
        "B2": ["broccoli", "bean"]}
NOISE = ["fruit", "food", "market", "fresh", "green", "basket", "price", "season"]
N_DOCS, N_TRAIN = 80, 60


def write_tiny_corpus(folder: Path) -> tuple[Path, Path]:
    """80 JSON Lines documents (60 train, 20 test) over a 7-node taxonomy; returns (docs, taxonomy).

    Document i is about leaf i % 4, every third one also about the next leaf (two branches or
    two siblings); cue words of its leaves plus two of eight noise words. Every word is in at
    most a third of the documents, so the default ``max_df = 0.5`` keeps them all."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(0)
    leaves = sorted(CUES)
    taxonomy = folder / "taxonomy.tsv"
    taxonomy.write_text("".join(f"{p}\t{c}\n" for p, c in TAXONOMY), encoding="utf-8")
    docs = folder / "docs.jsonl"
    with docs.open("w", encoding="utf-8") as f:
        for i in range(N_DOCS):
            labels = sorted({leaves[i % 4], *([leaves[(i + 1) % 4]] if i % 3 == 0 else [])})
            tokens = [w for lab in labels for w in CUES[lab] * 2] + rng.sample(NOISE, 2)
            rng.shuffle(tokens)
            f.write(json.dumps({"id": f"d{i:03d}", "text": " ".join(tokens), "labels": labels,
                                "split": "train" if i < N_TRAIN else "test"}) + "\n")
    return docs, taxonomy


@pytest.fixture(scope="session")
def tiny_corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return write_tiny_corpus(tmp_path_factory.mktemp("tiny"))


def spark_home(python: str | Path = sys.executable) -> Path:
    """SPARK_HOME of the pyspark that ``python`` imports (pip-installed: .../site-packages/pyspark)."""
    if str(python) == sys.executable:
        from pyspark.find_spark_home import _find_spark_home

        return Path(_find_spark_home())
    out = subprocess.run([str(python), "-c", "from pyspark.find_spark_home import _find_spark_home as f; print(f())"],
                         check=True, capture_output=True, text=True)
    return Path(out.stdout.strip().splitlines()[-1])


def job_env(python: str | Path = sys.executable, home: Path | None = None) -> dict[str, str]:
    """The environment of a spark-submit run: this test's Python, loopback only, no leftovers
    of an enclosing PySpark session."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYSPARK_GATEWAY", "SPARK_", "PYSPARK_")) and k != "PYTHONPATH"}
    env.update({
        "PYSPARK_PYTHON": str(python),
        "PYSPARK_DRIVER_PYTHON": str(python),
        "SPARK_HOME": str(home or spark_home(python)),
        "SPARK_LOCAL_IP": "127.0.0.1",  # bind to loopback, never to the machine's other addresses
        "OPENBLAS_NUM_THREADS": "1",
    })
    return env


class JobFailed(AssertionError):
    pass


def spark_submit(
    job: str,
    args: Sequence[str | Path],
    log_dir: Path,
    *,
    master: str = "local[2]",
    python: str | Path = sys.executable,
    submit_flags: Sequence[str] = (),
    properties: Path = CONF_DIR / "spark-defaults.local.conf",
    home: Path | None = None,
    expect: int = 0,
    timeout: float = 900,
) -> subprocess.CompletedProcess[str]:
    """Run ``spark-submit --master MASTER ... jobs/JOB.py ARGS`` with pyspark's own
    bin/spark-submit (that of ``python``'s pyspark, or of ``home``); stdout and stderr go to
    ``log_dir/JOB-N.{out,err}``; fail with the tail of the output unless the exit status is
    ``expect``. spark-submit passes the Python driver's stderr on to its stdout (sparkhc prints its
    ``sparkhc: error:`` line on spark-submit's stderr through the JVM)."""
    home = home or spark_home(python)
    cmd = [str(home / "bin" / "spark-submit"), "--master", master, "--properties-file", str(properties),
           "--conf", "spark.driver.memory=2g", *submit_flags, str(JOBS_DIR / f"{job}.py"), *map(str, args)]
    log_dir.mkdir(parents=True, exist_ok=True)
    n = len(list(log_dir.glob(f"{job}-*.err")))
    t0 = time.perf_counter()
    env = job_env(python, home)
    if str(python) == sys.executable:  # this checkout's sparkhc (a clean venv keeps its installed one)
        env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout,
                          cwd=log_dir, stdin=subprocess.DEVNULL)
    secs = time.perf_counter() - t0
    (log_dir / f"{job}-{n}.out").write_text(proc.stdout, encoding="utf-8")
    (log_dir / f"{job}-{n}.err").write_text(proc.stderr, encoding="utf-8")
    print(f"spark-submit {job} ({master}): exit {proc.returncode} in {secs:.1f} s")
    if proc.returncode != expect:
        tail = "\n".join([*proc.stdout.splitlines()[-30:], *proc.stderr.splitlines()[-30:]])
        raise JobFailed(f"{' '.join(cmd)}\nexit {proc.returncode} (expected {expect}); output tail:\n{tail}")
    return proc


def last_json(stdout: str) -> dict:
    """The JSON object a job printed last (the CLI prints it with indent=2: from a line "{" to
    the next line "}"). spark-submit merges the Python driver's stderr (logging) into stdout."""
    lines = stdout.splitlines()
    start = max(i for i, line in enumerate(lines) if line == "{")
    end = next(i for i in range(start, len(lines)) if lines[i] == "}")
    data: dict = json.loads("\n".join(lines[start:end + 1]))
    return data


def build_wheelhouse(out: Path = WHEELHOUSE) -> Path:
    """scripts/build_wheelhouse.sh (reuses the wheels already there; rebuilds the sparkhc wheel)."""
    subprocess.run(["bash", str(ROOT / "scripts" / "build_wheelhouse.sh"), str(out)], check=True,
                   capture_output=True, text=True, stdin=subprocess.DEVNULL)
    return out


def make_venv(path: Path, packages: Sequence[str], wheelhouse: Path) -> Path:
    """A virtual environment without the system site-packages, with ``packages`` installed
    offline from ``wheelhouse``; returns its python."""
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True)
    python = path / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                    "--no-index", "--find-links", str(wheelhouse), *packages],
                   check=True, env=env, stdin=subprocess.DEVNULL)
    return python


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class StandaloneCluster:
    """``spark-class ...Master`` and ``...Worker`` processes on 127.0.0.1, each in its own process
    group (a worker's group holds its executor JVMs and their Python workers too: killing the
    group is what losing that machine does to Spark)."""

    def __init__(self, home: Path, python: Path | str, work: Path, n_workers: int = 2) -> None:
        self.home, self.python, self.work, self.n_workers = home, Path(python), work, n_workers
        self.port, self.ui_port = free_port(), free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.procs: list[subprocess.Popen[bytes]] = []
        self.workers: list[subprocess.Popen[bytes]] = []  # worker i (started or killed), in start order
        self.worker_dirs: list[Path] = []

    def _spawn(self, name: str, args: list[str]) -> subprocess.Popen[bytes]:
        env = job_env(self.python, self.home)
        env["SPARK_DAEMON_MEMORY"] = "256m"
        log = (self.work / f"{name}.log").open("wb")
        proc = subprocess.Popen(
            [str(self.home / "bin" / "spark-class"), *args], env=env, stdout=log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True,
        )
        self.procs.append(proc)
        return proc

    def start(self, timeout: float = 240) -> None:
        self.work.mkdir(parents=True, exist_ok=True)
        self._spawn("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                               "--port", str(self.port), "--webui-port", str(self.ui_port)])
        for _ in range(self.n_workers):
            self.start_worker()
        self.wait_alive(self.n_workers, timeout)

    def start_worker(self) -> int:
        """One more one-core, 1 GB worker (``workerN``, its own work dir); returns N."""
        i = len(self.workers)
        d = self.work / f"worker{i}"
        d.mkdir(parents=True, exist_ok=True)
        self.worker_dirs.append(d)
        self.workers.append(self._spawn(f"worker{i}", [
            "org.apache.spark.deploy.worker.Worker", self.url, "--cores", "1", "--memory", "1g",
            "--host", "127.0.0.1", "--webui-port", str(free_port()), "--work-dir", str(d)]))
        return i

    def kill_worker(self, i: int) -> None:
        """SIGKILL to worker ``i``'s process group: the Worker JVM, its executor JVMs and their
        Python workers die at once, with no goodbye to the master or the driver."""
        os.killpg(self.workers[i].pid, signal.SIGKILL)
        self.workers[i].wait(timeout=30)

    def executor_pids(self, i: int) -> list[int]:
        """The executor JVMs worker ``i`` runs (``CoarseGrainedExecutorBackend`` processes of its
        process group, from /proc)."""
        pids = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
                cmdline = (stat.parent / "cmdline").read_bytes()
            except OSError:
                continue
            if int(fields[2]) == self.workers[i].pid and b"CoarseGrainedExecutorBackend" in cmdline:
                pids.append(int(stat.parent.name))
        return sorted(pids)

    def kill_executors(self, i: int) -> list[int]:
        """SIGKILL to worker ``i``'s executor JVMs only (the Worker lives on and reports their
        exit to the master); returns their pids."""
        pids = self.executor_pids(i)
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        return pids

    def alive_workers(self) -> int:
        state = self.state() or {}
        return sum(w.get("state") == "ALIVE" for w in state.get("workers", []))

    def wait_alive(self, n: int, timeout: float = 240) -> None:
        """Until the master lists ``n`` ALIVE workers (fails early when a live process exits)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for p in self.procs:
                if p.poll() is not None and p.returncode != -signal.SIGKILL:
                    raise RuntimeError(f"a cluster process exited with {p.returncode}: see {self.work}/*.log")
            if self.alive_workers() == n:
                return
            time.sleep(1)
        raise TimeoutError(f"{n} workers did not register within {timeout} s: see {self.work}/*.log")

    def state(self) -> dict | None:
        """The master's JSON status page (workers, applications), or None while it is not up."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=5) as r:
                data: dict = json.loads(r.read())
                return data
        except OSError:
            return None

    def stop(self) -> None:
        """SIGTERM to every process group (workers first: their executors are in their groups),
        then SIGKILL what is left after 20 s."""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for p in reversed(self.procs):
                if p.poll() is None:
                    try:
                        os.killpg(p.pid, sig)
                    except ProcessLookupError:
                        pass
            deadline = time.monotonic() + 20
            for p in self.procs:
                try:
                    p.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    pass
            if all(p.poll() is not None for p in self.procs):
                break


def apps_by_name(state: dict) -> dict[str, list[str]]:
    """Application ids of the master's status page by application name (running and completed)."""
    apps: dict[str, list[str]] = {}
    for a in [*state.get("activeapps", []), *state.get("completedapps", [])]:
        apps.setdefault(a["name"], []).append(a["id"])
    return apps
