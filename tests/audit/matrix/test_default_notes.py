"""The page says why each failing default stays."""

from __future__ import annotations

from typing import Any

from securefg.audit.matrix.default_notes import DEFAULT_NOTES, why_defaults_stay


def row(method: str, tm: str, verdict: str, *, name: str = "default", acc: float = 0.7, seconds: float = 100.0) -> dict[str, Any]:
    return {"method": method, "label": method.upper(), "threat_model": tm, "row": name, "verdict": verdict,
            "accuracy": {"protected": acc, "plaintext": acc, "metric": "test_acc"}, "seconds": seconds}


def test_each_failing_default_gets_its_note_and_passing_or_option_rows_none() -> None:
    rows = [row("cefgc", "malicious_client", "fail"), row("fedavg", "curious_server", "pass"),
            row("fedstruct", "malicious_client", "fail", name="robust=krum-trim0.1"),
            row("newmethod", "malicious_client", "fail")]
    lines = why_defaults_stay(rows)
    assert len(lines) == 2
    assert lines[0] == "* **CEFGC, malicious_client**: " + DEFAULT_NOTES[("cefgc", "malicious_client")]
    assert "no note" in lines[1]


def test_every_note_names_a_matrix_method() -> None:
    from securefg.audit.matrix.plan import FULL

    assert {m for m, _ in DEFAULT_NOTES} <= {p.method for p in FULL}
