"""GraphSage's neighbour sampling: a mini-batch of target nodes and a few sampled in-neighbours per hop.

Why: the FedSage paper trains its owners' GraphSage on mini-batches (batch 64, 5 + 5 sampled
neighbours: many small steps per epoch), where full-batch training takes one step per epoch.
PyG's ``NeighborLoader`` does this but needs ``pyg-lib`` or ``torch-sparse``, neither of which
installs beside the CPU torch this project pins; this is the same sampling (uniform, without
replacement, each hop expanding only the nodes the previous hop added, the union of the sampled
edges as one subgraph) in a few vectorised torch operations.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from securefg.errors import ConfigError


@dataclass(frozen=True)
class InNeighbours:
    """Each node's in-neighbours (the sources of the edges into it) as CSR: ``col[rowptr[v]:rowptr[v+1]]``."""

    rowptr: Tensor
    col: Tensor

    @classmethod
    def of(cls, edge_index: Tensor, num_nodes: int) -> InNeighbours:
        """From a PyG ``edge_index`` (row 0 sends, row 1 receives, as message passing reads it)."""
        src, dst = edge_index[0], edge_index[1]
        order = torch.argsort(dst * num_nodes + src)
        counts = torch.bincount(dst, minlength=num_nodes)
        rowptr = torch.zeros(num_nodes + 1, dtype=torch.long, device=edge_index.device)
        rowptr[1:] = torch.cumsum(counts, 0)
        return cls(rowptr=rowptr, col=src[order])

    @property
    def num_nodes(self) -> int:
        return self.rowptr.numel() - 1


@dataclass(frozen=True)
class SampledBlock:
    """A sampled computation graph: ``nodes`` (global ids, the targets first) and its edges in local ids."""

    nodes: Tensor
    edge_index: Tensor
    num_targets: int


def parse_fanouts(text: object, layers: int) -> tuple[int, ...]:
    """``"5,5"`` -> ``(5, 5)``; ``""`` -> ``()`` (full batch). One positive count per layer.

    Raises:
        ConfigError: Not a comma-separated list of positive integers, or not one per layer.
    """
    if isinstance(text, (list, tuple)):
        parts = [str(p) for p in text]
    else:
        parts = [p for p in str(text).replace(" ", "").split(",") if p]
    if not parts:
        return ()
    try:
        counts = tuple(int(p) for p in parts)
    except ValueError:
        raise ConfigError(f"fanouts must be comma-separated positive integers such as '5,5', got {text!r}") from None
    if any(c < 1 for c in counts):
        raise ConfigError(f"fanouts must be positive, got {text!r}")
    if len(counts) != layers:
        raise ConfigError(f"fanouts needs one count per GNN layer ({layers}), got {len(counts)} in {text!r}")
    return counts


def sample_block(adj: InNeighbours, targets: Tensor, fanouts: Sequence[int], generator: torch.Generator) -> SampledBlock:
    """Sample up to ``fanouts[h]`` in-neighbours (uniformly, without replacement) of the nodes hop ``h`` added.

    Hop 0 expands ``targets``; each later hop expands only the nodes first seen in the hop
    before. The block holds every sampled edge, so a 2-layer GNN on it sees at each target
    exactly its sampled 2-hop tree (merged where the trees share nodes), as PyG's NeighborLoader.
    """
    device = targets.device
    n = adj.num_nodes
    local = torch.full((n,), -1, dtype=torch.long, device=device)
    local[targets] = torch.arange(targets.numel(), device=device)
    nodes, frontier = [targets], targets
    sources, receivers = [], []
    count = targets.numel()
    for k in fanouts:
        start = adj.rowptr[frontier]
        degree = adj.rowptr[frontier + 1] - start
        total = int(degree.sum())
        if total == 0:
            break
        segment = torch.repeat_interleave(torch.arange(frontier.numel(), device=device), degree)
        first = torch.cumsum(degree, 0) - degree
        edge = start[segment] + torch.arange(total, device=device) - first[segment]
        keys = torch.rand(total, generator=generator, dtype=torch.float64).to(device)
        order = torch.argsort(segment.to(torch.float64) + keys)  # by segment, random within it
        rank = torch.empty_like(order)
        rank[order] = torch.arange(total, device=device) - first[segment[order]]
        keep = rank < k
        src, dst = adj.col[edge[keep]], frontier[segment[keep]]
        new = torch.unique(src[local[src] < 0])
        local[new] = torch.arange(count, count + new.numel(), device=device)
        count += new.numel()
        nodes.append(new)
        sources.append(src)
        receivers.append(dst)
        frontier = new
        if frontier.numel() == 0:
            break
    if sources:
        edge_index = torch.stack([local[torch.cat(sources)], local[torch.cat(receivers)]])
    else:
        edge_index = torch.empty((2, 0), dtype=torch.long, device=device)
    return SampledBlock(nodes=torch.cat(nodes), edge_index=edge_index, num_targets=targets.numel())
