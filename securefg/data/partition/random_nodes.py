"""Uniformly random node assignment (FedStruct's main setting, FED-PUB Table 7)."""

from __future__ import annotations

import torch
from torch_geometric.data import Data

from securefg.data.partition.base import Partitioner
from securefg.data.partition.partition import Partition


class RandomPartitioner(Partitioner):
    r"""Assign every node to a client independently and uniformly at random.

    FedStruct (`Aliakbari et al. <https://arxiv.org/abs/2402.19163>`_) calls this the hardest
    setting: labels are i.i.d. across clients but most edges cross clients (a node keeps
    about :math:`1/K` of its neighbours). Client sizes are multinomial, not exactly equal,
    as in the reference ``np.random.choice``.

    Args:
        num_parts (int): Number of clients :math:`K`.
        seed (int, optional): Seed of the draw. (default: :obj:`0`)
    """

    name = "random"
    uses = ()

    def __init__(self, num_parts: int, *, seed: int = 0) -> None:
        super().__init__(num_parts, seed=seed)

    def __call__(self, data: Data) -> Partition:
        """Partition the nodes of ``data``."""
        gen = torch.Generator().manual_seed(self.seed)
        assignment = torch.randint(self.num_parts, (int(data.num_nodes),), generator=gen)
        return Partition.from_assignment(
            assignment, num_parts=self.num_parts, name=self.name, level="node", params=self.params()
        )
