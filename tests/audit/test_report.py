"""The audit report validates itself and round-trips through JSON."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from securefg.audit.exit_codes import AuditExit
from securefg.audit.ledger import LedgerRow
from securefg.audit.report import AttackEntry, AuditReport


def _report(**over) -> AuditReport:
    attacks = (
        AttackEntry(key="label_inference", attack="label_inference", metric="auc", budget=0.6, status="ran", value=0.5,
                    plaintext_status="ran", plaintext_value=1.0, chance=0.5, passed=True,
                    details={"pooled_auc": float("nan"), "estimate": ["mean"]}, roc={"plaintext": [[0.0, 1.0], [0.0, 1.0]]}),
        AttackEntry(key="link_stealing", attack="link_stealing", metric="auc", budget=None, status="skipped",
                    reason="needs side knowledge"),
    )
    kw = {"threat_model": {"name": "t", "adversary": {"parties": ["server"], "behaviour": "honest-but-curious"}},
              "run": {"method": "fedavg", "dataset": "csbm", "protocol": "fedavg_secure_sum", "plaintext_protocol": "plaintext",
                   "seed": 0},
              "ledger": (LedgerRow("fedavg/update", ("client/0",), (), {"masked": ("server",)}, {"masked": 10}, 2, 1),),
              "plaintext_ledger": (LedgerRow("fedavg/update", ("client/0",), ("server",), {}, {"plaintext": 8}, 1, 1),),
              "attacks": attacks, "assumptions": ("non-collusion",), "exit_code": int(AuditExit.SUCCESS)}
    kw.update(over)
    return AuditReport(**kw)


def test_a_report_round_trips_through_json() -> None:
    rep = _report()
    text = rep.to_json()
    json.loads(text)  # strict JSON: NaN was written as a string
    back = AuditReport.from_json(text)
    assert back.to_json() == text
    assert back.attacks[0].value == 0.5 and back.ledger == rep.ledger and back.exit_code == 0


def test_a_pass_the_value_did_not_earn_is_rejected() -> None:
    bad = replace(_report().attacks[0], value=0.9)
    with pytest.raises(ValueError, match=r"label_inference: passed=True but value 0.9 vs budget 0.6 gives False"):
        _report(attacks=(bad,))


def test_an_exit_code_that_does_not_follow_from_the_verdicts_is_rejected() -> None:
    with pytest.raises(ValueError, match="exit code 1 but the verdicts give 0"):
        _report(exit_code=1)


def test_an_exceeded_budget_gives_exit_code_one() -> None:
    over = replace(_report().attacks[0], value=0.9, passed=False)
    rep = _report(attacks=(over,), exit_code=int(AuditExit.BUDGET_EXCEEDED))
    assert rep.exceeded == [over] and "exceeded its budget" in rep.exit_help


def test_a_report_names_its_stack_and_threat_model() -> None:
    with pytest.raises(ValueError, match="run lacks 'plaintext_protocol'"):
        _report(run={"method": "fedavg", "dataset": "x", "protocol": "p", "seed": 0})
    with pytest.raises(ValueError, match="threat_model lacks 'name'"):
        _report(threat_model={"adversary": {}})


def test_fedstruct_by_design_releases_are_listed_per_tag_and_malicious_reruns_map_to_their_method():
    from securefg.audit.disclosures import by_design, method_assumptions

    assert "structure_link" in by_design("fedstruct", "fedstruct/abar")
    assert "nsf_link" in by_design("fedstruct+sign_flip10@0", "fedstruct/nsf_grad")
    assert by_design("fedstruct", "fedstruct/hardened/nse_grad") and not by_design("fedavg", "fedavg/update")
    assert method_assumptions("fedstruct") and not method_assumptions("fedavg")
