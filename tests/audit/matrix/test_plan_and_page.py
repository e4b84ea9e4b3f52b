"""The matrix's plan, verdicts, curve stacks and page, without running a method."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from securefg.audit.matrix.cell_runner import attack_verdict, headline_epsilon, worst
from securefg.audit.matrix.curves import knob_stack_file
from securefg.audit.matrix.page import cell_verdict, counts, render
from securefg.audit.matrix.plan import FULL, QUICK, THREAT_MODELS, cells
from securefg.commands.audit_matrix_cmd import rewrite
from securefg.protocol.releases import DeclaredRelease, ReleaseKnob
from securefg.protocol.stack import ProtocolStack


def test_every_message_exchanging_method_meets_every_threat_model_with_robust_rows() -> None:
    for plan in (FULL, QUICK):
        got = cells(plan)
        methods = {c.method for c in got}
        assert methods == {"fedavg", "fedpub", "fedsheafhn", "fedstruct", "fedsage_plus", "cefgc"}
        for m in methods:
            assert {c.threat_model for c in got if c.method == m} == set(THREAT_MODELS)
        robust = [c for c in got if c.row != "default"]
        assert robust and all(c.threat_model == "malicious_client" and c.run["options"]["robust"] in ("closest", "krum")
                              for c in robust)
        assert {c.row for c in robust if c.method == "fedavg"} == {"robust=closest"}  # krum: the default stack
        assert len({c.key for c in got}) == len(got)  # one folder per cell


def test_the_fedavg_robust_row_is_the_documented_robust_audit() -> None:
    row = next(c for c in cells(FULL) if c.method == "fedavg" and c.row == "robust=closest")
    assert row.command() == ("securefg audit --threat-model malicious_client --method fedavg --dataset Cora "
                             "--partition metis --clients 10 --rounds 100 --protocol fedavg_secure_sum --seed 0 "
                             "--option robust=closest --option robust_k=2 --option robust_norm=0 --out DIR")
    default = next(c for c in cells(FULL) if c.method == "fedavg" and c.threat_model == "malicious_client")
    assert "--protocol" not in default.command()  # the default stack: fedavg_secure_robust


def test_the_fedstruct_robust_row_drops_one_client_in_ten_by_multi_krum() -> None:
    (row,) = [c for c in cells(FULL) if c.method == "fedstruct" and c.row != "default"]
    assert row.run["options"] == {"nsf": "hop2vec", "variant": "B", "robust": "krum", "robust_trim": 0.1}
    assert row.run["rounds"] == 20 and row.key == "fedstruct-b__malicious_client__robust-krum-trim0.1"


@pytest.mark.parametrize("argv, expected", [
    (["audit", "--matrix", "--quick"], ["audit-matrix", "--quick"]),
    (["--debug", "audit", "--quick", "--matrix"], ["--debug", "audit-matrix", "--quick"]),
    (["audit", "--threat-model", "x"], ["audit", "--threat-model", "x"]),
    (["run", "--matrix"], ["run", "--matrix"]),
])
def test_audit_matrix_is_reached_as_audit_dash_dash_matrix(argv: list[str], expected: list[str]) -> None:
    assert rewrite(argv) == expected


def entry(attack: str, status: str = "ran", passed: bool | None = True) -> SimpleNamespace:
    return SimpleNamespace(attack=attack, status=status, passed=passed)


def test_an_exceeded_budget_is_a_declared_release_only_when_the_stack_names_that_attack() -> None:
    rel = (DeclaredRelease("t/x", ("server",), "cosines", ("community_inference",)),)
    assert attack_verdict(entry("community_inference", passed=False), rel) == "release"
    assert attack_verdict(entry("label_inference", passed=False), rel) == "fail"
    assert attack_verdict(entry("label_inference"), rel) == "pass"
    assert attack_verdict(entry("x", status="skipped"), rel) == "n/a"
    assert attack_verdict(entry("x", status="error"), rel) == "error"
    assert worst(["pass", "release", "n/a"]) == "release" and worst(["release", "fail"]) == "fail"
    assert worst([]) == "n/a"


def test_a_release_without_its_curve_does_not_count_as_declared() -> None:
    row = {"cell": "c", "verdict": "release", "attacks": [{"verdict": "release", "release": "t/x"}]}
    assert cell_verdict(row, []) == "release without curve"
    assert cell_verdict(row, [{"cell": "c", "tags": ["t/x"]}]) == "release"
    assert counts([row, {**row, "cell": "d", "verdict": "pass"}], []) == {"release without curve": 1, "pass": 1}


def test_the_headline_epsilon_is_the_worst_client_anywhere_in_the_privacy_block() -> None:
    assert headline_epsilon({"tags": {"a": {"per_client": [{"epsilon": 2.0}, {"epsilon": 5.5}]}, "epsilon": 1}}) == 5.5
    assert headline_epsilon({"epsilon": float("inf")}) is None and headline_epsilon(None) is None


def test_a_stack_knob_writes_a_loadable_stack_with_the_value_and_a_new_name(tmp_path: Path) -> None:
    knob = ReleaseKnob((0.3, 1.0, 3.0), stack="fedpub_dp", tag="fedpub/embedding", param="noise_multiplier")
    path = knob_stack_file(knob, 1.0, tmp_path)
    st = ProtocolStack.load(path)
    assert st.name == "fedpub_dp-noise_multiplier-1" and st.releases == ProtocolStack.load("fedpub_dp").releases
    t = st.binding_for("fedpub/embedding").transforms[0]
    assert t.params["noise_multiplier"] == 1.0
    assert st.binding_for("fedpub/weights") == ProtocolStack.load("fedpub_dp").binding_for("fedpub/weights")


def test_a_knob_on_a_tag_without_that_transform_is_refused_naming_it(tmp_path: Path) -> None:
    from securefg.errors import ConfigError

    knob = ReleaseKnob((1.0, 2.0, 3.0), stack="fedpub_ckks", tag="fedpub/embedding", param="noise_multiplier")
    with pytest.raises(ConfigError, match="no transform with 'noise_multiplier'"):
        knob_stack_file(knob, 1.0, tmp_path)


def test_the_page_shows_each_attack_with_baseline_advantage_and_the_curve() -> None:
    attack = {"key": "community_inference", "attack": "community_inference", "status": "ran", "verdict": "release",
              "value": 0.8, "plaintext_value": 0.8, "baseline": 0.5, "advantage": 0.3, "margin": 0.1,
              "release": "fedpub/embedding", "reason": ""}
    row = {"cell": "fed-pub__curious_server", "label": "FED-PUB", "threat_model": "curious_server", "row": "default",
           "stack": "fedpub_ckks", "verdict": "release", "accuracy": {"metric": "test_acc", "protected": 0.7,
                                                                       "plaintext": 0.71},
           "releases": [{"tag": "fedpub/embedding", "to": ["server"], "what": "cosines", "attacks": ["community_inference"]}],
           "attacks": [attack], "command": "securefg audit ...", "seconds": 12.0}
    curve = {"cell": row["cell"], "tags": ["fedpub/embedding"], "knob_text": "stack fedpub_dp", "accuracy_metric": "test_acc",
             "points": [{"value": None, "epsilon": None, "stack": "fedpub_ckks", "accuracy": 0.7,
                         "attacks": {"community_inference": {"value": 0.8, "advantage": 0.3, "verdict": "release"}}},
                        {"value": 3.0, "epsilon": 20.4, "stack": "fedpub_dp-noise_multiplier-3", "accuracy": 0.69,
                         "attacks": {"community_inference": {"value": 0.52, "advantage": 0.02, "verdict": "pass"}}}]}
    text = render({"command": "securefg audit --matrix", "when": "today", "seconds": 60, "machine": "m", "out": "o",
                   "rows": [row], "curves": [curve]})
    assert "`community_inference` 0.800 / 0.800 / 0.500 → +0.300, margin 0.10: declared release" in text
    assert "| 3 | `fedpub_dp-noise_multiplier-3` | 20.40 | 0.520 (+0.020, pass) | 0.690 |" in text
    assert "Verdict counts (cells): release 1." in text


def test_a_cell_reruns_when_its_run_stack_or_threat_model_changes() -> None:
    from securefg.audit.matrix.cell_runner import cell_inputs
    from securefg.audit.threat_model import ThreatModel

    cell = cells(QUICK, methods=("fedpub",))[0]
    tm = ThreatModel.load(cell.threat_model)
    base = cell_inputs(cell, ProtocolStack.load("fedpub_ckks"), tm)
    assert base == cell_inputs(cell, ProtocolStack.load("fedpub_ckks"), tm)
    assert base != cell_inputs(cell, ProtocolStack.load("fedpub_dp"), tm)
    assert base != cell_inputs(cell, ProtocolStack.load("fedpub_ckks"), ThreatModel.load("curious_clients"))
    other = cells(QUICK, methods=("fedpub",), threat_models=(cell.threat_model,))[0]
    assert base == cell_inputs(other, ProtocolStack.load("fedpub_ckks"), tm)


def test_render_only_runs_nothing_and_lists_every_unfinished_cell(tmp_path: Path) -> None:
    from securefg.cli import main

    page = tmp_path / "page.md"
    assert main(["audit", "--matrix", "--render-only", "--out", str(tmp_path / "empty"), "--page", str(page)]) == 1
    text = page.read_text()
    assert "## Cells not in this page" in text
    assert text.count("* `securefg audit --threat-model") == len(cells(FULL))
    assert not (tmp_path / "empty" / "cells").exists()


def test_restore_from_a_written_matrix_seeds_cells_and_curve_points_once(tmp_path: Path) -> None:
    import json

    from securefg.audit.matrix.command import restore_cells
    from securefg.errors import InvalidInputError

    row = {"cell": "fedpub__curious_server", "inputs": {"stack": "fedpub_ckks"}, "verdict": "pass"}
    curve = {"cell": "fedpub__curious_server", "tags": ["fedpub/embedding"],
             "points": [{"value": None, "accuracy": 0.8}, {"value": 2.0, "accuracy": 0.7}]}
    doc = tmp_path / "privacy-matrix.json"
    doc.write_text(json.dumps({"rows": [row], "curves": [curve]}))
    out = tmp_path / "out"
    assert restore_cells(doc, out) == (1, 1)
    assert json.loads((out / "cells" / "fedpub__curious_server" / "cell.json").read_text()) == row
    point = out / "curves" / "fedpub__curious_server__fedpub-embedding" / "point_2.json"
    assert json.loads(point.read_text())["accuracy"] == 0.7  # the no-DP point is the row itself: not written
    point.write_text(json.dumps({"value": 2.0, "accuracy": 0.5}))  # a finished point here is kept
    assert restore_cells(doc, out) == (0, 0) and json.loads(point.read_text())["accuracy"] == 0.5
    doc.write_text(json.dumps({"rows": [{"verdict": "pass"}], "curves": []}))
    with pytest.raises(InvalidInputError, match="without its cell key"):
        restore_cells(doc, out)
    with pytest.raises(InvalidInputError, match="not a readable privacy matrix JSON"):
        restore_cells(tmp_path / "missing.json", out)
