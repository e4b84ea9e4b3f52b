"""Invariant checks shared by the partitioner tests (each one can fail)."""

from __future__ import annotations

from itertools import combinations

import torch

from securefg.data.partition import Partition


def assert_covers_all(partition: Partition) -> None:
    seen = torch.zeros(partition.num_items, dtype=torch.bool)
    for part in partition.parts():
        seen[part] = True
    missing = torch.nonzero(~seen).view(-1)
    assert missing.numel() == 0, f"items held by no client: {missing[:10].tolist()}"


def assert_pairwise_disjoint(partition: Partition) -> None:
    parts = [set(p.tolist()) for p in partition.parts()]
    for i, j in combinations(range(len(parts)), 2):
        shared = parts[i] & parts[j]
        assert not shared, f"clients {i} and {j} share {sorted(shared)[:10]}"
