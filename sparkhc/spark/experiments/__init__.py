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
        from sparkhc.spark.experiments import murawaki
        from sparkhc.spark.session import get_session

        spark = get_session("sparkhc-experiment-murawaki", master=master)
        doc = murawaki.run(spark, cfg, corpus, data_dir, out_dir, rounds=[0] if quick else None)
        return murawaki.print_table(doc)
    raise SparkhcError(f"experiment {name!r} is not wired yet")
