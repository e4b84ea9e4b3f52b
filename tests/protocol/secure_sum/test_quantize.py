"""Fixed-point encoding: error bound, headroom for n summands, clipping (``quantize.py``)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from securefg.errors import ConfigError, InvalidInputError, OverflowRiskError, RingTooSmallError
from securefg.protocol.secure_sum.prg import ring_dtype
from securefg.protocol.secure_sum.quantize import Quantizer
from securefg.protocol.secure_sum.settings import Settings


@settings(max_examples=40, deadline=None)
@given(
    bits=st.sampled_from([12, 20, 31, 32, 33, 47, 64]),
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
    total = np.zeros(50, dtype=ring_dtype(bits))
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


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 1000), clip=st.floats(1e-3, 1e4), f=st.integers(0, 40))
def test_fit_picks_the_smallest_ring_that_holds_n_summands_at_the_resolution(n: int, clip: float, f: int) -> None:
    try:
        q = Quantizer.fit(clip=clip, resolution=2.0**-f, summands=n)
    except RingTooSmallError:
        assert n * np.ceil(clip * 2.0**f) > 2**63 - 1
        return
    assert q.step <= 2.0**-f
    assert n * np.ceil(clip * 2.0**q.fraction_bits) <= 2 ** (q.bits - 1) - 1
    if q.bits > 2:  # one bit fewer would not give the resolution
        with pytest.raises(RingTooSmallError):
            Quantizer(bits=q.bits - 1, clip=clip, summands=n, resolution=2.0**-f)


def test_the_bench_ring_is_34_bits_for_100_summands_of_1_at_2_to_the_minus_26() -> None:
    assert Quantizer.fit(clip=1.0, resolution=2.0**-26, summands=100).bits == 34


def test_a_pinned_ring_too_small_for_clip_n_and_resolution_is_refused_with_what_to_do() -> None:
    settings_ = Settings.from_params({"bits": 16, "clip": 1.0, "resolution": 2.0**-10})
    assert settings_.ring_bits(10) == 16  # 10 * 2^10 < 2^15
    with pytest.raises(RingTooSmallError, match=r"use bits >= 17 or 'bits = \"auto\"'"):
        settings_.quantizer(40)  # 40 * 2^10 > 2^15 - 1
    with pytest.raises(RingTooSmallError, match="more than 2\\^64"):
        Settings.from_params({"clip": 2.0**30, "resolution": 2.0**-31}).quantizer(10)
    with pytest.raises(ConfigError, match="need a 2\\^73 ring"):  # not even two summands fit
        Settings.from_params({"clip": 2.0**40, "resolution": 2.0**-30})


def test_auto_without_a_resolution_keeps_the_64_bit_ring() -> None:
    assert Settings.from_params({}).ring_bits(100) == 64
    assert Settings.from_params({"resolution": 2.0**-20, "clip": 1.0}).ring_bits(10) == 25


@pytest.mark.parametrize("bits", [12, 16, 27, 32, 40, 64])
def test_dequantize_reads_the_low_bits_of_any_unsigned_word_width(bits: int) -> None:
    """The narrow-word fast path sign-extends exactly as the 64-bit path does."""
    q = Quantizer(bits=bits, clip=1.0, summands=3)
    x = np.array([-1.0, -0.5, 0.0, 0.25, 1.0])
    enc = q.quantize(x)
    wide = q.dequantize(enc.astype(np.uint64))
    assert np.array_equal(q.dequantize(enc), wide)
    np.testing.assert_allclose(wide, x, atol=2.0 ** -q.fraction_bits)
    # unreduced words: whatever lies above the low `bits` bits is ignored
    if bits < enc.dtype.itemsize * 8:
        assert np.array_equal(q.dequantize(enc + enc.dtype.type(1 << bits)), wide)
