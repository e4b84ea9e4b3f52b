"""Fixed-point encoding: error bound, headroom for n summands, clipping (``quantize.py``)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from securefg.errors import InvalidInputError, OverflowRiskError
from securefg.protocol.secure_sum.quantize import Quantizer


@settings(max_examples=40, deadline=None)
@given(
    bits=st.sampled_from([32, 64]),
    n=st.integers(1, 60),
    clip=st.floats(1e-3, 1e6),
    seed=st.integers(0, 2**32 - 1),
)
def test_dequantized_ring_sum_is_within_the_stated_bound(bits: int, n: int, clip: float, seed: int) -> None:
    try:
        q = Quantizer(bits=bits, clip=clip, summands=n)
    except OverflowRiskError:
        return  # covered by the overflow test below
    rng = np.random.default_rng(seed)
    xs = rng.uniform(-clip, clip, size=(n, 50))
    xs[0, :2] = (clip, -clip)  # the extremes must not wrap
    total = np.zeros(50, dtype=f"<u{bits // 8}")
    for x in xs:
        total += q.quantize(x)
    exact = np.array([float(sum(map(float, col))) for col in xs.T])  # independent float sum
    assert np.abs(q.dequantize(total) - exact).max() <= q.error_bound() + 1e-12 * n * clip


def test_headroom_is_exact_at_the_boundary() -> None:
    q = Quantizer(bits=32, clip=1.0, summands=4)
    f = q.fraction_bits
    assert 4 * (2**f) <= 2**31 - 1 < 4 * 2 ** (f + 1)
    total = sum(q.quantize(np.array([1.0])).astype(np.uint64) for _ in range(4)).astype(np.uint32)
    assert q.dequantize(total)[0] == 4.0


def test_too_many_summands_for_the_ring_raise_overflow_risk() -> None:
    with pytest.raises(OverflowRiskError, match="use 'bits = 64'"):
        Quantizer(bits=32, clip=2.0**24, summands=1000)


def test_value_beyond_the_clip_raises_by_default() -> None:
    q = Quantizer(bits=64, clip=10.0, summands=3)
    with pytest.raises(InvalidInputError, match="exceeds the secure-sum clip"):
        q.quantize(np.array([0.0, 10.5]))


def test_value_beyond_the_clip_saturates_when_asked() -> None:
    q = Quantizer(bits=64, clip=10.0, summands=3, on_clip="saturate")
    assert q.dequantize(q.quantize(np.array([-99.0, 99.0]))).tolist() == [-10.0, 10.0]


def test_nan_input_is_refused() -> None:
    with pytest.raises(InvalidInputError, match="must be finite"):
        Quantizer(bits=64, clip=1.0, summands=2).quantize(np.array([np.nan]))
