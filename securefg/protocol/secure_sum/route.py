"""How stage messages travel between the clients and the aggregator, always through the server.

For ``aggregate`` the aggregator *is* the server: a client's envelope goes straight to it.
For ``peer_sum(target=i)`` the aggregator is client ``i`` and the server is a pure relay:

* up:   client --(stage payload)--> server --(origin || payload)--> target
* down: target --(destination || payload)--> server --(payload)--> client

Clients never talk to each other or to the target directly. In relayed mode, every payload
after AdvertiseKeys is also sealed end to end between the client and the target (X25519 of the
client's ``c`` key and the target's per-round key, HKDF per stage and direction, ChaCha20-
Poly1305), so the relay sees only public keys and ciphertexts (``Form.SEALED``); with
``sum_at_relay`` the masked inputs are the exception: they travel masked (``Form.MASKED``) and
the relay adds them up and forwards one sum (:mod:`~securefg.protocol.secure_sum.relay_sum`).
"""

from __future__ import annotations

from dataclasses import dataclass

from securefg.errors import ProtocolError, UnexpectedMessageError
from securefg.federation.channel import length_prefixed, split_length_prefixed
from securefg.federation.envelope import Envelope, Form
from securefg.federation.party import is_client
from securefg.federation.transport import InProcessTransport
from securefg.protocol.secure_sum.constants import Stage

STAGE_FORM = {
    Stage.ADVERTISE_KEYS: Form.KEYS,
    Stage.SHARE_KEYS: Form.KEYS,
    Stage.MASKED_INPUT: Form.MASKED,
    Stage.CONSISTENCY_CHECK: Form.KEYS,
    Stage.UNMASK: Form.KEYS,
}
"""What the final receiver of each stage's messages can read."""


@dataclass(frozen=True)
class Delivery:
    """A stage message as its final receiver got it: who it is from and the payload."""

    origin: str
    stage: Stage
    payload: bytes


class Route:
    """The message paths of one secure-sum call.

    Args:
        transport (InProcessTransport): The network.
        relay (str): The server's id (every message passes through it).
        aggregator (str): Who learns the sum: the server, or the ``peer_sum`` target.
        round (int): The call's round.
        tag (str): The call's message tag.
        sum_at_relay (bool): In relayed mode, the relay adds the masked inputs and forwards
            their sum. (default: :obj:`False`)
    """

    def __init__(
        self, transport: InProcessTransport, *, relay: str, aggregator: str, round: int, tag: str,
        sum_at_relay: bool = False,
    ) -> None:
        self.transport = transport
        self.relay = relay
        self.aggregator = aggregator
        self.round = round
        self.tag = tag
        self.sum_at_relay = sum_at_relay and relay != aggregator

    @property
    def relayed(self) -> bool:
        """Whether the aggregator is a client behind the relay (``peer_sum``)."""
        return self.aggregator != self.relay

    def sealed(self, stage: Stage) -> bool:
        """Whether ``stage``'s payloads travel sealed end to end (relayed mode, after keys)."""
        if self.sum_at_relay and stage is Stage.MASKED_INPUT:
            return False
        return self.relayed and stage is not Stage.ADVERTISE_KEYS

    def _send(self, sender: str, receiver: str, stage: Stage, payload: bytes, form: Form) -> None:
        self.transport.send(
            Envelope(sender, (receiver,), self.round, self.tag, payload, stage=stage.value, form=form)
        )

    def _form(self, stage: Stage) -> Form:
        return Form.SEALED if self.sealed(stage) else STAGE_FORM[stage]

    # ---------------------------------------------------------------------------- sending
    def up(self, sender: str, stage: Stage, payload: bytes) -> None:
        """Client ``sender`` sends a stage message to the aggregator (via the relay)."""
        self._send(sender, self.relay, stage, payload, self._form(stage))

    def down(self, receiver: str, stage: Stage, payload: bytes) -> None:
        """The aggregator sends a stage message to client ``receiver`` (via the relay)."""
        if self.relayed:
            wrapped = length_prefixed(receiver.encode(), payload)
            self._send(self.aggregator, self.relay, stage, wrapped, self._form(stage))
        else:
            self._send(self.aggregator, receiver, stage, payload, STAGE_FORM[stage])

    def up_from_relay(self, stage: Stage, payload: bytes) -> None:
        """As the relay: send the aggregator a message of the relay's own (its masked sum)."""
        self._send(self.relay, self.aggregator, stage, length_prefixed(self.relay.encode(), payload), STAGE_FORM[stage])

    # ------------------------------------------------------------------ relaying (as server)
    def forward_up(self, stage: Stage) -> None:
        """As the relay: forward every client message of ``stage`` to the aggregator."""
        if not self.relayed:
            return
        for env in self.transport.receive(self.relay, tag=self.tag, round=self.round, stage=stage.value):
            if not is_client(env.sender) or env.sender == self.aggregator:
                raise UnexpectedMessageError(f"relay got a {stage.value!r} message from {env.sender!r}")
            wrapped = length_prefixed(env.sender.encode(), env.payload)
            self._send(self.relay, self.aggregator, stage, wrapped, STAGE_FORM[stage])

    def forward_down(self, stage: Stage) -> None:
        """As the relay: forward the aggregator's messages of ``stage`` to their clients."""
        if not self.relayed:
            return
        for env in self.transport.receive(self.relay, tag=self.tag, round=self.round, stage=stage.value):
            if env.sender != self.aggregator:
                raise UnexpectedMessageError(f"relay got a downward {stage.value!r} message from {env.sender!r}")
            (dest, inner), end = split_length_prefixed(env.payload, 2)
            receiver = dest.decode("utf-8", errors="replace")
            if end != len(env.payload) or not is_client(receiver):
                raise UnexpectedMessageError(f"relay cannot route a message to {receiver!r}")
            self._send(self.relay, receiver, stage, inner, STAGE_FORM[stage])

    # -------------------------------------------------------------------------- receiving
    def _deliveries(self, pid: str, expected_sender: str, stage: Stage, *, unwrap: bool) -> list[Delivery]:
        out = []
        for env in self.transport.receive(pid, tag=self.tag, round=self.round):
            if env.stage != stage.value:
                raise UnexpectedMessageError(
                    f"{pid!r} expected a {stage.value!r} message but got one for {env.stage!r} "
                    f"(replayed or reordered stage)"
                )
            if unwrap:
                if env.sender != expected_sender:
                    raise UnexpectedMessageError(f"{pid!r} got a {stage.value!r} message from {env.sender!r}")
                (origin, inner), end = split_length_prefixed(env.payload, 2)
                if end != len(env.payload):
                    raise UnexpectedMessageError("relayed message has trailing bytes")
                out.append(Delivery(origin.decode("utf-8", errors="replace"), stage, inner))
            else:
                out.append(Delivery(env.sender, stage, env.payload))
        return out

    def aggregator_inbox(self, stage: Stage) -> list[Delivery]:
        """As the aggregator: every ``stage`` message from clients (relay wrapping removed)."""
        return self._deliveries(self.aggregator, self.relay, stage, unwrap=self.relayed)

    def client_inbox(self, pid: str, stage: Stage) -> list[Delivery]:
        """As client ``pid``: the aggregator's ``stage`` messages (they arrive from the server)."""
        out = self._deliveries(pid, self.relay, stage, unwrap=False)
        for d in out:
            if d.origin != self.relay:
                raise UnexpectedMessageError(f"{pid!r} got a {stage.value!r} message from {d.origin!r}")
        return [Delivery(self.aggregator, d.stage, d.payload) for d in out]

    def drain(self, pid: str) -> None:
        """Discard whatever is still queued for ``pid`` in this call (after a dropout or abort)."""
        for _ in range(self.transport.pending(pid) + 1):
            try:
                self.transport.receive(pid, tag=self.tag, round=self.round)
                return
            except ProtocolError:  # each failure pops one bad envelope; keep draining
                continue
