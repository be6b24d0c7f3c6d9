"""``sparkhc fetch``: download a public corpus into the cache (checksummed), or list them."""

from __future__ import annotations

import argparse
from typing import Any

from sparkhc.cli._common import data_flags, verbose_flag

HELP = "download a public corpus into the cache (checksummed)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", nargs="?", help="corpus to fetch (without it: the list of corpora)")
    p.add_argument("--list", action="store_true", help="list the known corpora")
    data_flags(p)
    verbose_flag(p)


def run(args: argparse.Namespace, spark: Any = None) -> int:
    from sparkhc.corpus import registry

    if args.list or not args.name:
        for info in registry.all_corpora():
            print(f"{info.name:16s} {info.description}")
        return 0
    print(registry.find_corpus(args.name, data_dir=args.data_dir, cache_dir=args.cache_dir))
    return 0
