"""``securefg datasets``: which datasets are available under the data root, verified by loading."""

from __future__ import annotations

import argparse
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser("datasets", help="list datasets available offline (loads each to verify)")
    p.add_argument("--data-root", default=None)
    p.add_argument("--kind", choices=("node", "graph"), default=None)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from securefg.data.availability import available_datasets, format_available

    statuses = available_datasets(args.data_root, kind=args.kind)
    print(format_available(statuses))
    return 0
