"""securefg.protocol.csprng: unpredictable bytes and the Box-Muller normals drawn from them."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from securefg.protocol.csprng import csprng_standard_normal, keystream


@pytest.mark.parametrize("count", [0, 1, 17, 1 << 16, (1 << 16) + 3, 3_000_000])
def test_keystream_gives_exactly_the_bytes_asked_for_and_never_the_same(count):
    a, b = keystream(count), keystream(count)
    assert len(a) == len(b) == count
    if count >= 16:
        assert a != b


def test_large_keystream_bytes_look_uniform():
    data = np.frombuffer(keystream(1 << 20), dtype=np.uint8)
    counts = np.bincount(data, minlength=256)
    expected = data.size / 256
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert chi2 < 400  # 255 degrees of freedom: p < 1e-8 above this


@pytest.mark.parametrize("count", [1, 2, 7, 1000, 100_001])
def test_normals_are_box_muller_over_the_given_bytes(count):
    source = random.Random(count)
    raw = source.randbytes(16 * ((count + 1) // 2))
    got = csprng_standard_normal(count, randbytes=lambda n: raw[:n])
    words = [int.from_bytes(raw[8 * i: 8 * i + 8], "little") >> 11 for i in range(len(raw) // 8)]
    u = [(w + 1.0) * 2.0**-53 for w in words]
    pairs = len(u) // 2
    radius = [math.sqrt(-2.0 * math.log(x)) for x in u[:pairs]]
    angle = [2.0 * math.pi * x for x in u[pairs:]]
    want = [r * math.cos(a) for r, a in zip(radius, angle)] + [r * math.sin(a) for r, a in zip(radius, angle)]
    np.testing.assert_allclose(got, want[:count], rtol=1e-12, atol=1e-12)
    assert got.shape == (count,) and got.dtype == np.float64


def test_default_normals_are_standard_and_fresh():
    z = csprng_standard_normal(400_001)
    assert abs(z.mean()) < 0.01 and abs(z.std() - 1.0) < 0.01
    assert not np.array_equal(z[:10], csprng_standard_normal(10))
    assert csprng_standard_normal(0).shape == (0,)
