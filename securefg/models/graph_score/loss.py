"""Denoising score matching on symmetric adjacency noise, one noise level per graph."""

from __future__ import annotations

import torch
from torch import nn

from securefg.models.graph_score.masks import symmetric_noise


def condition_index(levels: torch.Tensor, classes: torch.Tensor | None, num_levels: int) -> torch.Tensor:
    """Conditioning index of each graph: ``level`` or, for CeFGC*, ``class * L + level``."""
    return levels if classes is None else classes * num_levels + levels


def dsm_loss(
    score_net: nn.Module,
    adj: torch.Tensor,
    flags: torch.Tensor,
    *,
    sigmas: torch.Tensor,
    levels: torch.Tensor,
    classes: torch.Tensor | None,
    generator: torch.Generator | None,
) -> torch.Tensor:
    r"""Denoising score matching loss with :math:`\sigma^2` weighting (Song & Ermon, 2019).

    Each graph is perturbed at its own level :math:`\sigma_{l_b}`, drawn by the caller. With
    :math:`\tilde{\mathbf{A}} = \mathbf{A} + \sigma\mathbf{Z}` and target
    :math:`\nabla \log q_\sigma = -\mathbf{Z}/\sigma`:

    .. math::
        \mathcal{L} = \frac{1}{B} \sum_b \tfrac12 \sigma_{l_b}^2 \big\Vert
        s_\theta(\tilde{\mathbf{A}}_b, c_b) + \mathbf{Z}_b / \sigma_{l_b} \big\Vert_F^2

    One random level per graph has the same expectation (up to the factor ``L``) as EDP-GNN's
    replication of each batch over all levels, costs ``L`` times less, and keeps one loss term
    per graph, which per-sample DP accounting needs.

    Args:
        score_net (nn.Module): Maps ``(adj, flags, cond)`` to a score of ``adj``'s shape.
        adj (torch.Tensor): Clean adjacencies :math:`(B, N, N)`.
        flags (torch.Tensor): Node flags :math:`(B, N)`.
        sigmas (torch.Tensor): Noise levels :math:`(L,)` on ``adj.device``.
        levels (torch.Tensor): Level index of each graph :math:`(B,)`, int64.
        classes (torch.Tensor, optional): Class of each graph :math:`(B,)` for CeFGC*.
        generator (torch.Generator, optional): CPU generator for the noise.

    Returns:
        torch.Tensor: Scalar mean loss over the batch.
    """
    z = symmetric_noise(flags, generator=generator)
    sigma = sigmas[levels].view(-1, 1, 1)
    noisy = adj + sigma * z
    cond = condition_index(levels, classes, sigmas.numel())
    score = score_net(noisy, flags, cond)
    per_graph = 0.5 * ((sigma * score + z) ** 2).sum(dim=(-1, -2))
    return per_graph.mean()
