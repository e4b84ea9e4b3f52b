"""What every probe of one client's model update shares (label inference, feature support).

Both read a per-client update the adversary reconstructs (:class:`~.updates.UpdateSource`),
score it one way per round, average the rounds, and score against ground truth per stratum
(class or feature). Only the scoring of one round's update differs; it is the subclass's
:meth:`UpdateProbe.score_update`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch

from securefg.attacks.base import AdversaryContext, Attack, AttackOutcome, Challenge, Support
from securefg.attacks.metrics import stratified_auc
from securefg.attacks.updates import PROFILES, UpdateProfile, UpdateSource, profile_for, round_payloads

#: The broadcasts and uploads of every model-averaging method the probes read.
UPDATE_TAGS = tuple(t for p in PROFILES for t in (p.model_tag, p.update_tag))


class UpdateProbe(Attack):
    """Scores ``(client, stratum)`` items from each target client's reconstructed update.

    Subclasses set ``name``/``metric_doc``/``defaults`` (with a ``rounds`` list) and implement
    :meth:`score_update`; :meth:`attack` returns ``scores[item]`` for items ``(cid, stratum)``.
    """

    metric = "auc"
    payload_tags = UPDATE_TAGS

    @classmethod
    def payloads(cls, params: Mapping[str, Any], options: Mapping[str, Any]) -> tuple[str, ...]:
        """Only the probed rounds' broadcasts and uploads (FedStruct's carry ∇S: megabytes each)."""
        return round_payloads(list(params["rounds"]))

    def supports(self, ctx: AdversaryContext) -> Support:
        prof = profile_for(ctx.view.tags())
        if prof is None:
            return Support(False, "no model-averaging update in the adversary's view")
        if not ctx.targets:
            return Support(False, "every client is in the adversary: no target")
        if ctx.view.missing_payloads(prof.model_tag, list(self.params["rounds"]) or None):
            return Support(False, f"payloads of {prof.model_tag!r} were not kept")
        return Support(True)

    def score_update(self, delta: Mapping[str, torch.Tensor], reference: Mapping[str, torch.Tensor],
                     adv: AdversaryContext, profile: UpdateProfile) -> torch.Tensor | None:
        """One round's scores per stratum from a client's update (``None``: nothing to read)."""
        raise NotImplementedError

    def attack(self, adv: AdversaryContext, items: Any) -> torch.Tensor:
        prof = profile_for(adv.view.tags())
        assert prof is not None
        src = UpdateSource(adv.view, prof)
        rounds = [r for r in (list(self.params["rounds"]) or src.rounds) if src.reference(r) is not None]
        self._kinds: set[str] = set()
        per_client: dict[str, torch.Tensor | None] = {}
        for cid in {c for c, _ in items}:
            acc, used = None, 0
            for r in rounds:
                delta, kind = src.estimate(r, cid, adv.run.clients)
                self._kinds.add(kind)
                ref = src.reference(r)
                s = self.score_update(delta, ref, adv, prof) if delta is not None and ref is not None else None
                if s is None:
                    continue
                acc = s.double() if acc is None else acc + s.double()
                used += 1
            per_client[cid] = acc / used if acc is not None else None
        return torch.tensor([_entry(per_client[c], i) for c, i in items], dtype=torch.float64)

    def estimate_note(self) -> str:
        """What the reconstructed updates were, when that limits the attack."""
        kinds = sorted(getattr(self, "_kinds", set()))
        if kinds == ["mean"]:
            return "only the round's mean update was available: every client gets the same scores"
        if kinds == ["none"]:
            return "no update of any target could be reconstructed from the view"
        return ""

    def stratified_outcome(self, challenge: Challenge, scores: torch.Tensor, **details: Any) -> AttackOutcome:
        """Mean per-stratum AUC (stratum = the item's second entry); pooled AUC in the details."""
        public = {k: v for k, v in challenge.info.items() if not k.startswith("_")}
        base = super().evaluate(Challenge(challenge.items, challenge.labels, info=public), scores)
        value = stratified_auc(challenge.labels, scores, [s for _, s in challenge.items])
        return AttackOutcome(
            value=self.chance if math.isnan(value) else value, chance=self.chance,
            details={**base.details, "pooled_auc": base.value, **details,
                     "estimate": sorted(getattr(self, "_kinds", set()))},
            roc=base.roc, note=self.estimate_note(),
        )


def _entry(scores: torch.Tensor | None, stratum: int) -> float:
    """A client's score for one stratum; 0 when none of its updates could be read."""
    return float(scores[stratum]) if scores is not None else 0.0


__all__ = ["UPDATE_TAGS", "UpdateProbe"]
