"""A small MLP whose hidden layers are conditioned on the noise level."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import cast

import torch
from torch import nn

from securefg.models.graph_score.conditional import ConditionalGainBias
from securefg.models.graph_score.init import reset_linear_


class ConditionalMLP(nn.Module):
    r"""MLP ``Linear -> gain/bias[c] -> act -> ... -> Linear`` applied to the last dimension.

    The EDP-GNN ``MLP`` with ``num_classes`` set, without BatchNorm: normalisation statistics
    mix samples, which DP-SGD (Opacus) rejects, and the reference configs turn it off anyway.

    Args:
        in_features (int): Input width.
        hidden_features (int): Width of every hidden layer.
        out_features (int): Output width.
        num_layers (int): Number of linear layers (>= 2).
        num_conditions (int): Number of conditioning indices.
        act (Callable): Activation after each conditioned hidden layer.
            (default: :func:`torch.nn.functional.elu`)

    Shapes:
        - **input:** :math:`(B, *, F_{in})`, condition :math:`(B,)`
        - **output:** :math:`(B, *, F_{out})`
    """

    def __init__(
        self,
        in_features: int,
        hidden_features: int,
        out_features: int,
        *,
        num_layers: int,
        num_conditions: int,
        act: Callable[[torch.Tensor], torch.Tensor] = nn.functional.elu,
    ) -> None:
        super().__init__()
        if num_layers < 2:
            raise ValueError(f"'{self.__class__.__name__}' needs num_layers >= 2, got {num_layers}")
        widths = [in_features] + [hidden_features] * (num_layers - 1) + [out_features]
        self.linears = nn.ModuleList(nn.Linear(a, b) for a, b in itertools.pairwise(widths))
        self.conds = nn.ModuleList(
            ConditionalGainBias(hidden_features, num_conditions) for _ in range(num_layers - 1)
        )
        self.act = act

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        """Re-initialise every layer from ``generator``."""
        for linear in self.linears:
            reset_linear_(cast(nn.Linear, linear), generator)
        for cond in self.conds:
            cast(ConditionalGainBias, cond).reset_parameters(generator)

    def forward(self, h: torch.Tensor, cond: torch.Tensor) -> torch.Tensor:
        """Apply the MLP, conditioning every hidden layer on ``cond``."""
        for linear, gain_bias in zip(self.linears[:-1], self.conds, strict=True):
            h = self.act(gain_bias(linear(h), cond))
        return self.linears[-1](h)

    def __repr__(self) -> str:
        first, last = self.linears[0], self.linears[-1]
        return (
            f"{self.__class__.__name__}({first.in_features}, {first.out_features}, "
            f"{last.out_features}, num_layers={len(self.linears)})"
        )
