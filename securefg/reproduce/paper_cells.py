"""The CeFGC paper's cells: parsed from ``shared/reference/targets.md``, else transcribed here.

The reference file's CeFGC section holds one markdown table, methods as rows and datasets as
columns (global-model ROC-AUC, single-dataset setting). The paper gives no figure for the other
settings in that file, nor for CeFGC+ (its Table 5 was lost) or a central GIN; those cells show
as missing in the table.
"""

from __future__ import annotations

from pathlib import Path

from securefg.errors import InvalidInputError

#: The paper's labels (rows of targets.md) -> registered method names.
PAPER_LABELS = {"FedAvg": "fedavg", "FedProx": "fedprox", "CeFGC": "cefgc", "CeFGC*": "cefgc_star",
                "CeFGC+": "cefgc_plus", "CeFGC*+": "cefgc_star_plus"}
#: targets.md's CeFGC table as of 2026-11 (used when the file is not reachable).
TRANSCRIBED: dict[tuple[str, str], float] = {
    ("MUTAG", "fedavg"): 0.78, ("PROTEINS", "fedavg"): 0.83,
    ("MUTAG", "fedprox"): 0.87, ("PROTEINS", "fedprox"): 0.83,
    ("MUTAG", "cefgc"): 0.91, ("PROTEINS", "cefgc"): 0.87,
    ("MUTAG", "cefgc_star"): 0.90, ("PROTEINS", "cefgc_star"): 0.87,
}
#: The reference file, relative to the repository root (the shared folder sits beside it).
DEFAULT_TARGETS = Path("..") / "shared" / "reference" / "targets.md"


def parse_cefgc_targets(text: str) -> dict[tuple[str, str], float]:
    """``{(setting, method): paper value}`` from the first table under a ``## CeFGC`` heading.

    Raises:
        InvalidInputError: No CeFGC section, no table in it, or a cell that is not a number.
    """
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("## CeFGC")), None)
    if start is None:
        raise InvalidInputError("no '## CeFGC' section in the targets file")
    rows: list[list[str]] = []
    for line in lines[start + 1:]:
        if line.startswith("## "):
            break
        if line.strip().startswith("|"):
            rows.append([c.strip() for c in line.strip().strip("|").split("|")])
        elif rows:
            break
    if len(rows) < 3:
        raise InvalidInputError("the '## CeFGC' section has no table of methods by dataset")
    header, body = rows[0], rows[2:]  # rows[1] is the |---| rule
    cells: dict[tuple[str, str], float] = {}
    for row in body:
        label = row[0].replace("\\*", "*")
        method = PAPER_LABELS.get(label)
        if method is None:
            raise InvalidInputError(f"unknown method {label!r} in the CeFGC targets table; known: {list(PAPER_LABELS)}")
        for dataset, value in zip(header[1:], row[1:], strict=False):
            try:
                cells[(dataset, method)] = float(value)
            except ValueError:
                if value not in ("", "—", "-"):
                    raise InvalidInputError(f"CeFGC target {label} / {dataset} is not a number: {value!r}") from None
    return cells


def paper_cells(path: str | Path | None = None) -> tuple[dict[tuple[str, str], float], str]:
    """The paper's cells and where they came from (the file read, or the transcription).

    Args:
        path (str | Path, optional): A targets file; when ``None``, :data:`DEFAULT_TARGETS` if it
            exists, else :data:`TRANSCRIBED`.

    Raises:
        InvalidInputError: A named file that is missing or does not parse.
    """
    if path is None:
        if not DEFAULT_TARGETS.is_file():
            return dict(TRANSCRIBED), "transcribed from shared/reference/targets.md (file not found)"
        path = DEFAULT_TARGETS
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise InvalidInputError(f"cannot read the targets file {p}: {exc}") from exc
    return parse_cefgc_targets(text), f"parsed from {p}"


__all__ = ["DEFAULT_TARGETS", "PAPER_LABELS", "TRANSCRIBED", "paper_cells", "parse_cefgc_targets"]
