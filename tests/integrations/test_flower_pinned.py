"""Malicious-server mode over Flower: each party pins the signing keys of its ``--directory``.

``securefg run --backend flower`` makes every party's key folder and the directory as the
multi-host commands do (``public.json`` now carries ``signing_key``); a stack with
``pinned_keys = "run"`` then runs with each process holding only its own signing key and the
pinned public keys, and trains exactly as in process.
"""

from pathlib import Path

import pytest

pytest.importorskip("flwr")

from securefg.experiment import RunConfig, run_experiment
from securefg.integrations.flower.launcher import run_flower_experiment

PARAMS = 'bits = 64, clip = 16777216.0, signatures = true, pinned_keys = "run", norm_bound = 1e9'
STACK = f"""
name = "fedavg-secure-sum-pinned"

[tags."fedavg/model"]
mechanism = "plaintext"

[tags."fedavg/update"]
mechanism = "secure_sum"
params = {{ {PARAMS} }}

[tags."fedavg/metrics"]
mechanism = "secure_sum"
params = {{ {PARAMS} }}
"""


def test_a_pinned_stack_over_flower_matches_the_in_process_backend(tmp_path: Path) -> None:
    (tmp_path / "pinned.toml").write_text(STACK)
    cfg = RunConfig(method="fedavg", dataset="csbm", clients=3, rounds=2, seed=5, hidden=8, local_epochs=10, lr=0.05,
                    progress=False, protocol=str(tmp_path / "pinned.toml"))
    fl = run_flower_experiment(cfg, workdir=tmp_path / "work")
    ip = run_experiment(cfg)
    assert fl["protocol"] == ip["protocol"] == "fedavg-secure-sum-pinned"
    assert fl["flower"]["dropped"] == {}
    assert [h["mean_val"] for h in fl["history"]] == pytest.approx([h["mean_val"] for h in ip["history"]], abs=1e-9)
    # pinned keys make each call's key messages longer (key signatures); equal bytes per tag mean
    # every Flower party ran pinned too (a party without the directory would have stopped)
    assert fl["bytes_by_tag"] == ip["bytes_by_tag"]
