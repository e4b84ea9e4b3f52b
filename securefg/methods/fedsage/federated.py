r"""FedSage+'s federated NeighGen phase (Algorithm 1, procedures A, C, D, E) through the exchange.

The paper's owners send their embeddings :math:`Z_i` and generator :math:`H^g_i` to the server,
which forwards them to every peer in the clear; each peer returns the gradient of
:math:`L^f_{i,j}` with respect to :math:`\theta^f_i`, and the server sums them. Here, per
federated step :math:`t`:

1. Owner :math:`i` embeds a batch :math:`B_i` of its impaired graph with its frozen encoder and
   runs fGen (with fresh noise): :math:`\tilde{X}_i \in \mathbb{R}^{|B_i| P \times d}`.
2. ``relay`` (``fedsage/generated``): :math:`\tilde{X}_i` goes to every other owner, sealed end to
   end under the protected stack (the server forwards boxes it cannot open). Neither
   :math:`Z_i` nor :math:`\theta^f_i` leaves the owner.
3. Peer :math:`j` computes :math:`G_{i \leftarrow j} = \partial L^f_{i,j} / \partial \tilde{X}_i
   = \frac{2}{d}(\tilde{X}_i - X_j[u^*])` against its own nodes (:func:`.client.peer_gradient`).
4. ``peer_sum`` (``fedsage/feature_grad``, target :math:`i`): owner :math:`i` learns only
   :math:`\sum_{j \ne i} G_{i \leftarrow j}` (SecAgg+ with :math:`i` as the aggregator under the
   protected stack). One peer's :math:`G` would reveal that peer's nearest node features exactly
   (:math:`X_j[u^*] = \tilde{X}_i - \frac{d}{2}G`); the sum reveals their sum over peers.
5. Owner :math:`i` backpropagates :math:`\frac{\alpha}{(M-1)|B_i|}\langle \sum_j G_{i \leftarrow
   j}, \tilde{X}_i\rangle` plus its local :math:`L^f` into fGen (encoder and dGen frozen, as the
   reference code). Through the chain rule this is exactly the gradient the paper's peers would
   return for :math:`\theta^f_i`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from securefg.errors import ProtocolError
from securefg.federation.codec import TensorSpec, decode_tensors, encode_tensors
from securefg.federation.federation import Federation
from securefg.methods.fedsage.client import draw_noise, local_feature_loss, peer_gradient

TAG_GENERATED = "fedsage/generated"
TAG_FEATURE_GRAD = "fedsage/feature_grad"



@dataclass(frozen=True)
class FederatedGenSettings:
    """Knobs of the federated phase (see :class:`~securefg.methods.fedsage.method.FedSagePlus`)."""

    steps: int
    batch: int
    cross_weight: float
    max_neighbours: int


def federated_round(r: int, steps: int) -> int:
    """Federated step ``t`` runs in round ``t - steps`` (before training round 0)."""
    return r - steps


def run_federated_generators(fed: Federation, settings: FederatedGenSettings) -> list[dict[str, float]]:
    """Train every owner's fGen with the cross-owner term; returns per-step loss summaries.

    Reads from each owner's state ``neighgen``, ``neighgen_opt_f``, ``impaired``, ``gen_z``
    (frozen embeddings of the impaired graph), ``data`` and ``gen_rng``.
    """
    pids = list(fed.client_ids)
    history = []
    for t in range(settings.steps):
        fed.set_round(federated_round(t, settings.steps))
        history.append(_step(fed, pids, settings))
    return history


def _step(fed: Federation, pids: Sequence[str], s: FederatedGenSettings) -> dict[str, float]:
    ex = fed.exchange
    generated: dict[str, torch.Tensor] = {}
    items: dict[str, bytes] = {}
    for k, pid in enumerate(pids):  # 1. each owner generates on its own batch
        st = fed.parties[pid].state
        model, z, gen = st["neighgen"], st["gen_z"], st["gen_rng"]
        model.train()
        pick = torch.randperm(z.size(0), generator=gen)[: s.batch].to(z.device)
        x_tilde = model.features(z[pick], draw_noise((pick.numel(), z.size(1)), gen, z.device))
        generated[pid] = x_tilde
        flat = x_tilde.detach().reshape(-1, x_tilde.size(-1)).to("cpu", torch.float32)
        items[pid] = encode_tensors({"owner": torch.tensor([k]), "x": flat})
        _remember(st, "sent_generated", (ex.round, flat))
    if len(pids) < 2 or s.cross_weight == 0.0:
        received: dict[str, list[bytes]] = {pid: [] for pid in pids}
    else:
        received = ex.relay(TAG_GENERATED, items, exclude_self=True, shuffle=True)
    contributions: dict[str, dict[str, dict[str, torch.Tensor]]] = {pid: {} for pid in pids}
    cross_loss = 0.0
    for pid in pids:  # 3. each peer answers every item it opened, against its own nodes
        st = fed.parties[pid].state
        own_x = st["data"].x
        for blob in received[pid]:
            t = decode_tensors(blob, spec=TensorSpec({"owner": (torch.int64, (1,)), "x": (torch.float32, (None, own_x.size(1)))}))
            owner_idx = int(t["owner"][0])
            if not 0 <= owner_idx < len(pids) or pids[owner_idx] == pid or pid in contributions[pids[owner_idx]]:
                raise ProtocolError(f"{pid} opened a {TAG_GENERATED!r} item naming owner {owner_idx}, which it cannot answer")
            owner = pids[owner_idx]
            _remember(st, "received_generated", (ex.round, owner, t["x"]))
            grad, loss = peer_gradient(t["x"].to(own_x.device, own_x.dtype), own_x)
            cross_loss += loss / max(t["x"].size(0), 1) / max(len(pids) - 1, 1)
            contributions[owner][pid] = {"g": grad.reshape(-1).to("cpu", torch.float64)}
    local_total = 0.0
    for pid in pids:  # 4-5. per-target secure sum, then each owner's fGen step
        st = fed.parties[pid].state
        x_tilde = generated[pid]
        model, opt, graph = st["neighgen"], st["neighgen_opt_f"], st["impaired"]
        opt.zero_grad()
        loss = local_feature_loss(model, graph, st["data"].x, st["gen_z"], batch=s.batch,
                                  max_neighbours=s.max_neighbours, generator=st["gen_rng"])
        local_total += float(loss.detach())
        if contributions[pid]:
            summed = ex.peer_sum(TAG_FEATURE_GRAD, pid, contributions[pid])["g"]
            _remember(st, "feature_grad_sum", (ex.round, len(contributions[pid]), summed.float()))
            g = summed.to(x_tilde.device, x_tilde.dtype).view_as(x_tilde)
            loss = loss + s.cross_weight / (len(contributions[pid]) * x_tilde.size(0)) * (g * x_tilde).sum()
        loss.backward()
        opt.step()
    n = max(len(pids), 1)
    return {"local_feature_loss": local_total / n, "cross_feature_loss": cross_loss / n}


def _remember(state: dict[str, Any], key: str, item: object) -> None:
    """Keep what an owner sent or opened, every step (its own view, which audits read): about
    ``steps * M * |B| * P * d`` floats per owner (Cora, 20 steps, M = 3: 110 MB)."""
    state.setdefault(key, []).append(item)
