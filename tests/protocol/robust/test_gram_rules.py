"""Gram-matrix rules: distances, multi-Krum, the norm bound, and refusals of impossible matrices."""

from __future__ import annotations

import pytest
import torch

from securefg.errors import InvalidInputError
from securefg.protocol.robust.gram_rules import (
    check_gram,
    gram_coefficients,
    krum_scores,
    norm_coefficients,
    squared_distances,
    tolerated,
)


def cluster(n: int = 10, dim: int = 20, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    base = torch.randn(dim, generator=g, dtype=torch.float64)
    return base + 0.2 * torch.randn(n, dim, generator=g, dtype=torch.float64)


def test_distances_from_the_gram_matrix_equal_the_direct_ones() -> None:
    x = cluster()
    assert torch.allclose(squared_distances(x @ x.T), torch.cdist(x, x) ** 2, atol=1e-9)


@pytest.mark.parametrize(("n", "trim", "f"), [(10, 0.2, 2), (3, 0.2, 0), (4, 0.2, 0), (5, 0.2, 1), (6, 0.2, 1),
                                               (10, 0.0, 0), (10, 0.49, 3), (2, 0.2, 0), (1, 0.2, 0)])
def test_multi_krum_drops_at_most_what_its_condition_n_ge_2f_plus_3_allows(n: int, trim: float, f: int) -> None:
    assert tolerated(n, trim) == f


@pytest.mark.parametrize("attack", ["boost", "sign_flip", "far"])
def test_multi_krum_drops_the_poisoned_input(attack: str) -> None:
    x = cluster()
    x[3] = {"boost": 10 * x[3], "sign_flip": -10 * x[3], "far": x[3] + 5.0}[attack]
    coeffs = gram_coefficients(x @ x.T, rule="krum", trim=0.2, norm_factor=0.0)
    assert coeffs[3] == 0 and int((coeffs > 0).sum()) == 8 and set(coeffs.tolist()) <= {0.0, 1.0}


def test_krum_scores_count_only_the_nearest_neighbours() -> None:
    x = cluster(n=6)
    d = torch.cdist(x, x) ** 2
    d.fill_diagonal_(float("inf"))
    want = d.sort(1).values[:, : 6 - 1 - 2].sum(1)
    assert torch.allclose(krum_scores(x @ x.T, 1), want, atol=1e-9)


def test_the_norm_bound_scales_large_inputs_to_the_median_norm() -> None:
    x = cluster(n=5)
    x[0] *= 100
    gram = x @ x.T
    keep = torch.ones(5, dtype=torch.bool)
    c = norm_coefficients(gram, keep, 1.0)
    tau = float(x.norm(dim=1).median())
    assert float((c[0] * x[0]).norm()) == pytest.approx(tau, rel=1e-9)
    assert bool((c[1:] <= 1).all()) and float(c.max()) <= 1
    assert torch.equal(norm_coefficients(gram, keep, 0.0), torch.ones(5, dtype=torch.float64))
    coeffs = gram_coefficients(gram, rule="norm", trim=0.2, norm_factor=1.0)
    assert bool((coeffs > 0).all()) and coeffs[0] < 0.05


@pytest.mark.parametrize(("gram", "match"), [
    (torch.zeros(2, 3, dtype=torch.float64), "square"),
    (torch.tensor([[1.0, float("nan")], [float("nan"), 1.0]], dtype=torch.float64), "NaN"),
    (torch.tensor([[-4.0, 0.0], [0.0, 1.0]], dtype=torch.float64), "negative squared norm"),
    (torch.tensor([[1.0, 0.5], [0.1, 1.0]], dtype=torch.float64), "symmetric"),
])
def test_impossible_gram_matrices_are_refused(gram: torch.Tensor, match: str) -> None:
    with pytest.raises(InvalidInputError, match=match):
        check_gram(gram)


def test_an_unknown_rule_is_refused() -> None:
    x = cluster(n=4)
    with pytest.raises(InvalidInputError, match="unknown Gram rule"):
        gram_coefficients(x @ x.T, rule="median", trim=0.2, norm_factor=0.0)
