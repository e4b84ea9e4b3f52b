r"""FedSage+'s federated NeighGen phase (Algorithm 1, procedures A, C, D, E) through the exchange.

Each step's parties act in :meth:`FedSagePlus.server_prepare <securefg.methods.fedsage.method.FedSagePlus.server_prepare>`
and its ``fedsage/gen/*`` client actions; the functions here are what each owner computes.

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

from securefg.errors import ConfigError, ProtocolError
from securefg.federation.codec import TensorSpec, decode_tensors, encode_tensors
from securefg.methods.fedsage.client import draw_noise, local_feature_loss, peer_gradient
from securefg.protocol.mechanism import ExchangeKind
from securefg.protocol.transform_rules import register_item_transforms

TAG_GENERATED = "fedsage/generated"
TAG_FEATURE_GRAD = "fedsage/feature_grad"


register_item_transforms(
    TAG_GENERATED, "FedSage+ clips each generated vector to the dp_gaussian clip and adds its noise itself "
    "(securefg.methods.fedsage.federated.noise_generated)")


@dataclass(frozen=True)
class GeneratedDP:
    r"""Local Gaussian noise on every generated vector an owner relays (``fedsage/generated``).

    Read from the stack: ``transforms = [{ name = "dp_gaussian", mode = "local", noise_multiplier
    = sigma, clip = C }]`` on the tag. A relay carries opaque items, so the sending owner applies
    it in :func:`generate`: each of the :math:`|B| P` vectors of width :math:`d` is clipped to L2
    norm :math:`C` **on its own** (not the payload as a whole) and gets
    :math:`\mathcal{N}(0, \sigma^2 C^2)` per coordinate.
    """

    noise_multiplier: float
    clip: float
    secure_rng: bool = True


def generated_dp(stack: Any) -> GeneratedDP | None:
    """The DP setting of ``fedsage/generated`` in ``stack`` (``None``: no transform on the tag).

    Raises:
        ConfigError: A transform other than one ``dp_gaussian`` in ``mode = "local"``.
    """
    from securefg.protocol.dp.accountant import Mode
    from securefg.protocol.dp.gaussian import DPGaussian

    ts = stack.resolve(TAG_GENERATED, ExchangeKind.RELAY).transforms
    if not ts:
        return None
    if len(ts) != 1 or not isinstance(ts[0], DPGaussian) or ts[0].mode is not Mode.LOCAL:
        raise ConfigError(f"tag {TAG_GENERATED!r}: only one dp_gaussian with mode = \"local\" can run on the "
                          f"generated features (the sending owner noises each vector), got {list(ts)}")
    t = ts[0]
    return GeneratedDP(t.sigma, t.clip, bool(t.params["secure_rng"]))


def noise_generated(flat: torch.Tensor, dp: GeneratedDP, generator: torch.Generator | None) -> torch.Tensor:
    """Clip every row of ``flat`` (``[n, d]``) to L2 norm ``dp.clip`` and add ``N(0, (sigma clip)^2)``
    per entry (``generator=None``: the OS CSPRNG)."""
    from securefg.protocol.dp.noise import gaussian_noise

    x = flat.double()
    norms = x.norm(dim=1, keepdim=True)
    x = x * torch.clamp(dp.clip / norms.clamp_min(1e-300), max=1.0)
    noise = gaussian_noise(x.numel(), std=dp.noise_multiplier * dp.clip, generator=generator).view_as(x)
    return (x + noise).to(flat.dtype)


@dataclass(frozen=True)
class FederatedGenSettings:
    """Knobs of the federated phase (see :class:`~securefg.methods.fedsage.method.FedSagePlus`)."""

    steps: int
    batch: int
    cross_weight: float
    max_neighbours: int
    dp: GeneratedDP | None = None
    #: keep every generated batch sent or opened and every gradient sum received, per step, in
    #: the owner's state (the generator attacks read them; off in plain runs, see _remember)
    keep_views: bool = False


def federated_round(r: int, steps: int) -> int:
    """Federated step ``t`` runs in round ``t - steps`` (before training round 0)."""
    return r - steps


def generate(state: dict[str, Any], s: FederatedGenSettings, *, index: int, round: int) -> bytes:
    r"""Step 1 as owner ``index``: fGen on a batch of its impaired graph (fresh noise); keeps
    :math:`\tilde{X}_i` (with its autograd graph) for step 5 and returns its relay item."""
    model, z, gen = state["neighgen"], state["gen_z"], state["gen_rng"]
    model.train()
    pick = torch.randperm(z.size(0), generator=gen)[: s.batch].to(z.device)
    x_tilde = model.features(z[pick], draw_noise((pick.numel(), z.size(1)), gen, z.device))
    state["gen_x_tilde"] = x_tilde
    flat = x_tilde.detach().reshape(-1, x_tilde.size(-1)).to("cpu", torch.float32)
    if s.dp is not None:  # local DP, drawn by this owner: what leaves it (and what it remembers sending)
        flat = noise_generated(flat, s.dp, None if s.dp.secure_rng else gen)
        state["gen_dp_releases"] = state.get("gen_dp_releases", 0) + 1
        state["gen_dp_rows"] = flat.size(0)
    _remember(state, s.keep_views, "sent_generated", (round, flat))
    return encode_tensors({"owner": torch.tensor([index]), "x": flat})


def answer(state: dict[str, Any], pid: str, blobs: Sequence[bytes], clients: Sequence[str], *,
           round: int, keep_views: bool = False) -> tuple[dict[str, torch.Tensor], float]:
    r"""Step 3 as peer ``pid``: the gradient :math:`G_{i \leftarrow j}` for every item it opened,
    by owner, and its share of the cross loss.

    Raises:
        ProtocolError: An item naming an owner it cannot answer (itself, unknown, or twice).
    """
    own_x = state["data"].x
    out: dict[str, torch.Tensor] = {}
    cross = 0.0
    for blob in blobs:
        t = decode_tensors(blob, spec=TensorSpec({"owner": (torch.int64, (1,)), "x": (torch.float32, (None, own_x.size(1)))}))
        owner_idx = int(t["owner"][0])
        owner = clients[owner_idx] if 0 <= owner_idx < len(clients) else ""
        if not owner or owner == pid or owner in out:
            raise ProtocolError(f"{pid} opened a {TAG_GENERATED!r} item naming owner {owner_idx}, which it cannot answer")
        _remember(state, keep_views, "received_generated", (round, owner, t["x"]))
        grad, loss = peer_gradient(t["x"].to(own_x.device, own_x.dtype), own_x)
        cross += loss / max(t["x"].size(0), 1) / max(len(clients) - 1, 1)
        out[owner] = grad.reshape(-1).to("cpu", torch.float64)
    return out, cross


def owner_step(state: dict[str, Any], s: FederatedGenSettings, summed: torch.Tensor | None, peers: int, *,
               round: int) -> float:
    r"""Steps 4-5 as owner i: its local :math:`L^f` plus the cross term from the summed peer
    gradient (``None``: no peers answered), one fGen step; returns the local loss."""
    x_tilde = state.pop("gen_x_tilde")
    model, opt, graph = state["neighgen"], state["neighgen_opt_f"], state["impaired"]
    opt.zero_grad()
    loss = local_feature_loss(model, graph, state["data"].x, state["gen_z"], batch=s.batch,
                              max_neighbours=s.max_neighbours, generator=state["gen_rng"])
    local = float(loss.detach())
    if summed is not None:
        _remember(state, s.keep_views, "feature_grad_sum", (round, peers, summed.float()))
        g = summed.to(x_tilde.device, x_tilde.dtype).view_as(x_tilde)
        loss = loss + s.cross_weight / (peers * x_tilde.size(0)) * (g * x_tilde).sum()
    loss.backward()
    opt.step()
    return local


def _remember(state: dict[str, Any], keep: bool, key: str, item: object) -> None:
    """Keep what an owner sent or opened, every step (its own view, which audits read), when
    ``keep``. It costs about ``steps * M * |B| * P * d`` floats per owner, ``M`` times over:
    on Cora with 20 steps, 110 MB per owner at M = 3 and 14 GB in all at M = 20 (which is why
    plain runs keep nothing and audits switch it on through ``keep_generator_views``)."""
    if keep:
        state.setdefault(key, []).append(item)
