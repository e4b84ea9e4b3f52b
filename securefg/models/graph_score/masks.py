"""Masks and symmetric noise on padded dense adjacency batches."""

from __future__ import annotations

import torch


def pair_mask(flags: torch.Tensor) -> torch.Tensor:
    r"""Entries :math:`(u, v)` with :math:`u \ne v` where both nodes exist.

    Args:
        flags (torch.Tensor): Node flags :math:`(B, N)`, 1 for a real node, 0 for padding.

    Returns:
        torch.Tensor: :math:`(B, N, N)` mask of the same dtype as ``flags``.
    """
    n = flags.shape[-1]
    off_diagonal = 1.0 - torch.eye(n, dtype=flags.dtype, device=flags.device)
    return flags.unsqueeze(-1) * flags.unsqueeze(-2) * off_diagonal


def symmetric_noise(
    flags: torch.Tensor, *, generator: torch.Generator | None, fold: bool = False
) -> torch.Tensor:
    r"""Standard symmetric Gaussian noise on the existing node pairs.

    The upper triangle is i.i.d. :math:`\mathcal{N}(0, 1)` and mirrored, so the matrix has
    exactly :math:`n(n-1)/2` degrees of freedom, like an undirected graph. Draws happen on the
    CPU from ``generator`` (reproducible on any device), then move to ``flags.device``.

    Args:
        flags (torch.Tensor): Node flags :math:`(B, N)`.
        generator (torch.Generator, optional): CPU generator to draw from.
        fold (bool): Take absolute values (the folded-normal sampler init).
            (default: :obj:`False`)

    Returns:
        torch.Tensor: :math:`(B, N, N)` symmetric, zero diagonal, zero on padding.
    """
    b, n = flags.shape
    z = torch.randn((b, n, n), generator=generator, dtype=flags.dtype).triu(diagonal=1)
    if fold:
        z = z.abs()
    z = z.to(flags.device)
    return (z + z.transpose(-1, -2)) * pair_mask(flags)
