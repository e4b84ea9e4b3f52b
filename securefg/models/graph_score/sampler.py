"""Annealed Langevin dynamics over dense adjacencies (Song & Ermon, 2019; EDP-GNN)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from securefg.errors import ConfigError
from securefg.models.graph_score.loss import condition_index
from securefg.models.graph_score.masks import symmetric_noise

#: Cap on steps per level a received model may ask for (the reference uses 1000).
MAX_STEPS_PER_LEVEL = 10_000


@dataclass(frozen=True)
class LangevinParams:
    r"""Sampling hyperparameters, chosen by the *sender* and shipped with the model.

    EDP-GNN picks them by MMD against the training graphs, which a receiving client does not
    have, so the party that trained the model tunes them and sends them along.

    The defaults were picked on MUTAG (one 1500-epoch model per class, 64 samples, MMD and
    connectivity against the training graphs). With only ``T`` = 20..50 steps per level (the
    reference runs 1000) the chain mixes only if ``r * T`` is a few units: small ``r`` leaves
    the dense folded-normal start behind (too many edges), ``noise_factor`` well below 1 gives
    sparse, fragmented graphs. The best values depend on the trained model; use
    :func:`~securefg.models.graph_score.tuning.select_sampling_params` on the sender's data.

    Args:
        steps_per_level (int): Langevin steps :math:`T` at each noise level.
            (default: :obj:`30`)
        step_ratio (float): :math:`r` in the step size :math:`\alpha_l = r\,\sigma_l^2`.
            (default: :obj:`0.1`)
        noise_factor (float): :math:`\epsilon` scaling the injected noise.
            (default: :obj:`0.9`)
    """

    steps_per_level: int = 30
    step_ratio: float = 0.1
    noise_factor: float = 0.9

    def __post_init__(self) -> None:
        problems = []
        if not 1 <= self.steps_per_level <= MAX_STEPS_PER_LEVEL:
            problems.append(f"steps_per_level={self.steps_per_level} not in [1, {MAX_STEPS_PER_LEVEL}]")
        if not (math.isfinite(self.step_ratio) and 0.0 < self.step_ratio <= 1.0):
            problems.append(f"step_ratio={self.step_ratio} not in (0, 1]")
        if not (math.isfinite(self.noise_factor) and 0.0 <= self.noise_factor <= 10.0):
            problems.append(f"noise_factor={self.noise_factor} not in [0, 10]")
        if problems:
            raise ConfigError("LangevinParams is invalid:\n" + "\n".join(f"- {p}" for p in problems))


@torch.no_grad()
def annealed_langevin(
    score_net: nn.Module,
    flags: torch.Tensor,
    *,
    sigmas: torch.Tensor,
    classes: torch.Tensor | None,
    params: LangevinParams,
    generator: torch.Generator | None,
) -> torch.Tensor:
    r"""Sample adjacencies by annealed Langevin dynamics, then threshold at 0.5.

    Starting from a symmetric folded normal :math:`|\mathcal{N}(0, 1)|`, for every level from
    the largest :math:`\sigma` to the smallest, :math:`T` times (noise first, as in EDP-GNN):

    .. math::
        \tilde{\mathbf{A}} \leftarrow \tilde{\mathbf{A}} + \sqrt{2\alpha_l}\,\epsilon\,\mathbf{Z},
        \qquad
        \tilde{\mathbf{A}} \leftarrow \tilde{\mathbf{A}} + \alpha_l\, s_\theta(\tilde{\mathbf{A}}, c_l),
        \qquad \alpha_l = r \sigma_l^2

    Args:
        score_net (nn.Module): Score network ``(adj, flags, cond) -> score``.
        flags (torch.Tensor): Node flags :math:`(B, N)` fixing each graph's size.
        sigmas (torch.Tensor): Noise levels :math:`(L,)`, any order.
        classes (torch.Tensor, optional): Class of each graph :math:`(B,)` (CeFGC*).
        params (LangevinParams): Step count, step ratio and noise factor.
        generator (torch.Generator, optional): CPU generator for every random draw.

    Returns:
        torch.Tensor: :math:`(B, N, N)` 0/1 adjacency, symmetric, zero diagonal and padding.
    """
    adj = symmetric_noise(flags, generator=generator, fold=True)
    batch = flags.shape[0]
    for level in torch.argsort(sigmas, descending=True).tolist():
        sigma = float(sigmas[level])
        alpha = params.step_ratio * sigma**2
        noise_scale = math.sqrt(2.0 * alpha) * params.noise_factor
        levels = torch.full((batch,), level, dtype=torch.long, device=flags.device)
        cond = condition_index(levels, classes, sigmas.numel())
        for _ in range(params.steps_per_level):
            adj = adj + noise_scale * symmetric_noise(flags, generator=generator)
            adj = adj + alpha * score_net(adj, flags, cond)
    return (adj > 0.5).to(flags.dtype)
