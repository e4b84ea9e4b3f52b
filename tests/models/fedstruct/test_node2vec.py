from __future__ import annotations

import pytest
import torch

import securefg.models.fedstruct.node2vec as n2v
from securefg.errors import InvalidInputError
from securefg.models.fedstruct.node2vec import Node2Vec, train_node2vec

from ._graphs import random_graph


def test_dense_score_path_equals_gather_path(monkeypatch: pytest.MonkeyPatch) -> None:
    ei = random_graph(30, 60, seed=0)
    torch.manual_seed(0)
    model = Node2Vec(ei, 30, 8, walk_length=6, context_size=3)
    pos, neg = model.sample(torch.arange(10), torch.Generator().manual_seed(0))
    assert pos.shape == (10 * 10 * 5, 3)  # 100 walks x 5 windows (7 nodes, length 3)
    dense = model.loss(pos, neg)
    monkeypatch.setattr(n2v, "DENSE_SCORE_MAX_NODES", 0)
    torch.testing.assert_close(model.loss(pos, neg), dense)


def test_training_is_seeded_and_returns_finite_features() -> None:
    ei = random_graph(20, 40, seed=1)
    kw = {"embedding_dim": 8, "epochs": 2, "walk_length": 5, "context_size": 3,
          "walks_per_node": 2, "batch_size": 8}
    a = train_node2vec(ei, 20, generator=torch.Generator().manual_seed(3), **kw)
    b = train_node2vec(ei, 20, generator=torch.Generator().manual_seed(3), **kw)
    assert a.shape == (20, 8) and not a.requires_grad and bool(torch.isfinite(a).all())
    assert torch.equal(a, b)


def test_training_lowers_the_skip_gram_loss() -> None:
    ei = random_graph(30, 60, seed=2)
    model = Node2Vec(ei, 30, 8, walk_length=6, context_size=3, walks_per_node=2)
    gen = torch.Generator().manual_seed(0)
    pos, neg = model.sample(torch.arange(30), gen)
    before = float(model.loss(pos, neg).detach())
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    for _ in range(20):
        opt.zero_grad()
        model.loss(pos, neg).backward()
        opt.step()
    assert float(model.loss(pos, neg).detach()) < 0.5 * before


def test_context_longer_than_walk_is_rejected() -> None:
    with pytest.raises(InvalidInputError, match="context_size <= walk_length \\+ 1"):
        Node2Vec(torch.tensor([[0], [1]]), 2, 4, walk_length=3, context_size=5)
