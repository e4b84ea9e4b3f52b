"""A non-server party's runtime: its transport end, its state, and its step handlers.

A party (a client, or a helper such as the CKKS ``keyholder``) only ever answers steps: each
request's wires are delivered to its transport, the handler registered for the step's
``action`` runs (as this party, on its own state), and the reply carries the wires its
transport filed meanwhile, plus the public ``info`` the handler (and the exchange, e.g. the
layout of a vector it contributed) returned. The same class serves every backend; Flower wraps
:meth:`ClientRuntime.answer` in a ``ClientApp``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from securefg.errors import ProtocolError
from securefg.federation.party import Party
from securefg.federation.party_transport import PartyTransport
from securefg.federation.program import timing
from securefg.federation.program.step import InfoValue, Step

Handler = Callable[[Step], Mapping[str, InfoValue] | None]


class ClientRuntime:
    """A non-server party on any backend.

    Args:
        transport (PartyTransport): This party's end of the transport.
        party (Party): Its private state.
        trace (Path, optional): File that gets one line per handled step (round, action, tag,
            stage): where this party is, for operators and tests. (default: none)
    """

    def __init__(self, transport: PartyTransport, party: Party, *, trace: Path | None = None) -> None:
        self.transport = transport
        self.party = party
        self.trace = trace
        self.handlers: dict[str, Handler] = {"hello": lambda step: {"pid": party.pid}}
        self.reply_info: dict[str, InfoValue] = {}
        """Public facts the current step's reply carries besides the handler's own (the
        exchange files a contributed vector's layout here)."""

    def on(self, action: str, handler: Handler) -> None:
        """Register the handler of ``action`` (one per action)."""
        self.handlers[action] = handler

    def answer(self, step: Step) -> Step:
        """Handle one step: deliver its wires, run its action, reply with what this party sent.

        Raises:
            ProtocolError: No handler for the step's action. Whatever the handler raises
                propagates: the backend turns it into an error reply (a dropout).
        """
        if step.action not in self.handlers:
            raise ProtocolError(f"{self.party.pid} has no handler for action {step.action!r} "
                                f"(known: {sorted(self.handlers)})")
        self.transport.deliver(step.wires)
        seq = step.info.get("seq", 0)
        self.transport.clock = 2 * int(seq) + 1  # replies to step seq: after the server's sends
        self.reply_info = {}
        timing.first_step(self.party.pid)
        with timing.timed("handler"):
            info = {**(self.handlers[step.action](step) or {}), **self.reply_info}
        self.reply_info = {}
        wires = [w for r in self.transport.outbox_receivers() for w in self.transport.take_outbox(r)]
        if self.trace is not None:  # where this party is (operator's log; nothing secret)
            with self.trace.open("a", encoding="utf-8") as fh:
                fh.write(f"{step.round} {step.action} {step.tag} {step.stage}\n")
        return Step(step.action, step.round, step.tag, step.stage, tuple(wires), dict(info))
