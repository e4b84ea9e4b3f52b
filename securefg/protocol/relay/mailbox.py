"""The ``mailbox`` mechanism: uploads under pseudonyms through a shuffler, replies sealed back.

For exchanges where the server must read every input *individually* (so a masked sum cannot
help) but need not know *who* sent it: FedSheafHN's client embeddings and hypernetwork feedback
(``collect``), and the generated weights going back to each embedding's owner (``reply``).

Each client draws one X25519 **pseudonym key** per transport session (shared by every tag of
this mechanism, so the rows of a method's per-client state stay aligned across rounds and tags);
its pseudonym is ``SHA-256(public key)[:8]`` in hex.

``collect`` (client -> shuffler -> server):

1. Client ``i`` seals ``pseudonym_public || frame(payload)`` to the **server**
   (:mod:`.sealed_box`, bound to session, round, tag) and wraps that box together with its
   pseudonym in an onion sealed to the **shuffler**; it sends the onion to the shuffler.
2. The shuffler peels the outer layer, records ``pseudonym -> client`` (refusing a pseudonym
   claimed by two clients), CSPRNG-shuffles the inner boxes and hands the batch to the server.
3. The server opens each box: it learns every payload under its pseudonym and the pseudonym's
   public key, in random order, from one envelope sent by the shuffler.

``reply`` (server -> shuffler -> pseudonym owner): the server seals each output to its
pseudonym's public key, addressed by pseudonym; the shuffler forwards each box to the client it
recorded for that pseudonym; the client opens it with its pseudonym key.

Protects against:

* **The server linking an input or reply to a network identity**: it only ever talks to the
  shuffler; the inner boxes carry no sender identity (ephemeral keys) and arrive shuffled.
* **The shuffler reading anything**: it sees sealed boxes only (``Form.SEALED``).
* **Other clients**: no client receives another's upload or reply.
* Tampering, replay across rounds or tags, redirection: the boxes open only under their
  binding (:class:`~securefg.errors.AuthenticationError`); drops and duplicates are detected
  by count (:class:`~securefg.errors.ProtocolError`).
* **The shuffler (or anyone holding the server's public sealing key) swapping in an input of
  its own**: inner boxes are sealed under the server's membership secret, which only the clients
  hold (:mod:`.membership`, psk mode: it proves *a* client sealed the input, not which, so the
  pseudonyms stay unlinkable). A swapped input fails with
  :class:`~securefg.errors.SenderAuthenticationError` naming its slot in the batch.
* **The shuffler forging a reply**: replies are sealed with the server's static sealing key
  (auth mode), which every client holds from ``collect``; a reply the server did not seal fails
  with :class:`~securefg.errors.SenderAuthenticationError` naming the server.

Does not protect against:

* **The content**: the server reads every payload. Pseudonyms are stable over the session, so
  it links one client's inputs across rounds and tags (what a per-client hypernetwork needs);
  content that identifies its sender (e.g. a distinctive embedding) links it anyway. Add a
  ``dp_gaussian`` transform in ``mode = "local"`` to noise what the server reads.
* A **colluding server and shuffler**: together they hold the pseudonym -> client map.
* A client colluding with the shuffler: it holds the membership secret, so the shuffler can swap
  in an input that client sealed (under a pseudonym of its choosing).
* Traffic analysis of who takes part; denial of service (detected, not prevented).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any, ClassVar

from securefg.errors import AuthenticationError, ConfigError, ProtocolError, SenderAuthenticationError
from securefg.federation.envelope import Envelope, Form
from securefg.federation.party import SHUFFLER, is_client
from securefg.protocol.mechanism import ExchangeCall, ExchangeKind, Mechanism, register_mechanism
from securefg.protocol.relay import membership, sealing_directory
from securefg.protocol.relay.blob_list import pack_blobs, unpack_blobs
from securefg.protocol.relay.constants import item_binding
from securefg.protocol.relay.padding import frame, padding_problems, unframe
from securefg.protocol.relay.sealed_box import PUBLIC_KEY_BYTES, SealingKey, seal
from securefg.protocol.relay.shuffle import secure_shuffle

#: State namespace of the pseudonym keys (per party, per transport session).
NAMESPACE = "pseudonym"


class MailboxStage:
    """Envelope ``stage`` values of the ``mailbox`` mechanism."""

    UPLOAD = "mailbox/upload"
    MIX = "mailbox/mix"
    REPLY = "mailbox/reply"
    DELIVER = "mailbox/deliver"


def pseudonym_of(public_key: bytes) -> str:
    """The pseudonym of a pseudonym public key: ``SHA-256(key)[:8]`` in hex."""
    return hashlib.sha256(public_key).hexdigest()[:16]


def pseudonym_key(call: ExchangeCall, pid: str) -> SealingKey:
    """Acting as client ``pid``: its pseudonym key for this session (drawn on first use)."""
    state = call.state_of(pid, NAMESPACE)
    key = state.get(call.transport.session.hex())
    if key is None:
        key = state[call.transport.session.hex()] = SealingKey()
    assert isinstance(key, SealingKey)
    return key


@register_mechanism
class Mailbox(Mechanism):
    """Pseudonymous uploads through a ``shuffler`` party; replies sealed to the pseudonym.

    Args:
        padding (str | int): ``"pow2"``, ``"none"`` or a block size for every sealed payload.
            (default: ``"pow2"``)
    """

    name = "mailbox"
    exchanges = frozenset({ExchangeKind.COLLECT, ExchangeKind.REPLY})
    defaults: ClassVar[Mapping[str, Any]] = {"padding": "pow2"}
    protects = "pseudonymous: the server reads each input but cannot tell which client sent it"
    reveals_individual_inputs = True

    @classmethod
    def validate_params(cls, params: Mapping[str, Any]) -> list[str]:
        """Unknown keys and an unknown ``padding``."""
        merged = {**cls.defaults, **params}
        return super().validate_params(params) + padding_problems(merged["padding"])

    def _require_shuffler(self, call: ExchangeCall) -> None:
        if SHUFFLER not in call.parties:
            raise ConfigError(
                f"mailbox for {call.tag!r} needs a {SHUFFLER!r} party; the method must list it in "
                "extra_parties (or bind the tag to plaintext)"
            )

    # ----------------------------------------------------------------------------- collect
    def run_collect(self, call: ExchangeCall, inputs: Mapping[str, bytes]) -> dict[str, bytes]:
        """Clients -> shuffler (onions) -> server (shuffled inner boxes); ``{pseudonym: payload}``."""
        self._require_shuffler(call)
        senders = sorted(p for p in inputs if p not in call.transport.offline)
        sealing_directory.ensure(call, holders=senders, owners=[call.server, SHUFFLER])
        membership.ensure(call, holders=senders, owners=[call.server])
        for s in senders:
            call.transport.send(upload_envelope(call, s, seal_upload(call, s, inputs[s], self.params["padding"])))

        # --- shuffler: peel, remember pseudonym -> client, shuffle, hand over
        got = call.transport.receive_from(SHUFFLER, senders, tag=call.tag, round=call.round, stage=MailboxStage.UPLOAD)
        call.transport.send(mix_envelope(call, mix_uploads(call, got, name=self.name)))

        # --- server: open every box, learn payloads under pseudonyms
        (env,) = call.transport.receive_from(
            call.server, [SHUFFLER], tag=call.tag, round=call.round, stage=MailboxStage.MIX
        ).values()
        return open_batch(call, env.payload, count=len(senders), name=self.name)

    # ------------------------------------------------------------------------------- reply
    def run_reply(self, call: ExchangeCall, outputs: Mapping[str, bytes]) -> dict[str, bytes]:
        """Server -> shuffler -> owner: each output sealed to its pseudonym's key."""
        self._require_shuffler(call)
        call.transport.send(reply_envelope(call, seal_replies(call, outputs, self.params["padding"], name=self.name)))

        # --- shuffler: route each box to the client that owns the pseudonym
        (env,) = call.transport.receive_from(
            SHUFFLER, [call.server], tag=call.tag, round=call.round, stage=MailboxStage.REPLY
        ).values()
        owners: list[str] = []
        for owner, box in route_replies(call, env.payload, name=self.name):
            call.transport.send(deliver_envelope(call, owner, box))
            owners.append(owner)

        # --- each owner opens its box with its pseudonym key
        out: dict[str, bytes] = {}
        for owner in owners:
            if owner in call.transport.offline:
                continue
            (got,) = call.transport.receive_from(
                owner, [SHUFFLER], tag=call.tag, round=call.round, stage=MailboxStage.DELIVER
            ).values()
            out[owner] = open_reply(call, owner, got.payload)
        return out


# ------------------------------------------------------------------ each role's part
# ``Mailbox.run_collect``/``run_reply`` play every role in one process; a party program runs
# each of these in its own party's process (securefg.federation.program.collect).
def seal_upload(call: ExchangeCall, sender: str, payload: bytes, padding: str | int) -> bytes:
    """Acting as client ``sender`` (holding the server's and the shuffler's sealing keys and the
    server's membership secret): its onion."""
    nym_pub = pseudonym_key(call, sender).public_bytes
    inner = seal(
        sealing_directory.peer_public(call, sender, call.server),
        pack_blobs([nym_pub, frame(payload, padding)]),
        context=item_binding(call, call.server, b"mailbox/collect"),
        psk=membership.secret_of(call, sender, call.server),
    )
    return seal(
        sealing_directory.peer_public(call, sender, SHUFFLER),
        pack_blobs([pseudonym_of(nym_pub).encode(), inner]),
        context=item_binding(call, SHUFFLER, b"mailbox/onion"),
    )


def upload_envelope(call: ExchangeCall, sender: str, onion: bytes) -> Envelope:
    """Client ``sender``'s onion to the shuffler."""
    return Envelope(sender, (SHUFFLER,), call.round, call.tag, onion, stage=MailboxStage.UPLOAD, form=Form.SEALED)


def mix_uploads(call: ExchangeCall, got: Mapping[str, Envelope], *, name: str = "mailbox") -> bytes:
    """Acting as the shuffler: peel every onion, record ``pseudonym -> client``, return the
    shuffled inner boxes as one blob list for the server.

    Raises:
        ProtocolError: A malformed onion, or a pseudonym claimed by two clients.
    """
    key = sealing_directory.own_key(call, SHUFFLER)
    routes: dict[str, str] = call.state_of(SHUFFLER, name).setdefault("routes", {})
    batch: list[bytes] = []
    for s in sorted(got):
        fields = unpack_blobs(key.open(got[s].payload, context=item_binding(call, SHUFFLER, b"mailbox/onion")),
                              max_count=2)
        if len(fields) != 2:
            raise ProtocolError(f"{s}'s onion for {call.tag!r} must hold a pseudonym and a sealed item")
        nym = fields[0].decode("utf-8", errors="replace")
        if routes.setdefault(nym, s) != s:
            raise ProtocolError(f"pseudonym {nym} for {call.tag!r} is claimed by {s} and {routes[nym]}")
        batch.append(fields[1])
    return pack_blobs(secure_shuffle(batch))


def mix_envelope(call: ExchangeCall, batch: bytes) -> Envelope:
    """The shuffler's batch to the server."""
    return Envelope(SHUFFLER, (call.server,), call.round, call.tag, batch, stage=MailboxStage.MIX, form=Form.SEALED)


def open_batch(call: ExchangeCall, batch: bytes, *, count: int, name: str = "mailbox") -> dict[str, bytes]:
    """Acting as the server: open every box of the shuffler's batch; ``{pseudonym: payload}``
    (and keep each pseudonym's public key for replies).

    Raises:
        ProtocolError: A malformed item, a pseudonym twice, or other than ``count`` items.
        SenderAuthenticationError: An item no client sealed (swapped in by the shuffler), or
            tampered, or from another round or tag; names its slot in the batch.
    """
    own = sealing_directory.own_key(call, call.server)
    psk = membership.own_secret(call, call.server)
    binding = item_binding(call, call.server, b"mailbox/collect")
    known: dict[str, bytes] = call.state_of(call.server, name).setdefault("keys", {})
    out: dict[str, bytes] = {}
    for slot, box in enumerate(unpack_blobs(batch, max_count=count)):
        try:
            opened = own.open(box, context=binding, psk=psk)
        except AuthenticationError as exc:
            raise SenderAuthenticationError(
                f"{call.server} refused the {call.tag!r} item in slot {slot} of the shuffler's round-{call.round} "
                f"batch: no client sealed it (swapped or forged by the shuffler, tampered, or replayed): {exc}",
                slot=slot,
            ) from exc
        fields = unpack_blobs(opened, max_count=2)
        if len(fields) != 2 or len(fields[0]) != PUBLIC_KEY_BYTES:
            raise ProtocolError(f"an item of {call.tag!r} must hold a pseudonym key and a payload")
        nym = pseudonym_of(fields[0])
        if nym in out:
            raise ProtocolError(f"pseudonym {nym} sent two items for {call.tag!r}")
        known[nym] = fields[0]
        out[nym] = unframe(fields[1])
    if len(out) != count:
        raise ProtocolError(f"server got {len(out)} items for {call.tag!r}, expected {count}")
    return out


def seal_replies(call: ExchangeCall, outputs: Mapping[str, bytes], padding: str | int, *,
                 name: str = "mailbox") -> bytes:
    """Acting as the server: each output sealed to its pseudonym's key, as one blob list
    ``[pseudonym, box, ...]`` for the shuffler.

    Raises:
        ProtocolError: A pseudonym the server never collected from.
    """
    known: dict[str, bytes] = call.state_of(call.server, name).get("keys", {})
    unknown = sorted(set(outputs) - set(known))
    if unknown:
        raise ProtocolError(f"{call.tag!r}: reply to pseudonyms {unknown} the server never collected from")
    blobs: list[bytes] = []
    own = sealing_directory.own_key(call, call.server)
    for nym in sorted(outputs):  # auth mode: the owner checks the box came from the server
        box = own.seal_from(known[nym], frame(outputs[nym], padding), context=item_binding(call, nym, b"mailbox/reply"))
        blobs += [nym.encode(), box]
    return pack_blobs(blobs)


def reply_envelope(call: ExchangeCall, boxes: bytes) -> Envelope:
    """The server's sealed replies to the shuffler."""
    return Envelope(call.server, (SHUFFLER,), call.round, call.tag, boxes, stage=MailboxStage.REPLY, form=Form.SEALED)


def route_replies(call: ExchangeCall, boxes: bytes, *, name: str = "mailbox") -> list[tuple[str, bytes]]:
    """Acting as the shuffler: ``(owner, box)`` for every box, by the routes it recorded.

    Raises:
        ProtocolError: A pseudonym it holds no client for.
    """
    routes: dict[str, str] = call.state_of(SHUFFLER, name).get("routes", {})
    fields = unpack_blobs(boxes, max_count=2 * len(routes))
    out: list[tuple[str, bytes]] = []
    for nym_b, box in zip(fields[0::2], fields[1::2]):
        nym = nym_b.decode("utf-8", errors="replace")
        owner = routes.get(nym)
        if owner is None or not is_client(owner):
            raise ProtocolError(f"shuffler holds no client for pseudonym {nym} ({call.tag!r})")
        out.append((owner, box))
    return out


def deliver_envelope(call: ExchangeCall, owner: str, box: bytes) -> Envelope:
    """The shuffler's box to the owner of its pseudonym."""
    return Envelope(SHUFFLER, (owner,), call.round, call.tag, box, stage=MailboxStage.DELIVER, form=Form.SEALED)


def open_reply(call: ExchangeCall, owner: str, box: bytes) -> bytes:
    """Acting as client ``owner``: open its reply with its pseudonym key, checking that the server
    sealed it (with the sealing key the server published to ``owner`` for ``collect``).

    Raises:
        SenderAuthenticationError: A reply the server did not seal (forged by the shuffler),
            tampered, or from another round or tag.
    """
    key = pseudonym_key(call, owner)
    server_public = sealing_directory.peer_public(call, owner, call.server)
    try:
        return unframe(key.open(box, context=item_binding(call, pseudonym_of(key.public_bytes), b"mailbox/reply"),
                                sender_public=server_public))
    except AuthenticationError as exc:
        raise SenderAuthenticationError(
            f"{owner} refused its {call.tag!r} reply of round {call.round}: not sealed by {call.server} (forged by "
            f"the shuffler, tampered, or replayed): {exc}",
            sender=call.server,
        ) from exc
