"""``securefg audit``: run a method, then the attacks of a threat model (see securefg.audit)."""

from __future__ import annotations

import argparse
from typing import Any


def register(sub: Any) -> None:
    from securefg.commands.run_cmd import add_run_options

    p = sub.add_parser("audit", help="run a method and the attacks of a threat model; exit 1 if a budget is exceeded",
                       description="Run a method under its stack and under plaintext, run the threat model's attacks "
                                   "on what each adversary saw, and write <out>/audit.json and <out>/report.md. "
                                   "Exit 0: every budget holds; 1: one is exceeded; 2: bad threat model or run "
                                   "options; 3: an attack failed; 4: no attack applies.")
    p.add_argument("--threat-model", required=True, metavar="TM",
                   help="a name in threat_models/ (curious_server, curious_clients, ...) or a TOML path")
    add_run_options(p)
    p.add_argument("--out", required=True, metavar="DIR", help="output folder: audit.json, report.md, runs/")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import sys

    from securefg.commands.preflight import check_run
    from securefg.commands.run_cmd import config_from_args
    from securefg.errors import ConfigError

    try:  # names, kinds and files before torch is imported; the audit's own exit code for bad options
        check_run(config_from_args(args))
    except ConfigError as exc:
        from securefg.audit.exit_codes import AuditExit, help_text

        print(f"securefg audit: error: {exc}", file=sys.stderr)
        print(f"exit {int(AuditExit.CONFIG_ERROR)}: {help_text(AuditExit.CONFIG_ERROR)}", file=sys.stderr)
        return int(AuditExit.CONFIG_ERROR)
    try:
        from securefg.audit.command import run_audit  # type: ignore[import-not-found]
    except ImportError as exc:
        from securefg.errors import ConfigError

        raise ConfigError("securefg audit is not available in this build (securefg.audit missing)") from exc
    return int(run_audit(args))
