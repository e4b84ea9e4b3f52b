"""Single-process reference run of FedStruct, for checking accuracy against the paper.

Simulates the federated computation with plain tensors: every client's loss is computed from
its own :class:`~securefg.models.fedstruct.client_step.ClientBatch` (own features, local-only
feature propagation, its Ā rows) and the summed loss is one FedSGD round (Eqs. 6-8): its
gradient is exactly ``Σ_i ∇ℒ_i / |Ṽ|``, the aggregate the server would apply.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor
from torch_geometric.data import Data

from securefg.errors import ConfigError, InvalidInputError
from securefg.models.fedstruct.abar_protocol import compute_abar_rows
from securefg.models.fedstruct.client_graph_view import ClientGraphView, split_graph
from securefg.models.fedstruct.client_step import ClientBatch, labeled_cross_entropy, make_client_batch
from securefg.models.fedstruct.decoupled_gcn import FedStructDGCN
from securefg.models.fedstruct.degree_features import degree_features
from securefg.models.fedstruct.hop2vec import Hop2Vec
from securefg.models.fedstruct.node2vec import train_node2vec
from securefg.models.fedstruct.node_directory import NodeDirectory
from securefg.models.fedstruct.partition import NodeSplit, random_node_split
from securefg.models.fedstruct.propagation import (
    last_hop_betas,
    multi_hop_adjacency,
    rw_normalized_adjacency,
)
from securefg.models.fedstruct.run_result import RunResult

NSF_CHOICES = ("hop2vec", "node2vec", "degree")


@dataclass(frozen=True)
class FedStructConfig:
    """Hyperparameters; defaults are Table 4's Cora column (notes B2) unless marked.

    Args:
        lr (float): θ step λ. (0.002)
        lr_structure (float): NSF step λ_s (Hop2Vec). (0.002)
        weight_decay (float): (5e-4)
        epochs (int): FL rounds = full-batch steps. (40)
        local_hops (int): L, feature side. (2)
        structure_hops (int): L_s, structure side. (10)
        structure_dim (int): d_s. (256)
        feature_hidden (tuple[int, ...]): θ_f hidden widths. ((64,))
        structure_hidden (tuple[int, ...] | None): θ_s hidden widths. ((256,))
        betas (tuple[float, ...] | None): β for Ā; :obj:`None` = ``Â^{L_s}`` only, as the
            FedStruct code (the paper gives none).
        local_betas (tuple[float, ...] | None): β for the local Ā^{(i)}; :obj:`None` = top power.
        dropout (float): Hidden dropout. Not in the paper. (0.5)
        input_dropout (float): Dropout on X before f. Not in the paper. (0.5)
        norm (str | None): Hidden norm; the code uses LayerNorm, the paper says nothing.
            ("layer_norm")
        hop2vec_init_std (float): Std of Hop2Vec's random S. Not in the paper. (0.1)

    The four knobs the paper leaves open were chosen by mean *validation* accuracy over 3 seeds
    on Cora (K=10) across all three NSFs, from dropout {0, 0.5, 0.7} x input dropout {0, 0.5}
    x norm {none, layer} x init std {1, 0.1, 0.01}; β = top power only beat uniform and
    PPR-like β for Deg.
        optimizer (str): ``"adam"`` (the code) or ``"sgd"`` (the paper's text says plain GD).
        node2vec_epochs (int): Node2Vec pre-training epochs (code config: 50).
    """

    lr: float = 0.002
    lr_structure: float = 0.002
    weight_decay: float = 5e-4
    epochs: int = 40
    local_hops: int = 2
    structure_hops: int = 10
    structure_dim: int = 256
    feature_hidden: tuple[int, ...] = (64,)
    structure_hidden: tuple[int, ...] | None = (256,)
    betas: tuple[float, ...] | None = None
    local_betas: tuple[float, ...] | None = None
    dropout: float = 0.5
    input_dropout: float = 0.5
    norm: str | None = "layer_norm"
    hop2vec_init_std: float = 0.1
    optimizer: Literal["adam", "sgd"] = "adam"
    node2vec_epochs: int = 50

    def __post_init__(self) -> None:
        problems = []
        if self.betas is not None and len(self.betas) != self.structure_hops:
            problems.append(f"- betas has {len(self.betas)} entries, structure_hops is "
                            f"{self.structure_hops}")
        if self.local_betas is not None and len(self.local_betas) != self.local_hops:
            problems.append(f"- local_betas has {len(self.local_betas)} entries, local_hops "
                            f"is {self.local_hops}")
        if self.optimizer not in ("adam", "sgd"):
            problems.append(f"- optimizer {self.optimizer!r} is not one of 'adam', 'sgd'")
        if self.epochs < 1:
            problems.append(f"- epochs must be >= 1, got {self.epochs}")
        if problems:
            raise ConfigError("invalid FedStructConfig:\n" + "\n".join(problems))


def train_fedstruct_central(
    data: Data,
    partition_assignment: Tensor,
    *,
    nsf: str = "hop2vec",
    config: FedStructConfig = FedStructConfig(),
    split: NodeSplit | None = None,
    abar_mode: Literal["central", "algorithm3"] = "central",
    seed: int = 0,
    device: torch.device | str = "cpu",
) -> RunResult:
    """Train FedStruct (decoupled GCN) on ``data`` split over clients, in one process.

    Args:
        data (Data): Global graph with ``x``, ``y`` and undirected ``edge_index``.
        partition_assignment (Tensor): ``[n]`` owner client of every node.
        nsf (str, optional): ``"hop2vec"``, ``"node2vec"`` or ``"degree"``.
            (default: :obj:`"hop2vec"`)
        config (FedStructConfig, optional): Hyperparameters. (default: Table 4, Cora)
        split (NodeSplit, optional): Masks; default per-client 10/10/80 from ``seed``.
        abar_mode (str, optional): ``"central"`` computes Ā from the global graph
            (FedStruct-A); ``"algorithm3"`` builds each Ā[i] with Algorithm 3 (FedStruct-B).
            Identical without pruning (Theorem 5). (default: :obj:`"central"`)
        seed (int, optional): Seeds split, NSFs and model init. (default: :obj:`0`)
        device (torch.device or str, optional): (default: :obj:`"cpu"`)

    Returns:
        RunResult: Accuracies and wall time.

    Raises:
        ConfigError: If ``nsf`` or ``abar_mode`` is unknown.
    """
    if nsf not in NSF_CHOICES:
        raise ConfigError(f"Could not resolve nsf={nsf!r} among choices {set(NSF_CHOICES)}")
    if abar_mode not in ("central", "algorithm3"):
        raise ConfigError(f"Could not resolve abar_mode={abar_mode!r} among choices "
                          "{'central', 'algorithm3'}")
    start = time.perf_counter()
    gen = torch.Generator().manual_seed(seed)
    n = data.num_nodes
    owner = partition_assignment.long().cpu()
    if owner.shape != (n,):
        raise InvalidInputError(f"partition_assignment must be [{n}], got {tuple(owner.shape)}")
    directory = NodeDirectory(owner, int(owner.max()) + 1)
    split = split or random_node_split(owner, generator=gen)
    views = split_graph(data.edge_index.cpu(), directory)

    betas = config.betas or last_hop_betas(config.structure_hops)
    local_betas = config.local_betas or last_hop_betas(config.local_hops)
    abar_rows = _abar_rows(data.edge_index.cpu(), directory, views, betas, abar_mode)

    structure, hop2vec = _structure_features(nsf, data, config, gen, device)
    x, y = data.x.to(device), data.y.to(device)
    batches = [
        make_client_batch(v, x=x[v.nodes.to(device)], y=y[v.nodes.to(device)],
                          label_mask=split.train[v.nodes].to(device),
                          abar_rows=abar_rows[v.client_id].to(device), local_betas=local_betas)
        for v in views
    ]
    stacked = _Stacked.from_batches(batches, views, split, n)
    # PyG layers initialise and dropout samples from torch's global RNG; fork it so the run is
    # seeded by `seed` alone and the caller's global state is left untouched (CPU only).
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(torch.randint(2**62, (1,), generator=gen)))
        model = FedStructDGCN(
            data.num_features, config.structure_dim, int(data.y.max()) + 1,
            feature_hidden=config.feature_hidden, structure_hidden=config.structure_hidden,
            dropout=config.dropout, input_dropout=config.input_dropout, norm=config.norm,
        ).to(device)
        best, final_test = _fit(model, hop2vec, structure, stacked, config,
                                num_labeled=int(split.train.sum()))
    return RunResult(f"fedstruct-{nsf}", best[2], final_test, best[0], best[1],
                     time.perf_counter() - start, best[3])


def _fit(
    model: FedStructDGCN, hop2vec: Hop2Vec | None, structure: Tensor, stacked: _Stacked,
    config: FedStructConfig, *, num_labeled: int,
) -> tuple[tuple[float, int, float, tuple[float, ...]], float]:
    """Full-batch FedSGD rounds; returns (best (val, epoch, test, per-client), final test)."""
    groups = [{"params": list(model.parameters()), "lr": config.lr}]
    if hop2vec is not None:
        groups.append({"params": list(hop2vec.parameters()), "lr": config.lr_structure})
    opt: torch.optim.Optimizer = (
        torch.optim.Adam(groups, weight_decay=config.weight_decay) if config.optimizer == "adam"
        else torch.optim.SGD(groups, weight_decay=config.weight_decay)
    )
    best: tuple[float, int, float, tuple[float, ...]] = (-1.0, 0, 0.0, ())
    final_test = 0.0
    for epoch in range(1, config.epochs + 1):
        model.train()
        opt.zero_grad()
        logits = stacked.logits(model, hop2vec() if hop2vec is not None else structure)
        labeled_cross_entropy(logits, stacked.y, stacked.train, num_labeled).backward()
        opt.step()
        model.eval()
        with torch.no_grad():
            pred = stacked.logits(model, hop2vec() if hop2vec is not None else structure)
            ok = (pred.argmax(1) == stacked.y).cpu()
        val = float(ok[stacked.val].float().mean())
        final_test = float(ok[stacked.test].float().mean())
        if val > best[0]:
            best = (val, epoch, final_test, stacked.per_client(ok))
    return best, final_test


@dataclass(frozen=True)
class _Stacked:
    """All clients' batches stacked client-major, to run K client forwards as one.

    Row blocks are independent: the feature matrix is block-diagonal and Ā rows are scattered
    back to full width, so row block i of :meth:`logits` equals ``client_logits`` of client i
    and the summed loss equals Σ_i ℒ_i. This is a speed-up of the simulation only (measured
    ~3x on Cora, K=10: one product instead of 2K small ones plus per-client gathers); dropout
    masks on g's hidden layer are shared across clients.
    """

    x: Tensor
    a_local: Tensor
    abar: Tensor
    y: Tensor
    train: Tensor
    val: Tensor
    test: Tensor
    sizes: tuple[int, ...]

    @classmethod
    def from_batches(cls, batches: Sequence[ClientBatch], views: Sequence[ClientGraphView],
                     split: NodeSplit, num_nodes: int) -> _Stacked:
        offsets, idx, vals = 0, [], []
        abar = []
        for b in batches:
            a = b.a_local.coalesce() if b.a_local.is_sparse else b.a_local.to_sparse()
            idx.append(a.indices() + offsets)
            vals.append(a.values())
            offsets += b.x.size(0)
            full = torch.zeros(b.x.size(0), num_nodes, dtype=b.abar_rows.dtype,
                               device=b.abar_rows.device)
            full[:, b.structure_ids] = b.abar_rows
            abar.append(full)
        a_local = torch.sparse_coo_tensor(torch.cat(idx, 1), torch.cat(vals), (offsets, offsets),
                                          check_invariants=False).coalesce()
        nodes = torch.cat([v.nodes for v in views])
        return cls(torch.cat([b.x for b in batches]), a_local, torch.cat(abar),
                   torch.cat([b.y for b in batches]), torch.cat([b.label_mask for b in batches]),
                   split.val[nodes], split.test[nodes], tuple(b.x.size(0) for b in batches))

    def logits(self, model: FedStructDGCN, structure: Tensor) -> Tensor:
        return model(self.x, self.a_local, structure, self.abar)

    def per_client(self, ok: Tensor) -> tuple[float, ...]:
        out = []
        for ok_k, test_k in zip(ok.split(self.sizes), self.test.split(self.sizes), strict=True):
            out.append(float(ok_k[test_k].float().mean()) if test_k.any() else float("nan"))
        return tuple(out)


def _abar_rows(
    edge_index: Tensor, directory: NodeDirectory, views: Sequence[ClientGraphView],
    betas: Sequence[float],
    mode: str,
) -> list[Tensor]:
    if mode == "algorithm3":
        return compute_abar_rows(views, directory, betas=betas)
    abar = multi_hop_adjacency(rw_normalized_adjacency(edge_index, directory.num_nodes), betas)
    return [abar[v.nodes] for v in views]


def _structure_features(
    nsf: str, data: Data, config: FedStructConfig, gen: torch.Generator,
    device: torch.device | str,
) -> tuple[Tensor, Hop2Vec | None]:
    n = data.num_nodes
    if nsf == "hop2vec":
        h2v = Hop2Vec(n, config.structure_dim, init_std=config.hop2vec_init_std,
                      generator=gen).to(device)
        return h2v.weight, h2v
    if nsf == "degree":
        return degree_features(data.edge_index, n, num_features=config.structure_dim).to(
            device), None
    z = train_node2vec(data.edge_index, n, embedding_dim=config.structure_dim,
                       epochs=config.node2vec_epochs, generator=gen, device=device)
    return z, None
