from __future__ import annotations

import pytest
import torch

from securefg.models.fedstruct.decoupled_gcn import FedStructDGCN
from securefg.models.fedstruct.hop2vec import Hop2Vec


def test_output_shapes_and_repr() -> None:
    torch.manual_seed(0)
    model = FedStructDGCN(8, 4, 3, feature_hidden=(6,), structure_hidden=(5,))
    out = model(torch.randn(5, 8), torch.eye(5).to_sparse(), torch.randn(9, 4), torch.rand(5, 9))
    assert out.shape == (5, 3)
    assert model.feature_embeddings(torch.randn(5, 8), torch.eye(5)).shape == (5, 3)
    assert model.structure_embeddings(torch.randn(9, 4), torch.rand(5, 9)).shape == (5, 3)
    assert repr(model) == "FedStructDGCN(8, 4, 3)"


def test_without_g_the_structure_branch_is_abar_times_s() -> None:
    model = FedStructDGCN(8, 3, 3, structure_hidden=None).eval()
    s, abar = torch.randn(7, 3), torch.rand(4, 7)
    torch.testing.assert_close(model.structure_embeddings(s, abar), abar @ s)


def test_without_g_nsf_width_must_equal_classes() -> None:
    with pytest.raises(ValueError, match="FedStructDGCN without a structure MLP.*4 != 3"):
        FedStructDGCN(8, 4, 3, structure_hidden=None)


def test_hop2vec_rows_get_gradients_only_where_abar_reaches() -> None:
    h2v = Hop2Vec(6, 4, generator=torch.Generator().manual_seed(0))
    model = FedStructDGCN(2, 4, 3, feature_hidden=(), structure_hidden=(5,)).eval()
    abar = torch.zeros(2, 6)
    abar[0, [0, 1]] = 0.5
    abar[1, [1, 2]] = 0.5  # nodes 3..5 out of reach
    logits = model(torch.randn(2, 2), torch.eye(2), h2v(), abar)
    torch.nn.functional.cross_entropy(logits, torch.tensor([0, 2])).backward()
    reach = h2v.weight.grad.abs().sum(1)
    assert bool((reach[:3] > 0).all()) and bool((reach[3:] == 0).all())
    assert all(p.grad is not None for p in model.g.parameters())


def test_hop2vec_is_seeded_and_indexable() -> None:
    a = Hop2Vec(5, 3, generator=torch.Generator().manual_seed(4))
    b = Hop2Vec(5, 3, generator=torch.Generator().manual_seed(4))
    assert torch.equal(a.weight, b.weight)
    assert torch.equal(a(torch.tensor([4, 1])), a.weight[[4, 1]])
    assert repr(a) == "Hop2Vec(5, 3)"
