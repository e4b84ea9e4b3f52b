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

from collections.abc import Mapping
from typing import Any, ClassVar

import torch

from securefg.attacks.base import (
    AdversaryContext,
    AttackOutcome,
    Challenge,
    GroundTruth,
    blind_outcome,
    register_attack,
)
from securefg.attacks.update_probe import UpdateProbe
from securefg.attacks.updates import UpdateProfile, input_layer


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
class FeatureSupport(UpdateProbe):
    """Which input features occur in a client's data, from its first-layer update.

    Args:
        rounds (list[int]): Rounds whose updates are used (``[]`` = all). (default: ``[0]``)
        min_features (int): Fewer informative features than this: nothing to decide (reported
            at chance). (default: ``5``)
    """

    name = "feature_support"
    metric_doc = "per-feature ROC-AUC across clients (mean): which clients' data contain the feature"
    defaults: ClassVar[Mapping[str, Any]] = {"rounds": [0], "min_features": 5}
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

    def score_update(self, delta: Mapping[str, torch.Tensor], reference: Mapping[str, torch.Tensor],
                     adv: AdversaryContext, profile: UpdateProfile) -> torch.Tensor | None:
        name = input_layer(reference, adv.run.num_features)
        if name is None:
            return None
        d, w = delta[name], reference[name]
        return ((d != 0) & (torch.sign(d) != -torch.sign(w))).double().mean(0)

    def evaluate(self, challenge: Challenge, scores: torch.Tensor) -> AttackOutcome:
        return self.stratified_outcome(challenge, scores)
