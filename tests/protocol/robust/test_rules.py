"""Robust rules over subgroup means, pinned on small hand-computed matrices."""

from __future__ import annotations

import torch

from securefg.protocol.robust.rules import (
    closest_mean,
    coordinate_median,
    norm_bounded_mean,
    robust_mean,
    row_norms_bounded,
    trimmed_mean,
)

M = torch.tensor([[1.0, 10.0], [2.0, -4.0], [3.0, 0.0], [100.0, 1.0], [4.0, 2.0]], dtype=torch.float64)


def test_coordinate_median_odd_and_even() -> None:
    assert coordinate_median(M).tolist() == [3.0, 1.0]
    assert coordinate_median(M[:4]).tolist() == [2.5, 0.5]


def test_trimmed_mean_cuts_one_row_per_end_per_coordinate() -> None:
    assert trimmed_mean(M, 0.2).tolist() == [3.0, 1.0]
    assert torch.allclose(trimmed_mean(M, 0.0), M.mean(0))


def test_norm_bound_scales_only_rows_above_factor_times_median_norm() -> None:
    rows = torch.tensor([[3.0, 4.0], [0.0, 1.0], [30.0, 40.0]], dtype=torch.float64)  # norms 5, 1, 50
    out = row_norms_bounded(rows, 1.0)
    assert out.norm(dim=1).tolist() == [5.0, 1.0, 5.0]
    assert torch.allclose(out[2], torch.tensor([3.0, 4.0], dtype=torch.float64))
    assert torch.equal(row_norms_bounded(rows, 0.0), rows)


def test_norm_rule_is_the_weighted_mean_of_bounded_rows() -> None:
    rows = torch.tensor([[3.0, 4.0], [0.0, 1.0], [30.0, 40.0]], dtype=torch.float64)
    w = torch.tensor([1.0, 2.0, 1.0], dtype=torch.float64)
    got = robust_mean(rows, w, rule="norm", norm_factor=1.0)
    assert torch.allclose(got, norm_bounded_mean(row_norms_bounded(rows, 1.0), w))
    assert torch.allclose(got, torch.tensor([1.5, 2.5], dtype=torch.float64))


def test_one_boosted_row_moves_the_median_by_at_most_one_order_statistic() -> None:
    honest = torch.tensor([[1.0], [2.0], [3.0], [4.0]], dtype=torch.float64)
    poisoned = torch.cat([honest, torch.tensor([[-1e6]], dtype=torch.float64)])
    w = torch.ones(5, dtype=torch.float64)
    assert robust_mean(poisoned, w, rule="median").item() == 2.0
    assert robust_mean(poisoned, w, rule="trimmed", trim=0.2).item() == 2.0


def test_closest_drops_the_row_farthest_from_the_median_and_averages_the_rest() -> None:
    rows = torch.tensor([[1.0, 1.0], [1.2, 0.8], [0.8, 1.2], [1.0, 0.9], [-3.0, -3.0]], dtype=torch.float64)
    w = torch.tensor([1.0, 1.0, 1.0, 1.0, 1.0], dtype=torch.float64)
    got = robust_mean(rows, w, rule="closest", trim=0.2, norm_factor=0.0)
    assert torch.allclose(got, rows[:4].mean(0))
    assert torch.allclose(closest_mean(rows, w, 0.0), rows.mean(0))
