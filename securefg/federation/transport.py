"""The in-process transport: every party in one process, every message as sealed bytes.

This is the embedded engine used by tests, examples and the CLI. It keeps the interface that
a networked backend (Flower) implements too: ``send`` an envelope, ``receive`` a party's
envelopes. Each copy is sealed for its receiver by the sender's channel endpoint, recorded in
the transcript, queued as bytes, and opened (authenticated, replay-checked) on receipt.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Iterable

from securefg.errors import AuthenticationError, CodecError, ProtocolError
from securefg.federation.channel import ChannelEndpoint, ChannelIdentity, WireHeader
from securefg.federation.envelope import Envelope
from securefg.federation.transcript import Transcript


class InProcessTransport:
    """Deliver envelopes between parties living in one process.

    Args:
        parties (Iterable[str]): Every party id that may send or receive.
        transcript (Transcript, optional): Where to record traffic. (default: a new one)
        session (bytes, optional): Session id bound into every envelope. (default: random)
    """

    def __init__(
        self,
        parties: Iterable[str],
        *,
        transcript: Transcript | None = None,
        session: bytes | None = None,
    ) -> None:
        self.session = session or os.urandom(16)
        self.transcript = transcript if transcript is not None else Transcript()
        identities = {pid: ChannelIdentity(pid) for pid in parties}
        directory = {pid: ident.public_bytes for pid, ident in identities.items()}
        self._endpoints = {
            pid: ChannelEndpoint(ident, self.session, directory) for pid, ident in identities.items()
        }
        self._queues: dict[str, deque[bytes]] = {pid: deque() for pid in identities}
        self.offline: set[str] = set()

    @property
    def parties(self) -> tuple[str, ...]:
        return tuple(self._endpoints)

    def add_party(self, pid: str) -> None:
        """Register a party that joins after construction (e.g. a late client)."""
        if pid in self._endpoints:
            raise ValueError(f"party {pid!r} already exists")
        ident = ChannelIdentity(pid)
        directory = self._endpoints[next(iter(self._endpoints))]._directory
        directory[pid] = ident.public_bytes
        self._endpoints[pid] = ChannelEndpoint(ident, self.session, directory)
        self._queues[pid] = deque()

    def send(self, env: Envelope) -> None:
        """Seal ``env`` for each receiver, record it and queue it.

        Copies addressed to a party in :attr:`offline` are recorded as not delivered.
        """
        if env.sender not in self._endpoints:
            raise ProtocolError(f"unknown sender {env.sender!r}")
        if env.sender in self.offline:
            raise ProtocolError(f"{env.sender!r} is offline and cannot send")
        endpoint = self._endpoints[env.sender]
        for receiver in env.receivers:
            if receiver not in self._queues:
                raise ProtocolError(f"unknown receiver {receiver!r}")
            wire = endpoint.seal(env, receiver)
            self.transcript.append(
                round=env.round,
                tag=env.tag,
                stage=env.stage,
                sender=env.sender,
                receiver=receiver,
                form=env.form,
                payload=env.payload,
                wire_bytes=len(wire),
                is_error=env.error is not None,
            )
            if receiver not in self.offline:
                self._queues[receiver].append(wire)

    def inject(self, receiver: str, wire: bytes) -> None:
        """Put raw wire bytes in ``receiver``'s queue: how tests play an active network attacker."""
        self._queues[receiver].append(wire)

    def peek_wire(self, receiver: str) -> list[bytes]:
        """The raw bytes queued for ``receiver`` (what a network observer sees)."""
        return list(self._queues[receiver])

    def receive(
        self,
        pid: str,
        *,
        tag: str | None = None,
        round: int | None = None,
        stage: str | None = None,
    ) -> list[Envelope]:
        """Open and return every queued envelope for ``pid`` that matches the filters.

        Envelopes that do not match stay queued. Authentication and replay failures raise.
        """
        return drain_matching(self._queues[pid], self._endpoints[pid], tag=tag, round=round, stage=stage)

    def receive_from(
        self, pid: str, senders: Iterable[str], *, tag: str, round: int, stage: str | None = None
    ) -> dict[str, Envelope]:
        """Receive exactly one envelope from each of ``senders`` (offline senders excluded)."""
        envs = self.receive(pid, tag=tag, round=round, stage=stage)
        got: dict[str, Envelope] = {}
        for env in envs:
            if env.sender in got:
                raise ProtocolError(f"{pid!r} got two envelopes from {env.sender!r} for {tag!r}")
            got[env.sender] = env
        wanted = set(senders) - self.offline
        unexpected = set(got) - set(senders)
        if unexpected:
            raise ProtocolError(f"{pid!r} got unexpected envelopes from {sorted(unexpected)}")
        missing = wanted - set(got)
        if missing:
            raise ProtocolError(f"{pid!r} is missing envelopes from {sorted(missing)} for {tag!r}")
        return got

    def pending(self, pid: str) -> int:
        return len(self._queues[pid])


def drain_matching(
    queue: deque[bytes], endpoint: ChannelEndpoint, *, tag: str | None, round: int | None, stage: str | None
) -> list[Envelope]:
    """Open every queued envelope whose header matches the filters; the rest stay queued in order.

    Shared by every transport (in-process, one party's end over Flower) so that filtering and the
    behaviour on a bad wire cannot drift apart. A bad wire (malformed, unauthenticated, addressed
    to another party, replayed) costs only itself: it is removed from the queue and its typed
    error raised, naming it; every other wire, including the matching ones opened before it, goes
    back in its place and the endpoint's sequence state is rolled back, so the next call opens
    the same valid mail again.

    Raises:
        CodecError: A wire whose header cannot be parsed (its position in the queue is named).
        AuthenticationError: A wire that fails :meth:`ChannelEndpoint.open` (``ReplayError`` for
            a replay), named by sender, sequence number, round, tag and stage.
    """
    state = endpoint.checkpoint()
    taken: list[tuple[bytes, bool]] = []  # every wire taken off the queue that stays: (wire, opened)
    out: list[Envelope] = []
    while queue:
        wire = queue.popleft()
        try:
            header, _ = WireHeader.decode(wire)
        except CodecError as exc:
            _put_back(queue, taken, endpoint, state)
            raise CodecError(
                f"wire {len(taken)} queued for {endpoint.pid!r} is malformed ({exc}); dropped, the rest of "
                "the queue is kept"
            ) from exc
        if (
            (tag is not None and header.tag != tag)
            or (round is not None and header.round != round)
            or (stage is not None and header.stage != stage)
        ):
            taken.append((wire, False))
            continue
        try:
            out.append(endpoint.open(wire))
        except AuthenticationError:
            _put_back(queue, taken, endpoint, state)
            raise
        taken.append((wire, True))
    queue.extend(w for w, opened in taken if not opened)
    return out


def _put_back(queue: deque[bytes], taken: list[tuple[bytes, bool]], endpoint: ChannelEndpoint,
              state: dict[str, int]) -> None:
    """Undo a partial drain: every wire taken off goes back to the front, in order, unopened."""
    queue.extendleft(reversed([w for w, _ in taken]))
    endpoint.rollback(state)
