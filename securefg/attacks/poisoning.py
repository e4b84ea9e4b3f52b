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

FedStruct (FedSGD) uploads gradients to a secure ``fedstruct/update`` sum: the malicious
clients' inputs are scaled or sign-flipped between their honest computation and the mechanism
(:func:`~securefg.attacks.malicious.malicious_uploads`); the damage is the honest clients'
last-round test accuracy as they score the received θ with their own Ā rows and S, and the
automatic bound is :data:`GRADIENT_CLIP` (see there).

CeFGC (all four variants) uploads its GIN's change from W0 once, to ``cefgc/weights``: a malicious
client trains, then sends :math:`f\,(W - W_0)` (its change from the broadcast initialisation,
scaled or flipped). ``clip_norm``'s automatic bound there is the largest honest change of the
clean run (each client reports its upload's norm); ``trimmed_mean`` composes only with a
plaintext aggregate.
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
from securefg.attacks.malicious import malicious_method, malicious_uploads, variant_label
from securefg.attacks.metrics import mean_or_nan
from securefg.errors import SecureFGError

UPDATE_TAG = "fedavg/update"
#: FedSGD methods whose client step is not a handler: the poisoned upload is intercepted instead.
GRADIENT_UPLOADS = {"fedstruct": "fedstruct/update"}
#: Further uploads of those methods poisoned alike: FedStruct-B's ∇S rides its own server-blind
#: ``shared_sum`` (issue 22), apart from θ's gradients. The defences bound ``GRADIENT_UPLOADS``'
#: tag only (a server cannot apply a rule to a sum it is blind to), so ∇S stays undefended.
ALSO_POISONED = {"fedstruct": (("shared_sum", "fedstruct/nsf_grad"),)}
#: Norm bound on gradient uploads when ``clip = 0``. Below every honest gradient's norm it gives a
#: malicious client the weight of one honest client whatever it scales by, and Adam's per-
#: coordinate normalisation absorbs the common scale, but not the server's weight decay, which
#: then dominates the tiny summed gradient: a utility cost (measured on Cora, FedStruct-B, 10
#: clients, 30 rounds: clean accuracy 0.81 -> 0.67, sign-flip x10 damage 0.64 -> 0.03). Set
#: ``clip`` near the honest per-client norm to trade less accuracy for a weaker bound.
GRADIENT_CLIP = 1e-3
#: One-shot methods that upload full trained weights (not updates) to a secure aggregate.
WEIGHT_UPLOADS = "cefgc/weights"


def client_accuracy(parties: Any, honest: tuple[str, ...]) -> float:
    """Last round's test accuracy on each honest client's own nodes (mean), as the clients scored it.

    For FedStruct, whose prediction needs each client's Ā rows and S: the clients score the
    last θ they received themselves (``counts``), so this is the damage they experience.
    """
    if parties is None:
        return float("nan")
    accs = []
    for cid in honest:
        c = parties[cid].state.get("counts")
        if c is not None and float(c[3]) > 0:
            accs.append(float(c[2] / c[3]))
    return mean_or_nan(accs)


def honest_auc(model: Any, truth: Any, honest: tuple[str, ...]) -> float:
    """Test ROC-AUC of the final global model on the honest clients' test graphs (mean; graph tasks,
    NaN otherwise): CeFGC's own metric, reported beside the accuracy drop, which on a few dozen
    test graphs moves in steps of one graph and at a threshold the one-shot model does not tune."""
    from securefg.methods.training import evaluate_graphs

    if model is None or getattr(truth.task, "kind", "") == "node":
        return float("nan")
    device = next(model.parameters()).device
    return mean_or_nan([float(evaluate_graphs(model, truth.task.test[truth.index(c)], truth.task.num_classes, device,
                                              groups=truth.task.label_groups)["auc"]) for c in honest])


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
            accs.append(evaluate_graphs(model, truth.task.test[k], truth.task.num_classes, device,
                                        groups=truth.task.label_groups)["acc"])
    return mean_or_nan(accs)


#: A clean model giving one class to at least this share of the honest test nodes is a constant predictor.
CONSTANT_SHARE = 0.99


class ConstantPredictorError(SecureFGError, RuntimeError):
    """The clean global model predicts one class: an accuracy drop would compare constant predictors."""


def constant_share(model: Any, truth: Any, honest: tuple[str, ...]) -> float | None:
    """Share of the honest clients' test nodes given the model's most frequent class (node tasks)."""
    import torch

    from securefg.methods.training import propagation_index

    if model is None or getattr(truth.task, "kind", "") != "node":
        return None
    device = next(model.parameters()).device
    preds = []
    model.eval()
    with torch.no_grad():
        for cid in honest:
            data = truth.task.clients[truth.index(cid)].to(device)
            preds.append(model(data.x, propagation_index(data))[data.test_mask].argmax(-1).cpu())
    p = torch.cat(preds) if preds else torch.zeros(0, dtype=torch.long)
    return float(torch.bincount(p).max()) / p.numel() if p.numel() else None


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
        defences (list[str]): ``"clip_norm"``, ``"trimmed_mean"``, ``"robust"`` (subgroup secure
            sums and a robust rule, :mod:`securefg.protocol.robust`). (default: the first two)
        clip (float): Norm bound; ``0`` = automatic (module docs). (default: ``0.0``)
        trim (float): Trimmed share per end. (default: ``0.2``)
        robust_rule (str): Rule of the ``"robust"`` row. (default: ``"median"``)
        robust_k (int): Smallest subgroup of the ``"robust"`` row. (default: ``3``)
        robust_norm (float): Its subgroup-mean norm bound, times the median norm; ``0`` = off.
            (default: ``1.0``)
    """

    name = "update_poisoning"
    metric = "accuracy_drop"
    metric_doc = "global model accuracy on the honest clients' test data, honest run minus poisoned run"
    chance = 0.0
    requires_malicious = True
    defaults: ClassVar[Mapping[str, Any]] = {"behaviour": "sign_flip", "factor": 10.0, "defences": ["clip_norm", "trimmed_mean"],
                "clip": 0.0, "trim": 0.2, "robust_rule": "median", "robust_k": 3, "robust_norm": 1.0}

    def supports(self, ctx: AdversaryContext) -> Support:
        from securefg.methods.base import method_class

        tags = method_class(ctx.run.method).TAGS
        if UPDATE_TAG not in tags and WEIGHT_UPLOADS not in tags and ctx.run.method not in GRADIENT_UPLOADS:
            return Support(False, f"needs a method that aggregates {UPDATE_TAG!r} (FedAvg, FedProx), "
                                  f"{WEIGHT_UPLOADS!r} (CeFGC) or FedStruct's gradients")
        if not ctx.view.clients or not ctx.targets:
            return Support(False, "needs malicious clients and honest ones")
        return self.params_support(ctx)

    def params_support(self, ctx: AdversaryContext) -> Support:
        """Whether this attack's own parameters make sense for the run."""
        if self.params["behaviour"] not in ("scale", "sign_flip"):
            return Support(False, f"behaviour must be 'scale' or 'sign_flip', got {self.params['behaviour']!r}")
        return Support(True)

    def run(self, ctx: AuditContext) -> AttackOutcome:
        if ctx.rerun is None or ctx.stack is None:
            raise RuntimeError(f"{self.name} needs the harness's rerun and stack")
        from securefg.methods.base import method_class

        adv = ctx.adversary
        one_shot = WEIGHT_UPLOADS in method_class(adv.run.method).TAGS
        self._tag = WEIGHT_UPLOADS if one_shot else GRADIENT_UPLOADS.get(adv.run.method, UPDATE_TAG)
        variant, facts = self.variant(ctx, one_shot)
        if adv.run.method in GRADIENT_UPLOADS:
            self._score = lambda result: client_accuracy(result["_federation"].parties, adv.targets)
            clean = client_accuracy(ctx.truth.parties, adv.targets)
        else:
            self._score = lambda result: honest_accuracy(final_model(result), ctx.truth, adv.targets)
            clean_model = ctx.truth.parties["server"].state.get("model")
            share = constant_share(clean_model, ctx.truth, adv.targets)
            if share is not None and share >= CONSTANT_SHARE:
                raise ConstantPredictorError(
                    f"the clean global model gives one class to {share:.1%} of the honest clients' test nodes, "
                    "so an accuracy drop would compare constant predictors; run more rounds (FedAvg on Cora "
                    "METIS leaves that plateau after about 60)")
            clean = honest_accuracy(clean_model, ctx.truth, adv.targets)
        rerun = ctx.rerun(method=variant)
        attacked = self._score(rerun)
        if one_shot:  # CeFGC: its own metric beside the accuracy
            facts.update(clean_auc=honest_auc(ctx.truth.parties["server"].state.get("model"), ctx.truth, adv.targets),
                         poisoned_auc=honest_auc(final_model(rerun), ctx.truth, adv.targets))
        rows = [self._defended(ctx, d, variant) for d in self.params["defences"]]
        return AttackOutcome(
            value=clean - attacked, chance=self.chance,
            details={"clean_accuracy": clean, "poisoned_accuracy": attacked, **facts, "defences": rows},
            note="defended rows apply the bound to the malicious clients too: a verified bound (see defences)"
                 + ("; accuracy is each honest client's last-round score of the received model on its own test nodes"
                    if adv.run.method in GRADIENT_UPLOADS else ""),
        )

    def variant(self, ctx: AuditContext, one_shot: bool) -> tuple[str, dict[str, Any]]:
        """Register the malicious variant of the run's method; ``(its name, facts for the details)``."""
        adv = ctx.adversary
        f = float(self.params["factor"]) * (-1.0 if self.params["behaviour"] == "sign_flip" else 1.0)

        def poison(honest: Any, method: Any, client: Any, global_state: Any) -> Any:
            update, weight = honest(method, client, global_state)
            return {k: v * f for k, v in update.items()}, weight

        def poison_weights(honest: Any, method: Any, client: Any, blobs: Any, w0: Any) -> Any:
            trained = honest(method, client, blobs, w0)
            return {k: w0[k] + f * (v - w0[k]) for k, v in trained.items()}

        label = variant_label(f"{self.params['behaviour']}{self.params['factor']:g}", adv.view.clients)
        if adv.run.method in GRADIENT_UPLOADS:
            variant = malicious_uploads(adv.run.method, label, adv.view.clients, self._tag,
                                        lambda x: {k: v * f for k, v in dict(x).items()},
                                        also=ALSO_POISONED.get(adv.run.method, ()))
        else:
            handler = {"handle_bundle": poison_weights} if one_shot else {"handle_train": poison}
            variant = malicious_method(adv.run.method, label, adv.view.clients, handler)
        return variant, {"factor": f}

    def _defended(self, ctx: AuditContext, defence: str, variant: str) -> dict[str, Any]:
        assert ctx.stack is not None and ctx.rerun is not None and ctx.workdir is not None
        tag = self._tag
        binding = ctx.stack.binding_for(tag)
        from securefg.protocol.mechanism import mechanism_class

        if defence == "clip_norm":
            clip = float(self.params["clip"]) or self._default_clip(ctx, tag)
            path = derived_stack(ctx.stack, tag, label="clip_norm", out_dir=ctx.workdir,
                                 add_transforms=({"name": "clip_norm", "clip": clip},))
            extra: dict[str, Any] = {"clip": clip}
        elif defence == "trimmed_mean":
            if not mechanism_class(binding.mechanism).reveals_individual_inputs:
                return {"defence": defence, "composable": False,
                        "reason": f"{tag!r} is carried by {binding.mechanism!r}, which hides individual "
                                  "updates: robust aggregation needs each one"}
            path = derived_stack(ctx.stack, tag, label="trimmed_mean", out_dir=ctx.workdir,
                                 mechanism="plaintext_trimmed_mean", params={"trim": float(self.params["trim"])})
            extra = {"trim": float(self.params["trim"])}
        elif defence == "robust":
            if not mechanism_class(binding.mechanism).returns_sum:  # subgroup_robust, ckks_robust
                return {"defence": defence, "composable": True,
                        "reason": f"already on: the audited stack's {binding.mechanism!r} aggregate is robust"}
            from securefg.protocol.robust.mechanism import NAME as ROBUST

            extra = {"rule": str(self.params["robust_rule"]), "k": int(self.params["robust_k"]),
                     "norm_factor": float(self.params["robust_norm"])}
            path = derived_stack(ctx.stack, tag, label=f"robust_{extra['rule']}", out_dir=ctx.workdir, mechanism=ROBUST,
                                 params={"inner": binding.mechanism, "inner_params": dict(binding.params), **extra})
        else:
            return {"defence": defence, "composable": False,
                    "reason": "unknown defence (clip_norm, trimmed_mean, robust)"}
        clean = self._score(ctx.rerun(protocol=str(path)))
        attacked = self._score(ctx.rerun(method=variant, protocol=str(path)))
        return {"defence": defence, "composable": True, "stack": path.name, "clean_accuracy": clean,
                "poisoned_accuracy": attacked, "accuracy_drop": clean - attacked, **extra}

    def _default_clip(self, ctx: AuditContext, tag: str) -> float:
        """The automatic bound: FedAvg's from its optimiser, CeFGC's the largest honest change,
        a gradient tag's :data:`GRADIENT_CLIP`."""
        if tag == UPDATE_TAG:
            return self._auto_clip(ctx)
        return _largest_change(ctx) if tag == WEIGHT_UPLOADS else GRADIENT_CLIP

    @staticmethod
    def _auto_clip(ctx: AuditContext) -> float:
        cfg = ctx.adversary.run.config
        model = ctx.truth.parties["server"].state.get("model")
        params = sum(p.numel() for p in model.parameters()) if model is not None else 1
        lr = float(cfg.get("lr") or (0.01 if ctx.adversary.run.task == "node" else 1e-3))
        epochs = int(cfg.get("local_epochs") or 1)
        return lr * math.sqrt(params) * epochs


def _largest_change(ctx: AuditContext) -> float:
    """CeFGC's automatic bound: the largest honest change from W0 in the clean run (each client
    reports its upload's norm), so the bound clips no honest client and a boosted one to it."""
    reports = [ctx.truth.parties[c].state.get("report") or {} for c in ctx.adversary.targets if c in ctx.truth.parties]
    norms = [float(r["upload_norm"]) for r in reports if "upload_norm" in r]
    if not norms:
        raise RuntimeError("the clean CeFGC run's honest clients report no upload norm (state['report']['upload_norm'])")
    return max(norms)
