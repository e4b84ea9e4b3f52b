import math

import networkx as nx
import pytest
import torch
from torch_geometric.utils import from_networkx

from securefg.errors import InvalidInputError
from securefg.models.graph_score import clustering_mmd, degree_mmd, graph_set_summary, mmd_squared
from tests.models.graph_score.conftest import cycle


def test_emd_kernel_matches_hand_computed_values() -> None:
    # pmfs [1, 0] and [0, 1]: EMD = 1 bin; k = exp(-1/2). MMD^2 = 1 + 1 - 2 exp(-1/2).
    value = mmd_squared([torch.tensor([1.0, 0]).numpy()], [torch.tensor([0.0, 1]).numpy()])
    assert value == pytest.approx(2 - 2 * math.exp(-0.5))
    # moving mass two bins costs twice as much under EMD, the same under TV
    far = mmd_squared([torch.tensor([1.0, 0, 0]).numpy()], [torch.tensor([0.0, 0, 1]).numpy()])
    assert far == pytest.approx(2 - 2 * math.exp(-2.0))
    tv = mmd_squared(
        [torch.tensor([1.0, 0, 0]).numpy()], [torch.tensor([0.0, 0, 1]).numpy()], kernel="gaussian_tv"
    )
    assert tv == pytest.approx(2 - 2 * math.exp(-0.5))


def test_identical_sets_have_zero_mmd_and_different_sets_do_not() -> None:
    cycles = [cycle(n) for n in (5, 6, 7, 8)]
    cliques = [from_networkx(nx.complete_graph(n)) for n in (5, 6, 7, 8)]
    assert degree_mmd(cycles, cycles) == pytest.approx(0.0, abs=1e-12)
    assert clustering_mmd(cycles, cycles) == pytest.approx(0.0, abs=1e-12)
    assert degree_mmd(cycles, cliques) > 0.5
    assert clustering_mmd(cycles, cliques) > 0.5  # clustering 0 vs 1


def test_summary_counts_edges_and_connectivity() -> None:
    two_parts = nx.disjoint_union(nx.path_graph(3), nx.path_graph(2))
    stats = graph_set_summary([cycle(4), two_parts])
    assert stats == {"mean_nodes": 4.5, "mean_edges": 3.5, "edges_per_node": 7 / 9, "fraction_connected": 0.5}


def test_unknown_kernel_lists_the_choices() -> None:
    with pytest.raises(InvalidInputError, match="Could not resolve kernel 'rbf' among choices"):
        mmd_squared([torch.ones(2).numpy()], [torch.ones(2).numpy()], kernel="rbf")
