"""FedSheafHN's attention hypernetwork: client features in, every client's GCN weights out.

FedSheafHN Eqs. 7-8 (`Liang et al. <https://arxiv.org/abs/2405.16056>`_): an attention layer
mixes the N clients' diffused features, then an MLP maps each row to that client's generated
parameters. As in the reference code, the attention is a learnable ``(N, N)`` matrix initialised
to the identity (so client i starts from its own features) and applied as ``A X``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch
import torch.nn.functional as F
from torch import nn


class AttentionHypernetwork(nn.Module):
    r"""``H(X) = MLP(A_{att} X)``, one row of generated parameters per client.

    .. math::
        \tilde\Omega = W_3\,\mathrm{drop}(\mathrm{ReLU}(W_2\,\mathrm{drop}(\mathrm{ReLU}(W_1 A_{att} X))))

    Args:
        num_clients (int): N (the attention matrix is ``N x N``).
        in_channels (int): Feature size of each client row.
        target_shapes (Mapping[str, tuple[int, ...]]): Name and shape of every generated
            tensor; their sizes sum to :math:`|\tilde\omega|`.
        hidden_channels (int): MLP width ``h``. (default: ``64``)
        dropout (float): Dropout after each hidden layer. (default: ``0.3``)
        base (torch.Tensor, optional): ``(|omega~|,)`` initial output bias: what every client gets
            before anything is learned (e.g. the standard initialisation of the target model).
            With it the output weight starts ``output_scale`` times PyTorch's default, so the
            generated weights start at ``base`` plus a small per-client term. (default: :obj:`None`)
        output_scale (float): Scale of the initial output weight when ``base`` is given.
            (default: ``0.01``)

    Shapes:
        - input: ``(N, in_channels)``
        - output: ``(N, |omega~|)`` from :meth:`forward`; :meth:`split` turns a row into tensors.
    """

    def __init__(self, num_clients: int, in_channels: int, target_shapes: Mapping[str, tuple[int, ...]], *,
                 hidden_channels: int = 64, dropout: float = 0.3, base: torch.Tensor | None = None,
                 output_scale: float = 0.01) -> None:
        super().__init__()
        if min(num_clients, in_channels, hidden_channels) < 1 or not target_shapes:
            raise ValueError(
                f"AttentionHypernetwork needs positive sizes and at least one target, got N={num_clients}, "
                f"in={in_channels}, hidden={hidden_channels}, targets={dict(target_shapes)}"
            )
        self.shapes = {k: tuple(v) for k, v in target_shapes.items()}
        self.sizes = [math.prod(s) for s in self.shapes.values()]
        self.attention = nn.Parameter(torch.eye(num_clients))
        self.mlp = nn.Sequential(nn.Linear(in_channels, hidden_channels), nn.Linear(hidden_channels, hidden_channels))
        self.out = nn.Linear(hidden_channels, sum(self.sizes))
        self.dropout = dropout
        if base is not None:
            if base.shape != (self.num_outputs,):
                raise ValueError(f"AttentionHypernetwork base must have shape ({self.num_outputs},), got {tuple(base.shape)}")
            with torch.no_grad():
                self.out.bias.copy_(base)
                self.out.weight.mul_(output_scale)

    @property
    def num_outputs(self) -> int:
        return sum(self.sizes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[0] != self.attention.shape[0]:
            raise ValueError(f"AttentionHypernetwork was built for {self.attention.shape[0]} clients, got {x.shape[0]} rows")
        h = self.attention @ x
        for lin in self.mlp:
            h = F.dropout(F.relu(lin(h)), self.dropout, self.training)
        return self.out(h)

    def split(self, row: torch.Tensor) -> dict[str, torch.Tensor]:
        """One client's flat row as its named tensors."""
        return {k: v.view(s) for (k, s), v in zip(self.shapes.items(), torch.split(row, self.sizes))}

    def __repr__(self) -> str:
        return (f"AttentionHypernetwork(clients={self.attention.shape[0]}, in={self.mlp[0].in_features}, "
                f"hidden={self.out.in_features}, outputs={self.num_outputs})")
