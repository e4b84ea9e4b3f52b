"""Epsilon-utility curves of declared releases: the release's attacks and the accuracy at each
value of its DP knob, beside the no-DP point (the matrix cell itself).

A stack knob rewrites one transform parameter of a shipped stack (``noise_multiplier`` of the
``dp_gaussian`` on the released tag) into a derived stack file under ``<out>/stacks/``; an
option knob sets a method option. Each point is an audit of the protected stack only, with
just the release's attacks (the plaintext column would be the same at every point). Points
are cached like cells.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from securefg.audit.matrix.cell_runner import accuracy, condense, headline_epsilon, run_config
from securefg.audit.matrix.plan import MatrixCell, with_run
from securefg.errors import ConfigError
from securefg.protocol.releases import DeclaredRelease, ReleaseKnob


def knob_stack_file(knob: ReleaseKnob, value: float, folder: Path) -> Path:
    """A copy of the knob's stack with ``param = value`` in the transforms of its tag."""
    from securefg.protocol.stack import ProtocolStack
    from securefg.toml_files import protocols_dir, read_named_toml

    assert knob.stack is not None and knob.tag is not None and knob.param is not None
    data, _ = read_named_toml(knob.stack, protocols_dir(), "protocol stack")
    table = data.get("tags", {}).get(knob.tag)
    transforms = [] if table is None else table.get("transforms", [])
    hit = [t for t in transforms if knob.param in t]
    if not hit:
        raise ConfigError(f"release knob: stack {knob.stack!r} has no transform with {knob.param!r} on tag {knob.tag!r}")
    for t in hit:
        t[knob.param] = float(value)
    name = f"{knob.stack}-{knob.param}-{value:g}"
    data["name"] = name
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.toml"
    path.write_text(_dump_toml(data))
    ProtocolStack.load(path)  # validate: a knob value the stack refuses fails here, named
    return path


def _dump_toml(data: dict[str, Any]) -> str:
    """A stack document as TOML (top-level keys, then ``[[releases]]``, then ``[tags."..."]``)."""
    from securefg.toml_files import toml_value

    lines = [f"{k} = {toml_value(v)}" for k, v in data.items() if k not in ("tags", "releases")]
    for rel in data.get("releases", []):
        lines += ["", "[[releases]]"] + [f"{k} = {toml_value(v)}" for k, v in rel.items()]
    for tag, table in data.get("tags", {}).items():
        lines += ["", f"[tags.{json.dumps(tag)}]"] + [f"{k} = {toml_value(v)}" for k, v in table.items()]
    return "\n".join(lines) + "\n"


def point_cell(cell: MatrixCell, knob: ReleaseKnob, value: float, folder: Path) -> tuple[MatrixCell, str | None]:
    """The cell at one knob value, and the stack file it runs under (``None``: the default)."""
    if knob.option is not None:
        return with_run(cell, options={**knob.with_options, knob.option: value}), None
    return cell, str(knob_stack_file(knob, value, folder / "stacks"))


def trace(cell: MatrixCell, row: dict[str, Any], releases: list[DeclaredRelease], out_root: Path, *,
          data_root: str | None = None, device: str = "auto", fresh: bool = False,
          cached_only: bool = False) -> dict[str, Any] | None:
    """The curve of releases sharing one knob: no-DP (the cell's row) and one audited point per
    knob value, each playing every attack of those releases."""
    from securefg.audit.auditor import audit
    from securefg.audit.threat_model import ThreatModel
    from securefg.experiment import resolve_stack

    knob = releases[0].knob
    assert knob is not None and all(r.knob == knob for r in releases)

    def covered(attack: str) -> bool:
        return any(r.covers(attack) for r in releases)

    tm = ThreatModel.load(cell.threat_model)
    tm = replace(tm, attacks=tuple(a for a in tm.attacks if covered(a.attack)))
    base_attacks = {a["attack"]: a for a in row["attacks"] if covered(a["attack"])}
    points = [{"value": None, "epsilon": row.get("epsilon"), "stack": row["stack"],
               "accuracy": row["accuracy"]["protected"],
               "attacks": {k: _point_attack(a) for k, a in base_attacks.items()}}]
    tags = [r.tag for r in releases]
    folder = out_root / "curves" / f"{cell.key}__{'+'.join(t.replace('/', '-') for t in tags)}"
    for value in knob.values:
        done = folder / f"point_{value:g}.json"
        if done.exists() and not fresh:
            points.append(json.loads(done.read_text()))
            continue
        if cached_only:
            return None
        pcell, stack_file = point_cell(cell, knob, value, folder)
        cfg = run_config(pcell, data_root=data_root, device=device, protocol=stack_file)
        releases = resolve_stack(cfg).releases
        t0 = time.perf_counter()
        report = audit(cfg, tm, folder / f"point_{value:g}", plaintext=False)
        prow = condense(pcell, report, releases, time.perf_counter() - t0)
        _, acc = accuracy(report.run["protected_run"])
        point = {"value": value, "epsilon": headline_epsilon(report.run["protected_run"].get("privacy")),
                 "stack": report.run["protocol"], "accuracy": acc, "seconds": prow["seconds"],
                 "attacks": {a["attack"]: _point_attack(a) for a in prow["attacks"]}}
        done.parent.mkdir(parents=True, exist_ok=True)
        done.write_text(json.dumps(point, indent=1, default=str))
        points.append(point)
    return {"cell": cell.key, "tags": tags, "knob": knob.to_dict(), "knob_text": knob.describe(),
            "accuracy_metric": row["accuracy"]["metric"], "points": points}


def _point_attack(a: dict[str, Any]) -> dict[str, Any]:
    """One attack at one curve point; ``exceeded`` whether or not the stack declares the release."""
    out = {k: a.get(k) for k in ("value", "baseline", "advantage", "margin", "verdict")}
    if out["verdict"] in ("release", "fail"):
        out["verdict"] = "exceeded"
    return out


__all__ = ["knob_stack_file", "point_cell", "trace"]
