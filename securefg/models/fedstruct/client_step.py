r"""One FedStruct client's local computation per round, for an orchestrator to wire up.

Per round (FedSGD, Eqs. 6-8), with :math:`|\tilde{V}|` the *global* labelled count:

- **B2** (NSFs; for Hop2Vec the current copy of S), owners -> client i: the rows
  ``batch.structure_ids`` (the L_s-hop reach of V_i), passed here as ``s_rows``;
- **B3** θ, server -> client i: the ``model`` parameters;
- **B4** ∇_θ ℒ_i, client i -> server, summed over i: ``ClientGradients.theta``;
- **B6** ∇_S ℒ_i (Hop2Vec only), client i -> server -> owners, summed per node:
  ``ClientGradients.structure`` for rows ``structure_ids`` (see
  :func:`aggregate_structure_gradients`).

FedStruct-B needs :math:`\bar{A}^{[i]}` from Algorithm 3 once (``abar_protocol``). FedStruct-A
instead has the server hold ``Ā`` and S: it sends the NSEs :math:`\bar{A}^{[i]} g(S)` (A2); the
client runs :func:`client_gradients_given_nse` and returns ``∂ℒ_i/∂NSE`` (``[n_i, C]``), from
which the server back-propagates into ``φ`` and S. That is the chain-rule equivalent of the
paper's Jacobian messages A3/A4 and, like them, tells the server per-node residuals.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from securefg.errors import InvalidInputError
from securefg.models.fedstruct.client_graph_view import ClientGraphView
from securefg.models.fedstruct.decoupled_gcn import FedStructDGCN
from securefg.models.fedstruct.propagation import multi_hop_adjacency, rw_normalized_adjacency


@dataclass(frozen=True)
class ClientBatch:
    """Client i's inputs to :class:`FedStructDGCN`, all rows in its own node order.

    Args:
        x (Tensor): ``[n_i, F]`` own features.
        a_local (Tensor): ``[n_i, n_i]`` L-hop matrix of the local subgraph (sparse or dense).
        abar_rows (Tensor): ``[n_i, m]`` Ā rows restricted to their non-zero columns.
        structure_ids (Tensor): ``[m]`` global ids of those columns (whose NSFs are needed).
        y (Tensor): ``[n_i]`` labels (only ``label_mask`` entries are read).
        label_mask (Tensor): ``[n_i]`` bool, the labelled training nodes Ṽ_i.
    """

    x: Tensor
    a_local: Tensor
    abar_rows: Tensor
    structure_ids: Tensor
    y: Tensor
    label_mask: Tensor

    def __post_init__(self) -> None:
        n_i = self.x.size(0)
        if self.a_local.shape != (n_i, n_i) or self.abar_rows.size(0) != n_i:
            raise InvalidInputError(
                f"ClientBatch: x has {n_i} rows but a_local is {tuple(self.a_local.shape)} and "
                f"abar_rows is {tuple(self.abar_rows.shape)}"
            )
        if self.abar_rows.size(1) != self.structure_ids.numel():
            raise InvalidInputError("abar_rows needs one column per structure_ids entry")
        if self.y.shape != (n_i,) or self.label_mask.shape != (n_i,):
            raise InvalidInputError("y and label_mask need one entry per node")


@dataclass(frozen=True)
class ClientGradients:
    """What client i sends after a round: B4 and, for Hop2Vec, B6.

    Args:
        theta (dict[str, Tensor]): ``∇_θ ℒ_i`` per parameter name, already divided by ``|Ṽ|``.
        structure (Tensor, optional): ``[m, d_s]`` ``∇_S ℒ_i`` for rows ``structure_ids``.
        loss (float): ``ℒ_i / |Ṽ|`` (for logging; sums to the global loss).
    """

    theta: dict[str, Tensor]
    structure: Tensor | None
    loss: float


def local_propagation(
    view: ClientGraphView, *, betas: Sequence[float], sparse: bool = True
) -> Tensor:
    r"""Return :math:`\bar{A}^{(i)}` (``[n_i, n_i]``) from client i's intra-edges only.

    Degrees here are *local* (intra-edges + self-loop), as the FedStruct code builds the feature
    branch's matrix on the client's subgraph; the structure branch's Ā uses global degrees.
    """
    ei = view.local_rows(view.intra_edges.reshape(-1)).view(2, -1)
    a_hat = rw_normalized_adjacency(ei, view.num_nodes)
    return multi_hop_adjacency(a_hat, betas, sparse=sparse)


def compact_columns(abar_rows: Tensor) -> tuple[Tensor, Tensor]:
    """Drop all-zero columns of ``[n_i, n]`` Ā rows; return ``(rows [n_i, m], ids [m])``.

    The ids are the nodes whose NSFs client i must receive, i.e. the L_s-hop reach of V_i.
    """
    ids = torch.nonzero(abar_rows.ne(0).any(0)).flatten()
    return abar_rows[:, ids], ids


def make_client_batch(
    view: ClientGraphView,
    *,
    x: Tensor,
    y: Tensor,
    label_mask: Tensor,
    abar_rows: Tensor,
    local_betas: Sequence[float],
) -> ClientBatch:
    """Assemble a :class:`ClientBatch` from a view, own data and full ``[n_i, n]`` Ā rows."""
    rows, ids = compact_columns(abar_rows)
    a_local = local_propagation(view, betas=local_betas).to(x.device)
    return ClientBatch(x, a_local, rows.to(x.device), ids.to(x.device), y, label_mask)


def client_logits(model: FedStructDGCN, batch: ClientBatch, *, s_rows: Tensor) -> Tensor:
    """Return ``[n_i, C]`` logits; ``s_rows`` are the NSFs of ``batch.structure_ids``."""
    if s_rows.size(0) != batch.structure_ids.numel():
        raise InvalidInputError(
            f"s_rows has {s_rows.size(0)} rows but the batch needs {batch.structure_ids.numel()}"
        )
    return model(batch.x, batch.a_local, s_rows, batch.abar_rows)


def client_loss(
    model: FedStructDGCN, batch: ClientBatch, *, s_rows: Tensor, num_labeled_total: int
) -> Tensor:
    r"""Return :math:`\mathcal{L}_i / |\tilde{V}|` (Eq. 6): the sum over clients is the global loss."""
    logits = client_logits(model, batch, s_rows=s_rows)
    return labeled_cross_entropy(logits, batch.y, batch.label_mask, num_labeled_total)


def client_gradients(
    model: FedStructDGCN, batch: ClientBatch, *, s_rows: Tensor, num_labeled_total: int
) -> ClientGradients:
    """Compute B4 (and B6 if ``s_rows.requires_grad``) without touching ``.grad`` fields."""
    params = dict(model.named_parameters())
    inputs = list(params.values()) + ([s_rows] if s_rows.requires_grad else [])
    loss = client_loss(model, batch, s_rows=s_rows, num_labeled_total=num_labeled_total)
    grads = torch.autograd.grad(loss, inputs, allow_unused=True)
    theta = {k: (g if g is not None else torch.zeros_like(p))
             for (k, p), g in zip(params.items(), grads[: len(params)], strict=True)}
    structure = grads[-1] if s_rows.requires_grad else None
    return ClientGradients(theta, structure, float(loss.detach()))


def client_gradients_given_nse(
    model: FedStructDGCN, batch: ClientBatch, *, nse: Tensor, num_labeled_total: int
) -> tuple[dict[str, Tensor], Tensor, float]:
    """FedStruct-A client step: server-supplied NSEs ``[n_i, C]`` in, ``(∇_θf, ∂ℒ_i/∂NSE, loss)`` out.

    Only ``f``'s parameters get gradients here; the server finishes ``g`` and S from the
    returned ``[n_i, C]`` NSE gradient.
    """
    nse = nse.detach().requires_grad_(True)
    f_params = dict(model.f.named_parameters(prefix="f"))
    logits = model.feature_embeddings(batch.x, batch.a_local) + nse
    loss = labeled_cross_entropy(logits, batch.y, batch.label_mask, num_labeled_total)
    grads = torch.autograd.grad(loss, [*f_params.values(), nse])
    return dict(zip(f_params, grads[:-1], strict=True)), grads[-1], float(loss.detach())


def aggregate_structure_gradients(
    parts: Sequence[tuple[Tensor, Tensor]], num_nodes: int
) -> Tensor:
    """Server side of B6: sum ``(structure_ids, ∇_S rows)`` from all clients into ``[n, d_s]``."""
    if not parts:
        raise InvalidInputError("aggregate_structure_gradients needs at least one client part")
    g0 = parts[0][1]
    out = torch.zeros(num_nodes, g0.size(1), dtype=g0.dtype, device=g0.device)
    for ids, g in parts:
        out.index_add_(0, ids, g)
    return out


def labeled_cross_entropy(
    logits: Tensor, y: Tensor, mask: Tensor, num_labeled_total: int
) -> Tensor:
    r"""Return :math:`\sum_{v \in mask} CE(y_v, \hat{y}_v) / |\tilde{V}|`."""
    if num_labeled_total < 1:
        raise InvalidInputError(f"num_labeled_total must be >= 1, got {num_labeled_total}")
    return F.cross_entropy(logits[mask], y[mask], reduction="sum") / num_labeled_total
