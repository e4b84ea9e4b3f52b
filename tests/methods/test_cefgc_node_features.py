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


def _ring(n: int, cat: int, width: int = 3) -> Data:
    """A cycle of ``n`` nodes that all have category ``cat`` (every degree is 2)."""
    src = torch.arange(n)
    dst = (src + 1) % n
    return Data(x=torch.nn.functional.one_hot(torch.full((n,), cat), width).float(),
                edge_index=torch.cat([torch.stack([src, dst]), torch.stack([dst, src])], 1), y=torch.tensor([0]), num_nodes=n)


def _edge_agreement(graphs: list[Data]) -> float:
    cats = [g.x.argmax(1) for g in graphs]
    same = [float((c[g.edge_index[0]] == c[g.edge_index[1]]).float().mean()) for c, g in zip(cats, graphs, strict=True)]
    return sum(same) / len(same)


def test_pairwise_table_keeps_neighbouring_categories_together() -> None:
    graphs = [_ring(12, k % 2) for k in range(20)]  # degree says nothing; neighbours always agree
    node_only = NodeFeatureTable.fit(graphs, [0] * 20, num_rows=1, max_degree=9, width=3)
    pairwise = NodeFeatureTable.fit(graphs, [0] * 20, num_rows=1, max_degree=9, width=3, edges=True)
    assert node_only.edge_probs is None and torch.equal(pairwise.probs, node_only.probs)
    assert float(pairwise.edge_probs.sum()) == pytest.approx(1.0) and float(pairwise.edge_probs[0, 0, 1]) == 0.0
    bare = [_ring(12, 2)] * 40
    drawn = {name: t.featurize(bare, [0] * 40, generator=torch.Generator().manual_seed(3))
             for name, t in (("node", node_only), ("pairwise", pairwise))}
    assert 0.35 < _edge_agreement(drawn["node"]) < 0.65  # independent fair draws: agree half the time
    assert _edge_agreement(drawn["pairwise"]) > 0.9
    # both categories still occur, and never the one the sender's graphs never had
    cats = torch.cat([g.x.argmax(1) for g in drawn["pairwise"]])
    assert set(cats.tolist()) == {0, 1}


def test_pairwise_draw_keeps_one_hot_degree_features_exact() -> None:
    from securefg.data.synthetic import make_graph_classification

    graphs = degree_features(make_graph_classification(num_graphs=30, num_classes=3, seed=4), 12)
    table = NodeFeatureTable.fit(graphs, [0] * 30, num_rows=1, max_degree=15, width=13, edges=True)
    bare = [Data(edge_index=g.edge_index, y=g.y, num_nodes=g.num_nodes) for g in graphs]
    redrawn = table.featurize(bare, [0] * 30, generator=torch.Generator().manual_seed(0))
    assert all(torch.equal(a.x, b.x) for a, b in zip(redrawn, graphs, strict=True))


def test_noisy_pairwise_fit_releases_two_distributions() -> None:
    graphs = [_ring(12, k % 2) for k in range(20)]
    t = NodeFeatureTable.fit(graphs, [0] * 20, num_rows=1, max_degree=9, width=3, edges=True, noise_std=0.5,
                             generator=torch.Generator().manual_seed(0))
    assert float(t.probs.sum()) == pytest.approx(1.0) and float(t.edge_probs.sum()) == pytest.approx(1.0)
    assert float(t.edge_probs[0, 0, 2]) > 0  # noise reaches cells no graph filled


def test_bad_edge_tables_are_refused() -> None:
    with pytest.raises(InvalidInputError, match="edge feature table has shape"):
        NodeFeatureTable(torch.ones(1, 4, 3), torch.ones(1, 3, 2))
    with pytest.raises(InvalidInputError, match="edge feature table entries"):
        NodeFeatureTable(torch.ones(1, 4, 3), torch.full((1, 3, 3), -1.0))
    with pytest.raises(InvalidInputError, match="carries no edge frequencies"):
        NodeFeatureTable(torch.ones(1, 4, 3)).log_association(0)


def test_edge_tables_cross_both_package_forms() -> None:
    arch = Architecture(EDPScoreConfig(), DEFAULT_SIGMAS, 10, 2, False, feature_width=3, feature_edges=True)
    a0, b0 = (arch.new_model(class_label=0, init_seed=s) for s in (1, 2))
    for m, n in ((a0, 4), (b0, 6)):
        m.node_count_hist[0, n] = 3
    ta, tb = (NodeFeatureTable.fit([_star(k, h, 0)], [0], num_rows=1, max_degree=9, width=3, edges=True)
              for k, h in ((3, 1), (5, 2)))
    exact = unpack_exact_generators(pack_exact({0: a0}, {0: ta}))
    assert torch.equal(exact[0].features.edge_probs, ta.edge_probs)
    pa, pb = pack_dense({0: a0}, arch, {0: ta}), pack_dense({0: b0}, arch, {0: tb})
    mix = unpack_dense_generators({k: (pa[k] + pb[k]) / 2 for k in pa}, arch)
    assert torch.allclose(mix[0].features.edge_probs, (ta.edge_probs + tb.edge_probs) / 2, atol=1e-7)
    with pytest.raises(InvalidInputError, match="edge-feature table"):
        pack_dense({0: a0}, arch, {0: NodeFeatureTable(ta.probs)})
    with pytest.raises(InvalidInputError, match="without x0/node_features"):
        unpack_exact_generators({**{k: v for k, v in pack_exact({0: a0}, {0: ta}).items() if k != "x0/node_features"}})
    wrong = dict(pa, **{"s0/edge_features": torch.ones(1, 2, 3)})
    with pytest.raises(InvalidInputError, match="s0/edge_features has shape"):
        unpack_dense_generators(wrong, arch)
