"""Seeded parameter initialisation.

``nn.Linear.reset_parameters`` draws from the global RNG. CeFGC+ averages two clients' models
and needs them to start from the same point (a *shared init seed*), so every layer here is
initialised from an explicit :class:`torch.Generator`. Values are drawn on the CPU and copied,
so the same seed gives the same weights on any device.
"""

from __future__ import annotations

import math

import torch
from torch import nn


def uniform_(param: torch.Tensor, bound: float, generator: torch.Generator | None) -> None:
    """Fill ``param`` in place with ``U(-bound, bound)`` drawn on the CPU from ``generator``."""
    values = torch.empty(param.shape, dtype=param.dtype).uniform_(-bound, bound, generator=generator)
    with torch.no_grad():
        param.copy_(values)


def normal_(param: torch.Tensor, mean: float, std: float, generator: torch.Generator | None) -> None:
    """Fill ``param`` in place with ``N(mean, std^2)`` drawn on the CPU from ``generator``."""
    values = torch.empty(param.shape, dtype=param.dtype).normal_(mean, std, generator=generator)
    with torch.no_grad():
        param.copy_(values)


def reset_linear_(layer: nn.Linear, generator: torch.Generator | None) -> None:
    """PyTorch's default ``nn.Linear`` init, ``U(-1/sqrt(fan_in), 1/sqrt(fan_in))``, seeded."""
    bound = 1.0 / math.sqrt(layer.in_features)
    uniform_(layer.weight, bound, generator)
    if layer.bias is not None:
        uniform_(layer.bias, bound, generator)
