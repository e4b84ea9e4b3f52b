"""FedAvg's two halves as Flower party programs (the in-process ``FedAvg.run_round``, split).

The server program is what ``FedAvg.run_round`` does as the server: broadcast the model
(``configure_train``), aggregate the updates, apply them (``aggregate_train``), aggregate the
metrics. The client program handles the ``fedavg/train`` action as ``FedAvg.handle_train`` and
``handle_report`` do, under the same per-party RNG stream (``party_rng``), so a seed gives the
same model on both backends. Both halves call the method's own code; only the driving differs.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from securefg.errors import ConfigError
from securefg.federation.federation import Federation
from securefg.federation.party import Party, client_index
from securefg.integrations.flower.exchange import ClientExchange, aggregate, broadcast
from securefg.integrations.flower.program import OutFile, PartyProgram
from securefg.integrations.flower.records import Step
from securefg.integrations.flower.runtime import ClientRuntime, ServerRuntime
from securefg.methods.base import Method
from securefg.methods.fedavg import TAG_METRICS, TAG_MODEL, TAG_UPDATE, FedAvg
from securefg.methods.tasks import NodeTask
from securefg.methods.training import party_rng, state_of
from securefg.protocol.stack import ProtocolStack

ACTION_TRAIN = "fedavg/train"


def check_supported(method: Any) -> FedAvg:
    """The Flower backend runs FedAvg/FedProx on node tasks with one head."""
    if not isinstance(method, FedAvg) or type(method).run_round is not FedAvg.run_round:
        raise ConfigError(f"method {method.name!r} has no Flower party programs yet (supported: fedavg, fedprox)")
    if not isinstance(method.task, NodeTask):
        raise ConfigError("FedAvg on the Flower backend runs node tasks (graph tasks: use --backend inprocess)")
    return method


def _metric_count(method: FedAvg) -> int:
    return 4 if isinstance(method.task, NodeTask) else 2


def setup_server(method: FedAvg, party: Party) -> None:
    party.state["model"] = method.make_model()


def run_server(rt: ServerRuntime, method: FedAvg, stack: ProtocolStack, *, rounds: int) -> list[dict[str, float]]:
    """Every round as the server; returns what the server learned per round."""
    view: list[dict[str, float]] = []
    for r in range(rounds):
        model = method.configure_train(rt.party)
        received = sorted(broadcast(rt, stack, TAG_MODEL, model, action=ACTION_TRAIN, round=r))
        template = {k: torch.zeros_like(v, dtype=torch.float64) for k, v in model.items()}
        mean_update = aggregate(rt, stack, TAG_UPDATE, round=r, clients=received, template=template)
        method.aggregate_train(rt.party, mean_update)
        scores = aggregate(rt, stack, TAG_METRICS, round=r, clients=received,
                           template={"scores": torch.zeros(_metric_count(method), dtype=torch.float64)})["scores"]
        out = {"round": r, "server_mean_val": float(scores[0]), "server_mean_test_acc": float(scores[1])}
        if scores.numel() == 4:
            out["server_mean_global_test_acc"] = float(scores[3])
        out["contributors"] = len(rt.party.state["contributors"][(TAG_UPDATE, r)])
        out["metric_contributors"] = len(rt.party.state["contributors"][(TAG_METRICS, r)])
        view.append(out)
    return view


def setup_client(method: FedAvg, party: Party) -> None:
    k = client_index(party.pid)
    party.state["data"] = method._client_data(k)  # noqa: SLF001 - the method's own per-client data
    party.state["model"] = method.make_model()
    party.state["optimizer"] = method.optimizer_for(party.state["model"])


def serve_client(rt: ClientRuntime, ex: ClientExchange, method: FedAvg, *, log_path: Path) -> None:
    """Register the client's FedAvg handler; per-round scores go to ``log_path`` (the
    experimenter's measurement, read by the launcher, never sent to a party)."""
    party = rt.party

    def on_train(step: Step) -> None:
        like = state_of(party.state["model"])
        global_state = ex.receive_broadcast(TAG_MODEL, step.round, like)
        with party_rng(method.config.seed, party.pid, step.round):
            update, weight = method.handle_train(party, global_state)
        ex.contribute(TAG_UPDATE, step.round, update, weight)
        ex.contribute(TAG_METRICS, step.round, method.handle_report(party))
        with log_path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps({"round": step.round, "scores": party.state["scores"]}) + "\n")

    rt.on(ACTION_TRAIN, on_train)


class FedAvgProgram(PartyProgram):
    """FedAvg / FedProx on node tasks (the functions above)."""

    def supports(self, method: Method) -> bool:
        return isinstance(method, FedAvg)

    def check(self, method: Method, stack: ProtocolStack) -> None:
        check_supported(method)

    def setup_server(self, method: Method, stack: ProtocolStack, party: Party) -> None:
        setup_server(check_supported(method), party)

    def run_server(self, rt: ServerRuntime, method: Method, stack: ProtocolStack, *, rounds: int,
                   out: OutFile) -> list[dict[str, Any]]:
        return run_server(rt, check_supported(method), stack, rounds=rounds)  # type: ignore[return-value]

    def setup_client(self, method: Method, stack: ProtocolStack, party: Party) -> None:
        setup_client(check_supported(method), party)

    def serve_client(self, rt: ClientRuntime, ex: ClientExchange, method: Method, *, out: OutFile) -> None:
        serve_client(rt, ex, check_supported(method), log_path=out("scores.jsonl"))

    def measure(self, method: Method, fed: Federation, *, rounds: int,
                out: Callable[[str, str], Path]) -> list[dict[str, Any]]:
        """Each round's client scores (a client that dropped keeps its last, as in process)."""
        scores: dict[int, dict[str, dict[str, float]]] = {}
        for cid in fed.client_ids:
            path = out(cid, "scores.jsonl")
            for line in path.read_text().splitlines() if path.exists() else []:
                rec = json.loads(line)
                scores.setdefault(int(rec["round"]), {})[cid] = rec["scores"]
        history = []
        for r in range(rounds):
            for cid in fed.client_ids:
                if cid in scores.get(r, {}):
                    fed.parties[cid].state["scores"] = scores[r][cid]
            history.append({"round": r, **method.measure(fed)})
        return history
