"""GraphSage's neighbour sampling and the ``fanouts`` option that trains on it."""

from __future__ import annotations

import pytest
import torch
from torch_geometric.data import Data

from securefg.errors import ConfigError
from securefg.methods.backbone_option import BACKBONE_OPTIONS, check_backbone_options, train_node_backbone
from securefg.methods.neighbour_sampling import InNeighbours, parse_fanouts, sample_block
from securefg.models.sage import GraphSage


def _graph(n: int = 60, edges: int = 500, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    ei = torch.randint(0, n, (2, edges), generator=g)
    ei = ei[:, ei[0] != ei[1]]
    return torch.unique(ei, dim=1)  # no repeated edge, so in-degrees count distinct neighbours


def test_in_neighbours_lists_each_nodes_sources() -> None:
    ei = torch.tensor([[0, 2, 3, 1], [1, 1, 1, 0]])
    adj = InNeighbours.of(ei, 4)
    assert adj.rowptr.tolist() == [0, 1, 4, 4, 4]
    assert sorted(adj.col[1:4].tolist()) == [0, 2, 3] and adj.col[0].item() == 1


def test_a_block_holds_real_edges_and_at_most_k_per_node() -> None:
    n, ei = 60, _graph()
    adj = InNeighbours.of(ei, n)
    targets = torch.tensor([5, 17, 40])
    block = sample_block(adj, targets, (4, 3), torch.Generator().manual_seed(1))
    assert block.nodes[:3].tolist() == targets.tolist() and block.num_targets == 3
    assert block.nodes.unique().numel() == block.nodes.numel()
    src, dst = block.nodes[block.edge_index[0]], block.nodes[block.edge_index[1]]
    real = set(map(tuple, ei.t().tolist()))
    assert all((s, d) in real for s, d in zip(src.tolist(), dst.tolist(), strict=True))
    in_deg = torch.bincount(ei[1], minlength=n)
    for v in targets.tolist():  # hop 0: min(k, degree) distinct neighbours of each target
        got = src[dst == v]
        assert got.numel() == min(4, int(in_deg[v])) and got.unique().numel() == got.numel()
    hop1 = set(block.nodes[3:].tolist()) & set(src[torch.isin(dst, targets)].tolist())
    for v in hop1:  # hop 1 expands only nodes hop 0 added, with at most 3 each
        assert int((dst == v).sum()) <= 3


def test_sampling_follows_the_generator() -> None:
    ei = _graph()
    adj = InNeighbours.of(ei, 60)
    t = torch.arange(10)
    a = sample_block(adj, t, (5, 5), torch.Generator().manual_seed(3))
    b = sample_block(adj, t, (5, 5), torch.Generator().manual_seed(3))
    c = sample_block(adj, t, (5, 5), torch.Generator().manual_seed(4))
    assert torch.equal(a.nodes, b.nodes) and torch.equal(a.edge_index, b.edge_index)
    assert not (a.nodes.numel() == c.nodes.numel() and torch.equal(a.edge_index, c.edge_index))


def test_a_fanout_above_every_degree_keeps_whole_neighbourhoods() -> None:
    ei = _graph()
    adj = InNeighbours.of(ei, 60)
    block = sample_block(adj, torch.tensor([7]), (1000,), torch.Generator().manual_seed(0))
    assert block.edge_index.size(1) == int((ei[1] == 7).sum())


def test_an_isolated_target_gets_an_empty_block() -> None:
    adj = InNeighbours.of(torch.tensor([[0], [1]]), 3)
    block = sample_block(adj, torch.tensor([2]), (5, 5), torch.Generator())
    assert block.nodes.tolist() == [2] and block.edge_index.shape == (2, 0)


@pytest.mark.parametrize(("text", "layers", "want"), [("", 2, ()), ("5,5", 2, (5, 5)), (" 10, 5 ", 2, (10, 5)),
                                                      ([3, 2, 1], 3, (3, 2, 1))])
def test_parse_fanouts(text: object, layers: int, want: tuple[int, ...]) -> None:
    assert parse_fanouts(text, layers) == want


@pytest.mark.parametrize(("text", "why"), [("5", "one count per GNN layer"), ("5,x", "comma-separated"),
                                           ("5,0", "positive")])
def test_bad_fanouts_are_a_config_error(text: str, why: str) -> None:
    with pytest.raises(ConfigError, match=why):
        parse_fanouts(text, 2)


def test_the_backbone_options_check_fanouts_and_batch_nodes() -> None:
    ok = {**BACKBONE_OPTIONS, "backbone": "sage", "layers": 3, "fanouts": "5,5,5", "batch_nodes": "32"}
    check_backbone_options("fedsage", ok, node_task=True)
    assert ok["fanouts"] == (5, 5, 5) and ok["batch_nodes"] == 32
    with pytest.raises(ConfigError, match="fedsage: fanouts needs one count per GNN layer"):
        check_backbone_options("fedsage", {**BACKBONE_OPTIONS, "backbone": "sage", "fanouts": "5"}, node_task=True)
    with pytest.raises(ConfigError, match="batch_nodes must be >= 1"):
        check_backbone_options("local", {**BACKBONE_OPTIONS, "fanouts": "5,5", "batch_nodes": 0}, node_task=True)
    with pytest.raises(ConfigError, match="graph tasks"):
        check_backbone_options("local", {**BACKBONE_OPTIONS, "fanouts": "5,5"}, node_task=False)


def _labelled(n: int = 200, seed: int = 0) -> Data:
    """Two classes whose features differ, joined mostly within each class."""
    g = torch.Generator().manual_seed(seed)
    y = (torch.arange(n) % 2).long()
    x = torch.randn(n, 8, generator=g) + y[:, None].float()
    src = torch.randint(0, n, (4 * n,), generator=g)
    dst = (src + 2 * torch.randint(1, 5, (4 * n,), generator=g)) % n  # same parity: same class
    mask = torch.rand(n, generator=g) < 0.6
    return Data(x=x, y=y, edge_index=torch.stack([src, dst]), train_mask=mask, num_nodes=n)


def test_sampled_training_takes_one_step_per_batch_and_learns() -> None:
    data = _labelled()
    options = {**BACKBONE_OPTIONS, "backbone": "sage", "fanouts": "5,5", "batch_nodes": 16}
    check_backbone_options("local", options, node_task=True)
    torch.manual_seed(0)
    model = GraphSage(8, 16, 2, 2, dropout=0.0)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    steps = []
    opt.register_step_post_hook(lambda *_: steps.append(1))
    first = train_node_backbone(options, model, opt, data, 1, generator=torch.Generator().manual_seed(0))
    batches = -(-int(data.train_mask.sum()) // 16)
    assert len(steps) == batches
    last = train_node_backbone(options, model, opt, data, 20, generator=torch.Generator().manual_seed(1))
    assert last < first
    model.eval()
    pred = model(data.x, data.edge_index).argmax(1)
    assert (pred[data.train_mask] == data.y[data.train_mask]).float().mean() > 0.9


def test_full_batch_stays_the_default() -> None:
    data = _labelled()
    options = {**BACKBONE_OPTIONS, "backbone": "sage"}
    check_backbone_options("local", options, node_task=True)
    model = GraphSage(8, 16, 2, 2, dropout=0.0)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    steps = []
    opt.register_step_post_hook(lambda *_: steps.append(1))
    train_node_backbone(options, model, opt, data, 3, generator=torch.Generator())
    assert len(steps) == 3
