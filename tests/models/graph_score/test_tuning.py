import pytest

from securefg.errors import InvalidInputError
from securefg.models.graph_score import GraphDiffusionModel, LangevinParams, select_sampling_params
from tests.models.graph_score.conftest import complete_bipartite, cycle


def test_selection_returns_every_candidate_best_first_and_applies_the_best() -> None:
    model = GraphDiffusionModel(max_node_num=8, init_seed=0, sampling=LangevinParams(steps_per_level=2))
    graphs = [cycle(5), cycle(6), cycle(7)]
    model.fit(graphs, epochs=2, generator=0)
    trials = select_sampling_params(
        model, graphs, step_ratios=(0.05, 0.3), noise_factors=(0.5,), num_samples=4, generator=0
    )
    assert len(trials) == 2
    assert trials[0].score <= trials[1].score
    assert {t.params.step_ratio for t in trials} == {0.05, 0.3}
    assert model.sampling == trials[0].params and model.sampling.steps_per_level == 2


def test_selection_scores_a_conditional_model_per_class() -> None:
    model = GraphDiffusionModel(num_classes=2, max_node_num=8, init_seed=0)
    graphs, labels = [cycle(5), complete_bipartite(2, 3)], [0, 1]
    model.fit(graphs, labels, epochs=1, generator=0)
    trials = select_sampling_params(
        model,
        graphs,
        labels,
        step_ratios=(0.1,),
        noise_factors=(0.9,),
        steps_per_level=1,
        num_samples=2,
        generator=0,
        apply=False,
    )
    assert len(trials) == 1 and model.sampling == LangevinParams()


def test_selection_needs_labels_for_a_conditional_model() -> None:
    model = GraphDiffusionModel(num_classes=2, max_node_num=8, init_seed=0)
    with pytest.raises(InvalidInputError, match="pass labels exactly when the model is conditional"):
        select_sampling_params(model, [cycle(5)])
