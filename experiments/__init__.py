"""Paper reproductions behind ``sparkhc experiment NAME`` (lazily imported).

``--quick`` runs an experiment on a tiny staged slice of its corpora (:mod:`experiments.quick`,
written to a scratch folder from ``--data-dir``) with a reduced protocol, in seconds; its files go
to ``--out`` (default: a scratch folder, never ``docs/results``). ``sparkhc experiment all``
regenerates every results page (:mod:`experiments.regenerate`).
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path
from typing import Any

from sparkhc.config import Config
from sparkhc.errors import SparkhcError

log = logging.getLogger(__name__)

NAMES = ("murawaki", "murawaki-curve", "cesa-bianchi", "xiao", "li-yamanishi", "m3mdc")

DEFAULT_OUT = {
    "murawaki": "docs/results/murawaki",
    "murawaki-curve": "docs/results/murawaki",
    "cesa-bianchi": "docs/results/cesa_bianchi",
    "xiao": "docs/results/xiao",
    "li-yamanishi": "docs/results/li_yamanishi",
    "m3mdc": "docs/results/m3mdc",
}

#: the corpora (registry names, or ``mdc`` for Edm / Flare1) an experiment reads, per --corpus
SOURCES: dict[str, dict[str | None, list[str]]] = {
    "murawaki": {"rcv1v2_subset": ["rcv1v2_subset"], "reuters21578": ["reuters21578"],
                 "20newsgroups": ["20newsgroups"]},
    "murawaki-curve": {"rcv1v2_subset": ["rcv1v2_subset"], "reuters21578": ["reuters21578"],
                       "20newsgroups": ["20newsgroups"]},
    "cesa-bianchi": {"rcv1v2_subset": ["rcv1v2_subset"], "reuters21578": ["reuters21578"],
                     "ohsumed23": ["ohsumed23"]},
    "xiao": {"20newsgroups": ["20newsgroups"], "rcv1v2_subset": ["rcv1v2_subset"]},
    "li-yamanishi": {None: ["reuters21578"]},
    "m3mdc": {None: ["mdc"], "reuters21578": ["reuters21578"]},
}


def _spark(name: str, master: str | None, spark: Any) -> Any:
    if spark is not None:
        return spark
    from sparkhc.spark.session import get_session

    return get_session(f"sparkhc-experiment-{name}", master=master)


def stage_quick(name: str, corpus: str | None, data_dir: str | None, dest: str | Path) -> str:
    """Stage the quick slices of the corpora ``name --corpus corpus`` reads into ``dest``."""
    from experiments import quick as quick_slices

    if data_dir is None:
        raise SparkhcError(f"experiment {name} --quick slices the staged corpora: pass --data-dir ../shared/data")
    for c in SOURCES[name].get(corpus, []):
        quick_slices.stage(c, data_dir, dest)
    return str(dest)


def run(name: str, corpus: str | None, data_dir: str | None, out: str | None, cfg: Config,
        quick: bool = False, master: str | None = None, spark: Any = None) -> Any:
    """Run experiment ``name`` (``sparkhc experiment all`` runs :mod:`experiments.regenerate`)."""
    if name not in DEFAULT_OUT:
        raise SparkhcError(f"unknown experiment {name!r}; known: {', '.join(NAMES)}, all")
    if corpus not in SOURCES[name]:
        known = ", ".join(str(c) for c in SOURCES[name] if c is not None)
        raise SparkhcError(f"experiment {name} --corpus {corpus!r}: supported {known or 'none'}"
                           + (" (or no --corpus)" if None in SOURCES[name] else ""))
    if not quick:
        return _run(name, corpus, data_dir, Path(out or DEFAULT_OUT[name]), cfg, False, master, spark)
    out_dir = Path(out) if out else Path(tempfile.gettempdir()) / "sparkhc-experiment-quick" / name
    with tempfile.TemporaryDirectory(prefix="sparkhc-quick-data-") as tmp:
        staged = stage_quick(name, corpus, data_dir, tmp)
        return _run(name, corpus, staged, out_dir, cfg, True, master, spark)


def _run(name: str, corpus: str | None, data_dir: str | None, out_dir: Path, cfg: Config, quick: bool,
         master: str | None, spark: Any) -> Any:
    if name == "murawaki":
        from experiments import murawaki

        doc = murawaki.run(_spark(name, master, spark), cfg, str(corpus), data_dir, out_dir,
                           rounds=[0] if quick else None, quick=quick)
        return murawaki.print_table(doc)
    if name == "murawaki-curve":
        from experiments import murawaki_curve

        murawaki_curve.run(_spark(name, master, spark), cfg, str(corpus), data_dir, out_dir,
                           fractions=(0.5, 1.0) if quick else murawaki_curve.FRACTIONS, quick=quick)
        return out_dir / f"{corpus}_learning_curve{'_quick' if quick else ''}.md"
    if data_dir is None:
        raise SparkhcError(f"experiment {name} needs --data-dir (the folder with the staged corpora)")
    data = Path(data_dir)
    if name == "cesa-bianchi":
        from experiments.cesa_bianchi import run_experiment as cesa_run

        cesa_run(data, out_dir, str(corpus), quick=quick, spark=_spark(name, master, spark), cfg=cfg)
        return out_dir / f"table1_{corpus}{'_quick' if quick else ''}.md"
    if name == "li-yamanishi":
        from experiments.li_yamanishi import run_experiment as ly_run

        ly_run(data, out_dir, spark=_spark(name, master, spark), cfg=cfg, quick=quick)
        return out_dir / "bep.md"
    if name == "m3mdc" and corpus is not None:
        # text MDC through the pipelines: featurize --class-spaces, train / predict / evaluate
        from experiments import m3mdc_text as mdc_text

        mdc_text.run(_spark(name, master, spark), cfg, data, out_dir)
        return out_dir / f"{mdc_text.CORPUS}.md"
    if name == "m3mdc":
        from experiments.m3mdc import GRID, QUICK_GRID
        from experiments.m3mdc import run_experiment as mdc_run

        mdc_run(data, out_dir, spark=_spark(name, master, spark), folds=2 if quick else None,
                grid=QUICK_GRID if quick else GRID)
        return out_dir / "table3.md"
    assert name == "xiao"
    from experiments.xiao import run_experiment as xiao_run

    xiao_run(data, out_dir, str(corpus), quick=quick, spark=_spark(name, master, spark), cfg=cfg)
    return out_dir / f"table2_{corpus}{'_quick' if quick else ''}.md"
