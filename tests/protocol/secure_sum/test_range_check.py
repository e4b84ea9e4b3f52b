"""The optional range check (``norm_bound``): a malicious client that wraps or shifts a sum.

The malicious client here is a real client stage machine whose masked input is altered on its
way out (as a client that deviates after masking would): the aggregator cannot see it in the
masked vector, only in the unmasked sum.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import torch

from securefg.errors import ConfigError, ImplausibleSumError, InvalidInputError
from securefg.protocol.secure_sum import BlindSum, SecureSum
from securefg.protocol.secure_sum.constants import Stage
from securefg.protocol.secure_sum.context import ClientContext
from securefg.protocol.secure_sum.packing import decode_packed, encode_packed
from securefg.protocol.secure_sum.prg import ring_dtype, ring_mask
from securefg.protocol.secure_sum.range_check import RangeCheck, range_check_of

from .conftest import Harness, World

BOUND = 2.0
PARAMS = {"clip": 4.0, "resolution": 2.0**-16}


def _deviate(monkeypatch: pytest.MonkeyPatch, change: Callable[[np.ndarray, int], None], who: str = "client/0") -> None:
    """``who`` alters its masked input (ring words, ``bits`` each) right before sending it."""
    send = ClientContext.send

    def deviant(self: ClientContext, stage: Stage, payload: bytes) -> None:
        if self.pid == who and stage is Stage.MASKED_INPUT:
            bits = self.info.settings.ring_bits(len(self.clients))
            y = decode_packed(payload, bits=bits, length=self.vector.size, dtype=ring_dtype(bits)).astype(np.uint64)
            change(y, bits)
            payload = encode_packed((y & np.uint64(ring_mask(bits))).astype(ring_dtype(bits)), bits)
        send(self, stage, payload)

    monkeypatch.setattr(ClientContext, "send", deviant)


def _wrap(y: np.ndarray, bits: int) -> None:
    y[0] += np.uint64(1 << (bits - 1))  # half the ring: the decoded sum wraps around


def _inputs(world: World) -> dict[str, torch.Tensor]:
    return world.inputs(16, scale=0.1)


def test_a_client_refuses_its_own_input_beyond_the_norm_bound_before_sending_anything() -> None:
    h = Harness(norm_bound=1.0)  # the harness's inputs are linspace(-1, 1, 8): norm 1.85
    with pytest.raises(InvalidInputError, match=r"the input of client/0 has L2 norm 1.85164, beyond the secure sum's "
                                                r"norm_bound 1;"):
        h.deliver("client/0", Stage.ADVERTISE_KEYS, h.config("client/0"))
    assert h.replies(Stage.ADVERTISE_KEYS) == {}


def test_a_wrapped_sum_is_refused_by_the_aggregator(monkeypatch: pytest.MonkeyPatch) -> None:
    world = World(6)
    mech = SecureSum(norm_bound=BOUND, **PARAMS)
    _deviate(monkeypatch, _wrap)
    with pytest.raises(ImplausibleSumError, match=r"unmasked sum of 6 inputs .* beyond 6 x norm_bound 2"):
        mech.run_aggregate(world.call(mech), _inputs(world))


def test_a_random_ring_vector_is_refused_by_the_aggregator(monkeypatch: pytest.MonkeyPatch) -> None:
    world = World(6)
    mech = SecureSum(norm_bound=BOUND, **PARAMS)
    rng = np.random.default_rng(0)
    _deviate(monkeypatch, lambda y, bits: y.__iadd__(rng.integers(0, 2**bits, size=y.size, dtype=np.uint64)))
    with pytest.raises(ImplausibleSumError):
        mech.run_aggregate(world.call(mech), _inputs(world))


def test_without_a_norm_bound_the_wrapped_sum_is_returned_as_if_valid(monkeypatch: pytest.MonkeyPatch) -> None:
    """Why the option exists: nothing else notices."""
    world = World(6)
    mech = SecureSum(**PARAMS)
    inputs = _inputs(world)
    _deviate(monkeypatch, _wrap)
    got = mech.run_aggregate(world.call(mech), inputs).total
    assert abs(float(got[0] - sum(inputs.values())[0])) > 10.0


def test_a_shift_within_the_bound_is_not_detected(monkeypatch: pytest.MonkeyPatch) -> None:
    """The limit, stated: a malicious input inside the bound is a valid input."""
    world = World(6)
    mech = SecureSum(norm_bound=BOUND, **PARAMS)
    inputs = _inputs(world)
    step = mech.settings.quantizer(6).step
    _deviate(monkeypatch, lambda y, bits: y.__setitem__(0, y[0] + np.uint64(round(1.0 / step))))
    got = mech.run_aggregate(world.call(mech), inputs).total
    assert float(got[0] - sum(inputs.values())[0]) == pytest.approx(1.0, abs=1e-3)


def test_an_honest_run_within_the_bound_sums_exactly() -> None:
    world = World(6)
    mech = SecureSum(norm_bound=BOUND, **PARAMS)
    inputs = _inputs(world)
    out = mech.run_aggregate(world.call(mech), inputs)
    bound = mech.settings.quantizer(6).error_bound(6)
    assert float((out.total - sum(inputs.values())).abs().max()) <= bound


def test_blind_sum_clients_refuse_a_wrapped_sum_after_unblinding(monkeypatch: pytest.MonkeyPatch) -> None:
    world = World(5)
    mech = BlindSum(norm_bound=BOUND, **PARAMS)
    _deviate(monkeypatch, _wrap, who="client/2")
    with pytest.raises(ImplausibleSumError):
        mech.run_shared_sum(world.call(mech, tag="g"), _inputs(world))


@pytest.mark.parametrize("bad", [0, -1.0, float("inf"), True, "2"])
def test_an_invalid_norm_bound_is_refused_at_load(bad: object) -> None:
    with pytest.raises(ConfigError, match="'norm_bound' must be a finite number > 0"):
        SecureSum(norm_bound=bad)


def test_the_range_check_a_binding_turns_on() -> None:
    assert range_check_of({"norm_bound": 3.0}) is RangeCheck.NORM_BOUND
    assert range_check_of({}) is RangeCheck.NONE
