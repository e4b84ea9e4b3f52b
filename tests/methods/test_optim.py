"""securefg.methods.optim: multi-tensor Adam must not move a run's numbers."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F

from securefg.methods.optim import adam
from securefg.models.gcn import GCN


def _train(model: GCN, make_opt, steps: int = 100) -> GCN:
    torch.manual_seed(1)
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(200, 40, generator=gen)
    edge_index = torch.randint(0, 200, (2, 1200), generator=gen)
    y = torch.randint(0, 5, (200,), generator=gen)
    model = copy.deepcopy(model)
    opt = make_opt(model)
    for _ in range(steps):
        opt.zero_grad()
        F.cross_entropy(model(x, edge_index), y).backward()
        opt.step()
    return model


def _max_diff(a: GCN, b: GCN) -> float:
    return max((p - q).abs().max().item() for p, q in zip(a.parameters(), b.parameters(), strict=True))


@pytest.mark.parametrize("weight_decay", [0.0, 1e-6, 5e-4])
def test_adam_matches_torch_default_bit_for_bit(weight_decay: float) -> None:
    torch.manual_seed(0)
    base = GCN(40, 5, hidden_channels=32)
    ours = _train(base, lambda m: adam(m.parameters(), lr=0.01, weight_decay=weight_decay))
    theirs = _train(base, lambda m: torch.optim.Adam(m.parameters(), lr=0.01, weight_decay=weight_decay))
    assert _max_diff(ours, theirs) == 0.0
    assert _max_diff(ours, base) > 0.0  # it trained


def test_adam_param_groups_and_frozen_params_match() -> None:
    """FedSheafHN's per-group weight decay; FedSage+'s optimiser over part of a model."""
    torch.manual_seed(0)
    base = GCN(40, 5, hidden_channels=32)

    def groups(make):
        return lambda m: make([{"params": m.conv1.parameters(), "weight_decay": 5e-4},
                               {"params": list(m.conv2.parameters()) + list(m.clsif.parameters())}], lr=0.02)

    assert _max_diff(_train(base, groups(adam)), _train(base, groups(torch.optim.Adam))) == 0.0
    part = _train(base, lambda m: adam(m.clsif.parameters(), lr=0.01))
    assert _max_diff(part, _train(base, lambda m: torch.optim.Adam(m.clsif.parameters(), lr=0.01))) == 0.0
    assert torch.equal(part.conv1.lin.weight, base.conv1.lin.weight)


def test_adam_is_multi_tensor_unless_told_otherwise() -> None:
    p = [torch.nn.Parameter(torch.zeros(3))]
    assert adam(p, lr=0.1).defaults["foreach"] is True
    assert adam(p, lr=0.1, foreach=False).defaults["foreach"] is False
