"""Inside a multi-dataset setting: each dataset's AUC under the one global model.

A multi-dataset setting's score is the mean of its datasets' AUCs, so one dataset the single
average gets wrong (below chance, say) hides behind the others. This table reads each run's
``test_auc_by_dataset`` and, for the one-shot methods, ``mean_client_test_auc`` (the clients'
own models before the average) and ``global_val_auc`` (the global model on the clients' pooled
validation graphs, which shows a collapse without the test set).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from securefg.reproduce.cefgc_cells import Cell, MethodSpec, Setting
from securefg.reproduce.cefgc_table import mean_std

#: Below this a dataset's AUC is counted as worse than chance.
CHANCE = 0.5


def _number(metrics: Mapping[str, Any], key: str) -> float | None:
    value = metrics.get(key)
    return float(value) if isinstance(value, (int, float)) else None


def dataset_breakdown(
    results: Iterable[tuple[Cell, Mapping[str, Any]]],
    *,
    settings: Sequence[Setting],
    methods: Sequence[MethodSpec],
) -> str:
    """One markdown table per setting whose runs report several datasets; ``""`` when none does.

    Columns: seeds, each dataset's AUC (mean ± std over seeds), how many (seed, dataset) pairs
    fell below :data:`CHANCE`, the clients' own models' test AUC and the global validation AUC.
    A method whose runs do not report per-dataset AUCs (the central GIN) is left out.
    """
    by_cell: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for cell, res in results:
        metrics = res.get("metrics") or {}
        if isinstance(metrics.get("test_auc_by_dataset"), Mapping):
            by_cell.setdefault((cell.setting.name, cell.method.name), []).append(metrics)
    blocks = []
    for s in settings:
        runs_of = {m.label: by_cell[(s.name, m.name)] for m in methods if (s.name, m.name) in by_cell}
        names = list(dict.fromkeys(d for runs in runs_of.values() for r in runs for d in r["test_auc_by_dataset"]))
        if len(names) < 2:
            continue
        lines = ["| method | seeds | " + " | ".join(names) + " | below chance | clients' own models | global val AUC |",
                 "|---|---|" + "---|" * len(names) + "---|---|---|"]
        for label, runs in runs_of.items():
            per = {d: [float(v) for r in runs if isinstance(v := r["test_auc_by_dataset"].get(d), (int, float))]
                   for d in names}  # a ledger stores an undefined AUC as null
            below = sum(v < CHANCE for values in per.values() for v in values)
            own = [v for r in runs if (v := _number(r, "mean_client_test_auc")) is not None]
            val = [v for r in runs if (v := _number(r, "global_val_auc")) is not None]
            lines.append(f"| {label} | {len(runs)} | " + " | ".join(mean_std(per[d]) for d in names)
                         + f" | {below} | {mean_std(own)} | {mean_std(val)} |")
        blocks.append(f"**{s.name}**\n\n" + "\n".join(lines))
    return "\n\n".join(blocks)


__all__ = ["CHANCE", "dataset_breakdown"]
