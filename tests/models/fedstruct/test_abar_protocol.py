"""Algorithm 3 must reproduce the rows of the centrally computed Ā exactly."""

from __future__ import annotations

import pytest
import torch

from securefg.errors import InvalidInputError
from securefg.models.fedstruct.abar_protocol import (
    adjacency_block,
    assemble,
    column_blocks,
    compute_abar_rows,
    init_abar_state,
    local_contributions,
)
from securefg.models.fedstruct.client_graph_view import ClientGraphView, split_graph
from securefg.models.fedstruct.node_directory import NodeDirectory
from securefg.models.fedstruct.propagation import multi_hop_adjacency, rw_normalized_adjacency

from ._graphs import random_graph


def _setup(num_nodes: int, num_clients: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    ei = random_graph(num_nodes, 2 * num_nodes, seed)
    owner = torch.randint(num_clients, (num_nodes,), generator=g)
    owner[:num_clients] = torch.arange(num_clients)  # no empty client
    directory = NodeDirectory(owner, num_clients)
    return ei, directory, split_graph(ei, directory), g


@pytest.mark.parametrize("num_clients", [3, 4, 5])
@pytest.mark.parametrize("hops", [1, 2, 3])
def test_assembled_rows_equal_central_abar(num_clients: int, hops: int) -> None:
    ei, directory, views, g = _setup(37, num_clients, seed=10 * num_clients + hops)
    betas = torch.rand(hops, generator=g, dtype=torch.float64).tolist()
    central = multi_hop_adjacency(rw_normalized_adjacency(ei, 37, dtype=torch.float64), betas)
    rows = compute_abar_rows(views, directory, betas=betas, dtype=torch.float64)
    for k, r in enumerate(rows):
        assert r.shape == (directory.size_of(k), 37)
        torch.testing.assert_close(r, central[directory.nodes_of(k)], rtol=0, atol=1e-12)


def test_step_by_step_schedule_matches_central_and_leaves_inputs_unchanged() -> None:
    ei, directory, views, _ = _setup(30, 4, seed=3)
    betas = [0.5, 0.3, 0.2]
    snapshot = [(v.intra_edges.clone(), v.inter_edges.clone()) for v in views]
    states = [init_abar_state(v, directory, betas=betas, dtype=torch.float64) for v in views]
    for _ in range(2):
        outbox = [local_contributions(v, s, directory=directory) for v, s in zip(views, states)]
        for msgs in outbox:  # every contributor addresses every receiver with its full shape
            assert sorted(msgs) == [0, 1, 2, 3]
            for i, m in msgs.items():
                assert m.shape == (directory.size_of(i), 30)
        states = [assemble(v, s, summed=sum(o[v.client_id] for o in outbox))
                  for v, s in zip(views, states)]
    central = multi_hop_adjacency(rw_normalized_adjacency(ei, 30, dtype=torch.float64), betas)
    for v, s in zip(views, states):
        assert s.done
        torch.testing.assert_close(s.abar, central[v.nodes], rtol=0, atol=1e-12)
    for v, (intra, inter) in zip(views, snapshot):
        assert torch.equal(v.intra_edges, intra) and torch.equal(v.inter_edges, inter)


def test_contribution_to_unconnected_client_is_zero() -> None:
    # path 0-1-2-3; clients: {0,1} -> 0, {2} -> 1, {3} -> 2. Client 0 has no edge to client 2.
    ei = torch.tensor([[0, 1, 1, 2, 2, 3], [1, 0, 2, 1, 3, 2]])
    directory = NodeDirectory(torch.tensor([0, 0, 1, 2]), 3)
    views = split_graph(ei, directory)
    state = init_abar_state(views[0], directory, betas=[1.0, 1.0])
    msgs = local_contributions(views[0], state, directory=directory)
    assert torch.count_nonzero(msgs[2]) == 0
    assert torch.count_nonzero(msgs[1]) > 0


def test_adjacency_blocks_are_transposes_across_the_pair() -> None:
    _, directory, views, _ = _setup(25, 3, seed=7)
    for i in range(3):
        for k in range(3):
            b_ik = adjacency_block(views[k], directory, receiver=i).to_dense()  # Ã_k^[i], built by k
            b_ki = adjacency_block(views[i], directory, receiver=k).to_dense()  # Ã_i^[k], built by i
            torch.testing.assert_close(b_ik, b_ki.T)


def test_single_neighbour_row_reveals_remote_degree_and_neighbours() -> None:
    # Documented leak (notes B5.3): v=0 (client 0) has one neighbour w=1 in client 1, so row v
    # of B_{0,1}^{(2)} equals w's row of Â: 1/d̃_w on w's neighbours and self.
    ei = torch.tensor([[0, 1, 1, 2, 1, 3], [1, 0, 2, 1, 3, 1]])
    directory = NodeDirectory(torch.tensor([0, 1, 2, 2]), 3)
    views = split_graph(ei, directory)
    state = init_abar_state(views[1], directory, betas=[0.0, 1.0])
    row = local_contributions(views[1], state, directory=directory)[0][0]
    torch.testing.assert_close(row, torch.tensor([0.25, 0.25, 0.25, 0.25]))


def test_pruned_contributions_keep_top_p_times_rows_per_block() -> None:
    _, directory, views, _ = _setup(40, 3, seed=5)
    states = [init_abar_state(v, directory, betas=[1.0, 1.0]) for v in views]
    msgs = local_contributions(views[0], states[0], directory=directory, prune_p=1)
    for i, m in msgs.items():
        for j, block in column_blocks(m, directory).items():
            assert block.shape == (directory.size_of(i), directory.size_of(j))
            assert int(torch.count_nonzero(block)) <= directory.size_of(i)


def test_contributions_refuse_a_finished_state_and_a_foreign_state() -> None:
    _, directory, views, _ = _setup(20, 3, seed=1)
    done = init_abar_state(views[0], directory, betas=[1.0])
    with pytest.raises(InvalidInputError, match="already holds all"):
        local_contributions(views[0], done, directory=directory)
    state1 = init_abar_state(views[1], directory, betas=[1.0, 1.0])
    with pytest.raises(InvalidInputError, match="state of client 1 passed with view of client 0"):
        local_contributions(views[0], state1, directory=directory)


def test_assemble_rejects_wrong_shape() -> None:
    _, directory, views, _ = _setup(20, 3, seed=2)
    s = init_abar_state(views[0], directory, betas=[1.0, 1.0])
    with pytest.raises(InvalidInputError, match="summed contributions must be"):
        assemble(views[0], s, summed=torch.zeros(1, 20))


def test_directory_local_index_is_rank_within_owner() -> None:
    d = NodeDirectory(torch.tensor([1, 0, 1, 1, 0]), 2)
    assert d.nodes_of(1).tolist() == [0, 2, 3]
    assert d.local_index(torch.tensor([0, 1, 2, 3, 4])).tolist() == [0, 0, 1, 2, 1]
    with pytest.raises(InvalidInputError, match=r"owner ids must lie in \[0, 2\)"):
        NodeDirectory(torch.tensor([0, 2]), 2)


def test_split_graph_rejects_directed_edges() -> None:
    d = NodeDirectory(torch.tensor([0, 1]), 2)
    with pytest.raises(InvalidInputError, match="undirected"):
        split_graph(torch.tensor([[0], [1]]), d)


def test_view_rejects_duplicate_edges() -> None:
    e = torch.tensor([[0, 0, 1], [1, 1, 0]])
    with pytest.raises(InvalidInputError, match="intra_edges has duplicate edges"):
        ClientGraphView(0, torch.tensor([0, 1]), e, torch.zeros(2, 0, dtype=torch.long),
                        torch.zeros(0, dtype=torch.long))
