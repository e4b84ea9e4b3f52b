import math

import pytest
import torch

from securefg.errors import InvalidInputError
from securefg.metrics import accuracy, roc_auc


def test_binary_auc_ranks_by_the_positive_class_probability() -> None:
    logits = torch.tensor([[2.0, 0.0], [1.0, 0.5], [0.0, 1.0], [-1.0, 3.0]])
    assert roc_auc(logits, torch.tensor([0, 0, 1, 1]), 2) == 1.0
    assert roc_auc(logits, torch.tensor([1, 1, 0, 0]), 2) == 0.0


def test_multiclass_auc_survives_all_mass_on_absent_classes() -> None:
    # classes 0-2 present, class 3 absent and predicted with certainty: the full softmax
    # underflows to zero on the present classes in float32, the present-class softmax does not
    logits = torch.tensor([[-200.0, -300.0, -300.0, 200.0], [-300.0, -200.0, -300.0, 200.0],
                           [-300.0, -300.0, -200.0, 200.0], [-190.0, -300.0, -300.0, 200.0]])
    assert torch.softmax(logits, -1)[:, :3].sum() == 0
    assert roc_auc(logits, torch.tensor([0, 1, 2, 0]), 4) == 1.0


def test_two_present_classes_of_many_use_the_binary_auc() -> None:
    logits = torch.tensor([[0.0, 1.0, 5.0], [0.0, 2.0, 5.0], [0.0, 3.0, 5.0]])
    assert roc_auc(logits, torch.tensor([0, 1, 1]), 3) == 1.0


def test_a_single_present_class_has_no_auc() -> None:
    assert math.isnan(roc_auc(torch.zeros(3, 2), torch.tensor([1, 1, 1]), 2))


def test_bad_logits_raise_typed_errors() -> None:
    with pytest.raises(InvalidInputError, match="NaN or inf"):
        roc_auc(torch.tensor([[0.0, float("nan")], [1.0, 0.0]]), torch.tensor([0, 1]), 2)
    with pytest.raises(InvalidInputError, match="shape"):
        roc_auc(torch.zeros(2, 3), torch.tensor([0, 1]), 2)


def test_accuracy_is_the_argmax_hit_rate() -> None:
    assert accuracy(torch.tensor([[1.0, 0.0], [0.0, 1.0]]), torch.tensor([0, 0])) == 0.5
    assert math.isnan(accuracy(torch.zeros(0, 2), torch.zeros(0, dtype=torch.long)))
