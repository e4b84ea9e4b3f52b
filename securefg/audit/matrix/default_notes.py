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
        "A masked sum hides a poisoned update as well as an honest one. `robust=closest` (row below) passes but "
        "shows the server partial sums (curious-server label inference 0.856 at k = 2, docs/robust.md). "
        "`fedavg_robust` (`ckks_robust`: CKKS updates, multi-Krum by a key holder on their encrypted sketches) "
        "shows the server only the robust mean and who was dropped, and passes the four update-poisoning attacks "
        "at this configuration (`securefg audit --threat-model update_poisoning --protocol fedavg_robust`, "
        "seed 0: accuracy drops -0.007, -0.008, -0.006, -0.003; undefended 0.192, 0.008, 0.397, 0.017), at "
        "accuracy 0.662 / 0.726 / 0.695 against 0.676 / 0.590 / 0.640 on seeds 0-2. By the accuracy rule it "
        "qualifies; it is not the default yet because a run takes about 20x as long (613 s against 28 s here) and "
        "its curious-party audits and its `robust=krum` matrix row have not run. {krum_cost}"
    ),
    ("fedstruct", "malicious_client"): (
        "The `robust=closest` row passes (docs/robust.md: exit 0 at 30 rounds, -0.39 points of clean accuracy "
        "over seeds 0-2) but shows the server subgroup sums of θ's and ∇S's gradients, and ∇S loses the "
        "server blindness it has by default. `robust=krum` keeps every gradient encrypted (the rule reads one "
        "sketch ciphertext per client; the sums carry ∇S's 693,248 values per client and round on Cora under "
        "CKKS), not audited here. "
        "`crafted_nsf` spoofs relayed NSF rows, which no update aggregate sees."
    ),
    ("fedsage_plus", "malicious_client"): (
        "With the paper's three owners no robust rule has a majority to lean on: subgroups of two leave one "
        "subgroup, and multi-Krum keeps two of three updates every round, dropping an honest owner's whenever "
        "the attacker is absent (not audited here)."
    ),
    ("cefgc", "malicious_client"): (
        "CeFGC's one FedAvg round averages three clients' GIN weights once: no rule can tell one poisoned "
        "model from two honest non-IID ones. The spoofed generators are relayed, not aggregated; the "
        "receiver-side screen (`--option screen_generators=true`) stops them on MUTAG but costs test AUC "
        "0.971 -> 0.919 (docs/robust.md), so it stays off."
    ),
}


def why_defaults_stay(rows: Sequence[Mapping[str, Any]], facts: Mapping[str, str] | None = None) -> list[str]:
    """Page lines: for each failing cell on a default stack, why that default stays.

    Args:
        rows: The matrix rows (``method``, ``threat_model``, ``row``, ``verdict``, ``label``).
        facts: Figures a note names (``{krum_cost}``), measured in the same matrix run; a note
            whose figure is missing says it was not measured.
    """
    facts = dict(facts or {})
    out = []
    for r in rows:
        if r.get("row", "default") != "default" or r.get("verdict") != "fail":
            continue
        note = DEFAULT_NOTES.get((str(r.get("method", "")), str(r["threat_model"])))
        if note is None:
            out.append(f"* **{r['label']}, {r['threat_model']}**: no note; the default stays unexamined.")
            continue
        facts.setdefault("krum_cost", "")
        out.append((f"* **{r['label']}, {r['threat_model']}**: " + note.format(**facts)).rstrip())
    return out


__all__ = ["DEFAULT_NOTES", "why_defaults_stay"]
