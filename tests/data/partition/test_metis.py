import pytest
import torch
from torch_geometric.data import Data
from torch_geometric.utils import to_undirected

from securefg.data.partition import MetisPartitioner, RandomPartitioner, partition_statistics
from securefg.errors import ConfigError, InvalidInputError

from .helpers import assert_covers_all, assert_pairwise_disjoint


def test_metis_covers_all_nodes_with_disjoint_balanced_parts(graph: Data) -> None:
    p = MetisPartitioner(6, seed=0)(graph)
    assert p.num_parts == 6 and p.level == "node"
    assert_covers_all(p)
    assert_pairwise_disjoint(p)
    assert p.sizes().min() >= 0.8 * 100 and p.sizes().max() <= 1.2 * 100


def test_metis_cuts_far_fewer_edges_than_random(graph: Data) -> None:
    metis = partition_statistics(graph, MetisPartitioner(4, seed=0)(graph)).summary["cross_edges"]
    rand = partition_statistics(graph, RandomPartitioner(4, seed=0)(graph)).summary["cross_edges"]
    assert metis < 0.5 * rand


def test_metis_is_deterministic_and_seeds_0_and_1_differ(graph: Data) -> None:
    # METIS alone treats seeds 0 and 1 alike (C srand); the partitioner must not.
    a = MetisPartitioner(5, seed=0)(graph)
    assert a == MetisPartitioner(5, seed=0)(graph)
    assert a != MetisPartitioner(5, seed=1)(graph)
    assert a != MetisPartitioner(5, seed=2)(graph)


def test_metis_accepts_directed_graphs_with_self_loops(graph: Data) -> None:
    src, dst = graph.edge_index
    keep = src < dst  # one direction only
    loops = torch.arange(graph.num_nodes).repeat(2, 1)
    directed = Data(
        edge_index=torch.cat([graph.edge_index[:, keep], loops], dim=1), num_nodes=graph.num_nodes
    )
    undirected = Data(edge_index=to_undirected(graph.edge_index[:, keep]), num_nodes=graph.num_nodes)
    assert (
        MetisPartitioner(4, seed=3)(directed).parts()[0].tolist()
        == MetisPartitioner(4, seed=3)(undirected).parts()[0].tolist()
    )


def test_metis_repr_and_params() -> None:
    part = MetisPartitioner(10, seed=7)
    assert repr(part) == "MetisPartitioner(num_parts=10, seed=7, recursive=False)"
    assert part.cache_name == "metis-num_parts=10-seed=7-recursive=False"


def test_metis_rejects_bad_configurations() -> None:
    tiny = Data(edge_index=torch.tensor([[0, 1], [1, 0]]), num_nodes=2)
    with pytest.raises(InvalidInputError, match="cannot split 2 nodes into 3"):
        MetisPartitioner(3)(tiny)
    with pytest.raises(ConfigError, match="needs num_parts >= 1"):
        MetisPartitioner(0)
    with pytest.raises(ConfigError, match="seed must be >= 0"):
        MetisPartitioner(2, seed=-1)(tiny)


@pytest.mark.realdata
def test_metis_on_cora_lcc_matches_fedpub_table_4(data_root) -> None:
    from securefg.data import load_node_dataset

    data = load_node_dataset("Cora", data_root, largest_cc=True, normalize_features=True)
    st = partition_statistics(data, MetisPartitioner(10, seed=0)(data))
    assert st.summary["mean_nodes"] == pytest.approx(248.5)  # Table 4: 249
    assert st.summary["mean_edges"] == pytest.approx(891, rel=0.05)  # Table 4: 891 directed
    assert st.summary["mean_clustering"] == pytest.approx(0.259, abs=0.02)
    assert st.summary["global_clustering"] == pytest.approx(0.238, abs=0.001)
    assert min(st.column("nodes")) > 0.9 * 249 and max(st.column("nodes")) < 1.1 * 249
