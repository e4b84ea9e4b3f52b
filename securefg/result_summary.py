"""Mean ± std over seeds of many ``result.json`` files: the tables of the method notes.

Runs are grouped by their configuration without the seed and without settings that say *where*
a run read or wrote, not *what* it ran (output folder, data root, device, caches, progress,
checkpointing). Each group reports the chosen metric per seed, its mean and sample standard
deviation, and the protocol cost (flights, MB, wall time) averaged over the group.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from securefg.errors import InvalidInputError

#: Config keys that do not change what a run computes.
WHERE_KEYS = frozenset({"seed", "out", "data_root", "device", "progress", "resume", "checkpoint_every", "keep_payloads"})
#: Options that only say where a party keeps its offline work.
WHERE_OPTIONS = frozenset({"generator_cache"})


#: The headline metrics, in order of preference: graph tasks report ``test_auc``, node tasks ``test_acc``.
HEADLINE_METRICS = ("test_auc", "test_acc")


@dataclass
class RunGroup:
    """Runs of one configuration (all seeds)."""

    label: str
    metric: str = ""
    seeds: list[int] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    finals: list[float] = field(default_factory=list)
    flights: list[float] = field(default_factory=list)
    megabytes: list[float] = field(default_factory=list)
    wall: list[float] = field(default_factory=list)

    def row(self) -> dict[str, Any]:
        return {
            "config": self.label, "metric": self.metric, "runs": len(self.values), "seeds": self.seeds,
            "mean": _mean(self.values), "std": _std(self.values), "values": self.values,
            "final_mean": _mean(self.finals) if self.finals else None,
            "final_std": _std(self.finals) if self.finals else None,
            "flights": _mean(self.flights), "mb_total": _mean(self.megabytes), "wall_s": _mean(self.wall),
        }


def find_results(paths: Iterable[str | Path]) -> list[Path]:
    """Every ``result.json`` named or found below the given folders, sorted.

    Raises:
        InvalidInputError: A path that does not exist, or no result at all.
    """
    found: set[Path] = set()
    for p in map(Path, paths):
        if p.is_file():
            found.add(p)
        elif p.is_dir():
            found.update(p.rglob("result.json"))
        else:
            raise InvalidInputError(f"no such result file or folder: {p}")
    if not found:
        raise InvalidInputError(f"no result.json under {', '.join(map(str, paths))}")
    return sorted(found)


def load_result(path: Path) -> dict[str, Any]:
    """One ``result.json``.

    Raises:
        InvalidInputError: Not JSON, or without the ``config`` and ``metrics`` of the run contract.
    """
    try:
        res = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise InvalidInputError(f"{path} is not a readable result.json: {exc}") from exc
    if not isinstance(res, dict) or not isinstance(res.get("config"), dict) or not isinstance(res.get("metrics"), dict):
        raise InvalidInputError(f"{path} lacks the 'config' and 'metrics' of a securefg result")
    return res


def _run_defaults() -> dict[str, Any]:
    from dataclasses import MISSING, fields

    from securefg.run_config import RunConfig  # not securefg.experiment: no torch for a table

    return {f.name: f.default for f in fields(RunConfig) if f.default is not MISSING}


def config_label(config: dict[str, Any]) -> str:
    """``method dataset key=value ...``: the settings that differ from ``securefg run``'s
    defaults, without the seed and the where-settings."""
    defaults = _run_defaults()
    what = {k: v for k, v in config.items()
            if k not in WHERE_KEYS and k not in ("method", "dataset", "options") and not (k in defaults and defaults[k] == v)}
    options = {k: v for k, v in (config.get("options") or {}).items() if k not in WHERE_OPTIONS}
    parts = [str(config.get("method")), str(config.get("dataset"))]
    parts += [f"{k}={v}" for k, v in sorted(what.items())]
    parts += [f"{k}={v}" for k, v in sorted(options.items())]
    return " ".join(parts)


def stack_label(result: dict[str, Any]) -> str:
    """What the stack name alone does not say, appended to the configuration label.

    Empty for a shipped stack without waivers (and for results written before ``stack``
    existed). A user stack gets ``stack=<name>@<sha256 prefix>``, so runs of different contents
    never share a row, marked when its name borrows a shipped one; protections the stack waived
    with ``unsafe`` are listed (:mod:`securefg.protocol.guarantees`).
    """
    record = result.get("stack") or {}
    parts = []
    if record.get("sha256") and not (record.get("shipped") and not record.get("name_shadows_shipped")):
        parts.append(f"stack={record.get('name')}@{str(record['sha256'])[:12]}")
        if record.get("name_shadows_shipped"):
            parts.append("[NOT the shipped stack of that name]")
    failed = sorted({str(f.get("protection")) for f in result.get("failed_protections") or ()})
    if failed:
        parts.append(f"[failed protections: {', '.join(failed)}]")
    return "".join(f" {p}" for p in parts)


def headline_metric(result: dict[str, Any]) -> str | None:
    """The metric a result is judged by: ``test_auc`` when it has one (graph tasks), else ``test_acc``."""
    m = result.get("metrics") or {}
    return next((k for k in HEADLINE_METRICS if _is_number(m.get(k))), None)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def summarize(
    results: Sequence[dict[str, Any]], metric: str | None = None, sources: Sequence[str | Path] = ()
) -> list[dict[str, Any]]:
    """One row per configuration, in the order first seen.

    Args:
        results: Loaded ``result.json`` objects.
        metric: The key of ``metrics`` to average (its ``final_`` twin is reported when present);
            ``None`` takes each run's headline (:func:`headline_metric`: ``test_auc`` on graph
            tasks, ``test_acc`` on node tasks). (default: ``None``)
        sources: Where each result came from (named in errors).

    Raises:
        InvalidInputError: A run without ``metric``, or two runs of one configuration and seed.
    """
    groups: dict[str, RunGroup] = {}
    first: dict[tuple[str, int], str] = {}
    for i, res in enumerate(results):
        where = str(sources[i]) if i < len(sources) else f"result #{i}"
        cfg, m = res["config"], res["metrics"]
        label = config_label(cfg) + stack_label(res)
        key = metric or headline_metric(res)
        if key is None or not _is_number(m.get(key)):
            numeric = sorted(k for k, v in m.items() if _is_number(v))
            raise InvalidInputError(f"{where} ({label}, seed {cfg.get('seed')}) has no numeric metric "
                                    f"{key or ' or '.join(HEADLINE_METRICS)!r}; its metrics: {numeric} (--metric KEY)")
        g = groups.setdefault(label, RunGroup(label, key))
        seed = int(cfg.get("seed", 0))
        if (label, seed) in first:
            raise InvalidInputError(f"two runs of {label} with seed {seed}: {first[label, seed]} and {where}; "
                                    "name the files or folders of one of them")
        first[label, seed] = where
        g.seeds.append(seed)
        g.values.append(float(m[key]))
        final = m.get(f"final_{key}", m.get("final_test") if key == "test_acc" else None)  # node tasks: final_test
        if _is_number(final):
            g.finals.append(float(final))
        g.flights.append(float(res.get("communication_rounds", math.nan)))
        g.megabytes.append(float(res.get("bytes_total", math.nan)) / 1e6)
        g.wall.append(float(res.get("wall_seconds", math.nan)))
    return [g.row() for g in groups.values()]


def to_markdown(rows: Sequence[dict[str, Any]], metric: str | None = None) -> str:
    """The rows as a markdown table (per-seed values in seed order); with rows of different
    metrics (node and graph tasks together) a ``metric`` column says which each row reports."""
    metrics = {r.get("metric") or metric for r in rows}
    shown = metric or (metrics.pop() if len(metrics) == 1 else None)
    name = shown or "score"
    lines = [(f"| config |{'' if shown else ' metric |'} runs | {name} mean ± std | per seed | final {name} | "
             "flights | MB | wall s |"),
             f"|---|{'' if shown else '---|'}---|---|---|---|---|---|---|"]
    for r in rows:
        order = sorted(range(len(r["seeds"])), key=lambda i: r["seeds"][i])
        per_seed = ", ".join(f"{r['values'][i]:.3f}" for i in order)
        final = f"{r['final_mean']:.3f} ± {r['final_std']:.3f}" if r["final_mean"] is not None else "—"
        which = "" if shown else f" {r.get('metric')} |"
        lines.append(f"| {r['config']} |{which} {r['runs']} | {r['mean']:.3f} ± {r['std']:.3f} | {per_seed} | {final} | "
                     f"{r['flights']:.0f} | {r['mb_total']:.1f} | {r['wall_s']:.0f} |")
    return "\n".join(lines)


def _mean(xs: Sequence[float]) -> float:
    return statistics.fmean(xs) if xs else math.nan


def _std(xs: Sequence[float]) -> float:
    return statistics.stdev(xs) if len(xs) > 1 else 0.0


__all__ = ["HEADLINE_METRICS", "config_label", "find_results", "headline_metric", "load_result", "stack_label",
           "summarize", "to_markdown"]
