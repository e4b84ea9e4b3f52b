"""Multi-channel dense GIN: node features from several weighted adjacency channels at once."""

from __future__ import annotations

from typing import cast

import torch
from torch import nn

from securefg.models.graph_score.init import reset_linear_
from securefg.models.graph_score.mlp import ConditionalMLP


class MultiChannelGIN(nn.Module):
    r"""Dense GIN over :math:`C` adjacency channels, as in EDP-GNN's ``model/gin.py``.

    Node features are first concatenated with their degree in every channel (the only signal
    a structure-only model has). Each sub-layer :math:`k` then aggregates per channel and mixes
    channels in a conditioned MLP (Xu et al., https://arxiv.org/abs/1810.00826):

    .. math::
        \mathbf{h}^{(k+1)} = \tanh\Big(\mathrm{MLP}_k\big(\big\Vert_{c=1}^{C}
        (\mathbf{A}_c + (1 + \epsilon_k)\mathbf{I})\,\mathbf{h}^{(k)}\big)\Big), \qquad
        \mathbf{x}' = \sum_{k} \mathbf{W}_k \mathbf{h}^{(k)} + \mathbf{b}_k

    Unlike the reference, the readout heads are single linear maps and the sub-layer MLPs are
    conditioned on the noise level (degrees of a noisy adjacency scale with sigma).

    Args:
        in_features (int): Node feature width before the degrees are appended.
        channels (int): Number of adjacency channels :math:`C`.
        hidden (tuple[int, ...]): Output width of each sub-layer.
        out_features (int): Width of the returned node features.
        num_conditions (int): Number of conditioning indices.

    Shapes:
        - **input:** x :math:`(B, N, F_{in})`, adj :math:`(B, C, N, N)`, flags :math:`(B, N)`,
          condition :math:`(B,)`
        - **output:** :math:`(B, N, F_{out})`, zero on padded nodes
    """

    def __init__(
        self,
        in_features: int,
        channels: int,
        hidden: tuple[int, ...],
        out_features: int,
        *,
        num_conditions: int,
    ) -> None:
        super().__init__()
        self.in_features = in_features
        self.channels = channels
        self.out_features = out_features
        widths = [in_features + channels, *hidden]
        mlp_hidden = 2 * max(widths)
        self.eps = nn.Parameter(torch.zeros(len(hidden)))
        self.mlps = nn.ModuleList(
            ConditionalMLP(
                widths[k] * channels,
                mlp_hidden,
                widths[k + 1],
                num_layers=2,
                num_conditions=num_conditions,
                act=torch.relu,
            )
            for k in range(len(hidden))
        )
        self.heads = nn.ModuleList(nn.Linear(w, out_features) for w in widths)

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        """Re-initialise every layer from ``generator``; ``eps`` starts at 0."""
        with torch.no_grad():
            self.eps.zero_()
        for mlp in self.mlps:
            cast(ConditionalMLP, mlp).reset_parameters(generator)
        for head in self.heads:
            reset_linear_(cast(nn.Linear, head), generator)

    def forward(
        self, x: torch.Tensor, adj: torch.Tensor, flags: torch.Tensor, cond: torch.Tensor
    ) -> torch.Tensor:
        """Return masked node features of width ``out_features``."""
        mask = flags.unsqueeze(-1)
        degree = adj.sum(dim=-1).transpose(1, 2)  # B x N x C
        h = torch.cat([x, degree], dim=-1) * mask
        out = self.heads[0](h)
        for k, mlp in enumerate(self.mlps):
            agg = torch.matmul(adj, h.unsqueeze(1))  # B x C x N x F
            agg = agg + (1.0 + self.eps[k]) * h.unsqueeze(1)
            agg = agg.permute(0, 2, 1, 3).flatten(2)  # B x N x (C F)
            h = torch.tanh(mlp(agg, cond)) * mask
            out = out + self.heads[k + 1](h)
        return out * mask

    def __repr__(self) -> str:
        return (
            f"{self.__class__.__name__}({self.in_features}, {self.out_features}, "
            f"channels={self.channels}, sub_layers={len(self.mlps)})"
        )
