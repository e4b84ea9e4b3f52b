"""What a table still needs, and roughly how long: the summary under ``reproduce ... --dry-run``.

A paper's table on a laptop is days of runs, so before starting one a user wants to know how
many runs are left and what they cost. The only honest source of a cost is a run of the same
cell that already finished (another seed of the same setting, row and stack, on some machine,
beside some other jobs or not): its wall time is a rough guide, never a promise, and a cell
that never ran anywhere gets no estimate at all rather than a guess. A run whose preset has
changed since (stale) does not count: the new preset may cost something else (FedSheafHN's 45
local epochs take three times its old 15).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from securefg.reproduce.cells import Cell

#: what :func:`securefg.commands.reproduce_cmd.print_dry_run` found for a cell
FINISHED, RECORDED, TO_RUN, STALE = "finished", "recorded", "to run", "to run again"


@dataclass(frozen=True)
class CellState:
    """One cell's state and, when it holds a current result, that run's wall time."""

    cell: Cell
    state: str
    wall_seconds: float | None = None


@dataclass
class GroupLeft:
    """The seeds of one setting, row and stack still to run, with the times of its finished runs."""

    name: str
    seeds: list[int] = field(default_factory=list)
    recorded_seconds: list[float] = field(default_factory=list)

    @property
    def estimate_seconds(self) -> float | None:
        """Median recorded time times the runs left; ``None`` when no run of the group finished."""
        if not self.recorded_seconds:
            return None
        return statistics.median(self.recorded_seconds) * len(self.seeds)


def state_of(cell: Cell, state: str, result: dict[str, Any] | None) -> CellState:
    """A :class:`CellState`, with the run's wall time only when the result is current."""
    wall = None
    if state in (FINISHED, RECORDED) and result is not None and isinstance(result.get("wall_seconds"), (int, float)):
        wall = float(result["wall_seconds"])
    return CellState(cell, state, wall)


def groups_left(states: Iterable[CellState]) -> list[GroupLeft]:
    """The groups (setting, row, stack) with runs left, in table order."""
    groups: dict[str, GroupLeft] = {}
    for s in states:
        name = s.cell.column_name
        g = groups.setdefault(name, GroupLeft(name))
        if s.state in (TO_RUN, STALE):
            g.seeds.append(s.cell.seed)
        elif s.wall_seconds is not None:
            g.recorded_seconds.append(s.wall_seconds)
    return [g for g in groups.values() if g.seeds]


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.0f} min"


def summary_lines(states: list[CellState], ledger_path: object) -> list[str]:
    """The lines printed after the per-cell list: counts, then each group left with its estimate."""
    count = {k: sum(s.state == k for s in states) for k in (FINISHED, RECORDED, TO_RUN, STALE)}
    left = count[TO_RUN] + count[STALE]
    head = f"{_count(len(states), 'cell')}: {count[FINISHED]} finished here"
    if ledger_path is not None:
        head += f", {count[RECORDED]} recorded in {ledger_path}"
    head += f", {left} to run"
    if count[STALE]:
        head += f" ({count[STALE]} of them again: the preset changed)"
    lines = [head]
    groups = groups_left(states)
    if not groups:
        return lines
    lines.append("runs left (time: the median wall time of the same setting, row and stack's finished runs, "
                 "wherever and beside whatever they ran; a rough guide):")
    known, unknown = 0.0, 0
    for g in groups:
        seeds = " ".join(str(s) for s in g.seeds)
        est = g.estimate_seconds
        if est is None:
            unknown += len(g.seeds)
            lines.append(f"  {g.name}: seeds {seeds}; no finished run of it to time")
        else:
            known += est
            lo, hi = min(g.recorded_seconds), max(g.recorded_seconds)
            took = f"{lo:.0f} s" if len(g.recorded_seconds) == 1 else f"{lo:.0f}-{hi:.0f} s each"
            lines.append(f"  {g.name}: seeds {seeds}; about {_hours(est)} ({len(g.recorded_seconds)} finished: {took})")
    total = f"about {_hours(known)} for the {_count(left - unknown, 'run')} timed this way" if left > unknown else ""
    rest = f"{_count(unknown, 'run')} of cells that never finished anywhere not timed" if unknown else ""
    lines.append("; ".join(x for x in (total, rest) if x))
    return lines
