"""FedStruct-B's Algorithm 3 driven through a federation's ``peer_sum`` (for the structure-link tests).

The real method is attacked in ``test_structure_link_method.py``; this bare driver stays for the
DP calibration (one tag, two-hop β = (0.5, 0.5), DP transforms on ``fedstruct/abar`` alone). It drives the model-side pieces
(:mod:`securefg.models.fedstruct.abar_protocol`) over the real exchange API so the transcript holds
exactly what each client received: under ``plaintext`` every contributor's :math:`B_{i\\cdot k}`,
under ``secure_sum`` masked vectors only. Each client keeps in its own state what a FedStruct-B
client holds anyway: its graph view, the public directory, the hop weights and its rows of Ā.
"""

from __future__ import annotations

from typing import Any

import torch

from securefg.data.synthetic import make_csbm
from securefg.federation.federation import Federation
from securefg.methods.tasks import NodeTask
from securefg.models.fedstruct import (
    NodeDirectory,
    assemble,
    init_abar_state,
    local_contributions,
    split_graph,
)
from securefg.protocol.stack import ProtocolStack

TAG = "fedstruct/abar"
SECURE = {"bits": 64, "clip": 16777216.0, "on_clip": "error", "dropout_rate": 0.0, "adversarial_rate": 0.0,
          "signatures": False}


def stack(kind: str, transforms: list[dict[str, Any]] | None = None) -> ProtocolStack:
    mech = {"mechanism": "plaintext"} if kind == "plaintext" else {"mechanism": "secure_sum", "params": SECURE}
    if transforms:
        mech["transforms"] = transforms
    return ProtocolStack.from_dict({"name": f"abar-{kind}", "tags": {TAG: mech}})


def structure_task(seed: int = 0, clients: int = 4, nodes: int = 300) -> tuple[NodeTask, NodeDirectory]:
    g = make_csbm(num_nodes=nodes, num_classes=3, num_features=8, p_in=0.05, p_out=0.004, seed=seed)
    owner = torch.randint(clients, (nodes,), generator=torch.Generator().manual_seed(seed + 1))
    parts = []
    for k in range(clients):
        ids = (owner == k).nonzero().flatten()
        sub = g.subgraph(ids)
        sub.global_id = ids
        parts.append(sub)
    task = NodeTask(clients=parts, num_features=8, num_classes=3, full_graph=g)
    return task, NodeDirectory(owner, clients)


def run_abar(task: NodeTask, directory: NodeDirectory, st: ProtocolStack, *, betas: tuple[float, ...] = (0.5, 0.5),
             seed: int = 0) -> dict[str, Any]:
    """Algorithm 3 for every client; a result-shaped dict for the attack harness."""
    k_clients = directory.num_clients
    views = split_graph(task.full_graph.edge_index, directory)
    fed = Federation(k_clients, st, seed=seed, keep_payloads=True)
    states = [init_abar_state(v, directory, betas=betas, dtype=torch.float64) for v in views]
    hop = 1
    while not states[0].done:
        hop += 1
        fed.set_round(hop)
        outbox = [local_contributions(v, s, directory=directory) for v, s in zip(views, states, strict=True)]
        new = []
        for i, (v, s) in enumerate(zip(views, states, strict=True)):
            inputs = {f"client/{k}": {"b": outbox[k][i]} for k in range(k_clients) if k != i}
            peer = fed.exchange.peer_sum(TAG, f"client/{i}", inputs)["b"]
            new.append(assemble(v, s, summed=peer.to(torch.float64) + outbox[i][i]))
        states = new
    for i, (v, s) in enumerate(zip(views, states, strict=True)):
        fed.parties[f"client/{i}"].state.update(graph_view=v, directory=directory, betas=list(betas), abar=s.abar)
    return {"_federation": fed, "method": "fedstruct_abar", "protocol": st.name, "metrics": {},
            "config": {"seed": seed, "options": {}}}
