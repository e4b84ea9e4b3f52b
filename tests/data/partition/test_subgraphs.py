import pytest
import torch
from torch_geometric.data import Data

from securefg.data.partition import (
    MetisPartitioner,
    OverlappingMetisPartitioner,
    RandomPartitioner,
    client_subgraphs,
    external_edges,
)
from securefg.errors import InvalidInputError


def _edge_set(edge_index: torch.Tensor) -> set[tuple[int, int]]:
    return set(map(tuple, edge_index.t().tolist()))


def test_client_subgraphs_are_induced_with_global_ids_and_masks(graph: Data) -> None:
    p = MetisPartitioner(4, seed=0)(graph)
    subs = client_subgraphs(graph, p)
    all_edges = _edge_set(graph.edge_index)
    for k, sub in enumerate(subs):
        gid = sub.global_id
        assert torch.equal(gid, p.part(k))
        assert torch.equal(sub.x, graph.x[gid]) and torch.equal(sub.y, graph.y[gid])
        assert torch.equal(sub.train_mask, graph.train_mask[gid])
        members = set(gid.tolist())
        induced = {(u, v) for (u, v) in all_edges if u in members and v in members}
        assert {(int(gid[u]), int(gid[v])) for u, v in _edge_set(sub.edge_index)} == induced


def test_external_edges_are_known_to_both_ends(graph: Data) -> None:
    p = RandomPartitioner(3, seed=0)(graph)
    owner = p.assignment()
    ext = external_edges(graph, p)
    src, dst = graph.edge_index
    n_cross = int((owner[src] != owner[dst]).sum())
    assert sum(len(e) for e in ext) == 2 * n_cross  # each cross column seen by both clients
    all_edges = _edge_set(graph.edge_index)
    for k, e in enumerate(ext):
        gid = p.part(k)
        for loc, rem, own, out in zip(
            e.local.tolist(), e.remote.tolist(), e.owner.tolist(), e.outgoing.tolist(), strict=True
        ):
            u = int(gid[loc])
            assert own == int(owner[rem]) != k
            assert ((u, rem) if out else (rem, u)) in all_edges


def test_external_edges_keep_direction_of_directed_graphs() -> None:
    data = Data(edge_index=torch.tensor([[0], [1]]), num_nodes=2)  # a single edge 0 -> 1
    from securefg.data.partition import Partition

    p = Partition.from_assignment(torch.tensor([0, 1]), num_parts=2, name="x")
    e0, e1 = external_edges(data, p)
    assert (e0.local.tolist(), e0.remote.tolist(), e0.owner.tolist(), e0.outgoing.tolist()) == (
        [0],
        [1],
        [1],
        [True],
    )
    assert (e1.local.tolist(), e1.remote.tolist(), e1.owner.tolist(), e1.outgoing.tolist()) == (
        [0],
        [0],
        [0],
        [False],
    )


def test_external_edges_refuse_overlapping_partitions(graph: Data) -> None:
    p = OverlappingMetisPartitioner(5, seed=0)(graph)
    with pytest.raises(InvalidInputError, match="overlaps"):
        external_edges(graph, p)


def test_partition_of_another_graph_is_rejected(graph: Data) -> None:
    other = Data(edge_index=torch.empty(2, 0, dtype=torch.long), num_nodes=10)
    with pytest.raises(InvalidInputError, match="does not partition the 10 nodes"):
        client_subgraphs(other, MetisPartitioner(2)(graph))
