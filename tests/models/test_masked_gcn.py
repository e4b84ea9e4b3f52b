"""FED-PUB's masked GCN: the mask multiplies every weight matrix and stays out of the shared state."""

from __future__ import annotations

import pytest
import torch

from securefg.data.synthetic import make_csbm
from securefg.models.masked_gcn import MaskedGCN, MaskedLinear


@pytest.fixture
def graph():
    return make_csbm(num_nodes=60, num_classes=3, num_features=8, seed=0)


def test_shapes_and_parameters(graph) -> None:
    model = MaskedGCN(8, 3, hidden_channels=16)
    assert model(graph.x, graph.edge_index).shape == (60, 3)
    assert model.embed(graph.x, graph.edge_index).shape == (60, 16)
    names = dict(model.named_parameters())
    assert {n for n in names if n.endswith("mask")} == {"conv1.lin.mask", "conv2.lin.mask", "clsif.mask"}
    for n in ("conv1.lin", "conv2.lin", "clsif"):
        assert names[f"{n}.mask"].shape == names[f"{n}.weight"].shape
        assert torch.equal(names[f"{n}.mask"], torch.ones_like(names[f"{n}.mask"]))  # the reference's init
    shared = model.shared_state()
    assert not any(k.endswith("mask") for k in shared)
    assert set(shared) == {"conv1.lin.weight", "conv1.bias", "conv2.lin.weight", "conv2.bias", "clsif.weight", "clsif.bias"}


def test_the_mask_multiplies_the_weights(graph) -> None:
    model = MaskedGCN(8, 3, hidden_channels=16).eval()
    before = model(graph.x, graph.edge_index)
    with torch.no_grad():
        model.clsif.mask.zero_()
    out = model(graph.x, graph.edge_index)
    assert torch.allclose(out, model.clsif.bias.expand_as(out))  # W * 0: only the (unmasked) bias is left
    assert not torch.allclose(before, out)


def test_eval_mode_prunes_small_mask_entries_and_training_does_not() -> None:
    lin = MaskedLinear(4, 2, bias=False, prune_threshold=1e-3)
    with torch.no_grad():
        lin.weight.fill_(1.0)
        lin.mask.copy_(torch.tensor([[5e-4, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 2e-3]]))
    x = torch.ones(1, 4)
    lin.train()
    assert torch.allclose(lin(x), torch.tensor([[3.0005, 3.002]]))
    lin.eval()
    assert torch.allclose(lin(x), torch.tensor([[3.0, 3.002]]))


def test_mask_density_counts_surviving_entries() -> None:
    model = MaskedGCN(8, 3, hidden_channels=4)
    assert model.mask_density() == 1.0
    with torch.no_grad():
        model.conv1.lin.mask.zero_()
    total = sum(m.numel() for m in model.masks())
    assert model.mask_density() == pytest.approx(1 - 8 * 4 / total)


def test_bad_sizes_are_refused() -> None:
    with pytest.raises(ValueError, match="positive"):
        MaskedGCN(0, 3)
