"""Malicious-server mode from a stack file, through the party programs (the in-process backend).

``pinned_keys = "run"`` in a stack makes the Federation provision the clients' signing keys
(as it makes their channel keys); every secure sum then runs with pinned keys, signatures and
the norm bound, and must train exactly as the shipped secure-sum stack does.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from securefg.errors import InvalidInputError
from securefg.experiment import RunConfig, run_experiment

PARAMS = 'bits = 64, clip = 16777216.0, signatures = true, pinned_keys = "run", norm_bound = {bound}'
STACK = """
name = "fedavg-secure-sum-pinned"
description = "FedAvg through SecAgg+ with pinned keys, signatures and a per-client norm bound."

[tags."fedavg/model"]
mechanism = "plaintext"

[tags."fedavg/update"]
mechanism = "secure_sum"
params = {{ {params} }}

[tags."fedavg/metrics"]
mechanism = "secure_sum"
params = {{ {params} }}
"""


def _run(tmp_path: Path, protocol: str, out: str) -> dict[str, Any]:
    cfg = RunConfig(method="fedavg", dataset="csbm", partition="metis", clients=4, rounds=2, protocol=protocol,
                    seed=0, out=str(tmp_path / out), progress=False, device="cpu")
    run_experiment(cfg)
    return json.loads((tmp_path / out / "result.json").read_text())


def test_a_pinned_stack_trains_exactly_like_the_shipped_secure_sum_stack(tmp_path: Path) -> None:
    (tmp_path / "pinned.toml").write_text(STACK.format(params=PARAMS.format(bound=1e9)))
    pinned = _run(tmp_path, str(tmp_path / "pinned.toml"), "pinned")
    shipped = _run(tmp_path, "fedavg_secure_sum", "shipped")
    assert pinned["protocol"] == "fedavg-secure-sum-pinned"
    assert pinned["metrics"]["test_acc"] == shipped["metrics"]["test_acc"]
    assert [h.get("val_acc") for h in pinned["history"]] == [h.get("val_acc") for h in shipped["history"]]


def test_a_norm_bound_the_honest_updates_exceed_stops_the_run(tmp_path: Path) -> None:
    (tmp_path / "tight.toml").write_text(STACK.format(params=PARAMS.format(bound=1e-3)))
    with pytest.raises(InvalidInputError, match=r"'fedavg/update': the input of client/0 has L2 norm .* beyond the "
                                                r"secure sum's norm_bound 0.001"):
        _run(tmp_path, str(tmp_path / "tight.toml"), "tight")
