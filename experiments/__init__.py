"""Paper reproductions behind ``sparkhc experiment NAME`` (lazily imported)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sparkhc.config import Config
from sparkhc.errors import SparkhcError

DEFAULT_OUT = {
    "murawaki": "docs/results/murawaki",
    "cesa-bianchi": "docs/results/cesa_bianchi",
    "xiao": "docs/results/xiao",
    "li-yamanishi": "docs/results/li_yamanishi",
    "m3mdc": "docs/results/m3mdc",
}


def run(name: str, corpus: str | None, data_dir: str | None, out: str | None, cfg: Config,
        quick: bool = False, master: str | None = None) -> Any:
    out_dir = Path(out or DEFAULT_OUT[name])
    if name == "murawaki":
        if corpus is None:
            raise SparkhcError("experiment murawaki needs --corpus (rcv1v2_subset, reuters21578, 20newsgroups)")
        from experiments import murawaki
        from sparkhc.spark.session import get_session

        spark = get_session("sparkhc-experiment-murawaki", master=master)
        doc = murawaki.run(spark, cfg, corpus, data_dir, out_dir, rounds=[0] if quick else None)
        return murawaki.print_table(doc)
    data = Path(data_dir) if data_dir else None
    if data is None:
        raise SparkhcError(f"experiment {name} needs --data-dir (the folder with the staged corpora)")
    if name == "cesa-bianchi":
        from experiments.cesa_bianchi import CORPORA
        from experiments.cesa_bianchi import run_experiment as cesa_run

        if corpus not in CORPORA:
            raise SparkhcError(f"experiment cesa-bianchi needs --corpus, one of {', '.join(CORPORA)}")
        cesa_run(data, out_dir, corpus, quick=quick)
        return out_dir / f"table1_{corpus}{'_quick' if quick else ''}.md"
    if name == "li-yamanishi":
        from experiments.li_yamanishi import run_experiment as ly_run

        ly_run(data, out_dir)
        return out_dir / "bep.md"
    if name == "m3mdc" and corpus is not None:
        # text MDC through the pipelines: featurize --class-spaces, train / predict / evaluate
        from experiments import m3mdc_text as mdc_text
        from sparkhc.spark.session import get_session

        if corpus != mdc_text.CORPUS:
            raise SparkhcError(f"experiment m3mdc --corpus supports {mdc_text.CORPUS!r} (topic x place); "
                               f"without --corpus it runs the paper's Edm and Flare1")
        mdc_text.run(get_session("sparkhc-experiment-m3mdc", master=master), cfg, data, out_dir)
        return out_dir / f"{mdc_text.CORPUS}.md"
    if name == "m3mdc":
        from experiments.m3mdc import run_experiment as mdc_run
        from sparkhc.spark.session import get_session

        mdc_run(data, out_dir, spark=get_session("sparkhc-experiment-m3mdc", master=master))
        return out_dir / "table3.md"
    if name == "xiao":
        from experiments.xiao import run_experiment as xiao_run

        if corpus is None:
            raise SparkhcError("experiment xiao needs --corpus (20newsgroups or rcv1v2_subset)")
        xiao_run(data, out_dir, corpus)
        return out_dir / f"table2_{corpus}.md"
    raise SparkhcError(f"unknown experiment {name!r}")
