"""What the audit report says about the audited stack itself: which content ran, what it waived.

A report that names its stack (``fedavg_secure_sum``) vouches for that stack's protections. Two
things break the link, and a reviewer must see both next to the name: a user stack that borrows
a shipped stack's name with other content (:mod:`securefg.protocol.stack_identity`), and
protections the stack voids on purpose with ``unsafe = "<reason>"``
(:mod:`securefg.protocol.guarantees`), which the report lists as failed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from securefg.protocol.stack_identity import describe_identity


def stack_lines(run: Mapping[str, Any]) -> list[str]:
    """Markdown bullets for the report header: the stack's identity and its failed protections.

    Args:
        run (Mapping[str, Any]): The report's ``run`` block (reports written before these fields
            existed have neither, and get no lines).
    """
    out = []
    record = run.get("stack") or {}
    if record.get("sha256"):
        note = describe_identity(record)
        shipped = f"shipped as `{record['shipped_as']}`" if record.get("shipped_as") else "not a shipped stack"
        out.append(f"- Stack content: sha256 `{str(record['sha256'])[:16]}`, {shipped}"
                   + (f"; **{note}**" if record.get("name_shadows_shipped") else ""))
    failed = failed_lines(run.get("failed_protections") or ())
    if failed:
        out.append("- **Failed protections** (voided by the stack's settings and waived with `unsafe`):")
        out += [f"  {line}" for line in failed]
    return out


def failed_lines(failed: Sequence[Mapping[str, Any]]) -> list[str]:
    """One bullet per failed protection: name, tag, the setting that voids it and the stated reason."""
    return [f"- `{f['protection']}` on `{f['tag']}`: {f['detail']} (unsafe: \"{f['reason']}\")" for f in failed]


def failed_cell(protection_row: Mapping[str, Any]) -> str:
    """Suffix for the "cannot protect" cell of a tag whose binding waives protections."""
    failed = protection_row.get("failed_protections") or ()
    if not failed:
        return ""
    names = ", ".join(f"`{f['protection']}` (unsafe: \"{f['reason']}\")" for f in failed)
    return f" **FAILED: {names}**"


__all__ = ["failed_cell", "failed_lines", "stack_lines"]
