"""``sealed_relay``: delivery, what the server sees, tampering, and the shuffle's independence."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

import pytest
from scipy.stats import chi2

from securefg.errors import AuthenticationError, ConfigError, ProtocolError
from securefg.federation.envelope import Form
from securefg.federation.party import SERVER, SHUFFLER, client_id
from securefg.protocol.mechanism import ExchangeCall
from securefg.protocol.relay.constants import RelayStage
from securefg.protocol.relay.sealed_relay import SealedRelay

from .conftest import Federation, build_federation

RELAY = {"r": {"mechanism": "sealed_relay"}}
ONION = {"r": {"mechanism": "sealed_relay", "params": {"shuffler": True}}}


def _items(n: int) -> dict[str, bytes]:
    return {client_id(k): f"secret model of client {k}".encode() * (k + 1) for k in range(n)}


def _call(fed: Federation, round: int, tag: str = "r") -> ExchangeCall:
    return ExchangeCall(transport=fed.transport, parties=fed.parties, round=round, tag=tag)


@pytest.mark.parametrize("exclude_self", [True, False])
@pytest.mark.parametrize("tags", [RELAY, ONION], ids=["server", "shuffler"])
def test_each_client_receives_the_others_items(exclude_self: bool, tags: Mapping[str, object]) -> None:
    fed = build_federation(4, tags, extra=[SHUFFLER] if tags is ONION else [])  # type: ignore[arg-type]
    items = _items(4)
    got = fed.exchange.relay("r", items, exclude_self=exclude_self)
    for r in fed.clients:
        want = [v for s, v in items.items() if not (exclude_self and s == r)]
        assert sorted(got[r]) == sorted(want)


@pytest.mark.parametrize("tags", [RELAY, ONION], ids=["server", "shuffler"])
def test_server_sees_only_sealed_items(tags: Mapping[str, object]) -> None:
    fed = build_federation(4, tags, extra=[SHUFFLER] if tags is ONION else [])  # type: ignore[arg-type]
    items = _items(4)
    fed.exchange.relay("r", items)
    view = fed.transcript.view(SERVER)
    assert view and {r.form for r in view} == {Form.SEALED}
    for rec in view:
        assert rec.payload is not None
        assert not any(item[:20] in rec.payload for item in items.values())
    # nothing reaches the server unsealed on the way out either
    assert {r.form for r in fed.transcript if r.sender == SERVER} == {Form.SEALED}


def test_sealed_items_hide_their_lengths() -> None:
    fed = build_federation(3, RELAY)
    fed.exchange.relay("r", {client_id(0): b"a", client_id(1): b"b" * 40, client_id(2): b"c" * 20})
    forwarded = [r for r in fed.transcript if r.stage == RelayStage.FORWARD]
    assert len({r.payload_bytes for r in forwarded}) == 1


def test_with_a_shuffler_the_server_never_sees_a_forwarded_box_before_forwarding_it() -> None:
    fed = build_federation(4, ONION, extra=[SHUFFLER])
    fed.exchange.relay("r", _items(4))
    uploads = [r.payload for r in fed.transcript if r.stage == RelayStage.UPLOAD]
    forwarded = [r.payload for r in fed.transcript if r.stage == RelayStage.FORWARD]
    assert all(p is not None for p in uploads + forwarded)
    for fwd in forwarded:
        box_prefixes = {fwd[i : i + 48] for i in range(8, len(fwd) - 48, 97)}
        assert not any(p in up for p in box_prefixes for up in uploads)  # type: ignore[operator]
    shuffler_view = fed.transcript.view(SHUFFLER)
    assert {r.form for r in shuffler_view if r.stage.startswith("relay/")} == {Form.SEALED}


def test_shuffler_option_without_a_shuffler_party_is_a_config_error() -> None:
    fed = build_federation(3, ONION)
    with pytest.raises(ConfigError, match="no 'shuffler' party; add one or set shuffler = false"):
        fed.exchange.relay("r", _items(3))


class _TamperingServer(SealedRelay):
    def _server_route(self, uploads, targets, *, shuffle):  # type: ignore[no-untyped-def]
        bundles = super()._server_route(uploads, targets, shuffle=shuffle)
        box = bytearray(bundles[client_id(1)][0])
        box[-5] ^= 0x80
        bundles[client_id(1)][0] = bytes(box)
        return bundles


class _DroppingServer(SealedRelay):
    def _server_route(self, uploads, targets, *, shuffle):  # type: ignore[no-untyped-def]
        bundles = super()._server_route(uploads, targets, shuffle=shuffle)
        bundles[client_id(2)] = bundles[client_id(2)][:-1]
        return bundles


class _ReplayingServer(SealedRelay):
    """Stores round-0 boxes and forwards them again in round 1."""

    def __init__(self) -> None:
        super().__init__()
        self.kept: dict[str, list[bytes]] = {}

    def _server_route(self, uploads, targets, *, shuffle):  # type: ignore[no-untyped-def]
        bundles = super()._server_route(uploads, targets, shuffle=shuffle)
        if not self.kept:
            self.kept.update(bundles)
            return bundles
        return dict(self.kept)


def test_a_tampered_sealed_item_raises_a_typed_error() -> None:
    fed = build_federation(3, RELAY)
    with pytest.raises(AuthenticationError, match="sealed item failed authentication"):
        _TamperingServer().run_relay(_call(fed, 0), _items(3), exclude_self=True, shuffle=True)


def test_a_dropped_item_is_detected() -> None:
    fed = build_federation(3, RELAY)
    with pytest.raises(ProtocolError, match="client/2 expected 2 distinct sealed items .* got 1"):
        _DroppingServer().run_relay(_call(fed, 0), _items(3), exclude_self=True, shuffle=True)


def test_items_replayed_into_a_later_round_do_not_open() -> None:
    fed = build_federation(3, RELAY)
    mech = _ReplayingServer()
    mech.run_relay(_call(fed, 0), _items(3), exclude_self=True, shuffle=True)
    with pytest.raises(AuthenticationError, match="replayed from another round/tag"):
        mech.run_relay(_call(fed, 1), _items(3), exclude_self=True, shuffle=True)


def _position_table(fed: Federation, runs: int, *, shuffle: bool) -> list[list[int]]:
    """How often sender s's item lands at position p of client/0's bundle."""
    n = len(fed.clients)
    items = {c: c.encode() for c in fed.clients}
    counts: Counter[tuple[str, int]] = Counter()
    for rnd in range(runs):
        fed.exchange.round = rnd
        bundle = fed.exchange.relay("r", items, shuffle=shuffle)[client_id(0)]
        for pos, item in enumerate(bundle):
            counts[(item.decode(), pos)] += 1
    senders = [client_id(k) for k in range(1, n)]
    return [[counts[(s, p)] for p in range(n - 1)] for s in senders]


def _permutation_chi2_pvalue(table: list[list[int]]) -> float:
    """Independence of sender and position when every run places each sender exactly once.

    Each run adds a permutation matrix, so cells are not independent draws and Pearson's
    statistic T is (n / (n - 1)) * chi2((n - 1)^2) under uniform shuffling, not chi2((n - 1)^2):
    the centred permutation matrix is isotropic on the (n - 1)^2 matrices with zero row and column
    sums, with total variance n - 1. Uncorrected, the 0.1% test would alarm ~1% of the time
    (checked by simulation).
    """
    n = len(table)
    expected = sum(map(sum, table)) / n**2
    t = sum((o - expected) ** 2 / expected for row in table for o in row)
    return float(chi2.sf(t * (n - 1) / n, (n - 1) ** 2))


@pytest.mark.parametrize("tags", [RELAY, ONION], ids=["server", "shuffler"])
def test_shuffled_positions_are_independent_of_senders(tags: Mapping[str, object]) -> None:
    fed = build_federation(5, tags, extra=[SHUFFLER] if tags is ONION else [])  # type: ignore[arg-type]
    table = _position_table(fed, 240, shuffle=True)
    assert all(sum(row) == 240 for row in table)
    assert _permutation_chi2_pvalue(table) > 1e-3, table  # false alarm rate 0.1%
    # Must-fail control: without shuffling, position is a function of the sender.
    assert _permutation_chi2_pvalue(_position_table(fed, 40, shuffle=False)) < 1e-10
