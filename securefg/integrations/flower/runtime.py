"""Each party's runtime on Flower: its transport end, and how steps move its sealed envelopes.

The server drives (as a Flower ``ServerApp`` does): :meth:`ServerRuntime.step` takes the wires
the server's transport filed for each client, sends each client one ``Message``, and delivers
the reply wires to the server's transport. A client that does not answer (its process died,
its stream closed, its ``ClientApp`` raised) is recorded as dropped and asked nothing more;
the mechanisms already treat a missing reply as a dropout.

Flower's topology is a star, so envelopes between two non-server parties (a client and the
``keyholder``, say) ride through the server: a reply wire addressed to another party is held
in :attr:`ServerRuntime.forward` and goes out with that party's next step. The server cannot
open it (it is sealed to its receiver) and does not record it (its sender already did).

The client side is a Flower ``ClientApp`` with one handler on the custom action
``query.securefg``: it delivers the request's wires to the client's transport, runs the
handler registered for the step's ``action``, and replies with the wires its transport filed
for the server. Our client Mods (``securefg.integrations.flower.mods``) wrap this handler.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from flwr.app import Context, Message
from flwr.clientapp import ClientApp
from flwr.clientapp.typing import Mod
from flwr.serverapp.grid import Grid

from securefg.errors import CodecError, ProtocolError
from securefg.federation.channel import WireHeader
from securefg.federation.party import SERVER, Party, is_client
from securefg.federation.party_transport import PartyTransport
from securefg.integrations.flower.records import MESSAGE_TYPE, Step

log = logging.getLogger("securefg.flower")


@dataclass
class ServerRuntime:
    """The server party on Flower.

    Args:
        grid (Grid): Flower's grid to the client nodes.
        transport (PartyTransport): The server's end of the transport.
        party (Party): The server's private state.
    """

    grid: Grid
    transport: PartyTransport
    party: Party
    nodes: dict[str, int] = field(default_factory=dict)
    dropped: dict[str, str] = field(default_factory=dict)
    framing_bytes: int = 0
    forward: dict[str, list[bytes]] = field(default_factory=dict)

    def connect(self, expected: Iterable[str]) -> None:
        """Map Flower node ids to party ids: every connected node names itself in ``hello``."""
        want = set(expected)
        node_ids = list(self.grid.get_node_ids())
        msgs = [Message(Step("hello").to_content(), dst_node_id=n, message_type=MESSAGE_TYPE) for n in node_ids]
        for rep in self.grid.send_and_receive(msgs):
            if rep.has_error():
                continue
            pid = Step.from_content(rep.content).info.get("pid")
            if not isinstance(pid, str) or pid not in want or pid in self.nodes:
                raise ProtocolError(f"node {rep.metadata.src_node_id} claims to be {pid!r}, expected one of {sorted(want)}")
            self.nodes[pid] = rep.metadata.src_node_id
        missing = want - set(self.nodes)
        if missing:
            raise ProtocolError(f"clients {sorted(missing)} did not connect")

    @property
    def live(self) -> list[str]:
        """Connected clients that have not dropped."""
        return sorted(p for p in self.nodes if p not in self.dropped and is_client(p))

    @property
    def parties(self) -> list[str]:
        """Every connected party: clients and helpers (``keyholder``), dropped or not."""
        return sorted(self.nodes)

    def step(
        self, pids: Iterable[str], *, action: str, round: int, tag: str = "", stage: str = "",
        info: Mapping[str, str | int] | None = None,
    ) -> dict[str, Step]:
        """One request/reply with each of ``pids`` still live; returns the replies that came."""
        node_to_pid = {n: p for p, n in self.nodes.items()}
        seq = self.transport.clock // 2
        info = {**(info or {}), "seq": seq}
        msgs = []
        for pid in pids:
            if pid in self.dropped:
                self.transport.take_outbox(pid)
                self.forward.pop(pid, None)
                continue
            wires = (*self.transport.take_outbox(pid), *self.forward.pop(pid, []))
            req = Step(action, round, tag, stage, wires, dict(info))
            self.framing_bytes += req.framing_bytes()
            msgs.append(Message(req.to_content(), dst_node_id=self.nodes[pid], message_type=MESSAGE_TYPE))
        out: dict[str, Step] = {}
        for rep in self.grid.send_and_receive(msgs):
            pid = node_to_pid[rep.metadata.src_node_id]
            if rep.has_error():
                where = " ".join(x for x in (action, tag, stage) if x)
                self.dropped.setdefault(pid, f"{where} r{round}: {rep.error.reason}")
                log.warning("%s dropped at %s (round %d): %s", pid, action, round, rep.error.reason)
                continue
            try:
                got = Step.from_content(rep.content)
                self._route(pid, got.wires)
            except (CodecError, ProtocolError) as exc:  # a malformed reply: drop its sender, go on
                self.dropped.setdefault(pid, f"{action} {tag} {stage} r{round}: malformed reply: {exc}")
                continue
            self.framing_bytes += got.framing_bytes()
            out[pid] = got
        self.transport.clock = 2 * (seq + 1)  # the server's next sends come after these replies
        return out

    def _route(self, sender: str, wires: Iterable[bytes]) -> None:
        """Deliver ``sender``'s wires for the server; hold those for other parties (all or none)."""
        own, onward = [], []
        for wire in wires:
            header, _ = WireHeader.decode(wire)
            if header.sender != sender:
                raise ProtocolError(f"{sender} replied with a wire it did not send")
            if header.receiver == SERVER:
                own.append(wire)
            elif header.receiver in self.nodes:
                onward.append((header.receiver, wire))
            else:
                raise ProtocolError(f"{sender} sent a wire to unknown party {header.receiver!r}")
        self.transport.deliver(own)
        for receiver, wire in onward:
            self.forward.setdefault(receiver, []).append(wire)


Handler = Callable[[Step], Mapping[str, str | int] | None]


class ClientRuntime:
    """A client party on Flower: its transport end, its state, and its step handlers.

    Args:
        transport (PartyTransport): This client's end of the transport.
        party (Party): Its private state.
        mods (list[Mod]): Flower client Mods around the step handler. (default: none)
        trace (Path, optional): File that gets one line per handled step (round, action, tag,
            stage): where this party is, for operators and tests. (default: none)
    """

    def __init__(self, transport: PartyTransport, party: Party, *, mods: list[Mod] | None = None,
                 trace: Path | None = None) -> None:
        self.transport = transport
        self.party = party
        self.trace = trace
        self.handlers: dict[str, Handler] = {"hello": lambda step: {"pid": party.pid}}
        self.finished = False
        self.app = ClientApp(mods=mods or [])
        self.app.query("securefg")(self.handle)

    def on(self, action: str, handler: Handler) -> None:
        """Register the handler of ``action``."""
        self.handlers[action] = handler

    def handle(self, msg: Message, context: Context) -> Message:
        """Answer one ``query.securefg`` step (deliver its wires, run its action, reply)."""
        step = Step.from_content(msg.content)
        if step.action not in self.handlers:
            raise ProtocolError(f"{self.party.pid} has no handler for action {step.action!r} "
                                f"(known: {sorted(self.handlers)})")
        self.transport.deliver(step.wires)
        seq = step.info.get("seq", 0)
        self.transport.clock = 2 * int(seq) + 1  # replies to step seq: after the server's sends
        info = self.handlers[step.action](step) or {}
        wires = [w for r in self.transport.outbox_receivers() for w in self.transport.take_outbox(r)]
        reply = Step(step.action, step.round, step.tag, step.stage, tuple(wires), dict(info))
        if self.trace is not None:  # where this party is (operator's log; nothing secret)
            with self.trace.open("a", encoding="utf-8") as fh:
                fh.write(f"{step.round} {step.action} {step.tag} {step.stage}\n")
        return Message(reply.to_content(), reply_to=msg)
