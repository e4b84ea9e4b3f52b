r"""DP-SGD training of a graph generator (graph-level DP: neighbouring training sets differ in one graph).

CeFGC's paper trains its diffusion models without DP (cefgc.md §5: "DP is absent"). The method's
``dp_epsilon`` option trains every client's generators with this function
(:mod:`securefg.methods.cefgc.dp_plan` picks the noise for a target epsilon), and the membership
audit's counterfactual (``dp_noise_multipliers``) retrains a victim's generators with it.
Training is DP-SGD (Abadi et al. 2016, https://arxiv.org/abs/1607.00133).

Two releases make up a generator, and both need noise:

* **the score network**, trained with per-graph gradient clipping to ``max_grad_norm`` and
  Gaussian noise of std ``noise_multiplier * max_grad_norm`` on every Poisson-sampled batch sum
  (one random noise level per graph, so the loss is a sum of independent per-graph terms);
* **the node-count histogram** :math:`p(n)`, released with every model: without noise it is an
  exact list of training sizes, a membership signal DP-SGD does not touch. ``histogram_sigma``
  adds :math:`\mathcal{N}(0, \sigma_h^2)` to every count (sensitivity 1 per graph).

Both are composed in one Opacus RDP accountant (``epsilon`` at ``delta``).

Why not Opacus' ``make_private`` (``securefg.protocol.dp.make_private``): its functorch fallback
hands a module only its first input, and the score network's ``ConditionalGainBias`` takes two
(features and the condition index); measured, it fails in ``ft_compute_per_sample_gradient``. The
per-sample gradients here are computed one graph at a time (exact, and cheap for batches of a
few small graphs); the accounting is Opacus'.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch_geometric.data import Data

from securefg.models.graph_score import GraphDiffusionModel, dsm_loss, to_dense_batch_adjacency
from securefg.models.graph_score.node_counts import node_count_histogram


@dataclass(frozen=True)
class DPFit:
    """What a DP fit spent.

    Args:
        epsilon (float): RDP epsilon of the score network and the histogram together.
        delta (float): The delta it holds at.
        steps (int): DP-SGD steps.
        sample_rate (float): Poisson rate per step.
    """

    epsilon: float
    delta: float
    steps: int
    sample_rate: float


def train_dp_generator(
    model: GraphDiffusionModel,
    graphs: Sequence[Data],
    labels: Sequence[int] | None,
    *,
    epochs: int,
    lr: float,
    batch_size: int,
    noise_multiplier: float,
    max_grad_norm: float = 1.0,
    histogram_sigma: float = 0.0,
    delta: float = 1e-5,
    generator: torch.Generator,
    device: torch.device | str = "cpu",
) -> DPFit:
    r"""Train ``model`` in place with DP-SGD and release a noisy size histogram.

    Args:
        model (GraphDiffusionModel): An untrained generator (agreed architecture).
        graphs (Sequence[Data]): Training graphs (at most ``model.max_node_num`` nodes).
        labels (Sequence[int], optional): Class of each graph for a conditional model.
        epochs (int): Passes (in expectation) over the data.
        lr (float): Adam learning rate.
        batch_size (int): Expected batch size (Poisson rate ``batch_size / len(graphs)``).
        noise_multiplier (float): DP-SGD :math:`\sigma`; ``0`` trains without noise (clipping only).
        max_grad_norm (float): Per-graph clip :math:`C`. (default: ``1.0``)
        histogram_sigma (float): Noise std on each histogram count. (default: ``0.0``, exact)
        delta (float): The accountant's delta. (default: ``1e-5``)
        generator (torch.Generator): Randomness of sampling, levels, noise (CPU; draws are
            moved to ``device``, so a seed gives the same run on any device).
        device (torch.device | str): Where to train. (default: ``"cpu"``)

    Returns:
        DPFit: The privacy spent (``inf`` when a noise scale is 0).
    """
    from opacus.accountants import RDPAccountant  # type: ignore[import-untyped]

    device = torch.device(device)
    batch = to_dense_batch_adjacency(graphs, max_node_num=model.max_node_num)
    adj, flags = batch.adj.to(device), batch.flags.to(device)
    n = batch.adj.shape[0]
    classes = None if labels is None else torch.as_tensor([labels[i] for i in batch.kept], dtype=torch.long)
    net = model.score_net.to(device)
    net.train()
    params = [p for p in net.parameters() if p.requires_grad]
    opt = torch.optim.Adam(params, lr=lr)
    sigmas = torch.tensor(model.sigmas, device=device)
    q, steps = dp_schedule(num_graphs=n, batch_size=batch_size, epochs=epochs)
    acc = RDPAccountant()
    for _ in range(steps):
        chosen = (torch.rand(n, generator=generator) < q).nonzero().flatten()
        total = [torch.zeros_like(p) for p in params]
        for i in chosen.tolist():
            size = int(batch.flags[i].sum())
            level = torch.randint(len(model.sigmas), (1,), generator=generator).to(device)
            cls = None if classes is None else classes[i : i + 1].to(device)
            loss = dsm_loss(net, adj[i : i + 1, :size, :size], flags[i : i + 1, :size], sigmas=sigmas,
                            levels=level, classes=cls, generator=generator)
            grads = torch.autograd.grad(loss, params)
            norm = torch.sqrt(torch.stack([(g.double() ** 2).sum() for g in grads]).sum())
            scale = min(1.0, max_grad_norm / (float(norm) + 1e-12))
            for t, g in zip(total, grads, strict=True):
                t.add_(g, alpha=scale)
        for p, t in zip(params, total, strict=True):
            noise = torch.randn(t.shape, generator=generator).to(device) * noise_multiplier * max_grad_norm
            p.grad = (t + noise) / max(q * n, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if noise_multiplier > 0:
            acc.step(noise_multiplier=noise_multiplier, sample_rate=q)
    net.eval()
    model.score_net.to("cpu")
    sizes = batch.flags.sum(1).long()
    hist = torch.zeros_like(model.node_count_hist)
    for row in range(hist.shape[0]):
        rows = sizes if classes is None else sizes[classes == row]
        h = node_count_histogram(rows.tolist(), max_node_num=model.max_node_num).double()
        if histogram_sigma > 0:
            h = h + torch.randn(h.shape, generator=generator, dtype=torch.float64) * histogram_sigma
            h[0] = 0
        hist[row] = h.round().clamp(min=0).long()
        if int(hist[row].sum()) == 0 and rows.numel():  # keep the model samplable
            hist[row, int(rows.float().median().round())] = 1
    if histogram_sigma > 0:
        acc.step(noise_multiplier=histogram_sigma, sample_rate=1.0)
    model.node_count_hist = hist
    eps = float("inf") if noise_multiplier <= 0 or histogram_sigma <= 0 else float(acc.get_epsilon(delta))
    return DPFit(epsilon=eps, delta=delta, steps=steps, sample_rate=q)


def dp_schedule(*, num_graphs: int, batch_size: int, epochs: int) -> tuple[float, int]:
    """DP-SGD's Poisson rate ``q = batch_size / num_graphs`` (at most 1) and ``round(epochs / q)`` steps."""
    q = min(1.0, batch_size / max(num_graphs, 1))
    return q, max(1, round(epochs / q))


__all__ = ["DPFit", "dp_schedule", "train_dp_generator"]
