"""Small synthetic runs the calibration tests attack (module-scoped: each run happens once).

``node_task``: a 400-node contextual SBM (homophily about 0.9) with sparse, class-dependent binary
features (a bag-of-words stand-in), split over 4 label-skewed clients (60% of each class at its
"home" client), so label shares and vocabularies differ per client. ``run_method`` runs a method on a task under a stack through the
real federation (transcript, mechanisms) and returns a ``result``-shaped dict for the harness.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from securefg.audit.threat_model import ThreatModel
from securefg.data.synthetic import make_csbm
from securefg.device import seed_everything
from securefg.federation.federation import Federation
from securefg.federation.runner import RoundRunner
from securefg.methods.base import MethodConfig, method_class
from securefg.methods.tasks import NodeTask
from securefg.methods.training import TrainConfig
from securefg.protocol.stack import ProtocolStack

SEED = 0


@pytest.fixture(autouse=True, scope="package")
def _one_thread() -> Any:
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def make_node_task(seed: int = SEED, clients: int = 4, own_share: float = 0.6) -> NodeTask:
    """Node ``v`` of class ``y`` goes to client ``y mod K`` with probability ``own_share``, else to a
    uniformly drawn other client: label-skewed clients that still share every class."""
    g = make_csbm(num_nodes=400, num_classes=4, num_features=8, p_in=0.08, p_out=0.002, seed=seed)
    gen = torch.Generator().manual_seed(seed)
    vocab = 200
    word_probs = torch.rand(4, vocab, generator=gen) ** 4 * 0.25
    g.x = (torch.rand(g.num_nodes, vocab, generator=gen) < word_probs[g.y]).float()
    home = g.y % clients
    other = (home + torch.randint(1, clients, (g.num_nodes,), generator=gen)) % clients
    assign = torch.where(torch.rand(g.num_nodes, generator=gen) < own_share, home, other)
    parts = []
    for k in range(clients):
        nodes = (assign == k).nonzero().flatten()
        sub = g.subgraph(nodes)
        sub.global_id = nodes
        parts.append(sub)
    return NodeTask(clients=parts, num_features=vocab, num_classes=4, full_graph=g)


def run_method(task: Any, method: str, stack: str, *, rounds: int, keep: Any = True, seed: int = SEED,
               hidden: int = 32, options: dict[str, Any] | None = None, lr: float = 0.01,
               weight_decay: float = 1e-6, local_epochs: int = 1) -> dict[str, Any]:
    """Run ``method`` on ``task`` under ``stack`` (name, path or stack); a result dict the harness reads.

    Seeded like ``securefg run`` (global RNGs included), so an audit's reruns differ from the
    audited run only by what the attack changes.
    """
    seed_everything(seed)
    cfg = MethodConfig(rounds=rounds, train=TrainConfig(lr=lr, weight_decay=weight_decay, local_epochs=local_epochs),
                       seed=seed, hidden=hidden, options=dict(options or {}))
    m = method_class(method)(task, cfg)
    st = stack if isinstance(stack, ProtocolStack) else ProtocolStack.load(stack)
    fed = Federation(m.num_clients, st, seed=seed, extra_parties=getattr(m, "extra_parties", ()), keep_payloads=keep)
    out = RoundRunner(m, fed, rounds=getattr(m, "fixed_rounds", None) or rounds, progress=False).run()
    return {"_federation": fed, "method": method, "protocol": st.name, "metrics": out.summary,
            "config": {"seed": seed, "lr": lr, "local_epochs": local_epochs, "options": dict(options or {}),
                       "protocol": stack}, "_stack": st}


def threat(parties: list[str], attacks: dict[str, dict[str, Any]], *, behaviour: str = "honest-but-curious",
           target_features: bool = False, aux_graphs: float = 0.0) -> ThreatModel:
    return ThreatModel.from_dict({
        "name": "test", "adversary": {"parties": parties, "behaviour": behaviour},
        "side_knowledge": {"target_features": target_features, "aux_graphs": aux_graphs},
        "attacks": attacks,
    })


def play(tm: ThreatModel, result: dict[str, Any], task: Any, *, rerun: Any = None, workdir: Path | None = None) -> dict[str, Any]:
    """Run the threat model's attacks on a result; ``{key: AttackResult}``."""
    from securefg.attacks.harness import AttackHarness

    h = AttackHarness(tm, seed=SEED, workdir=workdir)
    ctx = h.context(result, task, rerun=rerun, stack=result.get("_stack"))
    return {r.key: r for r in h.run(ctx)}


@pytest.fixture(scope="package")
def node_task() -> NodeTask:
    return make_node_task()


@pytest.fixture(scope="package")
def fedavg_plain(node_task: NodeTask) -> dict[str, Any]:
    return run_method(node_task, "fedavg", "plaintext", rounds=15)


@pytest.fixture(scope="package")
def fedavg_secure(node_task: NodeTask) -> dict[str, Any]:
    return run_method(node_task, "fedavg", "fedavg_secure_sum", rounds=15)
