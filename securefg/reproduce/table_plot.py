"""One bar chart per setting of a node paper's table: each row's plaintext and protected mean ± std, the paper as a marker."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from securefg.reproduce.cells import PLAINTEXT, Setting
from securefg.reproduce.node_tables import PaperTable
from securefg.reproduce.table_measure import Measured


def plot_setting(table: PaperTable, setting: Setting, measured: Measured, paper: Mapping[tuple[str, str], float],
                 *, path: Path) -> bool:
    """Draw ``setting``'s chart to ``path``; ``False`` (nothing written) when no cell of it is measured."""
    rows = [r for r in table.rows if (setting.name, r.label) in paper]
    if not any((setting.name, c.key) in measured for r in rows for c in r.columns()):
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(1.6 + 1.5 * len(rows), 3.6))
    width = 0.38
    for i, row in enumerate(rows):
        for col in row.columns():
            runs = measured.get((setting.name, col.key))
            if runs is None:
                continue
            x = i + (-width / 2 if col.stack == PLAINTEXT else width / 2)
            ax.bar(x, runs.mean(), width, yerr=runs.std(), capsize=3,
                   color="#9ecae1" if col.stack == PLAINTEXT else "#3182bd")
        ax.plot([i - 0.45, i + 0.45], [paper[(setting.name, row.label)]] * 2, color="black", lw=2)
    ax.set_xticks(range(len(rows)), [r.label for r in rows], rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("test accuracy %")
    ax.set_title(f"{setting.name}: light plaintext, dark protected, line = paper", fontsize=9)
    lows = [paper[(setting.name, r.label)] for r in rows] + [
        runs.mean() for r in rows for c in r.columns() if (runs := measured.get((setting.name, c.key)))]
    ax.set_ylim(max(0.0, min(lows) - 10), min(100.0, max(lows) + 5))
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


__all__ = ["plot_setting"]
