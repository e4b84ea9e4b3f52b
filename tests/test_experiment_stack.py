"""result.json says which stack content ran, and which protections it waived with ``unsafe``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from securefg.errors import ConfigError
from securefg.experiment import RunConfig, run_experiment
from securefg.result_summary import load_result, summarize, to_markdown

BORROWED = """
name = "fedavg_secure_sum"
description = "borrowed name: the update travels in plaintext"

[tags."fedavg/model"]
mechanism = "plaintext"

[tags."fedavg/update"]
mechanism = "plaintext"

[tags."fedavg/metrics"]
mechanism = "plaintext"
"""

SEEDED_DP = """
name = "fedavg-dp-seeded"

[tags."fedavg/model"]
mechanism = "plaintext"

[tags."fedavg/update"]
mechanism = "plaintext"
transforms = [{ name = "dp_gaussian", mode = "central", noise_multiplier = 1.0, clip = 1.0, secure_rng = false }]
{unsafe}

[tags."fedavg/metrics"]
mechanism = "plaintext"
"""


def _run(tmp_path: Path, protocol: str, out: str) -> dict[str, Any]:
    cfg = RunConfig(method="fedavg", dataset="csbm", partition="metis", clients=3, rounds=1, protocol=protocol,
                    seed=0, out=str(tmp_path / out), progress=False, device="cpu")
    run_experiment(cfg)
    return json.loads((tmp_path / out / "result.json").read_text())


def test_result_json_marks_a_stack_that_borrows_a_shipped_name(tmp_path: Path) -> None:
    (tmp_path / "mine.toml").write_text(BORROWED)
    res = _run(tmp_path, str(tmp_path / "mine.toml"), "borrowed")
    assert res["protocol"] == "fedavg_secure_sum"
    stack = res["stack"]
    assert stack["name"] == "fedavg_secure_sum" and len(stack["sha256"]) == 64
    assert (stack["shipped"], stack["name_shadows_shipped"]) == (False, True)
    assert res["failed_protections"] == []
    row = summarize([load_result(tmp_path / "borrowed" / "result.json")], metric="test_acc")[0]
    assert f"stack=fedavg_secure_sum@{stack['sha256'][:12]} [NOT the shipped stack of that name]" in row["config"]
    assert "NOT the shipped stack" in to_markdown([row], "test_acc")


def test_result_json_names_a_shipped_stack_as_shipped(tmp_path: Path) -> None:
    res = _run(tmp_path, "plaintext", "shipped")
    assert res["stack"]["shipped"] and res["stack"]["shipped_as"] == "plaintext"
    assert not res["stack"]["name_shadows_shipped"]
    row = summarize([load_result(tmp_path / "shipped" / "result.json")], metric="test_acc")[0]
    assert "stack=" not in row["config"] and "failed" not in row["config"]


def test_seeded_dp_noise_is_refused_before_any_data_moves(tmp_path: Path) -> None:
    (tmp_path / "dp.toml").write_text(SEEDED_DP.replace("{unsafe}", ""))
    with pytest.raises(ConfigError, match="dp_gaussian/secure_noise"):
        _run(tmp_path, str(tmp_path / "dp.toml"), "refused")
    assert not (tmp_path / "refused").exists()


def test_a_waived_protection_is_named_in_result_json_with_its_reason(tmp_path: Path) -> None:
    (tmp_path / "dp.toml").write_text(SEEDED_DP.replace("{unsafe}", 'unsafe = "reproducible simulation"'))
    res = _run(tmp_path, str(tmp_path / "dp.toml"), "waived")
    (failed,) = res["failed_protections"]
    assert (failed["protection"], failed["tag"], failed["reason"]) == (
        "dp_gaussian/secure_noise", "fedavg/update", "reproducible simulation")
    assert res["privacy"]["notes"][0].startswith("the epsilon does NOT hold")
    row = summarize([load_result(tmp_path / "waived" / "result.json")], metric="test_acc")[0]
    assert row["config"].endswith("[failed protections: dp_gaussian/secure_noise]")
