r"""FedStruct-B training (Algorithms 4 and 5): Ā[i] and the shared S at every client.

Per round ``r``: the server broadcasts θ and ``|Ṽ|`` (B3); for Hop2Vec each client first applies
last round's summed :math:`\nabla_S\mathcal{L}` (B5) to its copy of S, scores the received
model on its own validation/test nodes, and returns :math:`\nabla_\theta\mathcal{L}_i` through
an ``aggregate`` (``fedstruct/update``: masked, the server learns only the sum it steps θ with)
and, for Hop2Vec, :math:`\nabla_S\mathcal{L}_i` through a ``shared_sum`` (``fedstruct/nsf_grad``,
B4, B6): every client receives the sum, and under ``blind_sum`` the server only relays it
blinded. Every client's S copy takes the same Adam step from the same sum, so copies stay equal.
"""

from __future__ import annotations

import torch
from torch import Tensor

from securefg.federation.party import Party
from securefg.methods.fedstruct.parties import ClientData, correct_counts, load_parameters
from securefg.methods.fedstruct.server import prefixed
from securefg.models.fedstruct import ClientBatch, FedStructDGCN, client_gradients, client_logits

NSF_GRAD = "nsf_grad"
TAG_NSF_GRAD = "fedstruct/nsf_grad"


def keep_nsf_grad(client: Party, total: Tensor) -> None:
    """Keep the summed ∇S a client received; it steps S at the start of the next round."""
    client.state[NSF_GRAD] = total


def client_batch(data: ClientData, abar: Tensor) -> ClientBatch:
    """Client i's batch: own data and its Ā rows compacted to their reach (float32)."""
    ids = torch.nonzero(abar.ne(0).any(0)).flatten()
    return ClientBatch(data.x, data.a_local, abar[:, ids].float().to(data.x.device), ids.to(data.x.device),
                       data.y, data.train)


def handle_round(client: Party, msg: dict[str, Tensor], *, hop2vec: bool) -> dict[str, Tensor]:
    """One client's round: update S with the last summed ∇S (Hop2Vec), score θ, return its
    gradients (``theta/*``, and ``nsf_grad`` for the ``shared_sum``)."""
    st = client.state
    model: FedStructDGCN = st["model"]
    data: ClientData = st["data"]
    batch: ClientBatch = st["batch"]
    load_parameters(model, {k: v for k, v in msg.items() if k != "num_labeled"})
    table: Tensor = st["structure"]
    summed = st.get(NSF_GRAD)
    if hop2vec and isinstance(summed, Tensor) and bool(summed.ne(0).any()):
        st["structure_opt"].zero_grad(set_to_none=True)
        table.grad = summed.to(table.device, table.dtype)
        st["structure_opt"].step()
    model.eval()
    with torch.no_grad():
        logits = client_logits(model, batch, s_rows=table[batch.structure_ids])
    st["predictions"] = logits
    st["counts"] = correct_counts(logits, data)
    model.train()
    s_rows = table.detach()[batch.structure_ids].requires_grad_(hop2vec)
    grads = client_gradients(model, batch, s_rows=s_rows, num_labeled_total=int(msg["num_labeled"].item()))
    out = prefixed(grads.theta)
    if hop2vec:
        assert grads.structure is not None
        full = torch.zeros_like(table, dtype=torch.float64)
        full[batch.structure_ids] = grads.structure.double()
        out[NSF_GRAD] = full
    return out
