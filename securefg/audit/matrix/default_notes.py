"""Why a default stack that fails a cell stays the default: the page's answer, cell by cell.

A default moves when its protection is cheap (issue 43: a stack that passes at no more than one
point of the method's documented accuracy over three seeds). Where no such stack exists, the
page says so next to the failing cell, with the measurement behind it; the figures below were
measured as their text says (docs/robust.md has the runs).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

#: (method, threat model) -> why the default stays although the cell fails.
DEFAULT_NOTES: Mapping[tuple[str, str], str] = {
    ("fedavg", "malicious_client"): (
        "The default is `fedavg_secure_robust` (`masked_robust`: multi-Krum by a key holder on encrypted sketches, "
        "the kept updates summed by SecAgg+), chosen because it costs no accuracy (seeds 0-2: 0.6615 / 0.7401 / "
        "0.6481 against 0.6757 / 0.5902 / 0.6399 under `fedavg_secure_sum`, docs/robust.md) at 3.4x the run time. "
        "A poisoned update that stays within the honest spread passes multi-Krum; the failing attacks are listed "
        "in the row."
    ),
    ("cefgc", "malicious_client"): (
        "The default is `cefgc_robust` with the receiver screen (issue 43): R3 carries each client's GIN change "
        "from W0 and a key holder drops a change above 3x the median norm, judged on encrypted sketches; each "
        "receiver drops the units of a sender whose declared labels a relabelling among its own classes fits "
        "better, judged against graphs from its own generators. MUTAG seeds 0-2: the same test AUC as `cefgc` "
        "without the screen (docs/robust.md). A change kept within 3x the median norm, a sender declaring a "
        "single class, and a spoof within a class's statistics pass; the failing attacks are listed in the row."
    ),
}


def why_defaults_stay(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Page lines: for each failing cell on a default stack, why that default stays.

    Args:
        rows: The matrix rows (``method``, ``threat_model``, ``row``, ``verdict``, ``label``).
    """
    out = []
    for r in rows:
        if r.get("row", "default") != "default" or r.get("verdict") != "fail":
            continue
        note = DEFAULT_NOTES.get((str(r.get("method", "")), str(r["threat_model"])))
        if note is None:
            out.append(f"* **{r['label']}, {r['threat_model']}**: no note; the default stays unexamined.")
            continue
        out.append(f"* **{r['label']}, {r['threat_model']}**: {note}")
    return out


__all__ = ["DEFAULT_NOTES", "why_defaults_stay"]
