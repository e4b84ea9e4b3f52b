"""``securefg audit`` end to end on a tiny synthetic run: files, exit codes, report contents."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from securefg.audit.report import AuditReport
from securefg.cli import main

# SecAgg+ alone: FedAvg's default (fedavg_secure_robust) adds the key holder's judge
RUN = ["--method", "fedavg", "--dataset", "csbm", "--clients", "3", "--rounds", "2", "--hidden", "8", "--seed", "1",
       "--protocol", "fedavg_secure_sum"]


@pytest.fixture(scope="module")
def audited(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, Path]:
    out = tmp_path_factory.mktemp("audit")
    code = main(["audit", "--threat-model", "curious_server", *RUN, "--out", str(out)])
    return code, out


def test_audit_writes_a_valid_report_and_passes_with_secure_sum(audited: tuple[int, Path]) -> None:
    code, out = audited
    rep = AuditReport.from_json((out / "audit.json").read_text())
    assert code == rep.exit_code == 0
    assert rep.run["protocol"] == "fedavg_secure_sum" and rep.run["plaintext_protocol"] == "plaintext"
    by = {a.key: a for a in rep.attacks}
    assert by["label_inference"].value == pytest.approx(0.5) and by["label_inference"].plaintext_value > 0.5
    assert by["diffusion_membership"].status == "skipped"
    assert (out / "runs" / "protected" / "result.json").is_file() and (out / "runs" / "plaintext" / "result.json").is_file()


def test_the_markdown_report_starts_with_the_verdict_and_the_exposure_ledger(audited: tuple[int, Path]) -> None:
    _, out = audited
    md = (out / "report.md").read_text()
    assert md.index("**Verdict: exit code 0**") < md.index("## 1. Exposure ledger") < md.index("## 2. Attacks")
    assert "| `fedavg/update` | nobody |" in md  # nobody reads an update under secure_sum
    assert "The adversary (server) reads in the clear: nothing." in md
    assert "## 3. What each mechanism protects, and what it cannot" in md and "## 4. Assumptions" in md
    assert (out / "roc_label_inference.png").is_file() and "roc_label_inference.png" in md


def test_an_exceeded_budget_exits_with_one(tmp_path: Path) -> None:
    tm = tmp_path / "strict.toml"
    tm.write_text("""
name = "strict"
[adversary]
parties = ["server"]
behaviour = "honest-but-curious"
[attacks.label_inference]
budget = { max_auc = 0.55 }
""")
    out = tmp_path / "a"
    code = main(["audit", "--threat-model", str(tm), *RUN, "--protocol", "plaintext", "--out", str(out)])
    rep = json.loads((out / "audit.json").read_text())
    assert code == 1 == rep["exit_code"]
    assert rep["attacks"][0]["passed"] is False and "EXCEEDED" in (out / "report.md").read_text()


def test_an_invalid_threat_model_exits_with_two_and_names_the_problem(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tm = tmp_path / "broken.toml"
    tm.write_text('name = "broken"\n[adversary]\nparties = ["server"]\nbehaviour = "sneaky"\n[attacks.label_inference]\n')
    code = main(["audit", "--threat-model", str(tm), *RUN, "--out", str(tmp_path / "b")])
    err = capsys.readouterr().err
    assert code == 2
    assert "broken.toml" in err and "behaviour 'sneaky'" in err and "exit 2:" in err
    assert not (tmp_path / "b" / "audit.json").exists()
