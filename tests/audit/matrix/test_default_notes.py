"""The page says why each failing default stays, with the robust row's measured cost."""

from __future__ import annotations

from typing import Any

from securefg.audit.matrix.default_notes import DEFAULT_NOTES, why_defaults_stay
from securefg.audit.matrix.page import robust_costs


def row(method: str, tm: str, verdict: str, *, name: str = "default", acc: float = 0.7, seconds: float = 100.0) -> dict[str, Any]:
    return {"method": method, "label": method.upper(), "threat_model": tm, "row": name, "verdict": verdict,
            "accuracy": {"protected": acc, "plaintext": acc, "metric": "test_acc"}, "seconds": seconds}


def test_each_failing_default_gets_its_note_and_passing_or_option_rows_none() -> None:
    rows = [row("fedavg", "malicious_client", "fail"), row("fedavg", "curious_server", "pass"),
            row("fedavg", "malicious_client", "pass", name="robust=krum", acc=0.66, seconds=700.0),
            row("newmethod", "malicious_client", "fail")]
    lines = why_defaults_stay(rows, robust_costs(rows))
    assert len(lines) == 2
    assert "clean accuracy 0.660 against 0.700" in lines[0] and "7.0x the default row's audit time" in lines[0]
    assert "verdict is pass" in lines[0]
    assert "no note" in lines[1]


def test_without_the_krum_row_the_note_keeps_its_measured_figures_only() -> None:
    (line,) = why_defaults_stay([row("fedavg", "malicious_client", "fail")], robust_costs([]))
    assert "In this run" not in line and "fedavg_secure_robust" in line and "{" not in line


def test_every_note_names_a_matrix_method() -> None:
    from securefg.audit.matrix.plan import FULL

    assert {m for m, _ in DEFAULT_NOTES} <= {p.method for p in FULL}
