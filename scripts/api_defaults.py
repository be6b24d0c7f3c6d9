#!/usr/bin/env python3
"""Write the "default" column of the Param tables of ``docs/api.md`` from the stages' defaults.

The defaults of the Params that are configuration keys come from ``sparkhc/conf/defaults.toml``
(:mod:`sparkhc.defaults`), so after a change there::

    python scripts/api_defaults.py            # rewrite docs/api.md's default cells
    python scripts/api_defaults.py --check    # exit 1 (naming the rows) when the page differs

A Param with a default gets it as a back-quoted TOML literal (```"auto"```, ```0```, ```true```);
a Param without one keeps its cell (``unset``, ``(required)``). ``tests/unit/test_defaults.py``
runs the check.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
API_MD = ROOT / "docs" / "api.md"
#: the heading of each Param table and the stage whose defaults it lists
TABLES = {
    "`HierarchicalClassifier` / `HierarchicalClassificationModel`": "HierarchicalClassifier",
    "`HierarchicalEvaluator`": "HierarchicalEvaluator",
    "`SparkhcFeaturizer` / `SparkhcFeaturizerModel`": "SparkhcFeaturizer",
}
_ROW = re.compile(r"^(\| `(\w+)` \| )([^|]+?)( \|.*)$")


def literal(value: Any) -> str:
    """A default as a back-quoted TOML literal."""
    if isinstance(value, bool):
        return f"`{'true' if value else 'false'}`"
    if isinstance(value, str):
        return f"`{json.dumps(value)}`"
    if isinstance(value, int | float):
        return f"`{value!r}`"
    if isinstance(value, dict) and not value:
        return "`{}`"
    raise TypeError(f"no literal for a default of type {type(value).__name__}: {value!r}")


def rewrite(text: str) -> tuple[str, list[str]]:
    """(the page with every Param table's default cells written from the stages, the rows changed)."""
    import sparkhc.ml

    lines = text.split("\n")
    changed: list[str] = []
    heading = None
    for n, line in enumerate(lines):
        if line.startswith("## "):
            heading = line[3:]
            stage = getattr(sparkhc.ml, TABLES[heading])() if heading in TABLES else None
            continue
        m = _ROW.match(line)
        if heading not in TABLES or stage is None or not m or not stage.hasParam(m.group(2)):
            continue
        param = stage.getParam(m.group(2))
        if not stage.hasDefault(param):
            continue
        cell = literal(stage.getOrDefault(param))
        if cell != m.group(3):
            lines[n] = m.group(1) + cell + m.group(4)
            changed.append(f"{TABLES[heading]}.{m.group(2)}: {m.group(3)} -> {cell}")
    return "\n".join(lines), changed


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--check", action="store_true", help="only report the rows that differ (exit status 1)")
    args = p.parse_args(argv)
    text = API_MD.read_text(encoding="utf-8")
    new, changed = rewrite(text)
    for row in changed:
        print(row)
    if args.check:
        return 1 if changed else 0
    if changed:
        API_MD.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
