"""Per-condition gain and bias: how the score network knows the noise level (and class)."""

from __future__ import annotations

import torch
from torch import nn

from securefg.models.graph_score.init import normal_


class ConditionalGainBias(nn.Module):
    r"""Feature-wise gain and bias selected by an integer condition per graph.

    The EDP-GNN ``ConditionalLayer1d`` (Niu et al., AISTATS 2020,
    https://arxiv.org/abs/2003.00638) without its batch-layout constraint: the reference
    reshapes the batch into ``L`` equal, sorted blocks, whereas here every graph carries its own
    index, so a batch may mix noise levels freely (one random level per graph, DP-SGD friendly).

    .. math::
        \mathbf{h}' = \boldsymbol{\gamma}_{c} \odot \mathbf{h} + \boldsymbol{\beta}_{c}

    Args:
        num_features (int): Size of the last dimension of the input.
        num_conditions (int): Number of distinct indices (noise levels, or class x level).

    Shapes:
        - **input:** features :math:`(B, *, F)`, condition :math:`(B,)` int64
        - **output:** :math:`(B, *, F)`
    """

    def __init__(self, num_features: int, num_conditions: int) -> None:
        super().__init__()
        self.num_features = num_features
        self.num_conditions = num_conditions
        self.gain = nn.Parameter(torch.empty(num_conditions, num_features))
        self.bias = nn.Parameter(torch.empty(num_conditions, num_features))
        self.reset_parameters()

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        """Gain ~ N(1, 0.02^2) and bias 0, as in the reference."""
        normal_(self.gain, 1.0, 0.02, generator)
        with torch.no_grad():
            self.bias.zero_()

    def forward(self, h: torch.Tensor, cond: torch.Tensor) -> torch.Tensor:
        """Scale and shift ``h`` by the gain and bias of each graph's condition."""
        shape = (cond.shape[0],) + (1,) * (h.dim() - 2) + (self.num_features,)
        return h * self.gain[cond].view(shape) + self.bias[cond].view(shape)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.num_features}, num_conditions={self.num_conditions})"
