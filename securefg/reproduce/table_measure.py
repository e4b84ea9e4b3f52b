"""Measured cells of a node paper's table: accuracy by seed per (setting, column), with bytes and time.

A node method's ``result.json`` gives ``metrics.test_acc`` as a fraction at its selected
(best-validation) round; the tables compare in accuracy %, the papers' unit.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from securefg.reproduce.cells import Cell

#: A cell counts as reproduced within this many points of the paper (targets.md).
TOLERANCE = 1.5


@dataclass
class SeedRuns:
    """One (setting, column)'s finished runs, by seed."""

    acc: dict[int, float] = field(default_factory=dict)
    bytes: dict[int, float] = field(default_factory=dict)
    seconds: dict[int, float] = field(default_factory=dict)
    protocol: str = ""

    def mean(self) -> float:
        return statistics.fmean(self.acc.values())

    def std(self) -> float:
        """Sample standard deviation (0 for one seed)."""
        return statistics.stdev(self.acc.values()) if len(self.acc) > 1 else 0.0


Measured = dict[tuple[str, str], SeedRuns]  # (setting name, column key) -> runs


def collect(found: Iterable[tuple[Cell, Mapping[str, Any]]]) -> Measured:
    """Group finished results by (setting, column); a result without a test accuracy is left out."""
    out: Measured = {}
    for cell, res in found:
        acc = (res.get("metrics") or {}).get("test_acc")
        if not isinstance(acc, (int, float)):
            continue
        runs = out.setdefault((cell.setting.name, cell.method.key), SeedRuns())
        runs.acc[cell.seed] = 100.0 * float(acc)
        runs.protocol = str(res.get("protocol") or runs.protocol)
        if isinstance(res.get("bytes_total"), (int, float)):
            runs.bytes[cell.seed] = float(res["bytes_total"])
        if isinstance(res.get("wall_seconds"), (int, float)):
            runs.seconds[cell.seed] = float(res["wall_seconds"])
    return out


__all__ = ["TOLERANCE", "Measured", "SeedRuns", "collect"]
