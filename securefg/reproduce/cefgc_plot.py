"""One bar chart per setting: measured mean ± std per method, the paper's cell as a marker."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from securefg.reproduce.cefgc_cells import MethodSpec, Setting
from securefg.reproduce.cefgc_table import Measurements


def plot_setting(
    setting: Setting,
    measured: Measurements,
    paper: Mapping[tuple[str, str], float],
    *,
    methods: Sequence[MethodSpec],
    path: Path,
) -> bool:
    """Draw ``setting``'s chart to ``path``; ``False`` (nothing written) when nothing was measured."""
    present = [m for m in methods if (setting.name, m.name) in measured]
    if not present:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs = range(len(present))
    means = [measured[(setting.name, m.name)].mean() for m in present]
    stds = [measured[(setting.name, m.name)].std() for m in present]
    fig, ax = plt.subplots(figsize=(max(4.0, 1.1 * len(present) + 1.5), 3.4))
    ax.bar(xs, means, yerr=stds, capsize=4, color="#4c72b0", label="measured (mean ± std over seeds)")
    refs = [(i, paper[(setting.name, m.name)]) for i, m in enumerate(present) if (setting.name, m.name) in paper]
    if refs:
        ax.scatter([i for i, _ in refs], [v for _, v in refs], marker="D", color="#c44e52", zorder=3, label="paper")
    for i, (mean, m) in enumerate(zip(means, present, strict=True)):
        n = len(measured[(setting.name, m.name)].best)
        ax.annotate(f"{mean:.3f}\n(n={n})", (i, mean), textcoords="offset points", xytext=(0, 4), ha="center", fontsize=7)
    ax.set_xticks(list(xs), [m.label for m in present], fontsize=8)
    low = min([*means, *(v for _, v in refs)])
    ax.set_ylim(max(0.0, low - 0.15), 1.05)
    ax.set_ylabel("global test ROC-AUC")
    ax.set_title(f"CeFGC comparison: {setting.name} ({setting.kind})", fontsize=9)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


__all__ = ["plot_setting"]
