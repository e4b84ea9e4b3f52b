r"""Privacy-hardened FedStruct-B (App. L.1): NSFs never leave their owner.

Setup (H0, once after Algorithm 3): client ``i`` sends owner ``j`` the block
:math:`\bar{A}_{V_i, V_j}` of its rows (``fedstruct/hardened/abar_cols``, point to point:
``j`` reads it, the notes flag it as revealing ``i``'s multi-hop proximity to ``j``'s nodes).

Per round, with θ broadcast:

1. (H1, Eq. 49/51) every owner ``j`` computes :math:`T_j = g_\phi(S_j)` and answers each
   receiver ``i`` with :math:`\bar{A}_{V_i,V_j} T_j`; ``i`` receives only
   :math:`\sum_{j \ne i}` of them through a ``peer_sum`` (``fedstruct/hardened/nse``) and adds
   its own block: the NSEs :math:`\bar{A}^{[i]} g_\phi(S)`. Each owner counts the queries it
   answers per receiver and refuses beyond ``query_budget`` (the paper's query counting).
2. client ``i`` computes :math:`\nabla_{\theta_f}\mathcal{L}_i` and :math:`G_i =
   \partial\mathcal{L}_i/\partial\mathrm{NSE}_i`.
3. instead of the per-receiver Jacobians of Eq. 50, owner ``j`` receives
   :math:`U_j = \sum_i \bar{A}_{V_i,V_j}^\top G_i` through a ``peer_sum``
   (``fedstruct/hardened/nse_grad``; ``i`` computes its term from its own rows) and
   back-propagates it through ``g`` into :math:`\nabla_{\theta_s}` and, for Hop2Vec, its own
   :math:`\nabla_{S_j}`, which only it applies.
4. every client sends :math:`\nabla_{\theta_f}` (as receiver) plus :math:`\nabla_{\theta_s}`
   (as owner) through the secure ``fedstruct/update`` aggregate.

The result equals FedStruct-B's gradients exactly (same sums, split by owner); no party ever
holds another party's NSF rows.
"""

from __future__ import annotations

import torch
from torch import Tensor

from securefg.errors import QueryBudgetError
from securefg.federation.party import Party, client_index
from securefg.methods.fedstruct.parties import ClientData, score_with_nse
from securefg.models.fedstruct import FedStructDGCN, NodeDirectory
from securefg.models.fedstruct.client_step import labeled_cross_entropy

TAG_H0 = "fedstruct/hardened/abar_cols"
TAG_NSE = "fedstruct/hardened/nse"
TAG_NSE_GRAD = "fedstruct/hardened/nse_grad"


def column_blocks(client: Party, clients: list[str]) -> dict[str, Tensor]:
    """H0 as client i: its block Ā[V_i, V_j] for every owner j (``float32``).

    Client i keeps every block's transpose (``abar_rows_t[j]``) for its share of each owner's
    gradient (:func:`grad_term`), so no round slices Ā[i] again, and its own block in
    ``abar_cols``; the others go point to point to their owners (``fedstruct/hardened/abar_cols``)."""
    st = client.state
    d: NodeDirectory = st["directory"]
    abar: Tensor = st["abar"]
    blocks = {j: abar[:, d.nodes_of(client_index(j))].float() for j in clients}
    st["abar_rows_t"] = {j: b.t().contiguous() for j, b in blocks.items()}
    st["abar_cols"] = {client.pid: blocks[client.pid]}
    return blocks


def owner_transform(owner: Party) -> tuple[Tensor, Tensor]:
    """Owner j: ``(g(S_j)`` train-mode with autograd, ``g(S_j)`` eval-mode)."""
    model: FedStructDGCN = owner.state["model"]
    s = owner.state["structure"]
    model.eval()
    with torch.no_grad():
        t_eval = model.transform_structure(s)
    model.train()
    return model.transform_structure(s), t_eval


def answer(owner: Party, receiver: str, budget: int) -> dict[str, Tensor]:
    """Owner j's H1 answer to receiver i: ``Ā[V_i,V_j] g(S_j)``, counted against the budget."""
    st = owner.state
    queries = st.setdefault("queries", {})
    queries[receiver] = queries.get(receiver, 0) + 1
    if budget and queries[receiver] > budget:
        raise QueryBudgetError(
            f"{owner.pid} refuses {receiver}'s structure query #{queries[receiver]} (budget {budget})"
        )
    block = st["abar_cols"][receiver]
    t_train, t_eval = st["transformed"]
    return {"nse": block @ t_train.detach(), "nse_eval": block @ t_eval}


def receiver_step(client: Party, nse: dict[str, Tensor], num_labeled: int) -> tuple[dict[str, Tensor], Tensor]:
    """Client i: score, then ``(∇θ_f, G_i = ∂ℒ_i/∂NSE_i)``."""
    st = client.state
    model: FedStructDGCN = st["model"]
    data: ClientData = st["data"]
    score_with_nse(st, nse["nse_eval"])
    nse_train = nse["nse"].float().requires_grad_(True)
    f_params = dict(model.f.named_parameters(prefix="f"))
    loss = labeled_cross_entropy(model.feature_embeddings(data.x, data.a_local) + nse_train, data.y, data.train,
                                 num_labeled)
    grads = torch.autograd.grad(loss, [*f_params.values(), nse_train], allow_unused=True)
    theta = {k: (g if g is not None else torch.zeros_like(p)) for (k, p), g in zip(f_params.items(), grads[:-1], strict=True)}
    return theta, grads[-1]


def grad_term(client: Party, owner: str, g_i: Tensor) -> Tensor:
    """Client i's term of U_j: ``Ā[V_i, V_j]^T G_i`` from its own rows (``[n_j, C]``)."""
    return client.state["abar_rows_t"][owner] @ g_i


def owner_backward(owner: Party, u: Tensor) -> dict[str, Tensor]:
    """Owner j: push U_j through g; returns ∇θ_s and steps its own Hop2Vec rows."""
    st = owner.state
    model: FedStructDGCN = st["model"]
    t_train, _ = st.pop("transformed")
    g_params = dict(model.g.named_parameters(prefix="g"))
    s = st["structure"]
    inputs = list(g_params.values()) + ([s] if s.requires_grad else [])
    grads = torch.autograd.grad(t_train, inputs, grad_outputs=u.to(t_train.dtype), allow_unused=True)
    theta = {k: (g if g is not None else torch.zeros_like(p)) for (k, p), g in zip(g_params.items(), grads[: len(g_params)], strict=True)}
    if s.requires_grad:
        st["structure_opt"].zero_grad(set_to_none=True)
        s.grad = grads[-1]
        st["structure_opt"].step()
    return theta
