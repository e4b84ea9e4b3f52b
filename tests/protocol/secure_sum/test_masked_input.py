"""Stage 3, MaskedInput: client checks of the routed shares, the exact masked vector, server codec."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from securefg.errors import AuthenticationError, InvalidClaimError
from securefg.federation.codec import encode_tensors
from securefg.protocol.secure_sum import crypto
from securefg.protocol.secure_sum.client import Unmask
from securefg.protocol.secure_sum.constants import ClientDropReason, Stage
from securefg.protocol.secure_sum.messages import encode_addressed
from securefg.protocol.secure_sum.packing import decode_packed, encode_packed
from securefg.protocol.secure_sum.prg import MaskExpander
from securefg.protocol.secure_sum.route import Delivery
from securefg.protocol.secure_sum.server import MaskedInput as ServerMaskedInput

from .conftest import Harness
from .test_advertise_keys import _server


def test_masked_input_is_quantized_input_plus_self_mask_plus_signed_pairwise_masks(harness: Harness) -> None:
    harness.advertise()
    bundles = harness.share()
    rows = sorted((s, b["client/2"]) for s, b in bundles.items() if s != "client/2")
    nxt = harness.deliver("client/2", Stage.MASKED_INPUT, encode_addressed(rows))
    assert isinstance(nxt, Unmask)
    (payload,) = harness.replies(Stage.MASKED_INPUT).values()
    quantizer = harness.settings.quantizer(5)
    got = decode_packed(payload, bits=quantizer.bits, length=harness.m)
    ctx = harness.contexts["client/2"]
    assert ctx.s_sk is not None
    expected = quantizer.quantize(np.linspace(-1, 1, harness.m))
    ex = MaskExpander(harness.settings.prg, quantizer.bits)
    ex.add_into(expected, ctx.b_seed)
    for peer in ("client/0", "client/1", "client/3", "client/4"):
        seed = crypto.pairwise_seed(ctx.s_sk, harness.keys[peer].s_pk, session=harness.info.session, round=0, tag="t", pair=("client/2", peer))
        ex.add_into(expected, seed, subtract=peer < "client/2")
    mask = np.uint64((1 << quantizer.bits) - 1)
    assert np.array_equal(got, expected.astype(np.uint64) & mask)


def test_masked_input_aborts_if_server_routes_shares_from_a_stranger(harness: Harness) -> None:
    harness.advertise()
    bundles = harness.share()
    rows = sorted((s, b["client/0"]) for s, b in bundles.items() if "client/0" in b) + [("client/42", b"x")]
    with pytest.raises(InvalidClaimError, match=r"unexpected ids \['client/42'\]"):
        harness.deliver("client/0", Stage.MASKED_INPUT, encode_addressed(rows))


def test_masked_input_aborts_if_fewer_than_t_neighbours_sent_shares(harness: Harness) -> None:
    harness.advertise()
    bundles = harness.share()
    rows = sorted((s, b["client/0"]) for s, b in bundles.items() if "client/0" in b)[:2]
    with pytest.raises(InvalidClaimError, match="shares from 2 neighbours, fewer than t = 3"):
        harness.deliver("client/0", Stage.MASKED_INPUT, encode_addressed(rows))


def test_masked_input_rejects_a_share_meant_for_another_client(harness: Harness) -> None:
    harness.advertise()
    bundles = harness.share()
    rows = sorted((s, b["client/0"]) for s, b in bundles.items() if "client/0" in b)
    rows[0] = ("client/1", bundles["client/1"]["client/2"])  # client/1's share for client/2
    with pytest.raises(AuthenticationError, match="share from client/1 to client/0 failed authentication"):
        harness.deliver("client/0", Stage.MASKED_INPUT, encode_addressed(rows))


def test_masked_input_rejects_a_tampered_share(harness: Harness) -> None:
    harness.advertise()
    bundles = harness.share()
    rows = sorted((s, b["client/0"]) for s, b in bundles.items() if "client/0" in b)
    sender, blob = rows[1]
    rows[1] = (sender, blob[:-1] + bytes([blob[-1] ^ 1]))
    with pytest.raises(AuthenticationError, match="failed authentication"):
        harness.deliver("client/0", Stage.MASKED_INPUT, encode_addressed(rows))


@pytest.mark.parametrize("bad", ["short", "other_ring", "truncated", "oversized", "tensor"])
def test_server_drops_a_masked_input_of_the_wrong_length_ring_or_form(harness: Harness, bad: str) -> None:
    ctx = _server(harness)
    bits = ctx.quantizer.bits
    zeros = np.zeros(harness.m, dtype=np.uint64)
    payload = {
        "short": lambda: encode_packed(zeros[:-1], bits),
        "other_ring": lambda: encode_packed(zeros, bits - 1),
        "truncated": lambda: encode_packed(zeros, bits)[:-1],
        "oversized": lambda: encode_packed(zeros, bits) + b"\0",
        "tensor": lambda: encode_tensors({"y": torch.zeros(harness.m, dtype=torch.uint64)}),
    }[bad]()
    good = [Delivery(c, Stage.MASKED_INPUT, encode_packed(zeros, bits)) for c in harness.clients[:3]]
    ctx.routed = {c: frozenset() for c in harness.clients}
    ServerMaskedInput(ctx, harness.clients).handle([*good, Delivery("client/3", Stage.MASKED_INPUT, payload)])
    assert ctx.drops["client/3"] is ClientDropReason.MALFORMED_MESSAGE
    assert ctx.survivors == ("client/0", "client/1", "client/2")
