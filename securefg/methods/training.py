"""Local training and evaluation loops shared by the baselines (one party's own work).

Everything here runs *as one party* on that party's own model and data; nothing crosses a
party boundary.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch_geometric.data import Batch, Data
from torch_geometric.loader import DataLoader
from torch_geometric.utils import coalesce, to_torch_csr_tensor

from securefg.methods.label_groups import LabelGroups
from securefg.metrics import accuracy, roc_auc

ProxFn = Callable[[nn.Module], torch.Tensor]


def party_seed(seed: int, pid: str, r: int) -> int:
    """A 63-bit seed for party ``pid``'s local randomness in round ``r`` of run ``seed``.

    A function of (run seed, party, round) only, so a party draws the same dropout masks
    whether it shares one process with the others (in-process backend) or runs alone (Flower
    backend): a shared global stream would depend on how many parties drew before it.
    """
    digest = hashlib.sha256(f"securefg/party-rng/{seed}/{pid}/{r}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


@contextlib.contextmanager
def party_rng(seed: int, pid: str, r: int) -> Iterator[None]:
    """Run the block with torch's RNGs seeded by :func:`party_seed`; restore them afterwards.

    The CUDA generator is forked and seeded too when a GPU is present (``torch.manual_seed``
    seeds every device), so dropout on the GPU draws per party as on the CPU."""
    devices = [torch.cuda.current_device()] if torch.cuda.is_available() else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(party_seed(seed, pid, r))
        yield


class PartyGenerator:
    """A party's own generator for mini-batch order, checkpointable like its model.

    A generator shared by every client of an in-process run would give each client batches
    that depend on how many clients drew before it, which no client on its own host could
    reproduce; each party draws from its own instead (seeded by :func:`party_seed`).
    """

    def __init__(self, seed: int = 0) -> None:
        self.generator = torch.Generator().manual_seed(seed)

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {"state": self.generator.get_state()}

    def load_state_dict(self, state: Mapping[str, torch.Tensor]) -> None:
        self.generator.set_state(state["state"])


@dataclass(frozen=True)
class TrainConfig:
    """Local optimisation settings.

    Args:
        lr (float): Adam learning rate. (default: ``0.01``)
        weight_decay (float): Adam weight decay. (default: ``1e-6``)
        local_epochs (int): Epochs per round. (default: ``1``)
        batch_size (int): Graph mini-batch size (graph tasks). (default: ``32``)
        prox_mu (float): FedProx proximal coefficient (0 = FedAvg). (default: ``0.0``)
    """

    lr: float = 0.01
    weight_decay: float = 1e-6
    local_epochs: int = 1
    batch_size: int = 32
    prox_mu: float = 0.0


def proximal_term(model: nn.Module, anchor: Mapping[str, torch.Tensor], mu: float) -> torch.Tensor:
    """FedProx's ``mu/2 * ||w - w_global||^2`` over the trainable parameters."""
    terms = [((p - anchor[n].to(p.device)) ** 2).sum() for n, p in model.named_parameters() if p.requires_grad]
    return 0.5 * mu * torch.stack(terms).sum()


#: ``with_sparse_adjacency``'s default ``min_messages``: the edge-wise gather is faster below
#: about this many message entries (edges x features). Measured per full-batch GCN step, one
#: thread: a Cora METIS client (2,000 edges x 1,433) 18 ms gathered vs 24 ms CSR; a Computers
#: client (100,000 x 767) 406 vs 75 ms; Cora's whole graph under GraphSage (10,556 x 1,433) 143 vs 58 ms.
SPARSE_FROM = 8_000_000


def with_sparse_adjacency(data: Data, *, min_messages: int = SPARSE_FROM) -> Data:
    """A shallow copy of ``data`` (tensors shared) carrying ``adj_t``, its adjacency as a sparse CSR matrix.

    Why: PyG's GCNConv and SAGEConv on a CSR adjacency run one sparse matmul instead of an
    edge-wise gather and scatter, which materialises an ``(E, d)`` message tensor: 2-3x faster per
    full-batch epoch on CPU for Computers-sized client graphs, and 6x per GraphSage forward on
    Coauthor-CS (d = 6805, where the gather alone is 4.5 GB). The forward output is the same
    (the sum runs in another order, so the last float bits may differ). A graph whose edge list
    repeats an edge is returned as it is: a CSR matrix would merge the copies, which the
    edge-wise mean counts twice. ``edge_index`` stays for code that needs the edge list. A graph
    with fewer than ``min_messages`` edge x feature entries is returned as it is (see
    :data:`SPARSE_FROM`; FedSheafHN passes 0, the CSR path it has always run)."""
    if "adj_t" in data or data.edge_index.size(1) * (data.num_node_features or 1) < min_messages:
        return data
    n = int(data.num_nodes)
    if coalesce(data.edge_index, num_nodes=n).size(1) != data.edge_index.size(1):
        return data
    out = copy.copy(data)
    with warnings.catch_warnings():  # torch flags CSR as beta; PyG's GCNConv and SAGEConv support it
        warnings.simplefilter("ignore", UserWarning)
        out.adj_t = to_torch_csr_tensor(data.edge_index.flip(0), size=(n, n))
    return out


def propagation_index(data: Data) -> torch.Tensor:
    """What a GNN layer propagates over: ``adj_t`` when the graph carries one, else ``edge_index``."""
    return data.adj_t if "adj_t" in data else data.edge_index


def train_node_epochs(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    data: Data,
    epochs: int,
    prox: ProxFn | None = None,
) -> float:
    """Full-batch training on the nodes in ``data.train_mask``; returns the last loss."""
    model.train()
    loss_val = float("nan")
    for _ in range(epochs):
        optimizer.zero_grad()
        out = model(data.x, propagation_index(data))
        loss_val = _cross_entropy_step(model, optimizer, out[data.train_mask], data.y[data.train_mask], prox)
    return loss_val


def _cross_entropy_step(model: nn.Module, optimizer: torch.optim.Optimizer, logits: torch.Tensor, y: torch.Tensor,
                        prox: ProxFn | None) -> float:
    """Backpropagate cross-entropy (plus the proximal term) from ``logits`` and step; the loss."""
    loss = F.cross_entropy(logits, y)
    if prox is not None:
        loss = loss + prox(model)
    loss.backward()
    optimizer.step()
    return float(loss.detach())


def train_node_sampled_epochs(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    data: Data,
    epochs: int,
    *,
    batch_size: int,
    fanouts: Sequence[int],
    generator: torch.Generator,
    prox: ProxFn | None = None,
) -> float:
    """GraphSage's mini-batch training: each epoch, the training nodes in shuffled batches of
    ``batch_size``, one step per batch on its sampled neighbourhood (:mod:`.neighbour_sampling`);
    returns the last loss. Shuffling and sampling draw from ``generator`` (the party's own)."""
    from securefg.methods.neighbour_sampling import InNeighbours, sample_block

    model.train()
    adj = InNeighbours.of(data.edge_index, int(data.num_nodes))
    train_idx = data.train_mask.nonzero().view(-1)
    # GraphSage reads a large sparse feature matrix's rows as sparse (models/sage.py)
    features = getattr(model, "batch_features", None) or (lambda x, nodes: x[nodes])
    loss_val = float("nan")
    for _ in range(epochs):
        order = train_idx[torch.randperm(train_idx.numel(), generator=generator).to(train_idx.device)]
        for targets in order.split(batch_size):
            block = sample_block(adj, targets, fanouts, generator)
            optimizer.zero_grad()
            out = model(features(data.x, block.nodes), block.edge_index)[: block.num_targets]
            loss_val = _cross_entropy_step(model, optimizer, out, data.y[targets], prox)
    return loss_val


@torch.no_grad()
def evaluate_node(model: nn.Module, data: Data) -> dict[str, float]:
    """Accuracy on the train/val/test masks of ``data``."""
    model.eval()
    out = model(data.x, propagation_index(data))
    return {
        f"{split}_acc": accuracy(out[getattr(data, f"{split}_mask")], data.y[getattr(data, f"{split}_mask")])
        for split in ("train", "val", "test")
    }


def train_graph_epochs(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    graphs: Sequence[Data],
    *,
    epochs: int,
    batch_size: int,
    device: torch.device,
    generator: torch.Generator | None = None,
    prox: ProxFn | None = None,
    groups: LabelGroups | None = None,
) -> float:
    """Mini-batch training on labelled graphs; returns the mean loss of the last epoch.

    With ``groups`` (several datasets), each graph's loss reads only its dataset's head."""
    if not graphs:
        return float("nan")
    model.train()
    loader = DataLoader(list(graphs), batch_size=batch_size, shuffle=True, generator=generator)
    last = float("nan")
    for _ in range(epochs):
        total, count = 0.0, 0
        for batch in loader:
            batch = batch.to(device)
            optimizer.zero_grad()
            out = model(batch.x, batch.edge_index, batch.batch)
            y = batch.y.view(-1)
            loss = F.cross_entropy(groups.restrict(out, y) if groups is not None else out, y)
            if prox is not None:
                loss = loss + prox(model)
            loss.backward()
            optimizer.step()
            total += float(loss.detach()) * batch.num_graphs
            count += batch.num_graphs
        last = total / max(count, 1)
    return last


def train_graphs_until_stall(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    graphs: Sequence[Data],
    *,
    max_epochs: int,
    patience: int,
    batch_size: int,
    device: torch.device,
    generator: torch.Generator | None = None,
    groups: LabelGroups | None = None,
    monitor: Callable[[nn.Module], float] | None = None,
) -> int:
    """Train up to ``max_epochs``; stop after ``patience`` epochs without a training-loss
    decrease (CeFGC's rule; ``patience = 0`` trains every epoch). Returns the epochs run.

    With ``monitor`` (say, a validation loss), each epoch is judged by ``monitor(model)``
    instead, and the model ends at its epoch with the lowest value."""
    best, since, epoch = float("inf"), 0, 0
    best_state: dict[str, torch.Tensor] | None = None
    for epoch in range(1, max_epochs + 1):
        loss = train_graph_epochs(model, optimizer, graphs, epochs=1, batch_size=batch_size, device=device,
                                  generator=generator, groups=groups)
        if monitor is not None:
            loss = monitor(model)
        if loss < best:
            best, since = loss, 0
            if monitor is not None:
                best_state = state_of(model)
        else:
            since += 1
            if patience and since >= patience:
                break
    if best_state is not None:
        load_state(model, best_state)
    return epoch


@torch.no_grad()
def predict_graphs(model: nn.Module, graphs: Sequence[Data], device: torch.device, batch_size: int = 256) -> tuple[torch.Tensor, torch.Tensor]:
    """Logits and labels for a list of graphs."""
    model.eval()
    logits, labels = [], []
    for i in range(0, len(graphs), batch_size):
        batch = Batch.from_data_list(list(graphs[i : i + batch_size])).to(device)
        logits.append(model(batch.x, batch.edge_index, batch.batch).cpu())
        labels.append(batch.y.view(-1).cpu())
    if not logits:
        return torch.zeros(0, 1), torch.zeros(0, dtype=torch.long)
    return torch.cat(logits), torch.cat(labels)


def evaluate_graphs(
    model: nn.Module, graphs: Sequence[Data], num_classes: int, device: torch.device, groups: LabelGroups | None = None
) -> dict[str, Any]:
    """Accuracy and ROC-AUC on a list of graphs; with ``groups``, each dataset's head is scored
    on its own graphs, ``auc`` is the mean of those AUCs and ``auc_by_dataset`` names them."""
    logits, y = predict_graphs(model, graphs, device)
    if groups is not None:
        return groups.scores(logits, y)
    return {"acc": accuracy(logits, y), "auc": roc_auc(logits, y, num_classes)}


def state_of(model: nn.Module) -> dict[str, torch.Tensor]:
    """A detached CPU copy of the model's floating parameters and buffers."""
    return {k: v.detach().to("cpu").clone() for k, v in model.state_dict().items() if v.is_floating_point()}


def load_state(model: nn.Module, tensors: Mapping[str, torch.Tensor]) -> None:
    """Load floating tensors (received from another party) into ``model`` in place."""
    own = model.state_dict()
    with torch.no_grad():
        for k, v in tensors.items():
            own[k].copy_(v.to(own[k].device, own[k].dtype))
