"""GIN for graph classification (Xu et al., ICLR 2019), the CeFGC/GCFL backbone.

Three GINConv layers (2-layer MLPs), mean pooling, a 2-layer head, dropout. No BatchNorm, so
every parameter is a plain float tensor that aggregates (and encrypts) cleanly.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch_geometric.nn import GINConv, global_add_pool, global_mean_pool


class GIN(nn.Module):
    """GIN(d, C) graph classifier.

    Args:
        in_channels (int): Node feature size d.
        out_channels (int): Number of classes C.
        hidden_channels (int): Hidden size. (default: ``32``)
        num_layers (int): Number of GIN layers. (default: ``3``)
        dropout (float): Dropout before the head. (default: ``0.5``)
        pooling (str): ``"mean"`` (CeFGC paper) or ``"sum"`` (GCFL code). (default: ``"mean"``)

    Shapes:
        - input: ``x (N, d)``, ``edge_index (2, E)``, ``batch (N,)``
        - output: logits ``(B, C)``
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        hidden_channels: int = 32,
        num_layers: int = 3,
        dropout: float = 0.5,
        pooling: str = "mean",
    ) -> None:
        super().__init__()
        if pooling not in ("mean", "sum"):
            raise ValueError(f"GIN pooling must be 'mean' or 'sum', got {pooling!r}")
        if num_layers < 1:
            raise ValueError(f"GIN needs at least one layer, got {num_layers}")
        self.convs = nn.ModuleList()
        dims = [in_channels] + [hidden_channels] * num_layers
        for a, b in zip(dims[:-1], dims[1:]):
            mlp = nn.Sequential(nn.Linear(a, b), nn.ReLU(), nn.Linear(b, b))
            self.convs.append(GINConv(mlp, train_eps=False))
        self.head = nn.Sequential(
            nn.Linear(hidden_channels, hidden_channels), nn.ReLU(), nn.Linear(hidden_channels, out_channels)
        )
        self.dropout = dropout
        self.pool = global_mean_pool if pooling == "mean" else global_add_pool
        self.in_channels, self.out_channels = in_channels, out_channels

    def reset_parameters(self) -> None:
        for m in self.modules():
            if isinstance(m, nn.Linear):
                m.reset_parameters()

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor, batch: torch.Tensor) -> torch.Tensor:
        for conv in self.convs:
            x = F.relu(conv(x, edge_index))
        g = self.pool(x, batch)
        g = F.dropout(g, self.dropout, self.training)
        return self.head(g)

    def __repr__(self) -> str:
        return f"GIN({self.in_channels}, {self.out_channels}, layers={len(self.convs)})"
