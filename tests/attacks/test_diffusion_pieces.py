"""Pieces of the membership attack: the DSM statistic, the size statistic, the DP-SGD counterfactual."""

from __future__ import annotations

import math

import torch

from securefg.attacks.diffusion_membership import dsm_profile, log_size_prob
from securefg.data.synthetic import make_graph_classification
from securefg.models.graph_score import GraphDiffusionModel
from securefg.models.graph_score.dp_training import train_dp_generator


def _graphs(n: int = 6) -> list:
    return [g for g in make_graph_classification(num_graphs=4 * n, num_classes=2, min_nodes=6, max_nodes=10, seed=3)
            if int(g.y) == 1][:n]


def test_dsm_profile_uses_common_random_numbers_so_equal_models_score_equal() -> None:
    g = _graphs(1)[0]
    a = GraphDiffusionModel(max_node_num=10, init_seed=5, class_label=1)
    b = GraphDiffusionModel(max_node_num=10, init_seed=5, class_label=1)
    x = dsm_profile(a, g, 1, levels=[0, 3], draws=4, seed=11)
    assert x == dsm_profile(b, g, 1, levels=[0, 3], draws=4, seed=11)
    assert x != dsm_profile(a, g, 1, levels=[0, 3], draws=4, seed=12)
    assert x > 0 and math.isfinite(x)


def test_the_size_statistic_rules_out_sizes_no_member_has() -> None:
    m = GraphDiffusionModel(max_node_num=10, init_seed=0, class_label=0)
    m.node_count_hist[0, 7] = 4
    assert log_size_prob(m, 7, 0, 10) > log_size_prob(None, 7, 0, 10) > log_size_prob(m, 8, 0, 10)


def test_dp_training_accounts_both_releases_and_an_exact_histogram_is_not_private() -> None:
    graphs = _graphs()
    private = GraphDiffusionModel(max_node_num=10, init_seed=1, class_label=1)
    before = private.flat_parameters().clone()
    fit = train_dp_generator(private, graphs, None, epochs=2, lr=1e-2, batch_size=3, noise_multiplier=1.0,
                             histogram_sigma=2.0, generator=torch.Generator().manual_seed(0))
    assert math.isfinite(fit.epsilon) and fit.epsilon > 0 and fit.steps == 4
    assert not torch.equal(before, private.flat_parameters())
    assert int(private.node_count_hist.sum()) > 0  # still samplable
    exact = GraphDiffusionModel(max_node_num=10, init_seed=1, class_label=1)
    fit = train_dp_generator(exact, graphs, None, epochs=1, lr=1e-2, batch_size=3, noise_multiplier=1.0,
                             histogram_sigma=0.0, generator=torch.Generator().manual_seed(0))
    assert fit.epsilon == float("inf")
    sizes = torch.bincount(torch.tensor([int(g.num_nodes) for g in graphs]), minlength=11)
    assert torch.equal(exact.node_count_hist[0], sizes)
