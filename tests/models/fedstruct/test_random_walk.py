from __future__ import annotations

from functools import cache

import pytest
import torch
from torch_geometric.utils import to_undirected

from securefg.errors import InvalidInputError
from securefg.models.fedstruct.random_walk import biased_random_walks

from ._graphs import random_graph

# t=0 -> v=1; N(1) = {0 (=t), 2 (also a neighbour of t), 3, 4 (two hops from t)}
BIAS_GRAPH = to_undirected(torch.tensor([[0, 0, 1, 1, 1, 3, 4], [1, 2, 2, 3, 4, 5, 5]]))


@pytest.mark.parametrize(("p", "q"), [(1.0, 1.0), (0.3, 3.0), (4.0, 0.5)])
def test_every_step_follows_an_edge(p: float, q: float) -> None:
    ei = random_graph(40, 80, seed=3)
    assert torch.bincount(ei[0], minlength=40).min() == 0  # node 38 is isolated: stays put
    walks = biased_random_walks(ei, 40, torch.arange(40).repeat(5), walk_length=12, p=p, q=q,
                                generator=torch.Generator().manual_seed(0))
    assert walks.shape == (200, 13)
    assert torch.equal(walks[:, 0], torch.arange(40).repeat(5))
    edges = set(map(tuple, ei.T.tolist())) | {(38, 38)}
    steps = torch.stack([walks[:, :-1], walks[:, 1:]], -1).reshape(-1, 2).tolist()
    assert all(tuple(s) in edges for s in steps)


def test_isolated_node_stays_put() -> None:
    ei = torch.tensor([[0, 1], [1, 0]])
    walks = biased_random_walks(ei, 3, torch.tensor([2, 0]), walk_length=4, p=0.5, q=2.0)
    assert walks[0].tolist() == [2] * 5
    assert set(walks[1].tolist()) <= {0, 1}


@cache
def _second_step_distribution(p: float, q: float) -> torch.Tensor:
    walks = biased_random_walks(BIAS_GRAPH, 6, torch.zeros(20000, dtype=torch.long),
                                walk_length=2, p=p, q=q,
                                generator=torch.Generator().manual_seed(1))
    nxt = walks[walks[:, 1] == 1, 2]
    return torch.bincount(nxt, minlength=6)[:5].double() / nxt.numel()


@pytest.mark.parametrize(("p", "q"), [(0.25, 4.0), (4.0, 0.25), (1.0, 1.0)])
def test_second_order_transition_matches_node2vec_weights(p: float, q: float) -> None:
    # unnormalised node2vec weights for x in {0, 2, 3, 4} given t=0, v=1
    w = torch.tensor([1 / p, 0.0, 1.0, 1 / q, 1 / q], dtype=torch.float64)
    expected = w / w.sum()
    torch.testing.assert_close(_second_step_distribution(p, q), expected, rtol=0, atol=0.02)


def test_small_p_returns_more_often_and_small_q_explores_further() -> None:
    bfs, dfs = _second_step_distribution(0.25, 4.0), _second_step_distribution(4.0, 0.25)
    assert bfs[0] > 0.6 > dfs[0]  # return to t
    assert dfs[3] + dfs[4] > 0.7 > bfs[3] + bfs[4]  # move two hops away from t


def test_rejects_non_positive_bias() -> None:
    with pytest.raises(InvalidInputError, match="p > 0"):
        biased_random_walks(BIAS_GRAPH, 6, torch.tensor([0]), walk_length=3, p=0.0)
