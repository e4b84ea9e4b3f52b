"""Small deterministic graphs for the FedStruct tests."""

from __future__ import annotations

import torch
from torch import Tensor
from torch_geometric.utils import to_undirected


def random_graph(num_nodes: int, num_edges: int, seed: int) -> Tensor:
    """Seeded undirected edge list (both directions, no self-loops, no duplicates)."""
    g = torch.Generator().manual_seed(seed)
    ei = torch.randint(num_nodes, (2, num_edges), generator=g)
    ei = ei[:, ei[0] != ei[1]]
    return to_undirected(ei, num_nodes=num_nodes)
