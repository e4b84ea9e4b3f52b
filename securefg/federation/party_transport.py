"""One party's end of a networked transport: sealed envelopes in, sealed envelopes out.

:class:`~securefg.federation.transport.InProcessTransport` holds every party's channel
endpoint in one process. Over a real engine (Flower) each process holds only its own:
``send`` seals each copy with this party's endpoint, records it in this party's transcript
(the sender side, as the in-process transport does) and files the wire bytes in an outbox per
receiver; the engine carries the outboxes and hands what arrives to :meth:`deliver`;
``receive`` opens (authenticates, replay-checks) exactly as the in-process transport does.
Mechanisms written against the in-process transport (``Route``, the secure-sum stages) run on
it unchanged, as long as code acts only as :attr:`pid`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping

from securefg.errors import AuthenticationError, CodecError, ProtocolError
from securefg.federation.channel import ChannelEndpoint, ChannelIdentity, WireHeader
from securefg.federation.envelope import Envelope
from securefg.federation.transcript import Transcript
from securefg.federation.transport import drain_matching


class PartyTransport:
    """The transport as seen by the one party ``identity.pid`` in its own process.

    Args:
        identity (ChannelIdentity): This party's channel key pair (provisioned to it alone).
        session (bytes): The run's session id, bound into every envelope.
        directory (Mapping[str, bytes]): Public channel keys of the parties it talks to.
        transcript (Transcript, optional): Where this party's sends are recorded.
            (default: a new one)
    """

    def __init__(
        self,
        identity: ChannelIdentity,
        *,
        session: bytes,
        directory: Mapping[str, bytes],
        transcript: Transcript | None = None,
    ) -> None:
        if identity.pid not in directory or directory[identity.pid] != identity.public_bytes:
            raise AuthenticationError(f"the directory does not hold {identity.pid!r}'s own public key")
        self.pid = identity.pid
        self.public_key = identity.public_bytes
        self.session = session
        self.transcript = transcript if transcript is not None else Transcript()
        self._endpoint = ChannelEndpoint(identity, session, dict(directory))
        self._known = frozenset(directory)
        self._inbox: deque[bytes] = deque()
        self._outbox: dict[str, list[bytes]] = {}
        self.offline: set[str] = set()
        self.clock = 0
        """Logical time of this party's sends (the engine's step count); :attr:`clocks` holds
        it per transcript record so the parties' transcripts merge in causal order."""
        self.clocks: list[int] = []

    @property
    def parties(self) -> tuple[str, ...]:
        return tuple(sorted(self._known))

    def learn(self, directory: Mapping[str, bytes]) -> None:
        """Add peers' public channel keys (a party that learns its directory after it starts).

        Raises:
            AuthenticationError: A key for a party already known with a different key.
        """
        for pid, key in directory.items():
            known = self._endpoint._directory.get(pid)  # noqa: SLF001 - the endpoint's own key directory
            if known is not None and known != key:
                raise AuthenticationError(f"{self.pid!r} already holds a different channel key for {pid!r}")
        for pid, key in directory.items():
            self._endpoint._directory[pid] = bytes(key)  # noqa: SLF001
        self._known = self._known | frozenset(directory)

    # ------------------------------------------------------------------------ sending
    def send(self, env: Envelope) -> None:
        """Seal ``env`` for each receiver, record it, and file the wires for the engine."""
        if env.sender != self.pid:
            raise ProtocolError(f"{self.pid!r} cannot send an envelope as {env.sender!r}")
        for receiver in env.receivers:
            if receiver not in self._known:
                raise ProtocolError(f"unknown receiver {receiver!r}")
            wire = self._endpoint.seal(env, receiver)
            self.transcript.append(
                round=env.round, tag=env.tag, stage=env.stage, sender=env.sender, receiver=receiver,
                form=env.form, payload=env.payload, wire_bytes=len(wire), is_error=env.error is not None,
            )
            self.clocks.append(self.clock)
            self._outbox.setdefault(receiver, []).append(wire)

    def take_outbox(self, receiver: str) -> list[bytes]:
        """Remove and return the wires waiting for ``receiver`` (what the engine carries next)."""
        return self._outbox.pop(receiver, [])

    def outbox_receivers(self) -> list[str]:
        """Parties with wires waiting."""
        return sorted(r for r, w in self._outbox.items() if w)

    # ---------------------------------------------------------------------- receiving
    def deliver(self, wires: Iterable[bytes]) -> None:
        """Queue the wires the engine brought that name this party as their receiver.

        A wire that is not bytes, is malformed or is addressed to another party costs only
        itself: every other wire of the batch is queued (in order) before the first such
        wire's error is raised, so valid mail beside it is never lost and the channel's
        sequence stays intact.

        Raises:
            CodecError: A malformed wire (named by its position in the batch).
            ProtocolError: A wire that is not bytes, or addressed to another party.
        """
        problems: list[ProtocolError] = []
        for i, wire in enumerate(wires):
            if not isinstance(wire, bytes):
                problems.append(ProtocolError(
                    f"wire {i} of the batch for {self.pid!r} is a {type(wire).__name__}, not bytes; dropped"))
                continue
            try:
                header, _ = WireHeader.decode(wire)
            except CodecError as exc:
                problems.append(CodecError(f"wire {i} of the batch for {self.pid!r} is malformed ({exc}); dropped"))
                continue
            if header.receiver != self.pid:
                problems.append(ProtocolError(
                    f"wire {i} of the batch for {self.pid!r} is addressed to {header.receiver!r}; dropped"))
                continue
            self._inbox.append(wire)
        if problems:
            others = f" (and {len(problems) - 1} more bad wire(s) dropped)" if len(problems) > 1 else ""
            raise type(problems[0])(f"{problems[0]}{others}") from None

    def receive(
        self, pid: str, *, tag: str | None = None, round: int | None = None, stage: str | None = None
    ) -> list[Envelope]:
        """Open and return every queued envelope matching the filters (others stay queued)."""
        if pid != self.pid:
            raise ProtocolError(f"{self.pid!r} cannot read {pid!r}'s envelopes")
        return drain_matching(self._inbox, self._endpoint, tag=tag, round=round, stage=stage)

    def receive_from(
        self, pid: str, senders: Iterable[str], *, tag: str, round: int, stage: str | None = None
    ) -> dict[str, Envelope]:
        """At most one envelope from each of ``senders`` (a missing sender is a dropout)."""
        want = set(senders)
        got: dict[str, Envelope] = {}
        for env in self.receive(pid, tag=tag, round=round, stage=stage):
            if env.sender not in want or env.sender in got:
                raise ProtocolError(f"unexpected envelope from {env.sender!r} for {tag!r}")
            got[env.sender] = env
        return got

    def pending(self, pid: str) -> int:
        return len(self._inbox) if pid == self.pid else 0
