"""The public node namespace FedStruct-B assumes (notes B0)."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

from securefg.errors import InvalidInputError


@dataclass(frozen=True)
class NodeDirectory:
    """Global node ids and their owners, known to every party.

    FedStruct-B assumes this agreement without a protocol (notes B0, B5.7): Ā's rows are indexed
    by *global* ids and Algorithm 3's messages to client i must share one row layout (``V_i`` in
    ascending global id) so that a masked peer-sum can add them. Holding it reveals every client's
    size and which ids it owns, but no edge.

    Args:
        owner (Tensor): ``[n]`` long tensor, ``owner[v]`` is the client holding node ``v``.
        num_clients (int): Number of clients ``K``; every id in ``owner`` is below it.
    """

    owner: Tensor
    num_clients: int
    _local_index: Tensor = field(init=False, repr=False, compare=False)
    _sizes: Tensor = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.owner.dim() != 1 or self.owner.dtype != torch.long:
            raise InvalidInputError(
                f"NodeDirectory.owner must be a 1-D torch.long tensor, got "
                f"{tuple(self.owner.shape)} {self.owner.dtype}"
            )
        if self.num_clients < 1:
            raise InvalidInputError(f"num_clients must be >= 1, got {self.num_clients}")
        if self.owner.numel() and (
            int(self.owner.min()) < 0 or int(self.owner.max()) >= self.num_clients
        ):
            raise InvalidInputError(
                f"owner ids must lie in [0, {self.num_clients}); raise num_clients or fix owner"
            )
        sizes = torch.bincount(self.owner, minlength=self.num_clients)
        # Rank of each node inside its owner's ascending id list.
        order = torch.argsort(self.owner * self.owner.numel() + torch.arange(self.owner.numel()))
        starts = torch.cumsum(sizes, 0) - sizes
        local = torch.empty_like(self.owner)
        local[order] = torch.arange(self.owner.numel()) - starts[self.owner[order]]
        object.__setattr__(self, "_local_index", local)
        object.__setattr__(self, "_sizes", sizes)

    @property
    def num_nodes(self) -> int:
        """Total node count ``n`` (the width of every Ā row)."""
        return int(self.owner.numel())

    def size_of(self, client: int) -> int:
        """Return ``n_i``, the number of nodes client ``client`` owns."""
        return int(self._sizes[client])

    def nodes_of(self, client: int) -> Tensor:
        """Return client ``client``'s global ids in ascending order (its row layout)."""
        return torch.nonzero(self.owner == client).flatten()

    def local_index(self, nodes: Tensor) -> Tensor:
        """Return each node's row position inside its owner's layout."""
        return self._local_index[nodes]

    def __repr__(self) -> str:
        return f"NodeDirectory(num_nodes={self.num_nodes}, num_clients={self.num_clients})"
