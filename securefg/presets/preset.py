"""One preset table: the per-dataset training values a method starts from, with their provenance.

Why a record of its own: a preset value must say where it came from (the paper, the reference code,
or a recorded tuning study on validation data), so ``result.json`` can name it and a reader can
check it. :func:`parse_table` validates one TOML table into a :class:`Preset` and returns every
problem at once.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Sources a table may name besides ``study:<path>`` (a study json beside the presets).
SOURCES: tuple[str, ...] = ("paper", "reference code")
#: Prefix of a source that points at a recorded study (path relative to the presets folder).
STUDY_PREFIX = "study:"
#: Training keys a table may set (the :class:`~securefg.run_config.RunConfig` field of each).
TRAIN_KEYS: tuple[str, ...] = ("lr", "weight_decay", "local_epochs")
#: Every key a table may hold.
TABLE_KEYS: frozenset[str] = frozenset({*TRAIN_KEYS, "options", "source", "reference", "note"})


@dataclass(frozen=True)
class Preset:
    """The values of one ``[<dataset>.<partition>]`` table of ``presets/<method>.toml``.

    Args:
        dataset (str): The dataset as the table names it (``Cora``).
        partition (str): The node or graph partition (``metis``).
        file (Path): The preset file.
        source (str): ``"paper"``, ``"reference code"`` or ``"study:<path>"``.
        reference (str, optional): Which table, section or file of the paper or code, or what a
            study left untuned. (default: :obj:`None`)
        note (str, optional): Anything a reader must know (values deliberately left out). (default: :obj:`None`)
        lr (float, optional): Learning rate. (default: :obj:`None`: the method's)
        weight_decay (float, optional): Weight decay. (default: :obj:`None`: the method's)
        local_epochs (int, optional): Local epochs per round. (default: :obj:`None`: the method's)
        options (Mapping[str, Any]): Method options (``--option KEY=VALUE``). (default: none)
    """

    dataset: str
    partition: str
    file: Path
    source: str
    reference: str | None = None
    note: str | None = None
    lr: float | None = None
    weight_decay: float | None = None
    local_epochs: int | None = None
    options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def table(self) -> str:
        """The table's dotted name, ``Cora.metis``."""
        return f"{self.dataset}.{self.partition}"

    @property
    def study(self) -> str | None:
        """The study json's path relative to the presets folder, when the source is a study."""
        return self.source[len(STUDY_PREFIX):] if self.source.startswith(STUDY_PREFIX) else None

    def train_values(self) -> dict[str, Any]:
        """The training keys this table sets (unset ones left out)."""
        return {k: getattr(self, k) for k in TRAIN_KEYS if getattr(self, k) is not None}


def parse_table(data: Mapping[str, Any], *, dataset: str, partition: str, file: Path,
                option_defaults: Mapping[str, Any], problems: list[str]) -> Preset | None:
    """Validate one table; append a message per problem to ``problems`` (``None`` if any).

    Args:
        data (Mapping[str, Any]): The table as parsed.
        dataset (str): Its dataset key.
        partition (str): Its partition key.
        file (Path): The preset file (a study path is resolved beside it).
        option_defaults (Mapping[str, Any]): The method's options with their defaults: an option
            must be one of them, of the default's type.
        problems (list[str]): Where the problems go.
    """
    where = f"[{dataset}.{partition}]"
    before = len(problems)
    problems += [f"{where}: unknown key {k!r} (known: {sorted(TABLE_KEYS)})" for k in sorted(set(data) - TABLE_KEYS)]
    source = data.get("source")
    if not isinstance(source, str) or not (source in SOURCES or source.startswith(STUDY_PREFIX)):
        problems.append(f"{where}: 'source' must be one of {list(SOURCES)} or 'study:<path of the study json>', "
                        f"got {source!r}")
    elif source.startswith(STUDY_PREFIX) and not (file.parent / source[len(STUDY_PREFIX):]).is_file():
        problems.append(f"{where}: study file {source[len(STUDY_PREFIX):]!r} not found beside {file.name} "
                        "(record it with `securefg tune ... --write-preset`, or name the paper)")
    elif source in SOURCES and not isinstance(data.get("reference"), str):
        problems.append(f"{where}: a {source!r} source needs 'reference', the table or file the values come from")
    for key in ("reference", "note"):
        if key in data and not isinstance(data[key], str):
            problems.append(f"{where}: {key!r} must be a string, got {data[key]!r}")
    problems += _train_problems(data, where)
    options = data.get("options", {})
    if not isinstance(options, Mapping):
        problems.append(f"{where}: 'options' must be a table, got {options!r}")
        options = {}
    for key, value in options.items():
        if key not in option_defaults:
            problems.append(f"{where}: unknown option {key!r} (the method's options: {sorted(option_defaults)})")
        elif not _same_type(option_defaults[key], value):
            problems.append(f"{where}: option {key!r} must be a {type(option_defaults[key]).__name__} like its "
                            f"default {option_defaults[key]!r}, got {value!r}")
    if len(problems) > before:
        return None
    return Preset(dataset=dataset, partition=partition, file=file, source=str(source), reference=data.get("reference"),
                  note=data.get("note"), lr=data.get("lr"), weight_decay=data.get("weight_decay"),
                  local_epochs=data.get("local_epochs"), options=dict(options))


def _train_problems(data: Mapping[str, Any], where: str) -> list[str]:
    out = []
    for key, low, strict in (("lr", 0.0, True), ("weight_decay", 0.0, False)):
        v = data.get(key)
        if v is None:
            continue
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and (v > low if strict else v >= low)
        if not ok:
            out.append(f"{where}: {key!r} must be a finite number {'>' if strict else '>='} 0, got {v!r}")
    le = data.get("local_epochs")
    if le is not None and (isinstance(le, bool) or not isinstance(le, int) or le < 1):
        out.append(f"{where}: 'local_epochs' must be an integer >= 1, got {le!r}")
    return out


def _same_type(default: Any, value: Any) -> bool:
    if isinstance(default, bool) or isinstance(value, bool):
        return isinstance(default, bool) and isinstance(value, bool)
    if isinstance(default, float):
        return isinstance(value, (int, float)) and math.isfinite(value)
    return type(value) is type(default)


__all__ = ["SOURCES", "STUDY_PREFIX", "TABLE_KEYS", "TRAIN_KEYS", "Preset", "parse_table"]
