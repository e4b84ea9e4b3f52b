r"""Receiver-side screening of relayed generators: drop units whose graphs do not fit their label.

A CeFGC receiver trains on synthetic graphs labelled with the class the *sender* declares; a
sealed relay authenticates the package but not the label (``spoofed_generator``). Before
training, the receiver summarises each unit's synthetic graphs (one unit per (model, class)) and
its **own** training graphs per class on cheap statistics: log node count, mean and maximum
degree, edge density and the mean node-feature vector, each standardised by the receiver's own
spread. Two rules (``screen_rule``):

* ``"alignment"`` (the default): per *sender* (one received package), is there a relabelling of
  its units among their declared classes that fits the receiver's class centroids better than
  the labels it declared? The fit is the summed squared distance, so an offset every synthetic
  graph shares (diffusion models' graphs sit off the real distribution) adds the same to every
  relabelling and cancels: an honest sender loses only when its classes are distorted *apart*
  from each other. The units the best relabelling moves are dropped when it beats the declared
  labels by more than ``tolerance`` of what a clean relabelling would (``excess``: the gain over
  the moved classes' squared centroid distances; an honest offset model gives 0 or less, a
  spoofed one 1, so the default 0.5 is the midpoint). It needs at least two units of classes the
  receiver holds per sender; a sender declaring one class, or relabelling all its graphs to one
  class, passes (the nearest rule covers that, at a price in honest units).
* ``"nearest"``: a unit whose mean lies closer (by more than ``margin``) to the receiver's
  centroid of another class than to the declared one is dropped. Absolute, so the shared offset
  of synthetic graphs pushes honest units out too.

A unit declaring a class the receiver does not hold is kept (nothing to compare with), so the
screen only ever removes graphs. This is an outlier test against the receiver's data, in the
spirit of Fung et al. (FoolsGold, https://arxiv.org/abs/1808.04866); it needs classes that
differ in these statistics, and a sender spoofing *within* a class's statistics passes it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch
from scipy.optimize import linear_sum_assignment
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


RULES = ("alignment", "nearest")


@dataclass(frozen=True)
class UnitVerdict:
    """One received unit: its declared class, size, distances and whether it was kept.

    ``nearest_class``/``nearest_distance``: the closest other own class (``"nearest"``), or the
    class the sender's best relabelling gives the unit (``"alignment"``, ``-1`` when it stays).
    ``excess``: alignment only, how much the best relabelling beats the declared labels, as a
    share of what it would gain on units sitting exactly at the relabelled classes' centroids
    (the squared centroid distances of the moved labels): 0 = no better, 1 = a clean relabelling;
    ``sender``: the package the unit came from.
    """

    declared: int
    graphs: int
    kept: bool
    declared_distance: float
    nearest_class: int
    nearest_distance: float
    sender: int = -1
    excess: float = float("nan")
    unit: int = -1
    """The unit's position in the records it was judged from."""

    def to_dict(self) -> dict[str, Any]:
        return {"declared": self.declared, "graphs": self.graphs, "kept": self.kept,
                "declared_distance": self.declared_distance, "nearest_class": self.nearest_class,
                "nearest_distance": self.nearest_distance, "sender": self.sender, "excess": self.excess,
                "unit": self.unit}


@dataclass(frozen=True)
class _Reference:
    """The receiver's own class centroids and spread (standardised space)."""

    centroids: dict[int, torch.Tensor]
    scale: torch.Tensor

    @classmethod
    def of(cls, own: Sequence[Data]) -> _Reference | None:
        if not own:
            return None
        stats = torch.stack([graph_statistics(g) for g in own])
        labels = torch.tensor([int(g.y.view(-1)[0]) for g in own])
        scale = stats.std(0, unbiased=False).clamp_min(0.1)  # a floor: features absent at home are not infinitely telling
        return cls({int(c): stats[labels == c].mean(0) / scale for c in labels.unique().tolist()}, scale)

    def point(self, unit: Sequence[Data]) -> torch.Tensor:
        return torch.stack([graph_statistics(g) for g in unit]).mean(0) / self.scale


def _units(synthetic: Sequence[Data], records: Sequence[dict[str, int]]) -> list[tuple[int, dict[str, int], list[Data]]]:
    """``(position, record, graphs)`` of every unit with graphs, in unit order."""
    out, start = [], 0
    for i, rec in enumerate(records):
        count = int(rec["graphs"])
        unit = list(synthetic[start : start + count])
        start += count
        if unit:
            out.append((i, rec, unit))
    if start != len(synthetic):
        raise ValueError(f"the unit records count {start} graphs, but {len(synthetic)} were sampled")
    return out


def screen_units(own: Sequence[Data], synthetic: Sequence[Data], records: Sequence[dict[str, int]], *,
                 rule: str = "alignment", margin: float = 1.0, tolerance: float = 0.5,
                 senders: Sequence[int] | None = None) -> tuple[list[Data], list[UnitVerdict]]:
    """Keep the synthetic graphs of units consistent with the receiver's own classes.

    Args:
        own (Sequence[Data]): The receiver's labelled training graphs.
        synthetic (Sequence[Data]): Graphs from :func:`~securefg.methods.cefgc.generators.synthesize`,
            in unit order.
        records (Sequence[dict]): Its per-unit ``{"class", "graphs"}`` records.
        rule (str): ``"alignment"`` or ``"nearest"`` (module docs). (default: ``"alignment"``)
        margin (float): ``"nearest"``: drop when ``d(declared) > margin * d(nearest other class)``.
            (default: ``1.0``)
        tolerance (float): ``"alignment"``: drop the moved units when the best relabelling's
            ``excess`` (module docs) is above this. (default: ``0.5``)
        senders (Sequence[int], optional): The package of each record's unit (``"alignment"``
            groups by it); ``None``: one sender for all.

    Returns:
        (the kept graphs, one verdict per unit with graphs).

    Raises:
        ValueError: an unknown rule, records that do not add up to the graphs, or ``senders``
            of another length than ``records``.
    """
    if rule not in RULES:
        raise ValueError(f"unknown screen rule {rule!r} (one of {', '.join(RULES)})")
    if senders is not None and len(senders) != len(records):
        raise ValueError(f"{len(senders)} senders for {len(records)} unit records")
    units = _units(synthetic, records)
    ref = _Reference.of(own)
    who = [(-1 if senders is None else int(senders[i])) for i, _, _ in units]
    if ref is None:
        return [g for _, _, u in units for g in u], [
            UnitVerdict(int(r["class"]), len(u), True, math.nan, -1, math.nan, s, unit=i) for (i, r, u), s in zip(units, who)]
    points = [ref.point(u) for _, _, u in units]
    verdicts = (_aligned(ref, units, points, who, tolerance) if rule == "alignment" else
                _nearest(ref, units, points, who, margin))
    verdicts = [replace(v, unit=i) for (i, _, _), v in zip(units, verdicts)]
    return keep_units(synthetic, records, verdicts), verdicts


def keep_units(synthetic: Sequence[Data], records: Sequence[dict[str, int]], verdicts: Sequence[UnitVerdict]) -> list[Data]:
    """The graphs of ``synthetic`` (in ``records``' units) whose unit no verdict dropped: verdicts
    judged on other draws of the same units (``screen_samples``) apply by unit position."""
    dropped = {v.unit for v in verdicts if not v.kept}
    return [g for i, _, unit in _units(synthetic, records) if i not in dropped for g in unit]


def _nearest(ref: _Reference, units: list, points: list[torch.Tensor], who: list[int], margin: float) -> list[UnitVerdict]:
    out = []
    for (_, rec, unit), z, s in zip(units, points, who):
        declared = int(rec["class"])
        if declared not in ref.centroids:
            out.append(UnitVerdict(declared, len(unit), True, math.nan, -1, math.nan, s))
            continue
        dist = {c: float((z - mu).norm()) for c, mu in ref.centroids.items()}
        others = {c: d for c, d in dist.items() if c != declared}
        nearest = min(others, key=others.__getitem__) if others else declared
        ok = not others or dist[declared] <= margin * others[nearest]
        out.append(UnitVerdict(declared, len(unit), ok, dist[declared], nearest, others.get(nearest, math.nan), s))
    return out


def _aligned(ref: _Reference, units: list, points: list[torch.Tensor], who: list[int], tolerance: float) -> list[UnitVerdict]:
    verdicts: list[UnitVerdict | None] = [None] * len(units)
    by_sender: dict[int, list[int]] = {}
    for j, ((_, rec, unit), s) in enumerate(zip(units, who)):
        declared = int(rec["class"])
        if declared in ref.centroids:
            by_sender.setdefault(s, []).append(j)
        else:
            verdicts[j] = UnitVerdict(declared, len(unit), True, math.nan, -1, math.nan, s)
    for s, idx in by_sender.items():
        labels = [int(units[j][1]["class"]) for j in idx]
        cost = np.array([[float(((points[j] - ref.centroids[c]) ** 2).sum()) for c in labels] for j in idx])  # unit x label
        rows, cols = linear_sum_assignment(cost)  # the best relabelling of the sender's declared multiset
        best = cols[np.argsort(rows)].tolist()
        declared_fit, best_fit = float(np.trace(cost)), float(cost[np.arange(len(idx)), best].sum())
        moved = [a for a, b in enumerate(best) if labels[b] != labels[a]] if best_fit < declared_fit else []
        # the gain over what an ideal spoof gains: the moved classes' own centroid distances (1 = a
        # sender whose graphs sit exactly where the relabelling puts them, 0 = as good as declared)
        spread = sum(float(((ref.centroids[labels[a]] - ref.centroids[labels[best[a]]]) ** 2).sum()) for a in moved)
        excess = (declared_fit - best_fit) / spread if moved and spread > 0 else 0.0
        drop = bool(moved) and excess > tolerance
        for a, j in enumerate(idx):
            now = labels[best[a]] if a in moved else -1
            verdicts[j] = UnitVerdict(labels[a], len(units[j][2]), not (drop and a in moved), math.sqrt(cost[a, a]), now,
                                      math.sqrt(cost[a, best[a]]) if a in moved else math.nan, s, excess)
    assert all(v is not None for v in verdicts)
    return [v for v in verdicts if v is not None]


__all__ = ["RULES", "UnitVerdict", "graph_statistics", "keep_units", "screen_units"]
