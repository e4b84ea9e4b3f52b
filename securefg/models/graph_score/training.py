"""The training loop of a graph score model: Adam on the denoising score matching loss."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import nn

from securefg.errors import InvalidInputError
from securefg.models.graph_score.loss import dsm_loss

#: ``progress(epoch, mean_loss)``, called after every epoch.
ProgressCallback = Callable[[int, float], None]


@dataclass
class FitResult:
    """What :meth:`GraphDiffusionModel.fit` did.

    Attributes:
        losses (list[float]): Mean training loss of every epoch run.
        num_graphs (int): Graphs the diffusion model was trained on.
        num_excluded (int): Graphs left out for exceeding ``max_node_num``.
        stopped_early (bool): Whether the early-stopping rule ended training.
        seconds (float): Wall-clock training time.
    """

    losses: list[float] = field(default_factory=list)
    num_graphs: int = 0
    num_excluded: int = 0
    stopped_early: bool = False
    seconds: float = 0.0

    @property
    def seconds_per_epoch(self) -> float:
        """Mean wall-clock time of one epoch."""
        return self.seconds / max(len(self.losses), 1)


def size_bucketed_batches(sizes: torch.Tensor, batch_size: int, generator: torch.Generator) -> list[torch.Tensor]:
    """One epoch of mini-batches of similar-size graphs, in random order.

    Graphs are shuffled, stably sorted by size (so ties fall in random order), cut into
    consecutive batches, and the batches are shuffled. Every graph appears exactly once.
    """
    perm = torch.randperm(sizes.numel(), generator=generator)
    ordered = perm[torch.argsort(sizes[perm], stable=True)]
    batches = list(ordered.split(batch_size))
    return [batches[i] for i in torch.randperm(len(batches), generator=generator).tolist()]


def train_score_network(
    score_net: nn.Module,
    adj: torch.Tensor,
    flags: torch.Tensor,
    classes: torch.Tensor | None,
    *,
    sigmas: torch.Tensor,
    epochs: int,
    batch_size: int,
    lr: float,
    generator: torch.Generator,
    patience: int | None = None,
    min_delta: float = 0.0,
    progress: ProgressCallback | None = None,
) -> FitResult:
    """Train ``score_net`` in place on a dense batch; all tensors on the net's device.

    Every step draws one noise level per graph (see :func:`dsm_loss`) and trims the padding to
    the largest graph of the mini-batch. Mini-batches hold graphs of similar size
    (:func:`size_bucketed_batches`), so a step costs about the sum of its graphs' squared
    sizes rather than batch size times the largest squared size.

    Args:
        score_net (nn.Module): The network to train.
        adj (torch.Tensor): Dense training adjacencies :math:`(G, N, N)`.
        flags (torch.Tensor): Node flags :math:`(G, N)`.
        classes (torch.Tensor, optional): Class of each graph :math:`(G,)` (CeFGC*).
        sigmas (torch.Tensor): Noise levels :math:`(L,)`.
        epochs (int): Maximum number of passes over the data.
        batch_size (int): Graphs per step.
        lr (float): Adam learning rate.
        generator (torch.Generator): CPU generator for shuffling, levels and noise.
        patience (int, optional): Stop after this many epochs without the best loss improving
            by ``min_delta`` (CeFGC uses 30 for its classifier); ``None`` trains all epochs.
        min_delta (float): Minimum improvement that resets the patience counter.
        progress (ProgressCallback, optional): Called as ``progress(epoch, loss)``.

    Returns:
        FitResult: Loss history and timing (graph counts are filled in by the caller).
    """
    if epochs < 1 or batch_size < 1 or not lr > 0:
        raise InvalidInputError(
            f"need epochs >= 1, batch_size >= 1 and lr > 0; got {epochs}, {batch_size}, {lr}"
        )
    if patience is not None and patience < 1:
        raise InvalidInputError(f"patience must be >= 1 or None, got {patience}")
    optimizer = torch.optim.Adam(score_net.parameters(), lr=lr, betas=(0.9, 0.999), foreach=True)
    result = FitResult()
    best, since_best = float("inf"), 0
    start = time.perf_counter()
    score_net.train()
    num_graphs, device = adj.shape[0], adj.device
    sizes = flags.sum(dim=1).cpu()
    for epoch in range(epochs):
        total = 0.0
        for chunk_cpu in size_bucketed_batches(sizes, batch_size, generator):
            n = int(sizes[chunk_cpu].max())
            chunk = chunk_cpu.to(device)
            levels = torch.randint(sigmas.numel(), (chunk.numel(),), generator=generator).to(device)
            loss = dsm_loss(
                score_net,
                adj[chunk, :n, :n],
                flags[chunk, :n],
                sigmas=sigmas,
                levels=levels,
                classes=None if classes is None else classes[chunk],
                generator=generator,
            )
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += float(loss.detach()) * chunk.numel()
        epoch_loss = total / num_graphs
        result.losses.append(epoch_loss)
        if progress is not None:
            progress(epoch, epoch_loss)
        if epoch_loss < best - min_delta:
            best, since_best = epoch_loss, 0
        else:
            since_best += 1
        if patience is not None and since_best >= patience:
            result.stopped_early = True
            break
    score_net.eval()
    result.seconds = time.perf_counter() - start
    return result
