"""A spoofed diffusion model: a malicious CeFGC client ships generators with the wrong labels.

CeFGC injects every received generator's samples straight into each client's training set,
labelled with the class the *sender* declares (cefgc.md §5: "Poisoning through the generator
... is easier than weight poisoning"). The malicious clients train their generators honestly and
then relabel them by a cyclic shift of the classes (the class-0 generator is declared class 1,
and so on), so every honest client trains on mislabelled synthetic graphs. Nothing in the
relay can tell: the package is well formed, sealed or encrypted end to end, and the shuffle
hides who sent it.

**Metric** (``accuracy_drop``): test accuracy of the final global GIN on the honest clients' test
graphs (mean), honest run minus spoofed run, same stack and seed; the honest clients' own
(pre-averaging) models are compared in the details (``local_*``). Defence: receiver-side
screening (``screen_generators``, on by default, :mod:`securefg.methods.cefgc.generator_screen`):
each receiver drops the units of a sender whose declared labels fit its classes worse than a
relabelling of them; the details count the units the honest receivers dropped in the spoofed
run (``screened_out``) and in the clean one, and each sender's alignment ``excess``. Authenticating packages (which the sealed relay does) stops a *server*
from swapping them, not a client from lying.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from securefg.attacks.base import (
    AdversaryContext,
    Attack,
    AttackOutcome,
    AuditContext,
    Support,
    register_attack,
)
from securefg.attacks.malicious import malicious_method, variant_label
from securefg.attacks.metrics import mean_or_nan
from securefg.attacks.poisoning import final_model, honest_accuracy, honest_auc


@register_attack
class SpoofedGenerator(Attack):
    """Relabelled generators from malicious CeFGC clients.

    Args:
        shift (int): Declared class = true class + shift (mod C). (default: ``1``)
        score (str): Per-client metric of the details' local comparison. (default: ``"test_acc"``)
    """

    name = "spoofed_generator"
    metric = "accuracy_drop"
    metric_doc = "global GIN accuracy on the honest clients' test graphs, honest run minus spoofed run"
    chance = 0.0
    requires_malicious = True
    defaults: ClassVar[Mapping[str, Any]] = {"shift": 1, "score": "test_acc"}

    def supports(self, ctx: AdversaryContext) -> Support:
        if ctx.run.task != "graph" or not ctx.run.method.startswith("cefgc"):
            return Support(False, "needs CeFGC (generators relayed between clients)")
        from securefg.attacks.diffusion_membership import cefgc_architecture

        arch, _ = cefgc_architecture(ctx.run)
        if arch.conditional:
            return Support(False, "relabelling is implemented for per-class generators (CeFGC, CeFGC+), not CeFGC*")
        if not ctx.view.clients or not ctx.targets:
            return Support(False, "needs malicious clients and honest ones")
        if int(self.params["shift"]) % ctx.run.num_classes == 0:
            return Support(False, "shift is a multiple of the class count: labels would not change")
        return Support(True)

    def run(self, ctx: AuditContext) -> AttackOutcome:
        from securefg.models.graph_score import GraphDiffusionModel

        if ctx.rerun is None:
            raise RuntimeError("spoofed_generator needs the harness's rerun")
        adv = ctx.adversary
        shift, classes = int(self.params["shift"]), adv.run.num_classes

        def spoof(honest: Any, method: Any, client: Any) -> Any:
            relabelled = {}
            for slot, model in client.state["generators"].items():
                fake = (slot + shift) % classes
                copy = GraphDiffusionModel.from_tensors(model.to_tensors())
                copy.class_label = fake
                relabelled[fake] = copy
            client.state["generators"] = relabelled
            return honest(method, client)

        label = variant_label(f"spoof{shift}", adv.view.clients)
        variant = malicious_method(adv.run.method, label, adv.view.clients, {"handle_package": spoof})
        key = str(self.params["score"])
        rerun = ctx.rerun(method=variant)
        clean = honest_accuracy(ctx.truth.parties["server"].state.get("model"), ctx.truth, adv.targets)
        spoofed = honest_accuracy(final_model(rerun), ctx.truth, adv.targets)
        local_clean = _local(dict(ctx.truth.result), adv.targets, key)
        local_spoofed = _local(rerun, adv.targets, key)
        from securefg.methods.base import effective_options, method_class

        screened = bool(effective_options(method_class(adv.run.method).option_defaults,
                                          adv.run.options)["screen_generators"])  # on by default
        details = {"clean_accuracy": clean, "spoofed_accuracy": spoofed, "shift": shift,
                   "clean_auc": honest_auc(ctx.truth.parties["server"].state.get("model"), ctx.truth, adv.targets),
                   "spoofed_auc": honest_auc(final_model(rerun), ctx.truth, adv.targets),
                   f"local_{key}_clean": local_clean, f"local_{key}_spoofed": local_spoofed,
                   "screen_generators": screened}
        if screened:
            details["screened_out"] = _screened_out(rerun, adv.targets)
            details["screened_out_clean"] = _screened_out(dict(ctx.truth.result), adv.targets)
            details["screen_excess"] = _excess(rerun, adv.targets)
            details["screen_excess_clean"] = _excess(dict(ctx.truth.result), adv.targets)
        return AttackOutcome(value=clean - spoofed, chance=self.chance, details=details,
                             note=("receivers screened relayed generators against their own class statistics"
                                   if screened else "relayed generators are trusted by their receivers "
                                   "(--option screen_generators=true screens them)"))


def _screened_out(result: dict[str, Any], honest: tuple[str, ...]) -> int:
    """Units the honest receivers' screens dropped (from the method's report in the result)."""
    clients = (result.get("cefgc") or {}).get("clients", {})
    return sum(1 for c in honest for v in clients.get(c, {}).get("screen", []) if not v["kept"])


def _excess(result: dict[str, Any], honest: tuple[str, ...]) -> dict[str, list[float]]:
    """Per honest receiver, the alignment screen's ``excess`` of each sender it judged (sender order)."""
    clients = (result.get("cefgc") or {}).get("clients", {})
    out: dict[str, list[float]] = {}
    for c in honest:
        per = {int(v["sender"]): float(v["excess"]) for v in clients.get(c, {}).get("screen", [])
               if v.get("excess") is not None and v["excess"] == v["excess"]}
        out[c] = [round(per[s], 4) for s in sorted(per)]
    return out


def _local(result: dict[str, Any], honest: tuple[str, ...], key: str) -> float:
    """Mean per-client ``key`` the clients measured on their own models (result.json's per_client)."""
    per = result.get("metrics", {}).get("per_client", {})
    return mean_or_nan([float(per[c][key]) for c in honest if c in per and per[c].get(key) is not None])
