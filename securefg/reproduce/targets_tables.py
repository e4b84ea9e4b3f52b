"""The paper tables of ``shared/reference/targets.md``, read generically: one section, its markdown tables.

Each method's section (``## FED-PUB ...``) holds one or more tables, rows = methods and columns =
settings. A reproduction names its cells by (table index, column index) and the row label, so
two tables of one section with the same column header ("Cora 10" disjoint and overlapping) stay
apart. Blank cells (the paper gives no figure) are left out.
"""

from __future__ import annotations

from pathlib import Path

from securefg.errors import InvalidInputError

#: The reference file, relative to the repository root (the shared folder sits beside it).
DEFAULT_TARGETS = Path("..") / "shared" / "reference" / "targets.md"

Table = list[list[str]]  # rows of cells; row 0 is the header (the |---| rule dropped)


def section_tables(text: str, heading: str) -> list[Table]:
    """Every markdown table of the first section whose heading line starts with ``heading``.

    Raises:
        InvalidInputError: No such section, or one without a table.
    """
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(heading)), None)
    if start is None:
        raise InvalidInputError(f"no {heading!r} section in the targets file")
    tables: list[Table] = []
    current: Table = []
    for line in [*lines[start + 1:], ""]:
        if line.startswith("## "):
            break
        stripped = line.strip()
        if stripped.startswith("|"):
            cells = [c.strip() for c in stripped.strip("|").split("|")]
            if not all(set(c) <= set("-: ") for c in cells):  # skip the |---| rule
                current.append(cells)
        elif current:
            tables.append(current)
            current = []
    if current:
        tables.append(current)
    if not tables:
        raise InvalidInputError(f"the {heading!r} section has no table")
    return tables


def table_cells(tables: list[Table], *, scale: float = 1.0) -> dict[tuple[int, int, str], float]:
    """``{(table index, column index, row label): value * scale}`` for every numeric cell.

    Raises:
        InvalidInputError: A non-blank cell that is not a number.
    """
    out: dict[tuple[int, int, str], float] = {}
    for t, table in enumerate(tables):
        for row in table[1:]:
            label = row[0].replace("\\*", "*")
            for c, value in enumerate(row[1:], start=1):
                if value in ("", "—", "-"):
                    continue
                try:
                    out[(t, c, label)] = float(value) * scale
                except ValueError:
                    raise InvalidInputError(f"target {label!r} / column {c} of table {t} is not a number: "
                                            f"{value!r}") from None
    return out


def read_targets(path: str | Path | None) -> tuple[str | None, str]:
    """The targets file's text (``None`` when the default file is absent) and where it came from.

    Raises:
        InvalidInputError: A named file that cannot be read.
    """
    if path is None:
        if not DEFAULT_TARGETS.is_file():
            return None, "transcribed from shared/reference/targets.md (file not found)"
        path = DEFAULT_TARGETS
    p = Path(path)
    try:
        return p.read_text(encoding="utf-8"), f"parsed from {p}"
    except OSError as exc:
        raise InvalidInputError(f"cannot read the targets file {p}: {exc}") from exc


__all__ = ["DEFAULT_TARGETS", "read_targets", "section_tables", "table_cells"]
