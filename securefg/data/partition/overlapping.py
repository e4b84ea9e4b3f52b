"""FED-PUB's overlapping scheme: METIS communities, several random half-samples per community."""

from __future__ import annotations

from typing import Any

import torch
from torch_geometric.data import Data

from securefg.data.partition.base import Partitioner
from securefg.data.partition.metis import metis_membership
from securefg.data.partition.partition import Partition
from securefg.errors import ConfigError, InvalidInputError


class OverlappingMetisPartitioner(Partitioner):
    r"""Overlapping partition of FED-PUB / FedSheafHN (K = 10, 30, 50 from 2, 6, 10 communities).

    METIS splits the graph into ``num_parts / clients_per_part`` communities. For every
    community, ``clients_per_part`` clients each draw ``floor(sample_ratio * size)`` of its nodes
    uniformly without replacement, independently of each other; client ids are
    ``community * clients_per_part + j``, so communities are contiguous id blocks.
    Two clients of one community share about ``sample_ratio**2`` (25%) of its nodes.

    The reference code draws with Python's ``random.sample`` seeded 1234; we draw with a
    ``torch.Generator`` seeded by :obj:`seed`, so the samples differ but follow the same law.

    Args:
        num_parts (int): Number of clients :math:`K` (a multiple of :obj:`clients_per_part`).
        seed (int, optional): Seed of METIS and of the samples. (default: :obj:`0`)
        clients_per_part (int, optional): Clients per METIS community. (default: :obj:`5`)
        sample_ratio (float, optional): Fraction of the community each client draws.
            (default: :obj:`0.5`)
    """

    name = "metis_overlap"

    def __init__(
        self, num_parts: int, *, seed: int = 0, clients_per_part: int = 5, sample_ratio: float = 0.5
    ) -> None:
        super().__init__(num_parts, seed=seed)
        if clients_per_part < 1 or num_parts % clients_per_part:
            raise ConfigError(
                f"OverlappingMetisPartitioner needs num_parts ({num_parts}) to be a multiple of "
                f"clients_per_part ({clients_per_part})"
            )
        if not 0.0 < sample_ratio <= 1.0:
            raise ConfigError(f"sample_ratio must be in (0, 1], got {sample_ratio}")
        self.clients_per_part = int(clients_per_part)
        self.sample_ratio = float(sample_ratio)

    @property
    def num_communities(self) -> int:
        """Number of METIS communities, ``num_parts / clients_per_part``."""
        return self.num_parts // self.clients_per_part

    def params(self) -> dict[str, Any]:
        """Parameters that reproduce this partitioner."""
        return {
            **super().params(),
            "clients_per_part": self.clients_per_part,
            "sample_ratio": self.sample_ratio,
        }

    def __call__(self, data: Data) -> Partition:
        """Partition the nodes of ``data`` into overlapping client sets.

        Raises:
            InvalidInputError: METIS left a community empty.
        """
        n = int(data.num_nodes)
        member = metis_membership(data.edge_index, n, num_parts=self.num_communities, seed=self.seed)
        gen = torch.Generator().manual_seed(self.seed)
        parts = []
        for comm in range(self.num_communities):
            nodes = torch.nonzero(member == comm).view(-1)
            if nodes.numel() == 0:
                raise InvalidInputError(f"METIS left community {comm} empty; use fewer parts")
            take = int(self.sample_ratio * nodes.numel())
            for _ in range(self.clients_per_part):
                parts.append(nodes[torch.randperm(nodes.numel(), generator=gen)[:take]])
        return Partition.from_parts(parts, num_items=n, name=self.name, level="node", params=self.params())
