r"""Receiver-side screening of relayed generators: drop units whose graphs do not look like their class.

A CeFGC receiver trains on synthetic graphs labelled with the class the *sender* declares; a
sealed relay authenticates the package but not the label (``spoofed_generator``). Before
training, the receiver compares each unit's synthetic graphs (one unit per (model, class)) with
its **own** training graphs, per class, on cheap statistics: log node count, mean and maximum
degree, edge density and the mean node-feature vector (degree and label-feature
distributions). Each statistic is standardised by the receiver's own spread; a unit whose
mean lies closer (by more than ``margin``) to the receiver's centroid of another class than to
the declared one is dropped, with its graphs. A unit declaring a class the receiver does not
hold is kept (nothing to compare with), so the screen only ever removes graphs.

This is an outlier test against the receiver's data, in the spirit of Fung et al. (FoolsGold,
https://arxiv.org/abs/1808.04866) and Li et al.'s spectral screening of updates; it needs
classes that differ in these statistics, and a sender spoofing *within* a class's statistics
passes it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch_geometric.data import Data
from torch_geometric.utils import degree


def graph_statistics(g: Data) -> torch.Tensor:
    """``[log n, mean degree, max degree, density, mean node features...]`` of one graph (float64)."""
    n = int(g.num_nodes)
    deg = degree(g.edge_index[0], num_nodes=n, dtype=torch.float64) if g.edge_index.numel() else torch.zeros(n, dtype=torch.float64)
    edges = float(deg.sum()) / 2
    density = 2 * edges / (n * (n - 1)) if n > 1 else 0.0
    feats = g.x.double().mean(0) if getattr(g, "x", None) is not None and g.x.numel() else torch.zeros(0, dtype=torch.float64)
    head = torch.tensor([math.log(max(n, 1)), float(deg.mean()) if n else 0.0, float(deg.max()) if n else 0.0, density],
                        dtype=torch.float64)
    return torch.cat([head, feats.cpu()])


@dataclass(frozen=True)
class UnitVerdict:
    """One received unit: its declared class, size, distances and whether it was kept."""

    declared: int
    graphs: int
    kept: bool
    declared_distance: float
    nearest_class: int
    nearest_distance: float

    def to_dict(self) -> dict[str, Any]:
        return {"declared": self.declared, "graphs": self.graphs, "kept": self.kept,
                "declared_distance": self.declared_distance, "nearest_class": self.nearest_class,
                "nearest_distance": self.nearest_distance}


def screen_units(own: Sequence[Data], synthetic: Sequence[Data], records: Sequence[dict[str, int]], *,
                 margin: float = 1.0) -> tuple[list[Data], list[UnitVerdict]]:
    """Keep the synthetic graphs of units consistent with the receiver's own classes.

    Args:
        own (Sequence[Data]): The receiver's labelled training graphs.
        synthetic (Sequence[Data]): Graphs from :func:`~securefg.methods.cefgc.generators.synthesize`,
            in unit order.
        records (Sequence[dict]): Its per-unit ``{"class", "graphs"}`` records.
        margin (float): Drop when ``d(declared) > margin * d(nearest other class)``. (default: ``1.0``)

    Returns:
        (the kept graphs, one verdict per unit with graphs).
    """
    own_stats = torch.stack([graph_statistics(g) for g in own]) if own else None
    labels = torch.tensor([int(g.y.view(-1)[0]) for g in own]) if own else torch.zeros(0, dtype=torch.long)
    if own_stats is not None:
        scale = own_stats.std(0, unbiased=False).clamp_min(0.1)  # a floor: features absent at home are not infinitely telling
        centroids = {int(c): own_stats[labels == c].mean(0) for c in labels.unique().tolist()}
    kept: list[Data] = []
    verdicts: list[UnitVerdict] = []
    start = 0
    for rec in records:
        count = int(rec["graphs"])
        unit = list(synthetic[start : start + count])
        start += count
        if not unit:
            continue
        declared = int(rec["class"])
        if own_stats is None or declared not in centroids:
            kept.extend(unit)
            verdicts.append(UnitVerdict(declared, count, True, float("nan"), -1, float("nan")))
            continue
        mean = torch.stack([graph_statistics(g) for g in unit]).mean(0)
        dist = {c: float(((mean - mu) / scale).norm()) for c, mu in centroids.items()}
        others = {c: d for c, d in dist.items() if c != declared}
        nearest = min(others, key=others.__getitem__) if others else declared
        ok = not others or dist[declared] <= margin * others[nearest]
        if ok:
            kept.extend(unit)
        verdicts.append(UnitVerdict(declared, count, ok, dist[declared], nearest, others.get(nearest, float("nan"))))
    return kept, verdicts


__all__ = ["UnitVerdict", "graph_statistics", "screen_units"]
