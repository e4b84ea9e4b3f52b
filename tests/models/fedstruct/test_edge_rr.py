"""Randomized response on node pairs: the probabilities, the epsilon, and the sampling's law."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from securefg.errors import ConfigError, InvalidInputError
from securefg.models.fedstruct.edge_rr import (
    EdgeRR,
    bernoulli_positions,
    csprng_uniform,
    respond,
    seeded_uniform,
)


def test_symmetric_response_spends_exactly_epsilon_and_keep_trades_fakes_for_drops() -> None:
    rr = EdgeRR.for_epsilon(2.0)
    assert rr.keep == pytest.approx(math.exp(2) / (1 + math.exp(2))) and rr.keep + rr.fake == pytest.approx(1.0)
    assert rr.epsilon == pytest.approx(2.0)
    lean = EdgeRR.for_epsilon(2.0, keep=0.5)
    assert lean.fake == pytest.approx(0.5 * math.exp(-2)) and lean.epsilon == pytest.approx(2.0)
    with pytest.raises(ConfigError, match="keep must be <="):
        EdgeRR.for_epsilon(2.0, keep=0.95)  # a dropped edge would say too much
    for bad in (0, -1, float("inf"), float("nan"), True):
        with pytest.raises(ConfigError):
            EdgeRR.for_epsilon(bad)


def test_geometric_skipping_draws_independent_bernoullis() -> None:
    total, p = 200_000, 0.003
    counts = [bernoulli_positions(total, p, seeded_uniform(s)).size for s in range(40)]
    mean, sd = float(np.mean(counts)), math.sqrt(total * p * (1 - p))
    assert abs(mean - total * p) < 4 * sd / math.sqrt(40)  # unbiased count
    assert abs(float(np.std(counts)) - sd) < 0.35 * sd  # binomial spread
    pos = bernoulli_positions(total, p, seeded_uniform(0))
    assert bool((np.diff(pos) > 0).all()) and pos.min() >= 0 and pos.max() < total
    # uniform over the range: each half gets about half
    halves = [int((bernoulli_positions(total, p, seeded_uniform(s)) < total // 2).sum()) for s in range(20)]
    assert abs(sum(halves) / (20 * total * p) - 0.5) < 0.05
    assert bernoulli_positions(0, p, csprng_uniform).size == 0


def test_respond_keeps_edges_and_adds_fakes_at_the_stated_rates() -> None:
    n = 300
    g = torch.Generator().manual_seed(0)
    a = torch.randint(0, n, (2, 2000), generator=g)
    a = a[:, a[0] < a[1]]
    edges = torch.unique(a, dim=1)
    rr = EdgeRR(keep=0.8, fake=0.01)
    got = respond(edges, (n, n), rr, seeded_uniform(1), upper=True)
    assert bool((got[0] < got[1]).all())
    lin = set((got[0] * n + got[1]).tolist())
    true = set((edges[0] * n + edges[1]).tolist())
    kept = len(lin & true) / len(true)
    fakes = len(lin - true) / (n * (n - 1) / 2 - len(true))
    assert abs(kept - 0.8) < 0.05 and abs(fakes - 0.01) < 0.002
    # a bipartite block: any (row, column) pair is a candidate
    bi = respond(torch.tensor([[0, 5], [3, 1]]), (10, 7), EdgeRR(keep=0.9, fake=0.2), seeded_uniform(2), upper=False)
    assert int(bi[0].max()) < 10 and int(bi[1].max()) < 7


def test_the_csprng_source_is_not_reproducible_but_the_seeded_one_is() -> None:
    assert not np.array_equal(csprng_uniform(8), csprng_uniform(8))
    assert np.array_equal(seeded_uniform(3)(8), seeded_uniform(3)(8))
    u = csprng_uniform(10_000)
    assert u.min() > 0 and u.max() <= 1 and abs(u.mean() - 0.5) < 0.02


@pytest.mark.parametrize(("edges", "shape", "upper", "match"), [
    (torch.tensor([[0], [9]]), (5, 5), True, "outside"),
    (torch.tensor([[3], [1]]), (5, 5), True, "row < column"),
    (torch.tensor([[0, 0], [1, 1]]), (5, 5), True, "repeated"),
    (torch.tensor([0, 1]), (5, 5), False, r"\[2, E\]"),
])
def test_bad_blocks_are_refused(edges: torch.Tensor, shape: tuple[int, int], upper: bool, match: str) -> None:
    with pytest.raises(InvalidInputError, match=match):
        respond(edges, shape, EdgeRR(keep=0.9, fake=0.1), seeded_uniform(0), upper=upper)
