"""Noise flooding / rounding of values a key holder releases."""

from __future__ import annotations

import pytest
import torch
from scipy.stats import kstest

from securefg.errors import ConfigError
from securefg.protocol.ckks.output_noise import OutputNoise, csprng_normal


def test_csprng_normal_is_standard_normal() -> None:
    z = csprng_normal(50_001, 1.0)
    assert z.shape == (50_001,) and z.dtype == torch.float64
    assert kstest(z.numpy(), "norm").pvalue > 1e-4


def test_csprng_normal_uses_the_given_byte_source() -> None:
    def fake_prng(n: int) -> bytes:  # a deterministic byte source, for this test only
        return (bytes(range(256)) * (n // 256 + 1))[:n]

    a, b = csprng_normal(10, 2.0, randbytes=fake_prng), csprng_normal(10, 2.0, randbytes=fake_prng)
    assert torch.equal(a, b)
    assert not torch.equal(csprng_normal(10, 2.0), csprng_normal(10, 2.0))


def test_flood_adds_noise_of_the_configured_scale_and_leaves_input_alone() -> None:
    x = torch.zeros(20_000, dtype=torch.float64)
    y = OutputNoise("flood", flood_std=0.5)(x)
    assert torch.equal(x, torch.zeros_like(x))
    assert float(y.std()) == pytest.approx(0.5, rel=0.03)


def test_round_snaps_to_the_grid() -> None:
    y = OutputNoise("round", round_bits=4)(torch.tensor([0.03, 0.5, -1.01], dtype=torch.float64))
    assert torch.equal(y, torch.tensor([0.0, 0.5, -1.0], dtype=torch.float64))


def test_none_is_an_exact_copy() -> None:
    x = torch.randn(5, dtype=torch.float64)
    y = OutputNoise("none")(x)
    assert torch.equal(x, y) and y is not x


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"mode": "loud"}, r"Could not resolve output_noise 'loud' among choices \['flood', 'round', 'none'\]"),
        ({"flood_std": 0.0}, "flood_std must be a positive number"),
        ({"round_bits": 60}, r"round_bits must be an integer in \[0, 52\]"),
    ],
)
def test_invalid_options_are_config_errors(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        OutputNoise(**kwargs)  # type: ignore[arg-type]
