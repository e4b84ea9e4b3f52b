"""What each FedStruct party holds at the start, built from the experiment's task.

Every client gets only its own features, labels, masks and its :class:`ClientGraphView` (its
intra-edges and the owner/id of each inter-edge endpoint, FedStruct-B's assumption); the
public :class:`NodeDirectory` is the id/owner agreement all parties share (notes B0).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from securefg.errors import InvalidInputError
from securefg.methods.fedstruct.settings import FedStructSettings
from securefg.methods.tasks import NodeTask
from securefg.models.fedstruct import ClientGraphView, FedStructDGCN, NodeDirectory, split_graph
from securefg.models.fedstruct.client_step import local_propagation


@dataclass(frozen=True)
class ClientData:
    """Client k's own node data, rows in ascending global id (the directory's layout)."""

    x: Tensor
    y: Tensor
    train: Tensor
    val: Tensor
    test: Tensor
    a_local: Tensor

    @property
    def num_labeled(self) -> int:
        return int(self.train.sum())


def directory_of(task: NodeTask) -> NodeDirectory:
    """The public owner map, from each client's ``global_id`` (the partition must be disjoint and cover every node)."""
    if task.full_graph is None:
        raise InvalidInputError("FedStruct needs the task's full graph to cut each client's view")
    n = int(task.full_graph.num_nodes)
    owner = torch.full((n,), -1, dtype=torch.long)
    for k, c in enumerate(task.clients):
        if "global_id" not in c:
            raise InvalidInputError(f"client {k}'s subgraph has no global_id; FedStruct needs global node ids")
        if bool((owner[c.global_id] >= 0).any()):
            raise InvalidInputError("FedStruct needs a disjoint partition; a node is held by two clients")
        owner[c.global_id] = k
    if bool((owner < 0).any()):
        raise InvalidInputError(f"{int((owner < 0).sum())} nodes are held by no client; FedStruct needs every node owned")
    return NodeDirectory(owner, len(task.clients))


def client_views(task: NodeTask, directory: NodeDirectory) -> list[ClientGraphView]:
    """Each client's view (simulation: in deployment each client reads its own edge records)."""
    assert task.full_graph is not None
    return split_graph(task.full_graph.edge_index.cpu(), directory)


def client_data(task: NodeTask, k: int, view: ClientGraphView, settings: FedStructSettings,
                device: torch.device) -> ClientData:
    """Client k's features, labels, masks and local L-hop matrix Ā^(i) (intra-edges only)."""
    c = task.clients[k]
    if not torch.equal(c.global_id.cpu(), view.nodes):
        raise InvalidInputError(f"client {k}'s rows are not in ascending global id order")
    a_local = local_propagation(view, betas=settings.local_betas).to(device)
    return ClientData(c.x.float().to(device), c.y.to(device), c.train_mask.to(device), c.val_mask.to(device),
                      c.test_mask.to(device), a_local)


def make_model(task: NodeTask, settings: FedStructSettings, seed: int, device: torch.device) -> FedStructDGCN:
    """The decoupled GCN, initialised from ``seed`` alone (every party builds the same one)."""
    cfg = settings.config
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = FedStructDGCN(
            task.num_features, cfg.structure_dim, task.num_classes, feature_hidden=cfg.feature_hidden,
            structure_hidden=cfg.structure_hidden, dropout=cfg.dropout, input_dropout=cfg.input_dropout,
            norm=cfg.norm,
        )
    return model.to(device)


def load_parameters(model: torch.nn.Module, tensors: dict[str, Tensor]) -> None:
    """Overwrite parameters with received copies (only names present in ``tensors``)."""
    params = dict(model.named_parameters())
    with torch.no_grad():
        for k, v in tensors.items():
            if k in params:
                params[k].copy_(v.to(params[k].device, params[k].dtype))


def correct_counts(logits: Tensor, data: ClientData) -> Tensor:
    """``[val correct, val n, test correct, test n]``: what a client reports for model selection."""
    ok = logits.argmax(1) == data.y
    return torch.tensor([float(ok[data.val].sum()), float(data.val.sum()),
                         float(ok[data.test].sum()), float(data.test.sum())], dtype=torch.float64)


def score_with_nse(client_state: dict, nse_eval: Tensor) -> None:
    """Record the client's eval-mode logits (feature branch + received NSEs) and its correct
    counts; variants A and hardened B score the same way before their training step."""
    model: FedStructDGCN = client_state["model"]
    data: ClientData = client_state["data"]
    model.eval()
    with torch.no_grad():
        logits = model.feature_embeddings(data.x, data.a_local) + nse_eval.float()
    client_state["predictions"] = logits
    client_state["counts"] = correct_counts(logits, data)
    model.train()
