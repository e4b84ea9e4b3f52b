"""Fixtures for the secure-sum tests: a small world of parties and a stage harness.

Deterministic helpers live here only; production code never sees them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pytest
import torch

from securefg.federation.party import Party, client_id
from securefg.federation.transcript import Transcript
from securefg.federation.transport import InProcessTransport
from securefg.protocol.mechanism import ExchangeCall
from securefg.protocol.secure_sum import SecureSum
from securefg.protocol.secure_sum.client import AdvertiseKeys, ClientStage
from securefg.protocol.secure_sum.constants import Stage
from securefg.protocol.secure_sum.context import CallInfo, ClientContext
from securefg.protocol.secure_sum.messages import AdvertiseRequest, PeerKeys, decode_keys, encode_peer_keys
from securefg.protocol.secure_sum.pinned import provision_run, resolve
from securefg.protocol.secure_sum.route import Delivery, Route
from securefg.protocol.secure_sum.settings import Settings


@dataclass
class World:
    """Server + n clients on one in-process transport, with payloads kept in the transcript."""

    n: int
    transport: InProcessTransport = field(init=False)
    parties: dict[str, Party] = field(init=False)

    def __post_init__(self) -> None:
        self.clients = [client_id(i) for i in range(self.n)]
        self.transport = InProcessTransport(["server", *self.clients], transcript=Transcript(keep_payloads=True))
        self.parties = {p: Party(p) for p in self.transport.parties}

    def call(self, mech: SecureSum, *, round: int = 0, tag: str = "t", dropouts: Mapping[str, Any] | None = None) -> ExchangeCall:
        return ExchangeCall(
            transport=self.transport, parties=self.parties, round=round, tag=tag, params=mech.params,
            dropouts={k: frozenset(v) for k, v in (dropouts or {}).items()},
        )

    def inputs(self, m: int, *, seed: int = 0, scale: float = 1.0, exclude: str | None = None) -> dict[str, torch.Tensor]:
        rng = np.random.default_rng(seed)
        return {c: torch.from_numpy(rng.normal(scale=scale, size=m)) for c in self.clients if c != exclude}


@pytest.fixture
def world() -> World:
    return World(6)


class Harness:
    """Plays an (honest or lying) server against real client stages, one message at a time.

    With ``pinned_keys = "run"`` in ``params`` every party is provisioned with the run's pinned
    directory first (as a Federation does) and each client gets its own signing key."""

    def __init__(self, n: int = 5, *, m: int = 8, **params: Any) -> None:
        self.world = World(n)
        self.clients = self.world.clients
        self.settings = Settings.from_params(params)
        self.route = Route(self.world.transport, relay="server", aggregator="server", round=0, tag="t")
        self.info = CallInfo(self.world.transport.session, 0, "t", self.settings, self.route)
        self.pinned = self.settings.pinned_keys is not None
        identities: dict[str, Any] = {c: None for c in self.clients}
        if self.pinned:
            provision_run(self.world.parties)
            for c in self.clients:
                keys, identities[c] = resolve(self.settings, self.world.parties[c].state, c)
            self.info = replace(self.info, pinned=keys)
        self.degree, self.threshold = self.settings.graph(n)
        self.m = m
        self.contexts = {c: ClientContext(c, self.info, np.linspace(-1, 1, m), identity=identities[c])
                         for c in self.clients}
        self.stages: dict[str, ClientStage] = {c: AdvertiseKeys(self.contexts[c]) for c in self.clients}
        self.keys: dict[str, PeerKeys] = {}

    def say(self, pid: str, stage: Stage, payload: bytes) -> Delivery:
        """The server sends ``payload`` to ``pid`` over the real channel; return what arrives."""
        self.route.down(pid, stage, payload)
        (msg,) = self.route.client_inbox(pid, stage)
        return msg

    def deliver(self, pid: str, stage: Stage, payload: bytes) -> ClientStage:
        self.stages[pid] = self.stages[pid].handle(self.say(pid, stage, payload))
        return self.stages[pid]

    def replies(self, stage: Stage) -> dict[str, bytes]:
        return {d.origin: d.payload for d in self.route.aggregator_inbox(stage)}

    def config(self, pid: str, **overrides: Any) -> bytes:
        fields: dict[str, Any] = {
            "clients": tuple(self.clients), "neighbours": tuple(c for c in self.clients if c != pid),
            "threshold": self.threshold, "degree": self.degree, "length": self.m,
        }
        fields.update(overrides)
        return AdvertiseRequest(**fields).encode(signed=self.pinned)

    def advertise(self) -> None:
        """Run AdvertiseKeys honestly for every client (complete graph)."""
        for c in self.clients:
            self.deliver(c, Stage.ADVERTISE_KEYS, self.config(c))
        self.keys = {pid: decode_keys(pid, p, signed=self.pinned) for pid, p in self.replies(Stage.ADVERTISE_KEYS).items()}

    def peer_keys(self, pid: str, peers: list[str] | None = None) -> bytes:
        peers = [c for c in self.clients if c != pid] if peers is None else peers
        return encode_peer_keys([self.keys[p] for p in peers], signed=self.pinned)

    def share(self) -> dict[str, dict[str, bytes]]:
        """Run ShareKeys honestly; return each client's bundle ``{receiver: ciphertext}``."""
        from securefg.protocol.secure_sum.messages import decode_addressed

        for c in self.clients:
            self.deliver(c, Stage.SHARE_KEYS, self.peer_keys(c))
        return {pid: dict(decode_addressed(p, "b")) for pid, p in self.replies(Stage.SHARE_KEYS).items()}

    def route_shares(self, bundles: dict[str, dict[str, bytes]]) -> None:
        """Run MaskedInput honestly: each client gets the shares addressed to it."""
        from securefg.protocol.secure_sum.messages import encode_addressed

        for c in self.clients:
            rows = sorted((s, b[c]) for s, b in bundles.items() if c in b)
            self.deliver(c, Stage.MASKED_INPUT, encode_addressed(rows))
        self.replies(Stage.MASKED_INPUT)


@pytest.fixture
def harness() -> Harness:
    return Harness()
