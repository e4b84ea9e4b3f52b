"""``securefg datasets``: which datasets are under the data root, with their sizes (``--verify``: loaded).

Without ``--verify`` it checks that each dataset's raw files exist and prints the catalog's sizes
(:data:`securefg.data.catalog.STATS`): no torch, no PyG, under a second. ``--verify`` loads every
present dataset and prints the counts it found (about a minute and 3 GB of memory for the whole
catalog; ``--kind`` narrows it).
"""

from __future__ import annotations

import argparse
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser("datasets", help="list the datasets under the data root and their sizes (--verify: load each)",
                       description="List every dataset securefg can read, whether its raw files are under the data "
                                   "root, and its size. Nothing is loaded unless --verify.")
    p.add_argument("--data-root", default=None, metavar="DIR",
                   help="dataset root (default: $SECUREFG_DATA, else ~/.cache/securefg/datasets)")
    p.add_argument("--kind", choices=("node", "graph"), default=None,
                   help="only node or only graph classification datasets (default: both)")
    p.add_argument("--verify", action="store_true",
                   help="load each present dataset and print what was loaded (slow: about a minute for all)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from securefg.data.availability import available_datasets
    from securefg.data.catalog import STATS
    from securefg.data.root import resolve_root

    root = resolve_root(args.data_root)
    statuses = available_datasets(args.data_root, kind=args.kind, verify=args.verify)
    source = "loaded and counted" if args.verify else "from the catalog; --verify loads and counts"
    print(f"data root: {root} (--data-root DIR, else $SECUREFG_DATA, else ~/.cache/securefg/datasets)")
    header = f"{'dataset':<16}{'kind':<7}{'files':<9}size ({source})"
    lines = [header, "-" * len(header)]
    for s in statuses:
        if s.status == "missing":
            state, info = "missing", s.detail
        elif s.status == "error":
            state, info = "ERROR", s.detail
        else:
            state, info = ("loaded" if args.verify else "present"), _size(s.counts or STATS.get(s.name, {}))
        lines.append(f"{s.name:<16}{s.kind:<7}{state:<9}{info}")
    present = sum(s.status == "ok" for s in statuses)
    lines.append(f"{present} of {len(statuses)} present; synthetic sets need no files: csbm (node), "
                 "synthetic-graphs (graph)")
    print("\n".join(lines))
    return 0


def _size(counts: dict[str, int]) -> str:
    order = ("graphs", "nodes", "edges", "features", "classes")
    return ", ".join(f"{counts[k]:,} {k}" for k in order if k in counts)
