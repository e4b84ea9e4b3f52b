"""Every exit code has help text (Flower ``exit_code_test.py``), and the decision order holds."""

from __future__ import annotations

import pytest

from securefg.audit.exit_codes import HELP, AuditExit, decide, help_text


def test_every_exit_code_has_help_text() -> None:
    for code in AuditExit:
        assert code in HELP, f"{code!r} has no help text"
        assert len(HELP[code].split()) >= 5, f"{code!r}'s help text says too little"
    assert set(HELP) == set(AuditExit)


def test_codes_are_stable_numbers_a_pipeline_can_gate_on() -> None:
    assert [int(c) for c in AuditExit] == [0, 1, 2, 3, 4]
    assert AuditExit.BUDGET_EXCEEDED == 1 and AuditExit.CONFIG_ERROR == 2  # cli.py returns 2 on SecureFGError


def test_an_exceeded_budget_wins_over_an_attack_error() -> None:
    assert decide(exceeded=True, errors=True, ran=True) is AuditExit.BUDGET_EXCEEDED
    assert decide(exceeded=False, errors=True, ran=True) is AuditExit.ATTACK_ERROR
    assert decide(exceeded=False, errors=False, ran=False) is AuditExit.NOTHING_AUDITED
    assert decide(exceeded=False, errors=False, ran=True) is AuditExit.SUCCESS


def test_help_text_of_an_unknown_code_names_the_known_ones() -> None:
    assert help_text(0).startswith("every attack")
    with pytest.raises(KeyError, match=r"unknown audit exit code 9; known: \[0, 1, 2, 3, 4\]"):
        help_text(9)
