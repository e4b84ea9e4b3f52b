r"""FedStruct-B training (Algorithms 4 and 5): Ā[i] and the shared S at every client.

Per round ``r``: the server broadcasts θ, ``|Ṽ|`` and, for Hop2Vec, last round's aggregated
:math:`\nabla_S\mathcal{L}` (B3, B5); each client applies that step to its copy of S, scores
the received model on its own validation/test nodes, and returns
:math:`\nabla_\theta\mathcal{L}_i` and, for Hop2Vec, :math:`\nabla_S\mathcal{L}_i` (B4, B6)
through one ``aggregate`` (masked under the secure stack: the server learns only the sums).
Every client's S copy takes the same Adam step from the same broadcast, so copies stay equal.
"""

from __future__ import annotations

import torch
from torch import Tensor

from securefg.federation.party import Party
from securefg.methods.fedstruct.parties import ClientData, correct_counts, load_parameters
from securefg.methods.fedstruct.server import prefixed
from securefg.models.fedstruct import ClientBatch, FedStructDGCN, client_gradients, client_logits

NSF_GRAD = "nsf_grad"


def client_batch(data: ClientData, abar: Tensor) -> ClientBatch:
    """Client i's batch: own data and its Ā rows compacted to their reach (float32)."""
    ids = torch.nonzero(abar.ne(0).any(0)).flatten()
    return ClientBatch(data.x, data.a_local, abar[:, ids].float().to(data.x.device), ids.to(data.x.device),
                       data.y, data.train)


def handle_round(client: Party, msg: dict[str, Tensor], *, hop2vec: bool) -> dict[str, Tensor]:
    """One client's round: update S (Hop2Vec), score θ, return its gradients."""
    st = client.state
    model: FedStructDGCN = st["model"]
    data: ClientData = st["data"]
    batch: ClientBatch = st["batch"]
    load_parameters(model, {k: v for k, v in msg.items() if k not in (NSF_GRAD, "num_labeled")})
    table: Tensor = st["structure"]
    if hop2vec and NSF_GRAD in msg and bool(msg[NSF_GRAD].ne(0).any()):
        st["structure_opt"].zero_grad(set_to_none=True)
        table.grad = msg[NSF_GRAD].to(table.device, table.dtype)
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
