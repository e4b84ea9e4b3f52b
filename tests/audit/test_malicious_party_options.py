"""The audit names the range check against malicious clients and the malicious-server mode per secure sum."""

from __future__ import annotations

from securefg.audit.protections import protections
from securefg.audit.threat_model import ThreatModel
from securefg.protocol.stack import ProtocolStack

HARDENED = {"mechanism": "secure_sum", "params": {"signatures": True, "pinned_keys": "run", "norm_bound": 5.0}}


def _stack(update: dict) -> ProtocolStack:  # type: ignore[type-arg]
    return ProtocolStack.from_dict({"name": "s", "tags": {"fedavg/model": {"mechanism": "plaintext"},
                                                          "fedavg/update": update}})


def test_protections_report_the_range_check_and_pinned_keys_of_each_secure_sum() -> None:
    (model, hard) = protections(_stack(HARDENED), ["fedavg/model", "fedavg/update"], "fedavg")
    assert "range_check" not in model
    assert (hard["range_check"], hard["pinned_keys"]) == ("norm_bound", "run")
    assert "Range check norm_bound = 5.0" in hard["cannot"] and "keys pinned" in hard["cannot"]
    (_, plain) = protections(_stack({"mechanism": "secure_sum"}), ["fedavg/model", "fedavg/update"], "fedavg")
    assert (plain["range_check"], plain["pinned_keys"]) == ("none", "none")
    assert "can substitute keys and open an input" in plain["cannot"]


def test_the_malicious_client_model_says_which_range_check_is_active() -> None:
    tm = ThreatModel.load("malicious_client")
    hard = protections(_stack(HARDENED), ["fedavg/update"], "fedavg")
    assert tm.secure_sum_defences(hard) == ("Malicious clients against secure_sum tag 'fedavg/update': range check norm_bound",)
    plain = protections(_stack({"mechanism": "secure_sum"}), ["fedavg/update"], "fedavg")
    expected = ("Malicious clients against secure_sum tag 'fedavg/update': range check "
                "none (a malicious client can shift or wrap the sum at will)")
    assert tm.secure_sum_defences(plain) == (expected,)
    assert ThreatModel.load("curious_server").secure_sum_defences(hard) == ()


def test_against_a_malicious_server_the_audit_says_whether_keys_are_pinned() -> None:
    from securefg.audit.threat_model import Adversary, Behaviour, SideKnowledge

    tm = ThreatModel("lying_server", Adversary(("server",), Behaviour.MALICIOUS), SideKnowledge(), ())
    (line,) = tm.secure_sum_defences(protections(_stack(HARDENED), ["fedavg/update"], "fedavg"))
    assert line == ("Malicious server against secure_sum tag 'fedavg/update': keys pinned (run); key substitution "
                    "and survivor-list equivocation are refused")
    (line,) = tm.secure_sum_defences(protections(_stack({"mechanism": "secure_sum"}), ["fedavg/update"], "fedavg"))
    assert line.endswith("keys not pinned: it can substitute keys and open an input")
