r"""A malicious FedStruct-B client crafting the node structure features it relays (``fedstruct/nsf``).

In Algorithms 4/5 every owner relays ``(ids, S_k)`` and each receiver writes the rows into its
table at the ids given. The relay is sealed and shuffled, so a receiver cannot tell who sent an
item, and nothing checks that the ids belong to the sender. Behaviours:

* ``scale``: the attacker's own rows times ``factor`` (out-of-range NSFs);
* ``spoof``: an item claiming *every* node id with rows drawn from :math:`N(0, \text{factor}^2)`:
  it overwrites the honest owners' rows at every receiver that unpacks it after theirs.

The auditor reruns the method with the attacker deviating (same stack and seed).

**Metric** (``accuracy_drop``): the honest clients' last-round test accuracy on their own nodes
(mean), honest run minus crafted run. Every FedStruct-B receiver screens what it is relayed
(:mod:`securefg.methods.fedstruct.nsf_screen`): an item claiming one of the receiver's own nodes
is dropped, a node claimed twice is taken from neither, and rows are clipped to the honest
scale. So the number is what is left after that screen; the details give what the honest
receivers dropped and clipped in the crafted run (``screen``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import torch

from securefg.attacks.base import (
    AdversaryContext,
    Attack,
    AttackOutcome,
    AuditContext,
    Support,
    register_attack,
)
from securefg.attacks.malicious import malicious_uploads, variant_label
from securefg.attacks.poisoning import client_accuracy
from securefg.federation.codec import decode_tensors, encode_tensors

NSF_TAG = "fedstruct/nsf"


def crafted_item(blob: bytes, *, behaviour: str, factor: float, num_nodes: int, seed: int) -> bytes:
    """The attacker's relay item, crafted (see the module docs)."""
    item = decode_tensors(blob)
    s = item["s"]
    if behaviour == "scale":
        return encode_tensors({"ids": item["ids"], "s": s * factor})
    gen = torch.Generator().manual_seed(seed)
    rows = torch.randn(num_nodes, s.size(1), generator=gen, dtype=torch.float64) * factor
    return encode_tensors({"ids": torch.arange(num_nodes, dtype=item["ids"].dtype), "s": rows.to(s.dtype)})


@register_attack
class CraftedNSF(Attack):
    """Out-of-range or id-spoofing NSF rows from a malicious FedStruct-B owner.

    Args:
        behaviour (str): ``"scale"`` or ``"spoof"``. (default: ``"spoof"``)
        factor (float): Scale of the crafted rows. (default: ``100.0``)
    """

    name = "crafted_nsf"
    metric = "accuracy_drop"
    metric_doc = "honest clients' last-round test accuracy on their own nodes, honest run minus crafted-NSF run"
    chance = 0.0
    requires_malicious = True
    defaults: ClassVar[Mapping[str, Any]] = {"behaviour": "spoof", "factor": 100.0}

    def supports(self, ctx: AdversaryContext) -> Support:
        from securefg.methods.base import method_class

        if NSF_TAG not in getattr(method_class(ctx.run.method), "TAGS", {}):
            return Support(False, f"needs a method that relays {NSF_TAG!r} (FedStruct-B)")
        opts = ctx.run.options
        if opts.get("variant", "B") != "B" or str(opts.get("hardened", "false")).lower() in ("true", "1"):
            return Support(False, "NSFs are relayed only in FedStruct-B (not variant A, not the hardened variant)")
        if not ctx.view.clients or not ctx.targets:
            return Support(False, "needs a malicious client and honest ones")
        if self.params["behaviour"] not in ("scale", "spoof"):
            return Support(False, f"behaviour must be 'scale' or 'spoof', got {self.params['behaviour']!r}")
        return Support(True)

    def run(self, ctx: AuditContext) -> AttackOutcome:
        if ctx.rerun is None:
            raise RuntimeError("crafted_nsf needs the harness's rerun")
        adv = ctx.adversary
        n = int(ctx.truth.task.full_graph.num_nodes)
        behaviour, factor = str(self.params["behaviour"]), float(self.params["factor"])

        def craft(blob: bytes) -> bytes:
            return crafted_item(blob, behaviour=behaviour, factor=factor, num_nodes=n, seed=ctx.seed + 17)

        label = variant_label(f"nsf_{behaviour}{factor:g}", adv.view.clients)
        variant = malicious_uploads(adv.run.method, label, adv.view.clients, NSF_TAG, craft, op="relay")
        clean = client_accuracy(ctx.truth.parties, adv.targets)
        parties = ctx.rerun(method=variant)["_federation"].parties
        attacked = client_accuracy(parties, adv.targets)
        screens = {cid: parties[cid].state.get("nsf_screen") for cid in adv.targets}
        return AttackOutcome(
            value=clean - attacked, chance=self.chance,
            details={"clean_accuracy": clean, "crafted_accuracy": attacked, "behaviour": behaviour, "factor": factor,
                     "screen": screens,
                     "defences": [{"defence": "receiver-side id/range screen (fedstruct.nsf_screen)",
                                   "composable": True, "implemented": True}]},
            note=("every honest receiver screens the relayed NSF rows (own ids claimed: item dropped; ids "
                  "claimed twice: taken from neither; rows clipped to the honest scale); the number is the "
                  "damage left after that screen"),
        )
