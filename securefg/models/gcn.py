"""Two-layer GCN with a linear head, the node-classification backbone of the baselines.

Matches FED-PUB's reference model without masks (Baek et al., ICML 2023): ``conv1: d->h``,
ReLU, dropout, ``conv2: h->h``, ReLU, dropout, ``clsif: h->C``. GCNConv is PyG's
(symmetric normalisation with self-loops), normalising each graph once
(:mod:`securefg.models.gcn_conv`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from securefg.models.gcn_conv import GCNConv


class GCN(nn.Module):
    """GCN(d, h, C) with two graph convolutions and a linear classifier.

    Args:
        in_channels (int): Node feature size d.
        hidden_channels (int): Hidden size h. (default: ``128``)
        out_channels (int): Number of classes C.
        dropout (float): Dropout after each convolution. (default: ``0.5``)

    Shapes:
        - input: node features ``(N, d)``, edge_index ``(2, E)``
        - output: logits ``(N, C)``
    """

    def __init__(self, in_channels: int, out_channels: int, hidden_channels: int = 128, dropout: float = 0.5) -> None:
        super().__init__()
        if min(in_channels, hidden_channels, out_channels) < 1:
            raise ValueError(f"GCN sizes must be positive, got ({in_channels}, {hidden_channels}, {out_channels})")
        self.conv1 = GCNConv(in_channels, hidden_channels, cached=False)
        self.conv2 = GCNConv(hidden_channels, hidden_channels, cached=False)
        self.clsif = nn.Linear(hidden_channels, out_channels)
        self.dropout = dropout

    def reset_parameters(self) -> None:
        self.conv1.reset_parameters()
        self.conv2.reset_parameters()
        self.clsif.reset_parameters()

    def embed(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        """Output of ``conv2`` before its activation (FED-PUB's functional embedding)."""
        h = F.relu(self.conv1(x, edge_index))
        h = F.dropout(h, self.dropout, self.training)
        return self.conv2(h, edge_index)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        h = F.relu(self.embed(x, edge_index))
        h = F.dropout(h, self.dropout, self.training)
        return self.clsif(h)

    def __repr__(self) -> str:
        return f"GCN({self.conv1.in_channels}, {self.clsif.out_features}, hidden={self.conv1.out_channels})"
