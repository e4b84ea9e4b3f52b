"""Stage 4 (signatures = true), ConsistencyCheck: survivors are signed; equivocation is caught."""

from __future__ import annotations

import pytest

from securefg.errors import InvalidClaimError
from securefg.protocol.secure_sum.constants import AbortReason, ClientDropReason, Domain, Stage
from securefg.protocol.secure_sum.messages import PeerKeys, UnmaskRequest, encode_peer_keys
from securefg.protocol.secure_sum.route import Delivery
from securefg.protocol.secure_sum.server import ConsistencyCheck as ServerConsistencyCheck

from .conftest import Harness
from .test_advertise_keys import _server


def _to_consistency(h: Harness) -> None:
    h.advertise()
    h.route_shares(h.share())


def _survivors(h: Harness, ids: list[str]) -> bytes:
    return encode_peer_keys([PeerKeys(p, b"", b"", h.keys[p].sign_pk) for p in ids])


def test_consistency_check_signs_the_sorted_survivor_list_bound_to_the_call() -> None:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    h = Harness(signatures=True)
    _to_consistency(h)
    h.deliver("client/0", Stage.CONSISTENCY_CHECK, _survivors(h, ["client/3", "client/0", "client/1"]))
    (sig,) = h.replies(Stage.CONSISTENCY_CHECK).values()
    message = h.info.bind(Domain.CONSISTENCY, "client/0", "client/1", "client/3")
    Ed25519PublicKey.from_public_bytes(h.keys["client/0"].sign_pk).verify(sig, message)


def test_consistency_check_aborts_if_the_survivor_list_omits_this_client() -> None:
    h = Harness(signatures=True)
    _to_consistency(h)
    with pytest.raises(InvalidClaimError, match="omits this client"):
        h.deliver("client/0", Stage.CONSISTENCY_CHECK, _survivors(h, ["client/1", "client/2", "client/3"]))


def test_consistency_check_aborts_if_a_neighbours_signing_key_changed() -> None:
    h = Harness(signatures=True)
    _to_consistency(h)
    rows = [PeerKeys(p, b"", b"", h.keys[p].sign_pk) for p in ("client/0", "client/1")]
    rows.append(PeerKeys("client/2", b"", b"", h.keys["client/3"].sign_pk))
    with pytest.raises(InvalidClaimError, match="the signing key of 'client/2' changed"):
        h.deliver("client/0", Stage.CONSISTENCY_CHECK, encode_peer_keys(rows))


def test_unmask_aborts_if_server_shows_a_different_list_than_the_one_signed() -> None:
    h = Harness(signatures=True)
    _to_consistency(h)
    signed = ["client/0", "client/1", "client/2", "client/3", "client/4"]
    for c in h.clients:
        h.deliver(c, Stage.CONSISTENCY_CHECK, _survivors(h, signed))
    sigs = h.replies(Stage.CONSISTENCY_CHECK)
    lie = UnmaskRequest(("client/0", "client/1", "client/2", "client/3"), ("client/4",), tuple(sorted(sigs.items())))
    with pytest.raises(InvalidClaimError, match="differs from the one this client signed") as err:
        h.deliver("client/0", Stage.UNMASK, lie.encode())
    assert err.value.reason is AbortReason.BAD_SIGNATURES


def test_unmask_aborts_with_fewer_than_t_valid_signatures() -> None:
    h = Harness(signatures=True)
    _to_consistency(h)
    for c in h.clients:
        h.deliver(c, Stage.CONSISTENCY_CHECK, _survivors(h, h.clients))
    sigs = sorted(h.replies(Stage.CONSISTENCY_CHECK).items())[:2]
    req = UnmaskRequest(tuple(h.clients), (), tuple(sigs))
    with pytest.raises(InvalidClaimError, match="2 signatures, fewer than t = 3"):
        h.deliver("client/0", Stage.UNMASK, req.encode())


def test_unmask_aborts_on_a_forged_signature() -> None:
    h = Harness(signatures=True)
    _to_consistency(h)
    for c in h.clients:
        h.deliver(c, Stage.CONSISTENCY_CHECK, _survivors(h, h.clients))
    sigs = dict(h.replies(Stage.CONSISTENCY_CHECK))
    sigs["client/1"] = sigs["client/2"]
    req = UnmaskRequest(tuple(h.clients), (), tuple(sorted(sigs.items())))
    with pytest.raises(InvalidClaimError, match="the signature of 'client/1' does not verify"):
        h.deliver("client/0", Stage.UNMASK, req.encode())


def test_server_drops_a_bad_signature_but_keeps_the_clients_input() -> None:
    h = Harness(signatures=True)
    ctx = _server(h)
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    sks = {c: Ed25519PrivateKey.generate() for c in h.clients}
    ctx.keys = {c: PeerKeys(c, b"", b"", sk.public_key().public_bytes_raw()) for c, sk in sks.items()}
    ctx.survivors = tuple(h.clients)
    ctx.routed = {c: frozenset() for c in h.clients}
    message = h.info.bind(Domain.CONSISTENCY, *sorted(h.clients))
    msgs = [Delivery(c, Stage.CONSISTENCY_CHECK, sks[c].sign(message)) for c in h.clients[:4]]
    msgs.append(Delivery("client/4", Stage.CONSISTENCY_CHECK, sks["client/4"].sign(b"other")))
    ServerConsistencyCheck(ctx, h.clients).handle(msgs)
    assert ctx.drops == {"client/4": ClientDropReason.INVALID_SIGNATURE}
    assert "client/4" in ctx.survivors and set(ctx.signatures) == set(h.clients[:4])
