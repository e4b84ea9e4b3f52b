"""CeFGC's node-feature tables: what the sender fits, what the receiver draws, what crosses the relay."""

from __future__ import annotations

import pytest
import torch
from torch_geometric.data import Data

from securefg.errors import ConfigError, InvalidInputError
from securefg.experiment_data import degree_features
from securefg.methods.cefgc.node_features import NodeFeatureTable, node_degrees
from securefg.methods.cefgc.package import (
    Architecture,
    pack_dense,
    pack_exact,
    unpack_dense_generators,
    unpack_exact_generators,
)
from securefg.models.graph_score import DEFAULT_SIGMAS, EDPScoreConfig


def _star(leaves: int, hub_cat: int, leaf_cat: int, width: int = 3) -> Data:
    """A star whose hub has category ``hub_cat`` and whose leaves have ``leaf_cat``."""
    ends = torch.arange(1, leaves + 1)
    edge_index = torch.cat([torch.stack([torch.zeros_like(ends), ends]), torch.stack([ends, torch.zeros_like(ends)])], 1)
    cats = torch.tensor([hub_cat] + [leaf_cat] * leaves)
    return Data(x=torch.nn.functional.one_hot(cats, width).float(), edge_index=edge_index, y=torch.tensor([0]),
                num_nodes=leaves + 1)


def test_table_learns_category_per_degree_and_redraws_it() -> None:
    graphs = [_star(4, hub_cat=2, leaf_cat=0), _star(5, hub_cat=2, leaf_cat=0)]
    table = NodeFeatureTable.fit(graphs, [0, 0], num_rows=1, max_degree=9, width=3)
    assert float(table.probs.sum()) == pytest.approx(1.0)
    # degrees 4 and 1 were seen: the input's own categories (all 1) are replaced by the learned ones
    seen = table.featurize([_star(4, 1, 1)] * 50, [0] * 50, generator=torch.Generator().manual_seed(2))
    assert all(g.x.argmax(1).tolist() == [2, 0, 0, 0, 0] for g in seen)
    # degree 6 was never seen: the hub falls back to P(f | class) = 2/11 category 2, 9/11 category 0
    many = table.featurize([_star(6, 1, 1)] * 400, [0] * 400, generator=torch.Generator().manual_seed(1))
    hub = torch.tensor([int(g.x[0].argmax()) for g in many])
    assert set(hub.tolist()) == {0, 2} and 0.1 < float((hub == 2).float().mean()) < 0.3


def test_on_one_hot_degree_features_the_table_reproduces_them() -> None:
    from securefg.data.synthetic import make_graph_classification

    graphs = degree_features(make_graph_classification(num_graphs=30, num_classes=3, seed=4), 12)
    table = NodeFeatureTable.fit(graphs, [0] * 30, num_rows=1, max_degree=15, width=13)
    bare = [Data(edge_index=g.edge_index, y=g.y, num_nodes=g.num_nodes) for g in graphs]
    redrawn = table.featurize(bare, [0] * 30, generator=torch.Generator().manual_seed(0))
    assert all(torch.equal(a.x, b.x) for a, b in zip(redrawn, graphs, strict=True))


def test_non_one_hot_features_are_refused_with_the_alternative() -> None:
    g = _star(3, 0, 1)
    g.x = g.x * 0.5
    with pytest.raises(ConfigError, match="features=degree"):
        NodeFeatureTable.fit([g], [0], num_rows=1, max_degree=5, width=3)
    with pytest.raises(InvalidInputError):
        NodeFeatureTable(torch.full((1, 2, 3), float("nan")))


def test_tables_cross_both_package_forms_and_average_presence_weighted() -> None:
    arch = Architecture(EDPScoreConfig(), DEFAULT_SIGMAS, 10, 2, False, feature_width=3)
    a0, a1, b1 = (arch.new_model(class_label=c, init_seed=s) for c, s in ((0, 1), (1, 2), (1, 3)))
    for m, n in ((a0, 4), (a1, 5), (b1, 7)):
        m.node_count_hist[0, n] = 3
    ta0, ta1, tb1 = (NodeFeatureTable.fit([_star(k, h, 0)], [0], num_rows=1, max_degree=9, width=3)
                     for k, h in ((3, 1), (4, 2), (5, 1)))
    exact = unpack_exact_generators(pack_exact({0: a0, 1: a1}, {0: ta0, 1: ta1}))
    assert [torch.equal(g.features.probs, t.probs) for g, t in zip(exact, (ta0, ta1), strict=True)] == [True, True]
    pa, pb = pack_dense({0: a0, 1: a1}, arch, {0: ta0, 1: ta1}), pack_dense({1: b1}, arch, {1: tb1})
    mix = unpack_dense_generators({k: (pa[k] + pb[k]) / 2 for k in pa}, arch)
    assert torch.allclose(mix[0].features.probs, ta0.probs, atol=1e-7)  # b lacks class 0: unmixed
    assert torch.allclose(mix[1].features.probs, (ta1.probs + tb1.probs) / 2, atol=1e-7)
    with pytest.raises(InvalidInputError, match="node-feature table"):
        pack_dense({0: a0}, arch)  # a feature-bearing architecture needs every table


def test_degrees_count_each_undirected_edge_once_per_end() -> None:
    assert node_degrees(_star(3, 0, 0)).tolist() == [3, 1, 1, 1]
