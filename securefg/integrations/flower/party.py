"""One party's OS process on the Flower backend: ``securefg party``.

(Also ``python -m securefg.integrations.flower.party``, with the same options.)

A party starts from its own files alone; no folder is shared between hosts:

* ``--config run.toml``: the run file (the :class:`~securefg.experiment.RunConfig` fields and
  the run's session id), the same copy at every party;
* ``--keys DIR``: its own key folder: ``private.key`` (its channel private key, mode 0600),
  ``public.json``, ``directory.json`` (the pinned public directory of every party; another file
  with ``--directory``; its signing keys are what secure sums with ``pinned_keys = "run"``
  pin) and, for TLS, ``ca.pem`` (a client's pinned CA; ``--ca``) or the
  server's ``ca.pem``, ``server.pem`` and ``server.key`` (``--certs DIR``);
* ``--out DIR``: its own outputs: its transcript (what it sent), its per-round measurement (the
  experimenter's), and for the server ``server.json`` with what it learned (``server_view``).

The server hosts Flower's gRPC fleet server (over TLS) and drives the run; a client or helper
(e.g. the CKKS ``keyholder``) runs Flower's client loop around its ClientApp. See
:mod:`securefg.integrations.flower.deploy` for the files and ``docs/flower.md`` ("Deploy on
several hosts") for the walk-through.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from securefg.errors import AuthenticationError, ConfigError, ProtocolError, ServerUnreachableError
from securefg.federation.party import SERVER, Party, client_id, client_index, is_client
from securefg.federation.party_transport import PartyTransport
from securefg.integrations.flower import deploy

ROLES = ("server", "client", "helper")


def party_file(out: Path, pid: str, what: str) -> Path:
    """A file of ``pid``'s own output folder ``out``."""
    return Path(out) / f"{pid.replace('/', '_')}.{what}"


def out_file(workdir: Path, pid: str, what: str) -> Path:
    """A party's output file in the single-host launcher's work folder (every party writes to
    ``<workdir>/parties``; the names carry the party)."""
    return party_file(Path(workdir) / "parties", pid, what)


def save_transcript(out: Path, transport: PartyTransport) -> None:
    """This party's sends, and their logical clocks for the causal merge."""
    transport.transcript.save_jsonl(party_file(out, transport.pid, "transcript.jsonl"))
    party_file(out, transport.pid, "clocks.json").write_text(json.dumps(transport.clocks))


def _run_parts(cfg: Any) -> tuple[Any, Any, Any]:
    """The run's configuration, method and stack, as every party builds them.

    Raises:
        ConfigError: The method has no party programs.
    """
    from securefg.experiment import build_method, seed_everything

    seed_everything(cfg.seed)
    cfg, method, stack, _ = build_method(cfg)
    if not type(method).distributable:
        raise ConfigError(f"method {method.name!r} keeps every party's data in one place (a one-owner baseline); "
                          "it runs with --backend inprocess only")
    return cfg, method, stack


def file_sink(out: Path) -> Any:
    """A party's measurement sink on Flower: one file per party and round, in its own folder
    (the experimenter reads them; no party does)."""
    import torch

    def sink(pid: str, round: int, values: dict[str, Any]) -> None:
        torch.save(values, party_file(out, pid, f"measure.{round}.pt"))

    return sink


def save_private_ledgers(out: Path, party: Party) -> None:
    """This party's DP ledger, for the experimenter's privacy report (as a checkpoint holds it)."""
    import torch

    from securefg.protocol.dp.accountant import STATE_KEY

    acc = party.state.get(STATE_KEY)
    if acc is not None:
        torch.save(acc.state_dict(), party_file(out, party.pid, "accountant.pt"))


def run_server(cfg: Any, transport: PartyTransport, address: str, out: Path, *,
               certificates: tuple[bytes, bytes, bytes] | None, connect_timeout: float,
               pinned: dict[str, bytes], directory_path: Path | str = "the directory",
               parts: tuple[Any, Any, Any] | None = None, signing: Any = None) -> dict[str, Any]:
    """The server party: host the gRPC fleet server, wait for every party, drive the run.

    Writes ``<out>/server.json`` (what the server learned, ``server_view``, and the run's
    transport facts) and returns it. ``signing``: the directory's secure-sum signing keys
    (:func:`~securefg.integrations.flower.deploy.load_signing_keys`), if it has any.

    Raises:
        ConfigError: The pinned directory lacks a party of the run.
        ProtocolError: Not every party connected within ``connect_timeout`` seconds.
        AuthenticationError: A node presented a channel key other than the pinned one.
    """
    from flwr.common import ReconnectIns
    from flwr.server.client_manager import SimpleClientManager
    from flwr.server.server import reconnect_clients
    from flwr.server.superlink.fleet.grpc_bidi.grpc_server import start_grpc_server

    from securefg.federation.program.driver import ServerProgram, party_stack
    from securefg.integrations.flower.grid import BidiGrid
    from securefg.integrations.flower.runtime import FlowerServerRuntime
    from securefg.protocol.secure_sum.pinned import provision

    party = Party(SERVER)
    if signing is not None:  # secure sums with pinned_keys = "run" verify the clients against it
        provision(party.state, signing)
    cm = SimpleClientManager()
    # listen first: the parties connect (and wait) while every process builds the task
    server = start_grpc_server(client_manager=cm, server_address=address, certificates=certificates)
    try:
        cfg, method, stack = parts if parts is not None else _run_parts(cfg)
        method.task = _only_own_data(method.task, -1)  # the server holds no client's data
        clients = method.num_clients
        helpers = tuple(method.extra_parties)
        expected = [*(client_id(k) for k in range(clients)), *helpers]
        missing = [pid for pid in expected if pid not in pinned]
        if missing:
            raise ConfigError(f"{directory_path}: the pinned directory has no key for {missing} (the run has "
                              f"{clients} clients and helpers {list(helpers)})")
        nodes = len(expected)
        if not cm.wait_for(nodes, timeout=int(connect_timeout)):
            raise ProtocolError(f"only {cm.num_available()} of {nodes} parties connected to {address} "
                                f"within {connect_timeout:g} s")
        grid = BidiGrid(cm)
        rt = FlowerServerRuntime(transport, party, grid=grid)
        rt.connect(expected, pinned={pid: pinned[pid] for pid in expected}, source=str(directory_path))
        checkpoints = PartyCheckpoints(out, SERVER, method, cfg, transport)
        program = ServerProgram(method, rt, party_stack(stack), seed=cfg.seed, rounds=cfg.rounds,
                                sink=file_sink(out), patience=method.config.patience,
                                checkpoint_every=cfg.checkpoint_every,
                                save=(lambda nxt, view: checkpoints.save(party, program.exchange.rng, nxt, server_view=view))
                                if cfg.checkpoint_every else None)
        program.setup()
        start, view = 0, []
        if cfg.resume:
            start, extra = checkpoints.restore(party, program.exchange.rng)
            view = list(extra.get("server_view", []))
        outcome = program.run(start=start, server_view=view)
        save_transcript(out, transport)
        save_private_ledgers(out, party)
        summary = {
            "server_view": outcome.server_view, "train_seconds": outcome.train_seconds, "dropped": rt.dropped,
            "stopped_early": outcome.stopped_early, "framing_bytes": rt.framing_bytes, "steps": rt.steps,
            "flower_bytes_sent": grid.bytes_sent, "flower_bytes_received": grid.bytes_received,
        }
        party_file(out, SERVER, "json").write_text(json.dumps(summary, indent=1, default=float))
        proxies = list(cm.all().values())
        reconnect_clients([(p, ReconnectIns(seconds=None)) for p in proxies], max_workers=None, timeout=10)
        grid.close()
        return summary
    finally:
        server.stop(grace=1)


def run_node(cfg: Any, transport: PartyTransport, address: str, out: Path, *,
             root_certificates: bytes | None, connect_timeout: float, parts: tuple[Any, Any, Any] | None = None,
             signing: Any = None, signing_seed: bytes | None = None) -> None:
    """A client, or a helper party such as the ``keyholder`` (which runs mechanisms only).
    ``signing`` and ``signing_seed``: the directory's secure-sum signing keys and this client's
    own signing seed (what ``pinned_keys = "run"`` uses), if the directory has them.

    Raises:
        ConfigError: ``pid`` is neither a client nor a helper party of the run's method.
        ServerUnreachableError: The server did not answer at ``address`` within
            ``connect_timeout`` seconds, refused the TLS handshake, or went away mid-run.
        AuthenticationError: The server refused this party's channel key.
    """
    import grpc
    from flwr.clientapp import ClientApp
    from flwr.compat.client.app import start_client_internal

    from securefg.federation.program.client_runtime import ClientRuntime
    from securefg.federation.program.driver import party_stack, serve_party
    from securefg.integrations.flower.grid import TunnelClient
    from securefg.integrations.flower.runtime import ACTION_REFUSED, client_app

    pid = transport.pid
    deploy.wait_for_server(address, connect_timeout)  # before the (slower) task: an unreachable server stops it fast
    cfg, method, stack = parts if parts is not None else _run_parts(cfg)
    helpers = tuple(method.extra_parties)
    if is_client(pid) and client_index(pid) >= method.num_clients:
        raise ConfigError(f"{pid!r} is not a client of this run ({method.num_clients} clients: client/0 .. "
                          f"client/{method.num_clients - 1})")
    if not is_client(pid) and pid not in helpers:
        raise ConfigError(f"{pid!r} is neither a client nor a helper party of {method.name!r} (helpers: {list(helpers)})")
    from securefg.protocol.secure_sum.pinned import provision

    party = Party(pid)
    if signing is not None:
        provision(party.state, signing, signing_seed)
    rt = ClientRuntime(transport, party, trace=party_file(out, pid, "steps"))
    # the node names itself and its channel key; the server compares the key with its pinned copy
    rt.on("hello", lambda step: {"pid": pid, "public_key": transport.public_key.hex()})

    def refused(step: Any) -> None:
        raise AuthenticationError(f"the server refused {pid!r}: {step.info.get('reason', '')}")

    rt.on(ACTION_REFUSED, refused)
    checkpoints = PartyCheckpoints(out, pid, method, cfg, transport)
    rng: list[Any] = []
    ex = serve_party(method, rt, party_stack(stack), seed=cfg.seed,
                     clients=[client_id(k) for k in range(method.num_clients)], helpers=helpers, sink=file_sink(out),
                     save=lambda nxt: checkpoints.save(party, rng[0], nxt))
    rng.append(ex.rng)
    if cfg.resume:
        checkpoints.restore(party, ex.rng)
    method.task = _only_own_data(method.task, client_index(pid) if is_client(pid) else -1)  # the others' data leaves
    app = client_app(rt)
    flower_app = ClientApp(client_fn=lambda context: TunnelClient(app, context).to_client())
    try:
        start_client_internal(server_address=address, node_config={}, load_client_app_fn=lambda *_: flower_app,
                              insecure=root_certificates is None, root_certificates=root_certificates,
                              max_wait_time=connect_timeout)
    except grpc.RpcError as exc:
        code = exc.code() if hasattr(exc, "code") else None
        details = exc.details() if hasattr(exc, "details") else str(exc)
        raise ServerUnreachableError(f"{pid} lost or could not open its connection to the server at {address} "
                                     f"({code}: {details})") from exc
    finally:
        save_transcript(out, transport)
        save_private_ledgers(out, party)


class PartyCheckpoints:
    """One party's own checkpoint file in its own output folder (``<pid>.checkpoint.pt``): its
    state, randomness and round (:func:`~securefg.federation.program.driver.party_checkpoint`),
    and its transcript so far, so a resumed run counts the bytes of the rounds before it. A
    party saves when the server asks (``program/checkpoint``, every ``checkpoint_every`` rounds
    and at the end); ``resume`` loads it after the party's own setup.
    """

    def __init__(self, out: Path, pid: str, method: Any, cfg: Any, transport: PartyTransport) -> None:
        from securefg.run_config import run_fingerprint

        self.path = party_file(out, pid, "checkpoint.pt")
        self.transcript_path = party_file(out, pid, "checkpoint.transcript.jsonl")
        self.method, self.transport = method, transport
        self.fingerprint = run_fingerprint(cfg)

    def save(self, party: Party, rng: Any, next_round: int, **extra: Any) -> None:
        import torch

        from securefg.federation.program.driver import party_checkpoint

        state = party_checkpoint(self.method, party, rng, next_round=next_round, fingerprint=self.fingerprint,
                                 clocks=list(self.transport.clocks),
                                 **{k: json.dumps(v, default=float) for k, v in extra.items()})
        self.transport.transcript.save_jsonl(self.transcript_path)
        tmp = self.path.with_suffix(".tmp")
        torch.save(state, tmp)
        tmp.replace(self.path)

    def restore(self, party: Party, rng: Any) -> tuple[int, dict[str, Any]]:
        """Load this party's checkpoint; returns (the round to go on from, the saved extras).

        Raises:
            CheckpointError: No checkpoint, an unreadable one, or one of another configuration.
        """
        import torch

        from securefg.errors import CheckpointError
        from securefg.federation.program.driver import restore_party_checkpoint
        from securefg.federation.transcript import load_jsonl

        if not self.path.is_file():
            raise CheckpointError(f"no checkpoint to resume from: {self.path} does not exist")
        try:
            saved = torch.load(self.path, weights_only=True)
        except Exception as exc:  # a corrupt file: say so, keep it for inspection
            raise CheckpointError(f"checkpoint {self.path} is unreadable: {exc}") from exc
        start = restore_party_checkpoint(self.method, party, rng, saved, fingerprint=self.fingerprint,
                                         where=str(self.path))
        self.transport.transcript.clear()
        if self.transcript_path.is_file():
            load_jsonl(self.transcript_path, self.transport.transcript)
        self.transport.clocks[:] = [int(c) for c in saved["clocks"]]
        if self.transport.clocks:  # later sends come after the saved ones in the causal merge
            self.transport.clock = max(self.transport.clock, (max(self.transport.clocks) // 2 + 1) * 2)
        extras = {k: json.loads(v) for k, v in saved.items() if k == "server_view"}
        return start, extras


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


# ----------------------------------------------------------------------------- command line
def add_party_options(p: argparse.ArgumentParser) -> None:
    """The options of ``securefg party`` (and of ``python -m securefg.integrations.flower.party``)."""
    p.add_argument("--role", choices=ROLES, required=True,
                   help="server (hosts the gRPC server and drives the run), client, or helper (e.g. keyholder)")
    p.add_argument("--id", default=None, help="this party's id: client/<k>, a helper's name such as keyholder, "
                                              "or server (the default for --role server)")
    p.add_argument("--server", required=True, metavar="HOST:PORT",
                   help="a client's or helper's server address; the server listens on it (e.g. 0.0.0.0:9092)")
    p.add_argument("--config", type=Path, required=True, help="the run file (securefg config), same copy everywhere")
    p.add_argument("--keys", type=Path, required=True,
                   help="this party's key folder (securefg keys new): private.key, public.json, and the pinned "
                        "directory.json and ca.pem")
    p.add_argument("--directory", type=Path, default=None, help="the pinned directory (default: KEYS/directory.json)")
    p.add_argument("--ca", type=Path, default=None, help="client/helper: the pinned CA certificate (default: KEYS/ca.pem)")
    p.add_argument("--certs", type=Path, default=None,
                   help="server: folder with ca.pem, server.pem, server.key (securefg certs; default: KEYS)")
    p.add_argument("--insecure", action="store_true", help="plain gRPC without TLS (a trusted loopback only)")
    p.add_argument("--out", type=Path, default=Path("."), help="this party's output folder (default: .)")
    p.add_argument("--connect-timeout", type=float, default=60.0,
                   help="seconds to reach the server (client) or to see every party connect (server); default 60")
    p.add_argument("--checkpoint-every", type=int, default=0,
                   help="server: ask every party to save its own checkpoint every N rounds and at the end (0: never)")
    p.add_argument("--resume", action="store_true",
                   help="continue from this party's own checkpoint in --out (every party of the run resumes)")
    p.add_argument("--data-root", default=None, help="this site's dataset root (overrides the run file's)")
    p.add_argument("--device", default=None, help="this site's device (overrides the run file's)")


def _signing_keys(directory_path: Path, keys: Path, pid: str) -> tuple[Any, bytes | None]:
    """The directory's secure-sum signing keys (what ``pinned_keys = "run"`` pins; ``None`` if it
    has none) and, for a client, its own signing seed derived from its ``private.key``.

    Raises:
        AuthenticationError: The directory pins another signing key for this client.
    """
    from securefg.protocol.secure_sum.pinned import public_of

    signing = deploy.load_signing_keys(directory_path)
    seed = deploy.signing_seed(keys) if signing is not None and is_client(pid) else None
    if seed is not None and signing.key_of(pid) != public_of(seed):
        raise AuthenticationError(f"{directory_path}: the pinned directory holds no signing key, or another one, for "
                                  f"{pid!r} than the one derived from {Path(keys) / deploy.PRIVATE_KEY}; hand in this "
                                  "party's public.json again")
    return signing, seed


def run_party(a: argparse.Namespace, *, parts: tuple[Any, Any, Any] | None = None) -> int:
    """``securefg party``: check this party's files and reach the server (fast, before torch
    and the task are loaded), then run it. ``parts`` (configuration, method, stack) are what the
    party would build from its run file, already built: a single-host launcher that forks its
    parties builds them once."""
    pid = a.id or (SERVER if a.role == "server" else None)
    if pid is None:
        raise ConfigError(f"--role {a.role} needs --id (client/<k> or a helper's name)")
    if (a.role == "server") != (pid == SERVER) or (a.role == "client") != is_client(pid):
        raise ConfigError(f"--id {pid!r} does not fit --role {a.role} (server: 'server'; client: 'client/<k>'; "
                          f"helper: another name)")
    deploy.split_address(a.server)
    options, session = deploy.read_run_table(a.config)
    identity = deploy.load_identity(a.keys, pid)
    directory_path = a.directory or a.keys / deploy.DIRECTORY
    directory = deploy.load_directory(directory_path)
    deploy.check_pinned(identity, directory, directory_path)
    transport = PartyTransport(identity, session=session, directory=directory)
    certs, ca = None, None
    if a.role == "server" and not a.insecure:
        folder = a.certs or a.keys
        certs = (deploy.read_pem(folder / deploy.CA_CERT, "CA certificate"),
                 deploy.read_pem(folder / deploy.SERVER_CERT, "server certificate"),
                 deploy.read_pem(folder / deploy.SERVER_KEY, "server TLS key"))
    elif a.role != "server" and not a.insecure:
        ca = deploy.read_pem(a.ca or a.keys / deploy.CA_CERT, "CA certificate")
    if a.role != "server":
        deploy.wait_for_server(a.server, a.connect_timeout)
    cfg = deploy.run_config(options, a.config)
    signing, seed = _signing_keys(directory_path, a.keys, pid)
    if a.checkpoint_every < 0:
        raise ConfigError(f"--checkpoint-every must be >= 0, got {a.checkpoint_every}")
    cfg = replace(cfg, resume=a.resume, checkpoint_every=a.checkpoint_every)
    if parts is not None:  # built from the run file, which holds no site-local settings
        parts = (replace(parts[0], resume=a.resume, checkpoint_every=a.checkpoint_every), parts[1], parts[2])
    if a.data_root is not None:
        cfg = replace(cfg, data_root=a.data_root)
    if a.device is not None:
        cfg = replace(cfg, device=a.device)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    if a.role == "server":
        run_server(cfg, transport, a.server, out, certificates=certs, connect_timeout=a.connect_timeout,
                   pinned=directory, directory_path=directory_path, parts=parts, signing=signing)
    else:
        run_node(cfg, transport, a.server, out, root_certificates=ca, connect_timeout=a.connect_timeout, parts=parts,
                 signing=signing, signing_seed=seed)
    return 0


def main(argv: list[str] | None = None) -> int:
    from securefg.errors import SecureFGError

    p = argparse.ArgumentParser(prog="securefg party", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    add_party_options(p)
    a = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    try:
        return run_party(a)
    except SecureFGError as exc:
        print(f"securefg: error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
