"""The clients' group key of ``blind_sum``: a secret every client holds and the server never sees.

Set up once per transport session, lazily, by the first ``blind_sum`` call that finds a live
client without it. The *leader* (the lowest live client id that holds the key, or, when nobody
does yet, the lowest live client id, which draws 32 bytes from the OS CSPRNG) seals the key to
each client that lacks it, and the server forwards the sealed boxes (``Form.SEALED``) without
being able to open them. A client that joins later gets the key the same way; one that drops
out keeps it (it may still receive blinded results).

**Sender-authenticated boxes.** Every box is sealed with the leader's static sealing key
(:meth:`~securefg.protocol.relay.sealed_box.SealingKey.seal_from`, the auth mode) to the
receiver's sealing key, and the receiver opens it only under the leader's public key. Both
public keys travel over the channel layer's authenticated envelopes
(:mod:`~securefg.protocol.relay.sealing_directory`: receivers publish theirs to the leader, the
leader publishes its own to the receivers). An anonymous box would open for anything sealed to
the receiver's *public* key, so a malicious server, which routes (and may hold) those keys,
could hand every client a group key of its own and then unblind the result; here such a box is
refused with :class:`~securefg.errors.SenderAuthenticationError` naming the leader, and so is a
"leader" that is not a client (the server naming itself). The leader seals only to clients, so a
server that lists itself among the receivers gets a :class:`~securefg.errors.ProtocolError`,
not the key.

What it does not give: a client colluding with the server hands it the key (every client holds
it by design), and the channel keys that authenticate the sealing keys come from the run's
directory (:mod:`~securefg.federation.channel`); a server that could substitute those could
substitute anything.

From the key, each client derives a fresh blinding seed per (round, tag, client):
``HKDF(key, info = binding(BLINDING, session, round, tag, client))``, so the blinding of one
sum reveals nothing about another's.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from securefg.errors import (
    AuthenticationError,
    ProtocolError,
    SenderAuthenticationError,
    UnexpectedMessageError,
)
from securefg.federation.channel import length_prefixed, split_length_prefixed
from securefg.federation.envelope import Envelope, Form
from securefg.federation.party import is_client
from securefg.protocol.mechanism import ExchangeCall
from securefg.protocol.relay import sealing_directory
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


def box_context(session: bytes, leader: str, receiver: str) -> bytes:
    """The binding of the box that carries the key from ``leader`` to ``receiver`` in ``session``."""
    return length_prefixed(Domain.GROUP_KEY.value, session, leader.encode(), receiver.encode())


def draw_key(call: ExchangeCall, leader: str) -> bytes:
    """Acting as ``leader``: its group key for this session, drawn from the OS CSPRNG on first use."""
    keys, session = _keys(call, leader), call.transport.session.hex()
    if session not in keys:
        keys[session] = os.urandom(crypto.KEY_BYTES)
    return keys[session]


def seal_key(call: ExchangeCall, leader: str, receiver: str) -> bytes:
    """Acting as ``leader``: the group key sealed to ``receiver`` with the leader's own sealing key.

    Raises:
        ProtocolError: ``receiver`` is not a client other than the leader (whoever opens the box
            holds the key), ``leader`` holds no key yet, or no sealing key of ``receiver``.
    """
    if not is_client(receiver) or receiver == leader:
        raise ProtocolError(
            f"{leader!r} was asked to seal the blind_sum group key to {receiver!r}; only the other clients may "
            "hold it (whoever holds it can unblind every blinded sum)"
        )
    key = held_key(call, leader)
    if key is None:
        raise ProtocolError(f"{leader!r} holds no blind_sum group key to seal")
    public = sealing_directory.peer_public(call, leader, receiver)
    return sealing_directory.own_key(call, leader).seal_from(
        public, key, context=box_context(call.transport.session, leader, receiver))


def open_key(call: ExchangeCall, receiver: str, leader: str, box: bytes) -> None:
    """Acting as ``receiver``: open the box ``leader`` sealed to it and keep the key.

    Raises:
        SenderAuthenticationError: The box was not sealed by ``leader`` with its sealing key
            (substituted by the server, tampered with, or for another session or receiver), or
            the named leader is not another client; ``sender`` names the leader.
        ProtocolError: ``receiver`` holds no sealing key of ``leader``, or the key has another length.
    """
    if not is_client(leader) or leader == receiver:
        raise SenderAuthenticationError(
            f"{receiver} refused a blind_sum group key from {leader!r}: only another client may lead the group "
            "key setup", sender=leader)
    public = sealing_directory.peer_public(call, receiver, leader)
    try:
        key = sealing_directory.own_key(call, receiver).open(
            box, context=box_context(call.transport.session, leader, receiver), sender_public=public)
    except AuthenticationError as exc:
        raise SenderAuthenticationError(
            f"{receiver} refused the blind_sum group key for {call.tag!r}: it was not sealed by the leader "
            f"{leader} (substituted by the server, tampered, or replayed): {exc}", sender=leader) from exc
    if len(key) != crypto.KEY_BYTES:
        raise ProtocolError(f"{receiver!r} received a group key of {len(key)} bytes")
    _keys(call, receiver)[call.transport.session.hex()] = key


def ensure_group_key(call: ExchangeCall, clients: Iterable[str]) -> None:
    """Make every live client in ``clients`` hold the session's group key (no-op once they do).

    Raises:
        ProtocolError: no live client to lead the setup.
        SenderAuthenticationError: a receiver got a box its leader did not seal (:func:`open_key`).
    """
    live = sorted(c for c in clients if c not in call.transport.offline)
    missing = [c for c in live if held_key(call, c) is None]
    if not missing:
        return
    holders = [c for c in live if held_key(call, c) is not None]
    if not live:
        raise ProtocolError(f"{call.tag!r}: no live client can set up the blind_sum group key")
    leader = holders[0] if holders else live[0]
    if not holders:  # acting as the leader: draw the key
        draw_key(call, leader)
        missing.remove(leader)
    if not missing:
        return
    sealing_directory.ensure(call, holders=[leader], owners=missing)  # it seals to their keys
    sealing_directory.ensure(call, holders=missing, owners=[leader])  # they check its key
    for r in missing:  # acting as the leader: one sealed box per receiver, via the server
        call.transport.send(Envelope(leader, (call.server,), call.round, call.tag,
                                     length_prefixed(r.encode(), seal_key(call, leader, r)),
                                     stage=STAGE_UP, form=Form.SEALED))
    for env in call.transport.receive(call.server, tag=call.tag, round=call.round, stage=STAGE_UP):
        (dest, box), end = split_length_prefixed(env.payload, 2)  # acting as the server: forward, unread
        receiver = dest.decode("utf-8", errors="replace")
        if end != len(env.payload) or not is_client(receiver) or env.sender != leader:
            raise UnexpectedMessageError(f"server cannot forward a group-key box to {receiver!r}")
        call.transport.send(Envelope(call.server, (receiver,), call.round, call.tag, box, stage=STAGE_DOWN,
                                     form=Form.SEALED))
    for r in missing:  # acting as each receiver: open (checking the leader sealed it) and keep
        (env,) = call.transport.receive(r, tag=call.tag, round=call.round, stage=STAGE_DOWN)
        open_key(call, r, leader, env.payload)


def blinding_seed(key: bytes, *, session: bytes, round: int, tag: str, client: str) -> bytes:
    """The 32-byte seed of ``client``'s blinding mask in one call (every key holder derives it)."""
    return crypto.hkdf_sha256(key, info=crypto.binding(Domain.BLINDING, session, round, tag, client))
