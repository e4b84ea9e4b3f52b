"""Presets fill only what no flag sets; result.json says what was applied; --no-preset turns them off."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from securefg.cli import main
from securefg.presets import apply_preset
from securefg.presets.writer import replace_table
from securefg.run_config import RunConfig

TABLE = ('[csbm.random]\nsource = "paper"\nreference = "a test table"\nlr = 0.005\nweight_decay = 0.001\n'
         '[csbm.random.options]\ndropout = 0.1\ninput_dropout = 0.2\n')
RUN = ["run", "--method", "fedstruct", "--dataset", "csbm", "--partition", "random", "--clients", "3", "--rounds", "2",
       "--hidden", "8", "--protocol", "plaintext", "--no-progress", "--format", "json"]


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SECUREFG_PRESETS", str(tmp_path / "presets"))
    monkeypatch.setenv("SECUREFG_CACHE", str(tmp_path / "cache"))
    (tmp_path / "presets").mkdir()
    (tmp_path / "presets" / "fedstruct.toml").write_text(TABLE, encoding="utf-8")
    return tmp_path


def test_explicit_values_win_over_the_preset(folder: Path) -> None:
    cfg = RunConfig(method="fedstruct", dataset="csbm", partition="random", lr=0.01, options={"dropout": 0.4})
    run, block = apply_preset(cfg)
    assert (run.lr, run.weight_decay, run.local_epochs) == (0.01, 0.001, None)
    assert run.options == {"dropout": 0.4, "input_dropout": 0.2}
    assert block["applied"] == {"weight_decay": 0.001, "options.input_dropout": 0.2}
    assert block["overridden"] == ["lr", "options.dropout"] and block["table"] == "csbm.random"
    off, block = apply_preset(RunConfig(method="fedstruct", dataset="csbm", partition="random", preset=False))
    assert off.lr is None and off.options == {} and block == {"enabled": False, "applied": {}}
    none, block = apply_preset(RunConfig(method="fedstruct", dataset="csbm", partition="kmeans"))
    assert none.lr is None and block["table"] is None and block["enabled"]


def test_result_json_carries_the_preset_block_and_cli_flags_win(folder: Path) -> None:
    assert main([*RUN, "--out", str(folder / "a"), "--lr", "0.01"]) == 0
    result = json.loads((folder / "a" / "result.json").read_text())
    p = result["preset"]
    assert p["table"] == "csbm.random" and p["source"] == "paper" and p["reference"] == "a test table"
    assert p["applied"] == {"weight_decay": 0.001, "options.dropout": 0.1, "options.input_dropout": 0.2}
    assert p["overridden"] == ["lr"]
    assert result["config"]["lr"] == 0.01 and result["config"]["weight_decay"] == 0.001
    assert "preset" not in result["data"]
    assert main([*RUN, "--out", str(folder / "b"), "--no-preset"]) == 0
    off = json.loads((folder / "b" / "result.json").read_text())
    assert off["preset"] == {"enabled": False, "applied": {}}
    assert off["config"]["weight_decay"] is None and off["config"]["preset"] is False


def test_replace_table_keeps_other_tables_and_comments() -> None:
    text = "# head\n\n[A.x]\nsource = \"paper\"\n\n[A.x.options]\nk = 1\n\n# about B\n[B.x]\nlr = 1\n"
    out = replace_table(text, "A", "x", "[A.x]\nlr = 2\n")
    assert out == "# head\n\n[A.x]\nlr = 2\n\n# about B\n[B.x]\nlr = 1\n"
    assert replace_table("# h\n", "C", "y", "[C.y]\n") == "# h\n\n[C.y]\n"
