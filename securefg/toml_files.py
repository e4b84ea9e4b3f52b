"""Shared reading of the project's named TOML files (protocol stacks, threat models).

Both kinds are looked up the same way (a path, or a bare name in a shipped folder) and both
report every top-level problem at once, so a user fixes a file in one pass.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import tomllib

from securefg.errors import ConfigError

#: The repository root: the shipped ``protocols/`` and ``threat_models/`` folders live there.
_REPO = Path(__file__).resolve().parents[1]


def protocols_dir() -> Path:
    """Folder of the shipped stacks (``SECUREFG_PROTOCOLS`` overrides)."""
    env = os.environ.get("SECUREFG_PROTOCOLS")
    return Path(env) if env else _REPO / "protocols"


def threat_models_dir() -> Path:
    """Folder of the shipped threat models (``SECUREFG_THREAT_MODELS`` overrides)."""
    env = os.environ.get("SECUREFG_THREAT_MODELS")
    return Path(env) if env else _REPO / "threat_models"


def read_named_toml(path_or_name: str | os.PathLike[str], folder: Path, kind: str) -> tuple[dict[str, Any], Path]:
    """Parse ``path_or_name`` (a file, or a bare name looked up as ``folder/<name>.toml``).

    Raises:
        ConfigError: The file does not exist (the message lists the shipped names), cannot
            be read, or is not valid UTF-8 or TOML.
    """
    path = Path(path_or_name)
    if not path.suffix and not path.exists():
        path = folder / f"{path_or_name}.toml"
    if not path.is_file():
        shipped = sorted(p.stem for p in folder.glob("*.toml"))
        raise ConfigError(f"{kind} {str(path_or_name)!r} not found; shipped {kind}s: {shipped}")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not valid UTF-8 (byte {exc.start}); save the {kind} as UTF-8 text") from exc
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read ({exc.strerror or exc})") from exc
    try:
        return tomllib.loads(text), path
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc


def top_level_problems(data: Mapping[str, Any], known: set[str]) -> list[str]:
    """Unknown top-level keys and a missing/empty ``name``, as messages."""
    problems = [f"unknown top-level key {k!r} (known: {sorted(known)})" for k in sorted(set(data) - known)]
    name = data.get("name")
    if not isinstance(name, str) or not name:
        problems.append("missing 'name' (a non-empty string)")
    return problems


def toml_value(v: Any) -> str:
    """One value as TOML (strings, numbers, booleans, lists, inline tables): what the files
    securefg writes for itself (derived stacks, run files) need; no dates, no nested arrays of tables."""
    import json
    import math

    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        if isinstance(v, float) and not math.isfinite(v):
            raise ValueError(f"cannot write {v!r} to TOML (a stack or run file holds finite numbers)")
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)  # a JSON string is a valid TOML basic string
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, Mapping):
        return "{ " + ", ".join(f"{json.dumps(str(k), ensure_ascii=False)} = {toml_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(f"cannot write {type(v).__name__} to TOML")

