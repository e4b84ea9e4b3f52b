"""The server party's runtime: its transport end, and how steps move sealed envelopes.

The server drives: :meth:`ServerRuntime.step` takes the wires the server's transport filed for
each party, sends each party one request, and delivers the reply wires to the server's
transport. A party that does not answer (its process died, its handler raised, a simulated
dropout) is recorded as dropped and asked nothing more; the mechanisms already treat a missing
reply as a dropout.

Every backend has the topology of a star, so envelopes between two non-server parties (a client
and the ``keyholder``, a peer-sum target and its peers) ride through the server: a reply wire
addressed to another party is held in :attr:`ServerRuntime.forward` and goes out with that
party's next step. The server cannot open it (it is sealed to its receiver) and does not record
it (its sender already did).

Backends subclass :class:`ServerRuntime` and implement :meth:`~ServerRuntime.exchange_steps`
only; everything else (routing, dropouts, framing counts) is shared.
"""

from __future__ import annotations

import abc
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from securefg.errors import CodecError, ProtocolError
from securefg.federation.channel import WireHeader
from securefg.federation.party import SERVER, Party, is_client
from securefg.federation.party_transport import PartyTransport
from securefg.federation.program import timing
from securefg.federation.program.step import InfoValue, Step

log = logging.getLogger("securefg.program")

#: Reply ``info`` key prefix under which a contributor reports the layout of its input to a tag.
LAYOUT = "layout."


@dataclass
class StepError:
    """A party's failed reply: it is dropped with this reason."""

    reason: str


@dataclass
class ServerRuntime(abc.ABC):
    """The server party on some backend.

    Args:
        transport (PartyTransport): The server's end of the transport.
        party (Party): The server's private state.
        peers (list[str]): Every other party of the run it can step (clients and helpers).
    """

    transport: PartyTransport
    party: Party
    peers: list[str] = field(default_factory=list)
    dropped: dict[str, str] = field(default_factory=dict)
    framing_bytes: int = 0
    steps: int = 0
    forward: dict[str, list[bytes]] = field(default_factory=dict)
    layouts: dict[tuple[str, int], dict[str, str]] = field(default_factory=dict)
    """(tag, round) -> party -> the layout it reported for what it contributed to that tag."""

    @abc.abstractmethod
    def exchange_steps(self, requests: Mapping[str, Step]) -> dict[str, Step | StepError]:
        """Send each party its request and return every reply (or why there is none).

        The backend's one job. Requests go out together; each party answers its own.
        """

    @property
    def live(self) -> list[str]:
        """Connected clients that have not dropped."""
        return sorted(p for p in self.peers if p not in self.dropped and is_client(p))

    @property
    def clients(self) -> list[str]:
        """Every client of the run, dropped or not."""
        return sorted(p for p in self.peers if is_client(p))

    @property
    def parties(self) -> list[str]:
        """Every connected party but the server: clients and helpers (``keyholder``)."""
        return sorted(self.peers)

    def step(
        self, pids: Iterable[str], *, action: str, round: int, tag: str = "", stage: str = "",
        info: Mapping[str, InfoValue] | None = None,
    ) -> dict[str, Step]:
        """One request/reply with each of ``pids`` still live; returns the replies that came."""
        seq = self.transport.clock // 2
        base = {**(info or {}), "seq": seq}
        requests: dict[str, Step] = {}
        for pid in pids:
            if pid in self.dropped:
                self.transport.take_outbox(pid)
                self.forward.pop(pid, None)
                continue
            if pid not in self.peers:
                raise ProtocolError(f"the server cannot step {pid!r}: not a party of this run")
            wires = (*self.transport.take_outbox(pid), *self.forward.pop(pid, []))
            req = Step(action, round, tag, stage, wires, dict(base))
            self.framing_bytes += req.framing_bytes()
            requests[pid] = req
        self.steps += 1
        timing.first_step(self.party.pid)
        with timing.timed("exchange"):
            replies = self.exchange_steps(requests) if requests else {}
        out: dict[str, Step] = {}
        where = " ".join(x for x in (action, tag, stage) if x)
        for pid in requests:  # in request order: routing is deterministic on every backend
            rep = replies.get(pid, StepError("no reply"))
            if isinstance(rep, StepError):
                self.dropped.setdefault(pid, f"{where} r{round}: {rep.reason}")
                log.warning("%s dropped at %s (round %d): %s", pid, where, round, rep.reason)
                continue
            try:
                self._route(pid, rep.wires)
            except (CodecError, ProtocolError) as exc:  # a malformed reply: drop its sender, go on
                self.dropped.setdefault(pid, f"{where} r{round}: malformed reply: {exc}")
                continue
            self.framing_bytes += rep.framing_bytes()
            for key, value in rep.info.items():
                if key.startswith(LAYOUT):
                    self.layouts.setdefault((key[len(LAYOUT):], round), {})[pid] = str(value)
            out[pid] = rep
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
            elif header.receiver in self.peers:
                onward.append((header.receiver, wire))
            else:
                raise ProtocolError(f"{sender} sent a wire to unknown party {header.receiver!r}")
        self.transport.deliver(own)
        for receiver, wire in onward:
            self.forward.setdefault(receiver, []).append(wire)
