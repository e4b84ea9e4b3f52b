"""``securefg.models.sage``: the sparse first layer is PyG's GraphSAGE, read faster."""

from __future__ import annotations

import gc

import pytest
import torch
from torch_geometric.nn.models import GraphSAGE

from securefg.data.synthetic import make_csbm
from securefg.methods.training import with_sparse_adjacency
from securefg.models import sage


def _sparse_graph(features: int = 400):
    g = make_csbm(num_nodes=200, num_classes=3, num_features=features, seed=0)
    g.x = (torch.rand(g.x.shape, generator=torch.Generator().manual_seed(2)) < 0.02).float()  # bag of words
    return g


def _pair(features: int) -> tuple[GraphSAGE, sage.GraphSage]:
    torch.manual_seed(0)
    ref = GraphSAGE(features, 16, 2, 3, dropout=0.0)
    torch.manual_seed(0)
    return ref, sage.GraphSage(features, 16, 2, 3, dropout=0.0)


def _assert_same_outputs_and_gradients(ref: GraphSAGE, new: sage.GraphSage, out_ref: torch.Tensor,
                                       out_new: torch.Tensor) -> None:
    assert torch.allclose(out_ref, out_new, atol=1e-5)
    out_ref.square().sum().backward()
    out_new.square().sum().backward()
    for (name, a), b in zip(ref.named_parameters(), new.parameters(), strict=True):
        assert torch.allclose(a.grad, b.grad, rtol=1e-4, atol=1e-5), name


@pytest.mark.parametrize("adjacency", ["edge_index", "adj_t"])
def test_the_sparse_path_gives_pyg_outputs_and_gradients(monkeypatch: pytest.MonkeyPatch, adjacency: str) -> None:
    monkeypatch.setattr(sage, "SPARSE_FEATURES_FROM", 1)  # any size takes the sparse path
    g = with_sparse_adjacency(_sparse_graph(), min_messages=0)
    edges = g.adj_t if adjacency == "adj_t" else g.edge_index
    ref, new = _pair(g.num_node_features)
    assert list(ref.state_dict()) == list(new.state_dict())  # the same parameters, by the same names
    assert isinstance(new.convs[0], sage.SparseInputSAGEConv) and type(new.convs[1]) is not sage.SparseInputSAGEConv
    assert sage.sparse_view(g.x) is not None
    _assert_same_outputs_and_gradients(ref, new, ref(g.x, edges), new(g.x, edges))


def test_small_dense_or_trainable_inputs_run_pyg_s_own_layer(monkeypatch: pytest.MonkeyPatch) -> None:
    g = _sparse_graph()
    assert sage.sparse_view(g.x) is None  # below SPARSE_FEATURES_FROM: PyG's layer, bit for bit
    ref, new = _pair(g.num_node_features)
    assert torch.equal(ref(g.x, g.edge_index), new(g.x, g.edge_index))
    monkeypatch.setattr(sage, "SPARSE_FEATURES_FROM", 1)
    assert sage.sparse_view(torch.randn(50, 40)) is None  # dense
    assert sage.sparse_view(g.x.clone().requires_grad_()) is None  # a feature being learned


def test_a_view_follows_in_place_changes_and_leaves_with_its_tensor(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sage, "SPARSE_FEATURES_FROM", 1)
    x = _sparse_graph().x.clone()
    first = sage.sparse_view(x)
    assert first is not None and sage.sparse_view(x) is first  # made once
    x[0, 0] = 5.0  # modified in place: made again
    again = sage.sparse_view(x)
    assert again is not first and torch.equal(again[0].to_dense(), x)
    key = id(x)
    del x, first, again
    gc.collect()
    assert key not in sage._SPARSE_VIEWS


def test_neighgen_s_encoder_reads_sparse_features_with_the_same_embeddings(monkeypatch: pytest.MonkeyPatch) -> None:
    from securefg.models.neighgen import NeighGen

    g = _sparse_graph()
    torch.manual_seed(0)
    gen = NeighGen(g.num_node_features, hidden=8, latent=16)
    dense = gen.embed(g.x, g.edge_index)
    monkeypatch.setattr(sage, "SPARSE_FEATURES_FROM", 1)
    assert isinstance(gen.enc1, sage.SparseInputSAGEConv) and sage.sparse_view(g.x) is not None
    assert torch.allclose(gen.embed(g.x, g.edge_index), dense, atol=1e-5)


def test_csr_rows_picks_the_rows_in_order_with_repeats_and_empty_rows() -> None:
    x = torch.tensor([[0.0, 1.0, 0.0], [0.0, 0.0, 0.0], [2.0, 0.0, 3.0]])
    rows = torch.tensor([2, 1, 0, 2])
    picked = sage.csr_rows(x.to_sparse_csr(), rows)
    assert picked.layout == torch.sparse_csr and picked.shape == (4, 3)
    assert torch.equal(picked.to_dense(), x[rows])


def test_a_sampled_batch_reads_sparse_rows_with_pyg_outputs_and_gradients(monkeypatch: pytest.MonkeyPatch) -> None:
    from securefg.methods.neighbour_sampling import InNeighbours, sample_block

    monkeypatch.setattr(sage, "SPARSE_FEATURES_FROM", 1)
    g = _sparse_graph()
    block = sample_block(InNeighbours.of(g.edge_index, g.num_nodes), torch.arange(0, 200, 7), (3, 3),
                         torch.Generator().manual_seed(0))
    ref, new = _pair(g.num_node_features)
    rows = new.batch_features(g.x, block.nodes)
    assert rows.layout == torch.sparse_csr and torch.equal(rows.to_dense(), g.x[block.nodes])
    _assert_same_outputs_and_gradients(ref, new, ref(g.x[block.nodes], block.edge_index), new(rows, block.edge_index))


def test_dense_features_give_a_sampled_batch_its_plain_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    g = _sparse_graph()
    _, new = _pair(g.num_node_features)
    nodes = torch.tensor([3, 1, 4])
    assert torch.equal(new.batch_features(g.x, nodes), g.x[nodes])  # below SPARSE_FEATURES_FROM
    monkeypatch.setattr(sage, "SPARSE_FEATURES_FROM", 1)
    x = torch.randn(50, 40)  # dense: PyG's own layer
    assert torch.equal(new.batch_features(x, nodes), x[nodes])


def test_csr_rows_into_a_layer_that_cannot_project_first_are_refused() -> None:
    conv = sage.SparseInputSAGEConv(3, 4, aggr="max")  # max does not commute with the weights
    rows = torch.tensor([[0.0, 1.0, 0.0]]).to_sparse_csr()
    with pytest.raises(TypeError, match="linear before its activation"):
        conv(rows, torch.empty((2, 0), dtype=torch.long))
