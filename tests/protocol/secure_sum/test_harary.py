"""Random Harary graphs and the (k, t) helper (``harary.py``)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from securefg.errors import ConfigError
from securefg.protocol.secure_sum.harary import choose_parameters, harary_graph


@settings(max_examples=30, deadline=None)
@given(n=st.integers(3, 60), half=st.integers(1, 30))
def test_harary_graph_is_symmetric_k_regular_without_self_loops(n: int, half: int) -> None:
    k = min(2 * half, n - 1)
    if k < n - 1 and k % 2:
        k -= 1
    ids = [f"client/{i}" for i in range(n)]
    g = harary_graph(ids, k)
    assert set(g) == set(ids)
    for v, nb in g.items():
        assert v not in nb and len(nb) == k
        assert all(v in g[w] for w in nb)


def test_harary_graph_relabels_at_random() -> None:
    ids = [f"client/{i}" for i in range(20)]
    graphs = {frozenset(harary_graph(ids, 4)["client/0"]) for _ in range(10)}
    assert len(graphs) > 1


def test_odd_degree_below_n_minus_1_is_refused() -> None:
    with pytest.raises(ConfigError, match="must be even"):
        harary_graph([f"c{i}" for i in range(10)], 3)


def _hyper_tail(at_least: int, population: int, marked: int, draws: int) -> float:
    return sum(
        math.comb(marked, x) * math.comb(population - marked, draws - x)
        for x in range(at_least, min(marked, draws) + 1)
    ) / math.comb(population, draws)


@pytest.mark.parametrize("n", [10, 50, 100, 500])
def test_chosen_parameters_meet_the_stated_guarantees(n: int) -> None:
    p = choose_parameters(n, dropout_rate=0.1, adversarial_rate=0.1)
    assert p.degree // 2 < p.threshold <= p.degree <= n - 1
    colluders, dropped = math.floor(0.1 * n), math.ceil(0.1 * n)
    privacy = n * _hyper_tail(p.threshold, n - 1, colluders, p.degree)
    reliability = n * _hyper_tail(p.degree - p.threshold + 1, n - 1, dropped, p.degree)
    assert privacy <= 2.0**-40 and reliability <= 2.0**-30
    assert math.isclose(privacy, p.privacy_failure, abs_tol=1e-300)


def test_helper_uses_a_sparse_graph_for_large_n() -> None:
    assert choose_parameters(1000, dropout_rate=0.05, adversarial_rate=0.05).degree < 100


def test_helper_refuses_a_single_client() -> None:
    with pytest.raises(ConfigError, match="at least 2 clients"):
        choose_parameters(1)
