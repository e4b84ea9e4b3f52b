"""Explicit binary codecs of the secure sum's stage messages.

Every message is a tuple of length-prefixed fields (``securefg.federation.channel``), parsed
with length checks and no trailing bytes allowed; anything malformed raises
:class:`~securefg.errors.CodecError`. Codecs only parse: whether a claim is *acceptable*
(duplicates, unknown ids, ...) is each stage's check, so duplicates survive decoding.
Masked vectors use the safe tensor codec (``securefg.federation.codec``) instead.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

from securefg.errors import CodecError
from securefg.federation.channel import length_prefixed, split_length_prefixed
from securefg.protocol.secure_sum.constants import PROTOCOL_VERSION, ShareKind

MAX_ROWS = 1 << 20


def _unpack(data: bytes, count: int, what: str) -> list[bytes]:
    fields, end = split_length_prefixed(data, count)
    if end != len(data):
        raise CodecError(f"{what}: {len(data) - end} trailing bytes")
    return fields


def _table(rows: Sequence[Sequence[bytes]]) -> bytes:
    return length_prefixed(struct.pack("<I", len(rows)), *(length_prefixed(*row) for row in rows))


def _parse_table(data: bytes, width: int, what: str) -> list[list[bytes]]:
    (head,), end = split_length_prefixed(data, 1)
    if len(head) != 4:
        raise CodecError(f"{what}: bad row count")
    (count,) = struct.unpack("<I", head)
    if count > MAX_ROWS:
        raise CodecError(f"{what}: {count} rows exceed the limit of {MAX_ROWS}")
    rows, used = split_length_prefixed(data, count, start=end)
    if used != len(data):
        raise CodecError(f"{what}: trailing bytes after the last row")
    return [_unpack(r, width, what) for r in rows]


def _text(raw: bytes, what: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CodecError(f"{what}: an id is not valid utf-8") from exc


def encode_ids(ids: Sequence[str]) -> bytes:
    """A list of party ids (order and duplicates kept)."""
    return _table([(i.encode(),) for i in ids])


def decode_ids(data: bytes, what: str = "id list") -> tuple[str, ...]:
    return tuple(_text(r[0], what) for r in _parse_table(data, 1, what))


def _u32(raw: bytes, what: str) -> int:
    if len(raw) != 4:
        raise CodecError(f"{what}: expected a u32")
    return int(struct.unpack("<I", raw)[0])


@dataclass(frozen=True)
class AdvertiseRequest:
    """Aggregator -> client: the round's configuration and the client's neighbours.

    With pinned keys (``signed``) a sixth field carries the aggregator's signature over its
    end-to-end key (``peer_sum``: the target's, so the relaying server cannot swap it; empty
    when the server itself aggregates and has no such key).
    """

    clients: tuple[str, ...]
    neighbours: tuple[str, ...]
    threshold: int
    degree: int
    length: int
    aggregator_key: bytes = b""
    aggregator_sig: bytes = b""

    def encode(self, *, signed: bool = False) -> bytes:
        return length_prefixed(
            struct.pack("<B", PROTOCOL_VERSION),
            encode_ids(self.clients),
            encode_ids(self.neighbours),
            struct.pack("<IIQ", self.threshold, self.degree, self.length),
            self.aggregator_key,
            *((self.aggregator_sig,) if signed else ()),
        )

    @classmethod
    def decode(cls, data: bytes, *, signed: bool = False) -> AdvertiseRequest:
        v, clients, nbrs, nums, agg, *sig = _unpack(data, 6 if signed else 5, "advertise request")
        if v != struct.pack("<B", PROTOCOL_VERSION):
            raise CodecError(f"advertise request: unsupported protocol version {v!r}")
        if len(nums) != 16:
            raise CodecError("advertise request: bad numeric fields")
        t, k, m = struct.unpack("<IIQ", nums)
        return cls(decode_ids(clients), decode_ids(nbrs), t, k, m, agg, *sig)


@dataclass(frozen=True)
class PeerKeys:
    """A client's advertised public keys (``sign`` empty without signatures).

    ``key_sig`` (pinned keys only) is the client's signature, under its pinned key, over its
    per-call keys (:func:`~securefg.protocol.secure_sum.pinned.key_message`); it travels only
    in ``signed`` encodings, so the unpinned wire format is unchanged.
    """

    pid: str
    c_pk: bytes
    s_pk: bytes
    sign_pk: bytes = b""
    key_sig: bytes = b""

    def row(self, *, signed: bool = False) -> tuple[bytes, ...]:
        base = (self.pid.encode(), self.c_pk, self.s_pk, self.sign_pk)
        return (*base, self.key_sig) if signed else base


def encode_keys(keys: PeerKeys, *, signed: bool = False) -> bytes:
    """Client -> aggregator (AdvertiseKeys response): the client's own keys, without its id."""
    return length_prefixed(keys.c_pk, keys.s_pk, keys.sign_pk, *((keys.key_sig,) if signed else ()))


def decode_keys(pid: str, data: bytes, *, signed: bool = False) -> PeerKeys:
    return PeerKeys(pid, *_unpack(data, 4 if signed else 3, "advertised keys"))


def encode_peer_keys(peers: Sequence[PeerKeys], *, signed: bool = False) -> bytes:
    """Aggregator -> client (ShareKeys request): the live neighbours' keys."""
    return _table([p.row(signed=signed) for p in peers])


def decode_peer_keys(data: bytes, *, signed: bool = False) -> list[PeerKeys]:
    width = 5 if signed else 4
    return [PeerKeys(_text(r[0], "peer keys"), *r[1:]) for r in _parse_table(data, width, "peer keys")]


def encode_addressed(items: Sequence[tuple[str, bytes]]) -> bytes:
    """``(party id, opaque bytes)`` rows: share ciphertexts by receiver or by sender."""
    return _table([(pid.encode(), blob) for pid, blob in items])


def decode_addressed(data: bytes, what: str) -> list[tuple[str, bytes]]:
    return [(_text(r[0], what), r[1]) for r in _parse_table(data, 2, what)]


def encode_share_plaintext(sender: str, receiver: str, s_share: bytes, b_share: bytes) -> bytes:
    """The plaintext of one encrypted share pair (Bonawitz: ``u || v || s_sk share || b share``)."""
    return length_prefixed(sender.encode(), receiver.encode(), s_share, b_share)


def decode_share_plaintext(data: bytes) -> tuple[str, str, bytes, bytes]:
    s, r, ss, bs = _unpack(data, 4, "share")
    return _text(s, "share"), _text(r, "share"), ss, bs


@dataclass(frozen=True)
class UnmaskRequest:
    """Aggregator -> client: who survived (and signatures over it), and the client's dead peers."""

    survivors: tuple[str, ...]
    dead: tuple[str, ...]
    signatures: tuple[tuple[str, bytes], ...] = ()

    def encode(self) -> bytes:
        return length_prefixed(
            encode_ids(self.survivors), encode_ids(self.dead), encode_addressed(self.signatures)
        )

    @staticmethod
    def encode_for(survivors: Sequence[str], dead_by_recipient: dict[str, Sequence[str]],
                   signatures: Sequence[tuple[str, bytes]] = ()) -> dict[str, bytes]:
        """One request per recipient, sharing the encoding of the survivor list and signatures
        (the same for everyone; encoding it per recipient was quadratic in n)."""
        alive, sigs = encode_ids(survivors), encode_addressed(signatures)
        return {pid: length_prefixed(alive, encode_ids(dead), sigs) for pid, dead in dead_by_recipient.items()}

    @classmethod
    def decode(cls, data: bytes) -> UnmaskRequest:
        alive, dead, sigs = _unpack(data, 3, "unmask request")
        return cls(
            decode_ids(alive, "survivors"),
            decode_ids(dead, "dead peers"),
            tuple(decode_addressed(sigs, "signatures")),
        )


def encode_unmask_shares(rows: Sequence[tuple[str, ShareKind, bytes]]) -> bytes:
    """Client -> aggregator: ``(peer, kind, share)`` for each peer asked about."""
    return _table([(pid.encode(), struct.pack("<B", kind.value), share) for pid, kind, share in rows])


def decode_unmask_shares(data: bytes) -> list[tuple[str, ShareKind, bytes]]:
    out = []
    for pid, kind, share in _parse_table(data, 3, "unmask shares"):
        if len(kind) != 1 or kind[0] not in {k.value for k in ShareKind}:
            raise CodecError("unmask shares: unknown share kind")
        out.append((_text(pid, "unmask shares"), ShareKind(kind[0]), share))
    return out
