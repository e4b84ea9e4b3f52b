r"""Malicious clients poisoning model-averaging updates (boosted or sign-flipped updates).

The adversarial clients train honestly, then send :math:`f\,\Delta` (``behaviour = "scale"``,
model replacement / boosting, Bagdasaryan et al., AISTATS 2020, https://arxiv.org/abs/1807.00459)
or :math:`-f\,\Delta` (``"sign_flip"``). The auditor reruns the method with those clients
deviating (:func:`~securefg.attacks.malicious.malicious_method`) under the same stack and seed.

**Metric** (``accuracy_drop``): test accuracy of the federation's final global model on the
*honest* clients' test data (mean over them), honest run minus poisoned run (accuracy points,
0 = no damage). Details: the same drop with each defence switched on
(:mod:`securefg.attacks.defences`): ``clip_norm`` (a norm bound; composes with masked sums, but
binds a malicious client only if verified, see there) and ``trimmed_mean`` (robust aggregation;
only where the server sees plaintext updates, and reported as not composable otherwise). The
default bound ``clip = 0`` means ``lr * sqrt(P) * local_epochs``: the largest update ``P``
parameters can make in honest Adam steps (each moves a coordinate by about ``lr``).
"""

from __future__ import annotations

import math
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
from securefg.attacks.defences import derived_stack
from securefg.attacks.malicious import malicious_method

UPDATE_TAG = "fedavg/update"


def honest_accuracy(model: Any, truth: Any, honest: tuple[str, ...]) -> float:
    """Accuracy of the federation's final global model on the honest clients' test data (mean).

    Measured by the auditor on the server's model, not on the clients' locally fine-tuned ones
    (FED-PUB's per-client protocol scores each client's model after its own local step, which
    can hide a poisoned global model on label-skewed clients).
    """
    from securefg.methods.training import evaluate_graphs, evaluate_node

    if model is None:
        return float("nan")
    device = next(model.parameters()).device
    accs = []
    for cid in honest:
        k = truth.index(cid)
        if getattr(truth.task, "kind", "") == "node":
            accs.append(evaluate_node(model, truth.task.clients[k].to(device))["test_acc"])
        else:
            accs.append(evaluate_graphs(model, truth.task.test[k], truth.task.num_classes, device)["acc"])
    accs = [a for a in accs if not math.isnan(a)]
    return sum(accs) / len(accs) if accs else float("nan")


def final_model(result: Any) -> Any:
    """The server's final global model of a (re)run result."""
    fed = result.get("_federation") if isinstance(result, dict) else None
    return None if fed is None else fed.server.state.get("model")


@register_attack
class UpdatePoisoning(Attack):
    """Boosted or sign-flipped updates from malicious clients; damage and defences.

    Args:
        behaviour (str): ``"scale"`` or ``"sign_flip"``. (default: ``"sign_flip"``)
        factor (float): :math:`f`. (default: ``10.0``)
        defences (list[str]): ``"clip_norm"``, ``"trimmed_mean"``. (default: both)
        clip (float): Norm bound; ``0`` = automatic (module docs). (default: ``0.0``)
        trim (float): Trimmed share per end. (default: ``0.2``)
    """

    name = "update_poisoning"
    metric = "accuracy_drop"
    metric_doc = "global model accuracy on the honest clients' test data, honest run minus poisoned run"
    chance = 0.0
    requires_malicious = True
    defaults: ClassVar[Mapping[str, Any]] = {"behaviour": "sign_flip", "factor": 10.0, "defences": ["clip_norm", "trimmed_mean"],
                "clip": 0.0, "trim": 0.2}

    def supports(self, ctx: AdversaryContext) -> Support:
        from securefg.methods.base import method_class

        if UPDATE_TAG not in method_class(ctx.run.method).TAGS:
            return Support(False, f"needs a method that aggregates {UPDATE_TAG!r} (FedAvg, FedProx)")
        if not ctx.view.clients or not ctx.targets:
            return Support(False, "needs malicious clients and honest ones")
        if self.params["behaviour"] not in ("scale", "sign_flip"):
            return Support(False, f"behaviour must be 'scale' or 'sign_flip', got {self.params['behaviour']!r}")
        return Support(True)

    def run(self, ctx: AuditContext) -> AttackOutcome:
        if ctx.rerun is None or ctx.stack is None:
            raise RuntimeError("update_poisoning needs the harness's rerun and stack")
        adv = ctx.adversary
        f = float(self.params["factor"]) * (-1.0 if self.params["behaviour"] == "sign_flip" else 1.0)

        def poison(honest: Any, method: Any, client: Any, global_state: Any) -> Any:
            update, weight = honest(method, client, global_state)
            return {k: v * f for k, v in update.items()}, weight

        label = f"{self.params['behaviour']}{self.params['factor']:g}@{'+'.join(c.split('/')[1] for c in adv.view.clients)}"
        variant = malicious_method(adv.run.method, label, adv.view.clients, {"handle_train": poison})
        clean = honest_accuracy(ctx.truth.parties["server"].state.get("model"), ctx.truth, adv.targets)
        attacked = honest_accuracy(final_model(ctx.rerun(method=variant)), ctx.truth, adv.targets)
        rows = []
        for d in self.params["defences"]:
            rows.append(self._defended(ctx, d, variant))
        return AttackOutcome(
            value=clean - attacked, chance=self.chance,
            details={"clean_accuracy": clean, "poisoned_accuracy": attacked, "factor": f, "defences": rows},
            note="defended rows apply the bound to the malicious clients too: a verified bound (see defences)",
        )

    def _defended(self, ctx: AuditContext, defence: str, variant: str) -> dict[str, Any]:
        assert ctx.stack is not None and ctx.rerun is not None and ctx.workdir is not None
        adv = ctx.adversary
        binding = ctx.stack.binding_for(UPDATE_TAG)
        from securefg.protocol.mechanism import mechanism_class

        if defence == "clip_norm":
            clip = float(self.params["clip"]) or self._auto_clip(ctx)
            path = derived_stack(ctx.stack, UPDATE_TAG, label="clip_norm", out_dir=ctx.workdir,
                                 add_transforms=({"name": "clip_norm", "clip": clip},))
            extra: dict[str, Any] = {"clip": clip}
        elif defence == "trimmed_mean":
            if not mechanism_class(binding.mechanism).reveals_individual_inputs:
                return {"defence": defence, "composable": False,
                        "reason": f"{UPDATE_TAG!r} is carried by {binding.mechanism!r}, which hides individual "
                                  "updates: robust aggregation needs each one"}
            path = derived_stack(ctx.stack, UPDATE_TAG, label="trimmed_mean", out_dir=ctx.workdir,
                                 mechanism="plaintext_trimmed_mean", params={"trim": float(self.params["trim"])})
            extra = {"trim": float(self.params["trim"])}
        else:
            return {"defence": defence, "composable": False, "reason": "unknown defence (clip_norm, trimmed_mean)"}
        clean = honest_accuracy(final_model(ctx.rerun(protocol=str(path))), ctx.truth, adv.targets)
        attacked = honest_accuracy(final_model(ctx.rerun(method=variant, protocol=str(path))), ctx.truth, adv.targets)
        return {"defence": defence, "composable": True, "stack": path.name, "clean_accuracy": clean,
                "poisoned_accuracy": attacked, "accuracy_drop": clean - attacked, **extra}

    @staticmethod
    def _auto_clip(ctx: AuditContext) -> float:
        cfg = ctx.adversary.run.config
        model = ctx.truth.parties["server"].state.get("model")
        params = sum(p.numel() for p in model.parameters()) if model is not None else 1
        lr = float(cfg.get("lr") or (0.01 if ctx.adversary.run.task == "node" else 1e-3))
        epochs = int(cfg.get("local_epochs") or 1)
        return lr * math.sqrt(params) * epochs
