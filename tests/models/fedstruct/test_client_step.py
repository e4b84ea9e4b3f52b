"""Per-client pieces must add up to the global FedStruct gradient."""

from __future__ import annotations

import pytest
import torch

from securefg.errors import InvalidInputError
from securefg.models.fedstruct.abar_protocol import compute_abar_rows
from securefg.models.fedstruct.client_graph_view import split_graph
from securefg.models.fedstruct.client_step import (
    ClientBatch,
    aggregate_structure_gradients,
    client_gradients,
    client_gradients_given_nse,
    compact_columns,
    make_client_batch,
)
from securefg.models.fedstruct.decoupled_gcn import FedStructDGCN
from securefg.models.fedstruct.hop2vec import Hop2Vec
from securefg.models.fedstruct.node_directory import NodeDirectory
from securefg.models.fedstruct.propagation import multi_hop_adjacency, rw_normalized_adjacency

from ._graphs import random_graph

N, K, F, C, DS = 24, 3, 5, 3, 4
BETAS, LOCAL_BETAS = (0.3, 0.7), (0.0, 1.0)


@pytest.fixture
def world():
    g = torch.Generator().manual_seed(0)
    ei = random_graph(N, 30, seed=11)
    owner = torch.arange(N) % K
    directory = NodeDirectory(owner, K)
    views = split_graph(ei, directory)
    rows = compute_abar_rows(views, directory, betas=BETAS)
    x, y = torch.randn(N, F, generator=g), torch.randint(C, (N,), generator=g)
    train = torch.rand(N, generator=g) < 0.5
    batches = [make_client_batch(v, x=x[v.nodes], y=y[v.nodes], label_mask=train[v.nodes],
                                 abar_rows=rows[k], local_betas=LOCAL_BETAS)
               for k, v in enumerate(views)]
    torch.manual_seed(0)
    model = FedStructDGCN(F, DS, C, feature_hidden=(6,), structure_hidden=(7,)).eval()
    h2v = Hop2Vec(N, DS, generator=g)
    return ei, owner, x, y, train, views, batches, model, h2v


def _central_gradients(ei, owner, x, y, train, model, h2v):
    """Global loss from global matrices, built independently of the client code."""
    abar = multi_hop_adjacency(rw_normalized_adjacency(ei, N), BETAS)
    intra = ei[:, owner[ei[0]] == owner[ei[1]]]
    a_local = multi_hop_adjacency(rw_normalized_adjacency(intra, N), LOCAL_BETAS)
    logits = model(x, a_local, h2v(), abar)
    loss = torch.nn.functional.cross_entropy(logits[train], y[train], reduction="sum") / int(
        train.sum())
    params = dict(model.named_parameters())
    grads = torch.autograd.grad(loss, [*params.values(), h2v.weight])
    return dict(zip(params, grads[:-1])), grads[-1], float(loss.detach())


def test_client_gradients_sum_to_global_gradient(world) -> None:
    ei, owner, x, y, train, _, batches, model, h2v = world
    theta, s_grad, loss = _central_gradients(ei, owner, x, y, train, model, h2v)
    parts = []
    total = 0.0
    sums = {k: torch.zeros_like(v) for k, v in theta.items()}
    for b in batches:
        s_rows = h2v.weight[b.structure_ids].detach().requires_grad_(True)  # S rows received
        out = client_gradients(model, b, s_rows=s_rows, num_labeled_total=int(train.sum()))
        for k, g in out.theta.items():
            sums[k] += g
        parts.append((b.structure_ids, out.structure))
        total += out.loss
    for k in theta:
        torch.testing.assert_close(sums[k], theta[k], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(aggregate_structure_gradients(parts, N), s_grad, rtol=1e-5,
                               atol=1e-6)
    assert total == pytest.approx(loss, rel=1e-5)


def test_fedstruct_a_step_matches_b_step_on_feature_parameters(world) -> None:
    *_, train, _, batches, model, h2v = world
    b = batches[0]
    s_rows = h2v.weight[b.structure_ids].detach()
    nse = model.structure_embeddings(s_rows, b.abar_rows)
    f_grads, nse_grad, _ = client_gradients_given_nse(model, b, nse=nse,
                                                     num_labeled_total=int(train.sum()))
    ref = client_gradients(model, b, s_rows=s_rows, num_labeled_total=int(train.sum()))
    for name, g in f_grads.items():
        torch.testing.assert_close(g, ref.theta[name])
    assert nse_grad.shape == (b.x.size(0), C)


def test_compact_columns_keeps_exactly_the_nonzero_columns() -> None:
    rows = torch.tensor([[0.0, 0.2, 0.0, 0.8], [0.0, 0.0, 0.0, 1.0]])
    compact, ids = compact_columns(rows)
    assert ids.tolist() == [1, 3]
    assert torch.equal(compact, rows[:, [1, 3]])


def test_structure_ids_are_the_reach_of_the_clients_nodes(world) -> None:
    ei, owner, *_rest = world
    batches = _rest[4]
    abar = multi_hop_adjacency(rw_normalized_adjacency(ei, N), BETAS)
    for k, b in enumerate(batches):
        reach = torch.nonzero(abar[owner == k].ne(0).any(0)).flatten()
        assert torch.equal(b.structure_ids, reach)


def test_client_batch_rejects_mismatched_rows() -> None:
    with pytest.raises(InvalidInputError, match="x has 3 rows but a_local is"):
        ClientBatch(torch.zeros(3, 2), torch.eye(2), torch.zeros(3, 1), torch.tensor([0]),
                    torch.zeros(3, dtype=torch.long), torch.zeros(3, dtype=torch.bool))
