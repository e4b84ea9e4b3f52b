"""What one FedStruct-B client knows about the graph (notes B1)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor
from torch_geometric.utils import coalesce, is_undirected, remove_self_loops

from securefg.errors import InvalidInputError
from securefg.models.fedstruct.node_directory import NodeDirectory


@dataclass(frozen=True)
class ClientGraphView:
    """Client k's private knowledge of the global graph, in global node ids.

    This is exactly the input of Algorithm 3 at client k: its own nodes, its intra-edges, and for
    each inter-edge the external endpoint's global id and owner ("the destination of its outgoing
    edges"). It never holds remote features, remote degrees or edges between two other nodes.

    Args:
        client_id (int): This client's index ``k``.
        nodes (Tensor): ``[n_k]`` ascending global ids owned by ``k``.
        intra_edges (Tensor): ``[2, E_k]`` edges with both endpoints in ``nodes``, both
            directions present, no self-loops.
        inter_edges (Tensor): ``[2, E'_k]`` edges ``(u, w)`` with ``u`` in ``nodes`` and ``w``
            owned by another client.
        inter_owner (Tensor): ``[E'_k]`` owner client of each ``w``.
    """

    client_id: int
    nodes: Tensor
    intra_edges: Tensor
    inter_edges: Tensor
    inter_owner: Tensor

    def __post_init__(self) -> None:
        if self.nodes.dim() != 1 or bool((self.nodes[1:] <= self.nodes[:-1]).any()):
            raise InvalidInputError(
                f"ClientGraphView(client_id={self.client_id}).nodes must be 1-D, strictly "
                "ascending global ids"
            )
        for name in ("intra_edges", "inter_edges"):
            e = getattr(self, name)
            if e.dim() != 2 or e.size(0) != 2 or e.dtype != torch.long:
                raise InvalidInputError(f"{name} must be a [2, E] torch.long tensor")
            if torch.unique(e, dim=1).size(1) != e.size(1):
                raise InvalidInputError(
                    f"{name} has duplicate edges; degrees would be over-counted (coalesce first)"
                )
        if self.inter_owner.shape != (self.inter_edges.size(1),):
            raise InvalidInputError("inter_owner needs one owner per inter-edge")
        if bool((self.inter_owner == self.client_id).any()):
            raise InvalidInputError("an inter-edge endpoint is owned by this client; list it as intra")

    @property
    def num_nodes(self) -> int:
        """Number of owned nodes ``n_k``."""
        return int(self.nodes.numel())

    def local_rows(self, global_ids: Tensor) -> Tensor:
        """Map owned global ids to row positions ``0..n_k-1``."""
        if global_ids.numel() == 0:
            return torch.empty_like(global_ids)
        pos = torch.searchsorted(self.nodes, global_ids)
        hit = pos < self.num_nodes
        if not bool(hit.all()) or bool((self.nodes[pos] != global_ids).any()):
            raise InvalidInputError(f"client {self.client_id} does not own some of these ids")
        return pos

    def degree(self) -> Tensor:
        r"""Return :math:`\tilde{d}_v = 1 + \deg_{intra}(v) + \deg_{inter}(v)` for owned nodes.

        Locally computable because degrees count edges *at* the node, including inter-edges,
        which the client knows (notes B2.1).
        """
        ends = torch.cat([self.intra_edges[0], self.inter_edges[0]])
        counts = torch.bincount(self.local_rows(ends), minlength=self.num_nodes)
        return counts + 1

    def intra_degree(self) -> Tensor:
        """Each owned node's number of edges inside this client's subgraph (no inter-edges)."""
        return torch.bincount(self.local_rows(self.intra_edges[0]), minlength=self.num_nodes)

    def __repr__(self) -> str:
        return (
            f"ClientGraphView(client_id={self.client_id}, nodes={self.num_nodes}, "
            f"intra={self.intra_edges.size(1)}, inter={self.inter_edges.size(1)})"
        )


def split_graph(edge_index: Tensor, directory: NodeDirectory) -> list[ClientGraphView]:
    """Cut a global undirected graph into every client's :class:`ClientGraphView`.

    A simulation helper: in deployment each client builds its own view from local records.

    Args:
        edge_index (Tensor): ``[2, E]`` undirected edge list (both directions).
        directory (NodeDirectory): Owner of every node.

    Returns:
        list[ClientGraphView]: One view per client, index = client id.

    Raises:
        InvalidInputError: If the graph is not undirected; Algorithm 3 relies on
            ``Ã_k^[i] = (Ã_i^[k])^T``.
    """
    n = directory.num_nodes
    ei, _ = remove_self_loops(edge_index)
    ei = coalesce(ei, num_nodes=n)
    if not is_undirected(ei, num_nodes=n):
        raise InvalidInputError(
            "split_graph needs an undirected edge_index; apply "
            "torch_geometric.utils.to_undirected first"
        )
    src_owner, dst_owner = directory.owner[ei[0]], directory.owner[ei[1]]
    views = []
    for k in range(directory.num_clients):
        mine = src_owner == k
        intra = mine & (dst_owner == k)
        inter = mine & (dst_owner != k)
        views.append(
            ClientGraphView(
                client_id=k,
                nodes=directory.nodes_of(k),
                intra_edges=ei[:, intra],
                inter_edges=ei[:, inter],
                inter_owner=dst_owner[inter],
            )
        )
    return views
