"""Drive the matrix: cells, then curves of exceeded declared releases, then the page."""

from __future__ import annotations

import argparse
import datetime
import platform
import time
from pathlib import Path
from typing import Any

from securefg.audit.matrix.cell_runner import run_cell
from securefg.audit.matrix.curves import trace
from securefg.audit.matrix.page import cell_verdict, counts, write
from securefg.audit.matrix.plan import FULL, QUICK, THREAT_MODELS, MatrixCell, cells
from securefg.errors import ConfigError


def _names(text: str | None) -> tuple[str, ...] | None:
    return None if not text else tuple(x.strip() for x in text.split(",") if x.strip())


def plan_cells(args: argparse.Namespace) -> list[MatrixCell]:
    tms = _names(args.threat_models) or THREAT_MODELS
    unknown = sorted(set(tms) - set(THREAT_MODELS))
    if unknown:
        raise ConfigError(f"--threat-models: unknown {unknown}; the matrix covers {list(THREAT_MODELS)}")
    plans = QUICK if args.quick else FULL
    methods = _names(args.methods)
    if methods:
        known = {p.method for p in plans}
        bad = sorted(set(methods) - known)
        if bad:
            raise ConfigError(f"--methods: {bad} not in the matrix; choices: {sorted(known)}")
    return cells(plans, methods=methods, threat_models=tms)


def command_text(args: argparse.Namespace) -> str:
    parts = ["securefg audit --matrix"] + (["--quick"] if args.quick else [])
    for flag in ("methods", "threat_models"):
        if getattr(args, flag):
            parts.append(f"--{flag.replace('_', '-')} {getattr(args, flag)}")
    if args.no_curves:
        parts.append("--no-curves")
    return " ".join(parts)


def restore_cells(doc_path: Path, out: Path) -> tuple[int, int]:
    """Seed ``out`` with the finished cells and curve points of a written matrix JSON, so a
    fresh checkout can rerun one method and render the whole page; ``(cells, points)`` written.

    A cell or point already in ``out`` is left as it is. A restored cell is reused only while its
    recorded inputs (run, stack content, threat model) match today's, as any finished cell.

    Raises:
        InvalidInputError: The file is missing or is not a matrix JSON.
    """
    import json

    from securefg.errors import InvalidInputError

    try:
        doc = json.loads(doc_path.read_text(encoding="utf-8"))
        rows, curves = list(doc["rows"]), list(doc["curves"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InvalidInputError(f"--restore-from {doc_path}: not a readable privacy matrix JSON ({exc})") from None
    cells_written = points_written = 0
    for row in rows:
        if not isinstance(row, dict) or "cell" not in row or "inputs" not in row:
            raise InvalidInputError(f"--restore-from {doc_path}: a row without its cell key and inputs")
        done = out / "cells" / str(row["cell"]) / "cell.json"
        if not done.exists():
            done.parent.mkdir(parents=True, exist_ok=True)
            done.write_text(json.dumps(row, indent=1, default=str))
            cells_written += 1
    for curve in curves:
        folder = out / "curves" / f"{curve['cell']}__{'+'.join(t.replace('/', '-') for t in curve['tags'])}"
        for point in curve["points"]:
            if point.get("value") is None:  # the no-DP point is the cell's own row
                continue
            done = folder / f"point_{float(point['value']):g}.json"
            if not done.exists():
                done.parent.mkdir(parents=True, exist_ok=True)
                done.write_text(json.dumps(point, indent=1, default=str))
                points_written += 1
    return cells_written, points_written


def run_matrix(args: argparse.Namespace) -> int:
    """Run the matrix described by the CLI arguments; return the exit code."""
    out = Path(args.out or ("runs/privacy_matrix_quick" if args.quick else "runs/privacy_matrix"))
    page = Path(args.page) if args.page else (out / "privacy-matrix.md" if args.quick else Path("docs/privacy-matrix.md"))
    if getattr(args, "restore_from", None):
        n_cells, n_points = restore_cells(Path(args.restore_from), out)
        print(f"restored {n_cells} cells and {n_points} curve points from {args.restore_from} into {out}", flush=True)
    todo = plan_cells(args)
    t0 = time.perf_counter()
    rows: list[dict[str, Any]] = []
    curves: list[dict[str, Any]] = []
    missing: list[str] = []
    cached = bool(getattr(args, "render_only", False))
    for i, cell in enumerate(todo, 1):
        print(f"[{i}/{len(todo)}] {cell.label} vs {cell.threat_model} ({cell.row})", flush=True)
        row = run_cell(cell, out, data_root=args.data_root, device=args.device, fresh=args.fresh and not cached,
                       cached_only=cached)
        if row is None:
            missing.append(cell.command())
            print("    not run", flush=True)
            continue
        rows.append(row)
        print(f"    {row['verdict']}  ({row['seconds']:.0f} s)", flush=True)
        if args.no_curves or row["verdict"] != "release":
            continue
        for group in knob_groups(cell, row, args):
            knob = group[0].knob
            print(f"    curve of {', '.join(r.tag for r in group)}: {knob.describe()} at {list(knob.values)}", flush=True)
            curve = trace(cell, row, group, out, data_root=args.data_root, device=args.device,
                          fresh=args.fresh and not cached, cached_only=cached)
            if curve is not None:
                curves.append(curve)
    seconds = time.perf_counter() - t0
    if cached:  # the page reports the audits' own time, not the rendering's
        seconds = sum(r["seconds"] for r in rows) + sum(p.get("seconds") or 0 for c in curves for p in c["points"])
    doc = {
        "command": command_text(args), "when": datetime.date.today().isoformat(), "seconds": seconds,
        "machine": f"{platform.machine()} {platform.system()}, {_cpus()} CPU cores", "out": str(out),
        "counts": counts(rows, curves), "rows": rows, "curves": curves, "not_run": missing,
    }
    page_path, json_path = write(doc, page)
    verdicts = [cell_verdict(r, curves) for r in rows]
    print(f"verdict counts: {doc['counts']}")
    print(f"wrote {page_path} and {json_path} ({seconds / 60:.1f} min)")
    if "error" in verdicts:
        return 3
    if missing:
        return 1
    return 1 if ("fail" in verdicts or "release without curve" in verdicts) else 0


def knob_groups(cell: MatrixCell, row: dict[str, Any], args: argparse.Namespace) -> list[list[Any]]:
    """The exceeded releases of a cell that have a knob, grouped by knob (one curve per knob)."""
    from securefg.audit.matrix.cell_runner import run_config
    from securefg.experiment import resolve_stack

    tags = {a["release"] for a in row["attacks"] if a["verdict"] == "release"}
    stack = resolve_stack(run_config(cell, data_root=args.data_root, device=args.device))
    groups: dict[str, list[Any]] = {}
    for r in stack.releases:
        if r.tag in tags and r.knob is not None:
            groups.setdefault(repr(r.knob), []).append(r)
    return list(groups.values())


def _cpus() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)

__all__ = ["plan_cells", "run_matrix"]
