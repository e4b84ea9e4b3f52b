import pytest
import torch
from torch_geometric.data import Data

from securefg.data.partition import LouvainPartitioner, RandomPartitioner, partition_statistics
from securefg.errors import ConfigError

from .helpers import assert_covers_all, assert_pairwise_disjoint


def test_louvain_partition_is_complete_disjoint_and_balanced(graph: Data) -> None:
    p = LouvainPartitioner(5, seed=0, delta=10)(graph)
    assert_covers_all(p)
    assert_pairwise_disjoint(p)
    target = graph.num_nodes // 5
    assert p.sizes().min() >= target - 30 and p.sizes().max() <= target + 30


def test_louvain_keeps_communities_together(graph: Data) -> None:
    # With delta=0 the cap n/M - delta equals the 150-node blocks, so few nodes are cut off.
    louvain = partition_statistics(graph, LouvainPartitioner(4, seed=0, delta=0, min_per_class=0)(graph))
    rand = partition_statistics(graph, RandomPartitioner(4, seed=0)(graph))
    assert louvain.summary["cross_edges"] < 0.3 * rand.summary["cross_edges"]


def test_louvain_gives_every_client_two_nodes_per_class(graph: Data) -> None:
    p = LouvainPartitioner(6, seed=1, min_per_class=2)(graph)
    for nodes in p.parts():
        assert torch.bincount(graph.y[nodes], minlength=4).min() >= 2


def test_louvain_is_deterministic_and_seed_dependent(graph: Data) -> None:
    a = LouvainPartitioner(5, seed=0)(graph)
    assert a == LouvainPartitioner(5, seed=0)(graph)
    seeds = [LouvainPartitioner(5, seed=s)(graph) for s in (1, 2, 3)]
    assert any(a != b for b in seeds)


def test_louvain_rejects_bad_configurations() -> None:
    with pytest.raises(ConfigError, match="delta >= 0"):
        LouvainPartitioner(3, delta=-1)
