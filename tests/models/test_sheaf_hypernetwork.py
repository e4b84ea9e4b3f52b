"""Diag-NSD sheaf diffusion, the kNN collaboration graph and the attention hypernetwork: shapes and maths."""

from __future__ import annotations

import pytest
import torch

from securefg.methods.fedsheafhn.server import knn_graph
from securefg.models.hypernetwork import AttentionHypernetwork
from securefg.models.sheaf_diffusion import DiagSheafDiffusion, diag_sheaf_laplacian


def test_knn_graph_is_symmetric_without_self_loops_and_complete_for_large_k() -> None:
    x = torch.randn(7, 5, generator=torch.Generator().manual_seed(0))
    ei = knn_graph(x, 2)
    pairs = {tuple(e) for e in ei.t().tolist()}
    assert all((b, a) in pairs for a, b in pairs) and all(a != b for a, b in pairs)
    assert all(sum(a == i for a, _ in pairs) >= 2 for i in range(7))  # every node keeps its k nearest
    assert len(pairs) < 7 * 6
    assert knn_graph(x, 0).shape == (2, 42) and knn_graph(x, 6).shape == (2, 42)


def test_knn_graph_links_the_nearest_rows() -> None:
    x = torch.tensor([[1.0, 0.0], [0.99, 0.1], [0.0, 1.0], [0.1, 0.99]])
    pairs = {tuple(e) for e in knn_graph(x, 1).t().tolist()}
    assert pairs == {(0, 1), (1, 0), (2, 3), (3, 2)}


def test_unit_maps_give_the_normalised_graph_laplacian_and_blocks_are_psd() -> None:
    ei = knn_graph(torch.randn(5, 3, generator=torch.Generator().manual_seed(1)), 0)
    lap = diag_sheaf_laplacian(ei, torch.ones(ei.shape[1], 1), 5)
    deg = torch.full((5,), 4.0)
    adj = 1.0 - torch.eye(5)
    expected = (torch.diag(deg) - adj) / torch.sqrt((deg + 1.0)[:, None] * (deg + 1.0)[None, :])
    assert torch.allclose(lap[0], expected, atol=1e-6)
    maps = torch.randn(ei.shape[1], 3, generator=torch.Generator().manual_seed(2))
    blocks = diag_sheaf_laplacian(ei, maps, 5)
    assert blocks.shape == (3, 5, 5)
    assert torch.allclose(blocks, blocks.transpose(1, 2), atol=1e-6)
    assert float(torch.linalg.eigvalsh(blocks).min()) > -1e-5


def test_laplacian_rejects_a_one_way_edge() -> None:
    with pytest.raises(ValueError, match="both directions"):
        diag_sheaf_laplacian(torch.tensor([[0], [1]]), torch.ones(1, 1), 2)


def test_sheaf_diffusion_shapes_gradients_and_bad_sizes() -> None:
    torch.manual_seed(0)
    model = DiagSheafDiffusion(16, 16, hidden_channels=6, stalk_dim=2, layers=3, dropout=0.0)
    x = torch.randn(6, 16, requires_grad=True)
    out = model(x, knn_graph(x.detach(), 3))
    assert out.shape == (6, 16)
    out.sum().backward()
    assert x.grad is not None and all(p.grad is not None for p in model.map_learners.parameters())
    assert repr(model) == "DiagSheafDiffusion(16, 16, hidden=6, stalk_dim=2, layers=3)"
    with pytest.raises(ValueError, match="DiagSheafDiffusion"):
        DiagSheafDiffusion(16, 16, layers=0)


def test_hypernetwork_rows_split_into_the_target_shapes() -> None:
    shapes = {"conv1.lin.weight": (8, 5), "conv1.bias": (8,), "conv2.lin.weight": (8, 8), "conv2.bias": (8,)}
    hn = AttentionHypernetwork(4, 16, shapes, hidden_channels=12, dropout=0.0)
    assert torch.equal(hn.attention, torch.eye(4))
    out = hn(torch.randn(4, 16))
    assert out.shape == (4, 40 + 8 + 64 + 8) and hn.num_outputs == 120
    row = hn.split(out[2])
    assert {k: tuple(v.shape) for k, v in row.items()} == shapes
    with pytest.raises(ValueError, match="built for 4 clients"):
        hn(torch.randn(3, 16))


def test_hypernetwork_rows_depend_only_on_their_client_at_identity_attention() -> None:
    hn = AttentionHypernetwork(3, 4, {"w": (2,)}, hidden_channels=8, dropout=0.0)
    x = torch.randn(3, 4)
    y = x.clone()
    y[2] += 1.0
    a, b = hn(x), hn(y)
    assert torch.equal(a[:2], b[:2]) and not torch.equal(a[2], b[2])
