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
    ("fedstruct", "malicious_client"): (
        "The `robust=krum-trim0.1` row (multi-Krum dropping one client in ten from θ's and from ∇S's "
        "gradients, `masked_robust`) stops the poisoning, but the server then reads the robust ∇S sum: ∇S "
        "loses the server blindness the default gives it (issue 22; the curious server's `nsf_link` reads "
        "0.500 on the default, 0.939 on plaintext), so choosing it trades a curious-server cell for this one, "
        "and it costs 1.53 points of accuracy over seeds 0-2 (0.7982 / 0.7627 / 0.8047 against 0.7969 / 0.8038 / "
        "0.8107 at 20 rounds): it stays an option. Multi-Krum on θ alone, with ∇S still blind, leaves the sign flip x10 at 0.117 "
        "(measured on this cell's configuration): it goes through ∇S. `crafted_nsf` meets every honest "
        "receiver's screen (`fedstruct/nsf_screen.py`: an item claiming the receiver's own nodes is dropped, "
        "ids claimed twice are taken from neither, rows are clipped to the honest scale)."
    ),
    ("cefgc", "malicious_client"): (
        "CeFGC's one FedAvg round averages three clients' GIN weights once: no rule can tell one poisoned "
        "model from two honest non-IID ones. The spoofed generators are relayed, not aggregated; the "
        "receiver-side screen (`--option screen_generators=true`) stops them on MUTAG but costs test AUC "
        "0.971 -> 0.919 (docs/robust.md), so it stays off."
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
