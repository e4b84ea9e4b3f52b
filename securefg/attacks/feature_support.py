r"""Feature reconstruction from the first-layer update: which features a client's data contain.

The first layer of a GCN/GIN reads node features through a weight :math:`W \in \mathbb{R}^{h
\times d}`; its gradient is :math:`\partial L / \partial W = G^\top (\hat{A} X)`, so column
:math:`i` is exactly zero when feature :math:`i` is zero on every node that reaches the loss
(Phong et al., "Privacy-Preserving Deep Learning via Additively Homomorphic Encryption", 2017,
treat the dense case, where ``grad W / grad b`` *is* the input). With weight decay
:math:`\lambda`, such a column's gradient is :math:`\lambda W_{:,i}`, so its update is
:math:`-\text{step}(\lambda W_{:,i})`: every entry has the sign of :math:`-W_{:,i}`. Under Adam
this holds whatever the step size, and the same pattern survives many local epochs (absent
features only decay). The server knows :math:`W` (it broadcast it), so it scores each feature by
the share of hidden units whose update *breaks* the decay pattern:

.. math::
    s_{k,i} = \operatorname{mean}_j\; \mathbb{1}\big[\Delta^{(k)}_{j,i} \neq 0 \wedge
              \operatorname{sign}(\Delta^{(k)}_{j,i}) \neq -\operatorname{sign}(W_{j,i})\big]

Absent features score 0; present ones about 1/2. For sparse features (bag-of-words on Cora,
one-hot degrees on TU graphs) that recovers the client's vocabulary: which words occur in its
documents, which degrees occur in its molecules. Dense real-valued features (every feature present
everywhere) give nothing to decide, and the attack reports itself blind.

**Metric** (``auc``): for each informative feature (present at some client and absent at
another), the ROC-AUC of :math:`s_{k,i}` across target clients for "feature i occurs in client
k's data", averaged over features. 0.5 = chance; the round's mean update alone scores every
client the same and gives exactly 0.5 (what the mean says about feature *prevalence* is shown
separately as ``pooled_auc``).

Not done: per-node reconstruction of :math:`\hat{A}X` rows (``grad W_j / grad b_j`` for a single
active unit), which needs the gradient's magnitude; an Adam update hides it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar

import torch

from securefg.attacks.base import (
    AdversaryContext,
    Attack,
    AttackOutcome,
    Challenge,
    GroundTruth,
    Support,
    blind_outcome,
    register_attack,
)
from securefg.attacks.metrics import stratified_auc
from securefg.attacks.updates import UpdateSource, input_layer, profile_for, round_payloads


def feature_presence(truth: GroundTruth, cid: str) -> torch.Tensor:
    """Boolean ``[d]``: the features that are non-zero on some node of the client's data."""
    k = truth.index(cid)
    task = truth.task
    if getattr(task, "kind", "") == "node":
        return (task.clients[k].x != 0).any(0)
    xs = [g.x for g in task.train[k]]
    return (torch.cat(xs) != 0).any(0) if xs else torch.zeros(task.num_features, dtype=torch.bool)


def informative_features(truth: GroundTruth, presence: dict[str, torch.Tensor] | None = None) -> torch.Tensor:
    """Boolean ``[d]``: features present at some clients and absent at others (the only ones
    whose presence an attack can be scored on)."""
    presence = presence or {cid: feature_presence(truth, cid) for cid in truth.clients}
    stacked = torch.stack(list(presence.values()))
    return stacked.any(0) & ~stacked.all(0)


@register_attack
class FeatureSupport(Attack):
    """Which input features occur in a client's data, from its first-layer update.

    Args:
        rounds (list[int]): Rounds whose updates are used (``[]`` = all). (default: ``[0]``)
        min_features (int): Fewer informative features than this: nothing to decide (reported
            at chance). (default: ``5``)
    """

    name = "feature_support"
    metric = "auc"
    metric_doc = "per-feature ROC-AUC across clients (mean): which clients' data contain the feature"
    defaults: ClassVar[Mapping[str, Any]] = {"rounds": [0], "min_features": 5}
    payload_tags = ("fedavg/model", "fedavg/update", "cefgc/init", "cefgc/weights", "fedstruct/model", "fedstruct/update")

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

    def run(self, ctx: Any) -> AttackOutcome:
        informative = informative_features(ctx.truth)
        if int(informative.sum()) < self.params["min_features"]:
            return blind_outcome(self.chance, f"only {int(informative.sum())} features occur at some clients and not "
                                 "at others (dense features): too few to decide about", informative_features=int(informative.sum()))
        return super().run(ctx)

    def challenge(self, truth: GroundTruth, adv: AdversaryContext, generator: torch.Generator) -> Challenge:
        presence = {cid: feature_presence(truth, cid) for cid in truth.clients}
        informative = informative_features(truth, presence).nonzero().flatten().tolist()
        items, labels = [], []
        for cid in adv.targets:
            for i in informative:
                items.append((cid, i))
                labels.append(float(presence[cid][i]))
        return Challenge(items, torch.tensor(labels), info={"informative_features": len(informative)})

    def attack(self, adv: AdversaryContext, items: Any) -> torch.Tensor:
        prof = profile_for(adv.view.tags())
        assert prof is not None
        src = UpdateSource(adv.view, prof)
        rounds = [r for r in (list(self.params["rounds"]) or src.rounds) if src.reference(r) is not None]
        self._kinds: set[str] = set()
        per_client: dict[str, torch.Tensor] = {}
        for cid in {c for c, _ in items}:
            acc, used = None, 0
            for r in rounds:
                delta, kind = src.estimate(r, cid, adv.run.clients)
                self._kinds.add(kind)
                ref = src.reference(r)
                name = input_layer(ref, adv.run.num_features) if ref is not None else None
                if delta is None or ref is None or name is None:
                    continue
                d, w = delta[name], ref[name]
                breaks = (d != 0) & (torch.sign(d) != -torch.sign(w))
                s = breaks.double().mean(0)
                acc = s if acc is None else acc + s
                used += 1
            per_client[cid] = acc / used if acc is not None else torch.zeros(adv.run.num_features, dtype=torch.float64)
        return torch.tensor([float(per_client[c][i]) for c, i in items], dtype=torch.float64)

    def evaluate(self, challenge: Challenge, scores: torch.Tensor) -> AttackOutcome:
        base = super().evaluate(challenge, scores)
        value = stratified_auc(challenge.labels, scores, [i for _, i in challenge.items])
        kinds = sorted(getattr(self, "_kinds", set()))
        note = "only the round's mean update was available: every client gets the same scores" if kinds == ["mean"] else ""
        return AttackOutcome(value=self.chance if math.isnan(value) else value, chance=self.chance,
                             details={**base.details, "pooled_auc": base.value, "estimate": kinds},
                             roc=base.roc, note=note)
