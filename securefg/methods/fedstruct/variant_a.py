r"""FedStruct-A training (Algorithm 1): the server holds the global graph, Ā and S.

Per round the server computes the NSEs :math:`\bar{A} g_\phi(S)` and sends client ``i`` its
rows (train- and eval-mode, ``fedstruct/nse``), and broadcasts :math:`\theta_f`. Client ``i``
returns :math:`\nabla_{\theta_f}\mathcal{L}_i` and :math:`\partial\mathcal{L}_i/\partial
\mathrm{NSE}_i` in one ``aggregate`` (its NSE rows placed at their global ids, zeros elsewhere);
the server back-propagates the summed NSE gradient into ``g`` and, for Hop2Vec, S. This is
the chain-rule form of the paper's Jacobian messages (A3/A4) and, like them, shows the server
per-node residuals (notes B5.2: labels are recoverable from A's gradients even when summed).
"""

from __future__ import annotations

import torch
from torch import Tensor

from securefg.federation.party import Party
from securefg.methods.fedstruct.parties import ClientData, load_parameters, score_with_nse
from securefg.methods.fedstruct.server import prefixed
from securefg.models.fedstruct import FedStructDGCN
from securefg.models.fedstruct.client_step import labeled_cross_entropy

NSE_GRAD = "nse_grad"


def server_nse(server: Party) -> tuple[Tensor, Tensor]:
    """``(train-mode NSEs with autograd, eval-mode NSEs)`` for every node, ``[n, C]``."""
    st = server.state
    model: FedStructDGCN = st["server_opt"].model
    table: Tensor = st["structure"]
    abar: Tensor = st["abar_global"]
    model.eval()
    with torch.no_grad():
        nse_eval = abar @ model.transform_structure(table)
    model.train()
    return abar @ model.transform_structure(table), nse_eval


def handle_round(client: Party, theta_f: dict[str, Tensor], nse: dict[str, Tensor]) -> dict[str, Tensor]:
    """Client i: score with the eval NSEs, then ``∇θ_f`` and ``∂ℒ_i/∂NSE_i`` at global rows."""
    st = client.state
    model: FedStructDGCN = st["model"]
    data: ClientData = st["data"]
    load_parameters(model, {k: v for k, v in theta_f.items() if k != "num_labeled"})
    score_with_nse(st, nse["nse_eval"])
    nse_train = nse["nse"].float().requires_grad_(True)
    f_params = dict(model.f.named_parameters(prefix="f"))
    out_logits = model.feature_embeddings(data.x, data.a_local) + nse_train
    loss = labeled_cross_entropy(out_logits, data.y, data.train, int(theta_f["num_labeled"].item()))
    grads = torch.autograd.grad(loss, [*f_params.values(), nse_train], allow_unused=True)
    theta = {k: (g if g is not None else torch.zeros_like(p))
             for (k, p), g in zip(f_params.items(), grads[:-1], strict=True)}
    out = prefixed(theta)
    full = torch.zeros(st["num_nodes"], nse_train.size(1), dtype=torch.float64)
    full[st["global_ids"]] = grads[-1].double()
    out[NSE_GRAD] = full
    return out
