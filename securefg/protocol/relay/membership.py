"""Membership secrets: who may seal items to a recipient, without saying which of them did.

A sealed box opens for whoever holds the recipient's private key, but anyone holding the
recipient's *public* key can seal one, the server included (it routes the items). A shuffled
relay must not tell a recipient which client sealed which item, so a box cannot carry its
sender's identity (:mod:`.sealed_box`'s auth mode would). Instead each recipient draws one
32-byte :class:`MembershipSecret` per transport session and sends it, over the channel layer's
end-to-end encrypted and authenticated envelopes (stage ``relay/membership``, ``Form.KEYS``), to
the clients it accepts as senders; every item is then sealed in :mod:`.sealed_box`'s psk mode
under the recipient's secret. A box that opens proves it was sealed by *a* member, not by whom:
the server, the shuffler or the network cannot forge or swap in an item (it fails with
:class:`~securefg.errors.SenderAuthenticationError`), and the recipient still cannot link items
to senders.

What it does not give: members are interchangeable, so a client colluding with the server can
seal an item that replaces another member's. Relays that promise no anonymity (unshuffled) use
the sender's static sealing key instead and name the sender.

A secret only ever goes to clients (:func:`publish` refuses any other receiver), so a server
that asks a recipient to publish to the server itself gets a typed error, not the secret.

State lives under the ``"membership"`` namespace of each party, per transport session, as the
sealing keys do (:mod:`.sealing_directory`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from securefg.errors import ProtocolError
from securefg.federation.envelope import Envelope, Form
from securefg.federation.party import is_client
from securefg.protocol.mechanism import ExchangeCall
from securefg.protocol.relay.sealed_box import PSK_BYTES
from securefg.protocol.relay.sealing_directory import distribute, session_state

NAMESPACE = "membership"
STAGE = "relay/membership"


class MembershipSecret:
    """A recipient's 32-byte membership secret; its bytes leave it only through :meth:`secret_bytes`.

    Args:
        secret (bytes, optional): For tests with fixed secrets. (default: 32 bytes from the OS CSPRNG)
    """

    __slots__ = ("_secret",)

    def __init__(self, secret: bytes | None = None) -> None:
        self._secret = secret if secret is not None else os.urandom(PSK_BYTES)
        if len(self._secret) != PSK_BYTES:
            raise ProtocolError(f"a membership secret is {PSK_BYTES} bytes, got {len(self._secret)}")

    def secret_bytes(self) -> bytes:
        """The raw secret: to seal or open with, and to send to a member (the only export)."""
        return self._secret

    def __repr__(self) -> str:
        return "MembershipSecret(<secret>)"


def _session_state(call: ExchangeCall, pid: str) -> dict[str, object]:
    return session_state(call, pid, NAMESPACE)


def own_secret(call: ExchangeCall, pid: str) -> bytes:
    """``pid``'s membership secret for this session (drawn on first use, acting as ``pid``)."""
    st = _session_state(call, pid)
    if st["own"] is None:
        st["own"] = MembershipSecret()
    secret = st["own"]
    assert isinstance(secret, MembershipSecret)
    return secret.secret_bytes()


def secret_of(call: ExchangeCall, holder: str, owner: str) -> bytes:
    """The membership secret of ``owner`` as ``holder`` received it.

    Raises:
        ProtocolError: ``holder`` never received ``owner``'s secret (call :func:`ensure` first).
    """
    if holder == owner:
        return own_secret(call, owner)
    peers = _session_state(call, holder)["peers"]
    assert isinstance(peers, dict)
    if owner not in peers:
        raise ProtocolError(f"{holder!r} holds no membership secret of {owner!r}; run the key directory setup")
    return peers[owner]  # type: ignore[no-any-return]


def ensure(call: ExchangeCall, *, holders: Iterable[str], owners: Iterable[str]) -> None:
    """Make every client in ``holders`` hold the membership secret of every party in ``owners``.

    Only missing (holder, owner) pairs cost an envelope, as in
    :func:`~securefg.protocol.relay.sealing_directory.ensure`.
    """
    distribute(call, holders=holders, owners=owners, namespace=NAMESPACE, stage=STAGE, publish=publish, accept=accept)


def publish(call: ExchangeCall, owner: str, to: Iterable[str]) -> None:
    """Acting as ``owner``: send its membership secret to the clients ``to`` (one envelope).

    Raises:
        ProtocolError: A receiver that is not a client (a server asking for the secret it must
            never hold).
    """
    to = list(to)
    outsiders = [p for p in to if not is_client(p)]
    if outsiders:
        raise ProtocolError(
            f"{owner!r} was asked to send its relay membership secret to {outsiders}; only clients may "
            "hold it (whoever holds it can seal items that pass as a member's)"
        )
    call.transport.send(Envelope(owner, tuple(to), call.round, call.tag, own_secret(call, owner), stage=STAGE,
                                 form=Form.KEYS))


def accept(call: ExchangeCall, holder: str, env: Envelope) -> None:
    """Acting as ``holder``: keep the membership secret ``env.sender`` sent it (the channel
    authenticated the sender, so the secret is the owner's own)."""
    if env.stage != STAGE:
        raise ProtocolError(
            f"{holder!r} expected a membership secret, got a {env.stage!r} envelope from {env.sender!r}"
        )
    if len(env.payload) != PSK_BYTES:
        raise ProtocolError(f"{env.sender!r} sent a membership secret of {len(env.payload)} bytes")
    peers = _session_state(call, holder)["peers"]
    assert isinstance(peers, dict)
    peers[env.sender] = env.payload
