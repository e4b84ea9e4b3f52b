"""Per-dataset heads on one output layer (``securefg.methods.label_groups``)."""

import pytest
import torch
import torch.nn.functional as F

from securefg.data.synthetic import make_graph_classification
from securefg.errors import ConfigError, InvalidInputError
from securefg.methods.label_groups import LabelGroups
from securefg.methods.training import evaluate_graphs, train_graph_epochs
from securefg.models.gin import GIN


def test_groups_lie_side_by_side_and_reject_gaps() -> None:
    g = LabelGroups.from_counts([6, 2])
    assert g.bounds == ((0, 6), (6, 8)) and g.num_classes == 8
    assert g.group_of(torch.tensor([0, 5, 6, 7])).tolist() == [0, 0, 1, 1]
    for bad in (((0, 2), (3, 4)), ((1, 3),), ((0, 2), (2, 2)), ()):
        with pytest.raises(ConfigError):
            LabelGroups(bad)
    with pytest.raises(InvalidInputError, match="labels must lie"):
        g.group_of(torch.tensor([8]))


def test_restricted_loss_leaves_the_other_datasets_head_untouched() -> None:
    g = LabelGroups.from_counts([2, 3])
    logits = torch.randn(4, 5, requires_grad=True)
    y = torch.tensor([0, 1, 1, 0])  # all from dataset 0
    F.cross_entropy(g.restrict(logits, y), y).backward()
    assert torch.all(logits.grad[:, 2:] == 0) and torch.any(logits.grad[:, :2] != 0)
    # the restricted loss is the cross entropy of the dataset's own logits
    ref = F.cross_entropy(logits.detach()[:, :2], y)
    assert torch.isclose(F.cross_entropy(g.restrict(logits.detach(), y), y), ref)
    with pytest.raises(InvalidInputError, match="shape"):
        g.restrict(torch.zeros(4, 4), y)


def test_scores_average_each_datasets_own_auc() -> None:
    g = LabelGroups.from_counts([2, 2], ["A", "B"])
    # dataset 0 ranked perfectly, dataset 1 ranked backwards; huge logits on the *other* head
    # must not matter (a shared softmax would score both datasets by them)
    logits = torch.tensor([[2.0, 0.0, 50.0, 0.0], [0.0, 2.0, 50.0, 0.0],
                           [50.0, 0.0, 0.0, 2.0], [50.0, 0.0, 2.0, 0.0]])
    y = torch.tensor([0, 1, 2, 3])
    out = g.scores(logits, y)
    assert out["auc"] == pytest.approx(0.5) and out["acc"] == pytest.approx(0.5)
    assert out["auc_by_dataset"] == {"A": 1.0, "B": 0.0}
    with pytest.raises(ConfigError, match="names"):
        LabelGroups.from_counts([2, 2], ["A"])


def test_a_client_of_one_dataset_trains_only_its_head() -> None:
    graphs = make_graph_classification(num_graphs=24, num_classes=2, seed=0)
    g = LabelGroups.from_counts([2, 3])
    model = GIN(graphs[0].x.size(1), 5, hidden_channels=8)
    head = [p for p in model.parameters()][-2:]  # the classifier's weight and bias
    before = [p.detach().clone() for p in head]
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    train_graph_epochs(model, opt, graphs, epochs=2, batch_size=8, device=torch.device("cpu"), groups=g)
    assert torch.equal(head[0][2:], before[0][2:]) and torch.equal(head[1][2:], before[1][2:])
    assert not torch.equal(head[0][:2], before[0][:2])
    scores = evaluate_graphs(model, graphs, 5, torch.device("cpu"), groups=g)
    assert 0.0 <= scores["auc"] <= 1.0
