"""``securefg summarize``: mean ± std over seeds of the result.json files of many runs."""

from __future__ import annotations

import argparse
import json
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser("summarize", help="mean ± std over seeds of many runs' result.json, one row per configuration")
    p.add_argument("paths", nargs="+", help="result.json files or folders searched for them")
    p.add_argument("--metric", default=None,
                   help="a key of result.json's metrics (default: each run's headline: test_auc on graph tasks, "
                        "test_acc on node tasks)")
    p.add_argument("--format", choices=("markdown", "json"), default="markdown",
                   help="markdown table or the rows as JSON (default: markdown)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from securefg.result_summary import find_results, load_result, summarize, to_markdown

    paths = find_results(args.paths)
    rows = summarize([load_result(p) for p in paths], metric=args.metric, sources=paths)
    print(json.dumps(rows, indent=2) if args.format == "json" else to_markdown(rows, args.metric))
    return 0
