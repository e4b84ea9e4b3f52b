"""Louvain community partitioning with FedSage's size balancing (FedSage, FedStruct App. K)."""

from __future__ import annotations

from typing import Any

import networkx as nx
import torch
from torch_geometric.data import Data
from torch_geometric.utils import remove_self_loops, to_undirected

from securefg.data.partition.balance import greedy_merge, rebalance_labels, split_oversized
from securefg.data.partition.base import Partitioner
from securefg.data.partition.partition import Partition
from securefg.errors import ConfigError


class LouvainPartitioner(Partitioner):
    r"""Louvain communities merged into :obj:`num_parts` clients of similar size.

    The recipe of FedSage (`Zhang et al., NeurIPS 2021 <https://arxiv.org/abs/2106.13430>`_,
    code ``louvain_networkx.py``) with :math:`n` nodes and :math:`M` clients:

    1. Louvain on the undirected graph (``networkx.community.louvain_communities``, seeded).
    2. Cut communities larger than :math:`\lfloor n/M \rfloor - \delta` into chunks of that size.
    3. Largest first, merge communities greedily into clients of about :math:`\lfloor n/M
       \rfloor` nodes, never exceeding it by :math:`\delta` where possible
       (:func:`~securefg.data.partition.balance.greedy_merge`).
    4. Move nodes so each client holds at least :obj:`min_per_class` nodes of every class
       (:func:`~securefg.data.partition.balance.rebalance_labels`; needs ``data.y``).

    FedSage used ``python-louvain``'s ``best_partition`` with no fixed seed; communities here
    come from networkx's implementation, so they match in law, not node for node.

    Args:
        num_parts (int): Number of clients :math:`M`.
        seed (int, optional): Louvain seed. (default: :obj:`0`)
        delta (int, optional): Size tolerance :math:`\delta`. (default: :obj:`20`)
        min_per_class (int, optional): Label rebalancing floor; 0 disables step 4.
            (default: :obj:`2`)
        resolution (float, optional): Louvain modularity resolution. (default: :obj:`1.0`)
    """

    name = "louvain"
    uses = ("edge_index", "y")

    def __init__(
        self,
        num_parts: int,
        *,
        seed: int = 0,
        delta: int = 20,
        min_per_class: int = 2,
        resolution: float = 1.0,
    ) -> None:
        super().__init__(num_parts, seed=seed)
        if delta < 0 or min_per_class < 0:
            raise ConfigError(
                f"LouvainPartitioner needs delta >= 0 and min_per_class >= 0, got {delta}, {min_per_class}"
            )
        self.delta = int(delta)
        self.min_per_class = int(min_per_class)
        self.resolution = float(resolution)

    def params(self) -> dict[str, Any]:
        """Parameters that reproduce this partitioner."""
        return {
            **super().params(),
            "delta": self.delta,
            "min_per_class": self.min_per_class,
            "resolution": self.resolution,
        }

    def communities(self, data: Data) -> list[torch.Tensor]:
        """Step 1 alone: Louvain communities as sorted node-id tensors (sorted by smallest id)."""
        n = int(data.num_nodes)
        ei, _ = remove_self_loops(to_undirected(data.edge_index, num_nodes=n))
        graph = nx.Graph()
        graph.add_nodes_from(range(n))
        graph.add_edges_from(ei.t().tolist())
        comms = nx.community.louvain_communities(graph, resolution=self.resolution, seed=self.seed)
        groups = [torch.tensor(sorted(c), dtype=torch.long) for c in comms]
        return sorted(groups, key=lambda g: int(g[0]))

    def __call__(self, data: Data) -> Partition:
        """Partition the nodes of ``data``."""
        n = int(data.num_nodes)
        if n < self.num_parts:
            raise ConfigError(f"cannot split {n} nodes into {self.num_parts} clients")
        target = n // self.num_parts
        groups = split_oversized(self.communities(data), target - self.delta)
        assignment = torch.empty(n, dtype=torch.long)
        for k, items in enumerate(greedy_merge(groups, self.num_parts, target=target, delta=self.delta)):
            assignment[items] = k
        if self.min_per_class and data.y is not None:
            assignment = rebalance_labels(
                assignment, data.y.view(-1), num_parts=self.num_parts, min_per_class=self.min_per_class
            )
        return Partition.from_assignment(
            assignment, num_parts=self.num_parts, name=self.name, level="node", params=self.params()
        )
