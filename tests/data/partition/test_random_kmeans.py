import torch
from torch_geometric.data import Data

from securefg.data.partition import KMeansPartitioner, RandomPartitioner, partition_statistics

from .helpers import assert_covers_all, assert_pairwise_disjoint


def test_random_partition_is_complete_disjoint_and_seeded(graph: Data) -> None:
    p = RandomPartitioner(5, seed=0)(graph)
    assert_covers_all(p)
    assert_pairwise_disjoint(p)
    assert p == RandomPartitioner(5, seed=0)(graph) and p != RandomPartitioner(5, seed=1)(graph)
    assert p.sizes().min() > 90  # multinomial around 120


def test_random_partition_has_iid_labels_and_many_cross_edges(graph: Data) -> None:
    stats = partition_statistics(graph, RandomPartitioner(5, seed=0)(graph)).summary
    assert stats["heterogeneity_js"] < 0.15
    assert stats["cross_edges"] > 0.7 * graph.edge_index.size(1)  # expectation 4/5


def test_kmeans_partition_is_complete_disjoint_balanced_and_label_skewed(graph: Data) -> None:
    p = KMeansPartitioner(4, seed=0, delta=10)(graph)
    assert_covers_all(p)
    assert_pairwise_disjoint(p)
    assert p.sizes().min() >= 150 - 20 and p.sizes().max() <= 150 + 20
    # Features are strongly class-dependent, so feature clusters are label-skewed.
    assert partition_statistics(graph, p).summary["heterogeneity_js"] > 0.5


def test_kmeans_is_deterministic(graph: Data) -> None:
    assert KMeansPartitioner(4, seed=3)(graph) == KMeansPartitioner(4, seed=3)(graph)


def test_kmeans_ignores_edges_random_ignores_everything(graph: Data) -> None:
    rewired = Data(
        x=graph.x, y=graph.y, edge_index=torch.empty(2, 0, dtype=torch.long), num_nodes=graph.num_nodes
    )
    assert KMeansPartitioner(4, seed=0)(rewired) == KMeansPartitioner(4, seed=0)(graph)
    assert KMeansPartitioner.uses == ("x",) and RandomPartitioner.uses == ()
