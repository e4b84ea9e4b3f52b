"""The audit report names a borrowed stack name and every protection the stack waived."""

from __future__ import annotations

from typing import Any

from securefg.audit.auditor import run_summary
from securefg.audit.exit_codes import AuditExit
from securefg.audit.protections import protections
from securefg.audit.render import render_markdown
from securefg.audit.report import AuditReport
from securefg.protocol.stack import ProtocolStack
from securefg.protocol.stack_identity import identify

WAIVED = ProtocolStack.from_dict({"name": "fedavg_secure_sum", "tags": {
    "fedavg/model": {"mechanism": "plaintext"},
    "fedavg/update": {"mechanism": "secure_sum", "params": {"threshold": 0.5}, "unsafe": "dropout study"},
    "fedavg/metrics": {"mechanism": "secure_sum"}}})


def _result(stack: ProtocolStack) -> dict[str, Any]:
    """The parts of a result.json the audit reads."""
    return {"protocol": stack.name, "protocol_source": stack.source, "metrics": {"test_acc": 0.5},
            "stack": identify(stack).to_json(), "failed_protections": [f.to_json() for f in stack.failed_protections]}


def _report(stack: ProtocolStack) -> AuditReport:
    summary = run_summary(_result(stack))
    run = {"method": "fedavg", "dataset": "csbm", "protocol": stack.name, "plaintext_protocol": "plaintext", "seed": 0,
           "protected_run": summary, "stack": summary["stack"], "failed_protections": summary["failed_protections"]}
    tags = ["fedavg/metrics", "fedavg/model", "fedavg/update"]
    return AuditReport(threat_model={"name": "t", "adversary": {"parties": ["server"], "behaviour": "honest-but-curious"}},
                       run=run, ledger=(), plaintext_ledger=(), attacks=(),
                       protections=tuple(protections(stack, tags, "fedavg")), exit_code=int(AuditExit.NOTHING_AUDITED))


def test_the_report_names_a_waived_protection_its_tag_and_reason() -> None:
    rep = _report(WAIVED)
    assert [f["protection"] for f in rep.run["failed_protections"]] == ["secure_sum/equivocation_threshold"]
    md = render_markdown(rep)
    assert "**Failed protections**" in md
    assert "`secure_sum/equivocation_threshold` on `fedavg/update`" in md and '(unsafe: "dropout study")' in md
    update_row = next(line for line in md.splitlines() if line.startswith("| `fedavg/update` |"))
    assert "**FAILED: `secure_sum/equivocation_threshold`" in update_row
    model_row = next(line for line in md.splitlines() if line.startswith("| `fedavg/model` |"))
    assert "FAILED" not in model_row
    assert AuditReport.from_json(rep.to_json()).run["failed_protections"] == rep.run["failed_protections"]


def test_the_report_says_when_the_audited_stack_only_borrows_a_shipped_name() -> None:
    md = render_markdown(_report(WAIVED))
    assert "**NOT the shipped stack 'fedavg_secure_sum'" in md
    shipped = render_markdown(_report(ProtocolStack.load("fedavg_secure_sum")))
    assert "shipped as `fedavg_secure_sum`" in shipped
    assert "NOT the shipped stack" not in shipped and "Failed protections" not in shipped
