"""What the server sees: uniform masked inputs, authenticated and stage-bound messages."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import chisquare

from securefg.errors import AuthenticationError, ReplayError, UnexpectedMessageError
from securefg.protocol.secure_sum import SecureSum
from securefg.protocol.secure_sum.constants import Stage
from securefg.protocol.secure_sum.packing import decode_packed, pack_bits

from .conftest import Harness, World


def _byte_pvalue(data: bytes) -> float:
    counts = np.bincount(np.frombuffer(data, dtype=np.uint8), minlength=256)
    return float(chisquare(counts).pvalue)


@pytest.mark.parametrize("ring", [{"bits": 64}, {"resolution": 2.0**-12}])
def test_server_view_of_masked_inputs_is_uniform_bytes_even_for_constant_inputs(ring: dict[str, object]) -> None:
    world = World(5)
    mech = SecureSum(degree=4, threshold=3, clip=4.0, **ring)
    inputs = {c: np.ones(20_000) for c in world.clients}
    import torch

    bits = mech.settings.ring_bits(5)
    assert bits == (64 if "bits" in ring else 18)  # 5 * 4 * 2^12 < 2^17: 17 bits and a sign bit
    mech.run_aggregate(world.call(mech), {c: torch.from_numpy(v) for c, v in inputs.items()})
    masked = [
        pack_bits(decode_packed(r.payload, bits=bits, length=20_000), bits)
        for r in world.transport.transcript.view("server")
        if r.stage == Stage.MASKED_INPUT.value and r.payload is not None
    ]
    assert len(masked) == 5
    for blob in masked:
        assert _byte_pvalue(blob) > 1e-6
    # The same test flags the unmasked encoding, so it can fail.
    plain = pack_bits(mech.settings.quantizer(5).quantize(inputs["client/0"]), bits)
    assert _byte_pvalue(plain) < 1e-6


def test_masked_inputs_of_two_rounds_with_equal_inputs_differ() -> None:
    world = World(4)
    mech = SecureSum()
    import torch

    inputs = {c: torch.zeros(64, dtype=torch.float64) for c in world.clients}
    mech.run_aggregate(world.call(mech, round=0), inputs)
    mech.run_aggregate(world.call(mech, round=1), inputs)
    seen = [r.payload for r in world.transport.transcript.view("server") if r.stage == Stage.MASKED_INPUT.value]
    assert len(seen) == 8 and len(set(seen)) == 8


def test_a_replayed_envelope_is_rejected(harness: Harness) -> None:
    harness.route.down("client/0", Stage.ADVERTISE_KEYS, harness.config("client/0"))
    wire = harness.world.transport.peek_wire("client/0")[0]
    harness.route.client_inbox("client/0", Stage.ADVERTISE_KEYS)
    harness.world.transport.inject("client/0", wire)
    with pytest.raises(ReplayError, match="is replayed"):
        harness.route.client_inbox("client/0", Stage.ADVERTISE_KEYS)


def test_a_tampered_envelope_is_rejected(harness: Harness) -> None:
    transport = harness.world.transport
    harness.route.down("client/0", Stage.ADVERTISE_KEYS, harness.config("client/0"))
    (wire,) = transport.peek_wire("client/0")
    transport._queues["client/0"].clear()  # the attacker takes it off the wire ...
    transport.inject("client/0", wire[:-5] + bytes([wire[-5] ^ 0x40]) + wire[-4:])  # ... and flips a bit
    with pytest.raises(AuthenticationError, match="failed authentication"):
        harness.route.client_inbox("client/0", Stage.ADVERTISE_KEYS)


def test_a_message_bound_to_another_stage_is_rejected(harness: Harness) -> None:
    harness.route.down("client/0", Stage.UNMASK, b"anything")
    with pytest.raises(UnexpectedMessageError, match="expected a 'secure_sum/advertise_keys' message but got one for 'secure_sum/unmask'"):
        harness.route.client_inbox("client/0", Stage.ADVERTISE_KEYS)


def test_a_client_message_straight_to_a_client_is_rejected(harness: Harness) -> None:
    from securefg.federation.envelope import Envelope, Form

    harness.world.transport.send(
        Envelope("client/1", ("client/0",), 0, "t", b"x", stage=Stage.ADVERTISE_KEYS.value, form=Form.KEYS)
    )
    with pytest.raises(UnexpectedMessageError, match="from 'client/1'"):
        harness.route.client_inbox("client/0", Stage.ADVERTISE_KEYS)


def test_the_server_holds_no_private_key_during_an_aggregate() -> None:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

    from securefg.protocol.secure_sum.server import base

    world = World(4)
    mech = SecureSum(signatures=True)
    seen = []
    original = base.ServerStage.handle

    def spy(stage, deliveries):  # type: ignore[no-untyped-def]
        seen.extend(v for v in vars(stage.ctx).values())
        return original(stage, deliveries)

    base.ServerStage.handle = spy  # type: ignore[method-assign]
    try:
        import torch

        mech.run_aggregate(world.call(mech), {c: torch.ones(3, dtype=torch.float64) for c in world.clients})
    finally:
        base.ServerStage.handle = original  # type: ignore[method-assign]
    assert seen and not any(isinstance(v, (X25519PrivateKey, Ed25519PrivateKey)) for v in seen)
