"""The results page of a node paper's table: ``docs/results/<method>.md``, its plots beside it.

Built from every finished cell of the full plan (run folders under the output root, or the
committed ledger), not only the last invocation's, so subsets run one after the other fill one
page. Each (setting, row) shows the paper's figure, the plaintext and protected means with their
seed counts and deltas, and whether it reproduces: within :data:`TOLERANCE` points under both
stacks over the paper's seed count (targets.md's rule).
"""

from __future__ import annotations

import datetime as _dt
import statistics
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from securefg.reproduce.cell_ledger import COMMAND_LOG, CellLedger, logged_commands
from securefg.reproduce.cell_runner import finished_result, preset_change
from securefg.reproduce.cells import PLAINTEXT, PROTECTED, Cell
from securefg.reproduce.gap_notes import GapNotes
from securefg.reproduce.node_tables import PaperTable, plan
from securefg.reproduce.table_measure import TOLERANCE, Measured, SeedRuns, collect
from securefg.reproduce.table_plot import plot_setting


def measure_all(table: PaperTable, paper: Mapping[tuple[str, str], float], out_root: str | Path,
                ledger: CellLedger | None, cells: list[Cell] | None = None,
                ) -> tuple[Measured, list[tuple[Cell, dict[str, Any]]], int]:
    """Every finished cell of ``cells`` (default: the full plan), grouped; the raw results; the plan's size.
    A stale run (one of what its column no longer is) is left out: it would run again."""
    cells = plan(table, paper) if cells is None else cells
    found = [(c, r) for c in cells
             if (r := finished_result(c, out_root, ledger)) is not None and preset_change(c, r) is None]
    return collect(found), found, len(cells)


def write_page(
    table: PaperTable,
    *,
    out_root: str | Path,
    page: str | Path,
    command: str,
    paper: Mapping[tuple[str, str], float],
    paper_source: str,
    ledger: CellLedger | None = None,
    note: str = "",
    cells: list[Cell] | None = None,
    gaps: GapNotes | None = None,
) -> list[Path]:
    """Write the page and one PNG per measured setting beside it; return the PNGs.

    ``cells`` narrows the page to a subset (``--quick``'s); by default it covers the full table.
    ``gaps`` (:mod:`securefg.reproduce.gap_notes`) says what was measured about why a cell is far
    from the paper; it is shown beside that cell in the off-by list.
    """
    measured, found, total = measure_all(table, paper, out_root, ledger, cells)
    if cells is not None:  # a subset page lists only its own (setting, row) pairs
        paper = {k: v for k, v in paper.items() if any((c.setting.name, c.method.row_label) == k for c in cells)}
    page = Path(page)
    page.parent.mkdir(parents=True, exist_ok=True)
    plots = [png for s in table.settings
             if plot_setting(table, s, measured, paper, path=(png := page.with_name(f"{page.stem}_{s.folder_name}.png")))]
    devices = sorted({str(r.get("device")) for _, r in found}) or ["—"]
    wall = sum(float(r.get("wall_seconds") or 0.0) for _, r in found)
    where = f"under `{out_root}`" + (f" or recorded in `{ledger.path}`" if ledger is not None else "")
    lines = [
        f"# {table.title}",
        "",
        (f"Written by `{command}` on {_dt.date.today().isoformat()} from every finished cell {where}: "
         f"{len(found)} of the {total} runs {'of the full table' if cells is None else 'asked for'} are finished"
         f"{'' if len(found) == total else ', so this is NOT the full table'}. Device(s): {', '.join(devices)}; "
         f"summed run time {wall / 60:.1f} min."),
        "",
        *([note, ""] if note else []),
        f"`securefg reproduce {table.key}` runs every unfinished cell (resumable). Invocations that made these cells:",
        "",
        *(f"* `{c}`" for c in logged_commands(out_root, ledger)),
        "",
        "## Protocol",
        "",
        table.protocol,
        "",
        (f"The paper's figures are {paper_source}. Protected = the method's default stack (`securefg run` without "
         f"`--protocol`); each run's `result.json` names its stack and the preset it used. A cell reproduces when "
         f"its mean over all {len(table.seeds)} seeds is within {TOLERANCE} points of the paper under both stacks."),
        "",
        "## The table",
        "",
        comparison(table, measured, paper),
        "",
        f"## Cells more than {TOLERANCE} points from the paper",
        "",
        off_by(table, measured, paper, gaps),
        "",
        "## Every seed",
        "",
        per_seed(table, measured, paper),
        "",
        "## Plots",
        "",
        *(f"![{p.stem}]({p.name})" for p in plots),
        "",
        "## Cost per run",
        "",
        cost(table, measured, paper),
        "",
    ]
    page.write_text("\n".join(lines), encoding="utf-8")
    return plots


def _fmt(runs: SeedRuns | None, n: int) -> str:
    if runs is None:
        return "not run"
    return f"{runs.mean():.2f} ± {runs.std():.2f} ({len(runs.acc)}/{n})"


def _delta(runs: SeedRuns | None, ref: float) -> str:
    return "" if runs is None else f"{runs.mean() - ref:+.2f}"


def _verdict(runs: list[SeedRuns | None], ref: float, n: int) -> str:
    if any(r is None or len(r.acc) < n for r in runs):
        return "incomplete"
    return "yes" if all(abs(r.mean() - ref) <= TOLERANCE for r in runs if r is not None) else "no"


def _stack_runs(table: PaperTable, measured: Measured, setting: str, row_label: str) -> dict[str, SeedRuns | None]:
    row = next(r for r in table.rows if r.label == row_label)
    return {str(c.stack): measured.get((setting, c.key)) for c in row.columns()}


def comparison(table: PaperTable, measured: Measured, paper: Mapping[tuple[str, str], float]) -> str:
    """One line per (setting, row) the paper gives: paper, plaintext, protected, deltas, verdict."""
    n = len(table.seeds)
    out = ["| setting | method | paper | plaintext (seeds) | Δ | protected (seeds) | Δ | reproduced |",
           "|---|---|---|---|---|---|---|---|"]
    for s in table.settings:
        for row in table.rows:
            if (s.name, row.label) not in paper:
                continue
            ref = paper[(s.name, row.label)]
            by = _stack_runs(table, measured, s.name, row.label)
            plain = by.get(PLAINTEXT)
            prot = by.get(PROTECTED)
            prot_cell = "(no messages)" if PROTECTED not in by else _fmt(prot, n)
            out.append(f"| {s.name} | {row.label} | {ref:.2f} | {_fmt(plain, n)} | {_delta(plain, ref)} | {prot_cell} | "
                       f"{_delta(prot, ref)} | {_verdict(list(by.values()), ref, n)} |")
    return "\n".join(out)


def off_by(table: PaperTable, measured: Measured, paper: Mapping[tuple[str, str], float],
           gaps: GapNotes | None = None) -> str:
    """Every measured (setting, row, stack) whose mean is more than the tolerance from the paper,
    with what was measured about why (``gaps``) where someone has looked."""
    gaps = gaps or {}
    lines = []
    for s in table.settings:
        for row in table.rows:
            if (s.name, row.label) not in paper:
                continue
            ref = paper[(s.name, row.label)]
            for stack, runs in _stack_runs(table, measured, s.name, row.label).items():
                if runs is not None and abs(runs.mean() - ref) > TOLERANCE:
                    lines.append(f"| {s.name} | {row.label} | {stack} | {runs.mean():.2f} | {ref:.2f} | "
                                 f"{runs.mean() - ref:+.2f} | {len(runs.acc)}/{len(table.seeds)} | "
                                 f"{_cell_text(gaps.get((s.name, row.label), 'not investigated'))} |")
    if not lines:
        return "None among the measured cells."
    return "\n".join(["| setting | method | stack | measured | paper | Δ | seeds | what was measured about why |",
                      "|---|---|---|---|---|---|---|---|", *lines])


def _cell_text(text: str) -> str:
    """One markdown table cell: a ``|`` would split it."""
    return text.replace("|", "\\|")


def per_seed(table: PaperTable, measured: Measured, paper: Mapping[tuple[str, str], float]) -> str:
    """Every seed's accuracy, per (setting, row, stack)."""
    head = " | ".join(f"seed {k}" for k in table.seeds)
    out = [f"| setting | method | stack | {head} |", "|---|---|---|" + "---|" * len(table.seeds)]
    for s in table.settings:
        for row in table.rows:
            for stack, runs in _stack_runs(table, measured, s.name, row.label).items():
                if runs is None or (s.name, row.label) not in paper:
                    continue
                vals = " | ".join(f"{runs.acc[k]:.2f}" if k in runs.acc else "" for k in table.seeds)
                out.append(f"| {s.name} | {row.label} | {stack} ({runs.protocol}) | {vals} |")
    return "\n".join(out) if len(out) > 2 else "No finished cell."


def cost(table: PaperTable, measured: Measured, paper: Mapping[tuple[str, str], float]) -> str:
    """Bytes and wall time per run (means over the finished seeds; wall time on a shared machine)."""
    out = ["| setting | method | stack | runs | MB per run | wall s per run |", "|---|---|---|---|---|---|"]
    for s in table.settings:
        for row in table.rows:
            for stack, runs in _stack_runs(table, measured, s.name, row.label).items():
                if runs is None:
                    continue
                mb = f"{statistics.fmean(runs.bytes.values()) / 1e6:,.1f}" if runs.bytes else "—"
                sec = f"{statistics.fmean(runs.seconds.values()):.0f}" if runs.seconds else "—"
                out.append(f"| {s.name} | {row.label} | {stack} | {len(runs.acc)} | {mb} | {sec} |")
    return "\n".join(out) if len(out) > 2 else "No finished cell."


__all__ = ["COMMAND_LOG", "comparison", "cost", "measure_all", "off_by", "per_seed", "write_page"]
