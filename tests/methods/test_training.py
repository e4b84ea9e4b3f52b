"""``securefg.methods.training``: the stopping rule CeFGC's clients train with; the sparse adjacency."""

import torch

from securefg.data.synthetic import make_csbm, make_graph_classification
from securefg.methods.training import (
    evaluate_node,
    propagation_index,
    state_of,
    train_graphs_until_stall,
    train_node_epochs,
    with_sparse_adjacency,
)
from securefg.models.gcn import GCN
from securefg.models.gin import GIN


def _setup():
    graphs = make_graph_classification(num_graphs=24, seed=0)
    torch.manual_seed(0)
    model = GIN(graphs[0].num_features, 3, pooling="sum")
    return graphs, model, torch.optim.Adam(model.parameters(), lr=1e-2)


def test_monitor_stops_after_patience_and_restores_its_best_epoch() -> None:
    graphs, model, opt = _setup()
    values = iter([5.0, 4.0, 3.0, 3.5, 4.5, 6.0, 1.0])  # best at epoch 3, then two without a decrease
    states: list[dict[str, torch.Tensor]] = []

    def monitor(m):
        states.append(state_of(m))
        return next(values)

    epochs = train_graphs_until_stall(model, opt, graphs, max_epochs=50, patience=2, batch_size=8,
                                      device=torch.device("cpu"), monitor=monitor)
    assert epochs == 5 and len(states) == 5
    now = state_of(model)
    assert all(torch.equal(now[k], states[2][k]) for k in now)  # back at epoch 3
    assert not all(torch.equal(now[k], states[4][k]) for k in now)  # not left at the last epoch


def test_sparse_adjacency_gives_the_edge_list_forward_and_trains() -> None:
    data = make_csbm(num_nodes=60, num_classes=3, num_features=8, p_in=0.2, p_out=0.02, seed=0)
    sparse = with_sparse_adjacency(data, min_messages=0)
    assert "adj_t" not in data and sparse.adj_t.layout == torch.sparse_csr
    assert tuple(sparse.adj_t.shape) == (60, 60) and sparse.adj_t._nnz() == data.edge_index.size(1)
    assert with_sparse_adjacency(sparse, min_messages=0) is sparse
    assert propagation_index(data) is data.edge_index and propagation_index(sparse) is sparse.adj_t
    torch.manual_seed(0)
    model = GCN(8, 3, hidden_channels=16).eval()
    with torch.no_grad():
        assert torch.allclose(model(data.x, data.edge_index), model(data.x, sparse.adj_t), atol=1e-6)
    # an asymmetric edge list keeps its direction (adj_t is the transpose, PyG's convention)
    directed = data.clone()
    directed.edge_index = data.edge_index[:, data.edge_index[0] < data.edge_index[1]]
    with torch.no_grad():
        assert torch.allclose(model(directed.x, directed.edge_index),
                              model(directed.x, with_sparse_adjacency(directed, min_messages=0).adj_t), atol=1e-6)
    opt = torch.optim.Adam(model.parameters(), lr=0.02)
    before = evaluate_node(model, sparse)["train_acc"]
    train_node_epochs(model, opt, sparse, 30)
    assert evaluate_node(model, sparse)["train_acc"] > before


def test_sparse_adjacency_serves_graphsage_shares_tensors_and_keeps_a_repeated_edge_list() -> None:
    from torch_geometric.nn.models import GraphSAGE

    data = make_csbm(num_nodes=60, num_classes=3, num_features=8, p_in=0.2, p_out=0.02, seed=0)
    sparse = with_sparse_adjacency(data, min_messages=0)
    assert sparse.x is data.x  # a shallow copy: a 500 MB feature matrix is not copied
    torch.manual_seed(0)
    sage = GraphSAGE(8, 16, 2, 3)
    out_edges = sage(data.x, data.edge_index)
    out_edges.sum().backward()
    grads = [p.grad.clone() for p in sage.parameters()]
    sage.zero_grad()
    out_csr = sage(data.x, sparse.adj_t)
    out_csr.sum().backward()
    assert torch.allclose(out_edges, out_csr, atol=1e-6)
    assert all(torch.allclose(g, p.grad, atol=1e-5) for g, p in zip(grads, sage.parameters(), strict=True))
    # a repeated edge counts twice in the edge-wise mean; a CSR matrix would merge it, so no adj_t
    repeated = data.clone()
    repeated.edge_index = torch.cat([data.edge_index, data.edge_index[:, :1]], 1)
    assert with_sparse_adjacency(repeated, min_messages=0) is repeated
    # below min_messages (edges x features) the edge list is kept: the gather is faster there
    n_messages = data.edge_index.size(1) * data.num_node_features
    assert with_sparse_adjacency(data, min_messages=n_messages + 1) is data
    assert with_sparse_adjacency(data) is data  # the default, SPARSE_FROM, is far above this small graph
    assert "adj_t" in with_sparse_adjacency(data, min_messages=n_messages)
