import torch

from securefg.data.partition.balance import greedy_merge, rebalance_labels, split_oversized


def test_split_oversized_caps_every_group_and_keeps_all_items() -> None:
    groups = [torch.arange(0, 25), torch.arange(25, 30), torch.arange(30, 41)]
    out = split_oversized(groups, 10)
    assert max(g.numel() for g in out) == 10
    assert torch.equal(torch.sort(torch.cat(out)).values, torch.arange(41))
    assert out[0].tolist() == list(range(10))  # chunks follow the group's order


def test_greedy_merge_never_drops_items_even_when_nothing_fits() -> None:
    # A group larger than target + delta fits no client: the reference loops would hang or drop it.
    groups = [torch.arange(0, 90), torch.arange(90, 100), torch.arange(100, 103)]
    parts = greedy_merge(groups, 3, target=34, delta=5)
    assert torch.equal(torch.sort(torch.cat(parts)).values, torch.arange(103))
    assert sorted(p.numel() for p in parts) == [34, 34, 35]


def test_greedy_merge_respects_target_plus_delta_when_possible() -> None:
    groups = [torch.arange(i * 10, i * 10 + 10) for i in range(10)]  # ten groups of 10
    parts = greedy_merge(groups, 4, target=25, delta=10)
    sizes = sorted(p.numel() for p in parts)
    assert sum(sizes) == 100 and max(sizes) < 35
    # groups are kept whole when they fit
    for p in parts:
        assert set((p // 10).tolist()).__len__() * 10 == p.numel()


def test_rebalance_labels_gives_every_client_the_minimum_of_each_class() -> None:
    y = torch.tensor([0] * 10 + [1] * 10)
    assignment = torch.tensor([0] * 10 + [1] * 10)  # client 0 has only class 0
    out = rebalance_labels(assignment, y, num_parts=2, min_per_class=2)
    for k in range(2):
        for c in range(2):
            assert int(((out == k) & (y == c)).sum()) >= 2
    assert int((out != assignment).sum()) == 4  # moved exactly what was needed
    assert torch.equal(assignment, torch.tensor([0] * 10 + [1] * 10))  # input untouched
