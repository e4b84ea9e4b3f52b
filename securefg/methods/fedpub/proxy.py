"""FED-PUB's proxy graph, rebuilt by every client from a public seed.

The paper's server draws one random graph (a stochastic block model, 5 blocks of 100 nodes,
p_in = 0.1, p_out = 0.01, features N(0, 1)) and ships it to every client, which feeds it through
its model to get a *functional embedding*. Shipping it costs 500 x d floats per client and lets a
malicious server craft it (e.g. one node per feature to read weights). Here no party ships it:
each client derives the identical graph from the public ``(seed, d)`` alone, so it depends on no
party's data and carries no message (notes A5, decision 3).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch_geometric.utils import stochastic_blockmodel_graph

from securefg.errors import ConfigError


@dataclass(frozen=True)
class ProxySpec:
    """Public parameters of the proxy graph.

    Args:
        seed (int): Public seed every client uses.
        blocks (int): Number of SBM blocks. (default: ``5``)
        block_size (int): Nodes per block. (default: ``100``)
        p_in (float): Edge probability inside a block. (default: ``0.1``)
        p_out (float): Edge probability across blocks (the paper's 0.01; the reference code 0).
            (default: ``0.01``)
    """

    seed: int
    blocks: int = 5
    block_size: int = 100
    p_in: float = 0.1
    p_out: float = 0.01

    def __post_init__(self) -> None:
        if self.blocks < 1 or self.block_size < 1:
            raise ConfigError(f"proxy graph needs >= 1 block of >= 1 node, got {self.blocks} x {self.block_size}")
        for name in ("p_in", "p_out"):
            p = getattr(self, name)
            if not 0.0 <= p <= 1.0:
                raise ConfigError(f"proxy graph {name} must lie in [0, 1], got {p!r}")


def proxy_graph(spec: ProxySpec, num_features: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(x, edge_index)`` of the proxy graph: the same tensors for every caller with ``spec, d``.

    Drawn on the CPU under a private copy of torch's RNG state, so neither the caller's random
    stream nor the device changes the graph.
    """
    if num_features < 1:
        raise ConfigError(f"proxy graph needs a positive feature size, got {num_features}")
    probs = torch.full((spec.blocks, spec.blocks), spec.p_out)
    probs.fill_diagonal_(spec.p_in)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(spec.seed)
        edge_index = stochastic_blockmodel_graph([spec.block_size] * spec.blocks, probs)
        x = torch.randn(spec.blocks * spec.block_size, num_features)
    return x, edge_index
