"""Materialise what each client holds: its induced subgraph, and the cross-client edges it knows.

Subgraph FL (FED-PUB, FedSheafHN, FedSage) gives client :math:`k` the subgraph induced by its
nodes; edges to other clients are dropped. FedStruct-B additionally assumes each client knows
its edges to external nodes: the external node's global id and its owner, never its features.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor
from torch_geometric.data import Data

from securefg.data.partition.partition import Partition
from securefg.errors import InvalidInputError


def _check_nodes(data: Data, partition: Partition) -> None:
    if partition.level != "node" or partition.num_items != int(data.num_nodes):
        raise InvalidInputError(
            f"{partition!r} does not partition the {int(data.num_nodes)} nodes of this graph "
            f"(level={partition.level!r}, num_items={partition.num_items})"
        )


def client_subgraphs(data: Data, partition: Partition) -> list[Data]:
    """Return each client's induced subgraph.

    Node-level attributes (``x``, ``y``, the masks) are sliced with PyG's
    :meth:`~torch_geometric.data.Data.subgraph`, so each client inherits the global
    train/val/test masks of its nodes. ``global_id`` holds every local node's id in ``data``
    (ascending), which is what links a client's rows to the global graph.

    Args:
        data (Data): The global graph.
        partition (Partition): A node-level partition of ``data`` (may overlap).

    Raises:
        InvalidInputError: ``partition`` is not a node partition of ``data``.
    """
    _check_nodes(data, partition)
    out = []
    for nodes in partition.parts():
        sub = data.subgraph(nodes)
        sub.global_id = nodes.clone()
        out.append(sub)
    return out


@dataclass(frozen=True)
class ExternalEdges:
    """One client's edges to nodes it does not hold, as that client knows them.

    Entry :math:`e` says: local node ``local[e]`` and the node with global id ``remote[e]``,
    held by client ``owner[e]``, are joined by an edge of the global graph, stored in
    ``edge_index`` as ``local -> remote`` if ``outgoing[e]`` else ``remote -> local``. An
    undirected graph stores both directions, so each cross edge appears twice.

    Args:
        local (Tensor): :math:`[E]` local node index (into the client's subgraph).
        remote (Tensor): :math:`[E]` global id of the external node.
        owner (Tensor): :math:`[E]` client that holds the external node.
        outgoing (Tensor): :math:`[E]` direction flag (bool).
    """

    local: Tensor
    remote: Tensor
    owner: Tensor
    outgoing: Tensor

    def __len__(self) -> int:
        return self.local.numel()


def external_edges(data: Data, partition: Partition) -> list[ExternalEdges]:
    """Return, per client, the edges between its nodes and other clients' nodes.

    Both clients at the ends of a cross edge get it (FedStruct-B's assumption that a client
    knows "the destination of its outgoing edges"). The partition must be disjoint, so every
    external node has one owner; nodes held by no client are reported with owner ``-1``.

    Raises:
        InvalidInputError: ``partition`` is not a node partition of ``data``, or overlaps.
    """
    _check_nodes(data, partition)
    owner = partition.assignment()  # raises for overlapping partitions
    src, dst = data.edge_index
    cross = owner[src] != owner[dst]
    src, dst = src[cross], dst[cross]
    local_of = torch.full((int(data.num_nodes),), -1, dtype=torch.long)
    out = []
    for k, nodes in enumerate(partition.parts()):
        local_of[nodes] = torch.arange(nodes.numel())
        is_out = owner[src] == k
        is_in = owner[dst] == k
        local = torch.cat([local_of[src[is_out]], local_of[dst[is_in]]])
        remote = torch.cat([dst[is_out], src[is_in]])
        flags = torch.cat(
            [torch.ones(int(is_out.sum()), dtype=torch.bool), torch.zeros(int(is_in.sum()), dtype=torch.bool)]
        )
        out.append(ExternalEdges(local=local, remote=remote, owner=owner[remote], outgoing=flags))
        local_of[nodes] = -1
    return out


def client_graph_sets(dataset: Sequence[Data], partition: Partition) -> list[dict[str, list[Data]]]:
    """Return each client's ``train``/``val``/``test`` graphs of a graph-level split.

    Args:
        dataset (Sequence[Data]): The split dataset (for a multi-dataset split, the output of
            :func:`~securefg.data.partition.multi_dataset.concat_with_global_labels`).
        partition (Partition): A graph-level partition with ``train``/``val``/``test`` masks.

    Raises:
        InvalidInputError: Level, size or masks do not match.
    """
    if partition.level != "graph" or partition.num_items != len(dataset):
        raise InvalidInputError(f"{partition!r} does not split these {len(dataset)} graphs")
    missing = {"train", "val", "test"} - set(partition.masks)
    if missing:
        raise InvalidInputError(f"{partition!r} lacks role masks {sorted(missing)}")
    out = []
    for ids in partition.parts():
        roles = {}
        for role in ("train", "val", "test"):
            keep = ids[partition.masks[role][ids]]
            roles[role] = [dataset[int(i)] for i in keep]
        out.append(roles)
    return out


def global_test_graphs(dataset: Sequence[Data], partition: Partition) -> list[Data]:
    """Return the server-held global test graphs of a graph-level split (may be empty)."""
    if partition.num_items != len(dataset) or "global_test" not in partition.masks:
        raise InvalidInputError(f"{partition!r} has no global test set for these {len(dataset)} graphs")
    return [dataset[int(i)] for i in torch.nonzero(partition.masks["global_test"]).view(-1)]
