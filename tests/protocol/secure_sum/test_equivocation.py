"""Malicious-server mode, equivocation: a lying server shows clients different lists.

The split-view attack: the server tells clients 0, 1, 2 that the survivors are {0, 1, 2} and
clients 3, 4 that they are {3, 4}. Then 1 and 2 reveal client 0's self-mask shares (0 is alive
to them) while 3 and 4 reveal its mask-key shares (0 is dead to them): with a threshold of 2 the
server holds both secrets of client 0 and opens its input, signatures or not, unless the
signatures are pinned and a client asks for more than (1 + adversarial_rate) n / 2 of them.
"""

from __future__ import annotations

import numpy as np
import pytest
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from securefg.errors import EquivocationError, InvalidClaimError, KeySubstitutionError
from securefg.protocol.secure_sum import crypto, shamir
from securefg.protocol.secure_sum.client import Done
from securefg.protocol.secure_sum.constants import AbortReason, ShareKind, Stage
from securefg.protocol.secure_sum.messages import (
    PeerKeys,
    UnmaskRequest,
    decode_unmask_shares,
    encode_addressed,
    encode_peer_keys,
)
from securefg.protocol.secure_sum.packing import decode_packed
from securefg.protocol.secure_sum.pinned import witnesses
from securefg.protocol.secure_sum.prg import MaskExpander, ring_dtype

from .conftest import Harness

PINNED = {"signatures": True, "pinned_keys": "run"}
GROUP_1, GROUP_2 = ("client/0", "client/1", "client/2"), ("client/3", "client/4")


def _to_masked_inputs(h: Harness) -> dict[str, bytes]:
    """Honest AdvertiseKeys, ShareKeys and MaskedInput; returns the masked inputs the server got."""
    h.advertise()
    bundles = h.share()
    for c in h.clients:
        rows = sorted((s, b[c]) for s, b in bundles.items() if c in b)
        h.deliver(c, Stage.MASKED_INPUT, encode_addressed(rows))
    return h.replies(Stage.MASKED_INPUT)


def _show(h: Harness, clients: tuple[str, ...], survivors: tuple[str, ...]) -> None:
    rows = encode_peer_keys([PeerKeys(p, b"", b"", h.keys[p].sign_pk) for p in survivors])
    for c in clients:
        h.deliver(c, Stage.CONSISTENCY_CHECK, rows)


def _split_view(h: Harness) -> tuple[dict[str, list], dict[str, Exception]]:  # type: ignore[type-arg]
    """The attack of the module docstring; returns the shares revealed by whom, and the refusals."""
    _show(h, GROUP_1, GROUP_1)
    _show(h, GROUP_2, GROUP_2)
    sigs = h.replies(Stage.CONSISTENCY_CHECK)
    revealed, refused = {}, {}
    for group in (GROUP_1, GROUP_2):
        signed = tuple(sorted((p, sigs[p]) for p in group))
        for c in group:
            if c == "client/0":
                continue  # the target is never asked
            dead = tuple(p for p in h.clients if p not in group)
            try:
                assert isinstance(h.deliver(c, Stage.UNMASK, UnmaskRequest(group, dead, signed).encode()), Done)
            except InvalidClaimError as exc:
                refused[c] = exc
                continue
            (payload,) = h.replies(Stage.UNMASK).values()
            revealed[c] = decode_unmask_shares(payload)
    return revealed, refused


def _shares_of(h: Harness, revealed: dict[str, list], owner: str, kind: ShareKind) -> dict[int, int]:  # type: ignore[type-arg]
    return {h.clients.index(c) + 1: shamir.decode_share(s) for c, rows in revealed.items()
            for pid, k, s in rows if pid == owner and k is kind}


def test_without_pinned_keys_a_split_survivor_view_opens_one_clients_input() -> None:
    """Why the mode exists: signatures over per-call keys let both groups proceed."""
    h = Harness(threshold=2, signatures=True)
    masked = _to_masked_inputs(h)
    revealed, refused = _split_view(h)
    assert refused == {}
    b_shares = _shares_of(h, revealed, "client/0", ShareKind.SELF_MASK)
    s_shares = _shares_of(h, revealed, "client/0", ShareKind.S_KEY)
    assert len(b_shares) >= 2 and len(s_shares) >= 2  # both secrets of client/0, from honest clients
    b_seed = shamir.reconstruct(b_shares, 2)
    s_sk = X25519PrivateKey.from_private_bytes(shamir.reconstruct(s_shares, 2))
    q = h.settings.quantizer(len(h.clients))
    y = decode_packed(masked["client/0"], bits=q.bits, length=h.m, dtype=ring_dtype(q.bits)).copy()
    expander = MaskExpander(h.settings.prg, q.bits)
    expander.add_into(y, b_seed, subtract=True)
    for peer in h.clients[1:]:  # client/0 < every peer: it added each pairwise mask
        seed = crypto.pairwise_seed(s_sk, h.keys[peer].s_pk, session=h.info.session, round=0, tag="t",
                                    pair=("client/0", peer))
        expander.add_into(y, seed, subtract=True)
    np.testing.assert_allclose(q.dequantize(y), np.linspace(-1, 1, h.m), atol=q.step)


def test_pinned_keys_refuse_the_split_survivor_view_and_no_client_loses_both_secrets() -> None:
    h = Harness(threshold=2, **PINNED)
    _to_masked_inputs(h)
    revealed, refused = _split_view(h)
    need = witnesses(5, h.settings.adversarial_rate)
    assert need == 3 and set(refused) == set(GROUP_2)  # two signers cannot vouch for {3, 4}
    for exc in refused.values():
        assert isinstance(exc, EquivocationError) and exc.reason is AbortReason.EQUIVOCATION
        assert exc.claim == "the survivor list" and "vouched for by 2 of the 5 clients, fewer than 3" in str(exc)
    for owner in h.clients:
        kinds = {k for rows in revealed.values() for pid, k, _ in rows if pid == owner}
        assert len(kinds) <= 1, f"{owner}: both kinds of shares revealed"


def test_unmask_refuses_a_signature_over_a_list_the_server_showed_another_client() -> None:
    h = Harness(**PINNED)
    _to_masked_inputs(h)
    everyone = tuple(h.clients)
    _show(h, everyone[:4], everyone)
    _show(h, ("client/4",), ("client/0", "client/1", "client/2", "client/4"))  # client/3 "dropped", to client/4
    sigs = tuple(sorted(h.replies(Stage.CONSISTENCY_CHECK).items()))
    with pytest.raises(EquivocationError, match="the signature of 'client/4' is not over the survivor") as err:
        h.deliver("client/1", Stage.UNMASK, UnmaskRequest(everyone, (), sigs).encode())
    assert err.value.claim == "the signature of 'client/4'"
    assert h.replies(Stage.UNMASK) == {}


def test_unmask_refuses_a_survivor_list_other_than_the_one_it_signed() -> None:
    h = Harness(**PINNED)
    _to_masked_inputs(h)
    _show(h, tuple(h.clients), tuple(h.clients))
    sigs = tuple(sorted(h.replies(Stage.CONSISTENCY_CHECK).items()))
    lie = UnmaskRequest(tuple(h.clients[:4]), ("client/4",), sigs)
    with pytest.raises(EquivocationError, match="the survivor list at Unmask differs from the one this client signed"):
        h.deliver("client/0", Stage.UNMASK, lie.encode())


def test_a_client_shown_another_client_list_is_refused_by_its_neighbours() -> None:
    """Two consistent worlds need two client lists; keys are signed over the list, so they do not mix."""
    h = Harness(**PINNED)
    lied = ("client/0", "client/1", "client/2", "client/4")  # client/4 is told client/3 is not in the call
    degree, threshold = h.settings.graph(len(lied))
    for c in h.clients:
        if c == "client/4":
            payload = h.config(c, clients=lied, neighbours=("client/0", "client/1", "client/2"), degree=degree,
                               threshold=threshold)
        else:
            payload = h.config(c)
        h.deliver(c, Stage.ADVERTISE_KEYS, payload)
    from securefg.protocol.secure_sum.messages import decode_keys

    h.keys = {pid: decode_keys(pid, p, signed=True) for pid, p in h.replies(Stage.ADVERTISE_KEYS).items()}
    with pytest.raises(KeySubstitutionError, match="the keys of 'client/4' .* another client list"):
        h.deliver("client/0", Stage.SHARE_KEYS, h.peer_keys("client/0"))


def test_an_honest_server_with_pinned_keys_gets_every_share_it_needs() -> None:
    h = Harness(**PINNED)
    _to_masked_inputs(h)
    _show(h, tuple(h.clients), tuple(h.clients))
    sigs = tuple(sorted(h.replies(Stage.CONSISTENCY_CHECK).items()))
    for c in h.clients:
        assert isinstance(h.deliver(c, Stage.UNMASK, UnmaskRequest(tuple(h.clients), (), sigs).encode()), Done)
    assert len(h.replies(Stage.UNMASK)) == 5
