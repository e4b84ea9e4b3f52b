"""Who holds whose sealing public key: set up once per session, over authenticated channels.

Each party that must *receive* sealed boxes (relay recipients, the shuffler, clients receiving
the CKKS secret context) draws one :class:`~securefg.protocol.relay.sealed_box.SealingKey` per
transport session and sends its public half, as a ``Form.KEYS`` envelope, to each party that must
*seal* to it. These envelopes travel over the transport's authenticated channels (the channel
directory is the PKI stand-in), so the server cannot substitute its own key and read what is
sealed. On a backend where peer envelopes are routed through the server, they stay authenticated
end to end by the channel layer; without that, an actively malicious server could mount a
man-in-the-middle on this step.

State lives under the ``"sealing"`` namespace of each party and is shared by every mechanism that
seals (``sealed_relay``, the CKKS key distribution).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from securefg.errors import ProtocolError
from securefg.federation.envelope import Envelope, Form
from securefg.protocol.mechanism import ExchangeCall
from securefg.protocol.relay.sealed_box import PUBLIC_KEY_BYTES, SealingKey

NAMESPACE = "sealing"
STAGE = "sealing/publish"


def session_state(call: ExchangeCall, pid: str, namespace: str = NAMESPACE) -> dict[str, object]:
    """``pid``'s per-session key table in ``namespace``: its own key (``"own"``) and the peers'
    as it received them (``"peers"``); the membership secrets keep theirs the same way."""
    state = call.state_of(pid, namespace)
    return state.setdefault(call.transport.session.hex(), {"own": None, "peers": {}})  # type: ignore[no-any-return]


def own_key(call: ExchangeCall, pid: str) -> SealingKey:
    """``pid``'s sealing key for this session (created on first use, acting as ``pid``)."""
    st = session_state(call, pid)
    if st["own"] is None:
        st["own"] = SealingKey()
    key = st["own"]
    assert isinstance(key, SealingKey)
    return key


def peer_public(call: ExchangeCall, holder: str, owner: str) -> bytes:
    """The sealing public key of ``owner`` as ``holder`` received it.

    Raises:
        ProtocolError: ``holder`` never received ``owner``'s key (call :func:`ensure` first).
    """
    if holder == owner:
        return own_key(call, owner).public_bytes
    peers = session_state(call, holder)["peers"]
    assert isinstance(peers, dict)
    if owner not in peers:
        raise ProtocolError(f"{holder!r} holds no sealing key of {owner!r}; run the key directory setup")
    return peers[owner]  # type: ignore[no-any-return]


def ensure(call: ExchangeCall, *, holders: Iterable[str], owners: Iterable[str]) -> None:
    """Make every party in ``holders`` hold the sealing public key of every party in ``owners``.

    Only missing (holder, owner) pairs cost an envelope, so calling this every round is free
    after the first.
    """
    distribute(call, holders=holders, owners=owners, namespace=NAMESPACE, stage=STAGE, publish=publish, accept=accept)


def distribute(call: ExchangeCall, *, holders: Iterable[str], owners: Iterable[str], namespace: str, stage: str,
               publish: Callable[[ExchangeCall, str, list[str]], None],
               accept: Callable[[ExchangeCall, str, Envelope], None]) -> None:
    """Each online owner ``publish``-es its per-session key to the online holders that lack it
    (one envelope per owner); each holder ``accept``-s what it received at ``stage``. Shared by the
    sealing keys and the membership secrets (:mod:`~securefg.protocol.relay.membership`)."""
    holders = [h for h in holders if h not in call.transport.offline]
    expected: dict[str, set[str]] = {}
    for owner in (o for o in owners if o not in call.transport.offline):
        missing = [h for h in holders
                   if h != owner and owner not in session_state(call, h, namespace)["peers"]]  # type: ignore[operator]
        if missing:
            publish(call, owner, missing)
            for h in missing:
                expected.setdefault(h, set()).add(owner)
    for h, owners_of_h in expected.items():
        got = call.transport.receive_from(h, owners_of_h, tag=call.tag, round=call.round, stage=stage)
        for env in got.values():
            accept(call, h, env)


def publish(call: ExchangeCall, owner: str, to: Iterable[str]) -> None:
    """Acting as ``owner``: send its sealing public key to ``to`` (one ``Form.KEYS`` envelope)."""
    pub = own_key(call, owner).public_bytes
    call.transport.send(Envelope(owner, tuple(to), call.round, call.tag, pub, stage=STAGE, form=Form.KEYS))


def accept(call: ExchangeCall, holder: str, env: Envelope) -> None:
    """Acting as ``holder``: keep the sealing public key ``env.sender`` published to it."""
    if env.stage != STAGE:
        raise ProtocolError(f"{holder!r} expected a sealing key, got a {env.stage!r} envelope from {env.sender!r}")
    if len(env.payload) != PUBLIC_KEY_BYTES:
        raise ProtocolError(f"{env.sender!r} published a sealing key of {len(env.payload)} bytes")
    peers = session_state(call, holder)["peers"]
    assert isinstance(peers, dict)
    peers[env.sender] = env.payload
