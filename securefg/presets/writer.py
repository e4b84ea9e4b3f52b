"""Write one preset table into a method's preset file, leaving every other table (and comment)
as it was.

Why text surgery and not a TOML round trip: the shipped files carry comments saying where each
value comes from; a parse-and-dump would drop them. The table ``[<dataset>.<partition>]`` and its
``.options`` subtable are replaced (or appended), then the file is re-read and validated; an
invalid result restores the old text.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from securefg.presets.preset import TRAIN_KEYS
from securefg.toml_files import toml_value


def table_text(dataset: str, partition: str, *, source: str, reference: str, values: Mapping[str, Any],
               options: Mapping[str, Any]) -> str:
    """The TOML text of one table (training keys first, then its ``options`` subtable)."""
    lines = [f"[{dataset}.{partition}]", f"source = {toml_value(source)}", f"reference = {toml_value(reference)}"]
    lines += [f"{k} = {toml_value(values[k])}" for k in TRAIN_KEYS if k in values]
    if options:
        lines += ["", f"[{dataset}.{partition}.options]"] + [f"{k} = {toml_value(v)}" for k, v in sorted(options.items())]
    return "\n".join(lines) + "\n"


def replace_table(text: str, dataset: str, partition: str, new: str) -> str:
    """``text`` with table ``[dataset.partition]`` (and its subtables) replaced by ``new``, or
    ``new`` appended when the file has no such table."""
    head = f"[{dataset}.{partition}]"
    lines = text.splitlines(keepends=True)
    start = next((i for i, ln in enumerate(lines) if ln.strip() == head), None)
    if start is None:
        return text.rstrip("\n") + ("\n\n" if text.strip() else "") + new
    end = start + 1
    while end < len(lines):
        s = lines[end].strip()
        if s.startswith("[") and not s.startswith(f"[{dataset}.{partition}."):
            break
        end += 1
    while end > start + 1 and (not lines[end - 1].strip() or lines[end - 1].lstrip().startswith("#")):
        end -= 1  # blank lines and comments just above the next table belong to it
    return "".join(lines[:start]) + new + "".join(lines[end:])


def write_table(path: Path, *, method: str, dataset: str, partition: str, source: str, reference: str,
                values: Mapping[str, Any], options: Mapping[str, Any]) -> None:
    """Write the table into ``path`` (created with a header when missing) and validate the file.

    Raises:
        ConfigError: The written file does not validate (the old text is restored).
    """
    from securefg.presets.loader import load_presets

    existed = path.is_file()
    old = path.read_text(encoding="utf-8") if existed else (
        f"# {method} presets: one table per dataset and partition (docs/presets.md).\n")
    new = replace_table(old, dataset, partition, table_text(dataset, partition, source=source, reference=reference,
                                                            values=values, options=options))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(new, encoding="utf-8")
    try:
        load_presets(path, method=method)
    except Exception:
        if existed:
            path.write_text(old, encoding="utf-8")
        else:
            path.unlink()
        raise


__all__ = ["replace_table", "table_text", "write_table"]
