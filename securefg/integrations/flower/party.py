"""One party's OS process on the Flower backend: ``python -m securefg.integrations.flower.party``.

The launcher provisions a work folder: ``config.json`` (the run configuration), ``session``
(the run's session id), ``directory.json`` (every party's public channel key) and, per party,
``keys/<name>.key`` holding that party's channel private key alone (a stand-in for each site's
own key store; no party ever reads another's). The server process hosts Flower's gRPC fleet
server and drives the run; a client process runs Flower's client loop around its ClientApp.
Each party writes only its own outputs: its transcript (what it sent) and, for a client, its
per-round scores (the experimenter's measurement).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from dataclasses import fields
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from securefg.federation.channel import ChannelIdentity
from securefg.federation.party import SERVER, Party, client_id, client_index, is_client
from securefg.federation.party_transport import PartyTransport


def key_file(workdir: Path, pid: str) -> Path:
    return workdir / "keys" / (pid.replace("/", "_") + ".key")


def out_file(workdir: Path, pid: str, what: str) -> Path:
    return workdir / "parties" / f"{pid.replace('/', '_')}.{what}"


def load_transport(workdir: Path, pid: str) -> PartyTransport:
    """This party's transport end from its provisioned key, the session and the directory."""
    raw = key_file(workdir, pid).read_bytes()
    identity = ChannelIdentity(pid, X25519PrivateKey.from_private_bytes(raw))
    directory = {k: bytes.fromhex(v) for k, v in json.loads((workdir / "directory.json").read_text()).items()}
    # Every party gets the whole public directory: envelopes between two non-server parties (a
    # client and the CKKS key holder, a keyholder party or a client) ride through the server,
    # sealed and authenticated end to end by the channel keys of their two ends.
    return PartyTransport(identity, session=(workdir / "session").read_bytes(), directory=directory)


def save_transcript(workdir: Path, transport: PartyTransport) -> None:
    """This party's sends, and their logical clocks for the causal merge."""
    transport.transcript.save_jsonl(out_file(workdir, transport.pid, "transcript.jsonl"))
    out_file(workdir, transport.pid, "clocks.json").write_text(json.dumps(transport.clocks))


def load_config(workdir: Path) -> Any:
    from securefg.experiment import RunConfig

    raw = json.loads((workdir / "config.json").read_text())
    known = {f.name for f in fields(RunConfig)}
    raw = {k: v for k, v in raw.items() if k in known}
    if raw.get("split") is not None:
        raw["split"] = tuple(raw["split"])
    return RunConfig(**raw)


def _run_parts(cfg: Any) -> tuple[Any, Any, Any]:
    """The run's configuration, method and stack, as every party builds them.

    Raises:
        ConfigError: The method has no party programs.
    """
    from securefg.errors import ConfigError
    from securefg.experiment import build_method, seed_everything

    seed_everything(cfg.seed)
    cfg, method, stack, _ = build_method(cfg)
    if not type(method).has_programs():
        raise ConfigError(f"method {method.name!r} has no party programs; use --backend inprocess")
    return cfg, method, stack


def file_sink(workdir: Path) -> Any:
    """A party's measurement sink on Flower: one file per party and round, in its own folder
    (the experimenter reads them; no party does)."""
    import torch

    def sink(pid: str, round: int, values: dict[str, Any]) -> None:
        torch.save(values, out_file(workdir, pid, f"measure.{round}.pt"))

    return sink


def save_private_ledgers(workdir: Path, party: Party) -> None:
    """This party's DP ledger, for the experimenter's privacy report (as a checkpoint holds it)."""
    import torch

    from securefg.protocol.dp.accountant import STATE_KEY

    acc = party.state.get(STATE_KEY)
    if acc is not None:
        torch.save(acc.state_dict(), out_file(workdir, party.pid, "accountant.pt"))


def run_server(workdir: Path, address: str, clients: int, connect_timeout: float) -> None:
    from flwr.common import ReconnectIns
    from flwr.server.client_manager import SimpleClientManager
    from flwr.server.server import reconnect_clients
    from flwr.server.superlink.fleet.grpc_bidi.grpc_server import start_grpc_server

    from securefg.federation.program.driver import ServerProgram, party_stack
    from securefg.integrations.flower.grid import BidiGrid
    from securefg.integrations.flower.runtime import FlowerServerRuntime

    cfg, method, stack = _run_parts(load_config(workdir))
    method.task = _only_own_data(method.task, -1)  # the server holds no client's data
    helpers = tuple(method.extra_parties)
    transport = load_transport(workdir, SERVER)
    party = Party(SERVER)
    cm = SimpleClientManager()
    server = start_grpc_server(client_manager=cm, server_address=address)
    (workdir / "parties" / "server.ready").write_text(address)
    try:
        nodes = clients + len(helpers)
        if not cm.wait_for(nodes, timeout=int(connect_timeout)):
            raise TimeoutError(f"only {cm.num_available()} of {nodes} parties connected in {connect_timeout}s")
        grid = BidiGrid(cm)
        rt = FlowerServerRuntime(transport, party, grid=grid)
        rt.connect([*(client_id(k) for k in range(clients)), *helpers])
        program = ServerProgram(method, rt, party_stack(stack), seed=cfg.seed, rounds=cfg.rounds,
                                sink=file_sink(workdir), patience=method.config.patience)
        program.setup()
        outcome = program.run()
        save_transcript(workdir, transport)
        save_private_ledgers(workdir, party)
        out_file(workdir, SERVER, "json").write_text(json.dumps({
            "server_view": outcome.server_view, "train_seconds": outcome.train_seconds, "dropped": rt.dropped,
            "stopped_early": outcome.stopped_early, "framing_bytes": rt.framing_bytes, "steps": rt.steps,
            "flower_bytes_sent": grid.bytes_sent, "flower_bytes_received": grid.bytes_received,
        }, indent=1, default=float))
        proxies = list(cm.all().values())
        reconnect_clients([(p, ReconnectIns(seconds=None)) for p in proxies], max_workers=None, timeout=10)
        grid.close()
    finally:
        server.stop(grace=1)


def run_node(workdir: Path, address: str, pid: str) -> None:
    """A client, or a helper party such as the ``keyholder`` (which runs mechanisms only)."""
    from flwr.clientapp import ClientApp
    from flwr.compat.client.app import start_client_internal

    from securefg.federation.program.client_runtime import ClientRuntime
    from securefg.federation.program.driver import party_stack, serve_party
    from securefg.integrations.flower.grid import TunnelClient
    from securefg.integrations.flower.runtime import client_app

    cfg, method, stack = _run_parts(load_config(workdir))
    helpers = tuple(method.extra_parties)
    if not is_client(pid) and pid not in helpers:
        raise ValueError(f"{pid!r} is neither a client nor a helper party of {method.name!r} (helpers: {list(helpers)})")
    party = Party(pid)
    transport = load_transport(workdir, pid)
    rt = ClientRuntime(transport, party, trace=out_file(workdir, pid, "steps"))
    serve_party(method, rt, party_stack(stack), seed=cfg.seed, clients=[client_id(k) for k in range(method.num_clients)],
                helpers=helpers, sink=file_sink(workdir))
    method.task = _only_own_data(method.task, client_index(pid) if is_client(pid) else -1)  # the others' data leaves
    app = client_app(rt)
    flower_app = ClientApp(client_fn=lambda context: TunnelClient(app, context).to_client())
    ready = workdir / "parties" / "server.ready"
    while not ready.exists():
        time.sleep(0.1)
    try:
        start_client_internal(server_address=address, node_config={}, load_client_app_fn=lambda *_: flower_app,
                              insecure=True, max_wait_time=60)
    finally:
        save_transcript(workdir, transport)
        save_private_ledgers(workdir, party)


def _only_own_data(task: Any, index: int) -> Any:
    """The task with every other client's partition dropped (each site holds only its own)."""
    from dataclasses import replace

    from securefg.methods.tasks import GraphTask, NodeTask

    if isinstance(task, NodeTask):
        return replace(task, clients=[c if k == index else None for k, c in enumerate(task.clients)],
                       full_graph=None)
    if isinstance(task, GraphTask):
        def own(parts: list[Any]) -> list[Any]:
            return [p if k == index else [] for k, p in enumerate(parts)]

        return replace(task, train=own(task.train), val=own(task.val), test=own(task.test), global_test=[])
    return task


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--role", choices=("server", "node"), required=True)
    p.add_argument("--workdir", type=Path, required=True)
    p.add_argument("--address", required=True)
    p.add_argument("--clients", type=int, default=0)
    p.add_argument("--pid", default="", help="the node's party id (client/<k> or a helper such as keyholder)")
    p.add_argument("--connect-timeout", type=float, default=300.0)
    a = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    if a.role == "server":
        run_server(a.workdir, a.address, a.clients, a.connect_timeout)
    else:
        run_node(a.workdir, a.address, a.pid)
    return 0


if __name__ == "__main__":
    sys.exit(main())
