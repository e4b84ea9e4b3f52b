"""What was measured about why a cell sits far from its paper: ``docs/results/<method>_gaps.toml``.

Why a file beside the ledger: a results page says *that* a cell is more than the tolerance from
the paper; a reader also wants what is known about *why*, and that knowledge (a probe run, a
study, a finding in the reference code) comes from people, not from the cell runner. Keeping it
in a small committed TOML file lets ``--report-only`` rewrite the page without losing it, and
lets a reviewer see each explanation next to the figure it explains. Each entry names the
setting and row as the table does; an entry for a cell the table does not have is refused, so
a renamed row cannot leave a silent, orphaned note.

Format::

    [[gap]]
    setting = "Cora 20"
    row = "FedAvg"
    why = "best validation round is round 0 for every seed ..."
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

import tomllib

from securefg.errors import ConfigError, InvalidInputError

GapNotes = Mapping[tuple[str, str], str]


def gap_notes_path(page: str | Path) -> Path:
    """The notes file beside a results page: ``<page stem>_gaps.toml``."""
    page = Path(page)
    return page.with_name(f"{page.stem}_gaps.toml")


def load_gap_notes(path: str | Path, known: Iterable[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """``{(setting, row label): why}`` from ``path``; an absent file is no notes.

    Args:
        path: The TOML file.
        known: Every (setting, row label) the table has (the paper's cells).

    Raises:
        InvalidInputError: The file is not TOML, or an entry lacks a non-empty ``setting``, ``row`` or ``why``.
        ConfigError: An entry names a cell the table does not have, or a cell twice.
    """
    path = Path(path)
    if not path.is_file():
        return {}
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InvalidInputError(f"{path}: not a readable TOML file ({exc})") from exc
    entries = doc.get("gap", [])
    if not isinstance(entries, list):
        raise InvalidInputError(f"{path}: 'gap' must be an array of tables ([[gap]]), got {type(entries).__name__}")
    cells = set(known)
    out: dict[tuple[str, str], str] = {}
    for i, entry in enumerate(entries):
        fields = {k: entry.get(k) if isinstance(entry, dict) else None for k in ("setting", "row", "why")}
        bad = [k for k, v in fields.items() if not isinstance(v, str) or not v.strip()]
        if bad:
            raise InvalidInputError(f"{path}: gap #{i + 1} needs non-empty text for {bad}")
        key = (str(fields["setting"]), str(fields["row"]))
        if key not in cells:
            raise ConfigError(f"{path}: gap #{i + 1} names {key}, which is not a cell of this table; "
                              f"cells: {sorted(cells)}")
        if key in out:
            raise ConfigError(f"{path}: gap #{i + 1} names {key} a second time")
        out[key] = " ".join(str(fields["why"]).split())
    return out


__all__ = ["GapNotes", "gap_notes_path", "load_gap_notes"]
