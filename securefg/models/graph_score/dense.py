"""Conversion between PyG graphs and padded dense adjacency batches."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeAlias

import torch
from torch_geometric.data import Data

from securefg.errors import InvalidInputError

GraphLike: TypeAlias = Data | tuple[torch.Tensor, int]


@dataclass(frozen=True)
class DenseGraphBatch:
    """Graphs as a padded dense batch, plus which inputs were left out and why.

    Attributes:
        adj (torch.Tensor): :math:`(B, N_{max}, N_{max})` symmetric 0/1, no self loops.
        flags (torch.Tensor): :math:`(B, N_{max})`, 1 for a real node, 0 for padding.
        kept (list[int]): Index into the input list of every row of ``adj``.
        num_excluded (int): Graphs dropped for exceeding ``max_node_num``.
    """

    adj: torch.Tensor
    flags: torch.Tensor
    kept: list[int]
    num_excluded: int


def _edges_and_size(graph: GraphLike, position: int) -> tuple[torch.Tensor, int]:
    if isinstance(graph, Data):
        edge_index, num_nodes = graph.edge_index, graph.num_nodes
    elif isinstance(graph, tuple) and len(graph) == 2:
        edge_index, num_nodes = graph
    else:
        raise InvalidInputError(
            f"graph {position} is a {type(graph).__name__}; pass a torch_geometric Data or "
            "an (edge_index, num_nodes) tuple"
        )
    if edge_index is None:
        edge_index = torch.empty((2, 0), dtype=torch.long)
    if num_nodes is None or int(num_nodes) < 1:
        raise InvalidInputError(f"graph {position} has no nodes (num_nodes={num_nodes})")
    if edge_index.dim() != 2 or edge_index.shape[0] != 2 or edge_index.is_floating_point():
        raise InvalidInputError(
            f"graph {position}: edge_index must be an integer tensor of shape (2, E), "
            f"got {edge_index.dtype} {tuple(edge_index.shape)}"
        )
    n = int(num_nodes)
    if edge_index.numel() and (int(edge_index.min()) < 0 or int(edge_index.max()) >= n):
        raise InvalidInputError(f"graph {position}: edge_index refers to nodes outside [0, {n})")
    return edge_index.long().cpu(), n


def to_dense_batch_adjacency(
    graphs: Sequence[GraphLike], *, max_node_num: int, dtype: torch.dtype = torch.float32
) -> DenseGraphBatch:
    """Pad graphs into one dense batch, dropping (and counting) those above ``max_node_num``.

    Edges are read as undirected (both directions are set) and self loops are dropped, since
    the score model describes simple undirected graphs. Dense score networks cost
    :math:`O(N^2)` per graph, so large graphs are excluded rather than truncated: cutting nodes
    would teach the model subgraphs that never occur.

    Args:
        graphs (Sequence[Data | tuple[Tensor, int]]): Graphs with ``edge_index`` and
            ``num_nodes``.
        max_node_num (int): Largest graph size kept.
        dtype (torch.dtype): Dtype of ``adj`` and ``flags``. (default: :obj:`torch.float32`)

    Returns:
        DenseGraphBatch: The batch, padded to the largest kept graph.

    Raises:
        InvalidInputError: A graph is malformed, or no graph fits under the cap.
    """
    parsed = [_edges_and_size(g, i) for i, g in enumerate(graphs)]
    kept = [i for i, (_, n) in enumerate(parsed) if n <= max_node_num]
    if not kept:
        raise InvalidInputError(
            f"none of the {len(parsed)} graphs has at most max_node_num={max_node_num} nodes"
        )
    n_max = max(parsed[i][1] for i in kept)
    adj = torch.zeros((len(kept), n_max, n_max), dtype=dtype)
    flags = torch.zeros((len(kept), n_max), dtype=dtype)
    for row, i in enumerate(kept):
        edge_index, n = parsed[i]
        adj[row, edge_index[0], edge_index[1]] = 1.0
        adj[row, edge_index[1], edge_index[0]] = 1.0
        flags[row, :n] = 1.0
    adj.diagonal(dim1=-2, dim2=-1).zero_()
    return DenseGraphBatch(adj, flags, kept, len(parsed) - len(kept))


def dense_to_graphs(
    adj: torch.Tensor, num_nodes: Sequence[int], labels: Sequence[int | None] | None = None
) -> list[Data]:
    """Turn binary dense adjacencies into simple undirected PyG graphs.

    Args:
        adj (torch.Tensor): :math:`(B, N, N)` 0/1, symmetric, zero diagonal.
        num_nodes (Sequence[int]): Real size of each graph (rows beyond it are padding).
        labels (Sequence[int | None], optional): Class of each graph, stored as ``y``.

    Returns:
        list[Data]: Graphs with ``edge_index`` (both directions, sorted) and ``num_nodes``;
        node features are left to the caller.
    """
    graphs = []
    for b, n in enumerate(num_nodes):
        a = adj[b, :n, :n].cpu()
        edge_index = a.nonzero().t().contiguous()
        data = Data(edge_index=edge_index, num_nodes=int(n))
        label = None if labels is None else labels[b]
        if label is not None:
            data.y = torch.tensor([int(label)], dtype=torch.long)
        graphs.append(data)
    return graphs
