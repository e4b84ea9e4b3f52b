import math

import pytest
import torch

from securefg.errors import InvalidInputError
from securefg.protocol.dp.noise import clip_to_norm, gaussian_noise


def test_clip_bounds_the_norm_and_keeps_the_direction():
    v = torch.tensor([3.0, 4.0], dtype=torch.float64)
    out = clip_to_norm(v, 1.0)
    assert torch.allclose(out, torch.tensor([0.6, 0.8], dtype=torch.float64))
    assert torch.equal(v, torch.tensor([3.0, 4.0], dtype=torch.float64))  # input unchanged


def test_clip_leaves_small_vectors_alone_but_returns_a_copy():
    v = torch.tensor([0.3, 0.4], dtype=torch.float64)
    out = clip_to_norm(v, 1.0)
    assert torch.equal(out, v) and out.data_ptr() != v.data_ptr()


def test_clip_bounds_every_random_vector():
    g = torch.Generator().manual_seed(0)
    for scale in (1e-3, 1.0, 1e3):
        v = scale * torch.randn(1000, generator=g, dtype=torch.float64)
        assert float(clip_to_norm(v, 2.5).norm()) <= 2.5 * (1 + 1e-12)


def test_clip_rejects_non_finite_vectors():
    with pytest.raises(InvalidInputError, match="non-finite"):
        clip_to_norm(torch.tensor([1.0, math.inf]), 1.0)


@pytest.mark.parametrize("seeded", [True, False], ids=["seeded", "csprng"])
def test_measured_noise_std_matches_configured_std(seeded):
    n, std = 200_000, 0.7
    gen = torch.Generator().manual_seed(1) if seeded else None
    z = gaussian_noise(n, std=std, generator=gen)
    assert z.dtype == torch.float64 and z.shape == (n,)
    # The sample std of n normals has relative standard error 1/sqrt(2n) = 0.16%; allow 5 sigma.
    assert abs(float(z.std()) / std - 1) < 5 / math.sqrt(2 * n)
    assert abs(float(z.mean())) < 5 * std / math.sqrt(n)
    # and it is Gaussian, not merely of the right variance: 4th moment is 3 std^4
    kurtosis = float((z**4).mean()) / std**4
    assert abs(kurtosis - 3) < 0.1


def test_seeded_noise_is_reproducible_and_csprng_noise_is_not():
    a = gaussian_noise(8, std=1.0, generator=torch.Generator().manual_seed(5))
    b = gaussian_noise(8, std=1.0, generator=torch.Generator().manual_seed(5))
    assert torch.equal(a, b)
    assert not torch.equal(
        gaussian_noise(8, std=1.0, generator=None), gaussian_noise(8, std=1.0, generator=None)
    )


def test_noise_rejects_negative_std():
    with pytest.raises(InvalidInputError, match="standard deviation"):
        gaussian_noise(3, std=-1.0, generator=None)
