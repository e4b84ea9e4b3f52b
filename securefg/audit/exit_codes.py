"""Exit codes of ``securefg audit``, each with its help text (Flower ``common/exit/exit_code.py``).

A pipeline gates on the code; the help text is printed with it and written into ``report.md``.
``tests/audit/test_exit_codes.py`` fails if a code lacks help text.
"""

from __future__ import annotations

import enum


class AuditExit(enum.IntEnum):
    """Outcome of an audit, as the process exit code."""

    SUCCESS = 0
    BUDGET_EXCEEDED = 1
    CONFIG_ERROR = 2
    ATTACK_ERROR = 3
    NOTHING_AUDITED = 4


HELP: dict[AuditExit, str] = {
    AuditExit.SUCCESS: "every attack that ran stayed within its budget on the audited stack",
    AuditExit.BUDGET_EXCEEDED: (
        "at least one attack exceeded its budget on the audited stack; report.md lists which, with the "
        "plaintext value for comparison and what the mechanism can and cannot protect"
    ),
    AuditExit.CONFIG_ERROR: (
        "the threat model or the run options are invalid (the message names the file and every "
        "problem); nothing was audited"
    ),
    AuditExit.ATTACK_ERROR: (
        "an attack failed with an error (listed in report.md with its cause); no budget was exceeded "
        "among the others, but the audit is incomplete"
    ),
    AuditExit.NOTHING_AUDITED: (
        "no attack of the threat model applies to this method and adversary (all skipped, reasons in "
        "report.md); pick a threat model that matches the method"
    ),
}


def help_text(code: int) -> str:
    """The help text of ``code`` (``KeyError`` names the known codes if it is not one)."""
    try:
        return HELP[AuditExit(code)]
    except ValueError as exc:
        raise KeyError(f"unknown audit exit code {code}; known: {[int(c) for c in AuditExit]}") from exc


def decide(*, exceeded: bool, errors: bool, ran: bool) -> AuditExit:
    """The exit code for an audit's outcome (an exceeded budget wins over an error)."""
    if exceeded:
        return AuditExit.BUDGET_EXCEEDED
    if errors:
        return AuditExit.ATTACK_ERROR
    if not ran:
        return AuditExit.NOTHING_AUDITED
    return AuditExit.SUCCESS


__all__ = ["HELP", "AuditExit", "decide", "help_text"]
