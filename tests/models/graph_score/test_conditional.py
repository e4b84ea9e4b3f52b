import pytest
import torch

from securefg.errors import ConfigError, InvalidInputError
from securefg.models.graph_score import GraphDiffusionModel, LangevinParams
from tests.models.graph_score.conftest import complete_bipartite, cycle


@pytest.fixture(scope="module")
def conditional() -> GraphDiffusionModel:
    model = GraphDiffusionModel(
        num_classes=2, max_node_num=12, init_seed=0, sampling=LangevinParams(steps_per_level=3)
    )
    graphs = [cycle(5), cycle(6), complete_bipartite(5, 5), complete_bipartite(5, 6)]
    model.fit(graphs, [0, 0, 1, 1], epochs=2, generator=0)
    return model


def test_conditional_model_conditions_on_class_times_levels(conditional) -> None:
    assert conditional.config.num_conditions == 12
    assert conditional.node_count_hist.shape == (2, 13)
    assert conditional.node_count_hist[0].nonzero().flatten().tolist() == [5, 6]
    assert conditional.node_count_hist[1].nonzero().flatten().tolist() == [10, 11]


def test_conditional_model_samples_each_class_with_its_own_sizes(conditional) -> None:
    labels = [0, 1, 1, 0, 1, 0]
    graphs = conditional.sample(6, labels=labels, generator=torch.Generator().manual_seed(0))
    assert [int(g.y) for g in graphs] == labels
    for g, k in zip(graphs, labels, strict=True):
        assert g.num_nodes in ((5, 6) if k == 0 else (10, 11))


def test_one_label_for_all_graphs(conditional) -> None:
    graphs = conditional.sample(3, labels=1, generator=0)
    assert [int(g.y) for g in graphs] == [1, 1, 1]


def test_conditional_model_needs_labels_to_sample(conditional) -> None:
    with pytest.raises(InvalidInputError, match=r"this model is conditional \(num_classes=2\): pass labels"):
        conditional.sample(2, generator=0)


def test_a_class_without_training_graphs_cannot_be_sampled() -> None:
    model = GraphDiffusionModel(num_classes=3, max_node_num=8, init_seed=0)
    model.fit([cycle(5)], [0], epochs=1, generator=0)
    with pytest.raises(InvalidInputError, match="node-count histogram is empty"):
        model.sample(1, labels=2, generator=0)


def test_class_label_is_only_for_per_class_models() -> None:
    with pytest.raises(ConfigError, match="class_label is for per-class models"):
        GraphDiffusionModel(num_classes=2, class_label=0)
