"""The GNN baselines of FedStruct's Table 1: Central, FL (FedSGD) and Local GNN.

Notes B2: the baseline GNN is GraphSage, 3 layers for Cora; its training hyperparameters are
not given, so :class:`GNNBaselineConfig` holds our choices.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor
from torch_geometric.data import Data
from torch_geometric.nn.models import GCN, GraphSAGE
from torch_geometric.utils import subgraph

from securefg.errors import ConfigError
from securefg.models.fedstruct.partition import NodeSplit
from securefg.models.fedstruct.run_result import RunResult


@dataclass(frozen=True)
class GNNBaselineConfig:
    """Baseline hyperparameters (ours; the paper gives none besides the layer count).

    Args:
        conv (str): ``"sage"`` (paper) or ``"gcn"``.
        hidden (int): Hidden width.
        num_layers (int): Message-passing layers (paper: 3 for Cora).
        lr (float): Adam step.
        weight_decay (float): Adam weight decay.
        dropout (float): Dropout between layers.
        epochs (int): Full-batch steps (= FedSGD rounds for the FL baseline).
    """

    conv: Literal["sage", "gcn"] = "sage"
    hidden: int = 64
    num_layers: int = 3
    lr: float = 0.01
    weight_decay: float = 5e-4
    dropout: float = 0.5
    epochs: int = 200

    def __post_init__(self) -> None:
        if self.conv not in ("sage", "gcn"):
            raise ConfigError(f"Could not resolve conv={self.conv!r} among choices "
                              "{'sage', 'gcn'}")


def train_central_gnn(
    data: Data, split: NodeSplit, *, config: GNNBaselineConfig = GNNBaselineConfig(),
    seed: int = 0, device: torch.device | str = "cpu",
) -> RunResult:
    """Central GNN: one model on the whole graph (the upper bound)."""
    return _train("central-gnn", data, data.edge_index, split, config, seed, device)


def train_fl_gnn(
    data: Data, partition_assignment: Tensor, split: NodeSplit, *,
    config: GNNBaselineConfig = GNNBaselineConfig(), seed: int = 0,
    device: torch.device | str = "cpu",
) -> RunResult:
    """FL GNN: each client sees only intra-client edges; one shared model.

    Trained as FedSGD (one full-batch gradient per client per round, averaged with weights
    ``|Ṽ_i| / |Ṽ|``), which equals full-batch training on the union of the disjoint subgraphs.
    """
    owner = partition_assignment.to(data.edge_index.device)
    intra = owner[data.edge_index[0]] == owner[data.edge_index[1]]
    return _train("fl-gnn", data, data.edge_index[:, intra], split, config, seed, device)


def train_local_gnn(
    data: Data, partition_assignment: Tensor, split: NodeSplit, *,
    config: GNNBaselineConfig = GNNBaselineConfig(), seed: int = 0,
    device: torch.device | str = "cpu",
) -> RunResult:
    """Local GNN: every client trains its own model on its own subgraph and labels only.

    Each client selects its epoch by its own validation nodes; the reported accuracy pools all
    clients' test nodes, with per-client values in ``per_client_test_acc``.
    """
    start = time.perf_counter()
    owner = partition_assignment.cpu()
    results = []
    for k in torch.unique(owner).tolist():
        nodes = torch.nonzero(owner == k).flatten()
        ei, _ = subgraph(nodes, data.edge_index.cpu(), relabel_nodes=True,
                         num_nodes=data.num_nodes)
        local = Data(x=data.x[nodes], y=data.y[nodes], edge_index=ei)
        local_split = NodeSplit(split.train[nodes], split.val[nodes], split.test[nodes])
        results.append((_train(f"local-{k}", local, ei, local_split, config, seed + k, device,
                               num_classes=int(data.y.max()) + 1),
                        int(local_split.test.sum()), int(local_split.val.sum())))
    tests = sum(r.test_acc * nt for r, nt, _ in results) / sum(nt for _, nt, _ in results)
    finals = sum(r.final_test_acc * nt for r, nt, _ in results) / sum(nt for _, nt, _ in results)
    vals = sum(r.val_acc * nv for r, _, nv in results) / max(sum(nv for _, _, nv in results), 1)
    return RunResult("local-gnn", tests, finals, vals, 0, time.perf_counter() - start,
                     tuple(r.test_acc for r, _, _ in results))


def _train(
    name: str, data: Data, edge_index: Tensor, split: NodeSplit, config: GNNBaselineConfig,
    seed: int, device: torch.device | str, num_classes: int | None = None,
) -> RunResult:
    # PyG layers initialise (and dropout samples) from torch's global RNG: fork it so the run is
    # seeded by `seed` alone and the caller's global state is untouched (CPU only).
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return _fit(name, data, edge_index, split, config, device, num_classes)


def _fit(
    name: str, data: Data, edge_index: Tensor, split: NodeSplit, config: GNNBaselineConfig,
    device: torch.device | str, num_classes: int | None,
) -> RunResult:
    start = time.perf_counter()
    cls = GraphSAGE if config.conv == "sage" else GCN
    out = num_classes or int(data.y.max()) + 1
    model = cls(data.num_features, config.hidden, config.num_layers, out,
                dropout=config.dropout).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    x, y, ei = data.x.to(device), data.y.to(device), edge_index.to(device)
    train, val, test = split.train.to(device), split.val.to(device), split.test.to(device)
    best = (-1.0, 0, 0.0)
    final = 0.0
    for epoch in range(1, config.epochs + 1):
        model.train()
        opt.zero_grad()
        F.cross_entropy(model(x, ei)[train], y[train]).backward()
        opt.step()
        model.eval()
        with torch.no_grad():
            ok = model(x, ei).argmax(1) == y
        v = float(ok[val].float().mean()) if val.any() else 0.0
        final = float(ok[test].float().mean()) if test.any() else 0.0
        if v > best[0]:
            best = (v, epoch, final)
    return RunResult(name, best[2], final, best[0], best[1], time.perf_counter() - start)
