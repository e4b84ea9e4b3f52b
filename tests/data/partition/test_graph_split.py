from itertools import combinations

import pytest
import torch

from securefg.data.partition import (
    DirichletGraphSplit,
    GraphSplit,
    MultiDatasetSplit,
    client_graph_sets,
    concat_with_global_labels,
    global_test_graphs,
    graph_labels,
    graph_partition_statistics,
)
from securefg.data.synthetic import make_graph_classification
from securefg.errors import ConfigError, InvalidInputError

from .helpers import assert_pairwise_disjoint


@pytest.fixture(scope="module")
def graphs():
    return make_graph_classification(num_graphs=190, num_classes=3, seed=0)


def test_graph_split_follows_the_documented_convention(graphs) -> None:
    p = GraphSplit(3, seed=0)(graphs)
    assert p.level == "graph" and p.num_items == 190
    assert_pairwise_disjoint(p)
    gt = p.masks["global_test"]
    assert int(gt.sum()) == 38  # round(0.2 * 190)
    assert p.sizes().tolist() == [51, 51, 50]  # 152 training graphs, first chunks larger
    held = torch.zeros(190, dtype=torch.bool)
    for part in p.parts():
        assert not gt[part].any()  # the global test set is held by no client
        held[part] = True
    assert torch.equal(held | gt, torch.ones(190, dtype=torch.bool))
    # client share of 50 -> 35/5/10; of 51 -> round(10.2)=10 test, round(5.1)=5 val, 36 train
    roles = [[int(p.masks[r][part].sum()) for r in ("train", "val", "test")] for part in p.parts()]
    assert roles == [[36, 5, 10], [36, 5, 10], [35, 5, 10]]
    for a, b in combinations(("train", "val", "test", "global_test"), 2):
        assert not (p.masks[a] & p.masks[b]).any(), f"{a} and {b} overlap"


def test_graph_split_is_deterministic_and_seeded(graphs) -> None:
    a = GraphSplit(4, seed=1)(graphs)
    assert a == GraphSplit(4, seed=1)(graphs) and a != GraphSplit(4, seed=2)(graphs)


def test_client_graph_sets_and_global_test(graphs) -> None:
    p = GraphSplit(3, seed=0)(graphs)
    sets = client_graph_sets(graphs, p)
    assert [len(s["train"]) for s in sets] == [36, 36, 35]
    assert len(global_test_graphs(graphs, p)) == 38
    assert sets[0]["val"][0] is graphs[int(torch.nonzero(p.masks["val"] & (p.assignment() == 0))[0])]


def test_graph_split_validates_ratios_and_sizes(graphs) -> None:
    with pytest.raises(ConfigError, match="summing to 1"):
        GraphSplit(3, client_ratios=(0.7, 0.2, 0.2))
    with pytest.raises(InvalidInputError, match="cannot be shared by 500 clients"):
        GraphSplit(500)(graphs)


def test_dirichlet_split_skews_labels_more_for_small_alpha(graphs) -> None:
    skewed = DirichletGraphSplit(5, alpha=0.1, seed=0, min_size=3)(graphs)
    even = DirichletGraphSplit(5, alpha=100.0, seed=0, min_size=3)(graphs)
    assert_pairwise_disjoint(skewed)
    assert skewed.sizes().min() >= 3
    h_skew = graph_partition_statistics(graphs, skewed).summary["heterogeneity_js"]
    h_even = graph_partition_statistics(graphs, even).summary["heterogeneity_js"]
    assert h_skew > 0.4 and h_even < 0.15
    assert int(skewed.masks["global_test"].sum()) == 38  # same global test convention


def test_dirichlet_split_fails_clearly_when_min_size_is_impossible(graphs) -> None:
    with pytest.raises(ConfigError, match="raise alpha, lower min_size"):
        DirichletGraphSplit(10, alpha=0.5, min_size=100)(graphs)


def test_multi_dataset_split_keeps_each_client_on_one_dataset() -> None:
    a = make_graph_classification(num_graphs=60, num_classes=2, seed=1)
    b = make_graph_classification(num_graphs=90, num_classes=3, seed=2)
    split = MultiDatasetSplit({"A": 2, "B": 3}, seed=0)
    p = split({"B": b, "A": a})
    assert p.num_parts == 5 and p.params["client_dataset"] == ["A", "A", "B", "B", "B"]
    assert p.params["label_offsets"] == [0, 2] and p.params["num_global_classes"] == 5
    for k, part in enumerate(p.parts()):
        in_a = part < 60
        assert in_a.all() if k < 2 else (~in_a).all()
    merged = concat_with_global_labels({"A": a, "B": b}, p)
    y = graph_labels(merged)
    assert torch.equal(y[:60], graph_labels(a)) and torch.equal(y[60:], graph_labels(b) + 2)
    assert int(merged[70].dataset_id) == 1 and a[0].y.item() == 0  # inputs not shifted in place
    with pytest.raises(InvalidInputError, match=r"expected datasets \['A', 'B'\]"):
        split({"A": a})
