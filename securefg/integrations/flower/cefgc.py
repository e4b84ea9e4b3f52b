"""CeFGC+ / CeFGC*+ as Flower party programs (``CeFGC.run_round``, split by party).

Server program (``CeFGC.run_round`` as the server): ``cefgc/phase1`` step (each client trains
its generators offline and prepares its package), then R1 + R2 through the stack -- the CKKS
similarity and the server's pairing (``configure_mix``), the CKKS relay of the packages with the
pair averages, W0 broadcast with the ``cefgc/train`` action (each client samples synthetic graphs
from what it received and trains its GIN) -- and R3, the one aggregate of the GIN weights.

Client program: the method's own ``handle_phase1``, ``handle_package``,
``handle_similarity_input`` and ``handle_bundle``, on the client's own data only. The key
holder (the ``keyholder`` party) runs no CeFGC code: its actions are the CKKS mechanisms'.

Each party writes what the in-process runner reads from party state for the experimenter: a
client its scores, its ``info`` block and its timings; the server the global model and what it
learned (the pairing and the similarity matrix).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from securefg.errors import ConfigError
from securefg.federation.codec import TensorSpec, decode_tensors, encode_tensors
from securefg.federation.federation import Federation
from securefg.federation.party import Party, client_index
from securefg.integrations.flower import ckks
from securefg.integrations.flower.exchange import ClientExchange, aggregate, broadcast
from securefg.integrations.flower.program import OutFile, PartyProgram
from securefg.integrations.flower.records import Step
from securefg.integrations.flower.runtime import ClientRuntime, ServerRuntime
from securefg.methods.base import Method
from securefg.methods.cefgc.generators import training_sets
from securefg.methods.cefgc.method import TAG_INIT, TAG_MODEL, TAG_SIMILARITY, TAG_WEIGHTS, CeFGC
from securefg.methods.tasks import GraphTask
from securefg.methods.training import load_state, state_of
from securefg.protocol.mechanism import ExchangeKind
from securefg.protocol.stack import ProtocolStack

ACTION_PHASE1 = "cefgc/phase1"
ACTION_TRAIN = "cefgc/train"
MODEL_FILE = "model.sfgt"
CLIENT_FILE = "cefgc.json"


def _cefgc(method: Method) -> CeFGC:
    if not isinstance(method, CeFGC):
        raise ConfigError(f"{method.name!r} is not a CeFGC method")
    return method


def _set_dense(method: CeFGC, stack: ProtocolStack) -> None:
    """``CeFGC.setup``'s package form: dense when the server mixes or CKKS carries the models."""
    mech = stack.resolve(TAG_MODEL, ExchangeKind.RELAY).mechanism
    method.dense = method.mixing or mech.name == "ckks_relay"


class CeFGCProgram(PartyProgram):
    """CeFGC with server-side pair averaging under CKKS (``protocols/cefgc_plus.toml``)."""

    def supports(self, method: Method) -> bool:
        return isinstance(method, CeFGC)

    def check(self, method: Method, stack: ProtocolStack) -> None:
        m = _cefgc(method)
        relay = stack.resolve(TAG_MODEL, ExchangeKind.RELAY).mechanism.name
        if relay != "ckks_relay" or not m.mixing:
            raise ConfigError(f"{m.name!r} with {relay!r} relays does not run on the Flower backend yet; it runs "
                              "cefgc_plus / cefgc_star_plus under protocols/cefgc_plus.toml (CKKS)")
        if m.owner_groups is not None:
            raise ConfigError("CeFGC with per-dataset head averaging (multi-dataset tasks) does not run on the "
                              "Flower backend yet; use --backend inprocess")

    # ------------------------------------------------------------------ server half
    def setup_server(self, method: Method, stack: ProtocolStack, party: Party) -> None:
        m = _cefgc(method)
        party.state["model"] = m.make_model()  # W0, server-made
        _set_dense(m, stack)

    def run_server(self, rt: ServerRuntime, method: Method, stack: ProtocolStack, *, rounds: int,
                   out: OutFile) -> list[dict[str, Any]]:
        m, server = _cefgc(method), rt.party
        ready = sorted(rt.step(rt.live, action=ACTION_PHASE1, round=0))  # phase 1, offline at each client
        t0 = time.perf_counter()
        learned: dict[str, Any] = {}
        order, sim = ckks.similarity(rt, stack, TAG_SIMILARITY, round=0, clients=ready, metric="cosine")  # R1
        plan = m.configure_mix(server, order, sim)
        stack.resolve(TAG_MODEL, ExchangeKind.RELAY).mechanism.plan_mix(server, TAG_MODEL, plan)  # type: ignore[attr-defined]
        learned.update(m.learned_from_mix(server.state["partners"]))
        forwarded = ckks.relay(rt, stack, TAG_MODEL, round=0, clients=order, exclude_self=True, shuffle=True)  # R1 + R2
        w0 = m.configure_init(server)
        trained = sorted(set(broadcast(rt, stack, TAG_INIT, w0, action=ACTION_TRAIN, round=0)) & set(forwarded))  # R2
        protocol = time.perf_counter() - t0
        t0 = time.perf_counter()
        template = {k: torch.zeros_like(v, dtype=torch.float64) for k, v in w0.items()}
        mean = aggregate(rt, stack, TAG_WEIGHTS, round=0, clients=trained, template=template)  # R3
        protocol += time.perf_counter() - t0
        m.aggregate_train(server, mean)
        out(MODEL_FILE).write_bytes(encode_tensors(state_of(server.state["model"])))
        out(CLIENT_FILE).write_text(json.dumps({
            "partners": server.state["partners"], "similarity": server.state["similarity"],
            "protocol_seconds": protocol, "contributors": list(server.state["contributors"][(TAG_WEIGHTS, 0)]),
        }))
        return [{"round": 0, **learned}]

    # ------------------------------------------------------------------ client half
    def setup_client(self, method: Method, stack: ProtocolStack, party: Party) -> None:
        m, k = _cefgc(method), client_index(party.pid)
        task = m.task
        assert isinstance(task, GraphTask)
        party.state["data"] = {"train": task.train[k], "val": task.val[k], "test": task.test[k]}
        party.state["index"] = k
        if not any(training_sets(task.train[k], m.arch).values()):
            raise ConfigError(f"client {k} has no training graph of at most max_nodes={m.arch.max_node_num} "
                              "nodes, so it would train no generator; raise --option max_nodes")
        _set_dense(m, stack)

    def serve_client(self, rt: ClientRuntime, ex: ClientExchange, method: Method, *, out: OutFile) -> None:
        m, party = _cefgc(method), rt.party

        def on_phase1(step: Step) -> None:
            m.handle_phase1(party)
            ex.ckks.offer_relay(TAG_MODEL, step.round, m.handle_package(party))
            ex.ckks.offer_similarity(TAG_SIMILARITY, step.round, m.handle_similarity_input(party))

        def on_train(step: Step) -> None:
            w0 = ex.receive_broadcast(TAG_INIT, step.round, like=state_of(m.make_model()))
            weights = m.handle_bundle(party, ex.ckks.relayed(TAG_MODEL, step.round), w0)
            size = float(len(party.state["data"]["train"]))
            ex.contribute(TAG_WEIGHTS, step.round, weights, 1.0 if m.options["weighting"] == "uniform" else size)
            out(CLIENT_FILE).write_text(json.dumps({
                "scores": party.state["scores"], "info": m.info["clients"][party.pid], "timing": m.timing,
            }, default=float))

        rt.on(ACTION_PHASE1, on_phase1)
        rt.on(ACTION_TRAIN, on_train)

    # ------------------------------------------------------------------ the experimenter
    def measure(self, method: Method, fed: Federation, *, rounds: int,
                out: Callable[[str, str], Path]) -> list[dict[str, Any]]:
        """Round 0 as ``measure_clients`` sees it in process: each client's own scores, the
        global model the server wrote, the clients' validation graphs (the experimenter's)."""
        m = _cefgc(method)
        task = m.task
        assert isinstance(task, GraphTask)
        for k, cid in enumerate(fed.client_ids):
            fed.parties[cid].state["data"] = {"train": task.train[k], "val": task.val[k], "test": task.test[k]}
            path = out(cid, CLIENT_FILE)
            if path.exists():
                fed.parties[cid].state["scores"] = json.loads(path.read_text())["scores"]
        model = m.make_model()
        spec = TensorSpec.like(state_of(model))
        load_state(model, decode_tensors(out(fed.server.pid, MODEL_FILE).read_bytes(), spec=spec))
        fed.server.state["model"] = model
        return [{"round": 0, **m.measure(fed)}]

    def report(self, method: Method, fed: Federation, *, out: Callable[[str, str], Path]) -> dict[str, Any]:
        """``CeFGC.report()`` over the merged transcript, with the parties' own info and timings."""
        m = _cefgc(method)
        m._fed = fed  # report() reads the run's transcript and the server's view from it
        _set_dense(m, fed.stack)
        server = json.loads(out(fed.server.pid, CLIENT_FILE).read_text())
        fed.server.state["partners"], fed.server.state["similarity"] = server["partners"], server["similarity"]
        m.timing = dict.fromkeys(m.timing, 0.0)
        for cid in fed.client_ids:
            path = out(cid, CLIENT_FILE)
            if not path.exists():
                continue
            got = json.loads(path.read_text())
            m.info["clients"][cid] = got["info"]
            for k, v in got["timing"].items():
                if k != "protocol":
                    m.timing[k] += float(v)
        m.timing["protocol"] = float(server["protocol_seconds"])
        return m.report()
