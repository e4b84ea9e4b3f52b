from __future__ import annotations

import pytest
import torch

from securefg.errors import InvalidInputError
from securefg.models.fedstruct.degree_features import degree_features
from securefg.models.fedstruct.partition import random_node_partition, random_node_split


def test_degree_features_are_capped_one_hot() -> None:
    # star: centre 0 has degree 4, leaves degree 1; a duplicate edge and a self-loop are ignored
    ei = torch.tensor([[0, 0, 0, 0, 1, 2, 3, 4, 0, 1], [1, 2, 3, 4, 0, 0, 0, 0, 1, 1]])
    s = degree_features(ei, 6, num_features=3)
    assert s.shape == (6, 3)
    assert s.argmax(1).tolist() == [2, 1, 1, 1, 1, 0]  # 4 -> capped at 2, isolated 5 -> 0
    torch.testing.assert_close(s.sum(1), torch.ones(6))


def test_partition_is_seeded_and_in_range() -> None:
    a = random_node_partition(100, 7, generator=torch.Generator().manual_seed(0))
    b = random_node_partition(100, 7, generator=torch.Generator().manual_seed(0))
    assert torch.equal(a, b) and int(a.min()) >= 0 and int(a.max()) < 7


def test_split_is_pairwise_disjoint_covering_and_per_client() -> None:
    owner = random_node_partition(500, 5, generator=torch.Generator().manual_seed(1))
    sp = random_node_split(owner, generator=torch.Generator().manual_seed(2))
    assert not bool((sp.train & sp.val).any())
    assert not bool((sp.train & sp.test).any())
    assert not bool((sp.val & sp.test).any())
    assert bool((sp.train | sp.val | sp.test).all())
    for k in range(5):
        n_k = int((owner == k).sum())
        assert int(sp.train[owner == k].sum()) == round(0.1 * n_k)
        assert int(sp.val[owner == k].sum()) == round(0.1 * n_k)


def test_split_rejects_ratios_above_one() -> None:
    with pytest.raises(InvalidInputError, match="train \\+ val <= 1"):
        random_node_split(torch.zeros(4, dtype=torch.long), train_ratio=0.6, val_ratio=0.5)


def test_a_views_degree_counts_inter_edges_and_its_intra_degree_does_not() -> None:
    from securefg.models.fedstruct.client_graph_view import ClientGraphView

    # client 0 owns nodes 0, 1, 2: path 0-1-2 inside, and node 1 also touches node 5 of another client
    intra = torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]])
    inter = torch.tensor([[1], [5]])
    view = ClientGraphView(0, torch.tensor([0, 1, 2]), intra, inter, torch.tensor([1]))
    assert view.degree().tolist() == [2, 4, 2]  # 1 + intra + inter
    assert view.intra_degree().tolist() == [1, 2, 1]


def test_degree_edges_is_checked() -> None:
    from securefg.errors import ConfigError
    from securefg.methods.fedstruct.settings import parse_settings

    assert parse_settings({"degree_edges": "intra"}, lr=0.01, weight_decay=0.0).degree_edges == "intra"
    with pytest.raises(ConfigError, match="degree_edges must be"):
        parse_settings({"degree_edges": "both"}, lr=0.01, weight_decay=0.0)
