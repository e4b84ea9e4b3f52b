"""Public subgroups: deterministic, disjoint, covering, each >= k; smaller ones refused."""

from __future__ import annotations

import pytest

from securefg.errors import ConfigError, SubgroupTooSmallError
from securefg.protocol.robust.subgroups import check_sizes, grouping_seed, partition

CLIENTS = [f"client/{i}" for i in range(10)]


@pytest.mark.parametrize("k, groups", [(2, 5), (3, 3), (4, 2), (5, 2), (10, 1)])
def test_partition_covers_every_client_once_in_subgroups_of_at_least_k(k: int, groups: int) -> None:
    got = partition(CLIENTS, k=k, seed=grouping_seed("0", "fedavg/update", 3))
    assert len(got) == groups
    assert sorted(p for g in got for p in g) == sorted(CLIENTS)
    assert min(len(g) for g in got) >= k
    assert max(len(g) for g in got) - min(len(g) for g in got) <= 1


def test_partition_depends_only_on_the_public_seed_not_on_input_order() -> None:
    seed = grouping_seed("7", "fedavg/update", 2)
    assert partition(CLIENTS, k=3, seed=seed) == partition(list(reversed(CLIENTS)), k=3, seed=seed)
    rounds = {partition(CLIENTS, k=3, seed=grouping_seed("7", "fedavg/update", r)) for r in range(6)}
    assert len(rounds) > 1  # the grouping changes with the round


def test_grouping_seed_is_length_prefixed() -> None:
    assert grouping_seed("1", "a/b", 2) != grouping_seed("1a", "/b", 2)


def test_partition_refuses_fewer_clients_than_k() -> None:
    with pytest.raises(SubgroupTooSmallError, match="cannot form a subgroup of k=4"):
        partition(CLIENTS[:3], k=4, seed=0)


def test_partition_refuses_k_of_one() -> None:
    with pytest.raises(SubgroupTooSmallError, match="k >= 2"):
        partition(CLIENTS, k=1, seed=0)


def test_a_subgroup_smaller_than_k_is_refused_and_the_error_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"subgroup 1 has 2 member\(s\).*fewer than k=3"):
        check_sizes([("client/0", "client/1", "client/2"), ("client/3", "client/4")], k=3)
