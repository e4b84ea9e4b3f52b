"""Find and read a method's preset file, and fill a run's unset values from it.

Why here and not in each method: the values a paper tunes per dataset (FED-PUB's local epochs,
FedStruct's Table 4 step sizes) are data about a setting, not code of the method; one TOML file
per method (``securefg/presets/<method>.toml``, one ``[<dataset>.<partition>]`` table each) keeps
them with their provenance and lets ``securefg tune`` replace them by a recorded study.
Explicit values always win: a preset fills only what the user left unset.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import tomllib

from securefg.errors import ConfigError
from securefg.presets.preset import Preset, parse_table

#: The shipped presets folder (``SECUREFG_PRESETS`` overrides it, e.g. for tests).
_SHIPPED = Path(__file__).resolve().parent
#: Methods that read another method's file when they have none of their own.
ALIASES: dict[str, str] = {"fedsage_plus": "fedsage"}


def presets_dir() -> Path:
    """Folder of the preset files (``SECUREFG_PRESETS`` overrides the shipped one)."""
    env = os.environ.get("SECUREFG_PRESETS")
    return Path(env) if env else _SHIPPED


def preset_files(method: str) -> list[Path]:
    """The files ``method`` reads, first match wins: ``<method>.toml``, then its alias's."""
    key = method.lower().replace("-", "_")
    names = [n for n in (key, ALIASES.get(key)) if n]
    return [presets_dir() / f"{n}.toml" for n in names if (presets_dir() / f"{n}.toml").is_file()]


def preset_file(method: str) -> Path | None:
    """The first file ``method`` reads (:func:`preset_files`); ``None`` if it has none."""
    files = preset_files(method)
    return files[0] if files else None


def load_presets(path: Path, *, method: str) -> dict[tuple[str, str], Preset]:
    """Every table of one preset file, keyed by ``(dataset lower-cased, partition)``.

    Args:
        path (Path): The TOML file.
        method (str): The method whose options the tables may set.

    Raises:
        ConfigError: The file cannot be read or parsed, or any table is invalid (one ``- line``
            per problem, with the file's path).
    """
    from securefg.methods.base import method_class

    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the preset file: {exc}") from exc
    option_defaults = method_class(method).option_defaults
    problems: list[str] = []
    out: dict[tuple[str, str], Preset] = {}
    for dataset, parts in data.items():
        if not isinstance(parts, Mapping) or not all(isinstance(t, Mapping) for t in parts.values()):
            problems.append(f"[{dataset}]: must hold one table per partition, like [{dataset}.metis]")
            continue
        for partition, table in parts.items():
            preset = parse_table(table, dataset=dataset, partition=partition, file=path,
                                 option_defaults=option_defaults, problems=problems)
            if preset is not None:
                out[(dataset.lower(), partition.lower())] = preset
    if problems:
        raise ConfigError(f"{path}: invalid preset file:\n" + "\n".join(f"- {p}" for p in problems))
    return out


def preset_for(method: str, dataset: str, partition: str | None) -> Preset | None:
    """The preset table for ``method`` on ``dataset`` under ``partition`` (``None``: the default
    partition), or ``None`` when the method has no file or the file no such table.

    Raises:
        ConfigError: The method's preset file is invalid.
    """
    from securefg.run_config import resolved_partition

    part = resolved_partition(dataset, partition)
    key = (canonical_dataset(dataset).lower(), part)
    for path in preset_files(method):
        preset = load_presets(path, method=method).get(key)
        if preset is not None:
            return preset
    return None


def canonical_dataset(name: str) -> str:
    """The catalog's spelling of ``name`` (``coauthor-cs`` -> ``CS``); a synthetic or unknown name
    as given."""
    from securefg.data.catalog import get_spec

    try:
        return get_spec(name).name
    except ConfigError:
        return name


def apply_preset(cfg: Any) -> tuple[Any, dict[str, Any]]:
    """``cfg`` with its unset values filled from its preset, and the ``result.json`` block.

    A value counts as set when the :class:`~securefg.run_config.RunConfig` field is not ``None``
    (``lr``, ``weight_decay``, ``local_epochs``) or the option key is present; set values are
    never replaced. ``cfg.preset = False`` applies nothing.

    Returns:
        (the configuration to run, ``{"enabled", "file", "table", "source", "reference",
        "applied", "overridden"}``).
    """
    if not getattr(cfg, "preset", True):
        return cfg, {"enabled": False, "applied": {}}
    preset = preset_for(cfg.method, cfg.dataset, cfg.partition)
    if preset is None:
        return cfg, {"enabled": True, "file": _shown(preset_file(cfg.method)), "table": None, "applied": {}}
    applied: dict[str, Any] = {}
    overridden: list[str] = []
    fields: dict[str, Any] = {}
    for key, value in preset.train_values().items():
        if getattr(cfg, key) is None:
            fields[key] = applied[key] = value
        else:
            overridden.append(key)
    options = dict(cfg.options)
    for key, value in preset.options.items():
        if key in options:
            overridden.append(f"options.{key}")
        else:
            options[key] = value
            applied[f"options.{key}"] = value
    block = {"enabled": True, "file": _shown(preset.file), "table": preset.table, "source": preset.source,
             "reference": preset.reference, "applied": applied, "overridden": overridden}
    if preset.note:
        block["note"] = preset.note
    return replace(cfg, options=options, **fields), block


def _shown(path: Path | None) -> str | None:
    """A shipped file as ``securefg/presets/<name>``, another by its full path."""
    if path is None:
        return None
    try:
        return str(path.resolve().relative_to(_SHIPPED.parents[1]))
    except ValueError:
        return str(path)


__all__ = ["ALIASES", "apply_preset", "canonical_dataset", "load_presets", "preset_file", "preset_files", "preset_for",
           "presets_dir"]
