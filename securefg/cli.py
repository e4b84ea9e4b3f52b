"""``securefg`` command line: only wires subcommands; each lives in ``securefg/commands/``."""

from __future__ import annotations

import argparse
import sys

from securefg.errors import SecureFGError


def main(argv: list[str] | None = None) -> int:
    from securefg.commands import (
        audit_cmd,
        datasets_cmd,
        deploy_cmd,
        partition_cmd,
        reproduce_cmd,
        run_cmd,
        summarize_cmd,
    )

    parser = argparse.ArgumentParser(prog="securefg", description="Secure aggregation for federated graph learning.")
    sub = parser.add_subparsers(dest="command", required=True)
    for mod in (run_cmd, datasets_cmd, partition_cmd, audit_cmd, summarize_cmd, reproduce_cmd, deploy_cmd):
        mod.register(sub)
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except SecureFGError as exc:
        print(f"securefg: error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
