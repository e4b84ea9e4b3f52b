"""Sealed relay and shuffler as sans-IO objects: items the server forwards but cannot read or link.

The ``sealed_relay`` mechanism's roles, each its own object: a [`RelayMember`][securefg.api.RelayMember]
(every client: it seals its item to each recipient and opens the bundle it receives), the
[`RelayServer`][securefg.api.RelayServer] (checks routing, shuffles each bundle with a CSPRNG permutation,
forwards) and, optionally, a [`RelayShuffler`][securefg.api.RelayShuffler] (a second, non-colluding party
that peels one onion layer so the server cannot link a forwarded item to its upload). The cryptography is
``securefg.protocol.relay.sealed_box`` (X25519 + HKDF-SHA256 + ChaCha20-Poly1305); what it protects against
is stated in ``securefg.protocol.relay.sealed_relay``.

Items are tied to their senders so the server cannot swap in its own: in a shuffled relay by the
recipient's membership secret (it proves *a* member sealed an item, not which one), unshuffled by
the sender's sealing key. Sealing public keys must reach the other parties over a channel the
server cannot alter (or be compared out of band); everything else may travel through the server.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import SimpleNamespace
from typing import Any, cast

from securefg.api._config import StackLike, failed_protections, from_code, from_stack
from securefg.api._wire import check_call, check_pid, frame, unframe
from securefg.errors import (
    AuthenticationError,
    CodecError,
    ConfigError,
    ProtocolError,
    SenderAuthenticationError,
)
from securefg.federation.channel import length_prefixed
from securefg.protocol.guarantees import FailedProtection
from securefg.protocol.mechanism import ExchangeCall, ExchangeKind
from securefg.protocol.relay.blob_list import pack_blobs, unpack_blobs
from securefg.protocol.relay.constants import RelayStage, item_binding
from securefg.protocol.relay.membership import STAGE as MEMBERSHIP_STAGE
from securefg.protocol.relay.membership import MembershipSecret
from securefg.protocol.relay.onion import peel_and_shuffle
from securefg.protocol.relay.padding import frame as pad
from securefg.protocol.relay.padding import unframe as unpad
from securefg.protocol.relay.sealed_box import PSK_BYTES, SealingKey, seal
from securefg.protocol.relay.sealed_relay import SealedRelay
from securefg.protocol.relay.shuffle import secure_shuffle

SHUFFLER = "shuffler"
"""The shuffler's id in the onion binding (as in securefg runs)."""


class RelayConfig:
    """The parameters of a sealed relay, validated as a ``sealed_relay`` binding is.

    Args:
        unsafe (str, optional): Why a setting that voids a protection may run anyway.
            (default: ``None``)
        **params: ``padding`` (``"pow2"``, ``"none"`` or a block size >= 16: items are padded so
            lengths do not link them to senders) and ``shuffler`` (route onions through a
            [`RelayShuffler`][securefg.api.RelayShuffler]).

    Raises:
        ConfigError: Every invalid parameter at once.
    """

    def __init__(self, *, unsafe: str | None = None, **params: Any) -> None:
        res, stack = from_code("sealed_relay", ExchangeKind.RELAY, params, unsafe=unsafe, what="RelayConfig")
        self._init(dict(res.mechanism.params), failed_protections(res, stack))

    @classmethod
    def from_stack(cls, stack: StackLike, tag: str) -> RelayConfig:
        """The config of ``tag``'s ``sealed_relay`` binding in a protocol stack.

        Raises:
            ConfigError: An invalid stack, or ``tag`` bound to another mechanism.
            UnboundTagError: No pattern of the stack binds ``tag``.
        """
        res, st = from_stack(stack, tag, ExchangeKind.RELAY, SealedRelay, what="RelayConfig")
        self = cls.__new__(cls)
        self._init(dict(res.mechanism.params), failed_protections(res, st))
        return self

    def _init(self, params: dict[str, Any], failed: tuple[FailedProtection, ...]) -> None:
        self.params = params
        """Every parameter, defaults included."""
        self.failed_protections = failed
        """Protections this config voids and waives with ``unsafe``."""

    @property
    def padding(self) -> str | int:
        return cast("str | int", self.params["padding"])

    @property
    def shuffler(self) -> bool:
        """Whether items go as onions through a [`RelayShuffler`][securefg.api.RelayShuffler]."""
        return bool(self.params["shuffler"])

    def __repr__(self) -> str:
        return f"RelayConfig(padding={self.padding!r}, shuffler={self.shuffler})"


def _call(session: bytes, round: int, tag: str) -> ExchangeCall:
    """What ``item_binding`` reads of a call."""
    check_call(session, round, tag)
    return cast(ExchangeCall, SimpleNamespace(transport=SimpleNamespace(session=session), round=round, tag=tag))


def _membership_binding(session: bytes, owner: str, holder: str) -> bytes:
    return length_prefixed(b"securefg/api/relay-membership/v1", session, owner.encode(), holder.encode())


def _expect(message: bytes, stage: str, what: str) -> bytes:
    got, payload = unframe(message, what=what)
    if got != stage:
        raise CodecError(f"{what}: expected a {stage!r} message, got {got!r}")
    return payload


class RelayMember:
    """A client of sealed relays: it seals its items and opens the bundles it receives.

    One object serves a whole run (its sealing key and membership secret are per session).

    Args:
        config (RelayConfig): The relay's parameters (equal for every party).
        pid (str): This client's id.
        session (bytes): The run's session bytes.
        sealing_key (SealingKey, optional): This client's sealing key. (default: a fresh one)
    """

    def __init__(self, config: RelayConfig, *, pid: str, session: bytes,
                 sealing_key: SealingKey | None = None) -> None:
        check_call(session, 0, "relay")
        self._config, self.pid, self._session = config, check_pid(pid), session
        self._key = sealing_key or SealingKey()
        self._own_secret = MembershipSecret()
        self._secrets: dict[str, bytes] = {}

    @property
    def public_key(self) -> bytes:
        """This client's 32-byte sealing public key: give it to every other party over a channel the
        server cannot alter."""
        return self._key.public_bytes

    # ------------------------------------------------------------- membership (shuffled relays)
    def membership_for(self, *, sender: str, sender_public_key: bytes) -> bytes:
        """As a recipient: this client's membership secret for ``sender``, sealed to it and
        authenticated as this client's (a ``relay/membership`` message the server can carry).

        Raises:
            ConfigError: ``sender`` is this client.
            CodecError: A public key that is not 32 bytes.
        """
        if check_pid(sender) == self.pid:
            raise ConfigError(f"{self.pid} needs no membership secret of its own")
        box = self._key.seal_from(sender_public_key, self._own_secret.secret_bytes(),
                                  context=_membership_binding(self._session, self.pid, sender))
        return frame(MEMBERSHIP_STAGE, box)

    def accept_membership(self, message: bytes, *, recipient: str, recipient_public_key: bytes) -> None:
        """As a sender: keep the membership secret ``recipient`` sealed to this client.

        Raises:
            AuthenticationError: Not sealed by ``recipient`` to this client in this session.
            CodecError: Not a ``relay/membership`` message.
        """
        box = _expect(message, MEMBERSHIP_STAGE, f"membership secret of {recipient}")
        secret = self._key.open(box, context=_membership_binding(self._session, check_pid(recipient), self.pid),
                                sender_public=recipient_public_key)
        if len(secret) != PSK_BYTES:
            raise AuthenticationError(f"{recipient}'s membership secret is {len(secret)} bytes, not {PSK_BYTES}")
        self._secrets[recipient] = secret

    # ------------------------------------------------------------------------- sealing
    def seal(self, item: bytes, *, round: int, tag: str, recipients: Mapping[str, bytes], shuffle: bool = True,
             shuffler_public_key: bytes | None = None) -> bytes:
        """This client's upload: ``item`` padded and sealed to each recipient (a ``relay/upload``
        message for the server).

        Args:
            item (bytes): The content (opaque to securefg).
            round (int): The relay's round.
            tag (str): The relay's tag.
            recipients (Mapping[str, bytes]): ``{recipient id: its sealing public key}``.
            shuffle (bool): Shuffled (items prove membership via each recipient's secret) or not
                (items prove this sender). Must match the server's and the recipients'. (default: ``True``)
            shuffler_public_key (bytes, optional): The shuffler's sealing key; required exactly
                when the config sets ``shuffler`` (and only for shuffled relays).

        Raises:
            ProtocolError: A shuffled relay to a recipient whose membership secret this client lacks.
            ConfigError: ``shuffler_public_key`` missing or unexpected.
        """
        call = _call(self._session, round, tag)
        onion = self._config.shuffler and shuffle
        if onion != (shuffler_public_key is not None):
            raise ConfigError("RelayMember.seal: pass shuffler_public_key exactly when the config sets shuffler "
                              "and the relay is shuffled")
        body = pad(item, self._config.padding)
        blobs: list[bytes] = []
        for r in sorted(recipients):
            binding = item_binding(call, r, b"item")
            if shuffle:
                if r not in self._secrets and r != self.pid:
                    raise ProtocolError(f"{self.pid} holds no membership secret of {r!r}; run membership_for first")
                psk = self._own_secret.secret_bytes() if r == self.pid else self._secrets[r]
                box = seal(recipients[r], body, context=binding, psk=psk)
            else:
                box = self._key.seal_from(recipients[r], body, context=binding)
            if onion:
                blobs.append(seal(cast(bytes, shuffler_public_key), pack_blobs([r.encode(), box]),
                                  context=item_binding(call, SHUFFLER, b"onion")))
            else:
                blobs += [r.encode(), box]
        return frame(RelayStage.UPLOAD, pack_blobs(blobs))

    def open(self, message: bytes, *, round: int, tag: str, senders: Mapping[str, bytes],
             shuffle: bool = True) -> list[bytes]:
        """Open the bundle the server forwarded: one item from each of ``senders``.

        Args:
            message (bytes): The server's ``relay/forward`` message for this client.
            round (int): The relay's round.
            tag (str): The relay's tag.
            senders (Mapping[str, bytes]): ``{sender id: its sealing public key}``, every client that
                sealed an item to this one (their count is the bundle's size; unshuffled, slot ``i``
                must come from the ``i``-th sender in sorted order).
            shuffle (bool): As the senders sealed. (default: ``True``)

        Returns:
            The items, in bundle order (shuffled: unlinkable to senders).

        Raises:
            ProtocolError: Another count of items, or duplicates (the server dropped or duplicated some).
            SenderAuthenticationError: An item not sealed by its sender (or by a member), tampered
                with, or replayed from another round or tag.
        """
        call = _call(self._session, round, tag)
        boxes = unpack_blobs(_expect(message, RelayStage.FORWARD, f"bundle for {self.pid}"), max_count=len(senders))
        order = sorted(senders)
        if len(boxes) != len(order) or len(set(boxes)) != len(boxes):
            raise ProtocolError(f"{self.pid} expected {len(order)} distinct sealed items for {tag!r}, got {len(boxes)} "
                                f"({len(set(boxes))} distinct): the server dropped or duplicated items")
        binding = item_binding(call, self.pid, b"item")
        out = []
        for slot, box in enumerate(boxes):
            sender = None if shuffle else order[slot]
            try:
                if sender is None:
                    out.append(unpad(self._key.open(box, context=binding, psk=self._own_secret.secret_bytes())))
                else:
                    out.append(unpad(self._key.open(box, context=binding, sender_public=senders[sender])))
            except AuthenticationError as exc:
                whose = f"from {sender}" if sender is not None else "from a relay member"
                raise SenderAuthenticationError(
                    f"{self.pid} refused the {tag!r} item in slot {slot} of its round-{round} bundle: it is not an "
                    f"item {whose} (swapped or forged, tampered, or replayed): {exc}", sender=sender, slot=slot,
                ) from exc
        return out


class RelayServer:
    """The server of sealed relays: it routes and shuffles boxes it cannot open.

    Args:
        config (RelayConfig): The relay's parameters.
    """

    def __init__(self, config: RelayConfig) -> None:
        self._config = config

    def route(self, uploads: Mapping[str, bytes], *, targets: Mapping[str, Sequence[str]],
              shuffle: bool = True) -> dict[str, bytes]:
        """Check each upload is addressed to exactly its targets; build each recipient's bundle
        (CSPRNG-shuffled, or in sender order unshuffled): ``{recipient: relay/forward message}``.

        Raises:
            ConfigError: The config routes through a shuffler (use ``to_shuffler``).
            ProtocolError: An upload addressed to other recipients than its targets.
        """
        if self._config.shuffler and shuffle:
            raise ConfigError("this relay goes through a shuffler: use to_shuffler and from_shuffler")
        bundles: dict[str, list[bytes]] = {r: [] for t in targets.values() for r in t}
        for s in sorted(uploads):
            want = sorted(targets.get(s, ()))
            try:
                fields = unpack_blobs(_expect(uploads[s], RelayStage.UPLOAD, f"upload of {s}"), max_count=2 * len(want))
            except CodecError as exc:
                raise ProtocolError(f"{s} addressed its sealed items to other recipients than {want}: {exc}") from exc
            addressed = [f.decode("utf-8", errors="replace") for f in fields[0::2]]
            if sorted(addressed) != want or len(fields) != 2 * len(want):
                raise ProtocolError(f"{s} addressed its sealed items to {addressed}, expected {want}")
            for r, box in zip(addressed, fields[1::2]):
                bundles[r].append(box)
        return {r: frame(RelayStage.FORWARD, pack_blobs(secure_shuffle(b) if shuffle else b))
                for r, b in sorted(bundles.items())}

    def to_shuffler(self, uploads: Mapping[str, bytes], *, targets: Mapping[str, Sequence[str]]) -> bytes:
        """Onion relays: check counts and hand the shuffler every onion, CSPRNG-shuffled (so it cannot
        tell senders by position): a ``relay/to_shuffler`` message.

        Raises:
            ProtocolError: An upload with another number of onions than its targets.
        """
        batch: list[bytes] = []
        for s in sorted(uploads):
            onions = unpack_blobs(_expect(uploads[s], RelayStage.UPLOAD, f"upload of {s}"),
                                  max_count=len(targets.get(s, ())))
            if len(onions) != len(targets.get(s, ())):
                raise ProtocolError(f"{s} uploaded {len(onions)} onions, expected {len(targets.get(s, ()))}")
            batch += onions
        return frame(RelayStage.TO_SHUFFLER, pack_blobs(secure_shuffle(batch)))

    def from_shuffler(self, message: bytes, *, targets: Mapping[str, Sequence[str]]) -> dict[str, bytes]:
        """Onion relays: the shuffler's bundles as ``{recipient: relay/forward message}``.

        Raises:
            ProtocolError: Bundles for other recipients, or of other sizes, than the targets give.
        """
        expected = _expected(targets)
        fields = unpack_blobs(_expect(message, RelayStage.FROM_SHUFFLER, "shuffler reply"), max_count=2 * len(expected))
        out = {}
        for r, b in zip(fields[0::2], fields[1::2]):
            rid = r.decode("utf-8", errors="replace")
            if len(unpack_blobs(b, max_count=expected.get(rid, 0))) != expected.get(rid, -1):
                raise ProtocolError(f"the shuffler's bundle for {rid!r} does not hold its {expected.get(rid, 0)} items")
            out[rid] = frame(RelayStage.FORWARD, b)
        if set(out) != set(expected):
            raise ProtocolError(f"shuffler returned bundles for {sorted(out)}, expected {sorted(expected)}")
        return out


def _expected(targets: Mapping[str, Sequence[str]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for rs in targets.values():
        for r in rs:
            counts[r] = counts.get(r, 0) + 1
    return counts


class RelayShuffler:
    """The shuffler of onion relays: it peels one layer, learns each item's recipient but not its
    sender, and shuffles each recipient's bundle. It must not collude with the server.

    Args:
        session (bytes): The run's session bytes.
        sealing_key (SealingKey, optional): Its sealing key. (default: a fresh one)
    """

    def __init__(self, *, session: bytes, sealing_key: SealingKey | None = None) -> None:
        check_call(session, 0, "relay")
        self._session = session
        self._key = sealing_key or SealingKey()

    @property
    def public_key(self) -> bytes:
        """The shuffler's sealing public key, for the senders (over a channel the server cannot alter)."""
        return self._key.public_bytes

    def shuffle(self, message: bytes, *, round: int, tag: str, targets: Mapping[str, Sequence[str]]) -> bytes:
        """Peel the server's batch, check each recipient gets what the targets say, shuffle each
        bundle: the ``relay/from_shuffler`` message for the server.

        Raises:
            AuthenticationError: An onion not sealed to this shuffler for this round and tag.
            ProtocolError: Items per recipient other than the targets give.
        """
        call = _call(self._session, round, tag)
        expected = _expected(targets)
        binding = item_binding(call, SHUFFLER, b"onion")
        batch = _expect(message, RelayStage.TO_SHUFFLER, "shuffler batch")
        return frame(RelayStage.FROM_SHUFFLER, peel_and_shuffle(self._key, batch, binding=binding, expected=expected))
