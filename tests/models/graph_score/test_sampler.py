import pytest
import torch

from securefg.errors import ConfigError, InvalidInputError
from securefg.models.graph_score import GraphDiffusionModel, LangevinParams
from securefg.models.graph_score.node_counts import sample_node_counts
from tests.models.graph_score.conftest import cycle

FAST = LangevinParams(steps_per_level=3, step_ratio=0.02, noise_factor=0.5)


@pytest.fixture(scope="module")
def model() -> GraphDiffusionModel:
    m = GraphDiffusionModel(max_node_num=12, init_seed=0, class_label=1, sampling=FAST)
    m.fit([cycle(5), cycle(9), cycle(9), cycle(12)], epochs=2, generator=0)
    return m


def _dense(graph) -> torch.Tensor:
    adj = torch.zeros(graph.num_nodes, graph.num_nodes)
    adj[graph.edge_index[0], graph.edge_index[1]] = 1
    return adj


def test_samples_are_simple_undirected_graphs_of_the_drawn_sizes(model) -> None:
    graphs = model.sample(20, generator=torch.Generator().manual_seed(3), batch_size=7)
    expected = sample_node_counts(model.node_count_hist[0], 20, generator=torch.Generator().manual_seed(3))
    assert [g.num_nodes for g in graphs] == expected.tolist()
    assert set(expected.tolist()) <= {5, 9, 12} and len(set(expected.tolist())) > 1
    for g in graphs:
        adj = _dense(g)
        assert torch.equal(adj, adj.t())
        assert adj.diagonal().sum() == 0
        assert g.edge_index.shape[1] == int(adj.sum())  # no duplicate edges
        assert g.y.tolist() == [1]
    assert sum(g.edge_index.shape[1] for g in graphs) > 0


def test_sampling_is_deterministic_under_a_fixed_generator(model) -> None:
    a = model.sample(6, generator=torch.Generator().manual_seed(11))
    b = model.sample(6, generator=torch.Generator().manual_seed(11))
    c = model.sample(6, generator=torch.Generator().manual_seed(12))
    assert all(torch.equal(x.edge_index, y.edge_index) for x, y in zip(a, b, strict=True))
    assert any(
        x.num_nodes != z.num_nodes or not torch.equal(x.edge_index, z.edge_index)
        for x, z in zip(a, c, strict=True)
    )


def test_batch_size_does_not_change_the_sizes(model) -> None:
    small = model.sample(5, generator=1, batch_size=1)
    large = model.sample(5, generator=1, batch_size=64)
    assert [g.num_nodes for g in small] == [g.num_nodes for g in large]


def test_an_untrained_model_refuses_to_sample() -> None:
    with pytest.raises(InvalidInputError, match="node-count histogram is empty: fit the model"):
        GraphDiffusionModel(max_node_num=8, init_seed=0).sample(1, generator=0)


def test_sampling_params_reject_a_zero_step_ratio() -> None:
    with pytest.raises(ConfigError, match=r"step_ratio=0.0 not in \(0, 1\]"):
        LangevinParams(step_ratio=0.0)
