r"""Algorithm 3 of FedStruct (App. G): each client's rows of Ā without a global graph.

Plaintext math only; the protocol layer carries the sums. Client ``i`` needs
:math:`\bar{A}^{[i]}` (rows ``V_i`` of :math:`\bar{A} = \sum_l \beta_l \hat{A}^l`, columns all ``n``
global ids). With :math:`P_k^{(\ell)}` = rows ``V_k`` of :math:`\hat{A}^\ell`:

.. math::
    P_i^{(\ell)} = (\tilde{D}^{[i]})^{-1} \sum_{k=1}^{K} \underbrace{\tilde{A}_k^{[i]}
    P_k^{(\ell-1)}}_{B_{i\cdot k}^{(\ell)}}, \qquad
    \bar{A}^{[i]} = \sum_{\ell} \beta_\ell P_i^{(\ell)}

:math:`\tilde{A}_k^{[i]} = (\tilde{A}_i^{[k]})^T` (undirected graph) is known to ``k`` from its
inter-edges, and :math:`P_k^{(\ell-1)}` is ``k``'s own previous result, so ``k`` computes
:math:`B_{i\cdot k}` alone. Column block ``V_j`` of :math:`B_{i\cdot k}` is the paper's
:math:`B_{ijk}`; all ``j`` are sent together as one ``[n_i, n]`` matrix.

Schedule (one synchronous round per hop ``ℓ = 2..L``):

1. every client: ``state = init_abar_state(view, directory, betas=...)`` (ℓ = 1, no messages);
2. every client ``k``: ``msgs = local_contributions(view_k, state_k, directory=d)``, a dict
   ``{i: [n_i, n]}`` for *every* ``i`` (zeros where ``k`` has no edge to ``i``, so that sending
   reveals nothing and all ``K`` contributors share the shape of a masked sum);
3. every receiver ``i``: ``state_i = assemble(view_i, state_i, summed=Σ_k msgs_k[i])``, its own
   ``msgs_i[i]`` joins the sum locally.

What a single :math:`B_{i\cdot k}^{(\ell)}` reveals to ``i`` if sent in the clear (notes B5.3):
row ``v`` is :math:`\sum_{w \in N(v) \cap V_k} P_k^{(\ell-1)}[w]`. Its support says which rows
``k`` touches (``i`` knows this already) and, for a ``v`` with a single neighbour ``w`` in ``k``,
it *is* ``w``'s ``(ℓ-1)``-step random-walk distribution over global ids: for ℓ = 2 that is
``1/d̃_w`` and ``w``'s neighbour ids; higher ℓ expose ``k``'s multi-hop structure. A secure sum
over ``k`` hides the split across contributors only for rows with neighbours in several
clients; the result :math:`\bar{A}^{[i]}` itself (B5.4) stays visible to ``i``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from securefg.errors import InvalidInputError
from securefg.models.fedstruct.client_graph_view import ClientGraphView
from securefg.models.fedstruct.node_directory import NodeDirectory


@dataclass(frozen=True)
class AbarState:
    r"""Client k's running state of Algorithm 3 after hop ``hop``.

    Args:
        client_id (int): Owner ``k``.
        betas (tuple[float, ...]): Hop weights; ``len(betas)`` is ``L``.
        hop (int): Power ``ℓ`` held in ``power``.
        power (Tensor): ``[n_k, n]`` rows ``V_k`` of :math:`\hat{A}^{\ell}`.
        abar (Tensor): ``[n_k, n]`` :math:`\sum_{l \le \ell} \beta_l` rows ``V_k`` of
            :math:`\hat{A}^{l}`; equals :math:`\bar{A}^{[k]}` once ``done``.
    """

    client_id: int
    betas: tuple[float, ...]
    hop: int
    power: Tensor
    abar: Tensor

    @property
    def done(self) -> bool:
        """Whether all ``L`` hops are in ``abar``."""
        return self.hop >= len(self.betas)


def adjacency_block(view: ClientGraphView, directory: NodeDirectory, *, receiver: int) -> Tensor:
    r"""Return :math:`\tilde{A}_k^{[i]}` (``[n_i, n_k]``, sparse) as client ``k`` builds it.

    For ``receiver == k`` this is :math:`I + A_{intra}`; otherwise the transpose of ``k``'s
    inter-edges into ``receiver``, laid out in the receiver's public row order.
    """
    k = view.client_id
    n_i, n_k = directory.size_of(receiver), view.num_nodes
    if receiver == k:
        loop = torch.arange(n_k)
        rows = torch.cat([loop, view.local_rows(view.intra_edges[1])])
        cols = torch.cat([loop, view.local_rows(view.intra_edges[0])])
    else:
        to_i = view.inter_owner == receiver
        ext, own = view.inter_edges[1, to_i], view.inter_edges[0, to_i]
        if bool((directory.owner[ext] != receiver).any()):
            raise InvalidInputError(
                f"client {k}'s inter_owner disagrees with the NodeDirectory for client {receiver}"
            )
        rows, cols = directory.local_index(ext), view.local_rows(own)
    vals = torch.ones(rows.numel())
    idx = torch.stack([rows, cols])
    return torch.sparse_coo_tensor(idx, vals, (n_i, n_k), check_invariants=False).coalesce()


def init_abar_state(
    view: ClientGraphView,
    directory: NodeDirectory,
    *,
    betas: Sequence[float],
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> AbarState:
    r"""Hop 1, local only: :math:`P_k^{(1)} = (\tilde{D}^{[k]})^{-1}\tilde{A}^{[k]}`.

    Args:
        view (ClientGraphView): Client ``k``'s knowledge.
        directory (NodeDirectory): Public id/owner agreement (fixes the column order).
        betas (Sequence[float]): Hop weights :math:`\beta_1..\beta_L`.
        dtype (torch.dtype, optional): (default: :obj:`torch.float32`)
        device (torch.device or str, optional): Where the state lives. (default: :obj:`None`)

    Returns:
        AbarState: State at hop 1.
    """
    if len(betas) == 0:
        raise InvalidInputError("init_abar_state needs at least one hop weight (betas=[])")
    n_k, n = view.num_nodes, directory.num_nodes
    rows = torch.cat([torch.arange(n_k), view.local_rows(view.intra_edges[0]),
                      view.local_rows(view.inter_edges[0])])
    cols = torch.cat([view.nodes, view.intra_edges[1], view.inter_edges[1]])
    a_tilde = torch.zeros(n_k, n, dtype=dtype)
    a_tilde[rows, cols] = 1.0
    power = (a_tilde / view.degree().to(dtype).unsqueeze(1)).to(device)
    return AbarState(view.client_id, tuple(float(b) for b in betas), 1, power, betas[0] * power)


def local_contributions(
    view: ClientGraphView,
    state: AbarState,
    *,
    directory: NodeDirectory,
    prune_p: int | None = None,
) -> dict[int, Tensor]:
    r"""Client ``k``'s messages for hop ``ℓ = state.hop + 1``.

    Each is :math:`B_{i\cdot k} = \tilde{A}_k^{[i]} P_k^{(\ell-1)}`; its column block ``V_j`` is
    the paper's :math:`B_{ijk}` (see :func:`column_blocks`).

    Args:
        view (ClientGraphView): Client ``k``'s knowledge.
        state (AbarState): Client ``k``'s state at hop ``ℓ - 1``.
        directory (NodeDirectory): Public id/owner agreement.
        prune_p (int, optional): Keep only the top ``p * n_i`` entries of every block
            :math:`B_{ijk}` (App. L.2.1). Pruned sums are **not** equal to Ā's rows, and the data-
            dependent sparsity pattern must be masked as a full block. (default: :obj:`None`)

    Returns:
        dict[int, Tensor]: ``{i: [n_i, n]}`` for every client ``i`` including ``k`` itself.

    Raises:
        InvalidInputError: If ``state`` belongs to another client or is already done.
    """
    if state.client_id != view.client_id:
        raise InvalidInputError(
            f"state of client {state.client_id} passed with view of client {view.client_id}"
        )
    if state.done:
        raise InvalidInputError(f"client {view.client_id} already holds all {state.hop} hops")
    return {i: contribution(view, state, directory=directory, receiver=i, prune_p=prune_p)
            for i in range(directory.num_clients)}


def contribution(
    view: ClientGraphView,
    state: AbarState,
    *,
    directory: NodeDirectory,
    receiver: int,
    prune_p: int | None = None,
) -> Tensor:
    r"""Client ``k``'s one message :math:`B_{i\cdot k}` to ``receiver`` for hop ``state.hop + 1``.

    The per-receiver form of :func:`local_contributions`, so an orchestrator can hold one
    receiver's messages at a time instead of all ``K^2`` (``[n_i, n]`` each).
    """
    if state.client_id != view.client_id:
        raise InvalidInputError(
            f"state of client {state.client_id} passed with view of client {view.client_id}"
        )
    if state.done:
        raise InvalidInputError(f"client {view.client_id} already holds all {state.hop} hops")
    block = adjacency_block(view, directory, receiver=receiver).to(state.power.device, state.power.dtype)
    msg = torch.sparse.mm(block, state.power)
    return msg if prune_p is None else _prune_column_blocks(msg, directory, prune_p)


def assemble(view: ClientGraphView, state: AbarState, *, summed: Tensor) -> AbarState:
    r"""Receiver ``i`` finishes hop ``ℓ``: normalise the sum, then accumulate.

    :math:`P_i^{(\ell)} = (\tilde{D}^{[i]})^{-1}\sum_k B_{i\cdot k}` and
    :math:`\bar{A}^{[i]} \mathrel{+}= \beta_\ell P_i^{(\ell)}`.

    Args:
        view (ClientGraphView): Receiver ``i``'s knowledge (for :math:`\tilde{D}^{[i]}`).
        state (AbarState): Receiver's state at hop ``ℓ - 1``.
        summed (Tensor): ``[n_i, n]`` sum of every contributor's message to ``i``, own included.

    Returns:
        AbarState: State at hop ``ℓ``.
    """
    if state.done:
        raise InvalidInputError(f"client {view.client_id} already holds all {state.hop} hops")
    if summed.shape != state.power.shape:
        raise InvalidInputError(
            f"summed contributions must be {tuple(state.power.shape)}, got {tuple(summed.shape)}"
        )
    deg = view.degree().to(summed.device, summed.dtype).unsqueeze(1)
    power = summed / deg
    beta = state.betas[state.hop]
    return AbarState(state.client_id, state.betas, state.hop + 1, power, state.abar + beta * power)


def column_blocks(message: Tensor, directory: NodeDirectory) -> dict[int, Tensor]:
    """Split an ``[n_i, n]`` message into the paper's per-owner blocks ``{j: B_ijk [n_i, n_j]}``."""
    return {j: message[:, directory.nodes_of(j).to(message.device)]
            for j in range(directory.num_clients)}


def compute_abar_rows(
    views: Sequence[ClientGraphView],
    directory: NodeDirectory,
    *,
    betas: Sequence[float],
    prune_p: int | None = None,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> list[Tensor]:
    """Run Algorithm 3 for all clients with the sums in the clear (simulation and tests).

    Returns:
        list[Tensor]: ``Ā[i]`` (``[n_i, n]``) for every client ``i``.
    """
    states = [init_abar_state(v, directory, betas=betas, dtype=dtype, device=device)
              for v in views]
    while not states[0].done:
        outbox: list[Mapping[int, Tensor]] = [
            local_contributions(v, s, directory=directory, prune_p=prune_p)
            for v, s in zip(views, states, strict=True)
        ]
        states = [
            assemble(v, s, summed=torch.stack([msgs[v.client_id] for msgs in outbox]).sum(0))
            for v, s in zip(views, states, strict=True)
        ]
    return [s.abar for s in states]


def _prune_column_blocks(message: Tensor, directory: NodeDirectory, p: int) -> Tensor:
    if p < 1:
        raise InvalidInputError(f"prune_p must be >= 1, got {p}")
    out = torch.zeros_like(message)
    keep_n = p * message.size(0)
    for j in range(directory.num_clients):
        cols = directory.nodes_of(j).to(message.device)
        block = message[:, cols]
        if keep_n < block.numel():
            flat = block.flatten()
            idx = flat.topk(keep_n).indices
            block = torch.zeros_like(flat).index_copy_(0, idx, flat[idx]).view_as(block)
        out[:, cols] = block
    return out
