from itertools import combinations

import pytest
from torch_geometric.data import Data

from securefg.data.partition import OverlappingMetisPartitioner, metis_membership
from securefg.errors import ConfigError


def test_overlapping_clients_sample_half_of_their_community(graph: Data) -> None:
    p = OverlappingMetisPartitioner(10, seed=0)(graph)
    member = metis_membership(graph.edge_index, graph.num_nodes, num_parts=2, seed=0)
    assert p.num_parts == 10 and not p.is_disjoint
    for k, nodes in enumerate(p.parts()):
        community = k // 5  # ids comm_id * 5 + j
        comm_size = int((member == community).sum())
        assert nodes.numel() == comm_size // 2
        assert (member[nodes] == community).all()


def test_overlap_within_a_community_is_about_a_quarter(graph: Data) -> None:
    p = OverlappingMetisPartitioner(10, seed=1)(graph)
    member = metis_membership(graph.edge_index, graph.num_nodes, num_parts=2, seed=1)
    ratios = []
    for i, j in combinations(range(10), 2):
        shared = len(set(p.part(i).tolist()) & set(p.part(j).tolist()))
        if i // 5 == j // 5:
            ratios.append(shared / int((member == i // 5).sum()))
        else:
            assert shared == 0, f"clients {i} and {j} of different communities share nodes"
    mean = sum(ratios) / len(ratios)
    assert 0.2 < mean < 0.3, mean  # expectation 0.5 * 0.5 = 0.25
    assert len(ratios) == 20


def test_overlapping_is_deterministic_and_seed_dependent(graph: Data) -> None:
    a = OverlappingMetisPartitioner(10, seed=2)(graph)
    assert a == OverlappingMetisPartitioner(10, seed=2)(graph)
    assert a != OverlappingMetisPartitioner(10, seed=3)(graph)


def test_overlapping_needs_a_multiple_of_clients_per_part() -> None:
    with pytest.raises(ConfigError, match=r"num_parts \(12\) to be a multiple of clients_per_part \(5\)"):
        OverlappingMetisPartitioner(12)
    assert OverlappingMetisPartitioner(12, clients_per_part=4).num_communities == 3


def test_overlapping_covers_most_nodes(graph: Data) -> None:
    # Each node is missed by all 5 half-samples with probability 1/32.
    member = OverlappingMetisPartitioner(10, seed=0)(graph).membership()
    assert 0.9 < float((member > 0).float().mean()) < 1.0
    assert int(member.max()) <= 5  # only the 5 clients of one community can share a node
