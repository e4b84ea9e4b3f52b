"""Disjoint METIS partitioning (FED-PUB, FedSheafHN) through ``pymetis``."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import Tensor
from torch_geometric.data import Data
from torch_geometric.utils import remove_self_loops, to_undirected

from securefg.data.partition.base import Partitioner
from securefg.data.partition.partition import Partition
from securefg.errors import ConfigError, InvalidInputError


def undirected_csr(edge_index: Tensor, num_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """Return METIS's ``(xadj, adjncy)`` for the undirected, loop-free version of a graph.

    METIS requires both directions of every edge and no self-loops; PyG graphs may be directed
    (Geom-GCN sets) or carry self-loops, so both are normalised here.
    """
    ei, _ = remove_self_loops(edge_index)
    ei = to_undirected(ei, num_nodes=num_nodes)  # also sorts by (row, col) and de-duplicates
    xadj = np.zeros(num_nodes + 1, dtype=np.int64)
    np.cumsum(np.bincount(ei[0].numpy(), minlength=num_nodes), out=xadj[1:])
    return xadj, ei[1].numpy().astype(np.int64)


def metis_membership(
    edge_index: Tensor, num_nodes: int, *, num_parts: int, seed: int, recursive: bool = False
) -> Tensor:
    """Run METIS (k-way by default) with an explicit seed and return the part of every node.

    The reference code (``metispy.part_graph(G, K)``) uses k-way with METIS's default seed; we
    fix k-way and pass a seed through ``pymetis.Options``, so results are reproducible, but the
    exact parts can still differ from ``metispy``'s. METIS seeds its generator like C's
    ``srand``, where 0 and 1 give the same stream, so ``seed + 1`` is passed: every
    ``seed >= 0`` then gives its own partition.

    Raises:
        ConfigError: Negative seed.
        ImportError: ``pymetis`` is not installed.
    """
    if seed < 0:
        raise ConfigError(f"METIS seed must be >= 0, got {seed}")
    if num_parts == 1:
        return torch.zeros(num_nodes, dtype=torch.long)
    try:
        import pymetis
    except ImportError as exc:  # pragma: no cover - pymetis is a declared dependency
        raise ImportError("METIS partitioning needs the 'pymetis' package: pip install pymetis") from exc
    xadj, adjncy = undirected_csr(edge_index, num_nodes)
    options = pymetis.Options(seed=seed + 1)
    if hasattr(pymetis, "CSRAdjacency"):  # pymetis >= 2025.2; the xadj= form is deprecated there
        graph = pymetis.CSRAdjacency(xadj, adjncy)
        result = pymetis.part_graph(num_parts, graph, recursive=recursive, options=options)
    else:  # pragma: no cover - older pymetis
        result = pymetis.part_graph(num_parts, xadj=xadj, adjncy=adjncy, recursive=recursive, options=options)
    return torch.as_tensor(np.asarray(result.vertex_part), dtype=torch.long)


class MetisPartitioner(Partitioner):
    r"""Disjoint METIS partition into :obj:`num_parts` clients, one part per client.

    As in FED-PUB (`Baek et al., ICML 2023 <https://arxiv.org/abs/2206.10206>`_) and FedSheafHN:
    each client later takes the induced subgraph of its part and cut edges are dropped (see
    :func:`~securefg.data.partition.subgraphs.client_subgraphs`). The graph is made undirected
    and loop-free first; every part must be non-empty, as the reference code asserts.

    Args:
        num_parts (int): Number of clients :math:`K`.
        seed (int, optional): METIS seed. (default: :obj:`0`)
        recursive (bool, optional): Recursive bisection instead of k-way. (default: :obj:`False`)
    """

    name = "metis"

    def __init__(self, num_parts: int, *, seed: int = 0, recursive: bool = False) -> None:
        super().__init__(num_parts, seed=seed)
        self.recursive = bool(recursive)

    def params(self) -> dict[str, Any]:
        """Parameters that reproduce this partitioner."""
        return {**super().params(), "recursive": self.recursive}

    def __call__(self, data: Data) -> Partition:
        """Partition the nodes of ``data``.

        Raises:
            InvalidInputError: METIS left a part empty (too many parts for the graph).
        """
        n = int(data.num_nodes)
        if n < self.num_parts:
            raise InvalidInputError(f"cannot split {n} nodes into {self.num_parts} METIS parts")
        member = metis_membership(
            data.edge_index, n, num_parts=self.num_parts, seed=self.seed, recursive=self.recursive
        )
        sizes = torch.bincount(member, minlength=self.num_parts)
        if bool((sizes == 0).any()):
            raise InvalidInputError(
                f"METIS left {int((sizes == 0).sum())} of {self.num_parts} parts empty; use fewer parts"
            )
        return Partition.from_assignment(
            member, num_parts=self.num_parts, name=self.name, level="node", params=self.params()
        )
