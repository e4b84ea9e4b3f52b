import pytest
import torch
from torch_geometric.utils import is_undirected

from securefg.data.synthetic import FAMILIES, make_csbm, make_graph_classification
from securefg.errors import ConfigError


def test_csbm_shapes_and_masks() -> None:
    data = make_csbm(num_nodes=300, num_classes=4, num_features=8, seed=3)
    assert data.x.shape == (300, 8)
    assert data.y.shape == (300,)
    assert torch.bincount(data.y).tolist() == [75, 75, 75, 75]
    assert is_undirected(data.edge_index) and not data.has_self_loops()
    masks = torch.stack([data.train_mask, data.val_mask, data.test_mask])
    assert masks.sum(0).eq(1).all()  # every node in exactly one split
    assert masks.sum(1).tolist() == [180, 60, 60]


def test_csbm_is_deterministic_in_seed_and_seeds_differ() -> None:
    a, b, c = make_csbm(seed=1), make_csbm(seed=1), make_csbm(seed=2)
    assert torch.equal(a.edge_index, b.edge_index) and torch.equal(a.x, b.x)
    assert not torch.equal(a.y, c.y)


def test_csbm_edge_probabilities_control_homophily() -> None:
    homo = make_csbm(num_nodes=600, p_in=0.05, p_out=0.002, seed=0)
    hetero = make_csbm(num_nodes=600, p_in=0.002, p_out=0.05, seed=0)

    def same_class(d):  # fraction of edges inside a class
        return (d.y[d.edge_index[0]] == d.y[d.edge_index[1]]).float().mean().item()

    assert same_class(homo) > 0.85 and same_class(hetero) < 0.1
    # Expected undirected edges: 3 blocks of 200 -> 3 * C(200, 2) * 0.05 + 3 * 200^2 * 0.002 = 3225.
    assert abs(homo.edge_index.size(1) / 2 - 3225) < 5 * 3225**0.5


def test_csbm_sparse_sampler_matches_expected_density() -> None:
    # 4000 nodes in 2 blocks: every block has > 4e6 pairs, so the sparse path is used.
    data = make_csbm(num_nodes=4000, num_classes=2, p_in=0.001, p_out=0.0001, seed=0)
    expected = 2 * 2000 * 1999 / 2 * 0.001 + 2000 * 2000 * 0.0001
    assert abs(data.edge_index.size(1) / 2 - expected) < 5 * expected**0.5


def test_csbm_feature_signal_separates_classes() -> None:
    data = make_csbm(num_nodes=400, num_classes=2, num_features=4, feature_signal=6.0, seed=0)
    mean0, mean1 = data.x[data.y == 0].mean(0), data.x[data.y == 1].mean(0)
    assert (mean0 - mean1).norm() > 4.0


def test_csbm_rejects_impossible_sizes() -> None:
    with pytest.raises(ConfigError, match="num_nodes >= num_classes"):
        make_csbm(num_nodes=2, num_classes=3)
    with pytest.raises(ConfigError, match=r"probabilities must lie in \[0, 1\]"):
        make_csbm(p_in=1.5)


def test_graph_classification_structure_per_class() -> None:
    graphs = make_graph_classification(num_graphs=40, num_classes=4, min_nodes=6, max_nodes=10, seed=0)
    assert len(graphs) == 40
    assert [int(g.y) for g in graphs[:4]] == [0, 1, 2, 3]
    for g in graphs:
        n = g.num_nodes
        assert 6 <= n <= 10 and g.x.shape == (n, 10) and is_undirected(g.edge_index, num_nodes=n)
        deg = g.x.argmax(1)
        assert torch.equal(deg, torch.bincount(g.edge_index[0], minlength=n))
        family = FAMILIES[int(g.y)]
        if family == "cycle":
            assert deg.eq(2).all()
        elif family == "tree":
            assert g.edge_index.size(1) == 2 * (n - 1) and deg.eq(1).any()
        elif family == "wheel":
            assert deg[0] == n - 1 and deg[1:].eq(3).all()


def test_graph_classification_is_deterministic_and_validated() -> None:
    a = make_graph_classification(num_graphs=10, seed=5)
    b = make_graph_classification(num_graphs=10, seed=5)
    assert all(torch.equal(x.edge_index, y.edge_index) for x, y in zip(a, b, strict=True))
    with pytest.raises(ConfigError, match="supports 2..4 classes"):
        make_graph_classification(num_classes=5)
