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
        "CeFGC's one FedAvg round averages three clients' full GIN weights once. The norm filter on them "
        "(`--option robust=norm_filter`) leaves the sign flip x10 at 0.150 (seed 0): a full model's norm is "
        "dominated by the public W0, so a boosted change does not stand out, and with three clients no "
        "majority rule applies. The spoofed generators are relayed, not aggregated; the "
        "receiver-side screen (`--option screen_generators=true`) stops them on MUTAG but costs test AUC "
        "0.971 -> 0.919 (docs/robust.md), so it stays off; a screen by a probe GIN trained on the receiver's "
        "own graphs dropped 2-6 of 12 honest units per run (seeds 0-2; docs/robust.md) and is not shipped."
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
