"""FedStruct's random node partition and per-client 10/10/80 split (notes B1)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from securefg.errors import InvalidInputError


@dataclass(frozen=True)
class NodeSplit:
    """Boolean ``[n]`` train/val/test masks; pairwise disjoint and covering every node."""

    train: Tensor
    val: Tensor
    test: Tensor


def random_node_partition(
    num_nodes: int, num_clients: int, *, generator: torch.Generator | None = None
) -> Tensor:
    """Give every node to a client uniformly at random ("the most challenging" setting).

    Returns:
        Tensor: ``[n]`` long owner ids in ``[0, num_clients)``.
    """
    if num_clients < 1 or num_nodes < 1:
        raise InvalidInputError(
            f"need num_nodes >= 1 and num_clients >= 1, got {num_nodes}, {num_clients}"
        )
    return torch.randint(num_clients, (num_nodes,), generator=generator)


def random_node_split(
    owner: Tensor,
    *,
    train_ratio: float = 0.1,
    val_ratio: float = 0.1,
    generator: torch.Generator | None = None,
) -> NodeSplit:
    """Split each client's nodes ``train_ratio / val_ratio / rest`` at random.

    Per client rather than globally, so every client holds labelled nodes Ṽ_i; counts are
    ``round(ratio * n_i)``.
    """
    if train_ratio < 0 or val_ratio < 0 or train_ratio + val_ratio > 1:
        raise InvalidInputError(
            f"ratios must be >= 0 with train + val <= 1, got {train_ratio}, {val_ratio}"
        )
    n = owner.numel()
    train = torch.zeros(n, dtype=torch.bool)
    val = torch.zeros(n, dtype=torch.bool)
    for k in torch.unique(owner).tolist():
        nodes = torch.nonzero(owner == k).flatten()
        nodes = nodes[torch.randperm(nodes.numel(), generator=generator)]
        n_tr = round(train_ratio * nodes.numel())
        n_va = round(val_ratio * nodes.numel())
        train[nodes[:n_tr]] = True
        val[nodes[n_tr:n_tr + n_va]] = True
    return NodeSplit(train, val, ~(train | val))
