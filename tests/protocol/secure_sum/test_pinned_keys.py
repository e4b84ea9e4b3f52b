"""Malicious-server mode, key substitution: a lying server against real client stages.

Without pinned keys the server relays every public key, so it can give client/0 a key of its
own in place of client/1's and read the shares client/0 encrypts to "client/1". With
``pinned_keys`` every relayed key must carry its owner's signature under the owner's pinned key.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from securefg.errors import AuthenticationError, ConfigError, InvalidClaimError, KeySubstitutionError
from securefg.federation.channel import split_length_prefixed
from securefg.federation.envelope import Form
from securefg.protocol.secure_sum import crypto
from securefg.protocol.secure_sum import server as ss_server
from securefg.protocol.secure_sum.client import AdvertiseKeys, MaskedInput, ShareKeys
from securefg.protocol.secure_sum.constants import AbortReason, ClientDropReason, Domain, Stage
from securefg.protocol.secure_sum.context import AggregatorContext, CallInfo, ClientContext, party_info
from securefg.protocol.secure_sum.harary import harary_graph
from securefg.protocol.secure_sum.messages import (
    AdvertiseRequest,
    PeerKeys,
    decode_addressed,
    decode_share_plaintext,
    encode_keys,
    encode_peer_keys,
)
from securefg.protocol.secure_sum.pinned import key_message, provision_run
from securefg.protocol.secure_sum.route import Delivery, Route
from securefg.protocol.secure_sum.server import AdvertiseKeys as ServerAdvertiseKeys
from securefg.protocol.secure_sum.settings import Settings

from .conftest import Harness, World
from .test_advertise_keys import _server

PINNED = {"signatures": True, "pinned_keys": "run"}


def _fresh_keys() -> tuple[X25519PrivateKey, X25519PrivateKey]:
    return X25519PrivateKey.generate(), X25519PrivateKey.generate()


def _peer_rows(h: Harness, pid: str, swap: PeerKeys) -> bytes:
    rows = [swap if p == swap.pid else h.keys[p] for p in h.clients if p != pid]
    return encode_peer_keys(rows, signed=h.pinned)


def test_advertise_keys_signs_the_per_call_keys_with_the_pinned_key_over_the_client_list() -> None:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    h = Harness(**PINNED)
    h.advertise()
    keys = h.keys["client/0"]
    pinned = h.info.pinned
    assert pinned is not None and keys.sign_pk == pinned.key_of("client/0")
    Ed25519PublicKey.from_public_bytes(keys.sign_pk).verify(
        keys.key_sig, key_message(h.info, "client/0", h.clients, keys.c_pk, keys.s_pk))


def test_share_keys_refuses_a_neighbours_keys_swapped_for_the_servers_own() -> None:
    h = Harness(**PINNED)
    h.advertise()
    c_sk, s_sk = _fresh_keys()
    real = h.keys["client/1"]
    fake = replace(real, c_pk=c_sk.public_key().public_bytes_raw(), s_pk=s_sk.public_key().public_bytes_raw())
    with pytest.raises(KeySubstitutionError, match=r"the keys of 'client/1' are not signed by its pinned key") as err:
        h.deliver("client/0", Stage.SHARE_KEYS, _peer_rows(h, "client/0", fake))
    assert err.value.reason is AbortReason.KEY_SUBSTITUTION and err.value.claim == "the keys of 'client/1'"
    assert isinstance(err.value, AuthenticationError) and isinstance(err.value, InvalidClaimError)
    assert h.replies(Stage.SHARE_KEYS) == {}  # not one share left client/0


def test_share_keys_refuses_this_clients_own_keys_handed_back_as_a_neighbours() -> None:
    h = Harness(**PINNED)
    h.advertise()
    own = h.keys["client/0"]
    fake = replace(h.keys["client/1"], c_pk=own.c_pk, s_pk=own.s_pk)
    with pytest.raises(KeySubstitutionError, match="the keys of 'client/1'"):
        h.deliver("client/0", Stage.SHARE_KEYS, _peer_rows(h, "client/0", fake))


def test_share_keys_refuses_keys_the_server_signed_with_a_key_of_its_own() -> None:
    h = Harness(**PINNED)
    h.advertise()
    c_sk, s_sk = _fresh_keys()
    sk = Ed25519PrivateKey.generate()
    c_pk, s_pk = c_sk.public_key().public_bytes_raw(), s_sk.public_key().public_bytes_raw()
    fake = PeerKeys("client/1", c_pk, s_pk, sk.public_key().public_bytes_raw(),
                    sk.sign(key_message(h.info, "client/1", h.clients, c_pk, s_pk)))
    with pytest.raises(KeySubstitutionError, match="the signing key of 'client/1' is not its pinned key"):
        h.deliver("client/0", Stage.SHARE_KEYS, _peer_rows(h, "client/0", fake))


def test_without_pinned_keys_a_substituted_key_is_accepted_and_the_server_reads_the_shares() -> None:
    """Why the mode exists: the same substitution passes today's checks and opens a share."""
    h = Harness(signatures=True)
    h.advertise()
    c_sk, s_sk = _fresh_keys()
    sign = Ed25519PrivateKey.generate().public_key().public_bytes_raw()
    fake = PeerKeys("client/1", c_sk.public_key().public_bytes_raw(), s_sk.public_key().public_bytes_raw(), sign)
    assert isinstance(h.deliver("client/0", Stage.SHARE_KEYS, _peer_rows(h, "client/0", fake)), MaskedInput)
    (bundle,) = h.replies(Stage.SHARE_KEYS).values()
    blob = dict(decode_addressed(bundle, "shares"))["client/1"]
    aead, ad = crypto.directional_aead(c_sk, h.keys["client/0"].c_pk, domain=Domain.SHARE_AEAD,
                                       session=h.info.session, round=0, tag="t", stage=Stage.SHARE_KEYS.value,
                                       sender="client/0", receiver="client/1")
    src, dst, _, _ = decode_share_plaintext(crypto.open_sealed(aead, ad, blob, what="share"))
    assert (src, dst) == ("client/0", "client/1")  # the server holds client/0's shares of both secrets


def test_advertise_keys_refuses_a_client_list_naming_an_id_without_a_pinned_key() -> None:
    h = Harness(**PINNED)
    clients = (*h.clients, "client/9")
    degree, threshold = h.settings.graph(len(clients))
    neighbours = ("client/9", *(c for c in clients if c not in ("client/0", "client/9")))[:degree]
    payload = h.config("client/0", clients=clients, neighbours=neighbours, degree=degree, threshold=threshold)
    with pytest.raises(KeySubstitutionError, match=r"names \['client/9'\], which have no pinned key") as err:
        h.deliver("client/0", Stage.ADVERTISE_KEYS, payload)
    assert err.value.claim == "the client list"


def test_consistency_check_refuses_a_survivors_signing_key_other_than_its_pinned_one() -> None:
    h = Harness(**PINNED)
    h.advertise()
    h.route_shares(h.share())
    rows = [PeerKeys(p, b"", b"", h.keys[p].sign_pk) for p in h.clients]
    rows[3] = PeerKeys("client/3", b"", b"", Ed25519PrivateKey.generate().public_key().public_bytes_raw())
    with pytest.raises(KeySubstitutionError, match="the signing key of 'client/3' in the survivor list"):
        h.deliver("client/0", Stage.CONSISTENCY_CHECK, encode_peer_keys(rows))


def test_the_honest_server_drops_a_client_whose_keys_are_not_signed_by_its_pinned_key() -> None:
    h = Harness(threshold=2, **PINNED)
    for c in h.clients:
        h.deliver(c, Stage.ADVERTISE_KEYS, h.config(c))
    got = h.replies(Stage.ADVERTISE_KEYS)
    other = X25519PrivateKey.generate().public_key().public_bytes_raw()
    forged = replace(h.contexts["client/4"].own_keys, c_pk=other)  # type: ignore[type-var]
    got["client/4"] = encode_keys(forged, signed=True)
    ctx = _server(h)
    nxt = ServerAdvertiseKeys(ctx, h.clients).handle([Delivery(p, Stage.ADVERTISE_KEYS, b) for p, b in got.items()])
    assert isinstance(nxt, ss_server.ShareKeys)
    assert ctx.drops == {"client/4": ClientDropReason.INVALID_SIGNATURE}


def test_a_peer_sum_target_key_swapped_by_the_relay_is_refused() -> None:
    world = World(5)
    provision_run(world.parties)
    settings = Settings.from_params(PINNED)
    peers, target = tuple(world.clients[:4]), "client/4"
    route = Route(world.transport, relay="server", aggregator=target, round=0, tag="t")
    base = CallInfo(world.transport.session, 0, "t", settings, route)
    agg_info, agg_identity = party_info(base, world.parties[target].state, target)
    degree, threshold = settings.graph(len(peers))
    actx = AggregatorContext(pid=target, info=agg_info, clients=peers, graph=harary_graph(peers, degree),
                             degree=degree, threshold=threshold, length=8, quantizer=settings.quantizer(len(peers)),
                             e2e_sk=X25519PrivateKey.generate(), identity=agg_identity)
    ss_server.begin(actx, set(peers))
    stages = {}
    for pid in peers:
        info, identity = party_info(base, world.parties[pid].state, pid)
        stages[pid] = AdvertiseKeys(ClientContext(pid, info, np.zeros(8), identity=identity))
    # the relay forwards client/1's request as sent, and swaps the target's key in client/0's
    for env in world.transport.receive("server", tag="t", round=0, stage=Stage.ADVERTISE_KEYS.value):
        (dest, inner), _ = split_length_prefixed(env.payload, 2)
        receiver = dest.decode()
        if receiver == "client/0":
            req = AdvertiseRequest.decode(inner, signed=True)
            swapped = X25519PrivateKey.generate().public_key().public_bytes_raw()
            inner = replace(req, aggregator_key=swapped).encode(signed=True)
        route._send("server", receiver, Stage.ADVERTISE_KEYS, inner, Form.KEYS)
    assert isinstance(stages["client/1"].handle(route.client_inbox("client/1", Stage.ADVERTISE_KEYS)[0]), ShareKeys)
    (msg,) = route.client_inbox("client/0", Stage.ADVERTISE_KEYS)
    with pytest.raises(KeySubstitutionError, match="the end-to-end key of 'client/4' is not signed by its pinned key"):
        stages["client/0"].handle(msg)


def test_pinned_keys_need_signatures_and_a_readable_directory(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ConfigError, match="'pinned_keys' needs signatures = true"):
        Settings.from_params({"pinned_keys": "run"})
    with pytest.raises(ConfigError, match="no such directory file"):
        Settings.from_params({"pinned_keys": str(tmp_path / "missing.json"), "signatures": True})
    (tmp_path / "old.json").write_text('{"client/0": "' + "ab" * 32 + '"}')
    with pytest.raises(ConfigError, match="holds no signing keys"):
        Settings.from_params({"pinned_keys": str(tmp_path / "old.json"), "signatures": True})
    with pytest.raises(ConfigError, match="'pinned_keys' must be"):
        Settings.from_params({"pinned_keys": 3, "signatures": True})


def test_a_run_directory_never_provisioned_is_a_config_error_naming_the_party() -> None:
    import torch

    from securefg.protocol.secure_sum import SecureSum

    world = World(3)
    mech = SecureSum(**PINNED)
    with pytest.raises(ConfigError, match=r"(server|client/0) was given no pinned directory"):
        mech.run_aggregate(world.call(mech), {c: torch.zeros(4, dtype=torch.float64) for c in world.clients})
