r"""Three poisoning attacks beyond sign flip, each from a client that trains on shifted labels.

* :class:`LabelFlipping` (``label_flipping``): the malicious client's labels are shifted
  (``c -> c + shift mod C``) and its honest-looking update is sent as is (Tolpegin et al.,
  ESORICS 2020, https://arxiv.org/abs/2007.08432).
* :class:`ModelReplacement` (``model_replacement``): the same update boosted by
  :math:`\gamma` (default: the number of clients), so that the average lands on the attacker's
  relabelled model (Bagdasaryan et al., AISTATS 2020, https://arxiv.org/abs/1807.00459).
* :class:`NormBoundedPoisoning` (``norm_bounded_poisoning``): the relabelling update rescaled to
  exactly the norm bound the ``clip_norm`` defence enforces (``bound = 0``: that defence's
  automatic bound), so a norm check cannot tell it from an honest update: the backdoor-style
  attack of Sun et al. 2019 (https://arxiv.org/abs/1911.07963) aimed at every class.

Metric, scoring and defence rows are those of
:class:`~securefg.attacks.poisoning.UpdatePoisoning` (``accuracy_drop``: honest run minus
poisoned run, same stack and seed). CeFGC's one-shot weight upload and FedStruct's hardened
and A variants are not supported (no label-driven update to shape there).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from securefg.attacks.base import AdversaryContext, AuditContext, Support, register_attack
from securefg.attacks.label_poisoning import label_poisoned_method, scaled_to_norm
from securefg.attacks.malicious import variant_label
from securefg.attacks.poisoning import GRADIENT_CLIP, GRADIENT_UPLOADS, UPDATE_TAG, UpdatePoisoning

_SHARED = {k: v for k, v in UpdatePoisoning.defaults.items() if k not in ("behaviour", "factor")}


class _LabelPoisoning(UpdatePoisoning):
    """Shared checks and variant building; subclasses say how the update is shaped."""

    defaults: ClassVar[Mapping[str, Any]] = {**_SHARED, "shift": 1, "defences": []}

    def params_support(self, ctx: AdversaryContext) -> Support:
        if self._one_shot(ctx):
            return Support(False, "CeFGC uploads trained weights once: there is no label-driven update to shape")
        if int(self.params["shift"]) % ctx.run.num_classes == 0:
            return Support(False, "shift is a multiple of the class count: labels would not change")
        opts = ctx.run.options
        if ctx.run.method in GRADIENT_UPLOADS and (str(opts.get("variant", "B")).upper() == "A" or opts.get("hardened")):
            return Support(False, "FedStruct's label poisoning is implemented for variant B (not hardened)")
        return Support(True)

    @staticmethod
    def _one_shot(ctx: AdversaryContext) -> bool:
        from securefg.methods.base import method_class

        return UPDATE_TAG not in method_class(ctx.run.method).TAGS and ctx.run.method not in GRADIENT_UPLOADS

    def shape(self, ctx: AuditContext) -> tuple[str, Any, dict[str, Any]]:
        """``(label, update -> upload, facts)``."""
        raise NotImplementedError

    def variant(self, ctx: AuditContext, one_shot: bool) -> tuple[str, dict[str, Any]]:
        adv = ctx.adversary
        label, fn, facts = self.shape(ctx)
        name = label_poisoned_method(adv.run.method, variant_label(label, adv.view.clients), adv.view.clients,
                                     shift=int(self.params["shift"]), num_classes=adv.run.num_classes, shape=fn,
                                     tag=self._tag)
        return name, {"shift": int(self.params["shift"]), **facts}


@register_attack
class LabelFlipping(_LabelPoisoning):
    """Malicious clients train on shifted labels and send the resulting update unchanged.

    Args:
        shift (int): Declared class = true class + shift (mod C). (default: ``1``)
        defences (list[str]): As :class:`~securefg.attacks.poisoning.UpdatePoisoning`. (default: none)
    """

    name = "label_flipping"
    metric_doc = "global model accuracy on the honest clients' test data, honest run minus label-flipped run"

    def shape(self, ctx: AuditContext) -> tuple[str, Any, dict[str, Any]]:
        return f"labelflip{int(self.params['shift'])}", dict, {}


@register_attack
class ModelReplacement(_LabelPoisoning):
    r"""Scaled model replacement: the shifted-label update boosted by :math:`\gamma`.

    Args:
        shift (int): Label shift of the attacker's target model. (default: ``1``)
        boost (float): :math:`\gamma`; ``0`` = the number of clients. (default: ``0.0``)
        defences (list[str]): As :class:`~securefg.attacks.poisoning.UpdatePoisoning`. (default: none)
    """

    name = "model_replacement"
    metric_doc = "global model accuracy on the honest clients' test data, honest run minus replaced run"
    defaults: ClassVar[Mapping[str, Any]] = {**_LabelPoisoning.defaults, "boost": 0.0}

    def shape(self, ctx: AuditContext) -> tuple[str, Any, dict[str, Any]]:
        gamma = float(self.params["boost"]) or float(len(ctx.adversary.run.clients))
        return f"replace{gamma:g}", lambda u: {k: v * gamma for k, v in u.items()}, {"boost": gamma}


@register_attack
class NormBoundedPoisoning(_LabelPoisoning):
    """The shifted-label update rescaled to exactly the defence's norm bound (backdoor-style).

    Args:
        shift (int): Label shift. (default: ``1``)
        bound (float): Upload norm; ``0`` = the ``clip_norm`` defence's automatic bound (FedAvg:
            ``lr * sqrt(P) * local_epochs``; FedStruct: ``GRADIENT_CLIP``). (default: ``0.0``)
        defences (list[str]): As :class:`~securefg.attacks.poisoning.UpdatePoisoning`. (default: none)
    """

    name = "norm_bounded_poisoning"
    metric_doc = "global model accuracy on the honest clients' test data, honest run minus poisoned run"
    defaults: ClassVar[Mapping[str, Any]] = {**_LabelPoisoning.defaults, "bound": 0.0}

    def shape(self, ctx: AuditContext) -> tuple[str, Any, dict[str, Any]]:
        bound = float(self.params["bound"]) or (
            GRADIENT_CLIP if ctx.adversary.run.method in GRADIENT_UPLOADS else self._auto_clip(ctx))
        if float(self.params["clip"]) == 0.0:
            self.params["clip"] = bound  # the clip_norm row checks exactly this bound
        return f"normbound{bound:.3g}", lambda u: scaled_to_norm(u, bound), {"bound": bound}


__all__ = ["LabelFlipping", "ModelReplacement", "NormBoundedPoisoning"]
