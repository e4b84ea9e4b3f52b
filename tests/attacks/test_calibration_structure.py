"""Calibration of the structure-link attack on the real FedStruct-B method (Algorithm 3 over ``peer_sum``).

Two hops (Ā = Â², the method's β = e_{L_s}) on a 300-node CSBM over 4 random clients, one
training round (the attack reads the offline phase only). Measured trade-off with
``dp_gaussian`` (distributed, clip 5) on every contributor's ``fedstruct/abar`` message: noise
multiplier 1.0 gives AUC about 0.5 at a relative Frobenius error of the clients' Ā rows far
above 1; the attack reaches chance only where Ā is noise.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from securefg.attacks.structure_link import peel_two_hops, peelable
from securefg.data.synthetic import make_csbm
from securefg.methods.tasks import NodeTask
from securefg.models.fedstruct import (
    NodeDirectory,
    compute_abar_rows,
    init_abar_state,
    local_contributions,
    split_graph,
)
from securefg.protocol.stack import ProtocolStack
from tests.attacks.conftest import play, run_method, threat

ATTACK = {"structure_link": {"pairs": 1000}}
OPTIONS = {"variant": "B", "nsf": "degree", "structure_hops": 2, "structure_dim": 16}
SECURE = {"bits": 64, "clip": 16777216.0, "on_clip": "error", "dropout_rate": 0.0, "adversarial_rate": 0.0,
          "signatures": False}


def structure_task(seed: int = 0, clients: int = 4, nodes: int = 300) -> tuple[NodeTask, NodeDirectory]:
    """A CSBM cut over clients uniformly at random (FedStruct's main partitioning)."""
    g = make_csbm(num_nodes=nodes, num_classes=3, num_features=8, p_in=0.05, p_out=0.004, seed=seed)
    owner = torch.randint(clients, (nodes,), generator=torch.Generator().manual_seed(seed + 1))
    parts = []
    for k in range(clients):
        ids = (owner == k).nonzero().flatten()
        sub = g.subgraph(ids)
        sub.global_id = ids
        parts.append(sub)
    return NodeTask(clients=parts, num_features=8, num_classes=3, full_graph=g), NodeDirectory(owner, clients)


def abar_stack(kind: str, transforms: list[dict[str, Any]] | None = None) -> ProtocolStack:
    """Everything in the clear but ``fedstruct/abar`` (plaintext or masked, with optional transforms)."""
    abar: dict[str, Any] = {"mechanism": "plaintext"} if kind == "plaintext" else {"mechanism": "secure_sum",
                                                                                   "params": SECURE}
    if transforms:
        abar["transforms"] = transforms
        if any(t.get("secure_rng") is False for t in transforms):
            abar["unsafe"] = "seeded DP noise: the calibration must be deterministic"
    return ProtocolStack.from_dict({"name": f"abar-{kind}", "tags": {"fedstruct/abar": abar,
                                                                      "*": {"mechanism": "plaintext"}}})


@pytest.fixture(scope="module")
def setup() -> tuple[NodeTask, NodeDirectory]:
    return structure_task()


def _run(task: NodeTask, stack: ProtocolStack) -> dict[str, Any]:
    return run_method(task, "fedstruct", stack, rounds=1, options=OPTIONS, lr=0.002, weight_decay=5e-4)


def _abar_error(result: dict[str, Any], directory: NodeDirectory, task: NodeTask) -> float:
    views = split_graph(task.full_graph.edge_index, directory)
    ref = torch.cat(compute_abar_rows(views, directory, betas=(0.0, 1.0), dtype=torch.float64))
    got = torch.cat([result["_federation"].parties[f"client/{i}"].state["abar"] for i in range(directory.num_clients)])
    return float((got - ref).norm() / ref.norm())


def test_plaintext_peer_sums_hand_the_receiver_each_remote_neighbour_list(setup):
    task, _ = setup
    out = play(threat(["client/0"], ATTACK), _run(task, abar_stack("plaintext")), task)["structure_link"]
    assert out.status == "ran", out.reason
    assert out.outcome.details["source"] == "individual"
    assert out.outcome.value >= 0.95


def test_a_masked_peer_sum_leaves_the_result_itself_which_still_leaks(setup):
    task, directory = setup
    r = _run(task, abar_stack("secure"))
    assert _abar_error(r, directory, task) < 1e-9  # the secure sum computes Ā exactly
    out = play(threat(["client/0"], ATTACK), r, task)["structure_link"]
    assert out.status == "ran", out.reason
    # Ā = Â² peels exactly back to the sum of the remote neighbours' hop-1 rows
    assert out.outcome.details["source"] == "own result (sum), peeled"
    assert out.outcome.value >= 0.9


def test_dp_noise_on_the_peer_sums_reaches_chance_only_by_destroying_the_rows(setup):
    task, directory = setup
    noisy = [{"name": "dp_gaussian", "mode": "distributed", "noise_multiplier": 1.0, "clip": 5.0, "secure_rng": False}]
    r = _run(task, abar_stack("secure", noisy))
    out = play(threat(["client/0"], ATTACK), r, task)["structure_link"]
    assert out.outcome.value <= 0.6
    assert _abar_error(r, directory, task) > 1.0


def test_a_two_hop_abar_peels_back_to_the_remote_neighbours_hop1_rows(setup):
    task, directory = setup
    views = split_graph(task.full_graph.edge_index, directory)
    betas = [0.5, 0.5]
    abar = compute_abar_rows(views, directory, betas=betas, dtype=torch.float64)[0]
    states = [init_abar_state(v, directory, betas=betas, dtype=torch.float64) for v in views]
    remote = sum(local_contributions(v, s, directory=directory)[0] for v, s in zip(views[1:], states[1:], strict=True))
    assert torch.allclose(peel_two_hops(abar, views[0], directory, betas), remote, atol=1e-12)
    assert peelable(betas) and not peelable([0.0, 0.0, 1.0]) and not peelable([1.0, 0.0])
