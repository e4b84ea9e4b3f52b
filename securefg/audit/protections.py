"""What each mechanism of a stack protects, and what it cannot: the report's limits section.

The "protects" line is the mechanism's own declaration (``Mechanism.protects``); the limits
below are what the audit wants a reviewer to read next to it. They are stated per mechanism
and transform, not per method, because they hold wherever the mechanism is used.
"""

from __future__ import annotations

from typing import Any

from securefg.audit.disclosures import by_design, by_mechanism
from securefg.errors import UnboundTagError
from securefg.protocol.mechanism import mechanism_class, transform_class
from securefg.protocol.secure_sum.range_check import RangeCheck, range_check_of
from securefg.protocol.stack import ProtocolStack

CANNOT = {
    "plaintext": "Nothing is hidden from the receiver: every individual input is read in the clear.",
    "secure_sum": (
        "The sum itself is released to its receiver (and, when the next broadcast carries it, to every "
        "client). K-1 colluding clients plus the server recover the last client's input by subtraction; "
        "the threshold assumes an honest majority against collusion. Masked inputs are not validated, "
        "so a malicious client's poisoned or scaled input enters the sum unseen."
    ),
    "blind_sum": (
        "Every client learns the sum (it is meant for them); a server colluding with any client holds the group "
        "key and reads it. A malicious server can corrupt the blinded sum or lie about the survivor list "
        "(clients check the list, not the sum). As for secure_sum, masked inputs are not validated."
    ),
    "ckks": (
        "The decrypted result goes to the key holder(s), who learn it exactly; a personalized "
        "aggregate's own share is readable by its receiver (a client always decrypts its own "
        "combination). The server colluding with a key holder decrypts every upload. Encrypted "
        "inputs are not validated (no range proofs)."
    ),
    "sealed_relay": (
        "Recipients read every item addressed to them (in CeFGC each client reads every other client's "
        "generator: that is the method). Without a shuffler the server links forwarded boxes to their "
        "uploaders; content that identifies its sender (architecture, sizes) defeats the shuffle."
    ),
    "ckks_relay": (
        "Recipients hold the decryption key and read what they receive; CeFGC+'s pair average lets a "
        "client recover its partner's model as 2*avg - own. A client colluding with the server decrypts "
        "the uploads."
    ),
    "plaintext_trimmed_mean": "Nothing is hidden (plaintext); it only bounds a poisoned minority's influence.",
    "plaintext_krum": ("Nothing is hidden (plaintext): the server reads every update and drops those multi-Krum "
                       "flags (the rule masked_robust and ckks_robust run at their key holder)."),
    "ckks_robust": (
        "The server learns the robust mean and which clients the rule dropped (with a norm bound, each clipped "
        "client's norm relative to the bound); the key holder learns the pseudonymous updates' norms, pairwise "
        "distances and sample counts, not which client is which. The key holder is trusted to run the rule: a "
        "malicious one returns any selection. The server colluding with it decrypts every upload. Multi-Krum "
        "removes updates far from their nearest neighbours; a poisoned update that stays within the honest spread "
        "passes, and with non-IID clients the rule also drops honest outliers."
    ),
    "masked_robust": (
        "The server learns the kept clients' sum (a secure_sum over them, with its threshold and collusion limits) "
        "and which clients the rule dropped; the key holder learns the pseudonymous sketches' norms, pairwise "
        "distances and sample counts, not which client is which. The key holder is trusted to run the rule. A "
        "kept client whose masked input is not the vector it sketched makes the round abort (no poisoned sum is "
        "applied), so it can deny service, not poison. Multi-Krum removes updates far from their nearest "
        "neighbours; a poisoned update within the honest spread passes, and with non-IID clients the rule also "
        "drops honest outliers."
    ),
    "subgroup_robust": (
        "Releases every subgroup's sum (groups of >= k), not one total; a subgroup's k - 1 colluding members "
        "and the server recover the last member's input. The robust rule bounds a poisoned minority of "
        "subgroups only: more malicious clients than half the subgroups, or one per subgroup, defeat it."
    ),
}
TRANSFORM_CANNOT = {
    "dp_gaussian": (
        "Bounds what the released value says about one client (epsilon in result.json) at a utility "
        "cost. In central mode the receiver sees the clipped inputs before the noise."
    ),
    "clip_norm": "Bounds an honest client's influence; a malicious client skips an unverified bound.",
}


def protections(stack: ProtocolStack, tags: list[str], method: str = "") -> list[dict[str, Any]]:
    """For each tag of a run: its mechanism and transforms, what they protect, their limits,
    what ``method`` releases to the receiver by design (:mod:`securefg.audit.disclosures`) and
    the protections its binding voids and the stack waives with ``unsafe``
    (:mod:`securefg.protocol.guarantees`)."""
    out = []
    for tag in tags:
        try:
            b = stack.binding_for(tag)
        except UnboundTagError:  # a tag the stack does not bind cannot have run under it
            continue
        mcls = mechanism_class(b.mechanism)
        transforms = []
        for t in b.transforms:
            transforms.append({"name": t.name, "params": dict(t.params),
                               "limits": TRANSFORM_CANNOT.get(t.name, "see the transform's documentation")})
            transform_class(t.name)  # validates the name
        failed = [f.to_json() for f in stack.failed_protections if f.tag == b.pattern]
        out.append({"tag": tag, "mechanism": b.mechanism, "protects": mcls.protects or "(not declared)",
                    "cannot": CANNOT.get(b.mechanism, "see the mechanism's documentation"), "transforms": transforms,
                    "by_design": " ".join(t for t in (by_design(method, tag), by_mechanism(b.mechanism)) if t),
                    "failed_protections": failed})
        out[-1].update(malicious_party_options(b.mechanism, dict(b.params)))
    return out


def malicious_party_options(mechanism: str, params: dict[str, Any]) -> dict[str, Any]:
    """For a ``secure_sum`` / ``blind_sum`` binding: the range check against malicious clients
    (``range_check``: none / norm_bound / proof) and the malicious-server mode (``pinned_keys``),
    with the ``cannot`` text they change; nothing for other mechanisms."""
    if mechanism not in ("secure_sum", "blind_sum"):
        return {}
    check, pinned = range_check_of(params), params.get("pinned_keys") or "none"
    if check is RangeCheck.NORM_BOUND:
        client = (f"Range check norm_bound = {params['norm_bound']}: each client refuses its own input beyond it and "
                  "the receiver refuses a sum beyond n x the bound (a wrap or gross shift); a malicious input within "
                  "the bound, or a shift aimed inside n x the bound, still enters the sum.")
    else:
        client = "Range check: none (no proof is implemented either); a malicious client can shift or wrap the sum."
    server = ("Malicious server: keys pinned, key substitution and survivor-list equivocation are refused; it still "
              "picks the cohort and can corrupt the sum." if pinned != "none" else
              "Keys are not pinned: a malicious server can substitute keys and open an input (set pinned_keys).")
    base = CANNOT[mechanism].replace("Masked inputs are not validated, so a malicious client's poisoned or scaled "
                                     "input enters the sum unseen.", "").replace(
        " As for secure_sum, masked inputs are not validated.", "")
    return {"range_check": check.value, "pinned_keys": pinned, "cannot": f"{base.rstrip()} {client} {server}"}


__all__ = ["CANNOT", "TRANSFORM_CANNOT", "malicious_party_options", "protections"]
