"""The ``sealed_relay`` mechanism: opaque items sealed end to end, forwarded and shuffled.

Each sender seals its item separately to every recipient
(:mod:`~securefg.protocol.relay.sealed_box`: X25519 + HKDF + ChaCha20-Poly1305, bound to session,
round, tag and recipient, padded by :mod:`~securefg.protocol.relay.padding`), and uploads the
boxes to the server, which routes them, shuffles each recipient's bundle with a CSPRNG permutation
and forwards it.

Protects against:

* **The server reading items**: it sees sealed boxes only (``Form.SEALED`` in the transcript).
* **Tampering, redirection, replay** by the server or the network: a box opens only for its
  recipient, in its round and tag; anything else raises :class:`~securefg.errors.AuthenticationError`.
  Dropped or duplicated boxes are detected by count and raise :class:`~securefg.errors.ProtocolError`.
* **The server (or the shuffler) swapping in an item of its own**: holding a recipient's public
  sealing key is not enough to seal an item that opens. How the item is tied to its sender
  depends on what the relay promises recipients:

  - ``shuffle=True`` (every method's relay: the recipient must not learn which client sent
    which item): *membership without identity*. Each recipient shares a per-session secret with
    the clients it accepts as senders (:mod:`.membership`), and items are sealed under it
    (:mod:`.sealed_box` psk mode). A swapped or forged item fails with
    :class:`~securefg.errors.SenderAuthenticationError` naming its slot in the bundle; who sealed
    an item that opens stays unknown, so a client *colluding with the server* can still replace
    another member's item.
  - ``shuffle=False`` (no anonymity promised): each item is sealed with the sender's static
    sealing key as well (auth mode), the server forwards each bundle in sender order, and the
    recipient checks slot ``i`` against the ``i``-th sender's key: a swapped item fails with
    :class:`~securefg.errors.SenderAuthenticationError` naming the sender it had to come from.
* **Recipients linking items to senders** (``shuffle=True``): boxes carry no sender identity
  (ephemeral keys, a secret shared by every member), bundles are uniformly shuffled, and padding
  hides lengths.

Does not protect against:

* **The server linking** a forwarded box to its uploader: it forwards the very bytes it received.
  Set ``shuffler = true`` (and add a ``shuffler`` party) to route onions through a second,
  non-colluding party: the server then never sees an inner box before it is forwarded and cannot
  link it to an upload; the shuffler sees recipients but not senders (the server shuffles the
  onion batch it hands over). A colluding server and shuffler link everything (but still read nothing).
* Traffic analysis of *who takes part*, and content that identifies its sender.
* Denial of service: a malicious server can drop everything (detected, not prevented).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from securefg.errors import AuthenticationError, ConfigError, ProtocolError, SenderAuthenticationError
from securefg.federation.envelope import Envelope, Form
from securefg.federation.party import SHUFFLER
from securefg.protocol.mechanism import ExchangeCall, ExchangeKind, Mechanism, register_mechanism
from securefg.protocol.relay import membership, sealing_directory
from securefg.protocol.relay.blob_list import pack_blobs, unpack_blobs
from securefg.protocol.relay.constants import RelayStage, item_binding
from securefg.protocol.relay.onion import shuffler_route
from securefg.protocol.relay.padding import frame, padding_problems, unframe
from securefg.protocol.relay.sealed_box import seal
from securefg.protocol.relay.shuffle import secure_shuffle


@register_mechanism
class SealedRelay(Mechanism):
    """End-to-end sealed relay through the server, with CSPRNG shuffling.

    Args:
        shuffler (bool): Route through the ``shuffler`` party (onion: sealed to the shuffler, inside
            sealed to the recipient) so the server cannot link forwarded items to uploads.
            (default: :obj:`False`)
        padding (str | int): ``"pow2"``, ``"none"`` or a block size. (default: ``"pow2"``)
    """

    name = "sealed_relay"
    exchanges = frozenset({ExchangeKind.RELAY})
    defaults: ClassVar[Mapping[str, Any]] = {"shuffler": False, "padding": "pow2"}
    protects = "sealed: the server forwards boxes it cannot open; recipients cannot tell senders"

    @classmethod
    def validate_params(cls, params: Mapping[str, Any]) -> list[str]:
        """Unknown keys, a non-boolean ``shuffler``, an unknown ``padding``."""
        problems = super().validate_params(params)
        merged = {**cls.defaults, **params}
        if not isinstance(merged["shuffler"], bool):
            problems.append(f"shuffler must be true or false, got {merged['shuffler']!r}")
        return problems + padding_problems(merged["padding"])

    def run_relay(
        self, call: ExchangeCall, items: Mapping[str, bytes], *, exclude_self: bool, shuffle: bool
    ) -> dict[str, list[bytes]]:
        """Seal to each recipient, route (via the shuffler if set), shuffle, forward, open."""
        senders = sorted(p for p in items if p not in call.transport.offline)
        recipients = list(senders)
        onion = bool(self.params["shuffler"]) and shuffle
        if onion and SHUFFLER not in call.parties:
            raise ConfigError(
                f"sealed_relay for {call.tag!r} has shuffler = true but the federation has no "
                f"{SHUFFLER!r} party; add one or set shuffler = false"
            )
        owners = recipients + ([SHUFFLER] if onion else [])
        sealing_directory.ensure(call, holders=senders, owners=owners)
        if shuffle:  # items prove membership (psk); unshuffled, the sealing keys prove the sender
            membership.ensure(call, holders=senders, owners=recipients)
        targets = {s: [r for r in recipients if not (exclude_self and r == s)] for s in senders}

        # --- each sender seals to each recipient (and, for onions, to the shuffler around it)
        for s in senders:
            if onion:
                body = frame(items[s], self.params["padding"])
                blobs: list[bytes] = []
                for r in targets[s]:
                    inner = seal_item(call, s, r, body, shuffle=True)
                    blobs.append(
                        seal(
                            sealing_directory.peer_public(call, s, SHUFFLER),
                            pack_blobs([r.encode(), inner]),
                            context=item_binding(call, SHUFFLER, b"onion"),
                        )
                    )
                payload = pack_blobs(blobs)
            else:
                payload = seal_upload(call, s, items[s], targets[s], self.params["padding"], shuffle=shuffle)
            call.transport.send(
                Envelope(s, (call.server,), call.round, call.tag, payload, stage=RelayStage.UPLOAD, form=Form.SEALED)
            )

        # --- server (and shuffler): route, shuffle, forward
        uploads = call.transport.receive_from(
            call.server, senders, tag=call.tag, round=call.round, stage=RelayStage.UPLOAD
        )
        payloads = {s: env.payload for s, env in uploads.items()}
        if onion:
            bundles = shuffler_route(call, payloads, targets)
        else:
            bundles = self._server_route(payloads, targets, shuffle=shuffle)
        for r in recipients:
            call.transport.send(
                Envelope(call.server, (r,), call.round, call.tag, pack_blobs(bundles.get(r, [])),
                         stage=RelayStage.FORWARD, form=Form.SEALED)
            )

        # --- each recipient opens its bundle
        out: dict[str, list[bytes]] = {}
        for r in recipients:
            (env,) = call.transport.receive_from(
                r, [call.server], tag=call.tag, round=call.round, stage=RelayStage.FORWARD
            ).values()
            out[r] = open_bundle(call, r, env.payload, senders=[s for s in senders if r in targets[s]],
                                 shuffle=shuffle)
        return out

    def _server_route(
        self, uploads: Mapping[str, bytes], targets: Mapping[str, list[str]], *, shuffle: bool
    ) -> dict[str, list[bytes]]:
        """Acting as the server: check every upload's routing and build per-recipient bundles
        (in sender order, which an unshuffled recipient relies on to check each item's sender)."""
        bundles: dict[str, list[bytes]] = {}
        for s in sorted(uploads):
            fields = unpack_blobs(uploads[s], max_count=2 * len(targets[s]))
            addressed = [f.decode("utf-8", errors="replace") for f in fields[0::2]]
            if sorted(addressed) != sorted(targets[s]) or len(fields) != 2 * len(targets[s]):
                raise ProtocolError(f"{s} addressed its sealed items to {addressed}, expected {targets[s]}")
            for r, box in zip(addressed, fields[1::2]):
                bundles.setdefault(r, []).append(box)
        if shuffle:
            bundles = {r: secure_shuffle(b) for r, b in bundles.items()}
        return bundles


def seal_item(call: ExchangeCall, sender: str, recipient: str, body: bytes, *, shuffle: bool) -> bytes:
    """Acting as ``sender``: one framed item sealed to ``recipient``, tied to its sender.

    Shuffled: under ``recipient``'s membership secret (psk mode: it proves membership, not
    identity). Unshuffled: with ``sender``'s static sealing key (auth mode: it proves the sender).

    Raises:
        ProtocolError: ``sender`` holds no sealing key (or membership secret) of ``recipient``.
    """
    public = sealing_directory.peer_public(call, sender, recipient)
    binding = item_binding(call, recipient, b"item")
    if shuffle:
        return seal(public, body, context=binding, psk=membership.secret_of(call, sender, recipient))
    return sealing_directory.own_key(call, sender).seal_from(public, body, context=binding)


def seal_upload(
    call: ExchangeCall, sender: str, item: bytes, targets: list[str], padding: str | int, *, shuffle: bool
) -> bytes:
    """Acting as ``sender``: ``item`` framed and padded, sealed to each of ``targets``
    (:func:`seal_item`); the ``relay/upload`` payload (a blob list of recipient, box pairs, in
    ``targets`` order).

    Raises:
        ProtocolError: ``sender`` holds no sealing key of a target (run the key directory first).
    """
    body = frame(item, padding)
    blobs: list[bytes] = []
    for r in targets:
        blobs += [r.encode(), seal_item(call, sender, r, body, shuffle=shuffle)]
    return pack_blobs(blobs)


def open_bundle(
    call: ExchangeCall, recipient: str, payload: bytes, *, senders: Sequence[str], shuffle: bool
) -> list[bytes]:
    """Acting as ``recipient``: open its ``relay/forward`` bundle, one box from each of ``senders``.

    Shuffled, every box must open under ``recipient``'s membership secret; unshuffled, box ``i``
    must open under the sealing key of ``senders[i]`` (the server forwards in sender order).

    Args:
        call (ExchangeCall): The exchange.
        recipient (str): Who opens.
        payload (bytes): The bundle (a blob list of boxes).
        senders (Sequence[str]): The senders of its items, sorted (their count is the bundle's size).
        shuffle (bool): Whether the relay was shuffled (how items are tied to senders).

    Raises:
        ProtocolError: Another count of boxes, or duplicates (the server dropped or duplicated items).
        SenderAuthenticationError: A box that does not open for ``recipient`` in this round and
            tag from its sender (or from a member): swapped or forged, tampered, replayed; names
            the sender where known, else the slot.
    """
    expected = len(senders)
    boxes = unpack_blobs(payload, max_count=expected)
    if len(boxes) != expected or len(set(boxes)) != len(boxes):
        raise ProtocolError(
            f"{recipient} expected {expected} distinct sealed items for {call.tag!r}, got {len(boxes)} "
            f"({len(set(boxes))} distinct): the server dropped or duplicated items"
        )
    key = sealing_directory.own_key(call, recipient)
    binding = item_binding(call, recipient, b"item")
    psk = membership.own_secret(call, recipient) if shuffle else None
    out: list[bytes] = []
    for slot, box in enumerate(boxes):
        sender = None if shuffle else senders[slot]
        try:
            if sender is None:
                out.append(unframe(key.open(box, context=binding, psk=psk)))
            else:
                public = sealing_directory.peer_public(call, recipient, sender)
                out.append(unframe(key.open(box, context=binding, sender_public=public)))
        except AuthenticationError as exc:
            whose = f"from {sender}" if sender is not None else "from a relay member"
            raise SenderAuthenticationError(
                f"{recipient} refused the {call.tag!r} item in slot {slot} of its round-{call.round} bundle: "
                f"it is not an item {whose} (swapped or forged by the server, tampered, or replayed): {exc}",
                sender=sender, slot=slot,
            ) from exc
    return out
