"""Attack metrics against hand-computed values."""

from __future__ import annotations

import math

import pytest
import torch

from securefg.attacks.metrics import cosine_similarity, roc_auc, roc_points, stratified_auc, tpr_at_fpr


def test_roc_auc_of_a_perfect_a_reversed_and_a_tied_score() -> None:
    y = [0, 0, 1, 1]
    assert roc_auc(y, [0.1, 0.2, 0.8, 0.9]) == 1.0
    assert roc_auc(y, [0.9, 0.8, 0.2, 0.1]) == 0.0
    assert roc_auc(y, [0.5, 0.5, 0.5, 0.5]) == 0.5
    assert math.isnan(roc_auc([1, 1], [0.2, 0.3]))


def test_tpr_at_low_fpr_counts_only_thresholds_above_every_negative_when_negatives_are_few() -> None:
    y = [0] * 10 + [1] * 10
    s = list(range(10)) + [5.5, 11, 12, 13, 14, 15, 16, 17, 18, 19]  # one positive below the top negative
    assert tpr_at_fpr(y, s, 0.01) == pytest.approx(0.9)
    assert tpr_at_fpr(y, s, 0.5) == 1.0


def test_stratified_auc_is_one_half_when_every_member_of_a_group_gets_the_same_score() -> None:
    y = [1, 0, 0, 1, 1, 0]
    groups = ["a", "a", "a", "b", "b", "b"]
    assert stratified_auc(y, [3, 3, 3, 1, 1, 1], groups) == 0.5
    assert roc_auc(y, [3, 3, 3, 1, 1, 1]) != 0.5  # pooled, the group score leaks prevalence
    assert stratified_auc(y, [1, 0, 0, 1, 1, 0], groups) == 1.0


def test_scores_must_be_finite_and_aligned() -> None:
    with pytest.raises(ValueError, match="NaN or Inf"):
        roc_auc([0, 1], [0.0, float("nan")])
    with pytest.raises(ValueError, match="differ in length"):
        roc_auc([0, 1], [0.0])


def test_roc_points_are_thinned_and_cosine_is_scale_free() -> None:
    f, _t = roc_points([0, 1] * 500, list(range(1000)), max_points=50)
    assert len(f) <= 50 and f[0] == 0.0 and f[-1] == 1.0
    assert cosine_similarity(torch.tensor([1.0, 2.0]), torch.tensor([2.0, 4.0])) == pytest.approx(1.0)
    assert cosine_similarity(torch.zeros(2), torch.ones(2)) == 0.0
