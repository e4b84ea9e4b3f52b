"""The clients' group key of ``blind_sum``: a secret every client holds and the server never sees.

Set up once per transport session, lazily, by the first ``blind_sum`` call that finds a live
client without it. The *leader* (the lowest live client id that holds the key, or, when nobody
does yet, the lowest live client id, which draws 32 bytes from the OS CSPRNG) seals the key to
each client that lacks it with that client's sealing public key (:mod:`~securefg.protocol.relay.
sealing_directory`, exchanged over authenticated channels), and the server forwards the sealed
boxes (``Form.SEALED``) without being able to open them. A client that joins later gets the key
the same way; one that drops out keeps it (it may still receive blinded results).

From the key, each client derives a fresh blinding seed per (round, tag, client):
``HKDF(key, info = binding(BLINDING, session, round, tag, client))``, so the blinding of one
sum reveals nothing about another's.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from securefg.errors import ProtocolError, UnexpectedMessageError
from securefg.federation.channel import length_prefixed, split_length_prefixed
from securefg.federation.envelope import Envelope, Form
from securefg.federation.party import is_client
from securefg.protocol.mechanism import ExchangeCall
from securefg.protocol.relay import sealing_directory
from securefg.protocol.relay.sealed_box import seal
from securefg.protocol.secure_sum import crypto
from securefg.protocol.secure_sum.constants import Domain

NAMESPACE = "blind_sum"
"""Party-state namespace (``mech/blind_sum``) of the group key, per session."""
STAGE_UP = "blind_sum/group_key"
STAGE_DOWN = "blind_sum/group_key/forward"


def _keys(call: ExchangeCall, pid: str) -> dict[str, bytes]:
    return call.state_of(pid, NAMESPACE).setdefault("group_key", {})  # type: ignore[no-any-return]


def held_key(call: ExchangeCall, pid: str) -> bytes | None:
    """``pid``'s group key for this session, acting as ``pid`` (``None`` before setup)."""
    return _keys(call, pid).get(call.transport.session.hex())


def _context(session: bytes, leader: str, receiver: str) -> bytes:
    return length_prefixed(Domain.GROUP_KEY.value, session, leader.encode(), receiver.encode())


def ensure_group_key(call: ExchangeCall, clients: Iterable[str]) -> None:
    """Make every live client in ``clients`` hold the session's group key (no-op once they do).

    Raises:
        ProtocolError: no live client to lead the setup.
    """
    live = sorted(c for c in clients if c not in call.transport.offline)
    missing = [c for c in live if held_key(call, c) is None]
    if not missing:
        return
    holders = [c for c in live if held_key(call, c) is not None]
    if not live:
        raise ProtocolError(f"{call.tag!r}: no live client can set up the blind_sum group key")
    leader = holders[0] if holders else live[0]
    session = call.transport.session
    if not holders:  # acting as the leader: draw the key
        _keys(call, leader)[session.hex()] = os.urandom(crypto.KEY_BYTES)
        missing.remove(leader)
    if not missing:
        return
    sealing_directory.ensure(call, holders=[leader], owners=missing)
    key = held_key(call, leader)
    assert key is not None
    for r in missing:  # acting as the leader: one sealed box per receiver, via the server
        box = seal(sealing_directory.peer_public(call, leader, r), key, context=_context(session, leader, r))
        call.transport.send(Envelope(leader, (call.server,), call.round, call.tag, length_prefixed(r.encode(), box),
                                     stage=STAGE_UP, form=Form.SEALED))
    for env in call.transport.receive(call.server, tag=call.tag, round=call.round, stage=STAGE_UP):
        (dest, box), end = split_length_prefixed(env.payload, 2)  # acting as the server: forward, unread
        receiver = dest.decode("utf-8", errors="replace")
        if end != len(env.payload) or not is_client(receiver) or env.sender != leader:
            raise UnexpectedMessageError(f"server cannot forward a group-key box to {receiver!r}")
        call.transport.send(Envelope(call.server, (receiver,), call.round, call.tag, box, stage=STAGE_DOWN,
                                     form=Form.SEALED))
    for r in missing:  # acting as each receiver: open and keep
        (env,) = call.transport.receive(r, tag=call.tag, round=call.round, stage=STAGE_DOWN)
        key_r = sealing_directory.own_key(call, r).open(env.payload, context=_context(session, leader, r))
        if len(key_r) != crypto.KEY_BYTES:
            raise ProtocolError(f"{r!r} received a group key of {len(key_r)} bytes")
        _keys(call, r)[session.hex()] = key_r


def blinding_seed(key: bytes, *, session: bytes, round: int, tag: str, client: str) -> bytes:
    """The 32-byte seed of ``client``'s blinding mask in one call (every key holder derives it)."""
    return crypto.hkdf_sha256(key, info=crypto.binding(Domain.BLINDING, session, round, tag, client))
