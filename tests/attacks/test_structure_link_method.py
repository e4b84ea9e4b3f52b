"""The structure-link attack against the real FedStruct-B method (not the Algorithm 3 driver).

The method keeps ``graph_view``, ``directory``, ``betas`` and ``abar`` in each client's state,
the keys the attack reads; two hops so the attack's peeling of Ā[i] is exact.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.attacks.conftest import play, run_method, threat
from tests.attacks.fedstruct_driver import structure_task

ATTACK = {"structure_link": {"pairs": 1000}}
OPTIONS = {"variant": "B", "nsf": "degree", "structure_hops": 2, "structure_dim": 16}


@pytest.fixture(scope="module")
def task() -> Any:
    return structure_task()[0]


def test_plaintext_fedstruct_hands_the_receiver_each_peer_message(task: Any) -> None:
    r = run_method(task, "fedstruct", "plaintext", rounds=1, options=OPTIONS, lr=0.002, weight_decay=5e-4)
    out = play(threat(["client/0"], ATTACK), r, task)["structure_link"]
    assert out.status == "ran", out.reason
    assert out.outcome.details["source"] == "individual"
    assert out.outcome.value >= 0.95


def test_masked_fedstruct_leaves_only_the_result_which_still_leaks(task: Any) -> None:
    r = run_method(task, "fedstruct", "fedstruct_secure", rounds=1, options=OPTIONS, lr=0.002, weight_decay=5e-4)
    out = play(threat(["client/0"], ATTACK), r, task)["structure_link"]
    assert out.status == "ran", out.reason
    assert out.outcome.details["source"] == "own result (sum)"
    assert out.outcome.value >= 0.9
