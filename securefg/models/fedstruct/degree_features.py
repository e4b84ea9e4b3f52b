"""Degree node structure features (FedStruct's "Deg" NSF)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor
from torch_geometric.utils import coalesce, remove_self_loops

from securefg.errors import InvalidInputError


def degree_features(edge_index: Tensor, num_nodes: int, *, num_features: int = 256) -> Tensor:
    """Return one-hot node degrees, degrees ``>= num_features - 1`` sharing the last slot.

    The cheapest NSF: 1-hop information only, and each client can compute it for its own nodes
    from its intra- and inter-edges (no global graph needed).

    Args:
        edge_index (Tensor): ``[2, E]`` undirected edge list (both directions); duplicates and
            self-loops are ignored.
        num_nodes (int): Number of nodes ``n``.
        num_features (int, optional): Width ``d_s``; the cap is ``d_s - 1``. (default: :obj:`256`)

    Returns:
        Tensor: ``[n, d_s]`` float one-hot matrix.
    """
    if num_features < 2:
        raise InvalidInputError(f"num_features must be >= 2, got {num_features}")
    ei, _ = remove_self_loops(edge_index)
    ei = coalesce(ei, num_nodes=num_nodes)
    deg = torch.bincount(ei[0], minlength=num_nodes).clamp_max(num_features - 1)
    return F.one_hot(deg, num_features).float()
