import pytest
import torch

from securefg.data.splits import SPLIT_PRESETS, random_node_split, with_node_split
from securefg.data.synthetic import make_csbm
from securefg.errors import ConfigError


@pytest.mark.parametrize("preset", sorted(SPLIT_PRESETS))
def test_split_masks_are_pairwise_disjoint_and_cover(preset: str) -> None:
    train, val, test = random_node_split(2485, ratios=preset, seed=0)
    assert not (train & val).any() and not (train & test).any() and not (val & test).any()
    assert (train | val | test).all()  # every preset sums to one


def test_fedpub_counts_follow_its_code() -> None:
    # FED-PUB split_train on Cora LCC: train round(0.2n), test round(0.4n), val the rest.
    train, val, test = random_node_split(2485, ratios="fedpub", seed=0)
    assert (int(train.sum()), int(val.sum()), int(test.sum())) == (497, 994, 994)
    train, val, test = random_node_split(2708, ratios="fedstruct", seed=0)
    assert (int(train.sum()), int(val.sum()), int(test.sum())) == (271, 271, 2166)


def test_ratios_below_one_leave_nodes_unassigned() -> None:
    train, val, test = random_node_split(1000, ratios=(0.1, 0.1, 0.1), seed=0)
    assert (int(train.sum()), int(val.sum()), int(test.sum())) == (100, 100, 100)


def test_split_is_deterministic_and_seed_dependent() -> None:
    a = random_node_split(500, ratios="fedsage", seed=4)
    b = random_node_split(500, ratios="fedsage", seed=4)
    c = random_node_split(500, ratios="fedsage", seed=5)
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
    assert not torch.equal(a[0], c[0])


def test_bad_ratios_and_unknown_presets_are_rejected() -> None:
    with pytest.raises(ConfigError, match=r"sum to <= 1"):
        random_node_split(10, ratios=(0.5, 0.5, 0.5), seed=0)
    with pytest.raises(ConfigError, match=r"Could not resolve split 'fedx' among choices"):
        random_node_split(10, ratios="fedx", seed=0)


def test_with_node_split_leaves_the_input_unchanged() -> None:
    data = make_csbm(num_nodes=100, seed=0)
    before = data.train_mask.clone()
    out = with_node_split(data, ratios="fedpub", seed=1)
    assert torch.equal(data.train_mask, before)
    assert int(out.train_mask.sum()) == 20 and out.x is data.x
