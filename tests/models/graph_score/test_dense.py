import pytest
import torch
from torch_geometric.data import Data

from securefg.errors import InvalidInputError
from securefg.models.graph_score import dense_to_graphs, to_dense_batch_adjacency
from tests.models.graph_score.conftest import cycle


def test_dense_batch_excludes_and_counts_graphs_above_the_cap() -> None:
    graphs = [cycle(4), cycle(12), cycle(6), cycle(9)]
    batch = to_dense_batch_adjacency(graphs, max_node_num=8)
    assert batch.kept == [0, 2] and batch.num_excluded == 2
    assert batch.adj.shape == (2, 6, 6)
    assert batch.flags.sum(dim=1).tolist() == [4.0, 6.0]
    assert batch.adj[0].sum() == 8 and batch.adj[1].sum() == 12


def test_dense_batch_reads_edges_as_undirected_and_drops_self_loops() -> None:
    one_way = Data(edge_index=torch.tensor([[0, 1, 2], [1, 2, 2]]), num_nodes=3)
    adj = to_dense_batch_adjacency([one_way], max_node_num=3).adj[0]
    assert torch.equal(adj, torch.tensor([[0.0, 1, 0], [1, 0, 1], [0, 1, 0]]))


def test_dense_batch_accepts_edge_index_tuples() -> None:
    batch = to_dense_batch_adjacency([(torch.tensor([[0], [1]]), 2)], max_node_num=4)
    assert torch.equal(batch.adj[0], torch.tensor([[0.0, 1], [1, 0]]))


def test_dense_batch_rejects_edges_to_missing_nodes() -> None:
    bad = Data(edge_index=torch.tensor([[0], [5]]), num_nodes=3)
    with pytest.raises(InvalidInputError, match=r"graph 0: edge_index refers to nodes outside \[0, 3\)"):
        to_dense_batch_adjacency([bad], max_node_num=8)


def test_dense_batch_rejects_when_every_graph_is_too_large() -> None:
    with pytest.raises(InvalidInputError, match="none of the 1 graphs has at most max_node_num=3"):
        to_dense_batch_adjacency([cycle(5)], max_node_num=3)


def test_dense_to_graphs_round_trips_and_keeps_isolated_nodes() -> None:
    graphs = [cycle(5), Data(edge_index=torch.tensor([[0], [1]]), num_nodes=4)]
    batch = to_dense_batch_adjacency(graphs, max_node_num=8)
    back = dense_to_graphs(batch.adj, [5, 4], [1, None])
    assert back[0].num_nodes == 5 and back[1].num_nodes == 4
    assert back[0].edge_index.shape == (2, 10) and back[1].edge_index.tolist() == [[0, 1], [1, 0]]
    assert back[0].y.tolist() == [1] and "y" not in back[1]
