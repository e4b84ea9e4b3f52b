"""Per-call private state of each side: what one party knows during one secure-sum call.

A :class:`ClientContext` lives only in its client's party state and a
:class:`AggregatorContext` only in the aggregator's; both are dropped when the call ends,
successfully or not, so secrets of one call never outlive it and an aborted call leaves the
state of earlier calls untouched. Secret keys are exported only through the explicitly named
``private_bytes_raw()`` calls in ``client/share_keys.py`` (for Shamir sharing).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from securefg.protocol.secure_sum import crypto
from securefg.protocol.secure_sum.constants import ClientDropReason, Domain, Stage
from securefg.protocol.secure_sum.messages import PeerKeys
from securefg.protocol.secure_sum.pinned import PinnedKeys, resolve
from securefg.protocol.secure_sum.quantize import Quantizer
from securefg.protocol.secure_sum.route import Delivery, Route
from securefg.protocol.secure_sum.settings import Settings


@dataclass(frozen=True)
class CallInfo:
    """Public facts of one call, known to every party in it."""

    session: bytes
    round: int
    tag: str
    settings: Settings
    route: Route
    pinned: PinnedKeys | None = None
    """Malicious-server mode: the clients' pinned signing keys (:mod:`.pinned`); ``None`` without."""

    @property
    def aggregator(self) -> str:
        return self.route.aggregator

    def bind(self, domain: Domain, *fields: str) -> bytes:
        """Length-prefixed binding of ``fields`` to this call (HKDF info, signed bytes)."""
        return crypto.binding(domain, self.session, self.round, self.tag, *fields)


def party_info(info: CallInfo, state: Mapping[str, Any], pid: str) -> tuple[CallInfo, Ed25519PrivateKey | None]:
    """``info`` as party ``pid`` holds it: with its own copy of the pinned directory (pinned keys
    only), and its own signing key (a client's; ``None`` for the server).

    Raises:
        ConfigError: ``pinned_keys = "run"`` on a party given no directory.
        AuthenticationError: The directory pins another key for ``pid`` than the one it holds.
    """
    keys, identity = resolve(info.settings, state, pid)
    return (info if keys is None else replace(info, pinned=keys)), identity


def _e2e(info: CallInfo, own: X25519PrivateKey, peer_pk: bytes, stage: Stage, sender: str, receiver: str):  # type: ignore[no-untyped-def]
    return crypto.directional_aead(
        own, peer_pk, domain=Domain.END_TO_END, session=info.session, round=info.round,
        tag=info.tag, stage=stage.value, sender=sender, receiver=receiver,
    )


@dataclass
class ClientContext:
    """What client ``pid`` knows and holds during one call."""

    pid: str
    info: CallInfo
    vector: np.ndarray
    clients: tuple[str, ...] = ()
    neighbours: frozenset[str] = frozenset()
    threshold: int = 0
    aggregator_pk: bytes = b""
    c_sk: X25519PrivateKey | None = None
    s_sk: X25519PrivateKey | None = None
    sign_sk: Ed25519PrivateKey | None = None
    own_keys: PeerKeys | None = None
    peers: dict[str, PeerKeys] = field(default_factory=dict)
    b_seed: bytes = b""
    held: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Shares this client holds: ``sender -> (s_sk share, b share)``."""
    survivors: tuple[str, ...] = ()
    survivor_sign_keys: dict[str, bytes] = field(default_factory=dict)
    blind_seed: bytes = b""
    """``blind_sum`` only: a seed whose mask this client adds to its input and that only the
    clients can remove (derived from their group key); empty for a plain secure sum."""
    identity: Ed25519PrivateKey | None = None
    """Pinned keys: this client's static signing key (its pinned public half is in ``info.pinned``)."""

    def x_of(self, pid: str) -> int:
        """The public Shamir x-coordinate of ``pid``: 1 + its index in the client list."""
        return self.clients.index(pid) + 1

    def send(self, stage: Stage, payload: bytes) -> None:
        """Send a stage message to the aggregator (sealed end to end when relayed)."""
        route = self.info.route
        if route.sealed(stage):
            assert self.c_sk is not None
            aead, ad = _e2e(self.info, self.c_sk, self.aggregator_pk, stage, self.pid, route.aggregator)
            payload = crypto.seal(aead, ad, payload)
        route.up(self.pid, stage, payload)

    def open(self, msg: Delivery) -> bytes:
        """The plaintext of an aggregator message (opened end to end when relayed)."""
        route = self.info.route
        if not route.sealed(msg.stage):
            return msg.payload
        assert self.c_sk is not None
        aead, ad = _e2e(self.info, self.c_sk, self.aggregator_pk, msg.stage, route.aggregator, self.pid)
        return crypto.open_sealed(aead, ad, msg.payload, what=f"{msg.stage.value} message to {self.pid}")


@dataclass
class AggregatorContext:
    """What the aggregator (server, or ``peer_sum`` target) knows during one call."""

    pid: str
    info: CallInfo
    clients: tuple[str, ...]
    graph: dict[str, frozenset[str]]
    degree: int
    threshold: int
    length: int
    quantizer: Quantizer
    e2e_sk: X25519PrivateKey | None = None
    keys: dict[str, PeerKeys] = field(default_factory=dict)
    drops: dict[str, ClientDropReason] = field(default_factory=dict)
    told_keys: dict[str, frozenset[str]] = field(default_factory=dict)
    """ShareKeys: whose keys each client was sent (its live neighbours)."""
    routed: dict[str, frozenset[str]] = field(default_factory=dict)
    """MaskedInput: whose encrypted shares each client received."""
    masked_sum: np.ndarray | None = None
    survivors: tuple[str, ...] = ()
    signatures: dict[str, bytes] = field(default_factory=dict)
    identity: Ed25519PrivateKey | None = None
    """Pinned keys, ``peer_sum``: the target's static key, signing its end-to-end key."""
    blinded: bool = False
    """``blind_sum``: the unmasked sum is still blinded, so the aggregator cannot range-check it."""

    def drop(self, pid: str, reason: ClientDropReason) -> None:
        """Stop counting ``pid`` for the rest of the call (the first reason is kept)."""
        self.drops.setdefault(pid, reason)

    def send(self, receiver: str, stage: Stage, payload: bytes) -> None:
        """Send a stage message to a client (sealed end to end when relayed)."""
        route = self.info.route
        if route.sealed(stage):
            assert self.e2e_sk is not None
            aead, ad = _e2e(self.info, self.e2e_sk, self.keys[receiver].c_pk, stage, self.pid, receiver)
            payload = crypto.seal(aead, ad, payload)
        route.down(receiver, stage, payload)

    def open(self, msg: Delivery) -> bytes:
        """The plaintext of a client message (opened end to end when relayed)."""
        route = self.info.route
        if not route.sealed(msg.stage):
            return msg.payload
        assert self.e2e_sk is not None
        aead, ad = _e2e(self.info, self.e2e_sk, self.keys[msg.origin].c_pk, msg.stage, msg.origin, self.pid)
        return crypto.open_sealed(aead, ad, msg.payload, what=f"{msg.stage.value} message from {msg.origin}")
