"""Deterministic synthetic graphs for the graph score model tests."""

from __future__ import annotations

import pytest
import torch
from torch_geometric.data import Data
from torch_geometric.utils import to_undirected


def cycle(n: int) -> Data:
    """The n-cycle."""
    src = torch.arange(n)
    return Data(edge_index=to_undirected(torch.stack([src, (src + 1) % n])), num_nodes=n)


def complete_bipartite(a: int, b: int) -> Data:
    """K_{a,b}: nodes 0..a-1 on one side, a..a+b-1 on the other."""
    left = torch.arange(a).repeat_interleave(b)
    right = torch.arange(a, a + b).repeat(a)
    return Data(edge_index=to_undirected(torch.stack([left, right])), num_nodes=a + b)


@pytest.fixture
def cycles() -> list[Data]:
    return [cycle(n) for n in (5, 6, 7, 8, 6, 7)]


@pytest.fixture
def bipartites() -> list[Data]:
    return [complete_bipartite(a, b) for a, b in ((2, 3), (3, 3), (2, 5), (3, 4), (2, 4), (4, 4))]


@pytest.fixture(autouse=True, scope="package")
def _one_thread():
    """These tensors are tiny: intra-op threads only add contention (10x slower on 2 busy cores)."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)
