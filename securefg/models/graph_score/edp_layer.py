"""One edge-dense-prediction layer: new node features, then new adjacency channels."""

from __future__ import annotations

import torch
from torch import nn

from securefg.models.graph_score.gin import MultiChannelGIN
from securefg.models.graph_score.masks import pair_mask
from securefg.models.graph_score.mlp import ConditionalMLP


class EDPLayer(nn.Module):
    r"""EDP-GNN layer (Niu et al., AISTATS 2020, https://arxiv.org/abs/2003.00638).

    A :class:`MultiChannelGIN` computes node features :math:`\mathbf{x}'`; an edge MLP then
    reads every node pair and emits :math:`C_{out}` new adjacency channels, symmetrised and
    masked, so the next layer sees a learned multi-channel graph:

    .. math::
        \mathbf{E}_{uv} = \mathrm{MLP}\big([\mathbf{A}_{:,uv} \,\Vert\, \mathbf{x}'_u
        \,\Vert\, \mathbf{x}'_v]\big), \qquad
        \mathbf{A}' = (\mathbf{E} + \mathbf{E}^\top) \odot \mathbf{M}

    where :math:`\mathbf{M}` keeps off-diagonal pairs of existing nodes.

    Args:
        in_features (int): Input node width :math:`F_{in}`.
        out_features (int): Output node width :math:`F_{out}`.
        in_channels (int): Input adjacency channels :math:`C_{in}`.
        out_channels (int): Output adjacency channels :math:`C_{out}`.
        gin_hidden (tuple[int, ...]): Widths of the GIN sub-layers.
        num_conditions (int): Number of conditioning indices.
        common_neighbors (bool): Append :math:`(\mathbf{A}_c^2)_{uv}` for every input channel
            to the edge MLP input. (default: :obj:`False`)

    Shapes:
        - **input:** x :math:`(B, N, F_{in})`, adj :math:`(B, C_{in}, N, N)`,
          flags :math:`(B, N)`, condition :math:`(B,)`
        - **output:** x :math:`(B, N, F_{out})`, adj :math:`(B, C_{out}, N, N)`
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        in_channels: int,
        out_channels: int,
        *,
        gin_hidden: tuple[int, ...],
        num_conditions: int,
        common_neighbors: bool = False,
    ) -> None:
        super().__init__()
        self.common_neighbors = common_neighbors
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.gin = MultiChannelGIN(
            in_features, in_channels, gin_hidden, out_features, num_conditions=num_conditions
        )
        self.edge_mlp = ConditionalMLP(
            in_channels * (2 if common_neighbors else 1) + 2 * out_features,
            2 * max(in_channels, out_channels),
            out_channels,
            num_layers=3,
            num_conditions=num_conditions,
        )

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        """Re-initialise both halves from ``generator``."""
        self.gin.reset_parameters(generator)
        self.edge_mlp.reset_parameters(generator)

    def forward(
        self, x: torch.Tensor, adj: torch.Tensor, flags: torch.Tensor, cond: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Return the new node features and adjacency channels."""
        x = self.gin(x, adj, flags, cond)
        n = x.shape[1]
        x_u = x.unsqueeze(2).expand(-1, -1, n, -1)
        x_v = x.unsqueeze(1).expand(-1, n, -1, -1)
        channels = [adj] if not self.common_neighbors else [adj, torch.matmul(adj, adj)]
        pairs = torch.cat([*(c.permute(0, 2, 3, 1) for c in channels), x_u, x_v], dim=-1)
        edges = self.edge_mlp(pairs, cond).permute(0, 3, 1, 2)  # B x C_out x N x N
        edges = (edges + edges.transpose(-1, -2)) * pair_mask(flags).unsqueeze(1)
        return x, edges

    def __repr__(self) -> str:
        return (
            f"{self.__class__.__name__}({self.gin.in_features}, {self.gin.out_features}, "
            f"channels={self.in_channels}->{self.out_channels})"
        )
