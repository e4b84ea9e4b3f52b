"""Gaussian noise and L2 norm clipping, the two primitives of the Gaussian mechanism.

Randomness comes in as an argument: a seeded :class:`torch.Generator` for reproducible
simulation and tests, or ``None`` for the operating system's CSPRNG (``os.urandom``), which is
what production runs use. torch's CPU generator is MT19937 with a 64-bit seed, which is neither
a cryptographic generator nor a 128-bit secret, so the secure path does not go through it.
"""

from __future__ import annotations

import math

import torch

from securefg.errors import InvalidInputError
from securefg.protocol.csprng import csprng_standard_normal


def clip_to_norm(vector: torch.Tensor, clip: float) -> torch.Tensor:
    r"""Scale ``vector`` down so that its L2 norm is at most ``clip``.

    .. math::
        \mathrm{clip}_C(v) = v \cdot \min\left(1, \frac{C}{\lVert v \rVert_2}\right)

    Args:
        vector (torch.Tensor): A 1-D float tensor.
        clip (float): The norm bound :math:`C > 0`.

    Returns:
        torch.Tensor: A new tensor (the input is left unchanged).

    Raises:
        InvalidInputError: If ``vector`` holds NaN or Inf (its norm would be undefined).
    """
    norm = float(torch.linalg.vector_norm(vector))
    if not math.isfinite(norm):
        raise InvalidInputError(f"cannot clip a vector with non-finite entries (norm {norm})")
    if norm <= clip:
        return vector.clone()
    return vector * (clip / norm)


def gaussian_noise(size: int, *, std: float, generator: torch.Generator | None) -> torch.Tensor:
    r"""Draw ``size`` independent :math:`\mathcal{N}(0, \mathrm{std}^2)` values as ``float64``.

    With ``generator=None`` the values come from the OS CSPRNG and each is the scaled sum of
    four standard normals divided by two, the floating-point hardening of Holohan and Braghin
    (2021, https://arxiv.org/abs/2107.10138, Sec. 5.1, n = 2) that Opacus' ``secure_mode`` uses.

    Args:
        size (int): Number of values.
        std (float): Standard deviation (``>= 0``).
        generator (torch.Generator, optional): Seeded generator for simulation; ``None`` for
            the CSPRNG.

    Returns:
        torch.Tensor: Shape ``(size,)``, ``float64``.
    """
    if std < 0 or not math.isfinite(std):
        raise InvalidInputError(f"noise standard deviation must be finite and >= 0, got {std}")
    if std == 0 or size == 0:
        return torch.zeros(size, dtype=torch.float64)
    if generator is not None:
        return torch.normal(0.0, std, (size,), generator=generator, dtype=torch.float64)
    z = csprng_standard_normal(4 * size).reshape(4, size).sum(axis=0) / 2.0
    return torch.from_numpy(z * std)
