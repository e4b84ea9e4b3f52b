"""Sender-side choice of the sampling settings shipped with a model.

EDP-GNN picks the Langevin step ratio and noise factor by MMD against its training graphs. In
CeFGC only the sender has those graphs, so the sender runs this search before it uploads the
model; the receiver just uses :attr:`GraphDiffusionModel.sampling`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

import torch
from torch_geometric.data import Data

from securefg.errors import InvalidInputError
from securefg.models.graph_score.metrics import clustering_mmd, degree_mmd, graph_set_summary
from securefg.models.graph_score.model import GraphDiffusionModel, make_generator
from securefg.models.graph_score.sampler import LangevinParams


@dataclass(frozen=True)
class SamplingTrial:
    """Quality of one candidate :class:`LangevinParams` (lower ``score`` is better).

    ``score`` is degree MMD + clustering MMD + the gap in the fraction of connected graphs,
    averaged over classes for a conditional model.
    """

    params: LangevinParams
    degree_mmd: float
    clustering_mmd: float
    connected_gap: float

    @property
    def score(self) -> float:
        """The selection criterion."""
        return self.degree_mmd + self.clustering_mmd + self.connected_gap


def select_sampling_params(
    model: GraphDiffusionModel,
    reference: Sequence[Data],
    labels: Sequence[int] | None = None,
    *,
    step_ratios: Iterable[float] = (0.05, 0.1, 0.2),
    noise_factors: Iterable[float] = (0.8, 0.9, 1.0),
    steps_per_level: int | None = None,
    num_samples: int = 64,
    generator: torch.Generator | int | None = None,
    device: torch.device | str = "cpu",
    apply: bool = True,
) -> list[SamplingTrial]:
    """Grid-search step ratio and noise factor against the sender's own graphs.

    Args:
        model (GraphDiffusionModel): A trained model.
        reference (Sequence[Data]): The sender's graphs (usually its training graphs).
        labels (Sequence[int], optional): Class of each reference graph; required exactly when
            the model is conditional, which is then scored per class and averaged.
        step_ratios (Iterable[float]): Candidate ``step_ratio`` values.
        noise_factors (Iterable[float]): Candidate ``noise_factor`` values.
        steps_per_level (int, optional): Fixed ``T``; defaults to the model's current value.
        num_samples (int): Graphs generated per candidate (and per class). (default: :obj:`64`)
        generator (torch.Generator | int, optional): Seed; every candidate reuses it.
        device (torch.device | str): Where to sample. (default: :obj:`"cpu"`)
        apply (bool): Set ``model.sampling`` to the best candidate. (default: :obj:`True`)

    Returns:
        list[SamplingTrial]: Every candidate, best first.
    """
    if not reference:
        raise InvalidInputError("select_sampling_params needs at least one reference graph")
    if (labels is None) != (model.num_classes is None):
        raise InvalidInputError("pass labels exactly when the model is conditional (num_classes set)")
    if labels is not None and len(labels) != len(reference):
        raise InvalidInputError(f"got {len(labels)} labels for {len(reference)} reference graphs")
    groups: dict[int | None, list[Data]] = {}
    for i, graph in enumerate(reference):
        groups.setdefault(None if labels is None else int(labels[i]), []).append(graph)
    seed = int(torch.randint(2**62, (1,), generator=make_generator(generator)))
    base = (
        model.sampling
        if steps_per_level is None
        else replace(model.sampling, steps_per_level=steps_per_level)
    )
    trials = []
    for ratio in step_ratios:
        for factor in noise_factors:
            params = replace(base, step_ratio=float(ratio), noise_factor=float(factor))
            scores = []
            for label, graphs in groups.items():
                fake = model.sample(num_samples, labels=label, generator=seed, device=device, params=params)
                gap = graph_set_summary(graphs)["fraction_connected"]
                gap -= graph_set_summary(fake)["fraction_connected"]
                scores.append((degree_mmd(fake, graphs), clustering_mmd(fake, graphs), abs(gap)))
            mean = [sum(s[j] for s in scores) / len(scores) for j in range(3)]
            trials.append(SamplingTrial(params, mean[0], mean[1], mean[2]))
    trials.sort(key=lambda t: t.score)
    if apply:
        model.sampling = trials[0].params
    return trials
