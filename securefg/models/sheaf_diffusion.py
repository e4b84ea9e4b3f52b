"""Neural sheaf diffusion with diagonal restriction maps (Diag-NSD), for small dense graphs.

`Bodnar et al., "Neural Sheaf Diffusion", NeurIPS 2022 <https://arxiv.org/abs/2202.04579>`_, as
FedSheafHN (Eqs. 3-6) runs it on the server's collaboration graph of N clients. N is small (tens),
so the sheaf Laplacian is built dense, one ``(N, N)`` block per stalk coordinate: with diagonal
maps the coordinates never mix inside the Laplacian.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def diag_sheaf_laplacian(edge_index: torch.Tensor, maps: torch.Tensor, num_nodes: int) -> torch.Tensor:
    r"""The normalised sheaf Laplacian of diagonal restriction maps, one block per stalk dim.

    For a directed edge :math:`(u, v)` listed with its reverse, ``maps[e]`` is the diagonal of
    :math:`F_{u \trianglelefteq e}`. Eq. 3: :math:`L_{uu} = \sum_e F_{u}^2`,
    :math:`L_{uv} = -F_{u \trianglelefteq e} F_{v \trianglelefteq e}`; Eq. 4 normalises with
    :math:`(D + I)^{-1/2}` (NSD's augmented degree, finite for isolated nodes).

    Args:
        edge_index (torch.Tensor): ``(2, E)``, every edge in both directions.
        maps (torch.Tensor): ``(E, d)`` restriction map diagonals, row ``e`` for the source side.
        num_nodes (int): N.

    Returns:
        ``(d, N, N)`` symmetric positive semi-definite blocks.
    """
    src, dst = edge_index
    e, d = maps.shape
    key = src * num_nodes + dst
    rev = torch.full((num_nodes * num_nodes,), -1, dtype=torch.long, device=maps.device)
    rev[key] = torch.arange(e, device=maps.device)
    partner = rev[dst * num_nodes + src]
    if bool((partner < 0).any()):
        raise ValueError("diag_sheaf_laplacian needs every edge in both directions")
    off = maps * maps[partner]  # F_{u<e} * F_{v<e}, (E, d)
    lap = maps.new_zeros(d, num_nodes, num_nodes)
    lap[:, src, dst] = -off.t()
    diag = maps.new_zeros(d, num_nodes).index_add_(1, src, (maps * maps).t())
    lap = lap + torch.diag_embed(diag)
    norm = (diag + 1.0).rsqrt()
    return norm.unsqueeze(2) * lap * norm.unsqueeze(1)


class DiagSheafDiffusion(nn.Module):
    r"""Diag-NSD: ``layers`` steps of learned sheaf diffusion on node features.

    .. math::
        X_t = X_{t-1} - \mathrm{ELU}\big(\Delta_{F(t-1)} (I \otimes W_1^{(t-1)}) X_{t-1} W_2^{(t-1)}\big)

    with :math:`X \in \mathbb{R}^{N d \times c}` (``d`` stalk dims, ``c`` hidden channels) and the
    maps :math:`F_{u \trianglelefteq (u,v)} = \tanh(\mathrm{Linear}([x_u \| x_v]))` learned per layer
    from the current features (FedSheafHN Eq. 5; activation tanh as in its code).

    Args:
        in_channels (int): Input feature size (the client embedding size).
        out_channels (int): Output feature size (the hypernetwork's input).
        hidden_channels (int): ``c``. (default: ``20``)
        stalk_dim (int): ``d``. (default: ``1``)
        layers (int): ``T_s``. (default: ``4``)
        dropout (float): Dropout on features and map inputs. (default: ``0.3``)

    Shapes:
        - input: ``(N, in_channels)``, edge_index ``(2, E)`` (both directions)
        - output: ``(N, out_channels)``
    """

    def __init__(self, in_channels: int, out_channels: int, *, hidden_channels: int = 20, stalk_dim: int = 1,
                 layers: int = 4, dropout: float = 0.3) -> None:
        super().__init__()
        if min(in_channels, out_channels, hidden_channels, stalk_dim, layers) < 1:
            raise ValueError(
                f"DiagSheafDiffusion sizes must be positive, got in={in_channels}, out={out_channels}, "
                f"hidden={hidden_channels}, stalk_dim={stalk_dim}, layers={layers}"
            )
        self.d, self.c, self.dropout = stalk_dim, hidden_channels, dropout
        self.lin_in = nn.Linear(in_channels, hidden_channels * stalk_dim)
        self.map_learners = nn.ModuleList(nn.Linear(2 * hidden_channels * stalk_dim, stalk_dim) for _ in range(layers))
        self.left = nn.ParameterList(nn.Parameter(torch.eye(stalk_dim)) for _ in range(layers))
        self.right = nn.ModuleList(nn.Linear(hidden_channels, hidden_channels, bias=False) for _ in range(layers))
        self.lin_out = nn.Linear(hidden_channels * stalk_dim, out_channels)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        self.lin_in.reset_parameters()
        self.lin_out.reset_parameters()
        for m in self.map_learners:
            m.reset_parameters()
        for w in self.left:
            nn.init.eye_(w)
        for r in self.right:
            nn.init.eye_(r.weight)

    def restriction_maps(self, x: torch.Tensor, edge_index: torch.Tensor, layer: int) -> torch.Tensor:
        """``(E, d)`` map diagonals of layer ``layer`` from flat features ``x`` of shape ``(N, d c)``."""
        src, dst = edge_index
        return torch.tanh(self.map_learners[layer](torch.cat([x[src], x[dst]], dim=1)))

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        n = x.shape[0]
        x = F.dropout(x, self.dropout, self.training)
        h = F.elu(self.lin_in(x)).view(n, self.d, self.c)
        for t in range(len(self.map_learners)):
            flat = F.dropout(h.reshape(n, -1), self.dropout, self.training)
            lap = diag_sheaf_laplacian(edge_index, self.restriction_maps(flat, edge_index, t), n)  # (d, N, N)
            z = torch.einsum("ij,njc->nic", self.left[t], h)  # (I (x) W1) X
            z = self.right[t](z)  # X W2
            z = torch.einsum("inm,mic->nic", lap, z)  # Delta_F
            h = h - F.elu(z)
        return self.lin_out(h.reshape(n, -1))

    def __repr__(self) -> str:
        return (f"DiagSheafDiffusion({self.lin_in.in_features}, {self.lin_out.out_features}, hidden={self.c}, "
                f"stalk_dim={self.d}, layers={len(self.map_learners)})")
