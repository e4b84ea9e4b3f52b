"""``securefg audit --threat-model FILE [run options] --out DIR``: run, attack, report, gate.

Registered by :mod:`securefg.commands.audit_cmd`; :func:`run_audit` returns the process exit
code (:class:`~securefg.audit.exit_codes.AuditExit`): 0 when every budget holds, 1 when one is
exceeded, 2 for an invalid threat model or run options, 3 when an attack failed, 4 when no
attack applies. It writes ``DIR/audit.json`` (the :class:`~securefg.audit.report.AuditReport`),
``DIR/report.md`` with ROC plots, and the two runs under ``DIR/runs/``.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace

from securefg.audit.exit_codes import AuditExit, help_text
from securefg.errors import ConfigError


def run_audit(args: argparse.Namespace) -> int:
    """Run the audit described by the CLI arguments; return its exit code."""
    from securefg.audit.auditor import audit
    from securefg.audit.render import fmt, write_report
    from securefg.audit.threat_model import ThreatModel
    from securefg.commands.out_dir import check_out_dir
    from securefg.commands.run_cmd import config_from_args

    try:
        out = check_out_dir(args.out)
        tm = ThreatModel.load(args.threat_model)
        cfg = config_from_args(args)
        cfg = replace(cfg, out=None)
        report = audit(cfg, tm, out)
    except ConfigError as exc:
        code = AuditExit.CONFIG_ERROR
        print(f"securefg audit: error: {exc}", file=sys.stderr)
        print(f"exit {int(code)}: {help_text(code)}", file=sys.stderr)
        return int(code)
    write_report(report, out)
    print(f"securefg audit: {report.run['method']} on {report.run['dataset']} against {tm.name!r} "
          f"({report.run['protocol']} vs {report.run['plaintext_protocol']})")
    for a in report.attacks:
        if a.status == "ran":
            line = (f"{a.metric} {fmt(a.value)} (plaintext {fmt(a.plaintext_value)}, side-knowledge baseline "
                    f"{fmt(a.baseline)}, advantage {fmt(a.advantage)}, budget {fmt(a.budget)})")
        else:
            line = f"{a.status}: {a.reason[:100]}"
        print(f"  {a.key:<24} {line}")
    print(f"  wrote {out / 'audit.json'} and {out / 'report.md'}")
    print(f"exit {report.exit_code}: {report.exit_help}")
    return report.exit_code


__all__ = ["run_audit"]
