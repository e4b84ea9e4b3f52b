from __future__ import annotations

import pytest
import torch

from securefg.errors import InvalidInputError
from securefg.models.fedstruct.propagation import (
    last_hop_betas,
    multi_hop_adjacency,
    prune_top_p_rows,
    rw_normalized_adjacency,
)

from ._graphs import random_graph


def test_rw_adjacency_rows_sum_to_one_including_isolated_nodes() -> None:
    ei = torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]])  # node 3 isolated
    a = rw_normalized_adjacency(ei, 4)
    assert a.is_sparse
    torch.testing.assert_close(a.to_dense().sum(1), torch.ones(4))
    torch.testing.assert_close(a.to_dense()[3], torch.tensor([0.0, 0.0, 0.0, 1.0]))
    # random-walk normalisation is row-wise, hence asymmetric: â_01 = 1/2, â_10 = 1/3
    assert a.to_dense()[0, 1] == pytest.approx(0.5)
    assert a.to_dense()[1, 0] == pytest.approx(1 / 3)


def test_rw_adjacency_ignores_duplicate_edges_and_existing_self_loops() -> None:
    ei = torch.tensor([[0, 0, 1, 0], [1, 1, 0, 0]])
    dense = rw_normalized_adjacency(ei, 2).to_dense()
    torch.testing.assert_close(dense, torch.full((2, 2), 0.5))


def test_rw_adjacency_rejects_out_of_range_nodes() -> None:
    with pytest.raises(InvalidInputError, match="outside"):
        rw_normalized_adjacency(torch.tensor([[0], [5]]), 3)


def test_multi_hop_matches_dense_matrix_powers_and_sparse_path() -> None:
    ei = random_graph(25, 50, seed=1)
    a = rw_normalized_adjacency(ei, 25, dtype=torch.float64)
    betas = [0.2, 0.5, 0.3]
    ad = a.to_dense()
    expected = 0.2 * ad + 0.5 * ad @ ad + 0.3 * ad @ ad @ ad
    torch.testing.assert_close(multi_hop_adjacency(a, betas), expected)
    torch.testing.assert_close(multi_hop_adjacency(a, betas, sparse=True).to_dense(), expected)
    # rows of a convex combination of stochastic matrices still sum to one
    torch.testing.assert_close(expected.sum(1), torch.ones(25, dtype=torch.float64))


def test_last_hop_betas_select_only_top_power() -> None:
    assert last_hop_betas(3) == (0.0, 0.0, 1.0)
    with pytest.raises(InvalidInputError, match="num_hops"):
        last_hop_betas(0)


@pytest.mark.parametrize("sparse", [False, True])
def test_prune_keeps_exactly_the_top_p_entries_of_each_row(sparse: bool) -> None:
    g = torch.Generator().manual_seed(0)
    m = torch.rand(6, 9, generator=g) * (torch.rand(6, 9, generator=g) > 0.3)
    m[5] = 0.0
    m[4, :] = 0.0
    m[4, 2] = 0.7  # row with fewer than p non-zeros keeps them all
    out = prune_top_p_rows(m.to_sparse() if sparse else m, 3)
    out = out.to_dense() if sparse else out
    for r in range(6):
        nz = m[r][m[r] != 0]
        keep = torch.sort(nz, descending=True).values[:3]
        kept = out[r][out[r] != 0]
        torch.testing.assert_close(torch.sort(kept, descending=True).values, keep)
        # kept entries sit at their original positions
        assert bool((out[r][out[r] != 0] == m[r][out[r] != 0]).all())


def test_pruned_multi_hop_has_at_most_p_entries_per_row() -> None:
    ei = random_graph(40, 120, seed=2)
    a = rw_normalized_adjacency(ei, 40)
    out = multi_hop_adjacency(a, last_hop_betas(4), prune_p=5)
    assert int((out != 0).sum(1).max()) <= 5


def test_multi_hop_rejects_empty_betas() -> None:
    a = rw_normalized_adjacency(torch.tensor([[0], [1]]), 2)
    with pytest.raises(InvalidInputError, match="at least one hop weight"):
        multi_hop_adjacency(a, [])
