"""``securefg tune`` end to end on a synthetic graph: the study file, and --write-preset's table
that the next ``securefg run`` picks up."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from securefg.cli import main
from securefg.presets import preset_for


def test_tune_records_the_study_and_writes_a_preset_that_run_applies(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    presets = tmp_path / "presets"
    presets.mkdir()
    (presets / "fedstruct.toml").write_text(
        '# kept comment\n[csbm.random]\nsource = "paper"\nreference = "t"\nlocal_epochs = 1\n', encoding="utf-8")
    monkeypatch.setenv("SECUREFG_PRESETS", str(presets))
    monkeypatch.setenv("SECUREFG_CACHE", str(tmp_path / "cache"))
    code = main(["tune", "--method", "fedstruct", "--dataset", "csbm", "--partition", "random", "--clients", "3",
                 "--rounds", "2", "--trials", "2", "--seeds", "0", "--hidden", "8", "--params", "lr,options.dropout",
                 "--write-preset"])
    assert code == 0
    out = capsys.readouterr().out
    assert "validation only" in out and "preset: wrote [csbm.random]" in out
    study = json.loads((presets / "studies" / "fedstruct_csbm_random.json").read_text())
    assert [t["number"] for t in study["trials"]] == [0, 1] and study["trials"][0]["params"] == study["baseline"]
    assert study["sampler"] == {"name": "TPESampler", "seed": 0} and study["command"].startswith("securefg tune ")
    assert {p["name"] for p in study["search_space"]} == {"lr", "options.dropout"}
    assert all("test" not in k for t in study["trials"] for s in t["val_scores"] for k in s)
    p = preset_for("fedstruct", "csbm", "random")
    assert p.study == "studies/fedstruct_csbm_random.json" and p.local_epochs == 1  # untuned key kept
    assert p.reference.endswith("(paper: t): ['local_epochs']")
    assert (p.lr, p.options["dropout"]) == (study["chosen"]["lr"], study["chosen"]["options.dropout"])
    assert (presets / "fedstruct.toml").read_text().startswith("# kept comment\n")


def test_tune_refuses_a_method_without_a_search_space(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tune", "--method", "fedavg", "--dataset", "csbm"]) == 2
    assert "no search space for 'fedavg'" in capsys.readouterr().err


def test_a_range_given_on_the_command_line_is_searched_and_recorded(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("SECUREFG_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "study.json"
    code = main(["tune", "--method", "fedstruct", "--dataset", "csbm", "--partition", "random", "--clients", "3",
                 "--rounds", "2", "--trials", "3", "--seeds", "0", "--hidden", "8", "--params", "options.dropout",
                 "--range", "options.dropout=0.1:0.3:0.1", "--study-out", str(out)])
    assert code == 0
    study = json.loads(out.read_text())
    assert study["search_space"] == [{"name": "options.dropout", "low": 0.1, "high": 0.3, "log": False,
                                      "type": "float", "step": 0.1}]
    drawn = [t["params"]["options.dropout"] for t in study["trials"][1:]]
    assert drawn and all(any(abs(v - g) < 1e-9 for g in (0.1, 0.2, 0.3)) for v in drawn)
    assert "--range options.dropout=0.1:0.3:0.1" in study["command"]


def test_a_bad_range_is_refused_before_any_trial(capsys: pytest.CaptureFixture[str]) -> None:
    base = ["tune", "--method", "fedsheafhn", "--dataset", "csbm", "--trials", "1"]
    for item, says in [("local_epochs=15", "LOW:HIGH"), ("epochs=1:3", "not searched"),
                       ("local_epochs=5:2", "LOW < HIGH"), ("local_epochs=1:9:0.5", "STEP"),
                       ("lr=0.001:0.01:0.001", "STEP"), ("local_epochs=a:b", "numbers"),
                       ("local_epochs=1.5:9", "whole")]:
        assert main([*base, "--range", item]) == 2
        assert says in capsys.readouterr().err
