"""Run one matrix cell (one audit) and condense its report into a row; resumable per cell.

A finished cell leaves ``<out>/cells/<key>/cell.json`` beside the audit's own ``audit.json``
and ``report.md``; a rerun reads it instead of auditing again, unless the cell's run, its
stack's content or its threat model changed (a new default stack reruns the method's cells;
``--fresh`` reruns anyway). The row
keeps, per attack, the value on the default stack and on plaintext, the side-knowledge
baseline, the advantage, the margin the threat model allows, and a verdict that tells a
declared release (the stack names it, :mod:`securefg.protocol.releases`) from a failure.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from securefg.audit.matrix.plan import MatrixCell

#: Attack verdicts, worst first (a cell takes the worst of its attacks).
VERDICTS = ("error", "fail", "release", "pass", "report", "n/a")


def run_config(cell: MatrixCell, *, data_root: str | None, device: str, protocol: str | None = None) -> Any:
    """The :class:`~securefg.run_config.RunConfig` of a cell (its own stack, else the method's default,
    unless ``protocol``)."""
    from securefg.run_config import RunConfig

    run = dict(cell.run)
    options = dict(run.pop("options", {}))
    protocol = protocol or run.pop("protocol", None)
    run.pop("protocol", None)
    return RunConfig(method=cell.method, protocol=protocol, data_root=data_root, device=device, progress=False,
                     options=options, **run)


def attack_verdict(entry: Any, releases: tuple[Any, ...]) -> str:
    """``pass`` / ``fail`` / ``release`` (exceeded, but a release the stack declares) / ..."""
    if entry.status == "skipped":
        return "n/a"
    if entry.status == "error":
        return "error"
    if entry.passed is None:
        return "report"
    if entry.passed:
        return "pass"
    return "release" if any(r.covers(entry.attack) for r in releases) else "fail"


def worst(verdicts: list[str]) -> str:
    return min(verdicts, key=VERDICTS.index) if verdicts else "n/a"


def headline_epsilon(privacy: object) -> float | None:
    """The largest finite ``epsilon`` anywhere in a run's privacy block (the worst-off client)."""
    found: list[float] = []

    def walk(x: object) -> None:
        if isinstance(x, Mapping):
            for k, v in x.items():
                if k == "epsilon" and isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
                    found.append(float(v))
                else:
                    walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(privacy)
    return max(found) if found else None


def accuracy(run_summary: Mapping[str, Any]) -> tuple[str | None, float | None]:
    """The run's headline utility: test accuracy (node tasks) or test ROC-AUC (graph tasks)."""
    metrics = run_summary.get("metrics", {}) or {}
    for key in ("test_auc", "test_acc"):
        value = metrics.get(key)
        if isinstance(value, (int, float)) and math.isfinite(value):
            return key, float(value)
    return None, None


def condense(cell: MatrixCell, report: Any, releases: tuple[Any, ...], seconds: float) -> dict[str, Any]:
    """The matrix row of one audit report."""
    attacks = []
    for a in report.attacks:
        verdict = attack_verdict(a, releases)
        margin = None if a.budget is None or a.chance is None else a.budget - a.chance
        attacks.append({
            "key": a.key, "attack": a.attack, "metric": a.metric, "status": a.status, "verdict": verdict,
            "value": a.value, "plaintext_value": a.plaintext_value, "baseline": a.baseline, "chance": a.chance,
            "advantage": a.advantage, "margin": margin, "budget": a.budget,
            "release": next((r.tag for r in releases if r.covers(a.attack)), None),
            "reason": a.reason[:200] if a.status != "ran" else "",
        })
    metric, protected_acc = accuracy(report.run["protected_run"])
    _, plain_acc = accuracy(report.run.get("plaintext_run", {}))
    ran = [x["verdict"] for x in attacks if x["verdict"] != "n/a"]
    return {
        "cell": cell.key, "method": cell.method, "label": cell.label, "threat_model": cell.threat_model,
        "row": cell.row, "run": dict(cell.run), "command": cell.command(),
        "stack": report.run["protocol"], "plaintext_stack": report.run.get("plaintext_protocol"),
        "exit_code": report.exit_code, "verdict": worst(ran),
        "accuracy": {"metric": metric, "protected": protected_acc, "plaintext": plain_acc},
        "epsilon": headline_epsilon(report.run["protected_run"].get("privacy")),
        "releases": [r.to_dict() for r in releases],
        "attacks": attacks, "seconds": round(seconds, 1),
    }


def cell_inputs(cell: MatrixCell, stack: Any, tm: Any) -> dict[str, Any]:
    """What a finished cell's result depends on: its run, its stack's content, its threat model."""
    import hashlib

    from securefg.protocol.stack_identity import content_sha256

    tm_text = json.dumps(tm.to_dict() | {"source": None}, sort_keys=True, default=str)
    return {"run": json.loads(json.dumps(cell.run, default=str)), "stack": stack.name,
            "stack_sha256": content_sha256(stack), "threat_model_sha256": hashlib.sha256(tm_text.encode()).hexdigest()}


def run_cell(cell: MatrixCell, out_root: Path, *, data_root: str | None = None, device: str = "auto",
             fresh: bool = False, cached_only: bool = False) -> dict[str, Any] | None:
    """Audit one cell (or read its finished row) and return the row (``None``: not finished and
    ``cached_only``)."""
    from securefg.audit.auditor import audit
    from securefg.audit.render import write_report
    from securefg.audit.threat_model import ThreatModel
    from securefg.experiment import resolve_stack

    folder = out_root / "cells" / cell.key
    done = folder / "cell.json"
    cfg = run_config(cell, data_root=data_root, device=device)
    stack = resolve_stack(cfg)
    tm = ThreatModel.load(cell.threat_model)
    inputs = cell_inputs(cell, stack, tm)
    if done.exists() and not fresh:
        row = dict(json.loads(done.read_text()))
        if row.get("inputs") == inputs:  # same run, stack and threat model: resume
            return row
    if cached_only:
        return None
    folder.mkdir(parents=True, exist_ok=True)
    releases = stack.releases
    t0 = time.perf_counter()
    report = audit(cfg, tm, folder)
    write_report(report, folder)
    row = {**condense(cell, report, releases, time.perf_counter() - t0), "inputs": inputs}
    done.write_text(json.dumps(row, indent=1, default=str))
    return row


__all__ = ["VERDICTS", "accuracy", "attack_verdict", "cell_inputs", "condense", "headline_epsilon", "run_cell", "run_config", "worst"]
