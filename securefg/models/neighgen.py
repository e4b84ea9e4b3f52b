r"""NeighGen, FedSage+'s missing-neighbour generator (`Zhang et al., NeurIPS 2021
<https://arxiv.org/abs/2106.13430>`_, §5.1).

An encoder :math:`H^e` (two GraphSage layers) embeds each node of an owner's graph; the degree
generator dGen regresses how many neighbours the node misses, and the feature generator fGen
emits :obj:`num_pred` candidate feature vectors for them:

.. math::
    z_v = H^e(\bar{G}(v)), \qquad
    \tilde{n}_v = \mathrm{ReLU}(\theta^{d\top} z_v), \qquad
    \tilde{x}_v = \tanh\big(\mathrm{MLP}_{\theta^f}(z_v + \epsilon)\big), \ \epsilon \sim N(0, I)

Widths follow the official code (encoder 32 -> latent 128; fGen 256 -> :obj:`gen_hidden` ->
``num_pred * d``) except :obj:`gen_hidden`, which the code fixes at 2048 (see docs/fedsage.md).

Shapes:
    - **input:** features :math:`(n, d)`, edge index :math:`(2, |E|)`
    - **output of** :meth:`embed`: :math:`(n, \ell)`; :meth:`degrees`: :math:`(n,)`;
      :meth:`features`: :math:`(b, P, d)` for :math:`b` embeddings
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch_geometric.nn import SAGEConv

from securefg.models.sage import SparseInputSAGEConv


class NeighGen(nn.Module):
    r"""Encoder + dGen + fGen.

    Args:
        in_channels (int): Feature size :math:`d`.
        num_pred (int): Generated neighbours per node :math:`P` (at most). (default: ``5``)
        hidden (int): Encoder hidden width. (default: ``32``)
        latent (int): Embedding width :math:`\ell`. (default: ``128``)
        gen_hidden (int): fGen's second hidden width. (default: ``256``)
        dropout (float): fGen dropout before its output layer. (default: ``0.5``)
    """

    def __init__(self, in_channels: int, *, num_pred: int = 5, hidden: int = 32, latent: int = 128,
                 gen_hidden: int = 256, dropout: float = 0.5) -> None:
        super().__init__()
        if in_channels < 1 or num_pred < 1 or min(hidden, latent, gen_hidden) < 1 or not 0.0 <= dropout < 1.0:
            raise ValueError(f"NeighGen needs positive sizes and 0 <= dropout < 1, got in_channels={in_channels}, "
                             f"num_pred={num_pred}, hidden={hidden}, latent={latent}, gen_hidden={gen_hidden}, "
                             f"dropout={dropout}")
        self.in_channels, self.num_pred = in_channels, num_pred
        # PyG's SAGEConv; reads a large sparse feature matrix (Coauthor-CS) as sparse (models/sage.py)
        self.enc1 = SparseInputSAGEConv(in_channels, hidden)
        self.enc2 = SAGEConv(hidden, latent)
        self.dgen = nn.Linear(latent, 1)
        self.fgen = nn.Sequential(
            nn.Linear(latent, 256), nn.ReLU(), nn.Linear(256, gen_hidden), nn.ReLU(), nn.Dropout(dropout),
            nn.Linear(gen_hidden, num_pred * in_channels), nn.Tanh(),
        )

    def reset_parameters(self) -> None:
        for m in self.modules():
            if m is not self and hasattr(m, "reset_parameters"):
                m.reset_parameters()

    def embed(self, x: Tensor, edge_index: Tensor) -> Tensor:
        """Node embeddings :math:`z` (ReLU output, as the reference encoder)."""
        h = torch.relu(self.enc1(x, edge_index))
        return torch.relu(self.enc2(h, edge_index))

    def degrees(self, z: Tensor) -> Tensor:
        """Predicted missing-neighbour counts :math:`\tilde{n}` (real-valued, >= 0)."""
        return torch.relu(self.dgen(z)).view(-1)

    def features(self, z: Tensor, noise: Tensor) -> Tensor:
        """:math:`P` generated neighbour features per embedding, ``(b, P, d)``."""
        if noise.shape != z.shape:
            raise ValueError(f"NeighGen.features: noise of shape {tuple(noise.shape)} for embeddings {tuple(z.shape)}")
        return self.fgen(z + noise).view(z.size(0), self.num_pred, self.in_channels)

    def generator_parameters(self) -> list[nn.Parameter]:
        """fGen's parameters: the only ones the federated phase trains (as the reference code)."""
        return list(self.fgen.parameters())

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.in_channels}, num_pred={self.num_pred})"
