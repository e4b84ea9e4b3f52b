"""Calibration of the poisoning attacks beyond sign flip, and of the subgroup-robust defence.

Each new attack must hurt in plaintext without a defence (on the 4-client label-skewed task of
``conftest``); the robust median over subgroup sums must cut the boosted attacks' damage on a
task where no class lives mostly at the attacker (8 clients, mild skew: with the attacker
holding most of a class, any aggregator that ignores it loses that class).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.attacks.conftest import make_node_task, play, run_method, threat

ROUNDS = 15
NEW = ("label_flipping", "model_replacement", "norm_bounded_poisoning")


def _rerun(task: Any, stack: Any) -> Any:
    def rerun(method: str | None = None, protocol: Any = None) -> dict[str, Any]:
        return run_method(task, method or "fedavg", protocol or stack, rounds=ROUNDS, keep=False)

    return rerun


def test_each_new_attack_hurts_in_plaintext_without_a_defence(node_task, fedavg_plain, tmp_path: Path) -> None:
    tm = threat(["client/0"], {a: {"defences": []} for a in NEW}, behaviour="malicious")
    got = play(tm, fedavg_plain, node_task, rerun=_rerun(node_task, "plaintext"), workdir=tmp_path)
    for name in NEW:
        r = got[name]
        assert r.status == "ran", (name, r.reason)
        assert r.outcome.value >= 0.1, (name, r.outcome.details)
    assert got["model_replacement"].outcome.details["boost"] == 4.0
    assert got["model_replacement"].outcome.value > got["label_flipping"].outcome.value


def test_the_norm_bounded_attack_passes_the_norm_bound_it_was_sized_for(node_task, fedavg_plain, tmp_path: Path) -> None:
    tm = threat(["client/0"], {"norm_bounded_poisoning": {"defences": ["clip_norm"]}}, behaviour="malicious")
    r = play(tm, fedavg_plain, node_task, rerun=_rerun(node_task, "plaintext"), workdir=tmp_path)["norm_bounded_poisoning"]
    row = r.outcome.details["defences"][0]
    assert row["clip"] == pytest.approx(r.outcome.details["bound"])
    assert row["accuracy_drop"] >= 0.1  # the bound it respects does not stop it


@pytest.fixture(scope="module")
def mild_task() -> Any:
    return make_node_task(clients=8, own_share=0.15)


def test_robust_median_over_secure_subgroup_sums_cuts_boosted_attacks(mild_task: Any, tmp_path_factory: Any) -> None:
    base = run_method(mild_task, "fedavg", "fedavg_secure_sum", rounds=ROUNDS)
    attacks = {"update_poisoning": {"behaviour": "sign_flip", "factor": 10.0},
               "model_replacement": {}}
    tm = threat(["client/0"], {k: {**v, "defences": ["robust"], "robust_k": 2} for k, v in attacks.items()},
                behaviour="malicious")
    got = play(tm, base, mild_task, rerun=_rerun(mild_task, "fedavg_secure_sum"),
               workdir=tmp_path_factory.mktemp("robust"))
    for name in attacks:
        r = got[name]
        assert r.status == "ran", (name, r.reason)
        row = r.outcome.details["defences"][0]
        assert row["defence"] == "robust" and row["stack"].startswith("fedavg_secure_sum+robust_median")
        assert r.outcome.value >= 0.3, (name, r.outcome.value)
        assert row["accuracy_drop"] <= r.outcome.value / 2, (name, r.outcome.value, row)
