r"""Graph-mending simulation (FedSage+ §5.1.2): an owner hides some of its own nodes.

Owner :math:`i` hides a random share :math:`h` of its nodes :math:`V_i^h` with their edges,
keeping :math:`\bar{G}_i`. For a kept node :math:`v` the targets are the number of hidden
neighbours :math:`n_v = |N_{G_i}(v) \cap V_i^h|` and their features. NeighGen learns, on this
impaired graph, to predict what a node misses, then runs on the whole :math:`G_i` to predict
the neighbours held by other owners. Everything here runs as the owner, on its own graph.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor
from torch_geometric.data import Data
from torch_geometric.utils import subgraph

from securefg.errors import ConfigError


@dataclass
class ImpairedGraph:
    """An owner's impaired graph and its NeighGen targets.

    Args:
        x (Tensor): Features of the kept nodes, ``(n_kept, d)``.
        edge_index (Tensor): Edges among kept nodes (relabelled).
        kept (Tensor): Local ids (in :math:`G_i`) of the kept nodes.
        hidden (Tensor): Local ids of the hidden nodes.
        missing (Tensor): :math:`n_v` per kept node (float).
        neigh_ptr (Tensor): CSR offsets into :obj:`neigh_idx`, ``(n_kept + 1,)``.
        neigh_idx (Tensor): Local ids (in :math:`G_i`) of each kept node's hidden neighbours.
    """

    x: Tensor
    edge_index: Tensor
    kept: Tensor
    hidden: Tensor
    missing: Tensor
    neigh_ptr: Tensor
    neigh_idx: Tensor

    @property
    def with_missing(self) -> Tensor:
        """Kept nodes (impaired ids) that miss at least one neighbour."""
        return (self.missing > 0).nonzero().view(-1)

    def to(self, device: torch.device) -> ImpairedGraph:
        return ImpairedGraph(*(getattr(self, f).to(device) for f in self.__dataclass_fields__))


def impair(data: Data, hide_portion: float, generator: torch.Generator) -> ImpairedGraph:
    """Hide ``round(hide_portion * n)`` random nodes of ``data`` (at least one, never all).

    Raises:
        ConfigError: ``hide_portion`` outside ``(0, 1)`` or a graph with fewer than two nodes.
    """
    n = int(data.num_nodes)
    if not 0.0 < hide_portion < 1.0:
        raise ConfigError(f"hide_portion must lie in (0, 1), got {hide_portion!r}")
    if n < 2:
        raise ConfigError(f"an owner needs at least 2 nodes to hide some, got {n}")
    k = min(max(1, round(hide_portion * n)), n - 1)
    perm = torch.randperm(n, generator=generator)
    hidden, kept = perm[:k].sort().values, perm[k:].sort().values
    ei = data.edge_index.cpu()
    is_hidden = torch.zeros(n, dtype=torch.bool)
    is_hidden[hidden] = True
    kept_pos = torch.full((n,), -1, dtype=torch.long)
    kept_pos[kept] = torch.arange(kept.numel())
    src, dst = ei
    to_hidden = ~is_hidden[src] & is_hidden[dst]  # (kept v, hidden u), each direction listed once per edge
    pairs = torch.stack([kept_pos[src[to_hidden]], dst[to_hidden]])
    pairs = torch.unique(pairs, dim=1)
    order = torch.argsort(pairs[0] * n + pairs[1])
    pairs = pairs[:, order]
    missing = torch.bincount(pairs[0], minlength=kept.numel())
    ptr = torch.zeros(kept.numel() + 1, dtype=torch.long)
    ptr[1:] = missing.cumsum(0)
    sub_ei, _ = subgraph(kept, ei, relabel_nodes=True, num_nodes=n)
    return ImpairedGraph(x=data.x.cpu()[kept], edge_index=sub_ei, kept=kept, hidden=hidden,
                         missing=missing.float(), neigh_ptr=ptr, neigh_idx=pairs[1])


def hidden_neighbour_block(graph: ImpairedGraph, x_full: Tensor, nodes: Tensor, max_neighbours: int,
                           generator: torch.Generator) -> tuple[Tensor, Tensor]:
    """True hidden neighbours' features of ``nodes`` (impaired ids), padded: ``(b, K, d)`` and
    a validity mask ``(b, K)``. Nodes with more than ``max_neighbours`` keep a random subset."""
    ptr, idx = graph.neigh_ptr.cpu(), graph.neigh_idx.cpu()
    rows = []
    for v in nodes.cpu().tolist():
        nb = idx[ptr[v]:ptr[v + 1]]
        if nb.numel() > max_neighbours:
            nb = nb[torch.randperm(nb.numel(), generator=generator)[:max_neighbours]]
        rows.append(nb)
    k = max((r.numel() for r in rows), default=0)
    k = max(k, 1)
    index = torch.zeros(len(rows), k, dtype=torch.long)
    mask = torch.zeros(len(rows), k, dtype=torch.bool)
    for i, r in enumerate(rows):
        index[i, : r.numel()] = r
        mask[i, : r.numel()] = True
    dev = x_full.device
    return x_full[index.to(dev)], mask.to(dev)
