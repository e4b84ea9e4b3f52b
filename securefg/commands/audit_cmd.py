"""``securefg audit``: run a method, then the attacks of a threat model (see securefg.audit)."""

from __future__ import annotations

import argparse
from typing import Any


def register(sub: Any) -> None:
    from securefg.commands.run_cmd import add_run_options

    p = sub.add_parser("audit", help="run a method and the attacks of a threat model; exit 1 if a budget is exceeded")
    p.add_argument("--threat-model", required=True)
    add_run_options(p)
    p.add_argument("--out", required=True)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        from securefg.audit.command import run_audit  # type: ignore[import-not-found]
    except ImportError as exc:
        from securefg.errors import ConfigError

        raise ConfigError("securefg audit is not available in this build (securefg.audit missing)") from exc
    return int(run_audit(args))
