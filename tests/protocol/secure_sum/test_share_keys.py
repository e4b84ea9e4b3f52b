"""Stage 2, ShareKeys: client checks of the peer keys, the exact shares sent, server routing."""

from __future__ import annotations

import pytest

from securefg.errors import InvalidClaimError
from securefg.protocol.secure_sum import crypto, shamir
from securefg.protocol.secure_sum.client import MaskedInput
from securefg.protocol.secure_sum.constants import AbortReason, ClientDropReason, Domain, Stage
from securefg.protocol.secure_sum.messages import (
    PeerKeys,
    decode_share_plaintext,
    encode_addressed,
    encode_peer_keys,
)
from securefg.protocol.secure_sum.route import Delivery
from securefg.protocol.secure_sum.server import ShareKeys as ServerShareKeys

from .conftest import Harness
from .test_advertise_keys import _server


def test_share_keys_sends_each_neighbour_its_shares_of_both_secrets(harness: Harness) -> None:
    harness.advertise()
    bundles = harness.share()
    ctx = harness.contexts["client/0"]
    assert isinstance(harness.stages["client/0"], MaskedInput)
    assert set(bundles["client/0"]) == {"client/1", "client/2", "client/3", "client/4"}
    s_shares, b_shares = {}, {}
    for peer, blob in bundles["client/0"].items():
        peer_ctx = harness.contexts[peer]
        assert peer_ctx.c_sk is not None
        aead, ad = crypto.directional_aead(
            peer_ctx.c_sk, harness.keys["client/0"].c_pk, domain=Domain.SHARE_AEAD, session=harness.info.session,
            round=0, tag="t", stage=Stage.SHARE_KEYS.value, sender="client/0", receiver=peer,
        )
        src, dst, s, b = decode_share_plaintext(crypto.open_sealed(aead, ad, blob, what="share"))
        assert (src, dst) == ("client/0", peer)
        x = ctx.x_of(peer)
        s_shares[x], b_shares[x] = shamir.decode_share(s), shamir.decode_share(b)
    assert ctx.s_sk is not None
    t = harness.threshold
    assert shamir.reconstruct(dict(list(s_shares.items())[:t]), t) == ctx.s_sk.private_bytes_raw()
    assert shamir.reconstruct(dict(list(b_shares.items())[-t:]), t) == ctx.b_seed
    assert len(ctx.b_seed) * 8 >= 128


def test_share_keys_aborts_if_server_lists_same_peer_twice(harness: Harness) -> None:
    harness.advertise()
    payload = harness.peer_keys("client/0", ["client/1", "client/2", "client/2"])
    with pytest.raises(InvalidClaimError, match="lists 'client/2' twice"):
        harness.deliver("client/0", Stage.SHARE_KEYS, payload)


def test_share_keys_aborts_if_fewer_than_t_neighbours_are_live(harness: Harness) -> None:
    harness.advertise()
    with pytest.raises(InvalidClaimError, match="only 2 live neighbours, fewer than t = 3") as err:
        harness.deliver("client/0", Stage.SHARE_KEYS, harness.peer_keys("client/0", ["client/1", "client/2"]))
    assert err.value.reason is AbortReason.BELOW_THRESHOLD


def test_share_keys_aborts_if_a_peer_replays_this_clients_own_key(harness: Harness) -> None:
    harness.advertise()
    own = harness.keys["client/0"]
    forged = [harness.keys[p] for p in ("client/1", "client/2", "client/3")]
    forged.append(PeerKeys("client/4", own.c_pk, harness.keys["client/4"].s_pk))
    with pytest.raises(InvalidClaimError, match="advertise the same public key"):
        harness.deliver("client/0", Stage.SHARE_KEYS, encode_peer_keys(forged))


def test_share_keys_aborts_if_server_lists_this_client_among_its_peers(harness: Harness) -> None:
    harness.advertise()
    with pytest.raises(InvalidClaimError, match="among its peers"):
        harness.deliver("client/0", Stage.SHARE_KEYS, harness.peer_keys("client/0", harness.clients))


def test_server_drops_a_client_whose_shares_address_a_non_neighbour(harness: Harness) -> None:
    ctx = _server(harness)
    ctx.told_keys = {c: frozenset(set(harness.clients) - {c}) for c in harness.clients}
    msgs = []
    for c in harness.clients:
        rows = [(p, b"ct") for p in sorted(ctx.told_keys[c])]
        if c == "client/4":
            rows[0] = ("client/77", b"ct")
        msgs.append(Delivery(c, Stage.SHARE_KEYS, encode_addressed(rows)))
    ServerShareKeys(ctx, harness.clients).handle(msgs)
    assert ctx.drops == {"client/4": ClientDropReason.INVALID_SHARE_TARGETS}
    assert ctx.routed["client/0"] == {"client/1", "client/2", "client/3"}
